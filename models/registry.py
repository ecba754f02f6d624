"""Names -> frozen configs -> modules. A whole model takes its config (TransformerConfig,
RNNConfig, defined next to the model); a mixer is a block and takes flat arguments, which its
config here is unpacked into."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from torch import nn

from models.blocks import ATTN_BACKENDS, NORMS, EncoderLayer
from models.checks import check_choice, check_dropout, check_flag, check_heads, check_positive
from models.local import PADDINGS, ConvMixer, RestrictedAttention
from models.minrnn import MinRNN, MinRNNConfig
from models.mixer_lm import MixerLM, MixerLMConfig
from models.mixers import AttentionCore, RecurrentMixer, SelfAttention
from models.plugins import BUILTIN, Plugin, entries, register, warn
from models.rnn import RNN_IMPLS, RNNLM, RNNConfig, RNNSeq2Seq
from models.rnn_attention import AttentionRNN, AttentionRNNConfig
from models.transformer import Transformer, TransformerConfig, TransformerLM


@dataclass(frozen=True)
class AttentionMixerConfig:
    n_heads: int = 8  # the paper's h
    dropout: float = 0.0  # benchmarks measure without dropout: it switches attention kernels
    attn_scale: bool = True
    attn_backend: str = "sdpa"
    causal: bool = False

    def __post_init__(self) -> None:
        check_positive(self, "n_heads")
        check_dropout(self.dropout)
        check_flag("attn_scale", self.attn_scale)
        check_flag("causal", self.causal)
        check_choice("attn_backend", self.attn_backend, ATTN_BACKENDS)


@dataclass(frozen=True)
class LayerMixerConfig(AttentionMixerConfig):
    d_ff: int | None = None  # None means 4 * d_model, the paper's ratio
    norm: str = "post"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.d_ff is not None:
            check_positive(self, "d_ff")
        check_choice("norm", self.norm, NORMS)


@dataclass(frozen=True)
class RecurrentMixerConfig:
    rnn_impl: str = "fused"

    def __post_init__(self) -> None:
        check_choice("rnn_impl", self.rnn_impl, RNN_IMPLS)


@dataclass(frozen=True)
class ConvMixerConfig:
    kernel_size: int = 3  # the paper's k; 3 is the smallest centred kernel
    n_layers: int = 1  # one convolution per mixer, as one attention per self-attention mixer
    dilation: int = 1  # contiguous kernel; with dilated=True, the first layer's dilation
    dilated: bool = False  # True doubles the dilation per layer (WaveNet): path O(log n)
    padding: str = "centred"  # non-causal like the self-attention mixer; "causal" pads left

    def __post_init__(self) -> None:
        check_positive(self, "kernel_size", "n_layers", "dilation")
        check_flag("dilated", self.dilated)
        check_choice("padding", self.padding, PADDINGS)


@dataclass(frozen=True)
class RestrictedAttentionConfig(AttentionMixerConfig):
    window: int = 16  # the paper's r: keys per query, r << n in the regime it speaks of

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "window")


# Presets apply the keys their config has: an RNN ignores n_heads and d_ff.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(vocab_size=64, d_model=64, n_layers=2, n_heads=4, d_ff=256, dropout=0.0,
                 max_len=256),  # tests and CPU smoke runs
    "small": dict(vocab_size=256, d_model=256, n_layers=4, n_heads=4, d_ff=1024, max_len=512),
    "base": {},  # the dataclass defaults: the paper's base model
    "big": dict(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3),  # the paper's big model
}


@dataclass(frozen=True)
class MinRNNLMConfig:
    """mixer-lm's layout with a minGRU/minLSTM mixer in every layer (no heads to set)."""

    vocab_size: int = 37000
    d_model: int = 512
    n_layers: int = 6
    d_ff: int | None = None  # None: 4 * d_model
    dropout: float = 0.1
    max_len: int = 1024
    pos_encoding: str = "none"  # the recurrence orders positions by itself
    tie_weights: bool = True
    scan: str = "log"  # "sequential", "levels" or "log": the same function, three ways

    def __post_init__(self) -> None:
        MinRNNConfig(self.scan)  # checks scan
        MixerLMConfig(**self._lm_fields())  # checks the rest

    def _lm_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "scan"}


def _min_rnn_lm(kind: str, c: MinRNNLMConfig) -> nn.Module:
    return MixerLM(MixerLMConfig(mixer_kind=kind, **c._lm_fields()),
                   lambda: MinRNN(kind, c.d_model, c.scan))


@dataclass(frozen=True)
class _Entry:
    config: type
    make: Callable[..., nn.Module]  # (config) for a model, (d_model, config) for a mixer
    doc: str = field(default="")
    provider: str = BUILTIN  # the package (or --plugin module) it comes from


_MODELS: dict[str, _Entry] = {
    "transformer": _Entry(TransformerConfig, Transformer, "encoder-decoder Transformer"),
    "transformer-lm": _Entry(TransformerConfig, TransformerLM, "decoder-only causal Transformer"),
    "lstm": _Entry(RNNConfig, partial(RNNSeq2Seq, "lstm"), "LSTM encoder-decoder"),
    "gru": _Entry(RNNConfig, partial(RNNSeq2Seq, "gru"), "GRU encoder-decoder"),
    "lstm-lm": _Entry(RNNConfig, partial(RNNLM, "lstm"), "decoder-only LSTM LM"),
    "gru-lm": _Entry(RNNConfig, partial(RNNLM, "gru"), "decoder-only GRU LM"),
    "lstm-attention": _Entry(AttentionRNNConfig, partial(AttentionRNN, "lstm"),
                             "bidirectional LSTM encoder, attentional LSTM decoder"),
    "gru-attention": _Entry(AttentionRNNConfig, partial(AttentionRNN, "gru"),
                            "bidirectional GRU encoder, attentional GRU decoder"),
    "mixer-lm": _Entry(MixerLMConfig, lambda c: MixerLM(c, partial(_causal_mixer, c)),
                       "decoder-only Pre-LN LM around any mixer kind (config key mixer_kind)"),
    "min-gru-lm": _Entry(MinRNNLMConfig, partial(_min_rnn_lm, "min-gru"),
                         "decoder-only Pre-LN LM of minGRU layers (Feng et al. 2024)"),
    "min-lstm-lm": _Entry(MinRNNLMConfig, partial(_min_rnn_lm, "min-lstm"),
                          "decoder-only Pre-LN LM of minLSTM layers (Feng et al. 2024)"),
}


def _layer(d: int, c: LayerMixerConfig) -> nn.Module:
    check_heads(d, c.n_heads)
    return EncoderLayer(d, c.n_heads, c.d_ff or 4 * d, c.dropout, c.norm, c.attn_scale,
                        c.attn_backend, causal=c.causal)


def _attention(d: int, c: AttentionMixerConfig) -> nn.Module:
    check_heads(d, c.n_heads)
    return SelfAttention(d, c.n_heads, c.dropout, c.attn_scale, c.attn_backend, c.causal)


def _core(d: int, c: AttentionMixerConfig) -> nn.Module:
    check_heads(d, c.n_heads)
    if c.dropout:
        raise ValueError(f"invalid dropout {c.dropout!r} for 'attention-core'; valid: 0")
    return AttentionCore(c.n_heads, c.attn_scale, c.attn_backend, c.causal)


def _restricted(d: int, c: RestrictedAttentionConfig) -> nn.Module:
    check_heads(d, c.n_heads)
    return RestrictedAttention(d, c.n_heads, c.window, c.dropout, c.attn_scale, c.attn_backend,
                               c.causal)


_MIXERS: dict[str, _Entry] = {
    "self-attention": _Entry(AttentionMixerConfig, _attention, "multi-head self-attention"),
    "attention-core": _Entry(AttentionMixerConfig, _core,
                             "softmax(QK^T/sqrt(d_k))V alone, no projections"),
    "lstm": _Entry(RecurrentMixerConfig, lambda d, c: RecurrentMixer("lstm", d, c.rnn_impl),
                   "one LSTM layer"),
    "gru": _Entry(RecurrentMixerConfig, lambda d, c: RecurrentMixer("gru", d, c.rnn_impl),
                  "one GRU layer"),
    "transformer-layer": _Entry(LayerMixerConfig, _layer, "attention + FFN + residuals + norms"),
    "convolutional": _Entry(ConvMixerConfig, lambda d, c: ConvMixer(d, **dataclasses.asdict(c)),
                            "1-D convolution over positions, kernel k"),
    "restricted-attention": _Entry(RestrictedAttentionConfig, _restricted,
                                   "self-attention within a window of r positions"),
    "min-gru": _Entry(MinRNNConfig, lambda d, c: MinRNN("min-gru", d, c.scan),
                      "minGRU: gates from x_t only, computed by a scan (Feng et al. 2024)"),
    "min-lstm": _Entry(MinRNNConfig, lambda d, c: MinRNN("min-lstm", d, c.scan),
                       "minLSTM: gates from x_t only, computed by a scan (Feng et al. 2024)"),
}


# How a built-in mixer is made causal inside mixer-lm; other kinds need a `causal` knob.
_CAUSAL_KNOBS: dict[str, dict[str, Any]] = {"lstm": {}, "gru": {}, "min-gru": {}, "min-lstm": {},
                                            "convolutional": {"padding": "causal"}}
# A point's identifying columns (experiments.spec.Point.fields): no knob may take their names.
_ROW_COLUMNS = {"suite", "runner", "mixer", "model", "seq_len", "batch_size", "dtype", "seed",
                "compile", "fit", "study", "status"}
# (group, name, provider, id of the loaded object) -> entry: converted once, warned once
_PLUGIN_ENTRIES: dict[tuple[str, str, str, int], _Entry | None] = {}


def _plugin_entry(group: str, plugin: Plugin, builtin: dict[str, _Entry]) -> _Entry | None:
    """A plugin factory as a registry entry: its keyword parameters (after d_model for a
    mixer) become a frozen config dataclass, so unknown knobs are refused like a built-in's."""
    if plugin.name in builtin:
        warn(f"plugin {plugin.name!r} from {plugin.provider} is skipped: {group} already has "
             f"a built-in {plugin.name!r}")
        return None
    try:
        params = list(inspect.signature(plugin.obj).parameters.values())
    except (TypeError, ValueError) as exc:
        warn(f"plugin {plugin.name!r} from {plugin.provider} is skipped: not a callable with a "
             f"signature ({exc})")
        return None
    mixer = group == "tvr.mixers"
    knobs = [p for p in params[1 if mixer else 0:]
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    taken = sorted({p.name for p in knobs} & _ROW_COLUMNS)
    if taken:  # a knob is a results column too: it would overwrite the row's own
        warn(f"plugin {plugin.name!r} from {plugin.provider} is skipped: its knob {taken[0]!r} "
             f"has the name of a results column ({', '.join(sorted(_ROW_COLUMNS))})")
        return None
    knobs.sort(key=lambda p: p.default is not p.empty)  # dataclasses: defaults come last
    config = dataclasses.make_dataclass(
        f"{plugin.name.title().replace('-', '')}Config",
        [(p.name, Any) if p.default is p.empty else (p.name, Any, field(default=p.default))
         for p in knobs], frozen=True)
    factory = plugin.obj

    def make(*args: Any) -> nn.Module:  # (d_model, config) or (config)
        *d, cfg = args
        return factory(*d, **{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)})

    doc = (inspect.getdoc(factory) or "").split("\n")[0]
    return _Entry(config, make, doc, plugin.provider)


def _table(group: str, builtin: dict[str, _Entry]) -> dict[str, _Entry]:
    """Built-in entries, then the group's plugins (read on first use)."""
    out = dict(builtin)
    for plugin in entries(group).values():
        key = (group, plugin.name, plugin.provider, id(plugin.obj))  # obj may not hash
        if key not in _PLUGIN_ENTRIES:
            _PLUGIN_ENTRIES[key] = _plugin_entry(group, plugin, builtin)
        if _PLUGIN_ENTRIES[key] is not None:
            out[plugin.name] = _PLUGIN_ENTRIES[key]
    return out


def _models() -> dict[str, _Entry]:
    return _table("tvr.models", _MODELS)


def _mixers() -> dict[str, _Entry]:
    return _table("tvr.mixers", _MIXERS)


def register_mixer(name: str, factory: Callable[..., nn.Module],
                   provider: str | None = None) -> None:
    """Add a mixer kind from Python (a `tvr --plugin MODULE` module calls this):
    factory(d_model, **knobs) -> module mapping (B, n, d) -> (B, n, d)."""
    register("tvr.mixers", name, factory, provider or f"module {factory.__module__}")


def register_model(name: str, factory: Callable[..., nn.Module],
                   provider: str | None = None) -> None:
    """Add a model name from Python: factory(**config) -> nn.Module."""
    register("tvr.models", name, factory, provider or f"module {factory.__module__}")


def _causal_mixer(c: MixerLMConfig) -> nn.Module:
    """A fresh mixer of kind c.mixer_kind for mixer-lm, causal, with the model's heads and
    dropout where the mixer takes them."""
    check_choice("mixer kind", c.mixer_kind, tuple(_mixers()))
    keys = {f.name for f in dataclasses.fields(_mixers()[c.mixer_kind].config)}
    knobs = dict(_CAUSAL_KNOBS.get(c.mixer_kind, {}))
    if c.mixer_kind not in _CAUSAL_KNOBS:
        if "causal" not in keys:
            raise ValueError(f"invalid mixer {c.mixer_kind!r} for 'mixer-lm': it has no causal "
                             f"knob; valid: mixers with one, or {', '.join(_CAUSAL_KNOBS)}")
        knobs["causal"] = True
    if c.n_heads is not None and "n_heads" in keys:
        knobs["n_heads"] = c.n_heads
    if "dropout" in keys and c.mixer_kind != "attention-core":
        knobs["dropout"] = c.dropout
    return mixer(c.mixer_kind, c.d_model, **knobs)


def _config(entry: _Entry, what: str, values: dict[str, Any]) -> Any:
    known = {f.name for f in dataclasses.fields(entry.config)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f"unknown config key {unknown[0]!r} for {what}; valid: {', '.join(sorted(known))}"
        )
    missing = [f.name for f in dataclasses.fields(entry.config) if f.name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:  # a plugin knob without a default
        raise ValueError(f"missing config key {missing[0]!r} for {what}; it has no default")
    return entry.config(**values)


def names() -> list[str]:
    """Every model name that build() accepts, plugins' included."""
    return list(_models())


def mixer_kinds() -> list[str]:
    return list(_mixers())


def config_keys() -> set[str]:
    """Every config key some model or mixer takes (what is config, not a measurement)."""
    every = [*_models().values(), *_mixers().values()]
    return {f.name for e in every for f in dataclasses.fields(e.config)}


def config_class(name: str, kind: str = "model") -> type | None:
    """The config dataclass of a model (kind="model") or mixer (kind="mixer"); None for a
    name that is neither (a baseline's name)."""
    entry = (_models() if kind == "model" else _mixers()).get(name)
    return entry.config if entry is not None else None


def describe(name: str) -> str:
    check_choice("model name", name, tuple(_models()))
    return _models()[name].doc


def provider(name: str, kind: str = "model") -> str:
    """The package a model (kind="model") or mixer (kind="mixer") comes from."""
    table = _models() if kind == "model" else _mixers()
    check_choice(f"{kind} name", name, tuple(table))
    return table[name].provider


def mixer_config(kind: str, **config: Any) -> Any:
    """The frozen config models.mixer(kind, d, **config) would use; ValueError naming the
    valid keys or values if one is bad. Builds nothing."""
    check_choice("mixer kind", kind, tuple(_mixers()))
    return _config(_mixers()[kind], f"mixer {kind!r}", config)


def model_config(name: str, preset: str | None = None, **config: Any) -> Any:
    """The frozen config build() would use: preset values first, then explicit overrides."""
    table = _models()
    check_choice("model name", name, tuple(table))
    entry = table[name]
    values: dict[str, Any] = {}
    if preset is not None:
        check_choice("preset", preset, tuple(PRESETS))
        known = {f.name for f in dataclasses.fields(entry.config)}
        values = {k: v for k, v in PRESETS[preset].items() if k in known}
    cfg = _config(entry, f"model {name!r}", values | config)
    if isinstance(cfg, MixerLMConfig):
        check_choice("mixer kind", cfg.mixer_kind, tuple(_mixers()))
    return cfg


def build(name: str, preset: str | None = None, **config: Any) -> nn.Module:
    """models.build("transformer", preset="tiny", norm="pre") -> nn.Module."""
    cfg = model_config(name, preset, **config)  # validates name first: ValueError, not KeyError
    return _models()[name].make(cfg)


def mixer(kind: str, d_model: int, **config: Any) -> nn.Module:
    """models.mixer("lstm", 256, rnn_impl="cell") -> module mapping (B, n, d) -> (B, n, d)."""
    cfg = mixer_config(kind, **config)
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model <= 0:
        raise ValueError(f"invalid d_model {d_model!r}; must be a positive integer")
    return _mixers()[kind].make(d_model, cfg)

"""Names -> frozen configs -> modules. Modules take flat arguments and never see a config."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from models.blocks import ATTN_BACKENDS, NORMS, POS_ENCODINGS, EncoderLayer, check_choice
from models.local import PADDINGS, ConvMixer, RestrictedAttention
from models.mixers import AttentionCore, RecurrentMixer, SelfAttention
from models.rnn import RNN_IMPLS, RNNLM, RNNSeq2Seq
from models.transformer import Transformer, TransformerLM


def _positive(cfg: object, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"invalid {name} {value!r}; must be a positive integer")


def _dropout(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"invalid dropout {value!r}; must be a number in [0, 1)")


def _flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"invalid {name} {value!r}; must be True or False")


def _heads(d_model: int, n_heads: int) -> None:
    if d_model % n_heads:
        valid = ", ".join(str(h) for h in range(1, d_model + 1) if d_model % h == 0)
        raise ValueError(
            f"invalid n_heads {n_heads}: d_model={d_model} is not divisible by it; valid: {valid}"
        )


@dataclass(frozen=True)
class TransformerConfig:
    vocab_size: int = 37000  # the paper's shared source/target BPE vocabulary (WMT14 En-De)
    d_model: int = 512  # Table 3, base model
    n_layers: int = 6  # N = 6 encoder and 6 decoder layers
    n_heads: int = 8  # h = 8, so d_k = d_v = 64
    d_ff: int = 2048  # 4 * d_model
    dropout: float = 0.1  # P_drop of the base model
    max_len: int = 1024  # positions tabulated up front; sinusoids extend past it on demand
    norm: str = "post"  # the paper's LN(x + Sublayer(x))
    pos_encoding: str = "sinusoidal"  # the paper's choice; "learned" performed the same there
    attn_scale: bool = True  # divide by sqrt(d_k)
    attn_backend: str = "sdpa"  # same numbers as "math" (tested), and the fast kernel
    tie_weights: bool = True  # embeddings and pre-softmax projection share one matrix

    def __post_init__(self) -> None:
        _positive(self, "vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len")
        _heads(self.d_model, self.n_heads)
        _dropout(self.dropout)
        check_choice("norm", self.norm, NORMS)
        check_choice("pos_encoding", self.pos_encoding, POS_ENCODINGS)
        check_choice("attn_backend", self.attn_backend, ATTN_BACKENDS)
        _flag("attn_scale", self.attn_scale)
        _flag("tie_weights", self.tie_weights)


@dataclass(frozen=True)
class RNNConfig:
    vocab_size: int = 37000  # same vocabulary as the Transformer it is compared with
    d_model: int = 512  # hidden size = embedding size, as the Transformer's d_model
    n_layers: int = 6  # stacked recurrent layers
    dropout: float = 0.1  # on embeddings, between layers and before the head
    max_len: int = 1024  # accepted for a shared interface; recurrence has no position table
    rnn_impl: str = "fused"  # cuDNN/oneDNN kernel; "cell" is the explicit per-step loop
    tie_weights: bool = True  # as in the Transformer, so both have the same head

    def __post_init__(self) -> None:
        _positive(self, "vocab_size", "d_model", "n_layers", "max_len")
        _dropout(self.dropout)
        check_choice("rnn_impl", self.rnn_impl, RNN_IMPLS)
        _flag("tie_weights", self.tie_weights)


@dataclass(frozen=True)
class AttentionMixerConfig:
    n_heads: int = 8  # the paper's h
    dropout: float = 0.0  # benchmarks measure without dropout: it switches attention kernels
    attn_scale: bool = True
    attn_backend: str = "sdpa"
    causal: bool = False

    def __post_init__(self) -> None:
        _positive(self, "n_heads")
        _dropout(self.dropout)
        _flag("attn_scale", self.attn_scale)
        _flag("causal", self.causal)
        check_choice("attn_backend", self.attn_backend, ATTN_BACKENDS)


@dataclass(frozen=True)
class LayerMixerConfig(AttentionMixerConfig):
    d_ff: int | None = None  # None means 4 * d_model, the paper's ratio
    norm: str = "post"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.d_ff is not None:
            _positive(self, "d_ff")
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
        _positive(self, "kernel_size", "n_layers", "dilation")
        _flag("dilated", self.dilated)
        check_choice("padding", self.padding, PADDINGS)


@dataclass(frozen=True)
class RestrictedAttentionConfig(AttentionMixerConfig):
    window: int = 16  # the paper's r: keys per query, r << n in the regime it speaks of

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "window")


# Presets apply the keys their config has: an RNN ignores n_heads and d_ff.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(vocab_size=64, d_model=64, n_layers=2, n_heads=4, d_ff=256, dropout=0.0,
                 max_len=256),  # tests and CPU smoke runs
    "small": dict(vocab_size=256, d_model=256, n_layers=4, n_heads=4, d_ff=1024, max_len=512),
    "base": {},  # the dataclass defaults: the paper's base model
    "big": dict(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3),  # the paper's big model
}


@dataclass(frozen=True)
class _Entry:
    config: type
    make: Any  # (config) -> nn.Module
    doc: str = field(default="")


def _flat(cfg: object, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in drop}


def _rnn(cls: type, kind: str) -> Any:
    return lambda c: cls(kind, **_flat(c, drop=("max_len",)))


_MODELS: dict[str, _Entry] = {
    "transformer": _Entry(TransformerConfig, lambda c: Transformer(**_flat(c)),
                          "encoder-decoder Transformer"),
    "transformer-lm": _Entry(TransformerConfig, lambda c: TransformerLM(**_flat(c)),
                             "decoder-only causal Transformer"),
    "lstm": _Entry(RNNConfig, _rnn(RNNSeq2Seq, "lstm"),
                   "LSTM encoder-decoder"),
    "gru": _Entry(RNNConfig, _rnn(RNNSeq2Seq, "gru"),
                  "GRU encoder-decoder"),
    "lstm-lm": _Entry(RNNConfig, _rnn(RNNLM, "lstm"),
                      "decoder-only LSTM LM"),
    "gru-lm": _Entry(RNNConfig, _rnn(RNNLM, "gru"),
                     "decoder-only GRU LM"),
}


def _layer(d: int, c: LayerMixerConfig) -> nn.Module:
    _heads(d, c.n_heads)
    return EncoderLayer(d, c.n_heads, c.d_ff or 4 * d, c.dropout, c.norm, c.attn_scale,
                        c.attn_backend, c.causal)


def _attention(d: int, c: AttentionMixerConfig) -> nn.Module:
    _heads(d, c.n_heads)
    return SelfAttention(d, c.n_heads, c.dropout, c.attn_scale, c.attn_backend, c.causal)


def _core(d: int, c: AttentionMixerConfig) -> nn.Module:
    _heads(d, c.n_heads)
    if c.dropout:
        raise ValueError(f"invalid dropout {c.dropout!r} for 'attention-core'; valid: 0")
    return AttentionCore(c.n_heads, c.attn_scale, c.attn_backend, c.causal)


def _restricted(d: int, c: RestrictedAttentionConfig) -> nn.Module:
    _heads(d, c.n_heads)
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
    "convolutional": _Entry(ConvMixerConfig, lambda d, c: ConvMixer(d, **_flat(c)),
                            "1-D convolution over positions, kernel k"),
    "restricted-attention": _Entry(RestrictedAttentionConfig, _restricted,
                                   "self-attention within a window of r positions"),
}


def _config(entry: _Entry, what: str, values: dict[str, Any]) -> Any:
    known = {f.name for f in dataclasses.fields(entry.config)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f"unknown config key {unknown[0]!r} for {what}; valid: {', '.join(sorted(known))}"
        )
    return entry.config(**values)


def names() -> list[str]:
    """Every model name that build() accepts."""
    return list(_MODELS)


def mixer_kinds() -> list[str]:
    return list(_MIXERS)


def describe(name: str) -> str:
    check_choice("model name", name, tuple(_MODELS))
    return _MODELS[name].doc


def model_config(name: str, preset: str | None = None, **config: Any) -> Any:
    """The frozen config build() would use: preset values first, then explicit overrides."""
    check_choice("model name", name, tuple(_MODELS))
    entry = _MODELS[name]
    values: dict[str, Any] = {}
    if preset is not None:
        check_choice("preset", preset, tuple(PRESETS))
        known = {f.name for f in dataclasses.fields(entry.config)}
        values = {k: v for k, v in PRESETS[preset].items() if k in known}
    return _config(entry, f"model {name!r}", values | config)


def build(name: str, preset: str | None = None, **config: Any) -> nn.Module:
    """models.build("transformer", preset="tiny", norm="pre") -> nn.Module."""
    cfg = model_config(name, preset, **config)  # validates name first: ValueError, not KeyError
    return _MODELS[name].make(cfg)


def mixer(kind: str, d_model: int, **config: Any) -> nn.Module:
    """models.mixer("lstm", 256, rnn_impl="cell") -> module mapping (B, n, d) -> (B, n, d)."""
    check_choice("mixer kind", kind, tuple(_MIXERS))
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model <= 0:
        raise ValueError(f"invalid d_model {d_model!r}; must be a positive integer")
    entry = _MIXERS[kind]
    return entry.make(d_model, _config(entry, f"mixer {kind!r}", config))

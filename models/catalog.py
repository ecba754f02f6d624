"""The catalog: every mixer and model declared once, with what each stage needs of it.

An entry names its module's factory and config ("module:name", imported on first build) and
says what the rest of the code would otherwise list by name: a mixer's kind, how it is made
causal, its row of the paper's Table 1, its FLOP coefficient and colour (figures' legends
name it); a model's architecture label and colour. The registry builds from it
(models.registry), the runners and suites read the kinds and Table 1 configs, the reports
the rows, coefficients, labels and colours.

This module imports nothing heavy and nothing of the package, so every stage may read it (the
report's included, which imports nothing else of models). Built-ins are declared below; a
plugin registers its own entry (`register_mixer`, or an entry point whose object is a `Mixer`,
through models.registry), after which it is one of them everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

BUILTIN = "tvr-bench"  # the provider named for built-in components
# What a mixer is, for what reads it: a recurrent layer steps through positions one by one
# (its path is counted in time steps); a scanned one computes a linear recurrence by a
# parallel scan (its path counted in ops); the others link positions within a layer
KINDS = ("attention", "recurrent", "scanned", "convolutional", "other")


@dataclass(frozen=True)
class Row:
    """A layer's row in Table 1 of the paper: its claims, beside which the report puts what
    was measured. `in_paper` False for later work (no claim of the paper beside it)."""

    layer: str  # the row's name in the table
    complexity: str  # complexity per layer
    sequential_ops: str
    max_path_length: str
    in_paper: bool = True


def _frozen(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if value is None else MappingProxyType(dict(value))


@dataclass(frozen=True)
class Mixer:
    """A sequence mixer x (B, n, d) -> y (B, n, d): models.mixer(name, d_model, **knobs)."""

    name: str
    kind: str  # one of KINDS
    make: Callable[..., Any] | str  # make(*args, d_model, config), or "module:name"
    config: type | str | None = None  # frozen config dataclass; None: make's keywords
    doc: str = ""
    args: tuple[Any, ...] = ()  # handed to make before d_model ("lstm" for RecurrentMixer)
    # knobs that make it causal inside mixer-lm; None: its own `causal` knob (if it has one)
    causal: Mapping[str, Any] | None = None
    table1: Row | None = None  # its row of the paper's Table 1
    # the config of its points in the Table 1 suite; None: the suite does not measure it
    table1_config: Mapping[str, Any] | None = None
    # forward matmul FLOPs per sequence in units of n d^2 (attention adds its 4 n^2 d); the
    # crossover's closed form. None: unknown
    flop_coef: float | None = None
    crossover: str = ""  # an attention mixer's name in the crossover ("layer", "core")
    color: str = ""  # "#rrggbb" in figures (legends name it); "" for a palette's spare colour
    provider: str = BUILTIN

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"invalid kind {self.kind!r} for mixer {self.name!r}; valid: "
                             f"{', '.join(KINDS)}")
        object.__setattr__(self, "causal", _frozen(self.causal))
        object.__setattr__(self, "table1_config", _frozen(self.table1_config))


@dataclass(frozen=True)
class Model:
    """A whole model: models.build(name, **config)."""

    name: str
    make: Callable[..., Any] | str  # make(*args, config), or "module:name"
    config: type | str | None = None  # frozen config dataclass; None: make's keywords
    doc: str = ""
    args: tuple[Any, ...] = ()
    label: str = ""  # its architecture in figures and tables ("LSTM"); "" for its name
    color: str = ""  # "#rrggbb" of its architecture; "" for a spare colour
    provider: str = BUILTIN

    @property
    def shown(self) -> str:
        return self.label or self.name


_R = "models.registry:"
_BUILTIN_MIXERS = (
    Mixer("self-attention", "attention", _R + "attention_mixer", _R + "AttentionMixerConfig",
          "multi-head self-attention",
          table1=Row("self-attention", "O(n^2 d)", "O(1)", "O(1)"),
          table1_config={"n_heads": 4}, flop_coef=8,  # Q, K, V, O projections: 8 n d^2
          crossover="layer", color="#1f77b4"),
    Mixer("attention-core", "attention", _R + "attention_core", _R + "AttentionMixerConfig",
          "softmax(QK^T/sqrt(d_k))V alone, no projections",
          table1=Row("self-attention (core)", "O(n^2 d)", "O(1)", "O(1)"),
          flop_coef=0, crossover="core", color="#ff7f0e"),
    # 4 gates x (input and recurrent products): 16 n d^2
    Mixer("lstm", "recurrent", _R + "recurrent_mixer", _R + "RecurrentMixerConfig",
          "one LSTM layer", args=("lstm",), causal={},
          table1=Row("recurrent", "O(n d^2)", "O(n)", "O(n)"), table1_config={},
          flop_coef=16, color="#d62728"),
    Mixer("gru", "recurrent", _R + "recurrent_mixer", _R + "RecurrentMixerConfig",
          "one GRU layer", args=("gru",), causal={},
          table1=Row("recurrent (GRU)", "O(n d^2)", "O(n)", "O(n)"),
          flop_coef=12, color="#2ca02c"),
    Mixer("transformer-layer", "attention", _R + "encoder_layer", _R + "LayerMixerConfig",
          "attention + FFN + residuals + norms", color="#9467bd"),
    Mixer("convolutional", "convolutional", _R + "conv_mixer", _R + "ConvMixerConfig",
          "1-D convolution over positions, kernel k", causal={"padding": "causal"},
          table1=Row("convolutional", "O(k n d^2)", "O(1)",
                     "O(log_k n) dilated / O(n/k) contiguous"),
          table1_config={"kernel_size": 3}, color="#8c564b"),
    Mixer("restricted-attention", "attention", _R + "restricted_attention",
          _R + "RestrictedAttentionConfig", "self-attention within a window of r positions",
          table1=Row("self-attention (restricted)", "O(r n d)", "O(1)", "O(n/r)"),
          table1_config={"n_heads": 4, "window": 16}, color="#17becf"),
    # later work (Feng et al. 2024): no claim of the paper; the level-by-level scan in Table 1
    # shows its depth. Input products only, no recurrent matmul: 4 and 6 n d^2
    Mixer("min-gru", "scanned", _R + "min_rnn", "models.minrnn:MinRNNConfig",
          "minGRU: gates from x_t only, computed by a scan (Feng et al. 2024)",
          args=("min-gru",), causal={},
          table1=Row("recurrent (parallel scan)", "not in the paper (Feng et al. 2024)",
                     "not in the paper: O(log n)", "not in the paper: O(log n) ops",
                     in_paper=False),
          table1_config={"scan": "levels"}, flop_coef=4),
    Mixer("min-lstm", "scanned", _R + "min_rnn", "models.minrnn:MinRNNConfig",
          "minLSTM: gates from x_t only, computed by a scan (Feng et al. 2024)",
          args=("min-lstm",), causal={}, flop_coef=6),
)
_BUILTIN_MODELS = (
    Model("transformer", "models.transformer:Transformer", "models.transformer:TransformerConfig",
          "encoder-decoder Transformer", label="Transformer", color="#1f77b4"),
    Model("transformer-lm", "models.transformer:TransformerLM",
          "models.transformer:TransformerConfig", "decoder-only causal Transformer",
          label="Transformer", color="#1f77b4"),
    Model("lstm", "models.rnn:RNNSeq2Seq", "models.rnn:RNNConfig", "LSTM encoder-decoder",
          args=("lstm",), label="LSTM", color="#d62728"),
    Model("gru", "models.rnn:RNNSeq2Seq", "models.rnn:RNNConfig", "GRU encoder-decoder",
          args=("gru",), label="GRU", color="#2ca02c"),
    Model("lstm-lm", "models.rnn:RNNLM", "models.rnn:RNNConfig", "decoder-only LSTM LM",
          args=("lstm",), label="LSTM", color="#d62728"),
    Model("gru-lm", "models.rnn:RNNLM", "models.rnn:RNNConfig", "decoder-only GRU LM",
          args=("gru",), label="GRU", color="#2ca02c"),
    Model("lstm-attention", "models.rnn_attention:AttentionRNN",
          "models.rnn_attention:AttentionRNNConfig",
          "bidirectional LSTM encoder, attentional LSTM decoder", args=("lstm",)),
    Model("gru-attention", "models.rnn_attention:AttentionRNN",
          "models.rnn_attention:AttentionRNNConfig",
          "bidirectional GRU encoder, attentional GRU decoder", args=("gru",)),
    Model("mixer-lm", _R + "mixer_lm", "models.mixer_lm:MixerLMConfig",
          "decoder-only Pre-LN LM around any mixer kind (config key mixer_kind)"),
    Model("min-gru-lm", _R + "min_rnn_lm", _R + "MinRNNLMConfig",
          "decoder-only Pre-LN LM of minGRU layers (Feng et al. 2024)", args=("min-gru",)),
    Model("min-lstm-lm", _R + "min_rnn_lm", _R + "MinRNNLMConfig",
          "decoder-only Pre-LN LM of minLSTM layers (Feng et al. 2024)", args=("min-lstm",)),
)
_BUILTINS: dict[type, dict[str, Any]] = {
    Mixer: {m.name: m for m in _BUILTIN_MIXERS}, Model: {m.name: m for m in _BUILTIN_MODELS}}
_ADDED: dict[type, dict[str, Any]] = {Mixer: {}, Model: {}}  # plugins', in registration order


def add(entry: Mixer | Model) -> bool:
    """Register a plugin's entry (models.registry does, for register_mixer/register_model
    and entry points); False, and nothing changes, if a built-in has its name."""
    if entry.name in _BUILTINS[type(entry)]:
        return False
    _ADDED[type(entry)][entry.name] = entry
    return True


def remove(entry: Mixer | Model) -> None:
    """Forget a plugin's entry (a test's, or one whose plugin was unloaded)."""
    if _ADDED[type(entry)].get(entry.name) is entry:
        del _ADDED[type(entry)][entry.name]


def mixers() -> dict[str, Mixer]:
    """Every mixer by name: built-ins in their order, then plugins'."""
    return _BUILTINS[Mixer] | _ADDED[Mixer]


def models() -> dict[str, Model]:
    """Every model by name: built-ins in their order, then plugins'."""
    return _BUILTINS[Model] | _ADDED[Model]


def of_kind(*kinds: str) -> tuple[str, ...]:
    """The names of the mixers of these kinds, in catalog order: of_kind("recurrent")."""
    return tuple(name for name, m in mixers().items() if m.kind in kinds)


def mixer_colors() -> dict[str, str]:
    """Mixer name -> its declared colour (mixers without one left out)."""
    return {name: m.color for name, m in mixers().items() if m.color}


def arch_colors() -> dict[str, str]:
    """Architecture label ("LSTM") -> its declared colour, in catalog order."""
    return {m.shown: m.color for m in models().values() if m.color}


def arch_labels() -> dict[str, str]:
    """Model name -> its architecture label, for the models that declare one."""
    return {name: m.label for name, m in models().items() if m.label}


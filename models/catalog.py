"""The catalog: every mixer, model and metric declared once, with what each stage needs of it.

An entry names its module's factory and config ("module:name", imported on first build) and
says what the rest of the code would otherwise list by name: a mixer's kind, how it is made
causal, its row of the paper's Table 1, its FLOP coefficient and colour (figures' legends
name it); a model's architecture label and colour; a metric's unit, direction, description
and the tables that show it. The registry builds from it (models.registry), the runners and
suites read the kinds and Table 1 configs, the reports the rows, coefficients, labels and
colours, the results schema which columns are metrics, the tables which they show.

This module imports nothing heavy and nothing of the package, so every stage may read it (the
report's included, which imports nothing else of models). Built-ins are declared below; a
plugin registers its own entry (`register_mixer`, or an entry point whose object is a `Mixer`,
through models.registry; a metric with `register_metric` here), after which it is one of them
everywhere.
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


_R, _X, _L, _M = (f"models.{m}:" for m in ("registry", "mixers", "local", "minrnn"))
_BUILTIN_MIXERS = (
    Mixer("self-attention", "attention", _X + "attention_mixer", _X + "AttentionMixerConfig",
          "multi-head self-attention",
          table1=Row("self-attention", "O(n^2 d)", "O(1)", "O(1)"),
          table1_config={"n_heads": 4}, flop_coef=8,  # Q, K, V, O projections: 8 n d^2
          crossover="layer", color="#1f77b4"),
    Mixer("attention-core", "attention", _X + "attention_core", _X + "AttentionMixerConfig",
          "softmax(QK^T/sqrt(d_k))V alone, no projections",
          table1=Row("self-attention (core)", "O(n^2 d)", "O(1)", "O(1)"),
          flop_coef=0, crossover="core", color="#ff7f0e"),
    # 4 gates x (input and recurrent products): 16 n d^2
    Mixer("lstm", "recurrent", _X + "recurrent_mixer", _X + "RecurrentMixerConfig",
          "one LSTM layer", args=("lstm",), causal={},
          table1=Row("recurrent", "O(n d^2)", "O(n)", "O(n)"), table1_config={},
          flop_coef=16, color="#d62728"),
    Mixer("gru", "recurrent", _X + "recurrent_mixer", _X + "RecurrentMixerConfig",
          "one GRU layer", args=("gru",), causal={},
          table1=Row("recurrent (GRU)", "O(n d^2)", "O(n)", "O(n)"),
          flop_coef=12, color="#2ca02c"),
    Mixer("transformer-layer", "attention", _X + "encoder_layer", _X + "LayerMixerConfig",
          "attention + FFN + residuals + norms", color="#9467bd"),
    Mixer("convolutional", "convolutional", _L + "conv_mixer", _L + "ConvMixerConfig",
          "1-D convolution over positions, kernel k", causal={"padding": "causal"},
          table1=Row("convolutional", "O(k n d^2)", "O(1)",
                     "O(log_k n) dilated / O(n/k) contiguous"),
          table1_config={"kernel_size": 3}, color="#8c564b"),
    Mixer("restricted-attention", "attention", _L + "restricted_attention",
          _L + "RestrictedAttentionConfig", "self-attention within a window of r positions",
          table1=Row("self-attention (restricted)", "O(r n d)", "O(1)", "O(n/r)"),
          table1_config={"n_heads": 4, "window": 16}, color="#17becf"),
    # later work (Feng et al. 2024): no claim of the paper; the level-by-level scan in Table 1
    # shows its depth. Input products only, no recurrent matmul: 4 and 6 n d^2
    Mixer("min-gru", "scanned", _M + "min_rnn", _M + "MinRNNConfig",
          "minGRU: gates from x_t only, computed by a scan (Feng et al. 2024)",
          args=("min-gru",), causal={},
          table1=Row("recurrent (parallel scan)", "not in the paper (Feng et al. 2024)",
                     "not in the paper: O(log n)", "not in the paper: O(log n) ops",
                     in_paper=False),
          table1_config={"scan": "levels"}, flop_coef=4),
    Mixer("min-lstm", "scanned", _M + "min_rnn", _M + "MinRNNConfig",
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
    Model("min-gru-lm", _M + "min_rnn_lm", _M + "MinRNNLMConfig",
          "decoder-only Pre-LN LM of minGRU layers (Feng et al. 2024)", args=("min-gru",)),
    Model("min-lstm-lm", _M + "min_rnn_lm", _M + "MinRNNLMConfig",
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


# ---------------------------------------------------------------- metrics

HIGHER, LOWER = "higher", "lower"  # which way is better; "" for neither (a count, a size)
# The tables that show metrics from the catalog, each in catalog order: Table 2's per-model
# means (harness.report.translation.table2) and the README's Table 2 block (a subset of them)
TABLES = ("table2", "table2-readme")
_T2, _T2R = ("table2",), ("table2", "table2-readme")


@dataclass(frozen=True)
class Metric:
    """A number a runner returns, stored as a results column of that name: a metric wherever
    a row is read (harness.schema), a number in every row that has it."""

    name: str
    unit: str  # "ms", "FLOPs", "BLEU"...; "" for a pure number (a ratio, a count)
    better: str  # HIGHER, LOWER or "" (neither)
    description: str  # one line
    tables: tuple[str, ...] = ()  # of TABLES: where it is shown

    def __post_init__(self) -> None:
        if self.better not in (HIGHER, LOWER, ""):
            raise ValueError(f"invalid better {self.better!r} for metric {self.name!r}; "
                             f"valid: {HIGHER!r}, {LOWER!r}, ''")
        unknown = sorted(set(self.tables) - set(TABLES))
        if unknown:
            raise ValueError(f"unknown table {unknown[0]!r} for metric {self.name!r}; valid: "
                             f"{', '.join(TABLES)}")


def _metrics(unit: str, better: str, *entries: tuple) -> tuple[Metric, ...]:
    """Metrics sharing a unit and direction: (name, description[, tables])."""
    return tuple(Metric(name, unit, better, text, *rest) for name, text, *rest in entries)


_BUILTIN_METRICS = (
    # Table 2 first, in its column order
    *_metrics("parameters", "", ("n_params", "trainable parameters of the model", _T2R)),
    *_metrics("BLEU", HIGHER, ("dev_bleu", "sacrebleu BLEU on the dev set (beam search)", _T2R),
              ("test_bleu", "sacrebleu BLEU on the test set (beam search)", _T2R)),
    *_metrics("chrF", HIGHER, ("dev_chrf", "sacrebleu chrF on the dev set", _T2R),
              ("test_chrf", "sacrebleu chrF on the test set", _T2R)),
    *_metrics("", LOWER, ("test_repeat_rate", "share of test outputs repeating a word trigram "
                          "3+ times", _T2R)),
    *_metrics("", "", ("test_len_ratio", "test output length over the reference's (BLEU's "
                       "brevity penalty below 1)", _T2R),
              ("alpha_chosen", "beam search length penalty chosen on dev", _T2R)),
    *_metrics("nats/token", LOWER, ("dev_ppl", "dev perplexity, teacher-forced", _T2R)),
    *_metrics("epochs", "", ("epochs", "passes over the training pairs", _T2R)),
    *_metrics("FLOPs", "", ("train_flops", "training FLOPs, forward + backward, counted", _T2R)),
    *_metrics("s", LOWER, ("train_s", "training wall time", _T2R)),
    *_metrics("tokens/s", HIGHER, ("train_tokens_per_s", "target tokens trained per second",
                                   _T2)),
    *_metrics("FLOP/s", HIGHER, ("train_flops_per_s", "counted training FLOPs per second", _T2)),
    *_metrics("", HIGHER, ("mfu", "model FLOP utilisation: counted FLOP/s over the machine's "
                           "measured matmul peak", _T2R)),
    *_metrics("BLEU", "", ("target_bleu", "the dev BLEU a model's curve must reach: the "
                           "retrieval baseline's", _T2R)),
    *_metrics("FLOPs", LOWER, ("flops_to_bleu", "training FLOPs until the dev curve reached "
                               "target_bleu", _T2R)),
    *_metrics("s", LOWER, ("seconds_to_bleu", "training seconds until the dev curve reached "
                           "target_bleu", _T2R)),
    *_metrics("sentences/s", HIGHER,
              ("decode_sent_per_s_cached", "beam search speed with the incremental cache",
               _T2R),
              ("decode_sent_per_s_uncached", "beam search speed recomputing every prefix",
               _T2)),
    # layer measurements (harness.measure.timing, runners "layer", "fwdbwd", "threads")
    *_metrics("ms", LOWER, ("fwd_ms", "forward time of the layer in training mode, median"),
              ("fwd_iqr_ms", "interquartile range of the forward timings"),
              ("fwdbwd_ms", "forward + backward time, median"),
              ("fwdbwd_iqr_ms", "interquartile range of the forward + backward timings"),
              ("batch1_ms", "forward time at batch 1"),
              ("step_ms", "time of one dependent step: batch1_ms over the depth")),
    *_metrics("runs", "", ("fwd_runs", "timed forward calls"),
              ("fwdbwd_runs", "timed forward + backward calls")),
    *_metrics("tokens/s", HIGHER, ("fwd_tokens_per_s", "tokens through the forward per second"),
              ("fwdbwd_tokens_per_s", "tokens through forward + backward per second"),
              ("tokens_per_s", "tokens trained per second")),
    *_metrics("FLOPs", LOWER, ("flops_fwd", "counted forward FLOPs of the batch"),
              ("flops_fwd_attn", "counted forward FLOPs of attention's sequence products "
                                 "(QK^T, AV)"),
              ("flops_fwdbwd", "counted forward + backward FLOPs of the batch"),
              ("flops_fwd_per_token", "counted forward FLOPs per token")),
    *_metrics("bytes", LOWER, ("saved_bytes", "activations saved for backward"),
              ("peak_mem_bytes", "peak device memory of the point")),
    *_metrics("ops", "", ("seq_ops", "longest chain of dependent ops in one forward"),
              ("span_ops", "sequential depth of the layer (its cell loop for a recurrence)"),
              ("path_length", "fewest sequential applications linking x[0] to y[n-1], in "
                              "path_unit")),
    *_metrics("", LOWER, ("scan_rel_error", "largest relative error of a float32 scan against "
                                            "the float64 loop"),
              ("equivariance_error", "|f(xP) - f(x)P| / |f(x)|, largest entry"),
              ("pe_shift_residual", "relative residual of PE[pos+k] = PE[pos] M_k, largest "
                                    "over the shifts"),
              ("max_abs_diff", "largest difference of our output from PyTorch's")),
    *_metrics("positions", "", ("pe_positions", "positions the shift identity is fitted over")),
    # machine state over a timed point
    *_metrics("", LOWER, ("load_avg", "load average over the timed point"),
              ("cpu_share", "the process's CPU time over wall time and usable CPUs")),
    *_metrics("threads", "", ("threads_used", "CPU threads torch used")),
    # comparisons against PyTorch (`tvr bench`)
    *_metrics("ms", LOWER, ("ours_ms", "our layer's time, interleaved with PyTorch's"),
              ("ref_ms", "PyTorch's layer's time, interleaved with ours")),
    *_metrics("", LOWER, ("ratio", "ours_ms / ref_ms"),
              ("ratio_min", "lowest ratio over the repetitions"),
              ("ratio_max", "highest ratio over the repetitions"),
              ("ratio_best", "best-of ours over best-of PyTorch's")),
    *_metrics("", HIGHER, ("ref_mfu", "PyTorch's layer's model FLOP utilisation")),
    *_metrics("FLOP/s", "", ("peak_flops_per_s", "the machine's measured peak matmul rate"),
              ("peak_mm_flops_per_s", "measured peak of torch.mm"),
              ("peak_onednn_flops_per_s", "measured peak of oneDNN's matmul")),
    *_metrics("s", LOWER, ("wall_s", "wall time of the whole point")),
    # training on a task (runner "train") and its probes
    *_metrics("", HIGHER, ("final_accuracy", "held-out token accuracy at the end"),
              ("final_seq_accuracy", "held-out whole-sequence accuracy at the end"),
              ("accuracy_2n", "held-out token accuracy at twice the trained length"),
              ("accuracy_4n", "held-out token accuracy at four times the trained length"),
              ("seq_accuracy_2n", "whole-sequence accuracy at twice the trained length"),
              ("seq_accuracy_4n", "whole-sequence accuracy at four times the trained length")),
    *_metrics("nats/token", LOWER, ("final_loss", "held-out loss at the end"),
              ("final_train_loss", "training loss at the end"),
              ("loss_2n", "held-out loss at twice the trained length"),
              ("loss_4n", "held-out loss at four times the trained length")),
    *_metrics("bits/char", LOWER, ("final_bits_per_char", "held-out bits per character"),
              ("unigram_bits_per_char", "bits per character of the corpus's unigram model")),
    *_metrics("", "", ("final_grad_norm", "gradient norm at the last step")),
    *_metrics("steps", LOWER, ("steps_to_target", "steps until the target accuracy"),
              ("tokens_to_target", "tokens trained until the target accuracy")),
    *_metrics("s", LOWER, ("wall_to_target", "training seconds until the target accuracy")),
    *_metrics("steps", "", ("steps_run", "training steps run"),
              ("resumed_from_step", "the checkpoint's step a resumed run started from")),
    *_metrics("FLOPs", "", ("train_flops_per_token", "counted training FLOPs per token")),
    *_metrics("", "", ("q_var", "Var(q) at initialisation"), ("k_var", "Var(k) at initialisation"),
              ("qk_var", "Var(q.k) at initialisation"),
              ("qk_var_normalised", "Var(q.k) / (Var(q) Var(k))"),
              ("qk_var_unit", "Var(q.k) for unit-variance q, k"),
              ("attn_max_weight", "largest attention weight per query, mean"),
              ("softmax_jacobian_norm", "norm of the softmax's Jacobian, mean over queries"),
              ("softmax_jacobian_norm_unit", "the same for unit-variance q, k")),
    *_metrics("nats", "", ("attn_entropy", "attention entropy per query at initialisation"),
              ("attn_entropy_max", "entropy of uniform attention, log of the keys"),
              ("attn_entropy_unit", "attention entropy for unit-variance q, k")),
    *_metrics("layers", "", ("n_layers_probed", "layers whose gradient norm was measured")),
    *_metrics("", "", ("grad_norm_first", "gradient norm of the first layer at initialisation"),
              ("grad_norm_last", "gradient norm of the last layer at initialisation"),
              ("grad_norm_last_over_first", "last layer's gradient norm over the first's"),
              ("signal_last_over_input", "token diversity of the last layer's output over the "
                                         "stack input's, at initialisation (0: collapsed)"),
              ("grad_input_over_output", "gradient norm reaching the stack's input over the "
                                         "one leaving its last layer, at initialisation"),
              ("grad_decay_init", "log10 of the gradient at the farthest position over the one "
                                  "at distance 1, at initialisation"),
              ("grad_decay_trained", "the same after training")),
    # translation training and decoding (runner "translate", scripts/anchor)
    *_metrics("BLEU", HIGHER, ("best_dev_bleu_greedy", "greedy dev BLEU on the curve at the "
                                                       "stopping rule's best evaluation (its "
                                                       "highest; under stop_on = dev_ppl, "
                                                       "where dev perplexity was least)"),
              ("recipe_dev_bleu", "dev BLEU of the tuning search's best trial"),
              ("best_checkpoint_dev_bleu", "dev BLEU of the toolkit's best checkpoint"),
              ("final_checkpoint_dev_bleu", "dev BLEU of the toolkit's last checkpoint"),
              ("toolkit_best_dev_bleu_pieces_greedy", "the toolkit's own best dev score "
                                                      "(greedy, on subword pieces)")),
    *_metrics("nats/token", LOWER, ("recipe_dev_ppl", "dev perplexity of the search's best "
                                                      "trial")),
    *_metrics("", LOWER, ("dev_repeat_rate", "share of dev outputs repeating a word trigram 3+ "
                                             "times")),
    *_metrics("", "", ("dev_len_ratio", "dev output length over the reference's"),
              ("corpus_dropped_ratio", "share of verses dropped from the corpus"),
              ("dev_curve_gain_last", "dev BLEU gained over the curve's last window"),
              ("cache_same_tokens", "1 if cached and recomputed decoding wrote the same "
                                    "tokens"),
              ("stopped_early", "1 if patience stopped training"),
              ("converged", "1 if the dev curve looks flat: patience stopped it, or its last "
                            "evaluations gained little (the ledger asks more: stopped_by "
                            "patience)")),
    *_metrics("steps", "", ("best_step", "update of the best dev BLEU"),
              ("best_checkpoint_step", "update of the toolkit's best checkpoint"),
              ("final_checkpoint_step", "update of the toolkit's last checkpoint"),
              ("steps_to_bleu", "updates until the dev curve reached target_bleu"),
              ("updates", "updates trained by the toolkit")),
    *_metrics("s", LOWER, ("decode_s", "decoding wall time"), ("decode_cpu_s", "decoding CPU "
                                                                               "time"),
              ("train_cpu_s", "training CPU time"),
              ("train_budget_s", "the toolkit's training time budget")),
    *_metrics("sentences", "", ("dev_sentences", "dev verses decoded"),
              ("test_sentences", "test verses decoded")),
    *_metrics("pairs", "", ("train_pairs", "training pairs"),
              ("train_pairs_too_long", "training pairs over the length limit, left out"),
              ("corpus_train", "training pairs in the split"),
              ("corpus_dev", "dev pairs in the split"), ("corpus_test", "test pairs in the split"),
              ("corpus_aligned", "verses aligned between the two languages"),
              ("corpus_dropped_empty", "aligned verses dropped as empty"),
              ("corpus_removed_leak_dev", "training pairs removed as copies of dev pairs"),
              ("corpus_removed_leak_test", "training pairs removed as copies of test pairs"),
              ("corpus_removed_near_dev", "training pairs removed as near-copies of dev pairs"),
              ("corpus_removed_near_test", "training pairs removed as near-copies of test "
                                           "pairs")),
    *_metrics("verses", "", ("corpus_verses_en", "English verses read"),
              ("corpus_verses_ny", "Chichewa verses read"),
              ("corpus_ny_normalised", "Chichewa verses whose spelling was normalised")),
    *_metrics("tokens", "", ("train_tokens", "target tokens trained on"),
              ("recipe_tokens_per_update", "tokens per update of the toolkit's recipe"),
              ("vocab", "size of the shared subword vocabulary")),
    *_metrics("batches", "", ("train_batches", "batches per epoch")),
    *_metrics("layers", "", ("decoder_layers", "the toolkit model's decoder layers")),
    *_metrics("sittings", "", ("sittings", "separate runs the toolkit's training took")),
)
_METRICS: dict[str, Metric] = {m.name: m for m in _BUILTIN_METRICS}


def register_metric(metric: Metric) -> None:
    """Declare a metric a plugin's runner returns; ValueError if a built-in has its name."""
    if metric.name in _METRICS and _METRICS[metric.name] in _BUILTIN_METRICS:
        raise ValueError(f"metric {metric.name!r} is a built-in")
    _METRICS[metric.name] = metric


def metrics() -> dict[str, Metric]:
    """Every declared metric by name, in catalog order (built-ins, then registered)."""
    return dict(_METRICS)


def shown_in(table: str) -> tuple[str, ...]:
    """The metrics a table shows, in catalog order: shown_in("table2")."""
    return tuple(name for name, m in _METRICS.items() if table in m.tables)

"""Every study of the report, each declared once: the summary tables REPORT.md shows, the
figures `tvr plot` draws, and the per-seed tables of its README block (`study-NAME`).

A study is the rows of one `study` value (experiments/ declares its points). STUDIES is the
one registry, in the report's order; its claims live in the claim_*.py module of the part of
the paper they test (the ledger follows the paper, not the studies). Adding a study: its
points in experiments/, its `Study` here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import pandas as pd

from harness.report import ablations, curves, rematch, translation_curves
from harness.report.curves import Draw
from harness.report.stats import censored_text, fmt, spread
from harness.report.study_tables import StudyTable, study_table

Cell = Callable[[pd.DataFrame], str]  # a README cell from one group's rows (one per seed)


@dataclass(frozen=True)
class Cells:
    """A README table: one row per `by` group, each cell from its function of the rows."""
    runner: str  # what measured its rows (results column `runner`)
    by: tuple[str, ...]
    cells: dict[str, Cell]


@dataclass(frozen=True)
class Study:
    name: str  # the results column `study`
    tables: tuple[StudyTable, ...] = ()  # REPORT.md's tables (and <suite>/<study>-<runner>.*)
    figures: dict[str, tuple[Draw, str]] = field(default_factory=dict)  # name -> (draw, runner)
    readme: tuple[Cells, ...] = ()  # README block `study-<name>`, from `suite`'s rows
    suite: str = "convergence-quick"


def _pct(column: str) -> Cell:
    return lambda g: spread(g[column] * 100, 3, "%")


def _steps(g: pd.DataFrame) -> str:
    if "target" not in g or g["target"].isna().all():  # trained for a loss, not a target
        return ""
    return censored_text(g["steps_to_target"], g["steps"])


def _spread(column: str) -> Cell:
    return lambda g: spread(g[column])


def _mean(column: str) -> Cell:
    return lambda g: fmt(g[column].mean())


STUDIES: tuple[Study, ...] = (
    Study("convergence", tables=(
        StudyTable("train", "Convergence: parameter-matched models per task",
                   ("task_label", "architecture"),
                   ("n_params", "steps_to_target", "final_accuracy", "final_bits_per_char",
                    "accuracy_2n", "accuracy_4n", "train_s")),),
        figures={"convergence-accuracy": (partial(curves.convergence_curves,
                                                  metric="accuracy"), "train"),
                 "convergence-loss": (partial(curves.convergence_curves, metric="loss"),
                                      "train"),
                 "steps-to-target": (curves.steps_to_target, "train"),
                 "accuracy-vs-distance": (curves.accuracy_vs_distance, "train"),
                 "accuracy-vs-length": (curves.accuracy_vs_length, "train")},
        readme=(Cells("train", ("task_label", "architecture"), {
            "held-out accuracy": _pct("final_accuracy"), "steps to 99%": _steps,
            "bits/char": _spread("final_bits_per_char"), "accuracy at 2n": _pct("accuracy_2n"),
            "parameters": _mean("n_params")}),)),
    Study("scaling-factor", tables=(
        StudyTable("attn-init", "q.k statistics at initialisation", ("d_k", "attn_scale"),
                   ("qk_var", "qk_var_normalised", "qk_var_unit", "attn_entropy",
                    "attn_entropy_max", "softmax_jacobian_norm")),
        StudyTable("train", "Training with and without 1/sqrt(d_k)",
                   ("task_label", "d_model", "attn_scale"),
                   ("steps_to_target", "final_accuracy"))),
        figures={"scaling-curves": (ablations.scaling_curves, "train"),
                 "qk-variance": (ablations.qk_variance, "attn-init")},
        readme=(Cells("train", ("task_label", "d_model", "attn_scale"), {
                    "steps to 99%": _steps, "held-out accuracy": _pct("final_accuracy")}),
                Cells("attn-init", ("d_k", "attn_scale"), {
                    "Var(q.k), unit q, k": _spread("qk_var_unit"),
                    "Var(q.k), model's q, k": _spread("qk_var"),
                    "attention entropy (nats)": _spread("attn_entropy")}))),
    Study("heads", tables=(
        StudyTable("train", "Heads at fixed d_model", ("task_label", "n_heads"),
                   ("flops_fwd_per_token", "tokens_per_s", "steps_to_target",
                    "final_accuracy")),),
        figures={"heads": (ablations.heads, "train")},
        readme=(Cells("train", ("task_label", "n_heads"), {
            "FLOPs/token": _mean("flops_fwd_per_token"), "tokens/s": _spread("tokens_per_s"),
            "steps to 99%": _steps}),)),
    Study("ffn-width", tables=(
        StudyTable("train", "FFN width", ("task_label", "d_ff"),
                   ("n_params", "final_bits_per_char", "final_loss", "tokens_per_s")),),
        figures={"ffn-width": (ablations.ffn_width, "train")},
        readme=(Cells("train", ("task_label", "d_ff"), {
            "parameters": _mean("n_params"), "bits/char": _spread("final_bits_per_char")}),)),
    Study("positional", tables=(
        StudyTable("train", "Positional encodings", ("task_label", "pos_encoding"),
                   ("steps_to_target", "final_accuracy", "accuracy_2n", "accuracy_4n")),),
        figures={"positional": (ablations.positional, "train")},
        readme=(Cells("train", ("task_label", "pos_encoding"), {
            "held-out accuracy": _pct("final_accuracy"), "steps to 99%": _steps,
            "accuracy at 2n": _pct("accuracy_2n")}),)),
    Study("norm-warmup", tables=(
        StudyTable("layer-grads", "Per-layer gradient norm at initialisation",
                   ("n_layers", "norm"),
                   ("grad_norm_first", "grad_norm_last", "grad_norm_last_over_first")),
        StudyTable("train", "Post-LN vs Pre-LN, warm-up", ("n_layers", "norm", "warmup"),
                   ("final_loss", "final_bits_per_char", "diverged_at"))),
        figures={"norm-warmup": (ablations.norm_warmup, "train"),
                 "layer-grad-norms": (ablations.layer_grad_norms, "layer-grads")},
        readme=(Cells("train", ("n_layers", "norm", "warmup"), {
                    "final loss (nats/char)": _spread("final_loss")}),
                Cells("layer-grads", ("n_layers", "norm"), {
                    "last/first layer gradient norm": _spread("grad_norm_last_over_first")}))),
    Study("gradient-distance", tables=(
        StudyTable("grad-distance", "log10 ||dL/dx_(t-k)|| at the farthest k over k = 1",
                   ("architecture",),
                   ("n_params", "grad_decay_init", "grad_decay_trained",
                    "final_bits_per_char")),),
        figures={"grad-distance": (ablations.grad_distance, "grad-distance")},
        readme=(Cells("grad-distance", ("architecture",), {
            "log10 ratio at init": _spread("grad_decay_init"),
            "log10 ratio trained": _spread("grad_decay_trained")}),)),
    Study("residual", tables=(
        StudyTable("layer-grads", "Residual branches through depth at initialisation",
                   ("n_layers", "norm", "residual"),
                   ("signal_last_over_input", "grad_input_over_output",
                    "grad_norm_last_over_first")),),
        figures={"residual-depth": (ablations.residual_depth, "layer-grads")},
        readme=(Cells("layer-grads", ("n_layers", "norm", "residual"), {
            "signal kept": _spread("signal_last_over_input"),
            "gradient at input / at last layer": _spread("grad_input_over_output")}),),
        suite="residual"),
    # their tables are the suite's own (REPORT.md's rematch and translation sections)
    Study(rematch.STUDY, figures={"mqar-state": (rematch.mqar_state, "train")}),
    Study("table2", figures={"bleu-vs-cost": (translation_curves.bleu_curves, "translate")}),
)
BY_NAME = {s.name: s for s in STUDIES}
TABLE_RUNNERS = frozenset(t.runner for s in STUDIES for t in s.tables)


def study_tables(df: pd.DataFrame) -> list[tuple[Study, StudyTable, pd.DataFrame]]:
    """Every study table with rows in df, in STUDIES order."""
    found = [(s, spec, study_table(df, s.name, spec)) for s in STUDIES for spec in s.tables]
    return [(s, spec, table) for s, spec, table in found if not table.empty]

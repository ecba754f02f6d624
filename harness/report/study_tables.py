"""Summary tables of the convergence and ablation studies, for REPORT.md and --format csv.

One row per configuration, metrics averaged over seeds (`seeds` counts them). Steps to
target are listed per seed, "> N" for a seed that never reached it within its N steps;
`reached` says how many did.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.report.labels import labelled
from harness.report.stats import censored

STUDY_RUNNERS = ("train", "attn-init", "layer-grads", "grad-distance")


@dataclass(frozen=True)
class StudyTable:
    study: str  # the study (results column `study`)
    runner: str  # what measured its rows (results column `runner`)
    title: str
    by: tuple[str, ...]  # one row per combination of these columns
    values: tuple[str, ...]  # metric columns, mean over seeds (absent ones are skipped)


TABLES = (
    StudyTable("convergence", "train", "Convergence: parameter-matched models per task",
               ("task_label", "architecture"),
               ("n_params", "steps_to_target", "final_accuracy", "final_bits_per_char",
                "accuracy_2n", "accuracy_4n", "train_s")),
    StudyTable("scaling-factor", "attn-init", "q.k statistics at initialisation",
               ("d_k", "attn_scale"),
               ("qk_var", "qk_var_normalised", "qk_var_unit", "attn_entropy",
                "attn_entropy_max", "softmax_jacobian_norm")),
    StudyTable("scaling-factor", "train", "Training with and without 1/sqrt(d_k)",
               ("task_label", "d_model", "attn_scale"), ("steps_to_target", "final_accuracy")),
    StudyTable("heads", "train", "Heads at fixed d_model", ("task_label", "n_heads"),
               ("flops_fwd_per_token", "tokens_per_s", "steps_to_target", "final_accuracy")),
    StudyTable("ffn-width", "train", "FFN width", ("task_label", "d_ff"),
               ("n_params", "final_bits_per_char", "final_loss", "tokens_per_s")),
    StudyTable("positional", "train", "Positional encodings", ("task_label", "pos_encoding"),
               ("steps_to_target", "final_accuracy", "accuracy_2n", "accuracy_4n")),
    StudyTable("norm-warmup", "layer-grads", "Per-layer gradient norm at initialisation",
               ("n_layers", "norm"),
               ("grad_norm_first", "grad_norm_last", "grad_norm_last_over_first")),
    StudyTable("norm-warmup", "train", "Post-LN vs Pre-LN, warm-up", ("n_layers", "norm",
                                                                      "warmup"),
               ("final_loss", "final_bits_per_char", "diverged_at")),
    StudyTable("gradient-distance", "grad-distance",
               "log10 ||dL/dx_(t-k)|| at the farthest k over k = 1", ("architecture",),
               ("n_params", "grad_decay_init", "grad_decay_trained", "final_bits_per_char")),
)


def study_table(df: pd.DataFrame, spec: StudyTable) -> pd.DataFrame:
    """spec's summary of df's finished rows (empty frame if the study is absent)."""
    if "study" not in df:
        return pd.DataFrame()
    keep = (df["study"] == spec.study) & (df["runner"] == spec.runner)
    # the figures' labels (architecture, task_label), so tables and figures agree
    rows = labelled(df[keep & df["status"].isin(["ok", "diverged"])])
    if rows.empty:
        return pd.DataFrame()
    values = [v for v in spec.values if v in rows and rows[v].notna().any()]
    by = [b for b in spec.by if b in rows]
    grouped = rows.groupby(by, sort=True, dropna=False)
    table = grouped[values].mean(numeric_only=True)
    table.insert(0, "seeds", grouped.size())
    table.insert(1, "diverged", grouped["status"].apply(lambda s: int((s == "diverged").sum())))
    if "steps_to_target" in values:
        table.insert(2, "reached", grouped["steps_to_target"].count())
        # each seed's steps, "> budget" for one that never reached the target: a mean over
        # the seeds that did would read as a measurement for all of them
        columns = [c for c in ("steps_to_target", "steps", "target") if c in rows]
        table["steps_to_target"] = grouped[columns].apply(_censored_steps)
    return table.reset_index()


def _censored_steps(rows: pd.DataFrame) -> str:
    """Each seed's steps to target, "> budget" where never reached; blank without a target."""
    if "target" in rows and rows["target"].isna().all():
        return ""
    return ", ".join(censored(rows["steps_to_target"], rows["steps"]))


def study_tables(df: pd.DataFrame) -> list[tuple[StudyTable, pd.DataFrame]]:
    """Every table whose study is in df, in TABLES order."""
    out = [(spec, study_table(df, spec)) for spec in TABLES]
    return [(spec, table) for spec, table in out if not table.empty]

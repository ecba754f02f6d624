"""What a claim of the ledger is and what judging it returns: the `Claim` (its rule a
function of the stored results), the `Evidence` the rule finds, and `Stored`, the results
under one folder loaded once per suite. The rules (claim_*.py) and the ledger (claims.py)
both stand on this module, so neither imports the other's way back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from harness.report.gates import Gate, Test, failed
from harness.report.verdicts import DECISIVE, EMPIRICAL, INCONCLUSIVE
from harness.results import RESULTS_FILE, SERIES_FILE, load_results, read_series

SCALE_FIELDS = ("params", "steps", "tokens", "seeds", "eval_size", "device")
GPU_DIR = "gpu"  # <out>/gpu: results measured on a GPU (scripts/gpu-check writes them)
NO_ONEDNN = "bench-no-onednn"  # `tvr bench --no-onednn`'s folder


class Missing(Exception):
    """The results a claim needs are absent: `suite` names the command that makes them."""

    def __init__(self, suite: str, what: str) -> None:
        super().__init__(what)
        self.suite, self.what = suite, what


def not_measured(suite: str, out_dir: Path = Path("results")) -> str:
    # a folder named as the default one needs no --out: REPORT.md, regenerated in a copy of
    # results/ elsewhere (a fresh clone's check), then reads the same
    out = "" if Path(out_dir).name == "results" else f" --out {out_dir}"
    return f"not measured: run `tvr run {suite}{out}`"


@dataclass(frozen=True)
class Evidence:
    points: str  # the study and points that test the claim
    measured: str  # the numbers, with their uncertainty
    verdict: str  # one of VERDICTS, or not_measured(suite)
    rule: str  # the rule that chose the verdict, thresholds included
    scale: str = ""  # parameters, steps, device
    gates: tuple[Gate, ...] = ()  # power gates a decisive verdict needs (harness.report.gates)
    tests: tuple[Test, ...] = ()  # the significance tests behind the verdict
    facts: dict = field(default_factory=dict)  # SCALE_FIELDS, as numbers where they are
    kind: str = EMPIRICAL  # EMPIRICAL or IDENTITY: counted apart in the ledger's tally
    ungated: str = ""  # the verdict the rule's thresholds chose before a gate failed
    figure: str = ""  # the figure of the suite the evidence came from, where the claim's
    #                   suite is chosen from the rows (else the claim's own figure)
    scope: str = ""  # what the verdict holds at, for its label ("1.4M parameters, 28k
    #                  training pairs, ..., CPU"); "" : from `facts` (harness.report.rulebook)


def gated(evidence: Evidence, required: tuple[str, ...] = ()) -> Evidence:
    """A decisive verdict with a failed gate becomes INCONCLUSIVE (the rule's own verdict
    kept in `ungated`, the failed gates named in `measured`'s tail by the renderer). Every
    gate of `required` (the claim kind's, harness.report.rulebook) that the rule did not
    apply is added as failed: a verdict never skips a gate its kind asks."""
    names = {g.name for g in evidence.gates}
    absent = tuple(Gate(name, False, "not applied by this claim's rule",
                        "the rule applies its kind's gate (harness/report/rulebook.py)")
                   for name in required if name not in names)
    if evidence.verdict in DECISIVE and absent:
        evidence = replace(evidence, gates=evidence.gates + absent)
    if evidence.verdict in DECISIVE and failed(evidence.gates):
        return replace(evidence, verdict=INCONCLUSIVE, ungated=evidence.verdict)
    return evidence


def device_word(rows: pd.DataFrame) -> str:
    """"CPU", "GPU" or both, from the rows' device column, with the device's name once."""
    if "device" not in rows:
        return ""
    words = []
    for device, group in rows.groupby(rows["device"].astype(str), sort=True):
        name = str(group["device_name"].iloc[0]) if "device_name" in group else ""
        word = {"cpu": "CPU", "cuda": "GPU"}.get(device, device)
        words.append(f"{word} ({name})" if name and name != "nan" else word)
    return ", ".join(words)


# what tells two configurations of a verdict or figure apart (the seeds of each are counted)
CONFIGURATION = ("study", "model", "task_label", "mixer_kind", "pairs", "d_model", "seq_len")


def seeds_per_configuration(rows: pd.DataFrame) -> tuple[int, int]:
    """The fewest and the most seeds any configuration of `rows` has."""
    per = rows.groupby([c for c in CONFIGURATION if c in rows], dropna=False)["seed"].nunique()
    return int(per.min()), int(per.max())


def _seeds(rows: pd.DataFrame) -> int | str:
    """Seeds per configuration: a count, or "lo..hi" where configurations differ."""
    low, high = seeds_per_configuration(rows)
    return low if low == high else f"{low}..{high}"


def scale_facts(rows: pd.DataFrame, eval_size: object = "") -> dict:
    """Parameters, training steps and tokens, seeds, evaluation size and device of the rows
    a verdict rests on (ranges as "lo..hi"; "" where the rows do not say)."""
    def span(column: str) -> str:
        if column not in rows or not pd.to_numeric(rows[column], errors="coerce").notna().any():
            return ""
        values = pd.to_numeric(rows[column], errors="coerce").dropna()
        lo, hi = int(values.min()), int(values.max())
        return str(lo) if lo == hi else f"{lo}..{hi}"

    tokens = ""
    if {"steps", "batch_size", "seq_len"} <= set(rows) and "train_pairs" not in rows:
        per_step = pd.to_numeric(rows["batch_size"]) * pd.to_numeric(rows["seq_len"])
        total = (pd.to_numeric(rows["steps"], errors="coerce") * per_step).dropna()
        tokens = "" if total.empty or total.max() <= 0 else (
            str(int(total.max())) if total.min() == total.max()
            else f"{int(total.min())}..{int(total.max())}")
    devices = sorted({f"{r.get('device', '?')} ({r.get('device_name', '?')})"
                      for _, r in rows.iterrows()})
    return {"params": span("n_params"), "steps": span("steps"), "tokens": tokens,
            "seeds": _seeds(rows) if "seed" in rows and len(rows) else "",
            "eval_size": eval_size, "device": ", ".join(devices)}


@dataclass(frozen=True)
class Claim:
    key: str
    claim: str  # what the paper says, briefly
    suite: str  # the suite whose results test it
    figure: str  # the figure showing it, relative to the results folder ("" if none)
    judge: Callable[[Stored], Evidence]
    kind: str = ""  # its kind in harness.report.rulebook.KINDS: the gates every verdict needs


class Stored:
    """The results under one folder, loaded once per suite; each suite from one machine."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self._cache: dict[str, pd.DataFrame] = {}
        self._curves: dict[str, pd.DataFrame] = {}  # a suite's series.csv, wide, read once
        self.read: list[dict] = []  # what rows() and gpu() returned: suite, filter, point ids

    def note(self, suite: str, where: dict, df: pd.DataFrame) -> None:
        """Record `df` as rows a rule read (its claim's provenance)."""
        def values(column: str) -> list[str]:
            if column not in df:
                return []
            return [v for v in df[column].dropna().astype(str).drop_duplicates() if v]

        commits = values("git_commit")
        if "git_commit" not in df or df["git_commit"].isna().any():
            commits.append("not recorded")  # rows measured before rows carried their commit
        self.read.append({"suite": suite, "filter": {k: str(v) for k, v in where.items()},
                          "point_ids": values("point_id"), "machines": values("machine"),
                          "commits": commits,
                          "command": f"tvr run {suite.removeprefix(GPU_DIR + '/')}"})

    def rows(self, suite: str, **where: object) -> pd.DataFrame:
        """The suite's finished rows (ok or diverged) matching `where`; Missing if none."""
        if suite not in self._cache:
            if not (self.out_dir / suite / RESULTS_FILE).exists():
                raise Missing(suite, f"no results for suite {suite}")
            df = load_results(self.out_dir, [suite])
            self._cache[suite] = df[df["status"].isin(["ok", "diverged"])]
        df = self._cache[suite]
        for column, value in where.items():
            if column not in df:
                raise Missing(suite, f"suite {suite} has no {column} column")
            df = df[df[column].astype(str) == str(value)]
        if df.empty:
            what = ", ".join(f"{k}={v}" for k, v in where.items()) or "finished"
            raise Missing(suite, f"suite {suite} has no {what} rows")
        self.note(suite, where, df)
        return df

    def series(self, suite: str, point_ids: pd.Series) -> pd.DataFrame:
        """The curves of `point_ids` of `suite`, wide: one row per point and evaluation step
        (columns point_id, step and one per metric), in step order; Missing if none."""
        path = self.out_dir / suite / SERIES_FILE
        if not path.exists():
            raise Missing(suite, f"suite {suite} has no training curves ({SERIES_FILE})")
        if suite not in self._curves:  # read and pivoted once: several rules read them
            self._curves[suite] = read_series(self.out_dir, suite).pivot_table(
                index=["point_id", "step"], columns="metric", values="value",
                aggfunc="last").reset_index().sort_values(["point_id", "step"])
        wide = self._curves[suite]
        wide = wide[wide["point_id"].isin(set(point_ids))]
        if wide.empty:
            raise Missing(suite, f"suite {suite} has no curves of its finished points")
        return wide.reset_index(drop=True)

    def only(self, seen: int, rows: pd.DataFrame, prefix: str = "") -> None:
        """Forget what was noted as read since len(self.read) was `seen`, and note `rows`
        instead, per suite: a rule that read more than its verdict uses names only those."""
        del self.read[seen:]
        for suite, group in rows.groupby("suite"):
            self.note(f"{prefix}{suite}", {}, group)

    def gpu(self) -> pd.DataFrame | None:
        """Every finished cuda row under <out>/gpu, or None when no GPU has been measured."""
        gpu_dir = self.out_dir / GPU_DIR
        if not list(gpu_dir.glob(f"*/{RESULTS_FILE}")):
            return None
        df = load_results(gpu_dir)
        df = df[(df["status"] == "ok") & (df["device"].astype(str) == "cuda")]
        if not len(df):
            return None
        for suite, rows in df.groupby("suite"):
            self.note(f"{GPU_DIR}/{suite}", {"device": "cuda"}, rows)
        return df

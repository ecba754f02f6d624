"""The claims ledger: every claim of the paper beside what the stored results say about it.

One row per claim (CLAIMS, in claim_layers.py and claim_training.py): the claim, the study and
points that test it, the measured numbers with their uncertainty, a verdict, the rule that
chose the verdict (code with its thresholds stated in the row), the figure, and the scale
(parameters, steps, device) the verdict holds at. Everything is read from stored results;
a claim whose results are missing says which suite to run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from harness.errors import BadInput
from harness.report.markdown import markdown_table
from harness.results import RESULTS_FILE, load_results

SUPPORTS = "supports"
QUALIFIED = "supports with a qualification"
CONTRADICTS = "contradicts"
NOT_HERE = "not measured on this hardware"
VERDICTS = (SUPPORTS, QUALIFIED, CONTRADICTS, NOT_HERE)
GPU_DIR = "gpu"  # <out>/gpu: results measured on a GPU (scripts/gpu-check writes them)
FORMATS = ("markdown", "csv", "json")


class Missing(Exception):
    """The results a claim needs are absent: `suite` names the command that makes them."""

    def __init__(self, suite: str, what: str) -> None:
        super().__init__(what)
        self.suite, self.what = suite, what


def not_measured(suite: str, out_dir: Path = Path("results")) -> str:
    out = "" if Path(out_dir) == Path("results") else f" --out {out_dir}"
    return f"not measured: run `tvr run {suite}{out}`"


@dataclass(frozen=True)
class Evidence:
    points: str  # the study and points that test the claim
    measured: str  # the numbers, with their uncertainty
    verdict: str  # one of VERDICTS, or not_measured(suite)
    rule: str  # the rule that chose the verdict, thresholds included
    scale: str = ""  # parameters, steps, device


@dataclass(frozen=True)
class Claim:
    key: str
    claim: str  # what the paper says, briefly
    suite: str  # the suite whose results test it
    figure: str  # the figure showing it, relative to the results folder ("" if none)
    judge: Callable[[Stored], Evidence]


class Stored:
    """The results under one folder, loaded once per suite; each suite from one machine."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self._cache: dict[str, pd.DataFrame] = {}

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
        return df

    def gpu(self) -> pd.DataFrame | None:
        """Every finished cuda row under <out>/gpu, or None when no GPU has been measured."""
        gpu_dir = self.out_dir / GPU_DIR
        if not list(gpu_dir.glob(f"*/{RESULTS_FILE}")):
            return None
        df = load_results(gpu_dir)
        df = df[(df["status"] == "ok") & (df["device"].astype(str) == "cuda")]
        return df if len(df) else None


def judge(claim: Claim, stored: Stored) -> Evidence:
    """The claim's evidence, or a row naming what is missing and the command that makes it."""
    try:
        return claim.judge(stored)
    except Missing as gap:
        return Evidence("", gap.what, not_measured(gap.suite, stored.out_dir),
                        "no verdict without the suite's results")
    except KeyError as column:  # rows of an older or partial run that lack a measured column
        return Evidence("", f"the {claim.suite} results have no {column} column",
                        not_measured(claim.suite, stored.out_dir),
                        "no verdict without the suite's results")


def all_claims() -> list[Claim]:
    """Every claim, in the ledger's order (imported here: the claim modules import this one)."""
    import harness.report.claim_later as later  # later work's claims, after the paper's
    from harness.report import claim_layers, claim_positions, claim_training, claim_translation

    return [*claim_layers.CLAIMS, *claim_training.CLAIMS, *claim_positions.CLAIMS,
            *claim_translation.CLAIMS, *later.CLAIMS]


def ledger(out_dir: Path, claims: list[Claim] | None = None) -> pd.DataFrame:
    """One row per claim: claim, suite, points, measured, verdict, rule, figure, scale."""
    if claims is None:
        claims = all_claims()
    stored = Stored(out_dir)
    rows = []
    for claim in claims:
        evidence = judge(claim, stored)
        figure = claim.figure if claim.figure and (Path(out_dir) / claim.figure).exists() else ""
        rows.append({"claim": claim.claim, "suite": claim.suite, **asdict(evidence),
                     "figure": figure})
    columns = ["claim", "verdict", "measured", "points", "rule", "scale", "suite", "figure"]
    return pd.DataFrame(rows)[columns]


def render(table: pd.DataFrame, fmt: str) -> str:
    """Markdown (a summary table, then one section per claim), CSV or JSON text."""
    if fmt == "csv":
        return table.to_csv(index=False, lineterminator="\n")
    if fmt == "json":
        return json.dumps(table.to_dict(orient="records"), indent=1, ensure_ascii=False) + "\n"
    if fmt == "markdown":
        return _markdown(table)
    raise BadInput(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")


def _markdown(table: pd.DataFrame) -> str:
    summary = pd.DataFrame({"#": range(1, len(table) + 1), "claim": table["claim"],
                            "verdict": table["verdict"]})
    parts = [counts(table) + ".", "", markdown_table(summary.map(_cell)), ""]
    for i, row in enumerate(table.itertuples(index=False), start=1):
        parts += [f"**{i}. {row.claim}**: {row.verdict}.", ""]
        for label, value in (("measured", row.measured), ("points", row.points),
                             ("rule", row.rule), ("scale", row.scale),
                             ("figure", f"[{Path(row.figure).name}]({row.figure})"
                              if row.figure else "")):
            if value:
                parts.append(f"- {label}: {value}")
        parts.append("")
    return "\n".join(parts)


def _cell(text: object) -> str:
    """A Markdown table cell: no pipe or newline may break the row."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def counts(table: pd.DataFrame) -> str:
    """"12 claims: 5 supports, ..." (verdicts in VERDICTS order, then not measured)."""
    tally = table["verdict"].value_counts()
    order = [v for v in VERDICTS if v in tally] + sorted(set(tally.index) - set(VERDICTS))
    return f"{len(table)} claims: " + ", ".join(f"{tally[v]} {v}" for v in order)

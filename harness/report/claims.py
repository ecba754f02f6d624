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
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from harness.errors import BadInput
from harness.report.gates import Gate, Test, as_records, failed
from harness.report.markdown import markdown_table
from harness.results import RESULTS_FILE, load_results

SUPPORTS = "supports"
QUALIFIED = "supports with a qualification"
CONTRADICTS = "contradicts"
INCONCLUSIVE = "inconclusive at this scale"
NOT_HERE = "not measured on this hardware"
NOT_MEASURED = "not measured"
VERDICTS = (SUPPORTS, QUALIFIED, CONTRADICTS, INCONCLUSIVE, NOT_HERE, NOT_MEASURED)
DECISIVE = (SUPPORTS, QUALIFIED, CONTRADICTS)  # verdicts that take a side: they need the gates
EMPIRICAL = "empirical"  # a claim about how models behave, judged from measurements
IDENTITY = "identity check"  # a check that a mathematical identity holds in the code
SCALE_FIELDS = ("params", "steps", "tokens", "seeds", "eval_size", "device")
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
    gates: tuple[Gate, ...] = ()  # power gates a decisive verdict needs (harness.report.gates)
    tests: tuple[Test, ...] = ()  # the significance tests behind the verdict
    facts: dict = field(default_factory=dict)  # SCALE_FIELDS, as numbers where they are
    kind: str = EMPIRICAL  # EMPIRICAL or IDENTITY: counted apart in the ledger's tally
    ungated: str = ""  # the verdict the rule's thresholds chose before a gate failed


def gated(evidence: Evidence) -> Evidence:
    """A decisive verdict with a failed gate becomes INCONCLUSIVE (the rule's own verdict
    kept in `ungated`, the failed gates named in `measured`'s tail by the renderer)."""
    if evidence.verdict in DECISIVE and failed(evidence.gates):
        return replace(evidence, verdict=INCONCLUSIVE, ungated=evidence.verdict)
    return evidence


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
            "seeds": int(rows["seed"].nunique()) if "seed" in rows else "",
            "eval_size": eval_size, "device": ", ".join(devices)}


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
        return gated(claim.judge(stored))
    except Missing as gap:
        return Evidence("", gap.what, not_measured(gap.suite, stored.out_dir),
                        "no verdict without the suite's results")
    except KeyError as column:  # rows of an older or partial run that lack a measured column
        return Evidence("", f"the {claim.suite} results have no {column} column",
                        not_measured(claim.suite, stored.out_dir),
                        "no verdict without the suite's results")


def all_claims() -> list[Claim]:
    """Every claim, in the ledger's order (imported here: the claim modules import this one)."""
    from harness.report import (
        claim_depth,
        claim_later,
        claim_layers,
        claim_positions,
        claim_table3,
        claim_training,
        claim_translation,
    )

    # later work's claims come after the paper's
    return [*claim_layers.CLAIMS, *claim_training.CLAIMS, *claim_depth.CLAIMS,
            *claim_positions.CLAIMS, *claim_translation.CLAIMS, *claim_table3.CLAIMS,
            *claim_later.CLAIMS]


def ledger(out_dir: Path, claims: list[Claim] | None = None) -> pd.DataFrame:
    """One row per claim: claim, suite, points, measured, verdict, rule, figure, scale."""
    if claims is None:
        claims = all_claims()
    stored = Stored(out_dir)
    rows = []
    for claim in claims:
        e = judge(claim, stored)
        figure = claim.figure if claim.figure and (Path(out_dir) / claim.figure).exists() else ""
        facts = {k: e.facts.get(k, "") for k in SCALE_FIELDS}
        rows.append({"key": claim.key, "claim": claim.claim, "verdict": e.verdict,
                     "kind": e.kind, "measured": e.measured, "points": e.points,
                     "rule": e.rule, "gates": as_records(e.gates),
                     "tests": as_records(e.tests), "ungated": e.ungated, **facts,
                     "scale": e.scale, "suite": claim.suite, "figure": figure})
    columns = ["key", "claim", "verdict", "kind", "measured", "points", "rule", "gates",
               "tests", "ungated", *SCALE_FIELDS, "scale", "suite", "figure"]
    return pd.DataFrame(rows, columns=columns)


def _gate_text(records: list[dict]) -> str:
    return "; ".join(Gate(**r).text() for r in records)


def _test_text(records: list[dict]) -> str:
    return "; ".join(Test(**r).text() for r in records)


def render(table: pd.DataFrame, fmt: str) -> str:
    """Markdown (a summary table, then one section per claim), CSV or JSON text."""
    if fmt == "csv":
        flat = table.assign(gates=table["gates"].map(_gate_text),
                            tests=table["tests"].map(_test_text))
        return flat.to_csv(index=False, lineterminator="\n")
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
        if row.kind != EMPIRICAL:
            parts[-2] = f"**{i}. {row.claim}** ({row.kind}): {row.verdict}."
        if row.ungated:
            names = ", ".join(g["name"] for g in row.gates if not g["passed"])
            parts.insert(-1, f"The rule alone would say \"{row.ungated}\"; failed gates: "
                         f"{names}.")
        for label, value in (("measured", row.measured), ("points", row.points),
                             ("rule", row.rule), ("gates", _gate_text(row.gates)),
                             ("tests", _test_text(row.tests)), ("scale", row.scale),
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
    """"12 claims: 5 supports, ...; 3 identity checks: 3 supports" (verdicts in VERDICTS
    order, then not measured; identity checks counted apart from empirical evidence)."""
    def tally(part: pd.DataFrame) -> str:
        t = part["verdict"].str.replace(r"^not measured:.*", NOT_MEASURED, regex=True)
        t = t.value_counts()
        order = [v for v in VERDICTS if v in t] + sorted(set(t.index) - set(VERDICTS))
        return ", ".join(f"{t[v]} {v}" for v in order)

    kind = table["kind"] if "kind" in table else pd.Series(EMPIRICAL, index=table.index)
    empirical, identity = table[kind == EMPIRICAL], table[kind != EMPIRICAL]
    text = f"{len(empirical)} claims: {tally(empirical)}"
    if len(identity):
        text += f"; {len(identity)} identity checks: {tally(identity)}"
    return text

"""The claims ledger: every claim of the paper beside what the stored results say about it.

One row per claim (each claim_*.py module's CLAIMS; the types in evidence.py): the claim, the
study and points that test it, the measured numbers with their uncertainty, a verdict, the rule that
chose the verdict (code with its thresholds stated in the row), the figure, and the scale
(parameters, steps, device) the verdict holds at. Everything is read from stored results;
a claim whose results are missing says which suite to run.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import BadInput
from harness.report import (
    claim_depth,
    claim_later,
    claim_layers,
    claim_positions,
    claim_table3,
    claim_training,
    claim_translation,
    rulebook,
)
from harness.report.evidence import (
    SCALE_FIELDS,
    Claim,
    Evidence,
    Missing,
    Stored,
    gated,
    not_measured,
)
from harness.report.gates import Gate, Test, as_records
from harness.report.markdown import markdown_table
from harness.report.unfinished import unfinished
from harness.report.verdicts import EMPIRICAL, NOT_MEASURED, VERDICTS
from harness.results import FINAL_STATUSES, RESULTS_FILE, frozen, load_results, memo

FORMATS = ("text", "markdown", "csv", "json")


def judge(claim: Claim, stored: Stored) -> Evidence:
    """The claim's evidence, or a row naming what is missing and the command that makes it.
    A claim on trained models also passes the `finished` gate: no run of a suite it read is
    still training (or stopped before its row)."""
    try:
        evidence = claim.judge(stored)
        if claim.kind in rulebook.WAITS_FOR_RUNS:
            evidence = replace(evidence, gates=(*evidence.gates, finished_gate(stored)))
        return gated(evidence, rulebook.gates_of(claim.kind))
    except Missing as gap:
        return Evidence("", gap.what, not_measured(gap.suite, stored.out_dir),
                        "no verdict without the suite's results")
    except KeyError as column:  # rows of an older or partial run that lack a measured column
        return Evidence("", f"the {claim.suite} results have no {column} column",
                        not_measured(claim.suite, stored.out_dir),
                        "no verdict without the suite's results")


def finished_gate(stored: Stored) -> Gate:
    """Whether every run of the suites the rule read has its finished row, ok or diverged
    (harness.report.unfinished: a planned point, a claim or a checkpoint without one is a
    run still to train, training, or stopped; a row that failed, one `tvr run` retries)."""
    left, failed = {}, {}
    for suite in dict.fromkeys(r["suite"] for r in stored.read):
        rows = load_results(stored.out_dir, [suite]) \
            if (stored.out_dir / suite / RESULTS_FILE).exists() else pd.DataFrame()
        # a run whose row failed (error, oom, skipped) is one `tvr run` measures again
        final = rows[rows["status"].isin(FINAL_STATUSES)] if "status" in rows else rows
        try:
            left[suite] = unfinished(stored.out_dir / suite, final)
            failed[suite] = sum(left[suite].values()) - sum(
                unfinished(stored.out_dir / suite, rows).values())  # counted as the gate counts
        except ValueError as damaged:  # a plan that cannot be read: nothing known finished
            left[suite], failed[suite] = {str(damaged): 1}, 0
    still = {s: runs for s, runs in left.items() if runs}
    count = {s: sum(runs.values()) for s, runs in still.items()}
    named = {s: [name if n == 1 else f"{name} x{n}" for name, n in runs.items()]
             for s, runs in still.items()}
    if not still:
        return Gate("finished", True, "every planned or started run of "
                    + (", ".join(left) or "no suite") + " has its row")
    shown = 6  # named; the rest counted
    return Gate("finished", False, "; ".join(
        f"{s}: {count[s]} planned or started run{'s' if count[s] != 1 else ''} without "
        f"a finished row yet ({', '.join(named[s][:shown])}"
        + (f" and {len(named[s]) - shown} more" if len(named[s]) > shown else "") + ")"
        + (f", {failed[s]} of them failed (a row of status error, oom or skipped)"
           if failed[s] else "") for s in still),
        "let them finish: `" + "`, `".join(f"tvr run {s}" for s in still)
        + ("` measures" if len(still) == 1 else "` each measure")
        + " what is left, resuming a stopped run")


def all_claims() -> list[Claim]:
    """Every claim, in the ledger's order."""
    # later work's claims come after the paper's
    return [*claim_layers.CLAIMS, *claim_training.CLAIMS, *claim_depth.CLAIMS,
            *claim_positions.CLAIMS, *claim_translation.CLAIMS, *claim_table3.CLAIMS,
            *claim_later.CLAIMS]


# Seconds a ledger pass runs before its progress shows: a pass on a warm cache takes a few
# seconds; a cold one (the sentence-level significance tests of Table 2's claim, cached in
# harness.report.sentence_tests.sentence_cache) took 106 s, 100 of them in that claim.
PROGRESS_AFTER = 5.0


@contextmanager
def _progress(total: int, shown: bool) -> Iterator[Any]:
    """A bar on stderr naming the claim being judged, shown once the pass has run
    PROGRESS_AFTER seconds, its clock ticking while one claim takes long, gone at the end."""
    from tqdm import tqdm

    bar = tqdm(total=total, file=sys.stderr, leave=False, delay=PROGRESS_AFTER,
               disable=not shown,  # no rate nor ETA: one claim may take most of the pass
               bar_format="claims {n_fmt}/{total_fmt} [{elapsed}] judging {desc}")
    done = threading.Event()

    def tick() -> None:  # tqdm redraws only on update; a claim may take minutes
        while not done.wait(0.5):
            if bar.format_dict["elapsed"] >= PROGRESS_AFTER:
                bar.refresh()

    ticker = threading.Thread(target=tick, daemon=True)
    if shown:
        ticker.start()
    try:
        yield bar
    finally:
        done.set()
        if shown:
            ticker.join()
        bar.close()


def ledger(out_dir: Path, claims: list[Claim] | None = None, progress: bool = False
           ) -> pd.DataFrame:
    """One row per claim: claim, suite, points, measured, verdict, rule, figure, scale.
    progress: a bar on stderr when the pass is slow (stdout untouched). Within
    frozen_results() (a report), built once per folder and read for every subset."""
    if claims is not None and not frozen():
        return _ledger(out_dir, claims, progress)
    everyone = all_claims()
    if claims is None or {c.key for c in claims} <= {c.key for c in everyone}:
        full = memo(("ledger", Path(out_dir).resolve()),
                    lambda: _ledger(out_dir, everyone, progress))
        keys = [c.key for c in claims] if claims is not None else list(full["key"])
        return full.set_index("key", drop=False).loc[keys].reset_index(drop=True)
    return _ledger(out_dir, claims, progress)


def _ledger(out_dir: Path, claims: list[Claim], progress: bool) -> pd.DataFrame:
    stored = Stored(out_dir)
    rows = []
    with _progress(len(claims), progress) as bar:
        for claim in claims:
            bar.set_description_str(f"{claim.key} ({claim.suite})", refresh=False)
            rows.append(_row(claim, stored, out_dir))
            bar.update(1)
    columns = ["key", "claim", "verdict", "label", "kind", "claim_kind", "measured", "points",
               "point_ids", "rule", "gates", "tests", "ungated", *SCALE_FIELDS, "scope",
               "scale", "suite", "figure"]
    return pd.DataFrame(rows, columns=columns)


def _row(claim: Claim, stored: Stored, out_dir: Path) -> dict[str, Any]:
    """The claim's row of the ledger."""
    stored.read = []
    e = judge(claim, stored)
    chosen = e.figure or claim.figure
    figure = chosen if chosen and (Path(out_dir) / chosen).exists() else ""
    facts = {k: e.facts.get(k, "") for k in SCALE_FIELDS}
    facts_in_scope = e.facts if claim.kind != rulebook.COUNT else \
        {k: v for k, v in e.facts.items() if k != "seeds"}  # an exact count has no seeds
    scope = e.scope or rulebook.scope_of(facts_in_scope, e.scale)
    return {"key": claim.key, "claim": claim.claim, "verdict": e.verdict,
            "label": rulebook.label(e.verdict, scope, e.kind), "kind": e.kind,
            "claim_kind": claim.kind, "measured": e.measured, "points": e.points,
            "point_ids": _read(stored.read),
            "rule": e.rule, "gates": as_records(e.gates),
            "tests": as_records(e.tests), "ungated": e.ungated, **facts, "scope": scope,
            "scale": e.scale, "suite": claim.suite, "figure": figure}


def _read(read: list[dict]) -> list[dict]:
    """The rows a rule read, one record per suite and filter (repeated reads merged): the
    provenance of its verdict as point ids of <out>/<suite>/results.csv, with the machines
    and commits they were measured on and the command that measures them."""
    merged: dict[tuple, dict] = {}
    for r in read:
        key = (r["suite"], tuple(sorted(r["filter"].items())))
        merged.setdefault(key, {**r, "point_ids": [], "machines": [], "commits": []})
        for field in ("point_ids", "machines", "commits"):
            seen = merged[key][field]
            seen += [i for i in r.get(field, []) if i not in seen]
    return list(merged.values())


def _read_text(records: list[dict]) -> str:
    return "; ".join(f"{r['suite']}" + "".join(f" {k}={v}" for k, v in r["filter"].items())
                     + f": {len(r['point_ids'])} points" for r in records)


def _gate_text(records: list[dict]) -> str:
    return "; ".join(Gate(**r).text() for r in records)


def _test_text(records: list[dict]) -> str:
    return "; ".join(Test(**r).text() for r in records)


def render(table: pd.DataFrame, fmt: str) -> str:
    """Text for a terminal (each claim and its labelled verdict, wrapped), Markdown (a
    summary table, then one section per claim), CSV or JSON text."""
    if fmt == "csv":
        flat = table.assign(gates=table["gates"].map(_gate_text),
                            tests=table["tests"].map(_test_text),
                            point_ids=table["point_ids"].map(_read_text))
        return flat.to_csv(index=False, lineterminator="\n")
    if fmt == "json":
        return json.dumps(table.to_dict(orient="records"), indent=1, ensure_ascii=False) + "\n"
    if fmt == "markdown":
        return _markdown(table)
    if fmt == "text":
        return _text(table)
    raise BadInput(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")


TEXT_WIDTH = 100


def _text(table: pd.DataFrame) -> str:
    """The ledger for a terminal: the tally, then per claim its number and words, its
    labelled verdict and the gates that failed, wrapped to TEXT_WIDTH."""
    import textwrap

    def wrapped(text: str, first: str, rest: str | None = None) -> list[str]:
        return textwrap.wrap(text, TEXT_WIDTH, initial_indent=first,
                             subsequent_indent=first if rest is None else rest,
                             break_on_hyphens=False)

    parts = wrapped(counts(table) + ".", "") + [""]
    for i, row in enumerate(table.itertuples(index=False), start=1):
        head = f"{i}. "
        pad = " " * len(head)
        failed = ", ".join(dict.fromkeys(g["name"] for g in row.gates if not g["passed"]))
        parts += wrapped(f"{head}{row.claim}", "", pad) + wrapped(f"-> {row.label}", pad)
        if failed:
            alone = f" (the rule alone: {row.ungated})" if row.ungated else ""
            parts += wrapped(f"failed gates: {failed}{alone}", pad)
    parts += ["", *wrapped("Each claim's numbers, rule, gates, tests and rows: `tvr claims "
                           "--format markdown` (results/REPORT.md), or --format json.", "")]
    return "\n".join(parts) + "\n"


def _markdown(table: pd.DataFrame) -> str:
    summary = pd.DataFrame({"#": range(1, len(table) + 1), "claim": table["claim"],
                            "verdict": table["label"]})
    parts = [counts(table) + ".", "", markdown_table(summary.map(_cell)), ""]
    for i, row in enumerate(table.itertuples(index=False), start=1):
        parts += [f"**{i}. {row.claim}** ({row.claim_kind}): {row.label}.", ""]
        if row.ungated:
            # one name per failed gate kind (the baselines gate is judged on BLEU and chrF)
            names = ", ".join(dict.fromkeys(g["name"] for g in row.gates if not g["passed"]))
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

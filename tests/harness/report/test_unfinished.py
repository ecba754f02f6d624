"""Runs planned or started without a row: the `finished` gate of trained claims."""

from __future__ import annotations

import pandas as pd
import torch

import experiments
from experiments.rematch import MQAR_CPU_LRS
from harness.plan import read_plan, write_plan
from harness.report.claims import finished_gate
from harness.report.evidence import Stored
from harness.report.unfinished import unfinished
from harness.run.point_locks import Claims
from harness.runner import Context
from harness.train.checkpoint import point_path

POINTS = experiments.points("translation-cpu-converged")[3:6]  # three trained models, seed 0


def _row(point, long_id: bool = False) -> dict:
    return {"point_id": point.config_key if long_id else point.point_id, "status": "ok",
            "model": point.subject, "seed": point.seed}


def test_a_planned_run_without_a_row_is_unfinished_until_its_row_is_written(tmp_path):
    folder = tmp_path / "s"
    write_plan(folder, POINTS)
    assert [e["point_id"] for e in read_plan(folder)] == [p.point_id for p in POINTS]
    names = [p.point_id.removesuffix(f"-{p.digest}") for p in POINTS]
    assert list(unfinished(folder, pd.DataFrame())) == names  # in plan order
    rows = pd.DataFrame([_row(POINTS[0]), _row(POINTS[1], long_id=True)])  # an older row too
    assert unfinished(folder, rows) == {names[2]: 1}


def test_a_checkpoint_or_a_claim_as_their_writers_name_them_is_a_run_in_flight(tmp_path):
    ctx = Context(torch.device("cpu"), 0.1, tmp_path, "m", False)
    path = point_path(POINTS[0], ctx)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")  # its name is what is read
    Claims(tmp_path / POINTS[1].suite / "results.csv", "cpu", "m").take(POINTS[1].point_id)
    folder = tmp_path / POINTS[0].suite
    assert list(unfinished(folder, pd.DataFrame())) == [f"{POINTS[0].subject} seed 0",
                                                        POINTS[1].point_id]
    assert unfinished(folder, pd.DataFrame([_row(POINTS[0]), _row(POINTS[1])])) == {}


def test_the_gate_names_each_suite_read_and_what_is_left(tmp_path):
    write_plan(tmp_path / "s", POINTS)
    stored = Stored(tmp_path)
    stored.read = [{"suite": "s", "filter": {}}]
    gate = finished_gate(stored)
    assert not gate.passed and "s: 3 planned or started runs without a finished row" in \
        gate.detail
    assert gate.remedy == "let them finish: `tvr run s` measures what is left, resuming a " \
        "stopped run"
    write_plan(tmp_path / "t", POINTS[:1])
    stored.read.append({"suite": "t", "filter": {}})
    assert finished_gate(stored).remedy.startswith(
        "let them finish: `tvr run s`, `tvr run t` each measure what is left")
    stored.read.pop()
    pd.DataFrame([_row(p) for p in POINTS]).to_csv(tmp_path / "s" / "results.csv", index=False)
    assert finished_gate(stored).passed
    failed = [_row(p) for p in POINTS]
    failed[1]["status"] = "error"  # a run that failed: `tvr run s` measures it again
    pd.DataFrame(failed).to_csv(tmp_path / "s" / "results.csv", index=False)
    gate = finished_gate(stored)
    assert not gate.passed and "s: 1 planned or started run without a finished row yet (" \
        f"{POINTS[1].point_id.removesuffix('-' + POINTS[1].digest)}), 1 of them failed" in \
        gate.detail
    outside = {"point_id": "not-planned-s0-000000000000", "status": "error"}
    pd.DataFrame([*failed, outside]).to_csv(tmp_path / "s" / "results.csv", index=False)
    assert "1 of them failed" in finished_gate(stored).detail  # a failure outside the plan: not
    pd.DataFrame([*failed, _row(POINTS[1])]).to_csv(tmp_path / "s" / "results.csv", index=False)
    assert finished_gate(stored).passed  # measured again, ok
    (tmp_path / "s" / "plan.json").write_text("{")  # damaged: said, never read as no plan
    gate = finished_gate(stored)
    assert not gate.passed and "plan.json: not a plan" in gate.detail


def test_a_trained_verdict_waits_for_a_planned_run_and_says_so(tmp_path):
    """Table 2's quality claim supports on its rows, until the suite's plan holds a run with
    no row yet: then inconclusive, the `finished` gate naming it."""
    from harness.report.claims import judge
    from harness.report.verdicts import INCONCLUSIVE, SUPPORTS
    from tests.harness.report.test_claim_table2_converged import CONVERGED, QUALITY, _converged

    _converged(tmp_path)
    assert judge(QUALITY, Stored(tmp_path)).verdict == SUPPORTS
    write_plan(tmp_path / CONVERGED, POINTS[:1])  # a point of the suite, not yet measured
    e = judge(QUALITY, Stored(tmp_path))
    (gate,) = [g for g in e.gates if g.name == "finished"]
    assert e.verdict == INCONCLUSIVE and e.ungated == SUPPORTS and not gate.passed
    assert POINTS[0].point_id.removesuffix(f"-{POINTS[0].digest}") in gate.detail


def test_a_long_list_of_runs_left_is_named_in_part_and_counted(tmp_path):
    points = experiments.points("mqar-cpu")[:10]
    write_plan(tmp_path / "m", points)
    stored = Stored(tmp_path)
    stored.read = [{"suite": "m", "filter": {}}]
    gate = finished_gate(stored)
    assert "m: 10 planned or started runs without a finished row yet" in gate.detail
    # in plan order, a mixer's learning rates named once
    lrs = len(MQAR_CPU_LRS)
    assert f"(mqar-state-train-mixer-lm-self-attention-s0 x{lrs}, mqar-state-train-mixer-lm-" \
        "lstm" in gate.detail


def test_a_pages_block_says_whether_its_suite_has_runs_left_as_the_gate_counts_them(tmp_path):
    """block_rows.runs_text: no plan, nothing said; a failed row a run still to finish; a
    damaged plan, nothing said (the ledger's gate says why)."""
    from harness.report.block_rows import runs_text

    rows = pd.DataFrame([_row(p) for p in POINTS])
    folder = tmp_path / "s"
    folder.mkdir()
    rows.to_csv(folder / "results.csv", index=False)
    assert runs_text(tmp_path, "s", rows) == "3 runs"
    write_plan(folder, POINTS)
    assert runs_text(tmp_path, "s", rows, "variation runs") == \
        "3 variation runs, every planned run finished"
    failed = rows.assign(status=["ok", "error", "ok"])
    failed.to_csv(folder / "results.csv", index=False)
    assert runs_text(tmp_path, "s", failed[failed["status"] == "ok"]) == \
        "2 runs so far, 1 planned or started still to finish"
    (folder / "plan.json").write_text("{")
    assert runs_text(tmp_path, "s", rows) == "3 runs"

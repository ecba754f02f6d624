"""Time before it is spent: `tvr run --dry-run` counts the points to do and done and scales
the reference rows' point time to this machine; the README states `make run`'s total."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import experiments
from harness.cli import cli
from harness.report import readme
from harness.report.estimate import estimate, point_seconds
from harness.results import MACHINE_ENV, append_row, results_path

ROOT = Path(__file__).resolve().parents[3]


def _row(suite: str, point_id: str, machine: str, **values: object) -> dict:
    return {"suite": suite, "point_id": point_id, "device": "cpu", "machine": machine,
            "status": "ok", "threads": 1, **values}


def test_point_seconds_adds_a_resumed_points_earlier_training() -> None:
    rows = pd.DataFrame({"wall_s": [10.0, 164.0, 5.0], "train_s": [8.0, 1262.0, None],
                         "resumed_from_step": [0, 1800, None], "steps_run": [600, 1800, None]})
    assert point_seconds(rows).tolist() == [10.0, 164.0 + 1262.0, 5.0]
    assert point_seconds(pd.DataFrame({"wall_s": [2.5]})).tolist() == [2.5]


def test_estimate_scales_the_reference_machine_and_counts_points_without_one(tmp_path):
    for i in range(3):  # "ref" measured a, b, c; "far" only a; "mine" (this machine) c
        append_row(results_path(tmp_path, "s"), _row("s", "abc"[i], "ref", wall_s=10.0 * (i + 1)))
    append_row(results_path(tmp_path, "s"), _row("s", "a", "far", wall_s=999.0))
    append_row(results_path(tmp_path, "s"), _row("s", "c", "mine", wall_s=999.0))
    append_row(results_path(tmp_path, "s"), _row("s", "b", "ref", wall_s=999.0, device="cuda"))
    for peak, threads in ((4e11, 1), (2e11, 1), (9e11, 2)):  # median at 1 thread: 3e11
        append_row(results_path(tmp_path, "train"),
                   _row("train", f"p{peak}", "ref", threads=threads, peak_flops_per_s=peak))
    guess = estimate(tmp_path, "s", ["a", "b", "c", "d"], "cpu", "mine", 1, lambda: 1.5e11)
    assert (guess.estimated, guess.missing) == (3, 1)
    assert guess.seconds == pytest.approx((10 + 20 + 30) * 2)  # ref's peak is twice this one's
    text = guess.text()
    assert "an estimate" in text and "ref's peak fp32 matmul rate 300 GFLOP/s" in text
    assert "median of 2 of its rows" in text and "1 point to do without a reference" in text


def test_a_reference_without_a_peak_is_not_scaled_nor_is_this_machine_measured(tmp_path):
    append_row(results_path(tmp_path, "s"), _row("s", "a", "ref", wall_s=42.0))

    def never() -> float:
        raise AssertionError("measured for nothing")

    guess = estimate(tmp_path, "s", ["a"], "cpu", "mine", 1, never)
    assert guess.seconds == 42.0 and "not scaled" in guess.text()
    none = estimate(tmp_path, "s", ["z"], "cpu", "mine", 1, never)
    assert none.estimated == 0 and "no expected time" in none.text()
    assert estimate(tmp_path, "s", [], "cpu", "mine", 1, never).text() == "nothing to measure"


def test_dry_run_lists_points_to_do_counts_done_and_estimates(tmp_path, monkeypatch):
    ids = [p.point_id for p in experiments.points("smoke")]
    path = results_path(tmp_path, "smoke")
    for i in ids:
        append_row(path, _row("smoke", i, "ref", wall_s=10.0, peak_flops_per_s=1e11))
    for i in ids[:2]:
        append_row(path, _row("smoke", i, "me", wall_s=1.0))
    monkeypatch.setenv(MACHINE_ENV, "me")
    monkeypatch.setattr("harness.measure.compare.peak_rate", lambda device, threads: 5e10)
    result = CliRunner().invoke(cli, ["run", "smoke", "--device", "cpu", "--dry-run",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    *todo, last = result.output.splitlines()
    assert todo == ids[2:]
    todo_n = len(ids) - 2
    assert f": {todo_n} to do, 2 already done on this machine (me, cpu) in {path}" in last
    # 10 s each on ref, whose peak (100 GFLOP/s) is twice this machine's
    assert re.search(rf"expected time about {todo_n * 20} s \(an estimate: {todo_n} of them "
                     rf"took {todo_n * 10} s of point time on ref", last), last
    assert "dry run: nothing measured" in last
    again = CliRunner().invoke(cli, ["run", "smoke", "--device", "cpu", "--dry-run",
                                     "--no-resume", "--out", str(tmp_path)])
    assert again.output.splitlines()[:-1] == ids and "none skipped" in again.output


def test_make_run_suites_are_the_makefiles_and_the_readme_states_their_total():
    make = (ROOT / "Makefile").read_text()
    target = make.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert tuple(re.findall(r"tvr run (\S+)", target)) == readme.MAKE_RUN
    block = readme.run_times(ROOT / "results")
    total = float(re.match(r"`make run`: (\d+) s", block)[1])
    parts = [float(s) for s in re.findall(r" points, (\d+) s on ", block)]
    assert len(parts) == len(readme.MAKE_RUN) and abs(total - sum(parts)) <= len(parts)
    assert "wall time" in block and "--dry-run" in block


def test_the_readme_claims_table_marks_identity_checks(monkeypatch):
    table = pd.DataFrame({"claim": ["a cost", "PE is linear"], "verdict": ["supports"] * 2,
                          "kind": ["empirical", "identity check"], "gates": [[], []]})
    monkeypatch.setattr(readme, "ledger", lambda out: table)
    lines = readme.claims(Path("results")).splitlines()
    assert re.match(r"\| claim +\| verdict +\| kind +\|", lines[2])
    assert re.search(r"\| PE is linear +\| supports +\| identity check +\|", lines[-1])


def test_a_dry_run_for_cuda_without_one_lists_and_estimates_unscaled(tmp_path, monkeypatch):
    ids = [p.point_id for p in experiments.points("smoke")]
    for i in ids:
        append_row(results_path(tmp_path / "gpu", "smoke"),
                   _row("smoke", i, "gpu-box", device="cuda", wall_s=1.0, threads=16,
                        peak_flops_per_s=1e14))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    result = CliRunner().invoke(cli, ["run", "smoke", "--device", "cuda", "--dry-run",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[:-1] == ids
    assert (f"expected time about {len(ids)} s (an estimate: {len(ids)} of them took "
            f"{len(ids)} s of point time on gpu-box, summed; not scaled to this machine: no "
            "cuda device here") in result.output

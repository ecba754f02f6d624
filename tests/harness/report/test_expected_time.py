"""Time before it is spent: `tvr run --dry-run` and `tvr estimate` count the points to do and
done and scale the reference rows' point time to this machine by one stable rule (unscaled on a
machine of the reference's kind, else by median peak matmul rates, never by one rate measured
on a busy machine); the sweep's bar counts the same seconds; the README states `make run`'s
total, within 20 minutes."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import experiments
from harness.cli import cli
from harness.machines import MACHINE_ENV
from harness.report import readme
from harness.report.expected_time import (
    MAKE_RUN,
    MAKE_RUN_BUDGET_S,
    Kind,
    NoRate,
    estimate,
    point_seconds,
    point_weights,
)
from harness.results import append_row, results_path
from harness.run.progress import progress_bar

ROOT = Path(__file__).resolve().parents[3]


def _row(suite: str, point_id: str, machine: str, **values: object) -> dict:
    return {"suite": suite, "point_id": point_id, "device": "cpu", "machine": machine,
            "status": "ok", "threads": 1, **values}


def test_point_seconds_adds_a_resumed_points_earlier_training() -> None:
    rows = pd.DataFrame({"wall_s": [10.0, 164.0, 5.0], "train_s": [8.0, 1262.0, None],
                         "resumed_from_step": [0, 1800, None], "steps_run": [600, 1800, None]})
    assert point_seconds(rows).tolist() == [10.0, 164.0 + 1262.0, 5.0]
    assert point_seconds(pd.DataFrame({"wall_s": [2.5]})).tolist() == [2.5]


def _three_points(tmp_path: Path, **ref: object) -> None:
    """"ref" measured a, b, c (10, 20, 30 s); "far" only a; "mine" (this machine) c; and
    "ref"'s peak rate in 3 training rows, median 3e11 at 1 thread."""
    for i in range(3):
        append_row(results_path(tmp_path, "s"),
                   _row("s", "abc"[i], "ref", wall_s=10.0 * (i + 1), **ref))
    append_row(results_path(tmp_path, "s"), _row("s", "a", "far", wall_s=999.0))
    append_row(results_path(tmp_path, "s"), _row("s", "c", "mine", wall_s=999.0))
    append_row(results_path(tmp_path, "s"), _row("s", "b", "ref", wall_s=999.0, device="cuda"))
    for peak, threads in ((4e11, 1), (2e11, 1), (9e11, 2)):  # median at 1 thread: 3e11
        append_row(results_path(tmp_path, "train"),
                   _row("train", f"p{peak}", "ref", threads=threads, peak_flops_per_s=peak))


def never() -> float:
    raise AssertionError("measured for nothing")


def test_estimate_scales_the_reference_machine_and_counts_points_without_one(tmp_path):
    _three_points(tmp_path, device_name="CPU A", cpu_capability="AVX2")
    here = Kind("cpu", "CPU B", "AVX2")  # another kind: scaled by the peak rates
    guess = estimate(tmp_path, "s", ["a", "b", "c", "d"], "cpu", "mine", 1, lambda: 1.5e11,
                     here)
    assert (guess.estimated, guess.missing) == (3, 1)
    assert guess.seconds == pytest.approx((10 + 20 + 30) * 2)  # ref's peak is twice this one's
    text = guess.text()
    assert "an estimate" in text and "ref's peak fp32 matmul rate 300 GFLOP/s" in text
    assert "median of 2 of its rows" in text and "1 point to do without a reference" in text
    assert "median of 5 measured just now" in text


def test_a_point_without_its_own_row_counts_at_its_other_seeds_median(tmp_path):
    """Seeds 1 and 2 of a configuration whose seed 0 (10 s) and 3 (30 s) the reference
    measured count 20 s each; a configuration with no seed measured is not estimated."""
    for point_id, wall in (("x-s0", 10.0), ("x-s3", 30.0), ("y-s0", 5.0)):
        append_row(results_path(tmp_path, "s"), _row("s", point_id, "ref", wall_s=wall,
                                                     device_name="CPU A"))
    alike = {f"{c}-s{i}": f"{c}-s0" for c in "xyz" for i in range(4)}
    guess = estimate(tmp_path, "s", ["x-s1", "x-s2", "y-s0", "z-s1"], "cpu", "mine", 1,
                     never, Kind("cpu", "CPU A"), alike)
    assert (guess.estimated, guess.missing, guess.seconds) == (3, 1, 20 + 20 + 5)
    assert guess.basis.startswith("1 of them took 5 s of point time on ref, summed, 2 counted "
                                  "at the median time of their other seeds on ref; not scaled")
    alone = estimate(tmp_path, "s", ["x-s1"], "cpu", "mine", 1, never, Kind("cpu", "CPU A"))
    assert (alone.estimated, alone.missing) == (0, 1)  # without `alike`: its own rows only


def test_a_machine_of_the_references_kind_is_not_scaled_nor_measured(tmp_path):
    """The same CPU model and ISA: the reference's seconds as they are, whatever a rate
    measured now would say (on a loaded machine one said 0.9, 1.8 and 3 within a minute)."""
    _three_points(tmp_path, device_name="AMD EPYC", cpu_capability="AVX512")
    guess = estimate(tmp_path, "s", ["a", "b", "c"], "cpu", "mine", 1, never,
                     Kind("cpu", "AMD EPYC", "AVX512"))
    assert guess.seconds == 60.0
    assert "not scaled: this machine is of ref's kind (cpu AMD EPYC, AVX512)" in guess.text()
    other_isa = estimate(tmp_path, "s", ["a", "b"], "cpu", "mine", 1, lambda: 3e11,
                         Kind("cpu", "AMD EPYC", "AVX2"))
    assert "times 1: ref's peak" in other_isa.text()  # another ISA: another kind, scaled


def test_this_machines_own_rates_stand_before_one_measured_now(tmp_path):
    _three_points(tmp_path)
    for i, peak in enumerate((1e11, 1.5e11, 9e11)):  # median 1.5e11: half the reference's
        append_row(results_path(tmp_path, "train"),
                   _row("train", f"m{i}", "mine", peak_flops_per_s=peak))
    guess = estimate(tmp_path, "s", ["a", "b", "c"], "cpu", "mine", 1, never,
                     Kind("cpu", "CPU B"))
    assert guess.seconds == pytest.approx(120.0)
    assert "median of 3 of its rows' peak_flops_per_s" in guess.text()


def test_a_busy_machine_gives_no_rate_and_the_estimate_says_so_unscaled(tmp_path):
    _three_points(tmp_path)

    def busy() -> float:
        raise NoRate("this machine is busy now (load average 6.2 on 2 usable CPUs)")

    guess = estimate(tmp_path, "s", ["a", "b", "c"], "cpu", "mine", 1, busy,
                     Kind("cpu", "CPU B"))
    assert guess.seconds == 60.0
    assert "not scaled to this machine: this machine is busy now (load average 6.2" in \
        guess.text()


def test_a_reference_without_a_peak_is_not_scaled_nor_is_this_machine_measured(tmp_path):
    append_row(results_path(tmp_path, "s"), _row("s", "a", "ref", wall_s=42.0))
    guess = estimate(tmp_path, "s", ["a"], "cpu", "mine", 1, never)
    assert guess.seconds == 42.0 and "not scaled" in guess.text()
    none = estimate(tmp_path, "s", ["z"], "cpu", "mine", 1, never)
    assert none.estimated == 0 and "no expected time" in none.text()
    assert none.text().endswith("`tvr suites --long`)")  # where its cost is stated
    assert estimate(tmp_path, "s", [], "cpu", "mine", 1, never).text() == "nothing to measure"


def test_the_bar_counts_expected_seconds_a_long_point_moves_it_as_far(tmp_path, capsys):
    """75 points where the last 9 take most of the time: a bar of points sat at 66/75 through
    them; one of seconds stands at the share of the time done."""
    for i in range(75):
        append_row(results_path(tmp_path, "s"),
                   _row("s", f"p{i}", "ref", wall_s=1.0 if i < 66 else 100.0))
    todo = [f"p{i}" for i in range(75)] + ["new"]
    weights = point_weights(tmp_path, "s", todo, "cpu", "mine")
    assert weights["p0"] == 1.0 and weights["p70"] == 100.0 and weights["new"] == 1.0  # median
    assert point_weights(tmp_path, "s", ["none"], "cpu", "mine") == {}  # the bar counts points
    bar = progress_bar(todo, "s", seconds=[weights[p] for p in todo])
    assert bar.total == pytest.approx(66 + 900 + 1)
    for p in todo[:66]:
        bar.update(weights[p])
    assert bar.n / bar.total < 0.07  # 66 of 75 points, 7% of the expected time
    bar.close()
    assert "s of expected point time" in capsys.readouterr().err


def test_dry_run_lists_points_to_do_counts_done_and_estimates(tmp_path, monkeypatch):
    ids = [p.point_id for p in experiments.points("smoke")]
    path = results_path(tmp_path, "smoke")
    for i in ids:
        append_row(path, _row("smoke", i, "ref", wall_s=10.0, peak_flops_per_s=1e11))
    for i in ids[:2]:
        append_row(path, _row("smoke", i, "me", wall_s=1.0))
    monkeypatch.setenv(MACHINE_ENV, "me")
    rates = itertools.cycle([9e10, 5e10, 1e10, 5e10, 5e10])  # their median counts
    monkeypatch.setattr("harness.measure.compare.peak_rate", lambda device, threads: next(rates))
    monkeypatch.setattr("harness.measure.machine.load_average", lambda: 0.0)  # idle now
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
    assert tuple(re.findall(r"tvr run (\S+)", target)) == MAKE_RUN == readme.MAKE_RUN
    assert target.splitlines()[1].strip() == "$(BIN)/tvr estimate"  # printed before it starts
    block = readme.run_times(ROOT / "results")
    head, outside = block.split("Left out of it", 1)
    total = float(re.match(r"`make run`: (\d+) s", head)[1])
    parts = [float(s) for s in re.findall(r" points, (\d+) s on ", head)]
    assert len(parts) == len(MAKE_RUN) and abs(total - sum(parts)) <= len(parts)
    assert "wall time" in block and "tvr estimate" in block
    for suite in readme.OUTSIDE_MAKE_RUN:  # named, with its measured time
        assert suite not in MAKE_RUN and re.search(rf"`{suite}` \d+ points, \d+ s on", outside)


@pytest.mark.slow
def test_make_run_fits_20_minutes_of_the_reference_rows_point_time(monkeypatch):
    """Every point `make run` would run on 2 cores has a committed reference row, and their
    point times, summed by suite, stay within 20 minutes (they were 2,102 s with
    rematch-quick in it)."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)  # the threads suite's points on 2 cores
    seconds = {}
    for suite in MAKE_RUN:
        ids = [p.point_id for p in experiments.points(suite)]
        guess = estimate(ROOT / "results", suite, ids, "cpu", "a-fresh-clone", 1, None)
        assert guess.missing == 0, f"{suite}: {guess.missing} points without a reference row"
        assert "not scaled" in guess.basis
        seconds[suite] = guess.seconds
    assert sum(seconds.values()) < MAKE_RUN_BUDGET_S, seconds


def test_tvr_estimate_prints_each_suite_and_the_sum(tmp_path, monkeypatch):
    ids = [p.point_id for p in experiments.points("smoke")]
    for i in ids:
        append_row(results_path(tmp_path, "smoke"),
                   _row("smoke", i, "ref", wall_s=10.0, device_name="Some CPU"))
    monkeypatch.setenv(MACHINE_ENV, "me")
    monkeypatch.setattr("harness.measure.machine._cpu_model", lambda: "Some CPU")
    result = CliRunner().invoke(cli, ["estimate", "smoke", "identities", "--device", "cpu",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    smoke, identities, total = result.output.splitlines()
    assert smoke.startswith(f"smoke: {len(ids)} of {len(ids)} points to do; expected time "
                            f"about {duration_of(10 * len(ids))}") and "ref's kind" in smoke
    assert "no expected time" in identities
    assert total.startswith(f"these suites: expected about {duration_of(10 * len(ids))}")
    assert "points without a reference row, not counted" in total


def duration_of(seconds: float) -> str:
    from harness.report.expected_time import duration

    return duration(seconds)


def test_the_readme_claims_table_marks_identity_checks(monkeypatch):
    table = pd.DataFrame({"claim": ["a cost", "PE is linear"], "verdict": ["supports"] * 2,
                          "label": ["supports at 1k parameters", "supports"],
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

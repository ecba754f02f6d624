"""Timing conditions: every timed row says how busy the machine was; a busy sweep warns once;
`tvr compare` names the differences and compares like with like."""

import math
import os
import subprocess
import sys

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.measure.machine import BUSY_SHARE, Occupancy, is_busy, usable_cpus
from harness.report.machines import differences, machine_ratios
from harness.results import read_results, results_path


def test_idle_and_busy_from_measured_quantities() -> None:
    """The flag from the quantities a row records (the machine the test runs on is shared,
    so an idle run is checked here, from numbers, not from the machine)."""
    assert not is_busy(load_avg=0.9, cpu_share=0.97, usable_cpus=2)
    assert not is_busy(load_avg=2.0, cpu_share=BUSY_SHARE, usable_cpus=2)  # at the bounds
    assert is_busy(load_avg=2.5, cpu_share=0.99, usable_cpus=2)  # more runnable than CPUs
    assert is_busy(load_avg=1.0, cpu_share=0.6, usable_cpus=2)  # got 60% of its thread
    assert not is_busy(load_avg=math.nan, cpu_share=math.nan, usable_cpus=2)  # unknown


def test_occupancy_records_load_and_cpu_share() -> None:
    with Occupancy() as o:
        sum(i * i for i in range(200_000))  # CPU work on this thread
    values = o.values()
    assert set(values) == {"load_avg", "cpu_share", "busy"}
    assert 0 < values["cpu_share"] <= 1.5 and values["load_avg"] >= 0


@pytest.fixture
def busy_loops():
    """Processes spinning, two per usable CPU plus one: a one-thread timed point beside them
    gets about a third of a core, far below BUSY_SHARE on any machine (one loop per core
    gave 0.5-0.83 on a 2-core CI machine, which straddles the bound). Where the OS allows,
    this process and the loops are pinned to one CPU for the test, so the load stays off
    the cores that other test workers (pytest-xdist) use."""
    pinned = hasattr(os, "sched_setaffinity")
    if pinned:
        before = os.sched_getaffinity(0)
        cpu = min(before)
        os.sched_setaffinity(0, {cpu})
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(2 * (usable_cpus() or 1) + 1)]
    if pinned:
        for proc in procs:
            os.sched_setaffinity(proc.pid, {cpu})
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        if pinned:
            os.sched_setaffinity(0, before)


@pytest.mark.slow
def test_a_sweep_under_load_flags_its_rows_busy_and_warns_once(tmp_path, busy_loops):
    result = CliRunner().invoke(cli, ["run", "smoke", "--out", str(tmp_path), "--device",
                                      "cpu", "--tracking-uri", "none", "--min-run-time", "0.05"])
    assert result.exit_code == 0, result.output
    rows = read_results(results_path(tmp_path, "smoke"))
    assert rows["busy"].astype(str).eq("True").all(), rows[["load_avg", "cpu_share", "busy"]]
    assert (rows["threads"] == 1).all()  # the reference's threads by default
    assert rows["git_commit"].astype(str).str.fullmatch("[0-9a-f]{40}").all()  # its code
    warnings = [line for line in result.stderr.splitlines() if "busy machine" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: 6 of 6 timed points")


def _rows(machine: str, **conditions) -> pd.DataFrame:
    base = {"suite": "quick", "status": "ok", "machine": machine, "device": "cpu",
            "dtype": "float32", "threads": 1, "busy": False}
    return pd.DataFrame([{**base, "point_id": p, "fwd_ms": t, **conditions}
                         for p, t in (("a", 1.0), ("b", 2.0))])


def test_compare_names_differences_and_compares_like_with_like() -> None:
    ref, mine = _rows("ref"), _rows("mine", threads=2, fwd_ms=3.0)
    assert differences(ref, mine) == ["threads: A 1, B 2 on 2 points"]
    assert machine_ratios(ref, mine).empty  # nothing measured alike
    assert len(machine_ratios(ref, mine, like_only=False)) == 2
    busy = _rows("mine", busy=True)
    assert differences(ref, busy) == ["busy: A False, B True on 2 points"]
    assert machine_ratios(ref, busy).empty
    same = _rows("mine")
    assert differences(ref, same) == [] and len(machine_ratios(ref, same)) == 2
    old = _rows("old").drop(columns="busy")  # rows from before `busy` count as idle
    assert differences(old, same) == []

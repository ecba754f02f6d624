"""`tvr run --dry-run` and `tvr estimate`: the points to do, the points already done, and
their expected time from the reference rows (harness.report.expected_time states the rule)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.cli.common import out_option
from harness.cli.sweeping import REFERENCE_THREADS

if TYPE_CHECKING:
    import torch

    from experiments.spec import Point
    from harness.cli.sweeping import RunOptions
    from harness.report.expected_time import Estimate


def _device(name: str) -> torch.device:
    """The device a sweep would run on; a dry run for CUDA on a machine without it still
    lists and estimates (unscaled), where the sweep itself would refuse."""
    import torch

    cuda = torch.cuda.is_available()
    return torch.device(name if name != "auto" else "cuda" if cuda else "cpu")


def rate_now(device: torch.device) -> Callable[[], float] | None:
    """This machine's peak fp32 matmul rate at the reference rows' threads, the median of
    REPEATS measurements, measured once however often it is asked for; NoRate where the
    machine is busy (load average above its usable CPUs, before or after): a rate measured
    beside other work is not the machine's. None where there is no such device here."""
    import torch

    if device.type == "cuda" and not torch.cuda.is_available():
        return None
    measured: list[float] = []

    def rate() -> float:
        import statistics

        from harness.measure.compare import peak_rate
        from harness.measure.machine import load_average, usable_cpus
        from harness.report.expected_time import REPEATS, NoRate

        if measured:
            return measured[0]

        def busy() -> None:
            load, cpus = load_average(), usable_cpus()
            if device.type == "cpu" and load > cpus:
                raise NoRate(f"this machine is busy now (load average {load:.3g} on {cpus} "
                             "usable CPUs), its rate would not be its own")

        busy()
        threads = torch.get_num_threads()
        torch.set_num_threads(REFERENCE_THREADS)
        try:
            rates = [peak_rate(device, REFERENCE_THREADS) for _ in range(REPEATS)]
        finally:
            torch.set_num_threads(threads)
        busy()
        measured.append(statistics.median(rates))
        return measured[0]

    return rate


def _estimate(out: Path, name: str, points: list[Point], device: torch.device, resume: bool,
              rate: Callable[[], float] | None) -> tuple[list[str], Estimate]:
    """The ids of the points to do (what resume skips: harness.run.sweep.skipped) and their
    expected time."""
    import torch

    from harness.machines import this_machine
    from harness.measure.machine import machine_facts
    from harness.report.expected_time import Kind, estimate
    from harness.results import results_path
    from harness.run.sweep import skipped

    machine = this_machine()
    done, _ = skipped(results_path(out, name), points, device.type, machine, resume)
    todo = [p.point_id for p in points if p.point_id not in done]
    here = None  # a dry run for CUDA without one: no kind here to compare
    if device.type == "cpu" or torch.cuda.is_available():
        facts = machine_facts(device)
        here = Kind(device.type, str(facts.get("device_name", "")),
                    str(facts.get("cpu_capability", "")) if device.type == "cpu" else "")
    alike = {p.point_id: replace(p, seed=0).point_id for p in points}  # a point's seeds
    return todo, estimate(out, name, todo, device.type, machine, REFERENCE_THREADS, rate, here,
                          alike)


def dry_run(suite: str, name: str, points: list[Point], o: RunOptions) -> None:
    """Print the ids of the points a sweep would measure, then one line: how many it would
    skip as done and their expected time from the reference rows in <out>. Writes nothing."""
    from harness.machines import this_machine
    from harness.results import results_path

    device = _device(o.device)
    todo, guess = _estimate(Path(o.out), name, points, device, o.resume, rate_now(device))
    for point_id in todo:
        click.echo(point_id)
    path = results_path(Path(o.out), name)
    skipped = (f"{len(points) - len(todo)} already done on this machine ({this_machine()}, "
               f"{device.type}) in {path}" if o.resume else "none skipped (--no-resume)")
    click.echo(f"{len(points)} points in suite {suite!r}: {len(todo)} to do, {skipped}; "
               f"{guess.text()} (dry run: nothing measured)")


@click.command("estimate", epilog="""\b
Examples:
  tvr estimate                       # make run's suites (the Makefile prints this first)
  tvr estimate rematch-quick mqar-cpu""")
@click.argument("suites", nargs=-1, metavar="[SUITE]...")
@out_option
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="auto = cuda when available, else cpu.")
def estimate_cmd(suites: tuple[str, ...], out: str, device: str) -> None:
    """The expected time of each SUITE's points this machine has still to do (default: the
    suites of `make run`) and their sum: the reference rows' point time, scaled to this
    machine by one rule (not scaled where it is of the reference's kind, else by the two
    machines' median peak matmul rates; docs/results.md). Measures nothing but, where the
    rule needs it, this machine's matmul rate."""
    from harness.cli.points import suite_points
    from harness.report.expected_time import MAKE_RUN, duration

    dev = _device(device)
    rate = rate_now(dev)
    total, lacking, lines = 0.0, 0, []
    for suite in suites or MAKE_RUN:
        name, _, points = suite_points(suite, None)
        todo, guess = _estimate(Path(out), name, points, dev, True, rate)
        total += guess.seconds
        lacking += guess.missing
        lines.append(f"{name}: {len(todo)} of {len(points)} points to do; {guess.text()}")
    which = "make run's suites" if not suites else "these suites"
    without = f"; {lacking} points without a reference row, not counted" if lacking else ""
    click.echo("\n".join(lines))
    click.echo(f"{which}: expected about {duration(total)} of point time on this machine "
               f"({total:.0f} s){without}; training suites with `--executor ray` run one point "
               "per core, so on two or more cores they take less wall time than their sum")

"""`tvr run --dry-run`: the points to do, the points already done, and the expected time."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.cli.sweeping import REFERENCE_THREADS

if TYPE_CHECKING:
    from experiments.spec import Point
    from harness.cli.sweeping import RunOptions


def dry_run(suite: str, name: str, points: list[Point], o: RunOptions) -> None:
    """Print the ids of the points a sweep would measure, then one line: how many it would
    skip as done (what resume skips: harness.run.sweep.skipped) and their expected time
    from the reference rows in <out> (harness.report.estimate). Writes nothing."""
    import torch

    from harness.measure.compare import peak_rate
    from harness.report.estimate import estimate
    from harness.results import results_path, this_machine
    from harness.run.sweep import skipped

    # the device the sweep would run on; a dry run for CUDA on a machine without it still
    # lists and estimates (unscaled), where the sweep itself would refuse
    cuda = torch.cuda.is_available()
    device = torch.device(o.device if o.device != "auto" else "cuda" if cuda else "cpu")
    machine = this_machine()
    path = results_path(Path(o.out), name)
    done, _ = skipped(path, points, device.type, machine, o.resume)
    todo = [p.point_id for p in points if p.point_id not in done]
    for point_id in todo:
        click.echo(point_id)

    def rate() -> float:  # this machine's peak at the reference rows' threads
        threads = torch.get_num_threads()
        torch.set_num_threads(REFERENCE_THREADS)
        try:
            return peak_rate(device, REFERENCE_THREADS)
        finally:
            torch.set_num_threads(threads)

    guess = estimate(Path(o.out), name, todo, device.type, machine, REFERENCE_THREADS,
                     rate if device.type == "cpu" or cuda else None)
    skipped = (f"{len(points) - len(todo)} already done on this machine ({machine}, "
               f"{device.type}) in {path}" if o.resume else "none skipped (--no-resume)")
    click.echo(f"{len(points)} points in suite {suite!r}: {len(todo)} to do, {skipped}; "
               f"{guess.text()} (dry run: nothing measured)")

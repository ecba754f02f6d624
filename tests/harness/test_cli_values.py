"""Values the command line refuses in one line (exit 2) because the run could not honour
them: more threads than the machine has cores."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.cli.common import usable_cpus


@pytest.mark.parametrize("command", [["run", "smoke", "--dry-run"], ["bench", "--tiny"],
                                     ["tune", "translation-cpu-tune", "--summary"]])
def test_more_threads_than_cores_is_refused(command: list[str], tmp_path) -> None:
    """A row said 10000 threads where torch ran on the machine's few: refused instead."""
    too_many = str(usable_cpus() + 1)
    result = CliRunner().invoke(cli, [*command, "--threads", too_many, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    errors = [x for x in result.output.splitlines() if x.startswith("Error")]
    assert len(errors) == 1 and f"{too_many} is more than this machine's" in errors[0]
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_threads_up_to_the_cores_are_taken() -> None:
    from harness.cli.common import Threads

    assert Threads().convert(str(usable_cpus()), None, None) == usable_cpus()

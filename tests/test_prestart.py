"""The tests' pre-imported `tvr` processes (tests/prestart.py) behave as cold ones do where
the tests look: output, exit codes (bad input's 2, a signal's -N), environment, folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import prestart

pytestmark = pytest.mark.slow  # cold processes beside forked ones


def cold(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)


def test_forked_tvr_answers_as_a_cold_one(tmp_path: Path) -> None:
    bad_device = {**os.environ, "TVR_RUN_DEVICE": "no-such-device"}  # read from the child's env
    for args, env in ((["suites"], os.environ), (["run", "smoke", "--dry-run"], os.environ),
                      (["run", "no-such-suite"], os.environ), (["run", "smoke"], bad_device)):
        forked = prestart.run(args, capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=120)
        real = cold(args, tmp_path, dict(env))
        assert (forked.returncode, forked.stdout, forked.stderr) == \
            (real.returncode, real.stdout, real.stderr), args
        assert real.returncode == (2 if "no-such" in " ".join(args) + env.get(
            "TVR_RUN_DEVICE", "") else 0), real.stderr
    assert "TVR_RUN_DEVICE" in real.stderr
    assert not (tmp_path / "results").exists()


def test_a_forked_tvr_dies_of_its_signal_and_ends_its_pipe(tmp_path: Path) -> None:
    proc = prestart.Process(["run", "smoke", "--tracking-uri", "none", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and isinstance(out, str)
    assert proc.poll() == -signal.SIGKILL

"""scripts/gpu-check --dry-run: the lent-GPU script's every step, on CPU at tiny sizes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "gpu-check"
# the dry run measures one layer suite (smoke) in place of both GPU suites: no "complexity"
STEPS = ("environment", "gpu tests", "bench", "fixed tokens", "translation", "figures")


@pytest.mark.slow
def test_gpu_check_dry_run_runs_every_step_and_writes_results(tmp_path):
    # one thread: tiny layers only lose from OpenMP threads waiting on shared cores
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OUT": str(tmp_path / "from-env")}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = (tmp_path / "gpu-check.txt").read_text()
    assert summary in proc.stdout  # the closing table is printed, not only saved
    for step in STEPS:
        assert f"step: {step}" in summary and "TIMED OUT" not in summary
    assert "transformer-layer/sdpa vs TransformerEncoderLayer" in summary
    assert (tmp_path / "bench" / "results.csv").exists()
    assert (tmp_path / "smoke" / "results.csv").exists()
    assert list((tmp_path / "smoke").glob("*.png"))
    assert not (tmp_path / "from-env").exists()  # --out wins over $OUT


@pytest.mark.slow
def test_gpu_check_only_runs_the_steps_named(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path),
                           "--only", "environment"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = (tmp_path / "gpu-check.txt").read_text()
    assert "step: environment" in summary and "step: bench" not in summary
    assert "bench" not in {line.split("|")[1].strip() for line in summary.splitlines()[2:]}
    bad = subprocess.run([sys.executable, str(SCRIPT), "--only", "nonsense"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'nonsense'" in bad.stderr


def test_gpu_check_is_executable_with_a_python_shebang():
    assert os.access(SCRIPT, os.X_OK)
    assert SCRIPT.read_text().startswith("#!/usr/bin/env python3")

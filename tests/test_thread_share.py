"""The test run's thread pools (tests/conftest.py): under pytest-xdist, each worker and every
process it starts use one share of the cores, not a pool of one thread per core each."""

import os
import subprocess
import sys

import numpy  # noqa: F401  (loads OpenBLAS, whose pool threadpoolctl reads)
import pytest
import torch

pytestmark = pytest.mark.slow  # a cold process importing torch

PROBE = ("import numpy, torch, threadpoolctl; print(torch.get_num_threads(), "
         "*[p['num_threads'] for p in threadpoolctl.threadpool_info() if p['user_api'] == 'blas'])")


@pytest.fixture
def share() -> int:
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2:
        pytest.skip("not under pytest-xdist: the pools keep their defaults")
    return int(os.environ["OMP_NUM_THREADS"])


def test_a_worker_and_the_processes_it_starts_use_their_share(share):
    pytest.importorskip("threadpoolctl", reason="threadpoolctl reads the BLAS pool's size")
    from threadpoolctl import threadpool_info

    blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    assert torch.get_num_threads() == share and set(blas) <= {share}, (share, blas)
    child = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                           check=True, timeout=120)
    assert set(map(int, child.stdout.split())) == {share}, child.stdout

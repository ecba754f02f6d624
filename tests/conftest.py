import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import xdist
from packaging.version import Version

# `make test` runs the tests on every core (pytest-xdist, one worker per core). Each worker,
# and every process it starts (a cold `tvr`, the prestarted template, a Ray worker, a server),
# gets its share of the cores for its OpenMP and BLAS thread pools (torch's intra-op threads,
# numpy's OpenBLAS), not a pool of one thread per core in every process, whose threads wait
# on cores the other processes hold. Measured side by side on 2 cores, whole runs took 805
# and 749 CPU-seconds against 823 and 751 when only the workers' own torch pool was limited:
# a small saving, within the machine's own variation. The pools read the variable once, when
# torch or numpy is first imported: this module imports neither at its top, and nothing
# imports them before it. A value the user set is kept.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    # harness.measure.machine.usable_cpus counts the same, but importing it imports torch
    _CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (_CPUS or 1) // _WORKERS)))

# The session's caches, in one folder the first process makes (pytest, or pytest-xdist's
# controller: its workers inherit the variables) and removes when the session ends.
_MINE = "TVR_TEST_TMP" not in os.environ
if _MINE:
    os.environ["TVR_TEST_TMP"] = tempfile.mkdtemp(prefix="tvr-tests-")
_TMP = Path(os.environ["TVR_TEST_TMP"])
for _name in ("mpl", "kernels", "sentence", "store"):
    (_TMP / _name).mkdir(exist_ok=True)
# MLflow and matplotlib write caches/telemetry under $HOME; keep tests hermetic.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MPLCONFIGDIR", str(_TMP / "mpl"))
os.environ.setdefault("MPLBACKEND", "Agg")
# Kernel choices are measured once per test session, never read from or kept in $HOME.
os.environ.setdefault("TVR_KERNEL_CACHE", str(_TMP / "kernels" / "kernels.json"))
# So are the sentence-level tests of the ledger (the committed results' run once per session).
os.environ.setdefault("TVR_SENTENCE_CACHE", str(_TMP / "sentence"))
# So is the empty MLflow store new stores are copied from (built by the session's first one).
os.environ.setdefault("TVR_STORE_TEMPLATE", str(_TMP / "store" / "empty.db"))
# Where PYTHONDONTWRITEBYTECODE is set (by a shell's profile: the Makefile unexports it), each
# process the tests start would compile every module it imports again: importing torch, MLflow,
# pandas, scipy and the harness took 8 s of CPU so against 4 s from bytecode, and the tests
# start hundreds of processes. Bytecode goes to the session's folder instead, written by the
# first process that imports a module and read by the rest: still none beside the sources.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = str(_TMP / "bytecode")
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.dont_write_bytecode = False


def pytest_unconfigure(config: pytest.Config) -> None:
    if _MINE:  # a server a test left behind may still hold a file: the OS cleans /tmp then
        shutil.rmtree(_TMP, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords and not _cuda():
            item.add_marker(skip_gpu)
        # `--dist loadgroup`: a module's own group (its xdist_group mark, e.g. "ray"), else
        # the module on one worker when its tests share a module fixture
        if not any(item.iter_markers("xdist_group")) and _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def pytest_configure(config: pytest.Config) -> None:
    """Refuse `--dist loadgroup` where it silently does not group: pytest 9.2's structured
    node ids drop the group suffix pytest-xdist (up to 3.8) appends, so every shared server,
    cluster or trained fixture would be built once per worker."""
    if config.getvalue("dist") == "loadgroup" and \
            Version(pytest.__version__) >= Version("9.2") and \
            Version(xdist.__version__) <= Version("3.8.0"):
        raise pytest.UsageError(f"--dist loadgroup does not group tests with pytest "
                                f"{pytest.__version__} and pytest-xdist {xdist.__version__}: "
                                "install the pytest pyproject.toml allows (<9.2)")


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test shares a module-scoped fixture (a server, a Ray cluster, trained
    points): its module's tests then run on one worker, so the fixture is built once."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(defs and defs[-1].scope == "module"
                                    for defs in info.name2fixturedefs.values())


def _cuda() -> bool:
    import torch  # here, not at the top: after OMP_NUM_THREADS is set

    return torch.cuda.is_available()


@pytest.fixture(autouse=True)
def _seed() -> None:
    import torch

    torch.manual_seed(0)

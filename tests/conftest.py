import os
import tempfile

import pytest
import torch

# MLflow and matplotlib write caches/telemetry under $HOME; keep tests hermetic.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="tvr-mpl-"))
os.environ.setdefault("MPLBACKEND", "Agg")
# Kernel choices are measured once per test session, never read from or kept in $HOME.
os.environ.setdefault("TVR_KERNEL_CACHE",
                      os.path.join(tempfile.mkdtemp(prefix="tvr-kernels-"), "kernels.json"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_slow = pytest.mark.skip(reason="slow: pass --runslow")
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "slow" in item.keywords and not config.getoption("--runslow"):
            item.add_marker(skip_slow)
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)

"""harness.measure.kernel_choice: the linear backend measured once per machine, cached, set."""

import json

import pytest
import torch

from harness.measure import kernel_choice
from harness.measure.flops import OpRecorder
from models import kernels

needs_onednn = pytest.mark.skipif(kernels._ONEDNN is None, reason="build without oneDNN")
CPU, FP32 = torch.device("cpu"), torch.float32
TINY = dict(sizes=((8, 16, 16),), reps=2, min_run_time=0.001)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    """No choice carried over from another test, and the backend restored afterwards."""
    monkeypatch.setattr(kernel_choice, "_chosen", {})
    monkeypatch.delenv(kernels.DISABLE_ONEDNN_ENV, raising=False)
    saved = kernels._backend
    yield
    kernels._backend = saved


def _timings(ms: dict[str, float]):
    calls = []

    def fake(backends, device, dtype, **kw):
        calls.append(backends)
        return {name: ms[name] for name in backends}
    return fake, calls


def _refuse(*args, **kwargs):
    raise AssertionError("measured although the choice was known")


@needs_onednn
def test_the_faster_backend_is_chosen_set_and_recorded(tmp_path, monkeypatch):
    for faster, slower in ((kernels.F_LINEAR, kernels.ONEDNN), (kernels.ONEDNN, kernels.F_LINEAR)):
        fake, calls = _timings({faster: 1.0, slower: 2.0})
        monkeypatch.setattr(kernel_choice, "time_linear", fake)
        monkeypatch.setattr(kernel_choice, "_chosen", {})
        cols = kernel_choice.use_measured_linear(CPU, FP32, path=tmp_path / f"{faster}.json",
                                                 machine="m1")
        assert cols["linear_kernel"] == faster and len(calls) == 1
        assert f"{faster}:1;{slower}:2" in cols["linear_kernel_ms"] \
            or f"{slower}:2;{faster}:1" in cols["linear_kernel_ms"]
        assert kernels.linear_backend("cpu", FP32) == faster
        with OpRecorder() as rec:
            kernels.linear(torch.randn(2, 16), torch.randn(8, 16))
        assert ("mkldnn._linear_pointwise" in rec.ops) == (faster == kernels.ONEDNN)


@needs_onednn
def test_the_choice_is_kept_per_machine_and_measured_once(tmp_path, monkeypatch):
    path = tmp_path / "kernels.json"
    first = kernel_choice.choose_linear(CPU, FP32, path=path, machine="m1", **TINY)
    assert first.backend in (kernels.ONEDNN, kernels.F_LINEAR)
    assert set(first.timings_ms) == {kernels.ONEDNN, kernels.F_LINEAR}
    stored = json.loads(path.read_text())
    (key, entry), = stored["m1"].items()
    assert key.startswith("cpu/float32/threads=") and entry["linear"] == first.backend
    # another process of the same machine reads it; another machine measures its own
    monkeypatch.setattr(kernel_choice, "_chosen", {})
    monkeypatch.setattr(kernel_choice, "time_linear", _refuse)
    assert kernel_choice.choose_linear(CPU, FP32, path=path, machine="m1") == first
    fake, calls = _timings({kernels.ONEDNN: 3.0, kernels.F_LINEAR: 1.0})
    monkeypatch.setattr(kernel_choice, "time_linear", fake)
    assert kernel_choice.choose_linear(CPU, FP32, path=path, machine="m2").backend \
        == kernels.F_LINEAR
    assert calls and set(json.loads(path.read_text())) == {"m1", "m2"}


@needs_onednn
def test_an_unreadable_cache_is_measured_over_with_a_warning(tmp_path, monkeypatch, capsys):
    path = tmp_path / "kernels.json"
    path.write_text("{not json")
    fake, calls = _timings({kernels.ONEDNN: 1.0, kernels.F_LINEAR: 2.0})
    monkeypatch.setattr(kernel_choice, "time_linear", fake)
    assert kernel_choice.choose_linear(CPU, FP32, path=path, machine="m").backend \
        == kernels.ONEDNN
    assert "unreadable" in capsys.readouterr().err and calls
    assert json.loads(path.read_text())["m"]


def test_disabled_onednn_leaves_f_linear_unmeasured(tmp_path, monkeypatch):
    monkeypatch.setenv(kernels.DISABLE_ONEDNN_ENV, "1")
    monkeypatch.setattr(kernel_choice, "time_linear", _refuse)
    cols = kernel_choice.use_measured_linear(CPU, FP32, path=tmp_path / "k.json", machine="m")
    assert cols == {"linear_kernel": kernels.F_LINEAR}
    assert kernels.linear_backend("cpu", FP32) == kernels.F_LINEAR
    assert not (tmp_path / "k.json").exists()
    with OpRecorder() as rec:
        kernels.linear(torch.randn(2, 16), torch.randn(8, 16))
    assert "mkldnn._linear_pointwise" not in rec.ops


def test_other_dtypes_have_one_candidate(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_choice, "time_linear", _refuse)
    saved = kernels._backend
    cols = kernel_choice.use_measured_linear(CPU, torch.float64, path=tmp_path / "k.json")
    assert cols == {"linear_kernel": kernels.F_LINEAR}
    assert kernels._backend == saved  # the float32 choice is left alone


@needs_onednn
def test_time_linear_times_every_candidate():
    ms = kernel_choice.time_linear((kernels.ONEDNN, kernels.F_LINEAR), CPU, FP32, **TINY)
    assert set(ms) == {kernels.ONEDNN, kernels.F_LINEAR}
    assert all(v > 0 for v in ms.values())

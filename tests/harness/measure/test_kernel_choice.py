"""harness.measure.kernel_choice: each swap point's kernel measured once per host, cached,
set."""

import json

import pytest
import torch

from harness.measure import kernel_choice, kernels
from harness.measure.flops import OpRecorder

needs_onednn = pytest.mark.skipif(kernels._ONEDNN is None, reason="build without oneDNN")
CPU, FP32 = torch.device("cpu"), torch.float32
TINY = dict(sizes=((8, 16, 16),), reps=2, min_run_time=0.001)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    """No choice carried over from another test, and the backend restored afterwards."""
    monkeypatch.setattr(kernel_choice, "_chosen", {})
    monkeypatch.delenv(kernels.DISABLE_ONEDNN_ENV, raising=False)
    monkeypatch.delenv(kernels.DISABLE_ENV, raising=False)
    saved, choices = kernels._backend, dict(kernels._choice)
    yield
    kernels._backend = saved
    kernels._choice.update(choices)


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
        _fake_all(monkeypatch)
        fake, calls = _timings({faster: 1.0, slower: 2.0})
        monkeypatch.setattr(kernel_choice, "time_linear", fake)
        monkeypatch.setattr(kernel_choice, "_chosen", {})
        cols = kernel_choice.use_measured_kernels(CPU, FP32, path=tmp_path / f"{faster}.json",
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
    first = kernel_choice.choose(kernels.LINEAR, CPU, FP32, path=path, machine="m1", **TINY)
    assert first.backend in (kernels.ONEDNN, kernels.F_LINEAR)
    assert set(first.timings_ms) == {kernels.ONEDNN, kernels.F_LINEAR}
    stored = json.loads(path.read_text())
    (key, entry), = stored["m1"].items()
    assert key.startswith("cpu/float32/threads=") and entry["linear"] == first.backend
    # another process of the same machine reads it; another machine measures its own
    monkeypatch.setattr(kernel_choice, "_chosen", {})
    monkeypatch.setattr(kernel_choice, "time_linear", _refuse)
    assert kernel_choice.choose(kernels.LINEAR, CPU, FP32, path=path, machine="m1") == first
    fake, calls = _timings({kernels.ONEDNN: 3.0, kernels.F_LINEAR: 1.0})
    monkeypatch.setattr(kernel_choice, "time_linear", fake)
    assert kernel_choice.choose(kernels.LINEAR, CPU, FP32, path=path, machine="m2").backend \
        == kernels.F_LINEAR
    assert calls and set(json.loads(path.read_text())) == {"m1", "m2"}


@needs_onednn
def test_a_machine_label_shares_its_hosts_choice(tmp_path, monkeypatch):
    """$TVR_MACHINE names rows (one label may cover several sittings or hosts); the kernel
    choice depends on the host, so a new label on a measured host measures nothing."""
    path = tmp_path / "kernels.json"
    monkeypatch.setenv("TVR_MACHINE", "label-one")
    first = kernel_choice.choose(kernels.LINEAR, CPU, FP32, path=path, **TINY)
    assert set(json.loads(path.read_text())) == {kernel_choice.this_host()}
    monkeypatch.setattr(kernel_choice, "_chosen", {})
    monkeypatch.setattr(kernel_choice, "time_linear", _refuse)
    monkeypatch.setenv("TVR_MACHINE", "label-two")
    assert kernel_choice.choose(kernels.LINEAR, CPU, FP32, path=path) == first


@needs_onednn
def test_an_unreadable_cache_is_measured_over_with_a_warning(tmp_path, monkeypatch, capsys):
    path = tmp_path / "kernels.json"
    path.write_text("{not json")
    fake, calls = _timings({kernels.ONEDNN: 1.0, kernels.F_LINEAR: 2.0})
    monkeypatch.setattr(kernel_choice, "time_linear", fake)
    assert kernel_choice.choose(kernels.LINEAR, CPU, FP32, path=path, machine="m").backend \
        == kernels.ONEDNN
    assert "unreadable" in capsys.readouterr().err and calls
    assert json.loads(path.read_text())["m"]


def test_disabled_onednn_leaves_f_linear_unmeasured(tmp_path, monkeypatch):
    monkeypatch.setenv(kernels.DISABLE_ONEDNN_ENV, "1")
    _fake_all(monkeypatch, refuse=(kernels.LINEAR,))
    cols = kernel_choice.use_measured_kernels(CPU, FP32, path=tmp_path / "k.json", machine="m")
    assert cols["linear_kernel"] == kernels.F_LINEAR and "linear_kernel_ms" not in cols
    assert kernels.linear_backend("cpu", FP32) == kernels.F_LINEAR
    (entry,) = json.loads((tmp_path / "k.json").read_text())["m"].values()
    assert "linear" not in entry  # one candidate: nothing measured, nothing kept
    with OpRecorder() as rec:
        kernels.linear(torch.randn(2, 16), torch.randn(8, 16))
    assert "mkldnn._linear_pointwise" not in rec.ops


def test_other_dtypes_have_one_candidate(tmp_path, monkeypatch):
    _fake_all(monkeypatch, refuse=(kernels.LINEAR,))
    saved = kernels._backend
    cols = kernel_choice.use_measured_kernels(CPU, torch.float64, path=tmp_path / "k.json")
    assert cols["linear_kernel"] == kernels.F_LINEAR and "linear_kernel_ms" not in cols
    assert kernels._backend == saved  # the float32 choice is left alone


@needs_onednn
def test_time_linear_times_every_candidate():
    ms = kernel_choice.time_linear((kernels.ONEDNN, kernels.F_LINEAR), CPU, FP32, **TINY)
    assert set(ms) == {kernels.ONEDNN, kernels.F_LINEAR}
    assert all(v > 0 for v in ms.values())


# the slower candidate of each swap point, faked: the other one must win
SLOWER = {kernels.LINEAR: kernels.F_LINEAR, kernels.QKV: kernels.QKV_SPLIT,
          kernels.FFN: kernels.FFN_SEPARATE, kernels.ATTENTION: kernels.ATTN_MATH}


def _fake_all(monkeypatch, refuse: tuple[str, ...] = ()):
    calls = []
    for point, slower in SLOWER.items():
        def fake(backends, device, dtype, slower=slower, point=point, **kw):
            calls.append(point)
            return {name: 2.0 if name == slower else 1.0 for name in backends}
        monkeypatch.setattr(kernel_choice, f"time_{point}", _refuse if point in refuse else fake)
    return calls


@needs_onednn
def test_every_swap_point_is_chosen_set_and_recorded(tmp_path, monkeypatch):
    calls = _fake_all(monkeypatch)
    cols = kernel_choice.use_measured_kernels(CPU, FP32, path=tmp_path / "k.json", machine="m")
    assert calls == list(kernel_choice.POINTS)  # the linear maps first: the others use them
    assert {k: v for k, v in cols.items() if not k.endswith("_ms")} == {
        "linear_kernel": kernels.ONEDNN, "qkv_kernel": kernels.QKV_FUSED,
        "ffn_kernel": kernels.FFN_ONEDNN_RELU, "attention_kernel": kernels.ATTN_SDPA}
    assert cols["ffn_kernel_ms"] == "onednn-relu:1;linear+relu:2"
    for point in SLOWER:
        assert kernels.backend(point, "cpu", FP32) == cols[f"{point}_kernel"]
    with OpRecorder() as rec:
        kernels.linear_relu(torch.randn(2, 16), torch.randn(8, 16))
    assert "aten.relu" not in rec.ops and "mkldnn._linear_pointwise" in rec.ops


def test_a_cache_of_the_linear_choice_alone_measures_the_other_points(tmp_path, monkeypatch):
    path = tmp_path / "k.json"
    key = kernel_choice._key(CPU, FP32)
    path.write_text(json.dumps({"m": {key: {"linear": kernels.F_LINEAR,
                                            "linear_ms": {kernels.F_LINEAR: 1.0}}}}))
    calls = _fake_all(monkeypatch, refuse=(kernels.LINEAR,))
    cols = kernel_choice.use_measured_kernels(CPU, FP32, path=path, machine="m")
    assert cols["linear_kernel"] == kernels.F_LINEAR and calls == [
        p for p in kernel_choice.POINTS if len(kernels.candidates(p, "cpu", FP32)) > 1
        and p != kernels.LINEAR]
    entry = json.loads(path.read_text())["m"][key]
    assert entry["linear"] == kernels.F_LINEAR and entry["qkv"] == kernels.QKV_FUSED
    assert entry["attention"] == kernels.ATTN_SDPA


def test_a_disabled_candidate_is_neither_timed_nor_chosen(tmp_path, monkeypatch):
    monkeypatch.setenv(kernels.DISABLE_ENV, "attention:sdpa,qkv:fused")
    monkeypatch.setenv(kernels.DISABLE_ONEDNN_ENV, "1")
    _fake_all(monkeypatch, refuse=tuple(SLOWER))
    cols = kernel_choice.use_measured_kernels(CPU, FP32, path=tmp_path / "k.json", machine="m")
    assert cols == {"linear_kernel": kernels.F_LINEAR, "qkv_kernel": kernels.QKV_SPLIT,
                    "ffn_kernel": kernels.FFN_SEPARATE, "attention_kernel": kernels.ATTN_MATH}
    assert kernels.backend(kernels.ATTENTION, "cpu", FP32) == kernels.ATTN_MATH


@pytest.mark.parametrize("point,sizes", [(kernels.QKV, ((8, 16, 16),)),
                                         (kernels.FFN, ((8, 16, 32),)),
                                         (kernels.ATTENTION, ((1, 2, 8, 4),))])
def test_each_point_times_every_candidate(point, sizes):
    names = kernels.candidates(point, CPU, FP32)
    ms = kernel_choice._timer(point)(names, CPU, FP32, sizes=sizes, reps=2, min_run_time=0.001)
    assert set(ms) == set(names) and all(v > 0 for v in ms.values())

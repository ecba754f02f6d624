"""`tvr bench` and its pieces: reference layers with copied weights, counted FLOPs that do not
depend on the kernel, interleaved timing, comparison rows, and the --dtype / --compile options
of `tvr run`."""

import importlib.util
import os
import shutil

import pytest
import torch
from click.testing import CliRunner

import experiments
import models
from experiments import bench as grids
from harness.cli import cli
from harness.measure import kernels
from harness.measure.compare import interleaved
from harness.measure.flops import count_flops
from harness.measure.timing import layer_calls
from harness.results import read_results, results_path
from harness.run.runner_table import run_compare, variant
from harness.runner import Context
from models.reference import torch_reference

B, N, D, H = 2, 12, 16, 4
FAST = ["--min-run-time", "0.01", "--tracking-uri", "none", "--device", "cpu"]


pytestmark = pytest.mark.usefixtures("one_thread")


def tvr(*args: str):
    return CliRunner().invoke(cli, list(args))


def _pair(kind: str, **cfg):
    ours = models.mixer(kind, D, **cfg).train()
    return ours, torch_reference(kind, ours)


# ---------------------------------------------------------------- reference layers


@pytest.mark.parametrize("cfg", [dict(attn_backend="sdpa"), dict(attn_backend="math"),
                                 dict(norm="pre", attn_backend="sdpa")])
def test_copied_weights_make_transformer_layer_outputs_and_grads_equal(cfg):
    ours, ref = _pair("transformer-layer", n_heads=H, **cfg)
    assert isinstance(ref, torch.nn.TransformerEncoderLayer) and ref.norm_first == (
        cfg.get("norm") == "pre")
    x = torch.randn(B, N, D, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    out, expected = ours(x), ref(x_ref)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.ffn.linear1.weight.grad, ref.linear1.weight.grad,
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("impl", ["fused", "cell"])
def test_copied_weights_make_recurrent_outputs_equal(kind, impl):
    ours, ref = _pair(kind, rnn_impl=impl)
    assert type(ref.rnn) is (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)
    x = torch.randn(B, N, D)
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)


def test_reference_is_independent_of_ours():
    ours, ref = _pair("lstm")
    with torch.no_grad():
        ours.rnn.rnn.weight_hh_l0.add_(1.0)
    x = torch.randn(B, N, D)
    assert not torch.allclose(ours(x), ref(x))  # copied, not shared: timing two real layers


def test_no_reference_for_configs_pytorch_lacks():
    with pytest.raises(ValueError, match="causal"):
        _pair("transformer-layer", n_heads=H, causal=True)
    with pytest.raises(ValueError, match="no PyTorch reference for mixer 'self-attention'"):
        torch_reference("self-attention", models.mixer("self-attention", D, n_heads=H))


# ---------------------------------------------------------------- FLOPs do not depend on kernels


def _fwdbwd_flops(module) -> int:
    return count_flops(layer_calls(module, torch.randn(B, N, D))[1])


def test_transformer_layer_flops_same_for_math_sdpa_and_pytorch_layer():
    sdpa, ref = _pair("transformer-layer", n_heads=H, attn_backend="sdpa")
    math_layer = models.mixer("transformer-layer", D, n_heads=H, attn_backend="math")
    counts = {"sdpa": _fwdbwd_flops(sdpa), "math": _fwdbwd_flops(math_layer),
              "torch": _fwdbwd_flops(ref)}
    # forward: projections 8nd^2 + FFN 16nd^2 (d_ff = 4d) + scores/values 4n^2d; backward 2x
    assert set(counts.values()) == {3 * B * (24 * N * D**2 + 4 * N**2 * D)}, counts


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_fused_recurrent_flops_same_as_pytorch_layer(kind):
    ours, ref = _pair(kind, rnn_impl="fused")
    assert _fwdbwd_flops(ours) == _fwdbwd_flops(ref) > 0


# ---------------------------------------------------------------- interleaving and rows


def test_interleaved_alternates_direction_and_rotates():
    calls: list[str] = []

    def measure(name: str):
        return lambda: calls.append(name) or float(len(calls))

    out = interleaved({"a": measure("a"), "b": measure("b"), "c": measure("c")}, reps=6)
    assert "".join(calls) == "abc" "cba" "bca" "acb" "cab" "bac"
    assert out["a"] == [1.0, 6.0, 9.0, 10.0, 14.0, 17.0]
    # over six repetitions everyone goes first twice and follows each other one equally often
    firsts = calls[::3]
    assert all(firsts.count(n) == 2 for n in "abc")
    pairs = [calls[i + j:i + j + 2] for i in range(0, 18, 3) for j in (0, 1)]
    assert pairs.count(["a", "b"]) == pairs.count(["b", "a"])


def test_bench_grids_centre_on_the_headline_size_and_cover_every_comparison():
    pts = experiments.points("bench")
    assert {variant(p) for p in pts} == {
        "transformer-layer/sdpa", "transformer-layer/math", "lstm/fused", "lstm/cell",
        "gru/fused", "gru/cell", "harness-timer"}
    head = pts[0]
    sizes = (head.batch_size, head.seq_len, head.d_model, dict(head.config)["n_heads"])
    assert sizes == (8, 512, 512, 8)
    assert all(p.suite == "bench" and p.runner == "compare" for p in pts)
    assert all(p.dtype == "bfloat16" for p in experiments.points("bench-gpu"))
    with pytest.raises(ValueError, match="unknown bench grid 'huge'"):
        grids.points("bench", grid="huge")


@pytest.mark.parametrize("backend,kernel", [("sdpa", "sdpa-flash"), ("math", "math")])
def test_compare_row_records_kernels_ratio_and_mfu(backend, kernel):
    point = next(p for p in grids.points("bench", "cpu", "tiny")
                 if variant(p) == f"transformer-layer/{backend}")
    row = run_compare(point, Context(torch.device("cpu"), 0.01)).values
    assert row["kernel"] == kernel and row["ref_kernel"] == "sdpa-flash"
    assert row["ratio"] == pytest.approx(row["ours_ms"] / row["ref_ms"])
    assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"]
    assert row["mfu"] == pytest.approx(
        row["flops_fwdbwd"] / (row["ours_ms"] / 1e3) / row["peak_flops_per_s"])
    assert row["max_abs_diff"] <= 1e-4 and row["reference"] == "TransformerEncoderLayer"
    # the peak is the faster GEMM library, so a slow BLAS cannot inflate MFU
    rates = {k: v for k, v in row.items() if k.startswith("peak_") and k.endswith("_flops_per_s")
             and k != "peak_flops_per_s"}
    assert "peak_mm_flops_per_s" in rates and row["peak_flops_per_s"] == max(rates.values())
    assert row["peak_kernel"] in ("mm", "onednn")
    assert ("peak_onednn_flops_per_s" in rates) == (kernels._ONEDNN is not None)
    if backend == "sdpa":
        assert row["target"] == 0.9 and row["meets_target"] == (row["ratio"] <= 0.9)
    else:
        assert row["target"] is None and "meets_target" not in row


def test_compare_refuses_to_time_layers_that_disagree(monkeypatch):
    def wrong_reference(kind, ours):
        ref = torch_reference(kind, ours)
        with torch.no_grad():
            ref.norm2.bias.add_(0.5)  # one wrong weight: what a bad copy would look like
        return ref

    monkeypatch.setattr("harness.measure.compare.torch_reference", wrong_reference)
    point = grids.points("bench", "cpu", "tiny")[0]
    with pytest.raises(AssertionError, match="disagree"):
        run_compare(point, Context(torch.device("cpu"), 0.01))


@pytest.mark.parametrize("which", ["transformer-layer/sdpa", "lstm/cell"])
def test_compare_in_bfloat16_passes_the_agreement_check(which):
    point = next(p for p in grids.points("bench", "cpu", "tiny", "bfloat16")
                 if variant(p) == which)
    row = run_compare(point, Context(torch.device("cpu"), 0.01)).values
    assert row["peak_dtype"] == "bfloat16" and row["ratio"] > 0


@pytest.mark.slow
def test_bench_command_writes_one_row_per_comparison_with_ratios(tmp_path):
    torch.set_num_threads(2)  # --threads must win over the process's setting
    result = tvr("bench", "--tiny", "--out", str(tmp_path), "--threads", "1", *FAST)
    assert result.exit_code == 0, result.output
    df = read_results(results_path(tmp_path, "bench"))
    assert len(df) == len(grids.points("bench", "cpu", "tiny"))
    assert (df["status"] == "ok").all() and (df["threads"] == 1).all()
    for _, row in df.iterrows():  # every repetition's time is kept, and the ratios follow
        ours = [float(t) for t in row["ours_reps_ms"].split(";")]
        ref = [float(t) for t in row["ref_reps_ms"].split(";")]
        assert len(ours) == len(ref) == row["reps"]
        assert row["ratio_best"] == pytest.approx(min(ours) / min(ref), rel=1e-3)
    assert (df["ratio"] > 0).all() and (df["ours_ms"] > 0).all() and (df["ref_ms"] > 0).all()
    assert set(df["kernel"]) >= {"sdpa-flash", "math", "onednn-rnn", "aten-loop"}
    # the linear maps ran on the backend measured faster here, named in every row
    assert set(df["linear_kernel"]) <= set(kernels.linear_candidates("cpu", torch.float32))
    assert df["linear_kernel"].nunique() == 1
    for point in (kernels.QKV, kernels.FFN, kernels.ATTENTION):  # and every other swap point
        assert set(df[f"{point}_kernel"]) <= set(kernels.candidates(point, "cpu", torch.float32))
        assert df[f"{point}_kernel"].nunique() == 1
    assert "kernel chosen by measurement on this machine: linear maps" in result.output
    assert "| transformer-layer/sdpa" in result.output
    assert "- fused LSTM vs nn.LSTM: ratio" in result.output
    assert (tmp_path / "bench" / "table.md").read_text() in result.output


@pytest.mark.slow
def test_bench_without_onednn_falls_back_to_f_linear_and_torch_mm(tmp_path, monkeypatch):
    monkeypatch.setenv(kernels.DISABLE_ONEDNN_ENV, "0")  # restored after the command sets it
    result = tvr("bench", "--tiny", "--no-onednn", "--out", str(tmp_path), "--threads", "1",
                 *FAST)
    assert result.exit_code == 0, result.output
    df = read_results(results_path(tmp_path, "bench-no-onednn"))  # apart from bench's rows
    assert not (tmp_path / "bench").exists()
    assert (tmp_path / "bench-no-onednn" / "table.md").read_text() in result.output
    assert (df["status"] == "ok").all()
    assert set(df["linear_kernel"]) == {kernels.F_LINEAR}
    assert set(df["ffn_kernel"]) == {kernels.FFN_SEPARATE}  # the oneDNN fusion goes too
    assert set(df["peak_kernel"].dropna()) == {"mm"}
    assert "peak_onednn_flops_per_s" not in df or df["peak_onednn_flops_per_s"].isna().all()
    assert "linear maps (projections, FFN) -> F.linear (the only candidate)" in result.output


def test_bench_rejects_quick_with_tiny_and_cuda_without_device(tmp_path):
    both = tvr("bench", "--tiny", "--quick", "--out", str(tmp_path), *FAST)
    assert both.exit_code == 2 and "choose one" in both.output
    if not torch.cuda.is_available():
        cuda = tvr("bench", "--tiny", "--out", str(tmp_path), "--device", "cuda")
        assert cuda.exit_code == 2 and "no CUDA device" in cuda.output


def test_missing_mlflow_is_bad_input_not_a_traceback(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mlflow" else real(name, *a))
    result = tvr("bench", "--tiny", "--out", str(tmp_path), "--device", "cpu")
    assert result.exit_code == 2 and "--tracking-uri none" in result.output


# ---------------------------------------------------------------- tvr run --dtype / --compile


@pytest.mark.slow
def test_run_dtype_bfloat16_on_cpu_measures_a_smoke_point(tmp_path, monkeypatch):
    first = experiments.points("smoke")[:1]
    monkeypatch.setitem(experiments.SUITES, "smoke", lambda: first)
    result = tvr("run", "smoke", "--out", str(tmp_path), "--dtype", "bfloat16", *FAST)
    assert result.exit_code == 0, result.output
    row = read_results(results_path(tmp_path, "smoke/variants/bfloat16")).iloc[0]  # a variant
    assert row["status"] == "ok", row["message"]
    assert row["dtype"] == "bfloat16" and "bfloat16" in row["config_key"]
    assert row["fwdbwd_ms"] > 0 and row["float32_matmul_precision"] == "highest"
    assert row["linear_kernel"] == kernels.F_LINEAR  # oneDNN is a candidate in float32 only


def test_run_rejects_unknown_dtype(tmp_path):
    result = tvr("run", "smoke", "--out", str(tmp_path), "--dtype", "float64", *FAST)
    assert result.exit_code == 2 and "float64" in result.output


def test_run_compile_marks_points_in_their_ids():
    result = tvr("run", "smoke", "--dry-run", "--compile", "--dtype", "float16")
    ids = result.output.splitlines()[:-1]
    assert result.exit_code == 0 and ids
    assert all("-s0-compiled-" in i for i in ids), ids  # the dtype is in the digest
    plain = tvr("run", "smoke", "--dry-run", "--compile").output.splitlines()[:-1]
    assert not set(ids) & set(plain)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                    reason="inductor compiles C++: no compiler (Debian: apt-get install g++)")
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_run_compile_times_the_compiled_layer(tmp_path, monkeypatch, device):
    """--compile times the compiled layer and reports compile time apart, on each device."""
    first = experiments.points("smoke")[:1]
    monkeypatch.setitem(experiments.SUITES, "smoke", lambda: first)
    result = tvr("run", "smoke", "--out", str(tmp_path), "--compile",
                 "--min-run-time", "0.01", "--tracking-uri", "none", "--device", device)
    assert result.exit_code == 0, result.output
    row = read_results(results_path(tmp_path, "smoke/variants/compiled")).iloc[0]
    assert row["status"] == "ok", row["message"]
    assert row["compile_s"] > 0 and row["fwdbwd_ms"] > 0
    assert row["linear_kernel"] == "inductor"


@pytest.mark.slow
def test_bench_profile_tables_ops_of_ours_and_pytorchs_layer(tmp_path):
    result = tvr("bench", "--tiny", "--profile", "--out", str(tmp_path), *FAST)
    assert result.exit_code == 0, result.output
    text = (tmp_path / "bench" / "profile.md").read_text()
    for header in ("### ours (sdpa) vs nn.TransformerEncoderLayer",
                   "### ours (math) vs nn.TransformerEncoderLayer"):
        assert header in text
    assert "total (all ops)" in text
    # the GEMMs show up whichever library ran them (oneDNN for ours on CPU fp32)
    assert "aten::addmm" in text or "aten::mm" in text
    # the profile runs the linear backend the bench would (measured here)
    onednn = kernels.linear_backend("cpu", torch.float32) == kernels.ONEDNN
    assert ("mkldnn::_linear_pointwise" in text) == onednn
    assert not (tmp_path / "bench" / "results.csv").exists()  # profiling times nothing


def test_dtype_override_leaves_points_that_ignore_it_alone():
    result = tvr("run", "convergence-smoke", "--dry-run", "--dtype", "bfloat16")
    assert result.exit_code == 2 and "honours" in result.output

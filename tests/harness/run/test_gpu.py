"""The CUDA path, run for real on a lent GPU (scripts/gpu-check runs `pytest -m gpu` on this
file); every test here skips without CUDA. Sizes stay small: the whole file is budgeted at a
minute on one GPU, compilation (slow) aside."""

import pytest
import torch
from click.testing import CliRunner

import experiments
import models
from experiments.spec import Point, config
from harness.cli import cli
from harness.measure.flops import count_flops
from harness.measure.timing import cuda_peak_bytes, layer_calls
from harness.results import read_results, results_path
from harness.run import sweep

pytestmark = pytest.mark.gpu
CUDA = ["--device", "cuda", "--tracking-uri", "none", "--min-run-time", "0.01"]
B, N, D, H = 2, 64, 64, 4


def tvr(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_cuda_peak_bytes_hand_computed():
    dev = torch.device("cuda")
    # two live fp32 buffers of 1 MiB and 3 MiB: multiples of the allocator's 512-byte rounding
    peak = cuda_peak_bytes(lambda: (torch.empty(2**18, device=dev),
                                    torch.empty(3 * 2**18, device=dev)), dev)
    assert peak == 4 * 2**20


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transformer_layer_flops_do_not_depend_on_cuda_kernel(dtype):
    counts = {}
    for backend in ("math", "sdpa"):
        layer = models.mixer("transformer-layer", D, n_heads=H, attn_backend=backend)
        layer = layer.to("cuda", dtype)
        counts[backend] = count_flops(layer_calls(layer, torch.randn(B, N, D, device="cuda",
                                                                     dtype=dtype))[1])
    assert counts["math"] == counts["sdpa"] == 3 * B * (24 * N * D**2 + 4 * N**2 * D)


@pytest.mark.parametrize("kind,gates", [("lstm", 4), ("gru", 3)])
def test_cudnn_rnn_flops_match_cells(kind, gates):
    counts = {}
    for impl in ("fused", "cell"):
        module = models.mixer(kind, D, rnn_impl=impl).cuda()
        counts[impl] = count_flops(layer_calls(module, torch.randn(B, N, D, device="cuda"))[1])
    # forward 4G nd^2 per sample, backward 2x; the cells skip dL/dh0 (h0 is a constant zero)
    assert counts["fused"] == 3 * B * 4 * gates * N * D**2
    assert counts["fused"] - counts["cell"] == 2 * B * gates * D * D


def test_bench_on_cuda_records_kernels_mfu_and_tf32(tmp_path):
    result = tvr("bench", "--tiny", "--out", str(tmp_path), *CUDA)
    assert result.exit_code == 0, result.output
    df = read_results(results_path(tmp_path, "bench"))
    assert (df["status"] == "ok").all(), df[["point_id", "message"]]
    assert (df["dtype"] == "bfloat16").all() and (df["device"] == "cuda").all()
    kernels = dict(zip(df["variant"], df["kernel"], strict=True))
    assert kernels["lstm/fused"] == "cudnn-rnn" and kernels["gru/fused"] == "cudnn-rnn"
    assert kernels["transformer-layer/sdpa"].startswith("sdpa-")
    assert (df.loc[df["variant"] != "harness-timer", "mfu"] > 0).all()
    assert {"tf32_matmul", "tf32_cudnn", "cuda_version"} <= set(df.columns)


def test_run_bfloat16_on_cuda_records_peak_memory(tmp_path, monkeypatch):
    first = experiments.points("smoke")[:3]  # self-attention, lstm, gru
    monkeypatch.setitem(experiments.SUITES, "smoke", lambda: first)
    result = tvr("run", "smoke", "--out", str(tmp_path), "--dtype", "bfloat16", *CUDA)
    assert result.exit_code == 0, result.output
    df = read_results(results_path(tmp_path, "smoke/variants/bfloat16"))
    assert (df["status"] == "ok").all(), df["message"].tolist()
    assert (df["dtype"] == "bfloat16").all() and (df["peak_mem_bytes"] > 0).all()


def test_oom_is_a_row_and_the_next_point_still_runs(tmp_path):
    # math attention materialises (B, h, n, n) scores: terabytes here, refused at once
    huge = Point("gpu-oom", "layer", "self-attention", 2**17, 256, 64, "bfloat16",
                 config=config({"attn_backend": "math", "n_heads": 4}))
    small = Point("gpu-oom", "layer", "lstm", 32, 32, 2, "bfloat16")
    summary = sweep.run_suite("gpu-oom", [huge, small], torch.device("cuda"), tmp_path, None,
                              min_run_time=0.01, progress=False)
    df = read_results(results_path(tmp_path, "gpu-oom")).set_index("point_id")
    assert df.loc[huge.point_id, "status"] == "oom"
    assert df.loc[small.point_id, "status"] == "ok"
    assert summary.statuses == {"oom": 1, "ok": 1}
    assert torch.cuda.memory_reserved() < 2**30  # the failed point's cache was released

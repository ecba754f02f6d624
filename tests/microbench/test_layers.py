"""Microbenchmarks (pytest-benchmark): attention core, transformer layer, LSTM and GRU,
forward+backward in train mode at a few n and d. Skipped by `make test` (--benchmark-skip);
`make microbench` runs them and saves JSON under .benchmarks/; compare two saved runs with
`pytest tests/microbench --benchmark-only --benchmark-compare` (or pytest-benchmark compare).
"""

import pytest
import torch

import models
from harness.measure.flops import count_flops
from harness.measure.timing import layer_calls
from models.blocks import attention

B = 8
D_HEAD = 64  # the paper's d_k; heads = d / 64


def _run(benchmark, fn, flops: int, tokens: int) -> None:
    """Five timed rounds after one warm-up: fwd+bwd at these sizes takes 10 ms to 1 s."""
    benchmark.extra_info.update(flops=flops, tokens=tokens, threads=torch.get_num_threads())
    benchmark.pedantic(fn, rounds=5, warmup_rounds=1, iterations=1)
    benchmark.extra_info["gflops_per_s"] = flops / benchmark.stats.stats.median / 1e9


@pytest.mark.benchmark(group="attention-core")
@pytest.mark.parametrize("backend", ["sdpa", "math"])
@pytest.mark.parametrize("n", [256, 1024])
def test_attention_core(benchmark, backend, n):
    d = 512
    q, k, v = (torch.randn(B, d // D_HEAD, n, D_HEAD, requires_grad=True) for _ in range(3))
    grad = torch.randn(B, d // D_HEAD, n, D_HEAD)

    def fwd_bwd() -> None:
        q.grad = k.grad = v.grad = None  # every round does the same work, no accumulation
        attention(q, k, v, backend=backend).backward(grad)

    _run(benchmark, fwd_bwd, count_flops(fwd_bwd), B * n)


@pytest.mark.benchmark(group="transformer-layer")
@pytest.mark.parametrize("backend", ["sdpa", "math"])
@pytest.mark.parametrize("n,d", [(256, 256), (512, 512)])
def test_transformer_layer(benchmark, backend, n, d):
    layer = models.mixer("transformer-layer", d, n_heads=d // D_HEAD, attn_backend=backend)
    fwd_bwd = layer_calls(layer.train(), torch.randn(B, n, d))[1]
    _run(benchmark, fwd_bwd, count_flops(fwd_bwd), B * n)


@pytest.mark.benchmark(group="recurrent")
@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("n,d", [(128, 256), (512, 512)])
def test_recurrent_fused(benchmark, kind, n, d):
    rnn = models.mixer(kind, d, rnn_impl="fused")
    fwd_bwd = layer_calls(rnn.train(), torch.randn(B, n, d))[1]
    _run(benchmark, fwd_bwd, count_flops(fwd_bwd), B * n)

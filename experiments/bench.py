"""Ours versus PyTorch's layers (`tvr bench`): which comparisons, at which sizes.

Each point is one comparison (runner "compare"): our mixer against its PyTorch reference
(versus="torch"), or the harness's timer against a bare torch.utils.benchmark.Timer on the
same callable (versus="timer"). Sizes centre on B=8, n=512, d=512, h=8; heads
keep d_head = 64 as the paper's base model does. Dropout is 0 (it changes attention kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.spec import CompareOptions, Point, config

GRIDS = ("full", "quick", "tiny")
CELL_REPS = 2


@dataclass(frozen=True)
class _Sizes:
    layers: tuple[tuple[int, int, int], ...]  # (B, n, d) for the transformer layer
    rnns: tuple[tuple[int, int, int], ...]  # (B, n, d) for LSTM / GRU
    timer: tuple[int, int, int]  # (B, n, d) of the layer the harness-timer check times
    reps: int  # interleaved repetitions per comparison
    peak_n: int | None = None  # None: the device default (harness.measure.compare)
    d_head: int = 64


_CPU = {
    "full": _Sizes(layers=((8, 512, 512), (8, 256, 512), (8, 1024, 512), (8, 512, 256),
                           (8, 512, 1024)),
                   rnns=((8, 512, 512), (8, 256, 256)), timer=(8, 128, 256), reps=7),
    "quick": _Sizes(layers=((8, 512, 512),), rnns=((8, 512, 512),), timer=(8, 128, 256),
                    reps=5),
    # plumbing only (tests, gpu-check --dry-run): numbers at these sizes mean nothing
    "tiny": _Sizes(layers=((2, 16, 32),), rnns=((2, 16, 32),), timer=(2, 16, 32), reps=2,
                   peak_n=128, d_head=8),
}
_CUDA = {
    "full": _Sizes(layers=((8, 512, 512), (8, 2048, 1024), (8, 4096, 2048)),
                   rnns=((8, 512, 512), (64, 512, 1024)), timer=(8, 2048, 1024), reps=7),
    "quick": _Sizes(layers=((8, 512, 512), (8, 4096, 2048)), rnns=((8, 512, 512),),
                    timer=(8, 2048, 1024), reps=5),
    "tiny": _CPU["tiny"],
}


def points(suite: str, device_type: str = "cpu", grid: str = "full",
           dtype: str = "float32") -> list[Point]:
    """The comparisons of one bench run: transformer layer (sdpa, math), LSTM and GRU
    (fused, cell), each against PyTorch's layer, then the harness-timer check."""
    if grid not in GRIDS:
        raise ValueError(f"unknown bench grid {grid!r}; valid: {', '.join(GRIDS)}")
    sizes = (_CUDA if device_type == "cuda" else _CPU)[grid]
    def point(mixer: str, bnd: tuple[int, int, int], versus: str = "torch",
              reps: int = sizes.reps, **cfg: object) -> Point:
        b, n, d = bnd
        options = CompareOptions(versus=versus, reps=reps, peak_n=sizes.peak_n)
        return Point(suite, "compare", mixer, n, d, b, dtype, config=config(cfg),
                     options=options)

    out = [point("transformer-layer", s, attn_backend=backend, n_heads=s[2] // sizes.d_head)
           for s in sizes.layers for backend in ("sdpa", "math")]
    # the explicit cells are reported, not targeted, and cost ~30x the fused kernel: fewer reps
    out += [point(kind, s, rnn_impl=impl, reps=sizes.reps if impl == "fused" else CELL_REPS)
            for kind in ("lstm", "gru") for s in sizes.rnns for impl in ("fused", "cell")]
    timer = {"attn_backend": "sdpa", "n_heads": sizes.timer[2] // sizes.d_head,
             "versus": "timer"}
    out.append(point("transformer-layer", sizes.timer, **timer))
    return out


def bench() -> list[Point]:
    """Our transformer layer, LSTM and GRU against PyTorch's, interleaved, with MFU and the
    harness-timer check, on CPU sizes around B=8, n=d=512 (what `tvr bench` runs on CPU)."""
    return points("bench", "cpu", "full")


def bench_gpu() -> list[Point]:
    """The same comparisons at GPU sizes (n to 4096, d to 2048) in bfloat16 (what
    `tvr bench --device cuda` runs)."""
    return points("bench-gpu", "cuda", "full", "bfloat16")

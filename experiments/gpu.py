"""Per-layer cost at GPU sizes: the complexity grid stretched to n = 32768 and d = 4096.

bfloat16 by default (flash attention's dtype and the GPU's fast matmul path; `tvr run
--dtype` overrides it). The batch keeps B * n at a token budget, so activations stay a few
GiB at the largest points; sdpa keeps attention's memory linear in n.
"""

from __future__ import annotations

from experiments.complexity import MIXERS
from experiments.spec import Point, batch_for, config, powers_of_two, product

TOKENS = 65536  # B * n per point: B = 2 at n = 32768, capped at 64 sequences
D_HEAD = 64
QUICK_SIZES = ((1024, 1024), (8192, 1024), (32768, 1024), (1024, 4096), (8192, 4096))


def _point(suite: str, mixer: str, n: int, d: int) -> Point:
    # d_head = 64 as in the paper's base model: flash kernels take head sizes up to 256, and
    # the default 8 heads would give d_head = 512 at d = 4096 (math fallback, n^2 memory)
    cfg = {"n_heads": d // D_HEAD} if mixer == "self-attention" else {}
    return Point(suite, "layer", mixer, n, d, batch_for(n, TOKENS), "bfloat16",
                 config=config(cfg))


def complexity_gpu() -> list[Point]:
    """The full GPU grid: n = 128..32768 and d = 256..4096, powers of two, bfloat16 (the
    long recurrences take longest: one step after another, 32768 of them)."""
    return [_point("complexity-gpu", p["mixer"], p["n"], p["d"])
            for p in product(d=powers_of_two(256, 4096), mixer=MIXERS,
                             n=powers_of_two(128, 32768))]


def complexity_gpu_quick() -> list[Point]:
    """complexity-gpu trimmed to five (n, d) corners for scripts/gpu-check, which gives it
    110 s: short and 32k-token sequences, narrow and 4096-wide layers."""
    return [_point("complexity-gpu-quick", mixer, n, d)
            for n, d in QUICK_SIZES for mixer in MIXERS]

"""Per-layer cost at GPU sizes: the complexity grid stretched to n = 32768 and d = 4096, and
time at a fixed token count over n (the paper's parallel-hardware claim).

bfloat16 by default (flash attention's dtype and the GPU's fast matmul path; `tvr run
--dtype` overrides it); the quick grid and the fixed-token suite also run in float32, where
sdpa takes its memory-efficient kernel instead of flash. The batch keeps B * n at a token
budget, so activations stay a few GiB at the largest points; sdpa keeps attention's memory
linear in n.
"""

from __future__ import annotations

from experiments.complexity import MIXERS
from experiments.spec import Point, batch_for, config, powers_of_two, product

TOKENS = 65536  # B * n per point: B = 2 at n = 32768, capped at 64 sequences
D_HEAD = 64
QUICK_SIZES = ((1024, 1024), (8192, 1024), (32768, 1024), (1024, 4096), (8192, 4096))


def _point(suite: str, mixer: str, n: int, d: int, dtype: str = "bfloat16",
           tokens: int = TOKENS, fit: str | None = None) -> Point:
    # d_head = 64 as in the paper's base model: flash kernels take head sizes up to 256, and
    # the default 8 heads would give d_head = 512 at d = 4096 (math fallback, n^2 memory)
    cfg = {"n_heads": d // D_HEAD} if mixer == "self-attention" else {}
    # fixed tokens means B * n exactly, at any B; elsewhere B is capped at 64 sequences
    batch = tokens // n if fit == "fixed-tokens" else batch_for(n, tokens)
    return Point(suite, "layer", mixer, n, d, batch, dtype, config=config(cfg), fit=fit)


def complexity_gpu() -> list[Point]:
    """The full GPU grid: n = 128..32768 and d = 256..4096, powers of two, bfloat16 (the
    long recurrences take longest: one step after another, 32768 of them)."""
    return [_point("complexity-gpu", p["mixer"], p["n"], p["d"])
            for p in product(d=powers_of_two(256, 4096), mixer=MIXERS,
                             n=powers_of_two(128, 32768))]


def complexity_gpu_quick() -> list[Point]:
    """complexity-gpu trimmed to five (n, d) corners, in bfloat16 and float32, for
    scripts/gpu-check: short and 32k-token sequences, narrow and 4096-wide layers."""
    return [_point("complexity-gpu-quick", mixer, n, d, dtype)
            for dtype in ("bfloat16", "float32") for n, d in QUICK_SIZES for mixer in MIXERS]


FIXED_TOKENS = 32768  # B * n at every point of fixed-tokens-gpu: the work per batch is fixed
FIXED_D = 1024


def fixed_tokens_gpu() -> list[Point]:
    """The parallel-hardware claim on a GPU: forward+backward time of self-attention (sdpa),
    the cuDNN LSTM and GRU at d = 1024 with B * n = 32768 tokens, n = 64..8192 (B = 512..4),
    bfloat16 and float32. With the tokens fixed, a growing n leaves less parallel work across
    examples and more within each: attention's time stays flat until its n^2 term counts,
    a recurrence's grows with its n sequential steps."""
    # every mixer at one n before the next n: a run cut short keeps whole comparisons
    return [_point("fixed-tokens-gpu", mixer, n, FIXED_D, dtype, FIXED_TOKENS, "fixed-tokens")
            for dtype in ("bfloat16", "float32") for n in powers_of_two(64, 8192)
            for mixer in MIXERS]

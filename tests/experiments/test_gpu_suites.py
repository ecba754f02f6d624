"""The GPU suites declare what scripts/gpu-check promises to measure."""

from collections import Counter

import experiments
from experiments.gpu import FIXED_D, FIXED_TOKENS


def test_fixed_tokens_gpu_keeps_the_token_count_at_every_n():
    pts = experiments.points("fixed-tokens-gpu")
    assert {p.seq_len * p.batch_size for p in pts} == {FIXED_TOKENS}
    assert {p.d_model for p in pts} == {FIXED_D} and {p.fit for p in pts} == {"fixed-tokens"}
    # every (dtype, n) has attention and both recurrences: a cut run keeps whole comparisons
    per = Counter((p.dtype, p.seq_len) for p in pts)
    assert set(per.values()) == {3} and {d for d, _ in per} == {"bfloat16", "float32"}
    assert min(p.seq_len for p in pts) == 64 and max(p.seq_len for p in pts) == 8192


def test_complexity_gpu_quick_runs_both_dtypes_on_the_same_grid():
    pts = experiments.points("complexity-gpu-quick")
    by_dtype = {d: {(p.subject, p.seq_len, p.d_model) for p in pts if p.dtype == d}
                for d in ("bfloat16", "float32")}
    assert by_dtype["bfloat16"] == by_dtype["float32"] and len(pts) == 2 * len(by_dtype["float32"])

"""Where the time goes: torch.profiler over our transformer layer and PyTorch's, side by side.

`tvr bench --profile` writes this table to <out>/bench/profile.md, so the analysis behind
any change to models/blocks.py can be rerun rather than taken on trust.
"""

from __future__ import annotations

import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile

import models
from harness.measure.kernel_swap import use_kernels
from harness.measure.timing import layer_calls
from models.reference import torch_reference


def op_times(fn, device: torch.device, calls: int = 3) -> pd.Series:
    """Self time per op (ms per call of fn), over `calls` calls after one warm-up: ATen and
    oneDNN (mkldnn::) kernels; autograd-engine bookkeeping rows are left out."""
    fn()
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in range(calls):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    times = {e.key: getattr(e, attr) / 1e3 / calls for e in prof.key_averages()
             if "::" in e.key and not e.key.startswith("autograd::")}
    return pd.Series(times, dtype=float)


def layer_profile(device: torch.device, dtype: torch.dtype, batch: int, n: int, d: int,
                  n_heads: int, backend: str = "sdpa", top: int = 15) -> pd.DataFrame:
    """Top ops by self time, forward+backward in train mode: ours, PyTorch's, difference."""
    torch.manual_seed(0)
    ours = models.mixer("transformer-layer", d, n_heads=n_heads, attn_backend=backend)
    ours = use_kernels(ours).to(device=device, dtype=dtype).train()
    ref = torch_reference("transformer-layer", ours)
    x = torch.randn(batch, n, d, device=device, dtype=dtype)
    table = pd.DataFrame({"ours ms": op_times(layer_calls(ours, x)[1], device),
                          "torch ms": op_times(layer_calls(ref, x)[1], device)}).fillna(0.0)
    table["ours - torch"] = table["ours ms"] - table["torch ms"]
    table = table.reindex(table[["ours ms", "torch ms"]].max(axis=1)
                          .sort_values(ascending=False).index)
    total = pd.DataFrame([table.sum()], index=["total (all ops)"])
    return pd.concat([table.head(top), total]).round(2) + 0.0  # + 0.0: no "-0.0" cells

"""Which kernel each swap point of harness.measure.kernels runs on this machine: measured, not
assumed.

On CPU in float32 the linear maps of our layers (attention's projections, the FFN) can run on
oneDNN or on F.linear (the BLAS); which is faster depends on the CPU. choose times both,
forward+backward through each backend, at the sizes our layers use, interleaved in one process
(harness.measure.compare.interleaved, one torch.utils.benchmark turn each), and keeps the one
with the smaller sum of per-size medians. The choice is kept per host (harness.results.
this_host, not the $TVR_MACHINE label, which may name several hosts), device, dtype, thread
count and torch version in a small JSON file beside the machine id, so a host measures once;
every row records the backend that ran (column `linear_kernel`). $TVR_DISABLE_ONEDNN=1 (`tvr
bench --no-onednn`) leaves F.linear as the only candidate.

The other swap points are chosen the same way, each timed forward+backward at the bench's
headline sizes and kept in the same cache entry: the self-attention QKV
projection (one fused matmul or three; column qkv_kernel), the FFN's first map and its ReLU
(oneDNN's bias+ReLU post-op or a separate ReLU; ffn_kernel) and attention (sdpa or the math
path; attention_kernel, what attn_backend="auto" runs). harness.measure.kernel_swap puts a
built model's blocks on the chosen candidates.

torch.compile of the whole layer is not a candidate: tried on an AVX2 AMD EPYC (one thread,
B=8, n=d=512, sdpa, forward+backward, interleaved with eager over 5 turns), inductor's graph
took a median 3605 ms against eager's 1744 ms after 44 s of compiling (its CPU GEMMs are not
oneDNN's for trainable weights, and the fusions it adds are the ones the FFN point has).
`tvr run --compile` still measures it where wanted (rows say linear_kernel=inductor).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock

from harness.files import write_atomic
from harness.machines import this_host
from harness.measure import kernels
from harness.measure.compare import interleaved, timer_ms
from models.blocks import attention

# (tokens, d_in, d_out): a projection and the FFN's two maps at d = 512 over 512 tokens, the
# bench's headline width (the sizes decide the winner; larger ones only take longer).
SIZES: tuple[tuple[int, int, int], ...] = ((512, 512, 512), (512, 512, 2048), (512, 2048, 512))
CACHE_ENV = "TVR_KERNEL_CACHE"
DEFAULT_CACHE = Path.home() / ".config" / "tvr-bench" / "kernels.json"


def cache_path() -> Path:
    """$TVR_KERNEL_CACHE, else kernels.json beside the machine id."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


@dataclass(frozen=True)
class Choice:
    """The backend chosen for one (device, dtype) and the medians it was chosen by (ms of
    forward+backward summed over SIZES; empty when there was a single candidate)."""

    backend: str
    timings_ms: dict[str, float] = field(default_factory=dict)

    def columns(self, point: str = kernels.LINEAR) -> dict[str, str]:
        """The row's columns: <point>_kernel and, when measured, <point>_kernel_ms."""
        cols = {f"{point}_kernel": self.backend}
        if self.timings_ms:
            cols[f"{point}_kernel_ms"] = ";".join(f"{k}:{v:.4g}"
                                                  for k, v in self.timings_ms.items())
        return cols


# (B, h, n, d_k) of the attention swap point: one sequence of the headline layer (B=1 keeps
# the timing short; sdpa's lead or lag is per (batch, head) slice).
ATTENTION_SIZES: tuple[tuple[int, int, int, int], ...] = ((1, 8, 512, 64),)

Calls = dict[tuple[str, tuple[int, ...]], Callable[[], object]]


def _medians(calls: Calls, backends: tuple[str, ...], reps: int, min_run_time: float
             ) -> dict[str, float]:
    """Per backend, the sum over its sizes of the median ms over `reps` interleaved turns of
    its calls (each a forward+backward, warmed up first)."""
    for fn in calls.values():
        fn()  # warm-up: oneDNN builds its primitives on first use
    timed = interleaved({key: (lambda fn=fn: timer_ms(fn, min_run_time))
                         for key, fn in calls.items()}, reps)
    return {name: sum(statistics.median(t) for (n, _), t in timed.items() if n == name)
            for name in backends}


def _fwdbwd(impl: Callable[..., Any], inputs: tuple[torch.Tensor, ...], *args: Any
            ) -> Callable[[], object]:
    """One forward+backward of impl(*inputs, *args): gradients of every input, the output
    (or outputs) weighted by fixed random gradients."""
    out = impl(*inputs, *args)
    outs = out if isinstance(out, tuple) else (out,)
    grads = tuple(torch.randn_like(o) for o in outs)
    return lambda: torch.autograd.grad(impl(*inputs, *args), inputs, grads)


def _param(*shape: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, device=device, dtype=dtype, requires_grad=True)


def _xwb(t: int, d_in: int, d_out: int, device: torch.device, dtype: torch.dtype) -> tuple:
    """Input x[t, d_in], weight W[d_out, d_in] and bias b[d_out] of a linear map."""
    return (_param(t, d_in, device=device, dtype=dtype),
            _param(d_out, d_in, device=device, dtype=dtype),
            _param(d_out, device=device, dtype=dtype))


def time_linear(backends: tuple[str, ...], device: torch.device, dtype: torch.dtype,
                sizes: tuple[tuple[int, ...], ...] = SIZES, reps: int = 5,
                min_run_time: float = 0.05) -> dict[str, float]:
    """Per linear backend, the sum over `sizes` (tokens, d_in, d_out) of the median ms (over
    `reps` interleaved turns) of one forward+backward (gradients of input, weight, bias)."""
    calls: Calls = {}
    for t, d_in, d_out in sizes:
        xwb = _xwb(t, d_in, d_out, device, dtype)
        calls |= {(name, (t, d_in, d_out)): _fwdbwd(kernels.LINEAR_IMPLS[name], xwb)
                  for name in backends}
    return _medians(calls, backends, reps, min_run_time)


def time_qkv(backends: tuple[str, ...], device: torch.device, dtype: torch.dtype,
             sizes: tuple[tuple[int, ...], ...] = SIZES[:1], reps: int = 5,
             min_run_time: float = 0.05) -> dict[str, float]:
    """As time_linear, for the QKV projection: (tokens, d, d) sizes, weight (3d, d)."""
    calls: Calls = {}
    for t, d, _ in sizes:
        xwb = _xwb(t, d, 3 * d, device, dtype)
        calls |= {(name, (t, d)): _fwdbwd(kernels.QKV_IMPLS[name], xwb, [d, d, d])
                  for name in backends}
    return _medians(calls, backends, reps, min_run_time)


def time_ffn(backends: tuple[str, ...], device: torch.device, dtype: torch.dtype,
             sizes: tuple[tuple[int, ...], ...] = SIZES[1:2], reps: int = 5,
             min_run_time: float = 0.05) -> dict[str, float]:
    """As time_linear, for the FFN's relu(x W1^T + b1) at (tokens, d, d_ff) sizes."""
    calls: Calls = {}
    for t, d, d_ff in sizes:
        xwb = _xwb(t, d, d_ff, device, dtype)
        calls |= {(name, (t, d, d_ff)): _fwdbwd(kernels.FFN_IMPLS[name], xwb)
                  for name in backends}
    return _medians(calls, backends, reps, min_run_time)


def time_attention(backends: tuple[str, ...], device: torch.device, dtype: torch.dtype,
                   sizes: tuple[tuple[int, ...], ...] = ATTENTION_SIZES, reps: int = 5,
                   min_run_time: float = 0.05) -> dict[str, float]:
    """As time_linear, for softmax(Q K^T / sqrt(d_k)) V at (B, h, n, d_k) sizes, unmasked
    (the bench's layer)."""
    calls: Calls = {}
    for size in sizes:
        qkv = tuple(_param(*size, device=device, dtype=dtype) for _ in range(3))
        calls |= {(name, size): _fwdbwd(_attention_impl(name), qkv) for name in backends}
    return _medians(calls, backends, reps, min_run_time)


def _attention_impl(name: str) -> Callable[..., torch.Tensor]:
    return lambda q, k, v: attention(q, k, v, backend=name)


def _timer(point: str) -> Callable[..., dict[str, float]]:
    """The point's timing function (time_<point>), looked up when called so tests can
    replace it."""
    return globals()[f"time_{point}"]


def _key(device: torch.device, dtype: torch.dtype) -> str:
    return (f"{device.type}/{str(dtype).removeprefix('torch.')}/threads="
            f"{torch.get_num_threads()}/torch={torch.__version__}")


def _read(path: Path) -> dict[str, Any]:
    """The cache's contents; a missing file is empty, an unreadable one is remeasured over
    (with one warning line: it holds only choices that can be measured again)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"warning: kernel choices in {path} unreadable ({exc}); measuring again",
              file=sys.stderr)
        return {}
    return data if isinstance(data, dict) else {}


_chosen: dict[tuple[str, ...], Choice] = {}  # this process's choices


def choose(point: str, device: torch.device, dtype: torch.dtype, path: Path | None = None,
           machine: str | None = None, **timing: Any) -> Choice:
    """The faster candidate of swap point `point` (of harness.measure.kernels) for (device,
    dtype) on this machine: from the cache at `path` (default cache_path()) if it has this machine's
    choice, else measured with time_<point>(**timing) and stored there. A single candidate is
    chosen without timing."""
    candidates = kernels.candidates(point, device, dtype)
    if len(candidates) == 1:
        return Choice(candidates[0])
    path = path or cache_path()
    machine = machine or this_host()
    memo = (str(path), machine, _key(device, dtype), point, *candidates)
    if memo in _chosen:
        return _chosen[memo]
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock"):  # processes of one machine measure once, one at a time
        data = _read(path)
        entry = data.setdefault(machine, {}).setdefault(memo[2], {})
        if not (isinstance(entry, dict) and entry.get(point) in candidates):
            ms = _timer(point)(candidates, device, dtype, **timing)
            entry = entry if isinstance(entry, dict) else {}
            entry |= {point: min(ms, key=ms.__getitem__), f"{point}_ms": ms,
                      f"{point}_measured_at": datetime.now(timezone.utc).isoformat(
                          timespec="seconds")}
            data[machine][memo[2]] = entry
            write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    _chosen[memo] = Choice(entry[point], dict(entry.get(f"{point}_ms", {})))
    return _chosen[memo]


# Measured in this order: the QKV and FFN timings run on the linear backend chosen first.
POINTS = (kernels.LINEAR, kernels.QKV, kernels.FFN, kernels.ATTENTION)


def use_measured_kernels(device: torch.device, dtype: torch.dtype, **kwargs: Any
                         ) -> dict[str, str]:
    """Choose (choose) and set every swap point's backend for (device, dtype); returns the
    row's columns naming the candidate each point runs (<point>_kernel, <point>_kernel_ms)."""
    cols: dict[str, str] = {}
    for point in POINTS:
        choice = choose(point, device, dtype, **kwargs)
        if len(kernels.candidates(point, device, dtype)) > 1:
            kernels.use_backend(point, choice.backend)
        cols |= choice.columns(point)
    return cols

"""Which kernel models.kernels' linear swap point runs on this machine: measured, not assumed.

On CPU in float32 the linear maps of our layers (attention's projections, the FFN) can run on
oneDNN or on F.linear (the BLAS); which is faster depends on the CPU. choose_linear times both,
forward+backward through each backend, at the sizes our layers use, interleaved in one process
(harness.measure.compare.interleaved, one torch.utils.benchmark turn each), and keeps the one
with the smaller sum of per-size medians. The choice is kept per machine
(harness.results.this_machine), device, dtype, thread count and torch version in a small JSON
file beside the machine id, so a machine measures once; every row records the backend that
ran (column `linear_kernel`). $TVR_DISABLE_ONEDNN=1 (`tvr bench --no-onednn`) leaves F.linear
as the only candidate.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock

from harness.measure.compare import interleaved, timer_ms
from harness.results import this_machine, write_atomic
from models import kernels

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

    def columns(self) -> dict[str, str]:
        """The row's columns: linear_kernel and, when measured, linear_kernel_ms."""
        cols = {"linear_kernel": self.backend}
        if self.timings_ms:
            cols["linear_kernel_ms"] = ";".join(f"{k}:{v:.4g}"
                                                for k, v in self.timings_ms.items())
        return cols


def time_linear(backends: tuple[str, ...], device: torch.device, dtype: torch.dtype,
                sizes: tuple[tuple[int, int, int], ...] = SIZES, reps: int = 5,
                min_run_time: float = 0.05) -> dict[str, float]:
    """Per backend, the sum over `sizes` of the median ms (over `reps` interleaved turns) of
    one forward+backward (gradients of input, weight and bias)."""
    measures = {}
    for tokens, d_in, d_out in sizes:
        x = torch.randn(tokens, d_in, device=device, dtype=dtype, requires_grad=True)
        w = torch.randn(d_out, d_in, device=device, dtype=dtype, requires_grad=True)
        b = torch.randn(d_out, device=device, dtype=dtype, requires_grad=True)
        g = torch.randn(tokens, d_out, device=device, dtype=dtype)
        for name in backends:
            impl = kernels.LINEAR_IMPLS[name]

            def fwdbwd(impl=impl, x=x, w=w, b=b, g=g) -> object:
                return torch.autograd.grad(impl(x, w, b), (x, w, b), g)

            fwdbwd()  # warm-up: oneDNN builds its primitive on first use
            measures[(name, tokens, d_in, d_out)] = \
                lambda fn=fwdbwd: timer_ms(fn, min_run_time)
    timed = interleaved(measures, reps)
    return {name: sum(statistics.median(timed[(name, *size)]) for size in sizes)
            for name in backends}


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


_chosen: dict[tuple[str, str, str, tuple[str, ...]], Choice] = {}  # this process's choices


def choose_linear(device: torch.device, dtype: torch.dtype, path: Path | None = None,
                  machine: str | None = None, **timing: Any) -> Choice:
    """The faster linear backend for (device, dtype) on this machine: from the cache at
    `path` (default cache_path()) if it has this machine's choice, else measured with
    time_linear(**timing) and stored there. A single candidate is chosen without timing."""
    candidates = kernels.linear_candidates(device, dtype)
    if len(candidates) == 1:
        return Choice(candidates[0])
    path = path or cache_path()
    machine = machine or this_machine()
    memo = (str(path), machine, _key(device, dtype), candidates)
    if memo in _chosen:
        return _chosen[memo]
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock"):  # processes of one machine measure once, one at a time
        data = _read(path)
        entry = data.get(machine, {}).get(memo[2])
        if not (isinstance(entry, dict) and entry.get("linear") in candidates):
            ms = time_linear(candidates, device, dtype, **timing)
            entry = {"linear": min(ms, key=ms.__getitem__), "linear_ms": ms,
                     "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            data.setdefault(machine, {})[memo[2]] = entry
            write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    _chosen[memo] = Choice(entry["linear"], dict(entry.get("linear_ms", {})))
    return _chosen[memo]


def use_measured_linear(device: torch.device, dtype: torch.dtype, **kwargs: Any
                        ) -> dict[str, str]:
    """Choose (choose_linear) and set models.kernels' linear backend for (device, dtype);
    returns the row's columns naming the backend that runs."""
    choice = choose_linear(device, dtype, **kwargs)
    if len(kernels.linear_candidates(device, dtype)) > 1:
        kernels.use_linear_backend(choice.backend)
    return choice.columns()

"""Typed point specs and the product-grid helper every suite uses."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Point:
    """One measurement. `measure` names the harness runner (sweep.RUNNERS); a point is about
    a `mixer` kind (layer-level) or a `model` name (whole network); `knobs` are its config."""

    suite: str
    measure: str  # "layer" (time/FLOPs/memory of one mixer), "train", ...
    mixer: str
    seq_len: int
    d_model: int
    batch_size: int
    dtype: str = "float32"
    seed: int = 0
    knobs: tuple[tuple[str, Any], ...] = field(default=())  # sorted (key, value) pairs
    compile: bool = False  # time torch.compile'd modules (`tvr run --compile`)
    model: str = ""  # a models.names() entry, for whole-network points
    role: str = ""  # what the suite measures this point for (e.g. the "n" grid of a fit)

    @property
    def point_id(self) -> str:
        """Deterministic name from the fields, so reruns and --resume find the same point."""
        knobs = "".join(f"-{k}={v}" for k, v in self.knobs)
        compiled = "-compiled" if self.compile else ""  # eager ids stay as they always were
        role = f"{self.role}-" if self.role else ""
        return (f"{role}{self.measure}-{self.model or self.mixer}{knobs}-n{self.seq_len}"
                f"-d{self.d_model}-b{self.batch_size}-{self.dtype}-s{self.seed}{compiled}")

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.knobs)


def product(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    """Every combination of the axes, in order: product(a=[1, 2], b="xy") -> 4 dicts."""
    keys = list(axes)
    return [dict(zip(keys, values, strict=True))
            for values in itertools.product(*(list(v) for v in axes.values()))]


def knobs(config: Mapping[str, Any] | None = None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((config or {}).items()))


def batch_for(seq_len: int, tokens: int, max_batch: int = 64) -> int:
    """A batch size keeping B * n near `tokens`, so every point has a similar memory footprint."""
    return max(1, min(max_batch, tokens // seq_len))


def powers_of_two(lo: int, hi: int) -> list[int]:
    return [2**k for k in range(lo.bit_length() - 1, hi.bit_length()) if lo <= 2**k <= hi]

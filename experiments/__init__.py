"""Suites as Python: each returns its list of point specs; harness/ runs them."""

from __future__ import annotations

from collections.abc import Callable

from experiments import bench, complexity, convergence, gpu, table1, translation
from experiments.spec import Point

SUITES: dict[str, Callable[[], list[Point]]] = {
    "smoke": complexity.smoke,
    "quick": complexity.quick,
    "complexity": complexity.complexity,
    "table1": table1.table1,
    "bench": bench.bench,
    "complexity-gpu": gpu.complexity_gpu,
    "complexity-gpu-quick": gpu.complexity_gpu_quick,
    "bench-gpu": bench.bench_gpu,
    "convergence": convergence.convergence,
    "scaling-factor": convergence.scaling_factor,
    "heads": convergence.heads,
    "ffn-width": convergence.ffn_width,
    "positional": convergence.positional,
    "norm-warmup": convergence.norm_warmup,
    "gradient-distance": convergence.gradient_distance,
    "convergence-quick": convergence.convergence_quick,
    "convergence-smoke": convergence.convergence_smoke,
    "translation-quick": translation.translation_quick,
    "translation": translation.translation,
    "translation-table3": translation.translation_table3,
    "translation-tiny": translation.translation_tiny,
}


def suite_names() -> list[str]:
    return list(SUITES)


def points(name: str) -> list[Point]:
    """The points of suite `name`; ValueError naming the valid suites if unknown."""
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; valid: {', '.join(SUITES)}")
    return SUITES[name]()


def describe(name: str) -> str:
    doc = SUITES[name].__doc__ or ""
    return " ".join(doc.split())

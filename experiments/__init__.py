"""Suites as Python: each returns its list of point specs; harness/ runs them. Other
packages add suites through the `tvr.suites` entry-point group (a function returning points),
read on first use; a `tvr --plugin` module calls register_suite."""

from __future__ import annotations

from collections.abc import Callable

from experiments import (
    bench,
    complexity,
    convergence,
    gpu,
    identities,
    rematch,
    table1,
    threads,
    translation,
)
from experiments.spec import Point, Search
from models.plugins import BUILTIN, entries, register, warn

SUITES: dict[str, Callable[[], list[Point]]] = {
    "smoke": complexity.smoke,
    "quick": complexity.quick,
    "complexity": complexity.complexity,
    "table1": table1.table1,
    "threads": threads.threads,
    "identities": identities.identities,
    "bench": bench.bench,
    "complexity-gpu": gpu.complexity_gpu,
    "complexity-gpu-quick": gpu.complexity_gpu_quick,
    "fixed-tokens-gpu": gpu.fixed_tokens_gpu,
    "bench-gpu": bench.bench_gpu,
    "convergence": convergence.convergence,
    "scaling-factor": convergence.scaling_factor,
    "heads": convergence.heads,
    "ffn-width": convergence.ffn_width,
    "positional": convergence.positional,
    "norm-warmup": convergence.norm_warmup,
    "gradient-distance": convergence.gradient_distance,
    "residual": convergence.residual,
    "convergence-quick": convergence.convergence_quick,
    "convergence-smoke": convergence.convergence_smoke,
    "translation-quick": translation.translation_quick,
    "translation-cpu-tuned": translation.translation_cpu_tuned,
    "translation-cpu-converged": translation.translation_cpu_converged,
    "translation": translation.translation,
    "translation-table3": translation.translation_table3,
    "translation-table3-quick": translation.translation_table3_quick,
    "translation-table3-tuned": translation.translation_table3_tuned,
    "translation-tiny": translation.translation_tiny,
    "translation-tiny-tuned": translation.translation_tiny_tuned,
    "rematch-quick": rematch.rematch_quick,
    "rematch": rematch.rematch,
    "rematch-gpu-quick": rematch.rematch_gpu_quick,
    "scan-error": rematch.scan_error,
    "mqar": rematch.mqar,
    "mqar-cpu": rematch.mqar_cpu,
}


# Tuning searches (`tvr tune NAME`): name -> the search, whose trials are the suite NAME's points
SEARCHES: dict[str, Callable[[], Search]] = {
    "translation-cpu-tune": translation.translation_cpu_tune,
    "translation-tiny-tune": translation.translation_tiny_tune,
}


RENAMED = {"parallel": "threads"}  # old suite name -> today's, still accepted by `tvr run`
RETIRED = {  # suites no longer run, whose committed rows the report still reads
    "translation-cpu-recipes": "its grid of two learning rates by two dropouts is replaced by "
                               "a search: `tvr tune translation-cpu-tune`",
    "translation-cpu": "each model now trains with a searched recipe: `tvr tune "
                       "translation-cpu-tune`, then `tvr run translation-cpu-tuned`",
}


def current_name(name: str) -> str:
    """Today's name of suite `name`; an old name costs one line on stderr."""
    if name in RENAMED:
        warn(f"suite {name!r} is now {RENAMED[name]!r}")
        return RENAMED[name]
    return name


_CLASHES: set[tuple[str, str]] = set()  # (name, provider) already warned about


def _plugins() -> dict[str, tuple[Callable[[], list[Point]], str]]:
    """Plugin suites: name -> (function, provider); one warning per clash with a built-in."""
    out = {}
    for plugin in entries("tvr.suites").values():
        if plugin.name in SUITES:
            if (plugin.name, plugin.provider) not in _CLASHES:
                _CLASHES.add((plugin.name, plugin.provider))
                warn(f"plugin suite {plugin.name!r} from {plugin.provider} is skipped: a "
                     "built-in suite has that name")
            continue
        out[plugin.name] = (plugin.obj, plugin.provider)
    return out


def register_suite(name: str, fn: Callable[[], list[Point]],
                   provider: str | None = None) -> None:
    """Add a suite from Python (a `tvr --plugin MODULE` module calls this)."""
    register("tvr.suites", name, fn, provider or f"module {fn.__module__}")


def suite_names() -> list[str]:
    return [*SUITES, *_plugins()]


def _function(name: str) -> Callable[[], list[Point]]:
    if name in SUITES:
        return SUITES[name]
    plugins = _plugins()
    if name not in plugins:
        raise ValueError(f"unknown suite {name!r}; valid: {', '.join(suite_names())}")
    return plugins[name][0]


def points(name: str) -> list[Point]:
    """The points of suite `name`; ValueError naming the valid suites if unknown, or if a
    plugin suite returns something other than a list of points."""
    pts = _function(name)()
    if not isinstance(pts, list) or not all(isinstance(p, Point) for p in pts):
        raise ValueError(f"suite {name!r} ({provider(name)}) did not return a list of "
                         "experiments.spec.Point")
    return pts


def describe(name: str) -> str:
    doc = _function(name).__doc__ or ""
    return " ".join(doc.split())


def provider(name: str) -> str:
    """The package (or --plugin module) suite `name` comes from."""
    return BUILTIN if name in SUITES else _plugins()[name][1]

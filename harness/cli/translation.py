"""`tvr run --parallel/--reverse`: translation points on a user corpus or the reverse
direction, checked before anything is measured (a bad file is bad input naming file and
line)."""

from __future__ import annotations

from dataclasses import replace

from experiments.spec import Point, TranslateOptions
from harness.errors import BadInput
from harness.inputs import check_path
from harness.train.translation.corpus import user_corpus


def corpus_choice(points: list[Point], parallel: tuple[str, ...], reverse: bool
                  ) -> tuple[list[Point], list[str]]:
    """The points with the corpus choice applied to their translation points, and the
    results-folder suffix naming it."""
    if not parallel and not reverse:
        return points, []
    if not any(isinstance(p.options, TranslateOptions) for p in points):
        raise BadInput("--parallel/--reverse: this suite has no translation point "
                       "(try translation-quick)")
    paths = tuple(str(check_path(p, "--parallel").resolve()) for p in parallel)
    variant = ["reverse"] if reverse else []
    if paths:
        variant = [f"parallel-{user_corpus(paths, reverse).name}"]  # validates every line
    out = [replace(p, options=replace(p.options, parallel=paths, reverse=reverse))
           if isinstance(p.options, TranslateOptions) else p for p in points]
    return out, variant

"""The study declarations (harness.report.studies) against the points experiments/ declares:
a misspelt study, runner or suite would otherwise leave a table, figure or README block
silently empty."""

from collections import defaultdict

import pytest

import experiments
from harness.report import figures, readme
from harness.report.studies import BY_NAME, STUDIES


def _declared() -> dict[str, dict[str, set[str]]]:
    """study -> suite -> the runners of that suite's points in the study."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for suite in experiments.suite_names():
        for p in experiments.points(suite):
            if p.study:
                found[p.study][suite].add(p.runner)
    return found


def test_every_study_reads_runners_its_points_have():
    declared = _declared()
    for s in STUDIES:
        assert s.name in declared, f"no suite declares points of study {s.name!r}"
        runners = set().union(*declared[s.name].values())
        wanted = {t.runner for t in s.tables} | {r for _, r in s.figures.values()} | {
            c.runner for c in s.readme}
        assert wanted <= runners, (s.name, wanted - runners)
        if s.readme:  # the README block reads this suite
            assert declared[s.name][s.suite] >= {c.runner for c in s.readme}, s.name


def test_names_are_declared_once():
    assert len(BY_NAME) == len(STUDIES)
    names = [n for s in STUDIES for n in s.figures]
    assert len(set(names)) == len(names) and set(names) <= set(figures.FIGURES)
    assert {f"study-{s.name}" for s in STUDIES if s.readme} <= set(readme.BLOCKS)


@pytest.mark.slow
def test_the_heads_figure_draws_the_same_pixels_whatever_numpys_random_state() -> None:
    """No random jitter in a figure: `tvr report` rewrites no PNG whose rows did not change
    (seaborn's stripplot drew its jitter from numpy's global generator)."""
    import io
    from pathlib import Path

    import matplotlib.pyplot as plt
    import numpy as np

    from harness.report import ablations

    pngs = []
    for seed in (0, 1):
        np.random.seed(seed)
        fig = ablations.heads(Path(__file__).resolve().parents[3] / "results",
                              "convergence-quick")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        plt.close(fig)
        pngs.append(buffer.getvalue())
    assert pngs[0] == pngs[1]

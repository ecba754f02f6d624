"""Power gates: when a comparison of trained models can carry a verdict at all.

A rule that compares trained models reaches "supports" or "contradicts" only when every gate
passes; otherwise its verdict is "inconclusive at this scale", naming the failed gate and what
would pass it. The gates:

- baselines: every compared model beats the trivial baselines of its task (chance or the
  majority answer, the unigram model, source copy / constant sentence / retrieval), the
  margins shown; a baseline that was not measured is a failed gate that names it;
- seeds: at least MIN_SEEDS seeds per arm, and enough that the exact test over seeds can
  reach p < ALPHA at all (its smallest attainable p is stated);
- range: the metric is off its ceiling and floor (at the ceiling a claim about quality
  needs a harder task: it is never judged by steps instead);
- tests agree: two tests of the same difference give the same answer at ALPHA.

The tests over seeds are exact two-sample permutation tests (scipy.stats.permutation_test
enumerates every split of the seeds): one on the difference of means, one on mean ranks
(the Wilcoxon rank-sum test, exact with ties). Seeds are independent runs, so the test is
unpaired; a paired sign-flip test over 5 seeds cannot go below p = 0.0625.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import comb

import numpy as np
from scipy import stats

ALPHA = 0.05  # a difference counts when every test gives p below this
MIN_SEEDS = 3  # fewer seeds per arm than this: seed-to-seed variation is not measured
CHEAP_SEEDS = 5  # seeds per arm where a point costs seconds (synthetic tasks, small LMs)
CEILING_TOL = 0.01  # accuracy within 1 point of 100% (of chance) is at its ceiling (floor)


@dataclass(frozen=True)
class Gate:
    """One condition a verdict needs: its name, whether it passed, the numbers, and what
    would pass it when it did not."""
    name: str
    passed: bool
    detail: str
    remedy: str = ""

    def text(self) -> str:
        head = f"{self.name}: {'pass' if self.passed else 'FAIL'} ({self.detail})"
        return head if self.passed or not self.remedy else f"{head}; to pass: {self.remedy}"


@dataclass(frozen=True)
class Test:
    """A significance test: its name, p-value and how it was run (resamples, seed, or the
    smallest p an exact test can attain)."""
    name: str
    p: float
    detail: str

    def text(self) -> str:
        return f"{self.name} p = {self.p:.3g} ({self.detail})"


def as_records(items: tuple) -> list[dict]:
    return [asdict(i) for i in items]


def failed(gates: tuple[Gate, ...] | list[Gate]) -> list[Gate]:
    return [g for g in gates if not g.passed]


# ---------------------------------------------------------------- the gates

def baseline_gate(arms: dict[str, float], baselines: dict[str, float | None], metric: str,
                  remedy: str, higher_better: bool = True, need: str = "all") -> Gate:
    """Every arm (need="all") or the best arm (need="best") beats every baseline on `metric`.
    A baseline whose value is None was not measured: the gate fails and names it."""
    missing = [b for b, v in baselines.items() if v is None or not np.isfinite(v)]
    sign = 1 if higher_better else -1
    best = max(arms, key=lambda a: sign * arms[a])
    judged = arms if need == "all" else {best: arms[best]}
    known = {b: v for b, v in baselines.items() if b not in missing}
    below = [f"{a} vs {b}" for a, v in judged.items() for b, w in known.items()
             if not sign * (v - w) > 0]
    margins = "; ".join(f"{a} {v:.3g}" + "".join(f", {sign * (v - w):+.3g} over {b}"
                                                 for b, w in known.items())
                        for a, v in arms.items())
    detail = f"{metric}: {margins}"
    if known:
        detail += "; baselines " + ", ".join(f"{b} {w:.3g}" for b, w in known.items())
    if missing:
        detail += f"; baseline{'s' if len(missing) > 1 else ''} missing: {', '.join(missing)}"
    if below:
        detail += f"; not above: {', '.join(below)}"
    return Gate("baselines", not missing and not below, detail, remedy)


def min_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p an exact two-sample permutation test of n_a and n_b values
    can attain: the one most extreme split of C(n_a + n_b, n_a), counted twice."""
    return min(1.0, 2 / comb(n_a + n_b, n_a)) if n_a and n_b else 1.0


def seeds_gate(arms: dict[str, int], remedy: str, minimum: int = MIN_SEEDS,
               exact: bool = True) -> Gate:
    """Every arm has `minimum` seeds, and (with `exact`) the smallest arms can reach p < ALPHA
    by the exact test over seeds. A rule whose significance comes from other tests (sentences
    of a test set) passes exact=False and asks the seeds for their order (seed_order_gate)."""
    fewest = min(arms.values())
    sizes = sorted(arms.values())
    floor_p = min_p(sizes[0], sizes[1] if len(sizes) > 1 else sizes[0])
    ok = fewest >= minimum and (floor_p < ALPHA or not exact)
    counts = ", ".join(f"{a} {n}" for a, n in arms.items())
    exact_p = f"; smallest attainable exact p {floor_p:.2g}" if exact else ""
    return Gate("seeds", ok, f"seeds per arm: {counts}; need >= {minimum}{exact_p}", remedy)


def range_gate(arms: dict[str, float], metric: str, ceiling: float, floor: float,
               remedy: str, tol: float = CEILING_TOL) -> Gate:
    """The metric can still tell the arms apart: fewer than two arms within `tol` of its
    ceiling (two there differ by at most `tol` however different they are) and the best arm
    off its floor (at the floor no arm learned)."""
    top = [a for a, v in arms.items() if v >= ceiling - tol]
    best = max(arms.values())
    detail = f"{metric} " + ", ".join(f"{a} {v:.3g}" for a, v in arms.items()) + \
        f" (ceiling {ceiling:g}, floor {floor:.3g}; within {tol:g} counts as at it)"
    if len(top) > 1:
        detail += f"; at the ceiling: {', '.join(top)}"
    if best <= floor + tol:
        detail += "; every arm at the floor"
    return Gate("range", len(top) < 2 and best > floor + tol, detail, remedy)


def agree_gate(tests: list[Test] | tuple[Test, ...]) -> Gate:
    """The tests give the same answer at ALPHA (all below it, or all at or above it)."""
    below = [t.p < ALPHA for t in tests]
    ok = len(tests) >= 2 and (all(below) or not any(below))
    detail = "; ".join(f"{t.name} p = {t.p:.3g}" for t in tests) or "no test"
    return Gate("tests agree", ok, detail,
                "" if ok else "more seeds or evaluation sentences until both tests agree")


def seed_order_gate(a, b, separated: bool, label: str, remedy: str) -> Gate:
    """A consistency check, not a significance test: where the seeds are too few for a test
    over them (3 + 3: an exact two-sided test cannot go below p = 0.1), a difference the
    other tests call significant counts only if every seed of the better arm is above every
    seed of the other (complete separation, the most 3 + 3 seeds can show; its exact
    one-sided p, 1 / C(6, 3) = 0.05, is not below ALPHA). Where the other tests separate
    nothing, the order is not asked."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if not separated:
        return Gate("seed order", True, f"{label}: not separated by the tests; no order asked")
    hi, lo = (b, a) if b.mean() > a.mean() else (a, b)
    ok = bool(len(a) and len(b) and hi.min() > lo.max())
    return Gate("seed order", ok, f"{label}: the better arm's lowest seed {hi.min():.3g}, "
                f"the other's highest {lo.max():.3g}", remedy)


# ---------------------------------------------------------------- tests over seeds

def _perm(a, b, statistic) -> float:
    res = stats.permutation_test((a, b), statistic, permutation_type="independent",
                                 n_resamples=np.inf, alternative="two-sided", vectorized=True,
                                 axis=-1)
    return float(res.pvalue)


def _mean_diff(x, y, axis=-1):
    return np.mean(y, axis=axis) - np.mean(x, axis=axis)


def seed_tests(a, b, label: str = "") -> tuple[Test, ...]:
    """Two exact permutation tests over seeds of b against a: means and ranks."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    prefix = f"{label}: " if label else ""
    why = ("fewer than 2 seeds in an arm: no test over seeds" if min(len(a), len(b)) < 2 else
           "every seed the same value" if np.ptp(np.concatenate([a, b])) == 0 else "")
    if why:  # p = 1: nothing the seeds can tell apart
        return (Test(f"{prefix}permutation of means", 1.0, why),
                Test(f"{prefix}rank-sum permutation", 1.0, why))
    ranks = stats.rankdata(np.concatenate([a, b]))
    ra, rb = ranks[:len(a)], ranks[len(a):]
    exact = f"exact over {comb(len(a) + len(b), len(a))} splits of {len(a)}+{len(b)} seeds, " \
            f"smallest attainable p {min_p(len(a), len(b)):.2g}"
    return (Test(f"{prefix}permutation of means", _perm(a, b, _mean_diff), exact),
            Test(f"{prefix}rank-sum permutation", _perm(ra, rb, _mean_diff), exact))


@dataclass(frozen=True)
class Comparison:
    """b against a over independent seeds: the mean difference and two exact tests."""
    a: tuple[float, ...]
    b: tuple[float, ...]
    tests: tuple[Test, ...]

    @property
    def diff(self) -> float:
        return float(np.mean(self.b) - np.mean(self.a)) if self.a and self.b else float("nan")

    @property
    def separated(self) -> bool:
        """Every test below ALPHA (a difference the seeds can tell from noise)."""
        return bool(self.tests) and all(t.p < ALPHA for t in self.tests)

    def text(self, digits: int = 3) -> str:
        state = "separated" if self.separated else "not separated"
        ps = ", ".join(f"{t.p:.2g}" for t in self.tests)
        return (f"difference of means {self.diff:.{digits}g} over {len(self.a)}+{len(self.b)} "
                f"seeds (exact permutation p = {ps}: {state} at p < {ALPHA:g})")


def compare(a, b, label: str = "") -> Comparison:
    """b's values against a's (NaN dropped), with seed_tests named by `label`."""
    va = tuple(float(v) for v in np.asarray(a, float) if np.isfinite(v))
    vb = tuple(float(v) for v in np.asarray(b, float) if np.isfinite(v))
    return Comparison(va, vb, seed_tests(va, vb, label))

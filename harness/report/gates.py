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
- tests agree: two tests of the same difference give the same answer at ALPHA;
- power: a "no effect" or knee conclusion bounds the effect it says is absent (a one-sided
  95% bound under a stated smallest effect of interest), never a missing p-value;
- forward and backward: the timings a verdict reads are forward + backward passes (what a
  training step costs), not forward alone;
- spread: each timed row's interquartile range over its median is small against the
  difference the claim reads from those rows;
- idle machine: no timed row the verdict reads was measured on a machine flagged busy.

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
FWDBWD = "fwdbwd_ms"  # the timing column of a forward + backward pass (a training step's)
# A timed row's median moves by at most half its IQR if the timing is read at either quartile
# instead; two rows compared then move apart by at most one IQR share, so a difference at
# least twice the widest row's IQR/median keeps at least half of itself.
SPREAD_SHARE = 0.5


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
               remedy: str, tol: float = CEILING_TOL, higher_better: bool = True) -> Gate:
    """The metric can still tell the arms apart: fewer than two arms within `tol` of its
    ceiling (two there differ by at most `tol` however different they are) and the best arm
    off its floor (at the floor no arm learned). For a loss (higher_better=False) the ceiling
    is the lowest value (0 bits) and the floor the trivial model's (the unigram model's). A
    floor that is not a number (NaN: not measured) fails the gate."""
    sign = 1 if higher_better else -1
    top = [a for a, v in arms.items() if sign * (v - ceiling) >= -tol]
    best = max(arms.values(), key=lambda v: sign * v)
    known = bool(np.isfinite(floor))
    off_floor = known and sign * (best - floor) > tol
    detail = f"{metric} " + ", ".join(f"{a} {v:.3g}" for a, v in arms.items()) + \
        f" (ceiling {ceiling:g}, floor {floor:.3g}; within {tol:g} counts as at it)"
    if len(top) > 1:
        detail += f"; at the ceiling: {', '.join(top)}"
    if not known:
        detail += "; the floor (a trivial model's value) is not measured"
    elif not off_floor:
        detail += "; every arm at the floor"
    return Gate("range", bool(len(top) < 2 and off_floor), detail, remedy)


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


def power_gate(a, b, bound: float, effect: str, remedy: str,
               concludes_none: bool = True) -> Gate:
    """A conclusion that an effect is absent or small (a knee, a plateau, "no gain") bounds
    it. The effect is mean(b) - mean(a), oriented so that positive is the effect the claim
    says is absent or small; its one-sided (1 - ALPHA) upper confidence bound (Welch t over
    the seeds, unequal variances) must lie below `bound`, the smallest effect of interest.
    That is the upper test of an equivalence test (TOST) at ALPHA: a difference that is
    merely not separated (p >= ALPHA) bounds nothing. Where the gate fails its detail names
    the seeds per arm that would bound the measured effect under `bound` at the measured
    spread, or says that no number would (the measured effect is itself at least `bound`).

    concludes_none=False: the verdict reads an effect, not its absence; the power asked is
    then that the exact tests over seeds (seed_tests) detected it (every p < ALPHA)."""
    a = np.asarray([v for v in np.asarray(a, float) if np.isfinite(v)])
    b = np.asarray([v for v in np.asarray(b, float) if np.isfinite(v)])
    diff = float(b.mean() - a.mean()) if len(a) and len(b) else float("nan")
    head = f"{effect} {diff:+.3g} over {len(a)}+{len(b)} seeds"
    if not concludes_none:
        tests = seed_tests(a, b)
        ok = bool(all(t.p < ALPHA for t in tests))
        return Gate("power", ok, f"{head}: the verdict reads an effect, detected by the exact "
                    "tests over seeds (p = " + ", ".join(f"{t.p:.2g}" for t in tests) +
                    f"; need every p < {ALPHA:g})", "" if ok else remedy)
    if min(len(a), len(b)) < 2:
        return Gate("power", False, f"{head}: fewer than 2 seeds in an arm, no bound", remedy)
    va, vb = float(np.var(a, ddof=1)), float(np.var(b, ddof=1))
    se = float(np.sqrt(va / len(a) + vb / len(b)))
    if se > 0:
        df = se**4 / ((va / len(a))**2 / (len(a) - 1) + (vb / len(b))**2 / (len(b) - 1))
        upper = diff + float(stats.t.ppf(1 - ALPHA, df)) * se
    else:
        upper = diff
    ok = bool(bound > 0 and upper < bound)
    detail = (f"{head}, one-sided {1 - ALPHA:.0%} upper bound {upper:+.3g} (Welch t; the upper "
              f"test of TOST at p < {ALPHA:g}) against the smallest effect of interest "
              f"{bound:.3g}")
    if not ok:
        n = _seeds_to_bound(diff, (va + vb) / 2, bound, max(len(a), len(b)))
        detail += (f"; the measured {effect} is itself at least the bound: no number of "
                   "seeds bounds it below" if n is None else
                   f"; about {n} seeds per arm would bound it at the measured spread")
    return Gate("power", ok, detail, "" if ok else remedy)


def _seeds_to_bound(diff: float, variance: float, bound: float, start: int,
                    most: int = 1000) -> int | None:
    """The seeds per arm at which the one-sided bound of a difference `diff` with per-seed
    `variance` in each arm falls below `bound`; None if it never does (up to `most`)."""
    if not diff < bound:
        return None
    for n in range(max(start, 2), most + 1):
        if diff + float(stats.t.ppf(1 - ALPHA, 2 * n - 2)) * np.sqrt(2 * variance / n) < bound:
            return n
    return None


def fwdbwd_gate(read: dict[str, str], remedy: str) -> Gate:
    """Every timing the verdict reads is a forward + backward pass (column FWDBWD, what a
    training step costs), not the forward alone. `read` maps what the rule read ("speed-up
    at n = 1024") to the timing column it read it from; a forward-only column (fwd_ms, where
    the rows time nothing else) fails the gate, which names it, and `remedy` says what would
    pass it (rows that time forward + backward)."""
    forward = [w for w, column in read.items() if column != FWDBWD]
    detail = "; ".join(f"{w} from {column} ("
                       f"{'forward + backward' if column == FWDBWD else 'forward only'})"
                       for w, column in read.items()) or "no timing read"
    return Gate("forward and backward", bool(read) and not forward, detail,
                "" if read and not forward else remedy)


def spread_gate(spreads: dict[str, float], difference: float, what: str, remedy: str,
                share: float = SPREAD_SHARE) -> Gate:
    """Each timed row's spread, its interquartile range over its median, is at most `share`
    (SPREAD_SHARE: one half) of `difference`, the relative difference the claim reads from
    those rows: 0.66 for a layer 1.66x another's time (or speed-up); for an exponent judged
    within a tolerance tol over a range R of sizes, R**tol - 1 (the change of the end-to-end
    time that the tolerance resolves). A row without an IQR has no measured spread: the gate
    fails and names it."""
    allowed = share * abs(difference)
    unknown = [r for r, s in spreads.items() if s is None or not np.isfinite(s)]
    known = {r: float(s) for r, s in spreads.items() if r not in unknown}
    wide = [r for r, s in known.items() if s > allowed]
    detail = f"{what}: {abs(difference):.1%}; allowed IQR/median {allowed:.1%} ({share:g} of it)"
    if known:
        widest = max(known, key=known.__getitem__)
        detail += f"; widest {known[widest]:.1%} ({widest}) of {len(spreads)} timed rows"
    if wide:
        detail += "; too wide: " + ", ".join(f"{r} {known[r]:.0%}" for r in wide)
    if unknown:
        detail += f"; no IQR recorded: {', '.join(unknown)}"
    ok = bool(spreads and not wide and not unknown and np.isfinite(difference))
    return Gate("spread", ok, detail, "" if ok else remedy)


def idle_gate(busy: dict[str, object], load: dict[str, float], remedy: str) -> Gate:
    """No timed row the verdict reads was measured on a machine flagged busy (a row's `busy`
    column: the load average above the CPUs the process may use, or the point's process given
    under 80% of the CPU time its threads could use). A row without the flag (measured before
    rows carried it) cannot show that the machine was idle: the gate fails and names it.
    `load` holds each row's load average, shown where recorded."""
    def state(value: object) -> bool | None:
        text = str(value).strip().lower()
        return True if text in ("true", "1", "1.0") else False if text in (
            "false", "0", "0.0") else None

    states = {r: state(v) for r, v in busy.items()}
    flagged = [r for r, s in states.items() if s is True]
    unknown = [r for r, s in states.items() if s is None]
    loads = [float(v) for v in load.values() if v is not None and np.isfinite(float(v))]
    detail = f"{len(states)} timed rows, {len(flagged)} flagged busy"
    if loads:
        detail += f"; load average {min(loads):.2f}..{max(loads):.2f}"
    if flagged:
        detail += f"; busy: {', '.join(flagged)}"
    if unknown:
        detail += f"; no busy flag recorded: {', '.join(unknown[:6])}" + (
            f" and {len(unknown) - 6} more" if len(unknown) > 6 else "")
    ok = bool(states and not flagged and not unknown)
    return Gate("idle machine", ok, detail, "" if ok else remedy)


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


def below_tests(values, threshold: float, label: str = "") -> tuple[Test, ...]:
    """Two one-sided tests that the values (one per seed) lie below `threshold`: a one-sample
    t-test and an exact sign test (the binomial count of seeds below it; 5 of 5 give p = 1/32).
    They are the agreeing tests of a verdict read from values against a threshold."""
    v = np.asarray([x for x in np.asarray(values, float) if np.isfinite(x)])
    prefix = f"{label}: " if label else ""
    if len(v) < 2:
        why = "fewer than 2 seeds: no test"
        return (Test(f"{prefix}one-sided t-test below {threshold:g}", 1.0, why),
                Test(f"{prefix}exact sign test below {threshold:g}", 1.0, why))
    if np.ptp(v) == 0:
        p_t = 0.0 if v[0] < threshold else 1.0
    else:
        p_t = float(stats.ttest_1samp(v, threshold, alternative="less").pvalue)
    below = int((v < threshold).sum())
    p_sign = float(stats.binomtest(below, len(v), 0.5, alternative="greater").pvalue)
    return (Test(f"{prefix}one-sided t-test below {threshold:g}", p_t, f"{len(v)} seeds"),
            Test(f"{prefix}exact sign test below {threshold:g}", p_sign,
                 f"{below} of {len(v)} seeds below; smallest attainable p {0.5 ** len(v):.2g}"))


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

"""Statistics that say what they are: fitted exponents with their standard error, per-seed
values or a named interval, paired differences over the same seeds, censored steps.

Rules (used by tables, the claims ledger and README blocks alike):
- an exponent is a least-squares log-log slope (scipy.stats.linregress) with its standard
  error, and is reported only from at least MIN_FIT_POINTS points;
- an interval is a Student-t 95% interval over at least MIN_INTERVAL_SEEDS seeds; with fewer
  seeds each seed's value is shown instead;
- a run that never reached its target is censored: shown as "> budget", never as a value;
- a difference is "inside the noise" when a paired t-test over >= MIN_INTERVAL_SEEDS seeds
  gives p >= 0.05, or, with fewer seeds, when the per-seed differences change sign.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

MIN_FIT_POINTS = 4  # fewer points than this give no exponent
MIN_INTERVAL_SEEDS = 5  # fewer seeds than this give each seed's value, no interval
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Fit:
    """y ~ x^slope: the slope, its standard error, R^2 and how many points it used."""
    slope: float
    stderr: float
    r2: float
    points: int

    def text(self, digits: int = 2) -> str:
        return f"{self.slope:.{digits}f} ± {self.stderr:.{digits}f} (SE, {self.points} points)"


def loglog_fit(x, y) -> Fit | None:
    """The log-log least-squares slope of y against x, or None with fewer than MIN_FIT_POINTS
    distinct positive points (too few for an exponent with a meaningful standard error)."""
    frame = pd.DataFrame({"x": np.asarray(x, float), "y": np.asarray(y, float)})
    frame = frame[(frame["x"] > 0) & (frame["y"] > 0)].dropna()
    if frame["x"].nunique() < MIN_FIT_POINTS:
        return None
    lx, ly = np.log(frame["x"].to_numpy()), np.log(frame["y"].to_numpy())
    if np.ptp(ly) == 0:  # constant y: linregress's r is undefined, the slope is exactly 0
        return Fit(0.0, 0.0, 1.0, len(frame))
    res = stats.linregress(lx, ly)
    return Fit(float(res.slope), float(res.stderr), float(res.rvalue**2), len(frame))


def fmt(value: float, digits: int = 3) -> str:
    """A number with `digits` significant digits, plain notation where it reads well."""
    if value is None or not np.isfinite(value):
        return "n/a"
    return f"{value:.{digits}g}"


def spread(values, digits: int = 3, unit: str = "") -> str:
    """Per-seed values (fewer than MIN_INTERVAL_SEEDS seeds) or the mean with its named
    95% t-interval over the seeds."""
    vals = [float(v) for v in values if pd.notna(v)]
    if not vals:
        return "no value"
    if len(vals) < MIN_INTERVAL_SEEDS:
        seeds = "seed" if len(vals) == 1 else "seeds"
        return f"{', '.join(fmt(v, digits) + unit for v in vals)} ({len(vals)} {seeds})"
    mean = float(np.mean(vals))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(vals) - 1)
                 * np.std(vals, ddof=1) / np.sqrt(len(vals)))
    return (f"{fmt(mean, digits)}{unit} ± {fmt(half, digits)}{unit} "
            f"(mean, 95% t-interval over {len(vals)} seeds)")


def t_interval(values) -> tuple[float, float]:
    """The mean's 95% Student-t interval over the values (seeds): the interval `spread`
    reports, as (low, high), for figures to draw the same interval the ledger states."""
    vals = np.asarray([v for v in values if pd.notna(v)], float)
    if len(vals) < 2:
        mean = float(vals.mean()) if len(vals) else float("nan")
        return mean, mean
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(vals) - 1)
                 * np.std(vals, ddof=1) / np.sqrt(len(vals)))
    return float(vals.mean()) - half, float(vals.mean()) + half


def censored(steps, budget) -> list[str]:
    """Steps to target per seed, "> budget" where the run never reached it."""
    return [str(int(s)) if pd.notna(s) else f"> {int(budget)}" for s, budget
            in zip(steps, budget, strict=True)]


def censored_text(steps, budget) -> str:
    cells = censored(steps, budget)
    return f"{', '.join(cells)} ({len(cells)} {'seed' if len(cells) == 1 else 'seeds'})"


@dataclass(frozen=True)
class Paired:
    """b - a over the seeds both have: per-seed differences and whether they are noise."""
    diffs: tuple[float, ...]
    p_value: float | None  # paired t-test, only with >= MIN_INTERVAL_SEEDS seeds

    @property
    def mean(self) -> float:
        return float(np.mean(self.diffs)) if self.diffs else float("nan")

    @property
    def inside_noise(self) -> bool:
        """True where the data cannot tell the difference from noise: a paired t-test with
        p >= 0.05 (>= MIN_INTERVAL_SEEDS seeds), a sign that changes across seeds, a zero
        difference, or a single seed (whose noise is not measured)."""
        if len(self.diffs) < 2:
            return True
        if self.p_value is not None:
            return not self.p_value < 1 - CONFIDENCE
        signs = {np.sign(d) for d in self.diffs}
        return len(signs) > 1 or signs == {0.0}

    def text(self, digits: int = 3) -> str:
        if not self.diffs:
            return "no seed in common"
        if len(self.diffs) == 1:
            return f"{fmt(self.mean, digits)} (one seed: the noise is not measured)"
        if self.p_value is not None:
            noise = "inside the noise" if self.inside_noise else "outside the noise"
            return (f"mean {fmt(self.mean, digits)} over {len(self.diffs)} paired seeds "
                    f"(paired t-test p = {self.p_value:.2g}: {noise})")
        per_seed = ", ".join(fmt(d, digits) for d in self.diffs)
        noise = ("inside the noise: the sign changes across seeds" if self.inside_noise else
                 f"same sign on {'both' if len(self.diffs) == 2 else f'all {len(self.diffs)}'}"
                 " seeds, too few for a test")
        return f"{per_seed} per seed ({noise})"


def paired(a: pd.DataFrame, b: pd.DataFrame, value: str) -> Paired:
    """b's `value` minus a's, matched on seed (only the seeds both measured)."""
    both = a[["seed", value]].merge(b[["seed", value]], on="seed", suffixes=("_a", "_b"))
    both = both.dropna()
    diffs = tuple(float(d) for d in both[f"{value}_b"] - both[f"{value}_a"])
    p = None
    if len(diffs) >= MIN_INTERVAL_SEEDS and np.ptp(diffs) > 0:
        p = float(stats.ttest_rel(both[f"{value}_b"], both[f"{value}_a"]).pvalue)
    return Paired(diffs, p)

"""Sufficient statistics: what an arm's data reduces to (counts, sums, sums of squares and of
cross-products), so an analysis costs the same whatever the traffic. Frozen dataclasses, as in
GrowthBook's gbstats; impossible values raise ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

MIN_UNITS = 2  # per arm: a sample variance needs two values
# Centred sums of squares below this fraction of the raw sum of squares are rounding error of
# sum-of-squares arithmetic.
VARIANCE_EPSILON = 1e-12
# How far below zero a centred sum of squares (or beyond Cauchy–Schwarz a cross-product) may fall, as a
# fraction of the raw sums, before the sums are impossible rather than rounded: summing 10^7 doubles
# (in Python or in SQL) loses at most about 10^7 · 2^-53 ≈ 1e-9 of their size.
IMPOSSIBLE_TOLERANCE = 1e-9


def moments_check(
    *, n: int, sums: dict[str, float], squares: dict[str, float], crosses: dict[str, float]
) -> None:
    """Raise ValueError when sums, sums of squares and cross-products cannot come from any `n` values.

    `sums` maps a variable to Σv, `squares` to Σv², `crosses` "a*b" to Σab; every sum must be finite, no
    unit means every sum is 0, each Σv² is at least (Σv)²/n (a variance is not negative), and each
    centred cross-product is at most the root of the two centred squares (a correlation is within
    ±1), each up to the rounding error of summing doubles (`IMPOSSIBLE_TOLERANCE`)."""
    every = {**sums, **{f"{k}²": v for k, v in squares.items()}, **crosses}
    bad = {name: value for name, value in every.items() if not math.isfinite(value)}
    if n < 0 or bad:
        raise ValueError(f"impossible sufficient statistics: n={n}, non-finite sums {bad}")
    if n == 0:
        if any(every.values()):
            raise ValueError(f"impossible sufficient statistics: no units but non-zero sums {every}")
        return
    centred_squares = {}
    for name, total_squares in squares.items():
        total = sums[name]
        value = total_squares - total * total / n
        if value < -IMPOSSIBLE_TOLERANCE * max(total_squares, total * total / n):
            raise ValueError(
                f"impossible sufficient statistics: Σ{name}² = {total_squares:.6g} is below "
                f"(Σ{name})²/n = {total * total / n:.6g} (n={n}), a negative variance"
            )
        centred_squares[name] = max(value, 0.0)
    for name, total_cross in crosses.items():
        first, second = name.split("*")
        value = total_cross - sums[first] * sums[second] / n
        bound = math.sqrt(centred_squares[first] * centred_squares[second])
        scale = math.sqrt(squares[first] * squares[second])
        if abs(value) > bound + IMPOSSIBLE_TOLERANCE * scale:
            raise ValueError(
                f"impossible sufficient statistics: the centred Σ{first}·{second} = {value:.6g} exceeds "
                f"sqrt(centred Σ{first}² · centred Σ{second}²) = {bound:.6g} (n={n}), a correlation beyond ±1"
            )


def centred(*, n: int, sum_a: float, sum_b: float, sum_ab: float, scale: float) -> float:
    """Σ(a − ā)(b − b̄) from raw sums; rounding error below `scale` · epsilon reads as 0."""
    value = sum_ab - sum_a * sum_b / n
    return 0.0 if abs(value) <= VARIANCE_EPSILON * scale else value


@dataclass(frozen=True)
class Proportion:
    """`successes` events (errors, fallbacks, follow-ups...) out of `n` trials (requests, sessions)."""

    successes: int
    n: int

    def __post_init__(self) -> None:
        if self.n < 0 or not 0 <= self.successes <= self.n:
            raise ValueError(f"impossible proportion {self.successes}/{self.n}")

    @property
    def rate(self) -> float | None:
        return self.successes / self.n if self.n else None


@dataclass(frozen=True)
class MeanStats:
    """Sufficient statistics of a sample: count, sum of values, sum of squared values."""

    n: int
    total: float
    total_squares: float

    def __post_init__(self) -> None:
        moments_check(n=self.n, sums={"x": self.total}, squares={"x": self.total_squares}, crosses={})

    @classmethod
    def of(cls, values: Iterable[float]) -> MeanStats:
        """The sufficient statistics of `values` (for tests and small samples)."""
        n, total, total_squares = 0, 0.0, 0.0
        for value in values:
            n, total, total_squares = n + 1, total + value, total_squares + value * value
        return cls(n=n, total=total, total_squares=total_squares)

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    @property
    def variance(self) -> float | None:
        """Sample variance (n − 1 denominator); None below two values."""
        if self.n < 2:
            return None
        variance = (self.total_squares - self.total * self.total / self.n) / (self.n - 1)
        if variance <= VARIANCE_EPSILON * self.total_squares / self.n:
            return 0.0
        return variance


@dataclass(frozen=True)
class RatioStats:
    """Per-unit sufficient statistics of a ratio metric Σx / Σy.

    One row per randomisation unit (e.g. per user: x = review hours, y = contracts reviewed; the metric
    is hours per contract). Units, not contracts, are independent, hence the delta method."""

    n: int
    sum_x: float
    sum_y: float
    sum_x2: float
    sum_y2: float
    sum_xy: float

    def __post_init__(self) -> None:
        moments_check(
            n=self.n,
            sums={"x": self.sum_x, "y": self.sum_y},
            squares={"x": self.sum_x2, "y": self.sum_y2},
            crosses={"x*y": self.sum_xy},
        )

    @classmethod
    def of(cls, pairs: Iterable[tuple[float, float]]) -> RatioStats:
        """The sufficient statistics of (x, y) per unit (for tests and small samples)."""
        n, sx, sy, sxx, syy, sxy = 0, 0.0, 0.0, 0.0, 0.0, 0.0
        for x, y in pairs:
            n, sx, sy, sxx, syy, sxy = n + 1, sx + x, sy + y, sxx + x * x, syy + y * y, sxy + x * y
        return cls(n=n, sum_x=sx, sum_y=sy, sum_x2=sxx, sum_y2=syy, sum_xy=sxy)

    @property
    def ratio(self) -> float | None:
        return self.sum_x / self.sum_y if self.n and self.sum_y else None

    @property
    def ratio_variance(self) -> float | None:
        """Delta-method variance of x̄/ȳ (n ≥ 2, ȳ ≠ 0), with sample (n − 1) variances and covariance:

        Var(x̄/ȳ) ≈ (s_x²/ȳ² − 2·x̄·s_xy/ȳ³ + x̄²·s_y²/ȳ⁴) / n
                  = sample variance of (x_i − R·y_i)/ȳ over units, divided by n."""
        if self.n < MIN_UNITS or self.sum_y == 0:
            return None
        n = self.n
        mean_x, mean_y = self.sum_x / n, self.sum_y / n
        var_x = centred(n=n, sum_a=self.sum_x, sum_b=self.sum_x, sum_ab=self.sum_x2, scale=self.sum_x2)
        var_y = centred(n=n, sum_a=self.sum_y, sum_b=self.sum_y, sum_ab=self.sum_y2, scale=self.sum_y2)
        cross = math.sqrt(self.sum_x2 * self.sum_y2)
        cov_xy = centred(n=n, sum_a=self.sum_x, sum_b=self.sum_y, sum_ab=self.sum_xy, scale=cross)
        var_x, var_y, cov_xy = var_x / (n - 1), var_y / (n - 1), cov_xy / (n - 1)
        terms = (var_x / mean_y**2, 2 * mean_x * cov_xy / mean_y**3, mean_x**2 * var_y / mean_y**4)
        variance = terms[0] - terms[1] + terms[2]
        # Units all on one line x = R·y: the terms cancel up to rounding error.
        if variance <= VARIANCE_EPSILON * (terms[0] + terms[2]):
            return 0.0
        return variance / n

    def linearised(self) -> MeanStats:
        """Per-unit MeanStats with the ratio's mean and its delta-method variance, for methods that
        take means (the sequential interval): n units whose mean is R and whose sample variance is
        n·Var(x̄/ȳ). Needs n ≥ 2 and Σy ≠ 0."""
        ratio, variance = self.ratio, self.ratio_variance
        if ratio is None or variance is None:
            raise ValueError("a ratio needs two units and a non-zero denominator to be linearised")
        return pseudo_units(n=self.n, mean=ratio, variance_of_mean=variance)


def pseudo_units(*, n: int, mean: float, variance_of_mean: float) -> MeanStats:
    """MeanStats of n pseudo-units whose mean is `mean` and whose sample variance is n·`variance_of_mean`,
    so that methods taking per-unit means (the sequential interval) see an estimate with that variance."""
    return MeanStats(n=n, total=n * mean, total_squares=(n - 1) * n * variance_of_mean + n * mean * mean)


@dataclass(frozen=True)
class CupedStats:
    """One arm's sufficient statistics for CUPED: the metric x and its pre-period covariate `pre`."""

    n: int
    sum_x: float
    sum_x2: float
    sum_pre: float
    sum_pre2: float
    sum_x_pre: float

    def __post_init__(self) -> None:
        moments_check(
            n=self.n,
            sums={"x": self.sum_x, "pre": self.sum_pre},
            squares={"x": self.sum_x2, "pre": self.sum_pre2},
            crosses={"x*pre": self.sum_x_pre},
        )

    @classmethod
    def of(cls, pairs: Iterable[tuple[float, float]]) -> CupedStats:
        """The sufficient statistics of (x, pre) per unit (for tests and small samples)."""
        n, sx, sxx, sp, spp, sxp = 0, 0.0, 0.0, 0.0, 0.0, 0.0
        for x, pre in pairs:
            n, sx, sxx, sp, spp, sxp = n + 1, sx + x, sxx + x * x, sp + pre, spp + pre * pre, sxp + x * pre
        return cls(n=n, sum_x=sx, sum_x2=sxx, sum_pre=sp, sum_pre2=spp, sum_x_pre=sxp)

    def centred_sums(self) -> tuple[float, float, float]:
        """Σ(x − x̄)², Σ(pre − p̄)², Σ(x − x̄)(pre − p̄)."""
        n = self.n
        return (
            centred(n=n, sum_a=self.sum_x, sum_b=self.sum_x, sum_ab=self.sum_x2, scale=self.sum_x2),
            centred(n=n, sum_a=self.sum_pre, sum_b=self.sum_pre, sum_ab=self.sum_pre2, scale=self.sum_pre2),
            centred(
                n=n,
                sum_a=self.sum_x,
                sum_b=self.sum_pre,
                sum_ab=self.sum_x_pre,
                scale=math.sqrt(self.sum_x2 * self.sum_pre2),
            ),
        )


RATIO_CUPED_SUMS = (
    "sum_x",
    "sum_y",
    "sum_px",
    "sum_py",
    "sum_x2",
    "sum_y2",
    "sum_px2",
    "sum_py2",
    "sum_xy",
    "sum_x_px",
    "sum_x_py",
    "sum_y_px",
    "sum_y_py",
    "sum_px_py",
)


@dataclass(frozen=True)
class RatioCupedStats:
    """One arm's per-unit sufficient statistics of a ratio metric Σx/Σy and of the same metric over each
    unit's pre-period, Σpx/Σpy: counts, sums, squares and every cross-product of (x, y, px, py).

    A unit without pre-period data has px = py = 0 and stays in (GrowthBook's handling: a missing
    covariate is 0); `pre_units` counts those that have some, for the report."""

    n: int
    pre_units: int
    sum_x: float
    sum_y: float
    sum_px: float
    sum_py: float
    sum_x2: float
    sum_y2: float
    sum_px2: float
    sum_py2: float
    sum_xy: float
    sum_x_px: float
    sum_x_py: float
    sum_y_px: float
    sum_y_py: float
    sum_px_py: float

    def __post_init__(self) -> None:
        if not 0 <= self.pre_units <= max(self.n, 0):
            raise ValueError(f"impossible sufficient statistics: {self.pre_units} pre units of n={self.n}")
        names = ("x", "y", "px", "py")
        moments_check(
            n=self.n,
            sums={name: getattr(self, f"sum_{name}") for name in names},
            squares={name: getattr(self, f"sum_{name}2") for name in names},
            crosses={
                "x*y": self.sum_xy,
                "x*px": self.sum_x_px,
                "x*py": self.sum_x_py,
                "y*px": self.sum_y_px,
                "y*py": self.sum_y_py,
                "px*py": self.sum_px_py,
            },
        )

    @classmethod
    def of(cls, units: Iterable[tuple[float, float, float, float]]) -> RatioCupedStats:
        """The sufficient statistics of (x, y, px, py) per unit (for tests and simulations)."""
        totals = [0.0] * len(RATIO_CUPED_SUMS)
        n = pre_units = 0
        for x, y, px, py in units:
            n += 1
            pre_units += px != 0 or py != 0
            row = (
                x,
                y,
                px,
                py,
                x * x,
                y * y,
                px * px,
                py * py,
                x * y,
                x * px,
                x * py,
                y * px,
                y * py,
                px * py,
            )
            totals = [total + value for total, value in zip(totals, row, strict=True)]
        return cls(n=n, pre_units=pre_units, **dict(zip(RATIO_CUPED_SUMS, totals, strict=True)))

    @property
    def post(self) -> RatioStats:
        """The experiment period alone."""
        return RatioStats(
            n=self.n,
            sum_x=self.sum_x,
            sum_y=self.sum_y,
            sum_x2=self.sum_x2,
            sum_y2=self.sum_y2,
            sum_xy=self.sum_xy,
        )

    def centred(self, first: str, second: str) -> float:
        """Σ(a − ā)(b − b̄) for two of x, y, px, py, from the raw sums."""
        names = {("x", "y"): "sum_xy", ("px", "py"): "sum_px_py"}
        if first == second:
            cross = getattr(self, f"sum_{first}2")
        else:
            cross = getattr(self, names.get((first, second), f"sum_{first}_{second}"))
        scale = math.sqrt(getattr(self, f"sum_{first}2") * getattr(self, f"sum_{second}2"))
        return centred(
            n=self.n,
            sum_a=getattr(self, f"sum_{first}"),
            sum_b=getattr(self, f"sum_{second}"),
            sum_ab=cross,
            scale=scale,
        )

"""Hypothesis tests: exact McNemar for paired outcomes, Welch's t, the sample-ratio check, and
multiple-testing corrections."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from engines.stats.intervals import welch_df
from engines.stats.sufficient import MeanStats

NO_UNITS = "no units"


def mcnemar_exact(*, only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value for paired binary outcomes.

    `only_first`: pairs where only the first system was right; `only_second`: only the second.
    Under the null both kinds of discordant pair are equally likely (binomial, p = 1/2), so the p-value
    is twice the binomial tail P(K ≤ min(b, c)), capped at 1. scipy's binomial CDF (the regularised
    incomplete beta function) costs the same at any n, where summing the binomial coefficients took
    quadratic time (40 s at 20 000 discordant pairs)."""
    from scipy import stats as scipy_stats

    if only_first < 0 or only_second < 0:
        raise ValueError("counts must be non-negative")
    n = only_first + only_second
    if n == 0:
        return 1.0
    tail = float(scipy_stats.binom.cdf(min(only_first, only_second), n, 0.5))
    return min(1.0, 2 * tail)


def welch_t(*, first: MeanStats, second: MeanStats) -> tuple[float, float]:
    """Welch's t statistic for mean(first) − mean(second) and its Welch–Satterthwaite degrees of freedom.

    Needs two values per sample and a non-zero standard error."""
    assert first.mean is not None and second.mean is not None
    assert first.variance is not None and second.variance is not None
    first_part, second_part = first.variance / first.n, second.variance / second.n
    standard_error_squared = first_part + second_part
    if standard_error_squared == 0:
        raise ValueError("zero standard error: both samples are constant")
    t = (first.mean - second.mean) / math.sqrt(standard_error_squared)
    return t, welch_df(first_part=first_part, n_first=first.n, second_part=second_part, n_second=second.n)


@dataclass(frozen=True, kw_only=True)
class SrmResult:
    """Sample ratio mismatch: Pearson's chi-square goodness of fit of the arms' unit counts to the split,
    or, for two arms with an expected count under 5 (where the chi-square approximation fails), the
    exact two-sided binomial test (`method` says which; `chi_square` is then None).

    `mismatch` is p < alpha. With no units there is nothing to test: error "no units", mismatch False."""

    counts: tuple[int, ...]
    expected_counts: tuple[float, ...] | None
    chi_square: float | None
    df: int
    p_value: float | None
    alpha: float
    mismatch: bool
    error: str | None = None
    method: str = "chi_square"


def srm_check(*, counts: Sequence[int], expected_shares: Sequence[float], alpha: float = 0.001) -> SrmResult:
    """Chi-square test of `counts` (units per arm) against `expected_shares` (e.g. (0.99, 0.01)); the
    exact binomial test for two arms when an expected count is under 5.

    Shares are normalised to sum to 1. alpha defaults to 0.001, the usual SRM threshold: a mismatch
    means the assignment or logging is broken and the experiment's results should not be trusted."""
    from scipy import stats as scipy_stats

    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha} outside (0, 1)")
    if len(counts) != len(expected_shares):
        raise ValueError(f"{len(counts)} counts but {len(expected_shares)} expected shares")
    if len(counts) < 2:
        raise ValueError("an SRM check needs at least two arms")
    if any(count < 0 for count in counts):
        raise ValueError(f"negative counts {tuple(counts)}")
    if not all(math.isfinite(share) and share > 0 for share in expected_shares):
        raise ValueError(f"expected shares must be positive and finite, got {tuple(expected_shares)}")
    total, share_total = sum(counts), sum(expected_shares)
    df = len(counts) - 1
    if total == 0:
        return SrmResult(
            counts=tuple(counts),
            expected_counts=None,
            chi_square=None,
            df=df,
            p_value=None,
            alpha=alpha,
            mismatch=False,
            error=NO_UNITS,
        )
    expected = tuple(total * share / share_total for share in expected_shares)
    if len(counts) == 2 and min(expected) < 5:
        # At a 1 % split the first hundred units expect about one on the candidate: exact, not chi-square.
        p_value = float(scipy_stats.binomtest(counts[1], total, expected_shares[1] / share_total).pvalue)
        return SrmResult(
            counts=tuple(counts),
            expected_counts=expected,
            chi_square=None,
            df=df,
            p_value=p_value,
            alpha=alpha,
            mismatch=p_value < alpha,
            method="exact_binomial",
        )
    chi_square = sum((count - want) ** 2 / want for count, want in zip(counts, expected, strict=True))
    p_value = float(scipy_stats.chi2.sf(chi_square, df))
    return SrmResult(
        counts=tuple(counts),
        expected_counts=expected,
        chi_square=chi_square,
        df=df,
        p_value=p_value,
        alpha=alpha,
        mismatch=p_value < alpha,
    )


def clustered_srm_check(
    *, counts: Sequence[int], sum_squares: float, expected_share: float, alpha: float = 0.001
) -> SrmResult:
    """Sample ratio mismatch of events that cluster in the randomisation units: `counts` = (events on
    arm 0, events on arm 1), `sum_squares` = Σ over units of (the unit's events)², both arms together,
    `expected_share` the share of units assigned to arm 1.

    When units (users) are assigned independently with probability p and unit i has a_i events, arm 1's
    total E_1 = Σ a_i·I_i has mean p·Σa_i and variance p(1 − p)·Σa_i² under the intended split, so
    z = (E_1 − p·Σa_i) / sqrt(p(1 − p)·Σa_i²) is standard normal (a two-sided test, reported as
    chi_square = z² on 1 df). With one event per unit it is Pearson's chi-square of `srm_check`; with
    several, the plain chi-square on event counts would be too narrow by the design effect
    Σa_i²/Σa_i and raise false alarms. No events: error "no units", mismatch False."""
    from scipy import stats as scipy_stats

    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha} outside (0, 1)")
    if len(counts) != 2 or any(count < 0 for count in counts):
        raise ValueError(f"counts={tuple(counts)} must be two non-negative event counts")
    if not 0 < expected_share < 1:
        raise ValueError(f"expected_share={expected_share} outside (0, 1)")
    total = sum(counts)
    if not (math.isfinite(sum_squares) and sum_squares >= total):
        raise ValueError(f"sum_squares={sum_squares} must be at least the events' count {total}")
    expected = (total * (1 - expected_share), total * expected_share)
    if total == 0:
        return SrmResult(
            counts=tuple(counts), expected_counts=None, chi_square=None, df=1, p_value=None, alpha=alpha,
            mismatch=False, error=NO_UNITS, method="clustered_z",
        )  # fmt: skip
    z = (counts[1] - expected[1]) / math.sqrt(expected_share * (1 - expected_share) * sum_squares)
    p_value = float(2 * scipy_stats.norm.sf(abs(z)))
    return SrmResult(
        counts=tuple(counts),
        expected_counts=expected,
        chi_square=z * z,
        df=1,
        p_value=p_value,
        alpha=alpha,
        mismatch=p_value < alpha,
        method="clustered_z",
    )


def _check_p_values(p_values: Sequence[float]) -> list[float]:
    values = [float(p) for p in p_values]
    if not all(0 <= p <= 1 for p in values):  # also refuses NaN
        raise ValueError(f"p-values must lie in [0, 1], got {values}")
    return values


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (family-wise error), in input order.

    Sorted ascending, p_(i) becomes max over j ≤ i of min(1, (m − j + 1)·p_(j))."""
    values = _check_p_values(p_values)
    m = len(values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=values.__getitem__)):
        running = max(running, min(1.0, (m - rank) * values[index]))
        adjusted[index] = running
    return adjusted


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (false discovery rate, "q-values"), in input order.

    Sorted ascending, p_(i) becomes min over j ≥ i of min(1, m·p_(j)/j)."""
    values = _check_p_values(p_values)
    m = len(values)
    adjusted = [0.0] * m
    running = 1.0
    order = sorted(range(m), key=values.__getitem__)
    for rank in range(m, 0, -1):
        index = order[rank - 1]
        running = min(running, m * values[index] / rank)
        adjusted[index] = running
    return adjusted

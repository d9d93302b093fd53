"""Canary analysis statistics: a candidate arm against a baseline arm, one metric at a time. Pure, no Django.

Inputs are sufficient statistics (counts, sums, sums of squares), like GrowthBook's gbstats, so the cost
of an analysis does not grow with traffic. The one exception is latency, which needs the values
themselves for a rank test: callers pass a bounded sample per arm (for example the last 10 000
requests), never the full history.

Every comparison returns a `ComparisonResult` with a verdict:
- "fail": the candidate is worse by more than the threshold, and the test says it is not chance;
- "marginal": only one of the two holds (worse than the threshold but not significant, or
  significantly worse but within the threshold);
- "pass": neither holds;
- "insufficient_data": too few observations (fewer than the minimum per arm) or an estimate that is
  undefined (e.g. a zero baseline for a ratio). Insufficient data never passes.

Zero variance with enough data is not degenerate: when both arms have no errors (or every value is
the same) the arms are identical and the test gives p = 1, the limit that the exact tests give too.
Impossible input (negative counts, more events than trials, non-finite latencies) and invalid
settings (alpha outside (0, 1), a negative threshold, min_n < 1) raise ValueError: those are bugs,
not a lack of data.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any, TypedDict

from engines.reasons import Reason, Term, gettext_noop, reason, wordings_register
from engines.stats.effects import mean_effect
from engines.stats.hypothesis import holm_adjust, mcnemar_exact, welch_t
from engines.stats.intervals import newcombe_interval
from engines.stats.sufficient import MeanStats, Proportion

PASS, MARGINAL, FAIL, INSUFFICIENT_DATA = "pass", "marginal", "fail", "insufficient_data"
VERDICTS = (PASS, MARGINAL, FAIL, INSUFFICIENT_DATA)

# How `ComparisonResult.difference` (and `threshold`) is expressed.
ABSOLUTE = "absolute"  # candidate − baseline, in the metric's own unit (rates: fractions, 0.01 = 1 point)
RELATIVE = "relative"  # (candidate − baseline) / baseline
RATIO = "ratio"  # candidate / baseline


class ComparisonCode(StrEnum):
    TOO_FEW_OBSERVATIONS = "comparisons.too_few_observations"
    TOO_FEW_SAMPLES = "comparisons.too_few_samples"
    RATE_SUMMARY = "comparisons.rate_summary"
    RATE_NO_VARIANCE = "comparisons.rate_no_variance"
    Z_TEST = "comparisons.z_test"
    FAIL = "comparisons.fail"
    MARGINAL_NOT_SIGNIFICANT = "comparisons.marginal_not_significant"
    MARGINAL_WITHIN = "comparisons.marginal_within"
    PASS = "comparisons.pass"
    LATENCY_UNDEFINED = "comparisons.latency_undefined"
    LATENCY_SUMMARY = "comparisons.latency_summary"
    U_TEST = "comparisons.u_test"
    QUANTILE_UNDEFINED = "comparisons.quantile_undefined"
    QUANTILE_SUMMARY = "comparisons.quantile_summary"
    BOOTSTRAP = "comparisons.bootstrap"
    MEAN_UNDEFINED = "comparisons.mean_undefined"
    MEAN_NO_VARIANCE = "comparisons.mean_no_variance"
    T_TEST = "comparisons.t_test"
    MEAN_SUMMARY = "comparisons.mean_summary"
    PROBES_TOO_FEW = "comparisons.probes_too_few"
    PROBES_FAIL = "comparisons.probes_fail"
    PROBES_PASS_WORSE = "comparisons.probes_pass_worse"
    PROBES_PASS = "comparisons.probes_pass"
    PROBES_SUMMARY = "comparisons.probes_summary"
    HOLM = "comparisons.holm"
    NO_METRICS = "comparisons.no_metrics"
    OVERALL = "comparisons.overall"
    TALLY = "comparisons.tally"
    METRIC = "comparisons.metric"


# `op` is "<" or ">=": how p stands to alpha.
wordings_register(
    {
        ComparisonCode.TOO_FEW_OBSERVATIONS: gettext_noop(
            "insufficient data: {arm} has {count} observations, fewer than the minimum {min_n}"
        ),
        ComparisonCode.TOO_FEW_SAMPLES: gettext_noop(
            "insufficient data: {arm} has {count} samples, fewer than the minimum {min_n}"
        ),
        ComparisonCode.RATE_SUMMARY: gettext_noop(
            "candidate {candidate:.3%} ({c_k}/{c_n}) vs baseline {baseline:.3%} ({b_k}/{b_n}), difference "
            "{difference:+.3f} points, limit +{limit:.3f} points"
        ),
        ComparisonCode.RATE_NO_VARIANCE: gettext_noop("no variance: both arms at {pooled:.0%}, p=1"),
        ComparisonCode.Z_TEST: gettext_noop("z={z:.4f} (pooled rate {pooled:.4%}, standard error {se:.6f})"),
        ComparisonCode.FAIL: gettext_noop(
            "fail: worse than the threshold and significant (p={p:.4g} {op} alpha {alpha:g})"
        ),
        ComparisonCode.MARGINAL_NOT_SIGNIFICANT: gettext_noop(
            "marginal: worse than the threshold but not significant (p={p:.4g} {op} alpha {alpha:g})"
        ),
        ComparisonCode.MARGINAL_WITHIN: gettext_noop(
            "marginal: significantly worse but within the threshold (p={p:.4g} {op} alpha {alpha:g})"
        ),
        ComparisonCode.PASS: gettext_noop(
            "pass: within the threshold and not significantly worse (p={p:.4g} {op} alpha {alpha:g})"
        ),
        ComparisonCode.LATENCY_UNDEFINED: gettext_noop(
            "insufficient data: baseline median latency is {median:g}, the ratio is undefined"
        ),
        ComparisonCode.LATENCY_SUMMARY: gettext_noop(
            "candidate median {candidate:.4g} (n={c_n}) vs baseline median {baseline:.4g} (n={b_n}), ratio "
            "{ratio:.4f}, limit {limit:.4f}"
        ),
        ComparisonCode.U_TEST: gettext_noop("U={u:.1f}"),
        ComparisonCode.QUANTILE_UNDEFINED: gettext_noop(
            "insufficient data: the baseline's {statistic} is {value:g}, the ratio is undefined"
        ),
        ComparisonCode.QUANTILE_SUMMARY: gettext_noop(
            "candidate {statistic} {candidate:.4g} (n={c_n}) vs baseline {baseline:.4g} (n={b_n}), ratio "
            "{ratio:.4f} ({confidence:.0%} interval {low:.4f}–{high:.4f}), bar {limit:.4f}"
        ),
        ComparisonCode.BOOTSTRAP: gettext_noop(
            "percentile bootstrap, {resamples} resamples of each arm, seed {seed}"
        ),
        ComparisonCode.MEAN_UNDEFINED: gettext_noop(
            "insufficient data: baseline mean is {mean:g}, the relative difference is undefined"
        ),
        ComparisonCode.MEAN_NO_VARIANCE: gettext_noop("no variance: both arms are constant, p={p:g}"),
        ComparisonCode.T_TEST: gettext_noop("t={t:.4f}, df={df:.2f}"),
        ComparisonCode.MEAN_SUMMARY: gettext_noop(
            "candidate mean {candidate:.4g} (sd {c_sd:.4g}, n={c_n}) vs baseline mean {baseline:.4g} (sd "
            "{b_sd:.4g}, n={b_n}), relative difference {relative:+.2%}, limit +{limit:.2%}"
        ),
        ComparisonCode.PROBES_TOO_FEW: gettext_noop(
            "insufficient data: {pairs} probe pairs, fewer than the minimum {min_pairs}"
        ),
        ComparisonCode.PROBES_FAIL: gettext_noop(
            "fail: the baseline wins significantly more discordant pairs (p={p:.4g} {op} alpha {alpha:g})"
        ),
        ComparisonCode.PROBES_PASS_WORSE: gettext_noop(
            "pass: the baseline wins more discordant pairs but not significantly (p={p:.4g} {op} alpha "
            "{alpha:g})"
        ),
        ComparisonCode.PROBES_PASS: gettext_noop(
            "pass: the candidate is not worse (p={p:.4g} {op} alpha {alpha:g})"
        ),
        ComparisonCode.PROBES_SUMMARY: gettext_noop(
            "candidate accuracy {candidate:.2%} vs baseline {baseline:.2%} over {pairs} pairs; only "
            "candidate correct {only_candidate}, only baseline correct {only_baseline}"
        ),
        ComparisonCode.HOLM: gettext_noop(
            "after Holm across {m} tested metrics: adjusted p={p:.4g} {op} alpha {alpha:g}, {before} becomes "
            "{after}"
        ),
        ComparisonCode.NO_METRICS: gettext_noop("insufficient data: no metrics were analysed"),
        ComparisonCode.OVERALL: gettext_noop("overall {verdict}: {tally} across {n} metrics"),
        ComparisonCode.TALLY: gettext_noop("{count} {verdict}"),
        ComparisonCode.METRIC: gettext_noop("{metric} [{verdict}]: {why}"),
    }
)


@dataclass(frozen=True)
class ComparisonResult:
    """The outcome of comparing one metric between the arms.

    `difference` is candidate − baseline, relative to the baseline, or candidate / baseline, as
    `difference_kind` says; `threshold` is the limit it was held to, in the same terms. `p_value` is
    None where no test was run (insufficient data)."""

    metric: str
    verdict: str
    reasons: tuple[Reason, ...]
    candidate_estimate: float | None
    baseline_estimate: float | None
    difference: float | None
    difference_kind: str
    p_value: float | None
    candidate_n: int
    baseline_n: int
    threshold: float
    alpha: float
    min_n: int
    test: str
    # Whether the estimate is worse than the threshold (None: not tested), and the verdict when only
    # one of "worse than the threshold" and "significant" holds (probes: pass).
    exceeds: bool | None = None
    partial: str = MARGINAL
    # The p-value after Holm across the analysis's tested metrics (`guardrails_holm`); the verdict
    # was decided on it.
    adjusted_p_value: float | None = None
    # Which way of `difference` is worse for the candidate (latencies, rates: up; speeds, accuracy: down).
    higher_is_worse: bool = True
    # An interval on `difference` where the comparison gives one (rates: Newcombe; turns: delta
    # method; quantile ratios: percentile bootstrap).
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (reasons as a list of codes and parameters)."""
        data = asdict(self)
        data["reasons"] = [item.to_json() for item in self.reasons]
        return data


class _Common(TypedDict):
    """The `ComparisonResult` fields a comparison fixes before it knows the outcome."""

    metric: str
    candidate_estimate: float | None
    baseline_estimate: float | None
    difference_kind: str
    candidate_n: int
    baseline_n: int
    threshold: float
    alpha: float
    min_n: int
    test: str


class _CommonWithDifference(_Common):
    """The same, for comparisons whose difference is known before the test."""

    difference: float | None


def _settings_check(*, alpha: float, min_n: int, threshold: float, threshold_name: str) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha} outside (0, 1)")
    if min_n < 1:
        raise ValueError(f"min_n={min_n} must be at least 1")
    if not threshold >= 0:
        raise ValueError(f"{threshold_name}={threshold} must be non-negative")


def _verdict_decide(*, exceeds: bool, significant: bool) -> str:
    if exceeds and significant:
        return FAIL
    if exceeds or significant:
        return MARGINAL
    return PASS


def _op(p_value: float, alpha: float) -> str:
    return "<" if p_value < alpha else ">="


def _verdict_reason(*, verdict: str, p_value: float, alpha: float) -> Reason:
    code = {
        FAIL: ComparisonCode.FAIL,
        MARGINAL: ComparisonCode.MARGINAL_NOT_SIGNIFICANT
        if p_value >= alpha
        else ComparisonCode.MARGINAL_WITHIN,
        PASS: ComparisonCode.PASS,
    }[verdict]
    return reason(code, p=p_value, op=_op(p_value, alpha), alpha=alpha)


def _too_few_reasons(*, min_n: int, counts: dict[str, int], code: ComparisonCode) -> list[Reason]:
    return [
        reason(code, arm=Term(arm), count=count, min_n=min_n)
        for arm, count in counts.items()
        if count < min_n
    ]


def rate_compare(
    *,
    metric: str,
    candidate: Proportion,
    baseline: Proportion,
    max_increase: float,
    min_n: int,
    alpha: float = 0.05,
) -> ComparisonResult:
    """Compare a lower-is-better rate (errors, fallbacks, follow-ups) with a pooled two-proportion z-test.

    One-sided: H1 is "the candidate's rate is higher". fail when the candidate's rate exceeds the
    baseline's by more than `max_increase` (absolute, 0.005 = half a point) and p < alpha."""
    from scipy import stats as scipy_stats

    _settings_check(alpha=alpha, min_n=min_n, threshold=max_increase, threshold_name="max_increase")
    candidate_rate, baseline_rate = candidate.rate, baseline.rate
    difference = None if candidate_rate is None or baseline_rate is None else candidate_rate - baseline_rate
    common: _CommonWithDifference = dict(
        metric=metric,
        candidate_estimate=candidate_rate,
        baseline_estimate=baseline_rate,
        difference=difference,
        difference_kind=ABSOLUTE,
        candidate_n=candidate.n,
        baseline_n=baseline.n,
        threshold=max_increase,
        alpha=alpha,
        min_n=min_n,
        test="two-proportion z-test (pooled, one-sided)",
    )
    too_few = _too_few_reasons(
        min_n=min_n,
        counts={"candidate": candidate.n, "baseline": baseline.n},
        code=ComparisonCode.TOO_FEW_OBSERVATIONS,
    )
    if too_few:
        return ComparisonResult(verdict=INSUFFICIENT_DATA, reasons=tuple(too_few), p_value=None, **common)

    assert candidate_rate is not None and baseline_rate is not None and difference is not None
    pooled = (candidate.successes + baseline.successes) / (candidate.n + baseline.n)
    standard_error = math.sqrt(pooled * (1 - pooled) * (1 / candidate.n + 1 / baseline.n))
    summary = reason(
        ComparisonCode.RATE_SUMMARY,
        candidate=candidate_rate,
        c_k=candidate.successes,
        c_n=candidate.n,
        baseline=baseline_rate,
        b_k=baseline.successes,
        b_n=baseline.n,
        difference=difference * 100,
        limit=max_increase * 100,
    )
    if standard_error == 0:
        # Pooled rate 0 or 1: both arms at the same extreme, no evidence either way (Fisher's exact p is 1).
        p_value = 1.0
        test_reason = reason(ComparisonCode.RATE_NO_VARIANCE, pooled=pooled)
    else:
        z = difference / standard_error
        p_value = float(scipy_stats.norm.sf(z))
        test_reason = reason(ComparisonCode.Z_TEST, z=z, pooled=pooled, se=standard_error)
    exceeds = difference > max_increase
    verdict = _verdict_decide(exceeds=exceeds, significant=p_value < alpha)
    reasons = (summary, test_reason, _verdict_reason(verdict=verdict, p_value=p_value, alpha=alpha))
    # The difference's Newcombe (hybrid score) interval, for the readout: the verdict is the test's.
    _, ci_low, ci_high = newcombe_interval(
        successes_1=candidate.successes, n_1=candidate.n, successes_2=baseline.successes, n_2=baseline.n
    )
    return ComparisonResult(
        verdict=verdict,
        reasons=reasons,
        p_value=p_value,
        exceeds=exceeds,
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=0.95,
        **common,
    )


def error_rate_compare(
    *,
    candidate: Proportion,
    baseline: Proportion,
    max_increase: float,
    min_n: int,
    alpha: float = 0.05,
    metric: str = "error_rate",
) -> ComparisonResult:
    """Compare error rates (errors out of requests); see `rate_compare`."""
    return rate_compare(
        metric=metric,
        candidate=candidate,
        baseline=baseline,
        max_increase=max_increase,
        min_n=min_n,
        alpha=alpha,
    )


def latency_compare(
    *,
    candidate: Sequence[float],
    baseline: Sequence[float],
    max_ratio: float,
    min_n: int,
    alpha: float = 0.05,
    metric: str = "latency",
) -> ComparisonResult:
    """Compare latencies with a one-sided Mann-Whitney U test (H1: the candidate is slower).

    The samples are bounded (e.g. the last 10 000 latencies per arm), not the full history: the rank
    test needs the values, so callers cap them to keep the cost flat. The effect size is the ratio of
    the medians, candidate / baseline; fail when it exceeds `max_ratio` (1.2 = 20 % slower) and
    p < alpha. scipy picks the exact U distribution for small samples without ties, else the normal
    approximation with tie and continuity corrections."""
    from scipy import stats as scipy_stats

    if not max_ratio > 0:
        raise ValueError(f"max_ratio={max_ratio} must be positive")
    _settings_check(alpha=alpha, min_n=min_n, threshold=max_ratio, threshold_name="max_ratio")
    for arm, values in (("candidate", candidate), ("baseline", baseline)):
        if not all(math.isfinite(value) for value in values):
            raise ValueError(f"{arm} latencies contain a non-finite value")
    candidate_median = float(statistics.median(candidate)) if len(candidate) else None
    baseline_median = float(statistics.median(baseline)) if len(baseline) else None
    common: _Common = dict(
        metric=metric,
        candidate_estimate=candidate_median,
        baseline_estimate=baseline_median,
        difference_kind=RATIO,
        candidate_n=len(candidate),
        baseline_n=len(baseline),
        threshold=max_ratio,
        alpha=alpha,
        min_n=min_n,
        test="Mann-Whitney U (one-sided)",
    )
    too_few = _too_few_reasons(
        min_n=min_n,
        counts={"candidate": len(candidate), "baseline": len(baseline)},
        code=ComparisonCode.TOO_FEW_SAMPLES,
    )
    if too_few:
        return ComparisonResult(
            verdict=INSUFFICIENT_DATA, reasons=tuple(too_few), difference=None, p_value=None, **common
        )
    assert candidate_median is not None and baseline_median is not None
    if baseline_median <= 0:
        undefined = reason(ComparisonCode.LATENCY_UNDEFINED, median=baseline_median)
        return ComparisonResult(
            verdict=INSUFFICIENT_DATA, reasons=(undefined,), difference=None, p_value=None, **common
        )

    ratio = candidate_median / baseline_median
    result = scipy_stats.mannwhitneyu(candidate, baseline, alternative="greater")
    p_value = float(result.pvalue)
    exceeds = ratio > max_ratio
    verdict = _verdict_decide(exceeds=exceeds, significant=p_value < alpha)
    reasons = (
        reason(
            ComparisonCode.LATENCY_SUMMARY,
            candidate=candidate_median,
            c_n=len(candidate),
            baseline=baseline_median,
            b_n=len(baseline),
            ratio=ratio,
            limit=max_ratio,
        ),
        reason(ComparisonCode.U_TEST, u=float(result.statistic)),
        _verdict_reason(verdict=verdict, p_value=p_value, alpha=alpha),
    )
    return ComparisonResult(
        verdict=verdict, reasons=reasons, difference=ratio, p_value=p_value, exceeds=exceeds, **common
    )


@dataclass(frozen=True, kw_only=True)
class RatioStatistic:
    """What `quantile_ratio_compare` compares: a quantile of each arm (0.5 the median), and which way
    is worse (latencies: higher; speeds such as tokens per second: lower)."""

    name: str  # as the reasons name it: "p50", "p95"
    quantile: float
    higher_is_worse: bool = True


@dataclass(frozen=True, kw_only=True)
class _Bootstrap:
    low: float
    high: float
    p_value: float  # one-sided, for "the candidate is worse"


def _ratio_bootstrap(
    *,
    candidate: Any,
    baseline: Any,
    statistic: RatioStatistic,
    confidence: float,
    resamples: int,
    seed: int,
) -> _Bootstrap:
    """scipy's percentile bootstrap of the quantiles' ratio (each arm resampled on its own), and the
    share of its resampled ratios on the not-worse side of 1 as p (plus one above and below)."""
    import numpy as np
    from scipy import stats as scipy_stats

    def ratio_of(c: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        low = np.quantile(b, statistic.quantile, axis=axis)
        # A resample whose baseline quantile is 0 has no ratio; infinity keeps it on the worse side.
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(low > 0, np.quantile(c, statistic.quantile, axis=axis) / low, np.inf)

    boot = scipy_stats.bootstrap(
        (candidate, baseline),
        ratio_of,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        batch=100,
        random_state=np.random.default_rng(seed),
    )
    ratios = boot.bootstrap_distribution
    not_worse = np.count_nonzero(ratios <= 1 if statistic.higher_is_worse else ratios >= 1)
    return _Bootstrap(
        low=float(boot.confidence_interval.low),
        high=float(boot.confidence_interval.high),
        p_value=float((not_worse + 1) / (ratios.size + 1)),
    )


def _values_check(**arms: Sequence[float]) -> dict[str, Any]:
    """Each arm's values as a float array; a non-finite value is a bug, not data."""
    import numpy as np

    arrays = {arm: np.asarray(values, dtype=float) for arm, values in arms.items()}
    for arm, values in arrays.items():
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{arm} values contain a non-finite value")
    return arrays


def quantile_ratio_compare(
    *,
    candidate: Sequence[float],
    baseline: Sequence[float],
    statistic: RatioStatistic,
    bar: float,
    min_n: int,
    metric: str,
    alpha: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> ComparisonResult:
    """The ratio candidate ÷ baseline of a quantile of each arm (bounded samples of values, as for
    `latency_compare`), with a percentile-bootstrap interval (Efron & Tibshirani 1993, ch. 13:
    `scipy.stats.bootstrap`, each arm resampled on its own) and a one-sided bootstrap p for "the
    candidate is worse": the share of resampled ratios on the not-worse side of 1, i.e. the
    smallest alpha at which the one-sided percentile interval excludes 1 (plus one in numerator and
    denominator, so p is never 0). `bar` is the worst ratio allowed: fail when the ratio is past it
    (above it where higher is worse, below it where lower is) and p < alpha. The seed is fixed, so the
    same samples always give the same verdict: an analysis cannot be re-rolled."""
    import numpy as np

    if not bar > 0:
        raise ValueError(f"bar={bar} must be positive")
    if not 0 < statistic.quantile < 1 or not 0 < confidence < 1 or resamples < 1:
        raise ValueError("quantile and confidence must lie in (0, 1), resamples be at least 1")
    _settings_check(alpha=alpha, min_n=min_n, threshold=bar, threshold_name="bar")
    arrays = _values_check(candidate=candidate, baseline=baseline)
    mine, theirs = (
        float(np.quantile(arrays[arm], statistic.quantile)) if arrays[arm].size else None
        for arm in ("candidate", "baseline")
    )
    common: _Common = dict(
        metric=metric,
        candidate_estimate=mine,
        baseline_estimate=theirs,
        difference_kind=RATIO,
        candidate_n=int(arrays["candidate"].size),
        baseline_n=int(arrays["baseline"].size),
        threshold=bar,
        alpha=alpha,
        min_n=min_n,
        test=f"percentile bootstrap of the {statistic.name} ratio",
    )
    too_few = _too_few_reasons(
        min_n=min_n,
        counts={arm: int(values.size) for arm, values in arrays.items()},
        code=ComparisonCode.TOO_FEW_SAMPLES,
    )
    if not too_few and theirs is not None and theirs <= 0:
        too_few = [reason(ComparisonCode.QUANTILE_UNDEFINED, statistic=statistic.name, value=theirs)]
    if too_few:
        return ComparisonResult(
            verdict=INSUFFICIENT_DATA,
            reasons=tuple(too_few),
            difference=None,
            p_value=None,
            higher_is_worse=statistic.higher_is_worse,
            **common,
        )
    assert mine is not None and theirs is not None
    ratio = mine / theirs
    boot = _ratio_bootstrap(
        candidate=arrays["candidate"],
        baseline=arrays["baseline"],
        statistic=statistic,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    exceeds = ratio > bar if statistic.higher_is_worse else ratio < bar
    verdict = _verdict_decide(exceeds=exceeds, significant=boot.p_value < alpha)
    summary = reason(
        ComparisonCode.QUANTILE_SUMMARY,
        statistic=statistic.name,
        candidate=mine,
        c_n=common["candidate_n"],
        baseline=theirs,
        b_n=common["baseline_n"],
        ratio=ratio,
        confidence=confidence,
        low=boot.low,
        high=boot.high,
        limit=bar,
    )
    return ComparisonResult(
        verdict=verdict,
        reasons=(
            summary,
            reason(ComparisonCode.BOOTSTRAP, resamples=resamples, seed=seed),
            _verdict_reason(verdict=verdict, p_value=boot.p_value, alpha=alpha),
        ),
        difference=ratio,
        p_value=boot.p_value,
        exceeds=exceeds,
        higher_is_worse=statistic.higher_is_worse,
        ci_low=boot.low,
        ci_high=boot.high,
        confidence=confidence,
        **common,
    )


def mean_compare(
    *,
    candidate: MeanStats,
    baseline: MeanStats,
    max_increase_ratio: float,
    min_n: int,
    alpha: float = 0.05,
    metric: str = "turns_per_session",
) -> ComparisonResult:
    """Compare lower-is-better means (e.g. turns per session) with a one-sided Welch t-test.

    H1: the candidate's mean is higher. The effect size is relative, (candidate − baseline) / baseline;
    fail when it exceeds `max_increase_ratio` (0.1 = 10 % higher) and p < alpha. At least two values
    per arm are needed whatever `min_n` says. When both arms are constant the standard error is zero
    and the one-sided test's limit is used: p = 0 if the candidate's mean is higher, else 1."""
    from scipy import stats as scipy_stats

    _settings_check(
        alpha=alpha, min_n=min_n, threshold=max_increase_ratio, threshold_name="max_increase_ratio"
    )
    required = max(min_n, 2)
    candidate_mean, baseline_mean = candidate.mean, baseline.mean
    common: _Common = dict(
        metric=metric,
        candidate_estimate=candidate_mean,
        baseline_estimate=baseline_mean,
        difference_kind=RELATIVE,
        candidate_n=candidate.n,
        baseline_n=baseline.n,
        threshold=max_increase_ratio,
        alpha=alpha,
        min_n=min_n,
        test="Welch t-test (one-sided)",
    )
    too_few = _too_few_reasons(
        min_n=required,
        counts={"candidate": candidate.n, "baseline": baseline.n},
        code=ComparisonCode.TOO_FEW_OBSERVATIONS,
    )
    if too_few:
        return ComparisonResult(
            verdict=INSUFFICIENT_DATA, reasons=tuple(too_few), difference=None, p_value=None, **common
        )
    assert candidate_mean is not None and baseline_mean is not None
    if baseline_mean <= 0:
        undefined = reason(ComparisonCode.MEAN_UNDEFINED, mean=baseline_mean)
        return ComparisonResult(
            verdict=INSUFFICIENT_DATA, reasons=(undefined,), difference=None, p_value=None, **common
        )

    relative = (candidate_mean - baseline_mean) / baseline_mean
    candidate_sd, baseline_sd = math.sqrt(candidate.variance or 0.0), math.sqrt(baseline.variance or 0.0)
    if candidate_sd == 0 and baseline_sd == 0:
        p_value = 0.0 if candidate_mean > baseline_mean else 1.0
        test_reason = reason(ComparisonCode.MEAN_NO_VARIANCE, p=p_value)
    else:
        t, df = welch_t(first=candidate, second=baseline)
        p_value = float(scipy_stats.t.sf(t, df))
        test_reason = reason(ComparisonCode.T_TEST, t=t, df=df)
    exceeds = relative > max_increase_ratio
    verdict = _verdict_decide(exceeds=exceeds, significant=p_value < alpha)
    reasons = (
        reason(
            ComparisonCode.MEAN_SUMMARY,
            candidate=candidate_mean,
            c_sd=candidate_sd,
            c_n=candidate.n,
            baseline=baseline_mean,
            b_sd=baseline_sd,
            b_n=baseline.n,
            relative=relative,
            limit=max_increase_ratio,
        ),
        test_reason,
        _verdict_reason(verdict=verdict, p_value=p_value, alpha=alpha),
    )
    # The relative difference's delta-method interval, for the readout: the verdict is the test's.
    effect = mean_effect(control=baseline, treatment=candidate)
    return ComparisonResult(
        verdict=verdict,
        reasons=reasons,
        difference=relative,
        p_value=p_value,
        exceeds=exceeds,
        ci_low=effect.relative_ci_low,
        ci_high=effect.relative_ci_high,
        confidence=0.95 if effect.relative_ci_low is not None else None,
        **common,
    )


def probes_compare(
    *,
    only_candidate_correct: int,
    only_baseline_correct: int,
    both_correct: int,
    neither_correct: int,
    min_pairs: int,
    alpha: float = 0.05,
    metric: str = "probes",
) -> ComparisonResult:
    """Compare paired probe outcomes (each probe sent to both arms) with the exact McNemar test.

    The estimates are the arms' accuracies, the difference is candidate − baseline accuracy (negative:
    the candidate is worse) and the threshold is 0: any significant loss fails. fail when the baseline
    wins more discordant pairs and the two-sided exact p < alpha (so a one-sided level of alpha / 2,
    conservative); pass otherwise, given at least `min_pairs` pairs."""
    counts = (only_candidate_correct, only_baseline_correct, both_correct, neither_correct)
    if any(count < 0 for count in counts):
        raise ValueError(f"negative probe counts {counts}")
    _settings_check(alpha=alpha, min_n=min_pairs, threshold=0.0, threshold_name="threshold")
    pairs = sum(counts)
    candidate_accuracy = (only_candidate_correct + both_correct) / pairs if pairs else None
    baseline_accuracy = (only_baseline_correct + both_correct) / pairs if pairs else None
    difference = (only_candidate_correct - only_baseline_correct) / pairs if pairs else None
    common: _CommonWithDifference = dict(
        metric=metric,
        candidate_estimate=candidate_accuracy,
        baseline_estimate=baseline_accuracy,
        difference=difference,
        difference_kind=ABSOLUTE,
        candidate_n=pairs,
        baseline_n=pairs,
        threshold=0.0,
        alpha=alpha,
        min_n=min_pairs,
        test="exact McNemar (two-sided)",
    )
    if pairs < min_pairs:
        too_few = reason(ComparisonCode.PROBES_TOO_FEW, pairs=pairs, min_pairs=min_pairs)
        return ComparisonResult(
            verdict=INSUFFICIENT_DATA, reasons=(too_few,), p_value=None, higher_is_worse=False, **common
        )

    assert candidate_accuracy is not None and baseline_accuracy is not None
    p_value = mcnemar_exact(only_first=only_candidate_correct, only_second=only_baseline_correct)
    significant = p_value < alpha
    worse = only_baseline_correct > only_candidate_correct
    verdict = FAIL if worse and significant else PASS
    if verdict == FAIL:
        code = ComparisonCode.PROBES_FAIL
    else:
        code = ComparisonCode.PROBES_PASS_WORSE if worse else ComparisonCode.PROBES_PASS
    reasons = (
        reason(
            ComparisonCode.PROBES_SUMMARY,
            candidate=candidate_accuracy,
            baseline=baseline_accuracy,
            pairs=pairs,
            only_candidate=only_candidate_correct,
            only_baseline=only_baseline_correct,
        ),
        reason(code, p=p_value, op=_op(p_value, alpha), alpha=alpha),
    )
    return ComparisonResult(
        verdict=verdict,
        reasons=reasons,
        p_value=p_value,
        exceeds=worse,
        partial=PASS,
        higher_is_worse=False,
        **common,
    )


def guardrails_holm(results: Sequence[ComparisonResult]) -> list[ComparisonResult]:
    """The family-wise step of an analysis: each tested metric's significance judged on its Holm
    adjusted p-value across the metrics tested together, so that the chance that a healthy candidate
    fails any of them (and is rolled back) is at most alpha, however many metrics are watched (Holm
    needs no independence between them). The raw p-values and the tests' own reasons stay; a verdict
    the adjustment changes says so."""
    tested = [index for index, result in enumerate(results) if result.p_value is not None]
    adjusted = holm_adjust([results[index].p_value or 0.0 for index in tested])
    out = list(results)
    for index, p_value in zip(tested, adjusted, strict=True):
        result = results[index]
        significant = p_value < result.alpha
        if result.exceeds and significant:
            verdict = FAIL
        else:
            verdict = result.partial if result.exceeds or significant else PASS
        reasons = result.reasons
        if verdict != result.verdict:
            holm = reason(
                ComparisonCode.HOLM,
                m=len(tested),
                p=p_value,
                op=_op(p_value, result.alpha),
                alpha=result.alpha,
                before=Term(result.verdict),
                after=Term(verdict),
            )
            reasons = (*reasons, holm)
        out[index] = replace(result, verdict=verdict, reasons=reasons, adjusted_p_value=p_value)
    return out


def analysis_combine(results: Iterable[ComparisonResult]) -> tuple[str, tuple[Reason, ...]]:
    """The overall verdict of an analysis and its reasons.

    fail if any metric fails; else insufficient_data if any metric lacks data; else marginal if any is
    marginal; else pass. So insufficient data never yields pass, and no metrics at all is
    insufficient_data. The reasons: a count per verdict, then every metric's reasons, prefixed."""
    results = list(results)
    if not results:
        return INSUFFICIENT_DATA, (reason(ComparisonCode.NO_METRICS),)
    verdicts = [result.verdict for result in results]
    unknown = set(verdicts) - set(VERDICTS)
    if unknown:
        raise ValueError(f"unknown verdicts {sorted(unknown)}")
    overall = next(verdict for verdict in (FAIL, INSUFFICIENT_DATA, MARGINAL, PASS) if verdict in verdicts)
    tally = [
        reason(ComparisonCode.TALLY, count=verdicts.count(verdict), verdict=Term(verdict))
        for verdict in VERDICTS
        if verdict in verdicts
    ]
    reasons = [reason(ComparisonCode.OVERALL, verdict=Term(overall), tally=tally, n=len(results))]
    reasons += [
        reason(ComparisonCode.METRIC, metric=Term(result.metric), verdict=Term(result.verdict), why=why)
        for result in results
        for why in result.reasons
    ]
    return overall, tuple(reasons)

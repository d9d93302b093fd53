"""Layer 3, business value: does the candidate improve the policy's outcome metric in a user-randomised
A/B test by at least the minimum effect? Pure, no Django; the statistics come from `engines.stats`
(which, as statistics do, calls the arms control and treatment: here the baseline and the candidate).

Inputs are per-arm sufficient statistics of the baseline and the candidate:
- `RatioStats` when outcomes cluster in users (the randomisation unit): per user x = Σ metric values
  (review hours), y = number of outcomes (contracts), metric Σx/Σy, delta-method variance (`ratio_effect`);
- `MeanStats` when every outcome is its own independent unit: Welch's t-test (`mean_effect`).

Decision: a one-sided test at level `alpha`. The improvement is baseline − candidate when `direction` is
"decrease" (less is better) and candidate − baseline when "increase", in the metric's unit. The two-sided
(1 − 2·alpha) interval of the effect gives, at its improvement-side lower end, the one-sided (1 − alpha)
lower confidence bound; pass when that bound is ≥ `min_effect` (> 0 when `min_effect` is 0). Under an A/A
test the bound clears 0 with probability about alpha (the normal approximation), so false passes come at
rate alpha; `aa_simulation` checks this.

Sequential (`sequential_tau` set): the interval is the always-valid normal-mixture confidence sequence
(`engines.stats.effects.sequential_interval`, Howard et al. 2021; Johari et al., "Always valid inference") at
confidence 1 − 2·alpha, and its improvement-side lower end decides, so the layer may be recomputed at
every look without inflating the false-positive rate. The mixture is symmetric, so each side is crossed
with probability about alpha (at most alpha plus half the chance of crossing both sides, which is
negligible). `sequential_interval` takes per-unit MeanStats; a ratio metric is linearised first (delta
method): R̂ − R ≈ mean over users of z_i = (x_i − R̂·y_i)/ȳ, so the arm's variance of R̂ is s_z²/n,
which is `RatioStats.ratio_variance`. The arm enters as MeanStats of n pseudo-units with mean R̂ and sample
variance s_z² = n·ratio_variance (total n·R̂, total of squares (n − 1)·s_z² + n·R̂²), which gives
sequential_interval the delta-method V = Var(R̂_c) + Var(R̂_t) (up to rounding). `sequential_tau` (> 0, in the
metric's unit) is the spread of effects the mixture bets on; fix it with the policy, before any data, on
the scale of the minimum effect worth detecting: choosing it from the data voids the guarantee.

CUPED (`RatioCupedStats` arms: each unit's same ratio over its pre-period as the covariate): the effect
is `ratio_cuped_effect`'s, the sequential interval takes the adjusted arms, and the result carries θ, the
variance reduction and the unadjusted effect (`CupedSummary`).

Verdicts, in order: a sample ratio mismatch of the assigned units (`srm_check`, p < srm_alpha) is
"error" whatever the effect (the assignment or logging is broken); a fixed-horizon test given a
`FixedHorizon` is "insufficient_data" while none was registered or until both arms reach it (no estimate
in the reasons: reading it before the horizon is peeking); fewer than `min_units` units in an arm, or
degenerate statistics (`Effect.error`: zero variance, zero denominator), is "insufficient_data"; then pass
or fail. A fail whose point estimate clears the minimum effect says, when sequential or without a
horizon, about how many units per arm the bound would need to clear it too, if the effect held at its
estimate: n·(z₁₋α·se/(estimate − min_effect))² at a fixed horizon, the n at which the normal-mixture
half-width shrinks to estimate − min_effect when sequential (the variance of the difference falls as
1/n); at a registered horizon it is a fail (the horizon was the one look). Invalid settings raise
ValueError naming the argument.

Blind: under a registered horizon every verdict but pass or fail (before the horizon, no horizon, a
sample ratio mismatch, degenerate statistics) comes as a blind result: the units per arm, the
sample-ratio check and the horizon, and no estimate, interval, p-value, lift or per-arm value, so that
nothing downstream can show what the one look has not decided yet (`business_value_blind`). With
`unblinded` (a person with the permission chose to see them, `gate.judges.plan.Unblinding`) the numbers
so far come back beside the undecided verdict, naming who and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

from engines.reasons import Reason, Term, gettext_noop, reason, wordings_register
from engines.stats.effects import (
    Effect,
    mean_effect,
    ratio_cuped_adjust,
    ratio_cuped_effect,
    ratio_effect,
    sequential_half_width,
    sequential_interval,
)
from engines.stats.hypothesis import SrmResult, srm_check
from engines.stats.intervals import z_for
from engines.stats.sufficient import MIN_UNITS, MeanStats, RatioCupedStats, RatioStats, pseudo_units
from gate.judges.plan import LookRecord, Unblinding
from gate.judges.traffic import TrafficInputs
from gate.judges.verdict import ERROR, FAIL, INSUFFICIENT, PASS
from gate.policy import PolicySection, setting
from gate.reporting import Attribution

DECREASE, INCREASE = "decrease", "increase"
BUSINESS_DIRECTIONS = (DECREASE, INCREASE)
PER = ("user", "outcome")
# Which fixed horizon registers: the plain delta method's, or one shrunk by CUPED's measured reduction.
PLAIN, CUPED = "plain", "cuped"
HORIZON_SIZINGS = (PLAIN, CUPED)


class BusinessValueCode(StrEnum):
    SAMPLE_RATIO_MISMATCH = "business_value.sample_ratio_mismatch"
    CHI_SQUARE = "business_value.chi_square"
    EXACT_BINOMIAL = "business_value.exact_binomial"
    NO_HORIZON = "business_value.no_horizon"
    TOO_FEW_UNITS = "business_value.too_few_units"
    BEFORE_HORIZON = "business_value.before_horizon"
    NO_EFFECT = "business_value.no_effect"
    NO_SEQUENTIAL_INTERVAL = "business_value.no_sequential_interval"
    INTERIM = "business_value.interim"
    INTERIM_WITH_NUMBERS = "business_value.interim_with_numbers"
    IMPROVEMENT = "business_value.improvement"
    IMPROVEMENT_ALWAYS_VALID = "business_value.improvement_always_valid"
    CUPED_ADJUSTED = "business_value.cuped_adjusted"
    AT_HORIZON = "business_value.at_horizon"
    CLEARS_MIN_EFFECT = "business_value.clears_min_effect"
    CLEARS_ZERO = "business_value.clears_zero"
    BELOW_MIN_EFFECT = "business_value.below_min_effect"
    NOT_ABOVE_ZERO = "business_value.not_above_zero"
    NOT_SHOWN_MIN_EFFECT = "business_value.not_shown_min_effect"
    NOT_SHOWN_ZERO = "business_value.not_shown_zero"


wordings_register(
    {
        BusinessValueCode.SAMPLE_RATIO_MISMATCH: gettext_noop(
            "sample ratio mismatch: {baseline} baseline and {candidate} candidate units assigned against an "
            "expected candidate share {share:g} ({test}, p = {p:.3g} < {alpha:g}): the assignment or logging "
            "is broken, the effect is not trusted"
        ),
        BusinessValueCode.CHI_SQUARE: gettext_noop("chi-square {chi_square:.2f}"),
        BusinessValueCode.EXACT_BINOMIAL: gettext_noop("exact binomial test"),
        BusinessValueCode.NO_HORIZON: gettext_noop(
            "no fixed horizon was registered: {basis}; the fixed-horizon test is judged once, at the "
            "horizon; set business_sequential_tau (fixed before the experiment) for an interval that may be "
            "judged at every look"
        ),
        BusinessValueCode.TOO_FEW_UNITS: gettext_noop(
            "{arm} has {n} units, the policy needs at least {need}"
        ),
        BusinessValueCode.BEFORE_HORIZON: gettext_noop(
            "before the registered horizon of {units} units per arm ({baseline} baseline and {candidate} "
            "candidate units so far; {basis}): the fixed-horizon test is judged once, at the horizon; set "
            "business_sequential_tau (fixed before the experiment) for an interval that may be judged at "
            "every look"
        ),
        BusinessValueCode.NO_EFFECT: gettext_noop("the effect cannot be estimated: {why}"),
        BusinessValueCode.NO_SEQUENTIAL_INTERVAL: gettext_noop(
            "the sequential interval cannot be computed: {why}"
        ),
        BusinessValueCode.INTERIM: gettext_noop("{unblinded}; interim numbers, not a decision"),
        BusinessValueCode.INTERIM_WITH_NUMBERS: gettext_noop(
            # xgettext:no-python-format
            "{unblinded}; interim numbers, not a decision: improvement ({direction} is better) "
            "{estimate:.4g}, {level:g} % interval [{low:.4g}, {high:.4g}], read before the horizon"
        ),
        BusinessValueCode.IMPROVEMENT: gettext_noop(
            # xgettext:no-python-format
            "improvement ({direction} is better) {estimate:.4g}, {level:g} % interval [{low:.4g}, {high:.4g}]"
        ),
        BusinessValueCode.IMPROVEMENT_ALWAYS_VALID: gettext_noop(
            "improvement ({direction} is better) {estimate:.4g}, {level:g} % always-valid interval "
            "[{low:.4g}, {high:.4g}]"
        ),
        BusinessValueCode.CUPED_ADJUSTED: gettext_noop("CUPED-adjusted {summary}"),
        BusinessValueCode.AT_HORIZON: gettext_noop(" at the registered horizon of {units} units per arm"),
        BusinessValueCode.CLEARS_MIN_EFFECT: gettext_noop(
            "{summary}{at}: lower bound {low:.4g} >= the minimum effect {min_effect:g} (one-sided test at "
            "alpha {alpha:g})"
        ),
        BusinessValueCode.CLEARS_ZERO: gettext_noop(
            "{summary}{at}: lower bound {low:.4g} > 0 (one-sided test at alpha {alpha:g})"
        ),
        BusinessValueCode.BELOW_MIN_EFFECT: gettext_noop(
            "{summary}{at}: lower bound {low:.4g} is below the minimum effect {min_effect:g}"
        ),
        BusinessValueCode.NOT_ABOVE_ZERO: gettext_noop(
            "{summary}{at}: lower bound {low:.4g} is not above 0 (no improvement shown)"
        ),
        BusinessValueCode.NOT_SHOWN_MIN_EFFECT: gettext_noop(
            "not shown yet: the estimate clears the minimum effect {min_effect:g} but the bound does not; "
            "about {baseline} baseline and {candidate} candidate units would show it if the effect held at "
            "its estimate"
        ),
        BusinessValueCode.NOT_SHOWN_ZERO: gettext_noop(
            "not shown yet: the estimate clears 0 but the bound does not; about {baseline} baseline and "
            "{candidate} candidate units would show it if the effect held at its estimate"
        ),
    }
)


@dataclass(frozen=True)
class BusinessValuePolicy(PolicySection):
    business_metric: str | None = setting(
        None, help="the outcome metric judged (OutcomeEvent.metric); null: the layer is an error"
    )
    business_direction: str = setting(DECREASE, choices=BUSINESS_DIRECTIONS, help="which way is better")
    business_min_effect: float = setting(
        0.0, low=0.0, high=1e12, help="the smallest improvement worth shipping, in the metric's unit"
    )
    business_per: str = setting(
        "user",
        choices=PER,
        help="user: Σ values / Σ outcomes per user (ratio, delta method; users are the randomisation "
        "unit); outcome: every outcome an independent unit (Welch)",
    )
    business_min_units: int = setting(
        100, low=2, high=10**9, help="fewer units in an arm is insufficient data"
    )
    business_alpha: float = setting(
        0.05, low=0.0001, high=0.25, help="one-sided level (the interval shown is the two-sided 1 − 2α one)"
    )
    business_srm_alpha: float = setting(0.001, low=1e-9, high=0.1, help="sample-ratio check level")
    business_sequential_tau: float | None = setting(
        None,
        low=1e-12,
        high=1e12,
        help="set (> 0, in the metric's unit, fixed before the experiment) for always-valid intervals that "
        "may be looked at any number of times",
    )
    business_power: float = setting(
        0.8, low=0.5, high=0.999, help="the fixed horizon's power against business_mde"
    )
    business_mde: float | None = setting(
        None,
        low=0.0,
        high=1e12,
        help="the true improvement the fixed horizon is sized to show with business_power (above "
        "business_min_effect); null: twice business_min_effect",
    )
    business_planning_sd: float | None = setting(
        None,
        low=1e-12,
        high=1e12,
        help="the per-unit standard deviation that sizes the horizon when the family has too few units "
        "with the metric in the pre-window before the start",
    )
    business_cuped: bool = setting(
        True,
        help="CUPED: adjust by each user's same metric over business_cuped_pre_days before their first "
        "exposure (per user only)",
    )
    business_cuped_pre_days: int = setting(
        14, low=1, high=365, help="the pre-window, in days before a unit's first exposure (and the start)"
    )
    business_horizon_sizing: str = setting(
        PLAIN,
        choices=HORIZON_SIZINGS,
        help="which size registers: plain (the delta method's), or cuped (shrunk by the CUPED variance "
        "reduction measured on the family's history before the start); both are reported",
    )


@dataclass(frozen=True, kw_only=True)
class Improvement:
    """The decision interval turned to "better is positive", in the metric's unit."""

    estimate: float
    ci_low: float
    ci_high: float
    confidence: float  # 1 − 2·alpha, two-sided
    one_sided_level: float  # 1 − alpha
    # When a larger sample would likely pass: units per arm ("baseline", "candidate").
    units_needed: dict[str, int] | None = None


@dataclass(frozen=True, kw_only=True)
class ArmValue:
    units: int
    value: float | None


@dataclass(frozen=True, kw_only=True)
class FixedHorizon:
    """The units per arm at which the fixed-horizon test is judged, registered when the experiment
    started (`units_per_arm` None: none could be sized, `basis` says why); `basis` otherwise says how it
    was sized (the standard deviation used and where it came from)."""

    units_per_arm: int | None
    basis: Reason | str  # a sentence in plans registered before reason codes
    registered_at: str | None = None


@dataclass(frozen=True, kw_only=True)
class CupedSummary:
    """What CUPED did: θ, the variance reduction of the difference's estimate, the units with pre-period
    data per arm, and the unadjusted effect beside the adjusted one that decided."""

    theta: float | None
    variance_reduction: float | None
    pre_days: int
    pre_units: dict[str, int]
    unadjusted: Effect


Stats = RatioStats | MeanStats | RatioCupedStats


def fixed_horizon_units(*, sd: float, min_effect: float, mde: float, alpha: float, power: float) -> int:
    """Units per arm (equal arms) at which a true improvement `mde` passes the one-sided test "lower bound
    ≥ min_effect" (or > 0) at level alpha with probability `power`: the bound is Δ̂ − z₁₋α·se with
    se = sd·sqrt(2/n), so P(pass) = Φ((mde − min_effect)/se − z₁₋α) = power gives
    n = 2·sd²·(z₁₋α + z_power)² / (mde − min_effect)²."""
    from scipy import stats as scipy_stats

    if not (math.isfinite(sd) and sd > 0):
        raise ValueError(f"sd={sd} must be positive and finite")
    if not (math.isfinite(mde) and mde > min_effect >= 0):
        raise ValueError(f"mde={mde} must exceed min_effect={min_effect} (both non-negative)")
    if not 0 < alpha < 0.5 or not 0.5 <= power < 1:
        raise ValueError(f"alpha={alpha} must be in (0, 0.5) and power={power} in [0.5, 1)")
    z = float(scipy_stats.norm.ppf(1 - alpha) + scipy_stats.norm.ppf(power))
    return max(MIN_UNITS, math.ceil(2 * sd * sd * z * z / (mde - min_effect) ** 2))


@dataclass(frozen=True, kw_only=True)
class BusinessValueResult:
    """The layer's verdict and its report.

    `method`: the test that decided ("ratio_delta", "welch_t", "cuped_ratio_delta", or
    "normal_mixture_sequential" with `sequential` True). `effect`: the fixed-horizon candidate − baseline
    `Effect` at the same confidence, with the relative lift (CUPED-adjusted when `cuped` is set).
    `srm`: None when not checked. `horizon`: the registered fixed horizon the test waited for (None: the
    sequential test, or a caller that judges one look it chose in advance)."""

    verdict: str
    reasons: list[Reason | str]
    method: str
    direction: str
    min_effect: float
    alpha: float
    improvement: Improvement | None
    effect: Effect
    baseline: ArmValue
    candidate: ArmValue
    srm: SrmResult | None
    sequential: bool
    horizon: FixedHorizon | None = None
    cuped: CupedSummary | None = None
    # Blind: before the look (see `business_value_judge`), no number a reader could act on.
    blind: bool = False
    unblinded: Unblinding | None = None


@dataclass(frozen=True, kw_only=True)
class _Asked:
    """One judgement's arms and settings, checked when made (invalid settings are bugs, so they raise),
    so that each step reads the ones it needs."""

    baseline: Stats
    candidate: Stats
    direction: str
    min_effect: float
    alpha: float
    min_units: int
    assigned_units: tuple[int, int] | None
    expected_candidate_share: float | None
    srm_alpha: float
    sequential_tau: float | None
    horizon: FixedHorizon | None
    cuped_pre_days: int

    def __post_init__(self) -> None:
        if not isinstance(self.baseline, (RatioStats, MeanStats, RatioCupedStats)) or type(
            self.candidate
        ) is not type(self.baseline):
            raise TypeError(
                "baseline and candidate must both be RatioStats, MeanStats or RatioCupedStats, got "
                f"{type(self.baseline).__name__} and {type(self.candidate).__name__}"
            )
        if self.direction not in BUSINESS_DIRECTIONS:
            raise ValueError(f"direction={self.direction!r} must be one of {BUSINESS_DIRECTIONS}")
        if not (math.isfinite(self.min_effect) and self.min_effect >= 0):
            raise ValueError(f"min_effect={self.min_effect} must be non-negative and finite")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha={self.alpha} outside (0, 0.5)")
        if isinstance(self.min_units, bool) or not isinstance(self.min_units, int) or self.min_units < 2:
            raise ValueError(f"min_units={self.min_units!r} must be an integer of at least 2")
        if self.expected_candidate_share is not None and not 0 < self.expected_candidate_share < 1:
            raise ValueError(f"expected_candidate_share={self.expected_candidate_share} outside (0, 1)")
        if self.assigned_units is not None and (
            len(self.assigned_units) != 2
            or any(isinstance(n, bool) or int(n) != n or n < 0 for n in self.assigned_units)
        ):
            raise ValueError(f"assigned_units={self.assigned_units!r} must be two non-negative unit counts")
        if not 0 < self.srm_alpha < 1:
            raise ValueError(f"srm_alpha={self.srm_alpha} outside (0, 1)")
        if self.sequential_tau is not None and not (
            math.isfinite(self.sequential_tau) and self.sequential_tau > 0
        ):
            raise ValueError(f"sequential_tau={self.sequential_tau} must be positive and finite")


def _units_factor(*, variance: float, gap: float, alpha: float, tau: float | None) -> float:
    """By how much both arms' units must grow for the bound to clear the minimum effect, if the estimate
    stayed `gap` above it: V / V*, V* being the variance of the difference (which falls as 1/n) at which
    the interval's lower half-width equals `gap`.

    Fixed horizon: z₁₋α·sqrt(V*) = gap, so V / V* = (z·se / gap)². Sequential: the normal-mixture
    half-width grows with V, so V* is its root (brentq between V·1e-12, where it is ~0, and V, where the
    bound failed, so it exceeds gap)."""
    from scipy.optimize import brentq

    if tau is None:
        z = z_for(1 - 2 * alpha)  # the one-sided 1 − alpha quantile
        return variance * (z / gap) ** 2

    def excess(candidate: float) -> float:
        return sequential_half_width(variance=candidate, tau=tau, confidence=1 - 2 * alpha) - gap

    smallest = variance * 1e-12
    if excess(smallest) >= 0:  # a negligible gap: report the cap rather than search further
        return 1e12
    root: float = brentq(excess, smallest, variance, rtol=1e-10)  # scipy is untyped
    return variance / root


def _value(stats: Stats) -> float | None:
    if isinstance(stats, RatioCupedStats):
        return stats.post.ratio
    return stats.ratio if isinstance(stats, RatioStats) else stats.mean


def _cuped_arms(baseline: RatioCupedStats, candidate: RatioCupedStats) -> tuple[MeanStats, MeanStats]:
    """Both arms CUPED-adjusted, as per-unit MeanStats with the adjusted ratio and its variance."""
    adjusted = ratio_cuped_adjust(control=baseline, treatment=candidate)
    arms = []
    for stats, arm in ((baseline, adjusted.control), (candidate, adjusted.treatment)):
        assert arm.mean is not None and arm.variance is not None
        arms.append(pseudo_units(n=stats.n, mean=arm.mean, variance_of_mean=arm.variance / stats.n))
    return arms[0], arms[1]


def _per_unit(baseline: Stats, candidate: Stats) -> tuple[MeanStats, MeanStats]:
    """Each arm as per-unit MeanStats whose mean is the arm's estimate and whose variance / n is its
    variance (see the module docstring): a ratio linearised, a CUPED-adjusted ratio with its adjusted
    mean and variance, a mean as it is."""
    if isinstance(baseline, RatioCupedStats):
        assert isinstance(candidate, RatioCupedStats)
        return _cuped_arms(baseline, candidate)
    if isinstance(baseline, RatioStats):
        assert isinstance(candidate, RatioStats)
        return baseline.linearised(), candidate.linearised()
    assert isinstance(baseline, MeanStats) and isinstance(candidate, MeanStats)
    return baseline, candidate


def _difference_variance(baseline: Stats, candidate: Stats) -> float:
    """Variance of the estimate of candidate − baseline (delta method for ratios, adjusted by CUPED)."""
    variances = []
    for arm in _per_unit(baseline, candidate):
        assert arm.variance is not None
        variances.append(arm.variance / arm.n)
    return variances[0] + variances[1]


def _fixed_effect(
    *, baseline: Stats, candidate: Stats, confidence: float
) -> tuple[Effect, CupedSummary | None]:
    """The fixed-horizon effect for the arms' kind of statistics, and what CUPED did when it applies."""
    if isinstance(baseline, RatioCupedStats):
        assert isinstance(candidate, RatioCupedStats)
        cuped = ratio_cuped_effect(control=baseline, treatment=candidate, confidence=confidence)
        unadjusted = ratio_effect(control=baseline.post, treatment=candidate.post, confidence=confidence)
        summary = CupedSummary(
            theta=cuped.theta,
            variance_reduction=cuped.variance_reduction,
            pre_days=0,
            pre_units={"baseline": baseline.pre_units, "candidate": candidate.pre_units},
            unadjusted=unadjusted,
        )
        return cuped.effect, summary
    if isinstance(baseline, RatioStats):
        assert isinstance(candidate, RatioStats)
        return ratio_effect(control=baseline, treatment=candidate, confidence=confidence), None
    assert isinstance(baseline, MeanStats) and isinstance(candidate, MeanStats)
    return mean_effect(control=baseline, treatment=candidate, confidence=confidence), None


def _srm(*, assigned_units: tuple[int, int] | None, share: float | None, alpha: float) -> SrmResult | None:
    if assigned_units is None or share is None:
        return None
    return srm_check(
        counts=[int(units) for units in assigned_units], expected_shares=(1 - share, share), alpha=alpha
    )


def _undecided_reasons(
    *,
    baseline: Stats,
    candidate: Stats,
    min_units: int,
    srm: SrmResult | None,
    assigned_units: tuple[int, int] | None,
    share: float | None,
    horizon: FixedHorizon | None,
    effect: Effect,
) -> tuple[str, list[Reason | str]] | None:
    """(verdict, reasons) when the data cannot decide: a sample ratio mismatch (error), no registered
    horizon or before it, too few units, an effect that cannot be estimated; None when they can."""
    if srm is not None and srm.mismatch:
        assert assigned_units is not None  # srm is only checked on assigned units
        test = (
            reason(BusinessValueCode.CHI_SQUARE, chi_square=srm.chi_square)
            if srm.chi_square is not None
            else reason(BusinessValueCode.EXACT_BINOMIAL)
        )
        mismatch = reason(
            BusinessValueCode.SAMPLE_RATIO_MISMATCH,
            baseline=assigned_units[0],
            candidate=assigned_units[1],
            share=share,
            test=test,
            p=srm.p_value,
            alpha=srm.alpha,
        )
        return ERROR, [mismatch]
    if horizon is not None and horizon.units_per_arm is None:
        return INSUFFICIENT, [reason(BusinessValueCode.NO_HORIZON, basis=horizon.basis)]
    too_few: list[Reason | str] = [
        reason(BusinessValueCode.TOO_FEW_UNITS, arm=Term(arm), n=stats.n, need=min_units)
        for arm, stats in (("baseline", baseline), ("candidate", candidate))
        if stats.n < min_units
    ]
    if horizon is not None and horizon.units_per_arm and min(baseline.n, candidate.n) < horizon.units_per_arm:
        before = reason(
            BusinessValueCode.BEFORE_HORIZON,
            units=horizon.units_per_arm,
            baseline=baseline.n,
            candidate=candidate.n,
            basis=horizon.basis,
        )
        return INSUFFICIENT, [before, *too_few]
    if too_few:
        return INSUFFICIENT, too_few
    if effect.error is not None:
        return INSUFFICIENT, [reason(BusinessValueCode.NO_EFFECT, why=effect.error)]
    return None


def _improvement(
    *, baseline: Stats, candidate: Stats, effect: Effect, direction: str, alpha: float, tau: float | None
) -> Improvement | Reason:
    """The decision interval as "better is positive" (the always-valid one with `tau`), or why the
    sequential interval cannot be computed."""
    confidence = 1 - 2 * alpha
    decision: Effect = effect
    if tau is not None:
        baseline_units, candidate_units = _per_unit(baseline, candidate)
        decision = sequential_interval(
            control=baseline_units, treatment=candidate_units, tau=tau, confidence=confidence
        )
        if decision.error is not None:
            return reason(BusinessValueCode.NO_SEQUENTIAL_INTERVAL, why=decision.error)
    assert decision.estimate is not None and decision.ci_low is not None and decision.ci_high is not None
    if direction == DECREASE:
        estimate, low, high = -decision.estimate, -decision.ci_high, -decision.ci_low
    else:
        estimate, low, high = decision.estimate, decision.ci_low, decision.ci_high
    return Improvement(
        estimate=estimate, ci_low=low, ci_high=high, confidence=confidence, one_sided_level=1 - alpha
    )


def business_value_blind(result: BusinessValueResult) -> BusinessValueResult:
    """The result without a number a reader could act on before the look: the units per arm, the
    sample-ratio check and the horizon stay."""
    effect = result.effect
    return replace(
        result,
        improvement=None,
        effect=Effect(method=effect.method, n_control=effect.n_control, n_treatment=effect.n_treatment),
        baseline=ArmValue(units=result.baseline.units, value=None),
        candidate=ArmValue(units=result.candidate.units, value=None),
        cuped=None,
        blind=True,
    )


def _interim(
    result: BusinessValueResult, *, unblinded: Unblinding, baseline: Stats, candidate: Stats
) -> BusinessValueResult:
    """Before the look, unblinded: the numbers so far beside the undecided verdict, with who unblinded."""
    interim = reason(BusinessValueCode.INTERIM, unblinded=unblinded.note)
    if result.verdict == INSUFFICIENT and result.effect.error is None and min(baseline.n, candidate.n) >= 2:
        improvement = _improvement(
            baseline=baseline,
            candidate=candidate,
            effect=result.effect,
            direction=result.direction,
            alpha=result.alpha,
            tau=None,
        )
        if isinstance(improvement, Improvement):
            result = replace(result, improvement=improvement)
            interim = reason(
                BusinessValueCode.INTERIM_WITH_NUMBERS,
                unblinded=unblinded.note,
                direction=Term(result.direction),
                estimate=improvement.estimate,
                level=improvement.confidence * 100,
                low=improvement.ci_low,
                high=improvement.ci_high,
            )
    return replace(result, reasons=[*result.reasons, interim], unblinded=unblinded)


def business_value_judge(
    *,
    baseline: Stats,
    candidate: Stats,
    direction: str,
    min_effect: float = 0.0,
    alpha: float = 0.05,
    min_units: int = 100,
    assigned_units: tuple[int, int] | None = None,
    expected_candidate_share: float | None = None,
    srm_alpha: float = 0.001,
    sequential_tau: float | None = None,
    horizon: FixedHorizon | None = None,
    cuped_pre_days: int = 0,
    unblinded: Unblinding | None = None,
) -> BusinessValueResult:
    """Pass when the candidate's improvement over baseline is at least `min_effect` with one-sided
    confidence 1 − alpha (fixed horizon, or always valid with `sequential_tau`); see the module docstring.

    `assigned_units` = (baseline, candidate) units assigned, checked against the shares
    (1 − expected_candidate_share, expected_candidate_share) for a sample ratio mismatch when both are
    given (an all-or-nothing split has no share to check: pass None and `srm` is None).

    `horizon` (fixed-horizon test only): the registered units per arm. Until both arms reach it the
    verdict is insufficient data stating it and the result is blind (`blind`: no estimate, interval,
    p-value or per-arm value, only the units per arm and the sample-ratio check), as is any other
    undecided verdict under a horizon; `unblinded` shows the numbers so far beside that verdict, with who
    unblinded and why. At the horizon the test decides pass or fail once (no "more units would show it":
    that advice is peeking). Without a horizon the caller stands for judging one look chosen in advance.
    RatioCupedStats arms are judged CUPED-adjusted (`cuped_pre_days` only labels the report)."""
    asked = _Asked(
        baseline=baseline,
        candidate=candidate,
        direction=direction,
        min_effect=min_effect,
        alpha=alpha,
        min_units=min_units,
        assigned_units=assigned_units,
        expected_candidate_share=expected_candidate_share,
        srm_alpha=srm_alpha,
        sequential_tau=sequential_tau,
        # The always-valid interval may be read at any look.
        horizon=None if sequential_tau is not None else horizon,
        cuped_pre_days=cuped_pre_days,
    )
    result = _checked(_report(asked=asked), asked=asked)
    if result.horizon is None or result.verdict in (PASS, FAIL):
        return result
    if unblinded is None:
        return business_value_blind(result)
    return _interim(result, unblinded=unblinded, baseline=baseline, candidate=candidate)


def _report(*, asked: _Asked) -> BusinessValueResult:
    """The undecided result with the fixed-horizon effect, the arms' values and the sample-ratio check,
    so that the checks only add a verdict and reasons."""
    baseline, candidate = asked.baseline, asked.candidate
    effect, cuped = _fixed_effect(baseline=baseline, candidate=candidate, confidence=1 - 2 * asked.alpha)
    if cuped is not None:
        cuped = replace(cuped, pre_days=asked.cuped_pre_days)
    srm = _srm(
        assigned_units=asked.assigned_units, share=asked.expected_candidate_share, alpha=asked.srm_alpha
    )
    sequential = asked.sequential_tau is not None
    return BusinessValueResult(
        verdict=INSUFFICIENT,
        reasons=[],
        method="normal_mixture_sequential" if sequential else effect.method,
        direction=asked.direction,
        min_effect=asked.min_effect,
        alpha=asked.alpha,
        improvement=None,
        effect=effect,
        baseline=ArmValue(units=baseline.n, value=_value(baseline)),
        candidate=ArmValue(units=candidate.n, value=_value(candidate)),
        srm=srm,
        sequential=sequential,
        horizon=asked.horizon,
        cuped=cuped,
    )


def _checked(result: BusinessValueResult, *, asked: _Asked) -> BusinessValueResult:
    """The verdict: why the data cannot decide yet when they cannot (`_undecided_reasons`), else the
    test."""
    undecided = _undecided_reasons(
        baseline=asked.baseline,
        candidate=asked.candidate,
        min_units=asked.min_units,
        srm=result.srm,
        assigned_units=asked.assigned_units,
        share=asked.expected_candidate_share,
        horizon=asked.horizon,
        effect=result.effect,
    )
    if undecided is None:
        return _decide(result, baseline=asked.baseline, candidate=asked.candidate, tau=asked.sequential_tau)
    return replace(result, verdict=undecided[0], reasons=undecided[1])


def _decide(
    result: BusinessValueResult, *, baseline: Stats, candidate: Stats, tau: float | None
) -> BusinessValueResult:
    """Pass or fail on the decision interval (or, without a horizon, "not shown yet" with the units
    that would show it when the estimate clears the bar but the bound does not)."""
    improvement = _improvement(
        baseline=baseline,
        candidate=candidate,
        effect=result.effect,
        direction=result.direction,
        alpha=result.alpha,
        tau=tau,
    )
    if isinstance(improvement, Reason):
        return replace(result, verdict=INSUFFICIENT, reasons=[improvement])
    result = replace(result, improvement=improvement)
    min_effect, horizon, low = result.min_effect, result.horizon, improvement.ci_low
    at = reason(BusinessValueCode.AT_HORIZON, units=horizon.units_per_arm) if horizon else ""
    judged = {"summary": _interval_summary(result, improvement=improvement), "at": at, "low": low}
    passed = low >= min_effect if min_effect > 0 else low > 0
    if passed:
        if min_effect > 0:
            clears = reason(
                BusinessValueCode.CLEARS_MIN_EFFECT, **judged, min_effect=min_effect, alpha=result.alpha
            )
        else:
            clears = reason(BusinessValueCode.CLEARS_ZERO, **judged, alpha=result.alpha)
        return replace(result, verdict=PASS, reasons=[clears])
    below = (
        reason(BusinessValueCode.BELOW_MIN_EFFECT, **judged, min_effect=min_effect)
        if min_effect > 0
        else reason(BusinessValueCode.NOT_ABOVE_ZERO, **judged)
    )
    if improvement.estimate > min_effect and horizon is None:
        return _not_shown_yet(result, below=below, baseline=baseline, candidate=candidate, tau=tau)
    return replace(result, verdict=FAIL, reasons=[below])


def _interval_summary(result: BusinessValueResult, *, improvement: Improvement) -> Reason:
    """The decision interval as the reasons show it: always valid or not, CUPED-adjusted or not."""
    interval = (
        BusinessValueCode.IMPROVEMENT_ALWAYS_VALID if result.sequential else BusinessValueCode.IMPROVEMENT
    )
    summary = reason(
        interval,
        direction=Term(result.direction),
        estimate=improvement.estimate,
        level=improvement.confidence * 100,
        low=improvement.ci_low,
        high=improvement.ci_high,
    )
    if result.cuped is not None:
        summary = reason(BusinessValueCode.CUPED_ADJUSTED, summary=summary)
    return summary


def _not_shown_yet(
    result: BusinessValueResult, *, below: Reason, baseline: Stats, candidate: Stats, tau: float | None
) -> BusinessValueResult:
    """Without a horizon, a bound short of the bar whose estimate clears it is insufficient data, not a
    fail: more units would likely show it, and the reasons say about how many per arm."""
    improvement, min_effect = result.improvement, result.min_effect
    assert improvement is not None
    factor = _units_factor(
        variance=_difference_variance(baseline, candidate),
        gap=improvement.estimate - min_effect,
        alpha=result.alpha,
        tau=tau,
    )
    needed = {"baseline": math.ceil(baseline.n * factor), "candidate": math.ceil(candidate.n * factor)}
    not_shown = (
        reason(BusinessValueCode.NOT_SHOWN_MIN_EFFECT, min_effect=min_effect, **needed)
        if min_effect > 0
        else reason(BusinessValueCode.NOT_SHOWN_ZERO, **needed)
    )
    return replace(
        result,
        verdict=INSUFFICIENT,
        reasons=[below, not_shown],
        improvement=replace(improvement, units_needed=needed),
    )


@dataclass(frozen=True, kw_only=True)
class BusinessInputs(TrafficInputs):
    metric: str | None = None
    direction: str = DECREASE
    per: str = "user"
    # Randomisation units seen on each arm ("baseline", "candidate"), for the sample-ratio check.
    assigned_units: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class BusinessValueDetails:
    """What the layer stores: the traffic and metric it read, the judge's result (None without an
    experiment or a metric), timings and, when the layer did not pass, the attribution."""

    inputs: BusinessInputs
    judged: BusinessValueResult | None = None
    timings: dict[str, float] = field(default_factory=dict)
    attribution: Attribution | None = None
    # The one look at the horizon this result is: taken by this run (`look_taken_now`), or stored by an
    # earlier run and returned unchanged. None before the look, and for the sequential test.
    look: LookRecord | None = None
    look_taken_now: bool = False

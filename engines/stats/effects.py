"""Effects of a treatment arm against a control arm, for the gate's business layer and the dashboards.

Like GrowthBook's gbstats, inputs are sufficient statistics in frozen dataclasses (counts, sums, sums of
squares and cross-products), so the cost of an analysis does not grow with traffic.

Conventions:
- Every effect is treatment − control ("absolute", in the metric's unit) and treatment / control − 1
  ("relative", the lift), each with a two-sided confidence interval, plus a two-sided p-value for
  "no difference".
- Relative intervals use the delta method for a ratio of two independent means:
  Var(T/C) ≈ Var(T)/C² + T²·Var(C)/C⁴, where Var(·) is the variance of the arm's estimate.
- Degenerate input (too few units, zero variance in both arms, a zero denominator mean) is not an
  exception: the result carries `error` and every number in it is None.
- A zero control value leaves the difference well defined but the lift undefined: the absolute fields
  (values, estimate, interval, p-value) are kept, the relative ones are None and `relative_error` says
  why ("control mean is zero"). The sequential interval never computes a lift and says so there too.
- Impossible input (negative counts, non-finite sums, a sum of squares below sum²/n, a cross-product
  beyond Cauchy–Schwarz: `engines.stats.sufficient.moments_check`) and invalid settings (confidence
  outside (0, 1)) raise ValueError: those are bugs, not a lack of data.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from engines.stats.intervals import welch_df, z_for
from engines.stats.sufficient import MIN_UNITS, CupedStats, MeanStats, Proportion, RatioCupedStats, RatioStats

TOO_FEW_UNITS = "too few units"
ZERO_VARIANCE = "zero variance"
CONTROL_ZERO = "control mean is zero"
NO_RELATIVE = "relative lift not computed"
DENOMINATOR_ZERO = "denominator mean is zero"


@dataclass(frozen=True, kw_only=True)
class Effect:
    """Treatment against control for one metric.

    `control_value` / `treatment_value` are the arms' estimates (mean, rate, ratio or adjusted mean);
    `estimate` is treatment − control, `relative` is treatment / control − 1. When `error` is set every
    number is None; when only `relative_error` is set (a zero control value, so the lift is undefined, or
    a method that computes no lift) the absolute numbers stand and the three relative ones are None."""

    method: str
    n_control: int
    n_treatment: int
    control_value: float | None = None
    treatment_value: float | None = None
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    relative: float | None = None
    relative_ci_low: float | None = None
    relative_ci_high: float | None = None
    p_value: float | None = None
    error: str | None = None
    relative_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} outside (0, 1)")


def _effect(
    *,
    method: str,
    n_control: int,
    n_treatment: int,
    control_value: float,
    treatment_value: float,
    control_part: float,
    treatment_part: float,
    critical: float,
    p_value: float,
) -> Effect:
    """An Effect from the arms' estimates and the variances of those estimates (`*_part`).

    Both intervals are estimate ± critical · standard error; the relative one by the delta method, and
    only when the control value is not zero."""
    estimate = treatment_value - control_value
    half = critical * math.sqrt(control_part + treatment_part)
    absolute = Effect(
        method=method,
        n_control=n_control,
        n_treatment=n_treatment,
        control_value=control_value,
        treatment_value=treatment_value,
        estimate=estimate,
        ci_low=estimate - half,
        ci_high=estimate + half,
        p_value=p_value,
    )
    if control_value == 0:
        return replace(absolute, relative_error=CONTROL_ZERO)
    relative = treatment_value / control_value - 1
    relative_variance = (
        treatment_part / control_value**2 + treatment_value**2 * control_part / control_value**4
    )
    relative_half = critical * math.sqrt(relative_variance)
    return replace(
        absolute,
        relative=relative,
        relative_ci_low=relative - relative_half,
        relative_ci_high=relative + relative_half,
    )


def _mean_variance_effect(
    *,
    method: str,
    n_control: int,
    n_treatment: int,
    control_mean: float,
    treatment_mean: float,
    control_variance: float,
    treatment_variance: float,
    confidence: float,
) -> Effect:
    """Welch's t-test from the arms' means and sample variances (n ≥ 2 each)."""
    from scipy import stats as scipy_stats

    control_part, treatment_part = control_variance / n_control, treatment_variance / n_treatment
    if control_part + treatment_part == 0:
        return Effect(method=method, n_control=n_control, n_treatment=n_treatment, error=ZERO_VARIANCE)
    df = welch_df(
        first_part=control_part, n_first=n_control, second_part=treatment_part, n_second=n_treatment
    )
    t = (treatment_mean - control_mean) / math.sqrt(control_part + treatment_part)
    return _effect(
        method=method,
        n_control=n_control,
        n_treatment=n_treatment,
        control_value=control_mean,
        treatment_value=treatment_mean,
        control_part=control_part,
        treatment_part=treatment_part,
        critical=float(scipy_stats.t.ppf(0.5 + confidence / 2, df)),
        p_value=float(2 * scipy_stats.t.sf(abs(t), df)),
    )


def mean_effect(*, control: MeanStats, treatment: MeanStats, confidence: float = 0.95) -> Effect:
    """Difference in means by Welch's t-test (unequal variances).

    The absolute interval and the p-value use Student's t with Welch–Satterthwaite df (the same
    numbers as scipy.stats.ttest_ind(equal_var=False)); the relative interval uses the delta method
    with the same t quantile, as gbstats does."""
    _check_confidence(confidence)
    method = "welch_t"
    if control.n < MIN_UNITS or treatment.n < MIN_UNITS:
        return Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=TOO_FEW_UNITS)
    assert control.mean is not None and treatment.mean is not None
    assert control.variance is not None and treatment.variance is not None
    return _mean_variance_effect(
        method=method,
        n_control=control.n,
        n_treatment=treatment.n,
        control_mean=control.mean,
        treatment_mean=treatment.mean,
        control_variance=control.variance,
        treatment_variance=treatment.variance,
        confidence=confidence,
    )


def proportion_effect(*, control: Proportion, treatment: Proportion, confidence: float = 0.95) -> Effect:
    """Difference of two proportions.

    The interval uses the unpooled standard error sqrt(p_c(1−p_c)/n_c + p_t(1−p_t)/n_t) and the normal
    quantile; the p-value the pooled two-proportion z-test (the standard error under "no
    difference"). Zero variance: both arms all 0 or all 1."""
    from scipy import stats as scipy_stats

    _check_confidence(confidence)
    method = "two_proportion_z"
    if control.n < MIN_UNITS or treatment.n < MIN_UNITS:
        return Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=TOO_FEW_UNITS)
    control_rate, treatment_rate = control.successes / control.n, treatment.successes / treatment.n
    pooled = (control.successes + treatment.successes) / (control.n + treatment.n)
    pooled_se = math.sqrt(pooled * (1 - pooled) * (1 / control.n + 1 / treatment.n))
    if pooled_se == 0:
        return Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=ZERO_VARIANCE)
    z = (treatment_rate - control_rate) / pooled_se
    return _effect(
        method=method,
        n_control=control.n,
        n_treatment=treatment.n,
        control_value=control_rate,
        treatment_value=treatment_rate,
        control_part=control_rate * (1 - control_rate) / control.n,
        treatment_part=treatment_rate * (1 - treatment_rate) / treatment.n,
        critical=z_for(confidence),
        p_value=float(2 * scipy_stats.norm.sf(abs(z))),
    )


def ratio_effect(*, control: RatioStats, treatment: RatioStats, confidence: float = 0.95) -> Effect:
    """Difference of two ratio metrics (Σx/Σy per arm), delta method, normal quantile and z-test p."""
    from scipy import stats as scipy_stats

    _check_confidence(confidence)
    method = "ratio_delta"
    if control.n < MIN_UNITS or treatment.n < MIN_UNITS:
        return Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=TOO_FEW_UNITS)
    if control.sum_y == 0 or treatment.sum_y == 0:
        return Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=DENOMINATOR_ZERO)
    control_ratio, treatment_ratio = control.ratio, treatment.ratio
    control_part, treatment_part = control.ratio_variance, treatment.ratio_variance
    assert control_ratio is not None and treatment_ratio is not None
    assert control_part is not None and treatment_part is not None
    if control_part + treatment_part == 0:
        return Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=ZERO_VARIANCE)
    z = (treatment_ratio - control_ratio) / math.sqrt(control_part + treatment_part)
    return _effect(
        method=method,
        n_control=control.n,
        n_treatment=treatment.n,
        control_value=control_ratio,
        treatment_value=treatment_ratio,
        control_part=control_part,
        treatment_part=treatment_part,
        critical=z_for(confidence),
        p_value=float(2 * scipy_stats.norm.sf(abs(z))),
    )


@dataclass(frozen=True, kw_only=True)
class CupedAdjusted:
    """One arm after CUPED: x_i − θ·(pre_i − pre_mean), summarised.

    `variance_reduction` is 1 − variance / unadjusted_variance (θ = the arm's own optimum gives ρ²;
    a θ from elsewhere can make it negative). When `error` is set every number is None."""

    n: int
    theta: float | None = None
    mean: float | None = None
    variance: float | None = None
    unadjusted_mean: float | None = None
    unadjusted_variance: float | None = None
    variance_reduction: float | None = None
    error: str | None = None


def cuped_adjust(
    *, stats: CupedStats, theta: float | None = None, pre_mean: float | None = None
) -> CupedAdjusted:
    """CUPED (Deng et al. 2013) for one arm.

    θ defaults to the arm's own cov(x, pre) / var(pre) (0 when pre is constant: it carries no
    information). The adjusted mean is x̄ − θ·(p̄ − pre_mean), pre_mean defaulting to the arm's own p̄
    (so the mean is unchanged); pass the pre mean over all arms to compare arms. The adjusted sample
    variance is s_x² − 2θ·s_x,pre + θ²·s_pre²."""
    if stats.n < MIN_UNITS:
        return CupedAdjusted(n=stats.n, error=TOO_FEW_UNITS)
    n = stats.n
    ss_x, ss_pre, sp_x_pre = stats.centred_sums()
    if theta is None:
        theta = sp_x_pre / ss_pre if ss_pre > 0 else 0.0
    mean_x, mean_pre = stats.sum_x / n, stats.sum_pre / n
    if pre_mean is None:
        pre_mean = mean_pre
    unadjusted_variance = ss_x / (n - 1)
    variance = max((ss_x - 2 * theta * sp_x_pre + theta**2 * ss_pre) / (n - 1), 0.0)
    return CupedAdjusted(
        n=n,
        theta=theta,
        mean=mean_x - theta * (mean_pre - pre_mean),
        variance=variance,
        unadjusted_mean=mean_x,
        unadjusted_variance=unadjusted_variance,
        variance_reduction=1 - variance / unadjusted_variance if unadjusted_variance > 0 else 0.0,
    )


@dataclass(frozen=True, kw_only=True)
class CupedEffect:
    """A CUPED-adjusted effect, the θ used and the variance reduction of the effect's estimate:
    1 − Var(adjusted difference) / Var(unadjusted difference)."""

    effect: Effect
    theta: float | None = None
    variance_reduction: float | None = None


def cuped_theta(*, control: CupedStats, treatment: CupedStats) -> float:
    """θ pooled within arms: (S_xp,c + S_xp,t) / (S_pp,c + S_pp,t), S being centred cross-products.

    This is the slope of pre in the regression x ~ arm + pre (ANCOVA), and estimates the same θ as
    gbstats' pooled covariance; 0 when pre is constant within both arms."""
    _, ss_pre_c, sp_c = control.centred_sums()
    _, ss_pre_t, sp_t = treatment.centred_sums()
    denominator = ss_pre_c + ss_pre_t
    return (sp_c + sp_t) / denominator if denominator > 0 else 0.0


def cuped_effect(
    *, control: CupedStats, treatment: CupedStats, confidence: float = 0.95, theta: float | None = None
) -> CupedEffect:
    """Difference in CUPED-adjusted means, Welch's t-test on the adjusted variances.

    θ defaults to `cuped_theta` (one θ for both arms, as the method requires); both arms are centred
    on the pre mean over all units, so the relative lift compares adjusted means on a common basis.
    The uncertainty of θ itself is ignored (negligible at A/B sample sizes)."""
    _check_confidence(confidence)
    method = "cuped_welch_t"
    if control.n < MIN_UNITS or treatment.n < MIN_UNITS:
        effect = Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=TOO_FEW_UNITS)
        return CupedEffect(effect=effect)
    if theta is None:
        theta = cuped_theta(control=control, treatment=treatment)
    pre_mean = (control.sum_pre + treatment.sum_pre) / (control.n + treatment.n)
    adjusted_c = cuped_adjust(stats=control, theta=theta, pre_mean=pre_mean)
    adjusted_t = cuped_adjust(stats=treatment, theta=theta, pre_mean=pre_mean)
    assert adjusted_c.mean is not None and adjusted_c.variance is not None
    assert adjusted_t.mean is not None and adjusted_t.variance is not None
    assert adjusted_c.unadjusted_variance is not None and adjusted_t.unadjusted_variance is not None
    effect = _mean_variance_effect(
        method=method,
        n_control=control.n,
        n_treatment=treatment.n,
        control_mean=adjusted_c.mean,
        treatment_mean=adjusted_t.mean,
        control_variance=adjusted_c.variance,
        treatment_variance=adjusted_t.variance,
        confidence=confidence,
    )
    if effect.error is not None:
        return CupedEffect(effect=effect)
    adjusted = adjusted_c.variance / control.n + adjusted_t.variance / treatment.n
    unadjusted = adjusted_c.unadjusted_variance / control.n + adjusted_t.unadjusted_variance / treatment.n
    reduction = 1 - adjusted / unadjusted if unadjusted > 0 else 0.0
    return CupedEffect(effect=effect, theta=theta, variance_reduction=reduction)


@dataclass(frozen=True, kw_only=True)
class RatioCupedAdjusted:
    """Both arms of a ratio metric after CUPED: `control` and `treatment` (`mean` the adjusted
    ratio, `variance` its per-unit sample variance, so the estimate's variance is variance / n), the θ
    used, and the variance reduction of the difference's estimate. `error` set: nothing else is."""

    control: CupedAdjusted
    treatment: CupedAdjusted
    theta: float | None = None
    variance_reduction: float | None = None
    error: str | None = None


def _linearised_sums(stats: RatioCupedStats) -> tuple[float, float, float, float | None]:
    """Centred Σz², Σw², Σzw over units of z = (x − R·y)/ȳ and w = (px − R_pre·py)/p̄y, the
    linearisations (delta method) of the arm's ratio and of its pre-period ratio, and R_pre (None, and w
    all 0, when no unit of the arm has pre-period data)."""
    n = stats.n
    ratio, mean_y = stats.sum_x / stats.sum_y, stats.sum_y / n
    c = stats.centred
    ss_z = (c("x", "x") - 2 * ratio * c("x", "y") + ratio**2 * c("y", "y")) / mean_y**2
    if stats.sum_py == 0:
        return max(ss_z, 0.0), 0.0, 0.0, None
    pre_ratio, mean_py = stats.sum_px / stats.sum_py, stats.sum_py / n
    ss_w = (c("px", "px") - 2 * pre_ratio * c("px", "py") + pre_ratio**2 * c("py", "py")) / mean_py**2
    sp_zw = (
        c("x", "px") - pre_ratio * c("x", "py") - ratio * c("y", "px") + ratio * pre_ratio * c("y", "py")
    ) / (mean_y * mean_py)
    return max(ss_z, 0.0), max(ss_w, 0.0), sp_zw, pre_ratio


def ratio_cuped_adjust(*, control: RatioCupedStats, treatment: RatioCupedStats) -> RatioCupedAdjusted:
    """CUPED for a ratio metric Σx/Σy with the same ratio over each unit's pre-period as the covariate
    (Deng et al. 2013, appendix B; GrowthBook's and Statsig's regression adjustment of ratio metrics).

    Each arm's ratio R̂ and pre ratio R̂_pre are linearised by the delta method, R̂ − R ≈ mean of
    z_i = (x_i − R·y_i)/ȳ and R̂_pre − R_pre ≈ mean of w_i = (px_i − R_pre·py_i)/p̄y; CUPED on (z, w)
    gives the adjusted ratio R̂ − θ·(R̂_pre − R̂_pre,all), centred on the pre ratio over both arms, and
    its variance (s_z² − 2θ·s_zw + θ²·s_w²)/n. θ is pooled within arms, (S_zw,c + S_zw,t) / (S_ww,c +
    S_ww,t), as in `cuped_theta`; 0 when no unit has pre-period data, which leaves the plain delta
    method. A unit without pre-period data has px = py = 0, so w_i = 0: it stays in and is adjusted
    by nothing of its own."""
    n_c, n_t = control.n, treatment.n
    if n_c < MIN_UNITS or n_t < MIN_UNITS:
        empty = (CupedAdjusted(n=n_c, error=TOO_FEW_UNITS), CupedAdjusted(n=n_t, error=TOO_FEW_UNITS))
        return RatioCupedAdjusted(control=empty[0], treatment=empty[1], error=TOO_FEW_UNITS)
    if control.sum_y == 0 or treatment.sum_y == 0:
        empty = (CupedAdjusted(n=n_c, error=DENOMINATOR_ZERO), CupedAdjusted(n=n_t, error=DENOMINATOR_ZERO))
        return RatioCupedAdjusted(control=empty[0], treatment=empty[1], error=DENOMINATOR_ZERO)
    sums = {"control": _linearised_sums(control), "treatment": _linearised_sums(treatment)}
    denominator = sums["control"][1] + sums["treatment"][1]
    theta = (sums["control"][2] + sums["treatment"][2]) / denominator if denominator > 0 else 0.0
    pre_y = control.sum_py + treatment.sum_py
    pooled_pre = (control.sum_px + treatment.sum_px) / pre_y if pre_y else None
    arms = {}
    for name, stats in (("control", control), ("treatment", treatment)):
        ss_z, ss_w, sp_zw, pre_ratio = sums[name]
        n = stats.n
        ratio = stats.sum_x / stats.sum_y
        shift = 0.0 if pre_ratio is None or pooled_pre is None else pre_ratio - pooled_pre
        unadjusted = ss_z / (n - 1)
        variance = max((ss_z - 2 * theta * sp_zw + theta**2 * ss_w) / (n - 1), 0.0)
        arms[name] = CupedAdjusted(
            n=n,
            theta=theta,
            mean=ratio - theta * shift,
            variance=variance,
            unadjusted_mean=ratio,
            unadjusted_variance=unadjusted,
            variance_reduction=1 - variance / unadjusted if unadjusted > 0 else 0.0,
        )
    c, t = arms["control"], arms["treatment"]
    assert c.variance is not None and t.variance is not None
    assert c.unadjusted_variance is not None and t.unadjusted_variance is not None
    adjusted = c.variance / n_c + t.variance / n_t
    unadjusted = c.unadjusted_variance / n_c + t.unadjusted_variance / n_t
    reduction = 1 - adjusted / unadjusted if unadjusted > 0 else 0.0
    return RatioCupedAdjusted(control=c, treatment=t, theta=theta, variance_reduction=reduction)


def ratio_cuped_effect(
    *, control: RatioCupedStats, treatment: RatioCupedStats, confidence: float = 0.95
) -> CupedEffect:
    """Difference of two CUPED-adjusted ratio metrics (`ratio_cuped_adjust`): normal quantile and z-test
    p, as `ratio_effect`, which it equals when no unit has pre-period data."""
    from scipy import stats as scipy_stats

    _check_confidence(confidence)
    method = "cuped_ratio_delta"
    adjusted = ratio_cuped_adjust(control=control, treatment=treatment)
    if adjusted.error is not None:
        effect = Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=adjusted.error)
        return CupedEffect(effect=effect)
    c, t = adjusted.control, adjusted.treatment
    assert c.mean is not None and c.variance is not None and t.mean is not None and t.variance is not None
    control_part, treatment_part = c.variance / control.n, t.variance / treatment.n
    if control_part + treatment_part == 0:
        effect = Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=ZERO_VARIANCE)
        return CupedEffect(effect=effect)
    z = (t.mean - c.mean) / math.sqrt(control_part + treatment_part)
    effect = _effect(
        method=method,
        n_control=control.n,
        n_treatment=treatment.n,
        control_value=c.mean,
        treatment_value=t.mean,
        control_part=control_part,
        treatment_part=treatment_part,
        critical=z_for(confidence),
        p_value=float(2 * scipy_stats.norm.sf(abs(z))),
    )
    return CupedEffect(effect=effect, theta=adjusted.theta, variance_reduction=adjusted.variance_reduction)


def sequential_half_width(*, variance: float, tau: float, confidence: float = 0.95) -> float:
    """Half-width of the normal-mixture confidence sequence (see `sequential_interval`) when the
    difference's estimate has variance `variance` (> 0): sqrt(V·(V + τ²)/τ² · log((V + τ²)/(V·α²))).

    It grows with V, so it also answers "at which V (how many units) would the interval be this narrow"."""
    _check_confidence(confidence)
    if not (math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau={tau} must be positive and finite")
    if not (math.isfinite(variance) and variance > 0):
        raise ValueError(f"variance={variance} must be positive and finite")
    alpha = 1 - confidence
    tau2 = tau * tau
    return math.sqrt(
        variance * (variance + tau2) / tau2 * math.log((variance + tau2) / (variance * alpha * alpha))
    )


def sequential_interval(
    *, control: MeanStats, treatment: MeanStats, tau: float, confidence: float = 0.95
) -> Effect:
    """An always-valid (anytime) confidence interval for the difference in means: the normal-mixture
    confidence sequence (mixture SPRT).

    Derivation. With V = s_t²/n_t + s_c²/n_c, the variance of Δ̂ = x̄_t − x̄_c, the score S = Δ̂/V is
    (asymptotically) a Brownian motion in information time I = 1/V with drift Δ. Mixing the
    martingales exp(λ(S − ΔI) − λ²I/2) over λ ~ N(0, τ²) gives sqrt(V/(V+τ²))·exp(τ²(Δ̂−Δ)²/(2V(V+τ²))),
    and Ville's inequality keeps it below 1/α at all times with probability 1 − α. Solving for Δ:

        Δ̂ ± sqrt( V·(V + τ²)/τ² · log((V + τ²)/(V·α²)) )

    This is the two-sided normal-mixture boundary sqrt((v+ρ)·log((v+ρ)/(ρα²))) of Howard, Ramdas,
    McAuliffe & Sekhon (2021, Ann. Statist., "Time-uniform, nonparametric, nonasymptotic confidence
    sequences", eq. 14) with v = I and ρ = 1/τ², divided by I; it is the mSPRT interval of Johari,
    Pekelis & Walsh ("Always valid inference", Optimizely) and, per unit, the asymptotic confidence
    sequence of Waudby-Smith et al. (2023) that Eppo uses.

    `tau` (> 0, in the metric's unit) is the spread of effects the mixture bets on; fix it before the
    experiment (e.g. the smallest effect worth detecting); choosing it from the data voids the
    guarantee. `p_value` is the always-valid p at this look, min(1, 1/Λ); callers monitoring over time
    should keep its running minimum. Relative fields are None (`relative_error` says so). For a rate, pass
    MeanStats(n, successes, successes)."""
    _check_confidence(confidence)
    if not (math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau={tau} must be positive and finite")
    method = "normal_mixture_sequential"
    if control.n < MIN_UNITS or treatment.n < MIN_UNITS:
        return Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=TOO_FEW_UNITS)
    assert control.mean is not None and treatment.mean is not None
    assert control.variance is not None and treatment.variance is not None
    variance = control.variance / control.n + treatment.variance / treatment.n
    if variance == 0:
        return Effect(method=method, n_control=control.n, n_treatment=treatment.n, error=ZERO_VARIANCE)
    tau2 = tau * tau
    estimate = treatment.mean - control.mean
    half = sequential_half_width(variance=variance, tau=tau, confidence=confidence)
    log_lambda = 0.5 * math.log(variance / (variance + tau2)) + tau2 * estimate**2 / (
        2 * variance * (variance + tau2)
    )
    return Effect(
        method=method,
        n_control=control.n,
        n_treatment=treatment.n,
        control_value=control.mean,
        treatment_value=treatment.mean,
        estimate=estimate,
        ci_low=estimate - half,
        ci_high=estimate + half,
        p_value=min(1.0, math.exp(-log_lambda)),
        relative_error=NO_RELATIVE,
    )

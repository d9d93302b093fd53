"""The follow-up rate corrected for the detector's errors (Rogan–Gladen), per language, with a
delta-method interval that carries the uncertainty of the measured error rates. Pure: no Django.

Per language l, the detector judged n_l turns and called x_l of them follow-ups (p_l = x_l / n_l).
With sensitivity Se_l and specificity Sp_l measured on P_l labelled follow-ups and N_l labelled
others, the true share among the judged turns is (Rogan & Gladen, "Estimating prevalence from the
results of a screening test", Am J Epidemiol 107, 1978):

    π_l = (p_l + Sp_l − 1) / J_l,   J_l = Se_l + Sp_l − 1   (clipped to [0, 1])

and the corrected rate per answered question is R = (Σ_l n_l π_l + c) / A (A answered questions; a
turn the detector did not judge, such as a session's first question, is no follow-up by rule; c
follow-ups labelled without a language, such as turns judged before the trained detector stored one,
count as observed, with a binomial variance c(1 − c/A)/A² and no correction). The variance,
by the delta method with p_l, Se_l and Sp_l independent binomial proportions (Greenland, "Basic
methods for sensitivity analysis of biases", Int J Epidemiol 25, 1996; Lang & Reiczigel, Prev Vet Med
113, 2014), splits into the traffic's sampling part and the error rates' part:

    Var R = Σ_l w_l² [p_l(1 − p_l)/n_l] / J_l²                                   (sampling)
          + Σ_l w_l² [π_l² Se_l(1 − Se_l)/P_l + (1 − π_l)² Sp_l(1 − Sp_l)/N_l] / J_l²   (error rates)

with w_l = n_l / A. The difference of two arms judged by the same detector shares its error rates, so
their gradients are subtracted before squaring (`corrected_difference`). Intervals are R ± z·sd,
clipped to [0, 1] (differences to [−1, 1]).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from engines.stats.intervals import z_for

ROGAN_GLADEN = "rogan_gladen_delta"


@dataclass(frozen=True, kw_only=True)
class ErrorRates:
    """The detector's measured sensitivity and specificity in one language, with their counts."""

    positives: int
    true_positives: int
    negatives: int
    true_negatives: int

    def __post_init__(self) -> None:
        for name in ("positives", "true_positives", "negatives", "true_negatives"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r} must be a non-negative integer")
        if self.true_positives > self.positives or self.true_negatives > self.negatives:
            raise ValueError("true positives (negatives) exceed positives (negatives)")

    @property
    def sensitivity(self) -> float | None:
        return self.true_positives / self.positives if self.positives else None

    @property
    def specificity(self) -> float | None:
        return self.true_negatives / self.negatives if self.negatives else None

    @property
    def youden(self) -> float | None:
        """J = Se + Sp − 1: the correction divides by it; at or below 0 the detector says nothing."""
        if self.sensitivity is None or self.specificity is None:
            return None
        return self.sensitivity + self.specificity - 1


@dataclass(frozen=True, kw_only=True)
class LanguageCorrection:
    language: str
    judged: int
    detected: int
    observed: float | None
    sensitivity: float
    specificity: float
    corrected: float | None  # π_l, the corrected share of follow-ups among the judged turns


@dataclass(frozen=True, kw_only=True)
class CorrectedRate:
    """One arm's observed and corrected rate per answered question, the corrected interval, and the
    two parts of its variance."""

    answered: int
    observed: float | None
    estimate: float | None
    ci_low: float
    ci_high: float
    confidence: float
    sampling_variance: float
    error_variance: float
    languages: tuple[LanguageCorrection, ...]
    uncorrected: int = 0  # follow-ups counted as observed (no language: no error rates to correct by)
    method: str = ROGAN_GLADEN


def _check(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}={value!r} must be a non-negative integer")


def _gradients(
    *,
    answered: int,
    judged: Mapping[str, tuple[int, int]],
    errors: Mapping[str, ErrorRates],
    uncorrected: int = 0,
) -> tuple[list[LanguageCorrection], float, float, dict[str, tuple[float, float]]]:
    """Per language the correction, and R, its sampling variance, and dR/dSe_l, dR/dSp_l."""
    _check("uncorrected", uncorrected)
    share = uncorrected / answered
    corrections, total, sampling = [], share, share * (1 - share) / answered
    gradients: dict[str, tuple[float, float]] = {}
    for language, (n, x) in sorted(judged.items()):
        _check(f"{language}.judged", n)
        _check(f"{language}.detected", x)
        if x > n:
            raise ValueError(f"{language}: detected={x} exceeds judged={n}")
        if n == 0:
            continue
        rates = errors.get(language)
        if rates is None or rates.youden is None or rates.youden <= 0:
            raise ValueError(f"{language}: no informative error rates (Se + Sp − 1 must be > 0)")
        se, sp, j = rates.sensitivity, rates.specificity, rates.youden
        assert se is not None and sp is not None
        p = x / n
        pi = min(1.0, max(0.0, (p + sp - 1) / j))
        w = n / answered
        total += w * pi
        sampling += w * w * p * (1 - p) / n / (j * j)
        gradients[language] = (-w * pi / j, w * (1 - pi) / j)
        corrections.append(
            LanguageCorrection(
                language=language,
                judged=n,
                detected=x,
                observed=p,
                sensitivity=se,
                specificity=sp,
                corrected=pi,
            )
        )
    return corrections, total, sampling, gradients


def _error_variance(gradients: Mapping[str, tuple[float, float]], errors: Mapping[str, ErrorRates]) -> float:
    variance = 0.0
    for language, (d_se, d_sp) in gradients.items():
        rates = errors[language]
        se, sp = rates.sensitivity, rates.specificity
        assert se is not None and sp is not None
        variance += (
            d_se * d_se * se * (1 - se) / rates.positives + d_sp * d_sp * sp * (1 - sp) / rates.negatives
        )
    return variance


def rate_correct(
    *,
    answered: int,
    judged: Mapping[str, tuple[int, int]],
    errors: Mapping[str, ErrorRates],
    confidence: float = 0.95,
    uncorrected: int = 0,
) -> CorrectedRate:
    """The corrected rate of one arm: `judged[language] = (turns the detector judged, of which it
    called follow-ups)`, `errors[language]` its measured error rates, `uncorrected` follow-ups
    without a language. A language without informative error rates raises ValueError (the caller
    reports it as insufficient data)."""
    _check("answered", answered)
    if sum(n for n, _ in judged.values()) + uncorrected > answered:
        raise ValueError(f"judged turns exceed answered={answered}")
    detected = sum(x for _, x in judged.values()) + uncorrected
    if answered == 0:
        return CorrectedRate(
            answered=0, observed=None, estimate=None, ci_low=0.0, ci_high=1.0, confidence=confidence,
            sampling_variance=0.0, error_variance=0.0, languages=(),
        )  # fmt: skip
    corrections, estimate, sampling, gradients = _gradients(
        answered=answered, judged=judged, errors=errors, uncorrected=uncorrected
    )
    error = _error_variance(gradients, errors)
    half = z_for(confidence) * math.sqrt(sampling + error)
    return CorrectedRate(
        answered=answered,
        observed=detected / answered,
        estimate=estimate,
        ci_low=max(0.0, estimate - half),
        ci_high=min(1.0, estimate + half),
        confidence=confidence,
        sampling_variance=sampling,
        error_variance=error,
        languages=tuple(corrections),
        uncorrected=uncorrected,
    )


@dataclass(frozen=True, kw_only=True)
class CorrectedDifference:
    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    sampling_variance: float  # both arms' traffic
    baseline_sampling_variance: float
    error_variance: float  # the shared error rates, gradients of the two arms subtracted
    method: str = ROGAN_GLADEN


def corrected_difference(
    *,
    candidate: tuple[int, Mapping[str, tuple[int, int]], int],
    baseline: tuple[int, Mapping[str, tuple[int, int]], int],
    errors: Mapping[str, ErrorRates],
    confidence: float = 0.95,
) -> CorrectedDifference:
    """Corrected candidate − baseline rate, each arm given as (answered, judged by language,
    uncorrected follow-ups), both judged by the detector whose error rates are `errors`."""
    (a_c, judged_c, certain_c), (a_b, judged_b, certain_b) = candidate, baseline
    if not a_c or not a_b:
        raise ValueError("both arms need answered questions")
    _, rate_c, sampling_c, grad_c = _gradients(
        answered=a_c, judged=judged_c, errors=errors, uncorrected=certain_c
    )
    _, rate_b, sampling_b, grad_b = _gradients(
        answered=a_b, judged=judged_b, errors=errors, uncorrected=certain_b
    )
    languages = set(grad_c) | set(grad_b)
    joint = {
        language: (
            grad_c.get(language, (0.0, 0.0))[0] - grad_b.get(language, (0.0, 0.0))[0],
            grad_c.get(language, (0.0, 0.0))[1] - grad_b.get(language, (0.0, 0.0))[1],
        )
        for language in languages
    }
    error = _error_variance(joint, errors)
    estimate = rate_c - rate_b
    half = z_for(confidence) * math.sqrt(sampling_c + sampling_b + error)
    return CorrectedDifference(
        estimate=estimate,
        ci_low=max(-1.0, estimate - half),
        ci_high=min(1.0, estimate + half),
        confidence=confidence,
        sampling_variance=sampling_c + sampling_b,
        baseline_sampling_variance=sampling_b,
        error_variance=error,
    )

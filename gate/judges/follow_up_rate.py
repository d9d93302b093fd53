"""Layer 2, follow-up rate: how often users have to ask again after an answer. Pure, no Django.

The detector that labels the turns errs, so by default (`follow_up_correction="rogan_gladen"`) the
rate judged is the observed one corrected for the detector's measured sensitivity and specificity per
language (`engines.follow_up.correction`: Rogan–Gladen with a delta-method interval that carries the
uncertainty of those error rates), and the bar and the non-inferiority margin are judged on that
corrected interval. The observed rate and its Wilson interval are reported beside it. With
`follow_up_correction="none"` the observed rate decides, as follows:

The caller aggregates canary traffic per arm into `FollowUpCounts` (sufficient statistics, so the cost
does not grow with traffic). The rate is follow-ups / answered questions, with a Wilson score interval
(`engines.stats.intervals.wilson_interval`). Two checks decide:

- the bar: the candidate's rate is at most `max_rate`, judged on the Wilson interval's upper bound
  (decide_on="upper_bound", the default: the data must show the rate is below the bar) or on the point
  estimate (decide_on="point");
- non-inferiority against the baseline arm: candidate − baseline is at most `margin`, judged on the
  upper bound of its two-sided `confidence` interval (or on the point difference). The interval is
  Newcombe's hybrid score interval (method 10 of Newcombe, "Interval estimation for the difference
  between independent proportions: comparison of eleven methods", Statistics in Medicine 17, 1998),
  built from the arms' Wilson intervals (l₁, u₁), (l₂, u₂) around d = p₁ − p₂:

      [d − sqrt((p₁ − l₁)² + (u₂ − p₂)²),  d + sqrt((u₁ − p₁)² + (p₂ − l₂)²)]

  It keeps close to nominal coverage at small counts and rates near 0, where the Wald interval does not.

Without a baseline arm the second check is not run and the verdict rests on the bar alone (the reasons
say so). Fewer than `min_answered` answered questions in an arm that is judged is insufficient data,
never a pass. Deepening turns (the user digs further, not a sign of a bad answer) and turns per session
are reported per arm beside the rate; they do not decide. Impossible counts and invalid settings raise
ValueError naming the argument: those are bugs, not a lack of data.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from enum import StrEnum

from engines.follow_up.correction import (
    CorrectedDifference,
    CorrectedRate,
    ErrorRates,
    corrected_difference,
    rate_correct,
)
from engines.follow_up.live_rates import LanguageErrorRates
from engines.reasons import Reason, Term, gettext_noop, reason, wordings_register
from engines.stats.effects import sequential_half_width
from engines.stats.hypothesis import SrmResult, clustered_srm_check
from engines.stats.intervals import newcombe_interval, wilson_interval
from engines.stats.sufficient import MeanStats
from gate.judges.follow_up_review import LiveAgreement, LiveAgreementPolicy
from gate.judges.plan import LookRecord, Unblinding
from gate.judges.traffic import TrafficInputs
from gate.judges.verdict import ERROR, FAIL, INSUFFICIENT, PASS
from gate.policy import setting
from gate.reporting import Attribution

NEWCOMBE = "newcombe_hybrid_score"
# Judged on the Wilson upper bound (the data must show the rate is under the bar) or on the rate.
UPPER_BOUND, POINT = "upper_bound", "point"
FOLLOW_UP_DECIDE_ON = (UPPER_BOUND, POINT)
# Detector kinds that a policy may count (`engines.follow_up.detector.KINDS` less "new").
FOLLOW_UP_KINDS = ("follow_up", "deepening")
# How the observed rate is corrected for the detector's errors before it is judged.
ROGAN_GLADEN, NO_CORRECTION = "rogan_gladen", "none"
FOLLOW_UP_CORRECTIONS = (ROGAN_GLADEN, NO_CORRECTION)
# Share of user turns the detector may still owe (their answers not stored yet) before the layer waits.
MAX_UNJUDGED_SHARE = 0.05


class FollowUpRateCode(StrEnum):
    TOO_FEW_ANSWERED = "follow_up_rate.too_few_answered"
    UNINFORMATIVE_LANGUAGE = "follow_up_rate.uninformative_language"
    SAMPLE_RATIO_MISMATCH = "follow_up_rate.sample_ratio_mismatch"
    NO_HORIZON = "follow_up_rate.no_horizon"
    BEFORE_HORIZON = "follow_up_rate.before_horizon"
    BEFORE_HORIZON_NO_BASELINE = "follow_up_rate.before_horizon_no_baseline"
    INTERIM = "follow_up_rate.interim"
    DETECTOR_OWES = "follow_up_rate.detector_owes"
    RATE = "follow_up_rate.rate"
    RATE_BOUND = "follow_up_rate.rate_bound"
    RATE_ALWAYS_VALID_BOUND = "follow_up_rate.rate_always_valid_bound"
    OBSERVED = "follow_up_rate.observed"
    CORRECTED = "follow_up_rate.corrected"
    BAR_CLEARS = "follow_up_rate.bar_clears"
    BAR_EXCEEDED = "follow_up_rate.bar_exceeded"
    DIFFERENCE = "follow_up_rate.difference"
    DIFFERENCE_BOUND = "follow_up_rate.difference_bound"
    DIFFERENCE_ALWAYS_VALID_BOUND = "follow_up_rate.difference_always_valid_bound"
    BY_DELTA_METHOD = "follow_up_rate.by_delta_method"
    BY_NEWCOMBE = "follow_up_rate.by_newcombe"
    MARGIN_CLEARS = "follow_up_rate.margin_clears"
    MARGIN_EXCEEDED = "follow_up_rate.margin_exceeded"
    NO_BASELINE = "follow_up_rate.no_baseline"
    NOT_SHOWN_YET = "follow_up_rate.not_shown_yet"
    PLANNING_RATE_NOT_UNDER_BAR = "follow_up_rate.planning_rate_not_under_bar"
    ZERO_MARGIN = "follow_up_rate.zero_margin"
    ERROR_RATES_TOO_WIDE = "follow_up_rate.error_rates_too_wide"


wordings_register(
    {
        FollowUpRateCode.TOO_FEW_ANSWERED: gettext_noop(
            "{arm} has {n} answered questions, the policy needs at least {need}"
        ),
        FollowUpRateCode.UNINFORMATIVE_LANGUAGE: gettext_noop(
            "the detector {detector} has no informative measured error rates for language '{language}' "
            "(sensitivity + specificity must exceed 1): its follow-up rate cannot be corrected"
        ),
        FollowUpRateCode.SAMPLE_RATIO_MISMATCH: gettext_noop(
            "sample ratio mismatch: {baseline} baseline and {candidate} candidate answered questions against "
            "an expected candidate share {share:g} (clustered by user, p = {p:.3g} < {alpha:g}): the "
            "assignment or logging is broken, the rate is not trusted"
        ),
        FollowUpRateCode.NO_HORIZON: gettext_noop("no horizon of answered questions was registered: {basis}"),
        FollowUpRateCode.BEFORE_HORIZON: gettext_noop(
            "before the registered horizon of {units} answered questions per arm ({baseline} baseline and "
            "{candidate} candidate so far; {basis}): the rate is judged once, at the horizon"
        ),
        FollowUpRateCode.BEFORE_HORIZON_NO_BASELINE: gettext_noop(
            "before the registered horizon of {units} answered questions per arm ({candidate} candidate so "
            "far; {basis}): the rate is judged once, at the horizon"
        ),
        FollowUpRateCode.INTERIM: gettext_noop("{unblinded}; interim numbers, not a decision"),
        FollowUpRateCode.DETECTOR_OWES: gettext_noop(
            "the detector still owes {unjudged} of {turns:g} user turns (their answers are not stored yet); "
            "run the gate again in a few minutes"
        ),
        FollowUpRateCode.RATE: gettext_noop("follow-up rate"),
        FollowUpRateCode.RATE_BOUND: gettext_noop("follow-up rate upper bound"),
        FollowUpRateCode.RATE_ALWAYS_VALID_BOUND: gettext_noop("follow-up rate always-valid upper bound"),
        FollowUpRateCode.OBSERVED: gettext_noop(
            "rate {rate:.3f}, {level:g} % CI [{low:.3f}, {high:.3f}], {follow_ups} follow-ups of {answered} "
            "answers"
        ),
        FollowUpRateCode.CORRECTED: gettext_noop(
            "corrected rate {rate:.3f}, {level:g} % CI [{low:.3f}, {high:.3f}] by Rogan–Gladen per language "
            "for detector {detector}; observed {observed:.3f}, {follow_ups} follow-ups of {answered} answers"
        ),
        FollowUpRateCode.BAR_CLEARS: gettext_noop("{what} {judged:.3f} <= bar {bar:g} ({described})"),
        FollowUpRateCode.BAR_EXCEEDED: gettext_noop("{what} {judged:.3f} > bar {bar:g} ({described})"),
        FollowUpRateCode.DIFFERENCE: gettext_noop("difference from the baseline"),
        FollowUpRateCode.DIFFERENCE_BOUND: gettext_noop("difference from the baseline upper bound"),
        FollowUpRateCode.DIFFERENCE_ALWAYS_VALID_BOUND: gettext_noop(
            "difference from the baseline always-valid upper bound"
        ),
        FollowUpRateCode.BY_DELTA_METHOD: gettext_noop("Rogan–Gladen corrected, delta method"),
        FollowUpRateCode.BY_NEWCOMBE: gettext_noop("Newcombe's hybrid score"),
        FollowUpRateCode.MARGIN_CLEARS: gettext_noop(
            "{what} {judged:+.3f} <= margin {margin:g} (difference {estimate:+.3f}, {level:g} % CI "
            "[{low:+.3f}, {high:+.3f}] by {method}; baseline rate {rate:.3f}, {follow_ups} follow-ups of "
            "{answered} answers)"
        ),
        FollowUpRateCode.MARGIN_EXCEEDED: gettext_noop(
            "{what} {judged:+.3f} > margin {margin:g} (difference {estimate:+.3f}, {level:g} % CI "
            "[{low:+.3f}, {high:+.3f}] by {method}; baseline rate {rate:.3f}, {follow_ups} follow-ups of "
            "{answered} answers)"
        ),
        FollowUpRateCode.NO_BASELINE: gettext_noop(
            "no baseline arm: non-inferiority not checked, the verdict rests on the bar alone"
        ),
        FollowUpRateCode.NOT_SHOWN_YET: gettext_noop(
            "not shown yet: the estimates clear the bar and the margin, the always-valid bounds not yet"
        ),
        FollowUpRateCode.PLANNING_RATE_NOT_UNDER_BAR: gettext_noop(
            "the planning rate {rate:g} is not under the bar {bar:g}"
        ),
        FollowUpRateCode.ZERO_MARGIN: gettext_noop(
            "a margin of 0 cannot be shown for a candidate as good as the baseline"
        ),
        FollowUpRateCode.ERROR_RATES_TOO_WIDE: gettext_noop(
            "the detector's measured error rates alone leave the bar's bound wider than the gap at any "
            "traffic: measure it on more labelled pairs"
        ),
    }
)


@dataclass(frozen=True)
class FollowUpRatePolicy(LiveAgreementPolicy):
    """Layer 2's keys; the live-agreement keys come from `LiveAgreementPolicy`."""

    follow_up_max: float = setting(0.18, low=0.0, high=1.0, help="the bar for the candidate's follow-up rate")
    follow_up_decide_on: str = setting(
        UPPER_BOUND,
        choices=FOLLOW_UP_DECIDE_ON,
        help="upper_bound: the Wilson upper bound must be under the bar (and the difference's under the "
        "margin); point: the estimates",
    )
    follow_up_margin: float = setting(
        0.01, low=0.0, high=1.0, help="non-inferiority: candidate − baseline may exceed 0 by at most this"
    )
    follow_up_min_answered: int = setting(
        200, low=1, high=10**9, help="fewer answered questions in an arm is insufficient data"
    )
    follow_up_kinds: tuple[str, ...] = setting(
        ("follow_up",), choices=FOLLOW_UP_KINDS, help="detector kinds that count as follow-ups"
    )
    follow_up_correction: str = setting(
        ROGAN_GLADEN,
        choices=FOLLOW_UP_CORRECTIONS,
        help="rogan_gladen: judge the rate corrected for the detector's measured error rates per language; "
        "none: the observed rate",
    )
    follow_up_power: float = setting(
        0.8,
        low=0.5,
        high=0.999,
        help="the horizon's power: a candidate as good as the baseline passes both checks with it",
    )
    follow_up_planning_rate: float | None = setting(
        None,
        low=0.0,
        high=1.0,
        help="the baseline's follow-up rate that sizes the horizon when the family has fewer than "
        "follow_up_min_answered answers in the follow_up_pre_days before the start",
    )
    follow_up_pre_days: int = setting(
        14, low=1, high=365, help="the days before the start over which the family's rate is measured"
    )
    follow_up_srm_alpha: float = setting(
        0.001, low=1e-9, high=0.1, help="sample-ratio check of the answered questions per arm"
    )
    follow_up_sequential_tau: float | None = setting(
        None,
        low=1e-9,
        high=1.0,
        help="set (> 0, a rate, fixed before the experiment) for always-valid bounds that may be judged "
        "at every run, instead of the one look at the horizon",
    )


@dataclass(frozen=True, kw_only=True)
class FollowUpCounts:
    """One arm's canary traffic: `follow_ups` (as the policy counts them) after `answered` questions,
    `deepening` turns among the user's turns (reported only), and `sessions` with Σ and Σ² of the user
    turns per session."""

    answered: int
    follow_ups: int
    deepening: int = 0
    sessions: int = 0
    user_turns_sum: float = 0.0
    user_turns_sumsq: float = 0.0
    # User turns the detector has not judged yet (their answers are not stored yet).
    unjudged: int = 0
    # Per language: (turns the trained detector judged, of which it called follow-ups); turns judged by a
    # rule (a session's first question, a retry after a failed answer) are certain and not in here.
    judged_by_language: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("answered", "follow_ups", "deepening", "sessions", "unjudged"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
                raise ValueError(f"{name}={value!r} must be a non-negative integer")
            object.__setattr__(self, name, int(value))  # plain ints from numpy or database integers
        for name in ("follow_ups", "deepening"):
            if getattr(self, name) > self.answered:
                raise ValueError(f"{name}={getattr(self, name)} exceeds answered={self.answered}")
        for name in ("user_turns_sum", "user_turns_sumsq"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}={value!r} must be non-negative and finite")
            object.__setattr__(self, name, float(value))
        if self.sessions == 0 and self.user_turns_sum > 0:
            raise ValueError(f"user_turns_sum={self.user_turns_sum} without sessions")
        if self.unjudged > self.user_turns_sum:
            raise ValueError(f"unjudged={self.unjudged} exceeds user_turns_sum={self.user_turns_sum}")
        for language, (judged, detected) in self.judged_by_language.items():
            if not 0 <= detected <= judged:
                raise ValueError(
                    f"judged_by_language[{language!r}]=({judged}, {detected}): need 0 <= detected <= judged"
                )

    @property
    def uncorrected(self) -> int:
        """Follow-ups labelled without a language (judged before the trained detector stored one):
        counted as observed."""
        return max(0, self.follow_ups - sum(detected for _, detected in self.judged_by_language.values()))


@dataclass(frozen=True, kw_only=True)
class DetectorAccuracy:
    """The detector that labelled the turns: its version and its error rates per language, measured on
    labelled pairs (for the kinds the policy counts)."""

    version: str
    errors: dict[str, ErrorRates]


@dataclass(frozen=True, kw_only=True)
class ArmFollowUps:
    """One arm's rate with its Wilson interval, and what is reported beside it (rates None without
    answers, the sd below two sessions)."""

    rate: float | None
    ci_low: float | None
    ci_high: float | None
    answered: int
    follow_ups: int | None
    deepening: int | None
    deepening_rate: float | None
    sessions: int
    turns_per_session_mean: float | None
    turns_per_session_sd: float | None
    # The rate corrected for the detector's errors (None without correction): what is judged.
    corrected: CorrectedRate | None = None

    @property
    def judged_rate(self) -> float | None:
        return self.corrected.estimate if self.corrected else self.rate

    @property
    def judged_low(self) -> float | None:
        return self.corrected.ci_low if self.corrected else self.ci_low

    @property
    def judged_high(self) -> float | None:
        return self.corrected.ci_high if self.corrected else self.ci_high


@dataclass(frozen=True, kw_only=True)
class RateDifference:
    """candidate − baseline with its interval, and the non-inferiority margin it is held to."""

    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    margin: float
    method: str = NEWCOMBE
    # The corrected difference's variance parts (the answers-needed estimate reads them).
    corrected: CorrectedDifference | None = None


@dataclass(frozen=True, kw_only=True)
class FollowUpChecks:
    """Each check passed (True), failed (False) or was not run (None)."""

    bar: bool | None = None
    non_inferiority: bool | None = None


@dataclass(frozen=True, kw_only=True)
class AnswerHorizon:
    """The answered questions per arm at which the one look is taken, registered when the experiment
    started (`answers_per_arm` None: none could be sized, `basis` says why)."""

    answers_per_arm: int | None
    basis: Reason | str  # a sentence in plans registered before reason codes
    registered_at: str | None = None


@dataclass(frozen=True, kw_only=True)
class AnswerSplit:
    """Answered questions per arm and Σ over units (users, or sessions without a user) of the unit's
    answers squared, for the sample-ratio check against the candidate's share (None: nothing to check)."""

    baseline: int
    candidate: int
    sum_squares: float
    candidate_share: float | None


@dataclass(frozen=True, kw_only=True)
class FollowUpRateResult:
    """The layer's verdict and its report.

    `difference` is None without a baseline arm; `threshold` is `max_rate`; `unjudged` counts the user
    turns the detector still owed."""

    verdict: str
    reasons: list[Reason | str]
    candidate: ArmFollowUps
    baseline: ArmFollowUps | None
    difference: RateDifference | None
    checks: FollowUpChecks
    threshold: float
    decide_on: str
    confidence: float
    min_answered: int
    unjudged: int = 0
    correction: str = NO_CORRECTION
    detector_version: str | None = None
    # The registered horizon the one look waits for (None: a look the caller chose, or always valid).
    horizon: AnswerHorizon | None = None
    srm: SrmResult | None = None
    sequential: bool = False
    # Blind: before the look (see `follow_up_rate_judge`), no rate, interval or follow-up count.
    blind: bool = False
    unblinded: Unblinding | None = None
    # Per language, the error rates corrected by and where each comes from (live reviews or shipped).
    error_rates: dict[str, LanguageErrorRates] = field(default_factory=dict)


def _arm_report(
    *, counts: FollowUpCounts, confidence: float, detector: DetectorAccuracy | None
) -> ArmFollowUps:
    low, high = wilson_interval(successes=counts.follow_ups, n=counts.answered, confidence=confidence)
    turns = MeanStats(n=counts.sessions, total=counts.user_turns_sum, total_squares=counts.user_turns_sumsq)
    return ArmFollowUps(
        rate=counts.follow_ups / counts.answered if counts.answered else None,
        ci_low=low,
        ci_high=high,
        answered=counts.answered,
        follow_ups=counts.follow_ups,
        deepening=counts.deepening,
        deepening_rate=counts.deepening / counts.answered if counts.answered else None,
        sessions=counts.sessions,
        turns_per_session_mean=turns.mean,
        turns_per_session_sd=math.sqrt(turns.variance) if turns.variance is not None else None,
        corrected=rate_correct(
            answered=counts.answered,
            judged=counts.judged_by_language,
            errors=detector.errors,
            confidence=confidence,
            uncorrected=counts.uncorrected,
        )
        if detector is not None
        else None,
    )


def _check_settings(
    *,
    max_rate: float,
    decide_on: str,
    margin: float,
    min_answered: int,
    confidence: float,
    sequential_tau: float | None,
) -> None:
    if not 0 <= max_rate <= 1:
        raise ValueError(f"max_rate={max_rate} outside [0, 1]")
    if decide_on not in FOLLOW_UP_DECIDE_ON:
        raise ValueError(f"decide_on={decide_on!r} must be one of {FOLLOW_UP_DECIDE_ON}")
    if not 0 <= margin <= 1:
        raise ValueError(f"margin={margin} outside [0, 1]")
    if isinstance(min_answered, bool) or not isinstance(min_answered, int) or min_answered < 1:
        raise ValueError(f"min_answered={min_answered!r} must be a positive integer")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} outside (0, 1)")
    if sequential_tau is not None and not (math.isfinite(sequential_tau) and sequential_tau > 0):
        raise ValueError(f"sequential_tau={sequential_tau} must be positive and finite")


def _uninformative_languages(*, arms: dict[str, FollowUpCounts], detector: DetectorAccuracy) -> list[str]:
    """Languages of judged turns for which the detector has no error rates it can be corrected by."""
    languages = {
        language for counts in arms.values() for language, (n, _) in counts.judged_by_language.items() if n
    }
    return [
        language
        for language in sorted(languages)
        if (rates := detector.errors.get(language)) is None or rates.youden is None or rates.youden <= 0
    ]


def _insufficient_reasons(
    *, arms: dict[str, FollowUpCounts], min_answered: int, detector: DetectorAccuracy | None
) -> list[Reason | str]:
    """Every reason the data cannot decide yet; empty when they can. Each check appends its reason
    here (another one, such as live agreement with human labels, joins the same list)."""
    reasons: list[Reason | str] = [
        reason(FollowUpRateCode.TOO_FEW_ANSWERED, arm=Term(name), n=counts.answered, need=min_answered)
        for name, counts in arms.items()
        if counts.answered < min_answered
    ]
    if detector is not None:
        reasons += [
            reason(FollowUpRateCode.UNINFORMATIVE_LANGUAGE, detector=detector.version, language=language)
            for language in _uninformative_languages(arms=arms, detector=detector)
        ]
    return reasons


def _difference(
    *,
    candidate: FollowUpCounts,
    baseline: FollowUpCounts | None,
    margin: float,
    confidence: float,
    correcting: DetectorAccuracy | None,
) -> RateDifference | None:
    """candidate − baseline: Newcombe's interval of the observed rates, or the corrected difference."""
    if baseline is None or not candidate.answered or not baseline.answered:
        return None
    if correcting is None:
        estimate, low, high = newcombe_interval(
            successes_1=candidate.follow_ups,
            n_1=candidate.answered,
            successes_2=baseline.follow_ups,
            n_2=baseline.answered,
            confidence=confidence,
        )
        return RateDifference(
            estimate=estimate, ci_low=low, ci_high=high, confidence=confidence, margin=margin
        )
    corrected = corrected_difference(
        candidate=(candidate.answered, candidate.judged_by_language, candidate.uncorrected),
        baseline=(baseline.answered, baseline.judged_by_language, baseline.uncorrected),
        errors=correcting.errors,
        confidence=confidence,
    )
    return RateDifference(
        estimate=corrected.estimate,
        ci_low=corrected.ci_low,
        ci_high=corrected.ci_high,
        confidence=confidence,
        margin=margin,
        method=corrected.method,
        corrected=corrected,
    )


def _plug_in_variance(follow_ups: int, answered: int) -> float:
    """A rate's variance for the always-valid bound, with half a follow-up added (and a whole answer) so
    that a rate of 0 or 1 does not claim to be certain."""
    rate = (follow_ups + 0.5) / (answered + 1)
    return rate * (1 - rate) / answered


def _sequential_bounds(
    *,
    arm: ArmFollowUps,
    counts: FollowUpCounts,
    difference: RateDifference | None,
    other: FollowUpCounts | None,
    tau: float,
    confidence: float,
) -> tuple[float, float | None]:
    """The always-valid upper bounds (rate, difference): the normal-mixture confidence sequence
    (`engines.stats.effects.sequential_half_width`, Howard et al. 2021) around the judged estimate with
    its plug-in variance (Waudby-Smith et al., asymptotic confidence sequences): for the observed rate
    p(1 − p)/n, for the corrected one the sampling and the error rates' parts."""
    rate = arm.judged_rate
    assert rate is not None
    if arm.corrected is not None:
        variance = arm.corrected.sampling_variance + arm.corrected.error_variance
    else:
        variance = _plug_in_variance(counts.follow_ups, counts.answered)
    upper = rate + sequential_half_width(variance=max(variance, 1e-12), tau=tau, confidence=confidence)
    if difference is None or other is None:
        return upper, None
    if difference.corrected is not None:
        spread = difference.corrected.sampling_variance + difference.corrected.error_variance
    else:
        spread = _plug_in_variance(counts.follow_ups, counts.answered) + _plug_in_variance(
            other.follow_ups, other.answered
        )
    half = sequential_half_width(variance=max(spread, 1e-12), tau=tau, confidence=confidence)
    return upper, difference.estimate + half


def _srm(split: AnswerSplit | None, alpha: float) -> SrmResult | None:
    if split is None or split.candidate_share is None:
        return None
    return clustered_srm_check(
        counts=(split.baseline, split.candidate),
        sum_squares=split.sum_squares,
        expected_share=split.candidate_share,
        alpha=alpha,
    )


def _undecided(
    *,
    arms: dict[str, FollowUpCounts],
    min_answered: int,
    detector: DetectorAccuracy | None,
    srm: SrmResult | None,
    split: AnswerSplit | None,
    horizon: AnswerHorizon | None,
) -> tuple[str, list[Reason | str]] | None:
    """(verdict, reasons) when the data cannot decide: a sample ratio mismatch of the answered questions
    (error), no registered horizon or before it, or what `_insufficient_reasons` finds; None when they can."""
    if srm is not None and srm.mismatch:
        assert split is not None and srm.p_value is not None
        mismatch = reason(
            FollowUpRateCode.SAMPLE_RATIO_MISMATCH,
            baseline=split.baseline,
            candidate=split.candidate,
            share=split.candidate_share,
            p=srm.p_value,
            alpha=srm.alpha,
        )
        return ERROR, [mismatch]
    if horizon is not None and horizon.answers_per_arm is None:
        return INSUFFICIENT, [reason(FollowUpRateCode.NO_HORIZON, basis=horizon.basis)]
    reasons = _insufficient_reasons(arms=arms, min_answered=min_answered, detector=detector)
    if horizon is not None and horizon.answers_per_arm is not None:
        short = min(counts.answered for counts in arms.values())
        if short < horizon.answers_per_arm:
            counted = {name: counts.answered for name, counts in arms.items()}
            code = (
                FollowUpRateCode.BEFORE_HORIZON
                if "baseline" in counted
                else FollowUpRateCode.BEFORE_HORIZON_NO_BASELINE
            )
            reasons.insert(0, reason(code, units=horizon.answers_per_arm, basis=horizon.basis, **counted))
    return (INSUFFICIENT, reasons) if reasons else None


def follow_up_rate_blind(result: FollowUpRateResult) -> FollowUpRateResult:
    """The result without a number a reader could act on before the look: the answered questions and
    sessions per arm, the sample-ratio check and the horizon stay."""

    def arm(report: ArmFollowUps | None) -> ArmFollowUps | None:
        if report is None:
            return None
        return ArmFollowUps(
            rate=None,
            ci_low=None,
            ci_high=None,
            answered=report.answered,
            follow_ups=None,
            deepening=None,
            deepening_rate=None,
            sessions=report.sessions,
            turns_per_session_mean=None,
            turns_per_session_sd=None,
        )

    candidate = arm(result.candidate)
    assert candidate is not None
    return replace(
        result,
        candidate=candidate,
        baseline=arm(result.baseline),
        difference=None,
        checks=FollowUpChecks(),
        blind=True,
    )


def follow_up_rate_judge(
    *,
    candidate: FollowUpCounts,
    baseline: FollowUpCounts | None,
    max_rate: float = 0.18,
    decide_on: str = UPPER_BOUND,
    margin: float = 0.01,
    min_answered: int = 200,
    confidence: float = 0.95,
    detector: DetectorAccuracy | None = None,
    horizon: AnswerHorizon | None = None,
    split: AnswerSplit | None = None,
    srm_alpha: float = 0.001,
    sequential_tau: float | None = None,
    unblinded: Unblinding | None = None,
) -> FollowUpRateResult:
    """Pass when the candidate's follow-up rate is under the bar and not worse than the baseline's by more
    than `margin` (both on the interval's upper bound by default); with `detector`, the rates judged are
    corrected for its error rates (see the module docstring).

    `split`: the answered questions per arm for the sample-ratio check (clustered by unit). `horizon`: the
    registered answered questions per arm; until both arms reach it the verdict is insufficient data and
    the result blind (only answered questions and sessions per arm, the check, the horizon), as is any
    undecided verdict under a horizon; `unblinded` shows the numbers so far beside it. At the horizon the
    one look decides: a bound over the bar or the margin is a fail (no "more answers would show it": that
    is peeking). `sequential_tau` judges always-valid bounds instead, at any run: there a bound that does
    not clear yet while the estimates do is insufficient data."""
    _check_settings(
        max_rate=max_rate,
        decide_on=decide_on,
        margin=margin,
        min_answered=min_answered,
        confidence=confidence,
        sequential_tau=sequential_tau,
    )
    if sequential_tau is not None:
        horizon = None  # always valid: judged at every run
    arms = {"candidate": candidate} if baseline is None else {"candidate": candidate, "baseline": baseline}
    correcting = _correcting_detector(arms=arms, detector=detector)
    result = _report(
        arms=arms,
        max_rate=max_rate,
        decide_on=decide_on,
        margin=margin,
        min_answered=min_answered,
        confidence=confidence,
        detector=detector,
        correcting=correcting,
        horizon=horizon,
        split=split,
        srm_alpha=srm_alpha,
        sequential=sequential_tau is not None,
    )
    result = _checked(
        result, arms=arms, detector=detector, correcting=correcting, split=split, tau=sequential_tau
    )
    result = _owed(
        result, user_turns=candidate.user_turns_sum + (baseline.user_turns_sum if baseline else 0.0)
    )
    return _before_look(result, unblinded=unblinded)


def _correcting_detector(
    *, arms: dict[str, FollowUpCounts], detector: DetectorAccuracy | None
) -> DetectorAccuracy | None:
    """The detector whose error rates correct the rates; None without informative error rates, since
    then nothing can be corrected and the observed rates are reported only."""
    if detector is None or _uninformative_languages(arms=arms, detector=detector):
        return None
    return detector


def _report(
    *,
    arms: dict[str, FollowUpCounts],
    max_rate: float,
    decide_on: str,
    margin: float,
    min_answered: int,
    confidence: float,
    detector: DetectorAccuracy | None,
    correcting: DetectorAccuracy | None,
    horizon: AnswerHorizon | None,
    split: AnswerSplit | None,
    srm_alpha: float,
    sequential: bool,
) -> FollowUpRateResult:
    """The undecided result with every arm's numbers and the sample-ratio check, so that the checks only
    add a verdict and reasons."""
    candidate, baseline = arms["candidate"], arms.get("baseline")
    reports = {
        name: _arm_report(counts=counts, confidence=confidence, detector=correcting)
        for name, counts in arms.items()
    }
    srm = _srm(split, srm_alpha)
    return FollowUpRateResult(
        verdict=INSUFFICIENT,
        reasons=[],
        candidate=reports["candidate"],
        baseline=reports.get("baseline"),
        difference=_difference(
            candidate=candidate,
            baseline=baseline,
            margin=margin,
            confidence=confidence,
            correcting=correcting,
        ),
        checks=FollowUpChecks(),
        threshold=max_rate,
        decide_on=decide_on,
        confidence=confidence,
        min_answered=min_answered,
        unjudged=candidate.unjudged + (baseline.unjudged if baseline else 0),
        correction=ROGAN_GLADEN if correcting is not None else NO_CORRECTION,
        detector_version=detector.version if detector is not None else None,
        horizon=horizon,
        srm=srm,
        sequential=sequential,
    )


def _checked(
    result: FollowUpRateResult,
    *,
    arms: dict[str, FollowUpCounts],
    detector: DetectorAccuracy | None,
    correcting: DetectorAccuracy | None,
    split: AnswerSplit | None,
    tau: float | None,
) -> FollowUpRateResult:
    """The verdict: why the data cannot decide yet when they cannot (`_undecided`), else the two checks."""
    undecided = _undecided(
        arms=arms,
        min_answered=result.min_answered,
        detector=detector,
        srm=result.srm,
        split=split,
        horizon=result.horizon,
    )
    if undecided is None:
        return _decide(result, arms=arms, correcting=correcting, tau=tau)
    return replace(result, verdict=undecided[0], reasons=undecided[1])


def _before_look(result: FollowUpRateResult, *, unblinded: Unblinding | None) -> FollowUpRateResult:
    """Under a horizon an undecided result is blind, so that nothing downstream shows what the one look
    has not decided yet; unblinded, the numbers so far come with who unblinded them."""
    if result.horizon is None or result.verdict in (PASS, FAIL):
        return result
    if unblinded is None:
        return follow_up_rate_blind(result)
    return replace(
        result,
        reasons=[*result.reasons, reason(FollowUpRateCode.INTERIM, unblinded=unblinded.note)],
        unblinded=unblinded,
    )


def _owed(result: FollowUpRateResult, *, user_turns: float) -> FollowUpRateResult:
    """Insufficient data while the detector still owes more than MAX_UNJUDGED_SHARE of the user turns."""
    if (
        result.verdict in (INSUFFICIENT, ERROR)
        or not user_turns
        or result.unjudged / user_turns <= MAX_UNJUDGED_SHARE
    ):
        return result
    owes = reason(FollowUpRateCode.DETECTOR_OWES, unjudged=result.unjudged, turns=user_turns)
    return replace(result, verdict=INSUFFICIENT, reasons=[*result.reasons, owes])


def _decide(
    result: FollowUpRateResult,
    *,
    arms: dict[str, FollowUpCounts],
    correcting: DetectorAccuracy | None,
    tau: float | None,
) -> FollowUpRateResult:
    """The two checks on the bounds (always-valid with `tau`) or the estimates."""
    arm, counts, difference = result.candidate, arms["candidate"], result.difference
    assert arm.rate is not None and arm.judged_rate is not None  # answered >= min_answered >= 1
    upper, difference_upper = arm.judged_high, difference.ci_high if difference else None
    if tau is not None:
        upper, difference_upper = _sequential_bounds(
            arm=arm,
            counts=counts,
            difference=difference,
            other=arms.get("baseline"),
            tau=tau,
            confidence=result.confidence,
        )
    assert upper is not None
    bar = _bar_outcome(result, counts=counts, correcting=correcting, upper=upper, tau=tau)
    non_inferiority = None
    if difference is not None:
        assert difference_upper is not None
        non_inferiority = _margin_outcome(result, difference=difference, upper=difference_upper, tau=tau)
    return _verdict(result, bar=bar, non_inferiority=non_inferiority, tau=tau)


@dataclass(frozen=True, kw_only=True)
class _CheckOutcome:
    """One check's result and the reason that reports it."""

    passed: bool
    why: Reason


def _rate_described(
    *, arm: ArmFollowUps, counts: FollowUpCounts, level: float, correcting: DetectorAccuracy | None
) -> Reason:
    """The candidate's rate as the bar's reason shows it: corrected beside the observed one, or observed."""
    if arm.corrected is not None:
        return reason(
            FollowUpRateCode.CORRECTED,
            rate=arm.judged_rate,
            level=level,
            low=arm.judged_low,
            high=arm.judged_high,
            detector=correcting.version if correcting else "",
            observed=arm.rate,
            follow_ups=counts.follow_ups,
            answered=counts.answered,
        )
    return reason(
        FollowUpRateCode.OBSERVED,
        rate=arm.rate,
        level=level,
        low=arm.ci_low,
        high=arm.ci_high,
        follow_ups=counts.follow_ups,
        answered=counts.answered,
    )


def _bar_outcome(
    result: FollowUpRateResult,
    *,
    counts: FollowUpCounts,
    correcting: DetectorAccuracy | None,
    upper: float,
    tau: float | None,
) -> _CheckOutcome:
    """The bar: the candidate's judged rate (its upper bound, or the estimate) against `max_rate`."""
    use_bound, arm, max_rate = result.decide_on == UPPER_BOUND, result.candidate, result.threshold
    judged = upper if use_bound else arm.judged_rate
    assert judged is not None
    passed = judged <= max_rate
    described = _rate_described(arm=arm, counts=counts, level=result.confidence * 100, correcting=correcting)
    what = _judged_what(use_bound=use_bound, tau=tau, of_difference=False)
    code = FollowUpRateCode.BAR_CLEARS if passed else FollowUpRateCode.BAR_EXCEEDED
    return _CheckOutcome(
        passed=passed, why=reason(code, what=what, judged=judged, bar=max_rate, described=described)
    )


def _margin_outcome(
    result: FollowUpRateResult, *, difference: RateDifference, upper: float, tau: float | None
) -> _CheckOutcome:
    """Non-inferiority: candidate − baseline (its upper bound, or the estimate) against the margin."""
    use_bound, other = result.decide_on == UPPER_BOUND, result.baseline
    assert other is not None and other.rate is not None and other.judged_rate is not None
    judged = upper if use_bound else difference.estimate
    passed = judged <= difference.margin
    method = FollowUpRateCode.BY_DELTA_METHOD if difference.corrected else FollowUpRateCode.BY_NEWCOMBE
    code = FollowUpRateCode.MARGIN_CLEARS if passed else FollowUpRateCode.MARGIN_EXCEEDED
    why = reason(
        code,
        what=_judged_what(use_bound=use_bound, tau=tau, of_difference=True),
        judged=judged,
        margin=difference.margin,
        estimate=difference.estimate,
        level=result.confidence * 100,
        low=difference.ci_low,
        high=difference.ci_high,
        method=reason(method),
        rate=other.judged_rate,
        follow_ups=other.follow_ups,
        answered=other.answered,
    )
    return _CheckOutcome(passed=passed, why=why)


def _verdict(
    result: FollowUpRateResult,
    *,
    bar: _CheckOutcome,
    non_inferiority: _CheckOutcome | None,
    tau: float | None,
) -> FollowUpRateResult:
    """Pass when every check passed; else fail, or insufficient data while always-valid bounds may still
    clear at a later run because the estimates already do. Without a baseline the reasons say the
    verdict rests on the bar alone."""
    difference, rate = result.difference, result.candidate.judged_rate
    assert rate is not None
    outcomes = [bar] if non_inferiority is None else [bar, non_inferiority]
    notes: list[Reason | str] = [reason(FollowUpRateCode.NO_BASELINE)] if non_inferiority is None else []
    checks = FollowUpChecks(
        bar=bar.passed, non_inferiority=non_inferiority.passed if non_inferiority is not None else None
    )
    failed: list[Reason | str] = [outcome.why for outcome in outcomes if not outcome.passed]
    if not failed:
        reasons = [*(outcome.why for outcome in outcomes), *notes]
        return replace(result, verdict=PASS, reasons=reasons, checks=checks)
    points = rate <= result.threshold and (difference is None or difference.estimate <= difference.margin)
    if tau is not None and result.decide_on == UPPER_BOUND and points:
        # Always valid: the bounds may still clear at a later run; nothing is decided yet.
        not_yet = reason(FollowUpRateCode.NOT_SHOWN_YET)
        return replace(result, verdict=INSUFFICIENT, reasons=[*failed, *notes, not_yet], checks=checks)
    return replace(result, verdict=FAIL, reasons=[*failed, *notes], checks=checks)


def _judged_what(*, use_bound: bool, tau: float | None, of_difference: bool) -> Reason:
    """What a check judged: the estimate, its upper bound, or its always-valid upper bound."""
    if of_difference:
        codes = (
            FollowUpRateCode.DIFFERENCE,
            FollowUpRateCode.DIFFERENCE_BOUND,
            FollowUpRateCode.DIFFERENCE_ALWAYS_VALID_BOUND,
        )
    else:
        codes = (FollowUpRateCode.RATE, FollowUpRateCode.RATE_BOUND, FollowUpRateCode.RATE_ALWAYS_VALID_BOUND)
    return reason(codes[0 if not use_bound else 1 if tau is None else 2])


MAX_HORIZON = 10**9


def _planning_variances(rate: float, errors: ErrorRates | None) -> tuple[float, float]:
    """Per answered question, the judged rate's sampling variance, and the part of its variance the error
    rates bring (which does not shrink with traffic): for the observed rate π(1 − π) and 0; corrected
    (Rogan–Gladen, as `engines.follow_up.correction`), p(1 − p)/J² with p = π·Se + (1 − π)(1 − Sp) the
    rate the detector would report and J = Se + Sp − 1, and (π/J)²·Se(1 − Se)/P + ((1 − π)/J)²·Sp(1 − Sp)/N
    for error rates measured on P follow-ups and N other pairs."""
    if errors is None:
        return rate * (1 - rate), 0.0
    se, sp, j = errors.sensitivity, errors.specificity, errors.youden
    assert se is not None and sp is not None and j is not None and j > 0
    observed = rate * se + (1 - rate) * (1 - sp)
    error = (rate / j) ** 2 * se * (1 - se) / errors.positives + ((1 - rate) / j) ** 2 * sp * (
        1 - sp
    ) / errors.negatives
    return observed * (1 - observed) / (j * j), error


def follow_up_horizon_power(
    *,
    answers: int,
    rate: float,
    max_rate: float,
    margin: float,
    alpha: float,
    decide_on: str,
    errors: ErrorRates | None = None,
) -> float:
    """The chance that a candidate whose follow-up rate equals the baseline's (`rate`, on the judged scale)
    passes both checks at `answers` answered questions per arm, in the normal approximation: the bar's
    statistic (π̂_c − π)/sd_b and the margin's (d̂ − 0)/sd_d are bivariate normal, sd_b² = v/n + e (v, e from
    `_planning_variances`), sd_d² = 2v/n (at equal rates both arms' error-rate parts cancel), with
    correlation (v/n)/(sd_b·sd_d); the checks pass when each upper bound, estimate + z₁₋α·sd, is under its
    line (z = 0 when `decide_on` is "point"): P = Φ₂((bar − π)/sd_b − z, margin/sd_d − z; ρ)."""
    from scipy import stats as scipy_stats

    z = float(scipy_stats.norm.ppf(1 - alpha)) if decide_on == UPPER_BOUND else 0.0
    per_answer, error = _planning_variances(rate, errors)
    sampling = per_answer / answers
    bar_sd, margin_sd = math.sqrt(sampling + error), math.sqrt(2 * sampling)
    if bar_sd == 0 or margin_sd == 0:  # a rate of 0 or 1, observed without error: certain
        return float(max_rate > rate and margin > 0)
    rho = sampling / (bar_sd * margin_sd)
    limits = [(max_rate - rate) / bar_sd - z, margin / margin_sd - z]
    return float(scipy_stats.multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]]).cdf(limits))


def follow_up_horizon_answers(
    *,
    rate: float,
    max_rate: float,
    margin: float,
    alpha: float,
    power: float,
    decide_on: str,
    errors: ErrorRates | None = None,
) -> int | Reason:
    """The answered questions per arm at which a candidate as good as the baseline (both at `rate`)
    passes the bar and the non-inferiority margin with probability `power` (`follow_up_horizon_power`):
    the smallest such n, or why there is none (the rate not under the bar, no margin, or the error rates'
    own uncertainty wider than the gap at any traffic)."""
    if not 0 <= rate < max_rate:
        return reason(FollowUpRateCode.PLANNING_RATE_NOT_UNDER_BAR, rate=rate, bar=max_rate)
    if margin <= 0 and decide_on == UPPER_BOUND:
        return reason(FollowUpRateCode.ZERO_MARGIN)

    def passes(n: int) -> bool:
        chance = follow_up_horizon_power(
            answers=n,
            rate=rate,
            max_rate=max_rate,
            margin=margin,
            alpha=alpha,
            decide_on=decide_on,
            errors=errors,
        )
        return chance >= power

    high = 2
    while not passes(high):
        if high >= MAX_HORIZON:
            return reason(FollowUpRateCode.ERROR_RATES_TOO_WIDE)
        high *= 2
    low = high // 2
    while high - low > 1:  # the chance grows with n: the first n that passes
        middle = (low + high) // 2
        low, high = (low, middle) if passes(middle) else (middle, high)
    return high


@dataclass(frozen=True, kw_only=True)
class FollowUpInputs(TrafficInputs):
    counted_kinds: list[str] = field(default_factory=list)
    detector_thresholds: dict[str, float] = field(default_factory=dict)
    unjudged_turns: int = 0
    detector_version: str = ""  # the artefact whose error rates correct the rate
    detector_versions_in_traffic: list[str] = field(default_factory=list)  # the ones that judged the turns


@dataclass(frozen=True, kw_only=True)
class FollowUpRateDetails:
    """What the layer stores: the traffic it read, the judge's result (None without an experiment),
    what the detector labelled first, timings and, when the layer did not pass, the attribution."""

    inputs: FollowUpInputs
    method: str = ""
    judged: FollowUpRateResult | None = None
    # The detector against reviewers' labels of live turns (`gate.judges.follow_up_review`).
    live_agreement: LiveAgreement | None = None
    labelled_now: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    attribution: Attribution | None = None
    # The one look at the horizon this result is: taken by this run (`look_taken_now`), or stored by an
    # earlier run and returned unchanged. None before the look, and for the always-valid option.
    look: LookRecord | None = None
    look_taken_now: bool = False

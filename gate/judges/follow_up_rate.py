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
from dataclasses import dataclass, field

from engines.follow_up.correction import (
    CorrectedDifference,
    CorrectedRate,
    ErrorRates,
    corrected_difference,
    rate_correct,
)
from engines.follow_up.live_rates import LanguageErrorRates
from engines.stats.intervals import newcombe_interval, wilson_interval, z_for
from engines.stats.sufficient import MeanStats
from gate.judges.follow_up_review import LiveAgreement, LiveAgreementPolicy
from gate.judges.traffic import TrafficInputs
from gate.judges.verdict import FAIL, INSUFFICIENT, PASS
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
    ci_low: float
    ci_high: float
    answered: int
    follow_ups: int
    deepening: int
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
    def judged_low(self) -> float:
        return self.corrected.ci_low if self.corrected else self.ci_low

    @property
    def judged_high(self) -> float:
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
class FollowUpRateResult:
    """The layer's verdict and its report.

    `difference` is None without a baseline arm; `threshold` is `max_rate`; `unjudged` counts the user
    turns the detector still owed."""

    verdict: str
    reasons: list[str]
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
    *, max_rate: float, decide_on: str, margin: float, min_answered: int, confidence: float
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


def _answers_needed(
    *,
    candidate: ArmFollowUps,
    baseline: ArmFollowUps | None,
    difference: RateDifference | None,
    checks: FollowUpChecks,
    max_rate: float,
    margin: float,
    confidence: float,
) -> str | None:
    """When every failed check passes on its point estimate: about how many candidate answers would
    show it if the rates held (normal approximation: z·se below the gap; with the correction, the part
    of the variance that the detector's error rates bring does not shrink with traffic). None when a
    failed check fails on its point estimate too (then the verdict is a fail)."""
    z = z_for(confidence)
    rate = candidate.judged_rate
    assert rate is not None
    needs = []
    detector_bound = (
        "the detector's measured error rates alone leave the interval wider than the gap: it needs "
        "measuring on more labelled pairs, not more traffic"
    )
    if checks.bar is False:
        if rate >= max_rate:
            return None
        gap = max_rate - rate
        if candidate.corrected is None:
            needs.append(math.ceil(z * z * rate * (1 - rate) / gap**2))
        else:
            room = (gap / z) ** 2 - candidate.corrected.error_variance
            if room <= 0:
                return detector_bound
            needs.append(math.ceil(candidate.answered * candidate.corrected.sampling_variance / room))
    if checks.non_inferiority is False:
        assert difference is not None and baseline is not None and baseline.rate is not None
        gap = margin - difference.estimate
        if gap <= 0:
            return None
        fixed = (
            (difference.corrected.error_variance, difference.corrected.baseline_sampling_variance)
            if difference.corrected
            else (0.0, baseline.rate * (1 - baseline.rate) / baseline.answered)
        )
        if difference.corrected and (gap / z) ** 2 <= fixed[0]:
            return detector_bound
        room = (gap / z) ** 2 - sum(fixed)
        if room <= 0:
            return (
                f"the point estimates pass, but the baseline's {baseline.answered} answers alone leave "
                "the interval of the difference wider than the margin: both arms need more answers"
            )
        per_answer = (
            candidate.answered * (difference.corrected.sampling_variance - fixed[1])
            if difference.corrected
            else rate * (1 - rate)
        )
        needs.append(math.ceil(per_answer / room))
    return (
        f"the point estimates pass the bounds' checks; about {max(needs)} answered questions on the "
        f"candidate (it has {candidate.answered}) would show it if the rates held"
    )


def _percent(confidence: float) -> str:
    return f"{confidence * 100:g} %"


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
) -> list[str]:
    """Every reason the data cannot decide yet; empty when they can. Each check appends its reason
    here (another one, such as live agreement with human labels, joins the same list)."""
    reasons = [
        f"{name} has {counts.answered} answered questions, the policy needs at least {min_answered}"
        for name, counts in arms.items()
        if counts.answered < min_answered
    ]
    if detector is not None:
        reasons += [
            f"the detector {detector.version} has no informative measured error rates for language "
            f"{language!r} (sensitivity + specificity must exceed 1): its follow-up rate cannot be "
            "corrected"
            for language in _uninformative_languages(arms=arms, detector=detector)
        ]
    return reasons


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
) -> FollowUpRateResult:
    """Pass when the candidate's follow-up rate is under the bar and not worse than the baseline's by more
    than `margin` (both on the interval's upper bound by default); with `detector`, the rates judged are
    corrected for its error rates (see the module docstring)."""
    _check_settings(
        max_rate=max_rate,
        decide_on=decide_on,
        margin=margin,
        min_answered=min_answered,
        confidence=confidence,
    )
    arms = {"candidate": candidate} if baseline is None else {"candidate": candidate, "baseline": baseline}
    insufficient = _insufficient_reasons(arms=arms, min_answered=min_answered, detector=detector)
    # Without informative error rates nothing can be corrected: report the observed rates only.
    correcting = (
        detector
        if detector is not None and not _uninformative_languages(arms=arms, detector=detector)
        else None
    )
    reports = {
        name: _arm_report(counts=counts, confidence=confidence, detector=correcting)
        for name, counts in arms.items()
    }
    difference = None
    if baseline is not None and candidate.answered and baseline.answered:
        estimate, low, high = newcombe_interval(
            successes_1=candidate.follow_ups,
            n_1=candidate.answered,
            successes_2=baseline.follow_ups,
            n_2=baseline.answered,
            confidence=confidence,
        )
        difference = RateDifference(
            estimate=estimate, ci_low=low, ci_high=high, confidence=confidence, margin=margin
        )
        if correcting is not None:
            corrected = corrected_difference(
                candidate=(candidate.answered, candidate.judged_by_language, candidate.uncorrected),
                baseline=(baseline.answered, baseline.judged_by_language, baseline.uncorrected),
                errors=correcting.errors,
                confidence=confidence,
            )
            difference = RateDifference(
                estimate=corrected.estimate,
                ci_low=corrected.ci_low,
                ci_high=corrected.ci_high,
                confidence=confidence,
                margin=margin,
                method=corrected.method,
                corrected=corrected,
            )
    unjudged = candidate.unjudged + (baseline.unjudged if baseline else 0)
    user_turns = candidate.user_turns_sum + (baseline.user_turns_sum if baseline else 0.0)

    def result(verdict: str, reasons: list[str], checks: FollowUpChecks) -> FollowUpRateResult:
        if verdict != INSUFFICIENT and user_turns and unjudged / user_turns > MAX_UNJUDGED_SHARE:
            verdict = INSUFFICIENT
            reasons = [
                *reasons,
                f"the detector still owes {unjudged} of {user_turns:g} user turns (their answers are not "
                "stored yet); run the gate again in a few minutes",
            ]
        return FollowUpRateResult(
            verdict=verdict,
            reasons=reasons,
            candidate=reports["candidate"],
            baseline=reports.get("baseline"),
            difference=difference,
            checks=checks,
            threshold=max_rate,
            decide_on=decide_on,
            confidence=confidence,
            min_answered=min_answered,
            unjudged=unjudged,
            correction=ROGAN_GLADEN if correcting is not None else NO_CORRECTION,
            detector_version=detector.version if detector is not None else None,
        )

    if insufficient:
        return result(INSUFFICIENT, insufficient, FollowUpChecks())

    use_bound = decide_on == UPPER_BOUND
    level = _percent(confidence)
    arm = reports["candidate"]
    rate = arm.judged_rate
    assert arm.rate is not None and rate is not None  # answered >= min_answered >= 1
    judged = arm.judged_high if use_bound else rate
    bar_passed = judged <= max_rate
    if arm.corrected is not None:
        described = (
            f"corrected rate {rate:.3f}, {level} CI [{arm.judged_low:.3f}, {arm.judged_high:.3f}] by "
            f"Rogan–Gladen per language for detector {correcting.version if correcting else ''}; observed "
            f"{arm.rate:.3f}, {candidate.follow_ups} follow-ups of {candidate.answered} answers"
        )
    else:
        described = (
            f"rate {arm.rate:.3f}, {level} CI [{arm.ci_low:.3f}, {arm.ci_high:.3f}], "
            f"{candidate.follow_ups} follow-ups of {candidate.answered} answers"
        )
    # (passed, reason) per check: a fail gives the failed checks' reasons, a pass every check's.
    outcomes = [
        (
            bar_passed,
            f"follow-up rate {'upper bound ' if use_bound else ''}{judged:.3f} {'<=' if bar_passed else '>'} "
            f"bar {max_rate:g} ({described})",
        )
    ]
    notes = []
    if difference is None:
        non_inferior = None
        notes.append("no baseline arm: non-inferiority not checked, the verdict rests on the bar alone")
    else:
        other = reports["baseline"]
        assert other.rate is not None and other.judged_rate is not None
        judged = difference.ci_high if use_bound else difference.estimate
        non_inferior = judged <= margin
        how = "Rogan–Gladen corrected, delta method" if difference.corrected else "Newcombe's hybrid score"
        outcomes.append(
            (
                non_inferior,
                f"difference from the baseline {'upper bound ' if use_bound else ''}{judged:+.3f} "
                f"{'<=' if non_inferior else '>'} margin {margin:g} (difference "
                f"{difference.estimate:+.3f}, {level} CI [{difference.ci_low:+.3f}, "
                f"{difference.ci_high:+.3f}] by {how}; baseline rate "
                f"{other.judged_rate:.3f}, {other.follow_ups} follow-ups of {other.answered} answers)",
            )
        )
    checks = FollowUpChecks(bar=bar_passed, non_inferiority=non_inferior)
    failed = [reason for passed, reason in outcomes if not passed]
    if failed and use_bound:
        needed = _answers_needed(
            candidate=reports["candidate"],
            baseline=reports.get("baseline"),
            difference=difference,
            checks=checks,
            max_rate=max_rate,
            margin=margin,
            confidence=confidence,
        )
        if needed is not None:
            # Every check that failed passes on its point estimate: the data are short, not the model.
            reasons = [*failed, *notes, f"not shown yet: {needed}"]
            return result(INSUFFICIENT, reasons, checks)
    if failed:
        return result(FAIL, failed + notes, checks)
    return result(PASS, [reason for _, reason in outcomes] + notes, checks)


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

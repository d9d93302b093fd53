"""The suite-vs-live shift check: its policy section, codes and wordings, what it stores, and its judge.
Pure: numbers in (`engines.shift` figures per language), verdict and reasons out. See docs/shift.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from engines.reasons import Reason, gettext_noop, reason, wordings_register
from engines.shift import SAMPLE, LanguageShift
from gate.judges.traffic import TrafficInputs
from gate.judges.verdict import FAIL, INSUFFICIENT, PASS
from gate.policy import PolicySection, setting

METHOD = (
    "per language, a seeded sample of the experiment's user questions (probes excluded) against the suite's "
    "inputs: each live question's nearest suite input by character-level normalised Levenshtein distance; "
    "fail when the median of those distances is above the bar in a language with enough live questions, or "
    "when the suite has no input in it; suite-to-live distances, the live sample's own spread, length, "
    "mixed-script and typo shares (Wilson intervals) beside"
)


class ShiftCode(StrEnum):
    NEAR = "suite_shift.near"
    FAR = "suite_shift.far"
    NO_SUITE_ITEMS = "suite_shift.no_suite_items"
    TOO_FEW = "suite_shift.too_few"
    TOO_FEW_LANGUAGE = "suite_shift.too_few_language"


wordings_register(
    {
        ShiftCode.NEAR: gettext_noop(
            "{language}: the median live question is {distance:.3f} from its nearest suite input, within "
            "the bar {bar} ({live} live questions; the traffic's own spread {spread})"
        ),
        ShiftCode.FAR: gettext_noop(
            "{language}: the median live question is {distance:.3f} from its nearest suite input, above the "
            "bar {bar}: the suite does not look like the traffic ({live} live questions; the traffic's own "
            "spread {spread})"
        ),
        ShiftCode.NO_SUITE_ITEMS: gettext_noop(
            "{language}: {live} live questions and no suite input in this language"
        ),
        ShiftCode.TOO_FEW: gettext_noop(
            "{live} live user questions read, fewer than {min_live} in every language: not enough traffic"
        ),
        ShiftCode.TOO_FEW_LANGUAGE: gettext_noop(
            "{language}: {live} live questions, fewer than {min_live}: not judged"
        ),
    }
)


@dataclass(frozen=True)
class SuiteShiftPolicy(PolicySection):
    suite_shift_max: float = setting(
        0.3,
        low=0.0,
        high=1.0,
        help="the bar: the median normalised edit distance of live questions to their nearest suite input "
        "may be at most this, per language",
    )
    suite_shift_min_live: int = setting(
        200, low=1, high=10**9, help="fewer live user questions in a language: not judged there"
    )
    suite_shift_sample: int = setting(
        SAMPLE, low=10, high=20_000, help="live questions and suite inputs compared per language, at most"
    )
    suite_shift_seed: int = setting(0, low=0, high=2**31 - 1, help="the seed of the samples")


@dataclass(frozen=True, kw_only=True)
class SuiteShiftDetails:
    """What the layer stores: the traffic and suite it read, the settings, each language's figures."""

    inputs: TrafficInputs
    suite: str = ""
    live_total: int = 0
    live_read: int = 0
    bar: float | None = None
    min_live: int = 0
    sample: int = 0
    seed: int = 0
    method: str = METHOD
    languages: list[LanguageShift] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class SuiteShiftResult:
    verdict: str
    reasons: list[Reason]
    judged: list[str]
    worst: float | None  # the largest judged median distance (None: none judged, or no suite input)


def _spread(figures: LanguageShift) -> str:
    return "-" if figures.live_to_live is None else f"{figures.live_to_live:.3f}"


def _language_reason(figures: LanguageShift, *, bar: float) -> tuple[bool, Reason]:
    """Whether a judged language passes, and why."""
    live = figures.live_total
    if figures.live_to_suite is None:
        return False, reason(ShiftCode.NO_SUITE_ITEMS, language=figures.language, live=live)
    passed = figures.live_to_suite <= bar
    return passed, reason(
        ShiftCode.NEAR if passed else ShiftCode.FAR,
        language=figures.language,
        distance=figures.live_to_suite,
        bar=bar,
        live=live,
        spread=_spread(figures),
    )


def suite_shift_judge(
    *, languages: Sequence[LanguageShift], live_read: int, bar: float, min_live: int
) -> SuiteShiftResult:
    """Languages with at least `min_live` live questions read are judged (none: insufficient data);
    the layer fails when one of them fails."""
    judged = [f for f in languages if f.live_total >= min_live]
    if not judged:
        why = reason(ShiftCode.TOO_FEW, live=live_read, min_live=min_live)
        return SuiteShiftResult(verdict=INSUFFICIENT, reasons=[why], judged=[], worst=None)
    outcomes = [_language_reason(f, bar=bar) for f in judged]
    skipped = [
        reason(ShiftCode.TOO_FEW_LANGUAGE, language=f.language, live=f.live_total, min_live=min_live)
        for f in languages
        if 0 < f.live_total < min_live
    ]
    distances = [f.live_to_suite for f in judged if f.live_to_suite is not None]
    return SuiteShiftResult(
        verdict=PASS if all(passed for passed, _ in outcomes) else FAIL,
        reasons=[why for _, why in outcomes] + skipped,
        judged=[f.language for f in judged],
        worst=max(distances) if distances else None,
    )

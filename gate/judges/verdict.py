from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

from engines.reasons import Reason, Term, gettext_noop, reason, wordings_register

PASS, FAIL, INSUFFICIENT, ERROR = "pass", "fail", "insufficient_data", "error"


class VerdictCode(StrEnum):
    NO_RESULT = "verdict.no_result"
    LAYER_VERDICT = "verdict.layer_verdict"


wordings_register(
    {
        VerdictCode.NO_RESULT: gettext_noop("{layer}: no result"),
        VerdictCode.LAYER_VERDICT: gettext_noop("{layer}: {verdict}"),
    }
)


def gate_verdict(
    *, required_layers: Sequence[str], layer_verdicts: Mapping[str, str]
) -> tuple[str, list[Reason]]:
    """Pass only when every required layer passed. Otherwise the worst outcome wins:
    fail, then error, then insufficient data (a missing layer counts as insufficient data)."""
    reasons: list[Reason] = []
    outcomes: set[str] = set()
    for layer in required_layers:
        verdict = layer_verdicts.get(layer)
        if verdict is None:
            outcomes.add(INSUFFICIENT)
            reasons.append(reason(VerdictCode.NO_RESULT, layer=Term(layer)))
        elif verdict != PASS:
            # A verdict this rule does not know (say, a layer left pending) is an error, never a pass.
            outcomes.add(verdict if verdict in (FAIL, INSUFFICIENT) else ERROR)
            reasons.append(reason(VerdictCode.LAYER_VERDICT, layer=Term(layer), verdict=Term(verdict)))
    for verdict in (FAIL, ERROR, INSUFFICIENT):
        if verdict in outcomes:
            return verdict, reasons
    return PASS, reasons

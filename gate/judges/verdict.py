from __future__ import annotations

from collections.abc import Mapping, Sequence

PASS, FAIL, INSUFFICIENT, ERROR = "pass", "fail", "insufficient_data", "error"


def gate_verdict(
    *, required_layers: Sequence[str], layer_verdicts: Mapping[str, str]
) -> tuple[str, list[str]]:
    """Pass only when every required layer passed. Otherwise the worst outcome wins:
    fail, then error, then insufficient data (a missing layer counts as insufficient data)."""
    reasons: list[str] = []
    outcomes: set[str] = set()
    for layer in required_layers:
        verdict = layer_verdicts.get(layer)
        if verdict is None:
            outcomes.add(INSUFFICIENT)
            reasons.append(f"{layer}: no result")
        elif verdict != PASS:
            # A verdict this rule does not know (say, a layer left pending) is an error, never a pass.
            outcomes.add(verdict if verdict in (FAIL, INSUFFICIENT) else ERROR)
            reasons.append(f"{layer}: {verdict}")
    for verdict in (FAIL, ERROR, INSUFFICIENT):
        if verdict in outcomes:
            return verdict, reasons
    return PASS, reasons

"""The traffic layers' one look, as both store it in their plan: read the look a plan holds, say that a
run returns it, and store a look taken now, once (a run that comes second gets the first run's)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter

from canary.models import Experiment
from canary.services.plans import PLAN_FIELDS, experiment_look_store
from engines.reasons import gettext_noop, reason, wordings_register
from gate.judges.business_value import BusinessValueResult
from gate.judges.follow_up_rate import FollowUpRateResult
from gate.judges.plan import LookRecord, moment
from gate.judges.verdict import INSUFFICIENT
from gate.layers.base import to_json
from gate.models import GateRun
from registry.actors import SystemActor

R = TypeVar("R", BusinessValueResult, FollowUpRateResult)


class LookCode(StrEnum):
    RETURNED = "look.returned"
    REGISTERED_AGAIN = "look.registered_again"
    TAKEN_NOW_ANSWERS = "look.taken_now_answers"
    TAKEN_NOW_DATA = "look.taken_now_data"


wordings_register(
    {
        LookCode.RETURNED: gettext_noop(
            "the registered look, taken at {at} by gate run {run}: every later run returns it unchanged"
        ),
        LookCode.REGISTERED_AGAIN: gettext_noop(
            "the plan was registered again while this run judged it: run the gate again"
        ),
        LookCode.TAKEN_NOW_ANSWERS: gettext_noop(
            "the one look at the registered horizon, taken now (answers up to {cutoff}): every later run "
            "returns it unchanged"
        ),
        LookCode.TAKEN_NOW_DATA: gettext_noop(
            "the one look at the registered horizon, taken now (data up to {cutoff}): every later run "
            "returns it unchanged"
        ),
    }
)


@dataclass(frozen=True, kw_only=True)
class Assessment(Generic[R]):
    """A traffic layer on an experiment under its registered plan: the result, and the one look it is
    (stored earlier: `look` set, `new_look` False; taken now and still to store: `new_look` True)."""

    result: R
    look: LookRecord | None = None
    new_look: bool = False


def look_stored(plan: Mapping[str, Any], kind: type[R]) -> tuple[R, LookRecord] | None:
    """The plan's stored look, as the layer's types (None: none stored)."""
    look = plan.get("look")
    if not look:
        return None
    return TypeAdapter(kind).validate_python(look["result"]), TypeAdapter(LookRecord).validate_python(
        look["record"]
    )


def look_returned(result: R, record: LookRecord) -> R:
    """A stored look's result, saying that this run returns it."""
    note = reason(LookCode.RETURNED, at=moment(record.taken_at), run=record.gate_run)
    return replace(result, reasons=[*result.reasons, note])


def look_keep(
    *,
    layer: str,
    run: GateRun,
    experiment: Experiment,
    assessment: Assessment[R],
    blind: Callable[[R], R],
    counted_answers: bool,
) -> tuple[R, LookRecord | None, bool]:
    """The result, the look and whether `run` took it now. A look taken now is stored in the layer's plan once
    (`counted_answers`: it counted answers, not outcome data; for the reason): another run's look when
    that one was stored first, a blind `insufficient_data` when the plan was registered again meanwhile."""
    result: R = assessment.result
    look = assessment.look
    if not assessment.new_look or look is None:
        return result, look, False
    kept = experiment_look_store(
        experiment=experiment,
        layer=layer,
        sequence=int((getattr(experiment, PLAN_FIELDS[layer]) or {}).get("sequence", 1)),
        look={"record": to_json(look), "result": to_json(result)},
        actor=SystemActor(f"gate run {run.pk}"),
    )
    if kept is None:
        again = reason(LookCode.REGISTERED_AGAIN)
        return replace(blind(result), verdict=INSUFFICIENT, reasons=[again]), None, False
    stored = look_stored({"look": kept}, type(result))
    assert stored is not None
    if stored[1].gate_run != run.pk:  # another run took the look first: return it as stored
        return look_returned(*stored), stored[1], False
    taken = LookCode.TAKEN_NOW_ANSWERS if counted_answers else LookCode.TAKEN_NOW_DATA
    note = reason(taken, cutoff=moment(look.cutoff))
    return replace(result, reasons=[*result.reasons, note]), look, True

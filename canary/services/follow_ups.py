"""Follow-up labels on stored user turns: the trained detector (`engines.follow_up.classifier`) run
over the event store.

A user turn is judged once, against the previous user question and the assistant's answer in the
same session (turn indexes k − 2 and k − 1), and its kind is written to `TurnEvent.follow_up_kind`;
a turn the detector judged also gets `follow_up_language` (whose measured error rates layer 2
corrects for) and `follow_up_detector` (the artefact's version).
The first question of a session is `new`, and so is a turn after an answer that failed (a retry;
an answer the baseline gave as the candidate's fallback counts as an answer). A turn whose answer
has not arrived yet is left for a later pass, unless it is older than
EVALHUB_FOLLOW_UP_GRACE_SECONDS (then it is judged `new`: a follow-up of an answer nobody recorded
cannot be counted). Probe traffic is never judged.

It runs on the cpu queue every few seconds, and a gate run calls it before it counts, so layer 2
never reads a turn that could still be judged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from canary.models import Experiment, FollowUpDetectorConfig, TurnEvent
from engines.follow_up.classifier import TrainedDetector, detector_load, follow_ups_classify, pair_language
from engines.follow_up.detector import FollowUpThresholds, TurnPair
from engines.reasons import gettext_noop, reason, wordings_register
from registry.errors import ApplicationError
from registry.models import AuditAction
from registry.services.audit import audit_record

if TYPE_CHECKING:
    import numpy as np

NEW = "new"


class FollowUpsCode(StrEnum):
    THRESHOLDS_INVALID = "follow_ups.thresholds_invalid"


wordings_register(
    {FollowUpsCode.THRESHOLDS_INVALID: gettext_noop("Follow-up detector thresholds of '{family}': {problem}")}
)
Role = TurnEvent.Role


def _thresholds_parse(*, family: str, data: dict | None) -> FollowUpThresholds:
    try:
        return FollowUpThresholds.from_dict(data)
    except ValueError as exc:  # its message starts with the field at fault
        field = str(exc).split(":", 1)[0]
        raise ApplicationError(
            reason(FollowUpsCode.THRESHOLDS_INVALID, family=family, problem=str(exc)),
            fields={f"thresholds.{field}": [str(exc)]},
        ) from None


def follow_up_thresholds_get(*, family: str) -> FollowUpThresholds:
    config = FollowUpDetectorConfig.objects.filter(family=family).first()
    return _thresholds_parse(family=family, data=config.thresholds if config else None)


def follow_up_thresholds_set(*, family: str, thresholds: dict, actor) -> FollowUpDetectorConfig:
    """Set a family's detector thresholds (validated; audited). Turns judged before keep their kind."""
    parsed = _thresholds_parse(family=family, data=thresholds)
    config, _ = FollowUpDetectorConfig.objects.get_or_create(family=family)
    before = config.thresholds
    config.thresholds = thresholds
    config.save()
    audit_record(
        actor=actor,
        action=AuditAction.FOLLOW_UP_DETECTOR_THRESHOLDS_SET,
        target=config,
        before=before,
        after=parsed.as_dict(),
    )
    return config


def _unjudged(*, experiment: Experiment | None, until: datetime | None):
    turns = TurnEvent.objects.filter(role=Role.USER, follow_up_kind__isnull=True).exclude(
        source=TurnEvent.Source.PROBE
    )
    if experiment is not None:
        turns = turns.filter(experiment=experiment)
    if until is not None:
        turns = turns.filter(occurred_at__lte=until)
    return turns


def _context(turns: list[TurnEvent]) -> dict[tuple[int, str, int], TurnEvent]:
    """The two turns before each of these turns, by (experiment, session, turn index): one query
    on the session index for the whole batch."""
    wanted = {(t.experiment_id, t.session_id, t.turn_index - k) for t in turns for k in (1, 2)}
    rows = TurnEvent.objects.filter(
        experiment_id__in={t.experiment_id for t in turns},
        session_id__in={t.session_id for t in turns},
        turn_index__in={index for _, _, index in wanted if index >= 0},
    ).only("experiment_id", "session_id", "turn_index", "role", "text", "error", "fallback", "occurred_at")
    return {key: t for t in rows if (key := (t.experiment_id, t.session_id, t.turn_index)) in wanted}


def _by_rule(
    *, batch: list[TurnEvent], grace_before: datetime, waiting: set[int]
) -> tuple[list[TurnEvent], list[tuple[TurnEvent, TurnPair]]]:
    """The turns a rule judges (`new`: no answer before them, or a failed one), and the others paired
    with the question and answer before them for the detector. A turn whose answer is not stored yet
    waits (its pk added to `waiting`) until the grace period has passed, then it is `new`."""
    context = _context(batch)
    judged: list[TurnEvent] = []
    pairs: list[tuple[TurnEvent, TurnPair]] = []
    for turn in batch:
        answer = context.get((turn.experiment_id, turn.session_id, turn.turn_index - 1))
        question = context.get((turn.experiment_id, turn.session_id, turn.turn_index - 2))
        if answer is None or answer.role != Role.ASSISTANT:
            if turn.occurred_at < grace_before:
                turn.follow_up_kind = NEW
                judged.append(turn)
            else:
                waiting.add(turn.pk)
        elif answer.error and not answer.fallback:
            # The user got no answer: asking again is a retry, not a follow-up of an answer.
            turn.follow_up_kind = NEW
            judged.append(turn)
        else:
            gap = (turn.occurred_at - answer.occurred_at).total_seconds()
            pair = TurnPair(
                previous_question=question.text if question and question.role == Role.USER else "",
                previous_answer=answer.text,
                next_turn=turn.text,
                gap_seconds=max(0.0, gap),
            )
            pairs.append((turn, pair))
    return judged, pairs


def _by_detector(
    *,
    pairs: list[tuple[TurnEvent, TurnPair]],
    embed: Callable[[list[str]], np.ndarray],
    detector: TrainedDetector,
    thresholds: dict[int, FollowUpThresholds],
) -> list[TurnEvent]:
    """The paired turns judged by the detector under their family's thresholds (`thresholds` caches
    them by experiment)."""
    by_experiment: dict[int, list[tuple[TurnEvent, TurnPair]]] = {}
    for turn, pair in pairs:
        by_experiment.setdefault(turn.experiment_id, []).append((turn, pair))
    judged = []
    for experiment_id, group in by_experiment.items():
        if experiment_id not in thresholds:
            thresholds[experiment_id] = follow_up_thresholds_get(family=group[0][0].experiment.family)
        judgements = follow_ups_classify(
            pairs=[pair for _, pair in group],
            embed=embed,
            thresholds=thresholds[experiment_id],
            detector=detector,
        )
        for (turn, pair), judgement in zip(group, judgements, strict=True):
            turn.follow_up_kind = judgement.kind
            turn.follow_up_language = pair_language(pair)
            turn.follow_up_detector = detector.version
            judged.append(turn)
    return judged


def follow_ups_label(
    *,
    experiment: Experiment | None = None,
    until: datetime | None = None,
    batch_size: int = 256,
    max_seconds: float | None = None,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> dict[str, int]:
    """Judge the user turns not judged yet (of one experiment, up to `until`), oldest first.

    Returns counts by kind, plus `waiting` (turns whose answer is not stored yet)."""
    if embed is None:
        from engines.embeddings import sentence_embed

        embed = sentence_embed
    started = time.monotonic()
    detector = detector_load()
    grace_before = timezone.now() - timedelta(seconds=settings.EVALHUB_FOLLOW_UP_GRACE_SECONDS)
    thresholds: dict[int, FollowUpThresholds] = {}
    # A session's first question follows no answer: one UPDATE, no model.
    first = _unjudged(experiment=experiment, until=until).filter(turn_index=0).update(follow_up_kind=NEW)
    counts: dict[str, int] = {"waiting": 0, NEW: first}
    waiting: set[int] = set()
    while max_seconds is None or time.monotonic() - started < max_seconds:
        batch = list(
            _unjudged(experiment=experiment, until=until)
            .exclude(pk__in=waiting)
            .select_related("experiment")
            .order_by("occurred_at", "pk")[:batch_size]
        )
        if not batch:
            break
        judged, pairs = _by_rule(batch=batch, grace_before=grace_before, waiting=waiting)
        judged += _by_detector(pairs=pairs, embed=embed, detector=detector, thresholds=thresholds)
        TurnEvent.objects.bulk_update(judged, ["follow_up_kind", "follow_up_language", "follow_up_detector"])
        for turn in judged:
            counts[turn.follow_up_kind] = counts.get(turn.follow_up_kind, 0) + 1
    counts["waiting"] = len(waiting)
    return counts

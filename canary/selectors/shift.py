"""The live questions the suite-vs-live shift check compares with a suite: a bounded, seeded draw of an
experiment's user questions (both arms; stress probes excluded, and shadow answers never are turns)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime

from canary.models import Experiment, TurnEvent

READ_FACTOR = 4  # texts read: at most this many times the per-language sample
CHUNK = 1000


@dataclass(frozen=True, kw_only=True)
class LiveQuestions:
    """The drawn questions' texts (in id order) and how many user questions there were."""

    texts: list[str]
    total: int


def live_questions(
    *, experiment: Experiment, sample: int, seed: int, until: datetime | None = None
) -> LiveQuestions:
    """The experiment's user questions up to `until`: every id (one index scan), then the texts of a
    draw of at most READ_FACTOR × `sample` of them by `seed`, so a million turns cost one id list and
    a few thousand texts. Empty questions are left out."""
    turns = (
        TurnEvent.objects.filter(experiment=experiment, role=TurnEvent.Role.USER)
        .exclude(source=TurnEvent.Source.PROBE)
        .exclude(text="")
    )
    if until is not None:
        turns = turns.filter(occurred_at__lte=until)
    ids = list(turns.values_list("pk", flat=True))
    drawn = sorted(random.Random(seed).sample(ids, min(len(ids), READ_FACTOR * sample)))
    texts: list[str] = []
    for start in range(0, len(drawn), CHUNK):
        chunk = drawn[start : start + CHUNK]
        texts += TurnEvent.objects.filter(pk__in=chunk).order_by("pk").values_list("text", flat=True)
    return LiveQuestions(texts=texts, total=len(ids))

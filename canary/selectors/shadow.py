"""A shadow window: the experiment's mirrored questions, each the baseline's answer (the user's turn
event) paired with the candidate's `ShadowAnswer`, compared by `engines.stats.shadow`."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Max, Min

from canary.models import Experiment, ShadowAnswer, TurnEvent
from engines.backends.config import DEFAULT_LABEL_REGEX
from engines.scoring.answers import answer_label_split
from engines.stats.shadow import ShadowBars, ShadowComparison, ShadowPair, shadow_compare
from registry.models import ModelVersion

# The most recent pairs a comparison reads (chrF and the bootstrap run in Python): enough for the
# bars' precision, flat in cost however long the window runs.
SHADOW_SAMPLE = 2000


@dataclass(frozen=True, kw_only=True)
class ShadowWindow:
    """The window's comparison, its first and last mirror, and the candidate's median time to first
    text on streamed mirrors. Mirrors still queued or answering are not in it yet."""

    comparison: ShadowComparison
    first_at: datetime | None
    last_at: datetime | None
    candidate_first_token_ms: float | None  # median, streamed mirrors


def _pattern(version: ModelVersion) -> re.Pattern[str]:
    config = version.backend_config if isinstance(version.backend_config, dict) else {}
    return re.compile(config.get("label_regex") or DEFAULT_LABEL_REGEX)


def _pairs(experiment: Experiment) -> tuple[list[ShadowPair], list[float]]:
    """The latest pairs whose baseline answer is stored, and the mirrors' times to first text."""
    mirrors = list(
        ShadowAnswer.objects.filter(experiment=experiment, dropped=False)
        .order_by("-created_at", "-pk")
        .values("baseline_event_id", "text", "latency_ms", "first_token_ms", "error")[:SHADOW_SAMPLE]
    )
    answers = {
        row["event_id"]: row
        for row in TurnEvent.objects.filter(
            experiment=experiment,
            role=TurnEvent.Role.ASSISTANT,
            event_id__in=[m["baseline_event_id"] for m in mirrors],
        ).values("event_id", "text", "latency_ms", "error")
    }
    baseline_pattern, candidate_pattern = _pattern(experiment.baseline), _pattern(experiment.candidate)
    pairs, first_tokens = [], []
    for mirror in mirrors:
        answer = answers.get(mirror["baseline_event_id"])
        if answer is None:  # its turn event still on its way through the telemetry stream
            continue
        b_label, b_text = answer_label_split(content=answer["text"], pattern=baseline_pattern)
        c_label, c_text = answer_label_split(content=mirror["text"], pattern=candidate_pattern)
        pairs.append(
            ShadowPair(
                baseline_label=b_label,
                baseline_text=b_text,
                baseline_latency_ms=answer["latency_ms"],
                baseline_error=bool(answer["error"]),
                candidate_label=c_label,
                candidate_text=c_text,
                candidate_latency_ms=mirror["latency_ms"],
                candidate_error=bool(mirror["error"]),
            )
        )
        if mirror["first_token_ms"] is not None:
            first_tokens.append(mirror["first_token_ms"])
    return pairs, first_tokens


def shadow_window_compare(*, experiment: Experiment, bars: ShadowBars) -> ShadowWindow:
    """The experiment's shadow window so far, judged against `bars`."""
    rows = ShadowAnswer.objects.filter(experiment=experiment)
    span = rows.aggregate(first=Min("created_at"), last=Max("created_at"))
    pairs, first_tokens = _pairs(experiment)
    return ShadowWindow(
        comparison=shadow_compare(pairs=pairs, dropped=rows.filter(dropped=True).count(), bars=bars),
        first_at=span["first"],
        last_at=span["last"],
        candidate_first_token_ms=statistics.median(first_tokens) if first_tokens else None,
    )


def shadow_window_exists(*, experiment: Experiment) -> bool:
    return ShadowAnswer.objects.filter(experiment=experiment).exists()

"""A gate run as it goes, for the live page and the run API: each required layer's state and units
done of total, elapsed time and ETA, and for a queued run why it waits."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from gate.layers.registry import LAYERS, gate_policy_read
from gate.models import GateRun
from registry.dispatch import QUEUE_OF, Task

Status = GateRun.Status
WAITING, RUNNING, DONE = "waiting", "running", "done"


@dataclass(frozen=True, kw_only=True)
class LayerProgress:
    layer: str
    title: str
    state: str  # waiting, running, done
    done: int
    total: int  # units of model work; 0 for a traffic layer
    verdict: str | None


@dataclass(frozen=True, kw_only=True)
class GateRunLive:
    status: str
    progress: int
    verdict: str
    finished: bool
    layers: list[LayerProgress]
    elapsed_seconds: float | None
    eta_seconds: float | None
    queue: str
    runs_ahead: int | None  # runs before this one on its queue (queued runs only)
    waiting_reason: str


@dataclass(frozen=True)
class GateQueue:
    """The gate runs' queue at one moment: the runs running, and the queued ones in the order the
    workers take them (by id). One query, so a list of runs says where each waits at no cost per row."""

    running: frozenset[int]
    queued: tuple[int, ...]

    def ahead_of(self, run: GateRun) -> int:
        """Runs the gpu worker takes before this one: those running, and those queued earlier."""
        return len(self.running - {run.pk}) + bisect.bisect_left(self.queued, run.pk)


def gate_queue_snapshot() -> GateQueue:
    active = GateRun.objects.filter(status__in=(Status.RUNNING, Status.QUEUED))
    rows = list(active.values_list("pk", "status"))
    return GateQueue(
        running=frozenset(pk for pk, status in rows if status == Status.RUNNING),
        queued=tuple(sorted(pk for pk, status in rows if status == Status.QUEUED)),
    )


def _elapsed(run: GateRun, now: datetime) -> float | None:
    if run.started_at is None:
        return None
    return round(((run.finished_at or now) - run.started_at).total_seconds(), 1)


def _eta(run: GateRun, detail: dict, now: datetime) -> float | None:
    """The worker's ETA at its last report, less the time since."""
    eta = detail.get("eta_seconds")
    if run.status != Status.RUNNING or eta is None or run.heartbeat_at is None:
        return None
    return round(max(0.0, eta - (now - run.heartbeat_at).total_seconds()), 1)


def gate_run_live(
    *, run: GateRun, now: datetime | None = None, waiting: GateQueue | None = None
) -> GateRunLive:
    """The run as it goes. Its stored layers are read from `run.layers.all()` (prefetch them for a
    list); `waiting` (one `gate_queue_snapshot` for a whole list) says where a queued run waits."""
    now = now or timezone.now()
    policy = gate_policy_read(run.policy_config).config
    stored = {result.layer: result.verdict for result in run.layers.all()}
    detail = run.progress_detail or {}
    reported = detail.get("layers", {})
    layers = []
    for layer in LAYERS:
        if not policy.requires(layer.name):
            continue
        counts = reported.get(layer.name, {})
        total, done = int(counts.get("total", 0)), int(counts.get("done", 0))
        verdict = stored.get(layer.name)
        if verdict is not None and verdict != GateRun.Verdict.PENDING:
            state, done = DONE, total
        elif run.status == Status.RUNNING and detail.get("current") == layer.name:
            state = RUNNING
        else:
            state = WAITING
        layers.append(
            LayerProgress(
                layer=layer.name, title=str(layer.title), state=state, done=done, total=total, verdict=verdict
            )
        )
    queue = QUEUE_OF[Task.GATE_RUN_EXECUTE]
    ahead = None
    if run.status == Status.QUEUED:
        ahead = (waiting or gate_queue_snapshot()).ahead_of(run)
    reason = ""
    if ahead is not None:
        reason = (
            ngettext(
                "%(count)d run ahead on the %(queue)s queue",
                "%(count)d runs ahead on the %(queue)s queue",
                ahead,
            )
            % {"count": ahead, "queue": queue}
            if ahead
            else _("next on the %(queue)s queue: waiting for a %(queue)s worker to take it")
            % {"queue": queue}
        )
    return GateRunLive(
        status=run.status,
        progress=run.progress,
        verdict=run.verdict,
        finished=run.is_finished,
        layers=layers,
        elapsed_seconds=_elapsed(run, now),
        eta_seconds=_eta(run, detail, now),
        queue=str(queue),
        runs_ahead=ahead,
        waiting_reason=reason,
    )

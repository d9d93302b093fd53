"""A gate run as it goes, for the live page and the run API: each required layer's state and units
done of total, elapsed time and ETA, and where it is: running on which worker, waiting behind other
runs, or waiting on a queue no live worker consumes."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from gate.layers.base import Step, worker_hostname
from gate.layers.registry import gate_layers, gate_policy_read
from gate.models import AdversarialSet, GateRun
from registry.dispatch import QUEUE_OF, Task
from registry.selectors.workers import queue_workers_get

Status = GateRun.Status
WAITING, RUNNING, DONE = "waiting", "running", "done"


class Where:
    """Where a run is, as a code beside its sentence (`GateRunLive.where`)."""

    FINISHED = "finished"
    RUNNING = "running"  # on `worker`, which reported within the stale limit
    SILENT = "silent"  # running, but its worker has not reported within the stale limit
    BEHIND = "behind"  # queued behind `runs_ahead` runs
    NEXT = "next"  # queued, nothing ahead
    NO_WORKER = "no_worker"  # queued on a queue that no live worker consumes
    PARKED = "parked"  # queued without a worker until another worker's attack for it ends


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
    where: str  # a Where code
    worker: str  # the worker running it (Celery's hostname), "" when none
    queue_workers: list[str] | None  # a queued run's queue's live workers; None when unknown
    waiting_reason: str  # `where` in the reader's language


@dataclass(frozen=True)
class GateQueue:
    """The gate runs' queue at one moment: the runs running, and the queued ones in the order the
    workers take them (by id). One query, so a list of runs says where each waits at no cost per row."""

    running: frozenset[int]
    queued: tuple[int, ...]
    reporting: frozenset[str]  # workers (Celery hostnames) of running runs that report: alive, if busy

    def ahead_of(self, run: GateRun) -> int:
        """Runs the gpu worker takes before this one: those running, and those queued earlier."""
        return len(self.running - {run.pk}) + bisect.bisect_left(self.queued, run.pk)


def _reporting(run_heartbeat: datetime | None, now: datetime) -> bool:
    stale = timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS)
    return run_heartbeat is not None and now - run_heartbeat < stale


def gate_queue_snapshot(*, now: datetime | None = None) -> GateQueue:
    now = now or timezone.now()
    active = GateRun.objects.filter(status__in=(Status.RUNNING, Status.QUEUED))
    rows = list(active.values_list("pk", "status", "worker", "heartbeat_at"))
    running = [(pk, worker, beat) for pk, status, worker, beat in rows if status == Status.RUNNING]
    # A worker attacking a run's set for it (no run of its own) is as alive as one running a run.
    holders = AdversarialSet.objects.exclude(worker="").values_list("worker", "heartbeat_at")
    beating = [(w, beat) for _, w, beat in running if w] + list(holders)
    return GateQueue(
        running=frozenset(pk for pk, _, _ in running),
        queued=tuple(sorted(pk for pk, status, _, _ in rows if status == Status.QUEUED)),
        reporting=frozenset(worker_hostname(w) for w, beat in beating if _reporting(beat, now)),
    )


def _elapsed(run: GateRun, now: datetime) -> float | None:
    if run.started_at is None:
        return None
    return round(((run.finished_at or now) - run.started_at).total_seconds(), 1)


def _eta(run: GateRun, detail: dict, now: datetime) -> float | None:
    """The worker's ETA at its last report, less the time since; None (unknown, not 0) when the
    worker has not estimated yet or the work takes longer than it estimated."""
    eta = detail.get("eta_seconds")
    if run.status != Status.RUNNING or eta is None or run.heartbeat_at is None:
        return None
    left = eta - (now - run.heartbeat_at).total_seconds()
    return round(left, 1) if left > 0 else None


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
    for layer in gate_layers():
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
    ahead, live = None, None
    worker = worker_hostname(run.worker) if run.status == Status.RUNNING else ""
    if run.is_finished:
        where = Where.FINISHED
    elif run.status == Status.RUNNING:
        where = Where.RUNNING if _reporting(run.heartbeat_at, now) else Where.SILENT
    else:
        snapshot = waiting or gate_queue_snapshot(now=now)
        ahead = snapshot.ahead_of(run)
        consumers = queue_workers_get().consumers(queue)
        if consumers is not None or snapshot.reporting:
            live = sorted({*(consumers or ()), *snapshot.reporting})
        where = Where.NO_WORKER if live == [] else Where.BEHIND if ahead else Where.NEXT
        if (detail.get("activity") or {}).get("set") is not None:
            where = Where.PARKED
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
        where=where,
        worker=worker,
        queue_workers=live,
        waiting_reason=_where_text(where, queue=queue, ahead=ahead or 0, worker=worker, run=run, now=now),
    )


def _running_text(*, worker: str, activity: dict) -> str:
    """What the worker running the run does now, from its last report."""
    words = {"worker": worker, "version": activity.get("version", ""), "other": activity.get("worker", "")}
    step = activity.get("step")
    if step == Step.ATTACK:
        return _("attacking %(version)s on worker %(worker)s") % words
    if step == Step.WAIT:
        text = _("on worker %(worker)s, waiting for worker %(other)s, which attacks %(version)s for this run")
        return text % words
    if step == Step.ANSWER:
        return _("%(version)s answering the attacked texts on worker %(worker)s") % words
    return _("running on worker %(worker)s") % words


def _where_text(where: str, *, queue: str, ahead: int, worker: str, run: GateRun, now: datetime) -> str:
    if where == Where.RUNNING:
        return _running_text(worker=worker, activity=(run.progress_detail or {}).get("activity") or {})
    if where == Where.SILENT:
        silent = (now - run.heartbeat_at).total_seconds() if run.heartbeat_at else 0
        return _("no report from worker %(worker)s for %(seconds)d s: the reaper requeues the run") % {
            "worker": worker,
            "seconds": silent,
        }
    if where == Where.PARKED:
        activity = (run.progress_detail or {}).get("activity") or {}
        text = _(
            "parked until worker %(other)s has attacked %(version)s for this run (holding no gpu worker)"
        )
        return text % {"other": activity.get("worker", ""), "version": activity.get("version", "")}
    if where == Where.NO_WORKER:
        return _("no worker is consuming the %(queue)s queue: start one, or see the worker's log") % {
            "queue": queue
        }
    if where == Where.BEHIND:
        return ngettext(
            "waiting in the %(queue)s queue behind %(count)d run",
            "waiting in the %(queue)s queue behind %(count)d runs",
            ahead,
        ) % {"count": ahead, "queue": queue}
    if where == Where.NEXT:
        return _("next on the %(queue)s queue: waiting for a %(queue)s worker to take it") % {"queue": queue}
    return ""

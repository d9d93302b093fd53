"""Shadow traffic: questions mirrored to the candidate in the background while every user is on the
baseline (the ramp plan's "shadow" step; Flagger's `mirror`, Argo Rollouts' `setMirrorRoute`).

The proxy offers a mirror once the user's answer is complete and recorded (`shadow_offer`): the
baseline's answer is the user's, exactly as without shadowing. The mirror is sent as the user's
request was (plain or streamed) by a bounded pool of background threads (`EVALHUB_SHADOW_WORKERS`)
fed by a bounded queue (`EVALHUB_SHADOW_QUEUE`): when the queue is full the mirror is dropped and
the drop is stored, the request never waits. The candidate's answer, its latency, time to first text,
tokens and error are stored as a `ShadowAnswer`, never as a turn event, so no user-traffic figure
counts it.

Which questions: `shadow_percent` of them, chosen by a hash of the experiment's salt and the
question's event id (random across questions, the same choice for every retry of one question that
carries an Idempotency-Key). Only baseline answers are mirrored (a QA token that forces the candidate
is not shadow traffic), and only while the experiment runs at its shadow step.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from canary.models import Experiment, ShadowAnswer
from engines.input_checks import text_storable
from engines.routing import BASELINE, bucket_of, share_to_buckets

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class MirrorResult:
    """What the candidate gave a mirrored question."""

    text: str
    latency_ms: float
    error: str = ""
    streamed: bool = False
    first_token_ms: float | None = None
    output_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class _Mirror:
    experiment_id: int
    version_id: int
    event_id: str
    ask: Callable[[], MirrorResult]


# The process's pool: its settings (workers, queue size) and its queue.
_pool: tuple[tuple[int, int], queue.Queue[_Mirror]] | None = None
_lock = threading.Lock()


def _work(jobs: queue.Queue[_Mirror]) -> None:
    while True:
        job = jobs.get()
        try:
            _mirror_run(job)
        except Exception:  # a bug in one mirror must not stop the pool
            logger.exception("shadow mirror %s failed", job.event_id)
        finally:
            connection.close()  # this thread's own connection: none is held between mirrors
            jobs.task_done()


def _jobs() -> queue.Queue[_Mirror]:
    """The process's queue, its threads started on first use (and again when the settings change: the
    old pool's threads finish what it holds)."""
    global _pool
    sizes = (settings.EVALHUB_SHADOW_WORKERS, settings.EVALHUB_SHADOW_QUEUE)
    with _lock:
        if _pool is None or _pool[0] != sizes:
            jobs: queue.Queue[_Mirror] = queue.Queue(maxsize=sizes[1])
            for index in range(sizes[0]):
                threading.Thread(target=_work, args=(jobs,), name=f"shadow-{index}", daemon=True).start()
            if _pool is not None:
                _retired.append(_pool[1])
            _pool = (sizes, jobs)
        return _pool[1]


# Queues of earlier pools, still joined by `shadow_queue_join`.
_retired: list[queue.Queue[_Mirror]] = []


def _mirror_run(job: _Mirror) -> None:
    result = job.ask()
    ShadowAnswer.objects.bulk_create(
        [
            ShadowAnswer(
                experiment_id=job.experiment_id,
                baseline_event_id=job.event_id,
                version_id=job.version_id,
                streamed=result.streamed,
                text=text_storable(result.text),
                latency_ms=result.latency_ms,
                first_token_ms=result.first_token_ms,
                output_tokens=result.output_tokens,
                error=text_storable(result.error),
            )
        ],
        ignore_conflicts=True,  # a retried question is mirrored once
    )


def shadow_chosen(*, experiment: Experiment, arm: str, event: str) -> bool:
    """Whether this answered question is mirrored (see the module's docstring)."""
    if arm != BASELINE or experiment.status != Experiment.Status.RUNNING or not experiment.in_shadow:
        return False
    share = share_to_buckets(experiment.shadow_percent)
    return bucket_of(salt=f"{experiment.salt}:shadow", unit_id=event) < share


def shadow_offer(*, experiment: Experiment, arm: str, event: str, ask: Callable[[], MirrorResult]) -> bool:
    """Queue `ask` (the candidate's answer to the question whose answer events share `event`) when the
    question is chosen; never waits. A full queue drops it and stores the drop. True when queued."""
    if not shadow_chosen(experiment=experiment, arm=arm, event=event):
        return False
    job = _Mirror(
        experiment_id=experiment.pk, version_id=experiment.candidate_id, event_id=f"px-{event}-a", ask=ask
    )
    try:
        _jobs().put_nowait(job)
    except queue.Full:
        ShadowAnswer.objects.bulk_create(
            [
                ShadowAnswer(
                    experiment_id=job.experiment_id,
                    baseline_event_id=job.event_id,
                    version_id=job.version_id,
                    dropped=True,
                )
            ],
            ignore_conflicts=True,
        )
        return False
    return True


def shadow_queue_join() -> None:
    """Wait until every queued mirror is stored (tests, the demo's filler, a clean shutdown)."""
    for jobs in [*_retired, *([_pool[1]] if _pool else [])]:
        jobs.join()

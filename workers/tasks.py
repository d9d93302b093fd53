"""Celery tasks: thin wrappers that take an id and call a service.

Model tasks acknowledge late and are rejected (so redelivered) when the worker process dies;
only transient errors (database blips, an endpoint that is down) are retried, with backoff.
Everything else ends the run through a service, never leaving it "running".
"""

from __future__ import annotations

import logging
import socket

import httpx
from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError

from canary.services.analysis import experiments_analyze
from canary.services.follow_ups import follow_ups_label
from canary.services.probes import probe_run_execute_by_id, probe_runs_due
from canary.services.telemetry import turn_stream_drain
from engines.backends import BackendError
from engines.reasons import Reason, reason
from gate.models import GateRun
from gate.services.adversarial import adversarial_set_build
from gate.services.gate_runs import (
    ClaimLost,
    GateRunsCode,
    gate_run_execute,
    gate_run_fail,
    gate_run_reap_stale,
    gate_run_release,
)
from registry.dispatch import Task
from registry.services.webhooks import webhook_deliver
from workers.celery import app

logger = logging.getLogger(__name__)


class TransientModelError(Exception):
    pass


@app.task(
    name=Task.GATE_RUN_EXECUTE,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(TransientModelError, OperationalError, InterfaceError),
    retry_backoff=5,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=5,
)
def gate_run_execute_task(self, gate_run_id: int) -> None:

    worker = f"{socket.gethostname()}:{self.request.hostname or ''}:{self.request.id}"
    try:
        gate_run_execute(gate_run_id=gate_run_id, worker=worker)
    except ClaimLost as exc:
        logger.warning("%s", exc)
    except BackendError as exc:  # transient: a non-transient one is handled by the service
        if self.request.retries >= self.max_retries:
            gave_up = reason(GateRunsCode.GAVE_UP, why=exc.reason)
            gate_run_fail(gate_run_id=gate_run_id, status=GateRun.Status.ERROR, reason=gave_up)
            return
        _release(gate_run_id, worker, exc.reason)
        raise TransientModelError(str(exc)) from exc
    except SoftTimeLimitExceeded:
        time_limit = reason(GateRunsCode.TIME_LIMIT)
        gate_run_fail(gate_run_id=gate_run_id, status=GateRun.Status.ERROR, reason=time_limit)
    except (OperationalError, InterfaceError) as exc:
        _release(gate_run_id, worker, f"database: {exception_text(exc)}")
        raise
    except Exception as exc:
        logger.exception("gate run %s crashed", gate_run_id)
        gate_run_fail(gate_run_id=gate_run_id, status=GateRun.Status.ERROR, reason=exception_text(exc))


@app.task(
    name=Task.ADVERSARIAL_SET_BUILD,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=5,
)
def adversarial_set_build_task(self, set_id: int, chunk_size: int) -> bool:
    """Attack one version of a gate run's layer 1 beside the run's own worker (a lost lease or a
    model error leaves the rest to that worker, which resumes the set)."""
    worker = f"{socket.gethostname()}:{self.request.hostname or ''}:{self.request.id}"
    try:
        return adversarial_set_build(set_id=set_id, chunk_size=chunk_size, worker=worker)
    except (ClaimLost, BackendError) as exc:
        logger.warning("adversarial set %s left to the gate run's worker: %s", set_id, exc)
        return False


def exception_text(exc: BaseException) -> str:
    """The exception's type and text (its type alone when it has none): what a run's error names."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _release(gate_run_id: int, worker: str, error: Reason | str) -> None:
    """Put a run back to queued so the retry can claim it at once; `error` says what failed."""

    try:
        gate_run_release(gate_run_id=gate_run_id, worker=worker, error=error)
    except Exception:
        logger.exception("could not release gate run %s; the reaper will", gate_run_id)


@app.task(name=Task.GATE_RUN_REAP_STALE)
def gate_run_reap_stale_task() -> dict:

    return gate_run_reap_stale()


@app.task(name=Task.TURN_STREAM_DRAIN)
def turn_stream_drain_task() -> int:
    """Move the canary proxy's turn events from the Redis stream into the database."""

    return turn_stream_drain()


@app.task(name=Task.FOLLOW_UPS_LABEL, soft_time_limit=120, time_limit=150)
def follow_ups_label_task() -> dict:
    """Judge the user turns not judged yet (follow-up, deepening or new) for gate layer 2."""

    return follow_ups_label(max_seconds=60)


@app.task(
    name=Task.WEBHOOK_DELIVER,
    autoretry_for=(httpx.HTTPError,),
    retry_backoff=5,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=8,
)
def webhook_deliver_task(event: str, body: str) -> int:
    """POST a signed webhook; connection failures and HTTP errors are retried with backoff."""

    return webhook_deliver(event=event, body=body)


@app.task(name=Task.CANARY_ANALYSIS, soft_time_limit=600, time_limit=660)
def canary_analysis_task() -> int:
    """Analyse every running experiment; a failing one rolls back."""

    return len(experiments_analyze())


@app.task(name=Task.PROBE_RUNS, soft_time_limit=1800, time_limit=1860)
def probe_runs_task(experiment_id: int | None = None, probe_set_id: int | None = None) -> int:
    """One probe set through one experiment's versions, or (no arguments) every one that is due."""
    if experiment_id is None or probe_set_id is None:
        return len(probe_runs_due())
    probe_run_execute_by_id(experiment_id=experiment_id, probe_set_id=probe_set_id)
    return 1

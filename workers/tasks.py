"""Celery tasks: thin wrappers that take an id and call a service.

Model tasks acknowledge late and are rejected (so redelivered) when the worker process dies;
only transient errors (database blips, an endpoint that is down) are retried, with backoff.
Everything else ends the run through a service, never leaving it "running".
"""

from __future__ import annotations

import logging
import socket

from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError

from workers.celery import app

logger = logging.getLogger(__name__)


class TransientModelError(Exception):
    pass


@app.task(
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
    from evalhub.models import GateRun
    from evalhub.services.gate_runs import ClaimLost, gate_run_execute, gate_run_fail
    from workers.backends import BackendError

    worker = f"{socket.gethostname()}:{self.request.hostname or ''}:{self.request.id}"
    try:
        gate_run_execute(gate_run_id=gate_run_id, worker=worker)
    except ClaimLost as exc:
        logger.warning("%s", exc)
    except BackendError as exc:  # transient: a non-transient one is handled by the service
        if self.request.retries >= self.max_retries:
            gate_run_fail(gate_run_id=gate_run_id, status=GateRun.Status.ERROR, reason=f"gave up: {exc}")
            return
        _release(gate_run_id, worker)
        raise TransientModelError(str(exc)) from exc
    except SoftTimeLimitExceeded:
        gate_run_fail(gate_run_id=gate_run_id, status=GateRun.Status.ERROR, reason="task time limit exceeded")
    except (OperationalError, InterfaceError):
        _release(gate_run_id, worker)
        raise
    except Exception as exc:
        logger.exception("gate run %s crashed", gate_run_id)
        gate_run_fail(
            gate_run_id=gate_run_id, status=GateRun.Status.ERROR, reason=f"{type(exc).__name__}: {exc}"
        )


def _release(gate_run_id: int, worker: str) -> None:
    """Put a run back to queued so the retry can claim it at once."""
    from evalhub.services.gate_runs import gate_run_release

    try:
        gate_run_release(gate_run_id=gate_run_id, worker=worker)
    except Exception:
        logger.exception("could not release gate run %s; the reaper will", gate_run_id)


@app.task
def gate_run_reap_stale_task() -> dict:
    from evalhub.services.gate_runs import gate_run_reap_stale

    return gate_run_reap_stale()

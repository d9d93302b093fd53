"""The Celery app and the catalogue of its tasks: names, queues and the beat schedule.

Services enqueue work here by task name (`task_enqueue`), so they never import the task
modules: `workers.tasks` imports the services, not the other way round. Configured once from
Django settings (CELERY_* names); the worker process is started with `celery -A workers`.
"""

from __future__ import annotations

import logging
import os
from enum import StrEnum

from celery import Celery
from django.db import transaction
from kombu import Exchange
from kombu import Queue as BrokerQueue

logger = logging.getLogger(__name__)


class Queue(StrEnum):
    # Model work (inference, perturbation, attacks, BERTScore), concurrency 1 per device.
    GPU = "gpu"
    # Statistics, aggregation, telemetry, the detector, webhooks and housekeeping.
    CPU = "cpu"


class Task(StrEnum):
    """Task names; `workers.tasks` registers a function under each."""

    GATE_RUN_EXECUTE = "workers.tasks.gate_run_execute_task"
    ADVERSARIAL_SET_BUILD = "workers.tasks.adversarial_set_build_task"
    GATE_RUN_REAP_STALE = "workers.tasks.gate_run_reap_stale_task"
    TURN_STREAM_DRAIN = "workers.tasks.turn_stream_drain_task"
    FOLLOW_UPS_LABEL = "workers.tasks.follow_ups_label_task"
    WEBHOOK_DELIVER = "workers.tasks.webhook_deliver_task"
    CANARY_ANALYSIS = "workers.tasks.canary_analysis_task"
    PROBE_RUNS = "workers.tasks.probe_runs_task"


QUEUE_OF = {
    Task.GATE_RUN_EXECUTE: Queue.GPU,
    Task.ADVERSARIAL_SET_BUILD: Queue.GPU,
    Task.GATE_RUN_REAP_STALE: Queue.CPU,
    Task.TURN_STREAM_DRAIN: Queue.CPU,
    Task.FOLLOW_UPS_LABEL: Queue.CPU,
    Task.WEBHOOK_DELIVER: Queue.CPU,
    Task.CANARY_ANALYSIS: Queue.CPU,
    Task.PROBE_RUNS: Queue.CPU,
}

app = Celery("evalhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each queue on its own exchange and key: a bare Queue("gpu") would bind to the default
# exchange and key ("cpu") and receive every cpu message too.
app.conf.task_queues = tuple(
    BrokerQueue(q.value, Exchange(q.value, type="direct"), routing_key=q.value) for q in Queue
)
app.conf.task_routes = {task.value: {"queue": queue.value} for task, queue in QUEUE_OF.items()}


def _every(variable: str, default: float) -> float:
    return float(os.environ.get(variable, default))


app.conf.beat_schedule = {
    "gate-run-reap-stale": {
        "task": Task.GATE_RUN_REAP_STALE.value,
        "schedule": _every("EVALHUB_REAPER_INTERVAL_SECONDS", 60),
    },
    "canary-turn-stream-drain": {
        "task": Task.TURN_STREAM_DRAIN.value,
        "schedule": _every("EVALHUB_TELEMETRY_DRAIN_SECONDS", 2),
        "options": {"expires": 10},
    },
    "canary-follow-ups-label": {
        "task": Task.FOLLOW_UPS_LABEL.value,
        "schedule": _every("EVALHUB_FOLLOW_UP_LABEL_SECONDS", 30),
        "options": {"expires": 60},
    },
    "canary-analysis": {
        "task": Task.CANARY_ANALYSIS.value,
        "schedule": _every("EVALHUB_CANARY_ANALYSIS_SECONDS", 300),
    },
    "canary-probe-runs": {
        "task": Task.PROBE_RUNS.value,
        "schedule": _every("EVALHUB_PROBE_INTERVAL_SECONDS", 900),
    },
}
# By name: the worker imports the task module; nothing on this floor does.
app.conf.include = ["workers.tasks"]


def task_send(task: Task, *args: object) -> None:
    """Hand `task(*args)` to the broker now. Raises when the broker cannot take it."""
    app.send_task(task.value, args=list(args))


def task_enqueue(task: Task, *args: object) -> None:
    """Send `task(*args)` once the current transaction commits (at once outside one), so a worker
    never sees a row that is not there yet."""
    transaction.on_commit(lambda: task_send(task, *args))

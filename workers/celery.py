"""The Celery app. Configured once from Django settings (CELERY_* names).

Queues: `gpu` takes all model work (inference, perturbation, BERTScore) and runs with
concurrency 1 per device; `cpu` takes statistics, aggregation and housekeeping.
"""

import os

from celery import Celery
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings.local")
# No model hub here or in most deployments: fail fast on a missing file instead of hanging.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

app = Celery("evalhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each queue on its own exchange and key: a bare Queue("gpu") would bind to the default
# exchange and key ("cpu") and receive every cpu message too.
app.conf.task_queues = tuple(
    Queue(name, Exchange(name, type="direct"), routing_key=name) for name in ("gpu", "cpu")
)
app.conf.task_routes = {
    "workers.tasks.gate_run_execute_task": {"queue": "gpu"},
    "workers.tasks.gate_run_reap_stale_task": {"queue": "cpu"},
    "workers.tasks.turn_stream_drain_task": {"queue": "cpu"},
    "workers.tasks.webhook_deliver_task": {"queue": "cpu"},
    "workers.tasks.canary_analysis_task": {"queue": "cpu"},
    "workers.tasks.probe_runs_task": {"queue": "cpu"},
    "workers.tasks.followups_label_task": {"queue": "cpu"},
}
app.conf.beat_schedule = {
    "gate-run-reap-stale": {
        "task": "workers.tasks.gate_run_reap_stale_task",
        "schedule": float(os.environ.get("EVALHUB_REAPER_INTERVAL_SECONDS", 60)),
    },
    "canary-turn-stream-drain": {
        "task": "workers.tasks.turn_stream_drain_task",
        "schedule": float(os.environ.get("EVALHUB_TELEMETRY_DRAIN_SECONDS", 2)),
        "options": {"expires": 10},
    },
    "canary-followups-label": {
        "task": "workers.tasks.followups_label_task",
        "schedule": float(os.environ.get("EVALHUB_FOLLOWUP_LABEL_SECONDS", 30)),
        "options": {"expires": 60},
    },
    "canary-analysis": {
        "task": "workers.tasks.canary_analysis_task",
        "schedule": float(os.environ.get("EVALHUB_CANARY_ANALYSIS_SECONDS", 300)),
    },
    "canary-probe-runs": {
        "task": "workers.tasks.probe_runs_task",
        "schedule": float(os.environ.get("EVALHUB_PROBE_INTERVAL_SECONDS", 900)),
    },
}
app.conf.include = ["workers.tasks"]

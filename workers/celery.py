"""The worker process: `celery -A workers worker -Q gpu` (model work) and `-Q cpu` (the rest).

The Celery app, its queues, routes and beat schedule are defined once in `registry.dispatch`,
where the services enqueue by task name; this package only adds the process's defaults and the
thin task functions (`workers.tasks`).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings.local")
# No model hub here or in most deployments: fail fast on a missing file instead of hanging.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from registry.dispatch import app

__all__ = ["app"]

"""EvalHub's Celery workers: `celery -A workers worker -Q gpu,cpu`."""

from .celery import app

__all__ = ["app"]

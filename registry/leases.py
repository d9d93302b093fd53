"""Leases on rows that one worker at a time works on (gate runs, adversarial sets): a row names its
`worker` and when it last beat (`heartbeat_at`); a holder that stopped beating for
EVALHUB_GATE_RUN_STALE_SECONDS has lost it. The one place that says when a lease is stale."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q


def lease_stale_before(*, now: datetime) -> datetime:
    """A holder whose last beat is older than this has stopped: its lease may be taken."""
    return now - timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS)


def lease_lapsed(*, now: datetime) -> Q:
    """Rows whose holder stopped beating."""
    return Q(heartbeat_at__lt=lease_stale_before(now=now))


def lease_takeable(*, worker: str, now: datetime) -> Q:
    """Rows whose lease `worker` may take: held by nobody, by `worker` already, or by a holder that
    stopped beating (or never beat)."""
    return Q(worker="") | Q(worker=worker) | lease_lapsed(now=now) | Q(heartbeat_at=None)

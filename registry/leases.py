"""Leases on rows that one worker at a time works on (gate runs, adversarial sets): a row names its
`worker` and when it last beat (`heartbeat_at`); a holder that stopped beating for
EVALHUB_GATE_RUN_STALE_SECONDS has lost it. The one place that says when a lease is stale, and the
keeper that beats a held lease by time (`LeaseKeeper`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q

logger = logging.getLogger(__name__)


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


def lease_beat_seconds() -> float:
    """How often a holder beats: six beats in each stale window, so a slow beat or two (a loaded
    machine, a busy database) never lets a live holder's lease lapse."""
    return max(0.05, settings.EVALHUB_GATE_RUN_STALE_SECONDS / 6)


class LeaseKeeper:
    """Beats a lease on a thread of its own, by time, while the work it covers runs: a model call or
    a chunk of attacks that takes longer than the stale window never makes its live worker look dead.
    `beat()` renews the lease and returns False once the row is no longer held (taken over,
    cancelled, finished): the keeper then stops and `lost` is set. A database error skips a beat."""

    def __init__(self, *, beat: Callable[[], bool], name: str):
        self._beat, self._stop = beat, threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease {name}", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.wait(lease_beat_seconds()):
                try:
                    held = self._beat()
                except DatabaseError:
                    logger.warning("%s: a beat failed, the next retries", self._thread.name, exc_info=True)
                    continue
                if not held:
                    self.lost.set()
                    return
        finally:
            connection.close()  # this thread's own connection

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

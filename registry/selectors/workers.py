"""Which queues have a live Celery worker, from the workers' own answer to a broadcast
(`inspect().active_queues()`), so a page can say "no worker consumes the gpu queue" instead of
"waiting". It works on every broker Celery broadcasts on (Redis; the filesystem one through its
control folder). The answer is cached for a few seconds, so at most one page in that while waits
for the replies (the inspection waits its whole timeout: it cannot know how many workers exist).

A worker that misses the timeout (a machine at full load) is absent from the answer; callers that
know better (a gate run with a fresh heartbeat) count that worker too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from registry.dispatch import app

logger = logging.getLogger(__name__)

CACHE_KEY = "evalhub:queue-workers"
CACHE_SECONDS = 10

# The reply of `inspect().active_queues()`: {worker hostname: [queue as kombu's Queue.as_dict]}, or
# None when no worker answered.
ActiveQueues = dict[str, list[dict]] | None


@dataclass(frozen=True, kw_only=True)
class QueueWorkers:
    asked: bool  # False: the workers could not be asked (no broker, or asking is off); nothing known
    by_queue: dict[str, tuple[str, ...]]  # queue name: the hostnames of the workers consuming it

    def consumers(self, queue: str) -> tuple[str, ...] | None:
        """The workers consuming `queue`; None when that is unknown."""
        return self.by_queue.get(queue, ()) if self.asked else None


UNKNOWN = QueueWorkers(asked=False, by_queue={})


def queue_workers_parse(reply: ActiveQueues) -> QueueWorkers:
    by_queue: dict[str, list[str]] = {}
    for hostname, queues in sorted((reply or {}).items()):
        for queue in queues or ():
            if isinstance(queue, dict) and queue.get("name"):
                by_queue.setdefault(str(queue["name"]), []).append(hostname)
    return QueueWorkers(asked=True, by_queue={name: tuple(hosts) for name, hosts in by_queue.items()})


def _active_queues() -> ActiveQueues:
    timeout = settings.EVALHUB_WORKER_INSPECT_SECONDS
    return app.control.inspect(timeout=timeout).active_queues()


def queue_workers_get(*, inspect: Callable[[], ActiveQueues] | None = None) -> QueueWorkers:
    """The queues' live workers now (cached for CACHE_SECONDS, an unknown answer too, so a broker that
    is down is not asked again for every run on a page). `inspect` stands in for the broadcast."""
    cached = cache.get(CACHE_KEY)
    if cached is not None:
        return QueueWorkers(asked=cached["asked"], by_queue=cached["by_queue"])
    if inspect is None and not settings.EVALHUB_WORKER_INSPECT_SECONDS:
        return UNKNOWN
    try:
        found = queue_workers_parse((inspect or _active_queues)())
    except Exception:  # a broker that is down or cannot broadcast: say nothing rather than "absent"
        logger.warning("could not ask the workers which queues they consume", exc_info=True)
        found = UNKNOWN
    cache.set(CACHE_KEY, {"asked": found.asked, "by_queue": found.by_queue}, CACHE_SECONDS)
    return found

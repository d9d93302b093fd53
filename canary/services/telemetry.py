"""The proxy's own turn events, recorded off the response path.

With Redis (`EVALHUB_TELEMETRY_REDIS_URL`, by default the Celery broker when it is Redis), the
proxy appends each event to a Redis stream before it answers (one XADD, well under a millisecond)
and a `cpu` worker drains the stream in bulk: read as a consumer group, insert, then acknowledge.
An event is acknowledged only after its rows are committed, so a worker that dies mid-drain leaves
its events pending and the next drain claims them; a web process that restarts has already
handed every answered request's events to Redis. Inserts ignore (experiment, event_id)
conflicts, so an event drained twice is stored once.

Without Redis (the embedded defaults), or when Redis does not answer, the events are inserted
in the request instead.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.dateparse import parse_datetime

from canary.models import TurnEvent

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)

GROUP = "ingest"
CLAIM_IDLE_MS = 60_000  # pending this long: its consumer is presumed dead


def _stream() -> str:
    return settings.EVALHUB_TELEMETRY_STREAM


_clients: dict[str, redis.Redis] = {}
_clients_lock = threading.Lock()


def _redis() -> redis.Redis:
    """The process's one client for the telemetry URL. Made under a lock: two threads that each made
    one on a first request left one unreferenced, and redis-py closes a dropped client's connection
    pool under the other thread's pipeline (redis/redis-py#3669: a 5 s stall, a ValueError, and the
    answer's turn events lost; found by bench/stream_load.py)."""
    url = settings.EVALHUB_TELEMETRY_REDIS_URL
    with _clients_lock:
        if url not in _clients:
            import redis

            # RESP2: redis-py 8's RESP3 handshake (maintenance notifications) failed under concurrent
            # connects from threaded web workers ('NoneType' object has no attribute 'readline').
            _clients[url] = redis.Redis.from_url(url, protocol=2)
        return _clients[url]


@dataclass(frozen=True, kw_only=True)
class ProxiedTurn:
    """One turn the proxy saw (the user's question, or the answer it relayed), as it travels through the
    stream: its TurnEvent's fields, with ids for the foreign keys."""

    experiment_id: int
    event_id: str
    session_id: str
    user_id: str
    arm: str
    turn_index: int
    role: str
    text: str
    occurred_at: datetime
    version_id: int | None = None
    latency_ms: float | None = None
    streamed: bool = False
    first_token_ms: float | None = None
    output_tokens: int | None = None
    abandoned: bool = False
    error: str = ""
    fallback: bool = False

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "occurred_at": self.occurred_at.isoformat()})

    @classmethod
    def from_json(cls, text: str | bytes) -> ProxiedTurn:
        data = json.loads(text)
        data.pop("source", None)  # written by a proxy from before this class: always "proxy"
        return cls(**{**data, "occurred_at": parse_datetime(data["occurred_at"])})

    def row(self) -> TurnEvent:
        return TurnEvent(**asdict(self), source=TurnEvent.Source.PROXY)


def turn_events_record(*, events: list[ProxiedTurn]) -> None:
    """Hand the proxy's events to the store."""
    if settings.EVALHUB_TELEMETRY_REDIS_URL:
        import redis

        try:
            pipe = _redis().pipeline(transaction=False)
            for event in events:
                pipe.xadd(_stream(), {"event": event.to_json()})
            pipe.execute()
            return
        # Redis unavailable: store them now rather than lose them (ids make a retry idempotent: an
        # event both added before the failure and inserted here is stored once). redis-py raises
        # ValueError, not a RedisError, on a connection closed under it.
        except (redis.RedisError, OSError, ValueError):
            logger.warning("telemetry stream unavailable; writing %d turn events directly", len(events))
    TurnEvent.objects.bulk_create([event.row() for event in events], ignore_conflicts=True)


def turn_stream_drain(
    *, batch: int = 1000, max_batches: int = 100, claim_idle_ms: int = CLAIM_IDLE_MS
) -> int:
    """Move events from the stream into the database, in bulk; returns how many were read."""
    if not settings.EVALHUB_TELEMETRY_REDIS_URL:
        return 0
    import redis

    client = _redis()
    try:
        client.xgroup_create(_stream(), GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
    consumer = f"{socket.gethostname()}:{os.getpid()}"
    total = 0
    # Events of a consumer that died before acknowledging, then new ones.
    _, claimed, *_ = client.xautoclaim(_stream(), GROUP, consumer, min_idle_time=claim_idle_ms, count=batch)
    total += _store(client, claimed)
    for _ in range(max_batches):
        # [[stream, [(id, fields), ...]]] under RESP2 (redis-py's types say RESP3's dict too).
        reply: Any = client.xreadgroup(GROUP, consumer, {_stream(): ">"}, count=batch)
        messages = reply[0][1] if reply else []
        if not messages:
            break
        total += _store(client, messages)
    return total


def _store(client, messages) -> int:
    if not messages:
        return 0
    rows = [ProxiedTurn.from_json(fields[b"event"]).row() for _, fields in messages]
    TurnEvent.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
    ids = [message_id for message_id, _ in messages]
    client.xack(_stream(), GROUP, *ids)
    client.xdel(_stream(), *ids)
    return len(messages)


def turn_stream_pending() -> int:
    """Events in the stream not yet stored (for health checks and tests)."""
    if not settings.EVALHUB_TELEMETRY_REDIS_URL:
        return 0
    return _redis().xlen(_stream())

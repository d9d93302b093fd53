"""Outgoing webhooks: a JSON POST to EVALHUB_WEBHOOK_URL for events that matter (a canary rolled
back, verdicts and decisions), signed so the receiver can check the sender and refuse replays:

    X-EvalHub-Event: experiment.rolled_back
    X-EvalHub-Timestamp: <unix seconds when this POST was made>
    X-EvalHub-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>" with EVALHUB_WEBHOOK_SECRET>

`engines.webhooks.webhook_verify` is the receiver's check. Delivery runs on the `cpu` queue after
the change commits, with retries and backoff, each attempt signed when it is sent and connected
through the outbound policy; nothing is sent when no URL is configured.
"""

from __future__ import annotations

import json
import time
from enum import StrEnum, unique

from django.conf import settings
from django.utils import timezone

from engines.outbound import outbound_client
from engines.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, webhook_signature
from registry.dispatch import Task, task_enqueue
from registry.outbound import outbound_policy


@unique
class WebhookEvent(StrEnum):
    """The domain events a webhook announces (`X-EvalHub-Event`), one member each."""

    DECISION_RECORDED = "decision.recorded"
    EXPERIMENT_PROMOTED = "experiment.promoted"
    EXPERIMENT_ROLLED_BACK = "experiment.rolled_back"
    GATE_RUN_FINISHED = "gate_run.finished"


def webhook_body(*, event: str, payload: dict) -> bytes:
    return json.dumps(
        {"event": event, "sent_at": timezone.now().isoformat(), "data": payload}, sort_keys=True
    ).encode()


def webhook_send(*, event: WebhookEvent, payload: dict) -> None:
    """Queue a webhook for after the current transaction commits (no-op without a URL)."""
    if not isinstance(event, WebhookEvent):  # a receiver routes on the name: only the announced ones
        raise TypeError(f"webhook_send takes a WebhookEvent, not {event!r}")
    if not settings.EVALHUB_WEBHOOK_URL:
        return
    task_enqueue(Task.WEBHOOK_DELIVER, event, webhook_body(event=event, payload=payload).decode())


def webhook_deliver(*, event: str, body: str) -> int:
    """POST one webhook; returns the HTTP status. Raises httpx errors for the task to retry, and
    OutboundRefusedError (not retried) for a URL the outbound policy refuses."""
    policy = outbound_policy()
    url = str(policy.url_check(settings.EVALHUB_WEBHOOK_URL, resolve=False))
    raw = body.encode()
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "X-EvalHub-Event": event,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: webhook_signature(
            body=raw, timestamp=timestamp, secret=settings.EVALHUB_WEBHOOK_SECRET
        ),
    }
    with outbound_client(policy=policy, timeout=10) as client:
        response = client.post(url, content=raw, headers=headers)
    response.raise_for_status()
    return response.status_code

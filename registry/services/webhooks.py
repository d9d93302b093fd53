"""Outgoing webhooks: a JSON POST to EVALHUB_WEBHOOK_URL for events that matter (a canary rolled
back, later verdicts and decisions), signed with HMAC-SHA256 so the receiver can check the sender.

    X-EvalHub-Event: experiment.rolled_back
    X-EvalHub-Signature: sha256=<hex HMAC-SHA256 of the raw body with EVALHUB_WEBHOOK_SECRET>

Delivery runs on the `cpu` queue after the change commits, with retries and backoff; nothing is
sent when no URL is configured.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from django.conf import settings
from django.utils import timezone

from registry.dispatch import Task, task_enqueue


def webhook_signature(*, body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_body(*, event: str, payload: dict) -> bytes:
    return json.dumps(
        {"event": event, "sent_at": timezone.now().isoformat(), "data": payload}, sort_keys=True
    ).encode()


def webhook_send(*, event: str, payload: dict) -> None:
    """Queue a webhook for after the current transaction commits (no-op without a URL)."""
    if not settings.EVALHUB_WEBHOOK_URL:
        return
    task_enqueue(Task.WEBHOOK_DELIVER, event, webhook_body(event=event, payload=payload).decode())


def webhook_deliver(*, event: str, body: str) -> int:
    """POST one webhook; returns the HTTP status. Raises httpx errors for the task to retry."""
    import httpx

    raw = body.encode()
    response = httpx.post(
        settings.EVALHUB_WEBHOOK_URL,
        content=raw,
        headers={
            "Content-Type": "application/json",
            "X-EvalHub-Event": event,
            "X-EvalHub-Signature": webhook_signature(body=raw, secret=settings.EVALHUB_WEBHOOK_SECRET),
        },
        timeout=10,
    )
    response.raise_for_status()
    return response.status_code

"""Webhook signatures, for EvalHub (the sender) and for receivers: no Django, copy it freely.

A webhook carries `X-EvalHub-Timestamp: <unix seconds when the POST was made>` and
`X-EvalHub-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>" with the shared secret>`.
A receiver recomputes the HMAC over the raw body it received and rejects a signature that differs
or a timestamp too far from its own clock (a replayed delivery):

    webhook_verify(body=request.body, timestamp=request.headers["X-EvalHub-Timestamp"],
                   signature=request.headers["X-EvalHub-Signature"], secret=SECRET)
"""

from __future__ import annotations

import hashlib
import hmac
import time

TIMESTAMP_HEADER = "X-EvalHub-Timestamp"
SIGNATURE_HEADER = "X-EvalHub-Signature"


def webhook_signature(*, body: bytes, timestamp: int, secret: str) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of `b"<timestamp>." + body` keyed with `secret`."""
    signed = f"{timestamp}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def webhook_verify(
    *,
    body: bytes,
    timestamp: str | int,
    signature: str,
    secret: str,
    tolerance_s: float = 300,
    now: float | None = None,
) -> bool:
    """True when `signature` is the sender's for this body and timestamp, and the timestamp is
    within `tolerance_s` seconds of `now` (default: this machine's clock)."""
    try:
        sent = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs((time.time() if now is None else now) - sent) > tolerance_s:
        return False
    expected = webhook_signature(body=body, timestamp=sent, secret=secret)
    return hmac.compare_digest(expected.encode(), signature.encode())

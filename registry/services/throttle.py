"""Throttles on authentication: invalid API tokens counted per client address (in the cache, so
every web process counts together when the cache is Redis), and the audit rows of lockouts. The
password sign-in's own counting is django-axes' (`evalhub.throttle` wires it)."""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache

from registry.actors import SystemActor
from registry.models import AuditAction
from registry.services.audit import AuditSubject, audit_record

TOKEN_THROTTLE = SystemActor("token throttle")
SIGNIN_THROTTLE = SystemActor("sign-in throttle")
ADDRESS = "network.address"


def _keys(address: str) -> tuple[str, str]:
    return f"evalhub:token-failures:{address}", f"evalhub:token-lockout:{address}"


def token_lockout_remaining(*, address: str) -> int:
    """Seconds `address` stays refused token authentication (0: it is not)."""
    until = cache.get(_keys(address)[1])
    return max(0, math.ceil(until - time.time())) if until else 0


def token_failure_record(*, address: str) -> int:
    """Count an invalid or revoked token sent from `address`. The failure that reaches the limit
    within the window locks the address out for the cool-off and writes the audit row; returns the
    seconds the address stays locked out (0: not locked)."""
    count_key, lock_key = _keys(address)
    window, limit = settings.EVALHUB_TOKEN_FAILURE_WINDOW_SECONDS, settings.EVALHUB_TOKEN_FAILURE_LIMIT
    cache.add(count_key, 0, timeout=window)  # the window starts at the first failure
    try:
        count = cache.incr(count_key)
    except ValueError:  # the window ended between add and incr
        count = 1
        cache.set(count_key, count, timeout=window)
    if count < limit:
        return 0
    cooloff = settings.EVALHUB_TOKEN_COOLOFF_SECONDS
    if cache.add(lock_key, time.time() + cooloff, timeout=cooloff):  # only the first one locks
        cache.delete(count_key)
        audit_record(
            actor=TOKEN_THROTTLE,
            action=AuditAction.API_TOKEN_ADDRESS_LOCKED_OUT,
            target=AuditSubject(kind=ADDRESS, id=address),
            after={"failures": count, "window_seconds": window, "cooloff_seconds": cooloff},
            reason=f"{count} invalid or revoked API tokens from {address} within {window} s",
        )
    return token_lockout_remaining(address=address)


def signin_lockout_record(*, username: str | None, address: str | None, failures: dict[str, int]) -> None:
    """The audit rows of a password sign-in lockout: one for the account and one for the address,
    each that reached the limit (`failures`: {"account": n, "address": m})."""
    limit, cooloff = settings.AXES_FAILURE_LIMIT, settings.AXES_COOLOFF_TIME
    after = {"account": username, "address": address, **failures, "cooloff_seconds": cooloff.total_seconds()}
    if username and failures.get("account", 0) >= limit:
        user = get_user_model().objects.filter(username=username).first()
        audit_record(
            actor=SIGNIN_THROTTLE,
            action=AuditAction.SIGN_IN_ACCOUNT_LOCKED_OUT,
            target=user or AuditSubject(kind="sign_in.username", id=username),
            after=after,
            reason=f"{failures['account']} failed sign-ins for {username}",
        )
    if address and failures.get("address", 0) >= limit:
        audit_record(
            actor=SIGNIN_THROTTLE,
            action=AuditAction.SIGN_IN_ADDRESS_LOCKED_OUT,
            target=AuditSubject(kind=ADDRESS, id=address),
            after=after,
            reason=f"{failures['address']} failed sign-ins from {address}",
        )

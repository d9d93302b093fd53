from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from evalhub.throttle import client_address
from registry.models import ApiToken
from registry.roles import user_roles
from registry.services.throttle import token_failure_record, token_lockout_remaining
from registry.services.tokens import api_token_hash

# key hash -> (when read, token with its user and roles): a process reuses a token it checked
# for EVALHUB_AUTH_CACHE_SECONDS, so a revoked token or a changed role applies within that long.
_recent: dict[str, tuple[float, ApiToken]] = {}


def _throttled(seconds: int) -> exceptions.Throttled:
    return exceptions.Throttled(
        wait=seconds,
        detail="Too many invalid or revoked API tokens from this address: token authentication is "
        "paused for it.",
    )


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>` (also `Bearer <key>`). An address that sent too many invalid
    or revoked tokens is answered 429 with Retry-After, whatever token it sends, until its
    cool-off ends (EVALHUB_TOKEN_FAILURE_LIMIT, _WINDOW_SECONDS, _COOLOFF_SECONDS)."""

    keywords = ("token", "bearer")

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <key>'.")
        key_hash = api_token_hash(header[1].decode(errors="replace"))
        hit = _recent.get(key_hash)
        if hit is not None and time.monotonic() - hit[0] < settings.EVALHUB_AUTH_CACHE_SECONDS:
            return hit[1].user, hit[1]
        address = client_address(getattr(request, "_request", request)) or "unknown"
        locked = token_lockout_remaining(address=address)
        if locked:
            raise _throttled(locked)
        token = (
            ApiToken.objects.select_related("user").filter(key_hash=key_hash, revoked_at__isnull=True).first()
        )
        if token is None or not token.user.is_active:
            locked = token_failure_record(address=address)
            raise (
                _throttled(locked) if locked else exceptions.AuthenticationFailed("Invalid or revoked token.")
            )
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        user_roles(token.user)  # read once, kept on the user object with it
        _recent[key_hash] = (time.monotonic(), token)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return "Token"

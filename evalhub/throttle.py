"""The sign-in throttle's edges: which address a request comes from (both throttles count per it),
the page a locked-out sign-in gets (the app's and the admin's), and the audit row when django-axes
locks an account or an address out. The counting itself is axes' (password sign-in) and
`registry.services.throttle` (API tokens)."""

from __future__ import annotations

import math

from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Max, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from registry.services.throttle import signin_lockout_record


def client_address(request: HttpRequest) -> str | None:
    """REMOTE_ADDR, or behind EVALHUB_CLIENT_ADDRESS_PROXIES trusted reverse proxies the address the
    farthest trusted one saw (X-Forwarded-For from the right). Anything left of that is the
    client's to forge, so it is never used. None when the request has no address (a test's
    `force_login`)."""
    proxies = settings.EVALHUB_CLIENT_ADDRESS_PROXIES
    remote = request.META.get("REMOTE_ADDR") or None
    if proxies <= 0:
        return remote
    hops = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    return hops[-proxies] if len(hops) >= proxies else (hops[0] if hops else remote)


def _attempts(*, username: str | None, address: str | None):
    none = Q(pk__in=[])
    by_user = Q(username=username) if username else none
    return AccessAttempt.objects.filter(by_user | (Q(ip_address=address) if address else none))


def signin_lockout_seconds(*, username: str | None, address: str | None) -> int:
    """Seconds until the account or the address may sign in again (the cool-off runs from the last
    failure that counted: failures during a lockout do not prolong it)."""
    last = _attempts(username=username, address=address).aggregate(last=Max("attempt_time"))["last"]
    if last is None:
        return 0
    left = (last + settings.AXES_COOLOFF_TIME - timezone.now()).total_seconds()
    return max(0, math.ceil(left))


def signin_locked_out(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the sign-in page's lockout (also the admin's), 429 with Retry-After."""
    username = (credentials or {}).get("username") or request.POST.get("username") or None
    seconds = signin_lockout_seconds(username=username, address=client_address(request))
    context = {"minutes": max(1, math.ceil(seconds / 60)), "limit": settings.AXES_FAILURE_LIMIT}
    response = render(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(max(1, seconds))
    return response


def signin_lockout_audit(
    sender, request: HttpRequest, username: str | None, ip_address: str, **kwargs
) -> None:
    """axes' `user_locked_out`, sent on every refused attempt: audited once, on the failure that
    reached the limit (axes leaves the count on the request only when it counted the failure)."""
    if getattr(request, "axes_failures_since_start", None) != settings.AXES_FAILURE_LIMIT:
        return
    attempts = AccessAttempt.objects
    failures = {
        "account": (attempts.filter(username=username).aggregate(n=Sum("failures_since_start"))["n"] or 0)
        if username
        else 0,
        "address": (attempts.filter(ip_address=ip_address).aggregate(n=Sum("failures_since_start"))["n"] or 0)
        if ip_address
        else 0,
    }
    signin_lockout_record(username=username, address=ip_address, failures=failures)

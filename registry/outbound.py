"""The deployment's outbound policy (`engines.outbound`), from settings: which hosts and networks
EvalHub may connect to besides public addresses."""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from engines.outbound import OutboundPolicy, OutboundRefusedError, Resolver
from engines.reasons import gettext_noop, reason, wordings_register
from registry.errors import ApplicationError


class OutboundCode(StrEnum):
    REFUSED = "outbound.refused"


wordings_register({OutboundCode.REFUSED: gettext_noop("{field}: {problem}")})


@lru_cache(maxsize=8)
def _policy(hosts: tuple[str, ...], networks: tuple[str, ...], resolve: Resolver | None) -> OutboundPolicy:
    try:
        if resolve is None:
            return OutboundPolicy.parse(allow_hosts=hosts, allow_networks=networks)
        return OutboundPolicy.parse(allow_hosts=hosts, allow_networks=networks, resolve=resolve)
    except ValueError as exc:
        raise ImproperlyConfigured(f"EVALHUB_OUTBOUND_ALLOW_NETWORKS: {exc}") from None


def outbound_policy() -> OutboundPolicy:
    """EVALHUB_OUTBOUND_ALLOW_HOSTS and _NETWORKS as a policy; the same object while they stay the
    same. EVALHUB_OUTBOUND_RESOLVE (not from the environment) replaces the DNS lookup in tests."""
    return _policy(
        tuple(settings.EVALHUB_OUTBOUND_ALLOW_HOSTS),
        tuple(settings.EVALHUB_OUTBOUND_ALLOW_NETWORKS),
        settings.EVALHUB_OUTBOUND_RESOLVE,
    )


def outbound_url_check(*, url: str, field: str) -> None:
    """Refuse (400 naming `field`) a URL that is not http(s) or whose host is, or now resolves
    to, an address the policy refuses. Connections are checked again when they are opened."""
    try:
        outbound_policy().url_check(url)
    except OutboundRefusedError as exc:
        raise ApplicationError(
            reason(OutboundCode.REFUSED, field=field, problem=str(exc)),
            code="outbound_refused",
            fields={field: [str(exc)]},
        ) from None

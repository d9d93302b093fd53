"""Where EvalHub may connect to: the guard on every outbound HTTP request (model backends, serving
URLs, the webhook).

A URL must be http(s), and every address its host resolves to must be public: not loopback,
private, link-local (the cloud metadata service at 169.254.169.254 and fd00:ec2::254 among them),
shared (100.64.0.0/10), multicast, unspecified, reserved or documentation space, with IPv4 inside
IPv6 (`::ffff:a.b.c.d`, NAT64, 6to4) judged as the IPv4 address it carries, unless the operator
allows the host by name or its network.

The check runs when a connection is opened (`OutboundTransport`): the host is resolved once, every
address checked, and the socket connected to a checked address, so a name that resolves to a
public address when it is registered and to a private one later (DNS rebinding) is refused. The
request keeps its URL: the Host header and the TLS server name (SNI, certificate check) stay the
host name.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import httpcore
import httpx

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network
# host -> its addresses as strings ("10.0.0.1", "::1"); raises OSError when it does not resolve.
Resolver: TypeAlias = Callable[[str], Sequence[str]]

SCHEMES = ("http", "https")


def _networks(*rows: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(network), reason) for network, reason in rows)


# Listed here rather than left to `ipaddress`'s flags, which change between Python releases (and
# call multicast, 192.0.0.0/24 or fec0::/10 global in some). Metadata addresses first, for the reason.
REFUSED_NETWORKS = _networks(
    ("169.254.169.254/32", "cloud metadata address"),
    ("169.254.170.2/32", "cloud metadata address"),
    ("fd00:ec2::254/128", "cloud metadata address"),
    ("100.100.100.200/32", "cloud metadata address"),
    ("192.0.0.192/32", "cloud metadata address"),
    ("0.0.0.0/8", "unspecified address"),
    ("10.0.0.0/8", "private address"),
    ("100.64.0.0/10", "shared address space"),
    ("127.0.0.0/8", "loopback address"),
    ("169.254.0.0/16", "link-local address"),
    ("172.16.0.0/12", "private address"),
    ("192.0.0.0/24", "reserved address"),
    ("192.0.2.0/24", "documentation address"),
    ("192.88.99.0/24", "reserved address"),
    ("192.168.0.0/16", "private address"),
    ("198.18.0.0/15", "reserved address"),
    ("198.51.100.0/24", "documentation address"),
    ("203.0.113.0/24", "documentation address"),
    ("224.0.0.0/4", "multicast address"),
    ("240.0.0.0/4", "reserved address"),
    ("::/128", "unspecified address"),
    ("::1/128", "loopback address"),
    ("::/8", "reserved address"),
    ("64:ff9b:1::/48", "private address"),
    ("100::/64", "reserved address"),
    ("2001::/23", "reserved address"),
    ("2001:db8::/32", "documentation address"),
    ("fc00::/7", "private address"),
    ("fe80::/10", "link-local address"),
    ("fec0::/10", "site-local address"),
    ("ff00::/8", "multicast address"),
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class OutboundRefusedError(Exception):
    """EvalHub will not connect there. Not a network failure: retrying does not help."""


def getaddrinfo_addresses(host: str) -> list[str]:
    """The addresses `host` resolves to, in the resolver's order, without repeats."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _views(ip: IPAddress) -> list[IPAddress]:
    """The addresses a packet to `ip` really reaches: IPv4 carried in IPv6 is that IPv4 address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return [ip.ipv4_mapped]
        if ip in _NAT64:
            return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
        if ip.sixtofour is not None:
            return [ip, ip.sixtofour]
    return [ip]


@dataclass(frozen=True)
class OutboundPolicy:
    """Which outbound URLs are allowed. The default refuses every non-public address."""

    allow_hosts: frozenset[str] = frozenset()
    allow_networks: tuple[IPNetwork, ...] = ()
    resolve: Resolver = getaddrinfo_addresses

    @classmethod
    def parse(
        cls,
        *,
        allow_hosts: Iterable[str] = (),
        allow_networks: Iterable[str] = (),
        resolve: Resolver = getaddrinfo_addresses,
    ) -> OutboundPolicy:
        """From the operator's lists (host names; networks such as "10.1.0.0/16" or "::1").
        Raises ValueError naming a network that does not parse."""
        networks = []
        for network in allow_networks:
            try:
                networks.append(ipaddress.ip_network(network.strip(), strict=False))
            except ValueError:
                raise ValueError(f"not an IP network: {network!r}") from None
        return cls(
            allow_hosts=frozenset(_host_key(host) for host in allow_hosts if host.strip()),
            allow_networks=tuple(networks),
            resolve=resolve,
        )

    def address_refusal(self, address: str) -> str | None:
        """Why connecting to `address` (an IP literal) is refused; None when it is allowed."""
        ip = ipaddress.ip_address(address)
        views = _views(ip)
        if any(view in network for view in views for network in self.allow_networks):
            return None
        for view in views:
            for network, reason in REFUSED_NETWORKS:
                if view in network:
                    return reason
            if view.is_multicast:
                return "multicast address"
            if not view.is_global:
                return "non-public address"
        return None

    def url_check(self, url: str, *, resolve: bool = True) -> httpx.URL:
        """The URL parsed as httpx will send it; OutboundRefusedError when it is not http(s) or its
        host is a refused address or (with `resolve`) resolves to one. A name that does not resolve
        now passes: the connection is checked again when it is opened."""
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise OutboundRefusedError(f"not a valid URL: {exc}") from None
        if parsed.scheme not in SCHEMES:
            raise OutboundRefusedError(
                f"only http and https URLs are allowed, not {parsed.scheme or 'none'!r}"
            )
        if not parsed.host:
            raise OutboundRefusedError("the URL has no host")
        if resolve or _literal(parsed.host) is not None:
            with contextlib.suppress(OSError):  # does not resolve now: checked again at connect time
                self.host_addresses(parsed.host)
        return parsed

    def host_addresses(self, host: str) -> list[str]:
        """The addresses to connect to for `host`, each checked. Raises OutboundRefusedError when
        any of them is refused, OSError when the host does not resolve."""
        literal = _literal(host)
        addresses = [str(literal)] if literal is not None else list(self.resolve(host))
        if not addresses:
            raise OSError(f"{host} resolves to no address")
        if _host_key(host) in self.allow_hosts:
            return addresses
        for address in addresses:
            reason = self.address_refusal(address)
            if reason is not None:
                where = f"{host} is a" if literal is not None else f"{host} resolves to {address}, a"
                raise OutboundRefusedError(f"{where} {reason}: not allowed as an outbound address")
        return addresses


def _host_key(host: str) -> str:
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(_host_key(host))
    except ValueError:
        return None


class CheckedNetworkBackend(httpcore.NetworkBackend):
    """httpcore's network backend, connecting only to addresses the policy allows."""

    def __init__(self, policy: OutboundPolicy, inner: httpcore.NetworkBackend | None = None):
        self.policy = policy
        self.inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self.policy.host_addresses(host)
        except OSError as exc:  # does not resolve: a connection failure like any other
            raise httpcore.ConnectError(f"{host}: {exc}") from exc
        failure: Exception | None = None
        for address in addresses:
            try:
                return self.inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # host_addresses returns at least one address
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise OutboundRefusedError("unix sockets are not outbound addresses")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class OutboundTransport(httpx.HTTPTransport):
    """httpx's own transport (request and response mapping, error mapping) over a connection pool
    whose network backend checks every address. No proxy: the check needs the direct connection,
    so HTTP(S)_PROXY from the environment is not used."""

    def __init__(
        self,
        *,
        policy: OutboundPolicy,
        verify: ssl.SSLContext | bool = True,
        limits: httpx.Limits | None = None,
    ):
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        # httpx.HTTPTransport takes no network backend; `_pool` is the one thing its methods use
        # (httpx 0.28, httpcore 1.0), so this builds it as HTTPTransport does, with ours.
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=CheckedNetworkBackend(policy),
        )
        self.policy = policy


def outbound_client(
    *,
    policy: OutboundPolicy,
    timeout: float | httpx.Timeout,
    headers: dict[str, str] | None = None,
    limits: httpx.Limits | None = None,
    verify: ssl.SSLContext | bool = True,
) -> httpx.Client:
    """An httpx client whose every connection goes through `policy`."""
    transport = OutboundTransport(policy=policy, verify=verify, limits=limits)
    return httpx.Client(transport=transport, timeout=timeout, headers=headers)

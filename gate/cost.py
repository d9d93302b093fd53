"""What model work cost: per version its queries, tokens, seconds and money. Pure.

Money is the endpoint's token prices times its tokens (a remote version) plus the device-hour price
times the seconds the model ran on a local device. A price or count that is not known leaves the
cost unpriced (None), never 0: a cost of 0 means nothing was asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from engines.backends.base import Usage


@dataclass(frozen=True, kw_only=True)
class Prices:
    """A version's prices: per 1 000 tokens in and out (its endpoint's; None: not set) and per hour
    of each device kind ("cpu", "cuda"), in `currency`."""

    per_1k_input: float | None = None
    per_1k_output: float | None = None
    device_hour: Mapping[str, float] = field(default_factory=dict)
    currency: str = "USD"


@dataclass(frozen=True, kw_only=True)
class VersionCost:
    """One version's model work in one layer. `wall_seconds`: its model calls' wall time;
    `device_seconds`: time on a local device (None for a remote endpoint); `cost`: None when
    unpriced."""

    version: str
    device: str = ""
    queries: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    wall_seconds: float = 0.0
    device_seconds: float | None = None
    cost: float | None = None
    currency: str = ""


def device_kind(device: str) -> str:
    """The kind a device is priced by: "cuda:1" is "cuda"."""
    return device.split(":", 1)[0]


def usage_cost(*, usage: Usage, device: str, prices: Prices) -> float | None:
    """The money `usage` cost on `device` ("remote": an endpoint), None when a needed price or count
    is not known."""
    total = 0.0
    if usage.queries and device == "remote":
        per_in, per_out = prices.per_1k_input, prices.per_1k_output
        if per_in is None or per_out is None or usage.tokens_in is None or usage.tokens_out is None:
            return None
        total += usage.tokens_in / 1000 * per_in + usage.tokens_out / 1000 * per_out
    if device != "remote" and usage.device_seconds:
        hourly = prices.device_hour.get(device_kind(device))
        if hourly is None:
            return None
        total += usage.device_seconds / 3600 * hourly
    return total


def version_cost(
    *, version: str, usage: Usage, wall_seconds: float, device: str, prices: Prices
) -> VersionCost:
    return VersionCost(
        version=version,
        device=device,
        queries=usage.queries,
        tokens_in=usage.tokens_in,
        tokens_out=usage.tokens_out,
        wall_seconds=wall_seconds,
        device_seconds=usage.device_seconds,
        cost=usage_cost(usage=usage, device=device, prices=prices),
        currency=prices.currency,
    )


def costs_total(costs: list[VersionCost]) -> float | None:
    """The sum of the costs, None when any is unpriced."""
    amounts = [c.cost for c in costs]
    return None if None in amounts else sum(a or 0.0 for a in amounts)

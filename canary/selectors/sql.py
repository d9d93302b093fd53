"""Helpers the SQL selectors share: numbers as SQL returns them, rows per arm, a query with its
parameters written in (to paste into psql), and the user traffic of a window (probe traffic apart)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Generic, TypeVar

from django.db.models import QuerySet

from canary.models import TurnEvent
from canary.selectors.experiments import TrafficWindow
from engines.routing import ARMS, BASELINE, CANDIDATE


def sql_number(value) -> int | float:
    """SQL sums come back as int, float or (PostgreSQL's numeric) Decimal; None for no rows."""
    if value is None:
        return 0
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def sql_arms(rows, names: tuple[str, ...]) -> dict[str, dict]:
    out: dict[str, dict[str, int | float]] = {arm: dict.fromkeys(names, 0) for arm in ARMS}
    for arm, *values in rows:
        out[arm] = {name: sql_number(value) for name, value in zip(names, values, strict=True)}
    return out


T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class ByArm(Generic[T]):
    """One value per arm: what the per-arm selectors hand the gate's layers."""

    baseline: T
    candidate: T


def sql_by_arm(rows, kind: Callable[..., T], names: tuple[str, ...]) -> ByArm[T]:
    """Rows of (arm, *sums) as `kind(**sums)` per arm (`names` its fields); an arm without rows has zeros."""
    values = sql_arms(rows, names)
    return ByArm(baseline=kind(**values[BASELINE]), candidate=kind(**values[CANDIDATE]))


def sql_text(sql: str, params: Sequence[object]) -> str:
    """A query with its parameters written in."""
    for param in params:
        value = param.isoformat() if isinstance(param, datetime) else param
        literal = "'" + value.replace("'", "''") + "'" if isinstance(value, str) else str(value)
        sql = sql.replace("%s", literal, 1)
    return " ".join(sql.split())


def user_traffic(window: TrafficWindow) -> QuerySet[TurnEvent]:
    return TurnEvent.objects.filter(
        experiment=window.experiment, occurred_at__gte=window.start, occurred_at__lt=window.end
    ).exclude(source=TurnEvent.Source.PROBE)

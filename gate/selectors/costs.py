"""What the gate's model work cost a family, month by month, read from the layers' stored costs
(`details.costs`, gate.cost.VersionCost as JSON) leniently: an entry without a number is
unpriced, and one stored before costs were kept is not there at all."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models.functions import TruncMonth

from gate.models import LayerResult


@dataclass(frozen=True, kw_only=True)
class MonthCost:
    """One month of a family's gate runs (by when each run was created): runs with stored costs, model
    queries, the priced entries' cost summed (`cost`, in `currency`; None when none was priced) and
    how many version-layer entries were unpriced."""

    month: str  # "2026-12"
    currency: str
    runs: int
    queries: int
    cost: float | None
    unpriced: int


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def family_costs_by_month(*, family: str) -> list[MonthCost]:
    """The family's gate-run costs per month and currency, the latest month first."""
    rows = (
        LayerResult.objects.filter(gate_run__candidate__family=family, details__has_key="costs")
        .annotate(month=TruncMonth("gate_run__created_at"))
        .values_list("month", "gate_run_id", "details__costs")
    )
    runs: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
    # per (month, currency): queries, priced cost, unpriced entries, priced entries
    totals: defaultdict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0, 0])
    for month, run_id, costs in rows:
        for entry in costs if isinstance(costs, list) else []:
            if not isinstance(entry, dict):
                continue
            key = (month.strftime("%Y-%m"), str(entry.get("currency") or ""))
            runs[key].add(run_id)
            amount = _number(entry.get("cost"))
            totals[key][0] += _number(entry.get("queries")) or 0
            totals[key][1] += amount or 0.0
            totals[key][2] += amount is None
            totals[key][3] += amount is not None
    return [
        MonthCost(
            month=month,
            currency=currency,
            runs=len(runs[(month, currency)]),
            queries=int(totals[(month, currency)][0]),
            cost=totals[(month, currency)][1] if totals[(month, currency)][3] else None,
            unpriced=int(totals[(month, currency)][2]),
        )
        for month, currency in sorted(totals, reverse=True)
    ]

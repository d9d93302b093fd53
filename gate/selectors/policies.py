from __future__ import annotations

from gate.models import GatePolicy


def gate_policy_get(*, name: str) -> GatePolicy | None:
    return GatePolicy.objects.filter(name=name).first()

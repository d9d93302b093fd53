"""What the traffic layers (2 and 3) share about an experiment's registered plan. Pure, no Django.

A plan is registered when the experiment starts (`gate.services.horizons`): the layer's whole policy
section at that moment (`settings`), the horizon sized from it and the time units are counted from
(`counted_from`); it is stored on the experiment as JSON (`Experiment.business_horizon` for layer 3,
`Experiment.follow_up_horizon` for layer 2). It binds the test: a run whose settings for that layer
differ is refused at its start, or (the policy changed after the start) the layer answers `error`
"not the registered test", naming each key. Changing the plan is a new registration, counted from then
on. At the horizon the layer takes one look, stores it in the plan, and every later run returns it.

Before that look a layer is blind: it shows counts per arm, the sample-ratio check and the progress to
the horizon, no estimate, interval, p-value or per-arm metric, unless a person holding the named
permission unblinded the experiment (`Unblinding`, shown with every number computed after it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from engines.reasons import Reason, gettext_noop, reason, wordings_register

# The keys a plan registered before plans froze every setting recorded, by policy key (layer 3 only).
LEGACY_KEYS = {"business_metric": "metric", "business_per": "per"}


class PlanCode(StrEnum):
    UNBLINDED = "plan.unblinded"
    NOT_REGISTERED = "plan.not_registered"
    SETTING_DIFFERS = "plan.setting_differs"


wordings_register(
    {
        PlanCode.UNBLINDED: gettext_noop("unblinded by {by} at {at}: {why}"),
        PlanCode.NOT_REGISTERED: gettext_noop(
            "not the registered test ({differences}): the plan registered at {at} binds the test, and "
            "changing it is a new registration, counted from then on"
        ),
        PlanCode.SETTING_DIFFERS: gettext_noop("{key} {value}, registered {registered}"),
    }
)


def moment(value: str | None) -> str:
    """An ISO 8601 time as the reasons write it: UTC, to the second, no letters (`2026-12-02 01:49:18`)."""
    if not value:
        return "?"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return value
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC)
    return parsed.strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True, kw_only=True)
class Unblinding:
    """Who unblinded the experiment's traffic layers before their look, when (ISO) and why."""

    by: str
    at: str
    reason: str

    @property
    def note(self) -> Reason:
        return reason(PlanCode.UNBLINDED, by=self.by, at=moment(self.at), why=self.reason)


@dataclass(frozen=True, kw_only=True)
class SettingDifference:
    """A policy key whose value in a run differs from the registered plan's."""

    key: str
    registered: Any
    effective: Any


@dataclass(frozen=True, kw_only=True)
class LookRecord:
    """Where a stored look came from: when and by which gate run it was taken, and what defined its
    data: the window start it counted from, the cut-off (data up to and including it), and the units
    per arm it judged."""

    taken_at: str
    gate_run: int | None
    counted_from: str
    cutoff: str
    units_per_arm: int


def plan_settings(plan: Mapping[str, Any]) -> dict[str, Any] | None:
    """The settings a plan froze; None for a plan that froze none (a layer-3 plan registered before
    plans froze every setting: it binds metric and unit only, see `LEGACY_KEYS`)."""
    settings = plan.get("settings")
    return dict(settings) if isinstance(settings, Mapping) else None


def settings_differences(*, plan: Mapping[str, Any], effective: Mapping[str, Any]) -> list[SettingDifference]:
    """Each key of the plan's frozen settings whose value `effective` (the run's section, as JSON values)
    does not have, in the section's order (a stored document's key order is the database's)."""
    registered = plan_settings(plan)
    if registered is None:
        registered = {key: plan.get(old) for key, old in LEGACY_KEYS.items()}
    keys = [key for key in effective if key in registered] + sorted(set(registered) - set(effective))
    return [
        SettingDifference(key=key, registered=registered[key], effective=effective.get(key))
        for key in keys
        if effective.get(key) != registered[key]
    ]


def _value(value: Any) -> str:
    return "null" if value is None else str(value)


def not_registered_reason(*, differences: list[SettingDifference], registered_at: str | None) -> Reason:
    """The `error` reason of a layer whose run does not judge the registered test."""
    parts = [
        reason(
            PlanCode.SETTING_DIFFERS, key=d.key, value=_value(d.effective), registered=_value(d.registered)
        )
        for d in differences
    ]
    return reason(PlanCode.NOT_REGISTERED, differences=parts, at=moment(registered_at))

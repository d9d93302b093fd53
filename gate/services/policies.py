"""Named gate policies: which one a run uses, and saving one (validated, audited)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from gate.layers.registry import gate_policy_parse
from gate.models import GatePolicy
from gate.policy import GatePolicyConfig, PolicyError
from gate.selectors.policies import gate_policy_get
from registry.actors import Actor
from registry.errors import ApplicationError
from registry.models import AuditAction
from registry.services.audit import audit_record


def gate_policy_resolve(
    *, name: str | None, overrides: dict[str, Any] | None, family: str | None = None
) -> tuple[GatePolicy, GatePolicyConfig]:
    """The named policy; unnamed: the policy named as the family when there is one, else `default`.
    `overrides` are checked with it (errors name `policy_overrides.<key>`)."""
    if not name and family and gate_policy_get(name=family):
        name = family
    name = name or "default"
    if name == "default":
        policy, _ = GatePolicy.objects.get_or_create(
            name="default", defaults={"description": "Built-in defaults."}
        )
    else:
        found = gate_policy_get(name=name)
        if found is None:
            raise ApplicationError(
                f"No gate policy named {name!r}.", code="not_found", fields={"policy": ["unknown policy"]}
            )
        policy = found
    if overrides is not None and not isinstance(overrides, dict):
        raise ApplicationError(
            "policy_overrides must be an object.", fields={"policy_overrides": ["must be an object"]}
        )
    try:
        config = gate_policy_parse({**policy.config, **(overrides or {})})
    except PolicyError as exc:
        raise ApplicationError(
            f"Invalid policy: {exc}", fields={f"policy_overrides.{exc.field}": [exc.message]}
        ) from None
    return policy, config


@transaction.atomic
def gate_policy_save(*, name: str, config: dict[str, Any], description: str = "", actor: Actor) -> GatePolicy:
    """Create or change a named policy. The config is checked against every layer's keys (errors name
    `config.<key>`); the change is audited with the config before and after. Runs keep the snapshot
    of the config they started with."""
    if not isinstance(config, dict):
        raise ApplicationError(
            "config must be an object.", fields={"config": ["must be an object of policy keys"]}
        )
    try:
        gate_policy_parse(config)
    except PolicyError as exc:
        raise ApplicationError(
            f"Invalid policy: {exc}", fields={f"config.{exc.field}": [exc.message]}
        ) from None
    policy = GatePolicy.objects.select_for_update().filter(name=name).first()
    before = {"config": policy.config, "description": policy.description} if policy else None
    if policy is None:
        policy = GatePolicy(name=name)
    policy.config, policy.description = config, description
    policy.full_clean()
    policy.save()
    audit_record(
        actor=actor,
        action=AuditAction.GATE_POLICY_CREATE if before is None else AuditAction.GATE_POLICY_CHANGE,
        target=policy,
        before=before,
        after={"config": config, "description": description},
    )
    return policy

"""Named gate policies: which one a run uses, and saving one (validated, audited)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.db import transaction

from engines.reasons import gettext_noop, reason, wordings_register
from gate.layers.registry import default_layer_names, gate_policy_parse
from gate.models import GatePolicy
from gate.policy import GatePolicyConfig, PolicyError
from gate.selectors.policies import gate_policy_get
from registry.actors import Actor
from registry.errors import ApplicationError
from registry.models import AuditAction
from registry.services.audit import audit_record


class PoliciesCode(StrEnum):
    NO_SUCH_POLICY = "policies.no_such_policy"
    UNKNOWN_POLICY = "policies.unknown_policy"
    OVERRIDES_NOT_OBJECT = "policies.overrides_not_object"
    MUST_BE_OBJECT = "policies.must_be_object"
    INVALID = "policies.invalid"
    CONFIG_NOT_OBJECT = "policies.config_not_object"
    KEYS_OBJECT = "policies.keys_object"


wordings_register(
    {
        PoliciesCode.NO_SUCH_POLICY: gettext_noop("No gate policy named '{name}'."),
        PoliciesCode.UNKNOWN_POLICY: gettext_noop("unknown policy"),
        PoliciesCode.OVERRIDES_NOT_OBJECT: gettext_noop("policy_overrides must be an object."),
        PoliciesCode.MUST_BE_OBJECT: gettext_noop("must be an object"),
        PoliciesCode.INVALID: gettext_noop("Invalid policy: {field}: {problem}"),
        PoliciesCode.CONFIG_NOT_OBJECT: gettext_noop("config must be an object."),
        PoliciesCode.KEYS_OBJECT: gettext_noop("must be an object of policy keys"),
    }
)


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
                reason(PoliciesCode.NO_SUCH_POLICY, name=name),
                code="not_found",
                fields={"policy": [reason(PoliciesCode.UNKNOWN_POLICY)]},
            )
        policy = found
    if overrides is not None and not isinstance(overrides, dict):
        raise ApplicationError(
            reason(PoliciesCode.OVERRIDES_NOT_OBJECT),
            fields={"policy_overrides": [reason(PoliciesCode.MUST_BE_OBJECT)]},
        )
    try:
        config = gate_policy_parse({**policy.config, **(overrides or {})})
    except PolicyError as exc:
        raise ApplicationError(
            reason(PoliciesCode.INVALID, field=exc.field, problem=exc.note),
            fields={f"policy_overrides.{exc.field}": [exc.note]},
        ) from None
    return policy, config


@transaction.atomic
def gate_policy_save(*, name: str, config: dict[str, Any], description: str = "", actor: Actor) -> GatePolicy:
    """Create or change a named policy. The config is checked against every layer's keys (errors name
    `config.<key>`); the change is audited with the config before and after. Runs keep the snapshot
    of the config they started with."""
    if not isinstance(config, dict):
        raise ApplicationError(
            reason(PoliciesCode.CONFIG_NOT_OBJECT), fields={"config": [reason(PoliciesCode.KEYS_OBJECT)]}
        )
    try:
        gate_policy_parse(config)
    except PolicyError as exc:
        raise ApplicationError(
            reason(PoliciesCode.INVALID, field=exc.field, problem=exc.note),
            fields={f"config.{exc.field}": [exc.note]},
        ) from None
    policy = GatePolicy.objects.select_for_update().filter(name=name).first()
    before = {"config": policy.config, "description": policy.description} if policy else None
    if policy is None:
        policy = GatePolicy(name=name)
    policy.config, policy.description = gate_policy_layers_fill(config=config), description
    policy.full_clean()
    policy.save()
    audit_record(
        actor=actor,
        action=AuditAction.GATE_POLICY_CREATE if before is None else AuditAction.GATE_POLICY_CHANGE,
        target=policy,
        before=before,
        after={"config": policy.config, "description": description},
    )
    return policy


def gate_policy_layers_fill(*, config: dict[str, Any]) -> dict[str, Any]:
    """`config` naming the layers it requires: one that names none requires every layer installed now
    (but the opt-in ones, such as suite_shift), written down, so that a layer installed later is required
    only by the policies that name it."""
    if "required_layers" in config:
        return config
    return {**config, "required_layers": list(default_layer_names())}


def gate_policy_pre_save(*, instance: GatePolicy, **kwargs: object) -> None:
    """Every save of a policy (this module, the admin, a shell, `loaddata`) stores its layers."""
    if isinstance(instance.config, dict):
        instance.config = gate_policy_layers_fill(config=instance.config)

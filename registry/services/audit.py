from __future__ import annotations

from dataclasses import dataclass

from django.db import models

from registry.actors import Actor, actor_name, actor_user
from registry.models import AuditAction, AuditLog


@dataclass(frozen=True)
class AuditSubject:
    """What an audit row is about when it is not a row of ours: a client address locked out of
    sign-in, say (`kind` "network.address", `id` the address)."""

    kind: str
    id: str
    text: str = ""


def audit_record(
    *,
    actor: Actor,
    action: AuditAction,
    target: models.Model | AuditSubject,
    before: dict | None = None,
    after: dict | None = None,
    reason: str = "",
) -> AuditLog:
    """Append one audit row: who (a user, or the system part acting), what, on what, and why."""
    if not isinstance(action, AuditAction):  # a plain string would slip a new action past the enumeration
        raise TypeError(f"audit_record takes an AuditAction, not {action!r}")
    if isinstance(target, AuditSubject):
        kind, key, text = target.kind, target.id, target.text or target.id
    else:
        kind, key, text = target._meta.label_lower, str(target.pk), str(target)
    return AuditLog.objects.create(
        actor=actor_user(actor),
        actor_name=actor_name(actor),
        action=action,
        target_type=kind,
        target_id=key[:100],
        target_repr=text[:300],
        before=before,
        after=after,
        reason=reason,
    )

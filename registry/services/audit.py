from __future__ import annotations

from django.db import models

from registry.actors import Actor, actor_name, actor_user
from registry.models import AuditLog


def audit_record(
    *,
    actor: Actor,
    action: str,
    target: models.Model,
    before: dict | None = None,
    after: dict | None = None,
    reason: str = "",
) -> AuditLog:
    """Append one audit row: who (a user, or the system part acting), what, on what, and why."""
    return AuditLog.objects.create(
        actor=actor_user(actor),
        actor_name=actor_name(actor),
        action=action,
        target_type=target._meta.label_lower,
        target_id=str(target.pk),
        target_repr=str(target)[:300],
        before=before,
        after=after,
        reason=reason,
    )

from __future__ import annotations

from django.db import models

from registry.models import AuditLog


def audit_record(
    *,
    actor,
    action: str,
    target: models.Model,
    before: dict | None = None,
    after: dict | None = None,
    reason: str = "",
    system: str = "system",
) -> AuditLog:
    """Append one audit row. `actor` is a user, or None for a system part named by `system`."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AuditLog.objects.create(
        actor=user,
        actor_name=user.get_username() if user else system,
        action=action,
        target_type=target._meta.label_lower,
        target_id=str(target.pk),
        target_repr=str(target)[:300],
        before=before,
        after=after,
        reason=reason,
    )

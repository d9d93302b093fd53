from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import Group
from django.db import transaction

from registry.actors import Actor, SystemActor
from registry.errors import ApplicationError
from registry.models import ApiToken
from registry.roles import ROLES
from registry.services.audit import audit_record

ADMIN = SystemActor("admin")  # a command or the admin granting on an operator's behalf


def api_token_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def roles_ensure() -> None:
    for role in ROLES:
        Group.objects.get_or_create(name=role)


@transaction.atomic
def user_role_grant(*, user, role: str, actor: Actor = ADMIN) -> None:
    if role not in ROLES:
        raise ApplicationError(f"Unknown role {role!r}.", fields={"role": [f"one of {list(ROLES)}"]})
    roles_ensure()
    user.groups.add(Group.objects.get(name=role))
    audit_record(actor=actor, action="user.role_grant", target=user, after={"role": role})


@transaction.atomic
def api_token_create(*, user, name: str = "", actor: Actor = ADMIN) -> tuple[ApiToken, str]:
    """Create a token; the plain key is returned once and only its hash is stored."""
    key = secrets.token_hex(20)
    token = ApiToken.objects.create(user=user, name=name, key_prefix=key[:8], key_hash=api_token_hash(key))
    audit_record(
        actor=actor,
        action="api_token.create",
        target=token,
        after={"user": user.get_username(), "name": name},
    )
    return token, key

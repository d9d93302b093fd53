from __future__ import annotations

import hashlib
import secrets
from enum import StrEnum

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from engines.reasons import gettext_noop, reason, wordings_register
from registry.actors import Actor, SystemActor
from registry.errors import ApplicationError, CommonCode
from registry.models import ApiToken, AuditAction
from registry.roles import ROLES
from registry.services.audit import audit_record

ADMIN = SystemActor("admin")  # a command or the admin granting on an operator's behalf


class TokensCode(StrEnum):
    UNKNOWN_ROLE = "tokens.unknown_role"
    UNKNOWN_ROLES = "tokens.unknown_roles"
    EACH_ONE_OF = "tokens.each_one_of"


wordings_register(
    {
        TokensCode.UNKNOWN_ROLE: gettext_noop("Unknown role '{role}'."),
        TokensCode.UNKNOWN_ROLES: gettext_noop("Unknown roles: {roles}."),
        TokensCode.EACH_ONE_OF: gettext_noop("each one of {choices}"),
    }
)


def api_token_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def roles_ensure() -> None:
    for role in ROLES:
        Group.objects.get_or_create(name=role)


@transaction.atomic
def user_role_grant(*, user, role: str, actor: Actor = ADMIN) -> None:
    if role not in ROLES:
        raise ApplicationError(
            reason(TokensCode.UNKNOWN_ROLE, role=role),
            fields={"role": [reason(CommonCode.ONE_OF, choices=list(ROLES))]},
        )
    roles_ensure()
    user.groups.add(Group.objects.get(name=role))
    audit_record(actor=actor, action=AuditAction.USER_ROLE_GRANT, target=user, after={"role": role})


@transaction.atomic
def api_token_create(*, user, name: str = "", actor: Actor = ADMIN) -> tuple[ApiToken, str]:
    """Create a token; the plain key is returned once and only its hash is stored."""
    key = secrets.token_hex(20)
    token = ApiToken.objects.create(user=user, name=name, key_prefix=key[:8], key_hash=api_token_hash(key))
    audit_record(
        actor=actor,
        action=AuditAction.API_TOKEN_CREATE,
        target=token,
        after={"user": user.get_username(), "name": name},
    )
    return token, key


@transaction.atomic
def api_token_revoke(*, token: ApiToken, actor: Actor = ADMIN, reason: str = "") -> ApiToken:
    """Revoke a token for good (a revoked token is never valid again); revoking twice changes nothing."""
    locked = ApiToken.objects.select_for_update().get(pk=token.pk)
    if locked.revoked_at is None:
        locked.revoked_at = timezone.now()
        locked.save(update_fields=["revoked_at"])
        audit_record(
            actor=actor,
            action=AuditAction.API_TOKEN_REVOKE,
            target=locked,
            after={"user": locked.user.get_username(), "name": locked.name},
            reason=reason,
        )
    token.revoked_at = locked.revoked_at
    return locked


@transaction.atomic
def user_roles_set(*, user, roles: list[str], actor: Actor = ADMIN) -> None:
    """Make `roles` the user's roles exactly (other groups are kept), audited when they change."""
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise ApplicationError(
            reason(TokensCode.UNKNOWN_ROLES, roles=unknown),
            fields={"roles": [reason(TokensCode.EACH_ONE_OF, choices=list(ROLES))]},
        )
    roles_ensure()
    before = sorted(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    if before == sorted(set(roles)):
        return
    user.groups.remove(*Group.objects.filter(name__in=set(ROLES) - set(roles)))
    user.groups.add(*Group.objects.filter(name__in=roles))
    vars(user).pop("_evalhub_roles", None)  # user_roles() read them before
    audit_record(
        actor=actor,
        action=AuditAction.USER_ROLES_SET,
        target=user,
        before={"roles": before},
        after={"roles": sorted(set(roles))},
    )

"""Who does something: a signed-in user, or a part of the system acting on its own (the gate, the
reaper, the canary analysis, a management command). Services take one `actor`; audit rows record
its name, and role checks let system parts through."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from http import HTTPStatus
from typing import TYPE_CHECKING, TypeAlias

from engines.reasons import gettext_noop, reason, wordings_register
from registry.errors import ApplicationError
from registry.roles import user_roles

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


@dataclass(frozen=True)
class SystemActor:
    name: str


class ActorsCode(StrEnum):
    ROLE_REQUIRED = "actors.role_required"


wordings_register({ActorsCode.ROLE_REQUIRED: gettext_noop("Only a {roles} may {action}.")})

SYSTEM = SystemActor("system")
Actor: TypeAlias = "AbstractBaseUser | AnonymousUser | SystemActor"


def actor_user(actor: Actor) -> AbstractBaseUser | None:
    """The signed-in user behind `actor`, None for a system part (or an anonymous request)."""
    if isinstance(actor, SystemActor) or not getattr(actor, "is_authenticated", False):
        return None
    return actor


def actor_name(actor: Actor) -> str:
    user = actor_user(actor)
    if user is not None:
        return user.get_username()
    return actor.name if isinstance(actor, SystemActor) else "anonymous"


def actor_require_role(actor: Actor, roles: frozenset[str], *, action: str) -> None:
    """Refuse (403) a user who holds none of `roles`; system parts act on their own authority."""
    if isinstance(actor, SystemActor):
        return
    if not user_roles(actor) & roles:
        raise ApplicationError(
            reason(ActorsCode.ROLE_REQUIRED, roles=" or ".join(sorted(roles)), action=action),
            code="permission_denied",
            status_code=HTTPStatus.FORBIDDEN,
        )

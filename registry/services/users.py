"""People's accounts: the password that signs them in to the pages."""

from __future__ import annotations

from enum import StrEnum

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from engines.reasons import gettext_noop, reason, wordings_register
from registry.actors import Actor
from registry.errors import ApplicationError
from registry.models import AuditAction
from registry.services.audit import audit_record
from registry.services.tokens import ADMIN


class UsersCode(StrEnum):
    NO_SUCH_USER = "users.no_such_user"
    NO_SUCH_USER_NOTE = "users.no_such_user_note"
    PASSWORD_REFUSED = "users.password_refused"


wordings_register(
    {
        UsersCode.NO_SUCH_USER: gettext_noop("No user '{username}'."),
        UsersCode.NO_SUCH_USER_NOTE: gettext_noop("no such user"),
        UsersCode.PASSWORD_REFUSED: gettext_noop("The password was refused."),
    }
)


@transaction.atomic
def user_password_set(*, username: str, password: str, create: bool = False, actor: Actor = ADMIN):
    """Set (or reset) a user's password after Django's password validators; with `create`, a
    missing user is created first. Audited without the password."""
    User = get_user_model()
    user = User.objects.select_for_update().filter(username=username).first()
    if user is None and not create:
        raise ApplicationError(
            reason(UsersCode.NO_SUCH_USER, username=username),
            code="not_found",
            fields={"username": [reason(UsersCode.NO_SUCH_USER_NOTE)]},
            status_code=404,
        )
    created = user is None
    if created:
        user = User(username=username)
    try:
        validate_password(password, user=user)
    except ValidationError as exc:
        raise ApplicationError(
            reason(UsersCode.PASSWORD_REFUSED), fields={"password": list(exc.messages)}
        ) from None
    user.set_password(password)
    user.save()
    audit_record(actor=actor, action=AuditAction.USER_PASSWORD_SET, target=user, after={"created": created})
    return user

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework import permissions

from evalhub.terms import term_label
from evalhub.wordings import reason_words
from registry.errors import ApplicationError
from registry.roles import READ_ROLES, WRITE_ROLES, user_roles


class HasRole(permissions.BasePermission):
    """Reads need one of the view's `read_roles` (default: viewer, ci or release_manager); writes one
    of its `write_roles` (default: ci or release_manager)."""

    message = gettext_lazy("Your role does not allow this.")

    def has_permission(self, request, view) -> bool:
        roles = user_roles(request.user)
        if request.method in permissions.SAFE_METHODS:
            return bool(roles & getattr(view, "read_roles", READ_ROLES))
        return bool(roles & getattr(view, "write_roles", WRITE_ROLES))


def reader_required(view):
    """Pages: a signed-in user holding a role that may read (viewer, ci, release_manager); anyone
    else, the chat app's `app` role included, gets 403."""

    @wraps(view)
    def check(request, *args, **kwargs):
        if not user_roles(request.user) & READ_ROLES:
            raise PermissionDenied(_("Your role does not allow reading these pages."))
        return view(request, *args, **kwargs)

    return login_required(check)


def roles_required(roles: frozenset[str]):
    """Pages that change something: a signed-in user holding one of `roles`, else 403 (the service
    behind the page checks again)."""

    def decorate(view):
        @wraps(view)
        def check(request, *args, **kwargs):
            if not user_roles(request.user) & roles:
                raise PermissionDenied(_("Your role does not allow this."))
            return view(request, *args, **kwargs)

        return login_required(check)

    return decorate


def _note_words(note: object) -> str:
    """A field note in the reader's language (a sentence a library already translated, or one not
    coded yet, as written)."""
    return reason_words(note)


def error_fields_words(exc: ApplicationError) -> dict[str, list[str]]:
    """A refusal's field notes in the reader's language."""
    return {field: [_note_words(note) for note in notes] for field, notes in exc.fields.items()}


def error_text(exc: ApplicationError) -> str:
    """A refusal as one line for a page's message: the message, then the fields at fault with what
    they add (a note that only repeats the message is not said twice)."""
    message = reason_words(exc.reason)
    details = "; ".join(
        f"{term_label(field)}: {' '.join(_note_words(note) for note in new)}"
        for field, notes in exc.fields.items()
        if (new := [note for note in notes if note != exc.reason])
    )
    return f"{message} ({details})" if details else message

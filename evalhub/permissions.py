from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from rest_framework import permissions

from registry.roles import READ_ROLES, WRITE_ROLES, user_roles


class HasRole(permissions.BasePermission):
    """Reads need one of the view's `read_roles` (default: viewer, ci or release_manager); writes one
    of its `write_roles` (default: ci or release_manager)."""

    message = "Your role does not allow this."

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
            raise PermissionDenied("Your role does not allow reading these pages.")
        return view(request, *args, **kwargs)

    return login_required(check)


def roles_required(roles: frozenset[str]):
    """Pages that change something: a signed-in user holding one of `roles`, else 403 (the service
    behind the page checks again)."""

    def decorate(view):
        @wraps(view)
        def check(request, *args, **kwargs):
            if not user_roles(request.user) & roles:
                raise PermissionDenied("Your role does not allow this.")
            return view(request, *args, **kwargs)

        return login_required(check)

    return decorate

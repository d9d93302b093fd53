"""`{% if user|may_read %}`, `{% if user|may_review %}`: which of the header's pages a user may open
(the pages check again: `evalhub.permissions`)."""

from __future__ import annotations

from django import template

from registry.roles import READ_ROLES, REVIEW_ROLES, user_roles

register = template.Library()


@register.filter
def may_read(user: object) -> bool:
    return bool(user_roles(user) & READ_ROLES)


@register.filter
def may_review(user: object) -> bool:
    return bool(user_roles(user) & REVIEW_ROLES)

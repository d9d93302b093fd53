"""Template filters for the reader's language: `{{ value|term }}` labels a stored code,
`{{ text|reason }}` translates a stored reason (see `evalhub.terms` and `evalhub.reasons`)."""

from __future__ import annotations

from django import template

from evalhub.reasons import reason_translate
from evalhub.terms import term_label

register = template.Library()
register.filter("term", term_label)


@register.filter
def reason(value: object) -> object:
    return reason_translate(value) if isinstance(value, str) else value

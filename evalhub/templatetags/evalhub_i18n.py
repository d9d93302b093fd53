"""Template filters for the reader's language: `{{ value|term }}` labels a stored code,
`{{ value|reason }}` words a stored reason (see `evalhub.terms` and `evalhub.wordings`; a sentence stored
before reason codes is shown as written), `{{ list|reasons }}` a list of them,
`{{ text|change }}` the codes in a history row's change (`draft → running, 50 %`), `{{ name|actor }}` a
system part's name."""

from __future__ import annotations

from collections.abc import Mapping

from django import template
from django.utils.dateparse import parse_datetime
from django.utils.formats import date_format
from django.utils.timezone import localtime

from engines.reasons import Reason
from evalhub.terms import actor_label, term_label
from evalhub.wordings import reason_words

register = template.Library()
register.filter("term", term_label)
register.filter("actor", actor_label)


@register.filter
def reason(value: object) -> object:
    """A coded reason (or its stored JSON) in the reader's language; anything else as it is."""
    if isinstance(value, Reason) or (isinstance(value, Mapping) and "code" in value):
        return reason_words(value)
    return value


@register.filter
def reasons(values: object) -> str:
    """Stored reasons, each in the reader's language, as one line."""
    return "; ".join(str(reason(value)) for value in values) if isinstance(values, list | tuple) else ""


@register.filter
def terms(values: object) -> str:
    """A list of codes as their labels, separated by commas."""
    return ", ".join(str(term_label(value)) for value in values) if isinstance(values, list | tuple) else ""


@register.filter
def change(value: object) -> object:
    """`draft → running, 1 % → 5 %` with each status code as its label (shares unchanged)."""
    if not isinstance(value, str):
        return value
    return ", ".join(
        " → ".join(str(term_label(code)) for code in part.split(" → ")) for part in value.split(", ")
    )


@register.filter
def when(value: object) -> object:
    """An ISO 8601 date-time stored as text (layer details), shown as the pages show dates."""
    moment = parse_datetime(value) if isinstance(value, str) else None
    return date_format(localtime(moment), "Y-m-d H:i") if moment else value

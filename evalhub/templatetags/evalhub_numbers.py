"""Number filters of the pages: a fraction as a percentage, signed for changes."""

from __future__ import annotations

from django import template
from django.utils.formats import number_format

register = template.Library()


@register.filter
def percent(value: object, signed: str = "") -> str:
    """0.1234 → "12.3 %" ("+12.3 %" with `signed`); empty for None and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    text = number_format(round(value * 100, 1), decimal_pos=1)  # number_format cuts, not rounds
    if signed and value > 0:
        text = f"+{text}"
    return f"{text} %"

"""Number filters of the pages: a fraction as a percentage (`{{ 0.1234|percent }}` → "12.3 %"), signed
for changes (`{{ 0.123|change_percent }}` → "+12.3 %"), a change of a rate in points
(`{{ 0.012|change_points }}` → "+1.20 points", in the reader's language)."""

from __future__ import annotations

from django import template
from django.utils.formats import number_format
from django.utils.translation import gettext as _

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


@register.filter
def change_percent(value: object) -> str:
    return percent(value, "signed") or "—"


@register.filter
def change_points(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return _("%(value)s points") % {"value": f"{value * 100:+.2f}"}

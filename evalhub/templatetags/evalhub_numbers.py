"""Changes as a readout shows them: `{{ 0.123|change_percent }}` → "+12.3 %", `{{ 0.012|change_points }}`
→ "+1.20 points" (in the reader's language)."""

from __future__ import annotations

from django import template
from django.utils.translation import gettext as _

register = template.Library()


@register.filter
def change_percent(value: object) -> str:
    if not isinstance(value, int | float):
        return "—"
    return f"{value * 100:+.1f} %"


@register.filter
def change_points(value: object) -> str:
    if not isinstance(value, int | float):
        return "—"
    return _("%(value)s points") % {"value": f"{value * 100:+.2f}"}

"""Stored reasons in the reader's language. The judges (pure code, no Django) write their reasons
as English sentences, and the API returns them as they are; the pages match each one against the
sentence shapes below and show its translation with the numbers and names it carried. A reason no
shape matches is shown as it was written (the zh-hans page test finds those)."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from evalhub.terms import term_label

NUMBER = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
WORD = r"[a-z_]+"


def shape(pattern: str, template: Promise, **convert: Callable[[str], object]) -> tuple:
    return re.compile(pattern + r"$"), template, convert


SHAPES = [
    # gate/judges/verdict.py
    shape(rf"(?P<layer>{WORD}): no result", _("%(layer)s: no result"), layer=term_label),
    shape(
        rf"(?P<layer>{WORD}): (?P<verdict>{WORD})",
        _("%(layer)s: %(verdict)s"),
        layer=term_label,
        verdict=term_label,
    ),
    # gate/judges/clean_accuracy.py and robustness.py
    shape(rf"lower bound (?P<value>{NUMBER}) >= (?P<bar>{NUMBER})", _("lower bound %(value)s ≥ bar %(bar)s")),
    shape(rf"lower bound (?P<value>{NUMBER}) < (?P<bar>{NUMBER})", _("lower bound %(value)s < bar %(bar)s")),
    shape(rf"accuracy (?P<value>{NUMBER}) >= (?P<bar>{NUMBER})", _("accuracy %(value)s ≥ bar %(bar)s")),
    shape(rf"accuracy (?P<value>{NUMBER}) < (?P<bar>{NUMBER})", _("accuracy %(value)s < bar %(bar)s")),
    shape(rf"robustness (?P<value>{NUMBER}) >= (?P<bar>{NUMBER})", _("robustness %(value)s ≥ bar %(bar)s")),
    shape(rf"robustness (?P<value>{NUMBER}) < (?P<bar>{NUMBER})", _("robustness %(value)s < bar %(bar)s")),
    shape(
        r"(?P<n>\d+) items scored, the policy needs at least (?P<need>\d+)",
        _("%(n)s items scored, the policy needs at least %(need)s"),
    ),
    shape(
        r"(?P<errors>\d+) of (?P<n>\d+) items errored \(counted as wrong\)",
        _("%(errors)s of %(n)s items errored (counted as wrong)"),
    ),
    shape(
        r"(?P<n>\d+) perturbed samples, the policy needs at least (?P<need>\d+)",
        _("%(n)s perturbed samples, the policy needs at least %(need)s"),
    ),
    shape(r"weakest: (?P<name>\S+) (?P<correct>\d+)/(?P<n>\d+)", _("weakest: %(name)s %(correct)s/%(n)s")),
    shape(
        r"(?P<errors>\d+) samples errored \(counted as wrong\)",
        _("%(errors)s samples errored (counted as wrong)"),
    ),
]


def reason_translate(text: str) -> str:
    """`text` in the active language when a known shape matches it, else `text` itself."""
    for pattern, template, convert in SHAPES:
        match = pattern.match(text)
        if match:
            values = {key: convert.get(key, str)(value) for key, value in match.groupdict().items()}
            return str(template) % values
    return text

"""Stored sentences in the reader's language, for what is not a reason code yet: a few refusals whose
notes are still English sentences from lower floors (policy parsing, the serving check inside a gate
run's reason). Pages match each one against the sentence shapes below and show its translation with
the numbers and names it carried; a sentence no shape matches is shown as it was written. Everything
else is a reason code (`engines.reasons`, worded at the edge by `evalhub.wordings`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from evalhub.terms import term_label

N = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"  # a number as the f-strings print it
CODE = r"[a-z][a-z_]*"
# A moment as `gate.judges.plan.moment` writes it in a reason.
AT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\?"
OPERATORS = {"<=": "≤", ">=": "≥", "<": "<", ">": ">"}


@dataclass(frozen=True)
class Shape:
    pattern: re.Pattern[str]
    template: Promise
    convert: dict[str, Callable[[str], object]] = field(default_factory=dict)


def shape(
    pattern: str,
    template: Promise,
    *,
    terms: tuple = (),
    nested: tuple = (),
    ops: tuple = (),
    other: dict[str, Callable[[str], object]] | None = None,
) -> Shape:
    """`pattern` (named groups, anchored at both ends) and its translation; groups named in `terms`
    are codes (shown by their label), in `nested` reasons of their own, in `ops` comparison signs,
    in `other` converted by the function given."""
    convert: dict[str, Callable[[str], object]] = {name: term_label for name in terms}
    convert.update({name: lambda text: reason_translate(text) for name in nested})  # defined below
    convert.update({name: OPERATORS.__getitem__ for name in ops})
    convert.update(other or {})
    return Shape(re.compile(pattern + r"$", re.DOTALL), template, convert)


SHAPES = [
    shape(
        r"not the model that serves: (?P<why>.+)", _("not the model that serves: %(why)s"), nested=("why",)
    ),
    shape(
        r"(?P<url>\S+) serves config hash (?P<announced>.+), not (?P<ref>\S+)'s (?P<expected>[0-9a-f]+)",
        _("%(url)s serves config hash %(announced)s, not %(ref)s's %(expected)s"),
    ),
    shape(
        r"(?P<ref>\S+) serves at (?P<url>\S+), not at the endpoint its gate calls \((?P<base>\S*)\)",
        _("%(ref)s serves at %(url)s, not at the endpoint its gate calls (%(base)s)"),
    ),
    # gate/policy.py (a stored policy read leniently) and gate/services/gate_runs.py
    shape(r"must be between (?P<low>\S+) and (?P<high>\S+)", _("must be between %(low)s and %(high)s")),
    shape(r"must be one of (?P<choices>.+)", _("must be one of %(choices)s")),
    shape(
        r"layers this version does not have: (?P<layers>.+)",
        _("layers this version does not have: %(layers)s"),
    ),
    shape(
        r"the stored policy has keys this version cannot run: (?P<keys>[^;]+)",
        _("the stored policy has keys this version cannot run: %(keys)s"),
    ),
    shape(r"start a new run", _("start a new run")),
    # gate/services/gate_runs.py and workers/tasks.py: why a run ended in error or failed
    shape(r"gave up after (?P<n>\d+) attempts", _("gave up after %(n)s attempts")),
    shape(r"last error: (?P<why>.+)", _("last error: %(why)s"), nested=("why",)),
    shape(r"gave up: (?P<why>.+)", _("gave up: %(why)s"), nested=("why",)),
    shape(r"task time limit exceeded", _("task time limit exceeded")),
    shape(
        r"worker (?P<worker>\S+) stopped reporting at (?P<at>[\d-]+ [\d:]+) UTC after (?P<n>\d+) attempt\(s\)",
        _("worker %(worker)s stopped reporting at %(at)s UTC after %(n)s attempt(s)"),
    ),
    shape(
        rf"(?P<layer>{CODE}) error: (?P<why>.+)",
        _("%(layer)s error: %(why)s"),
        terms=("layer",),
        nested=("why",),
    ),
    # engines/backends/openai.py (through gate/layers/outputs.py): an endpoint nothing got through to
    shape(
        r"(?P<ref>\S+): (?P<url>\S+): unreachable: (?P<why>.+)",
        _("%(ref)s: %(url)s unreachable: %(why)s"),
    ),
]


def reason_translate(text: str) -> str:
    """`text` in the active language when a known shape matches it (or each of its `; ` parts),
    else `text` itself."""
    for known in SHAPES:
        match = known.pattern.match(text)
        if match:
            values = {
                key: known.convert.get(key, str)(value) for key, value in match.groupdict(default="").items()
            }
            return str(known.template) % values
    if "; " in text:
        parts = [reason_translate(part) for part in text.split("; ")]
        if parts != text.split("; "):
            return str(_("; ")).join(parts)
    return text

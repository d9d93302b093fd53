"""Stored sentences in the reader's language, for what is not a reason code yet: the canary
analysis and the services' refusals write English sentences, and pages match each one against the
sentence shapes below and show its translation with the numbers and names it carried. A sentence made
of parts (`a; b`) is translated part by part. A sentence no shape matches is shown as it was written.
The gate's judges, layers and services return reason codes instead (`engines.reasons`, worded at the
edge by `evalhub.wordings`)."""

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


def codes_translate(text: str) -> str:
    """`paused, promoted` -> their labels."""
    return "，".join(str(term_label(code)) for code in text.split(", "))


def tally_translate(text: str) -> str:
    """`2 pass, 1 marginal` -> each count with its verdict's label."""
    parts = []
    for part in text.split(", "):
        count, _space, verdict = part.partition(" ")
        parts.append(f"{count} {term_label(verdict)}")
    return "，".join(parts)


SHAPES = [
    # gate/services/horizons.py: a run's overrides against the registered test (refusals)
    shape(
        r"Not the registered test of experiment (?P<name>\S+): the overrides change (?P<keys>.+)\.",
        _("Not the registered test of experiment %(name)s: the overrides change %(keys)s."),
    ),
    shape(
        rf"experiment (?P<name>\S+) registered (?P<value>.+) for (?P<layer>{CODE}) at (?P<at>{AT}); registering the "
        r"plan again changes it",
        _(
            "experiment %(name)s registered %(value)s for %(layer)s at %(at)s; registering the plan again changes it"
        ),
    ),
    # engines/stats/comparisons.py, through the canary analysis
    shape(
        rf"overall (?P<verdict>{CODE}): (?P<tally>.+) across (?P<n>\d+) metrics",
        _("overall %(verdict)s: %(tally)s across %(n)s metrics"),
        terms=("verdict",),
        other={"tally": tally_translate},
    ),
    shape(
        rf"(?P<metric>{CODE}) \[(?P<verdict>{CODE})\]: (?P<why>.+)",
        _("%(metric)s [%(verdict)s]: %(why)s"),
        terms=("metric", "verdict"),
        nested=("why",),
    ),
    shape(
        rf"candidate (?P<candidate>{N})% \((?P<c_k>\d+)/(?P<c_n>\d+)\) vs baseline (?P<baseline>{N})% "
        rf"\((?P<b_k>\d+)/(?P<b_n>\d+)\), difference (?P<difference>{N}) points, limit (?P<limit>{N}) points",
        _(
            "candidate %(candidate)s%% (%(c_k)s/%(c_n)s) vs baseline %(baseline)s%% (%(b_k)s/%(b_n)s), difference %(difference)s points, limit %(limit)s points"
        ),
    ),
    shape(rf"no variance: both arms at (?P<rate>{N})%, p=1", _("no variance: both arms at %(rate)s%%, p=1")),
    shape(
        rf"z=(?P<z>{N}) \(pooled rate (?P<pooled>{N})%, standard error (?P<se>{N})\)",
        _("z=%(z)s (pooled rate %(pooled)s%%, standard error %(se)s)"),
    ),
    shape(
        rf"after Holm across (?P<m>\d+) tested metrics: adjusted p=(?P<p>{N}) (?P<op><|>=) alpha (?P<alpha>{N}), "
        rf"(?P<before>{CODE}) becomes (?P<after>{CODE})",
        _(
            "after Holm across %(m)s tested metrics: adjusted p=%(p)s %(op)s alpha %(alpha)s, %(before)s becomes %(after)s"
        ),
        ops=("op",),
        terms=("before", "after"),
    ),
    shape(
        rf"fail: worse than the threshold and significant \(p=(?P<p>{N}) (?P<op><|>=) alpha (?P<alpha>{N})\)",
        _("fail: worse than the threshold and significant (p=%(p)s %(op)s alpha %(alpha)s)"),
        ops=("op",),
    ),
    shape(
        rf"marginal: worse than the threshold but not significant \(p=(?P<p>{N}) (?P<op><|>=) alpha (?P<alpha>{N})\)",
        _("marginal: worse than the threshold but not significant (p=%(p)s %(op)s alpha %(alpha)s)"),
        ops=("op",),
    ),
    shape(
        rf"marginal: significantly worse but within the threshold \(p=(?P<p>{N}) (?P<op><|>=) alpha (?P<alpha>{N})\)",
        _("marginal: significantly worse but within the threshold (p=%(p)s %(op)s alpha %(alpha)s)"),
        ops=("op",),
    ),
    shape(
        rf"pass: within the threshold and not significantly worse \(p=(?P<p>{N}) (?P<op><|>=) alpha (?P<alpha>{N})\)",
        _("pass: within the threshold and not significantly worse (p=%(p)s %(op)s alpha %(alpha)s)"),
        ops=("op",),
    ),
    shape(
        r"insufficient data: (?P<arm>baseline|candidate) has (?P<count>\d+) (?P<unit>\w+), fewer than the minimum (?P<need>\d+)",
        _("insufficient data: %(arm)s has %(count)s %(unit)s, fewer than the minimum %(need)s"),
        terms=("arm", "unit"),
    ),
    shape(
        rf"insufficient data: baseline median latency is (?P<median>{N}), the ratio is undefined",
        _("insufficient data: baseline median latency is %(median)s, the ratio is undefined"),
    ),
    shape(
        rf"candidate median (?P<candidate>{N}) \(n=(?P<c_n>\d+)\) vs baseline median (?P<baseline>{N}) \(n=(?P<b_n>\d+)\), "
        rf"ratio (?P<ratio>{N}), limit (?P<limit>{N})",
        _(
            "candidate median %(candidate)s (n=%(c_n)s) vs baseline median %(baseline)s (n=%(b_n)s), ratio %(ratio)s, limit %(limit)s"
        ),
    ),
    shape(rf"U=(?P<u>{N})", _("U=%(u)s")),
    shape(
        rf"insufficient data: baseline mean is (?P<mean>{N}), the relative difference is undefined",
        _("insufficient data: baseline mean is %(mean)s, the relative difference is undefined"),
    ),
    shape(
        rf"no variance: both arms are constant, p=(?P<p>{N})",
        _("no variance: both arms are constant, p=%(p)s"),
    ),
    shape(rf"t=(?P<t>{N}), df=(?P<df>{N})", _("t=%(t)s, df=%(df)s")),
    shape(
        rf"candidate mean (?P<candidate>{N}) \(sd (?P<c_sd>{N}), n=(?P<c_n>\d+)\) vs baseline mean (?P<baseline>{N}) "
        rf"\(sd (?P<b_sd>{N}), n=(?P<b_n>\d+)\), relative difference (?P<relative>{N})%, limit (?P<limit>{N})%",
        _(
            "candidate mean %(candidate)s (sd %(c_sd)s, n=%(c_n)s) vs baseline mean %(baseline)s (sd %(b_sd)s, n=%(b_n)s), relative difference %(relative)s%%, limit %(limit)s%%"
        ),
    ),
    shape(
        r"insufficient data: (?P<pairs>\d+) probe pairs, fewer than the minimum (?P<need>\d+)",
        _("insufficient data: %(pairs)s probe pairs, fewer than the minimum %(need)s"),
    ),
    shape(
        rf"fail: the baseline wins significantly more discordant pairs \(p=(?P<p>{N}) (?P<op><|>=) alpha (?P<alpha>{N})\)",
        _("fail: the baseline wins significantly more discordant pairs (p=%(p)s %(op)s alpha %(alpha)s)"),
        ops=("op",),
    ),
    shape(
        rf"pass: the baseline wins more discordant pairs but not significantly \(p=(?P<p>{N}) (?P<op><|>=) alpha (?P<alpha>{N})\)",
        _(
            "pass: the baseline wins more discordant pairs but not significantly (p=%(p)s %(op)s alpha %(alpha)s)"
        ),
        ops=("op",),
    ),
    shape(
        rf"pass: the candidate is not worse \(p=(?P<p>{N}) (?P<op><|>=) alpha (?P<alpha>{N})\)",
        _("pass: the candidate is not worse (p=%(p)s %(op)s alpha %(alpha)s)"),
        ops=("op",),
    ),
    shape(
        rf"candidate accuracy (?P<candidate>{N})% vs baseline (?P<baseline>{N})% over (?P<pairs>\d+) pairs; only "
        r"candidate correct (?P<only_candidate>\d+), only baseline correct (?P<only_baseline>\d+)",
        _(
            "candidate accuracy %(candidate)s%% vs baseline %(baseline)s%% over %(pairs)s pairs; only candidate correct %(only_candidate)s, only baseline correct %(only_baseline)s"
        ),
    ),
    shape(r"insufficient data: no metrics were analysed", _("insufficient data: no metrics were analysed")),
    shape(r"the next ramp step waits: (?P<why>.+)", _("the next ramp step waits: %(why)s"), nested=("why",)),
    # Refusals the page forms show (gate/services/decisions.py, canary/services/experiments.py)
    shape(r"A decision needs a reason\.", _("A decision needs a reason.")),
    shape(r"A rollback needs a reason\.", _("A rollback needs a reason.")),
    shape(r"required", _("required")),
    shape(r"must be a number", _("must be a number")),
    shape(r"traffic_percent must be a number\.", _("traffic_percent must be a number.")),
    shape(r"At most (?P<n>\d+) characters\.", _("At most %(n)s characters.")),
    shape(
        r"Only a release manager may decide on a version\.",
        _("Only a release manager may decide on a version."),
    ),
    shape(
        r"(?P<ref>\S+) did not pass \((?P<verdict>[a-z_ ]+)\): approving it is an override; file an override_request "
        r"for a second release manager to confirm\.",
        _(
            "%(ref)s did not pass (%(verdict)s): approving it is an override; file an override_request for a second release manager to confirm."
        ),
        terms=("verdict",),
    ),
    shape(
        r"(?P<ref>\S+) passed a weakened gate \((?P<weakened>.+)\): approving it is an override; file an "
        r"override_request for a second release manager to confirm\.",
        _(
            "%(ref)s passed a weakened gate (%(weakened)s): approving it is an override; file an override_request for a second release manager to confirm."
        ),
    ),
    shape(r"The gate passed: approve instead\.", _("The gate passed: approve instead.")),
    shape(
        r"An override needs a second release manager: you filed the request\.",
        _("An override needs a second release manager: you filed the request."),
    ),
    shape(
        r"You registered (?P<ref>\S+): another release manager must approve it\.",
        _("You registered %(ref)s: another release manager must approve it."),
    ),
    shape(
        rf"(?P<ref>\S+) is (?P<status>{CODE}): it cannot be (?P<target>{CODE}) now\.",
        _("%(ref)s is %(status)s: it cannot be %(target)s now."),
        terms=("status", "target"),
    ),
    shape(
        rf"Gate run (?P<pk>\d+) of (?P<ref>\S+) is still (?P<status>{CODE}): approving waits for a finished "
        r"run; rejecting is possible now\.",
        _(
            "Gate run %(pk)s of %(ref)s is still %(status)s: approving waits for a finished run; rejecting is possible now."
        ),
        terms=("status",),
    ),
    shape(
        r"No gate run of (?P<ref>\S+) has finished: approving, by override too, needs a finished run; "
        r"rejecting is possible now\.",
        _(
            "No gate run of %(ref)s has finished: approving, by override too, needs a finished run; rejecting is possible now."
        ),
    ),
    shape(
        r"(?P<ref>\S+) serves production: it leaves when its replacement is promoted \(it is then retired\), "
        r"never by a rejection\.",
        _(
            "%(ref)s serves production: it leaves when its replacement is promoted (it is then retired), never by a rejection."
        ),
    ),
    shape(
        r"Override request (?P<pk>\d+) on (?P<ref>\S+) is already waiting for confirmation\.",
        _("Override request %(pk)s on %(ref)s is already waiting for confirmation."),
    ),
    shape(
        r"Override request (?P<pk>\d+) is already confirmed\.",
        _("Override request %(pk)s is already confirmed."),
    ),
    shape(
        r"Override request (?P<pk>\d+) is stale: a newer gate run of (?P<ref>\S+) has finished since; file a new request\.",
        _(
            "Override request %(pk)s is stale: a newer gate run of %(ref)s has finished since; file a new request."
        ),
    ),
    # What serves is what was judged (registry/services/versions.py and serving.py, the gate, the canary)
    shape(
        r"not the model that serves: (?P<why>.+)", _("not the model that serves: %(why)s"), nested=("why",)
    ),
    shape(
        r"Experiment (?P<name>\S+) cannot start: (?P<why>.+)\.",
        _("Experiment %(name)s cannot start: %(why)s."),
        nested=("why",),
    ),
    shape(
        r"(?P<url>\S+) serves config hash (?P<announced>.+), not (?P<ref>\S+)'s (?P<expected>[0-9a-f]+)",
        _("%(url)s serves config hash %(announced)s, not %(ref)s's %(expected)s"),
    ),
    shape(
        r"(?P<ref>\S+) serves at (?P<url>\S+), not at the endpoint its gate calls \((?P<base>\S*)\)",
        _("%(ref)s serves at %(url)s, not at the endpoint its gate calls (%(base)s)"),
    ),
    shape(
        r"serving_url (?P<url>\S+) is not the endpoint the gate calls \(backend_config\.base_url (?P<base>\S*)\): "
        r"leave it empty, or register the endpoint you serve as the backend\.",
        _(
            "serving_url %(url)s is not the endpoint the gate calls (backend_config.base_url %(base)s): leave it empty, or register the endpoint you serve as the backend."
        ),
    ),
    shape(
        r"empty or (?P<base>\S*), the endpoint the gate judges",
        _("empty or %(base)s, the endpoint the gate judges"),
    ),
    shape(
        rf"(?P<ref>\S+) is (?P<status>{CODE}): where it serves is part of what its gate judged; register a new "
        r"version to serve elsewhere\.",
        _(
            "%(ref)s is %(status)s: where it serves is part of what its gate judged; register a new version to serve elsewhere."
        ),
        terms=("status",),
    ),
    shape(
        rf"cannot change once the version is evaluated \((?P<status>{CODE})\)",
        _("cannot change once the version is evaluated (%(status)s)"),
        terms=("status",),
    ),
    # The incumbent declaration and the clearance check (gate/services/decisions.py, clearance.py)
    shape(
        rf"(?P<ref>\S+) is (?P<status>{CODE}): only a registered version is declared its family's "
        r"production incumbent\.",
        _("%(ref)s is %(status)s: only a registered version is declared its family's production incumbent."),
        terms=("status",),
    ),
    shape(
        r"(?P<serving>\S+) serves (?P<family>\S+) in production already: a new version gets there by "
        r"approval and promotion\.",
        _(
            "%(serving)s serves %(family)s in production already: a new version gets there by approval and promotion."
        ),
    ),
    shape(
        r"Incumbent request (?P<pk>\d+) on (?P<ref>\S+) is already waiting for confirmation\.",
        _("Incumbent request %(pk)s on %(ref)s is already waiting for confirmation."),
    ),
    shape(
        r"Incumbent request (?P<pk>\d+) is already confirmed\.",
        _("Incumbent request %(pk)s is already confirmed."),
    ),
    shape(
        r"A declaration needs a second release manager: you filed the request\.",
        _("A declaration needs a second release manager: you filed the request."),
    ),
    shape(
        r"An incumbent declaration is about no gate run\.",
        _("An incumbent declaration is about no gate run."),
    ),
    shape(
        rf"(?P<ref>\S+) cannot become (?P<status>{CODE}) without a release decision: approval \(or a "
        r"confirmed override\) after its gate, or a confirmed incumbent declaration\.",
        _(
            "%(ref)s cannot become %(status)s without a release decision: approval (or a confirmed override) after its gate, or a confirmed incumbent declaration."
        ),
        terms=("status",),
    ),
    shape(
        rf"(?P<status>{CODE}) needs a release decision \(POST /api/v1/decisions/\)",
        _("%(status)s needs a release decision (POST /api/v1/decisions/)"),
        terms=("status",),
    ),
    shape(
        rf"Experiment (?P<name>\S+) cannot go from (?P<status>{CODE}) to (?P<to>{CODE})\.",
        _("Experiment %(name)s cannot go from %(status)s to %(to)s."),
        terms=("status", "to"),
    ),
    shape(
        rf"from (?P<status>{CODE}) allowed: (?P<allowed>{CODE}(?:, {CODE})*)",
        _("from %(status)s allowed: %(allowed)s"),
        terms=("status",),
        other={"allowed": codes_translate},
    ),
    shape(
        rf"from (?P<status>{CODE}) allowed: none: it has ended",
        _("from %(status)s allowed: none: it has ended"),
        terms=("status",),
    ),
    shape(
        rf"Experiment (?P<name>\S+) is (?P<status>{CODE}); only a running or paused one can ramp\.",
        _("Experiment %(name)s is %(status)s; only a running or paused one can ramp."),
        terms=("status",),
    ),
    shape(
        r"The ramp plan has no next step; give traffic_percent\.",
        _("The ramp plan has no next step; give traffic_percent."),
    ),
    shape(r"required: no further ramp step", _("required: no further ramp step")),
    shape(
        r"A ramp only raises the share \(lowering it would move users off the candidate\)\.",
        _("A ramp only raises the share (lowering it would move users off the candidate)."),
    ),
    shape(rf"must be above (?P<share>{N}) %", _("must be above %(share)s %%")),
    shape(
        r"Family (?P<family>'[^']+') already has a running or paused experiment\.",
        _("Family %(family)s already has a running or paused experiment."),
    ),
    shape(
        rf"(?P<ref>\S+) has no gate run whose clean accuracy and robustness passed: its share may not go above (?P<cap>{N}) %\.",
        _(
            "%(ref)s has no gate run whose clean accuracy and robustness passed: its share may not go above %(cap)s %%."
        ),
    ),
    # canary/services/reviews.py
    shape(r"Unknown label (?P<label>'[^']*')\.", _("Unknown label %(label)s.")),
    shape(r"Unknown language (?P<language>'[^']*')\.", _("Unknown language %(language)s.")),
    shape(r"one of (?P<codes>\S+(?:, \S+)*)", _("one of %(codes)s")),
    shape(
        r"No reviewable turn (?P<turn>\d+) in experiment (?P<name>'[^']*')\.",
        _("No reviewable turn %(turn)s in experiment %(name)s."),
    ),
    shape(rf"(?P<field>{CODE}) must be in \(0, 100\]\.", _("%(field)s must be in (0, 100].")),
    shape(r"must be more than 0 and at most 100", _("must be more than 0 and at most 100")),
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

"""Stored reasons in the reader's language. The judges and the layers' attributions (code that knows
no Django) write their reasons as English sentences, and the API returns them as they are; pages match each one against the sentence shapes below and show its translation
with the numbers and names it carried. A sentence made of parts (`a; b`) is translated part by
part. A reason no shape matches is shown as it was written (the zh-hans page test finds those)."""

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


def bound_translate(text: str) -> str:
    if text.startswith("always-valid"):
        return str(_("always-valid upper bound "))
    return str(_("upper bound ")) if text else ""


def unmeasured_translate(text: str) -> str:
    return str(_("unmeasured")) if text == "unmeasured" else text


def registered_keys_translate(text: str) -> str:
    """`business_alpha 0.1 (registered 0.05), ...` -> each key with its two values, in the reader's
    language (keys and values stay as written)."""
    parts = []
    for part in text.split(", "):
        match = re.match(r"(?P<key>\S+) (?P<value>.+) \(registered (?P<registered>.+)\)$", part)
        if match is None:
            return text
        parts.append(str(_("%(key)s %(value)s (registered %(registered)s)") % match.groupdict()))
    return str(_(", ")).join(parts)


# How layer 1's attack chose its items (gate/layers/robustness_adversarial.py).
ATTACK_MODES = {"adaptive": _("adaptive"), "transfer": _("transfer")}

SHAPES = [
    # gate/judges/verdict.py
    shape(rf"(?P<layer>{CODE}): no result", _("%(layer)s: no result"), terms=("layer",)),
    shape(
        rf"(?P<layer>{CODE}): (?P<verdict>{CODE})", _("%(layer)s: %(verdict)s"), terms=("layer", "verdict")
    ),
    # gate/judges/clean_accuracy.py and robustness.py
    shape(
        rf"lower bound (?P<value>{N}) (?P<op>>=|<) (?P<bar>{N})",
        _("lower bound %(value)s %(op)s bar %(bar)s"),
        ops=("op",),
    ),
    shape(
        rf"accuracy (?P<value>{N}) (?P<op>>=|<) (?P<bar>{N})",
        _("accuracy %(value)s %(op)s bar %(bar)s"),
        ops=("op",),
    ),
    shape(
        rf"robustness (?P<value>{N}) (?P<op>>=|<) (?P<bar>{N})",
        _("robustness %(value)s %(op)s bar %(bar)s"),
        ops=("op",),
    ),
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
    # gate/layers/robustness_adversarial.py and robustness.py (layer 1 under an adversarial recipe)
    shape(
        rf"(?P<mode>adaptive|transfer) (?P<recipe>\S+): accuracy (?P<before>{N}) before, (?P<after>{N}) under "
        rf"attack, success rate (?P<rate>{N}), (?P<queries>\d+) queries per item",
        _(
            "%(mode)s %(recipe)s: accuracy %(before)s before, %(after)s under attack, success rate %(rate)s, %(queries)s queries per item"
        ),
        other={"mode": lambda mode: str(ATTACK_MODES[mode])},
    ),
    shape(
        r"(?P<recipe>\S+) needs class scores, which backend (?P<backend>'[^']*') of (?P<ref>\S+) does not give "
        r"\(it works with (?P<kinds>[^)]+)\)",
        _(
            "%(recipe)s needs class scores, which backend %(backend)s of %(ref)s does not give (it works with %(kinds)s)"
        ),
    ),
    shape(
        r"attack mode needs class scores, which backend (?P<backend>'[^']*') of (?P<ref>\S+) does not give "
        r"\(it works with (?P<kinds>[^)]+)\)",
        _(
            "attack mode needs class scores, which backend %(backend)s of %(ref)s does not give (it works with %(kinds)s)"
        ),
    ),
    shape(r"attack mode: (?P<why>.+)", _("attack mode: %(why)s"), nested=("why",)),
    shape(
        r"robustness_transfer_from is 'baseline' but the run has no baseline",
        _("robustness_transfer_from is 'baseline' but the run has no baseline"),
    ),
    # gate/judges/follow_up_rate.py
    shape(
        rf"follow-up rate upper bound (?P<judged>{N}) (?P<op><=|>) bar (?P<bar>{N}) \(rate (?P<rate>{N}), "
        rf"(?P<level>{N}) % CI \[(?P<low>{N}), (?P<high>{N})\], (?P<follow_ups>\d+) follow-ups of (?P<answered>\d+) answers\)",
        _(
            "follow-up rate upper bound %(judged)s %(op)s bar %(bar)s (rate %(rate)s, %(level)s %% CI [%(low)s, %(high)s], %(follow_ups)s follow-ups of %(answered)s answers)"
        ),
        ops=("op",),
    ),
    shape(
        rf"follow-up rate (?P<judged>{N}) (?P<op><=|>) bar (?P<bar>{N}) \(rate (?P<rate>{N}), "
        rf"(?P<level>{N}) % CI \[(?P<low>{N}), (?P<high>{N})\], (?P<follow_ups>\d+) follow-ups of (?P<answered>\d+) answers\)",
        _(
            "follow-up rate %(judged)s %(op)s bar %(bar)s (rate %(rate)s, %(level)s %% CI [%(low)s, %(high)s], %(follow_ups)s follow-ups of %(answered)s answers)"
        ),
        ops=("op",),
    ),
    shape(
        rf"follow-up rate (?P<bound>(?:always-valid )?upper bound )?(?P<judged>{N}) (?P<op><=|>) bar (?P<bar>{N}) "
        rf"\(corrected rate "
        rf"(?P<rate>{N}), (?P<level>{N}) % CI \[(?P<low>{N}), (?P<high>{N})\] by Rogan–Gladen per language for "
        rf"detector (?P<detector>\S*); observed (?P<observed>{N}), (?P<follow_ups>\d+) follow-ups of "
        r"(?P<answered>\d+) answers\)",
        _(
            "follow-up rate %(bound)s%(judged)s %(op)s bar %(bar)s (corrected rate %(rate)s, %(level)s %% CI [%(low)s, %(high)s] by Rogan–Gladen per language for detector %(detector)s; observed %(observed)s, %(follow_ups)s follow-ups of %(answered)s answers)"
        ),
        ops=("op",),
        other={"bound": bound_translate},
    ),
    shape(
        rf"difference from the baseline (?P<bound>(?:always-valid )?upper bound )?(?P<judged>{N}) (?P<op><=|>) margin "
        rf"(?P<margin>{N}) \(difference (?P<estimate>{N}), (?P<level>{N}) % CI \[(?P<low>{N}), (?P<high>{N})\] by "
        r"Rogan–Gladen "
        rf"corrected, delta method; baseline rate (?P<rate>{N}), (?P<follow_ups>\d+) follow-ups of "
        r"(?P<answered>\d+) answers\)",
        _(
            "difference from the baseline %(bound)s%(judged)s %(op)s margin %(margin)s (difference %(estimate)s, %(level)s %% CI [%(low)s, %(high)s] by Rogan–Gladen corrected, delta method; baseline rate %(rate)s, %(follow_ups)s follow-ups of %(answered)s answers)"
        ),
        ops=("op",),
        other={"bound": bound_translate},
    ),
    shape(
        r"no baseline arm: non-inferiority not checked, the verdict rests on the bar alone",
        _("no baseline arm: non-inferiority not checked, the verdict rests on the bar alone"),
    ),
    shape(
        r"the detector (?P<detector>\S+) has no informative measured error rates for language (?P<language>'[^']*') "
        r"\(sensitivity \+ specificity must exceed 1\): its follow-up rate cannot be corrected",
        _(
            "the detector %(detector)s has no informative measured error rates for language %(language)s (sensitivity + specificity must exceed 1): its follow-up rate cannot be corrected"
        ),
    ),
    # gate/judges/follow_up_review.py: the detector's live agreement with reviewers
    shape(
        rf"live agreement of the detector with reviewers (?P<agreement>{N}) \((?P<agreeing>\d+) of (?P<labels>\d+) "
        rf"reviewed turns, (?P<level>{N}) % CI \[(?P<low>{N}), (?P<high>{N})\]\)",
        _(
            "live agreement of the detector with reviewers %(agreement)s (%(agreeing)s of %(labels)s reviewed turns, %(level)s %% CI [%(low)s, %(high)s])"
        ),
    ),
    shape(r"no live turns reviewed yet", _("no live turns reviewed yet")),
    shape(
        r"(?P<summary>.+): not checked, the policy needs at least (?P<need>\d+) reviewed turns",
        _("%(summary)s: not checked, the policy needs at least %(need)s reviewed turns"),
        nested=("summary",),
    ),
    shape(
        rf"(?P<summary>.+) is below the policy's minimum (?P<minimum>{N}): the detector's labels cannot be trusted "
        r"on this traffic",
        _(
            "%(summary)s is below the policy's minimum %(minimum)s: the detector's labels cannot be trusted on this traffic"
        ),
        nested=("summary",),
    ),
    shape(
        rf"(?P<summary>live agreement .+) >= minimum (?P<minimum>{N})",
        _("%(summary)s >= minimum %(minimum)s"),
        nested=("summary",),
    ),
    # gate/judges/follow_up_review.py: the error rates layer 2 corrects by, live or shipped
    shape(
        rf"error rates for language (?P<language>'[^']*') from (?P<n>\d+) reviewed live turns: sensitivity "
        rf"(?P<se>{N}) \((?P<tp>\d+) of (?P<p>\d+)\), specificity (?P<sp>{N}) \((?P<tn>\d+) of (?P<negatives>\d+)\)",
        _(
            "error rates for language %(language)s from %(n)s reviewed live turns: sensitivity %(se)s (%(tp)s of %(p)s), specificity %(sp)s (%(tn)s of %(negatives)s)"
        ),
    ),
    shape(
        rf"error rates for language (?P<language>'[^']*') as shipped, from the detector's test split: sensitivity "
        rf"(?P<se>{N}|unmeasured), specificity (?P<sp>{N}|unmeasured) \((?P<p>\d+) follow-ups and (?P<negatives>\d+) "
        r"others reviewed, the live ones need (?P<need>\d+) of each\)",
        _(
            "error rates for language %(language)s as shipped, from the detector's test split: sensitivity %(se)s, specificity %(sp)s (%(p)s follow-ups and %(negatives)s others reviewed, the live ones need %(need)s of each)"
        ),
        other={"se": unmeasured_translate, "sp": unmeasured_translate},
    ),
    shape(
        rf"language (?P<language>'[^']*'): the live (?P<name>sensitivity|specificity) (?P<live>{N}) \((?P<k>\d+) of "
        rf"(?P<n>\d+) reviewed turns\) disagrees with the shipped (?P<shipped>{N}) \((?P<sk>\d+) of (?P<sn>\d+) "
        rf"test pairs; Fisher's exact p (?P<p>{N}), Holm-adjusted (?P<adjusted>{N}) < (?P<alpha>{N})\): too few "
        r"turns are reviewed to replace it, so the corrected rate cannot be trusted yet",
        _(
            "language %(language)s: the live %(name)s %(live)s (%(k)s of %(n)s reviewed turns) disagrees with the shipped %(shipped)s (%(sk)s of %(sn)s test pairs; Fisher's exact p %(p)s, Holm-adjusted %(adjusted)s < %(alpha)s): too few turns are reviewed to replace it, so the corrected rate cannot be trusted yet"
        ),
        terms=("name",),
    ),
    shape(
        rf"language (?P<language>'[^']*'): the live (?P<name>sensitivity|specificity) (?P<live>{N}) \((?P<k>\d+) of "
        rf"(?P<n>\d+) reviewed turns\) disagrees with the shipped (?P<shipped>{N}) \((?P<sk>\d+) of (?P<sn>\d+) "
        rf"test pairs; Fisher's exact p (?P<p>{N}), Holm-adjusted (?P<adjusted>{N}) < (?P<alpha>{N})\): the live one "
        r"is used",
        _(
            "language %(language)s: the live %(name)s %(live)s (%(k)s of %(n)s reviewed turns) disagrees with the shipped %(shipped)s (%(sk)s of %(sn)s test pairs; Fisher's exact p %(p)s, Holm-adjusted %(adjusted)s < %(alpha)s): the live one is used"
        ),
        terms=("name",),
    ),
    shape(
        rf"difference from the baseline (?P<bound>(?:always-valid )?upper bound )?(?P<judged>{N}) (?P<op><=|>) margin "
        rf"(?P<margin>{N}) \(difference (?P<estimate>{N}), (?P<level>{N}) % CI \[(?P<low>{N}), (?P<high>{N})\] by "
        r"Newcombe's hybrid "
        rf"score; baseline rate (?P<rate>{N}), (?P<follow_ups>\d+) follow-ups of (?P<answered>\d+) answers\)",
        _(
            "difference from the baseline %(bound)s%(judged)s %(op)s margin %(margin)s (difference %(estimate)s, %(level)s %% CI [%(low)s, %(high)s] by Newcombe's hybrid score; baseline rate %(rate)s, %(follow_ups)s follow-ups of %(answered)s answers)"
        ),
        ops=("op",),
        other={"bound": bound_translate},
    ),
    shape(
        rf"(?P<arm>{CODE}) has (?P<n>\d+) answered questions, the policy needs at least (?P<need>\d+)",
        _("%(arm)s has %(n)s answered questions, the policy needs at least %(need)s"),
        terms=("arm",),
    ),
    shape(
        rf"the detector still owes (?P<unjudged>\d+) of (?P<turns>{N}) user turns \(their answers are not stored yet\); "
        r"run the gate again in a few minutes",
        _(
            "the detector still owes %(unjudged)s of %(turns)s user turns (their answers are not stored yet); run the gate again in a few minutes"
        ),
    ),
    shape(r"not shown yet: (?P<why>.+)", _("not shown yet: %(why)s"), nested=("why",)),
    shape(
        r"the point estimates pass, but the baseline's (?P<n>\d+) answers alone leave the interval of the difference "
        r"wider than the margin: both arms need more answers",
        _(
            "the point estimates pass, but the baseline's %(n)s answers alone leave the interval of the difference wider than the margin: both arms need more answers"
        ),
    ),
    shape(
        r"the point estimates pass the bounds' checks; about (?P<needed>\d+) answered questions on the candidate "
        r"\(it has (?P<n>\d+)\) would show it if the rates held",
        _(
            "the point estimates pass the bounds' checks; about %(needed)s answered questions on the candidate (it has %(n)s) would show it if the rates held"
        ),
    ),
    shape(
        rf"follow-up rate always-valid upper bound (?P<judged>{N}) (?P<op><=|>) bar (?P<bar>{N}) \(rate "
        rf"(?P<rate>{N}), (?P<level>{N}) % CI \[(?P<low>{N}), (?P<high>{N})\], (?P<follow_ups>\d+) follow-ups of "
        r"(?P<answered>\d+) answers\)",
        _(
            "follow-up rate always-valid upper bound %(judged)s %(op)s bar %(bar)s (rate %(rate)s, %(level)s %% CI [%(low)s, %(high)s], %(follow_ups)s follow-ups of %(answered)s answers)"
        ),
        ops=("op",),
    ),
    # Layer 2's plan: its horizon, its look, its sample-ratio check (gate/judges/follow_up_rate.py,
    # gate/layers/follow_up_rate.py, gate/services/horizons.py)
    shape(
        r"the estimates clear the bar and the margin, the always-valid bounds not yet",
        _("the estimates clear the bar and the margin, the always-valid bounds not yet"),
    ),
    shape(
        rf"sample ratio mismatch: (?P<baseline>\d+) baseline and (?P<candidate>\d+) candidate answered questions "
        rf"against an expected candidate share (?P<share>{N}) \(clustered by user, p = (?P<p>{N}) < (?P<alpha>{N})\): "
        r"the assignment or logging is broken, the rate is not trusted",
        _(
            "sample ratio mismatch: %(baseline)s baseline and %(candidate)s candidate answered questions against an expected candidate share %(share)s (clustered by user, p = %(p)s < %(alpha)s): the assignment or logging is broken, the rate is not trusted"
        ),
    ),
    shape(
        r"no horizon of answered questions was registered: (?P<basis>.+)",
        _("no horizon of answered questions was registered: %(basis)s"),
        nested=("basis",),
    ),
    shape(
        r"before the registered horizon of (?P<units>\d+) answered questions per arm \((?P<baseline>\d+) baseline "
        r"and (?P<candidate>\d+) candidate so far; (?P<basis>.+)\): the rate is judged once, at the horizon",
        _(
            "before the registered horizon of %(units)s answered questions per arm (%(baseline)s baseline and %(candidate)s candidate so far; %(basis)s): the rate is judged once, at the horizon"
        ),
        nested=("basis",),
    ),
    shape(
        r"the registered horizon of (?P<units>\d+) answered questions per arm is reached: the next gate run takes "
        r"the one look",
        _(
            "the registered horizon of %(units)s answered questions per arm is reached: the next gate run takes the one look"
        ),
    ),
    shape(
        r"the registered horizon of (?P<units>\d+) answered questions per arm is reached: the one look is taken "
        rf"once the follow-ups of its last answers are in, from (?P<at>{AT})",
        _(
            "the registered horizon of %(units)s answered questions per arm is reached: the one look is taken once the follow-ups of its last answers are in, from %(at)s"
        ),
    ),
    shape(
        rf"the one look at the registered horizon, taken now \(answers up to (?P<cutoff>{AT})\): every later run "
        r"returns it unchanged",
        _(
            "the one look at the registered horizon, taken now (answers up to %(cutoff)s): every later run returns it unchanged"
        ),
    ),
    shape(
        rf"rate (?P<rate>{N}) from (?P<follow_ups>\d+) follow-ups of (?P<answered>\d+) answers in the (?P<days>\d+) "
        r"days before the start",
        _(
            "rate %(rate)s from %(follow_ups)s follow-ups of %(answered)s answers in the %(days)s days before the start"
        ),
    ),
    shape(
        rf"rate (?P<rate>{N}) from follow_up_planning_rate \((?P<answered>\d+) answers in the (?P<days>\d+) days "
        r"before the start\)",
        _(
            "rate %(rate)s from follow_up_planning_rate (%(answered)s answers in the %(days)s days before the start)"
        ),
    ),
    shape(
        r"for the detector's least favourable language, (?P<language>\S+)",
        _("for the detector's least favourable language, %(language)s"),
        terms=("language",),
    ),
    shape(
        rf"a candidate as good as the baseline passes the bar (?P<bar>{N}) and the margin (?P<margin>{N}) with "
        rf"power (?P<power>{N}) at alpha (?P<alpha>{N})",
        _(
            "a candidate as good as the baseline passes the bar %(bar)s and the margin %(margin)s with power %(power)s at alpha %(alpha)s"
        ),
    ),
    shape(
        r"raised from (?P<units>\d+) to (?P<key>follow_up_min_answered|business_min_units)",
        _("raised from %(units)s to %(key)s"),
    ),
    shape(
        r"only (?P<answered>\d+) answers in the (?P<days>\d+) days before the start \(the policy needs "
        r"(?P<need>\d+)\) and policy (?P<policy>'[^']*') sets no follow_up_planning_rate",
        _(
            "only %(answered)s answers in the %(days)s days before the start (the policy needs %(need)s) and policy %(policy)s sets no follow_up_planning_rate"
        ),
    ),
    shape(
        rf"the planning rate (?P<rate>{N}) is not under the bar (?P<bar>{N})",
        _("the planning rate %(rate)s is not under the bar %(bar)s"),
    ),
    shape(
        r"a margin of 0 cannot be shown for a candidate as good as the baseline",
        _("a margin of 0 cannot be shown for a candidate as good as the baseline"),
    ),
    shape(
        r"the detector's measured error rates alone leave the bar's bound wider than the gap at any traffic: "
        r"measure it on more labelled pairs",
        _(
            "the detector's measured error rates alone leave the bar's bound wider than the gap at any traffic: measure it on more labelled pairs"
        ),
    ),
    # Both traffic layers' plans (gate/judges/plan.py, gate/layers/*.py)
    shape(
        r"not the registered test: (?P<keys>[^;]+)",
        _("not the registered test: %(keys)s"),
        other={"keys": registered_keys_translate},
    ),
    shape(
        rf"the plan registered at (?P<at>{AT}) binds the test, and changing it is a new registration, counted from "
        r"then on",
        _(
            "the plan registered at %(at)s binds the test, and changing it is a new registration, counted from then on"
        ),
    ),
    shape(
        rf"the registered look, taken at (?P<at>{AT}) by gate run (?P<run>\S+): every later run returns it unchanged",
        _("the registered look, taken at %(at)s by gate run %(run)s: every later run returns it unchanged"),
    ),
    shape(
        rf"the one look at the registered horizon, taken now \(data up to (?P<cutoff>{AT})\): every later run "
        r"returns it unchanged",
        _(
            "the one look at the registered horizon, taken now (data up to %(cutoff)s): every later run returns it unchanged"
        ),
    ),
    shape(
        r"the registered horizon of (?P<units>\d+) units per arm is reached: the next gate run takes the one look",
        _(
            "the registered horizon of %(units)s units per arm is reached: the next gate run takes the one look"
        ),
    ),
    shape(
        r"the plan was registered again while this run judged it: run the gate again",
        _("the plan was registered again while this run judged it: run the gate again"),
    ),
    shape(
        rf"unblinded by (?P<by>\S+) at (?P<at>{AT}): (?P<reason>[^;]*)",
        _("unblinded by %(by)s at %(at)s: %(reason)s"),
    ),
    shape(r"interim numbers, not a decision", _("interim numbers, not a decision")),
    shape(
        rf"interim numbers, not a decision: improvement \((?P<direction>{CODE}) is better\) (?P<estimate>{N}), "
        rf"(?P<level>{N}) % interval \[(?P<low>{N}), (?P<high>{N})\], read before the horizon",
        _(
            "interim numbers, not a decision: improvement (%(direction)s is better) %(estimate)s, %(level)s %% interval [%(low)s, %(high)s], read before the horizon"
        ),
        terms=("direction",),
    ),
    shape(
        r"experiment (?P<name>\S+) started without one; register a plan to count from now on",
        _("experiment %(name)s started without one; register a plan to count from now on"),
    ),
    shape(
        r"blind until the one look at the registered horizon: no per-arm figures of the metric",
        _("blind until the one look at the registered horizon: no per-arm figures of the metric"),
    ),
    shape(
        r"blind until the one look at the registered horizon \(or the experiment is unblinded\)",
        _("blind until the one look at the registered horizon (or the experiment is unblinded)"),
    ),
    # gate/judges/business_value.py
    shape(
        rf"sample ratio mismatch: (?P<baseline>\d+) baseline and (?P<candidate>\d+) candidate units assigned against "
        rf"an expected candidate share (?P<share>{N}) \(chi-square (?P<chi>{N}), p = (?P<p>{N}) < (?P<alpha>{N})\): "
        r"the assignment or logging is broken, the effect is not trusted",
        _(
            "sample ratio mismatch: %(baseline)s baseline and %(candidate)s candidate units assigned against an expected candidate share %(share)s (chi-square %(chi)s, p = %(p)s < %(alpha)s): the assignment or logging is broken, the effect is not trusted"
        ),
    ),
    shape(
        rf"sample ratio mismatch: (?P<baseline>\d+) baseline and (?P<candidate>\d+) candidate units assigned against "
        rf"an expected candidate share (?P<share>{N}) \(exact binomial test, p = (?P<p>{N}) < (?P<alpha>{N})\): "
        r"the assignment or logging is broken, the effect is not trusted",
        _(
            "sample ratio mismatch: %(baseline)s baseline and %(candidate)s candidate units assigned against an expected candidate share %(share)s (exact binomial test, p = %(p)s < %(alpha)s): the assignment or logging is broken, the effect is not trusted"
        ),
    ),
    shape(
        rf"(?P<arm>{CODE}) has (?P<n>\d+) units, the policy needs at least (?P<need>\d+)",
        _("%(arm)s has %(n)s units, the policy needs at least %(need)s"),
        terms=("arm",),
    ),
    shape(
        r"the effect cannot be estimated: (?P<why>.+)",
        _("the effect cannot be estimated: %(why)s"),
        nested=("why",),
    ),
    shape(
        r"the sequential interval cannot be computed: (?P<why>.+)",
        _("the sequential interval cannot be computed: %(why)s"),
        nested=("why",),
    ),
    shape(
        r"no fixed horizon was registered: (?P<basis>.+); the fixed-horizon test is judged once, at the horizon; "
        r"set business_sequential_tau \(fixed before the experiment\) for an interval that may be judged at every look",
        _(
            "no fixed horizon was registered: %(basis)s; the fixed-horizon test is judged once, at the horizon; set business_sequential_tau (fixed before the experiment) for an interval that may be judged at every look"
        ),
        nested=("basis",),
    ),
    shape(
        r"before the registered horizon of (?P<units>\d+) units per arm \((?P<baseline>\d+) baseline and "
        r"(?P<candidate>\d+) candidate units so far; (?P<basis>.+)\): the fixed-horizon test is judged once, at "
        r"the horizon; set business_sequential_tau \(fixed before the experiment\) for an interval that may be "
        r"judged at every look",
        _(
            "before the registered horizon of %(units)s units per arm (%(baseline)s baseline and %(candidate)s candidate units so far; %(basis)s): the fixed-horizon test is judged once, at the horizon; set business_sequential_tau (fixed before the experiment) for an interval that may be judged at every look"
        ),
        nested=("basis",),
    ),
    # The registered horizon's basis (gate/services/horizons.py, gate/layers/business_value.py)
    shape(
        r"experiment (?P<name>\S+) started without one; start a new experiment to register it",
        _("experiment %(name)s started without one; start a new experiment to register it"),
    ),
    shape(
        r"the horizon registered at the start is for (?P<metric>\S+) per (?P<per>\S+), this policy judges "
        r"(?P<judged>\S+) per (?P<judged_per>\S+)",
        _(
            "the horizon registered at the start is for %(metric)s per %(per)s, this policy judges %(judged)s per %(judged_per)s"
        ),
        terms=("per", "judged_per"),
    ),
    shape(
        r"policy (?P<policy>'[^']*') names no business_metric",
        _("policy %(policy)s names no business_metric"),
    ),
    shape(
        rf"policy (?P<policy>'[^']*') sizes no horizon: business_mde \((?P<mde>{N})\) must exceed "
        rf"business_min_effect \((?P<effect>{N})\)",
        _(
            "policy %(policy)s sizes no horizon: business_mde (%(mde)s) must exceed business_min_effect (%(effect)s)"
        ),
    ),
    shape(
        r"only (?P<units>\d+) units of (?P<metric>\S+) in the (?P<days>\d+) days before the start \(the policy "
        r"needs (?P<need>\d+)\) and policy (?P<policy>'[^']*') sets no business_planning_sd",
        _(
            "only %(units)s units of %(metric)s in the %(days)s days before the start (the policy needs %(need)s) and policy %(policy)s sets no business_planning_sd"
        ),
    ),
    shape(
        rf"sd (?P<sd>{N}) measured over (?P<units>\d+) units of (?P<metric>\S+) in the (?P<days>\d+) days before "
        r"the start",
        _("sd %(sd)s measured over %(units)s units of %(metric)s in the %(days)s days before the start"),
    ),
    shape(
        rf"sd (?P<sd>{N}) from business_planning_sd \((?P<units>\d+) units of (?P<metric>\S+) before the start\)",
        _("sd %(sd)s from business_planning_sd (%(units)s units of %(metric)s before the start)"),
    ),
    shape(
        rf"a true improvement of (?P<mde>{N}) passes the bar (?P<effect>{N}) with power (?P<power>{N}) at alpha "
        rf"(?P<alpha>{N})",
        _("a true improvement of %(mde)s passes the bar %(effect)s with power %(power)s at alpha %(alpha)s"),
    ),
    shape(r"registered at the start: the last look", _("registered at the start: the last look")),
    shape(r"CUPED-adjusted (?P<rest>improvement .+)", _("CUPED-adjusted %(rest)s"), nested=("rest",)),
    shape(
        rf"improvement \((?P<direction>{CODE}) is better\) (?P<estimate>{N}), (?P<level>{N}) % interval "
        rf"\[(?P<low>{N}), (?P<high>{N})\] at the registered horizon of (?P<units>\d+) units per arm: lower bound "
        rf"(?P<bound>{N}) (?P<outcome>.+)",
        _(
            "improvement (%(direction)s is better) %(estimate)s, %(level)s %% interval [%(low)s, %(high)s] at the registered horizon of %(units)s units per arm: lower bound %(bound)s %(outcome)s"
        ),
        terms=("direction",),
        nested=("outcome",),
    ),
    shape(
        rf"improvement \((?P<direction>{CODE}) is better\) (?P<estimate>{N}), (?P<level>{N}) % always-valid interval "
        rf"\[(?P<low>{N}), (?P<high>{N})\]: lower bound (?P<bound>{N}) (?P<outcome>.+)",
        _(
            "improvement (%(direction)s is better) %(estimate)s, %(level)s %% always-valid interval [%(low)s, %(high)s]: lower bound %(bound)s %(outcome)s"
        ),
        terms=("direction",),
        nested=("outcome",),
    ),
    shape(
        rf"improvement \((?P<direction>{CODE}) is better\) (?P<estimate>{N}), (?P<level>{N}) % interval "
        rf"\[(?P<low>{N}), (?P<high>{N})\]: lower bound (?P<bound>{N}) (?P<outcome>.+)",
        _(
            "improvement (%(direction)s is better) %(estimate)s, %(level)s %% interval [%(low)s, %(high)s]: lower bound %(bound)s %(outcome)s"
        ),
        terms=("direction",),
        nested=("outcome",),
    ),
    shape(
        rf">= the minimum effect (?P<effect>{N}) \(one-sided test at alpha (?P<alpha>{N})\)",
        _(">= the minimum effect %(effect)s (one-sided test at alpha %(alpha)s)"),
    ),
    shape(rf"> 0 \(one-sided test at alpha (?P<alpha>{N})\)", _("> 0 (one-sided test at alpha %(alpha)s)")),
    shape(rf"is below the minimum effect (?P<effect>{N})", _("is below the minimum effect %(effect)s")),
    shape(r"is not above 0 \(no improvement shown\)", _("is not above 0 (no improvement shown)")),
    shape(
        rf"the estimate clears the minimum effect (?P<effect>{N}) but the bound does not; about (?P<baseline>\d+) "
        r"baseline and (?P<candidate>\d+) candidate units would show it if the effect held at its estimate",
        _(
            "the estimate clears the minimum effect %(effect)s but the bound does not; about %(baseline)s baseline and %(candidate)s candidate units would show it if the effect held at its estimate"
        ),
    ),
    shape(
        r"the estimate clears 0 but the bound does not; about (?P<baseline>\d+) baseline and (?P<candidate>\d+) "
        r"candidate units would show it if the effect held at its estimate",
        _(
            "the estimate clears 0 but the bound does not; about %(baseline)s baseline and %(candidate)s candidate units would show it if the effect held at its estimate"
        ),
    ),
    # gate/layers: the attribution's summaries and table titles
    shape(
        rf"candidate follow-up rate (?P<rate>{N}) \((?P<follow_ups>\d+)/(?P<answered>\d+)\), corrected for the "
        rf"detector's errors (?P<corrected>{N}) vs baseline (?P<baseline>{N}) \((?P<baseline_follow_ups>\d+)/"
        rf"(?P<baseline_answered>\d+)\), difference (?P<difference>{N})",
        _(
            "candidate follow-up rate %(rate)s (%(follow_ups)s/%(answered)s), corrected for the detector's errors %(corrected)s vs baseline %(baseline)s (%(baseline_follow_ups)s/%(baseline_answered)s), difference %(difference)s"
        ),
    ),
    shape(
        rf"candidate follow-up rate (?P<rate>{N}) \((?P<follow_ups>\d+)/(?P<answered>\d+)\), corrected for the "
        rf"detector's errors (?P<corrected>{N})",
        _(
            "candidate follow-up rate %(rate)s (%(follow_ups)s/%(answered)s), corrected for the detector's errors %(corrected)s"
        ),
    ),
    shape(r"no answered questions on the candidate arm", _("no answered questions on the candidate arm")),
    shape(
        rf"candidate follow-up rate (?P<rate>{N}) \((?P<follow_ups>\d+)/(?P<answered>\d+)\) vs baseline "
        rf"(?P<baseline>{N}) \((?P<baseline_follow_ups>\d+)/(?P<baseline_answered>\d+)\), difference (?P<difference>{N})",
        _(
            "candidate follow-up rate %(rate)s (%(follow_ups)s/%(answered)s) vs baseline %(baseline)s (%(baseline_follow_ups)s/%(baseline_answered)s), difference %(difference)s"
        ),
    ),
    shape(
        rf"candidate follow-up rate (?P<rate>{N}) \((?P<follow_ups>\d+)/(?P<answered>\d+)\)",
        _("candidate follow-up rate %(rate)s (%(follow_ups)s/%(answered)s)"),
    ),
    shape(
        r"the candidate's hours with the highest follow-up rate, its latest follow-ups with the question and answer "
        r"before them, and the stress probes \((?P<probes>.+)\)",
        _(
            "the candidate's hours with the highest follow-up rate, its latest follow-ups with the question and answer before them, and the stress probes (%(probes)s)"
        ),
        nested=("probes",),
    ),
    shape(
        r"the candidate's units with the worst (?P<metric>\S+); stress probes: (?P<probes>.+)",
        _("the candidate's units with the worst %(metric)s; stress probes: %(probes)s"),
        nested=("probes",),
    ),
    shape(r"no probe run yet", _("no probe run yet")),
    shape(
        rf"(?P<weakness>\S+): candidate (?P<candidate>{N}) vs baseline (?P<baseline>{N}) \((?P<finding>[^)]+)\)",
        _("%(weakness)s: candidate %(candidate)s vs baseline %(baseline)s (%(finding)s)"),
        terms=("finding",),
    ),
    shape(
        rf"(?P<arm>baseline|candidate): (?P<errors>\d+) errors, (?P<fallbacks>\d+) fallbacks of (?P<answers>\d+) "
        rf"answers, p50 (?P<p50>{N}) ms, (?P<rest>(?:baseline|candidate): .+)",
        _(
            "%(arm)s: %(errors)s errors, %(fallbacks)s fallbacks of %(answers)s answers, p50 %(p50)s ms; %(rest)s"
        ),
        terms=("arm",),
        nested=("rest",),
    ),
    shape(
        rf"(?P<arm>baseline|candidate): (?P<errors>\d+) errors, (?P<fallbacks>\d+) fallbacks of (?P<answers>\d+) "
        rf"answers, p50 (?P<p50>{N}) ms",
        _("%(arm)s: %(errors)s errors, %(fallbacks)s fallbacks of %(answers)s answers, p50 %(p50)s ms"),
        terms=("arm",),
    ),
    shape(r"the candidate's wrong answers", _("the candidate's wrong answers")),
    shape(
        rf"(?P<errors>\d+) of (?P<n>\d+) candidate answers errored, mean latency (?P<ms>{N}) ms on (?P<device>.+)",
        _("%(errors)s of %(n)s candidate answers errored, mean latency %(ms)s ms on %(device)s"),
    ),
    shape(
        r"no canary experiment compares (?P<candidate>\S+) with (?P<baseline>.+): start one "
        r"\(POST /api/v1/canary/experiments/\) and let it collect traffic",
        _(
            "no canary experiment compares %(candidate)s with %(baseline)s: start one (POST /api/v1/canary/experiments/) and let it collect traffic"
        ),
    ),
    shape(r"follow-ups by hour", _("follow-ups by hour")),
    shape(r"the candidate's worst hours", _("the candidate's worst hours")),
    shape(r"the candidate's latest follow-ups", _("the candidate's latest follow-ups")),
    shape(r"(?P<metric>\S+) by hour", _("%(metric)s by hour")),
    shape(r"the candidate's worst (?P<metric>\S+)", _("the candidate's worst %(metric)s")),
    shape(
        r"stress probes by weakness \(probe run (?P<pk>\d+)\)",
        _("stress probes by weakness (probe run %(pk)s)"),
    ),
    shape(r"answers per arm", _("answers per arm")),
    shape(r"weakest tags", _("weakest tags")),
    shape(r"by language", _("by language")),
    shape(r"wrong answers", _("wrong answers")),
    shape(r"weakest perturbation types", _("weakest perturbation types")),
    shape(r"items failing most often", _("items failing most often")),
    shape(r"failures by perturbation type", _("failures by perturbation type")),
    # gate/services/dashboard.py: why a metric has no daily table, or a day no figures
    shape(
        r"the policy sets neither business_sequential_tau nor a business_min_effect above 0: the mixture needs a "
        r"scale of effects, fixed before the data, to bet on",
        _(
            "the policy sets neither business_sequential_tau nor a business_min_effect above 0: the mixture needs a scale of effects, fixed before the data, to bet on"
        ),
    ),
    shape(
        r"the policy's minimum effect and tau are for (?P<gated>\S+), not (?P<metric>\S+)",
        _("the policy's minimum effect and tau are for %(gated)s, not %(metric)s"),
    ),
    shape(r"too few units", _("too few units")),
    # What serves is what was judged (registry/services/serving.py, in the gate's run reasons)
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

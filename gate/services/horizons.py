"""Layer 3's fixed horizon: sized and registered when an experiment starts, so that the fixed-horizon
business test is judged once, at a sample size fixed before any of the experiment's data (no peeking).

The size comes from the family's gate policy (the one a run that names none uses): the improvement the
horizon must show (`business_mde`, default twice `business_min_effect`) over the bar, at `business_alpha`
with `business_power`, and a per-unit standard deviation measured in SQL over the family's outcomes of the
metric in the pre-window before the start (`business_cuped_pre_days`), or the policy's
`business_planning_sd` when fewer than `business_min_units` units had any. A horizon that cannot be sized
is registered as such, with the reason, and the fixed-horizon layer says so until a new experiment
starts under a policy that sizes one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.db import transaction
from django.utils import timezone

from canary.models import Experiment
from canary.selectors.stats import (
    follow_up_counts_of_family,
    outcome_cuped_stats_of_family,
    outcome_stats_of_family,
)
from canary.services.experiments import experiment_horizon_register, experiment_start
from canary.services.plans import experiment_plans_replace
from engines.follow_up.classifier import detector_load
from engines.follow_up.correction import ErrorRates
from engines.reasons import Reason, Term, gettext_noop, reason, sentences, wordings_register
from engines.stats.effects import ratio_cuped_adjust
from engines.stats.sufficient import MIN_UNITS, MeanStats, RatioCupedStats, RatioStats
from gate.judges.business_value import CUPED, BusinessValuePolicy, fixed_horizon_units
from gate.judges.follow_up_rate import ROGAN_GLADEN, FollowUpRatePolicy, follow_up_horizon_answers
from gate.judges.plan import moment, settings_differences
from gate.layers.follow_up_rate import detector_accuracy, follow_up_plan_settings
from gate.policy import GatePolicyConfig
from gate.services.policies import gate_policy_resolve
from registry.actors import Actor
from registry.errors import ApplicationError


class HorizonCode(StrEnum):
    """Why a registered plan's horizon is what it is (its `basis`), or why there is none."""

    NO_METRIC = "horizon.no_metric"
    MDE_NOT_ABOVE_MIN_EFFECT = "horizon.mde_not_above_min_effect"
    SD_MEASURED = "horizon.sd_measured"
    SD_FROM_POLICY = "horizon.sd_from_policy"
    TOO_FEW_UNITS = "horizon.too_few_units"
    BUSINESS_POWER = "horizon.business_power"
    CUPED_SHRUNK = "horizon.cuped_shrunk"
    RAISED = "horizon.raised"
    CUPED_NOT_APPLICABLE = "horizon.cuped_not_applicable"
    CUPED_TOO_FEW = "horizon.cuped_too_few"
    CUPED_UNMEASURABLE = "horizon.cuped_unmeasurable"
    CUPED_MEASURED = "horizon.cuped_measured"
    ANSWERS_OBSERVED = "horizon.answers_observed"
    PLANNING_RATE = "horizon.planning_rate"
    TOO_FEW_ANSWERS = "horizon.too_few_answers"
    RATE_FROM = "horizon.rate_from"
    LEAST_FAVOURABLE_LANGUAGE = "horizon.least_favourable_language"
    FOLLOW_UP_POWER = "horizon.follow_up_power"


class HorizonsCode(StrEnum):
    NOT_REGISTERED_TEST = "horizons.not_registered_test"
    OVERRIDE_REGISTERED = "horizons.override_registered"


wordings_register(
    {
        HorizonCode.NO_METRIC: gettext_noop("policy '{policy}' names no business_metric"),
        HorizonCode.MDE_NOT_ABOVE_MIN_EFFECT: gettext_noop(
            "policy '{policy}' sizes no horizon: business_mde ({mde:g}) must exceed business_min_effect "
            "({min_effect:g})"
        ),
        HorizonCode.SD_MEASURED: gettext_noop(
            "sd {sd:.4g} measured over {units} units of {metric} in the {days} days before the start"
        ),
        HorizonCode.SD_FROM_POLICY: gettext_noop(
            "sd {sd:.4g} from business_planning_sd ({units} units of {metric} before the start)"
        ),
        HorizonCode.TOO_FEW_UNITS: gettext_noop(
            "only {units} units of {metric} in the {days} days before the start (the policy needs {need}) "
            "and policy '{policy}' sets no business_planning_sd"
        ),
        HorizonCode.BUSINESS_POWER: gettext_noop(
            "a true improvement of {mde:g} passes the bar {min_effect:g} with power {power:g} at alpha "
            "{alpha:g}"
        ),
        HorizonCode.CUPED_SHRUNK: gettext_noop(
            "{plain} units shrunk by the CUPED variance reduction {reduction:.3g}"
        ),
        HorizonCode.RAISED: gettext_noop("raised from {units} to {key}"),
        HorizonCode.CUPED_NOT_APPLICABLE: gettext_noop(
            "CUPED does not apply (business_cuped off, or per outcome)"
        ),
        HorizonCode.CUPED_TOO_FEW: gettext_noop(
            "{n} users of {metric} in the {days} days before the start, {pre_units} with a pre-period: too "
            "few to measure CUPED's reduction"
        ),
        HorizonCode.CUPED_UNMEASURABLE: gettext_noop(
            "CUPED's reduction could not be measured on the history"
        ),
        HorizonCode.CUPED_MEASURED: gettext_noop(
            "variance reduction {reduction:.3g} measured over {n} users of {metric} in the {days} days "
            "before the start, {pre_units} with a pre-period"
        ),
        HorizonCode.ANSWERS_OBSERVED: gettext_noop(
            "{follow_ups} follow-ups of {answered} answers in the {days} days before the start"
        ),
        HorizonCode.PLANNING_RATE: gettext_noop(
            "follow_up_planning_rate ({answered} answers in the {days} days before the start)"
        ),
        HorizonCode.TOO_FEW_ANSWERS: gettext_noop(
            "only {answered} answers in the {days} days before the start (the policy needs {need}) and "
            "policy '{policy}' sets no follow_up_planning_rate"
        ),
        HorizonCode.RATE_FROM: gettext_noop("rate {rate:.4g} from {source}"),
        HorizonCode.LEAST_FAVOURABLE_LANGUAGE: gettext_noop(
            "for the detector's least favourable language, {language}"
        ),
        HorizonCode.FOLLOW_UP_POWER: gettext_noop(
            "a candidate as good as the baseline passes the bar {bar:g} and the margin {margin:g} with power "
            "{power:g} at alpha {alpha:g}"
        ),
        HorizonsCode.NOT_REGISTERED_TEST: gettext_noop(
            "Not the registered test of experiment {name}: the overrides change {keys}."
        ),
        HorizonsCode.OVERRIDE_REGISTERED: gettext_noop(
            "experiment {name} registered {value} for {layer} at {at}; registering the plan again changes it"
        ),
    }
)


def _plan_start(*, experiment: Experiment) -> datetime:
    """Where a traffic layer's plan starts counting by default: the candidate's current share, else
    the experiment's start (else now, for a plan sized before it)."""
    return experiment.share_since or experiment.started_at or timezone.now()


def _plan_document(
    *, settings: dict[str, Any], counted_from: datetime, fields: dict[str, Any]
) -> dict[str, Any]:
    """A traffic layer's plan as `experiment_horizon_register` stores it: its frozen `settings`, its
    layer's `fields` (the horizon still None) and no look yet, so both layers' plans read alike."""
    return {
        "version": 2,
        "sequence": 1,
        "settings": settings,
        "counted_from": counted_from.isoformat(),
        "look": None,
        **fields,
        "registered_at": timezone.now().isoformat(),
    }


@dataclass(frozen=True, kw_only=True)
class _Baseline:
    """What a horizon is sized from, and why: the family's history before the start (`measured`), or
    the policy's planning value where that history is too thin."""

    value: float
    measured: bool
    source: Reason


def _baseline_choose(
    *,
    measured: float | None,
    units: int,
    need: int,
    planning: float | None,
    from_history: Reason,
    from_policy: Reason,
    too_few: Reason,
) -> _Baseline | Reason:
    """The history's value where it rests on at least `need` units, else the policy's planning value,
    else why there is neither: a horizon sized on too thin a history would be a guess."""
    if measured is not None and units >= need:
        return _Baseline(value=measured, measured=True, source=from_history)
    if planning is not None:
        return _Baseline(value=planning, measured=False, source=from_policy)
    return too_few


def _raised(*, size: int, minimum: int, key: str) -> tuple[int, list[Reason]]:
    """The horizon at least the layer's minimum of units (so that its one look can decide), and the
    reason it was raised, if it was."""
    if size < minimum:
        return minimum, [reason(HorizonCode.RAISED, units=size, key=key)]
    return size, []


def _measured_sd(
    *, experiment: Experiment, policy: BusinessValuePolicy, metric: str
) -> tuple[float | None, int]:
    """The per-unit standard deviation of `metric` over the family's outcomes in the pre-window before
    the start (the linearised ratio's for per-user units), and the units it rests on."""
    start = experiment.started_at or timezone.now()
    # The stats class's keyword arguments: `n` an int, the sums numbers.
    stats: dict[str, Any] = outcome_stats_of_family(
        family=experiment.family,
        metric=metric,
        per=policy.business_per,
        start=start - timedelta(days=policy.business_cuped_pre_days),
        end=start,
    )
    if policy.business_per == "user":
        ratio = RatioStats(**stats)
        variance = ratio.ratio_variance
        unit_variance = None if variance is None else variance * ratio.n
        return (math.sqrt(unit_variance) if unit_variance else None), ratio.n
    mean = MeanStats(**stats)
    return (math.sqrt(mean.variance) if mean.variance else None), mean.n


def _sizes(*, experiment: Experiment, policy: BusinessValuePolicy, metric: str, plain: int) -> dict[str, Any]:
    """Both sizes the plan reports: the plain one, and the one a CUPED-adjusted test needs, n·(1 − r),
    with r the variance reduction CUPED gives on the family's history before the start: users with the
    metric in the `business_cuped_pre_days` before it, each adjusted by their own metric over the same
    number of days before their first outcome there (a pretend experiment, `outcome_cuped_stats_of_family`).
    The reduction of the difference of two arms is the one of each arm when θ is pooled over both, as the
    layer pools it. None (with why) where CUPED does not apply or the history cannot measure it."""
    sizes: dict[str, Any] = {"plain": plain, "cuped": None, "variance_reduction": None, "pre_units": 0}
    if not (policy.business_cuped and policy.business_per == "user"):
        return {**sizes, "cuped_basis": reason(HorizonCode.CUPED_NOT_APPLICABLE).to_json()}
    days = policy.business_cuped_pre_days
    start = experiment.started_at or timezone.now()
    # RatioCupedStats' keyword arguments: `n` and `pre_units` ints, the sums numbers.
    fields: dict[str, Any] = outcome_cuped_stats_of_family(
        family=experiment.family, metric=metric, start=start - timedelta(days=days), end=start, pre_days=days
    )
    history = RatioCupedStats(**fields)
    if history.n < policy.business_min_units or history.pre_units == 0:
        return {
            **sizes,
            "pre_units": history.pre_units,
            "cuped_basis": reason(
                HorizonCode.CUPED_TOO_FEW, n=history.n, metric=metric, days=days, pre_units=history.pre_units
            ).to_json(),
        }
    reduction = ratio_cuped_adjust(control=history, treatment=history).variance_reduction
    if reduction is None:
        return {**sizes, "cuped_basis": reason(HorizonCode.CUPED_UNMEASURABLE).to_json()}
    reduction = max(0.0, reduction)
    return {
        **sizes,
        "cuped": max(MIN_UNITS, math.ceil(plain * (1 - reduction))),
        "variance_reduction": reduction,
        "pre_units": history.pre_units,
        "cuped_basis": reason(
            HorizonCode.CUPED_MEASURED,
            reduction=reduction,
            n=history.n,
            metric=metric,
            days=days,
            pre_units=history.pre_units,
        ).to_json(),
    }


def _business_baseline(
    *, experiment: Experiment, policy: BusinessValuePolicy, policy_name: str, metric: str
) -> _Baseline | Reason:
    """The per-unit standard deviation layer 3's horizon is sized with, or why there is none."""
    days = policy.business_cuped_pre_days
    sd, units = _measured_sd(experiment=experiment, policy=policy, metric=metric)
    return _baseline_choose(
        measured=sd,
        units=units,
        need=policy.business_min_units,
        planning=policy.business_planning_sd,
        from_history=reason(HorizonCode.SD_MEASURED, sd=sd, units=units, metric=metric, days=days),
        from_policy=reason(
            HorizonCode.SD_FROM_POLICY, sd=policy.business_planning_sd, units=units, metric=metric
        ),
        too_few=reason(
            HorizonCode.TOO_FEW_UNITS,
            units=units,
            metric=metric,
            days=days,
            need=policy.business_min_units,
            policy=policy_name,
        ),
    )


@dataclass(frozen=True, kw_only=True)
class _BusinessHorizon:
    """Layer 3's units per arm, both sizes the plan reports (`_sizes`) and how the units were reached."""

    units: int
    sizes: dict[str, Any]
    basis: list[Reason]


def _business_horizon(
    *, experiment: Experiment, policy: BusinessValuePolicy, metric: str, sd: float, mde: float
) -> _BusinessHorizon:
    """The units per arm for which a true improvement of `mde` passes the bar with the policy's power:
    the CUPED-shrunk size where the policy sizes by it and the history measures it, else the plain one."""
    min_effect = policy.business_min_effect
    plain = fixed_horizon_units(
        sd=sd, min_effect=min_effect, mde=mde, alpha=policy.business_alpha, power=policy.business_power
    )
    sizes = _sizes(experiment=experiment, policy=policy, metric=metric, plain=plain)
    cuped = policy.business_horizon_sizing == CUPED and sizes["cuped"] is not None
    power = reason(
        HorizonCode.BUSINESS_POWER,
        mde=mde,
        min_effect=min_effect,
        power=policy.business_power,
        alpha=policy.business_alpha,
    )
    shrunk = (
        [reason(HorizonCode.CUPED_SHRUNK, plain=plain, reduction=sizes["variance_reduction"])]
        if cuped
        else []
    )
    units, raised = _raised(
        size=sizes["cuped"] if cuped else plain, minimum=policy.business_min_units, key="business_min_units"
    )
    return _BusinessHorizon(units=units, sizes=sizes, basis=[power, *shrunk, *raised])


def business_horizon_plan(
    *,
    experiment: Experiment,
    policy: BusinessValuePolicy,
    policy_name: str,
    counted_from: datetime | None = None,
) -> dict[str, Any]:
    """Layer 3's plan to register for `experiment` under `policy`: what `experiment_horizon_register`
    stores (every setting of the section, frozen; metric, per, units_per_arm or None, basis, the
    settings that sized it; `counted_from`: units first exposed before it never count, default the
    experiment's start). The horizon is at least `business_min_units`, so its one look can decide."""
    metric = policy.business_metric
    min_effect = policy.business_min_effect
    mde = policy.business_mde if policy.business_mde is not None else 2 * min_effect
    plan = _plan_document(
        settings=policy.as_dict(),
        counted_from=counted_from or _plan_start(experiment=experiment),
        fields={
            "metric": metric,
            "per": policy.business_per,
            "policy": policy_name,
            "alpha": policy.business_alpha,
            "power": policy.business_power,
            "min_effect": min_effect,
            "mde": mde,
            "sd": None,
            "units_per_arm": None,
        },
    )
    if not metric:
        return {**plan, "basis": reason(HorizonCode.NO_METRIC, policy=policy_name).to_json()}
    if mde <= min_effect:
        why = reason(HorizonCode.MDE_NOT_ABOVE_MIN_EFFECT, policy=policy_name, mde=mde, min_effect=min_effect)
        return {**plan, "basis": why.to_json()}
    baseline = _business_baseline(
        experiment=experiment, policy=policy, policy_name=policy_name, metric=metric
    )
    if isinstance(baseline, Reason):
        return {**plan, "basis": baseline.to_json()}
    horizon = _business_horizon(
        experiment=experiment, policy=policy, metric=metric, sd=baseline.value, mde=mde
    )
    return {
        **plan,
        "sd": baseline.value,
        "units_per_arm": horizon.units,
        "sizes": horizon.sizes,
        "basis": sentences([baseline.source, *horizon.basis]).to_json(),
    }


def _planning_errors(policy: GatePolicyConfig) -> dict[str, ErrorRates | None]:
    """The detector error rates layer 2 will correct by, per language (one entry None: no correction)."""
    section = policy.section(FollowUpRatePolicy)
    if section.follow_up_correction != ROGAN_GLADEN:
        return {"observed": None}  # no language: the observed rate is judged
    accuracy = detector_accuracy(detector=detector_load(), kinds=tuple(section.follow_up_kinds))
    usable: dict[str, ErrorRates | None] = {
        language: rates
        for language, rates in accuracy.errors.items()
        if rates.youden is not None and rates.youden > 0
    }
    return usable or {"observed": None}


def _corrected(rate: float, errors: ErrorRates | None) -> float:
    """An observed rate on the scale layer 2 judges: Rogan–Gladen with the detector's error rates."""
    if errors is None:
        return rate
    assert errors.specificity is not None and errors.youden is not None
    return min(1.0, max(0.0, (rate + errors.specificity - 1) / errors.youden))


def _follow_up_baseline(
    *, experiment: Experiment, section: FollowUpRatePolicy, began: datetime, policy_name: str
) -> _Baseline | Reason:
    """The follow-up rate layer 2's horizon is sized from (`measured`: observed, to be corrected per
    language; else the policy's planning rate, as is), or why there is none."""
    days = section.follow_up_pre_days
    answered, follow_ups = follow_up_counts_of_family(
        family=experiment.family, kinds=section.follow_up_kinds, start=began - timedelta(days=days), end=began
    )
    return _baseline_choose(
        measured=follow_ups / answered if answered else None,
        units=answered,
        need=section.follow_up_min_answered,
        planning=section.follow_up_planning_rate,
        from_history=reason(
            HorizonCode.ANSWERS_OBSERVED, follow_ups=follow_ups, answered=answered, days=days
        ),
        from_policy=reason(HorizonCode.PLANNING_RATE, answered=answered, days=days),
        too_few=reason(
            HorizonCode.TOO_FEW_ANSWERS,
            answered=answered,
            days=days,
            need=section.follow_up_min_answered,
            policy=policy_name,
        ),
    )


@dataclass(frozen=True, kw_only=True)
class _FollowUpAnswers:
    """The answers per arm layer 2's look needs at `rate`, the rate of `language` (None: the observed
    rate is judged, uncorrected)."""

    answers: int
    rate: float
    language: str | None


@dataclass(frozen=True, kw_only=True)
class _FollowUpUnsizable:
    """A language's rate for which no number of answers lets a candidate as good as the baseline pass."""

    rate: float
    why: Reason


def _follow_up_answers(
    *, policy: GatePolicyConfig, alpha: float, baseline: _Baseline
) -> _FollowUpAnswers | _FollowUpUnsizable:
    """The answers per arm for the detector's least favourable language (the most answers, then the
    highest rate), since one look must decide every language; or the first language that sizes none."""
    section = policy.section(FollowUpRatePolicy)
    sized: list[_FollowUpAnswers] = []
    for name, errors in _planning_errors(policy).items():
        rate = _corrected(baseline.value, errors) if baseline.measured else baseline.value
        answers = follow_up_horizon_answers(
            rate=rate,
            max_rate=section.follow_up_max,
            margin=section.follow_up_margin,
            alpha=alpha,
            power=section.follow_up_power,
            decide_on=section.follow_up_decide_on,
            errors=errors,
        )
        if isinstance(answers, Reason):
            return _FollowUpUnsizable(rate=rate, why=answers)
        sized.append(
            _FollowUpAnswers(answers=answers, rate=rate, language=name if errors is not None else None)
        )
    return max(sized, key=lambda size: (size.answers, size.rate))


def follow_up_horizon_plan(
    *,
    experiment: Experiment,
    policy: GatePolicyConfig,
    policy_name: str,
    counted_from: datetime | None = None,
) -> dict[str, Any]:
    """Layer 2's plan to register for `experiment` under `policy`: its frozen settings and the answered
    questions per arm of its one look (`gate.judges.follow_up_rate.follow_up_horizon_answers`), sized
    from the family's follow-up rate over the `follow_up_pre_days` before the start (at least
    `follow_up_min_answered` answers), else `follow_up_planning_rate`, for the detector's least
    favourable language; at least `follow_up_min_answered`."""
    section = policy.section(FollowUpRatePolicy)
    start = _plan_start(experiment=experiment)
    alpha = round((1 - policy.general.confidence) / 2, 12)  # one-sided: the upper bound's
    plan = _plan_document(
        settings=follow_up_plan_settings(policy),
        counted_from=counted_from or start,
        fields={
            "policy": policy_name,
            "alpha": alpha,
            "power": section.follow_up_power,
            "baseline_rate": None,
            "answers_per_arm": None,
        },
    )
    baseline = _follow_up_baseline(
        experiment=experiment, section=section, began=experiment.started_at or start, policy_name=policy_name
    )
    if isinstance(baseline, Reason):
        return {**plan, "basis": baseline.to_json()}
    size = _follow_up_answers(policy=policy, alpha=alpha, baseline=baseline)
    rate_from = reason(HorizonCode.RATE_FROM, rate=size.rate, source=baseline.source)
    if isinstance(size, _FollowUpUnsizable):
        return {**plan, "baseline_rate": size.rate, "basis": sentences([rate_from, size.why]).to_json()}
    language = (
        [reason(HorizonCode.LEAST_FAVOURABLE_LANGUAGE, language=Term(size.language))] if size.language else []
    )
    power = reason(
        HorizonCode.FOLLOW_UP_POWER,
        bar=section.follow_up_max,
        margin=section.follow_up_margin,
        power=section.follow_up_power,
        alpha=alpha,
    )
    answers, raised = _raised(
        size=size.answers, minimum=section.follow_up_min_answered, key="follow_up_min_answered"
    )
    basis = sentences([rate_from, *language, power, *raised])
    return {**plan, "baseline_rate": size.rate, "answers_per_arm": answers, "basis": basis.to_json()}


def _plans(
    *, experiment: Experiment, counted_from: datetime | None = None
) -> tuple[GatePolicyConfig, dict[str, dict[str, Any]]]:
    """The family's policy now and the plans it registers (layer name -> plan document)."""
    policy, config = gate_policy_resolve(name=None, overrides=None, family=experiment.family)
    business = business_horizon_plan(
        experiment=experiment,
        policy=config.section(BusinessValuePolicy),
        policy_name=policy.name,
        counted_from=counted_from,
    )
    follow_up = follow_up_horizon_plan(
        experiment=experiment, policy=config, policy_name=policy.name, counted_from=counted_from
    )
    return config, {"business_value": business, "follow_up_rate": follow_up}


def experiment_start_registered(*, experiment: Experiment, actor: Actor, reason: str = "") -> Experiment:
    """Start `experiment` and register its plans under the family's policy, in one transaction (both
    audited). Every interface starts experiments through here."""
    with transaction.atomic():
        started = experiment_start(experiment=experiment, actor=actor, reason=reason)
        _, plans = _plans(experiment=started)
        return experiment_horizon_register(
            experiment=started,
            horizon=plans["business_value"],
            follow_up=plans.get("follow_up_rate"),
            actor=actor,
        )


def experiment_plans_register_again(*, experiment: Experiment, actor: Actor, reason: str) -> Experiment:
    """A new registration of the traffic layers' plans under the family's policy as it is now (a release
    manager's act, with a reason, audited): the settings it freezes bind every later run, and its horizons
    count units first exposed from now on, never the data the replaced plans read (their looks, if any,
    stay in the plans' `earlier`)."""
    _, plans = _plans(experiment=experiment, counted_from=timezone.now())
    return experiment_plans_replace(experiment=experiment, plans=plans, actor=actor, reason=reason)


# Where each traffic layer's plan is stored on the experiment, and the settings a run would judge it by.
PLAN_SETTINGS: dict[str, tuple[str, Callable[[GatePolicyConfig], dict[str, Any]]]] = {
    "business_value": ("business_horizon", lambda config: config.section(BusinessValuePolicy).as_dict()),
    "follow_up_rate": ("follow_up_horizon", follow_up_plan_settings),
}


def plan_overrides_check(
    *, experiment: Experiment | None, config: GatePolicyConfig, overrides: dict[str, Any] | None
) -> None:
    """Refuse (400) a run whose `policy_overrides` change a setting of the registered plan of a traffic
    layer it requires, naming each `policy_overrides.<key>`. (A setting the named policy changed after
    the start is not refused here: the layer answers `error`, "not the registered test".)"""
    if experiment is None or not overrides:
        return
    fields: dict[str, list[Reason | str]] = {}
    for layer, (field, settings_of) in PLAN_SETTINGS.items():
        plan = getattr(experiment, field) or {}
        if not plan or not config.requires(layer):
            continue
        for difference in settings_differences(plan=plan, effective=settings_of(config)):
            if difference.key in overrides:
                fields[f"policy_overrides.{difference.key}"] = [
                    reason(
                        HorizonsCode.OVERRIDE_REGISTERED,
                        name=experiment.name,
                        value=json.dumps(difference.registered),
                        layer=Term(layer),
                        at=moment(plan.get("registered_at")),
                    )
                ]
    if fields:
        keys = [key.removeprefix("policy_overrides.") for key in fields]
        raise ApplicationError(
            reason(HorizonsCode.NOT_REGISTERED_TEST, name=experiment.name, keys=keys),
            code="not_registered_test",
            fields=fields,
        )

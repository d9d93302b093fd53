"""Experiment lifecycle: every change of status or share goes through here and is audited.

draft → running ⇄ paused → promoted / rolled_back. At most one running or paused experiment
per family (a database constraint, so two concurrent starts cannot both win). The share only
grows while an experiment lives (so nobody already on the candidate is moved back); a
rollback sets it to 0 and ends the experiment.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from itertools import pairwise

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from canary.models import SHADOW_STEP, Experiment, TrafficShareChange
from canary.selectors.shadow import shadow_window_compare
from engines.input_checks import text_problem
from engines.reasons import Term, gettext_noop, reason_render, wordings_register
from engines.reasons import reason as reason_of
from engines.routing import BUCKETS, share_to_buckets
from engines.stats.comparisons import PASS
from engines.stats.shadow import ShadowBars
from registry.actors import Actor, actor_name, actor_require_role, actor_user
from registry.errors import ENGLISH, ApplicationError, CommonCode
from registry.models import AuditAction, ModelVersion
from registry.roles import RELEASE_MANAGER
from registry.services.audit import audit_record
from registry.services.serving import model_version_serving_verify
from registry.services.versions import model_version_promote
from registry.services.webhooks import WebhookEvent, webhook_send

Status = Experiment.Status
Cause = TrafficShareChange.Cause
# Who may act on an experiment (system parts, such as the canary analysis, act on their own).
LIFECYCLE_ROLES = frozenset({RELEASE_MANAGER})

# Guardrail keys and their defaults; analysis reads them (see canary.analysis).
GUARDRAIL_DEFAULTS: dict[str, float] = {
    "max_error_rate_increase": 0.02,  # candidate error rate − baseline, absolute
    "max_latency_ratio": 1.5,  # candidate median latency / baseline
    "max_latency_p95_ratio": 2.0,  # candidate p95 latency / baseline (tails are noisier: more room)
    # Streamed answers (what a chat user feels first, then how fast the text comes).
    "max_first_token_ratio": 1.5,  # candidate median time to first token / baseline
    "max_first_token_p95_ratio": 2.0,  # the same at p95
    "min_tokens_per_second_ratio": 0.67,  # candidate median tokens per second / baseline, at least
    "max_fallback_rate": 0.05,  # share of candidate requests answered by the baseline
    "min_requests": 200,  # per arm, before errors and latency are judged
    "min_sessions": 100,  # per arm, before turns per session are judged
    "min_probes": 20,  # paired probe results, before probes are judged
    # The shadow window (canary.selectors.shadow): pairs before it is judged, the bars it is held to.
    "min_shadow_pairs": 50,
    "min_shadow_agreement": 0.9,  # label agreement with the baseline's answers, 0..1
    "min_shadow_similarity": 0.3,  # mean chrF with the baseline's text, 0..1 (answers without labels)
    "max_shadow_error_increase": 0.02,  # candidate error rate − baseline, absolute
    "max_shadow_latency_ratio": 1.5,  # candidate median latency / baseline
}

# The shadow guardrails that are fractions (0..1).
SHADOW_FRACTIONS = frozenset({"min_shadow_agreement", "min_shadow_similarity", "max_shadow_error_increase"})

TRANSITIONS = {
    Status.DRAFT: {Status.RUNNING, Status.ROLLED_BACK},
    Status.RUNNING: {Status.PAUSED, Status.PROMOTED, Status.ROLLED_BACK},
    Status.PAUSED: {Status.RUNNING, Status.PROMOTED, Status.ROLLED_BACK},
    Status.PROMOTED: set(),
    Status.ROLLED_BACK: set(),
}

# What a move to each status does to the share (a start is a move to running from a draft).
STATUS_CAUSES = {
    Status.RUNNING: Cause.RESUME,
    Status.PAUSED: Cause.PAUSE,
    Status.PROMOTED: Cause.PROMOTE,
    Status.ROLLED_BACK: Cause.ROLLBACK,
}
# The audit action of a move to each status (a draft is only created, never moved to).
STATUS_AUDIT_ACTIONS: dict[str, AuditAction] = {
    Status.RUNNING: AuditAction.EXPERIMENT_RUNNING,
    Status.PAUSED: AuditAction.EXPERIMENT_PAUSED,
    Status.PROMOTED: AuditAction.EXPERIMENT_PROMOTED,
    Status.ROLLED_BACK: AuditAction.EXPERIMENT_ROLLED_BACK,
}


class ExperimentsCode(StrEnum):
    NOT_A_NUMBER = "experiments.not_a_number"
    MUST_BE_A_NUMBER = "experiments.must_be_a_number"
    SHARE_OUT_OF_RANGE = "experiments.share_out_of_range"
    SHARE_RANGE_NOTE = "experiments.share_range_note"
    SHARE_STEP = "experiments.share_step"
    SHARE_STEP_NOTE = "experiments.share_step_note"
    SHARE_TOO_SMALL = "experiments.share_too_small"
    SHARE_TOO_SMALL_NOTE = "experiments.share_too_small_note"
    GUARDRAILS_NOT_OBJECT = "experiments.guardrails_not_object"
    MUST_BE_OBJECT = "experiments.must_be_object"
    UNKNOWN_GUARDRAIL = "experiments.unknown_guardrail"
    KNOWN = "experiments.known"
    GUARDRAIL_NOT_FINITE = "experiments.guardrail_not_finite"
    FINITE_NOTE = "experiments.finite_note"
    GUARDRAIL_NOT_POSITIVE = "experiments.guardrail_not_positive"
    POSITIVE_NOTE = "experiments.positive_note"
    GUARDRAIL_NOT_COUNT = "experiments.guardrail_not_count"
    COUNT_NOTE = "experiments.count_note"
    SAME_VERSIONS = "experiments.same_versions"
    SAME_NOTE = "experiments.same_note"
    OTHER_FAMILIES = "experiments.other_families"
    FAMILY_NOTE = "experiments.family_note"
    RAMP_NOT_INCREASING = "experiments.ramp_not_increasing"
    RAMP_NOTE = "experiments.ramp_note"
    NOT_FIRST_STEP = "experiments.not_first_step"
    FIRST_STEP_NOTE = "experiments.first_step_note"
    NAME_TAKEN = "experiments.name_taken"
    TAKEN = "experiments.taken"
    ILLEGAL_TRANSITION = "experiments.illegal_transition"
    ALLOWED_FROM = "experiments.allowed_from"
    ALLOWED_NONE = "experiments.allowed_none"
    FAMILY_BUSY = "experiments.family_busy"
    FAMILY_BUSY_NOTE = "experiments.family_busy_note"
    GATE_REQUIRED = "experiments.gate_required"
    GATE_REQUIRED_NOTE = "experiments.gate_required_note"
    CANNOT_START = "experiments.cannot_start"
    ROLLBACK_REASON = "experiments.rollback_reason"
    CANNOT_RAMP = "experiments.cannot_ramp"
    RUNNING_OR_PAUSED = "experiments.running_or_paused"
    NO_NEXT_STEP = "experiments.no_next_step"
    NO_NEXT_STEP_NOTE = "experiments.no_next_step_note"
    RAMP_LOWERS = "experiments.ramp_lowers"
    ABOVE_NOTE = "experiments.above_note"
    HORIZON_REGISTERED = "experiments.horizon_registered"
    HORIZON_ONCE = "experiments.horizon_once"
    HORIZON_NOT_RUNNING = "experiments.horizon_not_running"
    MUST_BE_RUNNING = "experiments.must_be_running"
    SHADOW_NOT_FIRST = "experiments.shadow_not_first"
    SHADOW_FIRST_NOTE = "experiments.shadow_first_note"
    SHADOW_NO_SHARE = "experiments.shadow_no_share"
    SHADOW_NO_SHARE_NOTE = "experiments.shadow_no_share_note"
    SHADOW_ALONE = "experiments.shadow_alone"
    SHADOW_ALONE_NOTE = "experiments.shadow_alone_note"
    SHADOW_PERCENT = "experiments.shadow_percent"
    SHADOW_PERCENT_NOTE = "experiments.shadow_percent_note"
    GUARDRAIL_FRACTION = "experiments.guardrail_fraction"
    FRACTION_NOTE = "experiments.fraction_note"
    SHADOW_REQUIRED = "experiments.shadow_required"
    SHADOW_REQUIRED_NOTE = "experiments.shadow_required_note"


wordings_register(
    {
        ExperimentsCode.NOT_A_NUMBER: gettext_noop("{field} must be a number."),
        ExperimentsCode.MUST_BE_A_NUMBER: gettext_noop("must be a number"),
        ExperimentsCode.SHARE_OUT_OF_RANGE: gettext_noop("{field} must be in (0, 100]."),
        ExperimentsCode.SHARE_RANGE_NOTE: gettext_noop("must be more than 0 and at most 100"),
        ExperimentsCode.SHARE_STEP: gettext_noop("{field}: {problem}"),
        ExperimentsCode.SHARE_STEP_NOTE: gettext_noop("steps of {step:g} %"),
        # xgettext:no-python-format
        ExperimentsCode.SHARE_TOO_SMALL: gettext_noop("{field} {percent} % is below the smallest share."),
        ExperimentsCode.SHARE_TOO_SMALL_NOTE: gettext_noop("at least {step:g} % (one bucket of {buckets})"),
        ExperimentsCode.GUARDRAILS_NOT_OBJECT: gettext_noop("guardrails must be an object."),
        ExperimentsCode.MUST_BE_OBJECT: gettext_noop("must be an object"),
        ExperimentsCode.UNKNOWN_GUARDRAIL: gettext_noop("Unknown guardrail '{key}'."),
        ExperimentsCode.KNOWN: gettext_noop("known: {known}"),
        ExperimentsCode.GUARDRAIL_NOT_FINITE: gettext_noop("{field} must be a finite number ≥ 0."),
        ExperimentsCode.FINITE_NOTE: gettext_noop("must be a finite number ≥ 0"),
        ExperimentsCode.GUARDRAIL_NOT_POSITIVE: gettext_noop("{field} must be a ratio above 0."),
        ExperimentsCode.POSITIVE_NOTE: gettext_noop("must be more than 0 (1 = as fast as the baseline)"),
        ExperimentsCode.GUARDRAIL_NOT_COUNT: gettext_noop("{field} must be a whole number ≥ 1."),
        ExperimentsCode.COUNT_NOTE: gettext_noop("must be a whole number ≥ 1 (a minimum of samples)"),
        ExperimentsCode.SAME_VERSIONS: gettext_noop("The candidate must differ from the baseline."),
        ExperimentsCode.SAME_NOTE: gettext_noop("same as the baseline"),
        ExperimentsCode.OTHER_FAMILIES: gettext_noop(
            "{candidate} and {baseline} belong to different families."
        ),
        ExperimentsCode.FAMILY_NOTE: gettext_noop("must be a version of family '{family}'"),
        ExperimentsCode.RAMP_NOT_INCREASING: gettext_noop("The ramp plan must increase."),
        ExperimentsCode.RAMP_NOTE: gettext_noop("each step above the last"),
        ExperimentsCode.NOT_FIRST_STEP: gettext_noop("traffic_percent must be the ramp plan's first step."),
        ExperimentsCode.FIRST_STEP_NOTE: gettext_noop("the plan starts at {share:g} %"),
        ExperimentsCode.NAME_TAKEN: gettext_noop("An experiment named '{name}' exists."),
        ExperimentsCode.TAKEN: gettext_noop("taken"),
        ExperimentsCode.ILLEGAL_TRANSITION: gettext_noop(
            "Experiment {name} cannot go from {status} to {to}."
        ),
        ExperimentsCode.ALLOWED_FROM: gettext_noop("from {status} allowed: {allowed}"),
        ExperimentsCode.ALLOWED_NONE: gettext_noop("from {status} allowed: none: it has ended"),
        ExperimentsCode.FAMILY_BUSY: gettext_noop(
            "Family '{family}' already has a running or paused experiment."
        ),
        ExperimentsCode.FAMILY_BUSY_NOTE: gettext_noop("one running or paused experiment per family"),
        ExperimentsCode.GATE_REQUIRED: gettext_noop(
            "{ref} has no gate run whose clean accuracy and robustness passed: its share may not go above "
            "{cap:g} %."
        ),
        # xgettext:no-python-format
        ExperimentsCode.GATE_REQUIRED_NOTE: gettext_noop("at most {cap:g} % until an offline gate passes"),
        ExperimentsCode.CANNOT_START: gettext_noop("Experiment {name} cannot start: {why}."),
        ExperimentsCode.ROLLBACK_REASON: gettext_noop("A rollback needs a reason."),
        ExperimentsCode.CANNOT_RAMP: gettext_noop(
            "Experiment {name} is {status}; only a running or paused one can ramp."
        ),
        ExperimentsCode.RUNNING_OR_PAUSED: gettext_noop("must be running or paused"),
        ExperimentsCode.NO_NEXT_STEP: gettext_noop("The ramp plan has no next step; give traffic_percent."),
        ExperimentsCode.NO_NEXT_STEP_NOTE: gettext_noop("required: no further ramp step"),
        ExperimentsCode.RAMP_LOWERS: gettext_noop(
            "A ramp only raises the share (lowering it would move users off the candidate)."
        ),
        ExperimentsCode.ABOVE_NOTE: gettext_noop("must be above {share:g} %"),
        ExperimentsCode.HORIZON_REGISTERED: gettext_noop("Experiment {name} registered its horizon at {at}."),
        ExperimentsCode.HORIZON_ONCE: gettext_noop("registered once, when the experiment starts"),
        ExperimentsCode.HORIZON_NOT_RUNNING: gettext_noop(
            "Experiment {name} is {status}: a horizon is registered when it starts."
        ),
        ExperimentsCode.MUST_BE_RUNNING: gettext_noop("must be running"),
        ExperimentsCode.SHADOW_NOT_FIRST: gettext_noop(
            "A shadow step may only be the ramp plan's first step."
        ),
        ExperimentsCode.SHADOW_FIRST_NOTE: gettext_noop('"shadow" only as the first step'),
        ExperimentsCode.SHADOW_NO_SHARE: gettext_noop(
            "The plan starts with a shadow step (no user on the candidate): leave traffic_percent out."
        ),
        ExperimentsCode.SHADOW_NO_SHARE_NOTE: gettext_noop("leave it out: the shadow step sends no user"),
        ExperimentsCode.SHADOW_ALONE: gettext_noop("A shadow step needs a user step after it."),
        ExperimentsCode.SHADOW_ALONE_NOTE: gettext_noop('add the first share, e.g. ["shadow", 1, 10, 100]'),
        ExperimentsCode.SHADOW_PERCENT: gettext_noop("shadow_percent must be a number in (0, 100]."),
        ExperimentsCode.SHADOW_PERCENT_NOTE: gettext_noop(
            "the share of questions mirrored, more than 0, at most 100"
        ),
        ExperimentsCode.GUARDRAIL_FRACTION: gettext_noop("{field} must be a fraction between 0 and 1."),
        ExperimentsCode.FRACTION_NOTE: gettext_noop("between 0 and 1"),
        ExperimentsCode.SHADOW_REQUIRED: gettext_noop(
            "Experiment {name} needs a clean shadow window before users see {ref}; the window is {verdict}."
        ),
        ExperimentsCode.SHADOW_REQUIRED_NOTE: gettext_noop("a passing shadow window first"),
    }
)


def experiment_actions_allowed(*, experiment: Experiment) -> list[str]:
    """The lifecycle actions the experiment's status allows now (each action checks again)."""
    allowed = TRANSITIONS[experiment.status]
    checks = {
        "start": experiment.status == Status.DRAFT,
        "pause": Status.PAUSED in allowed,
        "resume": experiment.status == Status.PAUSED,
        "ramp": experiment.status in Experiment.ACTIVE,
        "promote": Status.PROMOTED in allowed,
        "rollback": Status.ROLLED_BACK in allowed,
    }
    return [action for action, ok in checks.items() if ok]


def qa_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _share_buckets(percent: object, field: str) -> int:
    if isinstance(percent, bool) or not isinstance(percent, (int, float)):
        raise ApplicationError(
            reason_of(ExperimentsCode.NOT_A_NUMBER, field=field),
            fields={field: [reason_of(ExperimentsCode.MUST_BE_A_NUMBER)]},
        )
    if not 0 < percent <= 100:
        raise ApplicationError(
            reason_of(ExperimentsCode.SHARE_OUT_OF_RANGE, field=field),
            fields={field: [reason_of(ExperimentsCode.SHARE_RANGE_NOTE)]},
        )
    try:
        buckets = share_to_buckets(float(percent))
    except ValueError as exc:
        raise ApplicationError(
            reason_of(ExperimentsCode.SHARE_STEP, field=field, problem=str(exc)),
            fields={field: [reason_of(ExperimentsCode.SHARE_STEP_NOTE, step=100 / BUCKETS)]},
        ) from None
    if buckets == 0:  # e.g. 1e-9: within share_to_buckets' rounding of 0, which would send nobody
        raise ApplicationError(
            reason_of(ExperimentsCode.SHARE_TOO_SMALL, field=field, percent=percent),
            fields={
                field: [reason_of(ExperimentsCode.SHARE_TOO_SMALL_NOTE, step=100 / BUCKETS, buckets=BUCKETS)]
            },
        )
    return buckets


def _guardrails_parse(guardrails: object) -> dict[str, float]:
    if guardrails is None:
        return dict(GUARDRAIL_DEFAULTS)
    if not isinstance(guardrails, dict):
        raise ApplicationError(
            reason_of(ExperimentsCode.GUARDRAILS_NOT_OBJECT),
            fields={"guardrails": [reason_of(ExperimentsCode.MUST_BE_OBJECT)]},
        )
    result = dict(GUARDRAIL_DEFAULTS)
    for key, value in guardrails.items():
        field = f"guardrails.{key}"
        if key not in GUARDRAIL_DEFAULTS:
            raise ApplicationError(
                reason_of(ExperimentsCode.UNKNOWN_GUARDRAIL, key=key),
                fields={field: [reason_of(ExperimentsCode.KNOWN, known=list(GUARDRAIL_DEFAULTS))]},
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise ApplicationError(
                reason_of(ExperimentsCode.GUARDRAIL_NOT_FINITE, field=field),
                fields={field: [reason_of(ExperimentsCode.FINITE_NOTE)]},
            )
        if key in SHADOW_FRACTIONS and value > 1:
            raise ApplicationError(
                reason_of(ExperimentsCode.GUARDRAIL_FRACTION, field=field),
                fields={field: [reason_of(ExperimentsCode.FRACTION_NOTE)]},
            )
        _guardrail_kind_check(key=key, value=value, field=field)
        result[key] = value
    return result


# Minimums of samples: a test needs at least one of each.
GUARDRAIL_COUNTS = ("min_requests", "min_sessions", "min_probes", "min_shadow_pairs")


def _guardrail_kind_check(*, key: str, value: float, field: str) -> None:
    """A ratio bar above 0 (a ratio is never 0 or below), a minimum of samples a whole number ≥ 1."""
    if key.endswith("_ratio") and value <= 0:
        raise ApplicationError(
            reason_of(ExperimentsCode.GUARDRAIL_NOT_POSITIVE, field=field),
            fields={field: [reason_of(ExperimentsCode.POSITIVE_NOTE)]},
        )
    if key in GUARDRAIL_COUNTS and (value < 1 or value != int(value)):
        raise ApplicationError(
            reason_of(ExperimentsCode.GUARDRAIL_NOT_COUNT, field=field),
            fields={field: [reason_of(ExperimentsCode.COUNT_NOTE)]},
        )


def _arms_check(*, baseline: ModelVersion, candidate: ModelVersion) -> None:
    """Two versions of one family."""
    if candidate.pk == baseline.pk:
        raise ApplicationError(
            reason_of(ExperimentsCode.SAME_VERSIONS),
            fields={"candidate": [reason_of(ExperimentsCode.SAME_NOTE)]},
        )
    if candidate.family != baseline.family:
        raise ApplicationError(
            reason_of(ExperimentsCode.OTHER_FAMILIES, candidate=candidate.ref, baseline=baseline.ref),
            fields={"candidate": [reason_of(ExperimentsCode.FAMILY_NOTE, family=baseline.family)]},
        )


def _share_plan(
    *, traffic_percent: float | None, ramp: Sequence[float | str] | None
) -> tuple[int, list[float | str]]:
    """The starting share (in buckets) and the ramp plan as stored: the plan increases and starts at
    the share (which defaults to its first step, else 1 %). A first step "shadow" starts at 0 % of
    users, questions mirrored to the candidate (canary.services.shadow), and needs a user step after."""
    plan = list(ramp or [])
    shadow = bool(plan) and plan[0] == SHADOW_STEP
    for index, step in enumerate(plan[1:], start=1):
        if step == SHADOW_STEP:
            raise ApplicationError(
                reason_of(ExperimentsCode.SHADOW_NOT_FIRST),
                fields={f"ramp[{index}]": [reason_of(ExperimentsCode.SHADOW_FIRST_NOTE)]},
            )
    offset = 1 if shadow else 0
    steps = [_share_buckets(step, f"ramp[{i + offset}]") for i, step in enumerate(plan[offset:])]
    if any(b <= a for a, b in pairwise(steps)):
        raise ApplicationError(
            reason_of(ExperimentsCode.RAMP_NOT_INCREASING),
            fields={"ramp": [reason_of(ExperimentsCode.RAMP_NOTE)]},
        )
    stored: list[float | str] = [*([SHADOW_STEP] if shadow else []), *(b * 100 / BUCKETS for b in steps)]
    if shadow:
        if not steps:
            raise ApplicationError(
                reason_of(ExperimentsCode.SHADOW_ALONE),
                fields={"ramp": [reason_of(ExperimentsCode.SHADOW_ALONE_NOTE)]},
            )
        if traffic_percent is not None:
            raise ApplicationError(
                reason_of(ExperimentsCode.SHADOW_NO_SHARE),
                fields={"traffic_percent": [reason_of(ExperimentsCode.SHADOW_NO_SHARE_NOTE)]},
            )
        return 0, stored
    if traffic_percent is None:
        return (steps[0] if steps else 100), stored
    buckets = _share_buckets(traffic_percent, "traffic_percent")
    if steps and buckets != steps[0]:
        raise ApplicationError(
            reason_of(ExperimentsCode.NOT_FIRST_STEP),
            fields={
                "traffic_percent": [
                    reason_of(ExperimentsCode.FIRST_STEP_NOTE, share=steps[0] * 100 / BUCKETS)
                ]
            },
        )
    return buckets, stored


def _shadow_percent_check(shadow_percent: object) -> float:
    if (
        isinstance(shadow_percent, bool)
        or not isinstance(shadow_percent, (int, float))
        or not 0 < shadow_percent <= 100
        or share_to_buckets(float(shadow_percent)) == 0
    ):
        raise ApplicationError(
            reason_of(ExperimentsCode.SHADOW_PERCENT),
            fields={"shadow_percent": [reason_of(ExperimentsCode.SHADOW_PERCENT_NOTE)]},
        )
    return float(shadow_percent)


def experiment_create(
    *,
    name: str,
    baseline: ModelVersion,
    candidate: ModelVersion,
    actor: Actor,
    traffic_percent: float | None = None,
    ramp: Sequence[float | str] | None = None,
    ramp_auto: bool = False,
    guardrails: dict | None = None,
    qa_tokens: Sequence[str] = (),
    is_demo: bool = False,
    shadow_percent: float = 100.0,
    require_clean_shadow: bool = False,
) -> Experiment:
    """A draft experiment. With a ramp plan, the share starts at its first step; a plan that starts
    with "shadow" mirrors `shadow_percent` of the questions to the candidate first, and with
    `require_clean_shadow` its first user step waits for a passing shadow window. `is_demo` marks
    the bundled demo's own experiment (its pages say its traffic is synthetic)."""
    actor_require_role(actor, LIFECYCLE_ROLES, action="create an experiment")
    _arms_check(baseline=baseline, candidate=candidate)
    buckets, plan = _share_plan(traffic_percent=traffic_percent, ramp=ramp)
    shadow_percent = _shadow_percent_check(shadow_percent)
    if Experiment.objects.filter(name=name).exists():
        raise ApplicationError(
            reason_of(ExperimentsCode.NAME_TAKEN, name=name),
            code="conflict",
            fields={"name": [reason_of(ExperimentsCode.TAKEN)]},
            status_code=409,
        )
    with transaction.atomic():
        experiment = Experiment.objects.create(
            name=name,
            family=candidate.family,
            baseline=baseline,
            candidate=candidate,
            traffic_buckets=buckets,
            ramp=plan,
            ramp_auto=ramp_auto,
            shadow_percent=shadow_percent,
            require_clean_shadow=require_clean_shadow,
            guardrails=_guardrails_parse(guardrails),
            qa_token_hashes=[qa_token_hash(t) for t in qa_tokens],
            is_demo=is_demo,
            created_by=actor_user(actor),
        )
        audit_record(
            actor=actor,
            action=AuditAction.EXPERIMENT_CREATE,
            target=experiment,
            after={
                "baseline": baseline.ref,
                "candidate": candidate.ref,
                "traffic_percent": experiment.traffic_percent,
                "ramp": experiment.ramp,
                **({"shadow_percent": shadow_percent} if experiment.has_shadow_step else {}),
                **({"require_clean_shadow": True} if require_clean_shadow else {}),
            },
        )
    return experiment


def _reason_check(reason: str) -> None:
    """A reason is stored (on the experiment and its audit row): refuse what the database cannot."""
    problem = text_problem(reason)
    if problem:
        raise ApplicationError(
            reason_of(CommonCode.FIELD_PROBLEM, field="reason", problem=problem), fields={"reason": [problem]}
        )


def _locked(experiment: Experiment) -> Experiment:
    return Experiment.objects.select_for_update().get(pk=experiment.pk)


def _share_change_record(*, experiment: Experiment, cause: str, actor: Actor, at: datetime) -> None:
    """The share in force from `at` on (0 while paused or rolled back), beside the audit row."""
    buckets = 0 if cause in (Cause.PAUSE, Cause.ROLLBACK) else experiment.traffic_buckets
    TrafficShareChange.objects.create(
        experiment=experiment,
        cause=cause,
        buckets=buckets,
        at=at,
        actor=actor_user(actor),
        actor_name=actor_name(actor),
    )


def _status_set(
    *, experiment: Experiment, to: str, actor: Actor, reason: str, at: datetime, **changes: object
) -> Experiment:
    actor_require_role(actor, LIFECYCLE_ROLES, action=f"move an experiment to {to}")
    _reason_check(reason)
    with transaction.atomic():
        locked = _locked(experiment)
        if to not in TRANSITIONS[locked.status]:
            status, allowed = Term(locked.status), sorted(TRANSITIONS[locked.status])
            note = (
                reason_of(ExperimentsCode.ALLOWED_FROM, status=status, allowed=[Term(a) for a in allowed])
                if allowed
                else reason_of(ExperimentsCode.ALLOWED_NONE, status=status)
            )
            raise ApplicationError(
                reason_of(ExperimentsCode.ILLEGAL_TRANSITION, name=locked.name, status=status, to=Term(to)),
                code="illegal_transition",
                fields={"status": [note]},
                status_code=409,
            )
        before = {"status": locked.status, "traffic_percent": locked.traffic_percent}
        locked.status = to
        for field, value in changes.items():
            setattr(locked, field, value)
        if "share_since" in changes:  # a new window, at the share in force now
            locked.window_buckets = locked.traffic_buckets
        try:
            with transaction.atomic():
                locked.save()
        except IntegrityError:
            raise ApplicationError(
                reason_of(ExperimentsCode.FAMILY_BUSY, family=locked.family),
                code="conflict",
                fields={"family": [reason_of(ExperimentsCode.FAMILY_BUSY_NOTE)]},
                status_code=409,
            ) from None
        audit_record(
            actor=actor,
            action=STATUS_AUDIT_ACTIONS[to],
            target=locked,
            before=before,
            after={"status": locked.status, "traffic_percent": locked.traffic_percent},
            reason=reason,
        )
        started = to == Status.RUNNING and before["status"] == Status.DRAFT
        cause = Cause.START if started else STATUS_CAUSES[to]
        _share_change_record(experiment=locked, cause=cause, actor=actor, at=at)
    return locked


def _share_cap_check(*, experiment: Experiment, buckets: int, field: str) -> None:
    """Above the ungated share the candidate needs a gate run whose offline layers passed (the
    traffic layers need this canary's own traffic, so they cannot come first)."""
    cap = share_to_buckets(settings.EVALHUB_CANARY_UNGATED_MAX_PERCENT)
    if buckets > cap and experiment.candidate.offline_gate_passed_at is None:
        raise ApplicationError(
            reason_of(ExperimentsCode.GATE_REQUIRED, ref=experiment.candidate.ref, cap=cap * 100 / BUCKETS),
            code="gate_required",
            fields={field: [reason_of(ExperimentsCode.GATE_REQUIRED_NOTE, cap=cap * 100 / BUCKETS)]},
            status_code=409,
        )


def _serving_check(*, experiment: Experiment) -> None:
    """Both arms serve the models their gate judged: a serving address that answers with another
    model's config hash refuses the start (409). One that does not answer yet (its server not started)
    is checked again on the proxy's first call."""
    for version in (experiment.baseline, experiment.candidate):
        check = model_version_serving_verify(version=version)
        if check is not None and check.mismatch and check.problem is not None:
            raise ApplicationError(
                reason_of(ExperimentsCode.CANNOT_START, name=experiment.name, why=check.problem),
                code="serving_mismatch",
                fields={"serving_url": [check.problem]},
                status_code=409,
            )


def experiment_start(*, experiment: Experiment, actor: Actor, reason: str = "") -> Experiment:
    _share_cap_check(experiment=experiment, buckets=experiment.traffic_buckets, field="traffic_percent")
    _serving_check(experiment=experiment)
    now = timezone.now()
    return _status_set(
        experiment=experiment,
        to=Status.RUNNING,
        actor=actor,
        reason=reason,
        at=now,
        started_at=now,
        share_since=now,
    )


def experiment_pause(*, experiment: Experiment, actor: Actor, reason: str = "") -> Experiment:
    now = timezone.now()
    return _status_set(
        experiment=experiment, to=Status.PAUSED, actor=actor, reason=reason, at=now, paused_at=now
    )


def experiment_resume(*, experiment: Experiment, actor: Actor, reason: str = "") -> Experiment:
    # While paused everyone was on the baseline: the traffic layers count from the resume on.
    now = timezone.now()
    return _status_set(
        experiment=experiment,
        to=Status.RUNNING,
        actor=actor,
        reason=reason,
        at=now,
        share_since=now,
        paused_at=None,
    )


def experiment_rollback(*, experiment: Experiment, actor: Actor, reason: str) -> Experiment:
    """Everyone back on the baseline at once; the experiment ends; a webhook tells the world."""
    actor_require_role(actor, LIFECYCLE_ROLES, action="roll an experiment back")
    if not reason.strip():
        raise ApplicationError(
            reason_of(ExperimentsCode.ROLLBACK_REASON), fields={"reason": [reason_of(CommonCode.REQUIRED)]}
        )
    now = timezone.now()
    with transaction.atomic():
        rolled_back = _status_set(
            experiment=experiment,
            to=Status.ROLLED_BACK,
            actor=actor,
            reason=reason,
            at=now,
            traffic_buckets=0,
            ended_at=now,
            end_reason=reason,
        )
        webhook_send(
            event=WebhookEvent.EXPERIMENT_ROLLED_BACK,
            payload={
                "experiment": rolled_back.name,
                "baseline": rolled_back.baseline.ref,
                "candidate": rolled_back.candidate.ref,
                "reason": reason,
                "by": actor_name(actor),
            },
        )
    return rolled_back


def experiment_promote(*, experiment: Experiment, actor: Actor, reason: str = "") -> Experiment:
    """The candidate takes all traffic and the experiment ends, in one transaction with the registry:
    the candidate becomes `promoted`, the version it replaces `retired`. Only an approved candidate
    (an approval decision, or a confirmed two-person override) is promoted: 409 otherwise. From the shadow
    step of an experiment that requires a clean shadow window, only with one (as a ramp)."""
    _clean_shadow_check(experiment=experiment, actor=actor)
    now = timezone.now()
    with transaction.atomic():
        promoted = _status_set(
            experiment=experiment,
            to=Status.PROMOTED,
            actor=actor,
            reason=reason,
            at=now,
            traffic_buckets=BUCKETS,
            ended_at=now,
            end_reason=reason,
        )
        candidate = ModelVersion.objects.select_for_update().get(pk=promoted.candidate_id)
        retired = model_version_promote(
            version=candidate, actor=actor, reason=f"experiment {promoted.name} promoted"
        )
        promoted.candidate = candidate
        webhook_send(
            event=WebhookEvent.EXPERIMENT_PROMOTED,
            payload={
                "experiment": promoted.name,
                "promoted": candidate.ref,
                "retired": [v.ref for v in retired],
                "reason": reason,
                "by": actor_name(actor),
            },
        )
    return promoted


def _step_at(*, ramp: list, buckets: int, default: int) -> int:
    """Where the plan has this share (or passed it), it now stands at that step."""
    steps = [i for i, p in enumerate(ramp) if p != SHADOW_STEP and share_to_buckets(p) <= buckets]
    return max(steps, default=default)


def experiment_ramp(
    *,
    experiment: Experiment,
    actor: Actor,
    traffic_percent: float | None = None,
    reason: str = "",
) -> Experiment:
    """Raise the candidate's share: to `traffic_percent`, or to the ramp plan's next step. Above the
    ungated share it needs an offline gate pass; to 100 % it is a promotion (`experiment_promote`)."""
    actor_require_role(actor, LIFECYCLE_ROLES, action="ramp an experiment")
    _reason_check(reason)
    _clean_shadow_check(experiment=experiment, actor=actor)
    with transaction.atomic():
        locked = _locked(experiment)
        if locked.status not in Experiment.ACTIVE:
            raise ApplicationError(
                reason_of(ExperimentsCode.CANNOT_RAMP, name=locked.name, status=Term(locked.status)),
                code="illegal_transition",
                fields={"status": [reason_of(ExperimentsCode.RUNNING_OR_PAUSED)]},
                status_code=409,
            )
        step = locked.ramp_step
        if traffic_percent is None:
            if step + 1 >= len(locked.ramp):
                raise ApplicationError(
                    reason_of(ExperimentsCode.NO_NEXT_STEP),
                    fields={"traffic_percent": [reason_of(ExperimentsCode.NO_NEXT_STEP_NOTE)]},
                )
            step += 1
            buckets = share_to_buckets(locked.ramp[step])
        else:
            buckets = _share_buckets(traffic_percent, "traffic_percent")
            step = _step_at(ramp=locked.ramp, buckets=buckets, default=step)
        if buckets <= locked.traffic_buckets:
            raise ApplicationError(
                reason_of(ExperimentsCode.RAMP_LOWERS),
                fields={
                    "traffic_percent": [reason_of(ExperimentsCode.ABOVE_NOTE, share=locked.traffic_percent)]
                },
            )
        if buckets == BUCKETS:
            return experiment_promote(experiment=locked, actor=actor, reason=reason or "ramped to 100 %")
        _share_cap_check(experiment=locked, buckets=buckets, field="traffic_percent")
        before = {"traffic_percent": locked.traffic_percent, "ramp_step": locked.ramp_step}
        locked.traffic_buckets, locked.ramp_step = buckets, step
        now = timezone.now()
        locked.share_since, locked.window_buckets = now, buckets
        locked.save(update_fields=["traffic_buckets", "ramp_step", "share_since", "window_buckets"])
        audit_record(
            actor=actor,
            action=AuditAction.EXPERIMENT_RAMP,
            target=locked,
            before=before,
            after={"traffic_percent": locked.traffic_percent, "ramp_step": step},
            reason=reason,
        )
        _share_change_record(experiment=locked, cause=Cause.RAMP, actor=actor, at=now)
    return locked


def experiment_shadow_bars(*, experiment: Experiment) -> ShadowBars:
    """The experiment's shadow guardrails (its own, else the defaults)."""
    guardrails = {**GUARDRAIL_DEFAULTS, **experiment.guardrails}
    return ShadowBars(
        min_pairs=int(guardrails["min_shadow_pairs"]),
        min_agreement=guardrails["min_shadow_agreement"],
        min_similarity=guardrails["min_shadow_similarity"],
        max_error_increase=guardrails["max_shadow_error_increase"],
        max_latency_ratio=guardrails["max_shadow_latency_ratio"],
    )


def _clean_shadow_check(*, experiment: Experiment, actor: Actor) -> None:
    """Leaving the shadow step (a ramp or a promotion) when the experiment requires a clean shadow
    window: a window that does not pass refuses it (409), and the refusal is audited (its own row,
    kept)."""
    current = Experiment.objects.select_related("candidate").get(pk=experiment.pk)
    if not (current.in_shadow and current.require_clean_shadow):
        return
    bars = experiment_shadow_bars(experiment=current)
    window = shadow_window_compare(experiment=current, bars=bars).comparison
    if window.verdict == PASS:
        return
    audit_record(
        actor=actor,
        action=AuditAction.EXPERIMENT_RAMP_REFUSED,
        target=current,
        before={"ramp_step": current.ramp_step, "traffic_percent": current.traffic_percent},
        after={"refused": "shadow_required", "shadow_verdict": window.verdict, "pairs": window.pairs},
        reason="; ".join(reason_render(item, words=ENGLISH) for item in window.reasons),
    )
    raise ApplicationError(
        reason_of(
            ExperimentsCode.SHADOW_REQUIRED,
            name=current.name,
            ref=current.candidate.ref,
            verdict=Term(window.verdict),
        ),
        code="shadow_required",
        fields={"ramp_step": [reason_of(ExperimentsCode.SHADOW_REQUIRED_NOTE), *window.reasons]},
        status_code=409,
    )


def experiment_horizon_register(
    *, experiment: Experiment, horizon: dict, actor: Actor, follow_up: dict | None = None
) -> Experiment:
    """Store layer 3's plan (`horizon`: its frozen settings and fixed horizon) and layer 2's
    (`follow_up`) on a running experiment, once (the gate sizes them when the experiment starts:
    `gate.services.horizons`); audited. A horizon is a commitment made before the data: a second
    registration is refused (409); replacing the plans is `canary.services.plans.experiment_plans_replace`."""
    actor_require_role(actor, LIFECYCLE_ROLES, action="register an experiment's horizon")
    with transaction.atomic():
        locked = _locked(experiment)
        if locked.business_horizon or locked.follow_up_horizon:
            registered = (locked.business_horizon or locked.follow_up_horizon).get("registered_at")
            raise ApplicationError(
                reason_of(ExperimentsCode.HORIZON_REGISTERED, name=locked.name, at=str(registered)),
                code="conflict",
                fields={"business_horizon": [reason_of(ExperimentsCode.HORIZON_ONCE)]},
                status_code=409,
            )
        if locked.status != Status.RUNNING:
            raise ApplicationError(
                reason_of(ExperimentsCode.HORIZON_NOT_RUNNING, name=locked.name, status=Term(locked.status)),
                code="illegal_transition",
                fields={"status": [reason_of(ExperimentsCode.MUST_BE_RUNNING)]},
                status_code=409,
            )
        locked.business_horizon = horizon
        locked.follow_up_horizon = follow_up or {}
        locked.save(update_fields=["business_horizon", "follow_up_horizon"])
        after = {**horizon, "follow_up": follow_up} if follow_up else horizon
        audit_record(
            actor=actor, action=AuditAction.EXPERIMENT_HORIZON_REGISTER, target=locked, before={}, after=after
        )
    return locked

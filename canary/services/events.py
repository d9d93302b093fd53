"""Telemetry ingestion: batches of turn and outcome events, all or nothing, idempotent by event_id.

Every event of a batch is checked first; any error rejects the whole batch (errors by index,
e.g. `events[3].arm`), so nothing is half-written. Valid batches are inserted in bulk in one
transaction; an event_id the experiment already has is counted as a duplicate and not stored
again, so a retried batch never double counts. Returning means the accepted events are committed.

What is checked, beyond types and lengths:
- text: nothing the database cannot store (NUL, unpaired surrogates); `turn_index` within its column;
- `timestamp`: ISO 8601 with a time zone, a date that exists, within the experiment's life (from
  its creation to its end, or now) give or take EVALHUB_EVENTS_CLOCK_SKEW_SECONDS (300 s);
- `arm` and `version` (optional, a ref such as "family:label"): what the router gave the event's
  unit (`user_id`, else `session_id`) at that time, within the same skew (`ArmHistory`: exact
  since the last share change, lenient before it, where the steps are not stored). An outcome
  without a `user_id` names no unit, so its arm is not checked. An event of an arm forced by QA
  carries the allow-listed `qa_token` that forced it (never stored). The proxy's own turn events,
  forced ones included, and probe traffic are written by their services, not through here.

Hand-written checks, not a DRF serializer: a serializer costs ~50 µs per field, the largest share
of the ingestion budget at thousands of events per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from canary.models import Experiment, OutcomeEvent, TurnEvent
from canary.services.assignment import ArmHistory, experiment_arm_history, qa_token_allowed, unit_id_of
from engines.input_checks import FieldCode, InputCode, InputProblem, iso_datetime_parse, text_problem
from engines.reasons import Reason, Term, gettext_noop, reason, wordings_register
from engines.routing import ARMS, CANDIDATE
from registry.actors import Actor, actor_require_role
from registry.errors import ApplicationError
from registry.roles import EVENT_ROLES

KINDS = ("turn", "outcome")
ROLES = tuple(TurnEvent.Role.values)
MAX_TEXT = 100_000
MAX_ID = 200
MAX_TURN_INDEX = 2**31 - 1  # turn_index's column: a PostgreSQL integer
MAX_TOKENS = 2**31 - 1  # output_tokens' column too


class EventsCode(StrEnum):
    NOT_A_LIST = "events.not_a_list"
    A_NON_EMPTY_LIST = "events.a_non_empty_list"
    BATCH_TOO_LARGE = "events.batch_too_large"
    AT_MOST = "events.at_most"
    BATCH_REFUSED = "events.batch_refused"
    TIMESTAMP_REQUIRED = "events.timestamp_required"
    OUTSIDE_LIFE = "events.outside_life"
    OUTSIDE_LIFE_ENDED = "events.outside_life_ended"
    NOT_ALLOWED = "events.not_allowed"
    ROUTER_ARM = "events.router_arm"
    ARM_VERSION = "events.arm_version"
    NO_EXPERIMENT = "events.no_experiment"
    REPEATS = "events.repeats"
    ANSWERS_ONLY = "events.answers_only"
    WITHIN_LATENCY = "events.within_latency"


wordings_register(
    {
        EventsCode.NOT_A_LIST: gettext_noop("events must be a non-empty list."),
        EventsCode.A_NON_EMPTY_LIST: gettext_noop("a non-empty list"),
        EventsCode.BATCH_TOO_LARGE: gettext_noop("A batch holds at most {limit} events; this one has {n}."),
        EventsCode.AT_MOST: gettext_noop("at most {limit} events per batch"),
        EventsCode.BATCH_REFUSED: gettext_noop("{problems} problem(s) in the batch; nothing was stored."),
        EventsCode.TIMESTAMP_REQUIRED: gettext_noop("required (ISO 8601 with a time zone)"),
        EventsCode.OUTSIDE_LIFE: gettext_noop(
            "must lie within the experiment's life, {start} to now, {end}, give or take {skew} s"
        ),
        EventsCode.OUTSIDE_LIFE_ENDED: gettext_noop(
            "must lie within the experiment's life, {start} to its end {end}, give or take {skew} s"
        ),
        EventsCode.NOT_ALLOWED: gettext_noop("not on the experiment's allow-list"),
        EventsCode.ANSWERS_ONLY: gettext_noop("only on an assistant's answer"),
        EventsCode.WITHIN_LATENCY: gettext_noop("must be ≥ 0 and at most latency_ms (given with it)"),
        EventsCode.ROUTER_ARM: gettext_noop(
            "the router had {unit} on the {arms} arm then (an arm forced by QA needs the qa_token that "
            "forced it)"
        ),
        EventsCode.ARM_VERSION: gettext_noop("the {arm} arm's version is {ref}"),
        EventsCode.NO_EXPERIMENT: gettext_noop("no experiment named '{name}'"),
        EventsCode.REPEATS: gettext_noop("repeats events[{index}] in this batch"),
    }
)


@dataclass(frozen=True)
class IngestResult:
    received: int
    accepted: int  # newly stored
    duplicates: int  # already stored (a retried batch)


class _Errors:
    def __init__(self) -> None:
        self.fields: dict[str, list[Reason | str]] = {}

    def add(self, field: str, message: Reason | str) -> None:
        self.fields.setdefault(field, []).append(message)


def _string(
    event: dict, key: str, where: str, errors: _Errors, *, required: bool, limit: int = MAX_ID
) -> str:
    value = event.get(key)
    if value is None or value == "":
        if required:
            errors.add(f"{where}.{key}", reason(FieldCode.REQUIRED))
        return ""
    if not isinstance(value, str):
        errors.add(f"{where}.{key}", reason(FieldCode.STRING))
        return ""
    if len(value) > limit:
        errors.add(f"{where}.{key}", reason(FieldCode.AT_MOST_CHARS, limit=limit))
    problem = text_problem(value)
    if problem:
        errors.add(f"{where}.{key}", problem)
        return ""
    return value


# Sums of squares of a metric are aggregated in SQL (float8): one absurd value would overflow them.
MAX_MAGNITUDE = 1e9


def _number(event: dict, key: str, where: str, errors: _Errors, *, required: bool) -> float | None:
    value = event.get(key)
    if value is None:
        if required:
            errors.add(f"{where}.{key}", reason(FieldCode.REQUIRED))
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        errors.add(f"{where}.{key}", reason(InputCode.NOT_FINITE))
        return None
    if abs(value) > MAX_MAGNITUDE:
        errors.add(
            f"{where}.{key}", reason(FieldCode.BETWEEN, low=f"-{MAX_MAGNITUDE:g}", high=f"{MAX_MAGNITUDE:g}")
        )
        return None
    return float(value)


class _Checks:
    """What one batch's events are checked against: their experiments, each one's arm history and
    QA allow-list, the time now and the clock skew allowed."""

    def __init__(self, experiments: dict[str, Experiment]) -> None:
        self.experiments = experiments
        self.now = timezone.now()
        self.skew = timedelta(seconds=settings.EVALHUB_EVENTS_CLOCK_SKEW_SECONDS)
        self._histories: dict[int, ArmHistory] = {}
        self._forcing: dict[tuple[int, str], bool] = {}

    def arms_at(self, experiment: Experiment, unit_id: str, at: datetime) -> frozenset[str]:
        if experiment.pk not in self._histories:
            self._histories[experiment.pk] = experiment_arm_history(experiment=experiment)
        return self._histories[experiment.pk].arms_at(unit_id=unit_id, at=at, skew=self.skew)

    def may_force(self, experiment: Experiment, qa_token: str) -> bool:
        key = (experiment.pk, qa_token)
        if key not in self._forcing:
            self._forcing[key] = qa_token_allowed(experiment=experiment, qa_token=qa_token)
        return self._forcing[key]


def _timestamp(
    event: dict, where: str, experiment: Experiment | None, checks: _Checks, errors: _Errors
) -> datetime | None:
    value = event.get("timestamp")
    if value is None:
        errors.add(f"{where}.timestamp", reason(EventsCode.TIMESTAMP_REQUIRED))
        return None
    try:
        occurred_at = iso_datetime_parse(value)
    except InputProblem as exc:
        errors.add(f"{where}.timestamp", exc.reason)
        return None
    if experiment is not None:
        last = experiment.ended_at or checks.now
        if not experiment.created_at - checks.skew <= occurred_at <= last + checks.skew:
            code = EventsCode.OUTSIDE_LIFE_ENDED if experiment.ended_at else EventsCode.OUTSIDE_LIFE
            start, end = experiment.created_at, last
            errors.add(
                f"{where}.timestamp",
                reason(
                    code,
                    start=f"{start:%Y-%m-%dT%H:%M:%SZ}",
                    end=f"{end:%Y-%m-%dT%H:%M:%SZ}",
                    skew=f"{checks.skew.total_seconds():g}",
                ),
            )
            return None
    return occurred_at


def _routing_check(
    event: dict,
    where: str,
    *,
    experiment: Experiment,
    arm: str,
    unit_id: str | None,
    occurred_at: datetime | None,
    checks: _Checks,
    errors: _Errors,
) -> int | None:
    """The event's arm against the router's (unless a QA token forced it) and its `version`, when
    given, against the arm's. Returns the id of the version given, to store."""
    qa_token = _string(event, "qa_token", where, errors, required=False)
    if qa_token:
        if not checks.may_force(experiment, qa_token):
            errors.add(f"{where}.qa_token", reason(EventsCode.NOT_ALLOWED))
    elif unit_id is not None and occurred_at is not None:
        arms = checks.arms_at(experiment, unit_id, occurred_at)
        if arm not in arms:
            errors.add(
                f"{where}.arm",
                reason(EventsCode.ROUTER_ARM, unit=unit_id, arms=[Term(a) for a in sorted(arms)]),
            )
    version = experiment.candidate if arm == CANDIDATE else experiment.baseline
    given = _string(event, "version", where, errors, required=False)
    if given and given != version.ref:
        errors.add(f"{where}.version", reason(EventsCode.ARM_VERSION, arm=Term(arm), ref=version.ref))
    return version.pk if given else None


def _turn(event: dict, where: str, errors: _Errors, **fields: object) -> TurnEvent:
    """A turn event's own fields checked, beside those every event has (`fields`)."""
    role = event.get("role")
    if role not in ROLES:
        errors.add(f"{where}.role", reason(FieldCode.ONE_OF, choices=list(ROLES)))
    turn_index = event.get("turn_index")
    if (
        isinstance(turn_index, bool)
        or not isinstance(turn_index, int)
        or not 0 <= turn_index <= MAX_TURN_INDEX
    ):
        errors.add(f"{where}.turn_index", reason(FieldCode.INTEGER_BETWEEN, low=0, high=MAX_TURN_INDEX))
    latency = _number(event, "latency_ms", where, errors, required=False)
    if latency is not None and latency < 0:
        errors.add(f"{where}.latency_ms", reason(FieldCode.NON_NEGATIVE))
    stream = _stream_facts(event, where, errors, latency=latency, answer=role == TurnEvent.Role.ASSISTANT)
    return TurnEvent(
        **fields,
        turn_index=turn_index,
        role=role,
        text=_string(event, "text", where, errors, required=False, limit=MAX_TEXT),
        latency_ms=latency,
        error=_string(event, "error", where, errors, required=False, limit=MAX_TEXT),
        source=TurnEvent.Source.CLIENT,
        **stream,
    )


def _stream_facts(event: dict, where: str, errors: _Errors, *, latency: float | None, answer: bool) -> dict:
    """A streamed answer's time to first token and output tokens, as a chat app that streams
    measures them (the proxy records its own): optional, on answers only."""
    first_token = _number(event, "first_token_ms", where, errors, required=False)
    tokens = event.get("output_tokens")
    for key, given in (("first_token_ms", first_token), ("output_tokens", tokens)):
        if given is not None and not answer:
            errors.add(f"{where}.{key}", reason(EventsCode.ANSWERS_ONLY))
    if first_token is not None and (latency is None or not 0 <= first_token <= latency):
        errors.add(f"{where}.first_token_ms", reason(EventsCode.WITHIN_LATENCY))
    if tokens is not None and (
        isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= MAX_TOKENS
    ):
        errors.add(f"{where}.output_tokens", reason(FieldCode.INTEGER_BETWEEN, low=0, high=MAX_TOKENS))
        tokens = None
    if first_token is None and tokens is None:
        return {}
    return {"streamed": first_token is not None, "first_token_ms": first_token, "output_tokens": tokens}


def _parse(event: object, index: int, checks: _Checks, errors: _Errors):
    where = f"events[{index}]"
    if not isinstance(event, dict):
        errors.add(where, reason(FieldCode.OBJECT))
        return None
    kind = event.get("type")
    if kind not in KINDS:
        errors.add(f"{where}.type", reason(FieldCode.ONE_OF, choices=list(KINDS)))
        return None
    name = _string(event, "experiment", where, errors, required=True)
    experiment = checks.experiments.get(name)
    if name and experiment is None:
        errors.add(f"{where}.experiment", reason(EventsCode.NO_EXPERIMENT, name=name))
    event_id = _string(event, "event_id", where, errors, required=True, limit=100)
    arm = event.get("arm")
    if arm not in ARMS:
        errors.add(f"{where}.arm", reason(FieldCode.ONE_OF, choices=list(ARMS)))
    occurred_at = _timestamp(event, where, experiment, checks, errors)
    user_id = _string(event, "user_id", where, errors, required=False)
    # The router's unit: the user, else (turns only) the session. An outcome's unit_id is its own.
    session_id = _string(event, "session_id", where, errors, required=True) if kind == "turn" else ""
    unit_id = unit_id_of(user_id=user_id, session_id=session_id) if user_id or session_id else None
    version_id = None
    if experiment is not None and arm in ARMS:
        version_id = _routing_check(
            event,
            where,
            experiment=experiment,
            arm=arm,
            unit_id=unit_id,
            occurred_at=occurred_at,
            checks=checks,
            errors=errors,
        )
    common = {"experiment": experiment, "event_id": event_id, "arm": arm, "occurred_at": occurred_at}
    if kind == "turn":
        return _turn(
            event, where, errors, session_id=session_id, user_id=user_id, version_id=version_id, **common
        )
    return OutcomeEvent(
        **common,
        unit_id=_string(event, "unit_id", where, errors, required=True),
        user_id=user_id,
        metric=_string(event, "metric", where, errors, required=True, limit=100),
        value=_number(event, "value", where, errors, required=True),
    )


def events_ingest(*, events: object, actor: Actor) -> IngestResult:
    """Validate a batch of events (all of it, or none is stored), then store the new ones. Only the
    chat application (the `app` role) reports what its users did: these rows feed gate layers 2 and 3."""
    actor_require_role(actor, EVENT_ROLES, action="send canary events")
    limit = settings.EVALHUB_EVENTS_MAX_BATCH
    if not isinstance(events, list) or not events:
        raise ApplicationError(
            reason(EventsCode.NOT_A_LIST), fields={"events": [reason(EventsCode.A_NON_EMPTY_LIST)]}
        )
    if len(events) > limit:
        raise ApplicationError(
            reason(EventsCode.BATCH_TOO_LARGE, limit=limit, n=len(events)),
            code="batch_too_large",
            fields={"events": [reason(EventsCode.AT_MOST, limit=limit)]},
            status_code=413,
        )
    names = {e.get("experiment") for e in events if isinstance(e, dict)}
    # A name the database could not store is not looked up (it refuses NUL even in a query).
    names = {n for n in names if isinstance(n, str) and len(n) <= MAX_ID and not text_problem(n)}
    experiments = Experiment.objects.filter(name__in=names).select_related("baseline", "candidate")
    checks = _Checks({x.name: x for x in experiments})
    errors = _Errors()
    parsed = [_parse(event, index, checks, errors) for index, event in enumerate(events)]
    seen: dict[tuple[int, str], int] = {}
    for index, row in enumerate(parsed):
        if row is None or row.experiment_id is None or not row.event_id:
            continue
        key = (row.experiment_id, row.event_id)
        if key in seen:
            errors.add(f"events[{index}].event_id", reason(EventsCode.REPEATS, index=seen[key]))
        seen.setdefault(key, index)
    if errors.fields:
        raise ApplicationError(
            reason(EventsCode.BATCH_REFUSED, problems=len(errors.fields)), fields=errors.fields
        )
    turns = [row for row in parsed if isinstance(row, TurnEvent)]
    outcomes = [row for row in parsed if isinstance(row, OutcomeEvent)]
    with transaction.atomic():
        stored = sum(
            _rows_insert(model, rows) for model, rows in ((TurnEvent, turns), (OutcomeEvent, outcomes))
        )
    return IngestResult(received=len(events), accepted=stored, duplicates=len(events) - stored)


def _rows_insert(model, rows) -> int:
    """Insert `rows`, skipping (experiment, event_id) pairs already stored; how many were new.

    PostgreSQL: COPY into a per-connection staging table, then one INSERT ... SELECT ... ON
    CONFLICT DO NOTHING, whose row count is the number stored (measured: bench/router.py).
    Elsewhere: count the stored ones, then a bulk INSERT that ignores conflicts.
    """
    if not rows:
        return 0
    if connection.vendor != "postgresql":
        before = _existing(model, rows)
        model.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
        return len(rows) - before
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table, staging = model._meta.db_table, f"{model._meta.db_table}_staging"
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {staging} ON COMMIT DELETE ROWS AS "
            f"SELECT {columns} FROM {table} WITH NO DATA"
        )
        with cursor.cursor.copy(f"COPY {staging} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([f.get_db_prep_save(f.pre_save(row, add=True), connection) for f in fields])
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {staging} "
            "ON CONFLICT (experiment_id, event_id) DO NOTHING"
        )
        inserted = cursor.rowcount
        cursor.execute(f"TRUNCATE {staging}")
    return inserted


def _existing(model, rows) -> int:
    """How many of `rows` the store already holds (by experiment and event_id)."""
    by_experiment: dict[int, list[str]] = {}
    for row in rows:
        by_experiment.setdefault(row.experiment_id, []).append(row.event_id)
    return sum(
        model.objects.filter(experiment_id=pk, event_id__in=ids).count() for pk, ids in by_experiment.items()
    )

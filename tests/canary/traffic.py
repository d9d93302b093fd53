"""Helpers for tests that send canary events: events must agree with the router and lie within the
experiment's life (`canary.services.events`), so synthetic traffic picks its users by their arm
and its experiments start in the past."""

from __future__ import annotations

import itertools
from datetime import timedelta

from django.utils import timezone

from canary.models import Experiment, ProbeRun, ProbeSet
from engines.routing import CANDIDATE, bucket_of


def user_on(experiment: Experiment, arm: str, name: str) -> str:
    """A user id, `name` or `name~k`, that the experiment's current window puts on `arm`."""
    return _unit_on(experiment, arm, name, "user")


def session_on(experiment: Experiment, arm: str, name: str) -> str:
    """A session id, for a unit without a user, as `user_on`."""
    return _unit_on(experiment, arm, name, "session")


def _unit_on(experiment: Experiment, arm: str, name: str, kind: str) -> str:
    for k in itertools.count():
        unit = name if k == 0 else f"{name}~{k}"
        inside = bucket_of(salt=experiment.salt, unit_id=f"{kind}:{unit}") < experiment.window_buckets
        if inside == (arm == CANDIDATE):
            return unit
    raise AssertionError("unreachable")


def experiment_backdate(experiment: Experiment, *, started: timedelta, share_since: timedelta | None = None):
    """The experiment as if created and started `started` ago, its share in force since `share_since`
    ago (default: since the start). Returns it fresh from the database."""
    now = timezone.now()
    Experiment.objects.filter(pk=experiment.pk).update(
        created_at=now - started - timedelta(minutes=1),
        started_at=now - started,
        share_since=now - (share_since if share_since is not None else started),
    )
    return Experiment.objects.select_related("baseline", "candidate").get(pk=experiment.pk)


def chat_session(
    experiment: Experiment,
    *,
    session: str,
    turns: list[str],
    kind: str | None = "follow_up",
    arm: str = "baseline",
    source: str = "client",
    answer_error: str = "",
) -> list:
    """Stored turns of one session straight into the event store (user, assistant, user, ...), a
    minute ago and 20 s apart; the user turns after the first get the detector kind `kind`, the
    assistant turns the error `answer_error`. Returns the TurnEvents."""
    from canary.models import TurnEvent

    start = timezone.now() - timedelta(minutes=1)
    made = []
    for index, text in enumerate(turns):
        user = index % 2 == 0
        made.append(
            TurnEvent.objects.create(
                experiment=experiment,
                event_id=f"{session}-{index}",
                session_id=session,
                arm=arm,
                turn_index=index,
                role="user" if user else "assistant",
                text=text,
                error="" if user else answer_error,
                source=source,
                follow_up_kind=("new" if index == 0 else kind) if user else None,
                occurred_at=start + timedelta(seconds=20 * index),
            )
        )
    return made


def probe_run_finished(*, experiment: Experiment) -> ProbeRun:
    """A finished probe run of a demo probe set, as the probe task stores it: one weakness the
    candidate fixes (16 of 40 pairs right on the candidate only, McNemar p 3.1e-05)."""
    probe_set = ProbeSet.objects.create(name="fam-weaknesses", family="fam", is_demo=True)
    cell = {
        "pairs": 40,
        "both_correct": 20,
        "neither_correct": 2,
        "baseline_rate": 0.55,
        "candidate_rate": 0.95,
        "only_candidate_correct": 16,
        "only_baseline_correct": 0,
        "mcnemar_p": 3.1e-05,
        "finding": "candidate fixes this weakness",
    }
    return ProbeRun.objects.create(
        experiment=experiment,
        probe_set=probe_set,
        status="succeeded",
        report={"all": cell, "long_context": cell},
        finished_at=timezone.now(),
    )


def shadow_window_fill(experiment: Experiment, pairs: list[tuple[str, float, str, float, str]]) -> None:
    """A shadow window as the proxy leaves one, without model servers: per pair (baseline answer, its
    latency, candidate answer, its latency, candidate error), the baseline's question and answer turn
    events and the candidate's `ShadowAnswer`."""
    from canary.models import ShadowAnswer, TurnEvent

    now = timezone.now()
    for index, (answer, answer_ms, mirrored, mirrored_ms, error) in enumerate(pairs):
        common = {
            "experiment": experiment,
            "session_id": f"s{index}",
            "user_id": f"u{index}",
            "arm": "baseline",
        }
        TurnEvent.objects.create(
            **common,
            event_id=f"px-e{index}-q",
            turn_index=0,
            role="user",
            text="q",
            occurred_at=now,
            source="proxy",
        )
        TurnEvent.objects.create(
            **common,
            event_id=f"px-e{index}-a",
            turn_index=1,
            role="assistant",
            text=answer,
            version=experiment.baseline,
            latency_ms=answer_ms,
            occurred_at=now,
            source="proxy",
        )
        ShadowAnswer.objects.create(
            experiment=experiment,
            baseline_event_id=f"px-e{index}-a",
            version=experiment.candidate,
            text=mirrored,
            latency_ms=mirrored_ms,
            error=error,
        )

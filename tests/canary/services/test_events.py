"""Telemetry ingestion's rules: timestamps strict and within the experiment's life, arms and versions
as the router gave them, text the database can store; accepted and refused examples of each."""

from datetime import timedelta

import pytest
from django.utils import timezone, translation

from canary.models import Experiment, OutcomeEvent, TurnEvent
from canary.services.events import EventsCode, events_ingest
from canary.services.experiments import (
    experiment_create,
    experiment_pause,
    experiment_promote,
    experiment_ramp,
    experiment_rollback,
    experiment_start,
)
from engines.input_checks import InputCode
from engines.reasons import Term
from evalhub.wordings import reason_words
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate, session_on, user_on
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
QA_TOKEN = "qa-token-0123456789abcdef"
SKEW = timedelta(seconds=300)  # EVALHUB_EVENTS_CLOCK_SKEW_SECONDS' default


@pytest.fixture
def draft():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    return experiment_create(
        name="exp", baseline=v3, candidate=v4, traffic_percent=10, qa_tokens=[QA_TOKEN], actor=SYSTEM
    )


@pytest.fixture
def running(draft):
    """Started two hours ago at 10 %."""
    return experiment_backdate(experiment_start(experiment=draft, actor=SYSTEM), started=timedelta(hours=2))


def ago(**delta) -> str:
    return (timezone.now() - timedelta(**delta)).isoformat()


def turn(user_id: str, arm: str, *, at: str | None = None, index: int = 0, **overrides) -> dict:
    return {
        "type": "turn",
        "event_id": f"t-{user_id}-{arm}-{index}",
        "experiment": "exp",
        "session_id": f"s-{user_id}",
        "user_id": user_id,
        "arm": arm,
        "turn_index": index,
        "role": "user",
        "text": "q",
        "timestamp": at or ago(minutes=10),
        **overrides,
    }


def refused(events: list[dict]) -> dict:
    """The fields named by the error; nothing of the batch is stored."""
    before = TurnEvent.objects.count() + OutcomeEvent.objects.count()
    with pytest.raises(ApplicationError) as caught:
        events_ingest(events=events, actor=SYSTEM)
    assert TurnEvent.objects.count() + OutcomeEvent.objects.count() == before
    return caught.value.fields


def accepted(events: list[dict]) -> None:
    assert events_ingest(events=events, actor=SYSTEM).accepted == len(events)


class TestTimestamps:
    @pytest.mark.parametrize(
        ("stamp", "code"),
        [
            ("2026-13-45T00:00:00Z", InputCode.NO_SUCH_DATETIME),
            ("2026-11-29T10:00:00", InputCode.NOT_DATETIME),  # naive
            ("2026-11-29 10:00:00+00:00", InputCode.NOT_DATETIME),
            ("29/11/2026 10:00", InputCode.NOT_DATETIME),
            ("9999-12-31T23:59:59-23:59", InputCode.DATETIME_RANGE),  # year 10000 in UTC
            ("9999-12-31T00:00:00Z", EventsCode.OUTSIDE_LIFE),
            ("2030-01-01T00:00:00Z", EventsCode.OUTSIDE_LIFE),
            ("2000-01-01T00:00:00Z", EventsCode.OUTSIDE_LIFE),
        ],
    )
    def test_refused(self, running, stamp, code):
        fields = refused([turn(user_on(running, "baseline", "u"), "baseline", at=stamp)])
        assert list(fields) == ["events[0].timestamp"] and fields["events[0].timestamp"][0].code == code

    def test_a_refused_time_says_the_experiments_life_in_each_language(self, running):
        fields = refused([turn(user_on(running, "baseline", "u"), "baseline", at="2000-01-01T00:00:00Z")])
        [note] = fields["events[0].timestamp"]
        start = f"{running.created_at:%Y-%m-%dT%H:%M:%SZ}"
        assert note.params["start"] == start and note.params["skew"] == f"{SKEW.total_seconds():g}"
        assert reason_words(note).startswith(f"must lie within the experiment's life, {start} to now, ")
        with translation.override("zh-hans"):
            assert start in reason_words(note) and "灰度实验" in reason_words(note)

    def test_within_the_clock_skew_of_the_experiments_life(self, running, settings):
        user = user_on(running, "baseline", "u")
        created = running.created_at
        accepted([turn(user, "baseline", at=(created - SKEW + timedelta(seconds=5)).isoformat(), index=0)])
        accepted([turn(user, "baseline", at=ago(seconds=-SKEW.total_seconds() + 5), index=1)])
        assert refused([turn(user, "baseline", at=(created - SKEW - timedelta(seconds=5)).isoformat())])
        assert refused([turn(user, "baseline", at=ago(seconds=-SKEW.total_seconds() - 5))])
        settings.EVALHUB_EVENTS_CLOCK_SKEW_SECONDS = 0
        assert refused([turn(user, "baseline", at=ago(seconds=-30), index=2)])

    def test_any_time_zone_is_stored_in_utc(self, running):
        user = user_on(running, "baseline", "u")
        stamp = (timezone.now() - timedelta(minutes=5)).astimezone(timezone.get_fixed_timezone(-7 * 60))
        accepted([turn(user, "baseline", at=stamp.isoformat())])
        assert TurnEvent.objects.get().occurred_at == stamp

    def test_nothing_after_the_end(self, running):
        ended = experiment_rollback(experiment=running, actor=SYSTEM, reason="r")
        Experiment.objects.filter(pk=ended.pk).update(ended_at=timezone.now() - timedelta(hours=1))
        user = user_on(running, "baseline", "u")
        assert "events[0].timestamp" in refused([turn(user, "baseline", at=ago(minutes=10))])
        accepted([turn(user, "baseline", at=ago(minutes=90))])


class TestRouterAgreement:
    def test_each_user_on_the_arm_the_router_gives_them(self, running):
        inside, outside = user_on(running, "candidate", "in"), user_on(running, "baseline", "out")
        accepted([turn(inside, "candidate"), turn(outside, "baseline")])
        fields = refused([turn(inside, "baseline"), turn(outside, "candidate")])
        assert set(fields) == {"events[0].arm", "events[1].arm"}
        note = fields["events[0].arm"][0]
        assert note.code == EventsCode.ROUTER_ARM
        assert note.params == {"unit": f"user:{inside}", "arms": [Term("candidate")]}

    def test_the_unit_is_the_user_else_the_session(self, running):
        session = session_on(running, "candidate", "s")
        accepted([turn("", "candidate", session_id=session)])
        baseline_user = user_on(running, "baseline", "u")
        fields = refused([turn(baseline_user, "candidate", session_id=session, index=1)])
        assert list(fields) == ["events[0].arm"]

    def test_outcomes_are_checked_by_their_user_and_not_without_one(self, running):
        user = user_on(running, "baseline", "u")
        outcome = {
            "type": "outcome",
            "event_id": "o1",
            "experiment": "exp",
            "unit_id": "contract-1",
            "arm": "candidate",
            "metric": "review_hours",
            "value": 1.0,
            "timestamp": ago(minutes=5),
        }
        assert list(refused([outcome | {"user_id": user}])) == ["events[0].arm"]
        accepted([outcome])  # no user: no unit the router knows

    def test_the_version_must_be_the_arms(self, running):
        inside = user_on(running, "candidate", "in")
        assert list(refused([turn(inside, "candidate", version="fam:v3")])) == ["events[0].version"]
        assert list(refused([turn(inside, "candidate", version="fam:v9")])) == ["events[0].version"]
        accepted([turn(inside, "candidate", version="fam:v4", role="assistant")])
        assert TurnEvent.objects.get().version.ref == "fam:v4"

    def test_a_draft_has_everyone_on_the_baseline(self, draft):
        accepted([turn(f"u{i}", "baseline", at=ago(seconds=1)) for i in range(20)])
        fields = refused([turn(f"u{i}", "candidate", at=ago(seconds=1)) for i in range(20)])
        assert set(fields) == {f"events[{i}].arm" for i in range(20)}

    def test_an_arm_forced_by_qa_needs_its_token(self, running):
        outside = user_on(running, "baseline", "qa")
        forced = turn(outside, "candidate")
        assert list(refused([forced])) == ["events[0].arm"]
        assert list(refused([forced | {"qa_token": "not-the-token-at-all"}])) == ["events[0].qa_token"]
        accepted([forced | {"qa_token": QA_TOKEN}])

    def test_before_the_last_ramp_either_arm_inside_the_new_share(self, running):
        """The steps before `share_since` are not stored: a unit the ramp took in may have been on
        either arm before it, one still outside only on the baseline; after it, exactly its arm."""
        ramped = experiment_ramp(experiment=running, actor=SYSTEM, traffic_percent=50)
        ramped = experiment_backdate(ramped, started=timedelta(hours=2), share_since=timedelta(hours=1))
        inside, outside = user_on(ramped, "candidate", "in"), user_on(ramped, "baseline", "out")
        before = ago(minutes=90)
        accepted(
            [
                turn(inside, "baseline", at=before, index=0),
                turn(inside, "candidate", at=before, index=1),
                turn(outside, "baseline", at=before, index=2),
                turn(inside, "candidate", index=3),
            ]
        )
        fields = refused([turn(outside, "candidate", at=before), turn(inside, "baseline", index=9)])
        assert set(fields) == {"events[0].arm", "events[1].arm"}

    def test_a_pause_sends_everyone_to_the_baseline(self, running):
        inside = user_on(running, "candidate", "in")
        paused = experiment_pause(experiment=running, actor=SYSTEM)
        Experiment.objects.filter(pk=paused.pk).update(paused_at=timezone.now() - timedelta(hours=1))
        accepted([turn(inside, "candidate", at=ago(minutes=90)), turn(inside, "baseline", index=1)])
        assert list(refused([turn(inside, "candidate", index=2)])) == ["events[0].arm"]

    def test_a_rollback_keeps_the_candidates_events_before_it(self, running):
        """A rollback sets the share to 0, but the window's share was in force until then."""
        inside = user_on(running, "candidate", "in")
        rolled_back = experiment_rollback(experiment=running, actor=SYSTEM, reason="errors")
        Experiment.objects.filter(pk=rolled_back.pk).update(ended_at=timezone.now() - timedelta(minutes=30))
        accepted([turn(inside, "candidate", at=ago(minutes=40))])
        assert list(refused([turn(inside, "baseline", at=ago(minutes=40), index=1)])) == ["events[0].arm"]

    def test_a_promotion_puts_everyone_on_the_candidate_at_its_end(self, running, approve):
        outside = user_on(running, "baseline", "out")
        approve(running.candidate)
        experiment_promote(experiment=running, actor=SYSTEM)
        accepted([turn(outside, "candidate", at=ago(seconds=1))])  # after the end, within the skew
        assert list(refused([turn(outside, "candidate", at=ago(minutes=30), index=1)])) == ["events[0].arm"]


class TestStorableText:
    """Service callers get the same checks as the API's parser (which refuses these first)."""

    @pytest.mark.parametrize("field", ["text", "event_id", "session_id", "user_id", "error", "experiment"])
    def test_nul(self, running, field):
        event = turn(user_on(running, "baseline", "u"), "baseline")
        event[field] = "x\x00"
        assert f"events[0].{field}" in refused([event])

    @pytest.mark.parametrize("field", ["text", "user_id", "qa_token", "version"])
    def test_lone_surrogate(self, running, field):
        event = turn(user_on(running, "baseline", "u"), "baseline")
        event[field] = "x\ud800"
        assert f"events[0].{field}" in refused([event])

    @pytest.mark.parametrize("index", [2**31, -1, 1.5, True])
    def test_turn_index_beyond_the_column(self, running, index):
        fields = refused([turn(user_on(running, "baseline", "u"), "baseline", turn_index=index)])
        assert list(fields) == ["events[0].turn_index"]


@pytest.mark.parametrize("role", ["viewer", "ci", "release_manager"])
def test_only_the_app_role_sends_events(running, role):
    """A ci token must not write the traffic that the gate's layers 2 and 3 judge (nor a release manager)."""
    from django.contrib.auth import get_user_model

    from registry.services.tokens import user_role_grant

    user = get_user_model().objects.create_user(username=f"u-{role}")
    user_role_grant(user=user, role=role)
    with pytest.raises(ApplicationError) as refused:
        events_ingest(events=[turn(user_on(running, "baseline", "u"), "baseline")], actor=user)
    assert refused.value.status_code == 403 and not TurnEvent.objects.exists()
    app = get_user_model().objects.create_user(username="chat-app")
    user_role_grant(user=app, role="app")
    assert (
        events_ingest(events=[turn(user_on(running, "baseline", "u"), "baseline")], actor=app).accepted == 1
    )


class TestStreamedAnswers:
    """A chat app that streams reports its answers' time to first token and tokens, as the proxy does."""

    def answer(self, running, **overrides) -> dict:
        user = user_on(running, "candidate", "u")
        return turn(
            user, "candidate", index=1, **{"role": "assistant", "text": "a", "latency_ms": 900.0, **overrides}
        )

    def test_accepted_and_stored_as_streamed(self, running):
        accepted([self.answer(running, first_token_ms=120.5, output_tokens=42)])
        row = TurnEvent.objects.get()
        assert (row.streamed, row.first_token_ms, row.output_tokens) == (True, 120.5, 42)

    def test_tokens_alone_are_an_answer_that_did_not_stream(self, running):
        accepted([self.answer(running, output_tokens=42)])
        row = TurnEvent.objects.get()
        assert (row.streamed, row.first_token_ms, row.output_tokens) == (False, None, 42)

    @pytest.mark.parametrize(
        ("overrides", "field", "code"),
        [
            ({"first_token_ms": 901.0}, "first_token_ms", EventsCode.WITHIN_LATENCY),
            ({"first_token_ms": -1.0}, "first_token_ms", EventsCode.WITHIN_LATENCY),
            ({"first_token_ms": 5.0, "latency_ms": None}, "first_token_ms", EventsCode.WITHIN_LATENCY),
            ({"output_tokens": -3}, "output_tokens", "field.integer_between"),
            ({"output_tokens": 2.5}, "output_tokens", "field.integer_between"),
            ({"output_tokens": True}, "output_tokens", "field.integer_between"),
            ({"role": "user", "first_token_ms": 5.0}, "first_token_ms", EventsCode.ANSWERS_ONLY),
        ],
    )
    def test_refused_naming_the_field(self, running, overrides, field, code):
        fields = refused([self.answer(running, **overrides)])
        assert list(fields) == [f"events[0].{field}"] and fields[f"events[0].{field}"][0].code == code

"""Canary API: experiments and their lifecycle, assignment, telemetry; bad input is a 4xx."""

import io
import json
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from canary.models import Experiment, OutcomeEvent, Probe, ProbeSet, TurnEvent
from registry.actors import SYSTEM
from registry.models import AuditLog
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate, user_on
from tests.evalhub.api.test_core import assert_error
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
QA_TOKEN = "qa-token-0123456789abcdef"


@pytest.fixture
def versions():
    v3 = incumbent_register(family="ca", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="ca", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    return v3, v4


@pytest.fixture
def manager(make_client):
    return make_client("release_manager", username="rm")


@pytest.fixture
def app(make_client):
    return make_client("app", username="chat-app")


def create(client, **overrides):
    body = {"name": "v4-canary", "baseline": "ca:v3", "candidate": "ca:v4", **overrides}
    return client.post("/api/v1/canary/experiments/", body, format="json")


def act(client, action, name="v4-canary", **body):
    return client.post(f"/api/v1/canary/experiments/{name}/{action}", body, format="json")


class TestExperiments:
    def test_create_defaults_to_one_percent_draft(self, ci_client, manager, versions):
        response = create(manager)
        assert response.status_code == 201, response.content
        body = response.json()
        assert (body["status"], body["traffic_percent"], body["family"]) == ("draft", 1.0, "ca")
        assert body["live"]["candidate"] == {
            "users": 0,
            "sessions": 0,
            "questions": 0,
            "answers": 0,
            "errors": 0,
            "fallbacks": 0,
            "outcomes": 0,
        }
        assert "salt" not in body and "qa_token_hashes" not in body
        listed = ci_client.get("/api/v1/canary/experiments/").json()
        assert [e["name"] for e in listed] == ["v4-canary"]
        assert AuditLog.objects.filter(action="experiment.create").count() == 1

    def test_lifecycle_is_audited_and_ramps_along_the_plan(self, ci_client, manager, versions, approve):
        approve(versions[1])
        create(manager, ramp=[1, 5, 25, 50, 100])
        assert act(manager, "start", reason="go").json()["status"] == "running"
        assert act(manager, "ramp").json()["traffic_percent"] == 5.0
        ramped = act(manager, "ramp", traffic_percent=30)
        assert (ramped.json()["traffic_percent"], ramped.json()["ramp_step"]) == (30.0, 2)
        assert act(manager, "ramp").json()["traffic_percent"] == 50.0
        assert act(manager, "pause").json()["status"] == "paused"
        assert act(manager, "resume").json()["status"] == "running"
        promoted = act(manager, "promote", reason="all guardrails green").json()
        assert (promoted["status"], promoted["traffic_percent"]) == ("promoted", 100.0)
        actions = list(
            AuditLog.objects.filter(target_type="canary.experiment")
            .order_by("pk")
            .values_list("action", flat=True)
        )
        assert actions == [
            "experiment.create",
            "experiment.running",
            "experiment.horizon_register",  # layer 3's fixed horizon, sized at the start
            "experiment.ramp",
            "experiment.ramp",
            "experiment.ramp",
            "experiment.paused",
            "experiment.running",
            "experiment.promoted",
        ]
        ramp = AuditLog.objects.filter(action="experiment.ramp").order_by("pk").first()
        assert (ramp.before["traffic_percent"], ramp.after["traffic_percent"], ramp.actor_name) == (
            1.0,
            5.0,
            "rm",
        )

    def test_rollback_needs_a_reason_and_ends_with_share_zero(self, ci_client, manager, versions):
        create(manager)
        act(manager, "start")
        assert_error(act(manager, "rollback"), 400, "reason")
        body = act(manager, "rollback", reason="error rate doubled").json()
        assert (body["status"], body["traffic_percent"], body["end_reason"]) == (
            "rolled_back",
            0.0,
            "error rate doubled",
        )
        assert_error(act(manager, "resume"), 409, "status")

    def test_one_running_experiment_per_family(self, ci_client, manager, versions):
        create(manager)
        create(manager, name="second")
        act(manager, "start")
        error = assert_error(act(manager, "start", name="second"), 409, "family")
        assert (error["reason"], error["params"]) == ("experiments.family_busy", {"family": "ca"})
        assert Experiment.objects.get(name="second").status == "draft"

    def test_ramp_never_lowers_the_share(self, ci_client, manager, versions):
        create(manager, traffic_percent=5)
        act(manager, "start")
        assert_error(act(manager, "ramp", traffic_percent=1), 400, "traffic_percent")
        assert_error(act(manager, "ramp"), 400, "traffic_percent")  # no plan, no next step

    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"traffic_percent": 0}, "traffic_percent"),
            ({"traffic_percent": 100.5}, "traffic_percent"),
            ({"traffic_percent": 0.001}, "traffic_percent"),
            ({"traffic_percent": "lots"}, "traffic_percent"),
            ({"ramp": [5, 1]}, "ramp"),
            ({"ramp": [1, 5], "traffic_percent": 5}, "traffic_percent"),
            ({"guardrails": {"max_vibes": 1}}, "guardrails.max_vibes"),
            ({"guardrails": {"max_latency_ratio": -1}}, "guardrails.max_latency_ratio"),
            # A ratio bar of 0 and a minimum below one sample would make every analysis a bug.
            ({"guardrails": {"max_first_token_ratio": 0}}, "guardrails.max_first_token_ratio"),
            ({"guardrails": {"min_requests": 0}}, "guardrails.min_requests"),
            ({"guardrails": {"min_probes": 2.5}}, "guardrails.min_probes"),
            ({"candidate": "ca:v3"}, "candidate"),
            ({"name": "Not A Slug"}, "name"),
            ({"bogus": 1}, "bogus"),
        ],
    )
    def test_bad_input_names_the_field(self, manager, versions, overrides, field):
        assert_error(create(manager, **overrides), 400, field)
        assert not Experiment.objects.exists()

    def test_unknown_version_is_a_404_naming_the_field(self, manager, versions):
        assert_error(create(manager, candidate="ca:v9"), 404, "candidate")
        assert not Experiment.objects.exists()

    def test_small_shares_and_other_families(self, manager, versions):
        assert create(manager, traffic_percent=0.01).json()["traffic_percent"] == 0.01
        model_version_register(family="other", label="x", actor=SYSTEM, **BUILTIN)
        assert_error(create(manager, name="cross", candidate="other:x"), 400, "candidate")

    def test_roles(self, ci_client, manager, app, versions):
        assert_error(create(ci_client), 403)  # experiments are the release managers'
        create(manager)
        assert_error(act(ci_client, "start"), 403)
        assert_error(create(app, name="by-app"), 403)
        assert_error(act(app, "start"), 403)

    def test_unknown_experiment_and_action(self, manager):
        assert_error(act(manager, "start", name="nope"), 404, "experiment")
        assert_error(act(manager, "explode"), 404)


@pytest.fixture
def running(ci_client, manager, versions):
    create(manager, traffic_percent=50, qa_tokens=[QA_TOKEN])
    act(manager, "start")
    return Experiment.objects.get(name="v4-canary")


def assign(client, name="v4-canary", **body):
    return client.post(f"/api/v1/canary/{name}/assign", body, format="json")


class TestAssign:
    def test_sticky_per_user_and_per_session(self, app, running):
        arms = {u: assign(app, user_id=u).json()["arm"] for u in (f"u{i}" for i in range(60))}
        assert set(arms.values()) == {"baseline", "candidate"}
        assert all(assign(app, user_id=u, session_id="other").json()["arm"] == arm for u, arm in arms.items())
        one = assign(app, session_id="s-1").json()
        assert assign(app, session_id="s-1").json() == one
        assert one["version"] == ("ca:v4" if one["arm"] == "candidate" else "ca:v3")

    def test_paused_or_rolled_back_sends_everyone_to_the_baseline(self, app, manager, running):
        act(manager, "pause")
        assert {assign(app, user_id=f"u{i}").json()["arm"] for i in range(40)} == {"baseline"}

    def test_qa_override_only_with_an_allow_listed_token(self, app, running):
        forced = assign(app, user_id="u1", force_arm="candidate", qa_token=QA_TOKEN).json()
        assert (forced["arm"], forced["forced"]) == ("candidate", True)
        assert_error(assign(app, user_id="u1", force_arm="candidate", qa_token="x" * 20), 403, "qa_token")
        assert_error(assign(app, user_id="u1", force_arm="candidate"), 403, "qa_token")

    def test_bad_input(self, app, running):
        assert_error(assign(app), 400, "user_id")
        assert_error(assign(app, user_id="u", force_arm="v5", qa_token=QA_TOKEN), 400, "force_arm")
        assert_error(assign(app, name="nope", user_id="u"), 404, "experiment")
        assert_error(assign(app, user_id=42), 400, "user_id")
        assert_error(assign(app, user_id="u", colour="blue"), 400, "colour")
        assert_error(assign(app, session_id="s" * 201), 400, "session_id")
        bad_json = app.post("/api/v1/canary/v4-canary/assign", "[1, 2]", content_type="application/json")
        assert_error(bad_json, 400)


def turn(i, **overrides):
    """A turn of the user `running_users` puts on the candidate (overrides may say another)."""
    return {
        "type": "turn",
        "event_id": f"t{i}",
        "experiment": "v4-canary",
        "session_id": "s1",
        "user_id": USERS["candidate"],
        "arm": "candidate",
        "turn_index": i,
        "role": "user" if i % 2 == 0 else "assistant",
        "text": "what if force majeure applies?",
        "latency_ms": 12.5,
        "timestamp": timezone.now().isoformat(),
        **overrides,
    }


def outcome(i, **overrides):
    return {
        "type": "outcome",
        "event_id": f"o{i}",
        "experiment": "v4-canary",
        "unit_id": f"contract-{i}",
        "arm": "baseline",
        "metric": "review_hours",
        "value": 1.5,
        "timestamp": timezone.now().astimezone(timezone.get_fixed_timezone(8 * 60)).isoformat(),
        **overrides,
    }


USERS: dict[str, str] = {}


@pytest.fixture
def running_users(running):
    """A user on each arm of the running experiment (its salt is drawn when it is created), which
    started an hour ago: events stamped now are well inside its window."""
    experiment_backdate(running, started=timedelta(hours=1))
    USERS.update({arm: user_on(running, arm, f"u-{arm}") for arm in ("baseline", "candidate")})
    yield USERS
    USERS.clear()


def send(client, events):
    return client.post("/api/v1/events", {"events": events}, format="json")


@pytest.mark.usefixtures("running_users")
class TestEvents:
    def test_batch_is_stored_and_a_retry_does_not_double_count(self, app, running):
        batch = [turn(i) for i in range(4)] + [outcome(0), outcome(1)]
        first = send(app, batch)
        assert first.status_code == 201 and first.json() == {"received": 6, "accepted": 6, "duplicates": 0}
        again = send(app, [*batch, turn(4)])
        assert again.json() == {"received": 7, "accepted": 1, "duplicates": 6}
        assert (TurnEvent.objects.count(), OutcomeEvent.objects.count()) == (5, 2)
        stored = OutcomeEvent.objects.get(event_id="o0")
        assert stored.occurred_at == datetime.fromisoformat(batch[4]["timestamp"])
        assert batch[4]["timestamp"].endswith("+08:00") and stored.occurred_at.utcoffset() == timedelta(0)
        live = app.get("/api/v1/canary/experiments/v4-canary/")
        assert live.status_code == 403  # the app role writes telemetry, it does not read dashboards

    def test_live_figures_per_arm(self, app, ci_client, running):
        baseline = {"arm": "baseline", "session_id": "s2", "user_id": USERS["baseline"]}
        send(app, [turn(0), turn(1, error="timeout"), turn(2, **baseline), outcome(0)])
        live = ci_client.get("/api/v1/canary/experiments/v4-canary/").json()["live"]
        assert live["candidate"] | {} == {
            "users": 1,
            "sessions": 1,
            "questions": 1,
            "answers": 1,
            "errors": 1,
            "fallbacks": 0,
            "outcomes": 0,
        }
        assert (live["baseline"]["questions"], live["baseline"]["outcomes"]) == (1, 1)

    def test_invalid_events_reject_the_whole_batch_with_errors_by_index(self, app, running):
        batch = [
            turn(0),
            turn(1, arm="v5"),
            turn(2, turn_index=-1, role="system"),
            outcome(3, value="many"),
            outcome(4, timestamp="yesterday"),
            turn(5, experiment="nope"),
            {"type": "click"},
            "not an object",
            turn(8, latency_ms=float("nan")) | {"latency_ms": "slow"},
            outcome(9) | {"unit_id": ""},
            outcome(10, value=1e200),  # its square would overflow the SQL sums of the metric
            turn(11, arm="baseline"),  # the router has this user on the candidate
            turn(12, version="ca:v3"),  # the candidate's version is ca:v4
        ]
        error = assert_error(send(app, batch), 400)
        assert set(error["fields"]) == {
            "events[1].arm",
            "events[2].turn_index",
            "events[2].role",
            "events[3].value",
            "events[4].timestamp",
            "events[5].experiment",
            "events[6].type",
            "events[7]",
            "events[8].latency_ms",
            "events[9].unit_id",
            "events[10].value",
            "events[11].arm",
            "events[12].version",
        }
        assert not TurnEvent.objects.exists() and not OutcomeEvent.objects.exists()

    def test_an_arm_forced_by_qa_carries_its_token(self, app, running):
        forced = assign(app, user_id=USERS["baseline"], force_arm="candidate", qa_token=QA_TOKEN).json()
        assert forced["arm"] == "candidate"
        event = turn(0, user_id=USERS["baseline"], version=forced["version"])
        assert_error(send(app, [event]), 400, "events[0].arm")
        assert_error(send(app, [event | {"qa_token": "x" * 20}]), 400, "events[0].qa_token")
        assert send(app, [event | {"qa_token": QA_TOKEN}]).status_code == 201
        assert TurnEvent.objects.get().version.ref == "ca:v4"

    def test_duplicate_ids_in_one_batch_empty_and_oversized_batches(self, app, running, settings):
        assert_error(send(app, [turn(0), turn(0, text="other")]), 400, "events[1].event_id")
        assert_error(send(app, []), 400, "events")
        assert_error(app.post("/api/v1/events", {"events": "x"}, format="json"), 400, "events")
        settings.EVALHUB_EVENTS_MAX_BATCH = 3
        assert_error(send(app, [turn(i) for i in range(4)]), 413, "events")
        assert not TurnEvent.objects.exists()


class TestHotPathReuse:
    """Assignment reuses the token check and the experiment for a bounded time per process."""

    def test_a_paused_experiment_applies_within_the_cache_time(self, app, manager, running, settings):
        from canary.selectors import experiments as selectors

        settings.EVALHUB_CANARY_CACHE_SECONDS = 60
        selectors._live.clear()
        users = [f"u{i}" for i in range(40)]
        before = {u: assign(app, user_id=u).json()["arm"] for u in users}
        act(manager, "pause")
        assert {u: assign(app, user_id=u).json()["arm"] for u in users} == before  # still cached
        settings.EVALHUB_CANARY_CACHE_SECONDS = 0
        assert {assign(app, user_id=u).json()["arm"] for u in users} == {"baseline"}
        selectors._live.clear()

    def test_a_revoked_token_stops_within_the_cache_time(self, app, running, settings):
        from evalhub.api import authentication
        from registry.models import ApiToken

        settings.EVALHUB_AUTH_CACHE_SECONDS = 60
        authentication._recent.clear()
        assert assign(app, user_id="u1").status_code == 200
        ApiToken.objects.update(revoked_at="2026-11-29T10:00:00Z")
        assert assign(app, user_id="u1").status_code == 200  # checked less than a minute ago
        settings.EVALHUB_AUTH_CACHE_SECONDS = 0
        assert_error(assign(app, user_id="u1"), 401)
        authentication._recent.clear()


class TestProbeSets:
    def jsonl(self, *rows) -> io.BytesIO:
        upload = io.BytesIO("\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode())
        upload.name = "probes.jsonl"
        return upload

    def test_import_list_and_errors_naming_line_and_field(self, ci_client):
        good = [
            {"id": "p1", "input": "付款期限为30天。", "expected_label": "payment", "weakness": "ocr_noise"},
            {
                "id": "p2",
                "input": "Either party may terminate.",
                "expected_label": "termination",
                "weakness": "x",
            },
        ]
        response = ci_client.post(
            "/api/v1/canary/probe-sets/", {"name": "ps", "family": "ca", "file": self.jsonl(*good)}
        )
        assert response.status_code == 201, response.content
        assert (response.json()["probes"], response.json()["weaknesses"]) == (2, {"ocr_noise": 1, "x": 1})
        assert Probe.objects.get(external_id="p1").language == "zh"
        assert [s["name"] for s in ci_client.get("/api/v1/canary/probe-sets/").json()] == ["ps"]
        bad = ci_client.post(
            "/api/v1/canary/probe-sets/",
            {
                "name": "ps2",
                "family": "ca",
                "file": self.jsonl(good[0], {"id": "p3", "input": "x", "weakness": "w"}),
            },
        )
        assert_error(bad, 400, "file: line 2.expected_label")
        assert_error(
            ci_client.post(
                "/api/v1/canary/probe-sets/", {"name": "ps", "family": "ca", "file": self.jsonl(*good)}
            ),
            409,
            "name",
        )
        assert ProbeSet.objects.count() == 1

    def test_import_command(self, db, tmp_path):
        path = tmp_path / "probes.jsonl"
        path.write_text(json.dumps({"id": "a", "input": "x", "expected_label": "y", "weakness": "w"}))
        out = io.StringIO()
        call_command("import_probes", str(path), name="cmd", family="ca", stdout=out)
        assert "1 probes" in out.getvalue() and ProbeSet.objects.get(name="cmd").probes.count() == 1


class TestListQueries:
    """List endpoints read their rows and figures in a fixed number of queries, whatever the size."""

    def experiments(self, count: int, versions) -> None:
        from canary.models import CanaryAnalysis
        from canary.services.experiments import experiment_create

        v3, v4 = versions
        for i in range(count):
            experiment = experiment_create(name=f"e{i}", baseline=v3, candidate=v4, actor=SYSTEM)
            CanaryAnalysis.objects.create(experiment=experiment, verdict="pass", reasons=[], metrics={})
            TurnEvent.objects.create(
                experiment=experiment,
                event_id=f"t{i}",
                session_id="s",
                user_id="u",
                arm="baseline",
                turn_index=0,
                role="user",
                text="q",
                occurred_at=experiment.created_at,
            )

    @pytest.mark.parametrize("count", [1, 6])
    def test_experiments(self, ci_client, versions, count, django_assert_num_queries):
        self.experiments(count, versions)
        ci_client.get("/api/v1/canary/experiments/")  # the token's first use is recorded once
        # token, roles, experiments, turn figures, outcome figures, latest analyses
        with django_assert_num_queries(6):
            response = ci_client.get("/api/v1/canary/experiments/")
        body = response.json()
        assert len(body) == count and body[0]["live"]["baseline"]["questions"] == 1
        assert body[0]["latest_analysis"]["verdict"] == "pass"

    @pytest.mark.parametrize("count", [1, 6])
    def test_probe_sets(self, ci_client, count, django_assert_num_queries):
        for i in range(count):
            probe_set = ProbeSet.objects.create(name=f"ps{i}", family="ca")
            Probe.objects.create(
                probe_set=probe_set, external_id="p", input="x", expected_label="y", weakness="w"
            )
        ci_client.get("/api/v1/canary/probe-sets/")  # the token's first use is recorded once
        # token, roles, probe sets, probe counts
        with django_assert_num_queries(4):
            body = ci_client.get("/api/v1/canary/probe-sets/").json()
        assert [s["probes"] for s in body] == [1] * count and body[0]["weaknesses"] == {"w": 1}


ANALYSES = "/api/v1/canary/experiments/v4-canary/analyses"


class TestAnalysisReasons:
    """An analysis's reasons come as words in the request's language and as codes with parameters;
    an analysis stored before codes keeps its sentences and has no codes."""

    def analysis(self, versions, reasons):
        from canary.models import CanaryAnalysis
        from canary.services.experiments import experiment_create

        experiment = experiment_create(
            name="v4-canary", baseline=versions[0], candidate=versions[1], actor=SYSTEM
        )
        CanaryAnalysis.objects.create(
            experiment=experiment, verdict="insufficient_data", reasons=reasons, metrics=[]
        )

    def test_codes_and_words(self, ci_client, versions):
        stored = {"code": "comparisons.no_metrics", "params": {}}
        self.analysis(versions, [stored])
        english = ci_client.get(ANALYSES).json()[0]
        chinese = ci_client.get(ANALYSES, HTTP_ACCEPT_LANGUAGE="zh-hans").json()[0]
        assert english["reason_codes"] == chinese["reason_codes"] == [stored]
        assert english["reasons"] == ["insufficient data: no metrics were analysed"]
        assert chinese["reasons"] == ["数据不足：没有分析任何指标"]

    def test_sentences_from_before_codes(self, ci_client, versions):
        self.analysis(versions, ["overall pass: 5 pass across 5 metrics"])
        body = ci_client.get(ANALYSES, HTTP_ACCEPT_LANGUAGE="zh-hans").json()[0]
        assert (body["reasons"], body["reason_codes"]) == (["overall pass: 5 pass across 5 metrics"], None)

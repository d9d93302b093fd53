"""Bad input never gets a 500: each case answers a 4xx whose `error.fields` names the field at fault.

PostgreSQL (the real database here) refuses NUL in text and JSON and cannot encode a lone surrogate;
its integer columns stop at 2^31 - 1; deep JSON would exhaust the parser's stack. Each of these is
refused where every path shares the check, and each upload form is tried.
"""

import io
import json

import pytest
from django.test import Client
from django.utils import timezone

from canary.models import Experiment, OutcomeEvent, TurnEvent
from canary.services.assignment import experiment_assign
from registry.actors import SYSTEM
from registry.models import EvalSuite, ModelVersion
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.evalhub.api.test_core import assert_error
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(autouse=True)
def room_for_deep_documents(settings):
    """Test settings cap bodies at 200 kB, and DEEP alone takes that: 413 would hide the 400."""
    settings.EVALHUB_MAX_UPLOAD_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000_000


@pytest.fixture
def app(make_client):
    return make_client("app", username="chat-app")


@pytest.fixture
def manager(make_client):
    return make_client("release_manager", username="rm")


@pytest.fixture
def versions():
    v3 = incumbent_register(family="ca", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="ca", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    return v3, v4


@pytest.fixture
def experiment(ci_client, manager, versions):
    body = {"name": "exp", "baseline": "ca:v3", "candidate": "ca:v4", "traffic_percent": 50}
    assert manager.post("/api/v1/canary/experiments/", body, format="json").status_code == 201
    assert manager.post("/api/v1/canary/experiments/exp/start", {}, format="json").status_code == 200
    return Experiment.objects.get(name="exp")


def turn(experiment, **overrides):
    """A valid user turn of user u1 on the arm the router gives u1, stamped now."""
    arm = experiment_assign(experiment=experiment, user_id="u1").assignment.arm
    return {
        "type": "turn",
        "event_id": "t0",
        "experiment": experiment.name,
        "session_id": "s1",
        "user_id": "u1",
        "arm": arm,
        "turn_index": 0,
        "role": "user",
        "text": "what if force majeure applies?",
        "timestamp": timezone.now().isoformat(),
        **overrides,
    }


def send(client, events):
    return client.post("/api/v1/events", {"events": events}, format="json")


def send_raw(client, url, body: str):
    return client.post(url, body, content_type="application/json")


class TestEvents:
    def test_a_valid_event_is_stored(self, app, experiment):
        assert send(app, [turn(experiment)]).status_code == 201

    @pytest.mark.parametrize(
        "stamp",
        [
            "2026-13-45T00:00:00Z",  # no such month or day
            "2026-02-30T10:00:00Z",
            "2026-11-29T25:00:00Z",
            "2026-11-29T10:00:00",  # naive: no time zone
            "2026-11-29",
            "9999-12-31T23:59:59-23:59",  # beyond the datetime range once in UTC
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T00:00:00Z",  # after the experiment's life
            "2030-01-01T00:00:00Z",
            "2000-01-01T00:00:00Z",  # before it
            "tomorrow",
            "",
            1764582000,
        ],
    )
    def test_bad_timestamps(self, app, experiment, stamp):
        assert_error(send(app, [turn(experiment, timestamp=stamp)]), 400, "events[0].timestamp")
        assert not TurnEvent.objects.exists()

    @pytest.mark.parametrize("field", ["text", "event_id", "session_id", "user_id", "error", "experiment"])
    def test_nul_in_event_text_fields(self, app, experiment, field):
        event = turn(experiment)
        event[field] = f"{event.get(field) or 'x'}\u0000tail"
        assert_error(send(app, [event]), 400, f"events[0].{field}")

    @pytest.mark.parametrize("field", ["text", "event_id", "user_id"])
    def test_lone_surrogate_in_event_text(self, app, experiment, field):
        body = json.dumps({"events": [turn(experiment, **{field: "PLACEHOLDER"})]})
        body = body.replace("PLACEHOLDER", "why \\ud800 now")
        assert_error(send_raw(app, "/api/v1/events", body), 400, f"events[0].{field}")

    def test_a_surrogate_pair_is_text(self, app, experiment):
        body = json.dumps({"events": [turn(experiment, text="PLACEHOLDER")]})
        response = send_raw(app, "/api/v1/events", body.replace("PLACEHOLDER", "ok \\ud83d\\ude00"))
        assert response.status_code == 201, response.content
        assert TurnEvent.objects.get().text == "ok 😀"

    @pytest.mark.parametrize("index", [2**31, 2**31 + 5, 2**63, 10**30, -1])
    def test_turn_index_outside_the_column(self, app, experiment, index):
        assert_error(send(app, [turn(experiment, turn_index=index)]), 400, "events[0].turn_index")

    def test_largest_turn_index_is_stored(self, app, experiment):
        assert send(app, [turn(experiment, turn_index=2**31 - 1)]).status_code == 201

    def test_nul_in_outcome_text(self, app, experiment):
        outcome = {
            "type": "outcome",
            "event_id": "o1",
            "experiment": "exp",
            "unit_id": "contract\u00001",
            "metric": "review_hours",
            "arm": "baseline",
            "value": 1.0,
            "timestamp": timezone.now().isoformat(),
        }
        assert_error(send(app, [outcome]), 400, "events[0].unit_id")
        assert not OutcomeEvent.objects.exists()

    def test_deep_json(self, app):
        assert_error(send_raw(app, "/api/v1/events", DEEP), 400, "body")
        assert_error(send_raw(app, "/api/v1/events", '{"events": ' + DEEP + "}"), 400, "body")

    def test_a_number_beyond_float_range(self, app, experiment):
        body = json.dumps({"events": [turn(experiment)]}).replace('"turn_index": 0', '"latency_ms": 1e999')
        assert_error(send_raw(app, "/api/v1/events", body), 400, "events[0].latency_ms")


class TestSuites:
    def jsonl(self, text: str, name="suite.jsonl") -> io.BytesIO:
        upload = io.BytesIO(text.encode("utf-8", "surrogatepass"))
        upload.name = name
        return upload

    def upload(self, client, upload):
        return client.post("/api/v1/eval-suites/", {"name": "g", "file": upload}, format="multipart")

    @pytest.mark.parametrize(
        ("item", "field"),
        [
            ({"input": "pay\u0000ment", "label": "payment"}, "items[0].input"),
            ({"input": "x", "label": "payment", "metadata": {"k\u0000": 1}}, "items[0].metadata"),
            ({"input": "x", "label": "payment", "metadata": {"k": ["a\u0000"]}}, "items[0].metadata"),
            ({"input": "x", "label": "pay\u0000"}, "items[0].label"),
            ({"input": "x", "reference": "r\u0000"}, "items[0].reference"),
            ({"input": "x", "label": "payment", "tags": ["t\u0000"]}, "items[0].tags"),
            ({"id": "a\u0000", "input": "x", "label": "payment"}, "items[0].id"),
        ],
    )
    def test_nul_in_json_items(self, ci_client, item, field):
        response = ci_client.post("/api/v1/eval-suites/", {"name": "g", "items": [item]}, format="json")
        assert_error(response, 400, field)
        assert not EvalSuite.objects.exists()

    def test_lone_surrogate_in_json_items(self, ci_client):
        body = json.dumps({"name": "g", "items": [{"input": "PLACEHOLDER", "label": "payment"}]})
        response = send_raw(ci_client, "/api/v1/eval-suites/", body.replace("PLACEHOLDER", "\\udfff x"))
        assert_error(response, 400, "items[0].input")

    @pytest.mark.parametrize(
        ("line", "field"),
        [
            ('{"input": "pay\\u0000ment", "label": "payment"}', "file: line 1.input"),
            ('{"input": "x", "label": "payment", "metadata": {"k\\u0000": 1}}', "file: line 1.metadata"),
            ('{"input": "\\ud800", "label": "payment"}', "file: line 1.input"),
            ('{"input": "x", "label": "payment", "metadata": {"k": NaN}}', "file: line 1"),
            ('{"input": "x", "label": "payment", "metadata": {"k": 1e999}}', "file: line 1.metadata"),
            ('{"input": "x", "label": "payment", "metadata": ' + DEEP + "}", "file: line 1"),
            (DEEP, "file: line 1"),
        ],
    )
    def test_bad_jsonl_file(self, ci_client, line, field):
        assert_error(self.upload(ci_client, self.jsonl(line + "\n")), 400, field)
        assert not EvalSuite.objects.exists()

    @pytest.mark.parametrize(
        ("row", "field"),
        [
            ("pay\u0000ment,payment,", "file: line 2.input"),
            ('x,payment,"{""k\\u0000"": 1}"', "file: line 2.metadata"),
            ('x,payment,"' + "[" * 1000 + "]" * 1000 + '"', "file: line 2.metadata"),
            ('x,payment,"' + DEEP + '"', "file: line 2"),  # over csv's field size limit
            ('x,payment,"{""k"": 1e999}"', "file: line 2.metadata"),
        ],
    )
    def test_bad_csv_file(self, ci_client, row, field):
        upload = self.jsonl(f"input,label,metadata\n{row}\n", name="suite.csv")
        assert_error(self.upload(ci_client, upload), 400, field)
        assert not EvalSuite.objects.exists()

    def test_items_as_a_multipart_field(self, ci_client):
        for items, field in (
            (DEEP, "items"),
            ('[{"input": "x\\u0000", "label": "payment"}]', "items[0].input"),
        ):
            body = {"name": "g", "items": items}
            response = ci_client.post("/api/v1/eval-suites/", body, format="multipart")
            assert_error(response, 400, field)
        assert not EvalSuite.objects.exists()

    def test_deep_json(self, ci_client):
        assert_error(send_raw(ci_client, "/api/v1/eval-suites/", DEEP), 400, "body")
        body = '{"name": "g", "items": [{"input": "x", "label": "y", "metadata": {"a": ' + DEEP + "}}]}"
        assert_error(send_raw(ci_client, "/api/v1/eval-suites/", body), 400, "body")

    def test_nesting_up_to_the_limit_is_accepted(self, ci_client, settings):
        nested = "[" * 60 + "1" + "]" * 60
        body = '{"name": "g", "items": [{"input": "x", "label": "y", "metadata": {"a": ' + nested + "}}]}"
        assert send_raw(ci_client, "/api/v1/eval-suites/", body).status_code == 201
        settings.EVALHUB_JSON_MAX_DEPTH = 10
        assert_error(send_raw(ci_client, "/api/v1/eval-suites/", body.replace('"g"', '"h"')), 400, "body")


PROBE = '{"id": "p1", "input": "x", "expected_label": "y", "weakness": "w"'


class TestProbeSets:
    @pytest.mark.parametrize(
        ("line", "field"),
        [
            (PROBE.replace('"x"', '"x\\u0000"') + "}", "file: line 1.input"),
            (PROBE.replace('"x"', '"\\ud800"') + "}", "file: line 1.input"),
            (PROBE + ', "metadata": {"k\\u0000": 1}}', "file: line 1.metadata"),
            (PROBE + ', "metadata": ' + DEEP + "}", "file: line 1"),
        ],
    )
    def test_bad_jsonl_file(self, ci_client, line, field):
        upload = io.BytesIO(line.encode())
        upload.name = "probes.jsonl"
        body = {"name": "ps", "family": "ca", "file": upload}
        assert_error(ci_client.post("/api/v1/canary/probe-sets/", body, format="multipart"), 400, field)


class TestModelVersions:
    def register(self, client, **overrides):
        body = {"family": "ca", "label": "v9", **BUILTIN, **overrides}
        return client.post("/api/v1/model-versions/", body, format="json")

    @pytest.mark.parametrize(
        ("config", "field"),
        [
            ({"path": "models/\u0000v3"}, "backend_config.path"),
            ({"path": "models/v3", "batch_size": 2**40}, "backend_config.batch_size"),
        ],
    )
    def test_bad_backend_config(self, ci_client, config, field):
        assert_error(self.register(ci_client, backend_config=config), 400, field)
        assert not ModelVersion.objects.exists()

    @pytest.mark.parametrize("labels", ["payment", [], ["payment", 3], ["payment", "payment"]])
    def test_bad_openai_labels_are_a_400_naming_the_field(self, ci_client, labels):
        openai = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "labels": labels}
        error = assert_error(
            self.register(ci_client, backend_kind="openai", backend_config=openai),
            400,
            "backend_config.labels",
        )
        assert "backend_config.labels" in error["message"]
        assert not ModelVersion.objects.exists()

    def test_openai_labels_are_stored_as_given(self, ci_client):
        openai = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "labels": ["b", "a"], "top_logprobs": 5}
        response = self.register(ci_client, backend_kind="openai", backend_config=openai)
        assert response.status_code == 201, response.content
        config = ModelVersion.objects.get().backend_config
        assert config["labels"] == ["b", "a"] and config["top_logprobs"] == 5

    def test_nul_in_backend_config_path_from_a_service_caller(self):
        from registry.errors import ApplicationError

        with pytest.raises(ApplicationError) as caught:
            model_version_register(
                family="ca", label="v9", actor=SYSTEM, backend_kind="hf", backend_config={"path": "a\x00b"}
            )
        assert "backend_config.path" in caught.value.fields

    def test_nul_in_text_fields(self, ci_client):
        assert_error(self.register(ci_client, description="d\u0000"), 400, "description")
        openai = {"base_url": "http://127.0.0.1:9/v1", "model": "m\u0000"}
        assert_error(self.register(ci_client, backend_kind="openai", backend_config=openai), 400)

    def test_nul_or_huge_ids_in_references(self, ci_client, versions):
        assert_error(ci_client.get("/api/v1/model-versions/ca:v3%00/"), 404)
        assert_error(ci_client.get("/api/v1/model-versions/99999999999999999999999/"), 404)
        assert_error(ci_client.get("/api/v1/eval-suites/g%00/"), 404)
        assert_error(ci_client.get("/api/v1/eval-suites/99999999999999999999999/"), 404)
        assert_error(ci_client.get("/api/v1/gate-runs/99999999999999999999999/"), 404)
        assert_error(ci_client.get("/api/v1/decisions/99999999999999999999999/"), 404)
        assert_error(ci_client.get("/api/v1/model-versions/?family=ca%00"), 400, "family")

    def test_huge_offsets(self, ci_client, versions):
        for url in ("/api/v1/model-versions/", "/api/v1/eval-suites/", "/api/v1/gate-runs/"):
            assert_error(ci_client.get(f"{url}?offset=99999999999999999999999"), 400, "offset")

    def test_deep_json(self, ci_client):
        assert_error(send_raw(ci_client, "/api/v1/model-versions/", DEEP), 400, "body")


class TestExperiments:
    @pytest.mark.parametrize("share", [1e-9, 0.004, 1e-300])
    def test_a_share_below_one_bucket_on_create(self, manager, versions, share):
        body = {"name": "tiny", "baseline": "ca:v3", "candidate": "ca:v4"}
        response = manager.post(
            "/api/v1/canary/experiments/", body | {"traffic_percent": share}, format="json"
        )
        assert_error(response, 400, "traffic_percent")
        response = manager.post("/api/v1/canary/experiments/", body | {"ramp": [share, 1]}, format="json")
        assert_error(response, 400, "ramp[0]")
        assert not Experiment.objects.exists()

    def test_a_share_below_one_bucket_on_ramp(self, manager, experiment):
        Experiment.objects.filter(pk=experiment.pk).update(traffic_buckets=0, window_buckets=0)
        url = "/api/v1/canary/experiments/exp/ramp"
        response = manager.post(url, {"traffic_percent": 1e-9}, format="json")
        assert_error(response, 400, "traffic_percent")

    def test_guardrails_beyond_float_range(self, manager, versions):
        body = (
            '{"name": "g", "baseline": "ca:v3", "candidate": "ca:v4", "guardrails": {"min_requests": 1e999}}'
        )
        response = send_raw(manager, "/api/v1/canary/experiments/", body)
        assert_error(response, 400, "guardrails.min_requests")
        assert not Experiment.objects.exists()


class TestProxy:
    URL = "/api/v1/canary/exp/v1/chat/completions"

    def test_deep_json(self, app, experiment):
        assert_error(send_raw(app, self.URL, DEEP), 400, "body")
        body = '{"user": "u1", "messages": [{"role": "user", "content": "x"}], "extra": ' + DEEP + "}"
        assert_error(send_raw(app, self.URL, body), 400, "body")

    def test_nul_and_lone_surrogates_in_messages(self, app, experiment):
        body = {"user": "u1", "messages": [{"role": "user", "content": "x\u0000"}]}
        assert_error(app.post(self.URL, body, format="json"), 400, "messages[0].content")
        raw = json.dumps({"user": "u1", "messages": [{"role": "user", "content": "PLACEHOLDER"}]})
        response = send_raw(app, self.URL, raw.replace("PLACEHOLDER", "\\ud800"))
        assert_error(response, 400, "messages[0].content")
        assert not TurnEvent.objects.exists()


class TestGateRuns:
    def test_nul_and_huge_numbers_in_policy_overrides(self, ci_client, versions):
        body = {"candidate": "ca:v4", "suite": "nope", "policy_overrides": {"business_metric": "a\u0000"}}
        assert_error(ci_client.post("/api/v1/gate-runs/", body, format="json"), 400, "policy_overrides")
        raw = '{"candidate": "ca:v4", "policy_overrides": {"clean_accuracy_min": 1e999}}'
        assert_error(send_raw(ci_client, "/api/v1/gate-runs/", raw), 400, "policy_overrides")


class TestDecisions:
    def test_huge_ids(self, manager, versions):
        body = {"version": "ca:v4", "action": "reject", "reason": "r", "gate_run": 10**30}
        assert_error(manager.post("/api/v1/decisions/", body, format="json"), 400, "gate_run")
        body = {"version": "ca:v4", "action": "override_confirm", "reason": "r", "confirms": 2**63}
        assert_error(manager.post("/api/v1/decisions/", body, format="json"), 400, "confirms")


class TestPages:
    """The release manager's forms store their reason: one the database cannot store is refused on the
    page, as any other refusal; names it could not store are not found."""

    @pytest.fixture
    def browser(self, django_user_model):
        user = django_user_model.objects.create_user("rm-browser")
        user_role_grant(user=user, role="release_manager")
        client = Client()
        client.force_login(user)
        return client

    def test_nul_in_a_reason(self, browser, experiment):
        response = browser.post("/canary/exp/rollback/", {"reason": "bad\x00"}, follow=True)
        assert response.status_code == 200 and "must not contain NUL" in response.content.decode()
        assert Experiment.objects.get(pk=experiment.pk).status == "running"
        response = browser.post(
            "/versions/ca:v4/decide/", {"action": "reject", "reason": "no\x00"}, follow=True
        )
        assert response.status_code == 200 and "must not contain NUL" in response.content.decode()
        assert ModelVersion.objects.get(label="v4").status == "registered"

    def test_nul_in_a_name(self, browser, experiment):
        assert browser.get("/canary/exp%00/").status_code == 404
        assert browser.get("/versions/ca:v4%00/").status_code == 404


@pytest.mark.parametrize("reason", [-8.899190956655835e-42, 7, True, ["why"], {"why": 1}])
def test_a_text_field_given_anything_but_text_is_a_400_naming_it(manager, experiment, reason):
    # DRF's CharField reads a number as its text; the schema says string (found by the fuzz).
    response = manager.post("/api/v1/canary/experiments/exp/plan/", {"reason": reason}, format="json")
    assert response.status_code == 400 and "reason" in response.json()["error"]["fields"], response.json()

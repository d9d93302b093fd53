"""The REST API: happy paths, and bad input answered with 4xx in one error shape, never 500."""

import io
import json

import pytest
from rest_framework.test import APIClient

from gate.models import GateRun
from registry.actors import SYSTEM
from registry.models import AuditLog, EvalSuite, ModelVersion
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}


def assert_error(response, status: int, field: str | None = None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "reason", "params", "message", "fields"}
    if field is not None:
        assert any(key == field or key.startswith(field) for key in body["error"]["fields"]), body
    return body["error"]


@pytest.fixture
def v3():
    return incumbent_register(family="ca", label="v3", actor=SYSTEM, **BUILTIN)


@pytest.fixture
def suite():
    items = suite_items_parse(records=[{"input": f"q{i}", "label": "payment"} for i in range(40)])
    return eval_suite_import(name="ca", items=items, actor=SYSTEM)[0]


class TestModelVersions:
    def test_register_list_detail_by_ref(self, ci_client, v3):
        response = ci_client.post(
            "/api/v1/model-versions/",
            {
                "family": "ca",
                "label": "v4",
                "baseline": "ca:v3",
                "api_key": "sk-secret",
                "backend_kind": "openai",
                "backend_config": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
            },
            format="json",
        )
        assert response.status_code == 201, response.content
        body = response.json()
        assert body["ref"] == "ca:v4" and body["baseline"] == "ca:v3" and body["status"] == "registered"
        assert body["has_api_key"] is True
        assert "sk-secret" not in response.content.decode()
        assert body["backend_config"]["max_retries"] == 3  # defaults filled
        for url in ("/api/v1/model-versions/ca:v4/", f"/api/v1/model-versions/{body['id']}/"):
            detail = ci_client.get(url)
            assert detail.status_code == 200 and "sk-secret" not in detail.content.decode()
        listed = ci_client.get("/api/v1/model-versions/?family=ca&status=registered").json()
        assert [v["ref"] for v in listed["results"]] == ["ca:v4"]
        audit = AuditLog.objects.get(action="model_version.register", target_id=str(body["id"]))
        assert audit.actor == ci_client.user

    @pytest.mark.parametrize(
        ("config", "extra", "field"),
        [
            (
                {"backend_kind": "openai", "backend_config": {"base_url": "http://169.254.169.254/v1"}},
                {},
                "base_url",
            ),
            ({"backend_kind": "openai", "backend_config": {"base_url": "http://10.0.0.1/"}}, {}, "base_url"),
            (
                {
                    "backend_kind": "openai",
                    "backend_config": {"base_url": "http://[::ffff:169.254.169.254]/v1"},
                },
                {},
                "base_url",
            ),
            (
                {"backend_kind": "openai", "backend_config": {"base_url": "ftp://models.example.com/v1"}},
                {},
                "base_url",
            ),
            (
                {"backend_kind": "openai", "backend_config": {"base_url": "https://api.example.com/v1"}},
                {"serving_url": "http://169.254.169.254/v1"},
                "serving_url",
            ),
            (
                {"backend_kind": "openai", "backend_config": {"base_url": "https://api.example.com/v1"}},
                {"serving_url": "ftp://models.example.com/v1"},
                "serving_url",
            ),
            (
                {
                    "backend_kind": "openai",
                    "backend_config": {
                        "base_url": "https://api.example.com/v1",
                        "api_key_env": "DATABASE_URL",
                    },
                },
                {},
                "api_key_env",
            ),
            ({"backend_kind": "hf", "backend_config": {"path": "/etc"}}, {}, "path"),
            ({"backend_kind": "builtin", "backend_config": {"path": "../../../../etc"}}, {}, "path"),
            ({"backend_kind": "hf", "backend_config": {"path": "missing-folder"}}, {}, "path"),
        ],
    )
    def test_register_refuses_outbound_addresses_paths_and_env_names(
        self, ci_client, settings, config, extra, field
    ):
        settings.EVALHUB_OUTBOUND_ALLOW_NETWORKS = []
        settings.EVALHUB_OUTBOUND_RESOLVE = {"api.example.com": ["93.184.216.34"]}.__getitem__
        if config["backend_kind"] == "openai":
            config["backend_config"] = {"model": "m", **config["backend_config"]}
        response = ci_client.post(
            "/api/v1/model-versions/", {"family": "ca", "label": "v9", **config, **extra}, format="json"
        )
        name = field if field == "serving_url" else f"backend_config.{field}"
        assert list(assert_error(response, 400, name)["fields"]) == [name]
        assert not ModelVersion.objects.filter(label="v9").exists()

    def test_the_api_key_is_write_only_and_encrypted_at_rest(self, ci_client):
        response = ci_client.post(
            "/api/v1/model-versions/",
            {
                "family": "ca",
                "label": "v5",
                "api_key": "sk-very-secret",
                "backend_kind": "openai",
                "backend_config": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
            },
            format="json",
        )
        assert response.status_code == 201 and response.json()["has_api_key"] is True
        assert "api_key" not in response.json() and "api_key_encrypted" not in response.json()
        stored = ModelVersion.objects.get(label="v5").api_key_encrypted
        listed = ci_client.get("/api/v1/model-versions/").content.decode()
        detail = ci_client.get("/api/v1/model-versions/ca:v5/").content.decode()
        for body in (response.content.decode(), listed, detail):
            assert "sk-very-secret" not in body and stored not in body
        assert "sk-very-secret" not in stored

    def test_malformed_json(self, ci_client):
        response = ci_client.post("/api/v1/model-versions/", data="{bad", content_type="application/json")
        assert_error(response, 400, "body")

    def test_duplicate_label(self, ci_client, v3):
        response = ci_client.post(
            "/api/v1/model-versions/", {"family": "ca", "label": "v3", **BUILTIN}, format="json"
        )
        assert assert_error(response, 409, "label")["code"] == "duplicate"

    def test_missing_and_unknown_fields(self, ci_client):
        response = ci_client.post("/api/v1/model-versions/", {"family": "ca", "colour": "red"}, format="json")
        error = assert_error(response, 400)
        assert {"label", "backend_kind", "backend_config", "colour"} <= set(error["fields"])

    def test_unknown_baseline_and_bad_backend_config(self, ci_client):
        response = ci_client.post(
            "/api/v1/model-versions/",
            {"family": "ca", "label": "v9", "baseline": "ca:nope", **BUILTIN},
            format="json",
        )
        assert_error(response, 404, "baseline")  # a well-formed ref to nothing, as in a path
        response = ci_client.post(
            "/api/v1/model-versions/",
            {"family": "ca", "label": "v9", "backend_kind": "openai", "backend_config": {"model": "m"}},
            format="json",
        )
        assert_error(response, 400, "backend_config.base_url")

    def test_bad_family_name(self, ci_client):
        response = ci_client.post(
            "/api/v1/model-versions/", {"family": "Bad Name!", "label": "v1", **BUILTIN}, format="json"
        )
        assert_error(response, 400, "family")

    def test_unknown_version(self, ci_client):
        assert_error(ci_client.get("/api/v1/model-versions/ca:nope/"), 404)
        assert_error(ci_client.get("/api/v1/model-versions/not-a-ref/"), 404)

    def test_bad_filter(self, ci_client):
        assert_error(ci_client.get("/api/v1/model-versions/?status=shiny"), 400, "status")

    def test_illegal_transition(self, make_client, v3):
        manager = make_client("release_manager")
        response = manager.post(
            "/api/v1/model-versions/ca:v3/transition/",
            {"status": "evaluating", "reason": "try"},
            format="json",
        )
        assert assert_error(response, 409, "status")["code"] == "illegal_transition"
        v3.refresh_from_db()
        assert v3.status == "promoted"

    def test_legal_transition_is_audited(self, make_client):
        manager = make_client("release_manager")
        version = model_version_register(family="ca", label="v5", actor=SYSTEM, **BUILTIN)
        response = manager.post(
            "/api/v1/model-versions/ca:v5/transition/",
            {"status": "evaluating", "reason": "manual"},
            format="json",
        )
        assert response.status_code == 200 and response.json()["status"] == "evaluating"
        row = AuditLog.objects.get(action="model_version.transition", target_id=str(version.pk))
        assert (row.before, row.after, row.reason, row.actor) == (
            {"status": "registered"},
            {"status": "evaluating"},
            "manual",
            manager.user,
        )

    def test_ci_cannot_transition(self, ci_client, v3):
        response = ci_client.post(
            "/api/v1/model-versions/ca:v3/transition/",
            {"status": "rolled_back", "reason": "x"},
            format="json",
        )
        assert_error(response, 403)


class TestRoles:
    def test_viewer_reads_but_cannot_write(self, make_client, v3):
        viewer = make_client("viewer")
        assert viewer.get("/api/v1/model-versions/").status_code == 200
        response = viewer.post(
            "/api/v1/model-versions/", {"family": "ca", "label": "v4", **BUILTIN}, format="json"
        )
        assert_error(response, 403)
        assert_error(viewer.post("/api/v1/gate-runs/", {"candidate": "ca:v3"}, format="json"), 403)
        assert not ModelVersion.objects.filter(label="v4").exists()

    def test_no_role_and_no_token(self, make_client):
        assert_error(make_client(None).get("/api/v1/model-versions/"), 403)
        assert_error(APIClient().get("/api/v1/model-versions/"), 401)
        bad = APIClient()
        bad.credentials(HTTP_AUTHORIZATION="Token nope")
        assert_error(bad.get("/api/v1/model-versions/"), 401)

    def test_unknown_endpoint_is_json_404(self, ci_client):
        assert_error(ci_client.get("/api/v1/nothing-here/"), 404)


class TestEvalSuites:
    def test_upload_jsonl_file_then_same_content_is_idempotent(self, ci_client):
        content = "\n".join(
            json.dumps({"id": f"i{i}", "input": f"q{i}", "label": "payment", "tags": ["plain"]})
            for i in range(5)
        )
        for expected_status in (201, 200):
            upload = io.BytesIO(content.encode())
            upload.name = "suite.jsonl"
            response = ci_client.post(
                "/api/v1/eval-suites/", {"name": "golden", "file": upload}, format="multipart"
            )
            assert response.status_code == expected_status, response.content
        body = response.json()
        assert (body["ref"], body["item_count"], body["locked"]) == ("golden@1", 5, False)
        items = ci_client.get("/api/v1/eval-suites/golden/items/").json()
        assert [i["id"] for i in items["results"]] == ["i0", "i1", "i2", "i3", "i4"]

    def test_new_content_makes_a_new_version(self, ci_client):
        for n in (3, 4):
            response = ci_client.post(
                "/api/v1/eval-suites/",
                {"name": "golden", "items": [{"input": f"q{i}", "label": "a"} for i in range(n)]},
                format="json",
            )
            assert response.status_code == 201
        assert response.json()["ref"] == "golden@2"
        assert ci_client.get("/api/v1/eval-suites/golden/").json()["version"] == 2
        assert ci_client.get("/api/v1/eval-suites/golden@1/").json()["item_count"] == 3

    def test_csv_upload(self, ci_client):
        upload = io.BytesIO(b"id,input,label,tags\na,Pay now,payment,plain|short\n")
        upload.name = "suite.csv"
        response = ci_client.post(
            "/api/v1/eval-suites/", {"name": "csvsuite", "file": upload}, format="multipart"
        )
        assert response.status_code == 201, response.content

    def test_broken_jsonl_line_names_line_and_field(self, ci_client):
        upload = io.BytesIO(b'{"input": "ok", "label": "a"}\n{"input": \n{"input": "x", "labl": "a"}\n')
        upload.name = "suite.jsonl"
        response = ci_client.post(
            "/api/v1/eval-suites/", {"name": "golden", "file": upload}, format="multipart"
        )
        error = assert_error(response, 400)
        assert {"file: line 2", "file: line 3.labl"} <= set(error["fields"])
        assert not EvalSuite.objects.exists()

    def test_items_errors_name_index_and_field(self, ci_client):
        response = ci_client.post(
            "/api/v1/eval-suites/", {"name": "g", "items": [{"input": "x"}]}, format="json"
        )
        assert_error(response, 400, "items[0].label")

    def test_upload_over_the_size_limit(self, ci_client, settings):
        upload = io.BytesIO(b"x" * (settings.EVALHUB_MAX_UPLOAD_BYTES + 1))
        upload.name = "big.jsonl"
        response = ci_client.post("/api/v1/eval-suites/", {"name": "big", "file": upload}, format="multipart")
        assert_error(response, 413, "file")
        body = {"name": "big", "items": [{"input": "x" * 1000, "label": "a"}] * 300}
        assert_error(ci_client.post("/api/v1/eval-suites/", body, format="json"), 413, "items")
        assert not EvalSuite.objects.exists()

    def test_file_and_items_together_or_neither(self, ci_client):
        assert_error(ci_client.post("/api/v1/eval-suites/", {"name": "g"}, format="json"), 400, "file")

    def test_unknown_suite(self, ci_client):
        assert_error(ci_client.get("/api/v1/eval-suites/nope/"), 404)


class TestGateRuns:
    def test_start_answers_202_and_enqueues_on_commit(
        self, ci_client, v3, suite, django_capture_on_commit_callbacks
    ):
        model_version_register(family="ca", label="v4", baseline=v3, actor=SYSTEM, **BUILTIN)
        with django_capture_on_commit_callbacks() as callbacks:
            response = ci_client.post("/api/v1/gate-runs/", {"candidate": "ca:v4"}, format="json")
        assert response.status_code == 202, response.content
        body = response.json()
        assert (body["candidate"], body["baseline"], body["suite"], body["status"]) == (
            "ca:v4",
            "ca:v3",
            "ca@1",
            "queued",
        )
        assert response["Location"].endswith(f"/api/v1/gate-runs/{body['id']}/")
        assert len(callbacks) == 1
        assert ModelVersion.objects.get(label="v4").status == "evaluating"
        assert (
            ci_client.get(f"/api/v1/gate-runs/{body['id']}/").json()["policy_config"]["clean_accuracy_min"]
            == 0.8
        )
        assert ci_client.get("/api/v1/eval-suites/ca/").json()["locked"] is True

    def test_unknown_candidate_and_suite(self, ci_client, v3, suite):
        assert_error(
            ci_client.post("/api/v1/gate-runs/", {"candidate": "ca:v9"}, format="json"), 404, "candidate"
        )
        response = ci_client.post(
            "/api/v1/gate-runs/", {"candidate": "ca:v3", "suite": "nope"}, format="json"
        )
        assert_error(response, 404, "suite")
        EvalSuite.objects.all().delete()
        assert_error(
            ci_client.post("/api/v1/gate-runs/", {"candidate": "ca:v3"}, format="json"), 400, "suite"
        )
        assert not GateRun.objects.exists()

    def test_bad_policy_override_names_the_key(self, ci_client, v3, suite):
        response = ci_client.post(
            "/api/v1/gate-runs/",
            {"candidate": "ca:v3", "policy_overrides": {"clean_accuracy_min": 3}},
            format="json",
        )
        assert_error(response, 400, "policy_overrides.clean_accuracy_min")
        response = ci_client.post(
            "/api/v1/gate-runs/", {"candidate": "ca:v3", "policy_overrides": {"repeats": 21}}, format="json"
        )
        assert_error(response, 400, "policy_overrides.repeats")
        response = ci_client.post(
            "/api/v1/gate-runs/", {"candidate": "ca:v3", "policy": "nope"}, format="json"
        )
        assert_error(response, 400, "policy")
        assert not GateRun.objects.exists()

    def test_own_baseline_refused(self, ci_client, v3, suite):
        response = ci_client.post(
            "/api/v1/gate-runs/", {"candidate": "ca:v3", "baseline": "ca:v3"}, format="json"
        )
        assert_error(response, 400, "baseline")

    def test_unknown_run(self, ci_client):
        assert_error(ci_client.get("/api/v1/gate-runs/999999/"), 404)


class TestSchema:
    def test_openapi_schema_and_docs_without_cdn(self, ci_client):
        schema = ci_client.get("/api/schema/?format=json")
        assert schema.status_code == 200
        assert "/api/v1/gate-runs/" in schema.json()["paths"]
        docs = ci_client.get("/api/docs/")
        assert docs.status_code == 200
        html = docs.content.decode()
        assert "swagger-ui" in html and "cdn" not in html.lower()

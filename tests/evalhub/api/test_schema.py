"""The published OpenAPI document: valid, warning-free, and saying what the API really does (the
fuzz test in test_fuzz.py holds the API to it request by request)."""

from __future__ import annotations

from collections import Counter

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(ci_client) -> dict:
    response = ci_client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return response.json()


def operations(schema: dict):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


def test_the_generator_validates_it_with_no_warning(tmp_path, capsys):
    # --fail-on-warn turns every drf-spectacular warning (and error) into a failing exit.
    call_command("spectacular", validate=True, fail_on_warn=True, file=str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").stat().st_size > 10_000
    assert "Warning" not in capsys.readouterr().err


@pytest.mark.parametrize("url", ["/api/schema/", "/api/docs/", "/api/redoc/"])
def test_schema_and_docs_need_a_reading_role(url):
    assert APIClient().get(url).status_code in (401, 403)


def test_operation_ids_are_unique_and_every_operation_is_secured(schema):
    ids = Counter(operation["operationId"] for _, _, operation in operations(schema))
    assert ids and max(ids.values()) == 1, ids.most_common(3)
    # Swagger's Authorize button takes a token: the scheme is documented.
    token = schema["components"]["securitySchemes"]["tokenAuth"]
    assert (
        token["type"] == "http" and token["scheme"] == "bearer" and "create_api_token" in token["description"]
    )
    for path, method, operation in operations(schema):
        assert {"tokenAuth": []} in operation["security"], (path, method)


def test_each_input_has_its_own_component(schema):
    def body_ref(path: str, method: str) -> str:
        content = schema["paths"][path][method]["requestBody"]["content"]
        return content["application/json"]["schema"]["$ref"]

    # Once, every nested `Input` serializer shared one component, so POST gate-runs/ was
    # documented as taking the assign endpoint's fields.
    refs = {path: body_ref(path, "post") for path in ("/api/v1/gate-runs/", "/api/v1/decisions/")}
    assert len(set(refs.values())) == 2, refs
    gate_run = schema["components"]["schemas"][refs["/api/v1/gate-runs/"].rsplit("/", 1)[1]]
    assert "candidate" in gate_run["properties"] and "user_id" not in gate_run["properties"]


def test_lists_are_documented_as_pages(schema):
    listed = schema["paths"]["/api/v1/gate-runs/"]["get"]["responses"]["200"]["content"]
    page = listed["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert {"count", "next", "previous", "results"} <= set(
        schema["components"]["schemas"][page]["properties"]
    )


def test_errors_are_documented_with_the_one_error_shape(schema):
    for path, method, operation in operations(schema):
        assert {"401", "403"} <= set(operation["responses"]), (path, method)
        for code, response in operation["responses"].items():
            if code.startswith("4"):
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/Error"), (path, method, code)


def test_nullable_fields_say_so(schema):
    components = schema["components"]["schemas"]
    gate_run = next(
        c for n, c in components.items() if n.startswith("GateRun") and "baseline" in c.get("properties", {})
    )
    assert gate_run["properties"]["baseline"].get("nullable") is True

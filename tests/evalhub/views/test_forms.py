"""The forms do the work without curl, through the API's services: what a service refuses comes back
next to the field it names, with what was typed kept."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from canary.models import Experiment
from gate.models import GateRun
from registry.actors import SYSTEM
from registry.models import AuditLog, EvalSuite, ModelVersion
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db


def signed_in(role: str) -> Client:
    user = get_user_model().objects.create_user(username=f"form-{role}")
    user_role_grant(user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def versions():
    backend = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **backend)
    v4 = model_version_register(family="fam", label="v4", baseline=v3, actor=SYSTEM, **backend)
    return v3, v4


def test_registering_a_version_checks_the_backend_config_as_the_api_does(versions):
    client = signed_in("ci")
    typed = {
        "family": "fam",
        "label": "v5",
        "backend_kind": "builtin",
        "backend_config": '{"path": "../../etc"}',
        "baseline": "fam:v3",
        "description": "kept as typed",
    }
    response = client.post("/new/version/", typed)
    assert response.status_code == 400
    form = response.context["form"]
    assert (
        list(form.errors) == ["backend_config"] and "backend_config.path" in form.errors["backend_config"][0]
    )
    html = response.content.decode()
    assert "kept as typed" in html and "../../etc" in html and 'value="v5"' in html
    assert not ModelVersion.objects.filter(label="v5").exists()

    bad_json = client.post("/new/version/", {**typed, "backend_config": '{"path": NaN}'})
    assert bad_json.context["form"].errors["backend_config"] == ["NaN is not JSON"]

    ok = client.post("/new/version/", {**typed, "backend_config": '{"path": "placeholder"}'})
    assert ok.status_code == 302 and ok["Location"] == "/versions/fam:v5/"
    version = ModelVersion.objects.get(label="v5")
    assert version.baseline.ref == "fam:v3" and version.created_by.username == "form-ci"


def test_uploading_a_suite_names_the_bad_line(versions):
    client = signed_in("ci")
    bad = io.BytesIO(b'{"input": "q", "label": "a"}\n{"label": "b"}\n')
    bad.name = "suite.jsonl"
    response = client.post("/new/suite/", {"name": "fam", "file": bad})
    assert response.status_code == 400 and "line 2" in " ".join(response.context["form"].errors["file"])
    good = io.BytesIO(b'{"input": "q", "label": "a"}\n')
    good.name = "suite.jsonl"
    assert client.post("/new/suite/", {"name": "fam", "file": good}).status_code == 302
    assert EvalSuite.objects.get(name="fam").items.count() == 1


def test_starting_a_gate_run_with_overrides_and_refusals_next_to_the_field(versions, sent_tasks):
    _, v4 = versions
    eval_suite_import(
        name="fam", items=suite_items_parse(records=[{"input": "q", "label": "a"}]), actor=SYSTEM
    )
    client = signed_in("ci")
    assert 'value="fam:v4" selected' in client.get("/new/gate-run/?candidate=fam:v4").content.decode()
    refused = client.post(
        "/new/gate-run/", {"candidate": "fam:v4", "policy_overrides": '{"robustness_samples": -3}'}
    )
    assert refused.status_code == 400
    assert "robustness_samples" in " ".join(refused.context["form"].errors["policy_overrides"])
    assert "-3" in refused.content.decode()
    started = client.post(
        "/new/gate-run/",
        {"candidate": "fam:v4", "policy_overrides": '{"required_layers": ["clean_accuracy"]}'},
    )
    run = GateRun.objects.get()
    assert started["Location"] == f"/gate-runs/{run.pk}/"
    assert (run.candidate, run.policy_overrides, run.created_by.username) == (
        v4,
        {"required_layers": ["clean_accuracy"]},
        "form-ci",
    )


def test_creating_an_experiment_is_for_release_managers_and_checks_the_ramp(versions):
    assert signed_in("ci").get("/new/experiment/").status_code == 403
    client = signed_in("release_manager")
    typed = {
        "name": "exp",
        "baseline": "fam:v3",
        "candidate": "fam:v4",
        "ramp": "5, 1",
        "guardrails": '{"min_requests": 50}',
    }
    refused = client.post("/new/experiment/", typed)
    assert (
        refused.status_code == 400 and "each step above the last" in refused.context["form"].errors["ramp"][0]
    )
    assert client.post("/new/experiment/", {**typed, "ramp": "x"}).context["form"].errors["ramp"]
    created = client.post("/new/experiment/", {**typed, "ramp": "1, 5, 25"})
    assert created["Location"] == "/canary/exp/"
    experiment = Experiment.objects.get()
    assert (experiment.ramp, experiment.guardrails["min_requests"], experiment.is_demo) == (
        [1, 5, 25],
        50,
        False,
    )
    assert AuditLog.objects.filter(action="experiment.create", actor_name="form-release_manager").exists()

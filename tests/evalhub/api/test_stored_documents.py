"""Stored documents read leniently: a run stored by an older version, whose policy holds a key this
version no longer knows (retired), lacks one it added since (missing) and holds a value now out of
range, and whose layer details carry a retired key, answers 200 everywhere it is shown (run list and
detail, report as JSON and Markdown, the run page in English and Chinese, decisions on it), with what
the read found. And the gate-run list costs the same queries for 1 run as for 50."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from engines.demo.dataset import demo_dataset_build
from gate.models import GateRun, LayerResult
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.evalhub.views.test_zh_hans import data_names, untranslated
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db
RETIRED = {"robustness_legacy_mode": "strict", "follow_up_window_days": 3}


@pytest.fixture
def old_run(small_bow):
    """A real finished run of clean accuracy, then aged: its policy and details as an older version
    (with other keys) would have stored them."""
    items = demo_dataset_build(seed=0).eval[:40]
    records = [{"id": i.id, "input": i.input, "label": i.label, "tags": list(i.tags)} for i in items]
    suite = eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]
    backend = {"backend_kind": "builtin", "backend_config": {"path": str(small_bow)}}
    baseline = incumbent_register(family="fam", label="v1", actor=SYSTEM, **backend)
    candidate = model_version_register(family="fam", label="v2", baseline=baseline, actor=SYSTEM, **backend)
    run = gate_run_start(
        candidate=candidate,
        suite=suite,
        actor=SYSTEM,
        policy_overrides={"required_layers": ["clean_accuracy"], "clean_accuracy_min": 0.0},
    )
    run = gate_run_execute(gate_run_id=run.pk, worker="w1")
    config = {**run.policy_config, **RETIRED, "confidence": 0.3}
    del config["batch_size"]
    layer = run.layers.get()
    details = {**layer.details, "legacy_note": "kept"}
    details["candidate"] = {**details["candidate"], "old_statistic": 0.5}
    GateRun.objects.filter(pk=run.pk).update(policy_config=config)
    LayerResult.objects.filter(pk=layer.pk).update(details=details)
    run.refresh_from_db()
    return run


def reader(role="release_manager", language="en"):
    user = get_user_model().objects.create_user(username=f"{role}-{language}")
    user_role_grant(user=user, role=role)
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(user)
    client.user = user
    return client


def test_the_run_list_and_detail_answer_with_what_the_read_found(old_run):
    client = reader()
    listed = client.get("/api/v1/gate-runs/")
    assert listed.status_code == 200
    (body,) = listed.json()["results"]
    detail = client.get(f"/api/v1/gate-runs/{old_run.pk}/")
    assert detail.status_code == 200 and detail.json() == body
    found = body["stored_policy"]
    assert found["retired_keys"] == RETIRED
    assert found["defaulted_keys"] == {"batch_size": 32}
    assert found["invalid_keys"] == {
        "confidence": {
            "value": 0.3,
            "why": {"code": "policy.between", "params": {"low": 0.5, "high": 0.9999}},
        }
    }
    # The stored document itself is answered as stored, retired keys and all.
    stored = body["policy_config"]
    assert stored["robustness_legacy_mode"] == "strict" and "batch_size" not in stored
    assert body["live"]["layers"][0]["verdict"] == "pass"


def test_the_report_shows_retired_keys_in_json_and_markdown(old_run):
    client = reader()
    report = client.get(f"/api/v1/gate-runs/{old_run.pk}/report/?format=json")
    assert report.status_code == 200
    data = report.json()
    assert data["policy"]["retired_keys"] == RETIRED
    assert data["policy"]["defaulted_keys"] == {"batch_size": 32}
    assert data["policy"]["invalid_keys"]["confidence"]["value"] == 0.3
    (layer,) = data["layers"]
    assert layer["retired_keys"] == {"legacy_note": "kept", "candidate.old_statistic": 0.5}
    assert layer["estimates"] and layer["verdict"] == "pass"  # the rest of the details still read
    markdown = client.get(f"/api/v1/gate-runs/{old_run.pk}/report/?format=md")
    assert markdown.status_code == 200
    text = markdown.content.decode()
    assert "Retired policy keys" in text and "| robustness_legacy_mode | strict |" in text
    assert "| confidence | 0.3 | must be between 0.5 and 0.9999 |" in text
    assert "| batch_size | 32 |" in text and "| candidate.old_statistic | 0.5 |" in text


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_run_page_shows_the_retired_keys(old_run, language):
    response = reader(language=language).get(f"/gate-runs/{old_run.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="retired-keys"' in html and "robustness_legacy_mode = strict" in html
    assert 'id="invalid-keys"' in html and "confidence = 0.3" in html
    assert "candidate.old_statistic = 0.5" in html
    if language == "zh-hans":
        assert untranslated(html, data_names()) == []
        assert "必须介于 0.5 和 0.9999 之间" in html


def test_pages_listing_the_run_and_decisions_on_it_answer(old_run):
    manager = reader()
    for url in ("/", f"/versions/{old_run.candidate.ref}/"):
        assert manager.get(url).status_code == 200
    api = Client()
    api.force_login(manager.user)
    decided = api.post(
        "/api/v1/decisions/",
        {"version": old_run.candidate.ref, "action": "reject", "reason": "old run", "gate_run": old_run.pk},
        content_type="application/json",
    )
    assert decided.status_code == 201, decided.content
    assert api.get("/api/v1/decisions/").status_code == 200
    assert api.get(f"/api/v1/decisions/{decided.json()['id']}/").status_code == 200


def test_a_run_queued_under_an_older_version_ends_in_error_naming_the_keys(old_run):
    GateRun.objects.filter(pk=old_run.pk).update(status="queued", verdict="pending", finished_at=None)
    run = gate_run_execute(gate_run_id=old_run.pk, worker="w2")
    assert (run.status, run.verdict) == ("error", "error")
    assert run.error_message == (
        "the stored policy has keys this version cannot run: confidence, follow_up_window_days, "
        "robustness_legacy_mode; start a new run"
    )
    page = reader(language="zh-hans").get(f"/gate-runs/{run.pk}/").content.decode()
    assert "存储的策略含有当前版本无法执行的键：confidence, follow_up_window_days" in page


def runs_made(run: GateRun, count: int) -> None:
    """`count` more runs like `run`, in every state, each with two stored layers."""
    statuses = ["queued", "running", "succeeded", "failed", "error"]
    for index in range(count):
        status = statuses[index % len(statuses)]
        made = GateRun.objects.create(
            candidate=run.candidate,
            baseline=run.baseline,
            suite=run.suite,
            policy=run.policy,
            policy_config=run.policy_config,
            status=status,
            verdict="pass" if status == "succeeded" else "pending",
        )
        for layer in ("clean_accuracy", "robustness"):
            LayerResult.objects.create(gate_run=made, layer=layer, verdict="pass", metric="m", details={})


def queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured.captured_queries)


@pytest.mark.parametrize("url", ["/api/v1/gate-runs/", "/", "/versions/fam:v2/"])
def test_the_run_list_costs_the_same_queries_for_1_run_as_for_50(old_run, url):
    client = reader()
    GateRun.objects.filter(pk=old_run.pk).update(status="queued")  # the queue is read with one run too
    one = queries(client, url)
    runs_made(old_run, 49)
    assert GateRun.objects.count() == 50
    fifty = queries(client, url)
    assert one == fifty, f"{url}: {one} queries for 1 run, {fifty} for 50"
    if url.startswith("/api/"):
        body = client.get(url).json()
        assert body["count"] == 50 and len(body["results"]) == 50
        ahead = sorted(r["live"]["runs_ahead"] for r in body["results"] if r["status"] == "queued")
        assert ahead == [10 + i for i in range(len(ahead))]  # the 10 running ones, then each queued one

"""The gate run page: the candidate's wrong answers first, the baseline's on their own tab, 50 a
page, filtered by layer, tag and perturbation type; the charts' data; the live section."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client

from engines.demo.dataset import demo_dataset_build
from gate.models import LayerResult
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.selectors.workers import queue_workers_get
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_run(small_bow, test_model_dir):
    """A run of clean accuracy on 120 demo items; both versions are the same small model, so each
    has its own rows for the same wrong answers."""
    items = demo_dataset_build(seed=0).eval[:120]
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
    return gate_run_execute(gate_run_id=run.pk, worker="w1")


@pytest.fixture
def client():
    user = get_user_model().objects.create_user(username="viewer")
    user_role_grant(user=user, role="viewer")
    client = Client()
    client.force_login(user)
    return client


def test_the_candidates_wrong_answers_come_first_and_the_baselines_on_their_tab(
    finished_run, client, monkeypatch
):
    monkeypatch.setattr("evalhub.views.gate_runs.WRONG_PER_PAGE", 5)
    url = f"/gate-runs/{finished_run.pk}/"
    page = client.get(url).context["page"]
    wrong = finished_run.layers.get().samples.filter(version=finished_run.candidate, correct=False).count()
    assert wrong > 5 and page.paginator.count == wrong and len(page.object_list) == 5
    assert {s.version_id for s in page.object_list} == {finished_run.candidate_id}
    baseline = client.get(url, {"side": "baseline", "page": 2}).context["page"]
    assert baseline.number == 2 and {s.version_id for s in baseline.object_list} == {finished_run.baseline_id}


def test_filters_narrow_by_tag_and_unknown_choices_are_ignored(finished_run, client):
    url = f"/gate-runs/{finished_run.pk}/"
    everything = client.get(url).context["page"].paginator.count
    tagged = client.get(url, {"tag": "long_contract"}).context["page"]
    assert 0 < tagged.paginator.count < everything
    assert all("long_contract" in s.item.tags for s in tagged.object_list)
    assert client.get(url, {"layer": "clean_accuracy"}).context["page"].paginator.count == everything
    response = client.get(url, {"tag": "no-such-tag"})
    assert response.status_code == 200 and response.context["page"].paginator.count == everything


def test_the_page_holds_at_most_50_rows_and_the_chart_data(finished_run, client):
    response = client.get(f"/gate-runs/{finished_run.pk}/")
    html = response.content.decode()
    assert html.count("<tr><td>clean_accuracy</td>") <= 50
    charts = json.loads(
        html.split('<script id="charts-data" type="application/json">')[1].split("</script>")[0]
    )
    (chart,) = charts
    assert chart["id"] == "clean-by-tag" and [s["name"] for s in chart["bars"]] == ["fam:v2", "fam:v1"]
    by_tag = finished_run.layers.get().details["candidate"]["by_tag"]
    assert chart["categories"] == list(by_tag)
    assert chart["bars"][0]["values"] == [cell["accuracy"] for cell in by_tag.values()]
    assert chart["bars"][0]["low"][0] == by_tag[chart["categories"][0]]["ci_low"]
    assert 'id="live"' in html and "data-live-active" not in html  # a finished run polls nothing


def test_the_markdown_report_holds_tables_and_no_json(finished_run, ci_client):
    text = ci_client.get(f"/api/v1/gate-runs/{finished_run.pk}/report/?format=md").content.decode()
    assert "```json" not in text and '": ' not in text
    assert "| suite | fam@1 |" in text and "*candidate.by_tag*" in text
    assert "*candidate / baseline*" in text and "| accuracy | 0.65 | 0.65 |" in text
    assert len(text.splitlines()) < 200


def test_the_time_a_layer_took_on_an_endpoint_reads_in_chinese(finished_run, client):
    LayerResult.objects.filter(gate_run=finished_run).update(device="remote")
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "zh-hans"
    html = client.get(f"/gate-runs/{finished_run.pk}/").content.decode()
    assert "在 远程端点 上耗时" in html and "remote" not in html


@pytest.fixture
def queued_run(sent_tasks):
    builtin = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
    records = [{"id": "q-1", "input": "Pay within 30 days.", "label": "payment"}]
    suite = eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]
    baseline = incumbent_register(family="fam", label="v1", actor=SYSTEM, **builtin)
    candidate = model_version_register(family="fam", label="v2", baseline=baseline, actor=SYSTEM, **builtin)
    cache.clear()
    yield gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM)
    cache.clear()


@pytest.mark.parametrize(
    ("language", "said", "not_said"),
    [
        ("en", "no worker is consuming the gpu queue", "waiting for a gpu worker"),
        ("zh-hans", "没有工作进程在消费 gpu 队列", "等待 gpu 工作进程领取"),
    ],
)
def test_a_queued_run_whose_queue_has_no_live_worker_says_so(queued_run, client, language, said, not_said):
    # The workers' answer to the broadcast: only the cpu worker is alive (the gpu one was killed).
    queue_workers_get(inspect=lambda: {"cpu@vm": [{"name": "cpu", "routing_key": "cpu"}]})
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = language
    html = client.get(f"/gate-runs/{queued_run.pk}/").content.decode()
    assert said in html and not_said not in html
    live = client.get(f"/api/v1/gate-runs/{queued_run.pk}/").json()["live"]
    assert (live["where"], live["queue_workers"], live["waiting_reason"].startswith(said)) == (
        "no_worker",
        [],
        True,
    )


def test_a_queued_run_next_for_a_live_worker_waits_for_it(queued_run, client):
    queue_workers_get(inspect=lambda: {"gpu@vm": [{"name": "gpu", "routing_key": "gpu"}]})
    html = client.get(f"/gate-runs/{queued_run.pk}/").content.decode()
    assert "next on the gpu queue: waiting for a gpu worker to take it" in html

"""Layer 0 with `repeats`: a sampling endpoint answers differently each time (flaky items, pass^k,
the clustered interval), the same seeds give the same answers, a deterministic model is asked once."""

import threading

import pytest

from engines.demo.dataset import demo_dataset_build
from engines.model_server import model_server_create
from engines.stats.intervals import clustered_mean_interval
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_backend, model_version_register
from tests.pages import page_text

pytestmark = pytest.mark.django_db
ONLY_CLEAN = {"required_layers": ["clean_accuracy"], "run_baseline": False, "clean_min_items": 20}


@pytest.fixture
def suite():
    items = [i for i in demo_dataset_build(seed=0).eval if i.language in ("en", "zh")][::8][:24]
    records = [
        {"id": i.id, "input": i.input, "label": i.label, "language": i.language, "tags": list(i.tags)}
        for i in items
    ]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


@pytest.fixture
def local(small_bow):
    return model_version_register(
        family="fam",
        label="local",
        backend_kind="builtin",
        backend_config={"path": str(small_bow)},
        actor=SYSTEM,
    )


@pytest.fixture
def sampled(local):
    """The small bag of words behind a sampling model server, asked at temperature 1."""
    server = model_server_create(
        backend=model_version_backend(version=local, cached=False), model_name="bow", sampling=True
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield model_version_register(
        family="fam",
        label="sampled",
        backend_kind="openai",
        backend_config={
            "base_url": f"http://127.0.0.1:{server.server_port}/v1",
            "model": "bow",
            "temperature": 1.0,
        },
        actor=SYSTEM,
    )
    server.shutdown()
    server.server_close()


def clean_layer(version, suite, **overrides):
    run = gate_run_start(
        candidate=version, suite=suite, actor=SYSTEM, policy_overrides={**ONLY_CLEAN, **overrides}
    )
    return gate_run_execute(gate_run_id=run.pk, worker="w").layers.get(layer="clean_accuracy")


def per_item_right(layer, version) -> dict[str, int]:
    return {f["item_id"]: f["right"] for f in layer.details["candidate"]["repeats"]["flaky"]}


def test_a_sampling_endpoint_has_flaky_items_and_the_same_seed_gives_the_same_answers(
    sampled, suite, admin_client
):
    layer = clean_layer(sampled, suite, repeats=5, output_cache=False)
    side = layer.details["candidate"]
    repeats = side["repeats"]
    assert repeats["k"] == 5 and repeats["items"] == 24 and not repeats["deterministic"]
    assert side["n"] == 120 and side["computed"] == 120 and layer.samples.count() == 120
    assert layer.estimate == pytest.approx(side["correct"] / 120)
    flaky = repeats["flaky"]
    assert repeats["flaky_count"] == len(flaky) > 0 and all(0 < f["right"] < 5 == f["of"] for f in flaky)
    assert all(f["snippet"] for f in flaky)
    # pass^k counts the items right in all five; the flaky ones are neither all right nor all wrong.
    assert repeats["pass_all"] <= layer.estimate <= repeats["pass_any"]
    assert repeats["pass_any"] - repeats["pass_all"] == pytest.approx(len(flaky) / 24)
    # The interval is the clustered one of the per-item means: rebuilt from them, it is the same.
    wrong_always = round((1 - repeats["pass_any"]) * 24)
    means = [f["right"] / 5 for f in flaky] + [1.0] * round(repeats["pass_all"] * 24) + [0.0] * wrong_always
    mean, se, low, high = clustered_mean_interval(cluster_means=means, confidence=0.95)
    assert (layer.ci_low, layer.ci_high, repeats["se"]) == pytest.approx((low, high, se), abs=1e-12)
    assert mean == pytest.approx(layer.estimate)
    # Every answer is kept: a flaky item's five, as many right as the layer counted, from the page's link.
    url = f"/gate-runs/{layer.gate_run_id}/"
    html = admin_client.get(url).content.decode()
    samples = f"/api/v1/gate-runs/{layer.gate_run_id}/samples/?layer=clean_accuracy&amp;version={sampled.ref}"
    link = f"{samples}&amp;item={flaky[0]['item_id']}".replace(":", "%3A")
    assert link in html
    answers = admin_client.get(link.replace("&amp;", "&")).json()["results"]
    assert [a["repeat"] for a in answers] == [0, 1, 2, 3, 4]
    assert {a["item_id"] for a in answers} == {flaky[0]["item_id"]}
    assert sum(a["correct"] for a in answers) == flaky[0]["right"]
    # The wrong answers' list says which of the five each is.
    first_wrong = layer.samples.filter(correct=False).order_by("item__position", "repeat").first()
    assert f"{first_wrong.item.external_id} answer {first_wrong.repeat + 1} of 5" in page_text(
        admin_client.get(url)
    )
    page = page_text(admin_client.get(url))
    assert "pass^k" in page and "interval clustered by item" in page
    assert f"{flaky[0]['item_id']}{flaky[0]['snippet'][:20]}" in page and f"{flaky[0]['right']} of 5" in page
    chinese = page_text(admin_client.get(url, HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9"))
    assert (
        "不稳定题目" in chinese
        and "按题目聚类的区间" in chinese
        and f"5 次中 {flaky[0]['right']} 次" in chinese
        and f"第 {first_wrong.repeat + 1} 次回答（共 5 次）" in chinese
    )
    again = clean_layer(sampled, suite, repeats=5, output_cache=False)
    assert again.details["candidate"]["repeats"] == repeats and again.estimate == layer.estimate
    other = clean_layer(sampled, suite, repeats=5, output_cache=False, repeats_seed=1)
    assert other.details["candidate"]["repeats"]["flaky"] != flaky


def test_a_deterministic_model_is_asked_once_and_its_answers_agree(local, suite):
    once = clean_layer(local, suite)
    layer = clean_layer(local, suite, repeats=4, output_cache=False)
    side, repeats = layer.details["candidate"], layer.details["candidate"]["repeats"]
    assert repeats["deterministic"] and side["computed"] == 24 and side["n"] == 96
    assert layer.samples.count() == 24 and not layer.samples.exclude(repeat=0).exists()  # one answer each
    assert repeats["flaky_count"] == 0 and repeats["pass_all"] == repeats["pass_any"] == once.estimate
    assert layer.estimate == pytest.approx(once.estimate)
    # Asked once: repeats 1 stores no repeats and keeps the Wilson interval of today.
    assert once.details["candidate"]["repeats"] is None and once.details["candidate"]["n"] == 24

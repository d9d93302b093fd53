"""A gate run's cost: tokens counted from a real loopback model server's `usage`, device seconds of an
in-process model, both priced by hand; what has no price stays unpriced; the page, the report and the
family's months show it."""

import threading

import pytest

from engines.backends.base import Usage
from engines.model_server import answer_tokens, model_server_create
from gate.cost import Prices, usage_cost
from gate.models import GateRun, LayerResult
from gate.selectors.costs import family_costs_by_month
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_backend, model_version_register
from tests.pages import page_text

CLEAN = {"required_layers": ["clean_accuracy"]}
INPUTS = [
    ("a", "Can I cancel the contract early?", "termination"),
    ("b", "When is the invoice due?", "payment"),
    ("c", "Who owns the code we write?", "ip"),
    ("d", "合同可以提前解除吗？", "termination"),
]


class TestUsageCost:
    def test_tokens_priced_per_thousand_in_and_out(self):
        prices = Prices(per_1k_input=0.5, per_1k_output=1.5)
        usage = Usage(queries=3, tokens_in=1500, tokens_out=400, device_seconds=None)
        # 1.5 × 0.5 + 0.4 × 1.5 = 0.75 + 0.60
        assert usage_cost(usage=usage, device="remote", prices=prices) == pytest.approx(1.35)

    def test_device_seconds_priced_per_hour_of_the_device_kind(self):
        prices = Prices(device_hour={"cuda": 2.5, "cpu": 0.05})
        usage = Usage(queries=10, tokens_in=None, tokens_out=None, device_seconds=1800.0)
        assert usage_cost(usage=usage, device="cuda:1", prices=prices) == pytest.approx(1.25)
        assert usage_cost(usage=usage, device="cpu", prices=prices) == pytest.approx(0.025)

    def test_an_unknown_price_or_count_is_unpriced_not_free(self):
        remote = Usage(queries=2, tokens_in=10, tokens_out=None, device_seconds=None)
        assert (
            usage_cost(usage=remote, device="remote", prices=Prices(per_1k_input=1, per_1k_output=1)) is None
        )
        counted = Usage(queries=2, tokens_in=10, tokens_out=4, device_seconds=None)
        assert usage_cost(usage=counted, device="remote", prices=Prices(per_1k_input=1)) is None
        local = Usage(queries=2, tokens_in=None, tokens_out=None, device_seconds=5.0)
        assert usage_cost(usage=local, device="cuda", prices=Prices(device_hour={"cpu": 1})) is None
        # Nothing asked costs nothing, priced or not.
        assert usage_cost(usage=Usage(), device="remote", prices=Prices()) == 0.0

    def test_usage_adds_and_unknown_stays_unknown(self):
        total = Usage(queries=1, tokens_in=3, tokens_out=2) + Usage(queries=2, tokens_in=None, tokens_out=5)
        assert total == Usage(queries=3, tokens_in=None, tokens_out=7, device_seconds=0.0)


@pytest.fixture
def suite():
    records = [{"id": i, "input": text, "label": label} for i, text, label in INPUTS]
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
def endpoint(local):
    """The local version's checkpoint behind a real model server on loopback: its base URL."""
    server = model_server_create(backend=model_version_backend(version=local, cached=False), model_name="bow")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def remote_register(*, endpoint, local, label="remote", **prices):
    return model_version_register(
        family="fam",
        label=label,
        backend_kind="openai",
        backend_config={"base_url": endpoint, "model": "bow", **prices},
        baseline=local,
        actor=SYSTEM,
    )


def run_clean(candidate, suite) -> GateRun:
    run = gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=CLEAN)
    return gate_run_execute(gate_run_id=run.pk, worker="w")


@pytest.mark.django_db
def test_a_run_counts_the_endpoints_tokens_and_the_local_models_seconds_and_prices_them(
    suite, local, endpoint, settings, admin_client
):
    settings.EVALHUB_DEVICE_HOUR_PRICE = {"cpu": 36.0}  # 0.01 per second, to see it
    settings.EVALHUB_COST_CURRENCY = "EUR"
    remote = remote_register(endpoint=endpoint, local=local, price_per_1k_input=2.0, price_per_1k_output=10.0)
    run = run_clean(remote, suite)
    layer = run.layers.get(layer="clean_accuracy")
    assert layer.verdict != "error"
    there, here = layer.details["costs"]
    # What the server counted: words of each question in, the answer's tokens out.
    answers = model_version_backend(version=local).predict([text for _, text, _ in INPUTS])
    tokens_in = sum(len(text.split()) for _, text, _ in INPUTS)
    tokens_out = sum(len(answer_tokens(f"[{p.label}] {p.text}")) for p in answers)
    assert (there["version"], there["device"], there["queries"]) == (remote.ref, "remote", 4)
    assert (there["tokens_in"], there["tokens_out"]) == (tokens_in, tokens_out)
    assert there["device_seconds"] is None and there["currency"] == "EUR"
    assert there["cost"] == pytest.approx(tokens_in / 1000 * 2.0 + tokens_out / 1000 * 10.0)
    # The in-process baseline: queries counted, tokens unknown, priced by its device seconds.
    assert (here["version"], here["device"], here["queries"]) == (local.ref, "cpu", 4)
    assert here["tokens_in"] is None and here["tokens_out"] is None
    assert here["device_seconds"] > 0 and here["cost"] == pytest.approx(here["device_seconds"] * 0.01)

    report = admin_client.get(f"/api/v1/gate-runs/{run.pk}/report/?format=json").json()
    assert report["cost_total"] == pytest.approx(there["cost"] + here["cost"])
    assert report["layers"][0]["cost"]["versions"][0]["tokens_in"] == tokens_in
    markdown = admin_client.get(f"/api/v1/gate-runs/{run.pk}/report/?format=md").content.decode()
    assert (
        "## Cost" in markdown and f"| clean_accuracy | {remote.ref} | remote | 4 | {tokens_in} |" in markdown
    )
    page = page_text(admin_client.get(f"/gate-runs/{run.pk}/"))
    assert "Cost" in page and f"{there['cost']:.4f} EUR" in page and "Tokens in" in page
    chinese = page_text(admin_client.get(f"/gate-runs/{run.pk}/", HTTP_ACCEPT_LANGUAGE="zh-CN"))
    assert "成本" in chinese and "输入词元" in chinese and "未知" in chinese


@pytest.mark.django_db
def test_no_price_is_unpriced_and_the_family_sums_what_is_priced(
    suite, local, endpoint, settings, admin_client
):
    settings.EVALHUB_DEVICE_HOUR_PRICE = {}
    unpriced = run_clean(remote_register(endpoint=endpoint, local=local), suite)
    there, here = unpriced.layers.get(layer="clean_accuracy").details["costs"]
    assert there["cost"] is None and here["cost"] is None and there["tokens_in"] > 0
    page = page_text(admin_client.get(f"/gate-runs/{unpriced.pk}/"))
    assert "unpriced" in page
    markdown = admin_client.get(f"/api/v1/gate-runs/{unpriced.pk}/report/?format=md").content.decode()
    assert "Total: unpriced" in markdown
    [month] = family_costs_by_month(family="fam")
    assert (month.runs, month.cost, month.unpriced) == (1, None, 2)  # nothing priced: no sum, not 0

    settings.EVALHUB_DEVICE_HOUR_PRICE = {"cpu": 1.0}
    priced = remote_register(
        endpoint=endpoint, local=local, label="priced", price_per_1k_input=1.0, price_per_1k_output=1.0
    )
    costs = run_clean(priced, suite).layers.get(layer="clean_accuracy").details["costs"]
    # The baseline's answers come from the output cache this time: nothing asked, nothing spent.
    assert costs[1]["queries"] == 0 and costs[1]["cost"] == 0.0
    [month] = family_costs_by_month(family="fam")
    assert month.runs == 2 and month.queries == 4 + 4 + 4 and month.unpriced == 2 and month.currency == "USD"
    assert month.cost == pytest.approx(sum(c["cost"] for c in costs))
    page = page_text(admin_client.get(f"/versions/{priced.ref}/"))
    assert month.month in page and "2 entries unpriced" in page
    assert LayerResult.objects.filter(gate_run__candidate=priced).count() == 1


@pytest.mark.django_db
def test_a_negative_token_price_is_refused_naming_the_field(admin_client, endpoint):
    response = admin_client.post(
        "/api/v1/model-versions/",
        {
            "family": "fam",
            "label": "neg",
            "backend_kind": "openai",
            "backend_config": {"base_url": endpoint, "model": "bow", "price_per_1k_output": -1},
        },
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "backend_config.price_per_1k_output" in response.content.decode()

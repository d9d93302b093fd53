"""The canary page's shadow panel and ramp plan, the create form and the API with a shadow step."""

import re
from html import unescape

import pytest

from canary.models import Experiment, ShadowAnswer
from canary.services.experiments import experiment_create, experiment_start
from registry.actors import SYSTEM
from registry.models import AuditLog
from tests.canary.traffic import shadow_window_fill
from tests.evalhub.api.test_core import assert_error
from tests.evalhub.views.test_canary import login
from tests.evalhub.views.test_forms import signed_in, versions  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

# Four pairs: labels agree on three; the candidate fails once; medians 120 vs 100 ms.
PAIRS = [
    ("[payment] pay in 30 days", 100.0, "[payment] pay in 30 days", 120.0, ""),
    ("[liability] capped", 90.0, "[liability] capped at fees", 110.0, ""),
    ("[termination] 90 days", 110.0, "[payment] 90 days", 130.0, ""),
    ("[payment] net 30", 100.0, "", 5.0, "fam:v4 answered HTTP 500"),
]


@pytest.fixture
def shadowed(versions):  # noqa: F811
    v3, v4 = versions
    experiment = experiment_create(
        name="exp",
        baseline=v3,
        candidate=v4,
        ramp=["shadow", 1, 10, 100],
        shadow_percent=50,
        require_clean_shadow=True,
        guardrails={"min_shadow_pairs": 4},
        actor=SYSTEM,
    )
    experiment = experiment_start(experiment=experiment, actor=SYSTEM)
    shadow_window_fill(experiment, PAIRS)
    ShadowAnswer.objects.create(experiment=experiment, baseline_event_id="px-x-a", version=v4, dropped=True)
    return experiment


def text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def panel(html: str) -> str:
    """The shadow panel's text."""
    start = html.index('<section id="shadow-panel">')
    return text(html[start : html.index("</section>", start)])


def row(html: str, header: str) -> str:
    """The text of the page's table row headed `header`."""
    start = html.index(f"<th>{header}</th>")
    return text(html[start : html.index("</tr>", start)])


def test_the_page_shows_the_shadow_step_and_the_window_in_english(shadowed):
    html = login("viewer").get("/canary/exp/").content.decode()
    ramp = row(html, "Ramp plan")
    assert ramp.startswith("Ramp plan shadow → 1 % → 10 % → 100 %"), ramp
    shown = panel(html)
    assert "Shadow traffic" in shown and "shadow step now" in shown and "50 % of the questions" in shown
    assert "4 pairs, 1 mirrors dropped (queue full)" in shown
    # Latency: medians over the three answered pairs, 120 vs 100 ms: +20 %.
    assert "Median latency +20.0 % [" in shown and "120.0 ms" in shown and "100.0 ms" in shown
    assert "Error rate +25.0 % [-28.1 %, +69.9 %]" in shown and "1 / 4 0 / 4" in shown
    # Label agreement: 2 of 3 (the failed pair has none): 66.7 %, Wilson [20.8 %, 93.9 %].
    assert "Label agreement 66.7 % [20.8 %, 93.9 %]" in shown and "2 of 3 labelled pairs agree" in shown
    assert (
        "Shadow traffic fail" in shown and "label agreement 66.7% (2/3) is below the minimum 90.0%" in shown
    )
    assert "The first user step needs a passing shadow window." in shown


def test_the_panel_reads_in_chinese(shadowed):
    client = login("viewer")
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "zh-hans"
    html = client.get("/canary/exp/").content.decode()
    shown = panel(html)
    assert "影子流量" in shown and "标签一致率" in shown and "延迟中位数" in shown
    assert "标签一致率 66.7%（2/3）低于最低要求 90.0%" in shown
    assert "Shadow traffic" not in shown and "Label agreement" not in shown
    assert "影子 → 1 %" in row(html, "扩量计划")


def test_a_page_without_a_shadow_step_has_no_panel(versions):  # noqa: F811
    v3, v4 = versions
    experiment_create(name="exp", baseline=v3, candidate=v4, ramp=[1, 10], actor=SYSTEM)
    assert "shadow-panel" not in login("viewer").get("/canary/exp/").content.decode()


def test_the_form_takes_a_plan_with_a_shadow_step(versions):  # noqa: F811
    client = signed_in("release_manager")
    typed = {"name": "exp", "baseline": "fam:v3", "candidate": "fam:v4", "ramp": "1, shadow"}
    refused = client.post("/new/experiment/", typed)
    assert refused.status_code == 400 and "only as the first step" in str(
        refused.context["form"].errors["ramp"]
    )
    refused = client.post("/new/experiment/", {**typed, "ramp": "shadow, 1", "traffic_percent": "1"})
    assert "leave it out" in str(refused.context["form"].errors["traffic_percent"])
    created = client.post(
        "/new/experiment/",
        {**typed, "ramp": "shadow, 1, 10, 100", "shadow_percent": "25", "require_clean_shadow": "on"},
    )
    assert created["Location"] == "/canary/exp/"
    experiment = Experiment.objects.get()
    assert (experiment.ramp, experiment.traffic_percent, experiment.shadow_percent) == (
        ["shadow", 1, 10, 100],
        0,
        25,
    )
    assert experiment.require_clean_shadow
    # In Chinese the form takes the word as the page shows it.
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "zh-hans"
    Experiment.objects.all().delete()
    assert client.post("/new/experiment/", {**typed, "ramp": "影子, 1, 10"}).status_code == 302
    assert Experiment.objects.get().ramp == ["shadow", 1, 10]


class TestApi:
    @pytest.fixture
    def manager(self, make_client, versions):  # noqa: F811
        return make_client("release_manager", username="rm")

    def create(self, client, **body):
        body = {"name": "exp", "baseline": "fam:v3", "candidate": "fam:v4", **body}
        return client.post("/api/v1/canary/experiments/", body, format="json")

    def test_bad_plans_are_400s_naming_the_field(self, manager):
        cases = [
            ({"ramp": [1, "shadow"]}, "ramp[1]"),
            ({"ramp": ["shadow"]}, "ramp"),
            ({"ramp": ["fast", 1]}, "ramp"),
            ({"ramp": ["shadow", 1], "traffic_percent": 1}, "traffic_percent"),
            ({"ramp": ["shadow", 1], "shadow_percent": 0}, "shadow_percent"),
            (
                {"ramp": ["shadow", 1], "guardrails": {"min_shadow_agreement": 2}},
                "guardrails.min_shadow_agreement",
            ),
        ]
        for body, field in cases:
            assert_error(self.create(manager, **body), 400, field)
        assert not Experiment.objects.exists()

    def test_a_shadow_plan_runs_from_the_api_and_the_first_step_waits_for_a_clean_window(self, manager):
        created = self.create(manager, ramp=["shadow", 1, 10, 100], require_clean_shadow=True)
        assert created.status_code == 201, created.content
        body = created.json()
        assert (
            body["ramp"],
            body["traffic_percent"],
            body["shadow_percent"],
            body["require_clean_shadow"],
        ) == (["shadow", 1.0, 10.0, 100.0], 0.0, 100.0, True)
        url = "/api/v1/canary/experiments/exp"
        assert manager.post(f"{url}/start", {"reason": "go"}, format="json").status_code == 200
        refused = manager.post(f"{url}/ramp", {"reason": "now"}, format="json")
        error = assert_error(refused, 409, "ramp_step")
        assert error["code"] == "shadow_required"
        assert error["params"]["verdict"] == {"term": "insufficient_data"}
        assert AuditLog.objects.filter(action="experiment.ramp_refused").count() == 1
        # Nor straight to everyone.
        assert (
            assert_error(manager.post(f"{url}/promote", {}, format="json"), 409)["code"] == "shadow_required"
        )
        assert AuditLog.objects.filter(action="experiment.ramp_refused").count() == 2
        detail = manager.get(f"{url}/").json()
        assert detail["shadow"]["verdict"] == "insufficient_data" and detail["shadow"]["active"] is True
        assert detail["shadow"]["reason_codes"][0]["code"] == "shadow.too_few_pairs"

        experiment = Experiment.objects.get()
        shadow_window_fill(
            experiment,
            [(f"[a] same {i}", 100.0, f"[a] same {i}", 105.0, "") for i in range(60)],
        )
        detail = manager.get(f"{url}/").json()["shadow"]
        assert (detail["verdict"], detail["pairs"], detail["agreement"], detail["latency_ratio"]) == (
            "pass",
            60,
            1.0,
            1.05,
        )
        ramped = manager.post(f"{url}/ramp", {"reason": "clean window"}, format="json")
        assert ramped.status_code == 200, ramped.content
        assert (ramped.json()["traffic_percent"], ramped.json()["ramp_step"]) == (1.0, 1)


def test_the_demo_runs_a_shadow_experiment_on_request(demo):
    from evalhub.demo import DEMO_EXPERIMENT, DEMO_SHADOW_EXPERIMENT, demo_shadow_start

    shadow = demo_shadow_start(log=lambda *args: None)
    assert (shadow.name, shadow.status, shadow.ramp, shadow.in_shadow) == (
        DEMO_SHADOW_EXPERIMENT,
        "running",
        ["shadow", 1, 10, 100],
        True,
    )
    assert Experiment.objects.get(name=DEMO_EXPERIMENT).status == "rolled_back"
    assert demo_shadow_start(log=lambda *args: None).pk == shadow.pk  # again: nothing changes
    html = login("viewer").get(f"/canary/{DEMO_SHADOW_EXPERIMENT}/").content.decode()
    assert "0 pairs, 0 mirrors dropped" in panel(html)

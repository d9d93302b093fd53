"""The review page used by a non-staff annotator, then layer 2 showing the detector's live agreement
from those labels: in its details, the report (JSON and Markdown) and the gate run page, and as the
reason of an `insufficient_data` when the policy asks for more agreement than the labels show."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from canary.models import FollowUpReview
from canary.services.experiments import experiment_create, experiment_horizon_register, experiment_start
from canary.services.follow_ups import follow_up_thresholds_set
from canary.services.plans import experiment_plans_replace
from gate.judges.follow_up_review import BELOW_MINIMUM, MET
from gate.layers.registry import gate_policy_parse, layer_get
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.horizons import follow_up_horizon_plan
from gate.services.policies import gate_policy_save
from registry.actors import SYSTEM
from registry.models import AuditLog
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.canary.traffic import chat_session, experiment_backdate
from tests.lifecycle import incumbent_register
from tests.wordings import english

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
QUESTION = "What type of clause is this: 'The buyer shall pay within 30 days.'?"
ANSWER = "[payment] This clause sets when the buyer must pay."
# The next turn the user sent, and what it truly is (the annotator's label).
TRUTH = {"And what if the buyer pays late?": "follow_up", "Thanks, that is all for today.": "new"}
SESSIONS = 20  # per arm and kind of next turn


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    experiment = experiment_backdate(
        experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1)
    )
    # Per arm, 20 true follow-ups and 20 closings; the detector misjudges 2 of each (agreement 72 / 80).
    for arm in ("baseline", "candidate"):
        for next_turn, truth in TRUTH.items():
            for s in range(SESSIONS):
                other = "new" if truth == "follow_up" else "follow_up"
                chat_session(
                    experiment,
                    session=f"{arm}-{truth}-{s}",
                    arm=arm,
                    turns=[QUESTION, ANSWER, next_turn],
                    kind=other if s < 2 else truth,
                )
    return experiment


@pytest.fixture
def annotator_page():
    user = get_user_model().objects.create_user(username="annie")
    user_role_grant(user=user, role="annotator")
    assert not user.is_staff
    page = Client()
    page.force_login(user)
    return page


def label_everything(page: Client) -> int:
    """Label turn after turn on the page, as the annotator reads them; returns how many."""
    labelled = 0
    while True:
        shown = page.get("/review/exp/")
        assert shown.status_code == 200
        item = shown.context["item"]
        if item is None:
            assert "every judged live turn has a label" in shown.content.decode()
            return labelled
        html = shown.content.decode()
        assert QUESTION.replace("'", "&#x27;") in html and ANSWER in html
        assert 'data-keys="1f"' in html and 'data-keys="2d"' in html and 'data-keys="3o"' in html
        sent = page.post("/review/exp/", {"turn_id": item.turn_id, "label": TRUTH[item.next_turn]})
        assert sent.status_code == 302 and sent["Location"] == "/review/exp/"
        labelled += 1


POLICY = {
    "required_layers": ["follow_up_rate"],
    "follow_up_min_answered": 20,
    "follow_up_max": 1.0,
    "follow_up_margin": 1.0,
    "follow_up_live_min_labels": 50,
    "follow_up_planning_rate": 0.5,
}


def plan_layer_2(experiment, *, again: bool = False, **policy):
    """The family's policy and layer 2's plan under it (a horizon of 20 answers per arm), registered at
    the start or, `again`, replacing the one registered (counting from now on)."""
    gate_policy_save(name="fam", config={**POLICY, **policy}, actor=SYSTEM)
    # The turns are a minute old: the detector's follow-up window must have passed for the look.
    follow_up_thresholds_set(family="fam", thresholds={"window_seconds": 10}, actor=SYSTEM)
    config = gate_policy_parse({**POLICY, **policy})
    if again:
        counted = timezone.now()
        plan = follow_up_horizon_plan(
            experiment=experiment, policy=config, policy_name="fam", counted_from=counted
        )
        return experiment_plans_replace(
            experiment=experiment, plans={"follow_up_rate": plan}, actor=SYSTEM, reason="stricter"
        )
    plan = follow_up_horizon_plan(experiment=experiment, policy=config, policy_name="fam")
    return experiment_horizon_register(experiment=experiment, horizon={}, follow_up=plan, actor=SYSTEM)


def run_layer_2(experiment) -> GateRun:
    suite, _ = eval_suite_import(
        name="fam", items=suite_items_parse(records=[{"input": "x", "label": "payment"}]), actor=SYSTEM
    )
    run = gate_run_start(candidate=experiment.candidate, suite=suite, actor=SYSTEM)
    gate_run_execute(gate_run_id=run.pk, worker="test")
    return GateRun.objects.get(pk=run.pk)


def test_a_non_staff_annotator_labels_on_the_page_and_layer_2_shows_live_agreement(
    experiment, annotator_page, make_client
):
    assert annotator_page.get("/review/").status_code == 200
    assert label_everything(annotator_page) == 80  # 2 arms x 2 kinds x 20 sessions, each turn once
    assert FollowUpReview.objects.filter(reviewer_name="annie").count() == 80
    assert AuditLog.objects.filter(action="follow_up_review.record", actor_name="annie").count() == 80
    page = annotator_page.get("/review/exp/").content.decode()
    assert "0.900" in page and "72 of 80 reviewed turns" in page  # the queue shows the agreement too

    # A release manager gives second opinions on 10 turns, calling one follow-up a deepening.
    manager = get_user_model().objects.create_user(username="rm")
    user_role_grant(user=manager, role="release_manager")
    second = Client()
    second.force_login(manager)
    for index in range(10):
        item = second.get("/review/exp/?second=1").context["item"]
        label = TRUTH[item.next_turn]
        sent = second.post(
            "/review/exp/?second=1", {"turn_id": item.turn_id, "label": "deepening" if index == 0 else label}
        )
        assert sent["Location"] == "/review/exp/?second=1"
    assert "agreed with the first label on 9 of 10 turns" in second.get("/review/exp/").content.decode()
    assert FollowUpReview.objects.filter(is_first=True).count() == 80  # second opinions count once

    plan_layer_2(experiment, follow_up_live_agreement_min=0.85)
    run = run_layer_2(experiment)
    [layer] = run.layers.all()
    assert layer.verdict == "pass", layer.reasons
    live = layer_get("follow_up_rate").details(layer).live_agreement
    assert (live.labels, live.agreeing, live.status) == (80, 72, MET)
    # Wilson 72/80; scipy's binomtest(72, 80).proportion_ci(method="wilson") gives 0.81489, 0.94845.
    assert (round(live.ci_low, 3), round(live.ci_high, 3)) == (0.815, 0.948)
    assert live.precision == 36 / 40 and live.recall == 36 / 40
    assert english(layer.reasons)[-2].startswith(
        "live agreement of the detector with reviewers 0.900 (72 of 80"
    )
    assert english(layer.reasons)[-1].startswith("the one look at the registered horizon, taken now")

    viewer = make_client("viewer")
    report = viewer.get(f"/api/v1/gate-runs/{run.pk}/report/").json()
    [reported] = report["layers"]
    assert reported["estimates"]["live_agreement"]["agreement"] == 0.9
    markdown = viewer.get(f"/api/v1/gate-runs/{run.pk}/report/?format=md").content.decode()
    assert "live_agreement" in markdown
    viewer_page = Client()
    viewer_page.force_login(viewer.user)
    html = viewer_page.get(f"/gate-runs/{run.pk}/").content.decode()
    assert "The detector on live traffic" in html and "72 of 80 reviewed turns" in html
    dashboard = viewer_page.get("/canary/exp/").content.decode()  # layer 2 as the gate would judge it now
    assert "The detector on live traffic" in dashboard and "72 of 80 reviewed turns" in dashboard

    # The same labels under a plan that wants more agreement (registered again, so counting from now on):
    # layer 2 cannot be trusted.
    plan_layer_2(experiment, again=True, follow_up_live_agreement_min=0.95)
    strict = run_layer_2(experiment)
    [layer] = strict.layers.all()
    assert layer.verdict == "insufficient_data" and strict.verdict == "insufficient_data"
    assert english(layer.reasons)[-1].endswith(
        "is below the policy's minimum 0.95: the detector's labels cannot be trusted on this traffic"
    )
    assert layer_get("follow_up_rate").details(layer).live_agreement.status == BELOW_MINIMUM


def test_the_page_refuses_what_the_service_refuses(experiment, annotator_page):
    refused = annotator_page.post("/review/exp/", {"turn_id": "x", "label": "new"}, follow=True)
    assert "turn_id must be a number." in refused.content.decode()
    refused = annotator_page.post(
        "/review/exp/?language=zh", {"turn_id": 10**9, "label": "new", "language": "zh"}
    )
    assert refused["Location"] == "/review/exp/?language=zh"
    assert not FollowUpReview.objects.exists()
    assert annotator_page.get("/review/exp/?language=zh").context["item"] is None  # only English traffic


def test_the_export_downloads_jsonl(experiment, annotator_page):
    item = annotator_page.get("/review/exp/").context["item"]
    annotator_page.post("/review/exp/", {"turn_id": item.turn_id, "label": "deepening"})
    download = annotator_page.get("/review/exp/export.jsonl")
    assert download["Content-Type"] == "application/x-ndjson"
    lines = b"".join(download.streaming_content).decode().splitlines()
    assert len(lines) == 1 and '"label": "deepening"' in lines[0]

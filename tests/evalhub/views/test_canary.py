"""The release manager's canary pages: list and dashboard from stored events, lifecycle actions."""

import json
import math
import random
from dataclasses import asdict, replace
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from canary.models import Experiment, TurnEvent
from canary.selectors.history import arm_figures
from canary.selectors.stats import (
    assigned_units_by_arm,
    follow_up_counts_by_arm,
    follow_ups_judged_by_language,
    outcome_stats_by_arm,
)
from canary.services.analysis import experiment_analyze
from canary.services.events import events_ingest
from canary.services.experiments import (
    experiment_create,
    experiment_horizon_register,
    experiment_ramp,
    experiment_start,
)
from canary.services.plans import experiment_unblind
from engines.follow_up.classifier import detector_load
from engines.stats.effects import sequential_interval
from engines.stats.intervals import wilson_interval
from gate.judges.business_value import BusinessValuePolicy
from gate.judges.follow_up_rate import FollowUpCounts, follow_up_rate_judge
from gate.layers.follow_up_rate import detector_accuracy
from gate.layers.registry import gate_policy_parse
from gate.models import GatePolicy, GateRun
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.horizons import business_horizon_plan, follow_up_horizon_plan
from registry.actors import SYSTEM
from registry.models import AuditLog
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate, probe_run_finished, user_on
from tests.lifecycle import incumbent_register
from tests.wordings import english

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
ARMS = ("baseline", "candidate")
# Share of sessions with a follow-up, and mean review hours per contract, per arm.
FOLLOW_UP_SHARE = {"baseline": 0.10, "candidate": 0.25}
HOURS = {"baseline": 3.0, "candidate": 2.4}
SESSIONS = 240


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, is_demo=True, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    # The traffic below happened over the last three days (the window is just under three days).
    return experiment_backdate(
        experiment_start(experiment=created, actor=SYSTEM), started=timedelta(days=3, hours=-1)
    )


@pytest.fixture
def traffic(experiment):
    """Per arm: sessions spread over the window's three days (a question, its answer and sometimes a
    follow-up with its answer), and one to three review-hours outcomes per user."""
    events = []
    for arm in ARMS:
        rng = random.Random(arm)
        for s in range(SESSIONS):
            stamp = experiment.share_since + timedelta(days=s % 3, minutes=10 + s)
            user_id = user_on(experiment, arm, f"{arm}-u{s}")
            common = {"experiment": "exp", "arm": arm, "session_id": f"{arm}-s{s}", "user_id": user_id}
            turns = [("user", "What type of clause is this?"), ("assistant", "[payment] A payment clause.")]
            if rng.random() < FOLLOW_UP_SHARE[arm]:
                turns += [("user", "Sorry, why payment?"), ("assistant", "[payment] It sets a due date.")]
            for index, (role, text) in enumerate(turns):
                events.append(
                    {
                        **common,
                        "type": "turn",
                        "event_id": f"t-{arm}-{s}-{index}",
                        "turn_index": index,
                        "role": role,
                        "text": text,
                        "timestamp": (stamp + timedelta(seconds=20 * index)).isoformat(),
                    }
                )
            for c in range(rng.randint(1, 3)):
                events.append(
                    {
                        "type": "outcome",
                        "experiment": "exp",
                        "event_id": f"o-{arm}-{s}-{c}",
                        "unit_id": f"{arm}-{s}-contract-{c}",
                        "user_id": user_id,
                        "arm": arm,
                        "metric": "review_hours",
                        "value": max(0.1, rng.gauss(HOURS[arm], 0.6)),
                        "timestamp": (stamp + timedelta(minutes=5)).isoformat(),
                    }
                )
    # A second metric, too small to judge.
    for arm in ARMS:
        events.append(
            {
                "type": "outcome",
                "experiment": "exp",
                "event_id": f"csat-{arm}",
                "unit_id": f"{arm}-csat",
                "user_id": user_on(experiment, arm, f"{arm}-u0"),
                "arm": arm,
                "metric": "csat",
                "value": 4.0,
                "timestamp": experiment.share_since.isoformat(),
            }
        )
    events_ingest(events=events, actor=SYSTEM)
    # What the follow-up detector would have said: openers are new, second questions follow-ups.
    user_turns = TurnEvent.objects.filter(experiment=experiment, role="user")
    user_turns.filter(turn_index=0).update(follow_up_kind="new")
    user_turns.filter(turn_index=2).update(follow_up_kind="follow_up")
    return events


def login(role: str | None, username: str | None = None) -> Client:
    user = get_user_model().objects.create_user(username=username or f"user-{role}")
    if role:
        user_role_grant(user=user, role=role)
    client = Client()
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def viewer():
    return login("viewer")


@pytest.fixture
def manager():
    return login("release_manager", username="rm")


def status_of(experiment) -> tuple[str, float]:
    experiment.refresh_from_db()
    return experiment.status, experiment.traffic_percent


def test_pages_and_actions_need_a_login(experiment):
    anonymous = Client()
    for url in ("/canary/", "/canary/exp/"):
        response = anonymous.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next=")
    response = anonymous.post("/canary/exp/pause/", {"reason": "x"})
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=")
    assert status_of(experiment) == ("running", 50.0)


def test_list_shows_every_experiment_with_its_latest_verdict(experiment, traffic, viewer):
    v3, v4 = experiment.baseline, experiment.candidate
    experiment_create(
        name="draft-one", baseline=v3, candidate=v4, traffic_percent=1, actor=SYSTEM, is_demo=True
    )
    analysis = experiment_analyze(experiment=experiment, act=False)

    response = viewer.get("/canary/")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'href="/canary/exp/"' in html and 'href="/canary/draft-one/"' in html
    assert "fam:v3</a> →" in html and "fam:v4</a>" in html
    assert '<span class="badge running">running</span>' in html and "50 %" in html
    assert f'<span class="badge {analysis.verdict}">{analysis.verdict}</span>' in html
    # Only the demo's own experiment is badged, not one a person made of the demo's versions.
    assert html.count("synthetic demo data") == 1
    assert "synthetic demo data" not in viewer.get("/canary/exp/").content.decode()
    assert "Canaries</a>" in html  # the header link
    listed = {e.name: e.latest_verdict for e in response.context["experiments"]}
    assert listed == {"exp": analysis.verdict, "draft-one": None}


PLAN_POLICY = {
    "business_metric": "review_hours",
    "business_min_effect": 0.1,
    "business_planning_sd": 0.8,
    "business_mde": 0.6,
    "business_min_units": 50,
}


def plans_register(experiment, **policy):
    """The family's policy, and both traffic layers' plans registered under it, counted from the start."""
    GatePolicy.objects.update_or_create(name="fam", defaults={"config": {**PLAN_POLICY, **policy}})
    config = gate_policy_parse({**PLAN_POLICY, **policy})
    business = business_horizon_plan(
        experiment=experiment, policy=config.section(BusinessValuePolicy), policy_name="fam"
    )
    follow_up = follow_up_horizon_plan(experiment=experiment, policy=config, policy_name="fam")
    return experiment_horizon_register(
        experiment=experiment, horizon=business, follow_up=follow_up, actor=SYSTEM
    )


def unblinder():
    user = get_user_model().objects.create_user(username="unblinder")
    user_role_grant(user=user, role="release_manager")
    user.user_permissions.add(Permission.objects.get(codename="unblind_experiment"))
    return get_user_model().objects.get(pk=user.pk)  # the permission cache starts empty


def test_the_follow_up_panel_is_blind_until_unblinded_and_then_the_gate_judges(experiment, traffic, viewer):
    response = viewer.get("/canary/exp/")
    assert response.status_code == 200
    html = response.content.decode()
    dashboard = response.context["dashboard"]
    window = dashboard.window
    assert window.start == experiment.share_since
    counts = follow_up_counts_by_arm(window=window, kinds=("follow_up",))
    shown = {row.arm: row.figures for row in dashboard.follow_up.arms}
    # Blind: answered questions and sessions per arm, no follow-ups, no rate.
    assert dashboard.follow_up.blind and "Blind until the one look" in html
    panel = html.split('id="follow-up-arms"')[1].split("</table>")[0]
    for arm in ARMS:
        tally = getattr(counts, arm)
        assert tally.answered == shown[arm].answered > 0
        assert tally.sessions == shown[arm].sessions == SESSIONS
        assert shown[arm].follow_ups is None and shown[arm].rate is None
        assert f"{tally.follow_ups / tally.answered:.3f}" not in panel
    assert english(dashboard.follow_up.result.reasons)[0].startswith(
        "no horizon of answered questions was registered: experiment exp started without one"
    )

    experiment_unblind(experiment=experiment, actor=unblinder(), reason="a complaint about v4")
    response = viewer.get("/canary/exp/")
    html, dashboard = response.content.decode(), response.context["dashboard"]
    shown = {row.arm: row.figures for row in dashboard.follow_up.arms}
    assert "Unblinded by unblinder" in html and "a complaint about v4" in html
    # As layer 2 does: corrected for the shipped detector's error rates (these turns were labelled by
    # hand, without a language, so they count as observed).
    by_language, _ = follow_ups_judged_by_language(window=window, kinds=("follow_up",))
    judged = follow_up_rate_judge(
        candidate=FollowUpCounts(**asdict(counts.candidate), judged_by_language=by_language["candidate"]),
        baseline=FollowUpCounts(**asdict(counts.baseline), judged_by_language=by_language["baseline"]),
        detector=detector_accuracy(detector=detector_load(), kinds=("follow_up",)),
    )
    for arm, report in (("candidate", judged.candidate), ("baseline", judged.baseline)):
        tally = getattr(counts, arm)
        assert tally.follow_ups == shown[arm].follow_ups > 0
        assert (shown[arm].rate, shown[arm].corrected) == (report.rate, report.corrected)
        assert f"{tally.follow_ups / tally.answered:.3f}" in html
    assert dashboard.follow_up.result.difference == judged.difference
    # Before a horizon the verdict stays insufficient data whatever the numbers say.
    result = dashboard.follow_up.result
    assert result.verdict == "insufficient_data" and result.unblinded.by == "unblinder"
    assert "if the gate ran now" in html
    assert '<span class="badge insufficient_data">insufficient_data</span>' in html


def test_business_metrics_no_plan_gates_are_described(experiment, traffic, viewer):
    response = viewer.get("/canary/exp/")
    html = response.content.decode()
    dashboard = response.context["dashboard"]
    metrics = {m.metric: m for m in dashboard.business.metrics}
    assert list(metrics) == ["csat", "review_hours"] and not any(m.gated for m in metrics.values())
    stats = outcome_stats_by_arm(window=dashboard.window, metric="review_hours", per="user")
    review = metrics["review_hours"].result
    for arm in ("baseline", "candidate"):
        ratio = getattr(stats, arm).ratio
        assert getattr(review, arm).value == pytest.approx(ratio)
        assert f"{ratio:.3f}" in html
    assert not review.blind and review.horizon is None
    units = assigned_units_by_arm(window=dashboard.window)
    assert dashboard.business.units == units == {"baseline": SESSIONS, "candidate": SESSIONS}
    assert dashboard.business.srm.mismatch is False and "no mismatch" in html
    # No policy for the family: no tau, no minimum effect, so no daily table, and the page says why.
    assert metrics["review_hours"].daily == [] and "business_sequential_tau" in html


def test_the_gated_metric_is_blind_until_a_gate_run_stores_its_look(experiment, traffic, viewer):
    plans_register(experiment)
    horizon = Experiment.objects.get(pk=experiment.pk).business_horizon["units_per_arm"]
    assert horizon <= SESSIONS
    response = viewer.get("/canary/exp/")
    gated = {m.metric: m for m in response.context["dashboard"].business.metrics}["review_hours"]
    # The horizon is reached, but the page takes no look: the next gate run does.
    assert gated.gated and gated.blind and gated.result.improvement is None and gated.daily == []
    assert english(gated.result.reasons) == [
        f"the registered horizon of {horizon} units per arm is reached: the next gate run takes the one look"
    ]
    assert "lift-review_hours" not in charts_of(response)
    suite = eval_suite_import(
        name="fam",
        items=suite_items_parse(records=[{"id": "a", "input": "x", "label": "payment"}]),
        actor=SYSTEM,
    )[0]
    run = gate_run_start(
        candidate=experiment.candidate,
        suite=suite,
        actor=SYSTEM,
        policy_overrides={"required_layers": ["business_value"]},
    )
    gate_run_execute(gate_run_id=run.pk, worker="test")
    [layer] = GateRun.objects.get(pk=run.pk).layers.all()
    assert layer.verdict in ("pass", "fail"), layer.reasons
    dashboard = viewer.get("/canary/exp/").context["dashboard"]
    gated = {m.metric: m for m in dashboard.business.metrics}["review_hours"]
    assert not gated.blind and gated.result.improvement.estimate == pytest.approx(layer.estimate)
    assert english(gated.result.reasons)[-1].endswith(
        f"by gate run {run.pk}: every later run returns it unchanged"
    )


def test_direction_may_be_flipped_for_display(experiment, traffic, viewer):
    dashboard = viewer.get("/canary/exp/?direction=increase").context["dashboard"]
    review = {m.metric: m for m in dashboard.business.metrics}["review_hours"].result
    assert review.direction == "increase" and review.improvement.estimate < 0
    assert viewer.get("/canary/exp/?direction=sideways").context["dashboard"].business.direction == "decrease"
    # The gated metric keeps its registered direction: flipping it would not be the registered test.
    plans_register(experiment)
    dashboard = viewer.get("/canary/exp/?direction=increase").context["dashboard"]
    assert {m.metric: m for m in dashboard.business.metrics}["review_hours"].result.direction == "decrease"


def test_daily_table_gives_cumulative_always_valid_intervals(experiment, traffic, viewer):
    plans_register(experiment, business_sequential_tau=0.5)
    response = viewer.get("/canary/exp/")
    dashboard = response.context["dashboard"]
    window = dashboard.window
    start, end = window.start, window.end
    assert dashboard.policy_name == "fam"
    review = {m.metric: m for m in dashboard.business.metrics}["review_hours"]
    daily = review.daily
    assert [row.day for row in daily] == list(range(1, math.ceil((end - start) / timedelta(days=1)) + 1))
    assert len(daily) == 3 and daily[-1].until == end

    # Day 2 is every outcome up to the end of the window's second day, linearised per user.
    day = daily[1]
    stats = outcome_stats_by_arm(
        window=window.until(start + timedelta(days=2)), metric="review_hours", per="user"
    )
    control, treatment = stats.baseline, stats.candidate
    assert (day.baseline_units, day.candidate_units) == (control.n, treatment.n)
    expected = sequential_interval(
        control=control.linearised(),
        treatment=treatment.linearised(),
        tau=0.5,
        confidence=0.9,
    )
    assert day.estimate == pytest.approx(-expected.estimate)  # decrease is better
    assert (day.ci_low, day.ci_high) == pytest.approx((-expected.ci_high, -expected.ci_low))
    assert [row.candidate_units for row in daily] == sorted(row.candidate_units for row in daily)
    # The last day is the whole window: the interval layer 3 judges on (sequential, as the policy says).
    improvement = review.result.improvement
    assert review.result.sequential is True
    assert (daily[-1].ci_low, daily[-1].ci_high) == pytest.approx((improvement.ci_low, improvement.ci_high))
    assert "Watch it daily" in response.content.decode()


def test_probe_report_and_gate_runs_of_the_experiment(experiment, viewer):
    probe_run_finished(experiment=experiment)
    suite = eval_suite_import(
        name="fam",
        items=suite_items_parse(records=[{"id": "a", "input": "x", "label": "payment"}]),
        actor=SYSTEM,
    )[0]
    run = gate_run_start(candidate=experiment.candidate, suite=suite, actor=SYSTEM)
    assert run.experiment_id == experiment.pk

    response = viewer.get("/canary/exp/")

    dashboard = response.context["dashboard"]
    assert [row.weakness for row in dashboard.probe_rows] == ["long_context", "all"]
    assert dashboard.gate_runs == [run]
    html = response.content.decode()
    assert "candidate fixes this weakness" in html and "3.1e-05" in html
    assert f'href="/gate-runs/{run.pk}/"' in html
    probes = charts_of(response)["probes"]
    assert probes["categories"] == ["long_context", "all"]
    candidate, baseline = probes["bars"]
    assert (candidate["name"], candidate["values"], baseline["values"]) == (
        "candidate",
        [0.95, 0.95],
        [0.55, 0.55],
    )
    low, high = wilson_interval(successes=38, n=40)
    assert (candidate["low"][0], candidate["high"][0]) == pytest.approx((low, high))


def test_an_experiment_without_traffic_renders(experiment, manager):
    experiment_create(
        name="empty", baseline=experiment.baseline, candidate=experiment.candidate, actor=SYSTEM
    )
    response = manager.get("/canary/empty/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<span class="badge draft">draft</span>' in html and 'action="/canary/empty/start/"' in html
    assert "No outcome events yet" in html and "not checked (no split to check" in html
    assert response.context["dashboard"].follow_up.result.verdict == "insufficient_data"


def test_a_viewer_cannot_act(experiment, viewer):
    for action in ("pause", "ramp", "rollback", "promote"):
        response = viewer.post(f"/canary/exp/{action}/", {"reason": "because", "traffic_percent": "60"})
        assert response.status_code == 403
    assert status_of(experiment) == ("running", 50.0)
    assert not AuditLog.objects.filter(actor=viewer.user).exists()
    assert 'action="/canary/exp/' not in viewer.get("/canary/exp/").content.decode()  # no action forms


def test_a_release_manager_pauses_resumes_ramps_and_rolls_back(experiment, manager, settings):
    settings.EVALHUB_WEBHOOK_URL = ""
    assert 'action="/canary/exp/pause/"' in manager.get("/canary/exp/").content.decode()
    steps = [
        ("pause", {"reason": "looking at latency"}, ("paused", 50.0), "experiment.paused"),
        ("resume", {"reason": "latency fine"}, ("running", 50.0), "experiment.running"),
        ("ramp", {"reason": "going wider", "traffic_percent": "60"}, ("running", 60.0), "experiment.ramp"),
        ("rollback", {"reason": "follow-ups too high"}, ("rolled_back", 0.0), "experiment.rolled_back"),
    ]
    for action, form, expected, audited in steps:
        response = manager.post(f"/canary/exp/{action}/", form)
        assert response.status_code == 302 and response["Location"] == "/canary/exp/"
        assert status_of(experiment) == expected
        row = AuditLog.objects.filter(action=audited, target_id=str(experiment.pk)).first()
        assert row is not None and row.actor == manager.user and row.reason == form["reason"]
    page = manager.get("/canary/exp/").content.decode()
    assert "rollback: exp is rolled_back at 0 %." in page and "follow-ups too high" in page


def test_actions_need_the_csrf_token(experiment, manager):
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager.user)
    page = client.get("/canary/exp/")
    assert client.post("/canary/exp/pause/", {"reason": "r"}).status_code == 403
    assert status_of(experiment) == ("running", 50.0)
    token = str(page.context["csrf_token"])
    assert client.post("/canary/exp/pause/", {"reason": "r", "csrfmiddlewaretoken": token}).status_code == 302
    assert status_of(experiment) == ("paused", 50.0)


def test_start_and_promote_from_the_page(experiment, manager, approve):
    approve(experiment.candidate)
    draft = experiment_create(
        name="next", baseline=experiment.baseline, candidate=experiment.candidate, ramp=[1, 5], actor=SYSTEM
    )
    Experiment.objects.filter(pk=experiment.pk).update(status="promoted")  # frees the family
    assert manager.post("/canary/next/start/", {"reason": "go"}).status_code == 302
    assert (
        manager.post("/canary/next/ramp/", {"reason": "next step", "traffic_percent": ""}).status_code == 302
    )
    assert status_of(draft) == ("running", 5.0)
    manager.post("/canary/next/promote/", {"reason": "all good"})
    assert status_of(draft) == ("promoted", 100.0)
    assert AuditLog.objects.filter(
        action="experiment.promoted", actor=manager.user, reason="all good"
    ).exists()


def test_a_refused_action_is_shown_and_changes_nothing(experiment, manager):
    audited = AuditLog.objects.count()

    response = manager.post("/canary/exp/rollback/", {"reason": "  "}, follow=True)
    assert response.status_code == 200
    assert "A rollback needs a reason. (reason: required)" in response.content.decode()
    assert status_of(experiment) == ("running", 50.0)

    # No plan step left, a share that is not a number, a lower share, an illegal transition.
    for action, form, message in (
        ("ramp", {"traffic_percent": ""}, "The ramp plan has no next step"),
        ("ramp", {"traffic_percent": "lots"}, "traffic_percent must be a number."),
        ("ramp", {"traffic_percent": "10"}, "A ramp only raises the share"),
        ("resume", {}, "cannot go from running to running"),
    ):
        response = manager.post(f"/canary/exp/{action}/", form, follow=True)
        assert response.status_code == 200 and message in response.content.decode()
    assert status_of(experiment) == ("running", 50.0)
    assert AuditLog.objects.count() == audited


def test_unknown_experiment_and_action(manager):
    assert manager.get("/canary/nope/").status_code == 404
    assert manager.post("/canary/nope/pause/", {"reason": "x"}).status_code == 404
    assert manager.post("/canary/nope/explode/").status_code == 404
    assert manager.get("/canary/exp/pause/").status_code == 405


def charts_of(response) -> dict:
    html = response.content.decode()
    data = html.split('<script id="charts-data" type="application/json">')[1].split("</script>")[0]
    return {chart["id"]: chart for chart in json.loads(data)}


def test_each_traffic_window_keeps_its_figures_after_a_ramp_and_the_history_shows_why(
    experiment, traffic, viewer
):
    response = viewer.get("/canary/exp/")
    before = {a.arm: a for a in arm_figures(window=response.context["dashboard"].window)}
    assert before["candidate"].users == before["baseline"].users == SESSIONS
    # Sessions with a follow-up after the first answer are not "first answer accepted".
    followed = TurnEvent.objects.filter(experiment=experiment, arm="candidate", turn_index=2).count()
    assert before["candidate"].first_answer_accepted == pytest.approx(1 - followed / SESSIONS)
    assert before["candidate"].turns_per_session == pytest.approx((SESSIONS + followed) / SESSIONS)
    charts = charts_of(response)
    # csat has one outcome per arm: its values are drawn, its improvement cannot be estimated. The
    # follow-up rate is blind (layer 2 has no look yet): no chart of it, no "first answer accepted".
    assert list(charts) == ["metric-csat", "metric-review_hours", "lift-review_hours", "traffic-share"]
    [shown_window] = response.context["dashboard"].windows
    assert {a.first_answer_accepted for a in shown_window.arms} == {None}
    lift = charts["lift-review_hours"]["lines"][0]
    improvement = {m.metric: m for m in response.context["dashboard"].business.metrics}["review_hours"]
    # No plan gates review hours (the default policy names no metric) and no tau applies: the panel
    # describes it and the curve shows the plain estimate (decrease is better: baseline − candidate)
    # with no interval (a curve watched every day gets only an always-valid one).
    assert not improvement.gated and improvement.result.improvement is not None
    assert lift["points"][-1][1] == pytest.approx(-improvement.result.effect.estimate)
    assert lift["low"][-1] is None

    experiment_ramp(experiment=experiment, actor=SYSTEM, traffic_percent=60, reason="looks fine")
    response = viewer.get("/canary/exp/")
    dashboard = response.context["dashboard"]
    now, earlier = dashboard.windows
    assert (now.share.traffic_percent, now.share.current, earlier.share.traffic_percent) == (60, True, 50)
    assert {a.arm: a.users for a in now.arms} == {"baseline": 0, "candidate": 0}
    # The earlier window is still there, unchanged (its "first answer accepted" blind).
    assert {a.arm: a for a in earlier.arms} == {
        arm: replace(figures, first_answer_accepted=None) for arm, figures in before.items()
    }
    history = [(h.what, h.change, h.reason) for h in dashboard.history if h.kind == "action"]
    assert history[0] == ("ramp", "50 % → 60 %", "looks fine")
    assert [what for what, _, _ in history[1:]] == ["start", "create"]
    share = charts_of(response)["traffic-share"]["lines"][0]["points"]
    assert [value for _, value in share] == [50, 60, 60]  # a step from each change, held to now
    html = response.content.decode()
    assert 'id="arm-windows" data-live-swap' in html and 'data-live-kind="page"' in html


def test_unblinding_from_the_page_needs_the_permission_and_a_reason(experiment, manager):
    # A release manager without the permission sees no button and is refused.
    assert 'id="unblind"' not in manager.get("/canary/exp/").content.decode()
    assert manager.post("/canary/exp/unblind/", {"reason": "curious"}).status_code == 403
    statistician = Client()
    statistician.force_login(unblinder())
    assert 'id="unblind"' in statistician.get("/canary/exp/").content.decode()
    refused = statistician.post("/canary/exp/unblind/", {"reason": " "}, follow=True)
    assert "A reason is required." in refused.content.decode()
    assert Experiment.objects.get(pk=experiment.pk).unblinded_at is None
    done = statistician.post("/canary/exp/unblind/", {"reason": "a safety review"}, follow=True)
    html = done.content.decode()
    assert "Unblinded by unblinder at" in html and "a safety review" in html and 'id="unblind"' not in html
    row = AuditLog.objects.get(action="experiment.unblind", target_id=str(experiment.pk))
    assert row.actor_name == "unblinder" and row.reason == "a safety review"
    again = statistician.post("/canary/exp/unblind/", {"reason": "twice"}, follow=True)
    assert "was unblinded by unblinder" in again.content.decode()
    assert AuditLog.objects.filter(action="experiment.unblind").count() == 1


def test_the_history_reads_in_chinese_with_system_parts_named_and_users_kept(experiment, traffic, manager):
    plans_register(experiment)
    experiment_analyze(experiment=experiment, act=False)
    assert manager.post("/canary/exp/pause/", {"reason": "检查"}).status_code == 302
    manager.defaults["HTTP_ACCEPT_LANGUAGE"] = "zh-hans"
    html = manager.get("/canary/exp/").content.decode()
    history = html[
        html.index('<table id="history"') : html.index("</table>", html.index('<table id="history"'))
    ]
    assert "登记时界" in history and "horizon_register" not in history  # the plans' registration
    assert "<td>灰度分析</td>" in history and "canary analysis" not in history  # who analysed
    assert "<td>系统</td>" in history and ">system<" not in history  # who started it
    assert f'<td translate="no">{manager.user.username}</td>' in history  # a user's name is data


def test_a_sample_ratio_check_without_units_reads_in_chinese(experiment, manager):
    manager.defaults["HTTP_ACCEPT_LANGUAGE"] = "zh-hans"
    html = manager.get("/canary/exp/").content.decode()
    assert "未检验（没有单元）" in html and "no units" not in html

"""Gate layers 2 and 3 from stored canary events: the real detector, SQL aggregation, the verdict,
the report with its attribution."""

import json
import random
from datetime import timedelta

import pytest
from django.utils import timezone
from pytest import approx

from canary.models import Experiment, OutcomeEvent, TurnEvent
from canary.selectors.experiments import TrafficWindow, traffic_window_get
from canary.selectors.stats import follow_up_counts_by_arm, outcome_cuped_stats_by_arm, outcome_stats_by_arm
from canary.services.events import events_ingest
from canary.services.experiments import experiment_create, experiment_horizon_register, experiment_start
from canary.services.follow_ups import follow_ups_label
from engines.reasons import reason
from engines.stats.sufficient import MeanStats, RatioCupedStats, RatioStats
from gate.judges.business_value import BusinessValuePolicy
from gate.layers.follow_up_rate import FollowUpLayerCode, follow_up_plan_settings
from gate.layers.registry import gate_policy_parse, layer_get
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.horizons import business_horizon_plan
from registry.actors import SYSTEM
from registry.dispatch import Task
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate, session_on, user_on
from tests.lifecycle import incumbent_register
from tests.wordings import english

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
QUESTIONS = {
    "payment": "What type of clause is this: 'The buyer shall pay the invoice within 30 days of delivery.'?",
    "termination": "What type of clause is this: 'Either party may end this agreement with 60 days notice.'?",
    "confidentiality": "What type of clause is this: 'The recipient shall keep all disclosed information "
    "secret for five years.'?",
}
FOLLOW_UPS = (
    "And what if the buyer pays late?",
    "Sorry, which clause type did you say this was, and why?",
    "Does that still hold if the contract is terminated early?",
)
WRONG = {"payment": "termination", "termination": "confidentiality", "confidentiality": "payment"}


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    # The traffic below happened in the last hour.
    return experiment_backdate(experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1))


@pytest.fixture
def suite():
    records = [{"id": "a", "input": "x", "label": "payment"}]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


def sessions(*, arm: str, count: int, accuracy: float, follow_up_if_wrong: float, follow_up_if_right: float):
    """Chat-app events of `count` sessions: a clause question, the arm's answer (right with
    probability `accuracy`), and sometimes a follow-up. Returns the events and the arm's accuracy."""
    experiment = Experiment.objects.get(name="exp")
    rng = random.Random(arm)
    base = timezone.now() - timedelta(minutes=50)
    events, right = [], 0
    for s in range(count):
        label = rng.choice(list(QUESTIONS))
        correct = rng.random() < accuracy
        right += correct
        said = label if correct else WRONG[label]
        answer = f"[{said}] This clause is about {said}."
        user_id = user_on(experiment, arm, f"{arm}-u{s}")
        common = {"type": "turn", "experiment": "exp", "session_id": f"{arm}-{s}", "user_id": user_id}
        stamp = base + timedelta(seconds=s)
        turns = [("user", QUESTIONS[label]), ("assistant", answer)]
        if rng.random() < (follow_up_if_right if correct else follow_up_if_wrong):
            turns += [("user", rng.choice(FOLLOW_UPS)), ("assistant", "[payment] It still applies.")]
        for index, (role, text) in enumerate(turns):
            events.append(
                {
                    **common,
                    "event_id": f"{arm}-{s}-{index}",
                    "arm": arm,
                    "turn_index": index,
                    "role": role,
                    "text": text,
                    "timestamp": (stamp + timedelta(seconds=index * 20)).isoformat(),
                }
            )
    return events, right / count


def ingest(events):
    for start in range(0, len(events), 4000):
        events_ingest(events=events[start : start + 4000], actor=SYSTEM)


def details_of(layer):
    """The stored details as the layer's own dataclass."""
    return layer_get(layer.layer).details(layer)


def run_layers(candidate, suite, **overrides):
    run = gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=overrides)
    gate_run_execute(gate_run_id=run.pk, worker="test")
    return GateRun.objects.get(pk=run.pk)


def follow_up_register(experiment, answers: int, **policy):
    """Register layer 2's plan at `answers` answered questions per arm under the default policy (and
    `policy`), counting from the experiment's start, as a start through the gate would."""
    config = gate_policy_parse(policy)
    plan = {
        "version": 2,
        "sequence": 1,
        "settings": follow_up_plan_settings(config),
        "counted_from": experiment.started_at.isoformat(),
        "answers_per_arm": answers,
        "basis": "set by the test",
        "registered_at": timezone.now().isoformat(),
        "look": None,
    }
    Experiment.objects.filter(pk=experiment.pk).update(follow_up_horizon=plan)
    return Experiment.objects.get(pk=experiment.pk)


def first_answers(arm: str, answers: int) -> dict[str, int]:
    """What layer 2's look counts, from the stored turns: the arm's first `answers` answers by time, and
    those whose next turn in the session is a user turn the detector called a follow-up."""
    turns = {(t.session_id, t.turn_index): t for t in TurnEvent.objects.filter(arm=arm)}
    answered = sorted(
        (t for t in turns.values() if t.role == "assistant" and (t.error == "" or t.fallback)),
        key=lambda t: (t.occurred_at, t.pk),
    )[:answers]
    following = [turns.get((t.session_id, t.turn_index + 1)) for t in answered]
    return {
        "answered": len(answered),
        "follow_ups": sum(1 for t in following if t and t.role == "user" and t.follow_up_kind == "follow_up"),
    }


def test_accuracy_up_but_follow_up_rate_above_the_bar_fails_layer_2(experiment, suite, ci_client):
    baseline, baseline_accuracy = sessions(
        arm="baseline", count=400, accuracy=0.70, follow_up_if_wrong=0.3, follow_up_if_right=0.03
    )
    candidate, candidate_accuracy = sessions(
        arm="candidate", count=300, accuracy=0.85, follow_up_if_wrong=0.6, follow_up_if_right=0.25
    )
    ingest(baseline + candidate)
    assert candidate_accuracy > baseline_accuracy + 0.1  # the candidate answers better...
    follow_up_register(experiment, answers=300)

    run = run_layers(experiment.candidate, suite, required_layers=["follow_up_rate"])

    [layer] = run.layers.all()
    assert layer.layer == "follow_up_rate" and layer.verdict == "fail", english(layer.reasons)
    assert run.verdict == "fail"
    details = details_of(layer)
    # The one look: the first 300 answers per arm and their follow-ups, taken by this run.
    expected = {arm: first_answers(arm, 300) for arm in ("baseline", "candidate")}
    assert details.judged.candidate.follow_ups == expected["candidate"]["follow_ups"]
    assert details.judged.baseline.follow_ups == expected["baseline"]["follow_ups"]
    assert details.judged.candidate.answered == details.judged.baseline.answered == 300
    assert details.look_taken_now and details.look.gate_run == run.pk and not details.judged.blind
    # ...but its users follow up more than the bar allows.
    assert layer.estimate > 0.18 and layer.ci_high > 0.18
    assert any("bar" in reason for reason in english(layer.reasons))
    assert details.inputs.experiment == "exp" and details.inputs.unjudged_turns == 0
    attribution = details.attribution
    examples = next(t for t in attribution.data.tables if t.title == reason(FollowUpLayerCode.LATEST_TITLE))
    assert examples.rows[0][3] in FOLLOW_UPS
    assert "SELECT" in attribution.phenomenon.reproduce

    report = ci_client.get(f"/api/v1/gate-runs/{run.pk}/report/")
    assert report.status_code == 200, report.content
    [reported] = report.json()["layers"]
    [arms] = reported["attribution"]["system"]["tables"]
    assert reported["verdict"] == "fail" and dict((row[0], row[1]) for row in arms["rows"])["candidate"] > 0
    estimates = reported["estimates"]
    assert estimates["baseline"]["follow_ups"] == expected["baseline"]["follow_ups"]
    # Judged on the rates corrected for the shipped detector's error rates; the observed ones beside.
    assert estimates["difference"]["method"] == "rogan_gladen_delta"
    assert estimates["correction"] == "rogan_gladen" and estimates["detector_version"] == "follow-up-lr-3"
    corrected = estimates["candidate"]["corrected"]
    assert corrected["observed"] == approx(estimates["candidate"]["rate"])
    assert layer.estimate == approx(corrected["estimate"]) and layer.ci_high == approx(corrected["ci_high"])
    assert {language["language"] for language in corrected["languages"]} <= {"en", "zh"}
    judged_turns = TurnEvent.objects.filter(role="user", follow_up_language__isnull=False)
    assert judged_turns.exists() and set(judged_turns.values_list("follow_up_detector", flat=True)) == {
        "follow-up-lr-3"
    }
    # Of the look's answers, the next turns the trained detector judged (at most one per answer).
    assert 0 < sum(language["judged"] for language in corrected["languages"]) <= 300
    assert estimates["checks"] == {"bar": False, "non_inferiority": False}
    markdown = ci_client.get(f"/api/v1/gate-runs/{run.pk}/report/?format=md")
    assert markdown.status_code == 200 and markdown["Content-Type"].startswith("text/markdown")
    text = markdown.content.decode()
    assert f"# Gate run {run.pk}: fam:v4 — **FAIL**" in text and "### Attribution" in text


def test_follow_up_layer_passes_when_the_candidate_rarely_needs_a_follow_up(experiment, suite):
    baseline, _ = sessions(
        arm="baseline", count=400, accuracy=0.8, follow_up_if_wrong=0.3, follow_up_if_right=0.02
    )
    candidate, _ = sessions(
        arm="candidate", count=400, accuracy=0.95, follow_up_if_wrong=0.3, follow_up_if_right=0.0
    )
    ingest(baseline + candidate)
    follow_up_register(experiment, answers=350)
    run = run_layers(experiment.candidate, suite, required_layers=["follow_up_rate"])
    [layer] = run.layers.all()
    assert (layer.verdict, run.verdict) == ("pass", "pass"), english(layer.reasons)
    assert layer.ci_high <= 0.18
    assert details_of(layer).attribution is None


def test_follow_up_layer_is_insufficient_below_the_minimum_answers(experiment, suite):
    events = [
        event
        for arm in ("candidate", "baseline")
        for event in sessions(
            arm=arm, count=50, accuracy=0.9, follow_up_if_wrong=0.0, follow_up_if_right=0.0
        )[0]
    ]
    ingest(events)
    run = run_layers(experiment.candidate, suite, required_layers=["follow_up_rate"])
    [layer] = run.layers.all()
    assert (layer.verdict, run.verdict) == ("insufficient_data", "insufficient_data")


def test_traffic_before_the_last_share_change_is_not_counted(experiment, suite):
    events, _ = sessions(
        arm="candidate", count=300, accuracy=0.9, follow_up_if_wrong=0.0, follow_up_if_right=0.0
    )
    ingest(events)
    Experiment.objects.filter(pk=experiment.pk).update(share_since=timezone.now())
    run = run_layers(experiment.candidate, suite, required_layers=["follow_up_rate"])
    assert details_of(run.layers.get()).judged.candidate.answered == 0


def test_without_an_experiment_the_traffic_layers_are_insufficient_data(suite):
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    run = run_layers(v4, suite, required_layers=["follow_up_rate", "business_value"])
    assert {layer.layer: layer.verdict for layer in run.layers.all()} == {
        "follow_up_rate": "insufficient_data",
        "business_value": "insufficient_data",
    }
    assert run.verdict == "insufficient_data"


def test_the_detector_waits_for_a_missing_answer_and_ignores_probe_traffic(experiment):
    now = timezone.now()
    common = {"type": "turn", "experiment": "exp", "arm": "candidate", "role": "user", "text": "why?"}
    ingest(
        [
            {
                **common,
                "event_id": "recent",
                "session_id": session_on(experiment, "candidate", "s1"),
                "turn_index": 2,
                "timestamp": now.isoformat(),
            },
            {
                **common,
                "event_id": "old",
                "session_id": session_on(experiment, "candidate", "s2"),
                "turn_index": 2,
                "timestamp": (now - timedelta(minutes=30)).isoformat(),
            },
        ]
    )
    TurnEvent.objects.create(
        experiment=experiment,
        event_id="probe",
        session_id="p",
        arm="candidate",
        turn_index=0,
        role="user",
        text="probe",
        source="probe",
        occurred_at=now,
    )
    counts = follow_ups_label(experiment=experiment, embed=lambda texts: pytest.fail("nothing to embed"))
    assert counts == {"waiting": 1, "new": 1}
    kinds = dict(TurnEvent.objects.values_list("event_id", "follow_up_kind"))
    assert kinds == {"recent": None, "old": "new", "probe": None}


# ---------------------------------------------------------------------------------------------
# Layer 3
# ---------------------------------------------------------------------------------------------
def outcomes(*, arm: str, users: int, hours: float, seed: int):
    experiment = Experiment.objects.get(name="exp")
    rng = random.Random(f"{arm}{seed}")
    stamp = (timezone.now() - timedelta(minutes=30)).isoformat()
    events, per_user = [], []
    for u in range(users):
        values = [max(0.1, rng.gauss(hours, 0.5)) for _ in range(rng.randint(1, 3))]
        per_user.append((sum(values), len(values)))
        for c, value in enumerate(values):
            events.append(
                {
                    "type": "outcome",
                    "experiment": "exp",
                    "event_id": f"o-{arm}-{u}-{c}",
                    "unit_id": f"{arm}-{u}-contract-{c}",
                    "user_id": user_on(experiment, arm, f"{arm}-u{u}"),
                    "arm": arm,
                    "metric": "review_hours",
                    "value": value,
                    "timestamp": stamp,
                }
            )
    return events, per_user


def user_turns(*, arm: str, users: int):
    experiment = Experiment.objects.get(name="exp")
    stamp = (timezone.now() - timedelta(minutes=40)).isoformat()
    return [
        {
            "type": "turn",
            "experiment": "exp",
            "event_id": f"t-{arm}-{u}",
            "session_id": f"{arm}-s{u}",
            "user_id": user_on(experiment, arm, f"{arm}-u{u}"),
            "arm": arm,
            "turn_index": 0,
            "role": "user",
            "text": "q",
            "timestamp": stamp,
        }
        for u in range(users)
    ]


def test_outcome_statistics_from_sql_equal_the_per_user_sums(experiment):
    events, per_user = outcomes(arm="candidate", users=40, hours=2.0, seed=1)
    ingest(events)
    window = TrafficWindow(
        experiment=experiment, start=timezone.now() - timedelta(hours=1), end=timezone.now()
    )
    stats = outcome_stats_by_arm(window=window, metric="review_hours", per="user")
    expected = RatioStats.of(per_user)
    got = stats.candidate
    assert got.n == expected.n == 40
    for field in ("sum_x", "sum_y", "sum_x2", "sum_y2", "sum_xy"):
        assert getattr(got, field) == pytest.approx(getattr(expected, field), rel=1e-12)
    by_outcome = outcome_stats_by_arm(window=window, metric="review_hours", per="outcome")
    assert by_outcome.candidate.n == sum(y for _, y in per_user)
    assert by_outcome.baseline == MeanStats(n=0, total=0, total_squares=0)


def horizon_register(experiment, **policy):
    """Register the horizon `policy` sizes, as a start through the gate does (the fixture starts the
    experiment through canary alone)."""
    section = BusinessValuePolicy.parse({"business_metric": "review_hours", **policy})
    plan = business_horizon_plan(experiment=experiment, policy=section, policy_name="test")
    return experiment_horizon_register(experiment=experiment, horizon=plan, actor=SYSTEM)


def business_run(experiment, suite, **policy):
    """A gate run of layer 3 alone under `policy` (the same settings the plan registered)."""
    return run_layers(
        experiment.candidate,
        suite,
        required_layers=["business_value"],
        business_metric="review_hours",
        **policy,
    )


# sd 0.5 from the policy, a true 0.6 against the bar 0.2: 2 · 0.25 · 2.486475² / 0.4² = 19.3 → 20 users,
# raised to business_min_units (100).
PLAN = {"business_min_effect": 0.2, "business_mde": 0.6, "business_planning_sd": 0.5}


def test_business_layer_passes_when_review_hours_fall_by_more_than_the_minimum(experiment, suite):
    registered = horizon_register(experiment, **PLAN)
    assert registered.business_horizon["units_per_arm"] == 100
    ingest(
        outcomes(arm="baseline", users=300, hours=3.0, seed=0)[0]
        + outcomes(arm="candidate", users=300, hours=2.2, seed=0)[0]
    )
    ingest(user_turns(arm="baseline", users=300) + user_turns(arm="candidate", users=300))
    run = business_run(experiment, suite, **PLAN)
    [layer] = run.layers.all()
    assert (layer.verdict, run.verdict) == ("pass", "pass"), english(layer.reasons)
    assert 0.2 < layer.ci_low < layer.estimate < layer.ci_high
    assert layer.estimate == pytest.approx(0.8, abs=0.15)
    details = details_of(layer)
    judged = details.judged
    assert judged.srm.mismatch is False and not judged.blind
    assert (
        judged.horizon.units_per_arm == 100
        and "at the registered horizon of 100" in english(layer.reasons)[0]
    )
    # The one look: the first 100 users per arm, taken by this run and stored in the plan.
    assert judged.baseline.units == judged.candidate.units == 100
    assert details.look_taken_now and details.look.gate_run == run.pk and details.look.units_per_arm == 100
    assert english(layer.reasons)[-1].startswith("the one look at the registered horizon, taken now")
    # CUPED is on by default; nobody has a history here, so it adjusts nothing.
    assert judged.method == "cuped_ratio_delta"
    assert judged.cuped.pre_units == {"baseline": 0, "candidate": 0} and judged.cuped.variance_reduction == 0


def test_business_layer_before_the_registered_horizon_is_insufficient_data_stating_it(experiment, suite):
    # The same traffic as above, under a horizon of 2 · 0.25 · 2.486475² / 0.05² = 1236.5 → 1237 users.
    plan = {**PLAN, "business_mde": 0.25}
    registered = horizon_register(experiment, **plan)
    assert registered.business_horizon["units_per_arm"] == 1237
    ingest(
        outcomes(arm="baseline", users=300, hours=3.0, seed=0)[0]
        + outcomes(arm="candidate", users=300, hours=2.2, seed=0)[0]
    )
    ingest(user_turns(arm="baseline", users=300) + user_turns(arm="candidate", users=300))
    run = business_run(experiment, suite, **plan)
    [layer] = run.layers.all()
    assert layer.verdict == "insufficient_data" and layer.estimate is None
    assert english(layer.reasons)[0].startswith(
        "before the registered horizon of 1237 units per arm (300 baseline and 300 candidate units so far; "
        "sd 0.5 from business_planning_sd"
    )
    assert details_of(layer).judged.blind and details_of(layer).look is None


def test_a_registered_sequential_test_is_judged_at_every_run(experiment, suite):
    plan = {**PLAN, "business_mde": 0.25, "business_sequential_tau": 0.2}
    horizon_register(experiment, **plan)
    ingest(
        outcomes(arm="baseline", users=300, hours=3.0, seed=0)[0]
        + outcomes(arm="candidate", users=300, hours=2.2, seed=0)[0]
    )
    ingest(user_turns(arm="baseline", users=300) + user_turns(arm="candidate", users=300))
    [layer] = business_run(experiment, suite, **plan).layers.all()
    assert layer.verdict == "pass", english(layer.reasons)
    details = details_of(layer)
    assert details.judged.sequential and not details.judged.blind and details.look is None


def test_cuped_covariate_is_each_users_metric_in_the_pre_window_before_first_exposure(experiment):
    """Pre-period outcomes from an earlier experiment of the family and from this one's draft days count
    within the pre-window before the user's first exposure; older ones, other metrics, other families
    and outcomes after the exposure do not; users without history stay in with 0."""
    started = experiment.started_at
    earlier = experiment_create(
        name="exp-old", baseline=experiment.baseline, candidate=experiment.candidate, actor=SYSTEM
    )
    other_v = model_version_register(family="other", label="v1", actor=SYSTEM, **BUILTIN)
    other_w = model_version_register(family="other", label="v2", actor=SYSTEM, baseline=other_v, **BUILTIN)
    other = experiment_create(name="exp-other", baseline=other_v, candidate=other_w, actor=SYSTEM)
    alice = user_on(experiment, "candidate", "alice")
    bob = user_on(experiment, "baseline", "bob")
    carol = user_on(experiment, "baseline", "carol")  # no history

    def outcome(exp, user, value, at, metric="review_hours", arm="baseline"):
        return OutcomeEvent(
            experiment=exp,
            event_id=f"{exp.name}-{user}-{metric}-{at.timestamp()}",
            unit_id=f"c-{at.timestamp()}",
            user_id=user,
            arm=arm,
            metric=metric,
            value=value,
            occurred_at=at,
        )

    day = timedelta(days=1)
    OutcomeEvent.objects.bulk_create(
        [
            outcome(earlier, alice, 4.0, started - 3 * day),  # in alice's pre-window
            outcome(experiment, alice, 2.0, started - 2 * day),  # this experiment's draft days
            outcome(earlier, alice, 9.0, started - 20 * day),  # older than 14 days
            outcome(earlier, alice, 9.0, started - day, metric="other_metric"),
            outcome(other, alice, 9.0, started - day),  # another family
            outcome(earlier, bob, 1.5, started - 5 * day),
            # In the window: alice first turns up 10 minutes after the start, bob with his outcomes.
            outcome(experiment, alice, 3.0, started + timedelta(minutes=30), arm="candidate"),
            outcome(experiment, alice, 1.0, started + timedelta(minutes=40), arm="candidate"),
            outcome(experiment, bob, 2.5, started + timedelta(minutes=20)),
            outcome(experiment, carol, 5.0, started + timedelta(minutes=25)),
        ]
    )
    TurnEvent.objects.create(
        experiment=experiment,
        event_id="alice-0",
        session_id="s-alice",
        user_id=alice,
        arm="candidate",
        turn_index=0,
        role="user",
        text="q",
        occurred_at=started + timedelta(minutes=10),
    )
    window = traffic_window_get(experiment=experiment)
    stats = outcome_cuped_stats_by_arm(window=window, metric="review_hours", pre_days=14)
    # Per user (x, y, px, py): alice (4, 2, 6, 2); bob (2.5, 1, 1.5, 1); carol (5, 1, 0, 0).
    assert stats.candidate == RatioCupedStats.of([(4.0, 2, 6.0, 2)])
    assert stats.baseline == RatioCupedStats.of([(2.5, 1, 1.5, 1), (5.0, 1, 0.0, 0)])
    # A 4-day pre-window keeps only what lies within 4 days of each first exposure.
    short = outcome_cuped_stats_by_arm(window=window, metric="review_hours", pre_days=4)
    assert short.candidate == RatioCupedStats.of([(4.0, 2, 6.0, 2)])
    assert short.baseline == RatioCupedStats.of([(2.5, 1, 0.0, 0), (5.0, 1, 0.0, 0)])


def test_a_sample_ratio_mismatch_is_an_error_never_a_pass(experiment, suite):
    # 50 % configured, but the candidate has a third of the users: assignment or logging is broken.
    ingest(
        outcomes(arm="baseline", users=400, hours=3.0, seed=0)[0]
        + outcomes(arm="candidate", users=200, hours=2.0, seed=0)[0]
    )
    ingest(user_turns(arm="baseline", users=400) + user_turns(arm="candidate", users=200))
    run = run_layers(
        experiment.candidate, suite, required_layers=["business_value"], business_metric="review_hours"
    )
    [layer] = run.layers.all()
    assert (layer.verdict, run.verdict) == ("error", "error")
    details = details_of(layer)
    assert "p" in english(layer.reasons)[0] and details.judged.srm.mismatch is True
    assert [name for name, _ in details.attribution.levels()] == ["phenomenon", "data", "system"]


def test_a_policy_without_a_business_metric_is_an_error(experiment, suite):
    run = run_layers(experiment.candidate, suite, required_layers=["business_value"])
    [layer] = run.layers.all()
    assert layer.verdict == "error" and "business_metric" in english(layer.reasons)[0]


def test_a_finished_run_announces_its_verdict_by_webhook(
    experiment, suite, settings, sent_tasks, django_capture_on_commit_callbacks
):
    settings.EVALHUB_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    with django_capture_on_commit_callbacks(execute=True):
        run = run_layers(experiment.candidate, suite, required_layers=["follow_up_rate"])
    [(event, body)] = [args for name, args in sent_tasks if name == Task.WEBHOOK_DELIVER]
    data = json.loads(body)["data"]
    assert event == "gate_run.finished"
    assert data["gate_run"] == run.pk and data["verdict"] == run.verdict == "insufficient_data"
    assert data["layers"] == {"follow_up_rate": "insufficient_data"}
    # The reasons in English for any receiver, with the code and parameters a receiver can act on.
    assert data["reasons"] == [
        {
            "code": "verdict.layer_verdict",
            "params": {"layer": {"term": "follow_up_rate"}, "verdict": {"term": "insufficient_data"}},
            "message": "follow_up_rate: insufficient_data",
        }
    ]


def test_a_retry_after_a_failed_answer_is_not_a_follow_up_but_after_a_fallback_it_is(experiment):
    """The user got no answer: asking again is a retry. The baseline's fallback answer is an answer."""
    then = timezone.now() - timedelta(minutes=20)

    def turn(session, index, role, text, **extra):
        return TurnEvent(
            experiment=experiment,
            event_id=f"{session}-{index}",
            session_id=session,
            arm="candidate",
            turn_index=index,
            role=role,
            text=text,
            occurred_at=then + timedelta(seconds=index),
            **extra,
        )

    question = QUESTIONS["payment"]
    TurnEvent.objects.bulk_create(
        [
            turn("failed", 0, "user", question),
            turn("failed", 1, "assistant", "", error="timeout"),
            turn("failed", 2, "user", question),
            turn("fallback", 0, "user", question),
            turn("fallback", 1, "assistant", "[payment] Payment terms.", error="timeout", fallback=True),
            turn("fallback", 2, "user", "And what if the buyer pays late?"),
        ]
    )
    follow_ups_label(experiment=experiment)
    kinds = dict(
        TurnEvent.objects.filter(role="user", turn_index=2).values_list("session_id", "follow_up_kind")
    )
    assert kinds == {"failed": "new", "fallback": "follow_up"}
    window = TrafficWindow(experiment=experiment, start=then - timedelta(minutes=1), end=timezone.now())
    counts = follow_up_counts_by_arm(window=window, kinds=["follow_up"])
    assert (counts.candidate.answered, counts.candidate.follow_ups) == (1, 1)


def test_a_rolled_back_experiment_is_still_checked_against_the_split_it_ran(experiment, suite):
    from canary.services.experiments import experiment_rollback

    ingest(
        outcomes(arm="baseline", users=400, hours=3.0, seed=0)[0]
        + outcomes(arm="candidate", users=200, hours=2.0, seed=0)[0]
    )
    ingest(user_turns(arm="baseline", users=400) + user_turns(arm="candidate", users=200))
    rolled_back = experiment_rollback(experiment=experiment, actor=SYSTEM, reason="guardrail")
    assert rolled_back.traffic_buckets == 0 and rolled_back.window_buckets == 5000
    run = run_layers(
        experiment.candidate, suite, required_layers=["business_value"], business_metric="review_hours"
    )
    [layer] = run.layers.all()
    assert layer.verdict == "error" and details_of(layer).judged.srm.mismatch is True


def test_a_pause_ends_the_window_and_a_resume_starts_a_new_one(experiment):
    from canary.services.experiments import experiment_pause, experiment_resume

    paused = experiment_pause(experiment=experiment, actor=SYSTEM)
    window = traffic_window_get(experiment=paused)
    assert (window.start, window.end) == (experiment.share_since, paused.paused_at)
    resumed = experiment_resume(experiment=paused, actor=SYSTEM)
    window = traffic_window_get(experiment=resumed)
    assert resumed.paused_at is None and window.start == resumed.share_since > paused.paused_at
    assert resumed.window_buckets == resumed.traffic_buckets == 5000


def test_every_layer_compares_the_same_two_versions(experiment, suite):
    from registry.errors import ApplicationError

    v2 = model_version_register(family="fam", label="v2", actor=SYSTEM, **BUILTIN)
    with pytest.raises(ApplicationError) as refused:
        gate_run_start(
            candidate=experiment.candidate, baseline=v2, suite=suite, actor=SYSTEM, experiment_name="exp"
        )
    assert list(refused.value.fields) == ["experiment"]
    # Unnamed, the experiment against another baseline is not picked.
    run = gate_run_start(candidate=experiment.candidate, baseline=v2, suite=suite, actor=SYSTEM)
    assert run.experiment is None

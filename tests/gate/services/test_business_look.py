"""Layer 3's one look at its registered horizon, on real PostgreSQL: the first H units per arm by when
they entered, their outcomes up to the moment both arms had H, stored in the plan with an audit row, and
returned unchanged by every later run, whatever traffic came since."""

from datetime import timedelta

import pytest

from canary.models import Experiment, OutcomeEvent
from canary.selectors.experiments import traffic_window_get
from canary.selectors.looks import outcome_look_progress, outcome_look_stats
from canary.services.experiments import experiment_create, experiment_horizon_register, experiment_start
from canary.services.plans import experiment_look_store
from engines.stats.sufficient import RatioCupedStats, RatioStats
from gate.judges.business_value import BusinessValuePolicy
from gate.judges.plan import moment
from gate.layers.registry import layer_get
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.horizons import business_horizon_plan
from registry.actors import SYSTEM
from registry.models import AuditLog
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate
from tests.lifecycle import incumbent_register
from tests.wordings import english

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
# sd 0.5, a true 0.6 against the bar 0.2: 20 units, raised to business_min_units (100).
PLAN = {
    "business_metric": "review_hours",
    "business_min_effect": 0.2,
    "business_mde": 0.6,
    "business_planning_sd": 0.5,
    "business_cuped": False,
}


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    return experiment_backdate(experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=2))


@pytest.fixture
def suite():
    records = [{"id": "a", "input": "x", "label": "payment"}]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


def register(experiment, **policy):
    section = BusinessValuePolicy.parse({**PLAN, **policy})
    plan = business_horizon_plan(experiment=experiment, policy=section, policy_name="test")
    return experiment_horizon_register(experiment=experiment, horizon=plan, actor=SYSTEM)


def arrivals(experiment, *, arm, users, hours, offset, first_second=60, tag=""):
    """`users` users entering 2 s apart (the baseline on even seconds, the candidate on odd ones), each with
    an outcome when they enter and another 150 s later. Returns {user: [(at, value), ...]}."""
    base = experiment.share_since + timedelta(seconds=first_second + offset)
    rows, made = [], {}
    for u in range(users):
        user = f"{tag}{arm}-{u:04d}"
        entered = base + timedelta(seconds=2 * u)
        made[user] = [(entered, hours + 0.01 * (u % 7)), (entered + timedelta(seconds=150), hours - 0.2)]
        rows += [
            OutcomeEvent(
                experiment=experiment,
                event_id=f"{user}-{k}",
                unit_id=f"{user}-c{k}",
                user_id=user,
                arm=arm,
                metric="review_hours",
                value=value,
                occurred_at=at,
            )
            for k, (at, value) in enumerate(made[user])
        ]
    OutcomeEvent.objects.bulk_create(rows)
    return made


def first_units(made, units, cutoff):
    """RatioStats of the first `units` users by entry (then id), their outcomes up to `cutoff`."""
    chosen = sorted(made, key=lambda user: (made[user][0][0], user))[:units]
    return RatioStats.of(
        [
            (sum(v for at, v in made[user] if at <= cutoff), sum(1 for at, _ in made[user] if at <= cutoff))
            for user in chosen
        ]
    )


def run_gate(experiment, suite, **policy):
    run = gate_run_start(
        candidate=experiment.candidate,
        suite=suite,
        actor=SYSTEM,
        policy_overrides={"required_layers": ["business_value"], **PLAN, **policy},
    )
    gate_run_execute(gate_run_id=run.pk, worker="test")
    [layer] = GateRun.objects.get(pk=run.pk).layers.all()
    return run, layer, layer_get("business_value").details(layer)


def test_the_look_judges_the_first_units_per_arm_up_to_the_moment_both_had_them(experiment, suite):
    register(experiment)
    baseline = arrivals(experiment, arm="baseline", users=150, hours=3.0, offset=0)
    candidate = arrivals(experiment, arm="candidate", users=150, hours=2.4, offset=1)
    # The candidate's 100th user enters last: at 60 + 1 + 2·99 s after the share changed.
    cutoff = experiment.share_since + timedelta(seconds=259)
    window = traffic_window_get(experiment=experiment)
    progress = outcome_look_progress(
        window=window, metric="review_hours", per="user", since=window.start, units=100
    )
    assert progress.entered == {"baseline": 150, "candidate": 150} and progress.cutoff == cutoff

    run, layer, details = run_gate(experiment, suite)
    assert layer.verdict == "pass", english(layer.reasons)
    judged = details.judged
    for arm, made in (("baseline", baseline), ("candidate", candidate)):
        expected = first_units(made, 100, cutoff)
        got = getattr(judged, arm)
        assert got.units == 100 and got.value == pytest.approx(expected.ratio, rel=1e-12)
    # The look is stored in the plan, with what defined its data, and audited.
    plan = Experiment.objects.get(pk=experiment.pk).business_horizon
    record = plan["look"]["record"]
    assert record["gate_run"] == run.pk and record["units_per_arm"] == 100
    assert record["cutoff"] == cutoff.isoformat() and plan["look"]["result"]["verdict"] == "pass"
    assert AuditLog.objects.filter(action="experiment.look", target_id=str(experiment.pk)).count() == 1
    assert details.look_taken_now


def test_every_later_run_returns_the_stored_look_unchanged(experiment, suite):
    register(experiment)
    arrivals(experiment, arm="baseline", users=120, hours=3.0, offset=0)
    arrivals(experiment, arm="candidate", users=120, hours=2.4, offset=1)
    first, layer, details = run_gate(experiment, suite)
    # Later the candidate turns out no better: a re-run reading the grown window would fail it.
    arrivals(experiment, arm="baseline", users=400, hours=3.0, offset=0, first_second=600, tag="late-")
    arrivals(experiment, arm="candidate", users=400, hours=3.5, offset=1, first_second=600, tag="late-")
    for _ in range(2):
        _, later, later_details = run_gate(experiment, suite)
        assert (later.verdict, later.estimate, later.ci_low, later.ci_high) == (
            layer.verdict,
            layer.estimate,
            layer.ci_low,
            layer.ci_high,
        )
        assert later_details.judged.baseline == details.judged.baseline
        assert not later_details.look_taken_now and later_details.look == details.look
        assert english(later.reasons)[:-1] == english(layer.reasons)[:-1]
        assert english(later.reasons)[-1] == (
            f"the registered look, taken at {moment(details.look.taken_at)} by gate run {first.pk}: every "
            "later run returns it unchanged"
        )
    assert AuditLog.objects.filter(action="experiment.look").count() == 1


def test_a_second_look_is_never_stored_over_the_first(experiment):
    register(experiment)
    first = {"record": {"gate_run": 1}, "result": {"verdict": "fail"}}
    assert experiment_look_store(
        experiment=experiment, layer="business_value", sequence=1, look=first, actor=SYSTEM
    )
    second = {"record": {"gate_run": 2}, "result": {"verdict": "pass"}}
    kept = experiment_look_store(
        experiment=experiment, layer="business_value", sequence=1, look=second, actor=SYSTEM
    )
    assert kept == first and Experiment.objects.get(pk=experiment.pk).business_horizon["look"] == first
    # A look for a plan that was registered again since is not stored at all.
    assert (
        experiment_look_store(
            experiment=experiment, layer="business_value", sequence=2, look=second, actor=SYSTEM
        )
        is None
    )


def test_units_first_exposed_before_the_window_never_count(experiment):
    """After a ramp the window starts again: users who had outcomes before it are not new units."""
    register(experiment)
    before = arrivals(experiment, arm="baseline", users=10, hours=3.0, offset=0)
    ramp = experiment.share_since + timedelta(minutes=30)
    Experiment.objects.filter(pk=experiment.pk).update(share_since=ramp)
    moved = Experiment.objects.get(pk=experiment.pk)
    # The same users again after the ramp, and new ones.
    again = [
        OutcomeEvent(
            experiment=moved,
            event_id=f"again-{user}",
            unit_id=f"again-{user}",
            user_id=user,
            arm="baseline",
            metric="review_hours",
            value=1.0,
            occurred_at=ramp + timedelta(minutes=1),
        )
        for user in before
    ]
    OutcomeEvent.objects.bulk_create(again)
    fresh = arrivals(moved, arm="baseline", users=5, hours=2.0, offset=0, first_second=1900, tag="new-")
    window = traffic_window_get(experiment=moved)
    stats = outcome_look_stats(
        window=window, metric="review_hours", per="user", since=window.start, cutoff=window.end
    )
    assert stats.baseline == first_units(fresh, 5, window.end)


def test_the_cuped_look_takes_each_chosen_users_pre_period(experiment):
    register(experiment, business_cuped=True)
    made = arrivals(experiment, arm="candidate", users=4, hours=2.0, offset=1)
    history = [
        OutcomeEvent(
            experiment=experiment,
            event_id=f"pre-{user}",
            unit_id=f"pre-{user}",
            user_id=user,
            arm="baseline",
            metric="review_hours",
            value=5.0 + k,
            occurred_at=experiment.started_at - timedelta(days=2),
        )
        for k, user in enumerate(sorted(made)[:2])
    ]
    OutcomeEvent.objects.bulk_create(history)
    window = traffic_window_get(experiment=experiment)
    cutoff = experiment.share_since + timedelta(seconds=70)  # the first 3 users' first outcomes
    stats = outcome_look_stats(
        window=window,
        metric="review_hours",
        per="user",
        since=window.start,
        cutoff=cutoff,
        limit=2,
        cuped_pre_days=14,
    )
    users = sorted(made)[:2]
    expected = RatioCupedStats.of([(made[user][0][1], 1, 5.0 + k, 1) for k, user in enumerate(users)])
    assert stats.candidate == expected

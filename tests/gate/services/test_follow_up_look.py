"""Layer 2's plan on real PostgreSQL: a horizon of answered questions registered at the start (from the
family's rate before it, else the policy's planning rate), one look at the first answers per arm once
their follow-ups are in, stored and returned unchanged, blind before it, and a clustered sample-ratio
check of the answers."""

from datetime import timedelta

import pytest
from django.utils import timezone

from canary.models import Experiment, TurnEvent
from canary.selectors.experiments import traffic_window_get
from canary.selectors.looks import AnswerTally, answers_look_counts, answers_split
from canary.services.experiments import experiment_create
from gate.judges.follow_up_rate import follow_up_horizon_answers
from gate.layers.registry import layer_get
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.horizons import experiment_start_registered
from gate.services.policies import gate_policy_save
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate
from tests.lifecycle import incumbent_register
from tests.wordings import english

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
POLICY = {
    "required_layers": ["follow_up_rate"],
    "follow_up_planning_rate": 0.10,
    "follow_up_margin": 0.1,
    "follow_up_max": 0.3,
    "follow_up_correction": "none",
}


@pytest.fixture
def versions():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    return v3, v4


@pytest.fixture
def suite():
    records = [{"id": "a", "input": "x", "label": "payment"}]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


def start(versions, name="exp", **policy):
    """An experiment started (and its plans registered) three hours ago."""
    gate_policy_save(name="fam", config={**POLICY, **policy}, actor=SYSTEM)
    created = experiment_create(
        name=name, baseline=versions[0], candidate=versions[1], traffic_percent=50, actor=SYSTEM
    )
    started = experiment_start_registered(experiment=created, actor=SYSTEM, reason="go")
    backdated = experiment_backdate(started, started=timedelta(hours=3))
    counted = backdated.started_at.isoformat()
    Experiment.objects.filter(pk=started.pk).update(
        business_horizon={**backdated.business_horizon, "counted_from": counted},
        follow_up_horizon={**backdated.follow_up_horizon, "counted_from": counted},
    )
    return Experiment.objects.get(pk=started.pk)


def chats(experiment, *, arm, sessions, follow_up_every, first_minute=1, tag=""):
    """`sessions` sessions, 20 s apart from `first_minute` after the share changed: a question, its
    answer and, in every `follow_up_every`-th session, a follow-up with its answer."""
    rows = []
    for s in range(sessions):
        at = experiment.share_since + timedelta(minutes=first_minute, seconds=20 * s)
        session = f"{tag}{arm}-{s:04d}"
        turns = [("user", "new"), ("assistant", None)]
        if s % follow_up_every == 0:
            turns += [("user", "follow_up"), ("assistant", None)]
        rows += [
            TurnEvent(
                experiment=experiment,
                event_id=f"{session}-{i}",
                session_id=session,
                user_id=f"u-{session}",
                arm=arm,
                turn_index=i,
                role=role,
                text="q" if role == "user" else "[payment] a",
                follow_up_kind=kind,
                occurred_at=at + timedelta(seconds=10 * i),
            )
            for i, (role, kind) in enumerate(turns)
        ]
    TurnEvent.objects.bulk_create(rows)


def run_gate(experiment, suite):
    run = gate_run_start(candidate=experiment.candidate, suite=suite, actor=SYSTEM)
    gate_run_execute(gate_run_id=run.pk, worker="test")
    [layer] = GateRun.objects.get(pk=run.pk).layers.all()
    return run, layer, layer_get("follow_up_rate").details(layer)


def test_the_start_registers_layer_2s_plan_from_the_policys_planning_rate(versions):
    experiment = start(versions)
    plan = experiment.follow_up_horizon
    expected = follow_up_horizon_answers(
        rate=0.10, max_rate=0.3, margin=0.1, alpha=0.025, power=0.8, decide_on="upper_bound"
    )
    # Far from the bar and a wide margin: a small horizon, raised to follow_up_min_answered.
    assert expected < 200 and plan["answers_per_arm"] == 200
    assert english([plan["basis"]])[0].startswith(
        "rate 0.1 from follow_up_planning_rate (0 answers in the 14 days"
    )
    assert english([plan["basis"]])[0].endswith(f"; raised from {expected} to follow_up_min_answered")
    assert plan["settings"]["follow_up_margin"] == 0.1 and plan["settings"]["confidence"] == 0.95
    assert plan["counted_from"] == experiment.business_horizon["counted_from"]


def test_the_familys_rate_before_the_start_sizes_it_when_there_is_enough(versions):
    earlier = start(versions, name="earlier")
    chats(earlier, arm="baseline", sessions=300, follow_up_every=5)  # 60 follow-ups of 360 answers
    Experiment.objects.filter(pk=earlier.pk).update(status="rolled_back")
    gate_policy_save(name="fam", config={**POLICY, "follow_up_margin": 0.03}, actor=SYSTEM)
    created = experiment_create(name="later", baseline=versions[0], candidate=versions[1], actor=SYSTEM)
    later = experiment_start_registered(experiment=created, actor=SYSTEM)
    plan = Experiment.objects.get(pk=later.pk).follow_up_horizon
    rate = 60 / 360
    assert plan["baseline_rate"] == pytest.approx(rate)
    assert plan["answers_per_arm"] == follow_up_horizon_answers(
        rate=rate, max_rate=0.3, margin=0.03, alpha=0.025, power=0.8, decide_on="upper_bound"
    )
    assert english([plan["basis"]])[0].startswith(
        "rate 0.1667 from 60 follow-ups of 360 answers in the 14 days"
    )


def test_the_look_counts_the_first_answers_per_arm_and_is_returned_unchanged(versions, suite):
    experiment = start(versions)
    chats(experiment, arm="baseline", sessions=180, follow_up_every=4)
    chats(experiment, arm="candidate", sessions=180, follow_up_every=5)
    window = traffic_window_get(experiment=experiment)
    counts, _ = answers_look_counts(window=window, since=window.start, kinds=("follow_up",), limit=200)
    # Baseline sessions 0, 4, 8, ... have two answers: the 200th answer is session 159's; of sessions
    # 0–159, 40 followed up. Candidate: sessions 0, 5, ...: the 200th is session 166's, 34 follow-ups.
    assert (counts.baseline.answered, counts.baseline.follow_ups) == (200, 40)
    assert (counts.candidate.answered, counts.candidate.follow_ups) == (200, 34)
    run, layer, details = run_gate(experiment, suite)
    assert layer.verdict == "pass", english(layer.reasons)
    judged = details.judged
    assert (judged.baseline.follow_ups, judged.candidate.follow_ups) == (40, 34)
    assert details.look_taken_now and details.look.units_per_arm == 200
    # More traffic, now much worse on the candidate: the look stays.
    chats(experiment, arm="candidate", sessions=100, follow_up_every=1, first_minute=120, tag="late-")
    _, again, again_details = run_gate(experiment, suite)
    assert (again.verdict, again.estimate, again.ci_high) == (layer.verdict, layer.estimate, layer.ci_high)
    assert again_details.judged.candidate == judged.candidate
    assert english(again.reasons)[-1].endswith(f"by gate run {run.pk}: every later run returns it unchanged")


def test_before_the_horizon_the_layer_is_blind_and_waits_for_the_last_follow_ups(versions, suite):
    experiment = start(versions)
    chats(experiment, arm="baseline", sessions=100, follow_up_every=4)
    chats(experiment, arm="candidate", sessions=100, follow_up_every=5)
    _, layer, details = run_gate(experiment, suite)
    assert layer.verdict == "insufficient_data" and layer.estimate is None and details.judged.blind
    assert details.judged.candidate.follow_ups is None and details.judged.candidate.answered == 120
    assert english(layer.reasons)[0].startswith(
        "before the registered horizon of 200 answered questions per arm (125 baseline and 120 candidate so "
        "far;"
    )
    # Reached, but the last answers' follow-ups may still come: the 200th candidate answer comes about
    # eight minutes before now, within the detector's 600 s follow-up window.
    late = (timezone.now() - experiment.share_since).total_seconds() / 60 - 30
    chats(experiment, arm="baseline", sessions=100, follow_up_every=4, first_minute=late, tag="b-")
    chats(experiment, arm="candidate", sessions=100, follow_up_every=5, first_minute=late, tag="c-")
    fresh = Experiment.objects.get(pk=experiment.pk)
    _, waiting, details = run_gate(fresh, suite)
    assert waiting.verdict == "insufficient_data" and details.judged.blind and details.look is None
    assert (
        "is reached: the one look is taken once the follow-ups of its last answers are in"
        in english(waiting.reasons)[0]
    )


def test_an_answer_split_off_the_share_is_an_error(versions, suite):
    experiment = start(versions)
    chats(experiment, arm="baseline", sessions=300, follow_up_every=4)
    chats(experiment, arm="candidate", sessions=150, follow_up_every=4)
    window = traffic_window_get(experiment=experiment)
    split = answers_split(window=window, since=window.start)
    # 300 users of 1–2 answers: Σa² counts each two-answer user 4 times.
    assert split == AnswerTally(baseline=375, candidate=188, sum_squares=75 * 4 + 225 + 38 * 4 + 112)
    _, layer, details = run_gate(experiment, suite)
    assert layer.verdict == "error" and details.judged.srm.mismatch and details.judged.blind

"""Canary analysis on stored events; acting on its verdict; a broken candidate rolled back end to end."""

import random
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from canary.models import CanaryAnalysis, Experiment, ProbeRun, ProbeSet, TurnEvent
from canary.services.analysis import experiment_analyze
from canary.services.events import events_ingest
from canary.services.experiments import experiment_create, experiment_start
from registry.actors import SYSTEM
from registry.models import AuditLog
from registry.services.versions import model_version_register
from tests.canary.traffic import experiment_backdate, user_on
from tests.lifecycle import incumbent_register

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}


def versions():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    return v3, v4


def traffic(
    *,
    sessions: int,
    arm: str,
    error_rate: float = 0.0,
    latency: float = 100.0,
    seed: int = 0,
    first_token: float | None = None,
    minutes_ago: float = 30,
):
    """Sessions of one question and one answer (sometimes a second question), as chat-app events
    of users the router puts on `arm`, `minutes_ago` (half an hour) ago. With `first_token` (ms) the
    answers were streamed: their first token came then, and 20 tokens in `latency` ms after it."""
    experiment = Experiment.objects.get(name="exp")
    rng = random.Random(f"{arm}{seed}")
    stamp = (timezone.now() - timedelta(minutes=minutes_ago)).isoformat()
    events = []
    for s in range(sessions):
        turns = 2 if rng.random() < 0.2 else 1
        user_id = user_on(experiment, arm, f"{arm}-{s}")
        for t in range(turns):
            common = {"experiment": "exp", "session_id": f"{arm}-{seed}-{s}", "user_id": user_id, "arm": arm}
            events.append(
                {**common, "type": "turn", "event_id": f"{arm}-{seed}-{s}-{t}-q", "turn_index": 2 * t}
                | {"role": "user", "text": "q", "timestamp": stamp}
            )
            answer = {
                "role": "assistant",
                "text": "a",
                "timestamp": stamp,
                "latency_ms": rng.gauss(latency, 10),
            }
            if first_token is not None:
                ttft = rng.gauss(first_token, first_token / 10)
                answer |= {
                    "first_token_ms": ttft,
                    "latency_ms": ttft + answer["latency_ms"],
                    "output_tokens": 20,
                }
            events.append(
                {**common, "type": "turn", "event_id": f"{arm}-{seed}-{s}-{t}-a", "turn_index": 2 * t + 1}
                | answer
                | {"error": "timeout" if rng.random() < error_rate else ""}
            )
    for start in range(0, len(events), 4000):
        events_ingest(events=events[start : start + 4000], actor=SYSTEM)


def probe_report(experiment, *, candidate_only: int = 3, baseline_only: int = 2, pairs: int = 40):
    probe_set = ProbeSet.objects.create(name="p", family="fam")
    both = pairs // 2
    ProbeRun.objects.create(
        experiment=experiment,
        probe_set=probe_set,
        status="succeeded",
        finished_at="2026-11-29T10:00:00Z",
        report={
            "all": {
                "pairs": pairs,
                "baseline_rate": (both + baseline_only) / pairs,
                "candidate_rate": (both + candidate_only) / pairs,
                "only_candidate_correct": candidate_only,
                "only_baseline_correct": baseline_only,
                "both_correct": both,
                "neither_correct": pairs - both - candidate_only - baseline_only,
                # As a probe run stores them (the McNemar p of 3 against 2 discordant pairs).
                "mcnemar_p": 1.0,
                "finding": "no clear difference",
            }
        },
    )


@pytest.fixture
def experiment(db):
    v3, v4 = versions()
    created = experiment_create(
        name="exp", baseline=v3, candidate=v4, traffic_percent=5, ramp=[5, 25, 100], actor=SYSTEM
    )
    return experiment_backdate(experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1))


@pytest.mark.django_db
def test_too_little_traffic_is_insufficient_and_nothing_happens(experiment):
    traffic(sessions=20, arm="baseline")
    traffic(sessions=20, arm="candidate")
    analysis = experiment_analyze(experiment=experiment)
    assert analysis.verdict == "insufficient_data" and analysis.action == ""
    assert {m["metric"]: m["verdict"] for m in analysis.metrics}["error_rate"] == "insufficient_data"
    experiment.refresh_from_db()
    assert (experiment.status, experiment.traffic_percent) == ("running", 5.0)


@pytest.mark.django_db
def test_a_candidate_that_errors_is_rolled_back_with_the_reason(
    experiment, django_capture_on_commit_callbacks, settings
):
    settings.EVALHUB_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    traffic(sessions=400, arm="baseline", error_rate=0.01)
    traffic(sessions=400, arm="candidate", error_rate=0.2)
    probe_report(experiment)
    with django_capture_on_commit_callbacks() as webhooks:
        analysis = experiment_analyze(experiment=experiment)
    assert (analysis.verdict, analysis.action) == ("fail", "rolled_back")
    error_rate = next(m for m in analysis.metrics if m["metric"] == "error_rate")
    assert error_rate["verdict"] == "fail" and error_rate["p_value"] < 0.001
    experiment.refresh_from_db()
    assert (experiment.status, experiment.traffic_percent) == ("rolled_back", 0.0)
    assert "error_rate [fail]" in experiment.end_reason
    row = AuditLog.objects.get(action="experiment.rolled_back")
    assert row.actor_name == "canary-analysis" and "error_rate" in row.reason
    assert len(webhooks) == 1


@pytest.mark.django_db
def test_probe_traffic_is_not_user_traffic(experiment):
    traffic(sessions=400, arm="baseline")
    traffic(sessions=400, arm="candidate")
    probe_report(experiment)
    before = experiment_analyze(experiment=experiment, act=False).metrics
    TurnEvent.objects.bulk_create(
        TurnEvent(
            experiment=experiment,
            event_id=f"probe-{i}",
            session_id=f"probe-{i}",
            arm="candidate",
            turn_index=1,
            role="assistant",
            error="boom",
            source="probe",
            occurred_at="2026-11-29T10:00:00Z",
        )
        for i in range(500)
    )
    after = experiment_analyze(experiment=experiment, act=False).metrics
    assert [(m["metric"], m["candidate_n"], m["verdict"]) for m in after] == [
        (m["metric"], m["candidate_n"], m["verdict"]) for m in before
    ]


@pytest.mark.django_db
def test_a_pass_waits_for_a_release_manager_unless_the_plan_ramps_itself(experiment):
    traffic(sessions=400, arm="baseline")
    traffic(sessions=400, arm="candidate", seed=1)
    probe_report(experiment)
    analysis = experiment_analyze(experiment=experiment)
    assert (analysis.verdict, analysis.action) == ("pass", "waiting_for_release_manager"), analysis.reasons
    turns = next(m for m in analysis.metrics if m["metric"] == "turns_per_session")
    assert turns["candidate_n"] == turns["baseline_n"] == 400
    experiment.ramp_auto = True
    experiment.save(update_fields=["ramp_auto"])
    assert experiment_analyze(experiment=experiment).action == "ramped"
    experiment.refresh_from_db()
    assert (experiment.traffic_percent, experiment.ramp_step) == (25.0, 1)
    assert AuditLog.objects.get(action="experiment.ramp").actor_name == "canary-analysis"
    assert CanaryAnalysis.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_stopping_the_candidates_server_rolls_back_while_users_keep_answers(
    live_server, serve_versions, small_bow
):
    v3, v4 = serve_versions({"v3": small_bow, "v4": small_bow})
    v4_server = serve_versions.servers["v4"]
    created = experiment_create(
        name="sim",
        baseline=v3,
        candidate=v4,
        traffic_percent=50,
        actor=SYSTEM,
        guardrails={"min_requests": 50},
    )
    experiment = experiment_start(experiment=created, actor=SYSTEM)
    v4_server.shutdown()  # the candidate goes down
    v4_server.server_close()
    call_command(
        "simulate_traffic", experiment="sim", server=live_server.url, users=120, concurrency=4, json=True
    )
    answers = TurnEvent.objects.filter(role="assistant")
    candidate = answers.filter(arm="candidate")
    # Every request was answered: the candidate's users by V3, recorded as fallbacks.
    assert candidate.exists() and candidate.filter(fallback=True).count() == candidate.count()
    assert set(candidate.values_list("version__label", flat=True)) == {"v3"}
    analysis = experiment_analyze(experiment=experiment)
    assert (analysis.verdict, analysis.action) == ("fail", "rolled_back")
    experiment.refresh_from_db()
    assert experiment.status == "rolled_back" and "fallback_rate [fail]" in experiment.end_reason


@pytest.mark.django_db
def test_a_candidate_whose_first_token_comes_late_is_rolled_back_on_that_metric(experiment):
    # Same decode speed and the same time after the first token: only the prefill is slower (3x).
    traffic(sessions=400, arm="baseline", first_token=200.0)
    traffic(sessions=400, arm="candidate", first_token=600.0, seed=1)
    probe_report(experiment)
    analysis = experiment_analyze(experiment=experiment)
    metrics = {m["metric"]: m for m in analysis.metrics}
    first = metrics["first_token_p50"]
    assert first["verdict"] == "fail" and first["difference"] == pytest.approx(3.0, rel=0.05)
    assert first["ci_low"] > 2.5 and first["ci_high"] < 3.5 and first["adjusted_p_value"] < 0.01
    assert metrics["tokens_per_second"]["verdict"] == "pass"
    assert metrics["tokens_per_second"]["difference"] == pytest.approx(1.0, rel=0.05)
    assert (analysis.verdict, analysis.action) == ("fail", "rolled_back")
    experiment.refresh_from_db()
    assert experiment.status == "rolled_back" and "first_token_p50 [fail]" in experiment.end_reason


@pytest.mark.django_db
def test_a_like_streaming_candidate_passes_every_speed_metric(experiment):
    traffic(sessions=400, arm="baseline", first_token=200.0)
    traffic(sessions=400, arm="candidate", first_token=200.0, seed=1)
    probe_report(experiment)
    analysis = experiment_analyze(experiment=experiment, act=False)
    verdicts = {m["metric"]: m["verdict"] for m in analysis.metrics}
    speed = ("latency_p95", "first_token_p50", "first_token_p95", "tokens_per_second")
    assert {verdicts[metric] for metric in speed} == {"pass"}, analysis.reasons
    assert analysis.verdict == "pass"


@pytest.mark.django_db
def test_traffic_that_never_streams_is_not_held_back_by_streaming_metrics(experiment):
    traffic(sessions=400, arm="baseline")
    traffic(sessions=400, arm="candidate", seed=1)
    probe_report(experiment)
    analysis = experiment_analyze(experiment=experiment, act=False)
    metrics = [m["metric"] for m in analysis.metrics]
    assert "latency_p95" in metrics and not {"first_token_p50", "tokens_per_second"} & set(metrics)
    assert analysis.verdict == "pass"


@pytest.mark.django_db(transaction=True)
def test_a_slow_prefill_through_the_streaming_proxy_is_rolled_back(live_server, serve_versions, small_bow):
    """End to end: the official client streams through the proxy; the candidate's server waits 60 ms
    before its first token (the baseline's does not); the analysis rolls it back on time to first token."""
    v3, v4 = serve_versions({"v3": small_bow, "v4": small_bow}, first_token_delay={"v4": 0.06})
    created = experiment_create(
        name="sim",
        baseline=v3,
        candidate=v4,
        traffic_percent=50,
        actor=SYSTEM,
        guardrails={"min_requests": 40},
    )
    experiment = experiment_start(experiment=created, actor=SYSTEM)
    call_command(
        "simulate_traffic",
        experiment="sim",
        server=live_server.url,
        users=120,
        concurrency=4,
        stream=True,
        json=True,
    )
    answers = TurnEvent.objects.filter(role="assistant", streamed=True, error="")
    assert answers.filter(arm="candidate").count() >= 40 and answers.filter(arm="baseline").count() >= 40
    analysis = experiment_analyze(experiment=experiment)
    first = next(m for m in analysis.metrics if m["metric"] == "first_token_p50")
    assert first["verdict"] == "fail" and first["candidate_estimate"] > 60 > first["baseline_estimate"]
    assert (analysis.verdict, analysis.action) == ("fail", "rolled_back")
    experiment.refresh_from_db()
    assert experiment.status == "rolled_back" and "first_token_p50 [fail]" in experiment.end_reason

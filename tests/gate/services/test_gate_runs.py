"""Gate runs in-process: execution with a real (small) model, claims, heartbeats and the reaper."""

from datetime import timedelta

import pytest
from django.utils import timezone

from engines.demo.dataset import demo_dataset_build
from gate.layers.robustness import RobustnessLayerCode
from gate.models import GateRun, SampleResult
from gate.services.gate_runs import (
    ClaimLost,
    gate_run_claim,
    gate_run_execute,
    gate_run_heartbeat,
    gate_run_reap_stale,
    gate_run_start,
)
from registry.actors import SYSTEM
from registry.models import AuditLog, ModelVersion
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.pages import page_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def suite():
    items = demo_dataset_build(seed=0).eval[:60]
    records = [
        {"id": i.id, "input": i.input, "label": i.label, "language": i.language, "tags": list(i.tags)}
        for i in items
    ]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


def start(candidate, suite, **overrides):
    """A run of the clean-accuracy layer only, unless the overrides name other layers."""
    overrides = {"required_layers": ["clean_accuracy"], **overrides}
    return gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=overrides)


def test_execute_stores_clean_accuracy_from_the_models(versions, suite):
    candidate, _ = versions
    run = start(
        candidate,
        suite,
        batch_size=16,
        clean_accuracy_min=0.0,
        required_layers=["clean_accuracy", "follow_up_rate"],
    )
    run = gate_run_execute(gate_run_id=run.pk, worker="w1")
    assert (run.status, run.progress, run.attempts) == ("succeeded", 100, 1)
    layer = run.layers.get(layer="clean_accuracy")
    details = layer.details
    assert details["candidate"]["n"] == details["baseline"]["n"] == 60
    # Same checkpoint on both sides: identical answers, so identical accuracy.
    assert details["candidate"]["accuracy"] == details["baseline"]["accuracy"] == layer.estimate
    stored = SampleResult.objects.filter(layer_result=layer, version=candidate)
    assert stored.count() == 60
    assert stored.filter(correct=True).count() == details["candidate"]["correct"]
    sample = stored.select_related("item").first()
    assert (
        sample.output_label
        and sample.output_text
        and sample.correct == (sample.output_label == sample.item.label)
    )
    assert details["candidate"]["device"] == "cpu" and layer.wall_seconds > 0
    # Clean accuracy passes, but the follow-up layer has no canary traffic to judge: no pass.
    assert layer.verdict == "pass"
    assert run.layers.get(layer="follow_up_rate").verdict == "insufficient_data"
    assert run.verdict == "insufficient_data"
    assert run.verdict_reasons == [
        {
            "code": "verdict.layer_verdict",
            "params": {"layer": {"term": "follow_up_rate"}, "verdict": {"term": "insufficient_data"}},
        }
    ]
    candidate.refresh_from_db()
    assert candidate.status == "registered"
    assert AuditLog.objects.filter(action="gate_run.finish", target_id=str(run.pk)).exists()


@pytest.mark.parametrize(
    ("bar", "verdict", "status"), [(0.0, "pass", "gate_passed"), (1.0, "fail", "gate_failed")]
)
def test_verdict_follows_the_bar_and_moves_the_candidate(versions, suite, bar, verdict, status):
    candidate, _ = versions
    run = start(
        candidate, suite, required_layers=["clean_accuracy"], clean_accuracy_min=bar, run_baseline=False
    )
    run = gate_run_execute(gate_run_id=run.pk, worker="w1")
    assert run.verdict == verdict
    assert run.layers.get().details["baseline"] is None
    candidate.refresh_from_db()
    assert candidate.status == status


def test_missing_checkpoint_fails_the_run_with_the_reason(versions, suite):
    candidate, _ = versions
    ModelVersion.objects.filter(pk=candidate.pk).update(backend_config={"path": "gone", "batch_size": 256})
    run = gate_run_execute(gate_run_id=start(candidate, suite).pk, worker="w1")
    assert (run.status, run.verdict) == ("failed", "error")
    assert "fam:v2" in run.error_message
    candidate.refresh_from_db()
    assert candidate.status == "registered"


def test_unreachable_endpoint_is_transient(versions, suite):
    from engines.backends import BackendError

    candidate = model_version_register(
        family="fam",
        label="remote",
        backend_kind="openai",
        actor=SYSTEM,
        backend_config={"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 0, "timeout_s": 1},
    )
    run = start(candidate, suite)
    with pytest.raises(BackendError) as caught:
        gate_run_execute(gate_run_id=run.pk, worker="w1")
    assert caught.value.transient


def test_a_live_run_cannot_be_claimed_twice_but_a_stale_one_can(versions, suite, settings):
    run = start(versions[0], suite)
    assert gate_run_claim(gate_run_id=run.pk, worker="w1").worker == "w1"
    assert gate_run_claim(gate_run_id=run.pk, worker="w2") is None
    stale = timezone.now() - timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS + 1)
    GateRun.objects.filter(pk=run.pk).update(heartbeat_at=stale)
    taken = gate_run_claim(gate_run_id=run.pk, worker="w2")
    assert (taken.worker, taken.attempts) == ("w2", 2)
    run.worker = "w1"  # the first worker, unaware that it lost the run
    with pytest.raises(ClaimLost):
        gate_run_heartbeat(run=run, progress=50)


def test_reaper_requeues_then_gives_up(versions, suite, settings, django_capture_on_commit_callbacks):
    candidate, _ = versions
    run = start(candidate, suite)
    stale = timezone.now() - timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS + 1)
    gate_run_claim(gate_run_id=run.pk, worker="dead")
    GateRun.objects.filter(pk=run.pk).update(heartbeat_at=stale)
    assert gate_run_reap_stale()["requeued"] == 1
    run.refresh_from_db()
    assert (run.status, run.worker) == ("queued", "")
    assert AuditLog.objects.filter(action="gate_run.requeue", target_id=str(run.pk)).exists()

    GateRun.objects.filter(pk=run.pk).update(
        status="running", worker="dead", heartbeat_at=stale, attempts=settings.EVALHUB_GATE_RUN_MAX_ATTEMPTS
    )
    assert gate_run_reap_stale()["errored"] == 1
    run.refresh_from_db()
    assert (run.status, run.verdict) == ("error", "error")
    assert "stopped reporting" in run.error_message
    candidate.refresh_from_db()
    assert candidate.status == "registered"


def test_reaper_reenqueues_runs_no_worker_picked_up(versions, suite, settings):
    run = start(versions[0], suite)
    long_ago = timezone.now() - timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS + 1)
    GateRun.objects.filter(pk=run.pk).update(enqueued_at=long_ago)
    assert gate_run_reap_stale()["reenqueued"] == 1
    assert gate_run_reap_stale()["reenqueued"] == 0  # enqueued_at moved on


def test_finished_runs_are_not_claimed_again(versions, suite):
    run = gate_run_execute(gate_run_id=start(versions[0], suite).pk, worker="w1")
    assert gate_run_execute(gate_run_id=run.pk, worker="w2") is None
    assert GateRun.objects.get(pk=run.pk).attempts == 1


ROBUST = {
    "required_layers": ["clean_accuracy", "robustness"],
    "robustness_samples": 200,
    "robustness_min_samples": 100,
    "robustness_chunk_size": 50,
}


def robustness_of(run):
    return run.layers.get(layer="robustness")


def test_robustness_layer_scores_perturbed_inputs(versions, suite, admin_client):
    candidate, _ = versions
    run = gate_run_execute(gate_run_id=start(candidate, suite, **ROBUST).pk, worker="w1")
    assert run.status == "succeeded"
    layer = robustness_of(run)
    details = layer.details
    assert details["recipe"] == "robustness-v1" and len(details["set_hash"]) == 64
    samples = SampleResult.objects.filter(layer_result=layer, version=candidate)
    assert samples.count() == details["candidate"]["n"] == 200
    assert samples.filter(correct=True).count() == details["candidate"]["correct"]
    assert layer.estimate == pytest.approx(details["candidate"]["correct"] / 200)
    assert layer.ci_low < layer.estimate < layer.ci_high
    one = samples.exclude(diff="").select_related("item").first()
    assert one.perturbation and one.input_text != one.item.input
    assert set(details["candidate"]["by_type"]) <= set(samples.values_list("perturbation", flat=True))
    # Same checkpoint on both sides: every pair agrees, so McNemar finds nothing.
    assert (
        details["comparison"]["only_candidate_correct"] == details["comparison"]["only_baseline_correct"] == 0
    )
    assert details["comparison"]["mcnemar_p"] == 1.0
    expected = "pass" if layer.ci_low >= 0.85 else "fail"
    assert layer.verdict == expected and run.verdict == expected
    page = page_text(admin_client.get(f"/gate-runs/{run.pk}/"))
    assert "type char_swap" in page and "McNemar p = 1.0000" in page
    # Each version's model work: one query per answer computed, seconds on the worker's device.
    costs = {c["version"]: c for c in details["costs"]}
    assert costs[candidate.ref]["queries"] == details["candidate"]["computed"]
    assert costs[candidate.ref]["device_seconds"] == pytest.approx(details["candidate"]["seconds"])


def test_same_seed_same_set_other_seed_other_set(versions, suite):
    candidate, _ = versions
    hashes = [
        robustness_of(
            gate_run_execute(
                gate_run_id=start(candidate, suite, **ROBUST, robustness_seed=seed).pk, worker="w"
            )
        ).details["set_hash"]
        for seed in (1, 1, 2)
    ]
    assert hashes[0] == hashes[1] != hashes[2]


def test_a_crashed_run_resumes_without_recomputing_finished_chunks(versions, suite, settings, monkeypatch):
    from gate.layers import outputs as model_outputs

    candidate, _ = versions
    real = model_outputs.model_version_backend
    asked = []

    class Crashing:
        def __init__(self, backend, crash_after):
            self.backend, self.crash_after = backend, crash_after

        def predict(self, texts):
            if self.crash_after is not None and len(asked) >= self.crash_after:
                raise SystemExit("worker killed")  # not an Exception: nothing gets to clean up
            asked.extend(texts)
            return self.backend.predict(texts)

    overrides = {**ROBUST, "run_baseline": False, "batch_size": 25}
    monkeypatch.setattr(
        model_outputs,
        "model_version_backend",
        lambda version: Crashing(real(version=version), crash_after=60 + 100),
    )
    run = start(candidate, suite, **overrides)
    with pytest.raises(SystemExit):
        gate_run_execute(gate_run_id=run.pk, worker="dead")
    layer = robustness_of(run)
    assert layer.verdict == "pending" and layer.samples.count() == 100  # two chunks of 50 committed
    first_attempt = len(asked)

    GateRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS + 1)
    )
    monkeypatch.setattr(
        model_outputs,
        "model_version_backend",
        lambda version: Crashing(real(version=version), crash_after=None),
    )
    resumed = gate_run_execute(gate_run_id=run.pk, worker="rescuer")
    assert (resumed.status, resumed.attempts) == ("succeeded", 2)
    # The second attempt asked only for the 100 samples not yet stored.
    assert len(asked) - first_attempt == 100

    other = model_version_register(
        family="fam",
        label="v9",
        backend_kind="builtin",
        backend_config=candidate.backend_config,
        actor=SYSTEM,
    )
    uninterrupted = gate_run_execute(gate_run_id=start(other, suite, **overrides).pk, worker="w3")
    a, b = robustness_of(resumed), robustness_of(uninterrupted)
    assert (a.estimate, a.details["set_hash"]) == (b.estimate, b.details["set_hash"])
    assert list(a.samples.order_by("sample_index").values_list("correct", flat=True)) == list(
        b.samples.order_by("sample_index").values_list("correct", flat=True)
    )


def test_recipe_needing_downloads_is_a_layer_error_not_a_crash(versions, suite):
    run = gate_run_execute(
        gate_run_id=start(
            versions[0], suite, **ROBUST, robustness_recipe="textfooler", clean_accuracy_min=0.0
        ).pk,
        worker="w",
    )
    layer = robustness_of(run)
    assert (run.status, layer.verdict, run.verdict) == ("succeeded", "error", "error")
    assert "textfooler" in layer.reasons[0] and "offline" in layer.reasons[0]


def test_consistency_mode_judges_samples_by_the_models_own_clean_answers(versions, suite, small_bow):
    from engines.backends.builtin import BowBackend

    candidate, _ = versions
    run = start(candidate, suite, **ROBUST, run_baseline=False, robustness_judge_by="consistency")
    layer = robustness_of(gate_run_execute(gate_run_id=run.pk, worker="w"))
    assert layer.details["judged_by"] == "consistency"
    model = BowBackend.from_dir(small_bow, device="cpu")
    samples = list(layer.samples.select_related("item"))
    answers = model.predict([s.item.input for s in samples])
    clean = {s.item.input: p.label for s, p in zip(samples, answers, strict=True)}
    assert all(s.correct == (s.output_label == clean[s.item.input]) for s in samples)
    # Agreeing with itself is not the same as being right: wrong clean answers kept count here.
    assert any(s.correct and s.output_label != s.item.label for s in samples)


def test_attack_mode_reports_accuracy_under_attack_beside_the_rate(versions, suite, admin_client):
    candidate, baseline = versions
    run = start(candidate, suite, **ROBUST, attack_recipe="deepwordbug", attack_items=12)
    run = gate_run_execute(gate_run_id=run.pk, worker="w")
    layer = robustness_of(run)
    attack = layer.details["attack"]
    assert attack["spec"] == {"recipe": "deepwordbug", "seed": 0, "items": 12, "query_budget": 500}
    assert set(attack["versions"]) == {candidate.ref, baseline.ref}
    report = attack["versions"][candidate.ref]
    assert report["items_sampled"] == 12 and report["attacked"] + report["originally_wrong"] > 0
    assert report["accuracy_under_attack"] <= report["accuracy_before"]
    assert layer.details["timings"]["attack"] > 0
    assert layer.verdict in ("pass", "fail")  # the attack is reported, the rate decides
    page = page_text(admin_client.get(f"/gate-runs/{run.pk}/"))
    assert "Attack deepwordbug (seed 0, 12 items, 500 queries each)" in page


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"attack_recipe": "textfooler"}, "Universal Sentence Encoder"),
        ({"attack_recipe": "hotflip"}, "unknown attack recipe"),
    ],
)
def test_an_attack_that_cannot_run_is_a_layer_error_before_any_model_work(
    versions, suite, overrides, message
):
    run = start(versions[0], suite, **{**ROBUST, "required_layers": ["robustness"]}, **overrides)
    layer = robustness_of(gate_run_execute(gate_run_id=run.pk, worker="w"))
    assert layer.verdict == "error" and message in layer.reasons[0]
    assert not layer.samples.exists()


def test_attack_mode_refuses_a_model_without_class_scores(versions, suite):
    remote = model_version_register(
        family="fam",
        label="remote",
        backend_kind="openai",
        backend_config={"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        actor=SYSTEM,
    )
    run = start(remote, suite, **{**ROBUST, "required_layers": ["robustness"]}, attack_recipe="deepwordbug")
    layer = robustness_of(gate_run_execute(gate_run_id=run.pk, worker="w"))
    assert layer.verdict == "error"
    assert layer.reasons == [
        {
            "code": RobustnessLayerCode.ATTACK_NEEDS_CLASS_SCORES,
            "params": {"backend": "openai", "ref": remote.ref},
        }
    ]


def test_too_few_samples_is_insufficient_data(versions, suite):
    run = start(versions[0], suite, **{**ROBUST, "robustness_samples": 50, "robustness_min_samples": 100})
    layer = robustness_of(gate_run_execute(gate_run_id=run.pk, worker="w"))
    assert layer.verdict == "insufficient_data"
    assert layer.reasons[0] == {"code": "robustness.too_few_samples", "params": {"n": 50, "need": 100}}


def test_reference_only_items_are_judged_by_similarity(versions):
    """No labels: a typo'd reference still matches the right answer (BERTScore for English,
    chrF for Chinese) and not another clause's answer."""
    candidate, _ = versions
    items = [i for i in demo_dataset_build(seed=0).eval if i.language in ("en", "zh")][:40]
    truth = {i.id: i.label for i in items}

    def typo(text: str) -> str:
        middle = len(text) // 2
        return text[: middle - 1] + text[middle] + text[middle - 1] + text[middle + 1 :]

    records = [
        {"id": i.id, "input": i.input, "reference": typo(i.reference), "language": i.language} for i in items
    ]
    suite = eval_suite_import(name="free-text", items=suite_items_parse(records=records), actor=SYSTEM)[0]
    run = gate_run_execute(gate_run_id=start(candidate, suite, run_baseline=False).pk, worker="w")
    samples = SampleResult.objects.filter(layer_result__gate_run=run).select_related("item")
    assert samples.count() == 40
    assert all(s.correct == (s.output_label == truth[s.item.external_id]) for s in samples)
    assert 0 < samples.filter(correct=True).count() < 40

    # The policy's cut-offs decide: 1.0 takes only a perfect match, -1.0 anything.
    for cutoff, expected in ((1.0, 0), (-1.0, 40)):
        strict = start(
            candidate, suite, run_baseline=False, text_cutoffs={"bertscore": cutoff, "chrf": cutoff}
        )
        strict = gate_run_execute(gate_run_id=strict.pk, worker="w")
        assert SampleResult.objects.filter(layer_result__gate_run=strict, correct=True).count() == expected


def test_output_cache_reuses_answers_unless_the_policy_turns_it_off(versions, suite):
    candidate, _ = versions

    def counts(**overrides):
        run = gate_run_execute(
            gate_run_id=start(candidate, suite, run_baseline=False, **overrides).pk, worker="w"
        )
        side = run.layers.get().details["candidate"]
        return side["computed"], side["cached"], side["accuracy"]

    first, second, fresh = counts(), counts(), counts(output_cache=False)
    assert (first[:2], second[:2], fresh[:2]) == ((60, 0), (0, 60), (60, 0))
    assert first[2] == second[2] == fresh[2]


@pytest.mark.parametrize(
    ("verdicts", "overrides", "recorded"),
    [
        ({"clean_accuracy": "pass", "robustness": "pass", "follow_up_rate": "insufficient_data"}, {}, True),
        ({"clean_accuracy": "pass", "robustness": "fail"}, {}, False),
        ({"clean_accuracy": "pass", "robustness": "pass"}, {"robustness_min": 0.1}, False),  # weakened
    ],
)
def test_a_run_whose_offline_layers_pass_is_the_canarys_evidence(
    versions, suite, verdicts, overrides, recorded
):
    from gate.models import LayerResult
    from gate.services.gate_runs import gate_run_finish

    candidate, _ = versions
    run = gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=overrides)
    GateRun.objects.filter(pk=run.pk).update(status=GateRun.Status.RUNNING, worker="w1")
    run.refresh_from_db()
    for layer, verdict in verdicts.items():
        LayerResult.objects.create(gate_run=run, layer=layer, verdict=verdict, metric="m")
    gate_run_finish(run=run)
    candidate.refresh_from_db()
    assert (candidate.offline_gate_run_id == run.pk) is recorded
    assert (candidate.offline_gate_passed_at is not None) is recorded

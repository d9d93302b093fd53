"""Stress probes through both versions' real model servers, paired and compared per weakness."""

import pytest

from canary.models import ProbeResult, ProbeRun, ProbeSet, TurnEvent
from canary.probes_gen import ProbeFormatCode, demo_probes_build
from canary.services.experiments import experiment_create, experiment_start
from canary.services.probes import (
    ProbesCode,
    probe_run_execute,
    probe_runs_due,
    probe_set_import,
    probe_set_import_jsonl,
)
from engines.demo.dataset import demo_dataset_build
from engines.input_checks import FieldCode
from engines.reasons import reason
from engines.training import bow_train
from registry.actors import SYSTEM
from registry.errors import ApplicationError

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def better_bow(test_model_dir):
    """A second real model, trained on all of the training split (the small one sees a third)."""
    out_dir = test_model_dir / "bow-all"
    bow_train(items=demo_dataset_build(seed=0).train, out_dir=out_dir, seed=0, epochs=10)
    return out_dir


@pytest.fixture
def experiment(small_bow, better_bow, serve_versions):
    v3, v4 = serve_versions({"v3": small_bow, "v4": better_bow})
    created = experiment_create(name="exp", baseline=v3, candidate=v4, actor=SYSTEM)
    return experiment_start(experiment=created, actor=SYSTEM)


@pytest.fixture
def probe_set():
    return probe_set_import(
        name="weak-spots", family="contract-assistant", probes=demo_probes_build(per_weakness=8), actor=SYSTEM
    )


def test_probes_are_paired_per_weakness_and_kept_out_of_user_traffic(experiment, probe_set):
    run = probe_run_execute(experiment=experiment, probe_set=probe_set)
    assert run.status == "succeeded", run.error
    results = ProbeResult.objects.filter(probe_run=run)
    assert results.count() == 2 * 32
    report = run.report
    assert set(report) == {"all", "long_contract", "mixed_language", "ocr_noise", "clause_conflict"}
    for weakness, cell in report.items():
        rows = results if weakness == "all" else results.filter(probe__weakness=weakness)
        pairs = rows.count() // 2
        assert cell["pairs"] == pairs == (32 if weakness == "all" else 8)
        for arm in ("baseline", "candidate"):
            correct = rows.filter(arm=arm, correct=True).count()
            assert cell[f"{arm}_rate"] == pytest.approx(correct / pairs)
        candidate_ok = rows.filter(arm="candidate", correct=True).values_list("probe_id", flat=True)
        baseline_ok = rows.filter(arm="baseline", correct=True).values_list("probe_id", flat=True)
        assert cell["both_correct"] == len(set(candidate_ok) & set(baseline_ok))
        assert 0 <= cell["mcnemar_p"] <= 1
        assert cell["finding"] in (
            "candidate fixes this weakness",
            "candidate regresses",
            "no clear difference",
        )
    one = results.filter(arm="candidate").select_related("probe").first()
    assert one.version.ref == "contract-assistant:v4" and one.output_text
    assert one.correct == (one.output_label == one.probe.expected_label)
    # Marked as probe traffic: every probe twice (question, answer) per arm, none as user traffic.
    assert TurnEvent.objects.filter(source="probe").count() == 4 * 32
    assert not TurnEvent.objects.exclude(source="probe").exists()


def test_a_version_that_cannot_be_reached_fails_the_run_with_the_reason(experiment, probe_set):
    candidate = experiment.candidate
    candidate.serving_url = "http://127.0.0.1:9/v1"
    candidate.save(update_fields=["serving_url"])
    run = probe_run_execute(experiment=experiment, probe_set=probe_set)
    assert run.status == "failed" and run.error.startswith("BackendError"), run.error
    assert not ProbeResult.objects.filter(probe_run=run).exists()


def test_a_serving_url_on_a_refused_address_fails_the_run_before_any_request(experiment, probe_set, settings):
    candidate = experiment.candidate
    settings.EVALHUB_OUTBOUND_RESOLVE = {"v4.models.example.com": ["169.254.169.254"]}.__getitem__
    candidate.serving_url = "http://v4.models.example.com/v1"
    candidate.save(update_fields=["serving_url"])
    run = probe_run_execute(experiment=experiment, probe_set=probe_set)
    assert run.status == "failed" and "cloud metadata address" in run.error, run.error
    assert not ProbeResult.objects.filter(probe_run=run).exists()


def test_the_beat_runs_every_set_of_running_experiments_only(experiment, probe_set):
    assert [run.probe_set.name for run in probe_runs_due()] == ["weak-spots"]
    experiment.status = "paused"
    experiment.save(update_fields=["status"])
    assert probe_runs_due() == []
    assert ProbeRun.objects.count() == 1


def test_an_unreadable_probe_file_is_refused_with_reasons():
    content = b'{"id": "p1", "input": "x", "weakness": "w"}\n'
    with pytest.raises(ApplicationError) as caught:
        probe_set_import_jsonl(name="ps", family="ca", content=content, actor=SYSTEM)
    error = caught.value
    note = reason(FieldCode.REQUIRED)
    assert error.code == "invalid_probes"
    assert error.reason == reason(
        ProbesCode.UNREADABLE,
        problem=reason(ProbeFormatCode.AT_FIELD, line=1, field="expected_label", problem=note),
    )
    assert error.fields == {"file: line 1.expected_label": [note]}
    assert error.message == "The probe set could not be read: line 1.expected_label: required"
    assert not ProbeSet.objects.exists()

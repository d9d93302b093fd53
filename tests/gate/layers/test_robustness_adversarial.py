"""Layer 1 under the word-level attack: adaptive and transfer modes, the per-language draw, the
stored set (cache and resume), on a real small classifier."""

import threading
import time

import pytest
from django.db import connection

from engines.demo.dataset import demo_dataset_build
from engines.model_server import model_server_create
from engines.reasons import ENGLISH, Reason, reason_render
from gate.layers.robustness_adversarial import AdversarialCode
from gate.models import AdversarialSet
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_backend, model_version_register
from tests.pages import page_text

pytestmark = pytest.mark.django_db

ATTACK = {
    "required_layers": ["robustness"],
    "robustness_recipe": "textfooler-v1",
    "robustness_samples": 12,
    "robustness_min_samples": 10,
    "robustness_chunk_size": 5,
    "attack_query_budget": 200,
}


@pytest.fixture
def suite():
    items = [i for i in demo_dataset_build(seed=0).eval if i.language in ("en", "zh")][::8][:30]
    records = [
        {"id": i.id, "input": i.input, "label": i.label, "language": i.language, "tags": list(i.tags)}
        for i in items
    ]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


def run_layer(candidate, suite, **overrides):
    run = gate_run_start(
        candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides={**ATTACK, **overrides}
    )
    return gate_run_execute(gate_run_id=run.pk, worker="w").layers.get(layer="robustness")


def test_adaptive_rate_is_accuracy_under_attack_per_language_draw(versions, suite, admin_client):
    candidate, baseline = versions
    layer = run_layer(candidate, suite)
    details = layer.details
    assert details["mode"] == "adaptive" and layer.verdict in ("pass", "fail")
    report = details["adversarial"][candidate.ref]
    assert report["attacked"] == candidate.ref and report["items"] == 12
    assert report["skipped"] + report["succeeded"] + report["failed"] == 12
    assert layer.estimate == pytest.approx(report["accuracy_under_attack"])
    assert report["accuracy_under_attack"] == pytest.approx(report["failed"] / 12)
    assert report["succeeded"] > 0 and 0 < report["queries_per_item"] <= 200
    # The suite is half English, half Chinese: so is the draw.
    assert {k: v["n"] for k, v in details["candidate"]["by_language"].items()} == {"en": 6, "zh": 6}
    samples = layer.samples.filter(version=candidate)
    assert samples.count() == 12
    assert samples.filter(correct=False, perturbation="textfooler-v1:succeeded").exists()
    # Same checkpoint on both sides: the same attack, the same figures, McNemar sees no difference.
    assert details["adversarial"][baseline.ref]["succeeded"] == report["succeeded"]
    comparison = details["comparison"]
    assert comparison["only_candidate_correct"] == comparison["only_baseline_correct"] == 0
    page = page_text(admin_client.get(f"/gate-runs/{layer.gate_run_id}/"))
    assert "Under attack: textfooler-v1, adaptive" in page
    # Each version's cost: its own attack's queries (class scores: tokens not counted) and seconds.
    queries = sum(e["queries"] for e in AdversarialSet.objects.get(version=candidate).examples)
    cost = details["costs"][0]
    assert (cost["version"], cost["queries"], cost["tokens_in"]) == (candidate.ref, queries, None)
    assert cost["device_seconds"] > 0 and cost["cost"] is None  # no device-hour price in the tests


def test_an_unchanged_version_is_not_attacked_again_and_a_cut_attack_resumes(versions, suite):
    candidate, _ = versions
    first = run_layer(candidate, suite, run_baseline=False)
    aset = AdversarialSet.objects.get(version=candidate)
    assert aset.complete and len(aset.examples) == 12
    complete = list(aset.examples)
    again = run_layer(candidate, suite, run_baseline=False)
    assert again.details["adversarial"][candidate.ref]["cached"] is True
    assert again.estimate == first.estimate
    # A crash after the first chunk: the next run attacks only what is missing, to the same result.
    aset.examples = complete[:5]
    aset.save()
    resumed = run_layer(candidate, suite, run_baseline=False)
    aset.refresh_from_db()
    assert resumed.details["adversarial"][candidate.ref]["cached"] is False
    assert aset.examples == complete and resumed.estimate == first.estimate


def test_a_suite_smaller_than_the_sample_size_is_the_whole_of_the_progress_from_the_start(versions, suite):
    # 30 labelled items, 100 samples asked: the attack takes each item once. Budgeted at 100 a version,
    # the bar jumped to 70 % when the attack began and the ETA read seconds for the whole attack.
    candidate, _ = versions
    run = gate_run_start(
        candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides={**ATTACK, "robustness_samples": 100}
    )
    gate_run_execute(gate_run_id=run.pk, worker="w")
    run.refresh_from_db()
    assert run.progress_detail["layers"]["robustness"] == {"done": 60, "total": 60}  # 30 items, 2 versions


def test_transfer_scores_every_version_on_the_set_made_against_the_baseline(versions, suite):
    candidate, baseline = versions
    layer = run_layer(candidate, suite, robustness_transfer_from="baseline")
    details = layer.details
    assert details["mode"] == "transfer"
    assert {r["attacked"] for r in details["adversarial"].values()} == {baseline.ref}
    assert AdversarialSet.objects.filter(version=baseline).count() == 1
    assert not AdversarialSet.objects.filter(version=candidate).exists()
    # The candidate answers the baseline's final texts; with the same checkpoint it fails where the
    # baseline's attack succeeded.
    base = details["adversarial"][baseline.ref]
    assert details["candidate"]["correct"] == base["failed"]
    texts = set(layer.samples.filter(version=baseline).values_list("input_text", flat=True))
    assert set(layer.samples.filter(version=candidate).values_list("input_text", flat=True)) == texts


def test_scores_asked_of_a_model_without_class_scores_is_a_layer_error(suite):
    remote = model_version_register(
        family="fam",
        label="remote",
        backend_kind="openai",
        backend_config={"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        actor=SYSTEM,
    )
    layer = run_layer(remote, suite, run_baseline=False, robustness_access="scores")
    assert layer.verdict == "error"
    assert layer.reasons == [
        {
            "code": AdversarialCode.NEEDS_CLASS_SCORES,
            "params": {"recipe": "textfooler-v1", "backend": "openai", "ref": remote.ref},
        }
    ]
    words = reason_render(Reason(**layer.reasons[0]), words=ENGLISH)
    assert "robustness_transfer_from" in words and "backend_config.labels" in words
    assert "robustness_access: auto or labels" in words  # the mode that does work on it


@pytest.fixture
def endpoint(versions):
    """The candidate's checkpoint behind its model server: the base URL."""
    server = model_server_create(
        backend=model_version_backend(version=versions[0], cached=False), model_name="bow"
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def test_an_endpoint_with_logprobs_is_attacked_adaptively_as_its_model_is_in_process(
    versions, suite, endpoint
):
    candidate, _ = versions
    labels = model_version_backend(version=candidate).labels
    remote = model_version_register(
        family="fam",
        label="remote",
        backend_kind="openai",
        backend_config={"base_url": endpoint, "model": "bow", "labels": labels},
        actor=SYSTEM,
    )
    small = {"run_baseline": False, "robustness_samples": 10, "attack_query_budget": 60}
    here = run_layer(candidate, suite, **small)
    there = run_layer(remote, suite, **small)
    assert there.verdict == here.verdict != "error" and there.estimate == here.estimate
    keys = ("item_id", "status", "perturbed", "label_after", "queries")
    attacked = [
        [{k: e[k] for k in keys} for e in AdversarialSet.objects.get(version=v).examples]
        for v in (candidate, remote)
    ]
    assert attacked[1] == attacked[0] and {e["status"] for e in attacked[0]} >= {"succeeded"}
    # The endpoint's queries are counted in tokens (its `usage`), the model run here is not: its
    # cost is its device time.
    here_set, there_set = (AdversarialSet.objects.get(version=v) for v in (candidate, remote))
    assert here_set.tokens_in is None and here_set.tokens_out is None
    queries = sum(e["queries"] for e in there_set.examples)
    assert there_set.tokens_in >= queries and there_set.tokens_out >= queries > 0
    [cost] = [c for c in there.details["costs"] if c["version"] == remote.ref]
    assert (cost["tokens_in"], cost["tokens_out"]) == (there_set.tokens_in, there_set.tokens_out)


def test_an_endpoint_without_labels_is_scored_in_transfer_mode(versions, suite, endpoint):
    _, baseline = versions
    remote = model_version_register(
        family="fam",
        label="remote",
        backend_kind="openai",
        backend_config={"base_url": endpoint, "model": "bow"},
        baseline=baseline,
        actor=SYSTEM,
    )
    layer = run_layer(remote, suite, robustness_transfer_from="baseline")
    assert layer.verdict != "error" and layer.details["mode"] == "transfer"
    # The same checkpoint behind the endpoint: it fails where the baseline's attack succeeded.
    assert layer.details["candidate"]["correct"] == layer.details["adversarial"][baseline.ref]["failed"]


def test_the_pwws_class_recipe_runs_as_the_layer(versions, suite):
    candidate, _ = versions
    layer = run_layer(candidate, suite, robustness_recipe="pwws-v1", run_baseline=False)
    report = layer.details["adversarial"][candidate.ref]
    assert layer.details["recipe"] == "pwws-v1" and report["items"] == 12 and report["succeeded"] > 0
    assert report["skipped"] + report["succeeded"] + report["failed"] == 12
    assert layer.estimate == pytest.approx(report["failed"] / 12)
    assert (
        layer.samples.filter(version=candidate, perturbation="pwws-v1:succeeded").count()
        == report["succeeded"]
    )


def test_the_baseline_is_handed_to_another_gpu_worker_whose_set_the_run_then_uses(
    versions, suite, monkeypatch
):
    from gate.layers import robustness_adversarial
    from gate.services.adversarial import adversarial_set_build
    from registry.dispatch import Task

    candidate, baseline = versions
    sent = []

    def helper_takes_it(task, set_id, chunk_size):
        # What an idle gpu worker does with the message, here at once: the whole set, under its lease.
        sent.append((task, set_id, chunk_size))
        assert adversarial_set_build(set_id=set_id, chunk_size=chunk_size, worker="helper") is True

    monkeypatch.setattr(robustness_adversarial, "task_send", helper_takes_it)
    layer = run_layer(candidate, suite)
    base_set = AdversarialSet.objects.get(version=baseline)
    assert sent == [(Task.ADVERSARIAL_SET_BUILD, base_set.pk, 5)]
    assert base_set.complete and base_set.worker == ""  # built by the helper, lease given back
    report = layer.details["adversarial"]
    assert report[baseline.ref]["cached"] is True and report[candidate.ref]["cached"] is False
    assert report[baseline.ref]["succeeded"] == report[candidate.ref]["succeeded"]  # same checkpoint
    # Nothing left to do: a second message for the same set is a no-op.
    assert adversarial_set_build(set_id=base_set.pk, chunk_size=5, worker="late") is False


def test_a_run_needing_a_set_another_live_worker_holds_parks_and_is_woken_and_a_stale_lease_is_taken_over(
    versions, suite, settings, sent_tasks
):
    from datetime import timedelta

    from django.utils import timezone

    from gate.layers.robustness_adversarial import adversarial_set_extend, adversarial_set_release
    from gate.services.progress import gate_run_live
    from registry.dispatch import Task

    candidate, _ = versions
    first = run_layer(candidate, suite, run_baseline=False)
    aset = AdversarialSet.objects.get(version=candidate)
    complete = list(aset.examples)
    # Another worker holds the set, half done and beating: the run gives its gpu worker back.
    AdversarialSet.objects.filter(pk=aset.pk).update(
        examples=complete[:5], worker="vm:gpu2@vm:t9", heartbeat_at=timezone.now()
    )
    run = gate_run_start(
        candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides={**ATTACK, "run_baseline": False}
    )
    assert gate_run_execute(gate_run_id=run.pk, worker="vm:gpu@vm:t1") is None
    run.refresh_from_db()
    assert (run.status, run.worker, run.attempts) == ("queued", "", 0)  # parked: not an attempt
    live = gate_run_live(run=run)
    assert live.where == "parked"
    assert live.waiting_reason == (
        f"parked until worker gpu2@vm has attacked {candidate.ref} for this run (holding no gpu worker)"
    )
    # The other worker finishes and gives the lease back: the parked run is enqueued again.
    held = AdversarialSet.objects.select_related("version").get(pk=aset.pk)
    by_id = {i.external_id: i for i in suite.items.all()}
    adversarial_set_extend(
        aset=held,
        worker="vm:gpu2@vm:t9",
        by_id=by_id,
        chunk_size=5,
        hold=lambda: None,
        on_items=lambda n: None,
    )
    adversarial_set_release(set_id=aset.pk, worker="vm:gpu2@vm:t9")
    assert sent_tasks[-1] == (Task.GATE_RUN_EXECUTE, [run.pk])
    woken = gate_run_execute(gate_run_id=run.pk, worker="vm:gpu@vm:t1")
    assert (woken.status, woken.attempts) == ("succeeded", 1)
    assert woken.layers.get(layer="robustness").estimate == first.estimate
    aset.refresh_from_db()
    assert aset.examples == complete  # the run wrote none of it
    # A holder that stopped beating loses the set: the run takes it over and resumes it.
    stale = timezone.now() - timedelta(seconds=settings.EVALHUB_GATE_RUN_STALE_SECONDS + 1)
    AdversarialSet.objects.filter(pk=aset.pk).update(
        examples=complete[:5], worker="vm:gpu2@vm:t9", heartbeat_at=stale
    )
    resumed = run_layer(candidate, suite, run_baseline=False)
    aset.refresh_from_db()
    assert aset.examples == complete and aset.worker == "" and resumed.estimate == first.estimate


def test_a_worker_whose_lease_was_taken_writes_nothing(versions, suite):
    from gate.layers.base import ClaimLost
    from gate.layers.robustness_adversarial import adversarial_set_claim, adversarial_set_extend

    candidate, _ = versions
    run_layer(candidate, suite, run_baseline=False)
    aset = AdversarialSet.objects.select_related("version").get(version=candidate)
    AdversarialSet.objects.filter(pk=aset.pk).update(examples=aset.examples[:5])
    aset.refresh_from_db()
    assert adversarial_set_claim(set_id=aset.pk, worker="a")
    assert not adversarial_set_claim(set_id=aset.pk, worker="b")  # a is alive
    AdversarialSet.objects.filter(pk=aset.pk).update(worker="b")  # b took it (a was thought dead)
    by_id = {i.external_id: i for i in suite.items.all()}
    with pytest.raises(ClaimLost):
        adversarial_set_extend(
            aset=aset, worker="a", by_id=by_id, chunk_size=5, hold=lambda: None, on_items=lambda n: None
        )
    aset.refresh_from_db()
    assert len(aset.examples) == 5


@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs concurrent PostgreSQL sessions")
@pytest.mark.django_db(transaction=True)
def test_a_chunk_slower_than_the_stale_window_does_not_make_its_live_worker_look_dead(
    versions, suite, settings, monkeypatch, sent_tasks
):
    from engines.perturbation import word_attack
    from gate.services.gate_runs import gate_run_reap_stale
    from gate.services.progress import gate_run_live
    from registry.models import AuditLog

    settings.EVALHUB_GATE_RUN_STALE_SECONDS = 1  # the lease is kept by beats every 1/6 s
    attack = word_attack.word_attack_run

    def slow_chunk(**kwargs):
        time.sleep(2)  # each chunk takes two stale windows (a loaded machine, a slow endpoint)
        return attack(**kwargs)

    monkeypatch.setattr(word_attack, "word_attack_run", slow_chunk)
    candidate, _ = versions
    overrides = {**ATTACK, "run_baseline": False}
    run = gate_run_start(candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides=overrides)
    worker = threading.Thread(
        target=lambda: (gate_run_execute(gate_run_id=run.pk, worker="vm:gpu@vm:t1"), connection.close())
    )
    worker.start()
    seen = []
    while worker.is_alive():  # the reaper and the page, looking on meanwhile
        gate_run_reap_stale()
        run.refresh_from_db()
        live = gate_run_live(run=run)
        seen.append((live.where, live.waiting_reason, run.progress))
        time.sleep(0.2)
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("succeeded", 1)
    assert not AuditLog.objects.filter(action="gate_run.requeue").exists()
    wheres = [where for where, _, _ in seen if where not in ("next", "finished")]  # claimed, until done
    assert set(wheres) == {"running"}  # never "silent", never requeued
    assert f"attacking {candidate.ref} on worker gpu@vm" in {reason for _, reason, _ in seen}
    progress = [percent for _, _, percent in seen]
    assert progress == sorted(progress) and len(set(progress)) > 2  # it moved, and never went back


def test_a_runs_adversarial_examples_export_as_jsonl_by_api_and_command(versions, suite, tmp_path):
    import json

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.test import APIClient

    from registry.services.tokens import api_token_create, user_role_grant

    candidate, baseline = versions
    layer = run_layer(candidate, suite)
    viewer = get_user_model().objects.create_user(username="viewer")
    user_role_grant(user=viewer, role="viewer")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=viewer)[1]}")
    response = api.get(f"/api/v1/gate-runs/{layer.gate_run_id}/adversarial.jsonl")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert len(rows) == 24 and {r["version"] for r in rows} == {candidate.ref, baseline.ref}  # 12 each
    flipped = [r for r in rows if r["outcome"] == "succeeded"]
    assert flipped and all(r["perturbed"] != r["original"] and r["correct"] is False for r in flipped)
    assert {(r["recipe"], r["seed"]) for r in rows} == {("textfooler-v1", 0)}
    by_id = {i.external_id: i for i in suite.items.all()}
    assert all(
        r["original"] == by_id[r["item_id"]].input and r["label"] == by_id[r["item_id"]].label for r in rows
    )
    out = tmp_path / "adv.jsonl"
    call_command("export_adversarial", str(layer.gate_run_id), "--out", str(out))
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == rows
    assert api.get("/api/v1/gate-runs/999999/adversarial.jsonl").status_code == 404


def test_an_endpoint_without_class_scores_gets_the_hard_label_search_not_an_error(versions, suite, endpoint):
    from engines.perturbation.hard_label import hard_label_attack_run

    candidate, _ = versions
    remote = model_version_register(
        family="fam",
        label="remote",
        backend_kind="openai",
        backend_config={"base_url": endpoint, "model": "bow"},  # no labels: the answer's label alone
        actor=SYSTEM,
    )
    small = {"run_baseline": False, "robustness_samples": 10, "attack_query_budget": 60}
    layer = run_layer(remote, suite, **small)
    assert layer.verdict in ("pass", "fail") and layer.details["mode"] == "adaptive"
    report = layer.details["adversarial"][remote.ref]
    assert report["search"] == "hard-label"
    why = {"code": AdversarialCode.LABELS_ONLY, "params": {"ref": remote.ref, "backend": "openai"}}
    assert report["search_reason"] == why and why in layer.reasons
    assert "gives no class scores" in reason_render(Reason(**why), words=ENGLISH)
    aset = AdversarialSet.objects.get(version=remote)
    assert aset.access == "labels" and aset.complete and len(aset.examples) == 10
    attacked = [e for e in aset.examples if e["status"] != "skipped"]
    queries = [e["queries"] for e in attacked]
    assert report["queries_max"] == max(queries) <= 60
    spent = sum(e["queries"] for e in aset.examples)  # a skipped item asked once too
    assert report["queries_per_item"] == pytest.approx(spent / len(attacked))
    assert report["succeeded"] > 0 and layer.estimate == pytest.approx(report["failed"] / 10)
    summary = [r for r in layer.reasons if r["code"] == AdversarialCode.HARD_LABEL_SUMMARY]
    assert summary and summary[0]["params"]["queries_max"] == max(queries)
    cost = layer.details["costs"][0]
    assert (cost["version"], cost["queries"]) == (remote.ref, spent)
    # Its answers' tokens, as the endpoint counted them (each question has words, each answer a label).
    assert cost["tokens_in"] == aset.tokens_in >= spent and cost["tokens_out"] == aset.tokens_out >= spent
    # The same search as the engine's on the checkpoint behind the endpoint, label for label.
    backend = model_version_backend(version=candidate)
    by_id = {i.external_id: i for i in suite.items.all()}
    labels = backend.labels
    here, _ = hard_label_attack_run(
        labeler=lambda texts: [labels.index(p.label) for p in backend.predict(list(texts))],
        items=[(by_id[e["item_id"]].input, labels.index(by_id[e["item_id"]].label)) for e in aset.examples],
        recipe="textfooler-v1",
        query_budget=60,
        seed=0,
    )
    assert [(a.status, a.perturbed, a.queries) for a in here] == [
        (e["status"], e["perturbed"], e["queries"]) for e in aset.examples
    ]
    # A hard-label set is not a score-based one: forcing scores on the in-process model makes its own.
    run_layer(candidate, suite, **small, robustness_access="labels")
    run_layer(candidate, suite, **small)
    assert sorted(AdversarialSet.objects.filter(version=candidate).values_list("access", flat=True)) == [
        "labels",
        "scores",
    ]

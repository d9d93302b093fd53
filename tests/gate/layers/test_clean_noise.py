"""Layer 0's noisy mix (policy `clean_noise_share`, the seed's fix for a suite too clean): a seeded draw
of the right size per language, noisy versions that differ from their items and were really asked, the
figures recomputed from the model's own answers, off by default."""

from collections import Counter

import pytest

from engines.demo.dataset import demo_dataset_build
from engines.perturbation import PerturbationSpec, perturbation_set_build
from engines.reasons import ENGLISH
from gate.judges.clean_accuracy import CleanAccuracyCode, noisy_counts
from gate.layers.outputs import model_output_key
from gate.models import ModelOutput
from gate.reporting import gate_report_markdown
from gate.services.gate_runs import gate_run_execute, gate_run_start
from gate.services.report import gate_run_report
from registry.actors import SYSTEM
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_backend
from tests.pages import page_text

pytestmark = pytest.mark.django_db
ONLY_CLEAN = {"required_layers": ["clean_accuracy"], "clean_min_items": 20}


@pytest.fixture
def suite():
    items = demo_dataset_build(seed=0).eval[::4]
    records = [
        {"id": i.id, "input": i.input, "label": i.label, "language": i.language, "tags": list(i.tags)}
        for i in items
    ]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


def clean_layer(candidate, suite, **overrides):
    run = gate_run_start(
        candidate=candidate, suite=suite, actor=SYSTEM, policy_overrides={**ONLY_CLEAN, **overrides}
    )
    return gate_run_execute(gate_run_id=run.pk, worker="w").layers.get(layer="clean_accuracy")


def noisy_versions(suite, *, seed=0, share=0.5, recipe="typos-v1"):
    """The draw as documented, made here with the engine: per language, its share of the items, one
    sample of the recipe each."""
    items = list(suite.items.all())
    counts = noisy_counts(sizes=dict(Counter(i.language for i in items)), share=share)
    chosen = {}
    for language, wanted in counts.items():
        built = perturbation_set_build(
            items=[(i.external_id, i.input, i.language) for i in items if i.language == language],
            spec=PerturbationSpec(recipe=recipe, seed=seed, samples=wanted),
        )
        chosen.update({s.item_id: s for s in reversed(built.samples)})
    return chosen


def test_off_by_default(versions, suite):
    layer = clean_layer(versions[0], suite)
    assert layer.details["noisy"] is None
    assert not any(r["code"].startswith("clean_accuracy.noisy") for r in layer.reasons)


def test_the_seeds_share_draws_15_percent_of_each_language(versions, suite):
    layer = clean_layer(versions[0], suite, clean_noise_share=0.15, run_baseline=False)
    noisy = layer.details["noisy"]
    assert (noisy["recipe"], noisy["items"], noisy["replaced"]) == ("robustness-v1", 80, 12)
    # 80 items: en 32 → 4.8, zh 32 → 4.8, mixed 16 → 2.4; 12 in all, the two over 4 + 4 + 2 to en and zh.
    assert Counter(i.language for i in suite.items.all()) == {"en": 32, "zh": 32, "mixed": 16}
    assert noisy["replaced_by_language"] == {"en": 5, "zh": 5, "mixed": 2}
    assert {e["item_id"] for e in noisy["examples"]} == set(
        noisy_versions(suite, share=0.15, recipe="robustness-v1")
    )
    assert noisy["candidate"]["replaced"] == 12 and noisy["baseline"] is None


def test_the_noisy_mix_is_a_seeded_draw_scored_on_real_answers(versions, suite, admin_client, ci_client):
    candidate = versions[0]
    layer = clean_layer(candidate, suite, clean_noise_share=0.5, clean_noise_recipe="typos-v1")
    noisy = layer.details["noisy"]
    items = {i.external_id: i for i in suite.items.all()}
    sizes = Counter(i.language for i in items.values())
    # The right size: half of the 80 items, dealt by language.
    assert noisy["items"] == 80 and noisy["replaced"] == 40 == sum(noisy["replaced_by_language"].values())
    assert (
        noisy["replaced_by_language"]
        == noisy_counts(sizes=dict(sizes), share=0.5)
        == {"en": 16, "mixed": 8, "zh": 16}
    )
    # The noisy versions are the engine's, each differs from its item, and the model was asked them:
    # none was in the output cache the clean pass had just filled.
    chosen = noisy_versions(suite)
    assert [e["item_id"] for e in noisy["examples"]] == [i for i in items if i in chosen]
    assert all(chosen[i].perturbed != items[i].input for i in chosen)
    assert all(e["diff"] and e["type"] == chosen[e["item_id"]].type for e in noisy["examples"])
    side = noisy["candidate"]
    assert (side["computed"], side["cached"]) == (40, 0)
    # The figure, rebuilt from the model's stored answers: clean ones for the other items, the cached
    # answers to the noisy texts for the replaced ones.
    clean_right = {s.item.external_id: s.correct for s in layer.samples.filter(version=candidate)}
    noisy_right = {}
    for item_id, sample in chosen.items():
        row = ModelOutput.objects.get(
            version=candidate, input_hash=model_output_key(version=candidate, text=sample.perturbed)
        )
        noisy_right[item_id] = row.label == items[item_id].label
    mixed = {i: noisy_right.get(i, clean_right[i]) for i in items}
    assert side["correct"] == sum(mixed.values()) and side["accuracy"] == pytest.approx(
        sum(mixed.values()) / 80
    )
    assert side["clean_accuracy"] == pytest.approx(layer.estimate)
    assert side["drop"] == pytest.approx(layer.estimate - side["accuracy"])
    assert side["drop_low"] <= side["drop"] <= side["drop_high"]
    assert side["only_clean_right"] == sum(clean_right[i] and not noisy_right[i] for i in chosen)
    assert side["only_noisy_right"] == sum(noisy_right[i] and not clean_right[i] for i in chosen)
    assert side["only_clean_right"] + side["only_noisy_right"] > 0  # the noise changed some answers
    assert {lang: cell["replaced"] for lang, cell in side["by_language"].items()} == noisy[
        "replaced_by_language"
    ]
    # The same answers for the baseline (the same checkpoint), which the noisy texts reach from its cache.
    assert noisy["baseline"]["correct"] == side["correct"] and noisy["difference"] == 0.0
    # Reported beside the verdict, not judged: the verdict is the clean one's.
    assert layer.verdict == clean_layer(candidate, suite).verdict
    mix_reason = next(r for r in layer.reasons if r["code"] == CleanAccuracyCode.NOISY_MIX)
    assert mix_reason["params"]["replaced"] == 40 and mix_reason["params"]["value"] == side["accuracy"]
    # The same seed draws the same items; another seed others.
    again = clean_layer(candidate, suite, clean_noise_share=0.5, clean_noise_recipe="typos-v1")
    assert again.details["noisy"]["set_hash"] == noisy["set_hash"]
    assert again.details["noisy"]["candidate"]["correct"] == side["correct"]
    other = clean_layer(
        candidate, suite, clean_noise_share=0.5, clean_noise_recipe="typos-v1", clean_noise_seed=1
    )
    other_ids = {e["item_id"] for e in other.details["noisy"]["examples"]}
    assert other_ids != set(chosen) and other_ids == set(noisy_versions(suite, seed=1))
    # In the API, a code with its parameters and the message in the reader's language, and the report.
    run_id = layer.gate_run_id
    body = ci_client.get(f"/api/v1/gate-runs/{run_id}/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    (api_layer,) = body["layers"]
    assert api_layer["details"]["noisy"]["candidate"]["correct"] == side["correct"]
    (api_reason,) = [r for r in api_layer["reasons"] if r["code"] == CleanAccuracyCode.NOISY_MIX]
    assert api_reason["params"]["replaced"] == 40 and "替换为含噪版本（typos-v1）" in api_reason["message"]
    markdown = gate_report_markdown(gate_run_report(run=layer.gate_run), words=ENGLISH)
    assert "noisy.candidate / baseline" in markdown and "replaced by noisy versions (typos-v1)" in markdown
    # On the run page, in English and Chinese.
    url = f"/gate-runs/{layer.gate_run_id}/"
    page = page_text(admin_client.get(url))
    assert "Noisy mix" in page and "typos-v1" in page and "40 of 80 items replaced" in page
    chinese = page_text(admin_client.get(url, HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9"))
    assert "含噪混合" in chinese and "80 条中 40 条替换为含噪版本" in chinese


def test_a_share_too_small_for_the_suite_replaces_nothing(versions, suite):
    layer = clean_layer(versions[0], suite, clean_noise_share=0.001, run_baseline=False)
    noisy = layer.details["noisy"]
    assert noisy["replaced"] == 0 and noisy["candidate"] is None
    assert any(r["code"] == CleanAccuracyCode.NOISY_NONE for r in layer.reasons)


def test_the_backend_answers_the_noisy_texts_as_stored(versions, suite):
    """The cached noisy answers are the backend's own: asked again directly, it says the same."""
    candidate = versions[0]
    clean_layer(candidate, suite, clean_noise_share=0.5, clean_noise_recipe="typos-v1", run_baseline=False)
    chosen = noisy_versions(suite)
    texts = [s.perturbed for s in chosen.values()]
    direct = [p.label for p in model_version_backend(version=candidate).predict(texts)]
    stored = [
        ModelOutput.objects.get(
            version=candidate, input_hash=model_output_key(version=candidate, text=t)
        ).label
        for t in texts
    ]
    assert direct == stored

"""The perturbation engine on the demo eval suite (pure: no DB, no model, offline)."""

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from engines.demo.dataset import demo_dataset_build
from engines.perturbation import (
    RECIPES_UNAVAILABLE,
    PerturbationResourceError,
    PerturbationSpec,
    UnknownRecipeError,
    perturbation_engine_load,
    perturbation_set_build,
)

REPO = Path(__file__).resolve().parents[3]
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
ZH_NUMERALS = "零〇一二三四五六七八九十百千万亿两"


@pytest.fixture(scope="module")
def suite() -> list[tuple[str, str, str]]:
    """The 320 demo eval items (en, zh and mixed; plain, long, OCR-noisy), textattack loaded once."""
    perturbation_engine_load()
    return [(item.id, item.input, item.language) for item in demo_dataset_build(seed=0).eval]


@pytest.fixture(scope="module")
def typos(suite):
    return perturbation_set_build(items=suite, spec=PerturbationSpec(recipe="typos-v1", seed=0))


def _numbers(text: str) -> tuple[list[str], list[str]]:
    return re.findall(r"\d+", text), [c for c in text if c in ZH_NUMERALS]


def test_same_seed_same_set_other_seed_different(suite, typos):
    again = perturbation_set_build(
        items=list(reversed(suite)), spec=PerturbationSpec(recipe="typos-v1", seed=0)
    )
    assert again.samples == typos.samples  # the items' order does not matter either
    assert again.content_hash == typos.content_hash and len(typos.content_hash) == 64

    other = perturbation_set_build(items=suite, spec=PerturbationSpec(recipe="typos-v1", seed=1))
    assert other.content_hash != typos.content_hash
    assert len(set(other.samples) & set(typos.samples)) < 50


def test_samples_spread_evenly_over_items_and_types(suite, typos):
    assert len(typos.samples) == 1000 and typos.shortfall == () and typos.notes == ()
    per_item = Counter(s.item_id for s in typos.samples)
    assert set(per_item.values()) == {3, 4} and len(per_item) == len(suite)  # 1000 / 320 = 3.125
    for language, types in (
        ("en", {"char_swap", "char_delete", "char_insert", "char_substitute", "qwerty"}),
        ("zh", {"zh_homophone", "zh_morphonym"}),
    ):
        counts = Counter(s.type for s in typos.samples if s.language == language)
        assert set(counts) == types
        assert max(counts.values()) - min(counts.values()) <= 1, counts


def test_shares_set_by_the_policy(suite):
    spec = PerturbationSpec(recipe="typos-v1", seed=0, samples=400, shares={"char_swap": 3, "qwerty": 1})
    pset = perturbation_set_build(items=suite, spec=spec)
    counts = Counter(s.type for s in pset.samples if s.language == "en")
    assert set(counts) == {"char_swap", "qwerty"}
    assert abs(counts["char_swap"] - 3 * counts["qwerty"]) <= 4
    # No Chinese type has a share: Chinese items sit out and the others take their turns.
    assert len(pset.samples) == 400 and not {s.language for s in pset.samples} & {"zh"}
    assert any("134 zh items not perturbed" in note for note in pset.notes)

    with pytest.raises(ValueError, match="no_such_type"):
        perturbation_set_build(
            items=suite, spec=PerturbationSpec(recipe="typos-v1", seed=0, shares={"no_such_type": 1})
        )


def test_chinese_text_gets_chinese_types_only(typos):
    zh = [s for s in typos.samples if s.language == "zh"]
    assert zh and all(s.type.startswith("zh_") for s in zh)
    for s in zh:
        # Character swaps: same length, every changed character a CJK one replaced by a CJK one.
        assert len(s.perturbed) == len(s.original)
        changed = [(a, b) for a, b in zip(s.original, s.perturbed, strict=True) if a != b]
        assert changed and all(CJK.match(a) and CJK.match(b) for a, b in changed)

    mixed = [s for s in typos.samples if s.language == "mixed"]
    assert {s.type for s in mixed} >= {"char_swap", "zh_homophone"}
    for s in mixed:
        if s.type.startswith("zh_"):  # the English part stays as it was
            assert re.findall(r"[A-Za-z]+", s.perturbed) == re.findall(r"[A-Za-z]+", s.original)
        else:  # English typo rules leave the Chinese part alone
            assert CJK.findall(s.perturbed) == CJK.findall(s.original)


def test_numbers_untouched_unless_the_policy_says_they_do_not_matter(suite):
    kept = perturbation_set_build(items=suite, spec=PerturbationSpec(recipe="robustness-v1", seed=0))
    assert "number_change" not in {s.type for s in kept.samples}
    assert any("numbers matter" in note for note in kept.notes)
    assert all(_numbers(s.perturbed) == _numbers(s.original) for s in kept.samples)

    spec = PerturbationSpec(recipe="robustness-v1", seed=0, numbers_matter=False)
    free = perturbation_set_build(items=suite, spec=spec)
    changed = [s for s in free.samples if s.type == "number_change"]
    assert len(changed) > 100 and {s.language for s in changed} == {"en", "zh", "mixed"}
    assert all(_numbers(s.perturbed)[0] != _numbers(s.original)[0] for s in changed)
    assert all(
        _numbers(s.perturbed) == _numbers(s.original) for s in free.samples if s.type != "number_change"
    )


def test_every_sample_changes_its_item_once(suite):
    for recipe in ("robustness-v1", "imperceptible-v1"):
        pset = perturbation_set_build(items=suite, spec=PerturbationSpec(recipe=recipe, seed=3, samples=400))
        assert len(pset.samples) == 400
        assert all(s.perturbed != s.original and "→" in s.diff for s in pset.samples)
        assert len({(s.item_id, s.perturbed) for s in pset.samples}) == 400
    hidden = next(s for s in pset.samples if s.type == "invisible_chars")
    assert "⟨U+200" in hidden.diff  # invisible characters are shown in the diff


def test_shortfall_when_the_items_run_out():
    items = [("a", "The Supplier does not accept returns.", "en"), ("b", "保密义务长期有效。", "zh")]
    spec = PerturbationSpec(recipe="robustness-v1", seed=0, samples=50, shares={"contraction": 1})
    pset = perturbation_set_build(items=items, spec=spec)
    assert [s.perturbed for s in pset.samples] == ["The Supplier doesn't accept returns."]
    assert pset.shortfall and "made 1 of 50" in pset.shortfall[0]


def test_unknown_recipe_is_named():
    with pytest.raises(UnknownRecipeError, match="no-such-recipe"):
        perturbation_set_build(items=[], spec=PerturbationSpec(recipe="no-such-recipe", seed=0))


@pytest.mark.parametrize("recipe", sorted(RECIPES_UNAVAILABLE))
def test_download_recipes_name_the_missing_resource(recipe):
    with pytest.raises(PerturbationResourceError) as raised:
        perturbation_set_build(items=[], spec=PerturbationSpec(recipe=recipe, seed=0))
    assert raised.value.recipe == recipe and raised.value.resource == RECIPES_UNAVAILABLE[recipe]
    assert "cannot run offline" in str(raised.value)
    if recipe == "textfooler":
        assert "Universal Sentence Encoder" in raised.value.resource


def test_works_with_an_empty_home_and_no_nltk_data(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    env.update(HOME=str(tmp_path), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    code = (
        "import engines.perturbation as p\n"
        "s = p.perturbation_set_build(items=[('a', 'The Vendor shall deliver the goods promptly.', 'en')],\n"
        "    spec=p.PerturbationSpec(recipe='typos-v1', seed=0, samples=2))\n"
        "print(len(s.samples), s.samples[0].perturbed)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("2 ")

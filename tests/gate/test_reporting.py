"""The Markdown report reads as a review document: tables and short text, no raw JSON."""

from engines.reasons import Term, Words, reason, sentences
from gate.judges.clean_accuracy import CleanAccuracyCode
from gate.judges.verdict import VerdictCode
from gate.reporting import (
    MAX_ROWS,
    Attribution,
    AttributionLevel,
    GateReport,
    LayerCost,
    LayerReport,
    PolicyRef,
    SuiteRef,
    Table,
    facts_markdown,
    gate_report_markdown,
)


def test_plain_values_breakdowns_and_records_become_tables():
    estimates = {
        "accuracy": 0.71625,
        "tags": ["plain", "ocr_noise"],
        "candidate": {
            "version": "fam:v4",
            "n": 300,
            "by_tag": {
                "plain": {"n": 100, "correct": 90, "rate": 0.9},
                "ocr_noise": {"n": 50, "correct": 20},
            },
        },
        "worst_items": [{"item_id": "a", "failed": 3}, {"item_id": "b", "failed": 2}],
    }
    lines = facts_markdown("Estimates", estimates)
    text = "\n".join(lines)
    assert "```" not in text and "{" not in text
    assert "| accuracy | 0.7163 |" in text and "| tags | plain, ocr_noise |" in text
    assert "| candidate.version | fam:v4 |" in text and "| candidate.n | 300 |" in text

    assert "*candidate.by_tag*" in text
    assert "|  | n | correct | rate |" in text and "| plain | 100 | 90 | 0.9 |" in text
    assert "| ocr_noise | 50 | 20 | – |" in text
    assert "*worst_items*" in text and "| 1 | a | 3 |" in text


def test_candidate_and_baseline_stand_side_by_side():
    text = "\n".join(
        facts_markdown("Estimates", {"candidate": {"n": 10, "rate": 0.5}, "baseline": {"n": 12}, "p": 0.04})
    )
    assert "*candidate / baseline*" in text and "| n | 10 | 12 |" in text and "| rate | 0.5 | – |" in text
    assert "| p | 0.04 |" in text


def test_long_tables_are_cut_and_say_where_the_rest_is():
    breakdown = {f"item-{i}": {"failed": i} for i in range(MAX_ROWS + 5)}
    text = "\n".join(facts_markdown("Estimates", {"by_item": breakdown}))
    assert f"| item-{MAX_ROWS - 1} |" in text and f"| item-{MAX_ROWS} |" not in text
    assert "5 more rows in the JSON report." in text


def test_the_markdown_words_its_reasons_in_the_words_it_is_given():
    below = reason(CleanAccuracyCode.BOUND_BELOW, value=0.72219, bar=0.8)
    layer = LayerReport(
        layer="clean_accuracy",
        title="Clean accuracy",
        required=True,
        verdict="fail",
        metric="accuracy",
        estimate=0.81,
        ci_low=0.722,
        ci_high=0.88,
        threshold=0.8,
        reasons=[below, "a sentence stored before codes"],
        inputs={},
        method="m",
        estimates={},
        cost=LayerCost(wall_seconds=1.0, device="cpu"),
        attribution=Attribution(
            phenomenon=AttributionLevel(summary=sentences([below])),
            data=AttributionLevel(summary="d", tables=[Table(title=below, columns=["a"], rows=[[1]])]),
            system=AttributionLevel(summary="s"),
        ),
    )
    report = GateReport(
        gate_run=1,
        candidate="fam:v2",
        baseline=None,
        suite=SuiteRef(name="s", version=1, hash="h"),
        policy=PolicyRef(name="default", config={}),
        experiment=None,
        status="succeeded",
        verdict="fail",
        verdict_reasons=[
            reason(VerdictCode.LAYER_VERDICT, layer=Term("clean_accuracy"), verdict=Term("fail"))
        ],
        created_at="2026-12-02T00:00:00",
        finished_at=None,
        layers=[layer],
        missing_layers=[],
    )
    shouting = Words(
        translate=lambda text: text.replace("lower bound", "LOWER BOUND"), term=lambda c: f"<{c}>"
    )
    lines = gate_report_markdown(report, words=shouting).splitlines()
    assert "- <clean_accuracy>: <fail>" in lines
    assert "- LOWER BOUND 0.722 < bar 0.800" in lines and "- a sentence stored before codes" in lines
    assert (
        "**Phenomenon**: LOWER BOUND 0.722 < bar 0.800" in lines
        and "*LOWER BOUND 0.722 < bar 0.800*" in lines
    )

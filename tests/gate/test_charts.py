"""What the charts draw: bars per category for each side with its interval and the bar."""

from gate.charts import Cell, bars_chart


def test_bars_follow_the_first_sides_categories_and_leave_gaps_for_missing_ones():
    chart = bars_chart(
        id="c",
        title="t",
        sides={
            "fam:v4": {"plain": Cell(rate=0.9, ci_low=0.8, ci_high=0.95)},
            "fam:v3": {
                "ocr": Cell(rate=0.5, ci_low=0.4, ci_high=0.6),
                "plain": Cell(rate=0.7, ci_low=0.6, ci_high=0.8),
            },
        },
        threshold=0.85,
    )
    assert chart.categories == ["plain", "ocr"]
    candidate, baseline = chart.bars
    assert (candidate.values, candidate.low, candidate.high) == ([0.9, None], [0.8, None], [0.95, None])
    assert (baseline.values, baseline.low) == ([0.7, 0.5], [0.6, 0.4])
    assert chart.threshold == 0.85 and chart.has_data


def test_a_chart_without_a_value_has_no_data():
    empty = bars_chart(id="c", title="t", sides={"a": {"x": Cell(rate=None, ci_low=None, ci_high=None)}})
    assert not empty.has_data

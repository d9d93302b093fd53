"""The canary page after a time-to-first-token regression rolled the candidate back: the readout of the
analysis that decided, the speed panel and its charts of the window it judged, the share at 0."""

import pytest
from django.urls import reverse
from django.utils import timezone

from canary.services.analysis import experiment_analyze
from gate.services.dashboard import experiment_dashboard
from tests.canary.services.test_analysis import experiment, probe_report, traffic  # noqa: F401 (a fixture)
from tests.evalhub.views.test_canary import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def rolled_back(experiment):  # noqa: F811
    # 27 minutes ago: inside one twelfth (five minutes) of the hour-old window, not on the edge between two.
    traffic(sessions=400, arm="baseline", first_token=200.0, minutes_ago=27)
    traffic(sessions=400, arm="candidate", first_token=600.0, seed=1, minutes_ago=27)
    probe_report(experiment)
    assert experiment_analyze(experiment=experiment).action == "rolled_back"
    experiment.refresh_from_db()
    return experiment


def test_the_readout_keeps_the_analysis_that_rolled_back_change_and_interval_first(rolled_back):
    dashboard = experiment_dashboard(experiment=rolled_back, now=timezone.now())
    assert dashboard.readout.analysis.action == "rolled_back"
    rows = {row.metric: row for row in dashboard.readout.rows}
    first = rows["first_token_p50"]
    # A ratio reads as its relative change: 3× is +200 %, the bar 1.5 is +50 %.
    assert first.verdict == "fail" and first.kind == "relative"
    assert first.change == pytest.approx(2.0, abs=0.1) and first.bar == pytest.approx(0.5)
    assert first.ci_low < first.change < first.ci_high and first.ci_low > first.bar
    assert first.plot.bar < first.plot.low < first.plot.change < first.plot.high <= 100
    errors = rows["error_rate"]
    assert errors.kind == "points" and errors.ci_low <= 0 <= errors.ci_high and errors.verdict == "pass"
    assert rows["tokens_per_second"].higher_is_worse is False


def test_the_speed_panel_and_charts_read_the_window_that_decided(rolled_back):
    dashboard = experiment_dashboard(experiment=rolled_back, now=timezone.now())
    # 400 sessions an arm, a fifth of them with a second question: every answer streamed.
    assert dashboard.speed.streamed and all(n >= 400 for n in dashboard.speed.answers.values())
    rows = {row.metric: row.result for row in dashboard.speed.rows}
    assert rows["first_token_p50"].difference == pytest.approx(3.0, rel=0.05)
    assert rows["first_token_p50"].verdict == "fail" and rows["tokens_per_second"].verdict == "pass"
    charts = {chart.id: chart for chart in dashboard.charts}
    ratio = charts["speed-ratio"]
    assert ratio.threshold == 1.5
    shown = [value for _, value in ratio.lines[0].points if value is not None]
    assert shown and all(2.5 < value < 3.5 for value in shown)
    assert {line.name for line in charts["speed-per-arm"].lines} == {
        "candidate p50",
        "candidate p95",
        "baseline p50",
        "baseline p95",
    }
    assert charts["traffic-share"].lines[0].points[-1][1] == 0


@pytest.mark.parametrize(("language", "words"), [("en", "Guardrails readout"), ("zh-hans", "护栏读数")])
def test_the_page_shows_both_in_each_language(rolled_back, language, words):
    url = reverse("canary:experiment-detail", args=[rolled_back.name])
    page = login("viewer").get(url, HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert words in page
    assert 'id="readout-rows"' in page and 'data-metric="first_token_p50"' in page
    assert 'id="speed-rows"' in page and "chart-speed-ratio" in page


def test_the_speed_readout_is_computed_once_per_state_of_the_answers_and_language(rolled_back, monkeypatch):
    from django.utils import translation

    from gate.services import speed_panel

    calls = []
    compare = speed_panel.quantile_ratio_compare
    monkeypatch.setattr(speed_panel, "quantile_ratio_compare", lambda **kw: calls.append(1) or compare(**kw))
    first = experiment_dashboard(experiment=rolled_back, now=timezone.now())
    computed = len(calls)
    assert computed > 5  # the panel's rows and a ratio per slice
    again = experiment_dashboard(experiment=rolled_back, now=timezone.now())
    assert len(calls) == computed and again.speed == first.speed  # the page's refresh: no bootstrap
    with translation.override("zh-hans"):
        chinese = experiment_dashboard(experiment=rolled_back, now=timezone.now())
    assert len(calls) == 2 * computed  # the charts' words are the reader's
    assert {c.title for c in chinese.charts} != {c.title for c in first.charts}
    traffic(sessions=1, arm="candidate", first_token=600.0, seed=7, minutes_ago=20)  # a new answer
    experiment_dashboard(experiment=rolled_back, now=timezone.now())
    assert len(calls) == 3 * computed

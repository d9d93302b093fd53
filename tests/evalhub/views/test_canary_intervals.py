"""Every interval on the canary page is the one its label names: the page is rendered for a seeded
experiment and each displayed interval is recomputed from the counts the page displays. Observed
rates (Wilson) and the observed difference (Newcombe) against statsmodels; the rates and the
difference corrected for the detector's errors (Rogan–Gladen, delta method) against the engine's
own functions (statsmodels has none), from the error rates and judged counts the page shows, with
the corrected point estimate also worked out by hand. Any mismatch beyond the display's rounding
fails."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from canary.models import TurnEvent
from canary.services.plans import experiment_unblind
from engines.follow_up.classifier import VERSION as DETECTOR_VERSION
from engines.follow_up.correction import ErrorRates, corrected_difference, rate_correct
from gate.models import GatePolicy
from registry.services.tokens import user_role_grant
from tests.evalhub.views.test_canary import experiment, traffic, unblinder  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db
CONFIDENCE, ROUNDING = 0.95, 0.0005 + 1e-9
NUMBER = r"(-?\d+\.\d+)"
INTERVAL = re.compile(rf"{NUMBER} \({NUMBER}–{NUMBER}")


def close(shown: tuple[float, ...], computed: tuple[float, ...]) -> bool:
    return all(abs(a - b) <= ROUNDING for a, b in zip(shown, computed, strict=True))


def cell(html: str, arm: str, name: str) -> str:
    row = re.search(rf'<tr data-arm="{arm}">(.*?)</tr>', html, re.S).group(1)
    return re.search(rf'<td class="{name}">(.*?)</td>', row, re.S).group(1)


def shown_interval(text: str) -> tuple[float, float, float]:
    return tuple(float(v) for v in INTERVAL.search(text).groups())


@pytest.fixture
def page(experiment, traffic):  # noqa: F811
    """The dashboard of the seeded experiment, unblinded (before its horizon the page shows no rates),
    with the detector's language stored on most judged turns (as the trained detector stores it) so
    that the correction has something to correct."""
    experiment_unblind(experiment=experiment, actor=unblinder(), reason="recompute the page's intervals")

    def render() -> str:
        user = get_user_model().objects.create_user(username=f"rm-{GatePolicy.objects.count()}")
        user_role_grant(user=user, role="release_manager")
        client = Client()
        client.force_login(user)
        response = client.get("/canary/exp/")
        assert response.status_code == 200
        return response.content.decode()

    judged = TurnEvent.objects.filter(role="user", follow_up_kind__isnull=False)
    judged.exclude(session_id__endswith="7").update(
        follow_up_language="en", follow_up_detector=DETECTOR_VERSION
    )
    return render


def observed_intervals_match(html: str) -> dict[str, tuple[int, int]]:
    counts = {}
    for arm in ("candidate", "baseline"):
        answered, follow_ups = int(cell(html, arm, "answered")), int(cell(html, arm, "follow-ups"))
        counts[arm] = (answered, follow_ups)
        rate, low, high = shown_interval(cell(html, arm, "wilson"))
        expected_low, expected_high = proportion_confint(
            follow_ups, answered, alpha=1 - CONFIDENCE, method="wilson"
        )
        assert close((rate, low, high), (follow_ups / answered, expected_low, expected_high)), arm
    (a_c, x_c), (a_b, x_b) = counts["candidate"], counts["baseline"]
    paragraph = re.search(r'<p id="follow-up-difference">(.*?)</p>', html, re.S).group(1)
    observed = re.search(rf"{NUMBER} \({NUMBER}–{NUMBER}, Newcombe\)", paragraph)
    low, high = confint_proportions_2indep(
        x_c, a_c, x_b, a_b, method="newcomb", compare="diff", alpha=1 - CONFIDENCE
    )
    assert close(tuple(float(v) for v in observed.groups()), (x_c / a_c - x_b / a_b, low, high))
    return counts


def test_observed_and_corrected_intervals_are_recomputed_from_the_page(page):
    html = page()
    counts = observed_intervals_match(html)
    table = re.search(r'<table id="follow-up-correction">(.*?)</table>', html, re.S).group(1)
    rows = re.findall(r'<tr data-language="(\w*)">(.*?)</tr>', table, re.S)
    errors, judged, uncorrected = {}, {"candidate": {}, "baseline": {}}, {}
    for language, row in rows:
        columns = re.findall(r'<td class="(judged|uncorrected)">(.*?)</td>', row, re.S)
        if not language:  # follow-ups without a language, counted as observed
            uncorrected = {
                arm: int(value) for arm, (_, value) in zip(("candidate", "baseline"), columns, strict=True)
            }
            continue
        tp, p, tn, n = (
            int(re.search(rf'<span class="{k}">(\d+)</span>', row).group(1)) for k in ("tp", "p", "tn", "n")
        )
        errors[language] = ErrorRates(positives=p, true_positives=tp, negatives=n, true_negatives=tn)
        for arm, (_, value) in zip(("candidate", "baseline"), columns, strict=True):
            n_judged, detected = (int(v) for v in value.split(" / "))
            judged[arm][language] = (n_judged, detected)
    assert errors and judged["candidate"]["en"][0] > 0 and uncorrected["candidate"] > 0
    estimates = {}
    for arm in ("candidate", "baseline"):
        answered = counts[arm][0]
        engine = rate_correct(
            answered=answered,
            judged=judged[arm],
            errors=errors,
            confidence=CONFIDENCE,
            uncorrected=uncorrected[arm],
        )
        shown = shown_interval(cell(html, arm, "corrected"))
        assert close(shown, (engine.estimate, engine.ci_low, engine.ci_high)), arm
        # The point estimate by hand: Rogan–Gladen per language, weighted by the judged turns.
        rates = errors["en"]
        se, sp = rates.true_positives / rates.positives, rates.true_negatives / rates.negatives
        n_judged, detected = judged[arm]["en"]
        pi = min(1.0, max(0.0, (detected / n_judged + sp - 1) / (se + sp - 1)))
        assert abs(engine.estimate - (n_judged * pi + uncorrected[arm]) / answered) < 1e-12
        estimates[arm] = engine.estimate
    difference = corrected_difference(
        candidate=(counts["candidate"][0], judged["candidate"], uncorrected["candidate"]),
        baseline=(counts["baseline"][0], judged["baseline"], uncorrected["baseline"]),
        errors=errors,
        confidence=CONFIDENCE,
    )
    paragraph = re.search(r'<span class="corrected-difference">(.*?)</span>', html, re.S).group(1)
    assert "Rogan–Gladen, delta method" in paragraph
    assert close(shown_interval(paragraph), (difference.estimate, difference.ci_low, difference.ci_high))
    assert abs(difference.estimate - (estimates["candidate"] - estimates["baseline"])) < 1e-12


def test_without_the_correction_no_corrected_interval_is_shown_and_the_newcombe_one_is(page):
    GatePolicy.objects.create(name="fam", config={"follow_up_correction": "none"})
    html = page()
    observed_intervals_match(html)
    assert 'class="corrected' not in html and 'id="follow-up-correction"' not in html
    assert "Rogan–Gladen" not in re.search(r'<section id="follow-up-panel".*?</section>', html, re.S).group(0)

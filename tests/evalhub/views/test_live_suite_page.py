"""The review page's expected answer (a clause type of the family's suite or a reference text) and its
form that builds a suite version from the reviewed questions (release managers only), in English and
Chinese."""

from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from canary.models import FollowUpReview
from canary.services.experiments import experiment_create, experiment_start
from registry.actors import SYSTEM
from registry.models import EvalSuite
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.canary.traffic import chat_session, experiment_backdate
from tests.lifecycle import incumbent_register
from tests.pages import page_text

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
URL = "/review/exp/"


def signed_in(role: str) -> Client:
    user = get_user_model().objects.create_user(username=f"u-{role}")
    user_role_grant(user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def turn():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    records = [
        {"id": "b1", "input": "What does the payment clause say?", "label": "payment"},
        {"id": "b2", "input": "Can we end it early?", "label": "termination"},
    ]
    eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)
    experiment = experiment_backdate(
        experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1)
    )
    return chat_session(experiment, session="s", turns=["Ms Li asks: who pays?", "[payment] Buyer.", "Ok."])[
        2
    ]


def test_an_annotator_gives_an_expected_answer_and_a_release_manager_builds_the_suite(turn):
    annotator = signed_in("annotator")
    page = annotator.get(URL).content.decode()
    assert 'id="expected-answer"' in page and '<option value="termination">' in page
    assert 'id="suite-from-reviews"' not in page  # not an annotator's to build
    wrong = annotator.post(
        URL, {"turn_id": turn.pk, "label": "new", "expected_label": "penalty"}, follow=True
    )
    assert "Unknown expected label 'penalty'" in unescape(page_text(wrong))
    assert not FollowUpReview.objects.exists()
    annotator.post(URL, {"turn_id": turn.pk, "label": "new", "expected_label": "payment"})
    assert FollowUpReview.objects.get().expected_label == "payment"
    assert annotator.post(f"{URL}suite/", {"suite": "fam"}).status_code == 403

    manager = signed_in("release_manager")
    form = manager.get(URL).content.decode()
    assert 'id="suite-from-reviews"' in form and 'name="suite" value="fam"' in form
    built = manager.post(f"{URL}suite/", {"suite": "fam", "per_stratum": "5", "seed": "0"}, follow=True)
    assert "Built fam-live@1: 3 items, 1 live questions added, 0 kept." in unescape(page_text(built))
    assert EvalSuite.objects.get(name="fam-live").items.filter(input="Ms [NAME] asks: who pays?").exists()
    again = manager.post(f"{URL}suite/", {"suite": "fam", "per_stratum": "x"}, follow=True)
    assert "per_stratum and seed must be whole numbers." in unescape(page_text(again))
    chinese = manager.post(f"{URL}suite/", {"suite": "fam"}, follow=True, HTTP_ACCEPT_LANGUAGE="zh-hans")
    text = unescape(page_text(chinese))
    assert "没有可加入 “fam-live” 的新的已审核线上问题" in text and "将线上问题加入评测集" in text

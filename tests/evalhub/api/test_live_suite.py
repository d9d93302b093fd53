"""Live questions into a suite over the API and the command line: the expected answer with a label, the
build (release managers only), and bad input in the one error shape."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from canary.services.experiments import experiment_create, experiment_start
from registry.actors import SYSTEM
from registry.models import EvalSuite
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import model_version_register
from tests.canary.traffic import chat_session, experiment_backdate
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
REVIEWS = "/api/v1/canary/experiments/exp/reviews/"
BUILD = "/api/v1/eval-suites/fam/from-reviews/"


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    records = [
        {"id": "b1", "input": "What does the payment clause say?", "label": "payment", "language": "en"}
    ]
    eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)
    return experiment_backdate(experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1))


def test_label_with_an_expected_answer_then_build_a_suite(experiment, make_client):
    chat_session(
        experiment, session="s", turns=["Call 555-123-4567: who pays?", "[payment] Buyer.", "Thanks."]
    )
    annotator = make_client("annotator")
    turn = annotator.get(f"{REVIEWS}next/").json()["turn"]
    bad = annotator.post(
        REVIEWS, {"turn_id": turn["turn_id"], "label": "new", "expected_label": "penalty"}, format="json"
    )
    assert bad.status_code == 400 and list(bad.json()["error"]["fields"]) == ["expected_label"]
    assert "payment" in str(bad.json()["error"]["fields"]["expected_label"])
    created = annotator.post(
        REVIEWS, {"turn_id": turn["turn_id"], "label": "new", "expected_label": "payment"}, format="json"
    )
    assert created.status_code == 201
    assert (created.json()["expected_label"], created.json()["expected_reference"]) == ("payment", "")

    assert annotator.post(BUILD, {"experiment": "exp"}, format="json").status_code == 403
    assert make_client("ci").post(BUILD, {"experiment": "exp"}, format="json").status_code == 403
    manager = make_client("release_manager")
    built = manager.post(BUILD, {"experiment": "exp", "per_stratum": 5, "seed": 7}, format="json")
    assert built.status_code == 201, built.json()
    body = built.json()
    assert body["suite"]["ref"] == "fam-live@1" and body["base"] == "fam@1"
    assert (body["added"], body["kept"], body["scrubbed"], body["suite"]["item_count"]) == (1, 0, 1, 2)
    assert body["strata"] == [{"language": "en", "label": "payment", "candidates": 1, "drawn": 1}]
    items = manager.get("/api/v1/eval-suites/fam-live/items/").json()["results"]
    assert items[1]["input"] == "Call [PHONE]: who pays?"
    assert items[1]["metadata"]["provenance"]["experiment"] == "exp"
    again = manager.post(BUILD, {"experiment": "exp"}, format="json")
    assert again.status_code == 400 and again.json()["error"]["code"] == "nothing_new"


def test_bad_build_input_in_the_one_error_shape(experiment, make_client):
    manager = make_client("release_manager")
    for body, field, code in (
        ({"experiment": "exp", "extra": 1}, "extra", 400),
        ({"experiment": "exp", "per_stratum": 0}, "per_stratum", 400),
        ({"experiment": "exp", "name": "Not A Slug"}, "name", 400),
        ({"experiment": "exp", "name": "fam"}, "name", 400),
        ({}, "experiment", 400),
        ({"experiment": "exp", "family": "fam"}, "family", 400),
        ({"experiment": "nope"}, "experiment", 404),
    ):
        answer = manager.post(BUILD, body, format="json")
        assert answer.status_code == code and field in answer.json()["error"]["fields"], (body, answer.json())
    missing = manager.post("/api/v1/eval-suites/nope/from-reviews/", {"experiment": "exp"}, format="json")
    assert missing.status_code == 404 and list(missing.json()["error"]["fields"]) == ["suite"]
    assert not EvalSuite.objects.exclude(name="fam").exists()


def test_the_command(experiment, make_client):
    chat_session(experiment, session="s", turns=["第一个问题：谁付款？", "[payment] 买方。", "谢谢。"])
    annotator = make_client("annotator")
    turn = annotator.get(f"{REVIEWS}next/").json()["turn"]
    annotator.post(
        REVIEWS,
        {"turn_id": turn["turn_id"], "label": "new", "expected_reference": "买方付款。"},
        format="json",
    )
    out = StringIO()
    call_command("suite_from_reviews", "--suite", "fam", "--experiment", "exp", "--seed", "1", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("built fam-live@1 from fam@1: 2 items, 1 live added, 0 kept, 0 scrubbed;")
    assert lines[1] == "  zh (reference only): 1 of 1"
    with pytest.raises(CommandError, match="No new reviewed live question"):
        call_command("suite_from_reviews", "--suite", "fam", "--family", "fam", stdout=StringIO())

"""The review queue over the API: a turn to label, the label, the detector's live agreement and the
JSONL export; bad input in the one error shape."""

import json
from datetime import timedelta

import pytest

from canary.services.experiments import experiment_create, experiment_start
from registry.actors import SYSTEM
from registry.services.versions import model_version_register
from tests.canary.traffic import chat_session, experiment_backdate
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
TURNS = ["这是什么条款：'买方应在30日内付款。'？", "[payment] 这是付款条款。", "还是没懂，啥意思？"]
URL = "/api/v1/canary/experiments/exp/reviews/"


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    experiment = experiment_backdate(
        experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1)
    )
    chat_session(experiment, session="s", turns=TURNS, kind="new")
    return experiment


def test_label_a_turn_then_read_the_agreement_and_export(experiment, make_client):
    annotator = make_client("annotator")
    turn = annotator.get(f"{URL}next/?language=zh").json()["turn"]
    assert turn == {
        "turn_id": turn["turn_id"],
        "language": "zh",
        "previous_question": TURNS[0],
        "previous_answer": TURNS[1],
        "next_turn": TURNS[2],
        "gap_seconds": 20.0,
    }
    assert annotator.get(f"{URL}next/?language=en").json() == {"turn": None}
    created = annotator.post(URL, {"turn_id": turn["turn_id"], "label": "follow_up"}, format="json")
    assert created.status_code == 201
    assert created.json()["label"] == "follow_up" and created.json()["reviewer"] == annotator.user.username
    assert annotator.get(f"{URL}next/").json() == {"turn": None}  # labelled: no longer offered

    both = make_client("viewer").get(URL).json()
    live = both["detector"]
    assert both["reviewers"]["turns"] == 0 and both["reviewers"]["kappa"] is None
    assert (live["labels"], live["agreeing"], live["agreement"], live["status"]) == (
        1,
        0,
        0.0,
        "too_few_labels",
    )
    assert live["confusion"] == {"follow_up": {"new": 1}} and live["min_labels"] == 50

    export = annotator.get(f"{URL}export/")
    assert export.status_code == 200 and export["Content-Type"] == "application/x-ndjson"
    [row] = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    assert row == {
        "id": "exp-s-2",
        "language": "zh",
        "previous_question": TURNS[0],
        "previous_answer": TURNS[1],
        "next_turn": TURNS[2],
        "gap_seconds": 20.0,
        "label": "follow_up",
    }


def test_bad_input_in_the_one_error_shape(experiment, make_client):
    annotator = make_client("annotator")
    bad = annotator.post(URL, {"turn_id": 1, "label": "maybe", "extra": 1}, format="json")
    assert bad.status_code == 400 and set(bad.json()["error"]["fields"]) == {"label", "extra"}
    missing = annotator.post(URL, {"turn_id": 10**12, "label": "new"}, format="json")
    assert missing.status_code == 404 and list(missing.json()["error"]["fields"]) == ["turn_id"]
    language = annotator.get(f"{URL}next/?language=fr")
    assert language.status_code == 400 and list(language.json()["error"]["fields"]) == ["language"]
    flag = annotator.get(f"{URL}next/?second_opinion=yes")
    assert flag.status_code == 400 and list(flag.json()["error"]["fields"]) == ["second_opinion"]
    unknown = annotator.get("/api/v1/canary/experiments/nope/reviews/next/")
    assert unknown.status_code == 404

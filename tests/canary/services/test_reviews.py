"""The follow-up review queue: which turns it offers, labels (audited, one per reviewer and turn), who
may review, the confusion it feeds layer 2, and the export in the labelled set's format."""

import json
import random
from collections import Counter
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from canary.models import FollowUpReview, TurnEvent
from canary.selectors.reviews import follow_up_review_confusion, follow_up_review_pairs
from canary.services.experiments import experiment_create, experiment_start
from canary.services.reviews import (
    follow_up_review_next,
    follow_up_review_record,
    follow_up_reviews_export,
    text_language,
)
from engines.follow_up.detector import follow_up_set_load
from registry.actors import SYSTEM
from registry.errors import ApplicationError, NotFoundError
from registry.models import AuditLog
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.canary.traffic import chat_session, experiment_backdate
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
EN = [
    "Which clause is this: 'Payment within 30 days.'?",
    "[payment] It sets when invoices are due.",
    "And if late?",
]
ZH = ["这是什么条款：'买方应在30日内付款。'？", "[payment] 这是付款条款。", "那如果逾期付款呢？"]


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    return experiment_backdate(experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1))


def user_with(role: str | None, name: str):
    user = get_user_model().objects.create_user(username=name)
    if role:
        user_role_grant(user=user, role=role)
    return user


@pytest.fixture
def annotator():
    return user_with("annotator", "ann")


def test_the_queue_offers_each_reviewable_turn_once_then_none(experiment, annotator):
    good = [chat_session(experiment, session=f"s{i}", turns=EN)[2] for i in range(5)]
    good.append(chat_session(experiment, session="fallback", turns=EN, answer_error="timeout")[2])
    # The baseline answered for the failed candidate: the user got an answer, so it is reviewable.
    TurnEvent.objects.filter(session_id="fallback", role="assistant").update(fallback=True)
    chat_session(experiment, session="failed", turns=EN, answer_error="timeout")  # a retry, not judged
    chat_session(experiment, session="probe", turns=EN, source="probe")
    chat_session(experiment, session="unjudged", turns=EN, kind=None)
    chat_session(experiment, session="short", turns=EN[:1])  # a first question only
    chat_session(experiment, session="blank", turns=[EN[0], "", EN[2]])  # nothing to read in the answer
    rng = random.Random(0)
    seen = []
    while (item := follow_up_review_next(experiment=experiment, actor=annotator, rng=rng)) is not None:
        seen.append(item.turn_id)
        follow_up_review_record(
            experiment=experiment, turn_id=item.turn_id, label="follow_up", actor=annotator
        )
    assert sorted(seen) == sorted(t.pk for t in good)
    first = FollowUpReview.objects.get(turn=good[0])
    assert (first.reviewer, first.reviewer_name, first.experiment) == (annotator, "ann", experiment)


def test_the_pick_is_uniform_among_the_offered_turns(experiment, annotator):
    """Sessions stored one after another (question, answer, then three follow-ups each answered): the
    first reviewable turn of a session comes after three ids that are not reviewable, the others
    after one, so "the first such turn after a random id" would offer it 3/7 of the time. The pick
    is uniform: each of the 90 turns about 1/90 of 900 picks (chi-square), the sessions' first
    reviewable turns a third of them."""
    from scipy.stats import chisquare

    turns = [EN[0], EN[1], EN[2], EN[1], EN[2], EN[1], EN[2]]
    firsts = set()
    for s in range(30):
        made = chat_session(experiment, session=f"s{s}", turns=turns)
        firsts.add(made[2].pk)
    rng = random.Random(5)
    picks = [
        follow_up_review_next(experiment=experiment, actor=annotator, rng=rng).turn_id for _ in range(1800)
    ]
    counts = Counter(picks)
    assert len(counts) == 90
    assert chisquare([counts[pk] for pk in sorted(counts)]).pvalue > 0.001
    share = sum(counts[pk] for pk in firsts) / len(picks)
    assert abs(share - 1 / 3) < 0.04, share


def test_an_item_is_what_the_reviewer_must_read(experiment, annotator):
    *_, turn = chat_session(experiment, session="s", turns=EN)
    item = follow_up_review_next(experiment=experiment, actor=annotator)
    assert (item.turn_id, item.event_id, item.language) == (turn.pk, "s-2", "en")
    assert (item.previous_question, item.previous_answer, item.next_turn) == tuple(EN)
    assert item.gap_seconds == 20.0


def test_languages(experiment, annotator):
    zh = chat_session(experiment, session="zh", turns=ZH)[2]
    chat_session(experiment, session="en", turns=EN)
    for seed in range(5):
        item = follow_up_review_next(
            experiment=experiment, actor=annotator, language="zh", rng=random.Random(seed)
        )
        assert item.turn_id == zh.pk and item.language == "zh"
    with pytest.raises(ApplicationError) as refused:
        follow_up_review_next(experiment=experiment, actor=annotator, language="fr")
    assert list(refused.value.fields) == ["language"]
    assert text_language("这个 force majeure 条款是什么意思") == "zh"
    assert text_language("What does 不可抗力 mean in this clause?") == "en"


def test_labels_are_audited_and_a_reviewer_may_change_theirs(experiment, annotator):
    turn = chat_session(experiment, session="s", turns=EN)[2]
    review = follow_up_review_record(
        experiment=experiment, turn_id=turn.pk, label="deepening", actor=annotator
    )
    [row] = AuditLog.objects.filter(action="follow_up_review.record")
    assert (row.actor, row.before, row.after) == (
        annotator,
        None,
        {"label": "deepening", "experiment": "exp", "event_id": "s-2"},
    )
    assert row.target_id == str(review.pk)
    # The same label again changes nothing; another one is a change with its before.
    follow_up_review_record(experiment=experiment, turn_id=turn.pk, label="deepening", actor=annotator)
    follow_up_review_record(experiment=experiment, turn_id=turn.pk, label="new", actor=annotator)
    rows = AuditLog.objects.filter(action="follow_up_review.record").order_by("pk")
    assert [(r.before, r.after["label"]) for r in rows] == [
        (None, "deepening"),
        ({"label": "deepening"}, "new"),
    ]
    assert FollowUpReview.objects.get().label == "new"


def test_what_is_refused(experiment, annotator):
    turn = chat_session(experiment, session="s", turns=EN)[2]
    probe = chat_session(experiment, session="p", turns=EN, source="probe")[2]
    with pytest.raises(ApplicationError) as refused:
        follow_up_review_record(experiment=experiment, turn_id=turn.pk, label="maybe", actor=annotator)
    assert list(refused.value.fields) == ["label"]
    for turn_id in (probe.pk, turn.pk - 1, 10**12):  # a probe, the assistant's answer, nothing
        with pytest.raises(NotFoundError) as missing:
            follow_up_review_record(experiment=experiment, turn_id=turn_id, label="new", actor=annotator)
        assert list(missing.value.fields) == ["turn_id"]
    for role in ("viewer", "ci", "app", None):
        user = user_with(role, f"u-{role}")
        for call in (
            lambda user=user: follow_up_review_next(experiment=experiment, actor=user),
            lambda user=user: follow_up_review_record(
                experiment=experiment, turn_id=turn.pk, label="new", actor=user
            ),
            lambda user=user: follow_up_reviews_export(experiment=experiment, actor=user),
        ):
            with pytest.raises(ApplicationError) as forbidden:
                call()
            assert forbidden.value.status_code == 403
    release_manager = user_with("release_manager", "rm")
    follow_up_review_record(experiment=experiment, turn_id=turn.pk, label="new", actor=release_manager)
    assert not FollowUpReview.objects.exclude(reviewer=release_manager).exists()


def test_confusion_counts_the_first_label_of_each_turn(experiment, annotator):
    second = user_with("release_manager", "rm")
    turns = [
        chat_session(experiment, session=f"s{i}", turns=EN, kind=kind)[2]
        for i, kind in enumerate(["follow_up", "follow_up", "deepening", "new"])
    ]
    for turn, label in zip(turns, ["follow_up", "new", "deepening", "new"], strict=True):
        follow_up_review_record(experiment=experiment, turn_id=turn.pk, label=label, actor=annotator)
    # A second opinion on the first turn does not count twice.
    opinion = follow_up_review_record(experiment=experiment, turn_id=turns[0].pk, label="new", actor=second)
    assert (opinion.is_first, opinion.detector_kind) == (False, "follow_up")
    assert FollowUpReview.objects.filter(is_first=True).count() == 4
    assert follow_up_review_confusion(experiment=experiment) == {
        "follow_up": {"follow_up": 1},
        "new": {"follow_up": 1, "new": 1},
        "deepening": {"deepening": 1},
    }


def test_the_export_is_a_labelled_set_the_detector_loads(experiment, annotator, tmp_path):
    en = chat_session(experiment, session="en", turns=EN)[2]
    zh = chat_session(experiment, session="zh", turns=ZH, kind="new")[2]
    chat_session(experiment, session="open", turns=EN)  # not labelled: not exported
    follow_up_review_record(experiment=experiment, turn_id=en.pk, label="follow_up", actor=annotator)
    follow_up_review_record(experiment=experiment, turn_id=zh.pk, label="deepening", actor=annotator)
    rows = list(follow_up_reviews_export(experiment=experiment, actor=annotator))
    assert rows == [
        {
            "id": "exp-en-2",
            "language": "en",
            "previous_question": EN[0],
            "previous_answer": EN[1],
            "next_turn": EN[2],
            "gap_seconds": 20.0,
            "label": "follow_up",
        },
        {
            "id": "exp-zh-2",
            "language": "zh",
            "previous_question": ZH[0],
            "previous_answer": ZH[1],
            "next_turn": ZH[2],
            "gap_seconds": 20.0,
            "label": "deepening",
        },
    ]
    # Rows join the set's file with the split their context goes to (the set is split by context).
    joined = [{**row, "split": "test"} for row in rows]
    path = tmp_path / "reviews.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in joined), encoding="utf-8")
    assert follow_up_set_load(path) == joined


def test_second_opinions(experiment, annotator):
    second = user_with("release_manager", "rm")
    third = user_with("annotator", "ann3")
    first_turn = chat_session(experiment, session="a", turns=EN)[2]
    other_turn = chat_session(experiment, session="b", turns=EN)[2]
    follow_up_review_record(experiment=experiment, turn_id=first_turn.pk, label="follow_up", actor=annotator)

    def pick(actor, **kwargs):
        item = follow_up_review_next(experiment=experiment, actor=actor, **kwargs)
        return item and item.turn_id

    assert pick(annotator, second_opinion=True) is None  # not on one's own label
    assert pick(second, second_opinion=True) == first_turn.pk
    assert pick(second) == other_turn.pk  # new turns: the labelled one is not offered again
    follow_up_review_record(experiment=experiment, turn_id=first_turn.pk, label="deepening", actor=second)
    assert pick(second, second_opinion=True) is None and pick(third, second_opinion=True) is None
    assert follow_up_review_pairs(experiment=experiment) == {"follow_up": {"deepening": 1}}
    assert follow_up_review_confusion(experiment=experiment) == {"follow_up": {"follow_up": 1}}

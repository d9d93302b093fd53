"""Live questions become a suite version: the expected answer a reviewer gives in the review queue
(validated, audited), and the suite built from the reviewed questions (first labels of user traffic,
de-duplicated, scrubbed, stratified by a seed, with provenance; release managers only; audited; the
base suite never written)."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from canary.models import FollowUpReview
from canary.services.experiments import experiment_create, experiment_start
from canary.services.live_suite import eval_suite_from_reviews, text_normalise
from canary.services.reviews import expected_labels, follow_up_review_record
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog, EvalSuite
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.canary.live import reviewed_question
from tests.canary.traffic import chat_session, experiment_backdate
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}
BASE = [
    {"id": "b1", "input": "What does the payment clause say?", "label": "payment", "language": "en"},
    {
        "id": "b2",
        "input": "这是什么条款：'合同可提前30日书面通知解除。'",
        "label": "termination",
        "language": "zh",
    },
    {"id": "b3", "input": "Is the liability cap enforceable?", "label": "liability", "language": "en"},
]


def user_with(role: str | None, name: str):
    user = get_user_model().objects.create_user(username=name)
    if role:
        user_role_grant(user=user, role=role)
    return user


@pytest.fixture
def experiment():
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    created = experiment_create(name="exp", baseline=v3, candidate=v4, traffic_percent=50, actor=SYSTEM)
    return experiment_backdate(experiment_start(experiment=created, actor=SYSTEM), started=timedelta(hours=1))


@pytest.fixture
def base():
    return eval_suite_import(name="fam", items=suite_items_parse(records=BASE), actor=SYSTEM)[0]


@pytest.fixture
def annotator():
    return user_with("annotator", "ann")


@pytest.fixture
def manager():
    return user_with("release_manager", "rm")


def test_a_review_stores_an_expected_answer_validated_and_audited(experiment, base, annotator):
    assert expected_labels(experiment=experiment) == ["liability", "payment", "termination"]
    review = reviewed_question(
        experiment, session="s", question="Who pays late fees?", reviewer=annotator, expected_label="payment"
    )
    assert (review.label, review.expected_label, review.expected_reference) == ("new", "payment", "")
    row = AuditLog.objects.get(action="follow_up_review.record")
    assert row.after == {"label": "new", "expected_label": "payment", "experiment": "exp", "event_id": "s-2"}
    # Changing only the expected answer is a change, audited with its before; an empty one clears it.
    for expected, reference in (("", "The buyer pays."), ("", "")):
        follow_up_review_record(
            experiment=experiment,
            turn_id=review.turn_id,
            label="new",
            expected_label=expected,
            expected_reference=reference,
            actor=annotator,
        )
    rows = list(AuditLog.objects.filter(action="follow_up_review.record").order_by("pk"))
    assert [r.before for r in rows[1:]] == [
        {"label": "new", "expected_label": "payment"},
        {"label": "new", "expected_reference": "The buyer pays."},
    ]
    review.refresh_from_db()
    assert (review.expected_label, review.expected_reference) == ("", "")

    def refused(**expected):
        with pytest.raises(ApplicationError) as caught:
            follow_up_review_record(
                experiment=experiment, turn_id=review.turn_id, label="new", actor=annotator, **expected
            )
        assert caught.value.status_code == 400
        return list(caught.value.fields)

    assert refused(expected_label="penalty") == ["expected_label"]  # not in the suite's label set
    assert refused(expected_reference="x" * 10_001) == ["expected_reference"]
    assert refused(expected_reference="a\x00b") == ["expected_reference"]
    # Without a suite named after the family there is no label set: a reference text still works.
    EvalSuite.objects.all().delete()
    assert refused(expected_label="payment") == ["expected_label"]
    follow_up_review_record(
        experiment=experiment, turn_id=review.turn_id, label="new", expected_reference="ok", actor=annotator
    )


def test_a_suite_version_from_reviewed_questions(experiment, base, annotator, manager):
    second = user_with("annotator", "ann2")
    kept = [
        reviewed_question(
            experiment,
            session="mail",
            question="Mr. John Smith (john@example.com) asks: who pays the late fee?",
            reviewer=annotator,
            expected_label="payment",
        ),
        reviewed_question(
            experiment,
            session="zh",
            question="张伟律师问：房东可以提前解约吗？电话13812345678",
            reviewer=annotator,
            expected_reference="可以，但须提前30日书面通知。",
        ),
    ]
    # The same question with another address: after the scrub a duplicate (the earliest review wins).
    reviewed_question(
        experiment,
        session="mail2",
        question="Mr. Bob Jones (bob@example.org) asks: who pays the late fee?",
        reviewer=annotator,
        expected_label="payment",
    )
    # The base suite's own question, other case and punctuation: a duplicate of the suite.
    reviewed_question(
        experiment,
        session="base",
        question="what does the PAYMENT clause say",
        reviewer=annotator,
        expected_label="payment",
    )
    # No expected answer: not a candidate.
    reviewed_question(experiment, session="plain", question="Is this a lease?", reviewer=annotator)
    # A second opinion's expected answer does not count: the first label had none.
    plain = FollowUpReview.objects.get(turn__session_id="plain")
    follow_up_review_record(
        experiment=experiment, turn_id=plain.turn_id, label="new", expected_label="payment", actor=second
    )
    # A label the base suite no longer has.
    gone = reviewed_question(
        experiment,
        session="gone",
        question="Can they sue us?",
        reviewer=annotator,
        expected_label="liability",
    )
    FollowUpReview.objects.filter(pk=gone.pk).update(expected_label="indemnity")
    # Probe traffic is never a live question, even with a review row.
    probe = chat_session(experiment, session="probe", turns=["Probe q?", "[a]", "Thanks."], source="probe")
    FollowUpReview.objects.create(
        turn=probe[2],
        experiment=experiment,
        label="new",
        detector_kind="new",
        expected_label="payment",
        reviewer_name="ann",
    )

    build = eval_suite_from_reviews(suite=base, experiment=experiment, seed=0, actor=manager)

    suite = build.suite
    assert (suite.name, suite.version, suite.item_count) == ("fam-live", 1, 5)
    assert (build.added, build.kept, build.scrubbed, build.candidates) == (2, 0, 2, 5)
    assert build.skipped == {"duplicate": 1, "duplicate_of_suite": 1, "unknown_label": 1}
    items = list(suite.items.order_by("position"))
    assert [i.external_id for i in items[:3]] == ["b1", "b2", "b3"]
    assert items[0].metadata == {"provenance": {"source": "suite", "suite": "fam@1"}}
    mail, zh = items[3:]
    assert mail.input == "Mr. [NAME] ([EMAIL]) asks: who pays the late fee?"
    assert (mail.label, mail.reference, mail.language, mail.tags) == ("payment", "", "en", ["live"])
    question = kept[0].turn.__class__.objects.get(session_id="mail", turn_index=0)
    assert mail.external_id == f"live-exp-{question.pk}"
    assert mail.metadata["provenance"] == {
        "source": "live",
        "experiment": "exp",
        "turn_id": question.pk,
        "event_id": "mail-0",
        "arm": "baseline",
        "asked_at": question.occurred_at.isoformat(),
        "reviewed_turn_id": kept[0].turn_id,
        "review_id": kept[0].pk,
        "reviewer": "ann",
        "reviewed_at": kept[0].created_at.isoformat(),
        "base": "fam@1",
        "scrub": {"rule": "scrub-v1", "replaced": {"email": 1, "name": 1}},
    }
    assert zh.input == "[NAME]律师问：房东可以提前解约吗？电话[PHONE]"
    assert (zh.label, zh.reference, zh.language) == ("", "可以，但须提前30日书面通知。", "zh")
    assert zh.metadata["provenance"]["scrub"]["replaced"] == {"name": 1, "phone": 1}
    # The held-out base suite is untouched: one version, its own items.
    assert list(EvalSuite.objects.filter(name="fam").values_list("version", "item_count")) == [(1, 3)]
    assert not base.items.filter(tags__contains=["live"]).exists()

    row = AuditLog.objects.get(action="eval_suite.from_reviews")
    assert (row.actor, row.target_id) == (manager, str(suite.pk))
    assert row.after["base"] == "fam@1" and row.after["experiment"] == "exp"
    assert (row.after["added"], row.after["scrub_rule"], row.after["skipped"]["duplicate"]) == (
        2,
        "scrub-v1",
        1,
    )
    assert row.after["strata"] == [
        {"language": "en", "label": "payment", "candidates": 1, "drawn": 1},
        {"language": "zh", "label": "", "candidates": 1, "drawn": 1},
    ]
    assert not AuditLog.objects.filter(action="eval_suite.import", target_id=str(suite.pk)).exists()

    # The next build keeps the live items and adds only new questions; with none new it is refused.
    with pytest.raises(ApplicationError) as nothing:
        eval_suite_from_reviews(suite=base, experiment=experiment, actor=manager)
    assert nothing.value.code == "nothing_new" and nothing.value.status_code == 400
    reviewed_question(
        experiment,
        session="new",
        question="Can the cap be lifted?",
        reviewer=annotator,
        expected_label="liability",
    )
    again = eval_suite_from_reviews(suite=base, experiment=experiment, actor=manager)
    assert (again.suite.version, again.added, again.kept, again.suite.item_count) == (2, 1, 2, 6)
    assert again.skipped["in_previous_version"] == 2


def test_stratified_by_language_and_label_with_a_seeded_draw(experiment, base, annotator, manager):
    for k in range(6):
        reviewed_question(
            experiment,
            session=f"en{k}",
            question=f"Question {k}: who pays?",
            reviewer=annotator,
            expected_label="payment",
        )
    for k in range(3):
        reviewed_question(
            experiment,
            session=f"zh{k}",
            question=f"第{k}个问题：可以解约吗？",
            reviewer=annotator,
            expected_label="termination",
        )

    def drawn(seed, name):
        build = eval_suite_from_reviews(
            suite=base, experiment=experiment, per_stratum=2, seed=seed, name=name, actor=manager
        )
        assert [(s.language, s.label, s.candidates, s.drawn) for s in build.strata] == [
            ("en", "payment", 6, 2),
            ("zh", "termination", 3, 2),
        ]
        return [i.external_id for i in build.suite.items.filter(tags__contains=["live"]).order_by("position")]

    first = drawn(0, "a")
    assert drawn(0, "b") == first  # the same seed, the same questions
    assert drawn(3, "c") != first


def test_who_may_build_and_what_is_refused(experiment, base, annotator, manager):
    reviewed_question(
        experiment, session="s", question="Who pays?", reviewer=annotator, expected_label="payment"
    )
    for role in ("annotator", "ci", "viewer"):
        with pytest.raises(ApplicationError) as caught:
            eval_suite_from_reviews(suite=base, experiment=experiment, actor=user_with(role, f"u-{role}"))
        assert caught.value.status_code == 403
    for kwargs, field in (
        ({}, "experiment"),
        ({"experiment": experiment, "family": "fam"}, "family"),
        ({"experiment": experiment, "per_stratum": 0}, "per_stratum"),
        ({"experiment": experiment, "name": "fam"}, "name"),
    ):
        with pytest.raises(ApplicationError) as caught:
            eval_suite_from_reviews(suite=base, actor=manager, **kwargs)
        assert caught.value.status_code == 400 and field in caught.value.fields
    assert not EvalSuite.objects.exclude(name="fam").exists()
    # A family gathers every experiment of it; a system part acts on its own authority.
    build = eval_suite_from_reviews(suite=base, family="fam", actor=SYSTEM)
    assert build.added == 1 and build.suite.name == "fam-live"


def test_text_normalise():
    assert (
        text_normalise("  What DOES   the ＰＡＹＭＥＮＴ clause say?! ") == "what does the payment clause say"
    )
    assert text_normalise("这是什么条款：“付款”？") == text_normalise("这是什么条款 付款")

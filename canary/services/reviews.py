"""The follow-up review queue: release managers and annotators label a random sample of an
experiment's live user turns (the question, the answer and the user's next turn), blind to the
detector's kind. The labels measure the detector on live traffic (`gate.judges.follow_up_review`,
shown on layer 2) and are exported in the labelled set's JSONL format to grow the training set.

A turn is reviewable when the detector judged it from a question and an answer the user got: a user
turn of user traffic (never probes) whose previous two turns are the user's question and an
assistant answer without an error (a fallback answer counts), all with text. The queue offers turns
nobody has labelled; in second-opinion mode, turns one other reviewer labelled, so reviewers'
agreement with each other is measured too. Every label is audited.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from django.db import transaction
from django.db.models import Exists, Max, Min, OuterRef, Q, QuerySet

from canary.models import Experiment, FollowUpReview, TurnEvent
from canary.selectors.reviews import follow_up_reviews_first
from engines.input_checks import FieldCode, text_problem
from engines.reasons import Reason, gettext_noop, reason, wordings_register
from registry.actors import Actor, actor_name, actor_require_role, actor_user
from registry.errors import ApplicationError, CommonCode, NotFoundError
from registry.models import AuditAction
from registry.roles import REVIEW_ROLES
from registry.selectors.suites import eval_suite_labels, eval_suite_latest
from registry.services.audit import audit_record


class ReviewsCode(StrEnum):
    UNKNOWN_LANGUAGE = "reviews.unknown_language"
    UNKNOWN_LABEL = "reviews.unknown_label"
    NO_TURN = "reviews.no_turn"
    UNKNOWN_EXPECTED_LABEL = "reviews.unknown_expected_label"
    NO_LABEL_SET = "reviews.no_label_set"
    EXPECTED_ANSWER = "reviews.expected_answer"


wordings_register(
    {
        ReviewsCode.UNKNOWN_LANGUAGE: gettext_noop("Unknown language '{language}'."),
        ReviewsCode.UNKNOWN_LABEL: gettext_noop("Unknown label '{label}'."),
        ReviewsCode.NO_TURN: gettext_noop("No reviewable turn {turn} in experiment '{name}'."),
        ReviewsCode.UNKNOWN_EXPECTED_LABEL: gettext_noop(
            "Unknown expected label '{label}': not a label of suite '{suite}'."
        ),
        ReviewsCode.NO_LABEL_SET: gettext_noop(
            "No suite named '{suite}' (the experiment's family) to take the expected labels from: give a "
            "reference text instead."
        ),
        ReviewsCode.EXPECTED_ANSWER: gettext_noop("The expected answer cannot be stored."),
    }
)

LANGUAGES = ("en", "zh")
LABELS = tuple(FollowUpReview.Label.values)
# A pick draws DRAWS ids per query, ROUNDS queries at most, before it falls back to a scan of BATCH
# turns per query after a drawn id, at most MAX_SCANNED per pick (so a language that is rare in the
# traffic cannot make one pick read the whole experiment).
DRAWS = 64
REFERENCE_MAX_CHARS = 10_000
ROUNDS = 16
BATCH = 64
MAX_SCANNED = 4096
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
Role = TurnEvent.Role


def text_language(text: str) -> str:
    """The language of `text`: "zh" when it holds at least as many CJK characters as Latin words, else
    "en" (so a Chinese question naming an English term, "这个 force majeure 条款", is Chinese)."""
    return "zh" if len(_CJK.findall(text)) >= max(1, len(_LATIN_WORD.findall(text))) else "en"


@dataclass(frozen=True, kw_only=True)
class ReviewItem:
    """One turn to label, in the labelled set's terms; `language` is the one the detector stored for
    the turn (the stratum layer 2 corrects by), guessed from the question and the next turn for a
    turn judged before languages were stored."""

    turn_id: int
    event_id: str
    language: str
    previous_question: str
    previous_answer: str
    next_turn: str
    gap_seconds: float


def _reviewable(*, experiment: Experiment) -> QuerySet[TurnEvent]:
    return TurnEvent.objects.filter(
        experiment=experiment, role=Role.USER, turn_index__gte=2, follow_up_kind__isnull=False
    ).exclude(source=TurnEvent.Source.PROBE)


def _items(turns: Sequence[TurnEvent]) -> dict[int, ReviewItem]:
    """The reviewable ones of `turns` as review items, by turn id: the two turns before each are read
    in one query on the session index."""
    if not turns:
        return {}
    wanted = {(t.experiment_id, t.session_id, t.turn_index - k) for t in turns for k in (1, 2)}
    rows = TurnEvent.objects.filter(
        experiment_id__in={t.experiment_id for t in turns},
        session_id__in={t.session_id for t in turns},
        turn_index__in={index for _, _, index in wanted},
    ).only("experiment_id", "session_id", "turn_index", "role", "text", "error", "fallback", "occurred_at")
    context = {key: t for t in rows if (key := (t.experiment_id, t.session_id, t.turn_index)) in wanted}
    items = {}
    for turn in turns:
        answer = context.get((turn.experiment_id, turn.session_id, turn.turn_index - 1))
        question = context.get((turn.experiment_id, turn.session_id, turn.turn_index - 2))
        if (
            answer is None
            or question is None
            or answer.role != Role.ASSISTANT
            or question.role != Role.USER
            or (answer.error and not answer.fallback)
            or not (answer.text.strip() and question.text.strip() and turn.text.strip())
        ):
            continue
        items[turn.pk] = ReviewItem(
            turn_id=turn.pk,
            event_id=turn.event_id,
            # The detector's language, whose error rates the reviews measure; guessed for older turns.
            language=turn.follow_up_language or text_language(f"{question.text}\n{turn.text}"),
            previous_question=question.text,
            previous_answer=answer.text,
            next_turn=turn.text,
            gap_seconds=max(0.0, (turn.occurred_at - answer.occurred_at).total_seconds()),
        )
    return items


def follow_up_review_next(
    *,
    experiment: Experiment,
    actor: Actor,
    language: str | None = None,
    second_opinion: bool = False,
    rng: random.Random | None = None,
) -> ReviewItem | None:
    """A reviewable turn nobody has labelled yet (of `language` when given), drawn uniformly at
    random among them, or None. With `second_opinion`, a turn one other reviewer has labelled, for a
    second label that measures how far reviewers agree (the first label still is the one that counts).

    Uniform, so that the reviewed turns are a simple random sample of the experiment's judged turns
    (per language) and the detector's sensitivity and specificity measured on them are unbiased
    (`engines.follow_up.live_rates`): ids are drawn uniformly over the experiment's id range, DRAWS
    per query, and the first drawn id that is such a turn wins (rejection sampling; each pick costs a
    few primary-key reads whatever the traffic). When ROUNDS queries find none (such turns are under
    about 0.3 % of the id range: nearly all are labelled, or other experiments' traffic fills the
    range), the pick falls back to the first such turn at or after a drawn id, which favours a turn
    after a long run of ids that are not such turns."""
    actor_require_role(actor, REVIEW_ROLES, action="review follow-ups")
    if language not in (None, *LANGUAGES):
        raise ApplicationError(
            reason(ReviewsCode.UNKNOWN_LANGUAGE, language=language),
            fields={"language": [reason(CommonCode.ONE_OF, choices=list(LANGUAGES))]},
        )
    # The experiment's id range: two reads at the ends of the primary key.
    bounds = TurnEvent.objects.filter(experiment=experiment).aggregate(low=Min("pk"), high=Max("pk"))
    if bounds["low"] is None:
        return None
    rng = rng or random.Random()
    name = actor_name(actor)
    for _ in range(ROUNDS):
        drawn = [rng.randint(bounds["low"], bounds["high"]) for _ in range(DRAWS)]
        page = _offered(experiment=experiment, name=name, second_opinion=second_opinion, low=min(drawn))
        items = _items(list(page.filter(pk__in=set(drawn))))
        for pk in drawn:  # in the order drawn: the first hit is a uniform draw among the offered turns
            item = items.get(pk)
            if item is not None and language in (None, item.language):
                return item
    start = rng.randint(bounds["low"], bounds["high"])
    return _scan(
        experiment=experiment,
        name=name,
        second_opinion=second_opinion,
        language=language,
        start=start,
        high=bounds["high"],
        low=bounds["low"],
    )


def _offered(*, experiment: Experiment, name: str, second_opinion: bool, low: int) -> QuerySet[TurnEvent]:
    """The reviewable turns the queue may offer `name`, from id `low` on: nobody's label yet, or (for
    a second opinion) one label by someone else."""
    # Bounding the reviews by `low` too lets PostgreSQL start both sides of its anti-join there.
    reviews = FollowUpReview.objects.filter(turn=OuterRef("pk"), turn_id__gte=low)
    page = _reviewable(experiment=experiment).filter(pk__gte=low)
    if second_opinion:
        return page.filter(Exists(reviews.exclude(reviewer_name=name))).filter(
            ~Exists(reviews.filter(Q(is_first=False) | Q(reviewer_name=name)))
        )
    return page.filter(~Exists(reviews))


def _scan(
    *,
    experiment: Experiment,
    name: str,
    second_opinion: bool,
    language: str | None,
    start: int,
    low: int,
    high: int,
) -> ReviewItem | None:
    """The first offered turn (of `language`) at or after `start`, wrapping around; at most
    MAX_SCANNED turns are read."""
    scanned = 0
    for first, last in ((start, high + 1), (low, start)):
        while scanned < MAX_SCANNED:
            page = _offered(experiment=experiment, name=name, second_opinion=second_opinion, low=first)
            batch = list(page.filter(pk__lt=last).order_by("pk")[:BATCH])
            if not batch:
                break
            scanned += len(batch)
            items = _items(batch)
            for turn in batch:
                item = items.get(turn.pk)
                if item is not None and language in (None, item.language):
                    return item
            first = batch[-1].pk + 1
    return None


def expected_labels(*, experiment: Experiment) -> list[str]:
    """The labels an expected answer may name: the label set of the latest version of the suite named
    after the experiment's family (the suite its gate runs on, as the demo names it); empty without one."""
    suite = eval_suite_latest(name=experiment.family)
    return eval_suite_labels(suite=suite) if suite is not None else []


def _expected_check(*, experiment: Experiment, expected_label: str, expected_reference: str) -> None:
    if expected_label:
        labels = expected_labels(experiment=experiment)
        if not labels:
            raise ApplicationError(
                reason(ReviewsCode.NO_LABEL_SET, suite=experiment.family),
                fields={"expected_label": [reason(ReviewsCode.NO_LABEL_SET, suite=experiment.family)]},
            )
        if expected_label not in labels:
            raise ApplicationError(
                reason(ReviewsCode.UNKNOWN_EXPECTED_LABEL, label=expected_label, suite=experiment.family),
                fields={"expected_label": [reason(CommonCode.ONE_OF, choices=labels)]},
            )
    problems: dict[str, list[Reason | str]] = {}
    for name, value in (("expected_label", expected_label), ("expected_reference", expected_reference)):
        if problem := text_problem(value):
            problems[name] = [problem]
    if len(expected_reference) > REFERENCE_MAX_CHARS:
        problems["expected_reference"] = [reason(FieldCode.AT_MOST_CHARS, limit=REFERENCE_MAX_CHARS)]
    if problems:
        raise ApplicationError(reason(ReviewsCode.EXPECTED_ANSWER), fields=problems)


def _review_state(*, label: str, expected_label: str, expected_reference: str) -> dict[str, str]:
    """A review as its audit rows show it: the label, and the expected answer's parts that are set."""
    state = {"label": label}
    if expected_label:
        state["expected_label"] = expected_label
    if expected_reference:
        state["expected_reference"] = expected_reference
    return state


@transaction.atomic
def follow_up_review_record(
    *,
    experiment: Experiment,
    turn_id: int,
    label: str,
    actor: Actor,
    expected_label: str = "",
    expected_reference: str = "",
) -> FollowUpReview:
    """Record `actor`'s label of one reviewable turn of the experiment (audited), and with it, when
    given, their expected answer to the turn's question: a label of the family's suite
    (`expected_labels`) and/or a reference text. Labelling the same turn again changes this reviewer's
    label and expected answer (an empty one clears it)."""
    actor_require_role(actor, REVIEW_ROLES, action="review follow-ups")
    if label not in LABELS:
        raise ApplicationError(
            reason(ReviewsCode.UNKNOWN_LABEL, label=label),
            fields={"label": [reason(CommonCode.ONE_OF, choices=list(LABELS))]},
        )
    expected_label, expected_reference = expected_label.strip(), expected_reference.strip()
    _expected_check(
        experiment=experiment, expected_label=expected_label, expected_reference=expected_reference
    )
    # Locked: of two reviewers labelling one turn at once, exactly one gives its first label.
    turn = _reviewable(experiment=experiment).select_for_update().filter(pk=turn_id).first()
    if turn is None or turn.pk not in _items([turn]):
        raise NotFoundError(reason(ReviewsCode.NO_TURN, turn=turn_id, name=experiment.name), field="turn_id")
    name = actor_name(actor)
    review = FollowUpReview.objects.filter(turn=turn, reviewer_name=name).first()
    state = _review_state(label=label, expected_label=expected_label, expected_reference=expected_reference)
    before = (
        _review_state(
            label=review.label,
            expected_label=review.expected_label,
            expected_reference=review.expected_reference,
        )
        if review
        else None
    )
    if review is None:
        review = FollowUpReview.objects.create(
            turn=turn,
            experiment=experiment,
            label=label,
            expected_label=expected_label,
            expected_reference=expected_reference,
            detector_kind=turn.follow_up_kind,
            is_first=not FollowUpReview.objects.filter(turn=turn).exists(),
            reviewer=actor_user(actor),
            reviewer_name=name,
        )
    elif before == state:
        return review
    else:
        review.label, review.expected_label, review.expected_reference = (
            label,
            expected_label,
            expected_reference,
        )
        review.save(update_fields=["label", "expected_label", "expected_reference"])
    audit_record(
        actor=actor,
        action=AuditAction.FOLLOW_UP_REVIEW_RECORD,
        target=review,
        before=before,
        after={**state, "experiment": experiment.name, "event_id": turn.event_id},
    )
    return review


def follow_up_reviews_export(*, experiment: Experiment, actor: Actor) -> Iterator[dict[str, object]]:
    """The experiment's reviewed turns as rows of the labelled set (`id, language, previous_question,
    previous_answer, next_turn, gap_seconds, label`; the first label of each turn), oldest review
    first, read in batches as they are consumed. The role is checked at the call."""
    actor_require_role(actor, REVIEW_ROLES, action="export follow-up reviews")
    return _export_rows(experiment=experiment)


def _export_rows(*, experiment: Experiment) -> Iterator[dict[str, object]]:
    reviews = follow_up_reviews_first(experiment=experiment).select_related("turn").order_by("pk")
    after = 0
    while True:
        batch = list(reviews.filter(pk__gt=after)[:500])
        if not batch:
            return
        items = _items([review.turn for review in batch])
        for review in batch:
            item = items.get(review.turn_id)
            if item is not None:
                yield {
                    "id": f"{experiment.name}-{item.event_id}",
                    "language": item.language,
                    "previous_question": item.previous_question,
                    "previous_answer": item.previous_answer,
                    "next_turn": item.next_turn,
                    "gap_seconds": item.gap_seconds,
                    "label": review.label,
                }
        after = batch[-1].pk

"""Live questions become a suite version: a release manager builds, from the questions users asked a
canary experiment (or any experiment of a family) that a reviewer gave an expected answer in the review
queue, a new version of the suite `<base>-live`: the base suite's items, the live items of that suite's
previous version, and a seeded draw of new live questions per (language, label), personal data scrubbed
(`engines.scrub`) and each with its provenance. The base suite itself (the held-out golden set) is never
written. See docs/canary.md, "Live questions into a suite".

Which questions: the first label of each reviewed turn (second opinions never count) that has an
expected answer; the question is the user turn two before the reviewed one (the one its answer
answered), user traffic only (stress probes are never reviewable). An expected label outside the base
suite's label set is left out. Duplicates are compared on normalised text (`text_normalise`) after
scrubbing: against the base suite's inputs and the kept live items, then among the new questions (the
earliest review wins).
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from django.db import transaction
from django.db.models import Q

from canary.models import Experiment, FollowUpReview, TurnEvent
from engines.backends.base import language_of
from engines.input_checks import FieldCode
from engines.reasons import gettext_noop, reason, wordings_register
from engines.scrub import RULE, scrub_text
from registry.actors import Actor, actor_require_role
from registry.errors import ApplicationError
from registry.models import AuditAction, EvalItem, EvalSuite
from registry.roles import RELEASE_ROLES
from registry.selectors.suites import eval_suite_labels, eval_suite_latest
from registry.services.suites import eval_suite_import
from registry.suite_format import SuiteItem

LIVE = "live"  # the live items' tag and provenance source
SUFFIX = "-live"
PER_STRATUM_MAX = 10_000


class LiveSuiteCode(StrEnum):
    ONE_SOURCE = "live_suite.one_source"
    ONE_SOURCE_NOTE = "live_suite.one_source_note"
    SAME_NAME = "live_suite.same_name"
    NOTHING_NEW = "live_suite.nothing_new"


wordings_register(
    {
        LiveSuiteCode.ONE_SOURCE: gettext_noop("Name an experiment or a family, not both and not neither."),
        LiveSuiteCode.ONE_SOURCE_NOTE: gettext_noop("give this or the other one"),
        LiveSuiteCode.SAME_NAME: gettext_noop(
            "A suite built from live questions cannot be the base suite '{suite}' itself: the held-out "
            "suite stays as it was imported."
        ),
        LiveSuiteCode.NOTHING_NEW: gettext_noop(
            "No new reviewed live question to add to '{name}': {candidates} reviewed question(s) with an "
            "expected answer, {skipped} left out (already in the suite, duplicates, unknown labels)."
        ),
    }
)


@dataclass(frozen=True, kw_only=True)
class Stratum:
    """One (language, label) stratum: the new questions it had after de-duplication and how many were
    drawn. `label` is empty for questions whose expected answer is a reference text only."""

    language: str
    label: str
    candidates: int
    drawn: int


@dataclass(frozen=True, kw_only=True)
class LiveSuiteBuild:
    """What a build made: the new version, the base it started from, how many live items it added and
    kept from the previous version, the reviewed questions it read, why the others were left out
    (`skipped`: reason -> count), the strata, and how many added items the scrub changed."""

    suite: EvalSuite
    base: EvalSuite
    added: int
    kept: int
    candidates: int
    skipped: dict[str, int]
    strata: list[Stratum] = field(default_factory=list)
    scrubbed: int = 0


_SPACE = re.compile(r"\s+")


def text_normalise(text: str) -> str:
    """The text duplicates are compared on: NFKC (full-width forms become ASCII), case-folded,
    punctuation and symbols dropped (Unicode categories P and S), runs of white space made one space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in folded)
    return _SPACE.sub(" ", kept).strip()


def live_suite_name(*, base: EvalSuite) -> str:
    return f"{base.name}{SUFFIX}"


def _reviews(*, experiment: Experiment | None, family: str | None):
    reviews = (
        FollowUpReview.objects.filter(is_first=True)
        .filter(~Q(expected_label="") | ~Q(expected_reference=""))
        .exclude(turn__source=TurnEvent.Source.PROBE)
        .select_related("turn", "experiment")
        .order_by("pk")
    )
    return (
        reviews.filter(experiment=experiment)
        if experiment is not None
        else reviews.filter(experiment__family=family)
    )


def _questions(reviews: list[FollowUpReview]) -> dict[int, TurnEvent]:
    """Review id -> its question: the user turn two before the reviewed one in the same session (one
    query on the session index)."""
    if not reviews:
        return {}
    wanted = {(r.turn.experiment_id, r.turn.session_id, r.turn.turn_index - 2): r.pk for r in reviews}
    rows = TurnEvent.objects.filter(
        experiment_id__in={r.turn.experiment_id for r in reviews},
        session_id__in={r.turn.session_id for r in reviews},
        turn_index__in={key[2] for key in wanted},
        role=TurnEvent.Role.USER,
    ).exclude(source=TurnEvent.Source.PROBE)
    found = {}
    for turn in rows:
        review_id = wanted.get((turn.experiment_id, turn.session_id, turn.turn_index))
        if review_id is not None and turn.text.strip():
            found[review_id] = turn
    return found


def _suite_item(item: EvalItem, **metadata: object) -> SuiteItem:
    return SuiteItem(
        id=item.external_id,
        input=item.input,
        label=item.label,
        reference=item.reference,
        language=item.language,
        tags=tuple(item.tags),
        metadata={**item.metadata, **metadata},
    )


@transaction.atomic
def eval_suite_from_reviews(
    *,
    suite: EvalSuite,
    actor: Actor,
    experiment: Experiment | None = None,
    family: str | None = None,
    per_stratum: int = 50,
    seed: int = 0,
    name: str | None = None,
) -> LiveSuiteBuild:
    """Build the next version of `name` (default `<suite>-live`) from `suite` and the reviewed live
    questions of `experiment` or of every experiment of `family` (release managers only; audited as
    `eval_suite.from_reviews`). At most `per_stratum` new questions per (language, label) stratum are
    drawn, by `seed`. Refused (400) when nothing new would be added."""
    actor_require_role(actor, RELEASE_ROLES, action="build a suite from reviewed live questions")
    if (experiment is None) == (family is None):
        note = [reason(LiveSuiteCode.ONE_SOURCE_NOTE)]
        raise ApplicationError(reason(LiveSuiteCode.ONE_SOURCE), fields={"experiment": note, "family": note})
    if not 1 <= per_stratum <= PER_STRATUM_MAX:
        raise ApplicationError(
            reason(FieldCode.INTEGER_BETWEEN, low=1, high=PER_STRATUM_MAX),
            fields={"per_stratum": [reason(FieldCode.INTEGER_BETWEEN, low=1, high=PER_STRATUM_MAX)]},
        )
    target = name or live_suite_name(base=suite)
    if target == suite.name:
        refusal = reason(LiveSuiteCode.SAME_NAME, suite=suite.name)
        raise ApplicationError(refusal, fields={"name": [refusal]})

    base_ref = f"{suite.name}@{suite.version}"
    base_items = list(suite.items.order_by("position"))
    previous = eval_suite_latest(name=target)
    kept = (
        [
            i
            for i in previous.items.order_by("position")
            if i.metadata.get("provenance", {}).get("source") == LIVE
        ]
        if previous is not None
        else []
    )
    labels = set(eval_suite_labels(suite=suite))
    taken_ids = {i.external_id for i in base_items} | {i.external_id for i in kept}
    kept_turns = {i.metadata["provenance"].get("turn_id") for i in kept}
    seen_suite = {text_normalise(i.input) for i in [*base_items, *kept]}

    reviews = list(_reviews(experiment=experiment, family=family))
    questions = _questions(reviews)
    skipped: Counter[str] = Counter()
    seen_live: set[str] = set()
    pools: dict[tuple[str, str], list[SuiteItem]] = {}
    for review in reviews:
        question = questions.get(review.pk)
        if question is None:
            skipped["no_question"] += 1
            continue
        if question.pk in kept_turns:
            skipped["in_previous_version"] += 1
            continue
        if review.expected_label and review.expected_label not in labels:
            skipped["unknown_label"] += 1
            continue
        text, reference = scrub_text(question.text), scrub_text(review.expected_reference)
        key = text_normalise(text.text)
        if key in seen_suite:
            skipped["duplicate_of_suite"] += 1
            continue
        if key in seen_live:
            skipped["duplicate"] += 1
            continue
        item_id = f"{LIVE}-{review.experiment.name}-{question.pk}"
        if item_id in taken_ids:
            skipped["id_taken"] += 1
            continue
        seen_live.add(key)
        language = language_of(question.text)
        pools.setdefault((language, review.expected_label), []).append(
            SuiteItem(
                id=item_id,
                input=text.text,
                label=review.expected_label,
                reference=reference.text,
                language=language,
                tags=(LIVE,),
                metadata={
                    "provenance": {
                        "source": LIVE,
                        "experiment": review.experiment.name,
                        "turn_id": question.pk,
                        "event_id": question.event_id,
                        "arm": question.arm,
                        "asked_at": question.occurred_at.isoformat(),
                        "reviewed_turn_id": review.turn_id,
                        "review_id": review.pk,
                        "reviewer": review.reviewer_name,
                        "reviewed_at": review.created_at.isoformat(),
                        "base": base_ref,
                        "scrub": {
                            "rule": RULE,
                            "replaced": dict(Counter(text.replaced) + Counter(reference.replaced)),
                        },
                    }
                },
            )
        )

    rng = random.Random(seed)
    strata, added = [], []
    for (language, label), pool in sorted(pools.items()):
        drawn = rng.sample(pool, min(per_stratum, len(pool)))
        drawn.sort(key=lambda item: item.metadata["provenance"]["turn_id"])
        added += drawn
        strata.append(Stratum(language=language, label=label, candidates=len(pool), drawn=len(drawn)))
    if not added:
        raise ApplicationError(
            reason(
                LiveSuiteCode.NOTHING_NEW,
                name=target,
                candidates=len(reviews),
                skipped=sum(skipped.values()),
            ),
            code="nothing_new",
        )
    scrubbed = sum(1 for item in added if item.metadata["provenance"]["scrub"]["replaced"])
    source = {"experiment": experiment.name} if experiment is not None else {"family": family}
    items = [
        *(_suite_item(i, provenance={"source": "suite", "suite": base_ref}) for i in base_items),
        *(_suite_item(i) for i in kept),
        *added,
    ]
    built, _ = eval_suite_import(
        name=target,
        items=items,
        actor=actor,
        description=(
            f"{base_ref} and {len(kept) + len(added)} reviewed live question(s) "
            f"({', '.join(f'{k} {v}' for k, v in source.items())}; seed {seed}, at most {per_stratum} "
            f"new per language and label; personal data scrubbed by {RULE})"
        ),
        action=AuditAction.EVAL_SUITE_FROM_REVIEWS,
        audit_after={
            "base": base_ref,
            **source,
            "seed": seed,
            "per_stratum": per_stratum,
            "added": len(added),
            "kept": len(kept),
            "reviewed_questions": len(reviews),
            "skipped": dict(sorted(skipped.items())),
            "strata": [
                {"language": s.language, "label": s.label, "candidates": s.candidates, "drawn": s.drawn}
                for s in strata
            ],
            "scrub_rule": RULE,
            "scrubbed": scrubbed,
        },
    )
    return LiveSuiteBuild(
        suite=built,
        base=suite,
        added=len(added),
        kept=len(kept),
        candidates=len(reviews),
        skipped=dict(sorted(skipped.items())),
        strata=strata,
        scrubbed=scrubbed,
    )

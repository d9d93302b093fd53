from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from django.db.models import QuerySet

from engines.input_checks import text_problem
from engines.reasons import gettext_noop, reason, wordings_register
from registry.errors import NotFoundError
from registry.models import EvalItem, EvalSuite
from registry.selectors import pk_like


class SuiteLookupCode(StrEnum):
    NO_SUCH_SUITE = "suites.no_such_suite"


wordings_register({SuiteLookupCode.NO_SUCH_SUITE: gettext_noop("No eval suite '{ref}'.")})


def eval_suite_list(*, name: str | None = None) -> QuerySet[EvalSuite]:
    queryset = EvalSuite.objects.all()
    return queryset.filter(name=name) if name else queryset


def eval_suite_get(*, ref: str | int, field: str = "suite") -> EvalSuite:
    """A suite by id, by "name@version", or by name (its latest version)."""
    text = str(ref).strip()
    queryset = eval_suite_list()
    if text_problem(text):  # no such name can be stored, and the database refuses to look one up
        raise NotFoundError(reason(SuiteLookupCode.NO_SUCH_SUITE, ref=text), field=field)
    if pk_like(text):
        suite = queryset.filter(pk=int(text)).first()
    elif "@" in text:
        name, _, version = text.partition("@")
        suite = (
            queryset.filter(name=name, version=version).first()
            if version.isascii() and version.isdigit()
            else None
        )
    else:
        suite = queryset.filter(name=text).order_by("-version").first()
    if suite is None:
        raise NotFoundError(reason(SuiteLookupCode.NO_SUCH_SUITE, ref=text), field=field)
    return suite


def eval_suite_is_locked(*, suite: EvalSuite) -> bool:
    """Fresh from the database: a gate run may have locked it since `suite` was read."""
    return EvalSuite.objects.filter(pk=suite.pk, locked_at__isnull=False).exists()


def eval_suite_labels(*, suite: EvalSuite) -> list[str]:
    """The suite's label set: the distinct non-empty labels of its items, sorted."""
    return sorted(set(suite.items.exclude(label="").values_list("label", flat=True).distinct()))


def eval_suite_latest(*, name: str) -> EvalSuite | None:
    """The latest version of suite `name`, or None."""
    return EvalSuite.objects.filter(name=name).order_by("-version").first()


@dataclass(frozen=True)
class SuiteMakeUp:
    """What a suite holds, for its page: items per language and per tag, and its items from live
    questions (those whose `metadata.provenance.source` is "live"), the first `LIVE_SHOWN` of them."""

    items: int
    by_language: list[tuple[str, int]]
    by_tag: list[tuple[str, int]]
    live_count: int
    live: list[EvalItem]


LIVE_SHOWN = 50


def eval_suite_make_up(*, suite: EvalSuite) -> SuiteMakeUp:
    items = suite.items.all()
    languages = Counter(items.values_list("language", flat=True))
    tags: Counter[str] = Counter(
        tag for item_tags in items.values_list("tags", flat=True) for tag in item_tags or ()
    )
    live = items.filter(metadata__provenance__source="live").order_by("position")
    return SuiteMakeUp(
        items=suite.item_count,
        by_language=sorted(
            ((language or "—", n) for language, n in languages.items()), key=lambda kv: (-kv[1], kv[0])
        ),
        by_tag=sorted(tags.items(), key=lambda kv: (-kv[1], kv[0])),
        live_count=live.count(),
        live=list(live[:LIVE_SHOWN]),
    )

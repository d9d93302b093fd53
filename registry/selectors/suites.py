from __future__ import annotations

from enum import StrEnum

from django.db.models import QuerySet

from engines.input_checks import text_problem
from engines.reasons import gettext_noop, reason, wordings_register
from registry.errors import NotFoundError
from registry.models import EvalSuite
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

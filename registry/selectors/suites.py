from __future__ import annotations

from django.db.models import QuerySet

from engines.input_checks import text_problem
from registry.errors import NotFoundError
from registry.models import EvalSuite
from registry.selectors import pk_like


def eval_suite_list(*, name: str | None = None) -> QuerySet[EvalSuite]:
    queryset = EvalSuite.objects.all()
    return queryset.filter(name=name) if name else queryset


def eval_suite_get(*, ref: str | int, field: str = "suite") -> EvalSuite:
    """A suite by id, by "name@version", or by name (its latest version)."""
    text = str(ref).strip()
    queryset = eval_suite_list()
    if text_problem(text):  # no such name can be stored, and the database refuses to look one up
        raise NotFoundError(f"No eval suite {text!r}.", field=field)
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
        raise NotFoundError(f"No eval suite {text!r}.", field=field)
    return suite


def eval_suite_is_locked(*, suite: EvalSuite) -> bool:
    """Fresh from the database: a gate run may have locked it since `suite` was read."""
    return EvalSuite.objects.filter(pk=suite.pk, locked_at__isnull=False).exists()

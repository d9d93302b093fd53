from __future__ import annotations

from enum import StrEnum

from django.db.models import QuerySet

from engines.input_checks import text_problem
from engines.reasons import gettext_noop, reason, wordings_register
from registry.errors import NotFoundError
from registry.models import ModelVersion
from registry.selectors import pk_like


class VersionLookupCode(StrEnum):
    NO_SUCH_VERSION = "versions.no_such_version"
    NOT_A_REF = "versions.not_a_ref"


wordings_register(
    {
        VersionLookupCode.NO_SUCH_VERSION: gettext_noop("No model version '{ref}'."),
        VersionLookupCode.NOT_A_REF: gettext_noop("'{ref}' is neither an id nor family:label."),
    }
)


def model_version_get(*, ref: str | int, field: str = "version") -> ModelVersion:
    """A version by id or by "family:label"."""
    text = str(ref).strip()
    queryset = ModelVersion.objects.select_related("baseline", "created_by")
    if text_problem(text):  # no such name can be stored, and the database refuses to look one up
        raise NotFoundError(reason(VersionLookupCode.NO_SUCH_VERSION, ref=text), field=field)
    if pk_like(text):
        version = queryset.filter(pk=int(text)).first()
    elif ":" in text:
        family, _, label = text.partition(":")
        version = queryset.filter(family=family, label=label).first()
    else:
        raise NotFoundError(reason(VersionLookupCode.NOT_A_REF, ref=text), field=field)
    if version is None:
        raise NotFoundError(reason(VersionLookupCode.NO_SUCH_VERSION, ref=text), field=field)
    return version


def model_version_list(*, filters: dict | None = None) -> QuerySet[ModelVersion]:
    filters = filters or {}
    queryset = ModelVersion.objects.select_related("baseline", "created_by")
    for key in ("family", "label", "status", "backend_kind"):
        if filters.get(key):
            queryset = queryset.filter(**{key: filters[key]})
    return queryset.order_by("family", "-created_at")


def model_version_in_production(*, family: str) -> ModelVersion | None:
    """The family's version serving production (`promoted`), None before its incumbent is declared."""
    return ModelVersion.objects.filter(family=family, status=ModelVersion.Status.PROMOTED).first()

"""The one domain error type. A refusal is a reason code and its parameters (`engines.reasons`),
declared with its English wording by the module that refuses; every interface turns it into its own
answer in the reader's language: the API into one JSON shape (`evalhub.api.errors`), pages into a
message next to the field (`evalhub.permissions.error_text`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from http import HTTPStatus

from django.http import Http404

# Logs and tracebacks read English (`ENGLISH`: the wordings as declared, codes for terms).
from engines.reasons import ENGLISH, Reason, gettext_noop, reason_render, wordings_register


class CommonCode(StrEnum):
    """Refusals and notes many services share."""

    FIELD_PROBLEM = "errors.field_problem"  # `problem`: `engines.input_checks`' words
    REQUIRED = "errors.required"
    ONE_OF = "errors.one_of"


wordings_register(
    {
        CommonCode.FIELD_PROBLEM: gettext_noop("{field} {problem}."),
        CommonCode.REQUIRED: gettext_noop("required"),
        CommonCode.ONE_OF: gettext_noop("one of {choices}"),
    }
)


class ApplicationError(Exception):
    """A request the domain refuses: `reason` says why, `fields` names what was wrong, field ->
    notes (a note is a reason, or a message a library already put in the reader's language, such as
    Django's validators'). `code` is the API's coarse, stable code; the reason's code is the fine one."""

    def __init__(
        self,
        reason: Reason,
        *,
        code: str = "invalid",
        fields: Mapping[str, Sequence[Reason | str]] | None = None,
        status_code: int = HTTPStatus.BAD_REQUEST,
    ):
        self.reason = reason
        self.code = code
        self.fields: dict[str, list[Reason | str]] = {
            name: list(notes) for name, notes in (fields or {}).items()
        }
        self.status_code = status_code
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """The reason in English (logs, tracebacks); people read it through the edge's rendering."""
        return reason_render(self.reason, words=ENGLISH)


class NotFoundError(ApplicationError, Http404):
    """Also an Http404, so pages answer 404 without catching it."""

    def __init__(self, reason: Reason, *, field: str | None = None):
        super().__init__(
            reason,
            code="not_found",
            fields={field: [reason]} if field else None,
            status_code=HTTPStatus.NOT_FOUND,
        )

"""The one domain error type. Every interface turns it into its own answer: the API into one
JSON shape (`evalhub.api.errors`), pages into a message next to the field."""

from __future__ import annotations

from http import HTTPStatus

from django.http import Http404


class ApplicationError(Exception):
    """A request the domain refuses. `fields` names what was wrong, field -> messages."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid",
        fields: dict[str, list[str]] | None = None,
        status_code: int = HTTPStatus.BAD_REQUEST,
    ):
        super().__init__(message)
        self.message = message
        self.code = code
        self.fields = fields or {}
        self.status_code = status_code


class NotFoundError(ApplicationError, Http404):
    """Also an Http404, so pages answer 404 without catching it."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(
            message,
            code="not_found",
            fields={field: [message]} if field else None,
            status_code=HTTPStatus.NOT_FOUND,
        )

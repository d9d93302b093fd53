"""Reasons as codes and parameters: what judges, layers, analyses and services say about a verdict or
a refusal, without words. A `Reason` is a code from an enumeration its owner defines (a `StrEnum`
whose values are `<owner>.<name>`, e.g. `robustness.below_bar`) and the numbers, bounds and names it
needs. Each owner also declares its wordings beside its codes (`wordings_register`), in English, as
msgids marked with `gettext_noop` so that `makemessages` collects them; the edge (pages, report, CLI,
webhook, API errors) translates them into the reader's language and fills in the parameters.

This module is pure (no Django): the translation and the labels of codes are passed in by the edge."""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


def gettext_noop(message: str) -> str:
    """Marks an English wording for `makemessages` (Django's keyword of the same name); the edge
    translates it when it renders."""
    return message


@dataclass(frozen=True)
class Term:
    """A parameter that is itself a stored code (a metric, an arm, a status): rendered as its label
    in the reader's language (`evalhub.terms`), stored as `{"term": code}`."""

    code: str


@dataclass(frozen=True)
class Reason:
    """A code and its parameters. A parameter is a number, a string, a bool, None, a `Term`, a nested
    `Reason`, or a list of these."""

    code: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "params": {name: _param_to_json(value) for name, value in self.params.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reason:
        params = data.get("params") or {}
        return cls(
            code=str(data["code"]), params={name: _param_from_json(value) for name, value in params.items()}
        )

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Inside a stored document (a layer's details, the report) a reason is its JSON, read back as
        a `Reason`; a dump given `context={"words": Words}` adds its `message` in those words."""
        from pydantic_core import core_schema  # only where documents are stored: engines need no pydantic

        def read(value: Any) -> Reason:
            if isinstance(value, Reason):
                return value
            if isinstance(value, Mapping) and "code" in value:
                return Reason.from_json(value)
            raise ValueError("not a reason")

        def dump(value: Reason, info: Any) -> dict[str, Any]:
            words = (info.context or {}).get("words")
            data = value.to_json()
            return data if words is None else {**data, "message": reason_render(value, words=words)}

        return core_schema.no_info_plain_validator_function(
            read, serialization=core_schema.plain_serializer_function_ser_schema(dump, info_arg=True)
        )


def reason(code: str, /, **params: Any) -> Reason:
    """`reason(RobustnessCode.BELOW_BAR, rate=0.81, bar=0.85)`."""
    return Reason(code=str(code), params=params)


def _param_to_json(value: Any) -> Any:
    if isinstance(value, Reason):
        return {"reason": value.to_json()}
    if isinstance(value, Term):
        return {"term": value.code}
    if isinstance(value, list | tuple):
        return [_param_to_json(item) for item in value]
    return value


def _param_from_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        if "reason" in value:
            return Reason.from_json(value["reason"])
        if "term" in value:
            return Term(str(value["term"]))
    if isinstance(value, list):
        return [_param_from_json(item) for item in value]
    return value


def reasons_to_json(values: Iterable[Reason | str]) -> list[Any]:
    """Reasons as a JSON column stores them (a sentence passed through: a reason not yet coded)."""
    return [value.to_json() if isinstance(value, Reason) else value for value in values]


def stored_reason_read(value: Any) -> Reason | str:
    """A reason as stored: a `{"code", "params"}` object, or the English sentence that runs from
    before reason codes stored (shown as it was written)."""
    if isinstance(value, Reason):
        return value
    if isinstance(value, Mapping) and "code" in value:
        return Reason.from_json(value)
    return str(value)


# The catalogue: code -> English wording (a `str.format` template over the reason's parameters).
_WORDINGS: dict[str, str] = {}


def wordings_register(wordings: Mapping[StrEnum, str]) -> None:
    """Declare the wordings of an owner's codes (call at import of the module that owns them). A code
    may be declared once; its wording's fields must be parameters the code's users pass."""
    for code, wording in wordings.items():
        key = str(code)
        if key in _WORDINGS and _WORDINGS[key] != wording:
            raise ValueError(f"reason code {key} has two wordings")
        _WORDINGS[key] = wording


def wording_of(code: str) -> str | None:
    return _WORDINGS.get(code)


def wordings_all() -> Mapping[str, str]:
    return dict(_WORDINGS)


def wording_fields(wording: str) -> set[str]:
    """The parameter names a wording uses (`{rate:.3f}` -> `rate`)."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(wording) if name}


@dataclass(frozen=True)
class Words:
    """What the edge passes in: its translation of a wording (`gettext`) and of a code (`term_label`)."""

    translate: Callable[[str], str]
    term: Callable[[str], str]
    join: str = gettext_noop("; ")  # between sentences, translated like a wording


# English as a service that has no reader writes it (a run's error message, a log line): the
# wordings as declared, codes as they are (the English pages show them so too).
ENGLISH = Words(translate=lambda text: text, term=lambda code: code)


class ReasonsCode(StrEnum):
    SENTENCES = "reasons.sentences"


wordings_register({ReasonsCode.SENTENCES: gettext_noop("{sentences}")})


def sentences(values: Sequence[Reason | str]) -> Reason:
    """Several reasons as one (an attribution's summary, a horizon's basis), joined by `Words.join`."""
    return reason(ReasonsCode.SENTENCES, sentences=list(values))


def reason_render(value: Reason | str, *, words: Words) -> str:
    """A reason in words. A stored sentence from before codes is returned as it is; a code without a
    wording shows as the code and its parameters (the coverage test keeps that from shipping)."""
    if isinstance(value, str):
        return value
    wording = wording_of(value.code)
    params = {name: _param_render(param, words=words) for name, param in value.params.items()}
    if wording is None:
        shown = ", ".join(f"{name}={param}" for name, param in params.items())
        return f"{value.code}({shown})" if shown else value.code
    return words.translate(wording).format(**params)


def reason_payload(value: Any, *, words: Words) -> dict[str, Any]:
    """A stored reason as the API and the webhook give it: its `code` and `params` (None and {} for a
    sentence stored before codes) and its `message` in `words`' language."""
    read = value if isinstance(value, Reason) else stored_reason_read(value)
    if isinstance(read, str):
        return {"code": None, "params": {}, "message": read}
    return {**read.to_json(), "message": reason_render(read, words=words)}


def reasons_render(values: Sequence[Reason | str], *, words: Words) -> Iterator[str]:
    return (reason_render(value, words=words) for value in values)


class _Shown(str):
    """A rendered parameter that still formats like the number it was (`{rate:.3f}`)."""

    value: Any

    def __new__(cls, text: str, value: Any) -> _Shown:
        shown = super().__new__(cls, text)
        shown.value = value
        return shown

    def __format__(self, spec: str) -> str:
        if spec and isinstance(self.value, int | float) and not isinstance(self.value, bool):
            return format(self.value, spec)
        return str(self)  # a number's spec means nothing for a label, a nested reason or "—"


def _param_render(value: Any, *, words: Words) -> Any:
    if isinstance(value, Reason):
        return _Shown(reason_render(value, words=words), value)
    if isinstance(value, Term):
        return _Shown(words.term(value.code), value)
    if isinstance(value, list | tuple):
        # Reasons in a list are sentences of their own (`words.join`); other values a list (", ").
        join = words.translate(words.join) if any(isinstance(item, Reason) for item in value) else ", "
        return _Shown(join.join(str(_param_render(item, words=words)) for item in value), value)
    if value is None:
        return _Shown("—", value)
    return _Shown(str(value), value)

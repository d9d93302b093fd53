"""Parsing eval suites from JSONL or CSV into validated items. Pure: no Django.

Every problem is reported with where it is (line) and which field, so an upload can be fixed
in one go rather than one error at a time. Every form (JSON records, JSONL, CSV) goes through
`item_validate`, which refuses text the database cannot store (NUL, unpaired surrogates) in any
field, metadata keys and values included; JSON is parsed with a nesting limit and without NaN.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from engines.input_checks import (
    JSON_MAX_DEPTH,
    FieldCode,
    InputCode,
    InputProblem,
    json_loads,
    json_problem,
    text_problem,
)
from engines.reasons import ENGLISH, Reason, gettext_noop, reason, reason_render, wordings_register

ITEM_FIELDS = ("id", "input", "label", "reference", "language", "tags", "metadata")
MAX_ISSUES = 50
LANGUAGE_MAX_CHARS = 10


class SuiteFormatCode(StrEnum):
    EMPTY = "suite_format.empty"
    LABEL_OR_REFERENCE = "suite_format.label_or_reference"
    LANGUAGE_TOO_LONG = "suite_format.language_too_long"
    TAGS = "suite_format.tags"
    EACH_TAG = "suite_format.each_tag"
    AT_PATH = "suite_format.at_path"
    DUPLICATE_ID = "suite_format.duplicate_id"
    NO_ITEMS = "suite_format.no_items"
    NOT_UTF8 = "suite_format.undecodable"
    NOT_JSON = "suite_format.not_json"
    NOT_CSV = "suite_format.not_csv"
    EXTRA_CELLS = "suite_format.extra_cells"
    METADATA_JSON = "suite_format.metadata_json"
    NOT_A_LIST = "suite_format.not_a_list"
    PROBLEMS = "suite_format.problems"


wordings_register(
    {
        SuiteFormatCode.EMPTY: gettext_noop("must not be empty"),
        SuiteFormatCode.LABEL_OR_REFERENCE: gettext_noop("an item needs a label or a reference"),
        SuiteFormatCode.LANGUAGE_TOO_LONG: gettext_noop("at most {limit} characters (e.g. en, zh, mixed)"),
        SuiteFormatCode.TAGS: gettext_noop("must be a list of non-empty strings"),
        SuiteFormatCode.EACH_TAG: gettext_noop("each tag {problem}"),
        SuiteFormatCode.AT_PATH: gettext_noop("{path}: {problem}"),
        SuiteFormatCode.DUPLICATE_ID: gettext_noop("duplicate id '{id}' (first at {first})"),
        SuiteFormatCode.NO_ITEMS: gettext_noop("no items"),
        # `detail`: the library's own message (Python's, in English).
        SuiteFormatCode.NOT_UTF8: gettext_noop("not UTF-8: {detail}"),
        SuiteFormatCode.NOT_JSON: gettext_noop("not valid JSON: {detail} at column {column}"),
        SuiteFormatCode.NOT_CSV: gettext_noop("not valid CSV: {detail}"),
        SuiteFormatCode.EXTRA_CELLS: gettext_noop("more cells than header columns"),
        SuiteFormatCode.METADATA_JSON: gettext_noop("must be a JSON object ({detail})"),
        SuiteFormatCode.NOT_A_LIST: gettext_noop("must be a list of objects"),
        SuiteFormatCode.PROBLEMS: gettext_noop(
            "{problems} problem(s) in the suite; first: {first}: {problem}"
        ),
    }
)


@dataclass(frozen=True)
class SuiteItem:
    id: str
    input: str
    label: str = ""
    reference: str = ""
    language: str = ""
    tags: tuple[str, ...] = ()
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ParseIssue:
    where: str  # "line 3" or "items[2]"
    field: str  # "" when the whole record is at fault
    message: Reason

    @property
    def english(self) -> str:
        return reason_render(self.message, words=ENGLISH)

    @property
    def key(self) -> str:
        return f"{self.where}.{self.field}" if self.field else self.where


class SuiteFormatError(ValueError):
    """The suite's problems (`issues`, at most MAX_ISSUES); `reason` sums them up (its English is the
    exception's text, for logs)."""

    def __init__(self, issues: list[ParseIssue]):
        self.reason = reason(
            SuiteFormatCode.PROBLEMS, problems=len(issues), first=issues[0].key, problem=issues[0].message
        )
        super().__init__(reason_render(self.reason, words=ENGLISH))
        self.issues = issues


def _refused(exc: ValueError) -> Reason | str:
    """Why `json_loads` refused a document: our own reason (too deep, NaN), or the parser's text."""
    return exc.reason if isinstance(exc, InputProblem) else str(exc)


def _string(record: dict, name: str, issues: list[ParseIssue], where: str) -> str:
    value = record.get(name, "")
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and name in ("id", "label"):
        return str(value)
    if not isinstance(value, str):
        issues.append(ParseIssue(where, name, reason(FieldCode.STRING)))
        return ""
    problem = text_problem(value)
    if problem:
        issues.append(ParseIssue(where, name, problem))
        return ""
    return value


def item_validate(
    record: object, *, where: str, default_id: str, issues: list[ParseIssue]
) -> SuiteItem | None:
    if not isinstance(record, dict):
        issues.append(ParseIssue(where, "", reason(FieldCode.OBJECT)))
        return None
    before = len(issues)
    for name in record:
        if name not in ITEM_FIELDS:
            issues.append(ParseIssue(where, name, reason(FieldCode.UNKNOWN_KEY, known=list(ITEM_FIELDS))))
    item_id = _string(record, "id", issues, where).strip() or default_id
    text = _string(record, "input", issues, where)
    if "input" not in record:
        issues.append(ParseIssue(where, "input", reason(FieldCode.REQUIRED)))
    elif not text.strip() and not any(i.field == "input" and i.where == where for i in issues):
        issues.append(ParseIssue(where, "input", reason(SuiteFormatCode.EMPTY)))
    label = _string(record, "label", issues, where).strip()
    reference = _string(record, "reference", issues, where)
    if not label and not reference.strip() and "input" in record:
        issues.append(ParseIssue(where, "label", reason(SuiteFormatCode.LABEL_OR_REFERENCE)))
    language = _string(record, "language", issues, where).strip()
    if len(language) > LANGUAGE_MAX_CHARS:
        issues.append(
            ParseIssue(where, "language", reason(SuiteFormatCode.LANGUAGE_TOO_LONG, limit=LANGUAGE_MAX_CHARS))
        )
    tags = record.get("tags", [])
    if tags is None:
        tags = []
    if not isinstance(tags, list) or not all(isinstance(t, str) and t.strip() for t in tags):
        issues.append(ParseIssue(where, "tags", reason(SuiteFormatCode.TAGS)))
        tags = []
    elif any(problem := text_problem(t) for t in tags):
        issues.append(ParseIssue(where, "tags", reason(SuiteFormatCode.EACH_TAG, problem=problem)))
    metadata = record.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        issues.append(ParseIssue(where, "metadata", reason(FieldCode.OBJECT)))
    elif found := json_problem(metadata, path="metadata"):
        issues.append(
            ParseIssue(where, "metadata", reason(SuiteFormatCode.AT_PATH, path=found[0], problem=found[1]))
        )
    if len(issues) > before:
        return None
    return SuiteItem(
        id=item_id,
        input=text,
        label=label,
        reference=reference,
        language=language,
        tags=tuple(t.strip() for t in tags),
        metadata=metadata,
    )


def _finish(pairs: Iterable[tuple[str, SuiteItem | None]], issues: list[ParseIssue]) -> list[SuiteItem]:
    items: list[SuiteItem] = []
    seen: dict[str, str] = {}
    for where, item in pairs:
        if item is None:
            continue
        if item.id in seen:
            issues.append(
                ParseIssue(where, "id", reason(SuiteFormatCode.DUPLICATE_ID, id=item.id, first=seen[item.id]))
            )
            continue
        seen[item.id] = where
        items.append(item)
    if not items and not issues:
        issues.append(ParseIssue("file", "", reason(SuiteFormatCode.NO_ITEMS)))
    if issues:
        raise SuiteFormatError(issues[:MAX_ISSUES])
    return items


def suite_parse_jsonl(content: bytes, *, max_depth: int = JSON_MAX_DEPTH) -> list[SuiteItem]:
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SuiteFormatError(
            [ParseIssue("file", "", reason(SuiteFormatCode.NOT_UTF8, detail=str(exc)))]
        ) from None
    issues: list[ParseIssue] = []
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record = json_loads(line, max_depth=max_depth)
        except json.JSONDecodeError as exc:
            issues.append(
                ParseIssue(where, "", reason(SuiteFormatCode.NOT_JSON, detail=exc.msg, column=exc.colno))
            )
            continue
        except ValueError as exc:  # too deep, NaN or Infinity
            issues.append(ParseIssue(where, "", reason(InputCode.UNREADABLE, detail=_refused(exc))))
            continue
        pairs.append((where, item_validate(record, where=where, default_id=str(number), issues=issues)))
    return _finish(pairs, issues)


def suite_parse_csv(content: bytes, *, max_depth: int = JSON_MAX_DEPTH) -> list[SuiteItem]:
    """CSV with a header row; `tags` separated by '|', `metadata` as a JSON object."""
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SuiteFormatError(
            [ParseIssue("file", "", reason(SuiteFormatCode.NOT_UTF8, detail=str(exc)))]
        ) from None
    reader = csv.DictReader(io.StringIO(text))
    issues: list[ParseIssue] = []
    pairs = []
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a cell over csv's field size limit: the rest cannot be read
            issues.append(
                ParseIssue(
                    f"line {reader.line_num + 1}", "", reason(SuiteFormatCode.NOT_CSV, detail=str(exc))
                )
            )
            break
        where = f"line {reader.line_num}"
        if None in record:
            issues.append(ParseIssue(where, "", reason(SuiteFormatCode.EXTRA_CELLS)))
            continue
        record = {k: v for k, v in record.items() if v not in (None, "") or k == "input"}
        if "tags" in record:
            record["tags"] = [t for t in (part.strip() for part in record["tags"].split("|")) if t]
        if "metadata" in record:
            try:
                record["metadata"] = json_loads(record["metadata"], max_depth=max_depth)
            except ValueError as exc:
                issues.append(
                    ParseIssue(where, "metadata", reason(SuiteFormatCode.METADATA_JSON, detail=_refused(exc)))
                )
                continue
        pairs.append(
            (where, item_validate(record, where=where, default_id=str(reader.line_num), issues=issues))
        )
    return _finish(pairs, issues)


def suite_parse_records(records: object) -> list[SuiteItem]:
    """Items given as a JSON array (the API's JSON body)."""
    if not isinstance(records, list):
        raise SuiteFormatError([ParseIssue("items", "", reason(SuiteFormatCode.NOT_A_LIST))])
    issues: list[ParseIssue] = []
    pairs = [
        (f"items[{i}]", item_validate(r, where=f"items[{i}]", default_id=str(i + 1), issues=issues))
        for i, r in enumerate(records)
    ]
    return _finish(pairs, issues)


def suite_content_hash(items: Iterable[SuiteItem]) -> str:
    digest = hashlib.sha256()
    for item in items:
        record = asdict(item)
        record["tags"] = list(item.tags)
        digest.update(json.dumps(record, sort_keys=True, ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()

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

from engines.input_checks import JSON_MAX_DEPTH, json_loads, json_problem, text_problem
from engines.reasons import ENGLISH, Reason, reason_render

ITEM_FIELDS = ("id", "input", "label", "reference", "language", "tags", "metadata")
MAX_ISSUES = 50


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
    message: Reason | str  # a sentence: not coded yet

    @property
    def english(self) -> str:
        return reason_render(self.message, words=ENGLISH)

    @property
    def key(self) -> str:
        return f"{self.where}.{self.field}" if self.field else self.where


class SuiteFormatError(ValueError):
    def __init__(self, issues: list[ParseIssue]):
        super().__init__(
            f"{len(issues)} problem(s) in the suite; first: {issues[0].key}: {issues[0].english}"
        )
        self.issues = issues


def _string(record: dict, name: str, issues: list[ParseIssue], where: str) -> str:
    value = record.get(name, "")
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and name in ("id", "label"):
        return str(value)
    if not isinstance(value, str):
        issues.append(ParseIssue(where, name, "must be a string"))
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
        issues.append(ParseIssue(where, "", "must be a JSON object"))
        return None
    before = len(issues)
    for name in record:
        if name not in ITEM_FIELDS:
            issues.append(ParseIssue(where, name, f"unknown field; allowed: {', '.join(ITEM_FIELDS)}"))
    item_id = _string(record, "id", issues, where).strip() or default_id
    text = _string(record, "input", issues, where)
    if "input" not in record:
        issues.append(ParseIssue(where, "input", "required"))
    elif not text.strip() and not any(i.field == "input" and i.where == where for i in issues):
        issues.append(ParseIssue(where, "input", "must not be empty"))
    label = _string(record, "label", issues, where).strip()
    reference = _string(record, "reference", issues, where)
    if not label and not reference.strip() and "input" in record:
        issues.append(ParseIssue(where, "label", "an item needs a label or a reference"))
    language = _string(record, "language", issues, where).strip()
    if len(language) > 10:
        issues.append(ParseIssue(where, "language", "at most 10 characters (e.g. en, zh, mixed)"))
    tags = record.get("tags", [])
    if tags is None:
        tags = []
    if not isinstance(tags, list) or not all(isinstance(t, str) and t.strip() for t in tags):
        issues.append(ParseIssue(where, "tags", "must be a list of non-empty strings"))
        tags = []
    elif any(problem := text_problem(t) for t in tags):
        issues.append(ParseIssue(where, "tags", f"each tag {problem}"))
    metadata = record.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        issues.append(ParseIssue(where, "metadata", "must be an object"))
    elif found := json_problem(metadata, path="metadata"):
        issues.append(ParseIssue(where, "metadata", f"{found[0]}: {found[1]}"))
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
            issues.append(ParseIssue(where, "id", f"duplicate id {item.id!r} (first at {seen[item.id]})"))
            continue
        seen[item.id] = where
        items.append(item)
    if not items and not issues:
        issues.append(ParseIssue("file", "", "no items"))
    if issues:
        raise SuiteFormatError(issues[:MAX_ISSUES])
    return items


def suite_parse_jsonl(content: bytes, *, max_depth: int = JSON_MAX_DEPTH) -> list[SuiteItem]:
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SuiteFormatError([ParseIssue("file", "", f"not UTF-8: {exc}")]) from None
    issues: list[ParseIssue] = []
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record = json_loads(line, max_depth=max_depth)
        except json.JSONDecodeError as exc:
            issues.append(ParseIssue(where, "", f"not valid JSON: {exc.msg} at column {exc.colno}"))
            continue
        except ValueError as exc:  # too deep, NaN or Infinity
            issues.append(ParseIssue(where, "", f"not valid JSON: {exc}"))
            continue
        pairs.append((where, item_validate(record, where=where, default_id=str(number), issues=issues)))
    return _finish(pairs, issues)


def suite_parse_csv(content: bytes, *, max_depth: int = JSON_MAX_DEPTH) -> list[SuiteItem]:
    """CSV with a header row; `tags` separated by '|', `metadata` as a JSON object."""
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SuiteFormatError([ParseIssue("file", "", f"not UTF-8: {exc}")]) from None
    reader = csv.DictReader(io.StringIO(text))
    issues: list[ParseIssue] = []
    pairs = []
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a cell over csv's field size limit: the rest cannot be read
            issues.append(ParseIssue(f"line {reader.line_num + 1}", "", f"not valid CSV: {exc}"))
            break
        where = f"line {reader.line_num}"
        if None in record:
            issues.append(ParseIssue(where, "", "more cells than header columns"))
            continue
        record = {k: v for k, v in record.items() if v not in (None, "") or k == "input"}
        if "tags" in record:
            record["tags"] = [t for t in (part.strip() for part in record["tags"].split("|")) if t]
        if "metadata" in record:
            try:
                record["metadata"] = json_loads(record["metadata"], max_depth=max_depth)
            except ValueError as exc:
                issues.append(ParseIssue(where, "metadata", f"must be a JSON object ({exc})"))
                continue
        pairs.append(
            (where, item_validate(record, where=where, default_id=str(reader.line_num), issues=issues))
        )
    return _finish(pairs, issues)


def suite_parse_records(records: object) -> list[SuiteItem]:
    """Items given as a JSON array (the API's JSON body)."""
    if not isinstance(records, list):
        raise SuiteFormatError([ParseIssue("items", "", "must be a list of objects")])
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

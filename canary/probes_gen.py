"""Stress probes: inputs aimed at a model version's known weaknesses, each with its expected label.

Two sources:

- `demo_probes_build`: SYNTHETIC probes for the bundled demo family "contract-assistant", aimed at
  the weaknesses of its bag-of-words V3 (`WEAKNESSES`). Every clause comes from the demo's EVAL
  templates and slot values (`engines.demo.dataset`), never from the training split, and every
  probe says `metadata["synthetic"] = True`. Deterministic: the same seed gives identical probes.
- `probes_jsonl_parse`: probe sets of real families, imported from JSONL.

Pure Python: no Django, no database.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from enum import StrEnum

from engines.demo.dataset import (
    _BOILERPLATE,
    _CONFLICT_TEMPLATES,
    _EVAL_TEMPLATES,
    CLAUSE_TYPES,
    _boilerplate_draw,
    _clause_render,
    _mixed_build,
    _ocr_apply,
)
from engines.input_checks import (
    JSON_MAX_DEPTH,
    FieldCode,
    InputProblem,
    json_loads,
    json_problem,
    text_problem,
)
from engines.reasons import ENGLISH, Reason, gettext_noop, reason, reason_render, wordings_register

WEAKNESSES = ("long_contract", "mixed_language", "ocr_noise", "clause_conflict")
DEMO_FAMILY = "contract-assistant"
LONG_CONTRACT_MIN_TOKENS = 2000
_LONG_CONTRACT_MAX_TOKENS = 2600
_LANGUAGES = ("en", "zh")

# The second clause type each conflict template mentions (as trigger, reference or exception), by
# template position; the English and Chinese tuples of `_CONFLICT_TEMPLATES` share the order. Read
# off the comments there; a test checks the shapes still match.
_CONFLICT_MENTIONS: dict[str, tuple[str, ...]] = {
    "payment": ("termination", "deposit", "termination"),
    "termination": ("payment", "confidentiality", "liquidated_damages"),
    "liability": ("confidentiality", "termination", "payment"),
    "confidentiality": ("termination", "payment", "governing_law"),
    "force_majeure": ("payment", "liquidated_damages", "termination"),
    "governing_law": ("confidentiality", "termination", "liquidated_damages"),
    "liquidated_damages": ("payment", "confidentiality", "termination"),
    "deposit": ("payment", "termination", "liquidated_damages"),
}

_CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class ProbeSpec:
    id: str
    weakness: str
    input: str
    expected_label: str
    language: str  # "en", "zh" or "mixed" for the demo; whatever a real family's file says
    metadata: dict = field(default_factory=dict)  # JSON-serialisable


def probe_tokens(*, text: str, language: str) -> int:
    """Length as the long-contract rule counts it: CJK characters for Chinese, else words."""
    return len(_CJK.findall(text)) if language == "zh" else len(text.split())


# ---------------------------------------------------------------------------------------------
# Demo probes (SYNTHETIC)


def _plan(*, per_weakness: int, languages: tuple[str, ...]) -> list[tuple[str, str]]:
    """(label, language) for each probe: labels round-robin, languages alternating per label so
    both the labels and the languages are balanced (counts differ by at most one)."""
    plan = []
    for i in range(per_weakness):
        label_index, round_ = i % len(CLAUSE_TYPES), i // len(CLAUSE_TYPES)
        plan.append((CLAUSE_TYPES[label_index], languages[(label_index + round_) % len(languages)]))
    return plan


def _eval_clause(*, rng: random.Random, label: str, language: str, seen: set[str]) -> str:
    return _clause_render(
        rng=rng, templates=_EVAL_TEMPLATES[label][language], language=language, split="eval", seen=seen
    )


def _long_contract(*, rng: random.Random, clause: str, language: str) -> tuple[str, dict]:
    """The clause buried mid-way in a contract of at least 2000 tokens (up to about 2700) of
    unrelated boilerplate.

    The boilerplate pool is smaller than that, so the body is several shuffled passes over it
    (as in a master agreement whose schedules repeat the general terms)."""
    target = rng.randint(LONG_CONTRACT_MIN_TOKENS, _LONG_CONTRACT_MAX_TOKENS)
    title = "MASTER SERVICES AND SUPPLY CONTRACT" if language == "en" else "服务与供货总合同"
    sentences: list[str] = []
    total = probe_tokens(text=title + " " + clause, language=language)
    while total < target:
        batch = _boilerplate_draw(rng=rng, language=language, size=10**9)  # one whole shuffled pass
        if sentences and batch[0] == sentences[-1]:
            batch.append(batch.pop(0))
        for sentence in batch:
            sentences.append(sentence)
            total += probe_tokens(text=sentence, language=language)  # section headings only add
            if total >= target:
                break
    at = rng.randint(len(sentences) // 4, 3 * len(sentences) // 4)
    sentences.insert(at, clause)
    sections = []
    for number, start in enumerate(range(0, len(sentences), 3), start=1):
        chunk = sentences[start : start + 3]
        sections.append(
            f"{number}. " + " ".join(chunk) if language == "en" else f"第{number}条 " + "".join(chunk)
        )
    text = title + "\n\n" + "\n\n".join(sections)
    tokens = probe_tokens(text=text, language=language)
    if tokens < LONG_CONTRACT_MIN_TOKENS:  # cannot happen: the loop above counts no heading
        raise RuntimeError(f"long contract of only {tokens} tokens")
    return text, {"tokens": tokens, "clause_section": at // 3 + 1, "sections": len(sections)}


def _mixed_contract(*, rng: random.Random, clause: str) -> tuple[str, dict]:
    """The English clause in an article of a Chinese contract (beside one Chinese sentence, as the
    dataset builds it), with 0-4 more Chinese articles around it."""
    article = _mixed_build(rng=rng, clause=clause, clause_language="en")  # "第N条 ..." (N >= 3)
    heading = re.match(r"第(\d+)条", article)
    assert heading is not None
    number = int(heading.group(1))
    before, after = rng.randint(0, 2), rng.randint(0, 2)
    pool = [sentence for sentence in _BOILERPLATE["zh"] if sentence not in article]
    others = iter(rng.sample(pool, before + after))
    articles = [f"第{number - before + k}条 {next(others)}" for k in range(before)]
    articles.append(article)
    articles += [f"第{number + 1 + k}条 {next(others)}" for k in range(after)]
    return "\n".join(articles), {"clause_language": "en", "host_language": "zh"}


def _conflict_clause(
    *, rng: random.Random, label: str, language: str, rotation: int, seen: set[str]
) -> tuple[str, dict]:
    """A conflict clause, rotating over the label's templates; one that is used up passes on."""
    templates = _CONFLICT_TEMPLATES[label][language]
    for step in range(len(templates)):
        index = (rotation + step) % len(templates)
        try:
            text = _clause_render(
                rng=rng, templates=(templates[index],), language=language, split="eval", seen=seen
            )
        except RuntimeError:
            continue
        mentions = _CONFLICT_MENTIONS.get(label, ())
        return text, {"mentions": mentions[index] if index < len(mentions) else None}
    raise ValueError(f"per_weakness too large: the {language} {label} conflict templates are used up")


def demo_probes_build(*, seed: int = 0, per_weakness: int = 40) -> list[ProbeSpec]:
    """SYNTHETIC stress probes for the demo family, `per_weakness` for each of WEAKNESSES.

    Labels are balanced round-robin over CLAUSE_TYPES; languages alternate English/Chinese
    except for `mixed_language` (English clauses in Chinese contracts, language "mixed", labelled
    with the English clause's type). Ids: `probe-<weakness>-<language>-<label>-<nn>`.
    """
    if per_weakness < 1:
        raise ValueError("per_weakness must be at least 1")
    probes: list[ProbeSpec] = []
    inputs: set[str] = set()
    for weakness in WEAKNESSES:
        rng = random.Random(f"evalhub-probes:{seed}:{weakness}")
        clauses: set[str] = set()  # no clause twice within a weakness
        counters: dict[tuple[str, str], int] = {}
        languages = ("en",) if weakness == "mixed_language" else _LANGUAGES
        for label, language in _plan(per_weakness=per_weakness, languages=languages):
            k = counters[(label, language)] = counters.get((label, language), -1) + 1
            for _ in range(50):  # re-roll the (unseen) case of an input another probe already has
                extra: dict = {}
                if weakness == "clause_conflict":
                    clause, extra = _conflict_clause(
                        rng=rng, label=label, language=language, rotation=k, seen=clauses
                    )
                else:
                    clause = _eval_clause(rng=rng, label=label, language=language, seen=clauses)
                if weakness == "long_contract":
                    text, extra = _long_contract(rng=rng, clause=clause, language=language)
                elif weakness == "mixed_language":
                    text, extra = _mixed_contract(rng=rng, clause=clause)
                elif weakness == "ocr_noise":
                    text = _ocr_apply(rng=rng, text=clause, language=language)
                else:
                    text = clause
                if text not in inputs:
                    break
            else:
                raise RuntimeError(f"could not draw a new {weakness} probe for {label}")
            inputs.add(text)
            probe_language = "mixed" if weakness == "mixed_language" else language
            probes.append(
                ProbeSpec(
                    id=f"probe-{weakness}-{probe_language}-{label}-{k:02d}",
                    weakness=weakness,
                    input=text,
                    expected_label=label,
                    language=probe_language,
                    metadata={"synthetic": True, "family": DEMO_FAMILY, "clause": clause, **extra},
                )
            )
    return probes


# ---------------------------------------------------------------------------------------------
# JSONL import


class ProbeFormatCode(StrEnum):
    EMPTY = "probe_format.empty"
    NOT_JSON = "probe_format.not_json"
    UNREADABLE = "probe_format.unreadable"
    NOT_UTF8 = "probe_format.undecodable"
    DUPLICATE = "probe_format.duplicate"
    AT_PATH = "probe_format.at_path"
    NO_PROBES = "probe_format.no_probes"
    AT_LINE = "probe_format.at_line"
    AT_FIELD = "probe_format.at_field"


wordings_register(
    {
        ProbeFormatCode.EMPTY: gettext_noop("must not be empty"),
        # `detail`: the JSON parser's own message (Python's, in English), or why the value is refused.
        ProbeFormatCode.NOT_JSON: gettext_noop("invalid JSON ({detail}, column {column})"),
        ProbeFormatCode.UNREADABLE: gettext_noop("invalid JSON ({detail})"),
        ProbeFormatCode.NOT_UTF8: gettext_noop("not valid UTF-8"),
        ProbeFormatCode.DUPLICATE: gettext_noop("duplicate of line {line}"),
        ProbeFormatCode.AT_PATH: gettext_noop("{path}: {problem}"),
        ProbeFormatCode.NO_PROBES: gettext_noop("no probes in the file"),
        ProbeFormatCode.AT_LINE: gettext_noop("line {line}: {problem}"),
        ProbeFormatCode.AT_FIELD: gettext_noop("line {line}.{field}: {problem}"),
    }
)


class ProbeFormatError(ValueError):
    """A probe file that cannot be imported; `line` is 1-based, `field` None for a whole line.
    `message` says what is wrong there, `reason` says it with the line and field (its English is the
    exception's text, for logs)."""

    def __init__(self, line: int, field: str | None, message: Reason):
        if field:
            self.reason = reason(ProbeFormatCode.AT_FIELD, line=line, field=field, problem=message)
        else:
            self.reason = reason(ProbeFormatCode.AT_LINE, line=line, problem=message)
        super().__init__(reason_render(self.reason, words=ENGLISH))
        self.line = line
        self.field = field
        self.message = message


_REQUIRED = ("id", "input", "expected_label", "weakness")
_OPTIONAL = ("language", "metadata")


def _string_field(obj: dict, key: str, number: int) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise ProbeFormatError(number, key, reason(FieldCode.STRING))
    if not value.strip():
        raise ProbeFormatError(number, key, reason(ProbeFormatCode.EMPTY))
    problem = text_problem(value)
    if problem:
        raise ProbeFormatError(number, key, problem)
    return value if key == "input" else value.strip()


def _line_object(line: str, number: int, *, max_depth: int) -> dict:
    """One line's JSON object, with every required key and no unknown one."""
    try:
        obj = json_loads(line, max_depth=max_depth)
    except json.JSONDecodeError as exc:
        raise ProbeFormatError(
            number, None, reason(ProbeFormatCode.NOT_JSON, detail=exc.msg, column=exc.colno)
        ) from None
    except ValueError as exc:  # too deep, NaN or Infinity: our reason; else the parser's text
        detail = exc.reason if isinstance(exc, InputProblem) else str(exc)
        raise ProbeFormatError(number, None, reason(ProbeFormatCode.UNREADABLE, detail=detail)) from None
    if not isinstance(obj, dict):
        raise ProbeFormatError(number, None, reason(FieldCode.OBJECT))
    unknown = sorted(set(obj) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise ProbeFormatError(
            number, unknown[0], reason(FieldCode.UNKNOWN_KEY, known=[*_REQUIRED, *_OPTIONAL])
        )
    for key in _REQUIRED:
        if key not in obj:
            raise ProbeFormatError(number, key, reason(FieldCode.REQUIRED))
    return obj


def probes_jsonl_parse(*, content: bytes, max_depth: int = JSON_MAX_DEPTH) -> list[ProbeSpec]:
    """Probes from a JSONL file: one object per line, blank lines ignored.

    Keys: `id`, `input`, `expected_label`, `weakness` (required, non-empty strings; ids unique),
    `language` (optional; detected from the input when absent or null) and `metadata` (optional
    object). Any other key is refused, and so is text the database cannot store (NUL, unpaired
    surrogates) and JSON nested deeper than `max_depth`. Raises ProbeFormatError naming the line and
    field.
    """
    from engines.backends.base import language_of  # imports the Celery app: only when parsing

    probes: list[ProbeSpec] = []
    lines_by_id: dict[str, int] = {}
    for number, raw in enumerate(content.split(b"\n"), start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProbeFormatError(number, None, reason(ProbeFormatCode.NOT_UTF8)) from None
        if not line.strip():
            continue
        obj = _line_object(line, number, max_depth=max_depth)
        probe_id, text, label, weakness = (_string_field(obj, key, number) for key in _REQUIRED)
        if probe_id in lines_by_id:
            raise ProbeFormatError(
                number, "id", reason(ProbeFormatCode.DUPLICATE, line=lines_by_id[probe_id])
            )
        lines_by_id[probe_id] = number
        language = obj.get("language")
        language = language_of(text) if language is None else _string_field(obj, "language", number)
        metadata = obj.get("metadata")
        if metadata is None:
            metadata = {}
        elif not isinstance(metadata, dict):
            raise ProbeFormatError(number, "metadata", reason(FieldCode.OBJECT))
        elif found := json_problem(metadata, path="metadata"):
            raise ProbeFormatError(
                number, "metadata", reason(ProbeFormatCode.AT_PATH, path=found[0], problem=found[1])
            )
        probes.append(
            ProbeSpec(
                id=probe_id,
                weakness=weakness,
                input=text,
                expected_label=label,
                language=language,
                metadata=metadata,
            )
        )
    if not probes:
        raise ProbeFormatError(1, None, reason(ProbeFormatCode.NO_PROBES))
    return probes

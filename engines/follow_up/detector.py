"""Follow-up detection for gate layer 2: did the user have to follow up on an answer?

Given the previous user question, the assistant's answer and the user's next turn, the next turn is
one of three kinds:

- "follow_up": more about the SAME matter, typically because the answer was wrong, vague or
  unclear ("What if the buyer pays late?", "那如果不可抗力呢？", "You didn't answer...", a repeat);
- "deepening": a new but related question after an accepted answer ("Thanks. Now, how long is the
  notice period?", "明白了。那保密条款一般约定多长期限？");
- "new": an unrelated matter, a greeting, thanks only, another contract.

Method: ordered rules, the first that fires decides, and the judgement's `reason` names it.

1. A turn more than `window_seconds` after the answer is "new" (an unknown gap counts as inside).
2. A topic-reset marker ("unrelated", "new contract", "换个话题") -> "new".
3. A clarifying marker ("what do you mean", "you didn't", "不明白", "再解释") -> "follow_up".
4. A greeting or closing ("hello", "bye", "在吗") -> "new".
5. An acknowledgement ("thanks", "got it", "明白了") or a move-on marker ("next", "另外"): nothing
   else in the turn -> "new"; still the same matter (similarity >= same_matter) -> "follow_up"; a
   related question -> "deepening"; an unrelated one -> "new".
6. A follow-up marker ("what if", "why", "那如果", "为什么", "…呢"): a short turn -> "follow_up";
   otherwise the marker adds `follow_up_marker_bonus` to the similarity before rule 7.
7. Related (similarity >= related) -> "follow_up", else "new". On the dev split a related question
   without an acknowledgement was nearly always about the same matter: users who accept an answer
   say so before moving on, so "deepening" comes from rule 5 only.

Similarity is that of the next turn to the previous question or to the answer, whichever is higher.
English pairs use the cosine of MiniLM sentence embeddings. MiniLM knows only ~244 CJK characters
(Chinese text mostly becomes [UNK], so all Chinese sentences look alike to it), so pairs written
mostly in CJK characters use `bigram_weight` x character-bigram overlap + the rest x cosine, with
their own cut-offs. Thresholds and marker lists were tuned on the dev split of the hand-labelled set
`engines/follow_up/data/follow_up_pairs.jsonl`; `follow_up_evaluate` measures them
(`manage.py followup_eval`).

Pure: no Django. `embed` is any callable mapping texts to L2-normalised rows (engines.embeddings).

    judgements = follow_ups_detect(pairs=pairs, embed=sentence_embed)
    rate = sum(j.is_follow_up for j in judgements) / len(judgements)
"""

from __future__ import annotations

import json
import math
import re
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

KINDS = ("follow_up", "deepening", "new")
FOLLOW_UP, DEEPENING, NEW = KINDS
SPLITS = ("train", "dev", "test")
LANGUAGES = ("en", "zh")
SET_PATH = Path(__file__).resolve().parent / "data" / "follow_up_pairs.jsonl"

# Markers, matched on the NFKC-normalised, lower-cased turn. "^" anchors a marker at the start of the
# turn, "…" stands for a short gap; a marker that starts or ends with a Latin letter or digit must
# start or end on a word boundary ("ok" does not match "book").
RESET_MARKERS = (
    "unrelated", "different subject", "different topic", "switch topics", "change the subject",
    "new contract", "another agreement", "another contract", "different contract", "never mind",
    "forget the", "by the way",
    "换个话题", "无关", "新合同", "一份新的", "另一份", "换一份", "先不管", "题外话", "对了",
)  # fmt: skip
CLARIFY_MARKERS = (
    "what do you mean", "what does that mean", "meaning what", "you mean", "i don't understand",
    "i do not understand", "don't get", "confused", "not clear", "unclear", "explain", "simpler",
    "again", "reconsider", "you didn't", "you did not", "you said", "are you sure", "can't be right",
    "that's not", "isn't it", "is it?", "doesn't it", "right?", "i thought", "just yes", "just no",
    "sorry", "wait", "but", "^no,",
    "什么意思", "不明白", "不懂", "没懂", "糊涂", "解释", "再说", "再看看", "重新", "再仔细",
    "再回答", "你没", "没回答", "确定吗", "不对", "不是…吗", "吧?", "等等", "我觉得", "具体",
    "举个例子", "就一个字", "还是不", "但是", "可是",
)  # fmt: skip
GREETING_MARKERS = (
    "^hi", "^hello", "^hey", "good morning", "good afternoon", "good evening", "bye", "that's all",
    "back tomorrow", "see you",
    "你好", "您好", "早上好", "下午好", "晚上好", "在吗", "^嗨", "明天再", "今天就到这里", "再见",
)  # fmt: skip
ACK_MARKERS = (
    "thanks", "thank you", "thank u", "thx", "cheers", "got it", "understood", "makes sense",
    "that helps", "very helpful", "good to know", "that's clear", "that answers it",
    "that's what i needed", "that's correct", "^ok", "^okay", "^alright", "^right", "^great",
    "^perfect", "^good", "^nice", "^cool", "^super", "^brilliant", "^lovely", "^clear", "^yes",
    "谢谢", "多谢", "感谢", "谢啦", "谢了", "好的", "好滴", "好吧", "^好", "明白", "了解", "懂了",
    "知道了", "^收到", "清楚", "^行", "不错", "太好了", "^可以", "很有帮助", "解释得很好",
)  # fmt: skip
MOVE_ON_MARKERS = (
    "another question", "another thing", "next question", "next clause", "^next", "moving on",
    "move on", "now,", "now can", "anyway", "separately", "the same contract", "elsewhere",
    "另外", "还有一个问题", "下一个", "下一条", "接下来", "接着", "再帮我看", "同一份合同", "反过来",
)  # fmt: skip
FOLLOW_UP_MARKERS = (
    "what if", "and if", "what about", "how about", "why", "which", "then what", "what happens",
    "what counts", "count as", "^so ", "^and ", "does that", "is that", "does it", "those", "here",
    "too",
    "那如果", "如果", "要是", "…呢", "为什么", "还是", "怎么办", "算不算", "也算", "所以", "^那",
    "那是不是", "这里", "会怎样", "怎么算", "什么算",
)  # fmt: skip

# An acknowledgement with at most this many words (or CJK characters) left besides its markers is
# acknowledgement only ("Lovely, thanks a lot!", "非常感谢！").
_ACK_ONLY_REST = 2
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SIMILARITY_FIELDS = (
    "related_similarity",
    "same_matter_similarity",
    "related_similarity_zh",
    "same_matter_similarity_zh",
)


@dataclass(frozen=True)
class FollowUpThresholds:
    """Cut-offs for one model family (defaults tuned on the dev split)."""

    window_seconds: float = 600.0  # a later next turn is never a follow-up
    # English (cosine) similarity at or above which a turn is on a related matter, and at or above which
    # it is still on the same matter even after an acknowledgement ("OK, and if the buyer pays late?").
    related_similarity: float = 0.18
    same_matter_similarity: float = 0.65
    # The same two for mostly-CJK pairs, whose similarity mixes bigram overlap and cosine.
    related_similarity_zh: float = 0.15
    same_matter_similarity_zh: float = 0.50
    bigram_weight: float = 0.7  # share of the character-bigram overlap in the mostly-CJK similarity
    follow_up_marker_bonus: float = 0.10  # added to the similarity of a turn with a follow-up marker
    short_turn_words: int = 4  # a follow-up-marked turn this short (words + CJK characters / 2)
    # is a follow-up whatever its similarity ("Why?", "为什么？")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FollowUpThresholds:
        """Thresholds from a per-family dict (JSON), missing keys at their defaults. A wrong key, type or
        range raises ValueError starting with the field name (construction checks ranges too)."""
        if data is not None and not isinstance(data, dict):
            raise ValueError(f"thresholds: must be an object of field: value, got {type(data).__name__}")
        data = dict(data or {})
        known = {field.name: field for field in fields(cls)}
        for key in data:
            if key not in known:
                raise ValueError(f"{key}: unknown field (known: {', '.join(known)})")
        for key, value in data.items():
            is_int = known[key].type == "int"
            if isinstance(value, bool) or not isinstance(value, int if is_int else (int, float)):
                raise ValueError(f"{key}: must be {'an integer' if is_int else 'a number'}")
            if not math.isfinite(value):
                raise ValueError(f"{key}: must be finite")
        # Checked above: an int for an int field, a number (made a float) for the others.
        values: dict[str, Any] = {
            key: (value if known[key].type == "int" else float(value)) for key, value in data.items()
        }
        return cls(**values)

    def __post_init__(self) -> None:
        if self.window_seconds <= 0:
            raise ValueError("window_seconds: must be a positive number")
        for name in _SIMILARITY_FIELDS:
            if not -1.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}: must be between -1 and 1")
        if self.related_similarity > self.same_matter_similarity:
            raise ValueError("related_similarity: must not exceed same_matter_similarity")
        if self.related_similarity_zh > self.same_matter_similarity_zh:
            raise ValueError("related_similarity_zh: must not exceed same_matter_similarity_zh")
        for name in ("bigram_weight", "follow_up_marker_bonus"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}: must be between 0 and 1")
        if self.short_turn_words < 0:
            raise ValueError("short_turn_words: must be 0 or more")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TurnPair:
    previous_question: str
    previous_answer: str
    next_turn: str
    gap_seconds: float | None = None  # None: unknown, treated as inside the window


@dataclass(frozen=True)
class FollowUpJudgement:
    kind: str  # one of KINDS
    question_similarity: float  # next turn vs previous question (the pair's script's measure)
    answer_similarity: float  # next turn vs previous answer
    markers: tuple[str, ...]  # every marker found in the next turn, as "group:marker"
    reason: str  # the rule that decided

    @property
    def is_follow_up(self) -> bool:
        return self.kind == FOLLOW_UP


def _normalise(text: str) -> str:
    """NFKC (full-width ？ -> ?), lower case, typographic apostrophes straightened, spaces collapsed."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(text.split())


def _marker_pattern(marker: str) -> re.Pattern[str]:
    anchored = marker.startswith("^")
    body = marker.removeprefix("^")
    pattern = ".{0,20}?".join(re.escape(part) for part in body.split("…"))
    if body[0].isascii() and body[0].isalnum():
        pattern = r"(?<![a-z0-9])" + pattern
    if body[-1].isascii() and body[-1].isalnum():
        pattern += r"(?![a-z0-9])"
    return re.compile((r"^\W*" if anchored else "") + pattern)


_GROUPS = {
    "reset": RESET_MARKERS,
    "clarify": CLARIFY_MARKERS,
    "greeting": GREETING_MARKERS,
    "ack": ACK_MARKERS,
    "move_on": MOVE_ON_MARKERS,
    "follow_up": FOLLOW_UP_MARKERS,
}
_PATTERNS = {group: [(m, _marker_pattern(m)) for m in markers] for group, markers in _GROUPS.items()}


def markers_find(text: str) -> dict[str, list[str]]:
    """The markers of each group found in `text` (normalised first), in list order."""
    text = _normalise(text)
    return {
        group: [marker for marker, pattern in patterns if pattern.search(text)]
        for group, patterns in _PATTERNS.items()
    }


def _turn_size(text: str) -> float:
    """Latin words + CJK characters / 2 (two characters make about one word)."""
    text = _normalise(text)
    return len(_LATIN_WORD.findall(text)) + len(_CJK.findall(text)) / 2


def _acknowledgement_only(text: str) -> bool:
    """Nothing but acknowledgement/move-on markers, give or take `_ACK_ONLY_REST` words or characters."""
    rest = _normalise(text)
    for group in ("ack", "move_on"):
        for _, pattern in _PATTERNS[group]:
            rest = pattern.sub(" ", rest)
    return len(_LATIN_WORD.findall(rest)) + len(_CJK.findall(rest)) <= _ACK_ONLY_REST


def is_mostly_cjk(text: str) -> bool:
    """More CJK characters than Latin letters."""
    return len(_CJK.findall(text)) > sum(1 for ch in text if ch.isascii() and ch.isalpha())


def bigram_similarity(a: str, b: str) -> float:
    """Overlap coefficient of the two texts' character-bigram sets, |A ∩ B| / min(|A|, |B|), over
    letters, digits and CJK characters only (normalised, spaces and punctuation dropped); 0.0 when a
    text has no bigram. Short turns count as similar when most of their bigrams occur in the other text."""
    sets = []
    for text in (a, b):
        chars = "".join(ch for ch in _normalise(text) if ch.isalnum())
        sets.append({chars[i : i + 2] for i in range(len(chars) - 1)})
    first, second = sets
    if not first or not second:
        return 0.0
    return len(first & second) / min(len(first), len(second))


def _similarity(*, cosine: float, turn: str, other: str, cjk: bool, thresholds: FollowUpThresholds) -> float:
    if not cjk:
        return cosine
    weight = thresholds.bigram_weight
    return weight * bigram_similarity(turn, other) + (1 - weight) * cosine


def follow_up_judge(
    *, pair: TurnPair, question_cosine: float, answer_cosine: float, thresholds: FollowUpThresholds
) -> FollowUpJudgement:
    """The kind of one pair's next turn, given the embedding cosines of the next turn to the previous
    question and answer (the rules of the module docstring)."""
    cjk = is_mostly_cjk(pair.next_turn + pair.previous_question)
    q_sim = _similarity(
        cosine=question_cosine,
        turn=pair.next_turn,
        other=pair.previous_question,
        cjk=cjk,
        thresholds=thresholds,
    )
    a_sim = _similarity(
        cosine=answer_cosine, turn=pair.next_turn, other=pair.previous_answer, cjk=cjk, thresholds=thresholds
    )
    found = markers_find(pair.next_turn)
    markers = tuple(f"{group}:{marker}" for group, names in found.items() for marker in names)
    similarity = max(q_sim, a_sim)
    same = thresholds.same_matter_similarity_zh if cjk else thresholds.same_matter_similarity
    related = thresholds.related_similarity_zh if cjk else thresholds.related_similarity
    measure = f"{'bigram+cosine' if cjk else 'cosine'} similarity {similarity:.2f}"

    def judged(kind: str, reason: str) -> FollowUpJudgement:
        return FollowUpJudgement(
            kind=kind, question_similarity=q_sim, answer_similarity=a_sim, markers=markers, reason=reason
        )

    if pair.gap_seconds is not None and pair.gap_seconds > thresholds.window_seconds:
        return judged(NEW, f"outside window ({pair.gap_seconds:g} s > {thresholds.window_seconds:g} s)")
    if found["reset"]:
        return judged(NEW, f"topic-reset marker '{found['reset'][0]}'")
    if found["clarify"]:
        return judged(FOLLOW_UP, f"clarifying marker '{found['clarify'][0]}'")
    if found["greeting"]:
        return judged(NEW, f"greeting or closing '{found['greeting'][0]}'")
    if found["ack"] or found["move_on"]:
        marker = (found["ack"] + found["move_on"])[0]
        if _acknowledgement_only(pair.next_turn):
            return judged(NEW, f"acknowledgement only '{marker}'")
        if similarity >= same:
            return judged(FOLLOW_UP, f"acknowledgement '{marker}' but the same matter: {measure} >= {same:g}")
        if similarity >= related:
            return judged(
                DEEPENING, f"acknowledgement '{marker}', then a related question: {measure} >= {related:g}"
            )
        return judged(NEW, f"acknowledgement '{marker}', then an unrelated question: {measure} < {related:g}")
    if found["follow_up"]:
        # A marked turn leans on the previous one: short ones always, longer ones with a bonus.
        marker = found["follow_up"][0]
        if _turn_size(pair.next_turn) <= thresholds.short_turn_words:
            return judged(FOLLOW_UP, f"follow-up marker '{marker}' in a short turn")
        bonus = thresholds.follow_up_marker_bonus
        if similarity + bonus >= related:
            return judged(FOLLOW_UP, f"follow-up marker '{marker}': {measure} + {bonus:g} >= {related:g}")
        return judged(NEW, f"follow-up marker '{marker}' but unrelated: {measure} + {bonus:g} < {related:g}")
    # No acknowledgement: a related question stays on the matter of the previous one.
    if similarity >= related:
        return judged(FOLLOW_UP, f"no marker, related without acknowledgement: {measure} >= {related:g}")
    return judged(NEW, f"no marker, unrelated: {measure} < {related:g}")


def follow_ups_detect(
    *,
    pairs: Sequence[TurnPair],
    embed: Callable[[list[str]], np.ndarray],
    thresholds: FollowUpThresholds = FollowUpThresholds(),
) -> list[FollowUpJudgement]:
    """The judgement of each pair, in order. All distinct texts are embedded in one call to `embed`,
    which returns one L2-normalised row per text (chat traffic repeats questions and answers)."""
    if not pairs:
        return []
    texts = list(
        dict.fromkeys(
            text for pair in pairs for text in (pair.previous_question, pair.previous_answer, pair.next_turn)
        )
    )
    vectors = embed(texts)
    if len(vectors) != len(texts):
        raise ValueError(f"embed returned {len(vectors)} rows for {len(texts)} texts")
    row = {text: index for index, text in enumerate(texts)}
    judgements = []
    for pair in pairs:
        question = vectors[row[pair.previous_question]]
        answer, turn = vectors[row[pair.previous_answer]], vectors[row[pair.next_turn]]
        judgements.append(
            follow_up_judge(
                pair=pair,
                question_cosine=float(turn @ question),
                answer_cosine=float(turn @ answer),
                thresholds=thresholds,
            )
        )
    return judgements


def follow_up_scores(*, truth: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    """Precision, recall and F1 of "is a follow-up" (deepening and new are negatives; 0.0 where a
    ratio is 0/0, as scikit-learn's zero_division=0), its tp/fp/fn/tn, the 3-way confusion matrix
    (`confusion[truth][predicted]`) and the 3-way kind accuracy."""
    if len(truth) != len(predicted):
        raise ValueError(f"{len(truth)} truth labels but {len(predicted)} predictions")
    for name, labels in (("truth", truth), ("predicted", predicted)):
        unknown = sorted(set(labels) - set(KINDS))
        if unknown:
            raise ValueError(f"{name}: unknown kinds {unknown}")
    confusion = {actual: dict.fromkeys(KINDS, 0) for actual in KINDS}
    for actual, guess in zip(truth, predicted, strict=True):
        confusion[actual][guess] += 1
    tp = confusion[FOLLOW_UP][FOLLOW_UP]
    fn = sum(confusion[FOLLOW_UP].values()) - tp
    fp = sum(confusion[actual][FOLLOW_UP] for actual in (DEEPENING, NEW))
    tn = len(truth) - tp - fn - fp
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    correct = sum(confusion[kind][kind] for kind in KINDS)
    return {
        "n": len(truth),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "confusion": confusion,
        "kind_accuracy": correct / len(truth) if truth else 0.0,
    }


_TEXT_FIELDS = ("previous_question", "previous_answer", "next_turn")


def _row_validate(row: object, *, line: int, seen: set[str], require_split: bool) -> dict[str, Any]:
    def fail(field: str, problem: str) -> ValueError:
        return ValueError(f"line {line}: {field}: {problem}")

    if not isinstance(row, dict):
        raise fail("(line)", "must be a JSON object")
    allowed = {"id", "language", "split", "domain", *_TEXT_FIELDS, "gap_seconds", "label", "note"}
    for key in row:
        if key not in allowed:
            raise fail(key, "unknown field")
    for key in ("id", *_TEXT_FIELDS):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise fail(key, "must be a non-empty string")
    if row["id"] in seen:
        raise fail("id", f"duplicate id {row['id']!r}")
    for key, choices in (("language", LANGUAGES), ("split", SPLITS), ("label", KINDS)):
        if key == "split" and not require_split and "split" not in row:
            continue
        if row.get(key) not in choices:
            raise fail(key, f"must be one of {', '.join(choices)}")
    if "gap_seconds" not in row:
        raise fail("gap_seconds", "missing (use null when unknown)")
    gap = row["gap_seconds"]
    if gap is not None and (
        isinstance(gap, bool) or not isinstance(gap, int | float) or not 0 <= gap < math.inf
    ):
        raise fail("gap_seconds", "must be a number of seconds >= 0 or null")
    for key in ("note", "domain"):
        if not isinstance(row.get(key, ""), str):
            raise fail(key, "must be a string")
    return row


def follow_up_set_load(path: Path | str | None = None, *, require_split: bool = True) -> list[dict[str, Any]]:
    """The hand-labelled pairs (default: the set shipped next to this module), validated: a bad line
    raises ValueError "line N: field: problem". `split` and `domain` are optional extras (`split` is
    required unless `require_split` is False)."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    with open(path or SET_PATH, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {number}: (line): not JSON ({exc.msg})") from None
            rows.append(_row_validate(row, line=number, seen=seen, require_split=require_split))
            seen.add(row["id"])
    return rows


def follow_up_evaluate(
    *,
    rows: Sequence[dict[str, Any]],
    embed: Callable[[list[str]], np.ndarray],
    thresholds: FollowUpThresholds,
) -> dict[str, Any]:
    """Runs the detector on labelled rows (as `follow_up_set_load` gives them): scores overall and per
    language, the thresholds used, the seconds taken (embedding included) and every misjudged row."""

    started = time.perf_counter()
    pairs = [
        TurnPair(
            previous_question=row["previous_question"],
            previous_answer=row["previous_answer"],
            next_turn=row["next_turn"],
            gap_seconds=row["gap_seconds"],
        )
        for row in rows
    ]
    judgements = follow_ups_detect(pairs=pairs, embed=embed, thresholds=thresholds)
    seconds = time.perf_counter() - started
    predicted = [judgement.kind for judgement in judgements]
    truth = [row["label"] for row in rows]
    languages: dict[str, dict[str, Any]] = {}
    for language in LANGUAGES:
        picked = [i for i, row in enumerate(rows) if row["language"] == language]
        if picked:
            languages[language] = follow_up_scores(
                truth=[truth[i] for i in picked], predicted=[predicted[i] for i in picked]
            )
    return {
        "n": len(rows),
        "overall": follow_up_scores(truth=truth, predicted=predicted),
        "languages": languages,
        "thresholds": thresholds.as_dict(),
        "seconds": seconds,
        "mistakes": [
            {
                "id": row["id"],
                "label": row["label"],
                "predicted": judgement.kind,
                "next_turn": row["next_turn"],
                "reason": judgement.reason,
            }
            for row, judgement in zip(rows, judgements, strict=True)
            if judgement.kind != row["label"]
        ],
    }

"""The trained detector's labelled set: `data/pairs-train.jsonl` and `data/pairs-test.jsonl`, built
by `python -m engines.follow_up.pair_set` (seeded; the files are committed, this rebuilds them
exactly) from two sources by two authors:

1. Templated (`contexts.CONTEXTS`): each context gets ~22 next turns, labelled by what they were
   written to be:

   - follow_up (about 40 %): the same matter again ("What if {scenario}?", "啥意思", the user's own
     situation without a marker or a word of the answer, "ok but …", "Thanks, but I still don't get …");
   - deepening: an accepted answer, then a related question on the same case ("Got it. {related}?");
   - new: polite closings ("好滴，弄好了"), greetings, topic switches that reuse the answer's words,
     other questions of the same domain and language ("下一个问题：…", "right now, …").

   Variation on purpose: markers or none, question marks or none, mixed-language turns, typos (one in
   eight turns gets a swapped, dropped or doubled letter, or a Chinese homophone). Split BY CONTEXT: a
   quarter of each (language, domain)'s contexts are `test`, the rest `train`; the turn templates are
   split too (pool A for train, pool B for test), so a test pair has neither a context nor a turn
   pattern the detector was trained on.

2. Hand-written by a second author (`dialogues.DIALOGUES`, ids `b-…`): every turn written once, in
   fourteen more domains and another style (see there). Split BY DOMAIN: travel, insurance and
   government are test whole, so their test pairs come from domains the training never saw.

Both get gaps drawn the same way: about a minute, 4 % after the 10-minute window (then labelled new
by definition), 3 % unknown. In training a hand-written row weighs 2, a templated one 1
(`row_weights`): the templates repeat a few dozen patterns. Reviewed live turns (the review queue's
export) join the train split with `reviewed_rows_join`, weighing 2, in family `live:<source>`; a
test pair that shares a reviewed turn's context moves to train, so the test split never holds what
a reviewer labelled nor its context.

Second labelling pass: `data/pairs-second-pass.jsonl` relabels a random sample of 150 templated
pairs (seed 2) from the turn and its context alone, labels hidden. It was done by the set's author,
so it is a self-agreement (`second_pass_agreement`), not an inter-annotator one.
"""

from __future__ import annotations

import json
import random
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engines.follow_up.contexts import CONTEXTS, Context
from engines.follow_up.dialogues import DIALOGUES

DATA = Path(__file__).resolve().parent / "data"
SET_PATHS = {"train": DATA / "pairs-train.jsonl", "test": DATA / "pairs-test.jsonl"}
SECOND_PASS_PATH = DATA / "pairs-second-pass.jsonl"
SEED = 12
TEST_SHARE = 0.25
# The second author's dialogues (`dialogues.py`): these domains are held out whole as test.
TEST_FAMILIES = frozenset({"travel", "insurance", "government"})
# Where a row comes from, and what it weighs in training: the templated rows repeat a few dozen turn
# patterns, so a hand-written or reviewed row (one person's turn, written or sent once) weighs more.
TEMPLATED, HAND_WRITTEN, REVIEWED = "templated", "hand_written", "reviewed"
WEIGHTS = {TEMPLATED: 1.0, HAND_WRITTEN: 2.0, REVIEWED: 2.0}
REVIEWED_FAMILY = "live:"  # the family (domain) of reviewed live turns: live:<experiment or file>
WINDOW_SECONDS = 600.0  # FollowUpThresholds.window_seconds: later turns are new by definition

# Templates per (language, kind), pool A (train) then pool B (test). Slots: {topic}, {scenario},
# {related}, {situation}, {switch}, {other} (another context's question, same domain and language).
_TEMPLATES: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("en", "follow_up"): (
        (
            "What if {scenario}?",
            "and if {scenario}",
            "So what happens when {scenario}?",
            "I don't understand, can you explain {topic} again?",
            "What do you mean by that?",
            "Can you give me an example of {topic}",
            "that doesn't really answer it. what about {topic} in my case",
            "Are you sure? I thought {topic} worked differently",
            "hmm, still confused about {topic}",
            "Why?",
            "in plain english please",
            "And if it happens twice?",
            "ok but {scenario}, then what",
            "Suppose {scenario}. Does the answer change?",
            "{situation}",
            "{situation}?",
        ),
        (
            "what happens if {scenario}",
            "How about if {scenario}?",
            "Sorry, I'm lost. {topic} means what exactly?",
            "could you put that more simply",
            "not convinced. is {topic} really that strict?",
            "Say {scenario} — same answer?",
            "Wait, is that also true when {scenario}",
            "Huh. Any exceptions to {topic}?",
            "that seems off to me",
            "So in practice, how does {topic} work for me",
            "Right, but {scenario}?",
            "Thanks, but I still don't get {topic}",
            "explain {topic} like I'm new to this",
            "Does {topic} still apply if {scenario}",
            "{situation}",
            "{situation}, what now",
        ),
    ),
    ("en", "deepening"): (
        (
            "Thanks, that's clear. {related}?",
            "Got it. Next question: {related}?",
            "ok makes sense. {related}",
            "Great, that helps. Also, {related}?",
            "Understood. Moving on, {related}?",
            "perfect. {related}?",
        ),
        (
            "Thank you! Another thing: {related}?",
            "Alright, clear. {related}",
            "Cool, thx. {related}?",
            "That answers it. One more: {related}?",
            "Helpful, thanks. And separately, {related}?",
            "OK noted. {related}?",
        ),
    ),
    ("en", "closing"): (
        (
            "Thanks, that's all I needed.",
            "Perfect, bye!",
            "Great, thanks a lot!",
            "ok cool",
            "Thank you so much, have a good day",
            "That's it for now, cheers.",
            "hi, are you still there?",
        ),
        (
            "Lovely, thank you!",
            "Brilliant, I'm done for today.",
            "thx, all good now",
            "Appreciate it. Bye for now.",
            "Got it, thanks, that's everything.",
            "Super helpful, see you",
            "Hello again",
        ),
    ),
    ("en", "switch"): (
        ("{switch}", "{other}", "New topic: {other}", "Unrelated, but {other}", "Next question: {other}"),
        (
            "{switch}",
            "{other}",
            "Different matter — {other}",
            "Also, totally separate: {other}",
            "right now, {other}",
        ),
    ),
    ("zh", "follow_up"): (
        (
            "那如果{scenario}呢？",
            "如果{scenario}怎么办",
            "啥意思",
            "还是没懂，{topic}到底是什么",
            "能举个例子吗",
            "为什么？",
            "你确定吗？我听说{topic}不是这样的",
            "说简单点",
            "那{topic}对我适用吗",
            "要是{scenario}，结果一样吗",
            "ok 那如果{scenario}呢",
            "嗯，但是{scenario}的话呢",
            "{situation}",
            "{situation}，怎么办",
            "{situation}？",
        ),
        (
            "那要是{scenario}呢",
            "假如{scenario}，会怎样",
            "没看懂",
            "什么意思啊",
            "再解释一下{topic}吧",
            "不太对吧，{topic}应该更严格",
            "那{scenario}的话还算吗",
            "具体怎么算",
            "还是不明白",
            "嗯…那{topic}有没有例外",
            "but 如果{scenario}呢",
            "谢谢，不过{topic}我还是没搞懂",
            "{situation}",
            "{situation}，那我该咋办",
            "{situation}呢",
        ),
    ),
    ("zh", "deepening"): (
        (
            "谢谢，明白了。{related}？",
            "好的，懂了。下一个问题：{related}？",
            "了解。另外，{related}？",
            "清楚了，那{related}？",
            "收到。{related}",
            "thanks！{related}？",
        ),
        (
            "明白，多谢。还有一个问题：{related}？",
            "好滴，那再问一下，{related}？",
            "懂了懂了，{related}？",
            "OK 了解，{related}",
            "太好了，接着问：{related}？",
            "行，{related}？",
        ),
    ),
    ("zh", "closing"): (
        (
            "好的，谢谢！",
            "明白了，没有别的问题了",
            "谢谢，再见",
            "好滴",
            "收到，辛苦了",
            "今天就到这里吧",
            "在吗？",
        ),
        (
            "好滴，弄好了",
            "谢啦，搞定了",
            "OK，没问题了，谢谢",
            "感谢感谢",
            "懂了，拜拜",
            "行，就这样吧",
            "你好，还在吗",
        ),
    ),
    ("zh", "switch"): (
        ("{switch}", "{other}", "换个话题，{other}", "对了，{other}", "另外一件事：{other}"),
        ("{switch}", "{other}", "下一个问题：{other}", "顺便问一下，{other}", "还有个不相关的：{other}"),
    ),
}
# Turns per context by what they were written as; 'closing' and 'switch' are labelled new.
_PLAN = {"follow_up": 9, "deepening": 4, "closing": 4, "switch": 5}
LABEL = {"follow_up": "follow_up", "deepening": "deepening", "closing": "new", "switch": "new"}
# Chinese homophone typos (pinyin input slips).
_ZH_TYPOS = {"的": "得", "在": "再", "吗": "嘛", "做": "作", "以": "已", "那": "哪", "么": "麽", "是": "事"}


def _typo(text: str, rng: random.Random) -> str:
    """One slip: a Chinese homophone where there is one, else a swapped, dropped or doubled letter."""
    homophones = [i for i, ch in enumerate(text) if ch in _ZH_TYPOS]
    if homophones:
        i = rng.choice(homophones)
        return text[:i] + _ZH_TYPOS[text[i]] + text[i + 1 :]
    letters = [i for i in range(1, len(text) - 1) if text[i].isalpha() and text[i + 1].isalpha()]
    if not letters:
        return text
    i = rng.choice(letters)
    slip = rng.choice(("swap", "drop", "double"))
    if slip == "swap":
        return text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    if slip == "drop":
        return text[:i] + text[i + 1 :]
    return text[:i] + text[i] + text[i:]


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2].isalpha() and not text[:2].isupper() else text


def _fill(template: str, *, context: Context, rng: random.Random, others: Sequence[Context]) -> str:
    other = rng.choice(others).question
    if not template.startswith("{other}"):
        other = _lower_first(other)
    return template.format(
        topic=context.topic,
        scenario=rng.choice(context.scenarios),
        related=rng.choice(context.related).rstrip("?？"),
        situation=context.situation,
        switch=context.switch,
        other=other,
    )


def _test_contexts(rng: random.Random) -> set[int]:
    chosen: set[int] = set()
    groups: dict[tuple[str, str], list[int]] = {}
    for index, context in enumerate(CONTEXTS):
        groups.setdefault((context.language, context.domain), []).append(index)
    for indexes in groups.values():
        chosen.update(rng.sample(indexes, round(len(indexes) * TEST_SHARE)))
    return chosen


def pair_set_build(*, seed: int = SEED) -> list[dict[str, object]]:
    """The labelled rows (the format of `detector.follow_up_set_load`), deterministic for a seed."""
    rng = random.Random(seed)
    test = _test_contexts(rng)
    rows: list[dict[str, object]] = []
    seen: set[tuple[int, str]] = set()
    for index, context in enumerate(CONTEXTS):
        split = "test" if index in test else "train"
        pool = 1 if split == "test" else 0
        # Topic switches to another case of the same domain, language and split.
        others = [
            c
            for i, c in enumerate(CONTEXTS)
            if i != index
            and (i in test) == (index in test)
            and c.language == context.language
            and c.domain == context.domain
        ]
        number = 0
        for written_as, count in _PLAN.items():
            templates = list(_TEMPLATES[(context.language, written_as)][pool])
            rng.shuffle(templates)
            made = 0
            for template in templates * 3:
                if made == count:
                    break
                turn = _fill(template, context=context, rng=rng, others=others)
                if rng.random() < 1 / 8:
                    turn = _typo(turn, rng)
                if (index, turn) in seen:
                    continue
                seen.add((index, turn))
                made += 1
                number += 1
                gap, label = _gap(rng, LABEL[written_as])
                rows.append(
                    {
                        "id": f"{context.language}-{index:03d}-{number:02d}",
                        "language": context.language,
                        "split": split,
                        "domain": context.domain,
                        "previous_question": context.question,
                        "previous_answer": context.answer,
                        "next_turn": turn,
                        "gap_seconds": gap,
                        "label": label,
                        "note": written_as if label == LABEL[written_as] else f"{written_as}, outside window",
                    }
                )
    return rows


def _gap(rng: random.Random, label: str) -> tuple[float | None, str]:
    """A gap after the answer as in chat traffic (about a minute), 4 % after the window (then the turn
    is new by definition), 3 % unknown."""
    gap: float | None = round(rng.lognormvariate(3.8, 0.9), 1)
    roll = rng.random()
    if roll < 0.04:
        return float(rng.randint(700, 7200)), "new"
    if roll < 0.07:
        return None, label
    # A drawn gap past the 10 minutes (one in 500) makes the turn new by definition too.
    return gap, "new" if gap is not None and gap > WINDOW_SECONDS else label


def dialogue_rows(*, seed: int = SEED + 1) -> list[dict[str, object]]:
    """The second author's hand-written dialogues as labelled rows: whole domains (`TEST_FAMILIES`)
    are test, the rest train; gaps drawn as the templated set's, seeded."""
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    for index, dialogue in enumerate(DIALOGUES):
        for number, (written_as, turn) in enumerate(dialogue.turns, start=1):
            gap, label = _gap(rng, written_as)
            rows.append(
                {
                    "id": f"b-{dialogue.language}-{index:03d}-{number:02d}",
                    "language": dialogue.language,
                    "split": "test" if dialogue.domain in TEST_FAMILIES else "train",
                    "domain": dialogue.domain,
                    "previous_question": dialogue.question,
                    "previous_answer": dialogue.answer,
                    "next_turn": turn,
                    "gap_seconds": gap,
                    "label": label,
                    "note": f"second author, {written_as}"
                    + ("" if label == written_as else ", outside window"),
                }
            )
    return rows


def row_source(row: dict[str, Any]) -> str:
    """TEMPLATED, HAND_WRITTEN (the second author's dialogues) or REVIEWED (a labelled live turn)."""
    if str(row.get("domain", "")).startswith(REVIEWED_FAMILY):
        return REVIEWED
    return HAND_WRITTEN if str(row["id"]).startswith("b-") else TEMPLATED


def row_weights(rows: Sequence[dict[str, Any]]) -> list[float]:
    return [WEIGHTS[row_source(row)] for row in rows]


def context_key(text: str) -> str:
    """A context as the leak check compares them: case, width and spacing do not make another."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def reviewed_rows_join(
    *,
    train: Sequence[dict[str, Any]],
    test: Sequence[dict[str, Any]],
    reviewed: Sequence[dict[str, Any]],
    source: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """The splits with reviewed live turns (exported rows) joined to train, in family
    `live:<source>`: a reviewed turn is never test, and neither is any test pair that shares its
    context (the previous question), which moves to train. Returns (train, test, pairs moved)."""
    joined = [
        {**row, "split": "train", "domain": f"{REVIEWED_FAMILY}{source}", "note": "reviewed live turn"}
        for row in reviewed
    ]
    seen = {context_key(row["previous_question"]) for row in joined}
    moved = [row for row in test if context_key(row["previous_question"]) in seen]
    kept = [row for row in test if context_key(row["previous_question"]) not in seen]
    return [*train, *({**row, "split": "train"} for row in moved), *joined], kept, len(moved)


def second_pass_agreement(path: Path = SECOND_PASS_PATH) -> dict[str, float | int]:
    """Agreement of the second labelling pass with the set's labels: raw, and Cohen's kappa over the
    three kinds and over "is a follow-up"."""
    from sklearn.metrics import cohen_kappa_score

    labels = {row["id"]: row["label"] for row in pair_set_build() + dialogue_rows()}
    with open(path, encoding="utf-8") as lines:
        second = [json.loads(line) for line in lines if line.strip()]
    first = [labels[row["id"]] for row in second]
    again = [row["label"] for row in second]
    return {
        "n": len(second),
        "agreement": sum(a == b for a, b in zip(first, again, strict=True)) / len(second),
        "kappa": float(cohen_kappa_score(first, again)),
        "kappa_follow_up": float(
            cohen_kappa_score([a == "follow_up" for a in first], [b == "follow_up" for b in again])
        ),
    }


def main() -> None:
    rows = pair_set_build() + dialogue_rows()
    for split, path in SET_PATHS.items():
        picked = [row for row in rows if row["split"] == split]
        with open(path, "w", encoding="utf-8") as out:
            for row in picked:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{len(picked)} pairs written to {path}")


if __name__ == "__main__":
    main()

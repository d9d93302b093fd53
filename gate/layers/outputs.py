"""Model answers, through the per-worker model cache and a database cache of outputs.

The output cache is keyed by version, backend config and the exact input text, so a rerun,
a baseline seen before, or a run resumed after a worker crash does not ask the model again.
Failed answers are never cached.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engines.backends.base import Usage, usage_of
from engines.backends.config import config_unpriced
from engines.reasons import reason
from gate.models import ModelOutput
from registry.models import ModelVersion
from registry.services.versions import model_version_backend


@dataclass(frozen=True)
class VersionOutputs:
    predictions: list  # engines.backends.Prediction, in input order
    seconds: float  # model time for the inputs that were not cached
    computed: int
    cached: int
    device: str
    # What the computed answers spent (the cached ones spent nothing now).
    usage: Usage = field(default_factory=Usage)


def model_output_key(*, version: ModelVersion, text: str, seed: int | None = None) -> str:
    """The cache key of a version's answer to `text` (its price aside: a price is not the model); a
    seeded request (a repeat) is its own answer."""
    config = json.dumps([version.backend_kind, config_unpriced(version.backend_config)], sort_keys=True)
    seeded = "" if seed is None else f"\nseed={seed}"
    return hashlib.sha256(f"{config}\n{text}{seeded}".encode()).hexdigest()


def _predict(backend: Any, texts: list[str], seeds: list[int | None] | None) -> list:
    """The backend's answers, seeded when `seeds` are given (the openai backend takes them)."""
    return backend.predict(texts) if seeds is None else backend.predict(texts, seeds=seeds)


def model_outputs_predict(
    *,
    version: ModelVersion,
    texts: Sequence[str],
    batch_size: int,
    on_batch: Callable[[int], None],
    use_cache: bool = True,
    seeds: Sequence[int] | None = None,
) -> VersionOutputs:
    """The version's answers to `texts`; with `seeds` (one per text, an endpoint's backend only) each
    request is sent with its seed and cached under it."""
    from engines.backends import BackendCode, BackendError, Prediction, backend_device

    seeded = list(seeds) if seeds is not None else [None] * len(texts)
    keys = [model_output_key(version=version, text=t, seed=s) for t, s in zip(texts, seeded, strict=True)]
    stored = ModelOutput.objects.filter(version=version, input_hash__in=set(keys)) if use_cache else []
    known = {
        row.input_hash: Prediction(label=row.label or None, text=row.text, latency_ms=row.latency_ms)
        for row in stored
    }
    cached = sum(key in known for key in keys)
    if cached:
        on_batch(cached)
    todo = [i for i, key in enumerate(keys) if key not in known]
    started = time.perf_counter()
    try:
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            fresh = dict(
                zip(
                    (keys[i] for i in batch),
                    _predict(
                        model_version_backend(version=version),
                        [texts[i] for i in batch],
                        None if seeds is None else [seeded[i] for i in batch],
                    ),
                    strict=True,
                )
            )
            ModelOutput.objects.bulk_create(
                [
                    ModelOutput(
                        version=version,
                        input_hash=key,
                        label=p.label or "",
                        text=p.text,
                        latency_ms=p.latency_ms,
                    )
                    for key, p in fresh.items()
                    if p.error is None
                ],
                ignore_conflicts=True,
            )
            known.update(fresh)
            on_batch(len(batch))
    except BackendError as exc:
        why = reason(BackendCode.OF_VERSION, ref=version.ref, why=exc.reason)
        raise BackendError(why, transient=exc.transient) from exc
    seconds = time.perf_counter() - started if todo else 0.0
    device = backend_device(version.backend_kind)
    return VersionOutputs(
        predictions=[known[key] for key in keys],
        seconds=seconds,
        computed=len(todo),
        cached=cached,
        device=device,
        usage=usage_of(
            predictions=[known[keys[i]] for i in todo], device_seconds=None if device == "remote" else seconds
        ),
    )

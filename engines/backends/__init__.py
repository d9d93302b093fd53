"""Model backends and the per-process cache of loaded models.

Only worker code (and `serve_model`) imports the heavy modules (`hf`, `builtin`: torch,
transformers); they are imported here lazily, on first use of that kind.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from engines.outbound import OutboundPolicy
from engines.reasons import ENGLISH, reason_render

from .base import BackendCode, BackendError, ModelBackend, Prediction
from .config import (
    DEFAULT_API_KEY_ENV_PREFIX,
    BackendConfigError,
    backend_config_validate,
    checkpoint_path_resolve,
)

__all__ = [
    "BackendCode",
    "BackendError",
    "ModelBackend",
    "Prediction",
    "backend_build",
    "backend_cached",
    "backend_deterministic",
    "backend_device",
]

_cache: OrderedDict[tuple[Hashable, ...], ModelBackend] = OrderedDict()
_cache_lock = threading.Lock()


def checkpoint_path(path: str, *, model_dir: Path | None) -> Path:
    """Checkpoints live under `model_dir` (the deployment's EVALHUB_MODEL_DIR): relative paths
    below it, and no path (after `..` and symlinks) outside it. Without a folder (the engines used
    on their own) only an absolute path is taken, as it is."""
    if model_dir is None:
        if not Path(path).is_absolute():
            raise BackendError(f"relative checkpoint path {path!r} needs a model folder")
        return Path(path)
    try:
        return checkpoint_path_resolve(path=path, model_dir=model_dir)
    except BackendConfigError as exc:
        raise BackendError(f"checkpoint {path!r}: {reason_render(exc.message, words=ENGLISH)}") from None


DETERMINISTIC_KINDS = frozenset(
    {"builtin", "hf"}
)  # in-process classifiers: argmax, the same answer each time


def backend_deterministic(kind: str) -> bool:
    """Whether a backend of this kind gives the same answer to the same input every time (an endpoint
    may sample: it is never assumed to)."""
    return kind in DETERMINISTIC_KINDS


def backend_device(kind: str) -> str:
    """Where a backend of this kind computes: a torch device, or 'remote' for an endpoint."""
    if kind == "openai":
        return "remote"
    from engines.device import device_select

    return device_select()


def backend_build(
    *,
    kind: str,
    config: dict[str, Any],
    api_key: str = "",
    model_dir: Path | None = None,
    outbound: OutboundPolicy | None = None,
    api_key_env_prefix: str = DEFAULT_API_KEY_ENV_PREFIX,
) -> ModelBackend:
    """`outbound`: where an `openai` backend may connect (default: public addresses only);
    `api_key_env_prefix`: the environment variables it may read its key from."""
    config = backend_config_validate(kind=kind, config=config)
    if kind == "openai":
        from .openai import OpenAIBackend

        return OpenAIBackend(
            config=config,
            api_key=api_key,
            outbound=outbound or OutboundPolicy(),
            api_key_env_prefix=api_key_env_prefix,
        )
    if kind == "hf":
        from .hf import HFClassifierBackend

        return HFClassifierBackend.from_dir(
            checkpoint_path(config["path"], model_dir=model_dir),
            device=backend_device(kind),
            max_length=config["max_length"],
            batch_size=config["batch_size"],
        )
    from .builtin import BowBackend

    return BowBackend.from_dir(
        checkpoint_path(config["path"], model_dir=model_dir),
        device=backend_device(kind),
        batch_size=config["batch_size"],
    )


def backend_cached(
    *,
    key: tuple[Hashable, ...],
    kind: str,
    config: dict[str, Any],
    api_key: str = "",
    model_dir: Path | None = None,
    outbound: OutboundPolicy | None = None,
    api_key_env_prefix: str = DEFAULT_API_KEY_ENV_PREFIX,
) -> ModelBackend:
    """A loaded backend, kept in a bounded LRU per process (EVALHUB_MODEL_CACHE_SIZE, default 4).
    `key` must change whenever the version's config (or the key, policy, prefix) does."""
    size = int(os.environ.get("EVALHUB_MODEL_CACHE_SIZE", "4"))
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    backend = backend_build(
        kind=kind,
        config=config,
        api_key=api_key,
        model_dir=model_dir,
        outbound=outbound,
        api_key_env_prefix=api_key_env_prefix,
    )
    with _cache_lock:
        _cache[key] = backend
        while len(_cache) > size:
            _, evicted = _cache.popitem(last=False)
            getattr(evicted, "close", lambda: None)()
    return backend

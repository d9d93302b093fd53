"""Validation of backend configs, per kind. Pure and light: the web process uses it when a
version is registered, so a bad config is refused there and not discovered by a worker."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, TypeAlias
from urllib.parse import urlparse

from engines.input_checks import text_problem
from engines.reasons import ENGLISH, Reason, reason_render

DEFAULT_LABEL_REGEX = r"^\s*\[(?P<label>[^\]\n]+)\]\s*"
# The environment variables an `openai` backend may read its key from (`api_key_env`) start with
# this; the deployment's EVALHUB_BACKEND_SECRET_ENV_PREFIX replaces it.
DEFAULT_API_KEY_ENV_PREFIX = "EVALHUB_BACKEND_SECRET_"


class BackendConfigError(ValueError):
    def __init__(self, field: str, message: Reason | str):
        super().__init__(f"{field}: {reason_render(message, words=ENGLISH)}")
        self.field = field
        self.message = message


# The type(s) a key's value may have. `type[Any]`: a value that passes isinstance stays a JSON value
# (Any), which LIMITS then compares with numbers.
_ValueType: TypeAlias = type[Any] | tuple[type[Any], ...]

# kind -> {key: (type, default, required)}
SCHEMAS: dict[str, dict[str, tuple[_ValueType, object, bool]]] = {
    "openai": {
        "base_url": (str, None, True),
        "model": (str, None, True),
        "system_prompt": (str, "", False),
        "label_regex": (str, DEFAULT_LABEL_REGEX, False),
        "api_key_env": (str, "", False),
        "timeout_s": ((int, float), 30.0, False),
        "max_retries": (int, 3, False),
        "max_concurrency": (int, 4, False),
        "temperature": ((int, float), 0.0, False),
        "max_tokens": (int, 256, False),
    },
    "hf": {
        "path": (str, None, True),
        "max_length": (int, 256, False),
        "batch_size": (int, 32, False),
    },
    "builtin": {
        "path": (str, None, True),
        "batch_size": (int, 256, False),
    },
}
LIMITS = {
    "timeout_s": (0.1, 600),
    "max_retries": (0, 10),
    "max_concurrency": (1, 64),
    "temperature": (0, 2),
    "max_tokens": (1, 32768),
    "max_length": (8, 8192),
    "batch_size": (1, 4096),
}


def backend_config_validate(*, kind: str, config: object) -> dict[str, Any]:
    """Return the config with defaults filled; raise BackendConfigError naming the field."""
    if kind not in SCHEMAS:
        raise BackendConfigError("backend_kind", f"unknown kind {kind!r}; one of {sorted(SCHEMAS)}")
    if not isinstance(config, dict):
        raise BackendConfigError("backend_config", "must be an object")
    schema = SCHEMAS[kind]
    result: dict[str, Any] = {}
    for key in config:
        if key not in schema:
            if key == "api_key":
                raise BackendConfigError(
                    "backend_config.api_key", "send the key in the top-level write-only field api_key"
                )
            raise BackendConfigError(
                f"backend_config.{key}", f"unknown key for {kind}; known: {', '.join(sorted(schema))}"
            )
    for key, (kind_of, default, required) in schema.items():
        name = f"backend_config.{key}"
        if key not in config:
            if required:
                raise BackendConfigError(name, "required")
            result[key] = default
            continue
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, kind_of):
            raise BackendConfigError(name, f"must be of type {_type_name(kind_of)}")
        if key in LIMITS and not LIMITS[key][0] <= value <= LIMITS[key][1]:
            raise BackendConfigError(name, f"must be between {LIMITS[key][0]} and {LIMITS[key][1]}")
        if isinstance(value, str) and required and not value.strip():
            raise BackendConfigError(name, "must not be empty")
        if isinstance(value, str) and (problem := text_problem(value)):
            raise BackendConfigError(name, problem)
        result[key] = value
    if kind == "openai":
        url = urlparse(result["base_url"])
        if url.scheme not in ("http", "https") or not url.netloc:
            raise BackendConfigError("backend_config.base_url", "must be an http(s) URL")
        try:
            pattern = re.compile(result["label_regex"])
        except re.error as exc:
            raise BackendConfigError("backend_config.label_regex", f"invalid regex: {exc}") from None
        if "label" not in pattern.groupindex:
            raise BackendConfigError("backend_config.label_regex", "needs a named group 'label'")
    return result


def _type_name(kind_of: _ValueType) -> str:
    names: dict[_ValueType, str] = {str: "string", int: "integer"}
    return names.get(kind_of, "number")


def api_key_env_check(*, name: str, prefix: str) -> None:
    """An `api_key_env` may only name a variable under the operator's prefix, so a backend config
    cannot send the deployment's own secrets (DATABASE_URL, SECRET_KEY ...) to an endpoint. An empty
    prefix allows none."""
    if not prefix or not name.startswith(prefix) or len(name) == len(prefix):
        allowed = f"a name starting with {prefix!r}" if prefix else "none: no prefix is configured"
        raise BackendConfigError("backend_config.api_key_env", f"not an allowed variable; allowed: {allowed}")


def checkpoint_path_resolve(*, path: str, model_dir: Path) -> Path:
    """Where a checkpoint `path` points once `..` and symlinks are resolved (relative paths under
    `model_dir`); BackendConfigError unless that is inside `model_dir`."""
    root = Path(model_dir).resolve()
    resolved = (root / path).resolve()
    if not resolved.is_relative_to(root):
        raise BackendConfigError("backend_config.path", f"must be inside the model folder {root}")
    return resolved


def backend_config_hash(*, kind: str, config: dict[str, Any]) -> str:
    """What identifies a version's model: its backend kind and config, hashed (a changed checkpoint
    path or endpoint is another model). The model server announces it; the gate and the canary check
    that a serving address announces its version's."""
    return hashlib.sha256(json.dumps([kind, config], sort_keys=True).encode()).hexdigest()

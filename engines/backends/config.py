"""Validation of backend configs, per kind. Pure and light: the web process uses it when a
version is registered, so a bad config is refused there and not discovered by a worker."""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeAlias
from urllib.parse import urlparse

from engines.input_checks import FieldCode, text_problem
from engines.reasons import ENGLISH, Reason, gettext_noop, reason, reason_render, wordings_register

DEFAULT_LABEL_REGEX = r"^\s*\[(?P<label>[^\]\n]+)\]\s*"
# The environment variables an `openai` backend may read its key from (`api_key_env`) start with
# this; the deployment's EVALHUB_BACKEND_SECRET_ENV_PREFIX replaces it.
DEFAULT_API_KEY_ENV_PREFIX = "EVALHUB_BACKEND_SECRET_"
DEFAULT_TOP_LOGPROBS = 20  # OpenAI's most


class BackendConfigCode(StrEnum):
    UNKNOWN_KIND = "backend_config.unknown_kind"
    API_KEY_TOP_LEVEL = "backend_config.api_key_top_level"
    UNKNOWN_KEY = "backend_config.unknown_key"
    EMPTY = "backend_config.empty"
    HTTP_URL = "backend_config.http_url"
    INVALID_REGEX = "backend_config.invalid_regex"
    LABEL_GROUP = "backend_config.label_group"
    ENV_PREFIX = "backend_config.env_prefix"
    ENV_NO_PREFIX = "backend_config.env_no_prefix"
    OUTSIDE_MODEL_DIR = "backend_config.outside_model_dir"
    NO_CHECKPOINT = "backend_config.no_checkpoint"
    LABEL_TWICE = "backend_config.label_twice"
    LABELS_COUNT = "backend_config.labels_count"


wordings_register(
    {
        BackendConfigCode.UNKNOWN_KIND: gettext_noop("unknown kind '{kind}'; one of {choices}"),
        BackendConfigCode.API_KEY_TOP_LEVEL: gettext_noop(
            "send the key in the top-level write-only field api_key"
        ),
        BackendConfigCode.UNKNOWN_KEY: gettext_noop("unknown key for {kind}; known: {known}"),
        BackendConfigCode.EMPTY: gettext_noop("must not be empty"),
        BackendConfigCode.HTTP_URL: gettext_noop("must be an http(s) URL"),
        # `detail`: the regular expression compiler's own message (Python's, in English).
        BackendConfigCode.INVALID_REGEX: gettext_noop("invalid regex: {detail}"),
        BackendConfigCode.LABEL_GROUP: gettext_noop("needs a named group 'label'"),
        BackendConfigCode.ENV_PREFIX: gettext_noop(
            "not an allowed variable; allowed: a name starting with '{prefix}'"
        ),
        BackendConfigCode.ENV_NO_PREFIX: gettext_noop(
            "not an allowed variable; allowed: none: no prefix is configured"
        ),
        BackendConfigCode.OUTSIDE_MODEL_DIR: gettext_noop("must be inside the model folder {root}"),
        BackendConfigCode.NO_CHECKPOINT: gettext_noop("no checkpoint at {path}"),
        BackendConfigCode.LABEL_TWICE: gettext_noop("'{label}' is listed twice"),
        BackendConfigCode.LABELS_COUNT: gettext_noop("must list from 1 to {high} labels"),
    }
)


class BackendConfigError(ValueError):
    """What is wrong with `field`, as a reason (`message`); its English is the exception's text."""

    def __init__(self, field: str, message: Reason):
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
        # The version's label set, in the order of its class scores: with it, and an endpoint that
        # returns token log-probabilities, the backend gives class scores (adversarial attacks).
        "labels": (list, [], False),
        "top_logprobs": (
            int,
            DEFAULT_TOP_LOGPROBS,
            False,
        ),  # alternatives asked for at each token when scoring
        # What the endpoint charges per 1 000 tokens in and out (the gate's cost); absent: unpriced.
        "price_per_1k_input": ((int, float), None, False),
        "price_per_1k_output": ((int, float), None, False),
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
    "top_logprobs": (1, 20),
    "price_per_1k_input": (0, 1_000_000),
    "price_per_1k_output": (0, 1_000_000),
}
# Keys that price a model rather than name it: left out of its hash and of the output cache's key.
PRICE_KEYS = frozenset({"price_per_1k_input", "price_per_1k_output"})
# Keys added after versions were stored: left out when absent (not filled with their default), so a
# stored config validates to itself and its hash (`backend_config_hash`) stays what it was.
ADDED_LATER = frozenset({"labels", "top_logprobs", *PRICE_KEYS})
MAX_LABELS = 1000


def backend_config_validate(*, kind: str, config: object) -> dict[str, Any]:
    """Return the config with defaults filled; raise BackendConfigError naming the field."""
    if kind not in SCHEMAS:
        raise BackendConfigError(
            "backend_kind", reason(BackendConfigCode.UNKNOWN_KIND, kind=kind, choices=sorted(SCHEMAS))
        )
    if not isinstance(config, dict):
        raise BackendConfigError("backend_config", reason(FieldCode.OBJECT))
    schema = SCHEMAS[kind]
    result: dict[str, Any] = {}
    for key in config:
        if key not in schema:
            if key == "api_key":
                raise BackendConfigError(
                    "backend_config.api_key", reason(BackendConfigCode.API_KEY_TOP_LEVEL)
                )
            raise BackendConfigError(
                f"backend_config.{key}",
                reason(BackendConfigCode.UNKNOWN_KEY, kind=kind, known=sorted(schema)),
            )
    for key, (kind_of, default, required) in schema.items():
        name = f"backend_config.{key}"
        if key not in config:
            if required:
                raise BackendConfigError(name, reason(FieldCode.REQUIRED))
            if key not in ADDED_LATER:
                result[key] = default
            continue
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, kind_of):
            raise BackendConfigError(name, reason(_type_code(kind_of)))
        if isinstance(value, list):
            value = _labels_check(name=name, value=value)
        if key in LIMITS and not LIMITS[key][0] <= value <= LIMITS[key][1]:
            raise BackendConfigError(name, reason(FieldCode.BETWEEN, low=LIMITS[key][0], high=LIMITS[key][1]))
        if isinstance(value, str) and required and not value.strip():
            raise BackendConfigError(name, reason(BackendConfigCode.EMPTY))
        if isinstance(value, str) and (problem := text_problem(value)):
            raise BackendConfigError(name, problem)
        result[key] = value
    if kind == "openai":
        url = urlparse(result["base_url"])
        if url.scheme not in ("http", "https") or not url.netloc:
            raise BackendConfigError("backend_config.base_url", reason(BackendConfigCode.HTTP_URL))
        try:
            pattern = re.compile(result["label_regex"])
        except re.error as exc:
            raise BackendConfigError(
                "backend_config.label_regex", reason(BackendConfigCode.INVALID_REGEX, detail=str(exc))
            ) from None
        if "label" not in pattern.groupindex:
            raise BackendConfigError("backend_config.label_regex", reason(BackendConfigCode.LABEL_GROUP))
    return result


def _type_code(kind_of: _ValueType) -> FieldCode:
    codes: dict[_ValueType, FieldCode] = {
        str: FieldCode.STRING,
        int: FieldCode.INTEGER,
        list: FieldCode.STRINGS,
    }
    return codes.get(kind_of, FieldCode.NUMBER)


def _labels_check(*, name: str, value: list[Any]) -> list[str]:
    """A label set: 1 to MAX_LABELS distinct, non-blank strings of storable text, as given."""
    if not value or len(value) > MAX_LABELS:
        raise BackendConfigError(name, reason(BackendConfigCode.LABELS_COUNT, high=MAX_LABELS))
    for label in value:
        if not isinstance(label, str) or not label.strip():
            raise BackendConfigError(name, reason(FieldCode.STRINGS))
        if problem := text_problem(label):
            raise BackendConfigError(name, problem)
    seen: set[str] = set()
    for label in value:
        if label in seen:
            raise BackendConfigError(name, reason(BackendConfigCode.LABEL_TWICE, label=label))
        seen.add(label)
    return list(value)


def api_key_env_check(*, name: str, prefix: str) -> None:
    """An `api_key_env` may only name a variable under the operator's prefix, so a backend config
    cannot send the deployment's own secrets (DATABASE_URL, SECRET_KEY ...) to an endpoint. An empty
    prefix allows none."""
    if not prefix or not name.startswith(prefix) or len(name) == len(prefix):
        why = (
            reason(BackendConfigCode.ENV_PREFIX, prefix=prefix)
            if prefix
            else reason(BackendConfigCode.ENV_NO_PREFIX)
        )
        raise BackendConfigError("backend_config.api_key_env", why)


def checkpoint_path_resolve(*, path: str, model_dir: Path) -> Path:
    """Where a checkpoint `path` points once `..` and symlinks are resolved (relative paths under
    `model_dir`); BackendConfigError unless that is inside `model_dir`."""
    root = Path(model_dir).resolve()
    resolved = (root / path).resolve()
    if not resolved.is_relative_to(root):
        raise BackendConfigError(
            "backend_config.path", reason(BackendConfigCode.OUTSIDE_MODEL_DIR, root=str(root))
        )
    return resolved


def backend_config_hash(*, kind: str, config: dict[str, Any]) -> str:
    """What identifies a version's model: its backend kind and config, hashed (a changed checkpoint
    path or endpoint is another model). The model server announces it; the gate and the canary check
    that a serving address announces its version's."""
    return hashlib.sha256(json.dumps([kind, config_unpriced(config)], sort_keys=True).encode()).hexdigest()


def config_unpriced(config: dict[str, Any]) -> dict[str, Any]:
    """The config without its prices: a new price is the same model, answering the same."""
    return {key: value for key, value in config.items() if key not in PRICE_KEYS}

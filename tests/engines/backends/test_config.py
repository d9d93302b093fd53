from pathlib import Path

import pytest
from django.utils import translation

from engines.backends.config import (
    DEFAULT_LABEL_REGEX,
    BackendConfigCode,
    BackendConfigError,
    api_key_env_check,
    backend_config_hash,
    backend_config_validate,
    checkpoint_path_resolve,
)
from engines.input_checks import FieldCode, InputCode
from engines.reasons import reason
from evalhub.wordings import reason_words

OPENAI_KEYS = [
    "api_key_env",
    "base_url",
    "label_regex",
    "labels",
    "max_concurrency",
    "max_retries",
    "max_tokens",
    "model",
    "price_per_1k_input",
    "price_per_1k_output",
    "system_prompt",
    "temperature",
    "timeout_s",
    "top_logprobs",
]


def test_fills_defaults():
    config = backend_config_validate(kind="openai", config={"base_url": "http://h:1/v1", "model": "m"})
    assert config["label_regex"] == DEFAULT_LABEL_REGEX
    assert config["max_retries"] == 3 and config["max_concurrency"] == 4


def test_labels_and_top_logprobs_are_kept_as_given_and_not_filled_in_when_absent():
    base = {"base_url": "http://h:1/v1", "model": "m"}
    # Configs stored before these keys existed validate to themselves (their hash stays).
    assert "labels" not in backend_config_validate(kind="openai", config=base)
    assert "top_logprobs" not in backend_config_validate(kind="openai", config=base)
    given = {**base, "labels": ["payment", "termination"], "top_logprobs": 5}
    assert backend_config_validate(kind="openai", config=given) == backend_config_validate(
        kind="openai", config=backend_config_validate(kind="openai", config=given)
    )
    assert backend_config_validate(kind="openai", config=given)["labels"] == ["payment", "termination"]


@pytest.mark.parametrize(
    ("labels", "note"),
    [
        ("payment", reason(FieldCode.STRINGS)),
        ([], reason(BackendConfigCode.LABELS_COUNT, high=1000)),
        (["payment", 3], reason(FieldCode.STRINGS)),
        (["payment", " "], reason(FieldCode.STRINGS)),
        (["payment", "termination", "payment"], reason(BackendConfigCode.LABEL_TWICE, label="payment")),
    ],
)
def test_bad_labels_name_the_field(labels, note):
    config = {"base_url": "http://h:1/v1", "model": "m", "labels": labels}
    with pytest.raises(BackendConfigError) as caught:
        backend_config_validate(kind="openai", config=config)
    assert (caught.value.field, caught.value.message) == ("backend_config.labels", note)


@pytest.mark.parametrize("top", [0, 21, 2.5])
def test_top_logprobs_is_1_to_20(top):
    config = {"base_url": "http://h:1/v1", "model": "m", "top_logprobs": top}
    with pytest.raises(BackendConfigError) as caught:
        backend_config_validate(kind="openai", config=config)
    assert caught.value.field == "backend_config.top_logprobs"


@pytest.mark.parametrize(
    ("kind", "config", "field", "note"),
    [
        (
            "vllm",
            {},
            "backend_kind",
            reason(BackendConfigCode.UNKNOWN_KIND, kind="vllm", choices=["builtin", "hf", "openai"]),
        ),
        ("openai", [], "backend_config", reason(FieldCode.OBJECT)),
        ("openai", {"model": "m"}, "backend_config.base_url", reason(FieldCode.REQUIRED)),
        (
            "openai",
            {"base_url": "ftp://x", "model": "m"},
            "backend_config.base_url",
            reason(BackendConfigCode.HTTP_URL),
        ),
        (
            "openai",
            {"base_url": "http://x", "model": "m", "api_key": "s"},
            "backend_config.api_key",
            reason(BackendConfigCode.API_KEY_TOP_LEVEL),
        ),
        (
            "openai",
            {"base_url": "http://x", "model": "m", "timeout_s": "9"},
            "backend_config.timeout_s",
            reason(FieldCode.NUMBER),
        ),
        (
            "openai",
            {"base_url": "http://x", "model": 3},
            "backend_config.model",
            reason(FieldCode.STRING),
        ),
        (
            "openai",
            {"base_url": "http://x", "model": "m", "max_concurrency": 0},
            "backend_config.max_concurrency",
            reason(FieldCode.BETWEEN, low=1, high=64),
        ),
        (
            "openai",
            {"base_url": "http://x", "model": "m", "label_regex": "x"},
            "backend_config.label_regex",
            reason(BackendConfigCode.LABEL_GROUP),
        ),
        (
            "openai",
            {"base_url": "http://x", "model": "m\u0000"},
            "backend_config.model",
            reason(InputCode.NUL),
        ),
        (
            "openai",
            {"base_url": "http://x", "model": "m", "colour": 1},
            "backend_config.colour",
            reason(BackendConfigCode.UNKNOWN_KEY, kind="openai", known=OPENAI_KEYS),
        ),
        ("hf", {}, "backend_config.path", reason(FieldCode.REQUIRED)),
        ("hf", {"path": " "}, "backend_config.path", reason(BackendConfigCode.EMPTY)),
        ("hf", {"path": "p", "batch_size": True}, "backend_config.batch_size", reason(FieldCode.INTEGER)),
        (
            "builtin",
            {"path": "p", "colour": 1},
            "backend_config.colour",
            reason(BackendConfigCode.UNKNOWN_KEY, kind="builtin", known=["batch_size", "path"]),
        ),
    ],
)
def test_bad_configs_name_the_field(kind, config, field, note):
    with pytest.raises(BackendConfigError) as caught:
        backend_config_validate(kind=kind, config=config)
    assert (caught.value.field, caught.value.message) == (field, note)


def test_an_invalid_regex_keeps_the_compilers_text():
    with pytest.raises(BackendConfigError) as caught:
        backend_config_validate(
            kind="openai", config={"base_url": "http://x", "model": "m", "label_regex": "(x"}
        )
    error = caught.value
    assert error.field == "backend_config.label_regex"
    assert error.message == reason(
        BackendConfigCode.INVALID_REGEX, detail="missing ), unterminated subpattern at position 0"
    )
    assert (
        str(error)
        == "backend_config.label_regex: invalid regex: missing ), unterminated subpattern at position 0"
    )


def test_api_key_env_outside_the_prefix():
    with pytest.raises(BackendConfigError) as caught:
        api_key_env_check(name="DATABASE_URL", prefix="TEAM_A_")
    assert caught.value.message == reason(BackendConfigCode.ENV_PREFIX, prefix="TEAM_A_")
    assert str(caught.value) == (
        "backend_config.api_key_env: not an allowed variable; allowed: a name starting with 'TEAM_A_'"
    )
    with pytest.raises(BackendConfigError) as caught:
        api_key_env_check(name="TEAM_A_KEY", prefix="")
    assert caught.value.message == reason(BackendConfigCode.ENV_NO_PREFIX)
    with translation.override("zh-hans"):
        assert reason_words(caught.value.message) == "不是允许的变量；允许的变量：无（未配置前缀）"


def test_a_checkpoint_outside_the_model_folder(tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    assert checkpoint_path_resolve(path="v3", model_dir=root) == (root / "v3").resolve()
    with pytest.raises(BackendConfigError) as caught:
        checkpoint_path_resolve(path="../elsewhere", model_dir=root)
    assert (caught.value.field, caught.value.message) == (
        "backend_config.path",
        reason(BackendConfigCode.OUTSIDE_MODEL_DIR, root=str(Path(root).resolve())),
    )


def test_prices_are_optional_numbers_at_least_0_and_not_part_of_the_models_identity():
    base = {"base_url": "http://h:1/v1", "model": "m"}
    assert "price_per_1k_input" not in backend_config_validate(kind="openai", config=base)
    priced = backend_config_validate(
        kind="openai", config={**base, "price_per_1k_input": 0, "price_per_1k_output": 0.25}
    )
    assert (priced["price_per_1k_input"], priced["price_per_1k_output"]) == (0, 0.25)
    # A new price is the same model: the same hash, which its server announces.
    unpriced = backend_config_validate(kind="openai", config=base)
    assert backend_config_hash(kind="openai", config=priced) == backend_config_hash(
        kind="openai", config=unpriced
    )
    for bad in (-0.01, "1", True):
        with pytest.raises(BackendConfigError) as caught:
            backend_config_validate(kind="openai", config={**base, "price_per_1k_output": bad})
        assert caught.value.field == "backend_config.price_per_1k_output"

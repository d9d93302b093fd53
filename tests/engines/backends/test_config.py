import pytest

from engines.backends.config import DEFAULT_LABEL_REGEX, BackendConfigError, backend_config_validate


def test_fills_defaults():
    config = backend_config_validate(kind="openai", config={"base_url": "http://h:1/v1", "model": "m"})
    assert config["label_regex"] == DEFAULT_LABEL_REGEX
    assert config["max_retries"] == 3 and config["max_concurrency"] == 4


@pytest.mark.parametrize(
    ("kind", "config", "field"),
    [
        ("vllm", {}, "backend_kind"),
        ("openai", [], "backend_config"),
        ("openai", {"model": "m"}, "backend_config.base_url"),
        ("openai", {"base_url": "ftp://x", "model": "m"}, "backend_config.base_url"),
        ("openai", {"base_url": "http://x", "model": "m", "api_key": "s"}, "backend_config.api_key"),
        ("openai", {"base_url": "http://x", "model": "m", "timeout_s": "9"}, "backend_config.timeout_s"),
        (
            "openai",
            {"base_url": "http://x", "model": "m", "max_concurrency": 0},
            "backend_config.max_concurrency",
        ),
        ("openai", {"base_url": "http://x", "model": "m", "label_regex": "(x"}, "backend_config.label_regex"),
        ("openai", {"base_url": "http://x", "model": "m", "label_regex": "x"}, "backend_config.label_regex"),
        ("hf", {}, "backend_config.path"),
        ("hf", {"path": " "}, "backend_config.path"),
        ("hf", {"path": "p", "batch_size": True}, "backend_config.batch_size"),
        ("builtin", {"path": "p", "colour": 1}, "backend_config.colour"),
    ],
)
def test_bad_configs_name_the_field(kind, config, field):
    with pytest.raises(BackendConfigError) as caught:
        backend_config_validate(kind=kind, config=config)
    assert caught.value.field == field

"""The one error body in the request's language: the refusal's coarse `code`, its fine `reason` and
`params` (the same in every language), and `message` and field notes in the language the request
asks for (`Accept-Language`). DRF's own refusals keep DRF's words, in DRF's translation."""

import re

import pytest

from tests.evalhub.api.test_canary import act, create, manager, versions  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

CHINESE = re.compile(r"[\u4e00-\u9fff]")


def busy_start(client, language: str):
    """Start a second experiment of a family that has one running: refused (409)."""
    create(client)
    create(client, name="second")
    act(client, "start")
    return client.post(
        "/api/v1/canary/experiments/second/start", {}, format="json", HTTP_ACCEPT_LANGUAGE=language
    )


def test_a_409_names_the_refusal_in_chinese_with_its_params(manager, versions):  # noqa: F811
    response = busy_start(manager, "zh-hans")
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert (error["code"], error["reason"], error["params"]) == (
        "conflict",
        "experiments.family_busy",
        {"family": "ca"},
    )
    assert error["message"] == "系列 “ca” 已有运行中或已暂停的实验。"
    assert error["fields"] == {"family": ["每个系列只能有一个运行中或已暂停的灰度实验"]}


def test_the_same_409_in_english(manager, versions):  # noqa: F811
    error = busy_start(manager, "en").json()["error"]
    assert (error["code"], error["reason"], error["params"]) == (
        "conflict",
        "experiments.family_busy",
        {"family": "ca"},
    )
    assert error["message"] == "Family 'ca' already has a running or paused experiment."
    assert error["fields"] == {"family": ["one running or paused experiment per family"]}


def test_terms_in_params_are_codes_and_in_the_message_labels(manager, versions):  # noqa: F811
    create(manager)
    act(manager, "start")
    act(manager, "rollback", reason="done")
    english = act(manager, "pause").json()["error"]
    chinese = manager.post(
        "/api/v1/canary/experiments/v4-canary/pause", {}, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans"
    ).json()["error"]
    assert english["reason"] == chinese["reason"] == "experiments.illegal_transition"
    assert (
        english["params"]
        == chinese["params"]
        == {
            "name": "v4-canary",
            "status": {"term": "rolled_back"},
            "to": {"term": "paused"},
        }
    )
    assert english["message"] == "Experiment v4-canary cannot go from rolled_back to paused."
    assert CHINESE.search(chinese["message"]) and "v4-canary" in chinese["message"]
    assert "rolled_back" not in chinese["message"]  # the status is named by its label
    assert chinese["fields"]["status"] == ["已回滚时不可再变更：实验已结束"]


def test_a_serializer_400_is_drfs_in_chinese(manager, versions):  # noqa: F811
    response = manager.post(
        "/api/v1/canary/experiments/", {"name": "x"}, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans"
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("invalid", "api.invalid_input")
    assert error["params"] == {"fields": ["baseline", "candidate"]}
    assert error["message"] == "输入无效：baseline, candidate"
    assert error["fields"]["baseline"] == ["该字段是必填项。"]  # DRF's own catalogue


def test_a_drf_refusal_keeps_drfs_words(client):
    response = client.get("/api/v1/canary/experiments/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 401
    error = response.json()["error"]
    assert (error["code"], error["reason"], error["params"]["detail"]) == (
        "not_authenticated",
        "api.refused",
        error["message"],
    )
    assert CHINESE.search(error["message"])

"""Which queues have a live worker: read from Celery's `inspect().active_queues()` reply (the shape
below is a real reply of `celery -A workers worker -Q gpu --hostname gpu@%h` on the filesystem
broker), cached briefly, and "unknown" (never "absent") when the workers cannot be asked."""

import pytest
from django.core.cache import cache

from registry.selectors.workers import UNKNOWN, queue_workers_get, queue_workers_parse


def queue(name: str) -> dict:
    return {
        "name": name,
        "exchange": {
            "name": name,
            "type": "direct",
            "arguments": None,
            "durable": True,
            "passive": False,
            "auto_delete": False,
            "delivery_mode": None,
            "no_declare": False,
        },
        "routing_key": name,
        "queue_arguments": None,
        "binding_arguments": None,
        "consumer_arguments": None,
        "durable": True,
        "exclusive": False,
        "auto_delete": False,
        "no_ack": False,
        "alias": None,
        "bindings": [],
        "no_declare": None,
        "expires": None,
        "message_ttl": None,
        "max_length": None,
        "max_length_bytes": None,
        "max_priority": None,
    }


REPLY = {"gpu@vm": [queue("gpu")], "cpu@vm": [queue("cpu")], "both@vm": [queue("cpu"), queue("gpu")]}


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


def test_the_reply_says_which_workers_consume_each_queue():
    found = queue_workers_parse(REPLY)
    assert found.consumers("gpu") == ("both@vm", "gpu@vm")
    assert found.consumers("cpu") == ("both@vm", "cpu@vm")


def test_no_reply_means_no_worker_consumes_any_queue():
    # `active_queues()` returns None when no worker answered within the timeout.
    assert queue_workers_parse(None).consumers("gpu") == ()


def test_workers_that_cannot_be_asked_are_unknown_not_absent():
    def broker_down():
        raise ConnectionRefusedError(111, "Connection refused")

    assert queue_workers_get(inspect=broker_down) == UNKNOWN
    assert UNKNOWN.consumers("gpu") is None


def test_the_answer_is_cached_so_pages_do_not_wait_on_every_request():
    asked = []

    def inspect():
        asked.append(1)
        return {"cpu@vm": [queue("cpu")]}

    assert queue_workers_get(inspect=inspect).consumers("gpu") == ()
    assert queue_workers_get(inspect=inspect).consumers("cpu") == ("cpu@vm",)
    assert len(asked) == 1


def test_asking_is_off_when_its_timeout_is_zero(settings):
    settings.EVALHUB_WORKER_INSPECT_SECONDS = 0
    assert queue_workers_get() == UNKNOWN

"""The reference model server under a burst of new connections: every one is answered (queued
behind the one forward pass at a time), none refused or reset. With the standard library's listen
backlog of 5, the same burst lost connections (reset, or timed out waiting for SYN retransmits)."""

import socket
import threading
from collections import Counter

import httpx
import pytest

from engines.model_server import model_server_create
from registry.actors import SYSTEM
from registry.services.versions import model_version_backend, model_version_register

pytestmark = pytest.mark.django_db
BURST, ROUNDS = 64, 2
BODY = {"messages": [{"role": "user", "content": "The Buyer shall pay each invoice within 30 days."}]}


@pytest.fixture
def server(small_bow):
    version = model_version_register(
        family="fam",
        label="v3",
        backend_kind="builtin",
        backend_config={"path": str(small_bow)},
        actor=SYSTEM,
    )
    server = model_server_create(
        backend=model_version_backend(version=version, cached=False), model_name=version.ref, port=0
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_burst_of_new_connections_is_queued_and_answered_not_refused(server):
    assert server.request_queue_size == socket.SOMAXCONN and server.daemon_threads
    url = f"http://127.0.0.1:{server.server_port}/v1/chat/completions"
    outcomes: Counter = Counter()
    barrier = threading.Barrier(BURST)

    def client() -> None:
        for _ in range(ROUNDS):
            barrier.wait()  # all connect at once, as a proxy's pool warming up or several proxies do
            try:
                response = httpx.post(url, json=BODY, headers={"Connection": "close"}, timeout=30)
                outcomes[response.status_code] += 1
            except httpx.HTTPError as exc:
                outcomes[type(exc).__name__] += 1

    threads = [threading.Thread(target=client) for _ in range(BURST)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert outcomes == Counter({200: BURST * ROUNDS})


def test_a_model_failure_is_answered_as_a_500_naming_it_and_the_server_keeps_serving(server, monkeypatch):
    url = f"http://127.0.0.1:{server.server_port}/v1/chat/completions"
    # The model itself raising (a bug, an out-of-memory): injected, no real input makes it fail.
    monkeypatch.setattr(server.model.backend, "predict", lambda inputs: 1 / 0)
    failed = httpx.post(url, json=BODY, timeout=30)
    monkeypatch.undo()
    assert failed.status_code == 500
    assert failed.json()["error"]["message"] == "ZeroDivisionError: division by zero"
    assert httpx.post(url, json=BODY, timeout=30).status_code == 200

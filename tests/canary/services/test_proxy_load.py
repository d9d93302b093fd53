"""The model server holds the concurrency the canary puts on it: 16 clients at once through the
canary proxy (a live Django server) to a healthy candidate and baseline served by the reference
model server (`engines.model_server`), on loopback. A candidate that answers every request it
receives must not be failed over: the guardrail analysis would read refused connections as the
candidate's errors and roll a good candidate back."""

import threading
import time

import httpx
import pytest

from canary.models import TurnEvent
from tests.canary.services.test_proxy import proxy_url, running, served, token  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
CLIENTS, PER_CLIENT = 16, 64  # 1 024 requests: one failover would be 0.098 %
QUESTION = "The Buyer shall pay each invoice within 30 days of receipt."


def client_run(url: str, key: str, index: int, outcomes: list, barrier: threading.Barrier) -> None:
    """One chat app thread: its own keep-alive connection, a new user per request, no retries."""
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        barrier.wait()
        for n in range(PER_CLIENT):
            body = {"messages": [{"role": "user", "content": QUESTION}], "user": f"load-{index}-{n}"}
            try:
                response = client.post(url, json=body)
                outcomes.append((response.status_code, response.headers.get("X-EvalHub-Fallback")))
            except httpx.HTTPError as exc:
                outcomes.append((type(exc).__name__, None))


def test_16_concurrent_clients_through_the_proxy_see_no_failover_of_a_healthy_candidate(
    live_server,
    served,  # noqa: F811
    token,  # noqa: F811
):
    running(served, percent=50)
    url = f"{proxy_url(live_server)}/chat/completions"
    outcomes: list = []
    barrier = threading.Barrier(CLIENTS)
    threads = [
        threading.Thread(target=client_run, args=(url, token, i, outcomes, barrier)) for i in range(CLIENTS)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    seconds = time.perf_counter() - started
    total = CLIENTS * PER_CLIENT
    assert len(outcomes) == total
    answered = [fallback for status, fallback in outcomes if status == 200]
    failovers = sum(fallback == "1" for fallback in answered)
    failed = total - len(answered)
    candidate = TurnEvent.objects.filter(role="assistant", arm="candidate").count()
    print(
        f"{total} requests in {seconds:.1f} s: {failovers} failovers, {failed} errors, {candidate} candidate"
    )
    assert failed == 0, sorted({str(status) for status, _ in outcomes if status != 200})
    assert candidate > 300  # about half the users are on the candidate
    assert failovers / total <= 0.001, f"{failovers} failovers of {total} requests"

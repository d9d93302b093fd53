"""Every gate run that ends in `error` or `failed` says what failed. The refused-connection case runs
for real: an OpenAI-compatible version whose address is a loopback port nobody listens on, through
the Celery task with its retries (applied eagerly), then the run's page."""

import socket
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from engines.backends import BackendError
from gate.models import GateRun
from gate.services.gate_runs import gate_run_execute, gate_run_reap_stale, gate_run_release
from registry.actors import SYSTEM
from registry.services.tokens import user_role_grant
from registry.services.versions import model_version_register
from tests.gate.services.test_gate_runs import ROBUST, start, suite  # noqa: F401 (fixtures)
from tests.wordings import english
from workers.tasks import exception_text, gate_run_execute_task

pytestmark = pytest.mark.django_db


def closed_port() -> int:
    """A loopback port that refuses connections: bound once to learn a free one, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def refusing():
    port = closed_port()
    version = model_version_register(
        family="fam",
        label="remote",
        backend_kind="openai",
        actor=SYSTEM,
        backend_config={"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "max_retries": 0},
    )
    return version, f"http://127.0.0.1:{port}/v1/chat/completions"


def refused(message: str, address: str) -> bool:
    return f"fam:remote: {address}: unreachable: ConnectError:" in message and "Connection refused" in message


@pytest.mark.parametrize("attempts", [3, 10])  # the run's attempts run out first, or the task's retries
def test_a_refused_connection_ends_error_naming_the_address_and_the_exception(
    refusing,
    suite,  # noqa: F811
    sent_tasks,
    settings,
    attempts,
):
    settings.EVALHUB_GATE_RUN_MAX_ATTEMPTS = attempts
    version, address = refusing
    run = start(version, suite)
    gate_run_execute_task.apply(args=[run.pk])
    run.refresh_from_db()
    assert (run.status, run.verdict) == ("error", "error")
    assert refused(run.error_message, address), run.error_message
    assert english(run.verdict_reasons) == [run.error_message]
    expected = "gave up after 3 attempts; last error: " if attempts == 3 else "gave up: "
    assert run.error_message.startswith(expected)
    code = "gate_runs.last_error" if attempts == 3 else "gate_runs.gave_up"
    assert run.error_reason["code"] == code
    reader = get_user_model().objects.create_user(username="reader")
    user_role_grant(user=reader, role="viewer")
    client = Client()
    client.force_login(reader)
    assert address in client.get(f"/gate-runs/{run.pk}/").content.decode()
    chinese = client.get(f"/gate-runs/{run.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert address in chinese and ("尝试 3 次后放弃" if attempts == 3 else "已放弃") in chinese
    assert f"无法连接 {address}" in chinese
    api = client.get(f"/api/v1/gate-runs/{run.pk}/").json()
    assert api["error_reason"]["code"] == code and api["error_reason"]["message"] == run.error_message


def test_between_attempts_the_queued_run_says_what_failed_and_a_later_success_clears_it(
    refusing,
    suite,  # noqa: F811
    sent_tasks,
    small_bow,
):
    version, address = refusing
    run = start(version, suite, clean_accuracy_min=0.0)
    with pytest.raises(BackendError) as caught:
        gate_run_execute(gate_run_id=run.pk, worker="w1")
    gate_run_release(gate_run_id=run.pk, worker="w1", error=str(caught.value))
    run.refresh_from_db()
    assert run.status == "queued" and refused(run.error_message, address)
    # The endpoint comes back (here: the version now runs in-process): the run ends without the old error.
    type(version).objects.filter(pk=version.pk).update(
        backend_kind="builtin", backend_config={"path": str(small_bow)}
    )
    run = gate_run_execute(gate_run_id=run.pk, worker="w2")
    assert (run.status, run.verdict, run.error_message) == ("succeeded", "pass", "")


def test_a_layer_that_ends_in_error_puts_its_reason_in_the_runs_message(versions, suite):  # noqa: F811
    run = start(versions[0], suite, **ROBUST, robustness_recipe="textfooler", clean_accuracy_min=0.0)
    run = gate_run_execute(gate_run_id=run.pk, worker="w")
    assert (run.status, run.verdict) == ("succeeded", "error")
    reason = run.layers.get(layer="robustness").reasons[0]
    assert run.error_message == f"robustness error: {reason}" and "textfooler" in reason


def test_an_exception_is_named_by_its_type_and_text():
    assert exception_text(ValueError("bad value")) == "ValueError: bad value"
    assert exception_text(KeyError()) == "KeyError"
    assert exception_text(RuntimeError("  ")) == "RuntimeError"


def test_the_reaper_names_the_worker_and_the_last_error(suite, versions, settings):  # noqa: F811
    run = start(versions[0], suite)
    GateRun.objects.filter(pk=run.pk).update(
        status="running",
        worker="gpu-1",
        attempts=settings.EVALHUB_GATE_RUN_MAX_ATTEMPTS,
        heartbeat_at=timezone.now() - timedelta(hours=1),
        error_message="fam:v2: http://10.0.0.5/v1/chat/completions: unreachable: ReadTimeout",
    )
    gate_run_reap_stale()
    run.refresh_from_db()
    assert run.status == "error" and run.error_message.startswith("worker gpu-1 stopped reporting at ")
    assert run.error_message.endswith(
        "; last error: fam:v2: http://10.0.0.5/v1/chat/completions: unreachable: ReadTimeout"
    )

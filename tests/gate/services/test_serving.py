"""What was judged is what serves. A version's serving address is fixed at registration or set by a
release manager before it is evaluated; an `openai` version serves where its gate calls it; the
model server announces the hash of the version it serves, and the gate (before its model layers),
the canary's start and the proxy's first call catch an address that serves another model. Real model
servers on loopback, a real gate run, the real proxy."""

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from django.db import transaction

from canary.models import Experiment, TurnEvent
from canary.services.experiments import ExperimentsCode, experiment_create, experiment_start
from canary.services.proxy import chat_completion_proxy
from engines.demo.dataset import demo_dataset_build
from engines.model_server import model_server_create
from engines.reasons import Term, reason
from gate.services.gate_runs import gate_run_execute, gate_run_start
from registry.actors import SYSTEM
from registry.errors import ApplicationError
from registry.models import AuditLog, ModelVersion
from registry.services.serving import ServingCode, model_version_serving_verify
from registry.services.suites import eval_suite_import, suite_items_parse
from registry.services.versions import (
    VersionsCode,
    model_version_backend,
    model_version_config_hash,
    model_version_register,
    model_version_serving_set,
)
from tests.canary.traffic import user_on
from tests.lifecycle import gate_run_record
from tests.wordings import english

pytestmark = pytest.mark.django_db
ENDPOINT = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def servers():
    """`servers(backend_of, config_hash, port=0)` -> the base URL of a model server announcing that hash."""
    started = []

    def start(version: ModelVersion, config_hash: str, port: int = 0) -> str:
        server = model_server_create(
            backend=model_version_backend(version=version, cached=False),
            model_name=version.ref,
            config_hash=config_hash,
            port=port,
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return f"http://127.0.0.1:{server.server_port}/v1"

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.fixture
def family(small_bow):
    """fam:v1 (baseline) and fam:v2 (candidate) on the small bag of words, and fam:other, another model."""
    builtin = {"backend_kind": "builtin", "backend_config": {"path": str(small_bow)}}
    v1 = model_version_register(family="fam", label="v1", actor=SYSTEM, **builtin)
    v2 = model_version_register(family="fam", label="v2", actor=SYSTEM, baseline=v1, **builtin)
    other = model_version_register(
        family="fam",
        label="other",
        actor=SYSTEM,
        backend_kind="builtin",
        backend_config={"path": "placeholder"},
    )
    return v1, v2, other


def serve_at(version: ModelVersion, url: str) -> ModelVersion:
    return model_version_serving_set(version=version, serving_url=url, actor=SYSTEM, reason="served here")


# ---------------------------------------------------------------------------------------------
# Where a version serves: set once, by whom, and for openai the gate's own endpoint
# ---------------------------------------------------------------------------------------------
def test_an_openai_version_serves_where_its_gate_calls_it():
    common = {"family": "fam", "backend_kind": "openai", "backend_config": ENDPOINT, "actor": SYSTEM}
    with pytest.raises(ApplicationError) as caught:
        model_version_register(label="elsewhere", serving_url="http://127.0.0.1:8999/v1", **common)
    assert (caught.value.status_code, list(caught.value.fields)) == (400, ["serving_url"])
    assert caught.value.reason == reason(
        VersionsCode.SERVING_URL_NOT_GATED, url="http://127.0.0.1:8999/v1", base="http://127.0.0.1:9/v1"
    )
    assert model_version_register(label="same", serving_url="http://127.0.0.1:9/v1/", **common).serving_url
    empty = model_version_register(label="empty", **common)
    with pytest.raises(ApplicationError) as caught:
        model_version_serving_set(version=empty, serving_url="http://127.0.0.1:8999/v1", actor=SYSTEM)
    assert list(caught.value.fields) == ["serving_url"]
    assert model_version_serving_verify(version=empty) is None  # its base_url, which the gate calls


def test_the_serving_address_is_set_by_a_release_manager_before_the_gate_and_audited(decision_user, family):
    _, v2, _ = family
    with pytest.raises(ApplicationError) as caught:
        model_version_serving_set(
            version=v2, serving_url="http://127.0.0.1:8101/v1", actor=decision_user("ci")
        )
    assert caught.value.status_code == 403
    manager = decision_user()
    serve = {"serving_url": "http://127.0.0.1:8101/v1", "actor": manager, "reason": "deployed"}
    model_version_serving_set(version=v2, **serve)
    row = AuditLog.objects.get(action="model_version.serving_set")
    assert (row.actor, row.after, row.reason) == (manager, {"serving_url": serve["serving_url"]}, "deployed")


def test_an_address_changed_after_the_gate_is_refused_a_new_version_serves_there(decision_user, family):
    _, v2, _ = family
    serve_at(v2, "http://127.0.0.1:8101/v1")
    gate_run_record(v2, "pass")
    with pytest.raises(ApplicationError) as caught:
        model_version_serving_set(
            version=v2, serving_url="http://127.0.0.1:8102/v1", actor=decision_user(), reason="moved"
        )
    error = caught.value
    assert (error.status_code, error.code, list(error.fields)) == (409, "evaluated_version", ["serving_url"])
    assert error.reason == reason(
        VersionsCode.SERVING_URL_EVALUATED, ref="fam:v2", status=Term("gate_passed")
    )
    v2.refresh_from_db()
    assert v2.serving_url == "http://127.0.0.1:8101/v1"
    v3 = model_version_register(
        family="fam",
        label="v3",
        actor=SYSTEM,
        serving_url="http://127.0.0.1:8102/v1",
        backend_kind=v2.backend_kind,
        backend_config=v2.backend_config,
    )
    assert v3.serving_url == "http://127.0.0.1:8102/v1"


def test_the_api_sets_the_address_for_release_managers_until_the_gate(make_client, family):
    _, v2, _ = family
    url = "/api/v1/model-versions/fam:v2/serving-url/"
    body = {"serving_url": "http://127.0.0.1:8101/v1", "reason": "deployed"}
    assert make_client("ci").post(url, body, format="json").status_code == 403
    manager = make_client("release_manager")
    answer = manager.post(url, body, format="json")
    assert answer.status_code == 200 and answer.json()["serving_url"] == body["serving_url"]
    gate_run_record(v2, "fail")
    refused = manager.post(url, {**body, "serving_url": "http://127.0.0.1:8102/v1"}, format="json")
    assert refused.status_code == 409 and list(refused.json()["error"]["fields"]) == ["serving_url"]


# ---------------------------------------------------------------------------------------------
# What the address serves
# ---------------------------------------------------------------------------------------------
def test_the_model_server_announces_the_hash_of_what_it_serves(family, servers):
    _, v2, _ = family
    expected = model_version_config_hash(version=v2)
    url = servers(v2, expected)
    models = httpx.get(f"{url}/models").json()["data"]
    assert [(m["id"], m["evalhub_config_hash"]) for m in models] == [("fam:v2", expected)]
    assert httpx.get(url.removesuffix("/v1") + "/health").json()["config_hash"] == expected


def test_an_address_that_serves_another_model_is_caught_naming_it_and_both_hashes(family, servers):
    _, v2, other = family
    url = servers(v2, model_version_config_hash(version=other))
    serve_at(v2, url)
    check = model_version_serving_verify(version=v2)
    mine, theirs = model_version_config_hash(version=v2), model_version_config_hash(version=other)
    assert check.mismatch
    assert check.problem == reason(
        ServingCode.OTHER_MODEL, url=url, announced=theirs[:12], ref="fam:v2", expected=mine[:12]
    )


def test_a_listener_that_is_no_model_server_is_another_model(family):
    class Listener(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"data": [{"id": "fam:v2"}]}')

        def log_message(self, *args):
            pass

    listener = ThreadingHTTPServer(("127.0.0.1", 0), Listener)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        _, v2, _ = family
        serve_at(v2, f"http://127.0.0.1:{listener.server_port}/v1")
        check = model_version_serving_verify(version=v2)
        assert check.mismatch and check.problem is not None
        assert (check.problem.code, check.problem.params["announced"]) == (ServingCode.OTHER_MODEL, "none")
    finally:
        listener.shutdown()
        listener.server_close()


def test_an_address_nobody_answers_yet_is_no_mismatch(family):
    _, v2, _ = family
    serve_at(v2, f"http://127.0.0.1:{free_port()}/v1")
    check = model_version_serving_verify(version=v2, timeout=2)
    assert not check.mismatch and check.problem is not None and check.problem.code == ServingCode.NO_ANSWER


@pytest.fixture
def suite():
    items = demo_dataset_build(seed=0).eval[:20]
    records = [{"id": i.id, "input": i.input, "label": i.label, "language": i.language} for i in items]
    return eval_suite_import(name="fam", items=suite_items_parse(records=records), actor=SYSTEM)[0]


@pytest.mark.parametrize("serves", ["another model", "its own model", "nothing yet"])
def test_the_gates_model_layers_error_when_the_address_serves_another_model(family, servers, suite, serves):
    _, v2, other = family
    if serves == "nothing yet":
        url = f"http://127.0.0.1:{free_port()}/v1"
    else:
        url = servers(v2, model_version_config_hash(version=other if serves == "another model" else v2))
    serve_at(v2, url)
    overrides = {"required_layers": ["clean_accuracy"], "clean_accuracy_min": 0.0, "batch_size": 10}
    run = gate_run_start(candidate=v2, suite=suite, actor=SYSTEM, policy_overrides=overrides)
    run = gate_run_execute(gate_run_id=run.pk, worker="w1")
    layer = run.layers.get(layer="clean_accuracy")
    if serves == "another model":
        mine, theirs = model_version_config_hash(version=v2), model_version_config_hash(version=other)
        assert (run.verdict, layer.verdict) == ("error", "error")
        assert english(layer.reasons) == [
            f"not the model that serves: {url} serves config hash {theirs[:12]}, not fam:v2's {mine[:12]}"
        ]
        assert not layer.samples.exists()
    else:  # judged as ever (20 items are too few for a verdict: insufficient data)
        assert layer.verdict == "insufficient_data" and layer.samples.count() == 40


# ---------------------------------------------------------------------------------------------
# The canary: its start, and the proxy's first call
# ---------------------------------------------------------------------------------------------
def test_a_canary_whose_candidate_serves_another_model_does_not_start(family, servers):
    v1, v2, other = family
    serve_at(v1, servers(v1, model_version_config_hash(version=v1)))
    serve_at(v2, servers(v2, model_version_config_hash(version=other)))
    experiment = experiment_create(name="exp", baseline=v1, candidate=v2, actor=SYSTEM)
    with pytest.raises(ApplicationError) as caught, transaction.atomic():
        experiment_start(experiment=experiment, actor=SYSTEM)
    error = caught.value
    assert (error.status_code, error.code, list(error.fields)) == (409, "serving_mismatch", ["serving_url"])
    assert (error.reason.code, error.reason.params["name"]) == (ExperimentsCode.CANNOT_START, "exp")
    assert error.reason.params["why"].code == ServingCode.OTHER_MODEL
    assert Experiment.objects.get(name="exp").status == "draft"


def test_the_proxys_first_call_catches_a_model_swapped_in_after_the_start(family, servers):
    v1, v2, other = family
    serve_at(v1, servers(v1, model_version_config_hash(version=v1)))
    port = free_port()
    serve_at(v2, f"http://127.0.0.1:{port}/v1")  # its server is not up yet: the start goes ahead
    experiment = experiment_start(
        experiment=experiment_create(name="exp", baseline=v1, candidate=v2, traffic_percent=50, actor=SYSTEM),
        actor=SYSTEM,
    )
    servers(v2, model_version_config_hash(version=other), port=port)  # then another model comes up there
    body = {"messages": [{"role": "user", "content": "The buyer pays within 30 days."}]}
    answer = chat_completion_proxy(
        experiment=experiment, body=body, user_id=user_on(experiment, "candidate", "u")
    )
    assert (answer.arm, answer.version, answer.fallback) == ("candidate", v1, True)
    turn = TurnEvent.objects.get(role="assistant")
    mine = model_version_config_hash(version=v2)
    assert (
        f"serves config hash {model_version_config_hash(version=other)[:12]}, not fam:v2's {mine[:12]}"
        in (turn.error)
    )

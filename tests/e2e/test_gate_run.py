"""A gate run end to end, as a user runs it: demo set up by `manage.py demo_setup`, a real
gunicorn, a real Celery worker process, the API polled over HTTP. Once on PostgreSQL + Redis,
once on the embedded defaults (SQLite + filesystem broker), with the same code: there on a fifth
of layer 1's perturbed samples, and without the demo policies' second runs (the suite's time)."""

import pytest

from engines.backends import backend_build
from evalhub.devstack import demo_client, gate_run_wait, manage, port_free, web_start, worker_start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def direct_accuracy(version: dict, items: list[dict], model_dir) -> float:
    """The same version's accuracy computed here, in-process, straight from the checkpoint."""
    config = {**version["backend_config"], "path": str(model_dir / version["backend_config"]["path"])}
    predictions = backend_build(kind=version["backend_kind"], config=config).predict(
        [i["input"] for i in items]
    )
    return sum(p.label == i["label"] for p, i in zip(predictions, items, strict=True)) / len(items)


@pytest.mark.parametrize("embedded", [False, True], ids=["postgres-redis", "sqlite-filesystem"])
def test_gate_run_through_api_broker_worker_and_db(
    embedded, stack_env, redis_clean, demo_model_dir, tmp_path, request
):
    if not embedded:
        request.getfixturevalue("services_required")
    env, var_dir = stack_env(embedded=embedded)
    manage("migrate", "--noinput", env=env)
    manage("demo_setup", env=env)
    port = port_free()
    worker = worker_start(env=env, log_dir=tmp_path)
    web = web_start(env=env, log_dir=tmp_path, port=port)
    try:
        client = demo_client(port=port, var_dir=var_dir)
        # Layer 1 as the random-noise check (the family's attack is timed in bench/robustness_gate.py).
        noise = {"robustness_recipe": "robustness-v1"}
        if embedded:
            noise.update(robustness_samples=200, robustness_min_samples=100)
        samples = noise.get("robustness_samples", 1000)
        started = client.post(
            "/api/v1/gate-runs/", json={"candidate": "contract-assistant:v4", "policy_overrides": noise}
        )
        assert started.status_code == 202, started.text
        run = gate_run_wait(client=client, run_id=started.json()["id"], timeout=600, watch=(worker, web))
        assert run["status"] == "succeeded", (run, worker.tail())
        assert run["attempts"] == 1
        layers = {layer["layer"]: layer for layer in run["layers"]}
        assert set(layers) == {"clean_accuracy", "robustness", "follow_up_rate", "business_value"}
        layer = layers["clean_accuracy"]
        # The demo canary has had no traffic yet: its layers say so, and there is no pass without them.
        assert (
            layers["follow_up_rate"]["verdict"] == layers["business_value"]["verdict"] == "insufficient_data"
        )
        verdicts = {layers[name]["verdict"] for name in ("clean_accuracy", "robustness")}
        assert verdicts <= {"pass", "fail"}
        assert run["verdict"] == ("fail" if "fail" in verdicts else "insufficient_data")
        robustness = layers["robustness"]["details"]
        assert robustness["candidate"]["n"] == robustness["baseline"]["n"] == samples
        assert 0 <= robustness["comparison"]["mcnemar_p"] <= 1

        items = client.get("/api/v1/eval-suites/contract-assistant/items/?limit=10000").json()["results"]
        v3 = client.get("/api/v1/model-versions/contract-assistant:v3/").json()
        v4 = client.get("/api/v1/model-versions/contract-assistant:v4/").json()
        candidate, baseline = layer["details"]["candidate"], layer["details"]["baseline"]
        assert (candidate["version"], baseline["version"]) == (
            "contract-assistant:v4",
            "contract-assistant:v3",
        )
        assert candidate["n"] == baseline["n"] == len(items) >= 200
        assert candidate["accuracy"] == pytest.approx(direct_accuracy(v4, items, demo_model_dir))
        assert baseline["accuracy"] == pytest.approx(direct_accuracy(v3, items, demo_model_dir))
        assert layer["ci_low"] < candidate["accuracy"] < layer["ci_high"]
        assert {"plain", "ocr_noise", "long_contract", "mixed_language"} <= set(candidate["by_tag"])

        samples = client.get(layer["samples_url"] + "&limit=10000").json()
        assert samples["count"] == 2 * len(items)
        first = samples["results"][0]
        assert first["output_label"] and first["output_text"] and first["correct"] in (True, False)
        settled = "gate_failed" if run["verdict"] == "fail" else "registered"
        assert client.get("/api/v1/model-versions/contract-assistant:v4/").json()["status"] == settled

        if embedded:
            return
        # The demo's layer-1 policies decide both ways on V4 (the README's claim). The same
        # perturbed set, so the answers come from the output cache.
        verdicts = {}
        for policy in ("demo-robustness", "demo-robustness-consistency"):
            started = client.post(
                "/api/v1/gate-runs/", json={"candidate": "contract-assistant:v4", "policy": policy}
            )
            assert started.status_code == 202, started.text
            decided = gate_run_wait(
                client=client, run_id=started.json()["id"], timeout=600, watch=(worker, web)
            )
            [layer] = decided["layers"]
            assert layer["details"]["set_hash"] == robustness["set_hash"]
            assert layer["details"]["candidate"]["computed"] == 0
            assert layer["verdict"] == ("pass" if layer["ci_low"] >= 0.85 else "fail") == decided["verdict"]
            verdicts[policy] = decided["verdict"]
        assert verdicts == {"demo-robustness": "fail", "demo-robustness-consistency": "pass"}
    finally:
        web.stop()
        worker.stop()


def test_killed_worker_mid_run_is_recovered(services_required, stack_env, redis_clean, tmp_path):
    """kill -9 of the worker in the middle of the robustness layer: the reaper requeues the run
    and a new worker finishes it from the last committed chunk."""
    env, _ = stack_env(embedded=False, EVALHUB_GATE_RUN_STALE_SECONDS=4, EVALHUB_REAPER_INTERVAL_SECONDS=1)
    manage("demo_setup", env=env)
    var_dir = tmp_path / "var"
    port = port_free()
    first = worker_start(env=env, log_dir=tmp_path, name="doomed")
    web = web_start(env=env, log_dir=tmp_path, port=port)
    second = None
    try:
        client = demo_client(port=port, var_dir=var_dir)
        started = client.post(
            "/api/v1/gate-runs/",
            json={
                "candidate": "contract-assistant:v4",
                "policy_overrides": {
                    "batch_size": 4,
                    "robustness_recipe": "robustness-v1",
                    "robustness_samples": 400,
                    "robustness_min_samples": 200,
                    "required_layers": ["clean_accuracy", "robustness"],
                },
            },
        )
        run_id = started.json()["id"]

        def attacking(body: dict) -> bool:  # some of layer 1's chunks stored
            return any(
                layer["layer"] == "robustness" and layer["done"] >= 300 for layer in body["live"]["layers"]
            )

        gate_run_wait(client=client, run_id=run_id, timeout=300, until=attacking, watch=(first,))
        first.kill()
        second = worker_start(env=env, log_dir=tmp_path, name="rescuer", beat=True)
        run = gate_run_wait(client=client, run_id=run_id, timeout=600, watch=(second,))
        assert run["status"] == "succeeded", (run, second.tail())
        assert run["attempts"] == 2
        robustness = next(layer for layer in run["layers"] if layer["layer"] == "robustness")
        assert robustness["details"]["candidate"]["n"] == 400
        # Chunks finished before the kill were kept: the rescuer computed only the rest.
        assert robustness["details"]["candidate"]["computed"] < 400
    finally:
        web.stop()
        for worker in (first, second):
            if worker:
                worker.stop()

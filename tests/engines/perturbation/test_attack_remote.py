"""An adversarial attack through a version's model server (the `openai` backend reading class scores
from token log-probabilities) is the attack on the model in-process, item by item."""

import threading
import time

import pytest

from engines.backends import backend_build
from engines.backends.builtin import BowBackend
from engines.demo.dataset import demo_dataset_build
from engines.model_server import model_server_create
from engines.outbound import OutboundPolicy
from engines.perturbation.word_attack import backend_scorer, word_attack_run

LOOPBACK = OutboundPolicy.parse(allow_networks=["127.0.0.0/8"])
BUDGET = 60


@pytest.fixture(scope="module")
def served(small_bow):
    """The small bag of words in-process, and the same checkpoint behind its model server."""
    server = model_server_create(
        backend=BowBackend.from_dir(small_bow, device="cpu"), model_name="bow", port=0
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    local = BowBackend.from_dir(small_bow, device="cpu")
    config = {"base_url": f"http://127.0.0.1:{server.server_port}/v1", "model": "bow", "labels": local.labels}
    remote = backend_build(kind="openai", config=config, outbound=LOOPBACK)
    yield local, remote
    remote.close()
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("recipe", ["textfooler-v2"])
def test_the_attack_through_the_server_is_the_attack_in_process(served, recipe):
    local, remote = served
    index = {label: i for i, label in enumerate(local.labels)}
    eval_items = demo_dataset_build(seed=0).eval
    items = [i for i in eval_items if i.language == "en"][::9][:16] + [
        i for i in eval_items if i.language == "zh"
    ][::9][:8]
    pairs = [(i.input, index[i.label]) for i in items]
    here, _ = word_attack_run(
        scorer=backend_scorer(local.class_scores), items=pairs, recipe=recipe, query_budget=BUDGET
    )
    started = time.perf_counter()
    there, _ = word_attack_run(
        scorer=backend_scorer(remote.class_scores), items=pairs, recipe=recipe, query_budget=BUDGET
    )
    seconds = time.perf_counter() - started

    def outcome(attack):
        return (attack.status, attack.perturbed, attack.label_after, attack.queries)

    assert [outcome(a) for a in there] == [outcome(a) for a in here]
    statuses = {a.status for a in here}
    # Not trivial: the bag of words loses some items and keeps others.
    assert "succeeded" in statuses and statuses & {"failed", "skipped"}
    print(
        f"{len(pairs)} items, {sum(a.queries for a in there)} queries through the server in {seconds:.1f} s"
    )

"""Robustness layer cost, measured honestly: A and B interleaved in one run, repeated, medians.

In one run, for one demo version (default V4) on the same items and model:
  * attack: the layer's word-level attack (`--recipe`, default `textfooler-v2`; `word_attack_run`: all
    items in lock step, batched model and sentence-encoder calls) on `--items` items drawn per language;
  * textattack: TextAttack's own `Attacker` with the same recipe (`recipe_attack_build`) on the same
    items, one item after another, as its users run it;
  * bare: batched inference of the attack's final perturbed texts (what scoring the set costs);
  * bare, sent: batched inference of exactly the texts the layer's attack sent to the model, in the
    batches it sent them (the physical limit of an attack that asks those questions; goal: the
    layer's attack within 1.3 of it);
  * noise (`--noise-samples`, 0 skips it): the whole random-noise layer in-process against bare
    batched inference of its perturbed samples.
With `--endpoint` it also serves the version behind its model server (loopback, `--concurrency`
requests in flight) and attacks it through the `openai` backend's log-probabilities: the attack's
query rate against the endpoint's own rate on the same texts at the same concurrency (goal >= 0.8).
Each repeat runs them one after the other with fresh caches (the sentence encoder's cache is
cleared, TextAttack's attack is built anew), so a change of load hits both; the ratios are of the
medians over `--repeats`. It also checks that both attacks agree: the outcome item by item, and the
accuracy under attack with its Wilson interval.

    python bench/robustness.py [--version contract-assistant:v4] [--items 48] [--repeats 3]
                               [--budget 500] [--noise-samples 1000] [--endpoint --concurrency 8]

Runs on a scratch SQLite database; models come from EVALHUB_MODEL_DIR (default var/models; `make
run` or `manage.py demo_setup` trains them there).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalhub.devstack import demo_in_process  # noqa: E402

os.environ.setdefault("TQDM_DISABLE", "1")  # TextAttack's Attacker draws a progress bar per item


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", default="contract-assistant:v4")
    parser.add_argument("--items", type=int, default=48, help="items attacked per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=int, default=500, help="model queries per item")
    parser.add_argument("--recipe", default="textfooler-v2", help="the word-level recipe (the family's)")
    parser.add_argument("--noise-samples", type=int, default=1000, help="0: skip the noise layer part")
    parser.add_argument(
        "--model-dir", default=os.environ.get("EVALHUB_MODEL_DIR", str(ROOT / "var" / "models"))
    )
    parser.add_argument("--endpoint", action="store_true", help="also attack the version through its server")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (--endpoint)")
    parser.add_argument(
        "--builtin",
        type=Path,
        help="attack part only, without Django: a bag-of-words checkpoint (e.g. var/models/"
        "contract-assistant/v3) on the demo's eval items",
    )
    args = parser.parse_args()
    if args.builtin:
        from engines.backends.builtin import BowBackend
        from engines.demo.dataset import demo_dataset_build

        items = [(i.id, i.input, i.label, i.language) for i in demo_dataset_build(seed=0).eval if i.label]
        backend = BowBackend.from_dir(args.builtin, device="cpu")
        attack_bench(backend=backend, name=str(args.builtin), items=items, args=args)
        if args.endpoint:
            endpoint_bench(backend=backend, items=items, args=args)
        return

    demo_in_process(model_dir=args.model_dir, prefix="evalhub-bench-robustness-")
    from evalhub.demo import demo_suite_get
    from registry.selectors.versions import model_version_get
    from registry.services.versions import model_version_backend

    version = model_version_get(ref=args.version)
    suite = demo_suite_get()
    items = [(i.external_id, i.input, i.label, i.language) for i in suite.items.all() if i.label]
    backend = model_version_backend(version=version)
    attack_bench(backend=backend, name=version.ref, items=items, args=args)
    if args.endpoint:
        endpoint_bench(backend=backend, items=items, args=args)
    if args.noise_samples:
        noise_bench(version=version, suite=suite, samples=args.noise_samples, repeats=args.repeats)


def attack_bench(*, backend, name: str, items, args) -> None:
    """The layer's attack, TextAttack's Attacker and bare inference, interleaved (see the docstring)."""
    import numpy as np

    from engines.perturbation.attack import attack_result_status
    from engines.perturbation.word_attack import attack_items_draw, resources_load, word_attack_run
    from engines.stats.intervals import wilson_interval

    by_id = {i[0]: i for i in items}
    drawn, _ = attack_items_draw(items=[(i[0], i[3]) for i in items], samples=args.items, seed=0)
    index = {label: i for i, label in enumerate(backend.labels)}
    pairs = [(by_id[i][1], index[by_id[i][2]]) for i in drawn]

    # Seconds in the model's forward passes and in the sentence encoder, by phase: work both attacks
    # share, which bounds how much faster one can be.
    clock = {"phase": "warm-up", "model": {}, "encoder": {}}

    def timed(kind, started):
        phase = clock["phase"]
        clock[kind][phase] = clock[kind].get(phase, 0.0) + time.perf_counter() - started

    sent: list[list[str]] = []  # the batches the layer's attack sent, last repeat

    def scorer(texts):
        if clock["phase"] == "attack":
            sent.append(list(texts))
        started = time.perf_counter()
        probs = np.asarray(backend.class_scores(list(texts)), dtype=np.float64)
        timed("model", started)
        return probs / probs.sum(axis=1, keepdims=True)

    resources = resources_load()
    resources.encoder.warm(["warm the encoder"])  # one-time loads, not the attack's

    class TimedEncoder:
        def __init__(self, model):
            self.model = model

        def encode(self, texts):
            started = time.perf_counter()
            out = self.model.encode(texts)
            timed("encoder", started)
            return out

    resources.encoder._model = TimedEncoder(resources.encoder._model)
    # One-time loads (the model's first call, jieba's dictionary, the recipe's TextAttack objects) before
    # any timing: otherwise the layer, which runs first, pays them in its first repeat.
    word_attack_run(scorer=scorer, items=pairs[:1], recipe=args.recipe, query_budget=1)
    times: dict[str, list[float]] = {"attack": [], "textattack": [], "bare": []}
    model_times: dict[str, list[float]] = {"attack": [], "textattack": []}
    encoder_times: dict[str, list[float]] = {"attack": [], "textattack": []}
    same_outcome = same_text = both_succeeded = ours_correct = theirs_correct = 0
    times["bare, sent"] = []
    for _ in range(args.repeats):
        clock["model"], clock["encoder"] = {}, {}
        sent.clear()
        ours, theirs, seconds = attack_pair(
            pairs=pairs,
            clock=clock,
            scorer=scorer,
            backend=backend,
            budget=args.budget,
            recipe=args.recipe,
            resources=resources,
        )
        for key, value in seconds.items():
            times[key].append(value)
            model_times[key].append(clock["model"].get(key, 0.0))
            encoder_times[key].append(clock["encoder"].get(key, 0.0))
        clock["phase"] = "bare"
        started = time.perf_counter()
        scorer([a.perturbed for a in ours])
        times["bare"].append(time.perf_counter() - started)
        started = time.perf_counter()
        for batch in sent:
            scorer(batch)
        times["bare, sent"].append(time.perf_counter() - started)
        outcomes = [(a, attack_result_status(r), r) for a, r in zip(ours, theirs, strict=True)]
        same_outcome = sum(a.status == theirs_status for a, theirs_status, _ in outcomes)
        succeeded = [(a, r) for a, st, r in outcomes if a.status == st == "succeeded"]
        both_succeeded = len(succeeded)
        same_text = sum(a.perturbed == r.perturbed_result.attacked_text.text for a, r in succeeded)
        ours_correct = sum(a.status == "failed" for a in ours)
        theirs_correct = sum(attack_result_status(r) == "failed" for r in theirs)
    medians = {key: statistics.median(values) for key, values in times.items()}
    n = len(pairs)
    print(
        f"version {name}, {args.recipe}, {n} items drawn per language (seed 0), budget {args.budget}, "
        f"{args.repeats} repeats"
    )
    print(f"{'':34}{'median s':>10}   all runs")
    for key, label in (
        ("attack", "layer attack (batched)"),
        ("textattack", "TextAttack Attacker"),
        ("bare", "bare inference, final set"),
        ("bare, sent", "bare inference, texts sent"),
    ):
        runs = " ".join(f"{v:.2f}" for v in times[key])
        print(f"{label:34}{medians[key]:>10.2f}   {runs}")
    for shared, what in ((model_times, "model forward passes"), (encoder_times, "sentence encoder")):
        for key, label in (("attack", f"  layer: {what}"), ("textattack", f"  TextAttack: {what}")):
            runs = " ".join(f"{v:.2f}" for v in shared[key])
            print(f"{label:34}{statistics.median(shared[key]):>10.2f}   {runs}")
    print(f"\nTextAttack / layer attack: {medians['textattack'] / medians['attack']:.2f}   (goal >= 5)")
    model = statistics.median(model_times["textattack"])
    encoder = statistics.median(encoder_times["textattack"])
    print(
        f"TextAttack's time in the model {model / medians['textattack']:.0%}, in the encoder "
        f"{encoder / medians['textattack']:.0%}: doing the same model and encoder work, the ratio "
        f"cannot pass {medians['textattack'] / (model + encoder):.2f}"
    )
    print(f"layer attack / bare inference: {medians['attack'] / medians['bare']:.1f}")
    print(
        f"layer attack / bare inference of the texts it sent: {medians['attack'] / medians['bare, sent']:.2f}"
        "   (goal <= 1.3)"
    )
    for who, correct in (("layer", ours_correct), ("TextAttack", theirs_correct)):
        low, high = wilson_interval(successes=correct, n=n, confidence=0.95)
        print(f"accuracy under attack, {who}: {correct / n:.3f} [{low:.3f}, {high:.3f}]")
    print(
        f"items with the same outcome: {same_outcome} / {n}; of those both flipped, the same text: "
        f"{same_text} / {both_succeeded}"
    )


def endpoint_bench(*, backend, items, args) -> None:
    """The layer's attack through the version's model server against the endpoint's own rate."""
    import threading

    from engines.backends import backend_build
    from engines.model_server import model_server_create
    from engines.outbound import OutboundPolicy
    from engines.perturbation.word_attack import attack_items_draw, backend_scorer, word_attack_run

    server = model_server_create(backend=backend, model_name="bench", port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = {
        "base_url": f"http://127.0.0.1:{server.server_port}/v1",
        "model": "bench",
        "labels": backend.labels,
        "max_concurrency": args.concurrency,
    }
    remote = backend_build(
        kind="openai", config=config, outbound=OutboundPolicy.parse(allow_networks=["127.0.0.0/8"])
    )
    by_id = {i[0]: i for i in items}
    drawn, _ = attack_items_draw(items=[(i[0], i[3]) for i in items], samples=args.items, seed=0)
    index = {label: i for i, label in enumerate(backend.labels)}
    pairs = [(by_id[i][1], index[by_id[i][2]]) for i in drawn]
    sent: list[list[str]] = []
    score = backend_scorer(remote.class_scores)

    def scorer(texts):
        sent.append(list(texts))
        return score(texts)

    started = time.perf_counter()
    attacks, _ = word_attack_run(scorer=scorer, items=pairs, recipe=args.recipe, query_budget=args.budget)
    attack_seconds = time.perf_counter() - started
    queries = sum(len(batch) for batch in sent)
    started = time.perf_counter()
    for batch in sent:
        remote.class_scores(batch)
    bare_seconds = time.perf_counter() - started
    remote.close()
    server.shutdown()
    server.server_close()
    attack_rate, endpoint_rate = queries / attack_seconds, queries / bare_seconds
    print(
        f"\nthrough the endpoint (concurrency {args.concurrency}): {queries} queries in "
        f"{attack_seconds:.2f} s "
        f"({attack_rate:.0f}/s); the same texts sent bare {bare_seconds:.2f} s ({endpoint_rate:.0f}/s); "
        f"accuracy under attack {sum(a.status == 'failed' for a in attacks) / len(attacks):.3f}"
    )
    print(f"attack query rate / endpoint's own rate: {attack_rate / endpoint_rate:.2f}   (goal >= 0.8)")


def attack_pair(*, pairs, clock, scorer, backend, budget, recipe, resources):
    """One repeat: the layer's attack, then TextAttack's Attacker, each with fresh caches."""
    from engines.perturbation.attack import attacker_results, scores_wrapper
    from engines.perturbation.word_attack import recipe_attack_build, word_attack_run

    seconds = {}
    resources.encoder._cache.clear()
    clock["phase"] = "attack"
    started = time.perf_counter()
    ours, _ = word_attack_run(scorer=scorer, items=pairs, recipe=recipe, query_budget=budget)
    seconds["attack"] = time.perf_counter() - started
    resources.encoder._cache.clear()
    clock["phase"] = "textattack"
    started = time.perf_counter()
    attack = recipe_attack_build(recipe=recipe, model_wrapper=scores_wrapper(scorer, model=backend))
    theirs = attacker_results(attack=attack, pairs=pairs, query_budget=budget, seed=0)
    seconds["textattack"] = time.perf_counter() - started
    return ours, theirs, seconds


def noise_bench(*, version, suite, samples: int, repeats: int) -> None:
    """The random-noise layer in-process vs bare batched inference of its samples, interleaved."""
    from engines.perturbation import PerturbationSpec, perturbation_engine_load, perturbation_set_build
    from gate.judges.robustness import RobustnessPolicy
    from gate.layers.registry import gate_policy_parse
    from gate.services.gate_runs import gate_run_execute, gate_run_start
    from registry.actors import SYSTEM
    from registry.services.versions import model_version_backend

    overrides = {
        "required_layers": ["robustness"],
        "run_baseline": False,
        "robustness_recipe": "robustness-v1",  # the noise check, whatever the family's policy attacks with
        "robustness_samples": samples,
        "output_cache": False,
    }
    config = gate_policy_parse(overrides)
    policy, batch_size = config.section(RobustnessPolicy), config.general.batch_size
    items = list(suite.items.all())
    perturbation_engine_load()
    spec = PerturbationSpec(recipe=policy.robustness_recipe, seed=policy.robustness_seed, samples=samples)
    texts = [
        s.perturbed
        for s in perturbation_set_build(
            items=[(i.external_id, i.input, i.language) for i in items], spec=spec
        ).samples
    ]
    backend = model_version_backend(version=version)
    layer_times, bare_times = [], []
    for _ in range(repeats):
        run = gate_run_start(candidate=version, suite=suite, actor=SYSTEM, policy_overrides=overrides)
        run = gate_run_execute(gate_run_id=run.pk, worker="bench")
        layer_times.append(run.layers.get(layer="robustness").wall_seconds)
        started = time.perf_counter()
        for start in range(0, len(texts), batch_size):
            backend.predict(texts[start : start + batch_size])
        bare_times.append(time.perf_counter() - started)
    layer, bare = statistics.median(layer_times), statistics.median(bare_times)
    print(
        f"\nnoise layer ({policy.robustness_recipe}, {len(texts)} samples): median {layer:.2f} s "
        f"({' '.join(f'{v:.2f}' for v in layer_times)}); bare batched inference {bare:.2f} s "
        f"({' '.join(f'{v:.2f}' for v in bare_times)})"
    )
    print(f"noise layer / bare inference: {layer / bare:.2f}   (goal <= 1.5)")


if __name__ == "__main__":
    main()

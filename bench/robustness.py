"""Robustness layer cost: the whole layer vs bare inference vs a naive TextAttack loop.

In one run, for one demo version (default V4) on the demo suite:
  * layer: gate layer 1 in-process as a warm worker runs it (engine loaded, model cached),
    1000 perturbed samples, its wall time split into perturbation, inference, storage, scoring;
  * bare: the same 1000 perturbed inputs through the same backend in the same batches;
  * naive: TextAttack's Augmenter per sample plus one model call per sample (the usual script),
    timed on a sample of each kind of item and scaled to the layer's samples (see naive_estimate).
Prints seconds and the ratios layer/bare (target <= 1.5) and naive/layer (target >= 5).

    python bench/robustness.py [--version contract-assistant:v4] [--samples 1000] [--naive-samples 40]

Runs on a scratch SQLite database (or DATABASE_URL); models come from EVALHUB_MODEL_DIR
(default var/models; `make run` or `manage.py demo_setup` trains them there).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", default="contract-assistant:v4")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument(
        "--naive-samples", type=int, default=40, help="short items the naive loop is timed on"
    )
    parser.add_argument(
        "--model-dir", default=os.environ.get("EVALHUB_MODEL_DIR", str(ROOT / "var" / "models"))
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="evalhub-bench-robustness-"))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="evalhub.settings.local",
        EVALHUB_VAR_DIR=str(scratch),
        EVALHUB_MODEL_DIR=args.model_dir,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    import django

    django.setup()
    from django.core.management import call_command

    from engines.perturbation import PerturbationSpec, perturbation_engine_load, perturbation_set_build
    from evalhub.demo import demo_install, demo_suite_get
    from gate.layers.registry import gate_policy_parse
    from gate.services.gate_runs import gate_run_execute, gate_run_start
    from registry.actors import SYSTEM
    from registry.selectors.versions import model_version_get
    from registry.services.versions import model_version_backend

    call_command("migrate", verbosity=0)
    demo_install(log=lambda *a: None)
    version = model_version_get(ref=args.version)
    suite = demo_suite_get()
    items = list(suite.items.all())
    overrides = {
        "required_layers": ["robustness"],
        "run_baseline": False,
        "robustness_samples": args.samples,
        "output_cache": False,
    }
    policy = gate_policy_parse(overrides)

    # A warm worker: engine loaded, model in its cache (one-time costs, not the layer's).
    perturbation_engine_load()
    run = gate_run_start(candidate=version, suite=suite, actor=SYSTEM, policy_overrides=overrides)
    model_version_backend(version=version).predict([items[0].input])

    run = gate_run_execute(gate_run_id=run.pk, worker="bench")
    layer = run.layers.get(layer="robustness")
    timings = layer.details["timings"]
    whole = layer.wall_seconds
    n = layer.details["candidate"]["n"]

    spec = PerturbationSpec(
        recipe=policy.robustness_recipe, seed=policy.robustness_seed, samples=args.samples
    )
    perturbed = perturbation_set_build(items=[(i.external_id, i.input, i.language) for i in items], spec=spec)
    texts = [s.perturbed for s in perturbed.samples]
    backend = model_version_backend(version=version, cached=False)
    backend.predict(texts[: policy.batch_size])
    started = time.perf_counter()
    for start in range(0, len(texts), policy.batch_size):
        backend.predict(texts[start : start + policy.batch_size])
    bare = time.perf_counter() - started

    naive_scaled, naive_note = naive_estimate(
        backend=backend, items=items, samples=perturbed.samples, short_samples=args.naive_samples
    )

    print(f"version {version.ref}, {n} perturbed samples from {len(items)} items, batch {policy.batch_size}")
    print(f"device: {layer.device}; robustness {layer.estimate:.3f} ({layer.verdict})\n")
    print(f"{'':28}{'seconds':>10}")
    print(f"{'layer (whole)':28}{whole:>10.2f}")
    for part in ("perturbation", "inference", "storage", "scoring"):
        print(f"{'  ' + part:28}{timings[part]:>10.2f}")
    print(f"{'  bookkeeping (rest)':28}{whole - sum(timings.values()):>10.2f}")
    print(f"{'bare batched inference':28}{bare:>10.2f}")
    print(f"{'naive loop (estimated)':28}{naive_scaled:>10.2f}  {naive_note}")
    print(f"\nlayer / bare inference: {whole / bare:.2f}   (target <= 1.5)")
    print(f"naive / layer:          {naive_scaled / whole:.2f}   (target >= 5)")


def naive_loop(*, backend, items) -> float:
    """What a first script does: TextAttack's augmenters, one sample and one model call at a time."""
    from textattack.augmentation import Augmenter, CharSwapAugmenter
    from textattack.transformations import ChineseMorphonymCharacterSwap

    english = CharSwapAugmenter(pct_words_to_swap=0.1, transformations_per_example=1)
    chinese = Augmenter(
        transformation=ChineseMorphonymCharacterSwap(), pct_words_to_swap=0.1, transformations_per_example=1
    )
    started = time.perf_counter()
    for item in items:
        augmenter = chinese if item.language == "zh" else english
        perturbed = (augmenter.augment(item.input) or [item.input])[0]
        backend.predict([perturbed])
    return time.perf_counter() - started


def naive_estimate(*, backend, items, samples, short_samples: int) -> tuple[float, str]:
    """Seconds the naive loop would take for the layer's samples, from a timed sample of each kind.

    The Augmenter rebuilds the whole text for every candidate edit, so its cost grows with the
    square of the length: minutes for one long contract (~540 words), milliseconds for a clause.
    Running it over all the samples would take hours, so it is timed on `short_samples` items
    spread over the other items and on one English and one Chinese long contract, and scaled to
    the layer's mix of samples.
    """
    long_ids = {i.external_id for i in items if "long_contract" in i.tags}
    short = [i for i in items if i.external_id not in long_ids]
    long = [
        next(i for i in items if i.external_id in long_ids and i.language == lang) for lang in ("en", "zh")
    ]
    chosen = [short[j * len(short) // short_samples] for j in range(short_samples)]
    per_short = naive_loop(backend=backend, items=chosen) / len(chosen)
    per_long = naive_loop(backend=backend, items=long) / len(long)
    n_long = sum(s.item_id in long_ids for s in samples)
    estimate = n_long * per_long + (len(samples) - n_long) * per_short
    note = (
        f"= {len(samples) - n_long} x {per_short:.3f} s (other items, timed on {len(chosen)}) "
        f"+ {n_long} x {per_long:.1f} s (long contracts, timed on {len(long)})"
    )
    return estimate, note


if __name__ == "__main__":
    main()

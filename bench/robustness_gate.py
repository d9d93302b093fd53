"""Layer 1 of the family's policy on a demo version, in-process as a warm gpu worker runs it.

    python bench/robustness_gate.py [--version contract-assistant:v4] [--policy contract-assistant]
                                    [--suite-seeds 0,1,2,3] [--recipe pwws-v1] [--samples N]
                                    [--export examples.jsonl]

Runs the robustness layer of the named policy (the family's: `textfooler-v2`, adaptive, 1000
requested) with the baseline paired, and prints the rate, its interval, the attack figures by version,
the breakdown by language and tag, McNemar against the baseline and how long it took. `--export`
writes every successful adversarial example of the candidate (item, label, label after, the swaps,
original and perturbed text) as JSON lines, for reading by hand. Scratch SQLite database; models from
EVALHUB_MODEL_DIR (default var/models).

The demo suite has 320 labelled items, so the policy's 1 000 samples attack each once. `--suite-seeds`
runs on a larger suite instead: the demo generator's eval split drawn with each seed (320 items
each, SYNTHETIC; the same held-out eval templates, new parties, amounts and noise; duplicate texts
dropped), so 0,1,2,3 gives the 1 000 samples the policy asks for from 1 176 distinct items.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalhub.devstack import demo_in_process  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", default="contract-assistant:v4")
    parser.add_argument("--policy", default="contract-assistant")
    parser.add_argument("--export", type=Path)
    parser.add_argument(
        "--samples", type=int, help="robustness_samples (and min samples) instead of the policy's"
    )
    parser.add_argument(
        "--suite-seeds", help="comma-separated generator seeds for a larger suite (default: the demo suite)"
    )
    parser.add_argument("--recipe", help="robustness_recipe instead of the policy's (e.g. pwws-v1)")
    parser.add_argument(
        "--model-dir", default=os.environ.get("EVALHUB_MODEL_DIR", str(ROOT / "var" / "models"))
    )
    args = parser.parse_args()
    demo_in_process(model_dir=args.model_dir, prefix="evalhub-bench-robustness-gate-")
    from evalhub.demo import demo_suite_get
    from gate.services.gate_runs import gate_run_execute, gate_run_start
    from registry.actors import SYSTEM
    from registry.selectors.versions import model_version_get

    version = model_version_get(ref=args.version)
    suite = demo_suite_get()
    if args.suite_seeds:
        suite = seeded_suite_install(seeds=[int(s) for s in args.suite_seeds.split(",")])
    print(f"suite {suite.name} v{suite.version}: {suite.items.count()} items", flush=True)
    overrides = {
        "required_layers": ["robustness"],
        **({"robustness_recipe": args.recipe} if args.recipe else {}),
        **(
            {"robustness_samples": args.samples, "robustness_min_samples": args.samples}
            if args.samples
            else {}
        ),
    }

    def layer_run():
        run = gate_run_start(
            candidate=version, suite=suite, actor=SYSTEM, policy_name=args.policy, policy_overrides=overrides
        )
        started = time.perf_counter()
        return gate_run_execute(gate_run_id=run.pk, worker="bench"), time.perf_counter() - started

    run, seconds = layer_run()
    # The same run again: the stored adversarial sets of both versions make it a lookup.
    _, rerun_seconds = layer_run()
    layer = run.layers.get(layer="robustness")
    d = layer.details
    print(
        f"{version.ref} under policy {args.policy}: recipe {d['recipe']}, mode {d['mode']}, seed {d['seed']}"
    )
    print(f"robustness {layer.estimate:.3f} [{layer.ci_low:.3f}, {layer.ci_high:.3f}] -> {layer.verdict}")
    print("reasons:", *layer.reasons, sep="\n  ")
    for ref, r in d["adversarial"].items():
        print(
            f"{ref}: {r['items']} items, accuracy {r['accuracy_before']:.3f} before, "
            f"{r['accuracy_under_attack']:.3f} under attack, success rate {r['attack_success_rate']:.3f}, "
            f"{r['queries_per_item']:.1f} queries per item, {r['words_changed_per_success']:.2f} words per "
            f"success, {r['budget_spent']} searches ended on the budget, {r['seconds']:.0f} s"
        )
    for side in ("candidate", "baseline"):
        if d.get(side):
            for key in ("by_language", "by_tag"):
                cells = ", ".join(f"{k} {c['correct']}/{c['n']}" for k, c in d[side][key].items())
                print(f"{d[side]['version']} {key}: {cells}")
    if d.get("comparison"):
        c = d["comparison"]
        print(
            f"McNemar: only candidate right {c['only_candidate_correct']}, only baseline right "
            f"{c['only_baseline_correct']}, p = {c['mcnemar_p']:.4f}"
        )
    print(f"layer wall {layer.wall_seconds:.0f} s; run {seconds:.0f} s; timings {d['timings']}")
    print(f"the same run again (unchanged candidate, stored sets): {rerun_seconds:.1f} s")
    if args.export:
        with args.export.open("w", encoding="utf-8") as out:
            for s in layer.samples.filter(
                version=version, perturbation__endswith=":succeeded"
            ).select_related("item"):
                record = {
                    "item": s.item.external_id,
                    "language": s.item.language,
                    "label": s.item.label,
                    "label_after": s.output_label,
                    "diff": s.diff,
                    "original": s.item.input,
                    "perturbed": s.input_text,
                }
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
        print(f"wrote {args.export}")


def seeded_suite_install(*, seeds: list[int]):
    """A suite of the demo generator's eval split drawn with each of `seeds` (ids prefixed by seed)."""
    import dataclasses

    from engines.demo.dataset import demo_dataset_build, demo_suite_jsonl
    from registry.actors import SYSTEM
    from registry.services.suites import eval_suite_import, suite_items_parse

    items, seen = [], set()
    for seed in seeds:
        for item in demo_dataset_build(seed=seed).eval:
            if item.input not in seen:
                seen.add(item.input)
                items.append(dataclasses.replace(item, id=f"s{seed}-{item.id}"))
    parsed = suite_items_parse(content=demo_suite_jsonl(items=items).encode(), fmt="jsonl")
    description = f"SYNTHETIC: the demo generator's eval split with seeds {seeds}"
    suite, _ = eval_suite_import(
        name="contract-assistant-seeds", items=parsed, description=description, actor=SYSTEM
    )
    return suite


if __name__ == "__main__":
    main()

"""Hard-label against score-based: the same recipe's attack on the same items of one demo version, once
reading its class probabilities (`word_attack_run`, what the layer runs where a version gives scores) and
once reading only the label of its answer (`hard_label_attack_run`, what it runs where a version gives
none: here the labels are the same model's argmax, so only the access differs).

For `--items` items drawn per language (seed 0, as the layer draws them): accuracy before and under
attack (Wilson 95 % interval), the attack's success rate, queries per attacked item (mean, max), words
changed per success and seconds, for both searches.

    python bench/hard_label.py [--version contract-assistant:v4] [--items 40] [--budget 500]
                               [--recipe textfooler-v2] [--seed 0]

Runs on a scratch SQLite database; models come from EVALHUB_MODEL_DIR (default var/models; `make run` or
`manage.py demo_setup` trains them there).
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--items", type=int, default=40, help="items attacked, drawn per language")
    parser.add_argument("--budget", type=int, default=500, help="model queries per item")
    parser.add_argument("--recipe", default="textfooler-v2")
    parser.add_argument("--seed", type=int, default=0, help="the hard-label search's random draws")
    parser.add_argument(
        "--model-dir", default=os.environ.get("EVALHUB_MODEL_DIR", str(ROOT / "var" / "models"))
    )
    args = parser.parse_args()

    demo_in_process(model_dir=args.model_dir, prefix="evalhub-bench-hard-label-")
    import numpy as np

    from engines.perturbation.hard_label import hard_label_attack_run
    from engines.perturbation.word_attack import (
        attack_items_draw,
        backend_scorer,
        resources_load,
        word_attack_run,
    )
    from engines.stats.intervals import wilson_interval
    from evalhub.demo import demo_suite_get
    from registry.selectors.versions import model_version_get
    from registry.services.versions import model_version_backend

    version = model_version_get(ref=args.version)
    items = {i.external_id: i for i in demo_suite_get().items.all() if i.label}
    drawn, _ = attack_items_draw(
        items=[(i.external_id, i.language) for i in items.values()], samples=args.items, seed=0
    )
    backend = model_version_backend(version=version)
    index = {label: i for i, label in enumerate(backend.labels)}
    pairs = [(items[i].input, index[items[i].label]) for i in drawn if items[i].label in index]
    scorer = backend_scorer(backend.class_scores)

    def labeler(texts):  # the label alone: the argmax of the same model's probabilities
        return [int(k) for k in np.argmax(scorer(texts), axis=1)]

    resources_load().encoder.warm(["warm the encoder"])  # one-time loads, outside both timings
    word_attack_run(scorer=scorer, items=pairs[:1], recipe=args.recipe, query_budget=1)
    results = {}
    for name, run in (
        (
            "score-based",
            lambda: word_attack_run(scorer=scorer, items=pairs, recipe=args.recipe, query_budget=args.budget),
        ),
        (
            "hard-label",
            lambda: hard_label_attack_run(
                labeler=labeler, items=pairs, recipe=args.recipe, query_budget=args.budget, seed=args.seed
            ),
        ),
    ):
        started = time.perf_counter()
        attacks, _ = run()
        results[name] = (attacks, time.perf_counter() - started)
    n = len(pairs)
    languages = {lang: sum(items[i].language == lang for i in drawn) for lang in ("en", "zh")}
    print(
        f"version {version.ref}, {args.recipe}, {n} items drawn per language (seed 0: "
        f"{languages['en']} en, {languages['zh']} zh), budget {args.budget} queries per item"
    )
    header = (
        f"{'search':13}{'acc before':>11}{'under attack':>13}{'95 % interval':>16}{'success':>9}"
        f"{'queries mean':>14}{'max':>6}{'words/success':>15}{'seconds':>9}"
    )
    print(header)
    for name, (attacks, seconds) in results.items():
        attacked = [a for a in attacks if a.status != "skipped"]
        succeeded = [a for a in attacked if a.status == "succeeded"]
        held = len(attacked) - len(succeeded)
        low, high = wilson_interval(successes=held, n=n, confidence=0.95)
        queries = [a.queries for a in attacked]
        words = sum(a.words_changed for a in succeeded) / len(succeeded) if succeeded else float("nan")
        print(
            f"{name:13}{len(attacked) / n:>11.3f}{held / n:>13.3f}{f'[{low:.3f}, {high:.3f}]':>16}"
            f"{len(succeeded) / max(1, len(attacked)):>9.3f}"
            f"{(sum(queries) / len(queries) if queries else 0):>14.1f}{max(queries, default=0):>6}"
            f"{words:>15.2f}{seconds:>9.1f}"
        )
    score, hard = (results[k][0] for k in ("score-based", "hard-label"))
    both = sum(a.status == b.status == "succeeded" for a, b in zip(score, hard, strict=True))
    only_hard = sum(
        a.status == "failed" and b.status == "succeeded" for a, b in zip(score, hard, strict=True)
    )
    only_score = sum(
        a.status == "succeeded" and b.status == "failed" for a, b in zip(score, hard, strict=True)
    )
    print(
        f"flipped by both: {both}, by the score-based search only: {only_score}, "
        f"by the hard-label only: {only_hard}"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()

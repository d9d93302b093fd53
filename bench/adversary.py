"""The layer's word-level adversaries beside TextAttack's stock PWWS, on the same items and model.

    python bench/adversary.py [--version v4] [--items 60] [--recipes textfooler-v2,pwws-v1]
                              [--export successes.jsonl] [--verdicts verdicts.tsv] [--smoke]

The model is a demo checkpoint (`contract-assistant/<version>` under EVALHUB_MODEL_DIR, default
var/models; `make run` or the tests train them), run in-process. The items are the demo eval split's
English items (SYNTHETIC) that the model answers right, the first `--items` of a seeded shuffle. Each
attack runs on all of them:
  * stock: TextAttack's own `PWWSRen2019` recipe (all WordNet synonyms of every sense, no semantic
    constraint) through `textattack.Attacker`, on NLTK's reader over Debian's WordNet database (laid out
    as `build_counterfit` does: the bench needs `apt-get install wordnet-base wordnet-sense-index`);
  * each of `--recipes`, as the robustness layer runs it (`word_attack_run`).
It prints each attack's accuracy under attack (Wilson interval), successes and queries per item, and
which of the stock attack's successes each recipe also broke. `--export` writes every success as a
JSON line (attack, item, label, label after, original, perturbed) to judge by hand; `--verdicts`
reads a judged file back (a TSV: version, attack, item id, `keep` or `change`: whether a reader would
still give the text its label; docs/label-check-adversary.tsv holds ours) and prints, per attack, the
share of its judged successes that keep the label and the share of stock's label-keeping successes
whose items the recipe broke too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def items_draw(*, answers, count: int, seed: int) -> list[tuple[str, str, str]]:
    """(item id, text, label) of English eval items the model answers right (`answers`: texts -> their
    labels, asked once for all), the first `count` of a seeded shuffle."""
    from engines.backends.base import language_of
    from engines.demo.dataset import demo_dataset_build

    english = [i for i in demo_dataset_build(seed=0).eval if language_of(i.input) == "en"]
    random.Random(seed).shuffle(english)
    right = [
        i for i, answer in zip(english, answers([i.input for i in english]), strict=True) if answer == i.label
    ]
    return [(i.id, i.input, i.label) for i in right[:count]]


def stock_pwws(*, call, items: list[tuple[str, int]], wordnet: Path) -> list:
    """TextAttack's PWWSRen2019 as shipped, on NLTK's WordNet over Debian's database."""
    from textattack.attack_recipes import PWWSRen2019

    from engines.perturbation.attack import attack_result_status, attacker_results, scores_wrapper
    from engines.perturbation.build_counterfit import wordnet_reader

    with wordnet_reader(wordnet), mock.patch("nltk.download", lambda *args, **kwargs: True):
        # Its WordNet swap asks NLTK to download omw-1.4 (other languages' lemmas): not needed for
        # English, and nothing is downloaded here.
        attack = PWWSRen2019.build(scores_wrapper(call))
        results = attacker_results(attack=attack, pairs=items, query_budget=10**9, seed=0)
        out = []
        for result in results:
            final = result.perturbed_result
            out.append(
                {
                    "status": attack_result_status(result),
                    "perturbed": final.attacked_text.text,
                    "label_after": int(final.output),
                    "queries": int(result.num_queries),
                }
            )
        return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", default="v4", choices=["v3", "v4"])
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recipes", default="textfooler-v2", help="comma-separated layer recipes")
    parser.add_argument("--budget", type=int, default=2000, help="the recipes' query budget per item")
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    parser.add_argument("--export", type=Path)
    parser.add_argument("--verdicts", type=Path)
    parser.add_argument(
        "--model-dir", default=os.environ.get("EVALHUB_MODEL_DIR", str(ROOT / "var" / "models"))
    )
    parser.add_argument("--smoke", action="store_true", help="3 items (a test that it runs)")
    args = parser.parse_args()
    if args.smoke:
        args.items = 3
    import numpy as np

    from engines.backends import backend_build
    from engines.perturbation.word_attack import backend_scorer, word_attack_run
    from engines.stats.intervals import wilson_interval

    kind = {"v3": "builtin", "v4": "hf"}[args.version]
    backend = backend_build(
        kind=kind,
        config={"path": f"contract-assistant/{args.version}"},
        model_dir=Path(args.model_dir),
    )
    labels = backend.labels  # type: ignore[attr-defined]
    scorer = backend_scorer(backend.class_scores)  # type: ignore[attr-defined]

    def answers(texts: list[str]) -> list[str]:
        return [labels[int(k)] for k in np.argmax(scorer(texts), axis=1)]

    drawn = items_draw(answers=answers, count=args.items, seed=args.seed)
    pairs = [(text, labels.index(label)) for _, text, label in drawn]
    load = os.getloadavg()[0]
    told = f"{len(drawn)} English demo items answered right (seed {args.seed})"
    print(f"{args.version}: {told}; load {load:.2f}")
    outcomes: dict[str, list[dict]] = {}
    started = time.perf_counter()
    outcomes["stock-pwws"] = stock_pwws(call=scorer, items=pairs, wordnet=args.wordnet)
    seconds = {"stock-pwws": time.perf_counter() - started}
    for recipe in args.recipes.split(","):
        started = time.perf_counter()
        attacks, _ = word_attack_run(scorer=scorer, items=pairs, recipe=recipe, query_budget=args.budget)
        seconds[recipe] = time.perf_counter() - started
        outcomes[recipe] = [
            {"status": a.status, "perturbed": a.perturbed, "label_after": a.label_after, "queries": a.queries}
            for a in attacks
        ]
    n = len(drawn)
    stock_broke = {i for i, o in enumerate(outcomes["stock-pwws"]) if o["status"] == "succeeded"}
    header = f"{'under attack':>28}{'successes':>11}{'queries/item':>14}{'stock successes also broken':>30}"
    print(f"\n{'attack':16}{header}{'s':>7}")
    for name, rows in outcomes.items():
        broke = {i for i, o in enumerate(rows) if o["status"] == "succeeded"}
        low, high = wilson_interval(successes=n - len(broke), n=n)
        queries = sum(o["queries"] for o in rows) / n
        both = f"{len(broke & stock_broke)}/{len(stock_broke)}" if name != "stock-pwws" else "-"
        rate = f"{(n - len(broke)) / n:.3f} [{low:.3f}, {high:.3f}]"
        print(f"{name:16}{rate:>28}{len(broke):>11}{queries:>14.1f}{both:>30}{seconds[name]:>7.0f}")
    if args.export:
        with args.export.open("w", encoding="utf-8") as out:
            for name, rows in outcomes.items():
                for (item_id, text, label), row in zip(drawn, rows, strict=True):
                    if row["status"] == "succeeded":
                        line = {
                            "attack": name,
                            "item_id": item_id,
                            "label": label,
                            "label_after": labels[row["label_after"]],
                            "original": text,
                            "perturbed": row["perturbed"],
                        }
                        out.write(json.dumps(line, ensure_ascii=False) + "\n")
        print(f"wrote {args.export}")
    if args.verdicts:
        verdicts_report(path=args.verdicts, version=args.version, outcomes=outcomes, drawn=drawn)
    return 0


def verdicts_report(*, path: Path, version: str, outcomes: dict[str, list[dict]], drawn: list) -> None:
    """Per attack, the share of its judged successes that keep the label; per recipe, the share of
    stock's judged label-keeping successes it broke too."""
    verdicts: dict[tuple[str, str], str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            judged_version, attack, item_id, verdict = line.split("\t")[:4]
            if judged_version == version:
                verdicts[(attack, item_id)] = verdict
    ids = [item_id for item_id, _, _ in drawn]
    broke = {
        name: {ids[i] for i, o in enumerate(rows) if o["status"] == "succeeded"}
        for name, rows in outcomes.items()
    }
    stock_keep = {i for i in broke["stock-pwws"] if verdicts.get(("stock-pwws", i)) == "keep"}
    print("\nhand-checked verdicts:")
    for name, items in broke.items():
        judged = [verdicts[(name, i)] for i in items if (name, i) in verdicts]
        keep = judged.count("keep")
        line = f"  {name}: {keep}/{len(judged)} judged successes keep the label"
        if name != "stock-pwws" and stock_keep:
            line += (
                f"; stock's label-keeping successes also broken: {len(stock_keep & items)}/{len(stock_keep)}"
            )
        print(line)


if __name__ == "__main__":
    sys.exit(main())

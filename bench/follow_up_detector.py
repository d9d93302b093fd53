"""Follow-up detector throughput: the trained detector against the hand rules it replaced, batched.

Both run on the same pairs with the bundled MiniLM (each distinct text embedded once per batch) and
print turns per second and their ratio; the embedding alone is timed too, so what the trained model
adds beyond the embedding shows apart. Two streams:
  * the labelled set as it is (2 024 pairs; questions and answers repeat, as they do in chat traffic,
    where a turn is the next question of the pair before it);
  * worst case: every question, answer and turn distinct (three new texts per pair).

    python bench/follow_up_detector.py [--pairs 2024] [--batch 256] [--threads N]

CPU only (EVALHUB_DEVICE=cpu is set); no database. On a shared machine the absolute figures move with
the load (printed); the ratios hold better.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["EVALHUB_DEVICE"] = "cpu"

from engines.follow_up.classifier import detector_load, follow_ups_classify, rows_to_pairs  # noqa: E402
from engines.follow_up.detector import TurnPair, follow_up_set_load, follow_ups_detect  # noqa: E402
from engines.follow_up.pair_set import SET_PATHS  # noqa: E402


def _timed(run, pairs: list[TurnPair], batch: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(pairs), batch):
        run(pairs[start : start + batch])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=2024)
    parser.add_argument("--batch", type=int, default=256, help="pairs per call (the labeller's batch)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()

    import torch

    from engines.embeddings import sentence_embed

    if args.threads:
        torch.set_num_threads(args.threads)
    rows = (follow_up_set_load(SET_PATHS["train"]) + follow_up_set_load(SET_PATHS["test"]))[: args.pairs]
    as_is = rows_to_pairs(rows)
    distinct = [
        TurnPair(
            f"{p.previous_question} (#{i})",
            f"{p.previous_answer} (#{i})",
            f"{p.next_turn} (#{i})",
            p.gap_seconds,
        )
        for i, p in enumerate(as_is)
    ]
    detector = detector_load()
    sentence_embed(["warm up"])  # the model loads once per process
    print(
        f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs, batches of {args.batch}"
    )
    for name, pairs in (("set as is", as_is), ("all texts distinct", distinct)):

        def embed_only(batch: list[TurnPair]) -> None:
            sentence_embed(
                list(
                    dict.fromkeys(
                        t for p in batch for t in (p.previous_question, p.previous_answer, p.next_turn)
                    )
                )
            )

        seconds = {
            "embedding alone": _timed(embed_only, pairs, args.batch),
            "hand rules": _timed(
                lambda b: follow_ups_detect(pairs=b, embed=sentence_embed), pairs, args.batch
            ),
            "trained": _timed(
                lambda b: follow_ups_classify(pairs=b, embed=sentence_embed, detector=detector),
                pairs,
                args.batch,
            ),
        }
        print(f"{name}: {len(pairs)} pairs")
        for what, spent in seconds.items():
            print(f"  {what:16} {len(pairs) / spent:8.0f} turns/s  ({spent:.1f} s)")
        print(
            f"  trained / hand rules time {seconds['trained'] / seconds['hand rules']:.2f}; "
            f"trained beyond the embedding {seconds['trained'] - seconds['embedding alone']:.1f} s"
        )


if __name__ == "__main__":
    main()

import json

from django.core.management.base import BaseCommand, CommandError

from engines.follow_up.classifier import MODELS_DIR, SEED, VERSION
from engines.follow_up.pair_set import SET_PATHS


class Command(BaseCommand):
    help = (
        "Train the follow-up detector of gate layer 2 on the train split of the labelled set "
        "(engines/follow_up/data/pairs-train.jsonl), measure it on the test split (contexts unseen in "
        "training) and write the artefact <version>.npz + <version>.json (its test figures) to --out."
    )

    def add_arguments(self, parser):
        parser.add_argument("--train-file", dest="train_file", default=str(SET_PATHS["train"]))
        parser.add_argument("--test-file", dest="test_file", default=str(SET_PATHS["test"]))
        parser.add_argument("--seed", type=int, default=SEED)
        parser.add_argument("--detector-version", dest="detector_version", default=VERSION)
        parser.add_argument("--out", default=str(MODELS_DIR), help="folder for the artefact")

    def handle(self, *args, train_file, test_file, seed, detector_version, out, **options):
        version = detector_version
        from pathlib import Path

        from engines.embeddings import sentence_embed  # torch: only when the command runs
        from engines.follow_up.classifier import detector_train
        from engines.follow_up.detector import follow_up_set_load

        try:
            meta = detector_train(
                train=follow_up_set_load(train_file),
                test=follow_up_set_load(test_file),
                embed=sentence_embed,
                seed=seed,
                version=version,
                out_dir=Path(out),
            )
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        test = meta["test"]
        self.stdout.write(
            f"{version}: trained on {meta['trained_on']['rows']} pairs in {meta['train_seconds']} s "
            f"(C {meta['regularisation']['chosen_C']}); test split, {test['rows']} pairs of "
            f"{test['contexts']} unseen contexts: F1 {test['overall']['f1']:.3f}"
        )
        for language, scores in test["languages"].items():
            self.stdout.write(
                f"  {language}: F1 {scores['f1']:.3f}, sensitivity {scores['sensitivity']:.3f}, "
                f"specificity {scores['specificity']:.3f}"
            )
        self.stdout.write(json.dumps({"written": [f"{out}/{version}.npz", f"{out}/{version}.json"]}))

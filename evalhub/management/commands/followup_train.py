import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from engines.follow_up.classifier import MODELS_DIR, SEED, VERSION
from engines.follow_up.detector import SET_PATH
from engines.follow_up.pair_set import SET_PATHS
from registry.actors import SystemActor

COMMAND = SystemActor("manage.py followup_train")


class Command(BaseCommand):
    help = (
        "Train the follow-up detector of gate layer 2 on the train split of the labelled set "
        "(engines/follow_up/data/pairs-train.jsonl), choose each language's regularisation by "
        "cross-validation grouped by family (domain), measure it on the test split (contexts unseen in "
        "training) and write the artefact <version>.npz + <version>.json (its figures) to --out. "
        "--with-reviews adds reviewed live turns to the train split: an experiment's name (its review "
        "queue's labels) or a JSONL export of them (manage.py export_follow_up_reviews); repeatable. "
        "A test pair that shares a reviewed turn's context moves to train. Each language's follow-up "
        "log-odds are shifted to the best F1 on --calibration-file (default: the older hand-labelled "
        "set engines/follow_up/data/follow_up_pairs.jsonl, in neither split)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--train-file", dest="train_file", default=str(SET_PATHS["train"]))
        parser.add_argument("--test-file", dest="test_file", default=str(SET_PATHS["test"]))
        parser.add_argument(
            "--with-reviews",
            dest="with_reviews",
            action="append",
            default=[],
            metavar="EXPERIMENT_OR_FILE",
            help="reviewed live turns to train on: an experiment's name or an export file (repeatable)",
        )
        parser.add_argument(
            "--calibration-file",
            dest="calibration_file",
            default=str(SET_PATH),
            help="another author's labelled pairs (in neither split) on which each language's follow-up "
            "log-odds shift is chosen; '' for none",
        )
        parser.add_argument("--seed", type=int, default=SEED)
        parser.add_argument("--detector-version", dest="detector_version", default=VERSION)
        parser.add_argument("--out", default=str(MODELS_DIR), help="folder for the artefact")

    def handle(
        self,
        *args,
        train_file,
        test_file,
        with_reviews,
        calibration_file,
        seed,
        detector_version,
        out,
        **options,
    ):
        from engines.embeddings import sentence_embed  # torch: only when the command runs
        from engines.follow_up.classifier import detector_train
        from engines.follow_up.detector import follow_up_set_load
        from engines.follow_up.pair_set import reviewed_rows_join, row_weights

        try:
            train, test = follow_up_set_load(train_file), follow_up_set_load(test_file)
            calibration = (
                follow_up_set_load(calibration_file, require_split=False) if calibration_file else []
            )
            for source in with_reviews:
                reviewed = _reviewed_rows(source)
                train, test, moved = reviewed_rows_join(
                    train=train, test=test, reviewed=reviewed, source=source
                )
                self.stdout.write(
                    f"{source}: {len(reviewed)} reviewed turns join the train split; {moved} test pairs "
                    "sharing their contexts move to train"
                )
            meta = detector_train(
                train=train,
                test=test,
                embed=sentence_embed,
                seed=seed,
                version=detector_version,
                out_dir=Path(out),
                weights=row_weights(train),
                calibration=calibration,
            )
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self._summary(meta)
        self.stdout.write(
            json.dumps({"written": [f"{out}/{detector_version}.npz", f"{out}/{detector_version}.json"]})
        )

    def _summary(self, meta):
        test, cv = meta["test"], meta["family_cv"]
        chosen = ", ".join(
            f"{lang} C {m['chosen_C']:g}, follow-up shift {m['follow_up_shift']:g}"
            for lang, m in meta["models"].items()
        )
        self.stdout.write(
            f"{meta['version']}: trained on {meta['trained_on']['rows']} pairs in {meta['train_seconds']} s "
            f"({chosen}); test split, {test['rows']} pairs of {test['contexts']} unseen contexts: "
            f"F1 {test['overall']['f1']:.3f}"
        )
        for language, scores in test["languages"].items():
            self.stdout.write(
                f"  {language}: F1 {scores['f1']:.3f}, sensitivity {scores['sensitivity']:.3f}, "
                f"specificity {scores['specificity']:.3f}"
            )
        self.stdout.write(
            f"cross-validation by family ({cv['folds']} folds over {cv['families']} families), F1:"
        )
        for part in ("all", "hand_written", "reviewed"):
            if part in cv:
                figures = ", ".join(f"{lang} {s['f1']:.3f}" for lang, s in cv[part]["languages"].items())
                self.stdout.write(f"  {part}: {figures}")


def _reviewed_rows(source: str) -> list[dict]:
    """The labelled rows of an export file, or of an experiment's review queue."""
    from engines.follow_up.detector import follow_up_set_load

    if Path(source).is_file():
        return follow_up_set_load(source, require_split=False)
    from canary.selectors.experiments import experiment_get
    from canary.services.reviews import follow_up_reviews_export
    from registry.errors import ApplicationError

    try:
        return list(follow_up_reviews_export(experiment=experiment_get(name=source), actor=COMMAND))
    except ApplicationError as exc:
        raise ValueError(f"--with-reviews {source}: not a file, and {exc.message}") from None

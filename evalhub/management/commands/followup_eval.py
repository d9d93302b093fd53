import json

from django.core.management.base import BaseCommand, CommandError

from engines.follow_up.classifier import VERSION
from engines.follow_up.detector import KINDS
from engines.follow_up.pair_set import SET_PATHS


class Command(BaseCommand):
    help = (
        "Score the trained follow-up detector (gate layer 2) on a labelled JSONL (id, language, "
        "previous_question, previous_answer, next_turn, gap_seconds, label): precision, recall and F1 of "
        "'is a follow-up' overall and per language, sensitivity and specificity, and the 3-way confusion "
        "matrix. Default file: the test split of the shipped set (contexts unseen in training). "
        "--judge FAMILY:LABEL scores a registered openai version, prompted, instead of the detector. "
        "--cv prints the artefact's cross-validation by family (measured when it was trained) instead."
    )

    def add_arguments(self, parser):
        parser.add_argument("--file", default=str(SET_PATHS["test"]), help="labelled JSONL to score")
        parser.add_argument(
            "--detector", default=VERSION, help="artefact version under engines/follow_up/models"
        )
        parser.add_argument("--judge", help="a registered openai version (family:label) to judge instead")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--mistakes", action="store_true", help="also list every misjudged pair")
        parser.add_argument(
            "--cv",
            action="store_true",
            help="print the detector's cross-validation by family, stored with it when it was trained",
        )

    def handle(self, *args, file, detector, judge, **options):
        from engines.follow_up.detector import follow_up_set_load

        if options["cv"]:
            return self._cross_validation(detector, as_json=options["json"])

        try:
            rows = follow_up_set_load(file, require_split=False)
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if not rows:
            raise CommandError(f"{file}: no labelled pairs")
        if judge:
            report = {"file": file, **_judge_report(ref=judge, rows=rows)}
        else:
            from engines.embeddings import sentence_embed  # torch: only when the command runs
            from engines.follow_up.classifier import detector_evaluate, detector_load

            try:
                loaded = detector_load(detector)
            except OSError as exc:
                raise CommandError(str(exc)) from None
            report = {"file": file, **detector_evaluate(rows=rows, embed=sentence_embed, detector=loaded)}
        if options["json"]:
            if not options["mistakes"]:
                report.pop("mistakes")
            self.stdout.write(json.dumps(report, ensure_ascii=False))
            return
        self.stdout.write(
            f"{file}: {report['n']} pairs in {report['seconds']:.1f} s ({report['turns_per_second']:.0f} "
            f"turns/s), detector {report['detector']}"
        )
        for name, scores in (("overall", report["overall"]), *report["languages"].items()):
            line = (
                f"{name:8} n={scores['n']:4}  P {scores['precision']:.3f}  R {scores['recall']:.3f}  "
                f"F1 {scores['f1']:.3f}  (tp {scores['tp']} fp {scores['fp']} fn {scores['fn']} "
                f"tn {scores['tn']})  kind accuracy {scores['kind_accuracy']:.3f}"
            )
            if "sensitivity" in scores:
                line += f"  sens {scores['sensitivity'] or 0:.3f} spec {scores['specificity'] or 0:.3f}"
            self.stdout.write(line)
        self.stdout.write("confusion (rows: label, columns: predicted)")
        self.stdout.write(" " * 11 + "".join(f"{kind:>11}" for kind in KINDS))
        for actual in KINDS:
            counts = report["overall"]["confusion"][actual]
            self.stdout.write(f"{actual:>11}" + "".join(f"{counts[kind]:>11}" for kind in KINDS))
        if options["mistakes"]:
            for wrong in report["mistakes"]:
                self.stdout.write(
                    f"{wrong['id']}  {wrong['label']} -> {wrong['predicted']}  {wrong['next_turn']!r}  "
                    f"({wrong['reason']})"
                )

    def _cross_validation(self, version: str, *, as_json: bool) -> None:
        from engines.follow_up.classifier import detector_load

        try:
            meta = detector_load(version).meta
        except OSError as exc:
            raise CommandError(str(exc)) from None
        cv = meta.get("family_cv")
        if cv is None:
            raise CommandError(f"{version} stores no cross-validation by family")
        if as_json:
            self.stdout.write(json.dumps({"detector": version, **cv}, ensure_ascii=False))
            return
        self.stdout.write(
            f"{version}: cross-validation by family, {cv['folds']} folds over {cv['families']} families "
            "(out-of-fold, each language by its own weights at its chosen C and follow-up shift)"
        )
        for part in ("all", "hand_written", "reviewed"):
            for name, scores in cv.get(part, {}).get("languages", {}).items():
                rates = f"sens {scores['sensitivity'] or 0:.3f} spec {scores['specificity'] or 0:.3f}"
                self.stdout.write(
                    f"{part:13} {name}  n={scores['n']:5}  P {scores['precision']:.3f}  "
                    f"R {scores['recall']:.3f}  F1 {scores['f1']:.3f}  {rates}"
                )


def _judge_report(*, ref: str, rows: list) -> dict:
    from engines.backends.base import BackendError
    from engines.follow_up.llm_judge import judge_evaluate
    from registry.errors import ApplicationError
    from registry.selectors.versions import model_version_get
    from registry.services.versions import model_version_backend

    try:
        version = model_version_get(ref=ref)
    except ApplicationError as exc:
        raise CommandError(f"--judge: {exc}") from None
    if version.backend_kind != "openai":
        raise CommandError(f"--judge: {version.ref} is a {version.backend_kind!r} version, not 'openai'")
    try:
        backend = model_version_backend(version=version, cached=False)
        return judge_evaluate(rows=rows, predict=backend.predict, name=version.ref)
    except BackendError as exc:
        raise CommandError(f"--judge: {exc}") from None

import json

from django.core.management.base import BaseCommand, CommandError

from engines.follow_up.detector import KINDS, FollowUpThresholds, follow_up_evaluate, follow_up_set_load


class Command(BaseCommand):
    help = (
        "Measure the follow-up detector (gate layer 2) on the hand-labelled set "
        "engines/follow_up/data/follow_up_pairs.jsonl: precision/recall/F1 of 'is a follow-up', per "
        "language, "
        "and the 3-way confusion matrix. Tune on --split dev, report on --split test."
    )

    def add_arguments(self, parser):
        parser.add_argument("--split", choices=("dev", "test", "all"), default="test")
        parser.add_argument("--thresholds", default="{}", help="JSON object overriding default thresholds")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--mistakes", action="store_true", help="also list every misjudged pair")

    def handle(self, *args, split, thresholds, **options):
        from engines.embeddings import sentence_embed  # torch: only when the command runs

        try:
            chosen = FollowUpThresholds.from_dict(_json_object(thresholds))
            rows = [row for row in follow_up_set_load() if split in ("all", row["split"])]
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        report = {"split": split, **follow_up_evaluate(rows=rows, embed=sentence_embed, thresholds=chosen)}
        if options["json"]:
            if not options["mistakes"]:
                report.pop("mistakes")
            self.stdout.write(json.dumps(report, ensure_ascii=False))
            return
        self.stdout.write(f"split {split}: {report['n']} pairs in {report['seconds']:.1f} s")
        for name, scores in (("overall", report["overall"]), *report["languages"].items()):
            self.stdout.write(
                f"{name:8} n={scores['n']:3}  P {scores['precision']:.3f}  R {scores['recall']:.3f}  "
                f"F1 {scores['f1']:.3f}  (tp {scores['tp']} fp {scores['fp']} fn {scores['fn']} "
                f"tn {scores['tn']})  kind accuracy {scores['kind_accuracy']:.3f}"
            )
        self.stdout.write("confusion (rows: label, columns: predicted)")
        self.stdout.write(" " * 11 + "".join(f"{kind:>11}" for kind in KINDS))
        for actual in KINDS:
            counts = report["overall"]["confusion"][actual]
            self.stdout.write(f"{actual:>11}" + "".join(f"{counts[kind]:>11}" for kind in KINDS))
        self.stdout.write(f"thresholds {json.dumps(report['thresholds'])}")
        if options["mistakes"]:
            for wrong in report["mistakes"]:
                self.stdout.write(
                    f"{wrong['id']}  {wrong['label']} -> {wrong['predicted']}  {wrong['next_turn']!r}  "
                    f"({wrong['reason']})"
                )


def _json_object(text: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--thresholds: not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("--thresholds: must be a JSON object")
    return data

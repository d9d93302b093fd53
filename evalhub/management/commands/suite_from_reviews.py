from django.core.management.base import BaseCommand, CommandError

from canary.selectors.experiments import experiment_get
from canary.services.live_suite import eval_suite_from_reviews
from engines.reasons import ENGLISH, reasons_render
from registry.actors import SystemActor
from registry.errors import ApplicationError
from registry.selectors.suites import eval_suite_get

COMMAND = SystemActor("manage.py suite_from_reviews")


class Command(BaseCommand):
    help = (
        "Build the next version of <suite>-live from a suite and the reviewed live questions that have an "
        "expected answer: scrubbed, de-duplicated, drawn per language and label by a seed (docs/canary.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--suite", required=True, help="the base suite: name (latest) or name@version")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--experiment", help="the reviewed questions of this experiment")
        source.add_argument("--family", help="the reviewed questions of every experiment of this family")
        parser.add_argument(
            "--per-stratum", type=int, default=50, help="new questions per language and label"
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--name", help="the suite to write (default: <suite>-live)")

    def handle(self, *args, suite, experiment, family, per_stratum, seed, name, **options):
        try:
            build = eval_suite_from_reviews(
                suite=eval_suite_get(ref=suite),
                experiment=experiment_get(name=experiment) if experiment else None,
                family=family,
                per_stratum=per_stratum,
                seed=seed,
                name=name,
                actor=COMMAND,
            )
        except ApplicationError as exc:
            details = "\n".join(
                f"  {key}: {'; '.join(reasons_render(notes, words=ENGLISH))}"
                for key, notes in exc.fields.items()
            )
            raise CommandError(f"{exc.message}\n{details}".rstrip()) from None
        out, base = build.suite, build.base
        self.stdout.write(
            f"built {out.name}@{out.version} from {base.name}@{base.version}: {out.item_count} items, "
            f"{build.added} live added, {build.kept} kept, {build.scrubbed} scrubbed; "
            f"sha256 {out.content_hash[:12]}"
        )
        for stratum in build.strata:
            label = stratum.label or "(reference only)"
            self.stdout.write(f"  {stratum.language} {label}: {stratum.drawn} of {stratum.candidates}")
        if build.skipped:
            self.stdout.write("  left out: " + ", ".join(f"{k} {v}" for k, v in build.skipped.items()))

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from canary.selectors.experiments import experiment_get
from canary.services.reviews import follow_up_reviews_export
from evalhub.exports import jsonl_command_write
from registry.actors import SystemActor
from registry.errors import ApplicationError

COMMAND = SystemActor("manage.py export_follow_up_reviews")


class Command(BaseCommand):
    help = (
        "Write an experiment's reviewed live turns as JSONL in the follow-up set's format "
        "(id, language, previous_question, previous_answer, next_turn, gap_seconds, label)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--experiment", required=True)
        parser.add_argument("--out", type=Path, help="default: standard output")

    def handle(self, *args, experiment, out, **options):
        try:
            rows = follow_up_reviews_export(experiment=experiment_get(name=experiment), actor=COMMAND)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        count = jsonl_command_write(rows=rows, out=out, stdout=self.stdout)
        self.stderr.write(f"{count} reviewed turns of {experiment}")

"""`manage.py export_shift_examples RUN_ID [--out FILE]`: a gate run's suite-vs-live shift examples as
JSONL."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evalhub.exports import jsonl_command_write
from gate.selectors.gate_runs import gate_run_get
from gate.services.exports import shift_examples_export
from registry.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Write a gate run's suite-vs-live shift examples as JSONL (gate_run, experiment, language, rank, "
        "question, distance, nearest_suite_input, live_to_suite, bar, judged): the live questions farthest "
        "from the suite, per language, to grow the suite from."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--out", type=Path, help="default: standard output")

    def handle(self, *args, run_id, out, **options):
        try:
            run = gate_run_get(gate_run_id=run_id)
            rows = shift_examples_export(run=run)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        count = jsonl_command_write(rows=rows, out=out, stdout=self.stdout)
        self.stderr.write(f"{count} shift examples of gate run {run.pk}")

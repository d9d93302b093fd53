"""`manage.py export_adversarial RUN_ID [--out FILE]`: a gate run's layer-1 examples as JSONL."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evalhub.exports import jsonl_command_write
from gate.selectors.gate_runs import adversarial_examples_export, gate_run_get
from registry.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Write a gate run's layer-1 examples as JSONL (gate_run, version, item_id, language, original, "
        "perturbed, label, answer, correct, recipe, seed, outcome, diff): training data for the next version."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--out", type=Path, help="default: standard output")

    def handle(self, *args, run_id, out, **options):
        try:
            run = gate_run_get(gate_run_id=run_id)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        count = jsonl_command_write(rows=adversarial_examples_export(run=run), out=out, stdout=self.stdout)
        self.stderr.write(f"{count} layer-1 examples of gate run {run.pk}")

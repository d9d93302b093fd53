from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from canary.services.probes import probe_set_import_jsonl
from engines.reasons import ENGLISH, reasons_render
from registry.actors import SystemActor
from registry.errors import ApplicationError

COMMAND = SystemActor("manage.py import_probes")


class Command(BaseCommand):
    help = (
        "Import a probe set from JSONL: {id, input, expected_label, weakness, language?, metadata?} per line."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--name", required=True)
        parser.add_argument("--family", required=True)
        parser.add_argument("--description", default="")

    def handle(self, *args, file, name, family, description, **options):
        if not file.is_file():
            raise CommandError(f"{file} is not a file")
        try:
            probe_set = probe_set_import_jsonl(
                name=name,
                family=family,
                content=file.read_bytes(),
                description=description,
                actor=COMMAND,
            )
        except ApplicationError as exc:
            fields = {key: list(reasons_render(notes, words=ENGLISH)) for key, notes in exc.fields.items()}
            raise CommandError(f"{exc.message} {fields}") from None
        self.stdout.write(f"probe set {probe_set.name}: {probe_set.probes.count()} probes for {family}")

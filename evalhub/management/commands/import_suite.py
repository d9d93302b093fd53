from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from engines.reasons import ENGLISH, reasons_render
from registry.actors import SystemActor
from registry.errors import ApplicationError
from registry.services.suites import eval_suite_import, suite_items_parse

COMMAND = SystemActor("manage.py import_suite")


class Command(BaseCommand):
    help = "Import an eval suite from a JSONL or CSV file as the suite's next version."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--name", required=True)
        parser.add_argument("--format", choices=["jsonl", "csv"])
        parser.add_argument("--description", default="")

    def handle(self, *args, path, name, format, description, **options):
        if not path.is_file():
            raise CommandError(f"No file {path}")
        fmt = format or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
        try:
            items = suite_items_parse(content=path.read_bytes(), fmt=fmt, field=str(path))
            suite, created = eval_suite_import(name=name, items=items, description=description, actor=COMMAND)
        except ApplicationError as exc:
            details = "\n".join(
                f"  {key}: {'; '.join(reasons_render(notes, words=ENGLISH))}"
                for key, notes in exc.fields.items()
            )
            raise CommandError(f"{exc.message}\n{details}") from None
        verb = "imported" if created else "unchanged, already"
        self.stdout.write(
            f"{verb} {suite.name}@{suite.version}: {suite.item_count} items, sha256 {suite.content_hash[:12]}"
        )

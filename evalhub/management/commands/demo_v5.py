"""`manage.py demo_v5 RUN_ID`: train and register the demo's V5 from what broke V4 in gate run RUN_ID."""

from django.core.management.base import BaseCommand, CommandError

from evalhub.demo import demo_v5_install
from registry.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Train and register contract-assistant:v5 (SYNTHETIC demo data): V4's recipe on the training split, "
        "a noisy 15 %% of it and the adversarial examples that broke V4 in gate run RUN_ID (V4 attacked on "
        "the hardening suite: evalhub gate --candidate contract-assistant:v4 "
        "--suite contract-assistant-hardening "
        "--policy demo-hardening). Refused when any training example is, or is near, a golden-suite item."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "run_id", type=int, help="a finished gate run that attacked V4 on the hardening suite"
        )
        parser.add_argument("--epochs", type=int, default=3, help="training epochs (default 3, as V4)")

    def handle(self, *args, run_id, epochs, **options):
        try:
            version = demo_v5_install(gate_run_id=run_id, log=self.stdout.write, epochs=epochs)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"registered {version.ref} (baseline {version.baseline.ref}): gate it with "
            f"`evalhub gate --candidate {version.ref} --wait`"
        )

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from evalhub.demo import demo_install, demo_shadow_start
from registry.roles import APP, CI
from registry.services.tokens import api_token_create, user_role_grant


class Command(BaseCommand):
    help = (
        "Set up the bundled demo (synthetic data): train and register contract-assistant v3/v4, "
        "import the golden suite, create an admin, a CI token and a chat app's (`app`) token, kept in "
        "var/demo-credentials.txt. Safe to run again."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--shadow",
            action="store_true",
            help="then run contract-assistant-shadow (plan shadow → 1 → 10 → 100) instead of the 1 % canary",
        )

    def handle(self, *args, **options):
        demo_install(log=self.stdout.write)
        if options["shadow"]:
            demo_shadow_start(log=self.stdout.write)
        credentials = Path(settings.VAR_DIR) / "demo-credentials.txt"
        User = get_user_model()
        username = os.environ.get("EVALHUB_ADMIN_USER", "admin")
        if not User.objects.filter(username=username).exists():
            password = os.environ.get("EVALHUB_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            User.objects.create_superuser(username=username, password=password, email="")
            ci_user = User.objects.filter(username="ci-demo").first() or User.objects.create_user("ci-demo")
            user_role_grant(user=ci_user, role=CI)
            _, key = api_token_create(user=ci_user, name="demo")
            credentials.parent.mkdir(parents=True, exist_ok=True)
            credentials.write_text(
                f"admin user:     {username}\nadmin password: {password}\nci token:       {key}\n"
            )
            credentials.chmod(0o600)
        if credentials.exists() and "app token:" not in credentials.read_text():
            # The chat app's token, for the proxy and events (also added to an older credentials file).
            app_user = User.objects.filter(username="app-demo").first()
            app_user = app_user or User.objects.create_user("app-demo")  # no password: a token only
            user_role_grant(user=app_user, role=APP)
            _, app_key = api_token_create(user=app_user, name="demo chat app")
            with credentials.open("a") as out:
                out.write(f"app token:      {app_key}\n")
        if credentials.exists():
            self.stdout.write(f"credentials ({credentials}):\n{credentials.read_text()}")
        else:
            self.stdout.write(f"admin user {username!r} already existed; no demo credentials file.")

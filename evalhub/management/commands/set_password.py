import getpass
import sys

from django.core.management.base import BaseCommand, CommandError

from evalhub.permissions import error_fields_words
from registry.errors import ApplicationError
from registry.services.users import user_password_set


class Command(BaseCommand):
    help = (
        "Set or reset the password a user signs in to the pages with (any role: viewer, ci, "
        "release_manager). Prompts twice, or reads one line from stdin with --password-stdin."
    )

    stealth_options = ("stdin",)  # a stream in place of sys.stdin (tests)

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--password-stdin", action="store_true", help="Read the password from stdin (scripts)."
        )
        parser.add_argument("--create-user", action="store_true", help="Create the user if missing.")

    def handle(self, *args, username, password_stdin, create_user, **options):
        if password_stdin:
            password = (options.get("stdin") or sys.stdin).readline().rstrip("\n")
        else:
            password = getpass.getpass(f"Password for {username}: ")
            if getpass.getpass("Again: ") != password:
                raise CommandError("The two passwords differ; nothing changed.")
        try:
            user = user_password_set(username=username, password=password, create=create_user)
        except ApplicationError as exc:
            if exc.code == "not_found":
                raise CommandError(f"{exc.message} Pass --create-user to create one.") from None
            raise CommandError(
                f"{exc.message} {' '.join(error_fields_words(exc).get('password', []))}".strip()
            ) from None
        self.stdout.write(f"Password set for {user.get_username()}; sign in at /login/.")

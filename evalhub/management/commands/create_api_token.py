from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from registry.errors import ApplicationError
from registry.roles import ROLES
from registry.services.tokens import api_token_create, user_role_grant


class Command(BaseCommand):
    help = "Create an API token for a user and print it (shown once; only its hash is stored)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=ROLES, help="Also grant this role.")
        parser.add_argument("--create-user", action="store_true", help="Create the user if missing.")
        parser.add_argument("--name", default="", help="A label for the token, e.g. the CI system.")

    def handle(self, *args, username, role, create_user, name, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(f"No user {username!r}; pass --create-user to create one.")
            user = User.objects.create_user(username=username)
        try:
            if role:
                user_role_grant(user=user, role=role)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        _, key = api_token_create(user=user, name=name)
        self.stdout.write(key)

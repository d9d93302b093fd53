from django.core.management.base import BaseCommand, CommandError

from registry.models import ApiToken
from registry.services.tokens import api_token_revoke


class Command(BaseCommand):
    help = "Revoke API tokens by their key prefix (the first 8 characters, as the admin lists them)."

    def add_arguments(self, parser):
        parser.add_argument("key_prefix")
        parser.add_argument("--reason", default="", help="Kept in the audit row.")

    def handle(self, *args, key_prefix, reason, **options):
        tokens = list(ApiToken.objects.filter(key_prefix=key_prefix, revoked_at__isnull=True))
        if not tokens:
            raise CommandError(f"No active token starts with {key_prefix!r}.")
        for token in tokens:
            api_token_revoke(token=token, reason=reason)
            self.stdout.write(
                f"revoked {token.key_prefix} ({token.user.get_username()}, {token.name or 'no name'})"
            )

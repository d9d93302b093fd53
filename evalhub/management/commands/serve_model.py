from django.core.management.base import BaseCommand, CommandError

from registry.errors import NotFoundError
from registry.selectors.versions import model_version_get
from registry.services.versions import model_version_backend, model_version_config_hash


class Command(BaseCommand):
    help = "Serve a registered version over the OpenAI-compatible chat API (POST /v1/chat/completions)."

    def add_arguments(self, parser):
        parser.add_argument("version", help="family:label or id")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8100)
        parser.add_argument(
            "--token-delay-ms", type=float, default=0.0, help="pause between a stream's tokens (demos, tests)"
        )
        parser.add_argument(
            "--first-token-delay-ms",
            type=float,
            default=0.0,
            help="pause before a stream's first token, a slow prefill (demos, tests)",
        )
        parser.add_argument(
            "--sample",
            action="store_true",
            help="a request with temperature > 0 gets a label sampled from the class scores at that "
            "temperature, seeded by its seed (a chat model's varying answers: demos of repeats)",
        )

    def handle(self, *args, version, host, port, token_delay_ms, first_token_delay_ms, sample, **options):
        from engines.model_server import model_server_create

        try:
            model_version = model_version_get(ref=version)
        except NotFoundError as exc:
            raise CommandError(exc.message) from None
        config_hash = model_version_config_hash(version=model_version)
        server = model_server_create(
            backend=model_version_backend(version=model_version, cached=False),
            model_name=model_version.ref,
            config_hash=config_hash,
            host=host,
            port=port,
            token_delay=token_delay_ms / 1000,
            first_token_delay=first_token_delay_ms / 1000,
            sampling=sample,
        )
        self.stdout.write(
            f"serving {model_version.ref} on http://{host}:{server.server_port}/v1 "
            f"(config hash {config_hash[:12]}{', sampling' if sample else ''})",
            ending="\n",
        )
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()

import json
import logging
import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from canary.models import TurnEvent
from canary.selectors.experiments import experiment_get
from canary.services.telemetry import turn_stream_drain
from engines.demo.voice import VOICES
from registry.errors import NotFoundError
from registry.roles import APP
from registry.services.tokens import api_token_create, user_role_grant


class Command(BaseCommand):
    help = (
        "Send SYNTHETIC users through a running EvalHub's canary proxy (real HTTP, real model answers): "
        "questions from the demo bank, follow-ups when answers are wrong, review hours per contract."
    )

    def add_arguments(self, parser):
        parser.add_argument("--experiment", required=True)
        parser.add_argument("--users", type=int, default=1000)
        parser.add_argument(
            "--duration", type=float, default=600, help="stop starting new users after S seconds"
        )
        parser.add_argument("--server", default="http://127.0.0.1:8000")
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--follow-up-if-wrong", type=float, default=0.6)
        parser.add_argument("--follow-up-base", type=float, default=0.05)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--stream", action="store_true", help="ask for streamed answers (stream: true)")
        parser.add_argument(
            "--voice",
            choices=VOICES,
            default="plain",
            help="how users write: the suite's text as it is (plain), or as people type into a chat box "
            "(casual: a colloquial request around the clause, typos, lower case)",
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, **options):
        from engines.demo.simulator import SimulationConfig, traffic_simulate

        for name in ("httpx", "httpx2", "openai"):  # one INFO line per request otherwise
            logging.getLogger(name).setLevel(logging.WARNING)

        try:
            experiment = experiment_get(name=options["experiment"])
        except NotFoundError as exc:
            raise CommandError(exc.message) from None
        if options["users"] < 1 or options["concurrency"] < 1:
            raise CommandError("--users and --concurrency must be at least 1")
        config = SimulationConfig(
            server=options["server"],
            experiment=experiment.name,
            token=os.environ.get("EVALHUB_TOKEN") or self._token(),
            users=options["users"],
            duration_s=options["duration"],
            concurrency=options["concurrency"],
            follow_up_if_wrong=options["follow_up_if_wrong"],
            follow_up_base=options["follow_up_base"],
            seed=options["seed"],
            stream=options["stream"],
            voice=options["voice"],
        )
        before = TurnEvent.objects.filter(experiment=experiment, source=TurnEvent.Source.PROXY).count()
        report = traffic_simulate(config=config)
        turn_stream_drain()  # what a cpu worker would have stored by now
        stored = (
            TurnEvent.objects.filter(experiment=experiment, source=TurnEvent.Source.PROXY).count() - before
        )
        result = {
            **report.as_dict(),
            "turn_events_stored": stored,
            "turn_events_expected": 2 * report.answered,
        }
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        users = max(report.users, 1)
        on_candidate = report.users_per_arm.get("candidate", 0)
        self.stdout.write(
            f"{report.users} users in {report.seconds:.1f} s, {report.requests} requests "
            f"({report.answered} answered, {report.failed} failed, {report.fallbacks} served by the baseline "
            f"after a candidate failure; {report.retries} tries sent again by the client), "
            f"{report.follow_ups} follow-ups, {report.outcomes_sent} outcomes\n"
            f"candidate: {on_candidate} users = {100 * on_candidate / users:.2f} % "
            f"(experiment share {experiment.traffic_percent} %); "
            f"users on both arms: {report.users_on_both_arms}\n"
            f"turn events stored {stored} for {2 * report.answered} expected (two per answered request)"
        )
        for arm in ("baseline", "candidate"):
            asked = report.questions_per_arm.get(arm, 0)
            if asked:
                right = report.correct_per_arm.get(arm, 0)
                self.stdout.write(f"{arm}: {right}/{asked} first answers right ({right / asked:.3f})")

    def _token(self) -> str:
        user, _ = get_user_model().objects.get_or_create(username="traffic-simulator")
        user_role_grant(user=user, role=APP)
        return api_token_create(user=user, name="simulate_traffic")[1]

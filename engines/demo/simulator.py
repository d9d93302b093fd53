"""Traffic simulator for the demo family: SYNTHETIC users, real HTTP, real model answers.

Each simulated user reviews a few contracts. Per contract they ask one question from the demo
bank (the eval split of `engines.demo.dataset`, whose labels are known) through the canary proxy
with the official OpenAI client, read which clause type the answer names, and then:
- follow up in the same session ("and what if ...?") with probability `follow_up_if_wrong` when
  the answer was wrong, `follow_up_base` otherwise;
- report a business outcome for the contract: review hours, `hours_base` plus `hours_if_wrong`
  when the answer was wrong, plus Gaussian noise (`hours_noise`), floored at 0.1.
So every outcome follows from the answer the user's arm really gave, never from a per-arm script.
Outcomes go to POST /api/v1/events in batches; the proxy records the turns itself.

No Django in here: it talks to a running EvalHub over HTTP only.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import httpx2
import openai
from openai.types.chat import ChatCompletionMessageParam

from engines.demo.dataset import demo_dataset_build
from engines.demo.voice import voice_apply

LABEL = re.compile(r"^\[(?P<label>[^\]]+)\]")
FOLLOW_UPS = {
    "en": (
        "And what if force majeure applies?",
        "What if the buyer pays late?",
        "Does that still hold if the contract is terminated early?",
        "Sorry, which clause type did you say this was, and why?",
    ),
    "zh": (
        "那如果不可抗力呢？",
        "如果买方逾期付款怎么办？",
        "合同提前解除的话还适用吗？",
        "能再解释一下这是哪类条款吗？",
    ),
}
EVENTS_BATCH = 500


@dataclass(frozen=True)
class SimulationConfig:
    server: str
    experiment: str
    token: str
    users: int = 1000
    duration_s: float = 600.0
    concurrency: int = 8
    contracts_per_user: tuple[int, int] = (1, 3)
    follow_up_if_wrong: float = 0.6
    follow_up_base: float = 0.05
    hours_base: float = 2.0
    hours_if_wrong: float = 1.5
    hours_noise: float = 0.3
    seed: int = 0
    stream: bool = False  # ask for streamed answers (`stream: true`), as most chat UIs do
    voice: str = "plain"  # how users write: the suite's text as it is, or "casual" (engines.demo.voice)


@dataclass
class SimulationReport:
    users: int = 0
    requests: int = 0
    retries: int = 0  # requests the OpenAI client sent again (after a timeout, a dropped connection, a 5xx)
    answered: int = 0
    failed: int = 0
    fallbacks: int = 0
    follow_ups: int = 0
    outcomes_sent: int = 0
    users_per_arm: Counter[str] = field(default_factory=Counter)
    correct_per_arm: Counter[str] = field(default_factory=Counter)
    questions_per_arm: Counter[str] = field(default_factory=Counter)
    users_on_both_arms: int = 0
    seconds: float = 0.0
    stopped_early: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in self.__dict__.items() if not isinstance(v, Counter)},
            "users_per_arm": dict(self.users_per_arm),
            "correct_per_arm": dict(self.correct_per_arm),
            "questions_per_arm": dict(self.questions_per_arm),
        }


class Simulation:
    def __init__(self, config: SimulationConfig):
        self.config = config
        self.bank = [i for i in demo_dataset_build(seed=0).eval if i.label]
        self.report = SimulationReport()
        self.lock = threading.Lock()
        self.outcomes: list[dict[str, str | float]] = []  # outcome events, as POST /events takes them
        base = f"{config.server.rstrip('/')}/api/v1"
        self.http = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {config.token}"}, timeout=60
        )
        self.client = openai.OpenAI(
            base_url=f"{base}/canary/{config.experiment}/v1",
            api_key=config.token,
            max_retries=2,
            timeout=60,
            http_client=openai.DefaultHttpxClient(event_hooks={"request": [self._sent]}),
        )
        self.deadline = 0.0

    def run(self) -> SimulationReport:
        started = time.perf_counter()
        self.deadline = started + self.config.duration_s
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            for _ in pool.map(self._user, range(self.config.users)):
                pass
        self._flush(force=True)
        self.report.seconds = time.perf_counter() - started
        return self.report

    def _sent(self, request: httpx2.Request) -> None:
        if request.headers.get("x-stainless-retry-count", "0") != "0":
            with self.lock:
                self.report.retries += 1

    def _ask(
        self, *, user_id: str, session_id: str, messages: list[ChatCompletionMessageParam]
    ) -> tuple[str, str, bool] | None:
        """(answer, arm, fallback), or None when the request failed."""
        with self.lock:
            self.report.requests += 1
        # One key per question, kept by the client's retries: a retry is recorded once.
        headers = {"X-EvalHub-Session": session_id, "Idempotency-Key": uuid.uuid4().hex}
        create = self.client.chat.completions.with_raw_response.create
        try:
            if self.config.stream:
                streamed = create(
                    model="demo", messages=messages, user=user_id, extra_headers=headers, stream=True
                )
                answer = "".join(c.choices[0].delta.content or "" for c in streamed.parse() if c.choices)
                answered_by = streamed.headers
            else:
                raw = create(model="demo", messages=messages, user=user_id, extra_headers=headers)
                answer = raw.parse().choices[0].message.content or ""
                answered_by = raw.headers
        except openai.OpenAIError:  # a stream that breaks off raises here too
            with self.lock:
                self.report.failed += 1
            return None
        fallback = answered_by.get("X-EvalHub-Fallback") == "1"
        with self.lock:
            self.report.answered += 1
            self.report.fallbacks += fallback
        return answer, answered_by["X-EvalHub-Arm"], fallback

    def _user(self, index: int) -> None:
        if time.perf_counter() > self.deadline:
            self.report.stopped_early = True
            return
        config = self.config
        rng = random.Random(f"{config.seed}:{index}")
        user_id = f"sim-{config.seed}-{index:06d}"
        arms: set[str] = set()
        for contract in range(rng.randint(*config.contracts_per_user)):
            item = rng.choice(self.bank)
            session_id = f"{user_id}-s{contract}"
            question = voice_apply(text=item.input, language=item.language, voice=config.voice, rng=rng)
            messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": question}]
            reply = self._ask(user_id=user_id, session_id=session_id, messages=messages)
            if reply is None:
                continue
            answer, arm, _ = reply
            arms.add(arm)
            found = LABEL.match(answer)
            correct = found is not None and found.group("label") == item.label
            if rng.random() < (config.follow_up_if_wrong if not correct else config.follow_up_base):
                language = "zh" if item.language == "zh" else "en"
                follow_up = rng.choice(FOLLOW_UPS[language])
                messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": follow_up}]
                if self._ask(user_id=user_id, session_id=session_id, messages=messages) is not None:
                    with self.lock:
                        self.report.follow_ups += 1
            hours = (
                config.hours_base
                + (0 if correct else config.hours_if_wrong)
                + rng.gauss(0, config.hours_noise)
            )
            with self.lock:
                self.report.questions_per_arm[arm] += 1
                self.report.correct_per_arm[arm] += correct
                self.outcomes.append(
                    {
                        "type": "outcome",
                        "event_id": f"sim-{uuid.uuid4().hex}",
                        "experiment": config.experiment,
                        "unit_id": f"{user_id}-contract-{contract}",
                        "user_id": user_id,
                        "arm": arm,
                        "metric": "review_hours",
                        "value": round(max(0.1, hours), 3),
                        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                )
            self._flush()
        with self.lock:
            self.report.users += 1
            for arm in arms:
                self.report.users_per_arm[arm] += 1
            self.report.users_on_both_arms += len(arms) > 1

    def _flush(self, *, force: bool = False) -> None:
        with self.lock:
            if not self.outcomes or (len(self.outcomes) < EVENTS_BATCH and not force):
                return
            batch, self.outcomes = self.outcomes, []
        response = self.http.post("/events", json={"events": batch})
        response.raise_for_status()
        with self.lock:
            self.report.outcomes_sent += len(batch)


def traffic_simulate(*, config: SimulationConfig) -> SimulationReport:
    return Simulation(config).run()

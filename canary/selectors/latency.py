"""What a chat user feels of an arm's speed, read from its answers: total time, time to the first
token and tokens per second, as bounded samples of the latest answers (the analysis's bootstrap and
the page's percentiles need the values, not sums).

- total time: answers that ended (not abandoned by the client), streamed or not;
- time to first token: streamed answers (the proxy records when the first text arrived);
- tokens per second: streamed answers with at least two tokens, after the first one — (tokens − 1) ÷
  (total − time to first token), the decode speed a reader sees (vLLM's benchmark reports its
  inverse, "time per output token", the same way), so a slow start is not counted twice.
Answers with an error (fallbacks included) and probe traffic are left out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max

from canary.models import Experiment, TurnEvent
from engines.stats.comparisons import RatioStatistic

LATENCY_SAMPLE = 10_000  # latest answers per arm


@dataclass(frozen=True, kw_only=True)
class LatencySamples:
    total_ms: list[float]
    first_token_ms: list[float]
    tokens_per_second: list[float]

    @property
    def streamed(self) -> bool:
        return bool(self.first_token_ms)


def latency_state(*, experiment: Experiment, start: datetime, end: datetime) -> tuple[int, int | None]:
    """How many answers the experiment has in [start, end), and the newest one's id: what a speed
    readout of the window depends on, read in one query (a new answer, stored late or not, changes it)."""
    answers = TurnEvent.objects.filter(
        experiment=experiment, role=TurnEvent.Role.ASSISTANT, occurred_at__gte=start, occurred_at__lt=end
    ).exclude(source=TurnEvent.Source.PROBE)
    state = answers.aggregate(count=Count("id"), newest=Max("id"))
    return state["count"], state["newest"]


def latency_samples(
    *,
    experiment: Experiment,
    arm: str,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = LATENCY_SAMPLE,
) -> LatencySamples:
    """The arm's latest `limit` answers without an error (in [start, end) when given)."""
    answers = (
        TurnEvent.objects.filter(
            experiment=experiment, arm=arm, role=TurnEvent.Role.ASSISTANT, error="", latency_ms__isnull=False
        )
        .exclude(source=TurnEvent.Source.PROBE)
        .order_by("-occurred_at", "-id")
    )
    if start is not None:
        answers = answers.filter(occurred_at__gte=start)
    if end is not None:
        answers = answers.filter(occurred_at__lt=end)
    rows = answers.values_list("latency_ms", "first_token_ms", "output_tokens", "abandoned")[:limit]
    total, first, speed = [], [], []
    for latency, first_token, tokens, abandoned in rows:
        if first_token is not None:
            first.append(first_token)
        if abandoned:
            continue  # its total time is the client's, not the model's
        total.append(latency)
        if first_token is not None and tokens is not None and tokens >= 2 and latency > first_token:
            speed.append((tokens - 1) * 1000 / (latency - first_token))
    return LatencySamples(total_ms=total, first_token_ms=first, tokens_per_second=speed)


P50 = RatioStatistic(name="p50", quantile=0.5)
P95 = RatioStatistic(name="p95", quantile=0.95)
MEDIAN_SPEED = RatioStatistic(name="median", quantile=0.5, higher_is_worse=False)


@dataclass(frozen=True, kw_only=True)
class Watched:
    """A speed metric the canary watches: its statistic, the guardrail holding it, its unit."""

    metric: str
    statistic: RatioStatistic
    bar: str
    unit: str
    streamed_only: bool = False

    def values(self, samples: LatencySamples) -> list[float]:
        if self.metric.startswith("first_token"):
            return samples.first_token_ms
        return samples.tokens_per_second if self.metric == "tokens_per_second" else samples.total_ms


# The analysis judges the median's ratio with its own rank test (`latency`); the page shows it too.
WATCHED = (
    Watched(metric="latency", statistic=P50, bar="max_latency_ratio", unit="ms"),
    Watched(metric="latency_p95", statistic=P95, bar="max_latency_p95_ratio", unit="ms"),
    Watched(
        metric="first_token_p50", statistic=P50, bar="max_first_token_ratio", unit="ms", streamed_only=True
    ),
    Watched(
        metric="first_token_p95",
        statistic=P95,
        bar="max_first_token_p95_ratio",
        unit="ms",
        streamed_only=True,
    ),
    Watched(
        metric="tokens_per_second",
        statistic=MEDIAN_SPEED,
        bar="min_tokens_per_second_ratio",
        unit="tokens/s",
        streamed_only=True,
    ),
)

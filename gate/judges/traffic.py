"""What the traffic layers (follow-up rate, business value) record about the traffic they judged."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class TrafficInputs:
    """The experiment and its traffic window (ISO timestamps); `experiment` None when no canary
    experiment compares the run's two versions."""

    experiment: str | None
    experiment_status: str = ""
    baseline: str = ""
    candidate: str = ""
    traffic_percent: float | None = None
    window_traffic_percent: float | None = None
    window_start: str = ""
    window_end: str = ""

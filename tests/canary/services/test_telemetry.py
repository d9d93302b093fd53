"""A proxied turn keeps its fields through the stream's JSON, and entries from before the dataclass
(with their `source` key) still drain to the same row."""

import json
from datetime import UTC, datetime

from canary.models import TurnEvent
from canary.services.telemetry import ProxiedTurn

TURN = ProxiedTurn(
    experiment_id=7,
    event_id="px-1-a",
    session_id="s",
    user_id="u",
    arm="candidate",
    turn_index=1,
    role="assistant",
    text="answer",
    occurred_at=datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC),
    version_id=3,
    latency_ms=12.5,
    fallback=True,
)


def test_a_turn_comes_back_from_its_json_and_becomes_a_proxy_row():
    assert ProxiedTurn.from_json(TURN.to_json()) == TURN
    row = TURN.row()
    assert (row.source, row.experiment_id, row.version_id, row.occurred_at) == (
        TurnEvent.Source.PROXY,
        7,
        3,
        TURN.occurred_at,
    )


def test_an_entry_written_before_the_dataclass_still_reads():
    old = json.loads(TURN.to_json()) | {"source": "proxy"}
    assert ProxiedTurn.from_json(json.dumps(old).encode()) == TURN

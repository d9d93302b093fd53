"""A layer's stored details read leniently: keys this version does not know are named (not lost),
fields added since take their defaults, and details it cannot read at all say which fields."""

from gate.layers.registry import layer_get
from gate.models import LayerResult

CELL = {"n": 10, "correct": 8, "accuracy": 0.8, "ci_low": 0.49, "ci_high": 0.94}
SIDE = {**CELL, "errors": 0, "by_tag": {}, "by_language": {}, "version": "fam:v2"}


def read(details):
    return layer_get("clean_accuracy").details_read(LayerResult(layer="clean_accuracy", details=details))


def test_retired_keys_are_named_with_their_paths_and_added_fields_take_defaults():
    stored = read({"suite": "s@1", "suite_hash": "h", "candidate": {**SIDE, "median_ms": 4}, "kappa": 0.2})
    assert stored.details.candidate.accuracy == 0.8 and stored.details.candidate.seconds == 0.0
    assert stored.details.baseline is None  # added since: its default
    assert stored.retired_keys == {"candidate.median_ms": 4, "kappa": 0.2}
    assert stored.unreadable == []


def test_details_missing_a_field_without_default_say_which():
    side = {key: value for key, value in SIDE.items() if key != "version"}
    stored = read({"suite": "s@1", "suite_hash": "h", "candidate": side})
    assert stored.details is None
    assert stored.unreadable == ["candidate.version: Field required"]


def test_no_details_yet_is_nothing_to_read():
    assert read({}).details is None and read({}).unreadable == []

import pytest

from engines.reasons import Term, reason
from gate.judges.verdict import VerdictCode, gate_verdict

REQUIRED = ["clean_accuracy", "robustness", "follow_up_rate"]


def test_pass_only_when_every_required_layer_passes():
    verdict, reasons = gate_verdict(required_layers=REQUIRED, layer_verdicts=dict.fromkeys(REQUIRED, "pass"))
    assert (verdict, reasons) == ("pass", [])


def test_missing_layer_never_passes():
    verdict, reasons = gate_verdict(
        required_layers=REQUIRED, layer_verdicts={"clean_accuracy": "pass", "robustness": "pass"}
    )
    assert verdict == "insufficient_data"
    assert reasons == [reason(VerdictCode.NO_RESULT, layer=Term("follow_up_rate"))]


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        (["pass", "fail", "error"], "fail"),
        (["pass", "insufficient_data", "error"], "error"),
        (["insufficient_data", "pass", "pass"], "insufficient_data"),
    ],
)
def test_worst_outcome_wins(verdicts, expected):
    verdict, _ = gate_verdict(
        required_layers=REQUIRED, layer_verdicts=dict(zip(REQUIRED, verdicts, strict=True))
    )
    assert verdict == expected


def test_layers_not_required_do_not_count():
    verdict, _ = gate_verdict(
        required_layers=["clean_accuracy"], layer_verdicts={"clean_accuracy": "pass", "robustness": "fail"}
    )
    assert verdict == "pass"


def test_a_verdict_the_rule_does_not_know_is_an_error_never_a_pass():
    assert gate_verdict(required_layers=["a", "b"], layer_verdicts={"a": "pass", "b": "pending"}) == (
        "error",
        [reason(VerdictCode.LAYER_VERDICT, layer=Term("b"), verdict=Term("pending"))],
    )

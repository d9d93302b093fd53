import pytest

from evalhub.gate.policy import LAYERS, GatePolicyConfig, PolicyError, gate_policy_parse


def test_defaults_require_every_layer():
    config = gate_policy_parse({})
    assert config == GatePolicyConfig()
    assert config.required_layers == LAYERS


def test_round_trips_through_json_dict():
    config = gate_policy_parse({"clean_accuracy_min": 0.9, "required_layers": ["clean_accuracy"]})
    assert gate_policy_parse(config.as_dict()) == config


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"bogus": 1}, "bogus"),
        ({"clean_accuracy_min": 1.5}, "clean_accuracy_min"),
        ({"clean_accuracy_min": "high"}, "clean_accuracy_min"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"required_layers": []}, "required_layers"),
        ({"required_layers": ["vibes"]}, "required_layers"),
        ({"decide_on": "mood"}, "decide_on"),
        ({"run_baseline": "yes"}, "run_baseline"),
    ],
)
def test_bad_values_name_the_field(data, field):
    with pytest.raises(PolicyError) as caught:
        gate_policy_parse(data)
    assert caught.value.field == field

import pytest

from gate.policy import LAYERS, GatePolicyConfig, PolicyError, gate_policy_parse


def test_defaults_require_every_layer():
    config = gate_policy_parse({})
    assert config == GatePolicyConfig()
    assert config.required_layers == LAYERS


def test_round_trips_through_json_dict():
    config = gate_policy_parse(
        {
            "clean_accuracy_min": 0.9,
            "required_layers": ["clean_accuracy"],
            "robustness_judge_by": "consistency",
            "text_cutoffs": {"chrf": 0.5},
            "attack_recipe": "deepwordbug",
        }
    )
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
        ({"robustness_judge_by": "vibes"}, "robustness_judge_by"),
        ({"text_cutoffs": {"bleu": 0.3}}, "text_cutoffs.bleu"),
        ({"text_cutoffs": {"chrf": 2}}, "text_cutoffs.chrf"),
        ({"text_cutoffs": []}, "text_cutoffs"),
        ({"attack_recipe": ""}, "attack_recipe"),
        ({"attack_items": 0}, "attack_items"),
    ],
)
def test_bad_values_name_the_field(data, field):
    with pytest.raises(PolicyError) as caught:
        gate_policy_parse(data)
    assert caught.value.field == field

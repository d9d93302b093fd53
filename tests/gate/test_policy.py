import pytest

from gate.judges.business_value import BusinessValuePolicy
from gate.judges.robustness import RobustnessPolicy
from gate.layers.registry import LAYER_NAMES, SECTIONS, gate_policy_parse
from gate.policy import GeneralPolicy, PolicyError, PolicySection


def test_defaults_require_every_layer():
    config = gate_policy_parse({})
    assert config.general.required_layers == LAYER_NAMES
    assert config.section(RobustnessPolicy) == RobustnessPolicy()
    assert config.section(BusinessValuePolicy).business_metric is None


def test_round_trips_through_json_dict():
    config = gate_policy_parse(
        {
            "clean_accuracy_min": 0.9,
            "required_layers": ["clean_accuracy"],
            "robustness_judge_by": "consistency",
            "text_cutoffs": {"chrf": 0.5},
            "attack_recipe": "deepwordbug",
            "follow_up_kinds": ["follow_up", "deepening", "follow_up"],
        }
    )
    assert gate_policy_parse(config.as_dict()) == config
    assert config.as_dict()["follow_up_kinds"] == ["follow_up", "deepening"]


def test_every_key_is_declared_once_with_help():
    names = [key.name for section in (GeneralPolicy, *SECTIONS.values()) for key in section.describe()]
    assert len(names) == len(set(names))
    for section in (GeneralPolicy, *SECTIONS.values()):
        assert issubclass(section, PolicySection)
        assert all(key.help for key in section.describe())


def test_integers_stay_integers_and_floats_floats():
    config = gate_policy_parse({"batch_size": 64.0, "clean_accuracy_min": 1})
    assert config.general.batch_size == 64 and isinstance(config.general.batch_size, int)
    assert config.as_dict()["clean_accuracy_min"] == 1.0 and isinstance(
        config.as_dict()["clean_accuracy_min"], float
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"bogus": 1}, "bogus"),
        ({"clean_accuracy_min": 1.5}, "clean_accuracy_min"),
        ({"clean_accuracy_min": "high"}, "clean_accuracy_min"),
        ({"clean_accuracy_min": float("nan")}, "clean_accuracy_min"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"required_layers": []}, "required_layers"),
        ({"required_layers": ["vibes"]}, "required_layers"),
        ({"decide_on": "mood"}, "decide_on"),
        ({"run_baseline": "yes"}, "run_baseline"),
        ({"robustness_judge_by": "vibes"}, "robustness_judge_by"),
        ({"robustness_shares": {"typo": -1}}, "robustness_shares"),
        ({"text_cutoffs": {"bleu": 0.3}}, "text_cutoffs.bleu"),
        ({"text_cutoffs": {"chrf": 2}}, "text_cutoffs.chrf"),
        ({"text_cutoffs": []}, "text_cutoffs"),
        ({"attack_recipe": ""}, "attack_recipe"),
        ({"attack_items": 0}, "attack_items"),
        ({"follow_up_kinds": ["new"]}, "follow_up_kinds"),
        ({"business_direction": "sideways"}, "business_direction"),
        ({"business_sequential_tau": 0}, "business_sequential_tau"),
        ({"business_metric": "x" * 101}, "business_metric"),
        ({"confidence": None}, "confidence"),
    ],
)
def test_bad_values_name_the_field(data, field):
    with pytest.raises(PolicyError) as caught:
        gate_policy_parse(data)
    assert caught.value.field == field

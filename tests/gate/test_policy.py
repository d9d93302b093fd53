from dataclasses import dataclass

import pytest

from gate.judges.business_value import BusinessValuePolicy
from gate.judges.robustness import RobustnessPolicy
from gate.layers.registry import default_layer_names, gate_layers, gate_policy_parse, gate_policy_read
from gate.policy import (
    GeneralPolicy,
    PolicyError,
    PolicyFindings,
    PolicySection,
    policy_parse,
    policy_read,
    setting,
)
from tests.wordings import english


def test_defaults_require_every_layer_but_the_opt_in_ones():
    config = gate_policy_parse({})
    assert config.general.required_layers == default_layer_names()
    assert "suite_shift" not in config.general.required_layers
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
    names = [
        key.name
        for section in (GeneralPolicy, *(layer.policy for layer in gate_layers()))
        for key in section.describe()
    ]
    assert len(names) == len(set(names))
    for section in (GeneralPolicy, *(layer.policy for layer in gate_layers())):
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
        ({"repeats": 0}, "repeats"),
        ({"repeats": 21}, "repeats"),
        ({"repeats": 2.5}, "repeats"),
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


# ---------------------------------------------------------------------------------------------
# Stored documents: read leniently, never refused
# ---------------------------------------------------------------------------------------------
def test_a_stored_policy_as_written_reads_clean_and_equal_to_the_strict_parse():
    config = gate_policy_parse({"clean_accuracy_min": 0.9, "required_layers": ["clean_accuracy"]})
    stored = gate_policy_read(config.as_dict())
    assert stored.config == config and stored.found.clean
    assert stored.found == PolicyFindings()


def test_retired_keys_are_kept_aside_missing_ones_defaulted_and_bad_values_named():
    data = gate_policy_parse({}).as_dict()
    del data["batch_size"], data["follow_up_kinds"]
    data.update(
        old_switch=True,  # retired
        confidence=1.5,  # out of range now: kept as stored
        decide_on="median",  # a choice since dropped: kept
        run_baseline="yes",  # the wrong kind: the default
        follow_up_margin=None,  # null where a number is needed: the default
    )
    stored = gate_policy_read(data)
    assert stored.found.retired_keys == {"old_switch": True}
    assert stored.found.defaulted_keys == {"batch_size": 32, "follow_up_kinds": ["follow_up"]}
    assert set(stored.found.invalid_keys) == {"confidence", "decide_on", "run_baseline", "follow_up_margin"}
    assert stored.found.invalid_keys["confidence"] == {
        "value": 1.5,
        "why": {"code": "policy.between", "params": {"low": 0.5, "high": 0.9999}},
    }
    general = stored.config.general
    assert (general.confidence, general.decide_on, general.run_baseline, general.batch_size) == (
        1.5,
        "median",
        True,
        32,
    )
    assert not stored.found.clean
    with pytest.raises(PolicyError):  # input stays strict
        gate_policy_parse(data)


def test_a_required_layer_this_version_lacks_stays_required_so_the_run_cannot_pass():
    from gate.judges.verdict import gate_verdict

    data = {**gate_policy_parse({}).as_dict(), "required_layers": ["clean_accuracy", "toxicity"]}
    stored = gate_policy_read(data)
    assert stored.config.general.required_layers == ("clean_accuracy", "toxicity")
    why = stored.found.invalid_keys["required_layers"]["why"]
    assert why == {"code": "policy.layers_missing", "params": {"layers": ["toxicity"]}}
    assert english([why]) == ["layers this version does not have: toxicity"]
    verdict, _ = gate_verdict(
        required_layers=stored.config.general.required_layers, layer_verdicts={"clean_accuracy": "pass"}
    )
    assert verdict == "insufficient_data"


def test_a_key_added_later_reads_as_what_older_versions_did():
    @dataclass(frozen=True)
    class Section(PolicySection):
        newer_check: bool = setting(True, absent=False, help="added later; older runs did without it")
        level: float = setting(0.5, low=0.0, high=1.0, help="a level")

    assert policy_parse({}, sections={"x": Section}).section(Section).newer_check is True
    stored = policy_read({"required_layers": ["x"], "level": 0.7}, sections={"x": Section})
    assert stored.config.section(Section) == Section(newer_check=False, level=0.7)
    assert stored.found.defaulted_keys["newer_check"] is False and stored.found.clean

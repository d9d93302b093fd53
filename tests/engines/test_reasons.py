from enum import StrEnum

from engines.reasons import Reason, Term, Words, reason, reason_render, wording_fields, wordings_register

WORDS = Words(translate=lambda text: text.replace("below", "under"), term=lambda code: code.upper())


class ToyCode(StrEnum):
    BELOW = "toy.below"
    NESTED = "toy.nested"
    UNWORDED = "toy.unworded"


wordings_register(
    {
        ToyCode.BELOW: "{metric} {rate:.3f} is below the bar {bar:.0%}",
        ToyCode.NESTED: "because {why}; missing {missing}",
    }
)


def test_a_reason_renders_its_wording_translated_with_its_parameters_formatted():
    below = reason(ToyCode.BELOW, metric=Term("accuracy"), rate=0.81234, bar=0.85)
    assert reason_render(below, words=WORDS) == "ACCURACY 0.812 is under the bar 85%"


def test_nested_reasons_and_none_render_and_survive_json():
    nested = reason(ToyCode.NESTED, why=reason(ToyCode.BELOW, metric=Term("x"), rate=1, bar=1), missing=None)
    again = Reason.from_json(nested.to_json())
    assert again == nested
    assert reason_render(again, words=WORDS) == "because X 1.000 is under the bar 100%; missing —"


def test_a_stored_sentence_is_shown_as_written_and_a_code_without_wording_shows_its_code():
    assert reason_render("clean accuracy 0.7 < 0.8", words=WORDS) == "clean accuracy 0.7 < 0.8"
    assert reason_render(reason(ToyCode.UNWORDED, n=3), words=WORDS) == "toy.unworded(n=3)"


def test_wording_fields():
    assert wording_fields("{metric} {rate:.3f} and {bar:.0%}") == {"metric", "rate", "bar"}

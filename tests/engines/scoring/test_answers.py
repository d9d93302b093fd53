from engines.scoring.answers import answer_correct


def test_label_wins_over_text():
    assert answer_correct(expected_label="payment", reference="x", label="Payment", text="wrong")
    assert not answer_correct(expected_label="payment", reference="x", label="deposit", text="x")
    assert not answer_correct(expected_label="payment", reference="", label=None, text="payment")


def test_reference_match_ignores_case_width_and_spaces():
    assert answer_correct(expected_label="", reference="Force  majeure", label=None, text="force majeure ")
    assert answer_correct(expected_label="", reference="定金", label=None, text="定金")
    assert not answer_correct(expected_label="", reference="定金", label=None, text="订金")

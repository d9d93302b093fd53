"""The rubric judge's engine: its verdict is read strictly (no verdict is never "correct"), the
labelled file is parsed strictly, and Cohen's kappa is the hand-computed one with statsmodels' ASE."""

import json
import math

import pytest

from engines.scoring.judge import (
    agreement_measure,
    answer_judge_prompt,
    answer_verdict_parse,
    labelled_answers_parse,
)


class TestVerdictParse:
    @pytest.mark.parametrize(
        "text, verdict",
        [
            ("Same meaning.\nVERDICT: correct", True),
            ("It negates the reference.\nVERDICT: incorrect", False),
            ("verdict: Correct", True),
            ("**VERDICT:** **incorrect**", False),  # Markdown bold
            ("**VERDICT**: correct", True),
            ("VERDICT：correct", True),  # a full-width colon (a Chinese reply)
            ("VERDICT: **incorrect**", False),
            ("Reason.\n\nVERDICT: correct\n", True),
            ("VERDICT: correct\nVERDICT: correct", True),
            ("VERDICT: incorrect.", False),
        ],
    )
    def test_a_verdict_line_is_read(self, text, verdict):
        assert answer_verdict_parse(text) is verdict

    @pytest.mark.parametrize(
        "text",
        [
            "",
            "The answer is correct.",  # no VERDICT line: unreadable, not correct
            "[correct]",
            "VERDICT: correct or incorrect",  # both verdicts: unreadable
            "VERDICT: correct\nVERDICT: incorrect",
            "VERDICT: correctly",
            "VERDICT: partly",
            "VERDICT: correct, mostly",
        ],
    )
    def test_no_single_verdict_is_unreadable_never_correct(self, text):
        assert answer_verdict_parse(text) is None

    def test_the_prompt_holds_the_three_texts_and_asks_for_the_verdict_line(self):
        prompt = answer_judge_prompt(question="Q?", reference="R.", answer="A.")
        assert (
            "Question: Q?" in prompt and "Reference answer: R." in prompt and "Answer to grade: A." in prompt
        )
        assert '"VERDICT: correct"' in prompt and '"VERDICT: incorrect"' in prompt


class TestLabelledAnswersParse:
    def row(self, **overrides):
        base = {"id": "a", "question": "Q", "reference": "R", "answer": "A", "verdict": "correct"}
        return json.dumps({**base, **overrides}, ensure_ascii=False)

    def test_rows_are_read_with_their_verdicts_and_languages(self):
        content = "\n".join(
            [self.row(), "", self.row(id="b", verdict="incorrect", language="zh", answer="答")]
        )
        first, second = labelled_answers_parse(content=content)
        assert (first.id, first.correct, first.language) == ("a", True, "en")
        assert (second.id, second.correct, second.language, second.answer) == ("b", False, "zh", "答")

    @pytest.mark.parametrize(
        "line, message",
        [
            ("{not json", "line 1: not JSON"),
            ("[1]", "line 1: not an object"),
            ('{"id": "a"}', "line 1: needs text in question, reference, answer, verdict"),
            (None, "line 1: verdict must be 'correct' or 'incorrect'"),
        ],
    )
    def test_a_bad_line_is_refused_with_its_number(self, line, message):
        with pytest.raises(ValueError, match=message):
            labelled_answers_parse(content=line or self.row(verdict="right"))

    def test_an_id_twice_is_refused(self):
        with pytest.raises(ValueError, match="line 2: id 'a' twice"):
            labelled_answers_parse(content=self.row() + "\n" + self.row())


class TestAgreement:
    def test_kappa_is_the_hand_computed_one(self):
        # People: 20 correct, 30 incorrect. The judge: 15 + 10 correct, 5 + 15 incorrect, 5 unreadable.
        human = [True] * 20 + [False] * 30
        judged = [True] * 15 + [False] * 5 + [True] * 10 + [False] * 15 + [None] * 5
        a = agreement_measure(human=human, judged=judged, confidence=0.95)
        # p_o = 30/50; p_e = (20·25 + 30·20)/50² = 0.44 (the unreadable column meets no human row);
        # kappa = (0.6 - 0.44)/(1 - 0.44) = 2/7.
        assert (a.n, a.agree, a.agreement, a.unreadable) == (50, 30, 0.6, 5)
        assert a.table == ((15, 5, 0), (10, 15, 5))
        assert a.kappa == pytest.approx(2 / 7, abs=1e-12)
        assert a.ci_low == pytest.approx(a.kappa - 1.959963984540054 * a.se, abs=1e-12)
        assert a.ci_high == pytest.approx(a.kappa + 1.959963984540054 * a.se, abs=1e-12)

    def test_the_standard_error_is_statsmodels_and_matches_fleiss_cohen_everitt(self):
        from statsmodels.stats.inter_rater import cohens_kappa

        # 2×2: [[20, 5], [10, 15]]: p_o 0.7, p_e 0.5, kappa 0.4; statsmodels' ASE 0.12700 and 95 %
        # limits 0.15109, 0.64891 (its printed summary).
        human = [True] * 25 + [False] * 25
        judged = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
        a = agreement_measure(human=human, judged=judged, confidence=0.95)
        reference = cohens_kappa([[20, 5], [10, 15]])
        assert a.kappa == pytest.approx(0.4, abs=1e-12)
        assert a.se == pytest.approx(reference.std_kappa, abs=1e-12) == pytest.approx(0.12700, abs=5e-6)
        assert (a.ci_low, a.ci_high) == pytest.approx((0.15109, 0.64891), abs=5e-6)
        # A 90 % interval is narrower, around the same kappa.
        narrow = agreement_measure(human=human, judged=judged, confidence=0.90)
        assert a.ci_low < narrow.ci_low < 0.4 < narrow.ci_high < a.ci_high

    def test_an_inverted_judge_is_minus_one_and_an_unreadable_one_zero(self):
        human = [True, False] * 20
        inverted = agreement_measure(human=human, judged=[not h for h in human])
        assert inverted.kappa == pytest.approx(-1.0) and inverted.agreement == 0.0
        mute = agreement_measure(human=human, judged=[None] * 40)
        assert mute.kappa == pytest.approx(0.0) and mute.unreadable == 40 and mute.agree == 0

    def test_kappa_is_undefined_when_everyone_gives_one_verdict(self):
        a = agreement_measure(human=[True] * 10, judged=[True] * 10)
        assert a.agreement == 1.0 and a.kappa is None and a.ci_low is None
        empty = agreement_measure(human=[], judged=[])
        assert empty.n == 0 and empty.agreement is None and empty.kappa is None

    def test_lengths_must_match(self):
        with pytest.raises(ValueError):
            agreement_measure(human=[True], judged=[])

    def test_the_interval_stays_inside_minus_one_one(self):
        a = agreement_measure(
            human=[True, False, True, False, True], judged=[True, False, True, False, False]
        )
        assert -1.0 <= a.ci_low <= a.kappa <= a.ci_high <= 1.0 and not math.isnan(a.se)

"""The sentence shapes of the reasons added with the review queue, the corrected follow-up rate and
its live error rates, layer 3's registered horizon and layer 1's adversarial recipe: English comes
back as it was written, Chinese keeps every number and name."""

import re

import pytest
from django.utils import translation

from evalhub.reasons import reason_translate

REASONS = [
    "follow-up rate upper bound 0.231 > bar 0.18 (corrected rate 0.186, 95 % CI [0.142, 0.231] by "
    "Rogan–Gladen per language for detector follow-up-lr-2; observed 0.186, 55 follow-ups of 295 answers)",
    "difference from the baseline +0.155 > margin 0.01 (difference +0.099, 95 % CI [+0.043, +0.155] by "
    "Rogan–Gladen corrected, delta method; baseline rate 0.087, 23 follow-ups of 263 answers)",
    "no baseline arm: non-inferiority not checked, the verdict rests on the bar alone",
    "the detector follow-up-lr-2 has no informative measured error rates for language 'zh' (sensitivity + "
    "specificity must exceed 1): its follow-up rate cannot be corrected",
    "candidate follow-up rate 0.186 (55/295), corrected for the detector's errors 0.171 vs baseline 0.087 "
    "(23/263), difference +0.099",
    "no live turns reviewed yet: not checked, the policy needs at least 50 reviewed turns",
    "live agreement of the detector with reviewers 0.700 (35 of 50 reviewed turns, 95 % CI [0.566, 0.809]) "
    "is below the policy's minimum 0.8: the detector's labels cannot be trusted on this traffic",
    "live agreement of the detector with reviewers 0.900 (45 of 50 reviewed turns, 95 % CI [0.786, 0.957]) "
    ">= minimum 0.8",
    "error rates for language 'en' from 260 reviewed live turns: sensitivity 0.667 (40 of 60), "
    "specificity 0.950 (190 of 200)",
    "error rates for language 'zh' as shipped, from the detector's test split: sensitivity 0.849, "
    "specificity 0.956 (25 follow-ups and 100 others reviewed, the live ones need 30 of each)",
    "error rates for language 'fr' as shipped, from the detector's test split: sensitivity unmeasured, "
    "specificity unmeasured (0 follow-ups and 0 others reviewed, the live ones need 30 of each)",
    "language 'en': the live sensitivity 0.667 (40 of 60 reviewed turns) disagrees with the shipped "
    "0.848 (89 of 105 test pairs; Fisher's exact p 0.0103, Holm-adjusted 0.0309 < 0.05): the live "
    "one is used",
    "language 'zh': the live specificity 0.800 (80 of 100 reviewed turns) disagrees with the shipped "
    "0.956 (151 of 158 test pairs; Fisher's exact p 0.000109, Holm-adjusted 0.000436 < 0.05): too "
    "few turns are reviewed to replace it, so the corrected rate cannot be trusted yet",
    "no fixed horizon was registered: experiment exp started without one; start a new experiment to "
    "register it; the fixed-horizon test is judged once, at the horizon; set business_sequential_tau "
    "(fixed before the experiment) for an interval that may be judged at every look",
    "before the registered horizon of 312 units per arm (100 baseline and 98 candidate units so far; sd 1.2 "
    "measured over 300 units of revenue in the 14 days before the start; a true improvement of 0.1 passes "
    "the bar 0 with power 0.8 at alpha 0.05): the fixed-horizon test is judged once, at the horizon; set "
    "business_sequential_tau (fixed before the experiment) for an interval that may be judged at every look",
    "CUPED-adjusted improvement (increase is better) 0.5, 95 % interval [0.1, 0.9] at the registered horizon "
    "of 312 units per arm: lower bound 0.1 > 0 (one-sided test at alpha 0.05)",
    "the horizon registered at the start is for revenue per user, this policy judges revenue per outcome",
    "policy 'default' sizes no horizon: business_mde (0.1) must exceed business_min_effect (0.2)",
    "only 3 units of revenue in the 14 days before the start (the policy needs 50) and policy 'default' "
    "sets no business_planning_sd",
    "sd 1.2 from business_planning_sd (3 units of revenue before the start)",
    "transfer textfooler-v1: accuracy 0.920 before, 0.410 under attack, success rate 0.554, 37 queries "
    "per item",
    "adaptive textfooler-v1: accuracy 0.920 before, 0.410 under attack, success rate 0.554, 37 queries "
    "per item",
    "textfooler-v1 needs class scores, which backend 'openai' of fam:v4 does not give (it works with hf, "
    "builtin)",
    "attack mode: attack mode needs class scores, which backend 'openai' of fam:v4 does not give (it works "
    "with hf, builtin)",
    "robustness_transfer_from is 'baseline' but the run has no baseline",
    # What serves is what was judged
    "not the model that serves: http://127.0.0.1:8102/v1 serves config hash 9bff8c631215, not fam:v4's "
    "24fa220417fc",
    # Issue 18: the traffic layers' plans, looks and blinding
    "not the registered test: business_alpha 0.25 (registered 0.05), business_mde null (registered 0.6); the "
    "plan registered at 2026-12-02 01:14:18 binds the test, and changing it is a new registration, counted "
    "from then on",
    "the registered look, taken at 2026-12-02 01:14:18 by gate run 12: every later run returns it unchanged",
    "the one look at the registered horizon, taken now (data up to 2026-12-02 01:14:18): every later run "
    "returns it unchanged",
    "the one look at the registered horizon, taken now (answers up to 2026-12-02 01:14:18): every later run "
    "returns it unchanged",
    "the registered horizon of 312 units per arm is reached: the next gate run takes the one look",
    "the registered horizon of 2000 answered questions per arm is reached: the one look is taken once the "
    "follow-ups of its last answers are in, from 2026-12-02 01:14:18",
    "the plan was registered again while this run judged it: run the gate again",
    "before the registered horizon of 312 units per arm (100 baseline and 98 candidate units so far; sd 1.2 "
    "from business_planning_sd (3 units of revenue before the start); a true improvement of 0.1 passes the "
    "bar 0 with power 0.8 at alpha 0.05; raised from 40 to business_min_units): the fixed-horizon test is "
    "judged once, at the horizon; set business_sequential_tau (fixed before the experiment) for an interval "
    "that may be judged at every look",
    "no fixed horizon was registered: experiment exp started without one; register a plan to count from now "
    "on; the fixed-horizon test is judged once, at the horizon; set business_sequential_tau (fixed before "
    "the experiment) for an interval that may be judged at every look",
    "unblinded by rm at 2026-12-02 01:14:18: a safety review; interim numbers, not a decision: improvement "
    "(decrease is better) 0.3, 90 % interval [0.1351, 0.4649], read before the horizon",
    "sample ratio mismatch: 1000 baseline and 1500 candidate answered questions against an expected "
    "candidate share 0.5 (clustered by user, p = 1.2e-20 < 0.001): the assignment or logging is broken, the "
    "rate is not trusted",
    "no horizon of answered questions was registered: only 3 answers in the 14 days before the start (the "
    "policy needs 200) and policy 'default' sets no follow_up_planning_rate",
    "before the registered horizon of 2000 answered questions per arm (380 baseline and 400 candidate so "
    "far; rate 0.12 from 60 follow-ups of 500 answers in the 14 days before the start; for the detector's "
    "least favourable language, zh; a candidate as good as the baseline passes the bar 0.18 and the margin "
    "0.01 with power 0.8 at alpha 0.025; raised from 150 to follow_up_min_answered): the rate is judged "
    "once, at the horizon",
    "no horizon of answered questions was registered: rate 0.2 from follow_up_planning_rate (0 answers in "
    "the 14 days before the start); the planning rate 0.2 is not under the bar 0.18",
    "follow-up rate always-valid upper bound 0.251 > bar 0.18 (rate 0.100, 95 % CI [0.083, 0.120], 100 "
    "follow-ups of 1000 answers)",
    "not shown yet: the estimates clear the bar and the margin, the always-valid bounds not yet",
    "blind until the one look at the registered horizon: no per-arm figures of the metric",
]


@pytest.mark.parametrize("reason", REASONS)
def test_a_new_reason_reads_in_chinese_with_its_numbers_and_names(reason):
    with translation.override("zh-hans"):
        shown = reason_translate(reason)
    assert re.search(r"[\u4e00-\u9fff]", shown), shown
    kept = re.findall(
        r"[-+]?\d+(?:\.\d+)?|follow-up-lr-2|revenue|'\w+'|business_\w+|follow_up_\w+|textfooler-v1|fam:v4",
        reason,
    )
    for piece in kept:
        assert piece in shown, (piece, shown)
    with translation.override("en"):
        assert reason_translate(reason) == reason

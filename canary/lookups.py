"""Why a lookup of the canary's selectors (`canary.selectors`) found nothing it could use: their
reason codes and wordings, apart so that the selectors' modules hold only queries."""

from __future__ import annotations

from enum import StrEnum

from engines.reasons import gettext_noop, wordings_register


class LookupCode(StrEnum):
    NO_EXPERIMENT = "experiments.no_such_experiment"
    UNKNOWN = "experiments.unknown"
    OTHER_CANDIDATE = "experiments.other_candidate"
    ITS_CANDIDATE = "experiments.its_candidate"
    OTHER_BASELINE = "experiments.other_baseline"
    ITS_BASELINE = "experiments.its_baseline"


wordings_register(
    {
        LookupCode.NO_EXPERIMENT: gettext_noop("No experiment named '{name}'."),
        LookupCode.UNKNOWN: gettext_noop("unknown"),
        LookupCode.OTHER_CANDIDATE: gettext_noop("Experiment '{name}' does not have {ref} as its candidate."),
        LookupCode.ITS_CANDIDATE: gettext_noop("its candidate is {ref}"),
        LookupCode.OTHER_BASELINE: gettext_noop(
            "Experiment '{name}' compares with {baseline}, the run with {ref}."
        ),
        LookupCode.ITS_BASELINE: gettext_noop("its baseline is {ref}"),
    }
)

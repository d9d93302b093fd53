"""The gate's own layers (`gate.layers.registry` collects every installed app's `gate_layers`)."""

from gate.layers.business_value import BusinessValueLayer
from gate.layers.clean_accuracy import CleanAccuracyLayer
from gate.layers.follow_up_rate import FollowUpRateLayer
from gate.layers.robustness import RobustnessLayer
from gate.layers.suite_shift import SuiteShiftLayer

LAYERS = (
    CleanAccuracyLayer(),
    RobustnessLayer(),
    FollowUpRateLayer(),
    BusinessValueLayer(),
    SuiteShiftLayer(),  # opt-in: required only where a policy names it
)

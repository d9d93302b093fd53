import pytest

from registry.actors import SYSTEM
from registry.services.versions import model_version_register
from tests.lifecycle import incumbent_register


@pytest.fixture
def versions(small_bow):
    """A family's promoted baseline and its candidate, both the small bag-of-words checkpoint."""
    baseline = incumbent_register(
        family="fam",
        label="v1",
        backend_kind="builtin",
        backend_config={"path": str(small_bow)},
        actor=SYSTEM,
    )
    candidate = model_version_register(
        family="fam",
        label="v2",
        backend_kind="builtin",
        backend_config={"path": str(small_bow)},
        baseline=baseline,
        actor=SYSTEM,
    )
    return candidate, baseline

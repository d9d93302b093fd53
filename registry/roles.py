"""Roles are Django groups. A user's roles decide what the API lets them do."""

from __future__ import annotations

VIEWER, CI, RELEASE_MANAGER = "viewer", "ci", "release_manager"
# The production chat app: canary assignment, proxy and telemetry, nothing else.
APP = "app"
# Labels sampled live turns in the follow-up review queue; reads nothing else.
ANNOTATOR = "annotator"
ROLES = (VIEWER, CI, RELEASE_MANAGER, APP, ANNOTATOR)
READ_ROLES = frozenset({VIEWER, CI, RELEASE_MANAGER})
# Register versions, upload suites and probe sets, start gate runs.
WRITE_ROLES = frozenset({CI, RELEASE_MANAGER})
# Move a version's status, decide releases, run canaries.
RELEASE_ROLES = frozenset({RELEASE_MANAGER})
# Turn and outcome events: what users did, reported by the chat application only.
EVENT_ROLES = frozenset({APP})
# The follow-up review queue: label live turns, read the labels' agreement, export them.
REVIEW_ROLES = frozenset({RELEASE_MANAGER, ANNOTATOR})


def user_roles(user) -> frozenset[str]:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return frozenset()
    if user.is_superuser:
        return frozenset(ROLES)
    cached = getattr(user, "_evalhub_roles", None)
    if cached is None:
        cached = frozenset(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        user._evalhub_roles = cached
    return cached

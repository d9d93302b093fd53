"""The follow-up labels in the admin: listed for staff, never written there."""

from datetime import timedelta

import pytest

from canary.models import FollowUpReview
from canary.services.experiments import experiment_create, experiment_start
from canary.services.reviews import follow_up_review_record
from registry.actors import SYSTEM
from registry.services.versions import model_version_register
from tests.canary.traffic import chat_session, experiment_backdate
from tests.lifecycle import incumbent_register

pytestmark = pytest.mark.django_db

BUILTIN = {"backend_kind": "builtin", "backend_config": {"path": "placeholder"}}


def test_follow_up_reviews_are_listed_read_only(admin_client, admin_user):
    v3 = incumbent_register(family="fam", label="v3", actor=SYSTEM, **BUILTIN)
    v4 = model_version_register(family="fam", label="v4", actor=SYSTEM, baseline=v3, **BUILTIN)
    experiment = experiment_backdate(
        experiment_start(
            experiment=experiment_create(name="exp", baseline=v3, candidate=v4, actor=SYSTEM), actor=SYSTEM
        ),
        started=timedelta(hours=1),
    )
    turn = chat_session(experiment, session="s", turns=["Which clause?", "[payment] Payment.", "Why?"])[2]
    review = follow_up_review_record(experiment=experiment, turn_id=turn.pk, label="new", actor=SYSTEM)
    listed = admin_client.get("/admin/canary/followupreview/")
    assert listed.status_code == 200 and "system" in listed.content.decode()
    assert admin_client.get("/admin/canary/followupreview/add/").status_code == 403
    changed = admin_client.post(f"/admin/canary/followupreview/{review.pk}/change/", {"label": "follow_up"})
    assert changed.status_code == 403 and FollowUpReview.objects.get().label == "new"

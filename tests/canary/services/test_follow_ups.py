"""A family's detector thresholds: validated, audited, used when its turns are judged."""

import pytest
from django.contrib.auth import get_user_model

from canary.models import FollowUpDetectorConfig
from canary.services.follow_ups import follow_up_thresholds_get, follow_up_thresholds_set
from registry.errors import ApplicationError
from registry.models import AuditLog

pytestmark = pytest.mark.django_db


def test_thresholds_are_validated_audited_and_read_back():
    admin = get_user_model().objects.create_user(username="ops")
    assert follow_up_thresholds_get(family="fam").window_seconds == 600.0
    follow_up_thresholds_set(family="fam", thresholds={"window_seconds": 120}, actor=admin)
    assert follow_up_thresholds_get(family="fam").window_seconds == 120.0
    [row] = AuditLog.objects.filter(action="follow_up_detector.thresholds_set")
    assert row.actor == admin and row.after["window_seconds"] == 120.0 and row.before == {}
    with pytest.raises(ApplicationError) as refused:
        follow_up_thresholds_set(family="fam", thresholds={"window_seconds": -1}, actor=admin)
    assert list(refused.value.fields) == ["thresholds.window_seconds"]
    assert FollowUpDetectorConfig.objects.get(family="fam").thresholds == {"window_seconds": 120}


def test_the_admin_refuses_bad_thresholds_and_saves_good_ones_through_the_service(client):
    admin = get_user_model().objects.create_superuser(username="root", password="pw")
    client.force_login(admin)
    url = "/admin/canary/followupdetectorconfig/add/"
    bad = client.post(url, {"family": "fam", "thresholds": '{"nonsense": 1}'})
    assert bad.status_code == 200 and "nonsense" in bad.content.decode()
    assert not FollowUpDetectorConfig.objects.exists()
    good = client.post(url, {"family": "fam", "thresholds": '{"related_similarity": 0.2}'})
    assert good.status_code == 302
    assert follow_up_thresholds_get(family="fam").related_similarity == 0.2
    assert AuditLog.objects.filter(action="follow_up_detector.thresholds_set", actor=admin).exists()

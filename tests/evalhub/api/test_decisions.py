"""Release decisions over the API, the admin and the version page: the same rules as the service,
answered in the one error shape, and no way to change a decision once taken."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from gate.layers.registry import default_layer_names
from gate.models import Decision
from gate.services.decisions import decision_record
from registry.models import AuditLog, ModelVersion

pytestmark = pytest.mark.django_db
URL = "/api/v1/decisions/"


def assert_error(response, status: int, field: str | None = None) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "reason", "params", "message", "fields"}
    if field is not None:
        assert field in body["error"]["fields"], body
    return body["error"]


def as_client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    client.user = user
    return client


@pytest.fixture
def manager(decision_user):
    return as_client(decision_user("release_manager"))


class TestDecide:
    @pytest.mark.parametrize("role", ["viewer", "ci"])
    def test_only_release_managers_post(self, make_client, version_gated, role):
        version, _ = version_gated("pass")
        client = make_client(role)
        assert client.get(URL).status_code == 200
        response = client.post(
            URL, {"version": version.ref, "action": "approve", "reason": "r"}, format="json"
        )
        assert_error(response, 403)
        assert not Decision.objects.exists()

    def test_approve_a_passed_gate(self, manager, version_gated):
        version, run = version_gated("pass")
        response = manager.post(
            URL,
            {"version": version.ref, "action": "approve", "reason": "ship it", "gate_run": run.pk},
            format="json",
        )
        assert response.status_code == 201, response.content
        body = response.json()
        assert {
            k: body[k] for k in ("version", "action", "reason", "gate_run", "gate_verdict", "confirms")
        } == {
            "version": "fam:v1",
            "action": "approve",
            "reason": "ship it",
            "gate_run": run.pk,
            "gate_verdict": "pass",
            "confirms": None,
        }
        assert body["decided_by"] == manager.user.username
        assert response["Location"] == body["url"] and body["url"].endswith(f"{URL}{body['id']}/")
        assert manager.get(f"/api/v1/model-versions/{version.ref}/").json()["status"] == "approved"
        assert manager.get(body["url"]).json() == body

    @pytest.mark.parametrize(
        ("payload", "field"),
        [
            ({"action": "approve"}, "reason"),
            ({"action": "approve", "reason": ""}, "reason"),
            ({"action": "approve", "reason": "x" * 2001}, "reason"),
            ({"action": "bless", "reason": "r"}, "action"),
            ({"action": "approve", "reason": "r", "colour": "red"}, "colour"),
            ({"action": "approve", "reason": "r", "gate_run": 0}, "gate_run"),
            ({"action": "approve", "reason": "r", "gate_run": "x"}, "gate_run"),
            ({"action": "override_confirm", "reason": "r", "confirms": -1}, "confirms"),
        ],
    )
    def test_bad_input_names_the_field(self, manager, version_gated, payload, field):
        version, _ = version_gated("pass")
        assert_error(manager.post(URL, {"version": version.ref, **payload}, format="json"), 400, field)
        assert_error(manager.post(URL, {**payload, "version": "fam:nope"}, format="json"), 404, "version")

    def test_approve_a_failed_gate_answers_override_required(self, manager, version_gated):
        version, _ = version_gated("fail")
        response = manager.post(
            URL, {"version": version.ref, "action": "approve", "reason": "r"}, format="json"
        )
        assert assert_error(response, 409, "action")["code"] == "override_required"

    def test_registrant_may_not_approve_unless_the_switch_is_off(
        self, decision_user, version_gated, settings
    ):
        registrant = decision_user()
        version, _ = version_gated("pass", registered_by=registrant)
        body = {"version": version.ref, "action": "approve", "reason": "mine"}
        response = as_client(registrant).post(URL, body, format="json")
        assert assert_error(response, 403, "decided_by")["code"] == "self_approval"
        settings.EVALHUB_DECISIONS_FORBID_SELF_APPROVAL = False
        assert as_client(registrant).post(URL, body, format="json").status_code == 201

    def test_override_by_two_release_managers(self, decision_user, version_gated):
        version, _ = version_gated("fail")
        first, second = as_client(decision_user()), as_client(decision_user())
        request = first.post(
            URL, {"version": version.ref, "action": "override_request", "reason": "flaky"}, format="json"
        )
        assert request.status_code == 201, request.content
        confirm = {
            "version": version.ref,
            "action": "override_confirm",
            "reason": "ok",
            "confirms": request.json()["id"],
        }
        assert assert_error(first.post(URL, confirm, format="json"), 403, "decided_by")["code"] == (
            "second_release_manager_required"
        )
        response = second.post(URL, confirm, format="json")
        assert response.status_code == 201 and response.json()["confirms"] == request.json()["id"]
        assert first.get(request.json()["url"]).json()["confirmation"] == response.json()["id"]
        assert ModelVersion.objects.get(pk=version.pk).status == "approved"

    def test_stale_override_request(self, decision_user, version_gated, gate_run_finished):
        version, _ = version_gated("fail")
        request = decision_record(
            version=version, action="override_request", reason="r", actor=decision_user()
        )
        gate_run_finished(version, "fail")
        response = as_client(decision_user()).post(
            URL,
            {"version": version.ref, "action": "override_confirm", "reason": "ok", "confirms": request.pk},
            format="json",
        )
        assert assert_error(response, 409, "confirms")["code"] == "stale_override_request"

    def test_reject(self, manager, version_gated):
        version, _ = version_gated("fail")
        response = manager.post(
            URL, {"version": version.ref, "action": "reject", "reason": "no"}, format="json"
        )
        assert response.status_code == 201
        assert ModelVersion.objects.get(pk=version.pk).status == "rejected"
        assert AuditLog.objects.filter(action="decision.reject", reason="no").exists()

    def test_list_filters_and_detail(self, decision_user, version_gated, manager):
        one, _ = version_gated("pass")
        two, _ = version_gated("fail")
        approval = decision_record(version=one, action="approve", reason="a", actor=decision_user())
        rejection = decision_record(version=two, action="reject", reason="b", actor=decision_user())
        listed = manager.get(URL).json()["results"]
        assert [d["id"] for d in listed] == [rejection.pk, approval.pk]
        assert [d["id"] for d in manager.get(f"{URL}?version={one.ref}").json()["results"]] == [approval.pk]
        assert [d["id"] for d in manager.get(f"{URL}?action=reject").json()["results"]] == [rejection.pk]
        assert_error(manager.get(f"{URL}?action=bless"), 400, "action")
        assert manager.get(f"{URL}{approval.pk}/").json()["reason"] == "a"
        assert_error(manager.get(f"{URL}99999/"), 404)


class TestImmutable:
    @pytest.mark.parametrize("role", ["release_manager", "viewer"])
    @pytest.mark.parametrize("method", ["put", "patch", "delete"])
    def test_put_patch_delete_answer_405(self, decision_user, version_gated, role, method):
        version, _ = version_gated("pass")
        decision = decision_record(version=version, action="approve", reason="ok", actor=decision_user())
        client = as_client(decision_user(role))
        for url in (URL, f"{URL}{decision.pk}/"):
            response = getattr(client, method)(url, {"reason": "edited"}, format="json")
            assert assert_error(response, 405)["code"] == "method_not_allowed"
        assert Decision.objects.get().reason == "ok"

    def test_the_admin_shows_but_never_changes_a_decision(self, admin_client, decision_user, version_gated):
        version, _ = version_gated("pass")
        decision = decision_record(
            version=version, action="approve", reason="fine by me", actor=decision_user()
        )
        base = "/admin/gate/decision/"
        listing = admin_client.get(base)
        assert listing.status_code == 200 and "fam:v1" in listing.content.decode()
        page = admin_client.get(f"{base}{decision.pk}/change/")
        assert page.status_code == 200 and "fine by me" in page.content.decode()
        assert 'name="_save"' not in page.content.decode()
        assert admin_client.post(f"{base}{decision.pk}/change/", {"reason": "edited"}).status_code == 403
        assert admin_client.post(f"{base}{decision.pk}/delete/", {"post": "yes"}).status_code == 403
        assert admin_client.get(f"{base}add/").status_code == 403
        assert Decision.objects.get().reason == "fine by me"


class TestTransitionApi:
    @pytest.mark.parametrize("target", ["approved", "rejected"])
    def test_approval_and_rejection_go_through_decisions(self, manager, version_gated, target):
        version, _ = version_gated("pass")
        response = manager.post(
            f"/api/v1/model-versions/{version.ref}/transition/",
            {"status": target, "reason": "r"},
            format="json",
        )
        error = assert_error(response, 400, "status")
        assert "/api/v1/decisions/" in error["fields"]["status"][0]
        assert ModelVersion.objects.get(pk=version.pk).status == "gate_passed"


class TestVersionPage:
    def test_release_manager_decides_on_the_page(self, decision_user, version_gated):
        version, run = version_gated("pass")
        client = Client(enforce_csrf_checks=True)
        client.force_login(decision_user())
        page = client.get(f"/versions/{version.ref}/")
        assert page.status_code == 200 and "Record decision" in page.content.decode()
        url = f"/versions/{version.ref}/decide/"
        form = {"action": "approve", "reason": "fine", "gate_run": run.pk}
        assert client.post(url, form).status_code == 403  # no CSRF token
        token = page.context["csrf_token"]
        response = client.post(url, {**form, "csrfmiddlewaretoken": str(token)}, follow=True)
        assert response.status_code == 200 and "Recorded: approve" in response.content.decode()
        assert Decision.objects.get().reason == "fine"
        assert ModelVersion.objects.get(pk=version.pk).status == "approved"

    def test_refusals_are_shown_not_raised(self, decision_user, version_gated):
        version, _ = version_gated("fail")
        client = Client()
        client.force_login(decision_user())
        url = f"/versions/{version.ref}/decide/"
        for form, shown in (
            ({"action": "approve", "reason": ""}, "needs a reason"),
            ({"action": "approve", "reason": "r"}, "override_request"),
            ({"action": "override_confirm", "reason": "r", "confirms": "nope"}, "No decision"),
            # Unicode digits are str.isdigit() but no primary key.
            ({"action": "override_confirm", "reason": "r", "confirms": "²"}, "No decision"),
            ({"action": "approve", "reason": "r", "gate_run": "٣"}, "No gate run"),
        ):
            response = client.post(url, form, follow=True)
            assert response.status_code == 200 and shown in response.content.decode()
        assert not Decision.objects.exists()

    def test_second_release_manager_sees_the_confirm_button(self, decision_user, version_gated):
        version, _ = version_gated("fail")
        requester = decision_user()
        request = decision_record(version=version, action="override_request", reason="flaky", actor=requester)
        own, other, viewer = Client(), Client(), Client()
        own.force_login(requester)
        other.force_login(decision_user())
        viewer.force_login(decision_user("viewer"))
        url = f"/versions/{version.ref}/"
        assert "Confirm override" not in own.get(url).content.decode()
        assert "Confirm override" in other.get(url).content.decode()
        page = viewer.get(url).content.decode()
        assert "flaky" in page and "Record decision" not in page and "Confirm override" not in page
        response = viewer.post(
            f"{url}decide/", {"action": "override_confirm", "reason": "r", "confirms": request.pk}
        )
        assert response.status_code == 403 and not Decision.objects.filter(action="override_confirm").exists()


def test_the_policy_admin_refuses_what_a_run_would_refuse(decision_user):
    from django.contrib.auth import get_user_model

    from gate.models import GatePolicy

    client = Client()
    client.force_login(get_user_model().objects.create_superuser(username="root", password="pw"))
    url = "/admin/gate/gatepolicy/add/"
    bad = client.post(url, {"name": "fam", "description": "", "config": '{"follow_up_max": 2}'})
    assert bad.status_code == 200 and "follow_up_max: must be between 0.0 and 1.0" in bad.content.decode()
    assert client.post(url, {"name": "fam", "description": "", "config": "[1]"}).status_code == 200
    assert not GatePolicy.objects.filter(name="fam").exists()
    good = client.post(url, {"name": "fam", "description": "", "config": '{"follow_up_max": 0.2}'})
    # Saved naming the layers it requires (every layer installed now but the opt-in ones), whoever saves it.
    stored = GatePolicy.objects.get(name="fam").config
    assert good.status_code == 302 and stored == {
        "follow_up_max": 0.2,
        "required_layers": list(default_layer_names()),
    }

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from evalhub.services.tokens import api_token_create, user_role_grant


@pytest.fixture
def make_client(db):
    """An API client authenticated with a real token of a user holding `role` (or none)."""

    def make(role: str | None = "ci", username: str | None = None) -> APIClient:
        user = get_user_model().objects.create_user(username=username or f"user-{role}-{make.count}")
        make.count += 1
        if role:
            user_role_grant(user=user, role=role)
        _, key = api_token_create(user=user)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        client.user = user
        return client

    make.count = 0
    return make


@pytest.fixture
def ci_client(make_client):
    return make_client("ci")

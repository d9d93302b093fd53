import json

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from registry.models import ApiToken, EvalSuite

pytestmark = pytest.mark.django_db


def test_create_api_token_prints_a_working_key_once(capsys, django_user_model):
    call_command("create_api_token", "robot", "--create-user", "--role", "ci", "--name", "jenkins")
    key = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(user__username="robot")
    assert token.key_hash != key and key.startswith(token.key_prefix)  # only the hash is stored
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/model-versions/").status_code == 200
    with pytest.raises(CommandError, match="No user"):
        call_command("create_api_token", "ghost")


def test_import_suite_names_line_and_field(tmp_path, capsys):
    good = tmp_path / "suite.jsonl"
    good.write_text("\n".join(json.dumps({"input": f"q{i}", "label": "a"}) for i in range(3)))
    call_command("import_suite", str(good), "--name", "golden")
    assert "imported golden@1: 3 items" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "q", "label": "a"}\n{"input": "q2", "lable": "a"}\n')
    with pytest.raises(CommandError, match=r"line 2\.lable"):
        call_command("import_suite", str(bad), "--name", "golden")
    assert EvalSuite.objects.count() == 1

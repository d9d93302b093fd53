"""Outgoing webhooks: HMAC-signed JSON, delivered to a real HTTP server; sent after commit."""

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from registry.services.webhooks import webhook_body, webhook_deliver, webhook_send, webhook_signature


def test_signature_is_hmac_sha256_of_the_raw_body():
    # hmac.new(b"secret", b'{"a": 1}', hashlib.sha256).hexdigest(), computed separately.
    assert webhook_signature(body=b'{"a": 1}', secret="secret") == (
        "sha256=9efa14a18410a57a432fbf0ce38d4bc33339036a64e57b8c86da0bb1e122d972"
    )


@pytest.fixture
def receiver():
    received = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()
    server.server_close()


def test_delivered_to_a_real_server_with_a_signature_it_can_check(receiver, settings):
    url, received = receiver
    settings.EVALHUB_WEBHOOK_URL, settings.EVALHUB_WEBHOOK_SECRET = url, "s3cret"
    body = webhook_body(event="experiment.rolled_back", payload={"experiment": "x"}).decode()
    assert webhook_deliver(event="experiment.rolled_back", body=body) == 204
    [(headers, raw)] = received
    assert headers["X-EvalHub-Event"] == "experiment.rolled_back"
    mac = hmac.new(b"s3cret", raw, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-EvalHub-Signature"], f"sha256={mac}")
    assert json.loads(raw)["data"] == {"experiment": "x"}


@pytest.mark.django_db
def test_sent_only_after_commit_and_only_with_a_url(settings, django_capture_on_commit_callbacks):
    settings.EVALHUB_WEBHOOK_URL = ""
    with django_capture_on_commit_callbacks() as callbacks:
        webhook_send(event="e", payload={})
    assert callbacks == []
    settings.EVALHUB_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    with django_capture_on_commit_callbacks() as callbacks:
        webhook_send(event="e", payload={})
    assert len(callbacks) == 1

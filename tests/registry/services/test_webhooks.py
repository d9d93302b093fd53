"""Outgoing webhooks: JSON signed over a timestamp and the body, delivered to a real HTTP server
through the outbound policy; sent after commit; old or forged signatures rejected by the check."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engines.outbound import OutboundRefusedError
from engines.webhooks import webhook_signature, webhook_verify
from registry.services.webhooks import WebhookEvent, webhook_body, webhook_deliver, webhook_send

BODY = b'{"a": 1}'


def test_signature_is_hmac_sha256_of_timestamp_dot_body():
    # hmac.new(b"secret", b'1700000000.{"a": 1}', hashlib.sha256).hexdigest(), computed separately.
    assert webhook_signature(body=BODY, timestamp=1_700_000_000, secret="secret") == (
        "sha256=942c6f7e34ef5c448cbbbf79276da392036d59f0bd9fb74ba14eb8e83e2bb6cd"
    )


def test_verify_accepts_a_fresh_signature_and_rejects_old_forged_or_altered_ones():
    sent = 1_700_000_000
    signature = webhook_signature(body=BODY, timestamp=sent, secret="s")
    fresh = {"body": BODY, "timestamp": str(sent), "signature": signature, "secret": "s"}
    assert webhook_verify(**fresh, now=sent + 299)
    assert webhook_verify(**fresh, now=sent - 10)  # the receiver's clock a little behind
    assert not webhook_verify(**fresh, now=sent + 301)  # a replay of an old delivery
    assert webhook_verify(**fresh, now=sent + 3000, tolerance_s=3600)
    assert not webhook_verify(**{**fresh, "secret": "other"}, now=sent)
    assert not webhook_verify(**{**fresh, "body": b'{"a": 2}'}, now=sent)
    # A replayed body with a new timestamp: the signature does not cover it.
    assert not webhook_verify(**{**fresh, "timestamp": str(sent + 1000)}, now=sent + 1000)
    assert not webhook_verify(**{**fresh, "timestamp": "soon"}, now=sent)


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


def test_delivered_to_a_real_server_signed_when_sent(receiver, settings):
    url, received = receiver
    settings.EVALHUB_WEBHOOK_URL, settings.EVALHUB_WEBHOOK_SECRET = url, "s3cret"
    body = webhook_body(event="experiment.rolled_back", payload={"experiment": "x"}).decode()
    time.sleep(1.1)  # queued a while ago: the timestamp is the delivery's, not the body's
    before = time.time()
    assert webhook_deliver(event="experiment.rolled_back", body=body) == 204
    [(headers, raw)] = received
    assert headers["X-EvalHub-Event"] == "experiment.rolled_back"
    assert int(before) <= int(headers["X-EvalHub-Timestamp"]) <= time.time()
    assert webhook_verify(
        body=raw,
        timestamp=headers["X-EvalHub-Timestamp"],
        signature=headers["X-EvalHub-Signature"],
        secret="s3cret",
    )
    assert json.loads(raw)["data"] == {"experiment": "x"}


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/hook", "http://10.0.0.1/hook", "ftp://example.com/hook"]
)
def test_a_refused_webhook_url_is_not_sent(settings, url):
    settings.EVALHUB_WEBHOOK_URL, settings.EVALHUB_WEBHOOK_SECRET = url, "s"
    with pytest.raises(OutboundRefusedError):
        webhook_deliver(event="e", body="{}")


def test_loopback_is_refused_without_the_test_settings_allowance(receiver, settings):
    url, received = receiver
    settings.EVALHUB_WEBHOOK_URL, settings.EVALHUB_WEBHOOK_SECRET = url, "s"
    settings.EVALHUB_OUTBOUND_ALLOW_NETWORKS = []
    with pytest.raises(OutboundRefusedError, match="loopback"):
        webhook_deliver(event="e", body="{}")
    assert received == []


@pytest.mark.django_db
def test_sent_only_after_commit_and_only_with_a_url(settings, django_capture_on_commit_callbacks):
    settings.EVALHUB_WEBHOOK_URL = ""
    with django_capture_on_commit_callbacks() as callbacks:
        webhook_send(event=WebhookEvent.GATE_RUN_FINISHED, payload={})
    assert callbacks == []
    settings.EVALHUB_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    with django_capture_on_commit_callbacks() as callbacks:
        webhook_send(event=WebhookEvent.GATE_RUN_FINISHED, payload={})
    assert len(callbacks) == 1
    with pytest.raises(TypeError, match="WebhookEvent"):
        webhook_send(event="gate_run.finished", payload={})  # type: ignore[arg-type]

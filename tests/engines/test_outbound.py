"""The outbound guard: which addresses are refused, and the check at connect time (a fake
resolver stands in for DNS: a name that was public when registered and is private now)."""

import datetime
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from engines.outbound import OutboundPolicy, OutboundRefusedError, outbound_client

STRICT = OutboundPolicy()

REFUSED = [
    "169.254.169.254",  # cloud metadata (AWS, GCP, Azure)
    "169.254.170.2",
    "fd00:ec2::254",  # AWS metadata over IPv6
    "100.100.100.200",  # Alibaba metadata
    "::ffff:169.254.169.254",  # IPv4-mapped IPv6
    "::ffff:10.0.0.1",
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "100.64.0.1",
    "127.0.0.1",
    "127.5.5.5",
    "::1",
    "0.0.0.0",
    "::",
    "224.0.0.1",
    "ff02::1",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.0.8",
    "198.18.0.1",
    "fc00::1",
    "fe80::1",
    "fe80::1%1",
    "fec0::1",
    "2001:db8::1",
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", REFUSED)
def test_non_public_addresses_are_refused(address):
    assert STRICT.address_refusal(address) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address):
    assert STRICT.address_refusal(address) is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/v1", "metadata"),
        ("http://10.0.0.1/", "private"),
        ("http://[::ffff:169.254.169.254]/v1", "metadata"),
        ("http://[fd00:ec2::254]/latest/meta-data/", "metadata"),
        ("ftp://models.example.com/v1", "http and https"),
        ("file:///etc/passwd", "http and https"),
        ("http:///v1", "no host"),
        ("http://2852039166/v1", "metadata"),  # 169.254.169.254 written as one number
        ("http://0x7f.1/v1", "loopback"),  # 127.0.0.1 in inet_aton's shorthand
    ],
)
def test_urls_refused(url, reason):
    with pytest.raises(OutboundRefusedError, match=reason):
        STRICT.url_check(url)


def test_a_name_is_judged_by_every_address_it_resolves_to():
    answers = {"mixed.example": ["93.184.216.34", "10.0.0.1"], "public.example": ["93.184.216.34"]}
    policy = OutboundPolicy(resolve=lambda host: answers[host])
    assert policy.url_check("https://public.example/v1").host == "public.example"
    with pytest.raises(OutboundRefusedError, match=r"mixed\.example resolves to 10\.0\.0\.1"):
        policy.url_check("https://mixed.example/v1")


def test_a_name_that_does_not_resolve_now_passes_the_url_check_and_fails_to_connect():
    def nowhere(host):
        raise OSError("no such host")

    policy = OutboundPolicy(resolve=nowhere)
    policy.url_check("http://later.example/v1")
    with outbound_client(policy=policy, timeout=2) as client, pytest.raises(httpx.ConnectError):
        client.get("http://later.example/v1")


def test_the_operator_allows_hosts_and_networks():
    answers = {"models.internal": ["10.1.2.3"], "other.internal": ["10.9.9.9"]}
    policy = OutboundPolicy.parse(
        allow_hosts=["Models.Internal."], allow_networks=["10.20.0.0/16", "::1"], resolve=answers.__getitem__
    )
    assert policy.host_addresses("models.internal") == ["10.1.2.3"]
    assert policy.address_refusal("10.20.3.4") is None and policy.address_refusal("::1") is None
    assert policy.address_refusal("10.21.0.1") == "private address"
    with pytest.raises(OutboundRefusedError):
        policy.host_addresses("other.internal")
    with pytest.raises(ValueError, match="not an IP network"):
        OutboundPolicy.parse(allow_networks=["10.0.0.0/33"])


@pytest.fixture
def echo_server():
    """An HTTP server on loopback answering with the Host header it got."""
    hits = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            hits.append(self.headers["Host"])
            payload = self.headers["Host"].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_port, hits
    server.shutdown()
    server.server_close()


def test_connects_to_the_checked_address_keeping_the_host_name(echo_server):
    port, hits = echo_server
    policy = OutboundPolicy.parse(allow_networks=["127.0.0.0/8"], resolve=lambda host: ["127.0.0.1"])
    with outbound_client(policy=policy, timeout=5) as client:
        response = client.get(f"http://models.example:{port}/v1/models")
    assert response.status_code == 200 and hits == [f"models.example:{port}"]


def test_dns_rebinding_is_refused_at_connect_time(echo_server):
    """Public when checked, private when connecting: the connection is refused, nothing is sent."""
    port, hits = echo_server
    answers = {"models.example": ["93.184.216.34"]}
    policy = OutboundPolicy(resolve=lambda host: answers[host])
    url = f"http://models.example:{port}/v1/models"
    policy.url_check(url)  # what registration does: accepted as public
    answers["models.example"] = ["10.0.0.1"]
    with (
        outbound_client(policy=policy, timeout=5) as client,
        pytest.raises(OutboundRefusedError, match=r"10\.0\.0\.1"),
    ):
        client.get(url)
    answers["models.example"] = ["127.0.0.1"]  # where the server really is: refused as well
    with (
        outbound_client(policy=policy, timeout=5) as client,
        pytest.raises(OutboundRefusedError, match="loopback"),
    ):
        client.get(url)
    assert hits == []


def test_literal_addresses_and_mapped_ipv6_are_refused_at_connect_time(echo_server):
    port, hits = echo_server
    with outbound_client(policy=STRICT, timeout=5) as client:
        for host in ("127.0.0.1", "[::ffff:127.0.0.1]", "localhost"):
            with pytest.raises(OutboundRefusedError):
                client.get(f"http://{host}:{port}/")
    assert hits == []


def _self_signed(host: str, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


def test_tls_keeps_the_server_name_and_verifies_the_certificate_for_it(echo_server, tmp_path):
    """Connected by IP, TLS still sends the host name (SNI) and checks the certificate against it."""
    cert_file, key_file = _self_signed("models.example", tmp_path)
    server_names = []
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_file, key_file)
    server_context.sni_callback = lambda sock, name, context: server_names.append(name)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        trust = ssl.create_default_context(cafile=str(cert_file))
        policy = OutboundPolicy.parse(allow_networks=["127.0.0.0/8"], resolve=lambda host: ["127.0.0.1"])
        with outbound_client(policy=policy, timeout=5, verify=trust) as client:
            assert client.get(f"https://models.example:{server.server_port}/").status_code == 204
            with pytest.raises(httpx.ConnectError, match="certificate"):
                client.get(f"https://other.example:{server.server_port}/")
        assert server_names[0] == "models.example"
    finally:
        server.shutdown()
        server.server_close()

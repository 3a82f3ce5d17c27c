"""The agent behind a proxy (HTTP_PROXY / NO_PROXY) and a TLS front with a private CA
(ca_bundle, SSL_CERT_FILE), against the real emulator. The proxy and the TLS front are the
small real forwarding server in recorder.py."""

from __future__ import annotations

import datetime
import ipaddress
import ssl

import pytest
from agent_harness import WAIT, wait_for
from recorder import Recorder

x509 = pytest.importorskip("cryptography.x509", reason="cryptography builds the test CA")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402


def run_one_job(emu, agent):
    job = emu.create_job(steps=[{"name": "s", "run": "echo through"}])
    [done] = emu.wait_jobs([job], timeout=WAIT)
    assert done["status"] == "succeeded" and done["steps"][0]["logs"] == ["through"]
    return done


def test_http_proxy_is_used_and_no_proxy_bypasses_it(emu, make_agent):
    with Recorder(("127.0.0.1", emu.port)) as proxy:
        env = {"HTTP_PROXY": proxy.url}
        agent = make_agent("proxied").start(env=env)
        run_one_job(emu, agent)
        seen = [f"{x.method} {x.target}" for x in proxy.recorded()]
        assert any(s.startswith(f"GET {emu.url}/api/deployments/poll") for s in seen)
        assert any("/heartbeat" in s for s in seen)
        agent.stop()

        before = len(proxy.recorded())
        direct = make_agent("direct").start(env={**env, "NO_PROXY": "127.0.0.1"})
        run_one_job(emu, direct)
        assert len(proxy.recorded()) == before


def make_ca(directory):
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "wfa test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))
    (directory / "server.pem").write_bytes(cert.public_bytes(pem))
    (directory / "server.key").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return directory / "ca.pem"


@pytest.fixture
def tls_front(emu, tmp_path):
    ca = make_ca(tmp_path)
    front = Recorder(("127.0.0.1", emu.port))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "server.pem", tmp_path / "server.key")
    front.socket = ctx.wrap_socket(front.socket, server_side=True)
    with front:
        yield f"https://127.0.0.1:{front.port}", ca


def test_ca_bundle_trusts_a_private_ca(emu, make_agent, tls_front):
    url, ca = tls_front
    agent = make_agent("tls", service_url=url, ca_bundle=str(ca)).start()
    run_one_job(emu, agent)


def test_ssl_cert_file_trusts_a_private_ca(emu, make_agent, tls_front):
    url, ca = tls_front
    agent = make_agent("tls-env", service_url=url).start(env={"SSL_CERT_FILE": str(ca)})
    run_one_job(emu, agent)


def test_an_untrusted_certificate_is_refused(emu, make_agent, tls_front):
    url, _ = tls_front
    agent = make_agent("untrusted", service_url=url).start()
    job = emu.create_job(steps=[{"name": "s", "run": "true"}])
    wait_for(lambda: "CERTIFICATE_VERIFY_FAILED" in agent.stderr, what="a TLS verify error")
    assert emu.job(job)["status"] == "not-started"


def test_an_unreadable_ca_bundle_is_a_config_error(make_agent, tmp_path):
    agent = make_agent("bad-ca", ca_bundle=str(tmp_path / "missing.pem"))
    assert agent.run_to_exit() == 2
    assert f"ca_bundle: cannot load {tmp_path / 'missing.pem'}" in agent.stderr

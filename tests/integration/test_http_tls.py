"""The HTTP box's TLS: https is verified against the system's trust store, and a process
that only speaks plain http (every test hub, `views pull` from an http hub) never reads the
CA bundle (~30 ms of CPU each time: aiohttp reads it twice when imported)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# Run in a fresh process: records each CA bundle load (with the context's verify mode) from
# the moment memsync's HTTP box is imported, then makes a plain http request, then an https
# one, each to a loopback server of its own (the https one with the certificate given).
SCRIPT = """
import asyncio, http.server, os, ssl, sys, threading

loads = []

def _recording(name):
    load = getattr(ssl.SSLContext, name)

    def recorded(self, *args, **kwargs):
        loads.append(f"{name} {int(self.verify_mode)}")
        return load(self, *args, **kwargs)

    setattr(ssl.SSLContext, name, recorded)

for _name in ("set_default_verify_paths", "load_default_certs"):
    _recording(_name)

from memsync.transports.http import HttpClient, HttpError

class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass

def server(tls):
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd

async def get(url):
    async with HttpClient() as client:
        deadline = asyncio.get_running_loop().time() + 20
        try:
            got = await client.get(url, dest=None, token=None, etag=None, max_bytes=64,
                                   deadline=deadline)
        except HttpError as exc:
            return f"refused {exc}"
        return f"got {got.body!r}"

plain, secure = server(False), server(True)
print("http", asyncio.run(get(f"http://127.0.0.1:{plain.server_port}/x")), loads[:])
loads.clear()
for _ in range(2):
    print("https", asyncio.run(get(f"https://127.0.0.1:{secure.server_port}/x")), loads[:])
    loads.clear()
plain.shutdown()
secure.shutdown()
"""


def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "memsync test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def run(tmp_path: Path, trusted: Path | None) -> list[str]:
    cert, key = certificate(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    if trusted is not None:
        env["SSL_CERT_FILE"] = str(cert if trusted == Path("self") else trusted)
        env["SSL_CERT_DIR"] = str(tmp_path / "nothing")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(cert), str(key)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_plain_http_reads_no_ca_bundle_and_https_verifies_with_the_system_trust_store(
    tmp_path: Path,
) -> None:
    """No CA bundle is read by importing the box or by a plain http request; the first
    https request reads the system's store once, into a context that verifies (mode 2),
    and a server whose certificate that store does not hold is refused."""
    plain, first, second = run(tmp_path, None)
    assert plain == "http got b'ok' []"
    assert first.startswith("https refused ")
    assert "(ClientConnectorCertificateError)" in first
    assert first.endswith("['load_default_certs 2', 'set_default_verify_paths 2']")
    assert second.endswith(" []")  # built once per process
    assert second.startswith("https refused ")


def test_https_to_a_server_the_trust_store_holds_is_accepted(tmp_path: Path) -> None:
    """The same context accepts a peer whose certificate the system's store (here
    `SSL_CERT_FILE`, which OpenSSL's default paths honour) holds: it is that store."""
    plain, first, second = run(tmp_path, Path("self"))
    assert plain == "http got b'ok' []"
    assert first.startswith("https got b'ok'")
    assert second.startswith("https got b'ok'")

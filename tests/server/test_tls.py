"""HTTPS on the front (--certfile, --keyfile): requests, bodies, keep-alive, pipelining and
WebSockets over TLS; what the app is told; plain HTTP and broken handshakes on the HTTPS port;
bad certificate files; a renewed certificate read on SIGHUP; client certificates (--ca-certs).
Certificates come from trustme, a throwaway CA per test module (and one per test for clients)."""

import hashlib
import json
import signal
import socket
import ssl
import subprocess
import urllib.parse

import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from websockets.sync.client import connect as websocket_connect

from conftest import APPS, headway_binary, read_response, request_bytes, send_request, wait_until
from netclient import proxy_v1


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


def issue(ca, directory, name="server"):
    """A certificate for 127.0.0.1 and localhost signed by `ca`, and its key, as PEM files."""
    cert = ca.issue_cert("127.0.0.1", "localhost")
    chain, key = directory / f"{name}.crt", directory / f"{name}.key"
    cert.cert_chain_pems[0].write_to_path(str(chain))
    for pem in cert.cert_chain_pems[1:]:
        pem.write_to_path(str(chain), append=True)
    cert.private_key_pem.write_to_path(str(key))
    return chain, key


@pytest.fixture
def files(ca, tmp_path):
    return issue(ca, tmp_path)


def client_context(ca, alpn=("http/1.1",), identity=None):
    """A client that trusts `ca`, showing `identity` (a trustme certificate) if given."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    context.set_alpn_protocols(list(alpn))
    if identity is not None:
        identity.configure_cert(context)
    return context


def tls_connect(server, context, before=b""):
    """A TLS connection to the server; `before`: bytes sent in the clear first (a PROXY header)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(before)
    return context.wrap_socket(sock, server_hostname="localhost")


def https(server, *args, certfile, keyfile):
    return server("--certfile", str(certfile), "--keyfile", str(keyfile), *args)


def test_requests_bodies_and_pipelining_over_tls_and_the_app_hears_https(serve, ca, files):
    # 127.0.0.1 is not trusted, so a client's own claim of http must not reach the app.
    server = https(serve, "-w", "1", "-t", "2", "--forwarded-allow-ips", "198.51.100.1", "probe:app",
                   certfile=files[0], keyfile=files[1])
    # A client that offers only HTTP/1.1 gets it (one offering h2 gets HTTP/2: test_http2.py).
    with tls_connect(server, client_context(ca)) as sock:
        assert sock.selected_alpn_protocol() == "http/1.1"
        stream = sock.makefile("rb")
        send_request(sock, "GET", "/echo", headers={"X-Forwarded-Proto": "http"})
        status, _, body = read_response(stream)
        seen = json.loads(body)
        assert (status, seen["url_scheme"], seen["headers"]["HTTP_X_FORWARDED_PROTO"]) == (200, "https", "https")
        assert seen["remote_addr"] == "127.0.0.1"
        # A body of a megabyte up, three down, on the same connection.
        upload = bytes(range(256)) * 4096
        send_request(sock, "POST", "/digest", body=upload)
        status, _, body = read_response(stream)
        digest = {"length": len(upload), "sha256": hashlib.sha256(upload).hexdigest()}
        assert (status, json.loads(body)) == (200, digest)
        send_request(sock, "GET", "/bytes?n=3000000")
        status, _, body = read_response(stream)
        assert (status, len(body), set(body)) == (200, 3_000_000, {ord("b")})
        # Three requests in one write: three answers, in order.
        sock.sendall(b"".join(request_bytes("GET", f"/echo?i={i}") for i in range(3)))
        answers = [json.loads(read_response(stream)[2])["query"] for _ in range(3)]
        assert answers == ["i=0", "i=1", "i=2"]


def test_plain_http_on_the_https_port_gets_400_and_https_goes_on(serve, ca, files):
    server = https(serve, "-w", "1", "probe:app", certfile=files[0], keyfile=files[1])
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        send_request(sock, "GET", "/echo")
        status, headers, body = read_response(sock.makefile("rb"))
    assert (status, headers["connection"], body) == (400, "close", b"this port speaks HTTPS, not plain HTTP\n")
    with tls_connect(server, client_context(ca)) as sock:
        send_request(sock, "GET", "/bytes?n=5", close=True)
        assert read_response(sock.makefile("rb"))[::2] == (200, b"bbbbb")


def closed_by_server(sock):
    """Whether the server closed the connection (rather than leaving it open)."""
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True


def test_broken_and_unfinished_handshakes_are_closed_and_nothing_else_is_disturbed(serve, ca, files):
    server = https(serve, "-w", "1", "--header-timeout", "1", "probe:app", certfile=files[0], keyfile=files[1])
    context = client_context(ca)
    steady = tls_connect(server, context)
    steady_stream = steady.makefile("rb")
    send_request(steady, "GET", "/bytes?n=1")
    assert read_response(steady_stream)[0] == 200
    # A handshake record that is not one, and a handshake that stops after three bytes.
    garbage = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    garbage.sendall(b"\x16\x03\x01\x00\x05hello" + b"\x00" * 64)
    silent = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    silent.sendall(b"\x16\x03\x01")
    # A client that does not trust the certificate gives up, and the server goes on.
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_connect(server, ssl.create_default_context())
    assert closed_by_server(garbage)
    assert closed_by_server(silent), "the header timeout covers the handshake"
    send_request(steady, "GET", "/bytes?n=2")
    assert read_response(steady_stream)[::2] == (200, b"bb")
    for sock in (garbage, silent, steady):
        sock.close()
    # Each of the three is counted, for whoever watches for a certificate clients refuse.
    wait_until(lambda: server.stats()["connections"]["handshakes_failed"] == 3, message="three failed handshakes")
    assert "headway_handshakes_failed_total 3" in server.metrics()
    assert "accepted, 3 failed their PROXY header or TLS handshake" in server.stats_command()


def test_the_proxy_protocol_header_comes_before_the_handshake(serve, ca, files):
    server = https(serve, "-w", "1", "--proxy-protocol", "probe:app", certfile=files[0], keyfile=files[1])
    with tls_connect(server, client_context(ca), before=proxy_v1("203.0.113.9")) as sock:
        send_request(sock, "GET", "/echo", close=True)
        seen = json.loads(read_response(sock.makefile("rb"))[2])
    assert (seen["remote_addr"], seen["url_scheme"]) == ("203.0.113.9", "https")


def test_a_websocket_over_tls(serve, ca, files):
    server = https(serve, "-w", "1", "ws_echo:app", certfile=files[0], keyfile=files[1])
    with websocket_connect(f"wss://localhost:{server.port}/echo", ssl=client_context(ca)) as ws:
        for message in ("one", "two" * 10_000):
            ws.send(message)
            assert ws.recv(timeout=30) == message


def test_sighup_reads_a_renewed_certificate_and_open_connections_keep_theirs(serve, ca, tmp_path):
    cert, key = issue(ca, tmp_path)
    server = https(serve, "-w", "1", "probe:app", certfile=cert, keyfile=key)
    old = tls_connect(server, client_context(ca))
    old_stream = old.makefile("rb")
    send_request(old, "GET", "/bytes?n=1")
    assert read_response(old_stream)[0] == 200

    renewed_by = trustme.CA()
    renewed_cert, renewed_key = issue(renewed_by, tmp_path, "renewed")
    cert.write_bytes(renewed_cert.read_bytes())
    key.write_bytes(renewed_key.read_bytes())
    server.signal(signal.SIGHUP)
    wait_until(lambda: b"TLS: read" in server.log(), message="the certificate to be read again")
    with tls_connect(server, client_context(renewed_by)) as sock:
        send_request(sock, "GET", "/bytes?n=3", close=True)
        assert read_response(sock.makefile("rb"))[::2] == (200, b"bbb")
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_connect(server, client_context(ca))
    send_request(old, "GET", "/bytes?n=2")
    assert read_response(old_stream)[::2] == (200, b"bb"), "an open connection keeps its session"
    old.close()

    # A renewal that does not load leaves the certificate in use.
    key.write_text("not a key\n")
    server.signal(signal.SIGHUP)
    wait_until(lambda: b"TLS: kept the certificate in use" in server.log(), message="the failed renewal")
    with tls_connect(server, client_context(renewed_by)) as sock:
        send_request(sock, "GET", "/bytes?n=1", close=True)
        assert read_response(sock.makefile("rb"))[0] == 200


def refused_at_start(cases):
    """Each {flags: message}: `headway serve FLAGS` stops with the message, before any worker starts."""
    for flags, message in cases.items():
        done = subprocess.run([headway_binary(), "serve", "-b", "127.0.0.1:0", *flags, "probe:app"], cwd=APPS,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and message in done.stderr, (flags, done.stderr)
        assert "starting" not in done.stderr, "checked before any worker starts"


def test_a_port_in_use_is_named_https(serve, ca, files):
    server = https(serve, "-w", "1", "probe:app", certfile=files[0], keyfile=files[1])
    refused_at_start({("--certfile", str(files[0]), "--keyfile", str(files[1]), "-b", f"127.0.0.1:{server.port}"):
                      f"cannot listen on https://127.0.0.1:{server.port}: Address already in use"})


def test_bad_certificate_files_stop_the_start_with_a_message(ca, files, tmp_path):
    cert, key = files
    other_cert, other_key = issue(ca, tmp_path, "other")
    not_pem = tmp_path / "empty.pem"
    not_pem.write_text("nothing here\n")
    cases = {
        ("--certfile", str(cert)): "--certfile and --keyfile go together",
        ("--certfile", str(tmp_path / "missing.pem"), "--keyfile", str(key)): "cannot read --certfile",
        ("--certfile", str(not_pem), "--keyfile", str(key)): "holds no certificate",
        ("--certfile", str(cert), "--keyfile", str(not_pem)): "cannot read a private key from --keyfile",
        ("--certfile", str(cert), "--keyfile", str(other_key)): "does not fit --certfile",
    }
    refused_at_start(cases)
    assert other_cert.exists()


def locked(key, password, out, form=serialization.PrivateFormat.PKCS8):
    """`key` encrypted with `password` in `out`: as PKCS#8 (`ENCRYPTED PRIVATE KEY`, what OpenSSL 3
    writes), or with `TraditionalOpenSSL` the way OpenSSL 1 did (`Proc-Type: 4,ENCRYPTED` headers)."""
    plain = serialization.load_pem_private_key(key.read_bytes(), password=None)
    encryption = serialization.BestAvailableEncryption(password)
    out.write_bytes(plain.private_bytes(serialization.Encoding.PEM, form, encryption))
    return out


def test_an_encrypted_key_opens_with_its_password_which_is_never_shown(serve, ca, files, tmp_path):
    cert, key = files
    key_file = locked(key, b"s3cret pass", tmp_path / "locked.key")
    assert key_file.read_text().startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    old = locked(key, b"s3cret pass", tmp_path / "old.key", serialization.PrivateFormat.TraditionalOpenSSL)
    assert b"Proc-Type: 4,ENCRYPTED" in old.read_bytes()
    https_flags = ("--certfile", str(cert), "--keyfile", str(key_file))
    # From the environment, as --help advises, and --print-config shows that it is set, not what.
    server = serve("-w", "1", *https_flags, "probe:app", env={"HEADWAY_KEYFILE_PASSWORD": "s3cret pass"})
    with tls_connect(server, client_context(ca)) as sock:
        send_request(sock, "GET", "/bytes?n=2", close=True)
        assert read_response(sock.makefile("rb"))[::2] == (200, b"bb")
    shown = subprocess.run([headway_binary(), "serve", *https_flags, "--keyfile-password", "s3cret pass",
                            "--print-config"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    lines = {line.split("=")[0].strip(): line for line in shown.stdout.splitlines()}
    assert "s3cret" not in shown.stdout and '= "(hidden)"' in lines["keyfile-password"]
    # A password with a key that needs none is no error (as Python's ssl).
    plain = serve("-w", "1", "--certfile", str(cert), "--keyfile", str(key), "--ssl-keyfile-password", "unused",
                  "probe:app")
    assert plain.port
    refused_at_start({
        https_flags: "holds an encrypted key, and no password was given for it",
        (*https_flags, "--keyfile-password", "wrong"): "the password does not open --keyfile",
        ("--keyfile-password", "s3cret pass"): "--keyfile-password needs --keyfile",
        (*https_flags[:3], str(old), "--keyfile-password", "s3cret pass"): "openssl pkcs8 -topk8",
    })


def echo_over(server, context, headers=None):
    """What /echo saw of one request over a new TLS connection."""
    with tls_connect(server, context) as sock:
        send_request(sock, "GET", "/echo", headers=headers or {}, close=True)
        status, _, body = read_response(sock.makefile("rb"))
    assert status == 200
    return json.loads(body)["headers"]


def refused(server, context):
    """Whether the server ends a TLS connection before answering (TLS 1.3 checks the client's
    certificate after the client's side of the handshake is done, so it shows on the first read)."""
    try:
        with tls_connect(server, context) as sock:
            send_request(sock, "GET", "/echo", close=True)
            return sock.recv(1024) == b""
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True


def test_client_certificates_from_ca_certs_are_required_and_the_app_gets_the_one_shown(serve, ca, files, tmp_path):
    clients_ca, strangers_ca = trustme.CA(), trustme.CA()
    ca_file = tmp_path / "clients-ca.pem"
    clients_ca.cert_pem.write_to_path(str(ca_file))
    alice = clients_ca.issue_cert("alice@example.com")
    server = https(serve, "-w", "1", "--ca-certs", str(ca_file), "probe:app", certfile=files[0], keyfile=files[1])
    # A forged field from the client is replaced by what its handshake showed.
    seen = echo_over(server, client_context(ca, identity=alice), {"X-Forwarded-Client-Cert": "Hash=forged"})
    field = seen["HTTP_X_FORWARDED_CLIENT_CERT"]
    der = ssl.PEM_cert_to_DER_cert(alice.cert_chain_pems[0].bytes().decode())
    hash_part, cert_part = field.split(";", 1)
    assert hash_part == "Hash=" + hashlib.sha256(der).hexdigest()
    assert cert_part.startswith('Cert="') and cert_part.endswith('"')
    assert ssl.PEM_cert_to_DER_cert(urllib.parse.unquote(cert_part[6:-1])) == der
    # No certificate, or one from another CA: no request gets through.
    assert refused(server, client_context(ca))
    assert refused(server, client_context(ca, identity=strangers_ca.issue_cert("mallory@example.com")))
    wait_until(lambda: server.stats()["connections"]["handshakes_failed"] == 2, message="two refused handshakes")
    assert server.stats()["responses"] == {"200": 1}


def test_a_refused_client_certificate_is_logged_once_with_why(serve, ca, files, tmp_path):
    clients_ca, strangers_ca = trustme.CA(), trustme.CA()
    ca_file = tmp_path / "clients-ca.pem"
    clients_ca.cert_pem.write_to_path(str(ca_file))
    server = https(serve, "-w", "1", "--ca-certs", str(ca_file), "probe:app", certfile=files[0], keyfile=files[1])
    mallory = strangers_ca.issue_cert("mallory@example.com")
    for _ in range(3):
        assert refused(server, client_context(ca, identity=mallory))
        assert refused(server, client_context(ca))
    wait_until(lambda: server.stats()["connections"]["handshakes_failed"] == 6, message="six refused handshakes")
    warnings = [line for line in server.log().decode().splitlines() if "WARN" in line and "TLS: refused" in line]
    der = ssl.PEM_cert_to_DER_cert(mallory.cert_chain_pems[0].bytes().decode())
    assert len(warnings) == 2, warnings
    assert hashlib.sha256(der).hexdigest() in warnings[0] and "UnknownIssuer" in warnings[0], warnings[0]
    assert "showed no certificate" in warnings[1], warnings[1]


def test_optional_client_certificates_let_clients_without_one_in_and_tell_the_app_so(serve, ca, files, tmp_path):
    ca_file = tmp_path / "clients-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server = https(serve, "-w", "1", "--ssl-ca-certs", str(ca_file), "--ssl-cert-reqs", "1", "probe:app",
                   certfile=files[0], keyfile=files[1])
    without = echo_over(server, client_context(ca), {"X-Forwarded-Client-Cert": "Hash=forged"})
    assert "HTTP_X_FORWARDED_CLIENT_CERT" not in without
    shown = echo_over(server, client_context(ca, identity=ca.issue_cert("bob@example.com")))
    assert shown["HTTP_X_FORWARDED_CLIENT_CERT"].startswith("Hash=")


def test_client_certificate_flags_are_checked_before_anything_starts(files, tmp_path):
    cert, key = files
    not_pem = tmp_path / "empty.pem"
    not_pem.write_text("nothing here\n")
    https_flags = ("--certfile", str(cert), "--keyfile", str(key))
    cases = {
        (*https_flags, "--cert-reqs", "required"): "--cert-reqs needs --ca-certs",
        ("--ca-certs", str(cert)): "--ca-certs needs --certfile and --keyfile",
        (*https_flags, "--ca-certs", str(not_pem)): "holds no certificate",
        (*https_flags, "--ca-certs", str(tmp_path / "missing.pem")): "cannot read --ca-certs",
        (*https_flags, "--ca-certs", str(cert), "--cert-reqs", "0"): "leave out --cert-reqs and --ca-certs",
        (*https_flags, "--ca-certs", str(cert), "--cert-reqs", "sometimes"): "is not required (2) or optional (1)",
    }
    refused_at_start(cases)


def load(*args):
    """`headway load -o json ARGS`: (exit status, the report or None, stderr)."""
    done = subprocess.run([headway_binary(), "load", "-o", "json", *args], capture_output=True, text=True,
                          timeout=120)
    return done.returncode, (json.loads(done.stdout) if done.returncode == 0 else None), done.stderr


def test_headway_load_speaks_https_and_checks_the_certificate(serve, ca, files, tmp_path):
    server = https(serve, "-w", "1", "probe:app", certfile=files[0], keyfile=files[1])
    url = f"https://127.0.0.1:{server.port}/bytes?n=10"
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    status, report, _ = load("-n", "60", "-c", "3", "--cacert", str(ca_file), url)
    assert (status, report["status_codes"], report["errors"]) == (0, {"200": 60}, 0)
    assert not report["settings"]["insecure"]
    assert report["connections_opened"] == 3, "keep-alive over TLS"
    # A certificate nobody vouches for is an error, unless --insecure.
    status, report, stderr = load("-n", "5", "-c", "1", url)
    assert status != 0 and "invalid peer certificate" in stderr, stderr
    status, report, _ = load("-n", "5", "-c", "1", "-k", url)
    assert (status, report["status_codes"], report["settings"]["insecure"]) == (0, {"200": 5}, True)


def test_headway_load_shows_a_client_certificate_to_a_server_that_asks(serve, ca, files, tmp_path):
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server = https(serve, "-w", "1", "--ca-certs", str(ca_file), "probe:app", certfile=files[0], keyfile=files[1])
    url = f"https://127.0.0.1:{server.port}/bytes?n=4"
    client = ca.issue_cert("load@example.com")
    both = tmp_path / "client.pem"  # chain and key in one file, as curl --cert takes them
    client.private_key_and_cert_chain_pem.write_to_path(str(both))
    status, report, stderr = load("-n", "20", "-c", "2", "--cacert", str(ca_file), "--cert", str(both), url)
    assert status == 0, stderr
    assert (report["status_codes"], report["errors"]) == ({"200": 20}, 0)
    # Without one, no request is answered, and the report says why (as hey, errors are counted).
    status, report, stderr = load("-n", "4", "-c", "1", "--cacert", str(ca_file), url)
    assert (status, report["errors"], report["status_codes"]) == (0, 4, {}), stderr
    assert "CertificateRequired" in json.dumps(report["errors_by_kind"])


def test_headway_load_speaks_wss(serve, ca, files):
    server = https(serve, "-w", "1", "ws_echo:app", certfile=files[0], keyfile=files[1])
    status, report, stderr = load("--websocket", "-k", "-n", "40", "-c", "2", f"wss://127.0.0.1:{server.port}/echo")
    assert status == 0, stderr
    assert (report["requests"], report["errors"], report["status_codes"]) == (40, 0, {"101": 2})

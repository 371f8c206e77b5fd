"""headway behind routers, load balancers, systemd and Kubernetes: whose forwarding headers are
believed, the PROXY protocol (hand-made headers and Debian's HAProxy), an app mounted under a
path prefix (--root-path), health and readiness, a
shutdown balancers can follow, HAProxy's agent check, systemd's notify and socket-activation
protocols, the config file and environment, and the log formats.

Every server binds to 127.0.0.1 or a unix socket. A trusted or untrusted peer is made with a
unix socket (always trusted), a PROXY header naming another address, or --forwarded-allow-ips
naming an address other than 127.0.0.1.
"""

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import (
    APPS,
    ECHO_APPS,
    REPO,
    free_port,
    headway_binary,
    missing,
    read_response,
    require,
    send_request,
    wait_until,
)
from netclient import exact_request, exchange, proxy_v1, proxy_v2

ROUTER_SAYS = {"Host": "app.example", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9",
               "X-Forwarded-Host": "app.example", "X-Forwarded-Port": "443",
               "Forwarded": "for=203.0.113.9;proto=https;host=app.example"}


def echo(response):
    status, _, body = response
    assert status == 200, body
    return json.loads(body)


def get_status(url, timeout=10):
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


# Trusted proxies

def test_a_local_router_on_a_unix_socket_is_believed(serve, tmp_path):
    router = tmp_path / "router.sock"
    serve("-w", "1", "-b", f"unix:{router}", "probe:app")
    seen = echo(exchange(router, exact_request("/echo", ROUTER_SAYS)))
    assert (seen["url_scheme"], seen["remote_addr"]) == ("https", "203.0.113.9")
    assert seen["server"] == ["app.example", "443"]
    kept = {name: seen["headers"].get(f"HTTP_{name.upper().replace('-', '_')}") for name in ROUTER_SAYS}
    assert kept == {**ROUTER_SAYS, "Host": "app.example"}


def test_a_spoofed_forwarded_for_from_an_untrusted_peer_never_reaches_the_app(serve):
    server = serve("-w", "1", "--forwarded-allow-ips", "192.0.2.10,10.0.0.0/8", "probe:app")
    seen = echo(exchange(("127.0.0.1", server.port), exact_request("/echo", ROUTER_SAYS)))
    assert (seen["url_scheme"], seen["remote_addr"]) == ("http", "127.0.0.1")
    assert seen["headers"]["HTTP_X_FORWARDED_FOR"] == "127.0.0.1"
    assert seen["headers"]["HTTP_X_FORWARDED_PROTO"] == "http"
    for gone in ("HTTP_X_FORWARDED_HOST", "HTTP_X_FORWARDED_PORT", "HTTP_FORWARDED"):
        assert gone not in seen["headers"]


def test_a_trusted_tcp_peer_keeps_its_claims_and_is_appended(serve):
    server = serve("-w", "1", "probe:app")  # the default trusts 127.0.0.1
    seen = echo(exchange(("127.0.0.1", server.port), exact_request("/echo", ROUTER_SAYS)))
    assert seen["url_scheme"] == "https"
    assert seen["headers"]["HTTP_X_FORWARDED_FOR"] == "203.0.113.9, 127.0.0.1"
    assert seen["remote_addr"] == "203.0.113.9"  # the client the router named


def test_the_client_is_the_last_address_no_trusted_proxy_vouches_for(serve):
    """A CDN (10.0.0.0/8) in front of a local router (127.0.0.1): REMOTE_ADDR is the address the
    CDN received from, not a proxy's and not what the client claimed about itself."""
    server = serve("-w", "1", "--forwarded-allow-ips", "127.0.0.1,10.0.0.0/8", "probe:app")
    chain = {"Host": "a", "X-Forwarded-For": "198.51.100.1, 203.0.113.9, 10.1.2.3"}
    seen = echo(exchange(("127.0.0.1", server.port), exact_request("/echo", chain)))
    assert seen["headers"]["HTTP_X_FORWARDED_FOR"] == "198.51.100.1, 203.0.113.9, 10.1.2.3, 127.0.0.1"
    assert seen["remote_addr"] == "203.0.113.9"
    # Nothing but trusted proxies: the first of them is as far as anyone can tell.
    proxies = {"Host": "a", "X-Forwarded-For": "10.9.9.9"}
    assert echo(exchange(("127.0.0.1", server.port), exact_request("/echo", proxies)))["remote_addr"] == "10.9.9.9"


# What Rack, Werkzeug's ProxyFix, Django, gunicorn and Rails read to learn the client's host,
# scheme, prefix and address, in spellings a CGI-style environ (Puma's, Django's ASGI handler's)
# makes the same as the router's.
CLIENT_CLAIMS = {"X-Forwarded-Ssl": "on", "X-Forwarded-Scheme": "https", "X-Forwarded-Prefix": "/admin",
                 "X-Real-IP": "10.0.0.1", "X-Forwarded-Host": "evil.example", "X_Forwarded_Host": "evil.example",
                 "X_Forwarded_Proto": "https", "X_Forwarded_Port": "8443", "X_Forwarded_For": "10.0.0.1",
                 "X-Forwarded_Ssl": "on", "Client_IP": "10.0.0.1", "Front-End-Https": "on"}


def test_rack_under_puma_takes_neither_host_nor_scheme_from_an_untrusted_client(serve):
    require("puma", "apt-get install puma ruby-rack")
    server = serve("-w", "1", "-t", "2", "--forwarded-allow-ips", "192.0.2.10",
                   "--cmd", f"puma -t 2:2 -b unix://{{socket}} {APPS / 'rack_request.ru'}")
    seen = echo(exchange(("127.0.0.1", server.port), exact_request("/who", {"Host": "app.example", **CLIENT_CLAIMS})))
    assert (seen["host"], seen["ssl"], seen["scheme"], seen["port"]) == ("app.example", False, "http", 80)
    assert seen["ip"] == "127.0.0.1"
    assert sorted(seen["headers"]) == ["HTTP_HOST", "HTTP_VERSION", "HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO",
                                       "HTTP_X_REQUEST_START"]


def test_rack_under_puma_believes_a_router_in_its_own_spelling_only(serve, tmp_path):
    require("puma", "apt-get install puma ruby-rack")
    router = tmp_path / "router.sock"
    serve("-w", "1", "-t", "2", "-b", f"unix:{router}",
          "--cmd", f"puma -t 2:2 -b unix://{{socket}} {APPS / 'rack_request.ru'}")
    says = {"Host": "app.example", "X-Forwarded-Host": "www.example", "X-Forwarded-Proto": "https",
            "X_Forwarded_Host": "evil.example", "X_Forwarded_Port": "8443"}
    seen = echo(exchange(router, exact_request("/who", says)))
    assert (seen["host"], seen["ssl"], seen["port"]) == ("www.example", True, 443)


@pytest.mark.parametrize("interface", ["wsgi", "asgi"])
def test_the_bundled_worker_gets_no_forwarding_field_from_an_untrusted_client(serve, tmp_path, interface):
    # The desync suite's echo apps list the fields as the app got them (ASGI: as sent, underscores
    # and all).
    server = serve("-w", "1", "--interface", interface, "--forwarded-allow-ips", "192.0.2.10",
                   f"echo_{interface}:app", cwd=ECHO_APPS,
                   env={"ECHO_LOG": str(tmp_path / "echo.log")})
    seen = echo(exchange(("127.0.0.1", server.port), exact_request("/who", {"Host": "a", **CLIENT_CLAIMS})))
    names = sorted(name for name, _ in seen["headers"])
    assert names == ["host", "x-forwarded-for", "x-forwarded-proto", "x-request-start"], names


# Every forwarding field the front drops from an untrusted peer (FORWARDING_FIELDS in
# crates/server/src/front/forwarding_fields.rs), and X-Forwarded-* fields by their prefix alone.
FORWARDING_FIELDS = ["Forwarded", "Forwarded-For", "X-Forwarded", "X-Real-IP", "Client-IP", "X-Client-IP",
                     "X-Cluster-Client-IP", "True-Client-IP", "CF-Connecting-IP", "CF-Connecting-IPv6",
                     "Fastly-Client-IP", "Fly-Client-IP", "X-AppEngine-User-IP", "X-Original-Forwarded-For",
                     "X-Envoy-External-Address", "X-Scheme", "X-Url-Scheme", "Front-End-Https",
                     "CloudFront-Forwarded-Proto", "X-Original-URL", "X-Rewrite-URL", "Client-Cert",
                     "Client-Cert-Chain", "X-SSL-Client-Cert"]
X_FORWARDED = ["X-Forwarded-Host", "X-Forwarded-HTTPS", "X-Forwarded-Uri", "X-Forwarded-Path", "X-Forwarded-By",
               "X-Forwarded-Tls-Client-Cert", "X-Forwarded-Ssl", "X-Forwarded-Anything"]


@pytest.mark.parametrize("interface", ["wsgi", "asgi"])
def test_an_untrusted_client_gets_no_field_through_that_a_framework_believes(serve, tmp_path, interface):
    server = serve("-w", "1", "--interface", interface, "--forwarded-allow-ips", "192.0.2.10",
                   f"echo_{interface}:app", cwd=ECHO_APPS, env={"ECHO_LOG": str(tmp_path / "echo.log")})
    claims = {name: "claimed" for name in FORWARDING_FIELDS + X_FORWARDED}
    claims.update({name.replace("-", "_"): "claimed" for name in ("X-Scheme", "CF-Connecting-IP", "X-Forwarded-Uri")})
    seen = echo(exchange(("127.0.0.1", server.port), exact_request("/who", {"Host": "a", **claims})))
    assert sorted(name for name, _ in seen["headers"]) == ["host", "x-forwarded-for", "x-forwarded-proto",
                                                           "x-request-start"]
    assert dict(seen["headers"])["x-forwarded-proto"] == "http"


def test_rfc_7239_alone_gives_the_scheme(serve, tmp_path):
    router = tmp_path / "router.sock"
    serve("-w", "1", "-b", f"unix:{router}", "probe:app")
    headers = {"Host": "app.example", "Forwarded": 'for="[2001:db8::7]";proto=https'}
    assert echo(exchange(router, exact_request("/echo", headers)))["url_scheme"] == "https"


# PROXY protocol

def test_proxy_protocol_headers_name_the_client(serve):
    server = serve("-w", "1", "--proxy-protocol", "--forwarded-allow-ips", "198.51.100.0/24", "probe:app")
    address = ("127.0.0.1", server.port)
    # An untrusted client: its claims are dropped, its address is what the balancer saw.
    for header in (proxy_v1("203.0.113.9"), proxy_v2("203.0.113.9")):
        seen = echo(exchange(address, header + exact_request("/echo", ROUTER_SAYS)))
        assert (seen["remote_addr"], seen["url_scheme"]) == ("203.0.113.9", "http")
        assert seen["headers"]["HTTP_X_FORWARDED_FOR"] == "203.0.113.9"
    seen = echo(exchange(address, proxy_v1("2001:db8::9", "::1") + exact_request("/echo", {"Host": "a"})))
    assert seen["remote_addr"] == "2001:db8::9"
    # A trusted one (a CDN in front of the balancer): its claims are kept.
    seen = echo(exchange(address, proxy_v2("198.51.100.7") + exact_request("/echo", ROUTER_SAYS)))
    assert seen["url_scheme"] == "https"
    assert seen["headers"]["HTTP_X_FORWARDED_FOR"] == "203.0.113.9, 198.51.100.7"
    assert seen["remote_addr"] == "203.0.113.9"
    # A balancer that terminated TLS says so in the header itself (send-proxy-v2-ssl).
    seen = echo(exchange(address, proxy_v2("203.0.113.9", tls=True) + exact_request("/echo", {"Host": "a"})))
    assert (seen["remote_addr"], seen["url_scheme"]) == ("203.0.113.9", "https")
    # The balancer's own health check (LOCAL): the connection's own address stays.
    seen = echo(exchange(address, proxy_v2("198.51.100.7", local=True) + exact_request("/echo", {"Host": "a"})))
    assert seen["remote_addr"] == "127.0.0.1"


def test_malformed_proxy_headers_are_refused_and_nothing_else_is_disturbed(serve):
    server = serve("-w", "1", "--proxy-protocol", "--header-timeout", "2", "probe:app")
    address = ("127.0.0.1", server.port)
    # A keep-alive connection in the middle of its life must not notice anything.
    steady = socket.create_connection(address, timeout=30)
    steady.sendall(proxy_v1("203.0.113.9"))
    steady_stream = steady.makefile("rb")
    send_request(steady, "GET", "/bytes?n=3")
    assert read_response(steady_stream)[0] == 200
    bad = [
        exact_request("/echo", {"Host": "a"}),  # no header at all
        b"PROXY TCP4 203.0.113.9 127.0.0.1 56324\r\n" + exact_request("/", {"Host": "a"}),
        b"PROXY TCP4 not.an.ip 127.0.0.1 1 2\r\n" + exact_request("/", {"Host": "a"}),
        proxy_v2("203.0.113.9")[:12] + b"\x99\x11\x00\x0c" + bytes(12) + exact_request("/", {"Host": "a"}),
        b"PROXY TCP4 203.0.113.9 127",  # then silence: the header timeout
    ]
    for data in bad:
        assert exchange(address, data) is None, data
    log = wait_until(lambda: server.log() if server.log().count(b"closed a connection from") >= len(bad) else None,
                     message="a log line per refused connection")
    assert b"not a PROXY protocol header" in log and b"no complete header in time" in log
    send_request(steady, "GET", "/bytes?n=4")
    assert read_response(steady_stream)[::2] == (200, b"bbbb")
    steady.close()
    stats = server.stats()
    assert (stats["responses"], stats["connections"]["handshakes_failed"]) == ({"200": 2}, len(bad))


def haproxy_config(tmp_path, listen_port, servers, extra_server="", backend_extra=""):
    config = tmp_path / "haproxy.cfg"
    lines = ["global", "  maxconn 512", "defaults", "  mode http", "  timeout connect 5s",
             "  timeout client 30s", "  timeout server 30s", "  timeout queue 30s",
             "frontend web", f"  bind 127.0.0.1:{listen_port}", "  default_backend app", "backend app",
             *([backend_extra] if backend_extra else [])]
    lines += [f"  server s{i} 127.0.0.1:{port} {extra_server}" for i, port in enumerate(servers)]
    config.write_text("\n".join(lines) + "\n")
    return config


@pytest.fixture
def haproxy():
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    require(binary, "apt-get install haproxy")
    started = []

    def start(config, port):
        process = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        started.append(process)

        def listening():
            if process.poll() is not None:
                raise AssertionError(f"haproxy exited: {process.stderr.read().decode()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        wait_until(listening, timeout=20, message="haproxy to listen")
        return process

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def test_debian_haproxy_send_proxy_v2_gives_the_real_client(serve, haproxy, tmp_path):
    server = serve("-w", "1", "--proxy-protocol", "probe:app")
    port = free_port()
    haproxy(haproxy_config(tmp_path, port, [server.port], "send-proxy-v2"), port)
    # The client comes from 127.0.0.2; HAProxy itself connects from 127.0.0.1.
    seen = echo(exchange(("127.0.0.1", port), exact_request("/echo", {"Host": "a"}), source="127.0.0.2"))
    assert seen["remote_addr"] == "127.0.0.2"
    assert seen["headers"]["HTTP_X_FORWARDED_FOR"] == "127.0.0.2"


# Mounted under a prefix (--root-path)

@pytest.mark.parametrize("preload", [False, True], ids=["started", "preloaded"])
def test_a_wsgi_app_under_a_root_path_whether_the_router_keeps_it_or_not(serve, preload):
    server = serve("-w", "1", "--root-path", "/shop/", *(["--preload"] if preload else []), "probe:app")
    # The router kept the prefix (PATH_INFO is below it), or took it off. (The edge cases of
    # which paths are below it: crates/worker/src/wsgi/environ.rs.)
    for path in ("/shop/echo", "/echo"):
        seen = echo(server.get(path))
        assert (seen["script_name"], seen["path"]) == ("/shop", "/echo"), path


def test_an_asgi_app_under_a_root_path_gets_the_full_path(serve):
    server = serve("-w", "1", "--root-path", "/shop", "asgi_probe:app")
    for path in ("/shop/paths", "/paths"):
        seen = echo(server.get(path + "?q=1"))
        assert seen == {"path": "/shop/paths", "raw_path": "/shop/paths", "root_path": "/shop"}, path


@pytest.mark.parametrize("flags, message", [
    (["--root-path", "shop"], "must be a path such as /api"),
    (["--root-path", "/a b"], "must be a path such as /api"),
    (["--root-path", "/shop", "--cmd", "true"], "--root-path is for the bundled worker"),
])
def test_a_bad_root_path_is_refused(flags, message):
    result = run_headway("serve", "-b", "127.0.0.1:0", *flags)
    assert result.returncode != 0 and message in result.stderr, result.stderr


# Health, readiness and shutdown

def test_health_on_the_control_address_and_the_public_port(serve):
    server = serve("-w", "1", "-t", "1", "--health-path", "/healthz", "probe:app")
    assert get_status(f"http://{server.control}/health/live") == (200, "alive\n")
    assert get_status(f"http://{server.control}/health/ready") == (200, "ready\n")
    # The one slot is busy: the probe is answered anyway, by the front.
    with server.connect() as busy:
        send_request(busy, "GET", "/busy?ms=3000")
        wait_until(lambda: server.stats()["slots"]["busy"] == 1, message="the slot to be busy")
        started = time.monotonic()
        assert server.get("/healthz")[::2] == (200, b"ready\n")
        assert server.get("/healthz?probe=1")[0] == 200
        assert time.monotonic() - started < 2.5
        with server.connect() as head:
            send_request(head, "HEAD", "/healthz", close=True)
            assert read_response(head.makefile("rb"), method="HEAD")[::2] == (200, b"")
        assert read_response(busy.makefile("rb"))[0] == 200


def test_readiness_reports_booting_workers(serve, tmp_path):
    app = tmp_path / "slow_boot.py"
    app.write_text("import time\ntime.sleep(3)\n"
                   "def app(environ, start_response):\n    start_response('200 OK', [])\n    return [b'up']\n")
    control = f"127.0.0.1:{free_port()}"
    process = subprocess.Popen([headway_binary(), "serve", "-w", "1", "-b", "127.0.0.1:0", "--control", control,
                                "slow_boot:app"], cwd=tmp_path, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    try:
        def answered():
            try:
                return get_status(f"http://{control}/health/ready", timeout=2)
            except OSError:
                return None
        assert wait_until(answered, timeout=10, message="the control address") == (503, "workers are starting\n")
        assert get_status(f"http://{control}/health/live")[0] == 200
        wait_until(lambda: answered() == (200, "ready\n"), timeout=30, message="readiness after boot")
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_sigterm_turns_readiness_off_before_accepting_stops_and_loses_nothing(serve):
    server = serve("-w", "1", "-t", "2", "--shutdown-delay", "4", "--health-path", "/healthz",
                   "--agent-check", f"127.0.0.1:{free_port()}", "probe:app")
    agent = ("127.0.0.1", int(server.process.args[server.process.args.index("--agent-check") + 1].split(":")[1]))
    assert socket.create_connection(agent).recv(100) == b"ready maxconn:2\n"
    running = []
    for _ in range(4):  # 2 run, 2 wait in the queue
        sock = server.connect(timeout=60)
        send_request(sock, "GET", "/busy?ms=1500")
        running.append(sock)
    wait_until(lambda: server.stats()["queue"]["depth"] == 2, message="2 queued requests")
    # From the signal until the listener closes, every connection the kernel completed gets
    # its answer: clients keep connecting all along.
    outcomes = []

    def keep_connecting():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            except OSError:
                return  # the listener is closed: refused, which a balancer handles
            with sock:
                try:
                    send_request(sock, "GET", "/bytes?n=1", close=True)
                    outcomes.append(read_response(sock.makefile("rb"))[0])
                except OSError as error:
                    outcomes.append(repr(error))
            time.sleep(0.005)

    server.signal(signal.SIGTERM)
    signalled = time.monotonic()
    clients = [threading.Thread(target=keep_connecting) for _ in range(3)]
    for client in clients:
        client.start()
    wait_until(lambda: get_status(f"http://{server.control}/health/ready") == (503, "shutting down\n"),
               timeout=1.5, message="readiness to turn off at once")
    assert server.get("/healthz")[0] == 503
    assert socket.create_connection(agent).recv(100) == b"drain\n"
    # Still accepting during the delay.
    with server.connect():
        assert time.monotonic() - signalled < 4
    statuses = [read_response(sock.makefile("rb"))[0] for sock in running]
    for client in clients:
        client.join(timeout=30)
    assert statuses == [200] * 4
    assert outcomes and set(outcomes) == {200}, outcomes
    assert server.wait(timeout=60) == 0


# HAProxy agent check and systemd

def test_systemd_socket_activation_and_notifications(tmp_path):
    require("systemd-socket-activate", "Debian's systemd package")
    activate = shutil.which("systemd-socket-activate")
    notify_path = tmp_path / "notify"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    notify.settimeout(30)
    port = free_port()
    environment = {**os.environ, "NOTIFY_SOCKET": str(notify_path),
                   "PYTHONPATH": os.pathsep.join([str(REPO / "python"), os.environ.get("PYTHONPATH", "")])}
    passed = [f"--setenv={name}" for name in ("NOTIFY_SOCKET", "PYTHONPATH", "HEADWAY_PYTHON", "PATH")
              if name in environment]
    process = subprocess.Popen([activate, "-l", f"127.0.0.1:{port}", *passed, headway_binary(), "serve",
                                "-w", "1", "-t", "2", "-b", "127.0.0.1:1", "probe:app"],
                               cwd=APPS, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        wait_until(lambda: _connectable(port), timeout=10, message="systemd-socket-activate to listen")
        # The first connection starts headway, waits in the passed socket's backlog, and is served.
        seen = echo(exchange(("127.0.0.1", port), exact_request("/echo", {"Host": "a"})))
        assert seen["remote_addr"] == "127.0.0.1"

        def next_change():
            """The next message that is more than a STATUS= refresh, as lines."""
            while True:
                lines = notify.recv(4096).decode().splitlines()
                if not all(line.startswith("STATUS=") for line in lines):
                    return lines
                assert "slots busy" in lines[0], lines

        assert "READY=1" in next_change()
        process.send_signal(signal.SIGHUP)
        reloading = next_change()
        assert "RELOADING=1" in reloading and any(line.startswith("MONOTONIC_USEC=") for line in reloading)
        assert "READY=1" in next_change()
        process.send_signal(signal.SIGTERM)
        assert "STOPPING=1" in next_change()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        notify.close()


def test_the_open_files_limit_is_raised_to_the_hard_limit(serve):
    """Every connection holds a descriptor, every WebSocket two: a soft limit of 256 (many systems
    start processes at 1024) is raised to the hard limit, as Go's runtime and nginx do."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard <= 256:
        missing(f"a hard limit on open files over 256 (it is {hard}): nothing to raise to")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        server = serve("-w", "1", "probe:app")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    with open(f"/proc/{server.process.pid}/limits") as limits:
        line = next(line for line in limits if line.startswith("Max open files"))
    assert line.split()[3] == str(hard)
    assert server.get("/bytes?n=3")[0] == 200


def _connectable(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


# Configuration

def run_headway(*args, env=None, cwd=None):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEADWAY_") or k == "HEADWAY_PYTHON"}
    for name in ("WEB_CONCURRENCY", "PORT", "FORWARDED_ALLOW_IPS"):
        environment.pop(name, None)
    environment.update(env or {})
    return subprocess.run([headway_binary(), *args], capture_output=True, text=True, timeout=60, env=environment,
                          cwd=cwd)


def test_flag_beats_environment_beats_file_beats_default(tmp_path):
    config = tmp_path / "headway.toml"
    config.write_text('workers = 3\nthreads = 4\nmax_queue = 50\nbind = ["127.0.0.1:9001", "unix:/tmp/x.sock"]\n'
                      'proxy-protocol = true\nforwarded-allow-ips = "10.0.0.0/8"\n')
    result = run_headway("serve", "-c", str(config), "--print-config", "--threads", "6",
                         env={"HEADWAY_MAX_QUEUE": "60", "WEB_CONCURRENCY": "2", "HEADWAY_NO_KEEP_ALIVE": "yes"})
    assert result.returncode == 0, result.stderr
    lines = {line.split("=")[0].strip(): line for line in result.stdout.splitlines() if not line.startswith("#")}
    assert lines["threads"].split("#")[1].strip() == "flag"
    assert "= 6" in lines["threads"]
    assert "= 60" in lines["max-queue"] and "environment: HEADWAY_MAX_QUEUE" in lines["max-queue"]
    assert "= 2" in lines["workers"] and "environment: WEB_CONCURRENCY" in lines["workers"]
    assert "no-keep-alive" in lines and "= true" in lines["no-keep-alive"]
    assert '["127.0.0.1:9001", "unix:/tmp/x.sock"]' in lines["bind"] and str(config) in lines["bind"]
    assert '"10.0.0.0/8"' in lines["forwarded-allow-ips"] and "= true" in lines["proxy-protocol"]
    assert "default" in lines["queue-timeout"]
    # What it prints is itself a config file giving the same settings.
    again = tmp_path / "again.toml"
    again.write_text("\n".join(line.split("#")[0] for line in result.stdout.splitlines() if not line.startswith("#")))
    assert run_headway("serve", "-c", str(again), "--print-config").returncode == 0


def test_a_config_file_serves(serve, tmp_path):
    config = tmp_path / "headway.toml"
    config.write_text('app = "probe:app"\nworkers = 1\nhealth-path = "/up"\n')
    server = serve("-c", str(config))
    assert server.get("/up")[0] == 200 and server.get("/bytes?n=2")[0] == 200
    assert server.stats()["slots"]["total"] == 5


@pytest.mark.parametrize("text, env, message", [
    ("wokers = 2\n", {}, "headway.toml: unknown key 'wokers'"),
    ('workers = "many"\n', {}, "headway.toml: workers: invalid value 'many'"),
    ("workers = 0\n", {}, "--workers must be between 1 and 1024, not 0 (set by workers in "),
    ("bind = 8000\n", {}, "--bind '8000' is not HOST:PORT or unix:PATH (invalid socket address) (set by bind in "),
    ("threads = [1, 2]\n", {}, "headway.toml: threads: expected one value, not a list"),
    ("proxy-protocol = 1\n", {}, "headway.toml: proxy-protocol: expected true or false"),
    ("workers = [\n", {}, "headway.toml (line 1)"),
    ("", {"HEADWAY_SHUTDOWN_DELAY": "soon"}, "$HEADWAY_SHUTDOWN_DELAY: invalid value 'soon'"),
    ("", {"FORWARDED_ALLOW_IPS": "10.0.0.0/33"}, "'10.0.0.0/33' is not an IP address"),
])
def test_bad_settings_are_one_line_naming_where_they_came_from(tmp_path, text, env, message):
    config = tmp_path / "headway.toml"
    config.write_text(text)
    result = run_headway("serve", "-c", str(config), "--boot-timeout", "1", env=env, cwd=tmp_path)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3, result.stderr


# Logs

def test_json_access_log_lines_parse_and_sigusr1_reopens_the_file(serve, tmp_path):
    log = tmp_path / "access.log"
    server = serve("-w", "1", "--access-log", str(log), "--access-log-format", "json", "--log-format", "json",
                   "--proxy-protocol", "probe:app")
    address = ("127.0.0.1", server.port)
    exchange(address, proxy_v1("203.0.113.9") + exact_request("/bytes?n=5", {"Host": "a", "User-Agent": "t/1"}))
    line = wait_until(lambda: log.read_text() if log.exists() and log.read_text().endswith("\n") else None,
                      message="an access log line")
    entry = json.loads(line)
    assert {k: entry[k] for k in ("method", "path", "status", "bytes", "client", "worker", "user_agent")} == {
        "method": "GET", "path": "/bytes?n=5", "status": 200, "bytes": 5, "client": "203.0.113.9", "worker": 1,
        "user_agent": "t/1"}
    assert entry["queue_ms"] >= 0 and entry["service_ms"] >= 0 and entry["time"].endswith("Z")
    # logrotate: move the file away, SIGUSR1, and the next lines go to a new file at the path.
    log.rename(tmp_path / "access.log.1")
    server.signal(signal.SIGUSR1)
    wait_until(lambda: b"reopening the access log" in server.log(), message="the reopen")
    wait_until(lambda: log.exists(), message="the new file")
    exchange(address, proxy_v1("203.0.113.9") + exact_request("/bytes?n=6", {"Host": "a"}))
    assert json.loads(wait_until(lambda: log.read_text(), message="a line in the new file"))["bytes"] == 6
    # The server's own log is JSON too, a line each (the worker's own lines share the stream).
    messages = [json.loads(raw)["message"] for raw in server.log().splitlines() if raw.startswith(b"{")]
    assert any(message.startswith("listening on http://127.0.0.1:") for message in messages), messages
    metrics = get_status(f"http://{server.control}/metrics")[1]
    assert "headway_access_log_dropped_total 0" in metrics
    assert server.stats()["access_log_dropped"] == 0

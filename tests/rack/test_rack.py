"""The bundled Rack worker (`headway serve config.ru`) as a client sees it through the front: the
Rack env, bodies of each kind, errors and the lifecycle, with the apps in tests/apps/rack/ under
Rack::Lint."""

import hashlib
import json
import os
import signal
import socket
import subprocess
import threading

import pytest
from websockets.sync.client import connect

from conftest import (
    APPS,
    REPO,
    ended,
    exchange,
    gated_response,
    headway_binary,
    kill_worker_1_midway,
    missing,
    parent_of,
    read_response,
    ready_pids,
    request_bytes,
    send_request,
    wait_until,
)

RACK_APPS = APPS / "rack"
PAYLOAD = bytes(range(256)) * 1024  # what app.ru's file holds


@pytest.fixture
def rack(serve):
    """Starts the Rack worker on tests/apps/rack/APP (app.ru unless told)."""
    require_rack()

    def start(*args, app="app.ru", env=None):
        return serve(*args, app, cwd=RACK_APPS, env=env)

    return start


@pytest.fixture(scope="session")
def rack3_lib():
    """The folder of trixie's Rack 3 (scripts/rack3 fetches it the first time)."""
    fetched = subprocess.run([REPO / "scripts" / "rack3"], capture_output=True, text=True, timeout=300)
    if fetched.returncode != 0:
        missing(f"Rack 3 could not be fetched (scripts/rack3): {fetched.stderr.strip()}")
    return fetched.stdout.strip()


@pytest.fixture(params=["2.2", "3"])
def any_rack(request, rack):
    """As `rack`, once under the machine's Rack 2.2 and once under Rack 3, which the worker's
    Ruby finds first on its load path: the routes of app.ru under Rack::Lint pass both Lints."""
    if request.param == "2.2":
        return rack
    env = {"RUBYLIB": request.getfixturevalue("rack3_lib")}
    return lambda *args, app="app.ru": rack(*args, app=app, env=env)


def require_rack():
    """Ruby with rack, and the worker's extension built into ruby/lib (scripts/setup --test)."""
    found = subprocess.run(["ruby", "-e", 'require "rack"'], capture_output=True)  # noqa: S607
    if found.returncode != 0:
        missing("ruby with rack is not installed (apt-get install ruby-rack)")
    if not list((REPO / "ruby" / "lib" / "headway").glob("headway_rack.so")):
        missing("the Rack worker's extension is not built (scripts/setup --test builds it)")


def raw_response(server, path):
    """The bytes of the response to GET `path`, as they came, up to the server's close."""
    with server.connect() as sock:
        send_request(sock, "GET", path, close=True)
        received = b""
        while data := sock.recv(65536):
            received += data
    return received


def get_json(server, path):
    status, _, body = server.get(path)
    assert status == 200, body
    return json.loads(body)


def test_get_gives_the_app_every_cgi_key_and_the_rack_ones(any_rack):
    server = any_rack("-w", "1", "-t", "2")
    status, headers, body = server.get("/echo?x=1&y=%20", headers={"X-Custom": "yes"})
    env = json.loads(body)
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert env["REQUEST_METHOD"] == "GET"
    assert (env["SCRIPT_NAME"], env["PATH_INFO"], env["QUERY_STRING"]) == ("", "/echo", "x=1&y=%20")
    assert env["REQUEST_URI"] == "/echo?x=1&y=%20"
    assert (env["SERVER_NAME"], env["SERVER_PORT"], env["SERVER_PROTOCOL"]) == ("test", "80", "HTTP/1.1")
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["HTTP_X_CUSTOM"] == "yes"
    assert env["rack.url_scheme"] == "http"
    assert (env["rack.multithread"], env["rack.multiprocess"], env["rack.run_once"]) == (True, False, False)
    assert env["rack.hijack?"] is False
    assert env["body"] == "" and env["CONTENT_LENGTH"] is None


def test_the_rack_found_first_on_the_load_path_is_the_one_the_app_gets(any_rack, request):
    server = any_rack("-w", "1", "-t", "1")
    release = get_json(server, "/echo")["release"]
    assert release.startswith(request.node.callspec.params["any_rack"] + ".")


def test_root_path_is_script_name_and_rack_urlmap_mounts_below_it(any_rack):
    server = any_rack("-w", "1", "-t", "1", "--root-path", "/shop")
    env = get_json(server, "/shop/echo?x=1")
    assert (env["SCRIPT_NAME"], env["PATH_INFO"], env["REQUEST_URI"]) == ("/shop", "/echo", "/shop/echo?x=1")
    env = get_json(server, "/echo")  # a router that took the prefix off
    assert (env["SCRIPT_NAME"], env["PATH_INFO"]) == ("/shop", "/echo")
    assert get_json(server, "/shop/mounted/deeper") == ["/shop/mounted", "/deeper"]
    assert get_json(server, "/mounted/x") == ["/shop/mounted", "/x"]


def test_the_scheme_is_https_when_a_trusted_router_says_so(rack):
    server = rack("-w", "1", "-t", "1")
    env = json.loads(server.get("/echo", headers={"X-Forwarded-Proto": "https"})[2])
    assert env["rack.url_scheme"] == "https"


def test_a_post_body_is_rack_input_and_rewinds(any_rack):
    server = any_rack("-w", "2", "-t", "2")
    status, _, body = exchange(server, "POST", "/echo", headers={"Content-Type": "text/plain"}, body=b"hello rack")
    env = json.loads(body)
    assert status == 200
    assert (env["body"], env["again"]) == ("hello rack", "hello rack")
    assert (env["CONTENT_TYPE"], env["CONTENT_LENGTH"]) == ("text/plain", "10")
    assert env["rack.multiprocess"] is True


def test_a_large_upload_read_twice_is_kept_in_a_file_not_in_memory(rack):
    """20 MiB read, rewound and read again by a Rack 2 app: the same bytes both times, and the
    worker's resident memory, taken while the request still holds its input, not grown by them."""
    server = rack("-w", "1", "-t", "2")
    upload = os.urandom(20 << 20)
    assert get_json(server, "/held") == []
    before = server.stats()["workers"][0]["rss_bytes"]
    results = []
    headers = {"Content-Type": "application/octet-stream"}
    thread = threading.Thread(target=lambda: results.append(exchange(server, "POST", "/digest", headers, upload)))
    thread.start()
    held = []
    wait_until(lambda: held.extend(get_json(server, "/held")) or held, timeout=60, message="the app to read twice")
    grown = server.stats()["workers"][0]["rss_bytes"] - before
    assert server.get("/release")[0] == 200
    thread.join(timeout=60)
    status, _, body = results[0]
    assert status == 200
    assert json.loads(body) == [hashlib.sha256(upload).hexdigest()] * 2
    assert grown < len(upload) // 2, f"the worker grew by {grown >> 20} MiB"


def test_the_lines_of_a_body_kept_in_a_file_are_whole(rack):
    lines = [b"line %d " % number + b"x" * (number % 100) + b"\n" for number in range(4000)]  # 300 KB
    status, _, body = exchange(rack("-w", "1", "-t", "1"), "POST", "/lines", body=b"".join(lines) + b"end")
    assert status == 200
    assert json.loads(body) == [line.decode() for line in lines] + ["end"]


def test_a_chunked_upload_reaches_rack_input_whole(any_rack):
    server = any_rack("-w", "1", "-t", "1")
    lines = [b"line one\n", b"line two\n", b"last"]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in lines) + b"0\r\n\r\n"
    status, _, body = exchange(server, "POST", "/lines", headers={"Transfer-Encoding": "chunked"}, body=chunked)
    assert status == 200
    assert json.loads(body) == ["line one\n", "line two\n", "last"]


def test_head_gets_the_head_and_no_body(any_rack):
    server = any_rack("-w", "1", "-t", "1")
    status, headers, body = exchange(server, "HEAD", "/echo")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert body == b""
    # The connection carries on: the HEAD response was framed right.
    with server.connect() as sock:
        sock.sendall(request_bytes("HEAD", "/echo") + request_bytes("GET", "/closed", close=True))
        stream = sock.makefile("rb")
        assert read_response(stream, method="HEAD")[0] == 200
        assert read_response(stream)[0] == 200


def test_a_streamed_body_goes_out_piece_by_piece_and_is_closed(any_rack):
    server = any_rack("-w", "1", "-t", "2")
    received = gated_response(server, "/stream")
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    assert b"first\n" in body and b"second\n" in body and body.endswith(b"0\r\n\r\n")
    assert get_json(server, "/closed") == ["stream"]


def test_a_body_whose_to_ary_is_nil_goes_by_each(rack):
    server = rack("-w", "1", "-t", "1")
    status, _, body = server.get("/not-an-array")
    assert (status, body) == (200, b"by each, not to_ary")


def test_a_to_path_body_is_sent_whole(any_rack):
    """Under Rack 2.2's Lint, which hides to_path, the body goes by each; under Rack 3's, by the core."""
    server = any_rack("-w", "1", "-t", "1")
    status, _, body = server.get("/file")
    assert status == 200
    assert body == PAYLOAD
    assert get_json(server, "/closed") == ["file"]


def test_a_to_path_body_is_sent_by_the_core_without_each(any_rack):
    server = any_rack("-w", "1", "-t", "1")
    status, headers, body = server.get("/native")
    assert status == 200
    assert headers["content-length"] == str(len(PAYLOAD))
    assert body == PAYLOAD
    assert b"each called" not in server.log()


def test_a_to_path_body_of_a_bodiless_status_gets_no_length(any_rack):
    server = any_rack("-w", "1", "-t", "1")
    status, headers, body = server.get("/native?204")
    assert (status, body) == (204, b"")
    assert "content-length" not in headers


def test_a_header_of_several_values_is_several_fields(any_rack):
    """Rack 2 joins the values by newlines, Rack 3 gives an Array."""
    server = any_rack("-w", "1", "-t", "1")
    raw = raw_response(server, "/cookies")
    assert b"set-cookie: a=1\r\n" in raw.lower() and b"set-cookie: b=2\r\n" in raw.lower()


def test_an_app_exception_is_a_500_with_its_backtrace_in_the_log(any_rack):
    server = any_rack("-w", "1", "-t", "1")
    status, _, body = server.get("/raise")
    assert status == 500
    assert b"boom from the app" not in body  # the client learns nothing of the app's insides
    # The worker's output reaches the front's log on its own way.
    wait_until(lambda: b"boom from the app (RuntimeError)" in server.log(), message="the error in the log")
    assert b"app.ru:" in server.log()  # the backtrace
    assert get_json(server, "/echo")["PATH_INFO"] == "/echo"  # the slot serves on


def test_a_body_that_raises_mid_stream_ends_that_response_and_the_worker_serves_on(rack):
    server = rack("-w", "1", "-t", "1")
    received = raw_response(server, "/midstream")
    # Cut short, never presented as complete: the head and the first piece, then the connection
    # closed before the last chunk; or, when the front learns of the failure before it has sent
    # anything, a 502.
    if received.startswith(b"HTTP/1.1 200"):
        assert b"partial" in received and not received.endswith(b"0\r\n\r\n")
    else:
        assert received.startswith(b"HTTP/1.1 502")
    wait_until(lambda: b"the body broke mid-stream" in server.log(), message="the error in the log")
    assert get_json(server, "/closed") == ["failing"]


def test_after_reply_callbacks_run_once_the_response_is_out(any_rack):
    server = any_rack("-w", "1", "-t", "1")
    assert get_json(server, "/after?one") == "registered"
    assert get_json(server, "/after-seen") == ["after one"]


def test_response_finished_callbacks_get_the_status(any_rack):
    server = any_rack("-w", "1", "-t", "1")
    assert get_json(server, "/finished") == "registered"
    assert get_json(server, "/after-seen") == ["finished 200 nil"]


def test_a_rack_3_streaming_body_is_called_with_a_stream(any_rack):
    server = any_rack("-w", "1", "-t", "1")
    status, headers, body = server.get("/callable")
    assert (status, headers["content-type"], body) == (200, "text/plain", b"streamed by call")


def test_a_response_hijack_writes_the_head_then_the_apps_stream_until_it_closes_it(rack):
    """Rack 2's `rack.hijack` response header: the app's proc gets the stream after the head, the
    body is ignored (yet closed), and the slot serves on once the app closed the stream."""
    server = rack("-w", "1", "-t", "2")
    head, _, body = gated_response(server, "/hijack").partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"content-type: text/plain" in head.lower()
    assert b"rack.hijack" not in head
    assert body == b"6\r\nfirst\n\r\n7\r\nsecond\n\r\n0\r\n\r\n"
    assert get_json(server, "/closed") == ["ignored"]


def test_a_streaming_body_may_hand_its_stream_on_and_write_until_it_closes_it(any_rack):
    server = any_rack("-w", "1", "-t", "2")
    body = gated_response(server, "/handoff").partition(b"\r\n\r\n")[2]
    assert body == b"6\r\nfirst\n\r\n7\r\nsecond\n\r\n0\r\n\r\n"
    assert get_json(server, "/echo")["PATH_INFO"] == "/echo"


def test_a_ruby_side_without_the_extension_says_what_to_build(tmp_path):
    require_rack()
    lib = tmp_path / "lib" / "headway"
    lib.mkdir(parents=True)
    for source in (REPO / "ruby" / "lib" / "headway").glob("*.rb"):
        (lib / source.name).write_text(source.read_text())
    result = subprocess.run(
        [headway_binary(), "serve", "-b", "127.0.0.1:0", "--control", "127.0.0.1:0", "-w", "1", "app.ru"],
        cwd=RACK_APPS, capture_output=True, timeout=60, env={**os.environ, "HEADWAY_RUBY_LIB": str(lib.parent)},
    )
    assert result.returncode != 0
    assert b"the native extension is missing" in result.stdout + result.stderr
    assert b"scripts/setup --test" in result.stdout + result.stderr


def test_a_config_ru_that_raises_stops_the_start_with_its_message():
    require_rack()
    result = subprocess.run(
        [headway_binary(), "serve", "-b", "127.0.0.1:0", "--control", "127.0.0.1:0", "-w", "1", "broken.ru"],
        cwd=RACK_APPS, capture_output=True, timeout=60,
    )
    assert result.returncode != 0
    assert b"this config.ru refuses to load" in result.stdout + result.stderr


def test_a_wrong_ruby_says_so():
    result = subprocess.run(
        [headway_binary(), "serve", "--ruby", "/nonexistent/ruby", "app.ru"],
        cwd=RACK_APPS, capture_output=True, timeout=60,
    )
    assert result.returncode != 0
    assert b"--ruby /nonexistent/ruby" in result.stderr and b"no such file" in result.stderr


def test_the_rack_worker_takes_the_unix_socket_too(tmp_path):
    """Run on its own (no front), the worker serves HTTP/1.1 on the socket it is given."""
    require_rack()
    path = tmp_path / "rack.sock"
    worker = subprocess.Popen(
        ["ruby", "-I", str(REPO / "ruby" / "lib"), "-r", "headway/worker", "-e", "exit Headway::Worker.main(ARGV)",  # noqa: S607
         "--", "--socket", str(path), "--threads", "2", "app.ru"],
        cwd=RACK_APPS, stderr=subprocess.PIPE,
    )
    try:
        line = worker.stderr.readline()
        assert b"serving app.ru on " in line, line
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(30)
            sock.connect(str(path))
            sock.sendall(request_bytes("GET", "/echo", host="localhost", close=True))
            status, _, body = read_response(sock.makefile("rb"))
        assert status == 200 and json.loads(body)["SERVER_NAME"] == "localhost"
    finally:
        worker.terminate()
        assert worker.wait(timeout=30) == 0


def test_killing_a_rack_worker_fails_only_its_requests_and_it_comes_back(rack):
    server = rack("-w", "2", "-t", "2")
    before, results = kill_worker_1_midway(server, "/sleep?3000")
    statuses = sorted(status for status, _, _ in results)
    assert statuses == [200, 200, 502, 502]
    assert {json.loads(body) for status, _, body in results if status == 200} == {before[2]}
    wait_until(lambda: server.stats()["workers"][0]["state"] == "ready", message="worker 1 to come back")
    assert server.stats()["workers"][0]["restarts"] == 1
    assert get_json(server, "/sleep?0") in {w["pid"] for w in server.stats()["workers"]}


def test_a_hung_rack_worker_gets_504(rack):
    server = rack("-w", "1", "-t", "1", "--timeout", "1")
    assert server.get("/sleep?5000")[0] == 504
    wait_until(lambda: server.stats()["workers"][0]["recycles"]["timeout"] == 1, message="the worker to be replaced")


def test_sighup_replaces_rack_workers_one_at_a_time_without_failing_a_request(rack):
    server = rack("-w", "2", "-t", "2")
    old = {w["pid"] for w in server.stats()["workers"]}
    statuses, stop = [], threading.Event()

    def client():
        while not stop.is_set():
            statuses.append(server.get("/sleep?20")[0])

    clients = [threading.Thread(target=client) for _ in range(3)]
    for thread in clients:
        thread.start()
    wait_until(lambda: len(statuses) > 10, message="load to start")
    server.signal(signal.SIGHUP)
    pids = lambda: {w["pid"] for w in server.stats()["workers"]}  # noqa: E731
    wait_until(lambda: not (pids() & old) and 0 not in pids() and b"reload done" in server.log(),
               timeout=60, message="both workers to be replaced")
    stop.set()
    for thread in clients:
        thread.join(timeout=60)
    assert set(statuses) == {200}


def test_max_requests_recycles_rack_workers_with_no_failed_request(rack):
    server = rack("-w", "1", "-t", "2", "--max-requests", "10")
    recycled = lambda: server.stats()["workers"][0]["recycles"]["max_requests"]  # noqa: E731
    statuses = []
    while recycled() < 2:  # the supervisor notices in its own time: ask on until it has twice
        assert len(statuses) < 2000, "2 recycles in 2000 requests"
        statuses.append(server.get("/sleep?5")[0])
    assert set(statuses) == {200}


def answer_across_sigterm(server, path):
    """The response to GET `path`, a slow request, with SIGTERM sent to the server while it runs;
    checks that the server then exits cleanly."""
    results = []
    thread = threading.Thread(target=lambda: results.append(server.get(path)))
    thread.start()
    wait_until(lambda: server.stats()["workers"][0]["busy"] == 1, message="the request to run")
    server.signal(signal.SIGTERM)
    thread.join(timeout=60)
    assert server.wait(timeout=60) == 0
    return results[0]


def test_sigterm_lets_a_running_rack_request_finish(rack):
    server = rack("-w", "1", "-t", "1")
    assert answer_across_sigterm(server, "/sleep?1000")[0] == 200


def test_reload_picks_up_an_edit_of_a_ruby_file(serve, tmp_path):
    (tmp_path / "config.ru").write_text('require_relative "answer"\nuse Rack::Lint\nrun Answer\n')
    answer = tmp_path / "answer.rb"
    source = 'Answer = ->(env) {{ [200, {{ "Content-Type" => "text/plain" }}, ["{text}"]] }}\n'
    answer.write_text(source.format(text="first"))
    require_rack()
    server = serve("-w", "1", "-t", "1", "--reload", "config.ru", cwd=tmp_path)
    assert server.get("/")[2] == b"first"
    answer.write_text(source.format(text="second"))
    wait_until(lambda: server.get("/")[2] == b"second" and b"reload done" in server.log(), timeout=30,
               interval=0.2, message="the edit to be served")


def test_hooks_run_as_each_worker_boots_and_stops(serve, tmp_path):
    require_rack()
    said = tmp_path / "said.txt"
    hooks = tmp_path / "hooks.rb"
    hooks.write_text(
        f'on_worker_boot {{ |worker| File.write("{said}", "boot #{{worker.index}} #{{worker.pid}}\\n", mode: "a") }}\n'
        f'on_worker_shutdown {{ |worker| File.write("{said}", "shutdown #{{worker.index}}\\n", mode: "a") }}\n'
    )
    server = serve("-w", "2", "-t", "1", "--hooks", str(hooks), "app.ru", cwd=RACK_APPS)
    pids = {str(w["index"]): str(w["pid"]) for w in server.stats()["workers"]}
    assert dict(line.split()[1:] for line in said.read_text().splitlines()) == pids
    server.signal(signal.SIGTERM)
    assert server.wait(timeout=60) == 0
    assert sorted(said.read_text().splitlines()[2:]) == ["shutdown 1", "shutdown 2"]


def loaded_by(log):
    """The pids that loaded the app, one a load, as the app wrote them to `log`."""
    return [int(pid) for pid in log.read_text().split()] if log.exists() else []


def test_preload_loads_config_ru_once_and_forks_every_worker_from_it(serve, tmp_path):
    require_rack()
    loaded, said = tmp_path / "loaded", tmp_path / "said"
    hooks = tmp_path / "hooks.rb"
    hooks.write_text(
        f'before_fork {{ File.write("{said}", "before_fork #{{Process.pid}}\\n", mode: "a") }}\n'
        f'on_worker_boot {{ |worker| File.write("{said}", "boot #{{worker.pid}}\\n", mode: "a") }}\n'
    )
    server = serve("-w", "2", "-t", "1", "--preload", "--hooks", str(hooks), "app.ru", cwd=RACK_APPS,
                   env={"RACK_LOADED_LOG": str(loaded)})
    pids = ready_pids(server, 2)
    [parent] = loaded_by(loaded)
    assert parent not in pids
    assert [parent_of(pid) for pid in pids] == [parent, parent]
    assert {get_json(server, "/sleep?0") for _ in range(6)} <= set(pids)
    lines = said.read_text().splitlines()
    assert lines[0] == f"before_fork {parent}"
    assert sorted(lines[1:]) == sorted(f"boot {pid}" for pid in pids)
    assert b"loaded app.ru; forking workers from it" in server.log()


def test_sighup_with_preload_loads_the_app_again_and_forks_new_workers(serve, tmp_path):
    require_rack()
    loaded = tmp_path / "loaded"
    server = serve("-w", "2", "-t", "1", "--preload", "app.ru", cwd=RACK_APPS, env={"RACK_LOADED_LOG": str(loaded)})
    old = set(ready_pids(server, 2))
    server.signal(signal.SIGHUP)
    wait_until(lambda: b"reload done" in server.log(), timeout=60, message="the reload")
    pids = ready_pids(server, 2)
    assert not set(pids) & old
    first, second = loaded_by(loaded)
    assert [parent_of(pid) for pid in pids] == [second, second]
    assert get_json(server, "/sleep?0") in pids


def test_preloaded_rack_workers_end_when_the_front_is_killed(serve, tmp_path):
    """Forked by the parent, not started by the front, each watches the front's pidfd."""
    require_rack()
    loaded = tmp_path / "loaded"
    server = serve("-w", "2", "-t", "1", "--preload", "app.ru", cwd=RACK_APPS, env={"RACK_LOADED_LOG": str(loaded)})
    processes = ready_pids(server, 2) + loaded_by(loaded)
    server.signal(signal.SIGKILL)  # no chance to stop anything itself
    server.wait()
    wait_until(lambda: all(ended(pid) for pid in processes), message="every worker process to end")


def test_a_websocket_hijacked_by_the_app_holds_no_slot(serve):
    """Rack's full hijack (tests/apps/ws_echo.ru, the way ActionCable and faye-websocket take a
    socket): the app echoes on the connection it took while the one slot serves on."""
    require_rack()
    server = serve("-w", "1", "-t", "1", "ws_echo.ru")
    with connect(f"ws://127.0.0.1:{server.port}/echo", compression=None) as ws:
        for message in ("hello", b"\0" * 70_000):
            ws.send(message)
            assert ws.recv(timeout=30) == message
        assert server.stats()["websockets"]["open"] == 1
        assert server.get("/hello")[2] == b"hello"
    wait_until(lambda: server.stats()["websockets"]["open"] == 0, message="the socket to close")


def test_a_handshake_the_app_does_not_hijack_gets_its_answer(rack):
    server = rack("-w", "1", "-t", "1")
    handshake = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                 "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    status, headers, body = server.get("/echo?ws", headers=handshake)
    env = json.loads(body)
    assert (status, headers["content-type"]) == (200, "application/json")
    assert (env["rack.hijack?"], env["QUERY_STRING"], env["REMOTE_ADDR"]) == (True, "ws", "127.0.0.1")

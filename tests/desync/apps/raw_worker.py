"""The desync suite's malformed worker, run as a --cmd worker: serves HTTP/1.1 on the unix socket
given as argv[1], answering `/raw/<case>` with the bytes of RESPONSES[case] in
tests/desync/corpus.py exactly as they are (closing the connection after them where the case
says so), and anything else with a plain 200 "ok"."""

import socket
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from corpus import OK_RESPONSE, RESPONSES  # noqa: E402


def serve(connection):
    data = b""
    with connection:
        while True:
            while b"\r\n\r\n" not in data:
                piece = connection.recv(65536)
                if not piece:
                    return
                data += piece
            head, _, data = data.partition(b"\r\n\r\n")
            target = head.split(b" ")[1].decode()
            case = RESPONSES.get(target.removeprefix("/raw/")) if target.startswith("/raw/") else None
            if case is None:
                connection.sendall(OK_RESPONSE)
                continue
            answer, closes, _ = case
            connection.sendall(answer)
            if closes:
                return


listener = socket.socket(socket.AF_UNIX)
listener.bind(sys.argv[1])
listener.listen()
while True:
    threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()

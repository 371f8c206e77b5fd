"""A minimal HTTP/1.1 worker for `--cmd` tests: serves 200 "ok" on the unix socket given as
argv[1]; on SIGTERM it takes half a second to stop, then writes "stopped cleanly" to the file
given as argv[2], the way a real server finishes its requests before exiting."""

import os
import signal
import sys
import threading
import time

from unix_http import OkHandler, Server


def main():
    socket_path, marker = sys.argv[1], sys.argv[2]
    server = Server(socket_path, OkHandler)

    def stop(signum, frame):
        def finish():
            time.sleep(0.5)
            with open(marker, "w") as out:
                out.write("stopped cleanly\n")
            os._exit(0)

        threading.Thread(target=finish).start()

    signal.signal(signal.SIGTERM, stop)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""Raw HTTP exchanges over TCP or a unix socket, with whatever the test puts before the request
(a PROXY protocol header) and from whichever loopback address it chooses, for the tests of what
headway believes about a client."""

import socket
import struct
from ipaddress import ip_address

from conftest import read_response, request_bytes


def exact_request(target, headers, method="GET"):
    """A request with exactly these headers (`Host` included), closing the connection."""
    return request_bytes(method, target, headers, close=True, host=None)


def exchange(address, data, source=None, timeout=30):
    """Sends `data` to `address` ((host, port) or a unix socket path) and reads one response:
    (status, headers, body), or None if the server closed without answering."""
    if isinstance(address, tuple):
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET)
        if source:
            sock.bind((source, 0))
        sock.settimeout(timeout)
        sock.connect(address)
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(timeout)
        sock.connect(str(address))
    with sock:
        sock.sendall(data)
        try:
            return read_response(sock.makefile("rb"))
        except (ConnectionError, IndexError, ValueError):
            return None


def proxy_v1(client, server="127.0.0.1", client_port=56324, server_port=80):
    family = "TCP6" if ip_address(client).version == 6 else "TCP4"
    return f"PROXY {family} {client} {server} {client_port} {server_port}\r\n".encode()


V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def proxy_v2(client, server="127.0.0.1", client_port=56324, server_port=80, local=False, tls=False):
    """A binary header (with a NOOP TLV, as balancers pad); `local`: the balancer's own check;
    `tls`: with the SSL TLV saying the client spoke TLS (HAProxy's send-proxy-v2-ssl)."""
    command = 0x20 if local else 0x21
    source, destination = ip_address(client), ip_address(server)
    family = 0x21 if source.version == 6 else 0x11  # AF_INET6 or AF_INET, STREAM
    addresses = source.packed + destination.packed + struct.pack("!HH", client_port, server_port)
    tlv = b"\x04" + struct.pack("!H", 3) + b"pad"
    if tls:
        tlv += b"\x20" + struct.pack("!H", 5) + b"\x01" + bytes(4)  # PP2_TYPE_SSL, PP2_CLIENT_SSL
    return V2_SIGNATURE + bytes([command, family]) + struct.pack("!H", len(addresses) + len(tlv)) + addresses + tlv

"""The desync suite's corpus: ambiguous requests a client might use to make the front and the
worker disagree on where a request ends, and malformed responses a worker might send.

Every request case is sent on a connection of its own, followed by `END` (a plain request that
closes the connection), through headway to each backend. Whatever headway makes of the bytes,
each backend must see exactly the requests headway answered, with the same bodies, and the client
one well-framed response per request (see test_desync.py).
"""

# Ends every request case: a request whose answer closes the connection. Its empty line first
# (which a server ignores before a request line) makes bytes a case leaves over a request line of
# their own, so the front refuses them rather than passing on a request with a made-up method.
END = b"\r\nGET /end HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
SMUGGLED = b"GET /SMUGGLED HTTP/1.1\r\nHost: a\r\n\r\n"


def post(*fields, body=b"", target=b"/post"):
    """A POST with exactly these field lines (bytes, without CRLF) and `body` after the head."""
    head = b"POST " + target + b" HTTP/1.1\r\nHost: a\r\n" + b"".join(line + b"\r\n" for line in fields)
    return head + b"\r\n" + body


def chunked(*fields, body=b"", target=b"/post"):
    return post(b"Transfer-Encoding: chunked", *fields, body=body, target=target)


REQUESTS = {
    # Both lengths: refused, whatever the order, spelling or value.
    "cl-te": post(b"Content-Length: 6", b"Transfer-Encoding: chunked", body=b"0\r\n\r\n" + SMUGGLED),
    "te-cl": post(b"Transfer-Encoding: chunked", b"Content-Length: 6", body=b"0\r\n\r\n" + SMUGGLED),
    "cl-te-zero": post(b"Content-Length: 0", b"Transfer-Encoding: chunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "cl-te-uppercase": post(b"CONTENT-LENGTH: 4", b"TRANSFER-ENCODING: CHUNKED", body=b"5\r\nhello\r\n0\r\n\r\n"),
    # Transfer-Encoding in its variants.
    "te-chunked": chunked(body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-chunked-caps": post(b"Transfer-Encoding: Chunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-two-fields": post(b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked",
                          body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-chunked-identity": post(b"Transfer-Encoding: chunked, identity", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-identity-chunked": post(b"Transfer-Encoding: identity, chunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-gzip-chunked": post(b"Transfer-Encoding: gzip, chunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-chunked-gzip": post(b"Transfer-Encoding: chunked, gzip", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-xchunked": post(b"Transfer-Encoding: xchunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-chunked-space": post(b"Transfer-Encoding: chunked ", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-tab-chunked": post(b"Transfer-Encoding:\tchunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-vertical-tab": post(b"Transfer-Encoding:\x0bchunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-empty": post(b"Transfer-Encoding: ", b"Content-Length: 5", body=b"hello"),
    "te-comma": post(b"Transfer-Encoding: ,chunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-space-before-colon": post(b"Transfer-Encoding : chunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-underscore": post(b"Transfer_Encoding: chunked", b"Content-Length: 5", body=b"hello"),
    "te-obs-fold": post(b"Transfer-Encoding:", b" chunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
    "te-http10": b"POST /post HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "te-quoted": post(b'Transfer-Encoding: "chunked"', body=b"5\r\nhello\r\n0\r\n\r\n"),
    # Content-Length in its variants.
    "cl": post(b"Content-Length: 5", body=b"hello"),
    "cl-twice-same": post(b"Content-Length: 5", b"Content-Length: 5", body=b"hello"),
    "cl-list-same": post(b"Content-Length: 5, 5", body=b"hello"),
    "cl-twice-different": post(b"Content-Length: 5", b"Content-Length: 3", body=b"hello"),
    "cl-list-different": post(b"Content-Length: 3, 5", body=b"hello"),
    "cl-plus": post(b"Content-Length: +5", body=b"hello"),
    "cl-minus": post(b"Content-Length: -5", body=b"hello"),
    "cl-hex": post(b"Content-Length: 0x5", body=b"hello"),
    "cl-leading-zeros": post(b"Content-Length: 005", body=b"hello"),
    "cl-space-inside": post(b"Content-Length: 5 5", body=b"hello"),
    "cl-trailing-letters": post(b"Content-Length: 5a", body=b"hello"),
    "cl-empty": post(b"Content-Length: ", body=b"hello"),
    "cl-overflow": post(b"Content-Length: 18446744073709551621", body=b"hello"),
    "cl-huge": post(b"Content-Length: 99999999999999999999999999", body=b"hello"),
    "cl-space-before-colon": post(b"Content-Length : 5", body=b"hello"),
    "cl-underscore": post(b"Content_Length: 5", body=b"hello"),
    "cl-obs-fold": post(b"Content-Length:", b" 5", body=b"hello"),
    "cl-smuggles-after-body": post(b"Content-Length: 5", body=b"hello" + SMUGGLED),
    "cl-body-is-a-request": post(b"Content-Length: " + str(len(SMUGGLED)).encode(), body=SMUGGLED),
    "get-with-body": b"GET /get HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    "head-with-body": b"HEAD /head HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    # Chunked bodies, well and badly made.
    "chunk-extension": chunked(body=b"5;name=value\r\nhello\r\n0\r\n\r\n"),
    "chunk-extension-quoted": chunked(body=b'5;name="a;b"\r\nhello\r\n0\r\n\r\n'),
    "chunk-extension-bare-cr": chunked(body=b"5;a\rb\r\nhello\r\n0\r\n\r\n"),
    "chunk-size-overflow": chunked(body=b"ffffffffffffffffff5\r\nhello\r\n0\r\n\r\n"),
    "chunk-size-overflow-wraps": chunked(body=b"10000000000000005\r\nhello\r\n0\r\n\r\n"),
    "chunk-size-hex-prefix": chunked(body=b"0x5\r\nhello\r\n0\r\n\r\n"),
    "chunk-size-negative": chunked(body=b"-5\r\nhello\r\n0\r\n\r\n"),
    "chunk-size-space": chunked(body=b"5 \r\nhello\r\n0\r\n\r\n"),
    "chunk-size-leading-space": chunked(body=b" 5\r\nhello\r\n0\r\n\r\n"),
    "chunk-size-underscore": chunked(body=b"0_5\r\nhello\r\n0\r\n\r\n"),
    "chunk-size-leading-zeros": chunked(body=b"0005\r\nhello\r\n0\r\n\r\n"),
    "chunk-data-longer": chunked(body=b"3\r\nhello\r\n0\r\n\r\n"),
    "chunk-data-shorter": chunked(body=b"8\r\nhello\r\n0\r\n\r\n"),
    "chunk-missing-crlf": chunked(body=b"5\r\nhello0\r\n\r\n"),
    "chunk-lf-only": chunked(body=b"5\nhello\n0\n\n"),
    "chunk-bare-cr-after-data": chunked(body=b"5\r\nhello\r0\r\n\r\n"),
    "chunk-last-without-crlf": chunked(body=b"5\r\nhello\r\n0\r\n"),
    "chunk-trailer": chunked(body=b"5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n"),
    "chunk-trailer-content-length": chunked(body=b"5\r\nhello\r\n0\r\nContent-Length: 50\r\n\r\n"),
    "chunk-trailer-not-a-field": chunked(body=b"5\r\nhello\r\n0\r\nnot a field\r\n\r\n"),
    "chunk-smuggles-after-last": chunked(body=b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "chunk-zero-then-data": chunked(body=b"0\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
    # Line endings, folds, NUL and other bytes no field may hold.
    "bare-lf-head": b"POST /post HTTP/1.1\nHost: a\nContent-Length: 5\n\nhello",
    "bare-cr-in-value": post(b"X-A: a\rContent-Length: 0", b"Content-Length: 5", body=b"hello"),
    "bare-cr-line-end": b"POST /post HTTP/1.1\r\nHost: a\rContent-Length: 5\r\n\r\nhello",
    "lf-cr-line-end": b"POST /post HTTP/1.1\r\nHost: a\n\rContent-Length: 5\r\n\r\nhello",
    "obs-fold": post(b"X-Folded: a", b" b", b"Content-Length: 5", body=b"hello"),
    "obs-fold-first-line": b"POST /post HTTP/1.1\r\n Host: a\r\nContent-Length: 5\r\n\r\nhello",
    "nul-in-value": post(b"X-A: a\x00b", b"Content-Length: 5", body=b"hello"),
    "nul-in-target": b"GET /a\x00b HTTP/1.1\r\nHost: a\r\n\r\n",
    "space-in-name": post(b"X A: b", b"Content-Length: 5", body=b"hello"),
    "control-in-name": post(b"X\x01A: b", b"Content-Length: 5", body=b"hello"),
    "no-colon": post(b"Content-Length 5", body=b"hello"),
    "del-in-value": post(b"X-A: a\x7fb", b"Content-Length: 5", body=b"hello"),
    # Request lines.
    "two-spaces": b"GET  /get HTTP/1.1\r\nHost: a\r\n\r\n",
    "tab-separator": b"GET\t/get HTTP/1.1\r\nHost: a\r\n\r\n",
    "trailing-space": b"GET /get HTTP/1.1 \r\nHost: a\r\n\r\n",
    "lowercase-version": b"GET /get http/1.1\r\nHost: a\r\n\r\n",
    "version-1-2": b"GET /get HTTP/1.2\r\nHost: a\r\n\r\n",
    "version-0-9": b"GET /get\r\nHost: a\r\n\r\n",
    "lowercase-method": b"get /get HTTP/1.1\r\nHost: a\r\n\r\n",
    "absolute-form": b"GET http://a/abs?x=1 HTTP/1.1\r\nHost: b\r\n\r\n",
    "absolute-form-userinfo": b"GET http://u@a/abs HTTP/1.1\r\nHost: a\r\n\r\n",
    "target-fragment": b"GET /frag#x HTTP/1.1\r\nHost: a\r\n\r\n",
    "target-angle-brackets": post(b"Content-Length: 5", body=b"hello", target=b"/api/pay<x>?a=1"),
    "target-utf8": "GET /caf\u00e9 HTTP/1.1\r\nHost: a\r\n\r\n".encode(),
    "target-percent": b"GET /a%2Fb%00c?d=%zz HTTP/1.1\r\nHost: a\r\n\r\n",
    "leading-empty-lines": b"\r\n\r\nGET /get HTTP/1.1\r\nHost: a\r\n\r\n",
    # Host.
    "no-host": b"GET /get HTTP/1.1\r\n\r\n",
    "two-hosts": b"GET /get HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "host-userinfo": b"GET /get HTTP/1.1\r\nHost: u@a\r\n\r\n",
    "host-space": b"GET /get HTTP/1.1\r\nHost: a b\r\n\r\n",
    # Expect and pipelining.
    "expect-continue": post(b"Expect: 100-continue", b"Content-Length: 5", body=b"hello"),
    "expect-other": post(b"Expect: 101-switch", b"Content-Length: 5", body=b"hello"),
    "pipelined": b"GET /one HTTP/1.1\r\nHost: a\r\n\r\n" + post(b"Content-Length: 5", body=b"hello")
    + b"GET /three HTTP/1.1\r\nHost: a\r\n\r\n",
    "pipelined-chunked": chunked(body=b"5\r\nhello\r\n0\r\n\r\n") + chunked(body=b"3\r\nbye\r\n0\r\n\r\n"),
    "connection-close-then-more": b"GET /one HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" + SMUGGLED,
    "upgrade-not-websocket": b"GET /up HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n",
}

# What an app may claim against its own body, through each backend's own server (`/odd/<name>`
# of the echo apps): the client must still get one well-framed response, and the next request
# its own answer.
ODD = ["longer", "shorter", "no-content", "both-lengths"]

OK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

# Malformed responses a `--cmd` worker (apps/raw_worker.py) sends as it is: (bytes, whether it
# closes the connection after them, what the client may get: a 502, or that body whole).
RESPONSES = {
    "both-lengths": (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\nhello\r\n0\r\n\r\n", False, {502, b"hello"}),
    "both-lengths-short": (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
                           b"5\r\nhello\r\n0\r\n\r\n", False, {502, b"hello"}),
    "bare-lf-in-value": (b"HTTP/1.1 200 OK\r\nX-A: a\nSet-Cookie: evil=1\r\nContent-Length: 5\r\n\r\nhello",
                         False, {502}),
    "bare-lf-line-ends": (b"HTTP/1.1 200 OK\nContent-Length: 5\n\nhello", False, {502, b"hello"}),
    "bare-cr-in-value": (b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 5\r\n\r\nhello", False, {502}),
    "nul-in-value": (b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 5\r\n\r\nhello", False, {502}),
    "obs-fold": (b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 5\r\n\r\nhello", False, {502, b"hello"}),
    "space-before-colon": (b"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello", False, {502}),
    "unsolicited-101": (b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
                        False, {502}),
    "no-content-with-length": (b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello", False, {502}),
    "no-content-chunked": (b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", False, {502}),
    "not-modified-chunked": (b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                             False, {502}),
    "body-longer-than-length": (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nhello", False, {502, b"hel"}),
    "body-shorter-than-length": (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", True, {502, "cut"}),
    "two-lengths": (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 3\r\n\r\nhello", False, {502}),
    "length-not-a-number": (b"HTTP/1.1 200 OK\r\nContent-Length: 5a\r\n\r\nhello", False, {502}),
    "length-negative": (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello", False, {502}),
    "bad-chunk-size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
                       False, {502, "cut"}),
    "chunk-size-overflow": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"10000000000000005\r\nhello\r\n0\r\n\r\n", False, {502, "cut"}),
    "transfer-coding-unknown": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhello", True, {502, b"hello"}),
    "status-code-long": (b"HTTP/1.1 2000 OK\r\nContent-Length: 5\r\n\r\nhello", False, {502}),
    "status-line-garbage": (b"HTPT/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", False, {502}),
    "interim-then-final": (b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                           b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", False, {b"hello"}),
    "close-delimited": (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello", True, {b"hello"}),
    "http10-close-delimited": (b"HTTP/1.0 200 OK\r\n\r\nhello", True, {b"hello"}),
    "nothing-then-close": (b"", True, {502}),
}

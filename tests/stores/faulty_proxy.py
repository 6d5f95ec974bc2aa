"""A pass-through HTTP proxy in front of the tests' S3 server that can answer S3's 503 ``SlowDown`` to the
writes of data files, as S3 does when a prefix is throttled.

Requests go through byte for byte, their ``Host`` header too, so their AWS signatures still hold at the
server behind. Test-only fault injection: a test switches the fault on and off (``FaultyProxy.failing``).
The proxy runs in a process of its own: ``deltalake`` keeps the GIL while it waits for some answers, so a
proxy thread in the test's process would never give them.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SLOW_DOWN = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
    b"<Message>Please reduce your request rate.</Message></Error>"
)
# The proxy's own path, never a bucket's: GET tells how many writes it refused, PUT sets the fault.
CONTROL = "/--fault--"
# Hop-by-hop headers a proxy does not pass on.
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "content-length"}


@dataclass(frozen=True)
class FaultyProxy:
    """The proxy's endpoint."""

    url: str

    @property
    def refused(self) -> int:
        """The writes it has answered 503 so far."""
        with urllib.request.urlopen(self.url + CONTROL, timeout=10) as answer:
            return int(json.load(answer)["refused"])

    def failing(self, on: bool) -> None:
        """While on, every PUT outside ``_delta_log`` gets 503 ``SlowDown``."""
        request = urllib.request.Request(self.url + CONTROL, data=b"1" if on else b"0", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()


@contextmanager
def faulty_proxy(server_url: str) -> Iterator[FaultyProxy]:
    """A proxy on a free port of 127.0.0.1 forwarding to ``server_url`` until the block ends."""
    process = subprocess.Popen([sys.executable, __file__, server_url], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield FaultyProxy(process.stdout.readline().strip())
    finally:
        process.terminate()
        process.wait(timeout=10)


def _serve(server_url: str) -> None:
    upstream = urlsplit(server_url)
    state = {"failing": False, "refused": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _forward(self) -> None:
            body = self._body()
            if self.path == CONTROL:
                if self.command == "PUT":
                    state["failing"] = body == b"1"
                return self._answer(200, {}, json.dumps(state).encode())
            if state["failing"] and self.command == "PUT" and "/_delta_log/" not in self.path:
                state["refused"] += 1
                return self._answer(503, {"Content-Type": "application/xml"}, SLOW_DOWN)
            connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            headers["Content-Length"] = str(len(body))
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            kept = {k: v for k, v in response.getheaders() if k.lower() not in _HOP}
            # A HEAD's length is the object's, which the reader takes from it; the body is empty.
            length = response.getheader("Content-Length", "0") if self.command == "HEAD" else None
            self._answer(response.status, kept, b"" if self.command == "HEAD" else data, length=length)
            connection.close()

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", ""):
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _answer(
            self, status: int, headers: dict[str, str], data: bytes, *, length: str | None = None
        ) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", length if length is not None else str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{proxy.server_address[1]}", flush=True)
    proxy.serve_forever()


if __name__ == "__main__":
    _serve(sys.argv[1])

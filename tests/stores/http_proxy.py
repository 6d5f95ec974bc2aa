"""A pass-through HTTP proxy, in a process of its own, in front of a test's storage server; the proxies built
on it (``faulty_proxy.py``, ``azurite_listing.py``, ``gcs_xml_api.py``) answer some requests themselves or
mend some answers.

Requests go through byte for byte, their ``Host`` header too, so their signatures still hold at the server
behind (unless a server that checks no signature wants its own name there). The proxy runs in a process of
its own: ``deltalake`` keeps the GIL while it waits for some answers, so a proxy thread in the test's process
would never give them.
"""

from __future__ import annotations

import http.client
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

_REPOSITORY = Path(__file__).resolve().parents[2]
# Hop-by-hop headers a proxy does not pass on.
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "content-length"}


@contextmanager
def proxy_process(module: str, server_url: str, log: Path | None = None) -> Iterator[str]:
    """The proxy of ``module`` (one calling ``serve`` when run) on a free port of 127.0.0.1, forwarding to
    ``server_url`` until the block ends, writing each request's method and path to ``log`` if given; its
    URL."""
    command = [sys.executable, "-m", module, server_url, *([str(log)] if log else [])]
    process = subprocess.Popen(command, cwd=_REPOSITORY, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


class ForwardingHandler(BaseHTTPRequestHandler):
    """Forwards every request to ``upstream``; a proxy overrides ``answer_here`` and ``mend``."""

    protocol_version = "HTTP/1.1"
    upstream: SplitResult
    request_log: Path | None = None
    # Whether the server behind gets the client's Host header (signed by S3 and Azure clients) or its own.
    keeps_host = True
    _logging = threading.Lock()

    def answer_here(self, body: bytes) -> tuple[int, dict[str, str], bytes] | None:
        """The proxy's own answer to this request, or None to forward it."""
        return None

    def mend(self, status: int, data: bytes) -> tuple[int, bytes]:
        """The status and body to give for the server's answer (``status``, ``data``) to this request."""
        return status, data

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _forward(self) -> None:
        body = self._body()
        if self.request_log is not None:
            with self._logging, self.request_log.open("a") as log:
                log.write(f"{self.command} {self.path}\n")
        if (own := self.answer_here(body)) is not None:
            return self._answer(*own)
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["Content-Length"] = str(len(body))
        if not self.keeps_host:
            headers = {k: v for k, v in headers.items() if k.lower() != "host"}
            headers["Host"] = self.upstream.netloc
        connection.request(self.command, self.path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        kept = {k: v for k, v in response.getheaders() if k.lower() not in _HOP}
        # A HEAD's length is the object's, which the reader takes from it; the body is empty.
        length = response.getheader("Content-Length", "0") if self.command == "HEAD" else None
        status, data = self.mend(response.status, data)
        self._answer(status, kept, b"" if self.command == "HEAD" else data, length=length)
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


def serve(handler: type[ForwardingHandler], arguments: list[str]) -> None:
    """Serve ``handler`` in front of the server URL of ``arguments`` (then a request log's path, if any) on a
    free port, printing the proxy's URL first."""
    handler.upstream = urlsplit(arguments[0])
    handler.request_log = Path(arguments[1]) if len(arguments) > 1 else None
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    print(f"http://127.0.0.1:{proxy.server_address[1]}", flush=True)
    proxy.serve_forever()

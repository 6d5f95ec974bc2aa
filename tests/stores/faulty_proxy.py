"""A proxy in front of the tests' S3 server (``http_proxy.py``) that can answer S3's 503 ``SlowDown`` to the
writes of data files, as S3 does when a prefix is throttled.

Test-only fault injection: a test switches the fault on and off (``FaultyProxy.failing``).
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from tests.stores.http_proxy import ForwardingHandler, proxy_process, serve

SLOW_DOWN = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
    b"<Message>Please reduce your request rate.</Message></Error>"
)
# The proxy's own path, never a bucket's: GET tells how many writes it refused, PUT sets the fault.
CONTROL = "/--fault--"


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
    with proxy_process(__name__, server_url) as url:
        yield FaultyProxy(url)


class _Throttling(ForwardingHandler):
    state: ClassVar[dict[str, Any]] = {"failing": False, "refused": 0}

    def answer_here(self, body: bytes) -> tuple[int, dict[str, str], bytes] | None:
        state = self.state
        if self.path == CONTROL:
            if self.command == "PUT":
                state["failing"] = body == b"1"
            return 200, {}, json.dumps(state).encode()
        if state["failing"] and self.command == "PUT" and "/_delta_log/" not in self.path:
            state["refused"] += 1
            return 503, {"Content-Type": "application/xml"}, SLOW_DOWN
        return None


if __name__ == "__main__":
    serve(_Throttling, sys.argv[1:])

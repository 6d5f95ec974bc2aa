"""Headless Chromium driven over its DevTools pipe: a test waits for what the page shows, not for a clock.

Chromium's one-shot ``--dump-dom`` / ``--screenshot`` with ``--virtual-time-budget`` waits out a budget of
the page's own time, and that time stands still while any request is pending: on a CI machine Airflow's
React UI held it past six minutes. Here a test names the element it waits for, with a deadline in real
time, and the browser resolves no host name (only the loopback address is reachable), so a page's
reference to the internet fails at once instead of hanging on the machine's DNS.

The DevTools protocol runs over two pipes (Chromium reads commands on fd 3 and answers on fd 4, each
message JSON ended by a NUL byte), so no client library is needed.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

# How long Chromium may take to answer one command (a screenshot of a loaded 2-core machine's page).
ANSWER_SECONDS = 120


class BrowserError(AssertionError):
    """The browser failed a command, or what a test waited for did not show in time."""


class Browser:
    """One headless Chromium with one page of ``width`` by ``height`` CSS pixels."""

    def __init__(self, chromium: str, profile: Path, *, width: int, height: int) -> None:
        commands_read, self._commands = os.pipe()
        self._answers, answers_write = os.pipe()

        def on_fds_3_and_4() -> None:
            # Raised above 10 first, so that placing one cannot overwrite the other.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands_read, answers_write)]
            for target, fd in zip((3, 4), high, strict=True):
                os.dup2(fd, target)

        self._process = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",  # tests may run as root, where Chromium's sandbox refuses to start
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=on_fds_3_and_4,
        )
        os.close(commands_read)
        os.close(answers_write)
        self._buffer = b""
        self._last_id = 0
        target = self._command("Target.createTarget", url="about:blank")["targetId"]
        self._session = self._command("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.resize(width=width, height=height)

    def resize(self, *, width: int, height: int) -> None:
        """Make the page ``width`` by ``height`` CSS pixels, as a window of that size shows it."""
        self._command(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
            session=True,
        )

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self._process.kill()
        self._process.wait(timeout=30)
        os.close(self._commands)
        os.close(self._answers)

    def open(self, url: str, *, until: str, what: str, timeout: float) -> None:
        """Load ``url`` and wait until the JavaScript expression ``until`` is true (``what`` names it)."""
        failed = self._command("Page.navigate", url=url, session=True).get("errorText")
        if failed:
            raise BrowserError(f"Chromium could not load {url}: {failed}")
        self.wait_until(until=until, what=what, timeout=timeout)

    def wait_until(self, *, until: str, what: str, timeout: float) -> None:
        """Wait until the JavaScript expression ``until`` is true in the page (``what`` names it)."""
        deadline = time.monotonic() + timeout
        while not self.evaluate(until):
            if time.monotonic() > deadline:
                shown = self.evaluate(
                    "location.href + ': ' + (document.body ? document.body.innerText.slice(0, 500) : '')"
                )
                raise BrowserError(f"The page did not show {what} within {timeout:.0f} s; it shows {shown!r}")
            time.sleep(0.25)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self._command("Runtime.evaluate", expression=expression, returnByValue=True, session=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} failed in the page: {result['exceptionDetails']['text']}")
        return result["result"].get("value")

    def html(self) -> str:
        """The page's DOM as HTML, as ``--dump-dom`` prints it."""
        return str(self.evaluate("document.documentElement.outerHTML"))

    def screenshot(self, path: Path) -> None:
        """The page as painted, a PNG at ``path``."""
        data = self._command("Page.captureScreenshot", format="png", session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def _command(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        self._last_id += 1
        message: dict[str, Any] = {"id": self._last_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + ANSWER_SECONDS
        while True:  # events arrive between the answers; the tests poll instead of reading them
            answer = self._next_message(method, deadline)
            if answer.get("id") == self._last_id:
                if "error" in answer:
                    raise BrowserError(f"Chromium refused {method}: {answer['error'].get('message')}")
                return dict(answer["result"])

    def _next_message(self, method: str, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._answers], [], [], left)[0]:
                raise BrowserError(f"Chromium did not answer {method} within {ANSWER_SECONDS} s")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium exited (code {self._process.poll()}) before answering {method}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(message))

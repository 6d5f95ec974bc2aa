"""A Google Cloud Storage emulator on 127.0.0.1 for the tests: fake-gcs-server (a Go module), holding its
objects in memory, behind a proxy that gives it the XML API's writes and listings (``gcs_xml_api.py``).

fake-gcs-server keeps a conditional create atomic (``ifGenerationMatch=0``: of racing puts exactly one wins,
``test_conditional_put.py``). It is built once per machine by ``go install`` into a cache (about two minutes
and 1 GB of Go's module and build caches, kept there too), and it checks no credential: clients reach it
unauthenticated, as Google's clients reach an emulator named by ``STORAGE_EMULATOR_HOST``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_deltamerge.hooks.cloud_credentials import GOOGLE_EMULATOR, with_google_emulator
from tests.stores.http_proxy import proxy_process
from tests.stores.server_process import CACHE, free_port, installed_once, server_process, wait_until_up

FAKE_GCS_SERVER = "github.com/fsouza/fake-gcs-server@v1.56.1"
PROJECT = "deltamerge-tests"


@dataclass(frozen=True)
class GcsServer:
    """A running emulator: its endpoint (the proxy's); with ``log`` (an emulator started with
    ``log_requests``), the requests it has served so far."""

    url: str
    log: Path | None = None

    def requests(self) -> list[tuple[str, str]]:
        """(method, URL) of every request served so far, in order, as the proxy in front logged them."""
        assert self.log is not None, "start the emulator with log_requests=True"
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [(method, self.url + path) for method, path in (line.split(" ", 1) for line in lines)]

    def connection(self) -> dict[str, object]:
        """A ``google_cloud_platform`` connection to this emulator: its ``env`` extra names it by the variable
        Google's own clients read."""
        return {"conn_type": "google_cloud_platform", "extra": {"env": {GOOGLE_EMULATOR: self.url}}}

    def environment(self) -> dict[str, str]:
        """The variables ``deltalake``, ``obstore`` and a merge job get from such a connection."""
        return with_google_emulator({GOOGLE_EMULATOR: self.url})

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name``; its ``gs://`` URI."""
        request = urllib.request.Request(
            f"{self.url}/storage/v1/b?project={PROJECT}",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=30).close()
        return f"gs://{name}"


def fake_gcs_server() -> Path:
    """fake-gcs-server's command, built by ``go install`` into the cache on first use."""
    folder = CACHE / FAKE_GCS_SERVER.rsplit("/", 1)[1].replace("@", "-")
    go = {"GOBIN": str(folder), "GOPATH": str(CACHE / "go"), "GOFLAGS": "-modcacherw"}
    install = ["env", *(f"{name}={value}" for name, value in go.items()), "go", "install", FAKE_GCS_SERVER]
    return installed_once(folder / "fake-gcs-server", install, FAKE_GCS_SERVER)


@contextmanager
def gcs_server(folder: Path, *, log_requests: bool = False) -> Iterator[GcsServer]:
    """fake-gcs-server on a free port of 127.0.0.1, keeping its objects in memory and its log in ``folder``,
    behind the XML API proxy, until the block ends; ``log_requests`` has the proxy log every request
    (``GcsServer.requests``)."""
    port = free_port()
    log = folder / "fake-gcs-server.log"
    url = f"http://127.0.0.1:{port}"
    command = [
        str(fake_gcs_server()),
        *("-scheme", "http", "-host", "127.0.0.1", "-port", str(port)),
        *("-external-url", url, "-public-host", f"127.0.0.1:{port}"),
        # In memory: its file-system backend cannot keep a folder's marker object ("t/_change_data/"), which
        # the GCS connector makes before it moves a file into a new folder.
        *("-backend", "memory", "-log-level", "warn"),
    ]
    with server_process(command, log) as server:
        wait_until_up(
            server,
            log,
            "fake-gcs-server",
            lambda: urllib.request.urlopen(f"{url}/storage/v1/b", timeout=2).close(),
        )
        requests = folder / "requests.log" if log_requests else None
        with proxy_process("tests.stores.gcs_xml_api", url, requests) as proxy_url:
            yield GcsServer(proxy_url, log=requests)

"""Azure's own storage emulator on 127.0.0.1 for the tests: Azurite's Blob service (npm), serving a folder,
behind a proxy that gives its listings Azure's ``startFrom`` (``azurite_listing.py``).

Azurite keeps a conditional create atomic (``If-None-Match: *``: of racing puts exactly one wins,
``test_azure_conditional_put.py``). It is installed once per machine by npm into a cache, and signs with the
emulator's one well-known account and key, which Microsoft publishes for it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.stores.http_proxy import proxy_process
from tests.stores.server_process import CACHE, free_port, installed_once, server_process, wait_until_up

AZURITE = "azurite@3.35.0"
ACCOUNT = "devstoreaccount1"
# The emulator's published development key: no secret of anyone's.
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass(frozen=True)
class AzureServer:
    """A running emulator: its Blob endpoint (the proxy's), account and key; with ``log`` (an emulator
    started with ``log_requests``), the requests it has served so far."""

    url: str
    account: str = ACCOUNT
    key: str = ACCOUNT_KEY
    log: Path | None = None

    def requests(self) -> list[tuple[str, str]]:
        """(method, URL) of every request served so far, in order, as the proxy in front logged them."""
        assert self.log is not None, "start the emulator with log_requests=True"
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [(method, self.url + path) for method, path in (line.split(" ", 1) for line in lines)]

    @property
    def endpoint(self) -> str:
        """The account's Blob endpoint, as a connection string's ``BlobEndpoint`` gives it."""
        return f"{self.url}/{self.account}"

    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={self.key};"
            f"BlobEndpoint={self.endpoint};"
        )

    def environment(self) -> dict[str, str]:
        """The variables ``deltalake`` and ``obstore`` read to reach this emulator, as a ``wasb``
        connection's."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": self.account,
            "AZURE_STORAGE_ACCOUNT_KEY": self.key,
            "AZURE_STORAGE_ENDPOINT": self.endpoint,
            "AZURE_ALLOW_HTTP": "true",
        }

    def create_container(self, name: str) -> str:
        """Create container ``name``; its ``abfs://`` URI as users write it (``abfss://`` is TLS only)."""
        from azure.storage.blob import BlobServiceClient

        BlobServiceClient.from_connection_string(self.connection_string()).create_container(name)
        return f"abfs://{name}@{self.account}.dfs.core.windows.net"


def azurite_blob() -> Path:
    """Azurite's Blob service command, installed by npm into the cache on first use."""
    folder = CACHE / AZURITE.replace("@", "-")
    install = ["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", AZURITE]
    return installed_once(folder / "node_modules" / ".bin" / "azurite-blob", install, AZURITE)


@contextmanager
def azure_server(folder: Path, *, log_requests: bool = False) -> Iterator[AzureServer]:
    """Azurite's Blob service on a free port of 127.0.0.1, keeping its blobs in ``folder``, behind the listing
    proxy, until the block ends; ``log_requests`` has the proxy log every request
    (``AzureServer.requests``)."""
    port = free_port()
    log = folder / "azurite.log"
    command = [
        str(azurite_blob()),
        *("--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(folder / "data")),
        # Without --disableTelemetry Azurite reports to an outside host as it starts.
        *("--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"),
    ]
    with server_process(command, log) as server:
        wait_until_up(
            server, log, "Azurite", lambda: socket.create_connection(("127.0.0.1", port), 2).close()
        )
        requests = folder / "requests.log" if log_requests else None
        with proxy_process("tests.stores.azurite_listing", f"http://127.0.0.1:{port}", requests) as url:
            yield AzureServer(url, log=requests)

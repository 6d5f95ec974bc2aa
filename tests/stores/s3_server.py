"""A real S3-compatible server on 127.0.0.1 for the tests: s3proxy (Maven Central), serving a folder.

s3proxy keeps S3's conditional create atomic: an object is published with a hard link, which fails where the
key exists, so of racing ``If-None-Match: *`` puts exactly one wins (``test_s3_conditional_put.py`` shows it,
and that the race is seen where a server ignores the header). moto's server was the other candidate; it
checks and then writes without a lock, and let two racing creates win.

The server's jar (one with its dependencies) is fetched once per machine by Maven into a cache; every
request must be signed (AWS Signature V2 or V4) with the server's one key pair.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests.stores.server_process import CACHE, free_port, installed_once, server_process, wait_until_up

S3PROXY = "org.gaul:s3proxy:4.1.0:jar:jar-with-dependencies"
JAR_NAME = "s3proxy-4.1.0-jar-with-dependencies.jar"
KEY_PAIR = ("deltamerge-tests", "deltamerge-tests-secret")
REGION = "us-east-1"
# A request as s3proxy logs it at debug level: "...{GET@5a2b http://127.0.0.1:4711/lake/t/x HTTP/1.1}...".
REQUEST_LINE = re.compile(r"S3ProxyHandler:\d+ .*?\{(GET|PUT|HEAD|DELETE|POST)@\w+ (\S+) HTTP/")
# A small heap and the quick JIT: the server serves small files to tests on a 2-core machine.
SERVER_JVM = ("java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


@dataclass(frozen=True)
class S3Server:
    """A running server: its endpoint and the key pair it accepts; with ``log`` (a server started with
    ``log_requests``), the requests it has served so far."""

    url: str
    data: Path
    key_pair: tuple[str, str] = KEY_PAIR
    log: Path | None = None

    def requests(self) -> list[tuple[str, str]]:
        """(method, URL) of every request served so far, in order, from the server's debug log."""
        assert self.log is not None, "start the server with log_requests=True"
        return REQUEST_LINE.findall(self.log.read_text(errors="replace"))

    def environment(self) -> dict[str, str]:
        """The variables ``deltalake``, ``obstore``, pyarrow and S3A read to reach this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.key_pair[0],
            "AWS_SECRET_ACCESS_KEY": self.key_pair[1],
            "AWS_ENDPOINT_URL": self.url,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` (nothing if it exists); its ``s3://`` URI."""
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=self.key_pair[0],
            aws_secret_access_key=self.key_pair[1],
            region_name=REGION,
            config=Config(s3={"addressing_style": "path"}),
        )
        if name not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
            client.create_bucket(Bucket=name)
        return f"s3://{name}"


def s3proxy_jar() -> Path:
    """s3proxy's jar, fetched by Maven into the cache on first use."""
    fetch = ["mvn", "-B", "-q", "dependency:copy", f"-Dartifact={S3PROXY}", f"-DoutputDirectory={CACHE}"]
    return installed_once(CACHE / JAR_NAME, [*fetch, f"-Dmaven.repo.local={CACHE / 'm2'}"], S3PROXY)


@contextmanager
def s3_server(folder: Path, *, log_requests: bool = False) -> Iterator[S3Server]:
    """s3proxy on a free port of 127.0.0.1, its buckets the folders under ``folder / "data"``, until the
    block ends; ``log_requests`` has it log every request it serves (``S3Server.requests``)."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings = folder / "s3proxy.conf"
    settings.write_text(
        f"s3proxy.endpoint={url}\n"
        "s3proxy.authorization=aws-v2-or-v4\n"
        f"s3proxy.identity={KEY_PAIR[0]}\n"
        f"s3proxy.credential={KEY_PAIR[1]}\n"
        "jclouds.provider=filesystem\n"
        f"jclouds.filesystem.basedir={data}\n"
    )
    log = folder / "s3proxy.log"
    command = [*SERVER_JVM, "-jar", str(s3proxy_jar()), "--properties", str(settings)]
    # s3proxy's logback reads its level from the environment; at debug it logs each request's line.
    env = {**os.environ, "LOG_LEVEL": "debug" if log_requests else "info"}
    with server_process(command, log, env=env) as server:
        # An unsigned request is refused (an HTTPError): the server answers.
        wait_until_up(server, log, "s3proxy", lambda: _answer(url))
        yield S3Server(url, data, log=log if log_requests else None)


def _answer(url: str) -> None:
    with suppress(urllib.error.HTTPError):
        urllib.request.urlopen(url, timeout=2).close()

"""A local stand-in for the cloud boundary: an S3 endpoint serving a folder (reads, and writes with S3's
conditional create), and STS's AssumeRole.

It admits only requests signed (AWS Signature V4, the signature recomputed here) with the one key pair it
was given, or with the temporary pair it handed out for an assumed role, whose session token must come
along; everything else gets 403. So a test that reads a Delta table through it shows which credentials the
reader really used, with the real ``deltalake`` client and the real Amazon provider's hook on the other
side.
"""

from __future__ import annotations

import email.utils
import hashlib
import hmac
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlsplit
from xml.sax.saxutils import escape, unescape

ROLE_KEY = ("ASIAROLESESSION", "role-secret-key", "role-session-token")


@dataclass
class S3Store:
    """``bucket``'s objects are the files under ``root``; ``url`` is the endpoint. What it admitted is read
    back from ``journal``, one line per event, written by the server's own process."""

    root: Path
    bucket: str
    key_pair: tuple[str, str]
    journal: Path
    url: str = ""
    # False: a store that ignores If-None-Match and overwrites, as some S3-compatible servers do.
    conditional: bool = True

    def _events(self, kind: str) -> list[str]:
        lines = self.journal.read_text().splitlines() if self.journal.exists() else []
        return [line.split(" ", 1)[1] for line in lines if line.startswith(f"{kind} ")]

    @property
    def assumed_roles(self) -> list[str]:
        return self._events("role")

    @property
    def admitted(self) -> list[str]:
        """The access key id of each admitted S3 request."""
        return self._events("admit")

    def record(self, kind: str, value: str) -> None:
        with self.journal.open("a") as journal:
            journal.write(f"{kind} {value}\n")

    def secret_of(self, key_id: str, token: str | None) -> str | None:
        if key_id == self.key_pair[0] and token is None:
            return self.key_pair[1]
        if self.assumed_roles and (key_id, token) == (ROLE_KEY[0], ROLE_KEY[2]):
            return ROLE_KEY[1]
        return None


@contextmanager
def s3_store(
    root: Path, *, bucket: str, key_pair: tuple[str, str], conditional: bool = True
) -> Iterator[S3Store]:
    """Serve ``root`` as ``bucket`` on 127.0.0.1 while the block runs.

    The server runs in a process of its own: ``deltalake`` keeps the GIL while it waits for some answers,
    so a server thread in the reader's process would never get to give them.
    """
    journal = root.parent / f"{bucket}-s3-journal.txt"
    server = subprocess.Popen(
        [sys.executable, __file__, str(root), bucket, *key_pair, str(journal), str(conditional)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        store = S3Store(root, bucket, key_pair, journal, url=url, conditional=conditional)
        yield store
    finally:
        server.terminate()
        server.wait(timeout=10)


def _serve(root: str, bucket: str, key_id: str, secret: str, journal: str, conditional: str) -> None:
    store = S3Store(Path(root), bucket, (key_id, secret), Path(journal), conditional=conditional == "True")
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"store": store}))
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


class _Handler(BaseHTTPRequestHandler):
    store: S3Store

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: pytest shows failures by assertion, not by access log

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if urlsplit(self.path).query == "delete":
            return self._delete_objects(body)
        if not self._signed_by_key_pair(body, service="sts"):
            return self._reply(403, b"<Error><Code>InvalidClientTokenId</Code></Error>")
        form = dict(parse_qsl(body.decode()))
        if form.get("Action") != "AssumeRole":
            return self._reply(400, b"<Error><Code>InvalidAction</Code></Error>")
        self.store.record("role", form["RoleArn"])
        key_id, secret, token = ROLE_KEY
        self._reply(
            200,
            (
                '<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>'
                f"<Credentials><AccessKeyId>{key_id}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>"
                f"<SessionToken>{token}</SessionToken><Expiration>2999-01-01T00:00:00Z</Expiration>"
                f"</Credentials><AssumedRoleUser><Arn>{escape(form['RoleArn'])}/s</Arn>"
                "<AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser></AssumeRoleResult>"
                "</AssumeRoleResponse>"
            ).encode(),
        )

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def do_PUT(self) -> None:
        """PutObject, with S3's conditional create: ``If-None-Match: *`` on an existing key is 412."""
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key_id = self._s3_signer()
        claimed = self.headers.get("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
        if key_id is None or claimed not in ("UNSIGNED-PAYLOAD", hashlib.sha256(body).hexdigest()):
            return self._reply(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>")
        self.store.record("admit", key_id)
        bucket, _, key = urlsplit(self.path).path.lstrip("/").partition("/")
        if bucket != self.store.bucket:
            return self._reply(404, b"<Error><Code>NoSuchBucket</Code></Error>")
        path = self.store.root / unquote(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.{threading.get_ident()}.put")
        staged.write_bytes(body)
        try:
            if self.headers.get("If-None-Match") == "*" and self.store.conditional:
                try:
                    os.link(staged, path)  # atomic: fails if the key exists, as S3's conditional write does
                except FileExistsError:
                    return self._reply(412, b"<Error><Code>PreconditionFailed</Code></Error>")
            else:
                os.replace(staged, path)
        finally:
            staged.unlink(missing_ok=True)
        self._reply(200, b"", {"ETag": f'"{path.stat().st_mtime_ns}"'})

    def _delete_objects(self, body: bytes) -> None:
        """DeleteObjects: every ``<Key>`` of the request deleted, each reported deleted."""
        if self._s3_signer() is None:
            return self._reply(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>")
        keys = [unescape(text) for text in re.findall(r"<Key>(.*?)</Key>", body.decode())]
        for key in keys:
            (self.store.root / key).unlink(missing_ok=True)
        deleted = "".join(f"<Deleted><Key>{escape(key)}</Key></Deleted>" for key in keys)
        self._reply(200, f"<DeleteResult>{deleted}</DeleteResult>".encode())

    def do_DELETE(self) -> None:
        """DeleteObject: 204 whether or not the key was there, as S3 answers."""
        if self._s3_signer() is None:
            return self._reply(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>")
        bucket, _, key = urlsplit(self.path).path.lstrip("/").partition("/")
        if bucket != self.store.bucket:
            return self._reply(404, b"<Error><Code>NoSuchBucket</Code></Error>")
        (self.store.root / unquote(key)).unlink(missing_ok=True)
        self._reply(204, b"")

    def do_GET(self, *, head: bool = False) -> None:
        key_id = self._s3_signer()
        if key_id is None:
            return self._reply(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>")
        self.store.record("admit", key_id)
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        bucket, _, key = url.path.lstrip("/").partition("/")
        if bucket != self.store.bucket:
            return self._reply(404, b"<Error><Code>NoSuchBucket</Code></Error>")
        if query.get("list-type") == "2":
            return self._reply(200, self._listing(query))
        path = self.store.root / unquote(key)
        if not path.is_file():
            return self._reply(404, b"<Error><Code>NoSuchKey</Code></Error>")
        data = path.read_bytes()
        status, headers = 200, {"Last-Modified": _http_date(path), "ETag": f'"{path.stat().st_mtime_ns}"'}
        if (wanted := self.headers.get("Range")) and not head:
            start, _, end = wanted.removeprefix("bytes=").partition("-")
            first = int(start) if start else len(data) - int(end)
            last = int(end) if start and end else len(data) - 1
            headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
            status, data = 206, data[first : last + 1]
        self._reply(status, b"" if head else data, headers, length=len(data))

    def _listing(self, query: dict[str, str]) -> bytes:
        prefix, after = query.get("prefix", ""), query.get("start-after", "")
        delimiter = query.get("delimiter")
        keys = sorted(
            p.relative_to(self.store.root).as_posix() for p in self.store.root.rglob("*") if p.is_file()
        )
        contents, prefixes = [], set()
        for key in keys:
            if not key.startswith(prefix) or key <= after:
                continue
            rest = key[len(prefix) :]
            if delimiter and delimiter in rest:
                prefixes.add(prefix + rest.split(delimiter, 1)[0] + delimiter)
                continue
            path = self.store.root / key
            contents.append(
                f"<Contents><Key>{escape(key)}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
                f'<ETag>"{path.stat().st_mtime_ns}"</ETag><Size>{path.stat().st_size}</Size>'
                "<StorageClass>STANDARD</StorageClass></Contents>"
            )
        common = "".join(
            f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in sorted(prefixes)
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>{self.store.bucket}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount><MaxKeys>1000</MaxKeys>"
            f"<IsTruncated>false</IsTruncated>{''.join(contents)}{common}</ListBucketResult>"
        ).encode()

    def _s3_signer(self) -> str | None:
        """The access key id that signed this S3 request, if its signature is right."""
        token = self.headers.get("x-amz-security-token")
        key_id = self._key_id()
        secret = self.store.secret_of(key_id, token) if key_id else None
        payload_hash = self.headers.get("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
        return key_id if secret and self._signature_matches(secret, payload_hash, "s3") else None

    def _signed_by_key_pair(self, body: bytes, *, service: str) -> bool:
        key_id, secret = self.store.key_pair
        return self._key_id() == key_id and self._signature_matches(
            secret, hashlib.sha256(body).hexdigest(), service
        )

    def _key_id(self) -> str | None:
        authorization = self.headers.get("Authorization", "")
        credential = authorization.partition("Credential=")[2].partition(",")[0]
        return credential.split("/")[0] or None

    def _signature_matches(self, secret: str, payload_hash: str, service: str) -> bool:
        """Recompute the request's AWS Signature V4 with ``secret`` and compare."""
        authorization = self.headers.get("Authorization", "")
        fields = dict(
            part.strip().split("=", 1) for part in authorization.removeprefix("AWS4-HMAC-SHA256 ").split(",")
        )
        _, date, region, signed_service, _ = fields["Credential"].split("/")
        if signed_service != service:
            return False
        signed = fields["SignedHeaders"].split(";")
        url = urlsplit(self.path)
        query = sorted(parse_qsl(url.query, keep_blank_values=True))
        canonical = "\n".join(
            [
                self.command,
                url.path or "/",
                "&".join(f"{_quote(k)}={_quote(v)}" for k, v in query),
                "".join(f"{h}:{' '.join((self.headers.get(h) or '').split())}\n" for h in signed),
                fields["SignedHeaders"],
                payload_hash,
            ]
        )
        scope = f"{date}/{region}/{service}/aws4_request"
        to_sign = "\n".join(
            [
                "AWS4-HMAC-SHA256",
                self.headers.get("x-amz-date", ""),
                scope,
                hashlib.sha256(canonical.encode()).hexdigest(),
            ]
        )
        key = f"AWS4{secret}".encode()
        for part in (date, region, service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, fields.get("Signature", ""))

    def _reply(
        self, status: int, body: bytes, headers: dict[str, str] | None = None, *, length: int | None = None
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)


def _quote(text: str) -> str:
    return quote(text, safe="-_.~")


def _http_date(path: Path) -> str:
    return email.utils.formatdate(path.stat().st_mtime, usegmt=True)


if __name__ == "__main__":
    _serve(*sys.argv[1:7])

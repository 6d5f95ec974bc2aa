"""A proxy in front of fake-gcs-server (``http_proxy.py``) that serves the calls of Cloud Storage's XML API
the emulator lacks, through its JSON API.

``object_store`` (under ``deltalake`` and ``obstore``) writes an object with the XML API's ``PUT
/<bucket>/<name>``: a conditional create carries ``x-goog-if-generation-match: 0``, a copy
``x-goog-copy-source``. fake-gcs-server 1.56 answers such a put ``400 invalid uploadType``; the proxy makes it
the JSON API's media upload (``ifGenerationMatch`` kept, so the emulator's own check decides a race) or its
``rewriteTo``, and answers as the XML API does: the object's ETag and generation, or ``412
PreconditionFailed``. A larger file comes as an XML multipart upload (``POST ?uploads``, a ``PUT`` per part,
``POST ?uploadId`` to complete): the proxy keeps the parts and uploads the whole object on completion.

The emulator's XML listings ignore ``start-after``, from which ``object_store`` lists a table's log; the
proxy drops the keys up to it, as Cloud Storage does, and answers a listing of a bucket that does not exist
``404 NoSuchBucket`` as it does (the emulator: 500). The emulator takes any Host other than its own for a
bucket's name, so the proxy gives it its own. Everything else (reads, the JSON API Spark's connector speaks)
passes through unchanged.
"""

from __future__ import annotations

import http.client
import json
import re
import sys
import threading
import uuid
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit
from xml.sax.saxutils import unescape

from tests.stores.http_proxy import ForwardingHandler, serve

_CONTENTS = re.compile(rb"<Contents>.*?</Contents>", re.DOTALL)
_KEY = re.compile(rb"<Key>(.*?)</Key>", re.DOTALL)
_PRECONDITION_FAILED = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>PreconditionFailed</Code>"
    b"<Message>At least one of the pre-conditions you specified did not hold.</Message></Error>"
)


# Cloud Storage's answer to a request into a bucket that does not exist (the emulator answers a listing 500).
_NO_SUCH_BUCKET = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchBucket</Code>"
    b"<Message>The specified bucket does not exist.</Message></Error>"
)
_PART_NUMBER = re.compile(rb"<PartNumber>(\d+)</PartNumber>")
# Multipart uploads in progress: upload id -> part number -> bytes.
_UPLOADS: dict[str, dict[int, bytes]] = {}
_UPLOADS_LOCK = threading.Lock()
Answer = tuple[int, dict[str, str], bytes]


class _XmlWrites(ForwardingHandler):
    # fake-gcs-server reads a bucket from a Host other than its own name (a bucket's own host, as at Google).
    keeps_host = False

    def answer_here(self, body: bytes) -> Answer | None:
        parts = urlsplit(self.path)
        bucket, _, name = parts.path.lstrip("/").partition("/")
        if not name or bucket in ("storage", "upload") or self.command not in ("PUT", "POST", "DELETE"):
            return None  # the JSON API, reads and listings
        query = parse_qs(parts.query, keep_blank_values=True)
        if "uploads" in query or "uploadId" in query:
            return self._multipart(bucket, name, query, body)
        return self._put(bucket, name, body) if self.command == "PUT" else None

    def _multipart(self, bucket: str, name: str, query: dict[str, list[str]], body: bytes) -> Answer | None:
        if self.command == "POST" and "uploads" in query:
            upload = uuid.uuid4().hex
            with _UPLOADS_LOCK:
                _UPLOADS[upload] = {}
            started = f"<Bucket>{bucket}</Bucket><Key>{name}</Key><UploadId>{upload}</UploadId>"
            return _xml("InitiateMultipartUploadResult", started)
        upload = query["uploadId"][0]
        if self.command == "PUT":
            with _UPLOADS_LOCK:
                _UPLOADS[upload][int(query["partNumber"][0])] = body
            return 200, {"ETag": f'"{upload}-{query["partNumber"][0]}"'}, b""
        with _UPLOADS_LOCK:
            uploaded = _UPLOADS.pop(upload, {})
        if self.command == "DELETE":
            return 204, {}, b""
        whole = b"".join(uploaded[int(n)] for n in _PART_NUMBER.findall(body))
        status, headers, data = self._put(bucket, name, whole)
        if status != 200:
            return status, headers, data
        etag = headers["ETag"]
        done = _xml(
            "CompleteMultipartUploadResult", f"<Bucket>{bucket}</Bucket><Key>{name}</Key><ETag>{etag}</ETag>"
        )
        return 200, {**done[1], **headers}, done[2]

    def _put(self, bucket: str, name: str, body: bytes) -> Answer:
        condition = self.headers.get("x-goog-if-generation-match")
        query = {"ifGenerationMatch": condition} if condition is not None else {}
        if source := self.headers.get("x-goog-copy-source"):
            source_bucket, _, source_name = unquote(source).lstrip("/").partition("/")
            path = (
                f"/storage/v1/b/{source_bucket}/o/{quote(source_name, safe='')}/rewriteTo/b/{bucket}/o/"
                f"{quote(unquote(name), safe='')}?{urlencode(query)}"
            )
            status, data = self._upstream("POST", path, b"{}", "application/json")
        else:
            query.update(uploadType="media", name=unquote(name))
            content_type = self.headers.get("Content-Type", "application/octet-stream")
            path = f"/upload/storage/v1/b/{bucket}/o?{urlencode(query)}"
            status, data = self._upstream("POST", path, body, content_type)
        if status == 200:
            stored = json.loads(data)
            stored = stored.get("resource", stored)  # rewriteTo answers with the object under "resource"
            headers = {"ETag": f'"{stored.get("etag", "")}"', "x-goog-generation": str(stored["generation"])}
            return 200, headers, b""
        if status == 412:
            return 412, {"Content-Type": "application/xml"}, _PRECONDITION_FAILED
        return status, {"Content-Type": "application/json"}, data

    def mend(self, status: int, data: bytes) -> tuple[int, bytes]:
        if status == 500 and b"no bucket named" in data:
            return 404, _NO_SUCH_BUCKET
        query = parse_qs(urlsplit(self.path).query)
        start_after = query.get("start-after", [""])[0]
        if self.command != "GET" or query.get("list-type") != ["2"] or not start_after:
            return status, data

        def up_to_start(contents: re.Match[bytes]) -> bytes:
            key = _KEY.search(contents.group(0))
            named = unescape(key.group(1).decode()) if key else ""
            return b"" if named <= start_after else contents.group(0)

        return status, _CONTENTS.sub(up_to_start, data)

    def _upstream(self, method: str, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            connection.request(method, path, body=body, headers={"Content-Type": content_type})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()


def _xml(element: str, content: str) -> Answer:
    body = f"<?xml version='1.0' encoding='UTF-8'?><{element}>{content}</{element}>"
    return 200, {"Content-Type": "application/xml"}, body.encode()


if __name__ == "__main__":
    serve(_XmlWrites, sys.argv[1:])

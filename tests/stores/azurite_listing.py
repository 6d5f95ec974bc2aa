"""A proxy in front of Azurite (``http_proxy.py``) that gives its blob listings Azure's ``startFrom``.

Azure's List Blobs starts at the name a ``startFrom`` parameter gives; Azurite 3.35 ignores the parameter and
lists from the first name. ``object_store`` (under ``deltalake`` and ``obstore``) lists a table's log from
an offset that way, so through Azurite alone a table's third commit reads its log wrong (``Invalid table
version: 1``). The proxy drops, from such a listing, the blobs before the offset, as Azure itself does.
"""

from __future__ import annotations

import re
import sys
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import unescape

from tests.stores.http_proxy import ForwardingHandler, serve

_BLOB = re.compile(rb"<Blob>.*?</Blob>", re.DOTALL)
_NAME = re.compile(rb"<Name>(.*?)</Name>", re.DOTALL)


class _ListingFromOffset(ForwardingHandler):
    def mend(self, status: int, data: bytes) -> tuple[int, bytes]:
        query = parse_qs(urlsplit(self.path).query)
        start = query.get("startFrom", [""])[0]
        if self.command != "GET" or query.get("comp") != ["list"] or not start:
            return status, data

        def before_start(blob: re.Match[bytes]) -> bytes:
            name = _NAME.search(blob.group(0))
            named = unescape(name.group(1).decode()) if name else ""
            return b"" if named < start else blob.group(0)

        return status, _BLOB.sub(before_start, data)


if __name__ == "__main__":
    serve(_ListingFromOffset, sys.argv[1:])

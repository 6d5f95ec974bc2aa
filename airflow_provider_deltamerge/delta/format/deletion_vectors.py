"""Deletion vectors (PROTOCOL.md "Deletion Vectors"): the rows of a data file that a table version no longer
holds, kept as a 64-bit RoaringBitmap of row indexes inline in the log or in a ``deletion_vector_*.bin`` file.

Reading decodes each vector on the driver once per file (a few bytes to a few MiB); the rows themselves are
never touched by Python: the reader anti-joins the scan's ``_metadata.row_index`` against the decoded indexes.
"""

from __future__ import annotations

import functools
import struct
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deltalake.exceptions import TableNotFoundError
from deltalake.fs import DeltaStorageHandler
from pyroaring import BitMap, BitMap64, FrozenBitMap64

from airflow_provider_deltamerge.exceptions import TargetTableError
from airflow_provider_deltamerge.spec.delta_messages import delta_message

# RoaringBitmapArray's magic numbers (little-endian, first four bytes): the 64-bit "portable" layout the
# protocol describes, and the "native" one older Delta writers used (a 32-bit bitmap per high word).
PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
# Z85, the base-85 alphabet Delta encodes inline vectors and file UUIDs with.
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: n for n, c in enumerate(_Z85)}
_ENCODED_UUID_LENGTH = 20
# Decoded vectors kept per process: compressed bitmaps, a few KiB for typical deletes.
DECODED_VECTORS_KEPT = 1024


@dataclass(frozen=True)
class DeletionVector:
    """An add or remove action's ``deletionVector`` descriptor."""

    storage_type: str  # 'u': relative file named by a UUID; 'i': inline; 'p': absolute path
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None

    @classmethod
    def from_action(cls, descriptor: Mapping[str, Any] | None) -> DeletionVector | None:
        """The descriptor of an action's ``deletionVector`` field (None when the file has none)."""
        if not descriptor or descriptor.get("storageType") is None:
            return None
        offset = descriptor.get("offset")
        return cls(
            storage_type=str(descriptor["storageType"]),
            path_or_inline_dv=str(descriptor["pathOrInlineDv"]),
            size_in_bytes=int(descriptor["sizeInBytes"]),
            cardinality=int(descriptor["cardinality"]),
            offset=int(offset) if offset is not None else None,
        )

    def to_action(self) -> dict[str, Any]:
        """The descriptor as the log writes it (``offset`` absent for an inline vector)."""
        return {
            "storageType": self.storage_type,
            "pathOrInlineDv": self.path_or_inline_dv,
            **({"offset": self.offset} if self.offset is not None else {}),
            "sizeInBytes": self.size_in_bytes,
            "cardinality": self.cardinality,
        }

    @property
    def unique_id(self) -> str:
        """With the data file's path, the logical file's identity across versions (PROTOCOL.md)."""
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"

    def file_location(self, table_uri: str) -> str:
        """Where an on-disk vector lives: ``<table>/<prefix>/deletion_vector_<uuid>.bin``, or its own path."""
        if self.storage_type == "p":
            return self.path_or_inline_dv
        if self.storage_type != "u":
            raise ValueError(f"an inline deletion vector ({self.storage_type!r}) has no file")
        prefix = self.path_or_inline_dv[:-_ENCODED_UUID_LENGTH]
        name = uuid.UUID(bytes=z85_decode(self.path_or_inline_dv[-_ENCODED_UUID_LENGTH:]))
        folder = f"{table_uri.rstrip('/')}/{prefix}" if prefix else table_uri.rstrip("/")
        return f"{folder}/deletion_vector_{name}.bin"


@functools.lru_cache(maxsize=DECODED_VECTORS_KEPT)
def read_deleted_rows(
    table_uri: str, vector: DeletionVector, *, num_records: int | None = None
) -> FrozenBitMap64:
    """The row indexes ``vector`` marks deleted, read from the log's text or from the vector's file.

    A merge reads a file's vector in each phase that reads the file; a vector never changes (its unique id
    names its bytes), so the decoded ones are kept, frozen, for the process.

    Raises:
        TargetTableError: the vector is damaged (Delta's DELTA_DELETION_VECTOR_* classes) or its file missing.
    """
    if vector.storage_type == "i":
        data = z85_decode(vector.path_or_inline_dv)[: vector.size_in_bytes]
    else:
        location = vector.file_location(table_uri)
        folder, _, name = location.rpartition("/")
        # From the offset: the vector's size (4 bytes), its data, its CRC-32 (4 bytes).
        try:
            with DeltaStorageHandler(folder).open_input_file(name) as file:
                file.seek(vector.offset or 0)
                stored = file.read(vector.size_in_bytes + 8)
        except (FileNotFoundError, TableNotFoundError) as err:
            raise TargetTableError(
                delta_message("DELTA_FILE_NOT_FOUND", path=location)
                + ": a deletion vector file of the target table is missing. Restore it (a VACUUM with a "
                "retention shorter than the longest-running reader removes files still in use).",
                error_class="DELTA_FILE_NOT_FOUND",
            ) from err
        data = stored_vector(stored, vector)
    return FrozenBitMap64(checked_rows(data, vector, num_records=num_records))


def z85_decode(text: str) -> bytes:
    """Z85 text to bytes (each five characters are four bytes, big-endian)."""
    if len(text) % 5:
        raise ValueError("Z85 text comes in blocks of five characters")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for character in text[start : start + 5]:
            value = value * 85 + _Z85_VALUE[character]
        out += value.to_bytes(4, "big")
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """Bytes to Z85 text, zero-padded to a multiple of four bytes as Delta pads them."""
    padded = data + b"\0" * (-len(data) % 4)
    out = []
    for start in range(0, len(padded), 4):
        value = int.from_bytes(padded[start : start + 4], "big")
        block = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            block.append(_Z85[digit])
        out.append("".join(reversed(block)))
    return "".join(out)


def serialize(rows: BitMap64) -> bytes:
    """A vector's bytes: the portable magic number, then the 64-bit bitmap in the portable standard format."""
    return struct.pack("<I", PORTABLE_MAGIC) + rows.serialize()


def deserialize(data: bytes) -> BitMap64:
    """The row indexes of a serialized RoaringBitmapArray (either layout).

    Raises:
        ValueError: the bytes are not a RoaringBitmapArray.
    """
    if len(data) < 4:
        raise ValueError(f"{len(data)} bytes are too few for a RoaringBitmapArray")
    (magic,) = struct.unpack_from("<I", data)
    if magic == PORTABLE_MAGIC:
        return BitMap64.deserialize(data[4:])
    if magic != NATIVE_MAGIC:
        raise ValueError(f"Unexpected RoaringBitmapArray magic number {magic}")
    # Native: a count, then for each high word in order a size and a 32-bit portable bitmap of that size.
    (count,) = struct.unpack_from("<i", data, 4)
    rows, position = BitMap64(), 8
    for high in range(count):
        (size,) = struct.unpack_from("<i", data, position)
        low = BitMap.deserialize(data[position + 4 : position + 4 + size])
        rows.update(high << 32 | value for value in low)
        position += 4 + size
    return rows


# The first byte of a ``.bin`` file: its format version.
FILE_FORMAT_VERSION = b"\x01"


def framed(data: bytes) -> bytes:
    """One vector as a ``.bin`` file stores it after the version byte: size, data, CRC-32 (big-endian)."""
    return struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))


def stored_bytes(rows: BitMap64) -> bytes:
    """The body of a one-vector ``.bin`` file: the version byte, then the vector framed."""
    return FILE_FORMAT_VERSION + framed(serialize(rows))


def stored_vector(file_bytes: bytes, vector: DeletionVector) -> bytes:
    """The vector's data out of the ``.bin`` file's bytes (read from its offset), checked against its CRC.

    Raises:
        TargetTableError: Delta's DELTA_DELETION_VECTOR_SIZE_MISMATCH or _CHECKSUM_MISMATCH.
    """
    if len(file_bytes) < 8 or struct.unpack_from(">i", file_bytes)[0] != vector.size_in_bytes:
        raise _integrity_error("DELTA_DELETION_VECTOR_SIZE_MISMATCH")
    data = file_bytes[4 : 4 + vector.size_in_bytes]
    checksum = file_bytes[4 + vector.size_in_bytes : 8 + vector.size_in_bytes]
    if len(checksum) != 4 or struct.unpack(">I", checksum)[0] != zlib.crc32(data):
        raise _integrity_error("DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH")
    return data


def checked_rows(data: bytes, vector: DeletionVector, *, num_records: int | None = None) -> BitMap64:
    """The vector's row indexes, which must number its recorded cardinality and lie in the file.

    Raises:
        TargetTableError: DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH, _INVALID_ROW_INDEX (or a corrupt
            vector's error).
    """
    try:
        rows = deserialize(data)
    except ValueError as err:
        raise TargetTableError(
            f"A deletion vector of the target table cannot be read: {err}. The table's log or its "
            "deletion vector files are damaged; restore them, or read the table with Delta Lake.",
            error_class="DELTA_DELETION_VECTOR_INVALID_ROW_INDEX",
        ) from err
    if len(rows) != vector.cardinality:
        raise _integrity_error("DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH")
    if rows and num_records is not None and rows.max() >= num_records:
        raise _integrity_error("DELTA_DELETION_VECTOR_INVALID_ROW_INDEX")
    return rows


def _integrity_error(error_class: str) -> TargetTableError:
    return TargetTableError(
        delta_message(error_class)
        + " The target table's deletion vector files are damaged; restore them from a backup or a copy of "
        "the table before merging into it.",
        error_class=error_class,
    )

"""Record batches and legacy message sets: the constants, shapes and cold helpers both
implementations share (the Cython module and the pure twin import them from here).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable
from typing import Any

from kproto import compression as _compression
from kproto.errors import (
    CorruptRecordError,
    DecompressedSizeError,
    DecompressionError,
    EncodeError,
    TooManyRecordsError,
)

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KINDS = {CONTROL_ABORT: "abort", CONTROL_COMMIT: "commit"}

# A control record's key (version, type) and value (version, coordinator epoch).
CONTROL_KEY = struct.Struct(">hh")
CONTROL_VALUE = struct.Struct(">hi")

# Where things sit in a batch or legacy message (Kafka's implementation notes).
LOG_OVERHEAD = 12  # base offset (8) + length (4), before every batch or message
LENGTH_AT = 8  # the batch / message length, after the base offset
MAGIC_AT = 16  # the magic byte, at the same place in every format
LEGACY_ATTRIBUTES_AT = 17  # a magic 0/1 message's attributes, right after its magic
V2_HEADER_SIZE = 61  # the whole RecordBatch header, up to and including records_count
V2_ATTRIBUTES_AT = 21  # the CRC-32C covers the bytes from here to the end
V2_PRODUCER_ID_AT = 43
V2_RECORDS_COUNT_AT = 57
# Smallest valid length field per magic: the fixed fields after the length.
MIN_LENGTH_BY_MAGIC = {0: 14, 1: 22, 2: V2_HEADER_SIZE - LOG_OVERHEAD}

# Attribute bits of a magic 2 batch (magic 0/1 use the first two).
ATTR_COMPRESSION = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


def short_repr(value) -> str:
    """A bytes value for a repr: whole when short, else its start and length."""
    if value is None or len(value) <= 32:
        return repr(value)
    return f"{bytes(value[:29])!r}...({len(value)} bytes)"


class ControlRecord:
    """The marker a control batch holds: a transaction's commit or abort."""

    __slots__ = ("kind", "type", "version", "coordinator_epoch", "offset", "timestamp")

    def __init__(
        self,
        type: int,
        version: int = 0,
        coordinator_epoch: int | None = None,
        offset: int | None = None,
        timestamp: int | None = None,
    ) -> None:
        self.type = type
        self.kind = _CONTROL_KINDS.get(type, "unknown")
        self.version = version
        self.coordinator_epoch = coordinator_epoch
        self.offset = offset
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (
            f"ControlRecord(kind={self.kind!r}, version={self.version}, "
            f"coordinator_epoch={self.coordinator_epoch}, offset={self.offset})"
        )

    def __eq__(self, other):
        if not isinstance(other, ControlRecord):
            return NotImplemented
        return (self.type, self.version, self.coordinator_epoch, self.offset, self.timestamp) == (
            other.type,
            other.version,
            other.coordinator_epoch,
            other.offset,
            other.timestamp,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable (object's __hash__ is a method)


def control_record(record, base_offset: int) -> ControlRecord:
    key = record.key
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key is shorter than 4 bytes", base_offset=base_offset)
    version, kind = CONTROL_KEY.unpack_from(key)
    coordinator_epoch = None
    if record.value is not None and len(record.value) >= 6:
        coordinator_epoch = CONTROL_VALUE.unpack_from(record.value)[1]
    return ControlRecord(kind, version, coordinator_epoch, record.offset, record.timestamp)


# ---------------------------------------------------------------- legacy encoding
def _legacy_message(
    out: bytearray, writer: Callable[[], Any], magic: int, offset: int, attributes: int, timestamp, key, value
) -> None:
    body = writer()
    body.write_int8(magic)
    body.write_int8(attributes)
    if magic == 1:
        body.write_int64(-1 if timestamp is None else timestamp)
    try:
        body.write_nullable_bytes(key)
        body.write_nullable_bytes(value)
    except EncodeError as exc:
        raise EncodeError(f"record key/value: {exc.reason}") from None
    out += _INT64.pack(offset)
    data = body.getvalue()
    out += _INT32.pack(len(data) + 4)
    out += _UINT32.pack(zlib.crc32(data))
    out += data


def encode_legacy(
    records, magic, base_offset, compression, compression_level, timestamp_type, wrapper_timestamp, as_record, writer
) -> bytes:
    """A magic 0/1 message set (LegacyBatch.encode of both implementations): ``as_record``
    turns an item into the implementation's Record, ``writer`` is its primitive Writer."""
    if magic not in (0, 1):
        raise EncodeError(f"legacy message sets have magic 0 or 1, not {magic!r}")
    codec = _compression.codec_id(compression)
    if codec == _compression.ZSTD:
        raise EncodeError("zstd needs magic 2 record batches")
    items = [as_record(item) for item in records]
    type_bit = ATTR_TIMESTAMP_TYPE if (magic == 1 and timestamp_type) else 0
    now = int(time.time() * 1000)
    out = bytearray()
    if not codec:
        for index, item in enumerate(items):
            offset = base_offset + index if item.offset is None else item.offset
            stamp = (now if item.timestamp is None else item.timestamp) if magic == 1 else None
            _legacy_message(
                out,
                writer,
                magic,
                offset,
                (item.attributes & ~ATTR_COMPRESSION) | type_bit,
                stamp,
                item.key,
                item.value,
            )
        return bytes(out)
    if not items:
        return b""
    inner = bytearray()
    highest = -1
    for index, item in enumerate(items):
        # magic 1 writes offsets relative to the wrapper; magic 0 carries absolute ones.
        if item.offset is None:
            offset = index if magic == 1 else base_offset + index
        else:
            offset = item.offset - base_offset if magic == 1 else item.offset
        stamp = (now if item.timestamp is None else item.timestamp) if magic == 1 else None
        if stamp is not None:
            highest = max(highest, stamp)
        _legacy_message(
            inner, writer, magic, offset, (item.attributes & ~ATTR_COMPRESSION) | type_bit, stamp, item.key, item.value
        )
    last_offset = base_offset + len(items) - 1 if items[-1].offset is None else items[-1].offset
    value = _compression.compress(codec, bytes(inner), level=compression_level, magic=magic)
    stamp = (highest if wrapper_timestamp is None else wrapper_timestamp) if magic == 1 else None
    _legacy_message(out, writer, magic, last_offset, codec | type_bit, stamp, None, value)
    return bytes(out)


# ---------------------------------------------------------------- tables
def batch_table(batches):
    """One row per batch from the headers alone (see Records.batch_table)."""
    import pyarrow as pa

    rows: dict[str, list] = {name: [] for name, _ in BATCH_TABLE_FIELDS}
    for batch in batches:
        legacy = batch.magic < 2
        rows["position"].append(batch.position)
        rows["size"].append(batch.size)
        rows["magic"].append(batch.magic)
        # a legacy wrapper's offset is its last record's; its first is known only inside
        rows["base_offset"].append((None if batch.is_wrapper else batch.offset) if legacy else batch.base_offset)
        rows["last_offset"].append(batch.last_offset)
        rows["record_count"].append(None if legacy else batch.record_count)
        rows["compression"].append(batch.compression)
        rows["timestamp_type"].append(batch.timestamp_type)
        rows["is_transactional"].append(batch.is_transactional)
        rows["is_control"].append(batch.is_control)
        rows["partition_leader_epoch"].append(None if legacy else batch.partition_leader_epoch)
        rows["producer_id"].append(None if legacy else batch.producer_id)
        rows["producer_epoch"].append(None if legacy else batch.producer_epoch)
        rows["base_sequence"].append(None if legacy else batch.base_sequence)
        rows["base_timestamp"].append(batch.timestamp if legacy else batch.base_timestamp)
        rows["max_timestamp"].append(batch.timestamp if legacy else batch.max_timestamp)
        rows["crc"].append(batch.crc)
    return pa.table({name: pa.array(rows[name], type=arrow_type(kind)) for name, kind in BATCH_TABLE_FIELDS})


BATCH_TABLE_FIELDS = [
    ("position", "int64"),
    ("size", "int32"),
    ("magic", "int8"),
    ("base_offset", "int64"),
    ("last_offset", "int64"),
    ("record_count", "int32"),
    ("compression", "int8"),
    ("timestamp_type", "int8"),
    ("is_transactional", "bool"),
    ("is_control", "bool"),
    ("partition_leader_epoch", "int32"),
    ("producer_id", "int64"),
    ("producer_epoch", "int16"),
    ("base_sequence", "int32"),
    ("base_timestamp", "int64"),
    ("max_timestamp", "int64"),
    ("crc", "uint32"),
]

# Per-record columns that repeat a field of the record's batch.
BATCH_COLUMNS = [
    ("batch_base_offset", "int64"),
    ("partition_leader_epoch", "int32"),
    ("producer_id", "int64"),
    ("producer_epoch", "int16"),
    ("base_sequence", "int32"),
    ("is_transactional", "bool"),
    ("is_control", "bool"),
    ("timestamp_type", "int8"),
    ("compression", "int8"),
    ("magic", "int8"),
]


def arrow_type(kind: str):
    import pyarrow as pa

    return getattr(pa, "bool_" if kind == "bool" else kind)()


def record_schema(batch_columns: bool = True):
    """The pyarrow schema of Records.to_arrow()."""
    import pyarrow as pa

    fields = [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("header_count", pa.int32(), nullable=False),
        pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))),
    ]
    if batch_columns:
        fields += [pa.field(name, arrow_type(kind)) for name, kind in BATCH_COLUMNS]
    return pa.schema(fields)


def batch_values(batch) -> tuple:
    if batch.magic < 2:
        return (
            batch.base_offset,
            None,
            None,
            None,
            None,
            False,
            False,
            batch.timestamp_type,
            batch.compression,
            batch.magic,
        )
    return (
        batch.base_offset,
        batch.partition_leader_epoch,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        batch.is_transactional,
        batch.is_control,
        batch.timestamp_type,
        batch.compression,
        batch.magic,
    )


def to_numpy(table) -> dict:
    import numpy as np
    import pyarrow.compute as pc

    out = {
        "offset": table.column("offset").to_numpy(),
        "timestamp": pc.fill_null(table.column("timestamp"), -1).to_numpy(),
        "key_length": pc.fill_null(pc.binary_length(table.column("key")), -1).to_numpy().astype(np.int32),
        "value_length": pc.fill_null(pc.binary_length(table.column("value")), -1).to_numpy().astype(np.int32),
        "header_count": table.column("header_count").to_numpy(),
    }
    for name, kind in BATCH_COLUMNS:
        if name in table.column_names:
            column = table.column(name)
            if kind != "bool":
                column = pc.fill_null(column, -1)
            out[name] = column.to_numpy()
    return out


# ---------------------------------------------------------------------- the caps of a record set
# max_records_per_batch, max_records_per_set, max_decompressed_size and
# max_decompressed_size_per_set: each implementation keeps its counters and compares on its
# hot path; what a cap allows and the error it raises are written here once.
def too_many_in_batch(count: int, limit: int, offset: int, base_offset: int) -> TooManyRecordsError:
    """A batch declares more records than max_records_per_batch (checked before decompressing)."""
    return TooManyRecordsError(
        f"record batch declares {count} records, more than the limit of {limit} (max_records_per_batch)",
        offset,
        base_offset=base_offset,
    )


def too_many_in_set(before: int, count: int, limit: int, start: int, base_offset: int) -> TooManyRecordsError:
    """A batch's ``count`` records would take the set from ``before`` past max_records_per_set."""
    return TooManyRecordsError(
        f"record set holds more than {limit} records (max_records_per_set): "
        f"the batch at byte {start} brings {before} to {before + count}",
        start,
        base_offset=base_offset,
    )


def decompression_allowance(max_size: int, max_per_set: int, used: int, charged: bool) -> tuple[int, bool]:
    """(bytes a batch may decompress to, whether the set's cap is what binds): the batch's cap,
    or what is left of the set's when that is less. A batch is charged to the set once
    (``charged``: it was), so a batch read again is held to its own cap only."""
    left = max_per_set - used
    if not charged and left < max_size:
        return max(left, 0), True
    return max_size, False


def decompression_failure(
    exc: DecompressionError, set_binds: bool, max_per_set: int, used: int, what: str, start: int, base_offset: int
) -> DecompressionError:
    """The error to raise for a batch whose payload did not decompress within its allowance
    (``used``: the set's bytes before it): the set's cap when that bound, else the codec's
    error, both naming the batch and its offset."""
    if set_binds and isinstance(exc, DecompressedSizeError):
        return DecompressedSizeError(
            f"record set decompresses to more than {max_per_set} bytes (max_decompressed_size_per_set): "
            f"{used} before the {what} at byte {start}",
            start,
            base_offset=base_offset,
        )
    return type(exc)(f"{exc.reason} in {what}", start, base_offset=base_offset)

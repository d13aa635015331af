"""Kafka record batches: read and write the ``records`` of Produce requests and Fetch responses.

The records field of a decoded message is a :class:`Records`: an O(1) wrapper
over the bytes (never copied) that yields batches lazily::

    from kproto.records import Records, RecordBatch, Record

    data = RecordBatch.encode([Record(key=b"k", value=b"v", headers=[("trace", b"1")])],
                              base_offset=42, compression="zstd")
    for batch in Records(data):            # header only: nothing decompressed yet
        print(batch.base_offset, batch.compression_name, batch.record_count)
        for record in batch:               # CRC-32C checked, decompressed, decoded
            print(record.offset, record.key, record.value, record.headers)
    table = Records(data).to_arrow()       # columnar, no Python object per record

Magic 2 batches are :class:`RecordBatch`; magic 0 and 1 messages (including
compressed wrappers) are :class:`LegacyBatch`. Errors are
:class:`~kproto.errors.DecodeError` subclasses: :class:`CorruptRecordError`,
:class:`CrcMismatchError` (both carry ``base_offset``), :class:`DecompressionError`,
:class:`DecompressedSizeError` and :class:`TooManyRecordsError` (more records in a batch
than ``max_records_per_batch``, or in a record set than ``max_records_per_set``). See docs/records.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kproto import _impl
from kproto.compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from kproto.errors import (
    CorruptRecordError,
    CrcMismatchError,
    DecompressedSizeError,
    DecompressionError,
    TooManyRecordsError,
)
from kproto.limits import (
    DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET,
    DEFAULT_MAX_RECORDS_PER_BATCH,
    DEFAULT_MAX_RECORDS_PER_SET,
)

if TYPE_CHECKING:  # checked against the compiled module's stub; the twin has the same names
    from kproto._c import _records
else:
    _records = _impl.load("records")

Record = _records.Record
ControlRecord = _records.ControlRecord
RecordBatch = _records.RecordBatch
LegacyBatch = _records.LegacyBatch
Records = _records.Records
crc32c = _records.crc32c
encode_records = _records.encode_records
encode_control_batch = _records.encode_control_batch
record_schema = _records.record_schema
TIMESTAMP_CREATE_TIME = _records.TIMESTAMP_CREATE_TIME
TIMESTAMP_LOG_APPEND_TIME = _records.TIMESTAMP_LOG_APPEND_TIME
CONTROL_ABORT = _records.CONTROL_ABORT
CONTROL_COMMIT = _records.CONTROL_COMMIT
IMPLEMENTATION = _records.IMPLEMENTATION

__all__ = [
    "Record",
    "ControlRecord",
    "RecordBatch",
    "LegacyBatch",
    "Records",
    "crc32c",
    "encode_records",
    "encode_control_batch",
    "record_schema",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "DEFAULT_MAX_RECORDS_PER_BATCH",
    "DEFAULT_MAX_RECORDS_PER_SET",
    "DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET",
    "CorruptRecordError",
    "CrcMismatchError",
    "DecompressionError",
    "DecompressedSizeError",
    "TooManyRecordsError",
]

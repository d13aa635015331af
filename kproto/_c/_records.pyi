"""Types of the compiled ``kproto._c._records`` (source: ``_records.pyx``).

Kafka record batches (magic 2) and legacy message sets (magic 0/1), read lazily
over a buffer that is never copied. The pure twin is ``kproto/_py/records.py``;
``ControlRecord`` and ``record_schema`` are the twin's own objects in both.
"""

from collections.abc import Iterable, Iterator
from typing import Any, Final, Literal, TypeAlias

import pyarrow as pa
from typing_extensions import Buffer, Self

from kproto._py.records import ControlRecord as ControlRecord
from kproto._py.records import record_schema as record_schema
from kproto.errors import CorruptRecordError as CorruptRecordError
from kproto.errors import CrcMismatchError as CrcMismatchError
from kproto.errors import DecodeError as DecodeError
from kproto.errors import DecompressionError as DecompressionError
from kproto.errors import EncodeError as EncodeError

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
    "IMPLEMENTATION",
]

IMPLEMENTATION: Final[str]
TIMESTAMP_CREATE_TIME: Final = 0
TIMESTAMP_LOG_APPEND_TIME: Final = 1
CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1

# A codec by attribute code (0-4), by name ("gzip", "snappy", "lz4", "zstd", "none") or None.
_Compression: TypeAlias = int | str | None
# What the encoders take per record: a Record or a (key, value[, headers[, timestamp]]) tuple.
_RecordLike: TypeAlias = Record | tuple[Any, ...]
_Header: TypeAlias = tuple[str | None, bytes | None]

def crc32c(data: Buffer, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object; pass a previous result as ``crc`` to continue it."""

class Record:
    """One record: offset, timestamp, key, value and headers (a tuple of (key, value) pairs)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[_Header, ...]
    attributes: int
    offset: int | None
    timestamp: int | None
    timestamp_delta: int | None
    def __init__(
        self,
        key: Buffer | None = None,
        value: Buffer | None = None,
        headers: Iterable[tuple[str | None, Buffer | None]] = (),
        timestamp: int | None = None,
        offset: int | None = None,
        attributes: int = 0,
    ) -> None: ...
    def __eq__(self, other: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]  # mutable, so unhashable

class RecordBatch:
    """A magic 2 record batch: header read at once, records decompressed and decoded on demand."""

    @property
    def base_offset(self) -> int: ...
    @property
    def batch_length(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def crc(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    def __init__(
        self,
        data: Buffer,
        *,
        max_decompressed_size: int = ...,
        max_records_per_batch: int = ...,
        verify_crc: bool = True,
    ) -> None: ...
    @property
    def compression(self) -> int: ...
    @property
    def compression_name(self) -> str: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def has_delete_horizon(self) -> bool: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def raw(self) -> memoryview: ...
    def __len__(self) -> int: ...
    def header_fields(self) -> dict[str, Any]: ...
    @property
    def computed_crc(self) -> int: ...
    @property
    def crc_valid(self) -> bool: ...
    def verify_crc(self) -> None: ...
    def payload(self) -> memoryview | bytes: ...
    def records(self) -> list[Record]: ...
    def __iter__(self) -> Iterator[Record]: ...
    def control_record(self) -> ControlRecord | None: ...
    def to_arrow(self, batch_columns: bool = True, zero_copy: bool = False) -> pa.Table: ...
    @staticmethod
    def encode(
        records: Iterable[_RecordLike],
        *,
        base_offset: int = 0,
        compression: _Compression = None,
        compression_level: int | None = None,
        timestamp_type: int = 0,
        is_transactional: bool = False,
        is_control: bool = False,
        has_delete_horizon: bool = False,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        partition_leader_epoch: int = -1,
        base_timestamp: int | None = None,
        max_timestamp: int | None = None,
        last_offset_delta: int | None = None,
    ) -> bytes: ...

class LegacyBatch:
    """One top-level message of a magic 0 or 1 message set (a plain message or a compressed wrapper)."""

    @property
    def offset(self) -> int: ...
    @property
    def message_size(self) -> int: ...
    @property
    def crc(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def timestamp(self) -> int | None: ...
    is_transactional: bool
    is_control: bool
    def __init__(
        self,
        data: Buffer,
        *,
        max_decompressed_size: int = ...,
        max_records_per_batch: int = ...,
        verify_crc: bool = True,
    ) -> None: ...
    @property
    def compression(self) -> int: ...
    @property
    def compression_name(self) -> str: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def is_wrapper(self) -> bool: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def raw(self) -> memoryview: ...
    @property
    def computed_crc(self) -> int: ...
    @property
    def crc_valid(self) -> bool: ...
    def verify_crc(self) -> None: ...
    def records(self) -> list[Record]: ...
    def __iter__(self) -> Iterator[Record]: ...
    def __len__(self) -> int: ...
    def header_fields(self) -> dict[str, Any]: ...
    def control_record(self) -> None: ...
    def to_arrow(self, batch_columns: bool = True, zero_copy: bool = False) -> pa.Table: ...
    @staticmethod
    def encode(
        records: Iterable[_RecordLike],
        *,
        magic: int = 1,
        base_offset: int = 0,
        compression: _Compression = None,
        compression_level: int | None = None,
        timestamp_type: int = 0,
        timestamp: int | None = None,
    ) -> bytes: ...

class Records:
    """The records field of a Produce request or Fetch response: batches over a buffer it never copies.

    Supports the buffer protocol (read-only), ``bytes()``, ``len()`` and ``==``.
    """

    max_decompressed_size: int
    max_records_per_batch: int
    max_records_per_set: int
    max_decompressed_size_per_set: int
    verify_crc: bool
    def __new__(
        cls,
        data: Buffer = b"",
        *,
        max_decompressed_size: int = ...,
        max_records_per_batch: int = ...,
        max_records_per_set: int = ...,
        max_decompressed_size_per_set: int = ...,
        verify_crc: bool = True,
    ) -> Self: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def raw(self) -> memoryview: ...
    def __bytes__(self) -> bytes: ...
    def __len__(self) -> int: ...
    def __bool__(self) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __iter__(self) -> Iterator[RecordBatch | LegacyBatch]: ...
    def batches(self) -> Iterator[RecordBatch | LegacyBatch]: ...
    @property
    def truncated_tail(self) -> bool: ...
    @property
    def complete_size(self) -> int: ...
    @property
    def tail(self) -> memoryview: ...
    def records(self) -> list[Record]: ...
    def to_arrow(self, batch_columns: bool = True, zero_copy: bool = False) -> pa.Table: ...
    def to_numpy(self) -> dict[str, Any]: ...
    def batch_table(self) -> pa.Table: ...

def encode_records(records: Iterable[_RecordLike], *, magic: int = 2, **options: Any) -> bytes:
    """Records as bytes: a magic 2 batch (options of RecordBatch.encode) or a magic 0/1 message set."""

def encode_control_batch(
    kind: Literal["commit", "abort"] | int,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch: ``kind`` is "commit"/"abort" (or CONTROL_COMMIT/CONTROL_ABORT)."""

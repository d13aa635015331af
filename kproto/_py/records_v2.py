"""Pure-Python twin of kproto/_c/_records_v2.pxi: magic 2 record batches, read and written.

The layout (from Kafka's implementation notes): a RecordBatch (magic 2) is a 61-byte
header, then ``records_count`` records, compressed as a whole when the attributes
name a codec; CRC-32C covers the bytes from ``attributes`` to the end of the batch.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator

from kproto import compression as _compression
from kproto._common.records import (
    ATTR_COMPRESSION,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_KEY,
    CONTROL_VALUE,
    LOG_OVERHEAD,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    V2_ATTRIBUTES_AT,
    V2_HEADER_SIZE,
    V2_RECORDS_COUNT_AT,
    ControlRecord,
    control_record,
    too_many_in_batch,
)
from kproto._py.buffer import Reader, Writer, wrap_int64
from kproto._py.records_base import Record, _as_record, _byte_view, _Limits, _new_record, _OneBatch, crc32c
from kproto._py.records_columns import _columnar
from kproto.errors import (
    CorruptRecordError,
    DecodeError,
    EncodeError,
)
from kproto.limits import MIN_RECORD_SIZE

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT8 = struct.Struct(">b")
_UINT32 = struct.Struct(">I")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class RecordBatch(_OneBatch):
    """A magic 2 record batch, read lazily from a buffer it does not copy.

    The header fields are read when the batch is made; the records are
    decompressed and decoded only when asked for (``records()``, iteration,
    ``to_arrow()``), and the CRC-32C is verified then (or by ``verify_crc()``).
    ``RecordBatch(data)`` reads the batch at the start of ``data``.
    """

    __slots__ = (
        "_view",
        "_start",
        "_end",
        "_limits",
        "_max_records",
        "_verify",
        "_checked",
        "_counted",
        "_charged",
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
    )

    _WHAT = "record batch"
    _CRC_WHAT = "record batch CRC-32C"

    def _setup(self, view, start, end, limits: _Limits) -> None:
        self._view = view
        self._start = start
        self._end = end
        self._limits = limits
        self._max_records = limits.max_records_per_batch
        self._verify = limits.verify_crc
        self._checked = False
        self._counted = False  # its records added to the set's (once, however often read)
        self._charged = False  # its decompressed bytes added to the set's
        base_offset, magic = _INT64.unpack_from(view, start)[0], _INT8.unpack_from(view, start + 16)[0]
        if magic != 2:  # before the header is read: a legacy message may be shorter than it
            raise CorruptRecordError(f"magic {magic} is not a record batch (magic 2)", start, base_offset=base_offset)
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = _V2_HEADER.unpack_from(view, start)

    # ---- header facts
    @property
    def compression(self) -> int:
        """Codec code from the attributes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & ATTR_COMPRESSION

    @property
    def compression_name(self) -> str:
        return _compression.codec_name(self.compression)

    @property
    def timestamp_type(self) -> int:
        """0: create time (set by the producer); 1: log-append time (set by the broker)."""
        return (self.attributes & ATTR_TIMESTAMP_TYPE) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def last_offset(self) -> int:
        return wrap_int64(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> int:
        return wrap_int64(self.base_offset + self.last_offset_delta + 1)

    def __len__(self) -> int:
        return self.record_count

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, records={self.record_count}, "
            f"compression={self.compression_name!r}, size={self.size}"
            f"{', control' if self.is_control else ''}{', transactional' if self.is_transactional else ''})"
        )

    def header_fields(self) -> dict:
        """The header as keyword arguments of :meth:`encode` (to rebuild this batch)."""
        return dict(
            base_offset=self.base_offset,
            compression=self.compression,
            timestamp_type=self.timestamp_type,
            is_transactional=self.is_transactional,
            is_control=self.is_control,
            has_delete_horizon=self.has_delete_horizon,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            partition_leader_epoch=self.partition_leader_epoch,
            base_timestamp=self.base_timestamp,
            max_timestamp=self.max_timestamp,
            last_offset_delta=self.last_offset_delta,
        )

    # ---- checksum
    @property
    def computed_crc(self) -> int:
        return crc32c(self._view[self._start + V2_ATTRIBUTES_AT : self._end])

    def verify_crc(self) -> None:
        """Raise CrcMismatchError (naming the base offset) unless the stored CRC-32C matches."""
        super().verify_crc()
        self._checked = True

    def _offset_in_errors(self) -> int:
        return self.base_offset

    # ---- records
    def payload(self):
        """The record bytes after the header, decompressed (CRC verified first)."""
        if self._verify and not self._checked:
            self.verify_crc()
        body = self._view[self._start + V2_HEADER_SIZE : self._end]
        if self.compression == 0:
            return body
        charged, self._charged = self._charged, True
        return self._limits.decompress(self.compression, body, charged, "record batch", self._start, self.base_offset)

    def _check_record_limit(self) -> None:
        # Before decompressing: the declared count decides what decoding will allocate.
        if self.record_count > self._max_records:
            raise too_many_in_batch(
                self.record_count, self._max_records, self._start + V2_RECORDS_COUNT_AT, self.base_offset
            )
        if not self._counted:
            self._counted = True
            # a negative count is corrupt (raised when decoding), not a credit
            self._limits.count_records(max(self.record_count, 0), self._start, self.base_offset)

    def records(self) -> list[Record]:
        """Decode every record of the batch."""
        compressed = self.compression != 0
        if self._verify and not self._checked:
            self.verify_crc()
        self._check_record_limit()
        payload = self.payload()
        base = 0 if compressed else self._start + V2_HEADER_SIZE  # for error offsets
        view = _byte_view(payload)
        reader = Reader(view, 0, len(view))
        try:
            return _read_v2_records(self, reader)
        except CorruptRecordError:
            raise
        except DecodeError as exc:
            where = (
                f"at byte {exc.offset} of the decompressed records"
                if compressed
                else f"at byte offset {base + (exc.offset or 0)}"
            )
            raise CorruptRecordError(
                f"record batch is corrupt: {exc.reason} {where}",
                self._start if compressed else base + (exc.offset or 0),
                base_offset=self.base_offset,
            ) from None

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def control_record(self) -> ControlRecord | None:
        """The commit/abort marker of a control batch (None for a data batch)."""
        if not self.is_control:
            return None
        records = self.records()
        if not records:
            raise CorruptRecordError("control batch has no record", self._start, base_offset=self.base_offset)
        return control_record(records[0], self.base_offset)

    def to_arrow(self, batch_columns: bool = True, zero_copy: bool = False):
        """This batch's records as a pyarrow.Table (see Records.to_arrow)."""
        return _columnar([self], batch_columns, zero_copy)

    # ---- encoding
    @staticmethod
    def encode(
        records: Iterable,
        *,
        base_offset: int = 0,
        compression=None,
        compression_level: int | None = None,
        timestamp_type: int = TIMESTAMP_CREATE_TIME,
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
    ) -> bytes:
        """Build one magic 2 batch from records (see :func:`encode_records`)."""
        return _encode_v2(
            records,
            base_offset,
            compression,
            compression_level,
            timestamp_type,
            is_transactional,
            is_control,
            has_delete_horizon,
            producer_id,
            producer_epoch,
            base_sequence,
            partition_leader_epoch,
            base_timestamp,
            max_timestamp,
            last_offset_delta,
        )


def _check_record_count(batch: RecordBatch, size: int) -> None:
    """The declared record count against what ``size`` bytes of records can hold."""
    count = batch.record_count
    if count < 0 or count > size // MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"record count {count} is invalid for {size} bytes of records", batch._start, base_offset=batch.base_offset
        )


def _read_v2_records(batch: RecordBatch, reader: Reader) -> list[Record]:
    count = batch.record_count
    _check_record_count(batch, reader.remaining)
    base_offset = batch.base_offset
    base_timestamp = batch.base_timestamp
    log_append = batch.attributes & ATTR_TIMESTAMP_TYPE
    max_timestamp = batch.max_timestamp
    records: list[Record] = []
    for _ in range(count):
        if reader.remaining == 0:
            raise CorruptRecordError(
                f"records end after {len(records)} of {count}", batch._start, base_offset=base_offset
            )
        length = reader.read_varint_length(False, "record length")
        end = reader.pos + length
        reader.end, outer_end = end, reader.end  # a record may not read past its own length
        attributes = reader.read_int8()
        timestamp_delta = reader.read_varlong()
        offset_delta = reader.read_varint()
        key = _read_varint_bytes(reader, "key")
        value = _read_varint_bytes(reader, "value")
        header_count = reader.read_varint_length(False, "header count")
        headers: tuple[tuple[str | None, bytes | None], ...] = ()
        if header_count:
            pairs = []
            for _ in range(header_count):
                n = reader.read_varint_length(True, "header key length")
                header_key = None if n < 0 else _read_header_key(reader, n)
                pairs.append((header_key, _read_varint_bytes(reader, "header value")))
            headers = tuple(pairs)
        if reader.pos != end:
            raise reader.error(DecodeError, f"record has {end - reader.pos} bytes beyond its fields")
        reader.end = outer_end
        # int64 sums wrap around, as in Java and the compiled twin
        timestamp = max_timestamp if log_append else base_timestamp + timestamp_delta
        if timestamp > _INT64_MAX or timestamp < _INT64_MIN:
            timestamp = wrap_int64(timestamp)
        offset = base_offset + offset_delta
        if offset > _INT64_MAX or offset < _INT64_MIN:
            offset = wrap_int64(offset)
        records.append(_new_record(offset, timestamp, key, value, headers, attributes, timestamp_delta))
    if reader.remaining:
        raise CorruptRecordError(
            f"{reader.remaining} bytes left after the {count} records of the batch",
            batch._start,
            base_offset=base_offset,
        )
    return records


def _read_varint_bytes(reader: Reader, what: str):
    # A length past the record's end is an invalid length (not a truncation), as in C.
    n = reader.read_varint_length(True, f"{what} length")
    return None if n < 0 else reader.read_bytes_body(n)


def _read_header_key(reader: Reader, n: int) -> str:
    try:
        key = str(reader.data[reader.pos : reader.pos + n], "utf-8")
    except UnicodeDecodeError as exc:
        raise reader.error(DecodeError, f"invalid UTF-8 in header key: {exc.reason}") from None
    reader.pos += n
    return key


def _varint_bytes(out: Writer, value, what: str) -> None:
    if value is None:
        out.write_varint(-1)
        return
    try:
        view = memoryview(value)
    except TypeError:
        raise EncodeError(f"record {what} must be bytes-like or None, got {type(value).__name__}") from None
    out.write_varint(view.nbytes)
    out.write_raw(view)


def _encode_v2(
    records,
    base_offset,
    compression,
    compression_level,
    timestamp_type,
    is_transactional,
    is_control,
    has_delete_horizon,
    producer_id,
    producer_epoch,
    base_sequence,
    partition_leader_epoch,
    base_timestamp,
    max_timestamp,
    last_offset_delta,
) -> bytes:
    codec = _compression.codec_id(compression)
    items = [_as_record(item) for item in records]
    now = None
    if base_timestamp is None:
        if items and items[0].timestamp is not None:
            base_timestamp = items[0].timestamp
        else:
            base_timestamp = now = int(time.time() * 1000) if items else -1
    log_append = timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    body = Writer()
    record = Writer()
    highest = -1
    offset_delta = -1
    for index, item in enumerate(items):
        timestamp = item.timestamp
        if timestamp is None:
            timestamp = base_timestamp if now is None else now
        highest = max(highest, timestamp)
        if log_append and item.timestamp_delta is not None:
            timestamp_delta = item.timestamp_delta
        else:
            timestamp_delta = timestamp - base_timestamp
        offset_delta = index if item.offset is None else item.offset - base_offset
        record.buf.clear()
        record.write_int8(item.attributes)
        record.write_varlong(timestamp_delta)
        record.write_varint(offset_delta)
        _varint_bytes(record, item.key, "key")
        _varint_bytes(record, item.value, "value")
        record.write_varint(len(item.headers))
        for header in item.headers:
            try:
                header_key, header_value = header
            except (TypeError, ValueError):
                raise EncodeError(f"a header must be a (key, value) pair, got {header!r:.80}") from None
            if isinstance(header_key, str):
                header_key = header_key.encode("utf-8")
            _varint_bytes(record, header_key, "header key")
            _varint_bytes(record, header_value, "header value")
        body.write_varint(len(record.buf))
        body.write_raw(record.buf)
    if max_timestamp is None:
        max_timestamp = highest if items else -1
    if last_offset_delta is None:
        last_offset_delta = max(offset_delta, 0)
    payload = body.getvalue()
    if codec:
        payload = _compression.compress(codec, payload, level=compression_level, magic=2)
    attributes = (
        codec
        | (ATTR_TIMESTAMP_TYPE if timestamp_type else 0)
        | (ATTR_TRANSACTIONAL if is_transactional else 0)
        | (ATTR_CONTROL if is_control else 0)
        | (ATTR_DELETE_HORIZON if has_delete_horizon else 0)
    )
    batch_length = V2_HEADER_SIZE - LOG_OVERHEAD + len(payload)
    try:
        header = bytearray(
            _V2_HEADER.pack(
                base_offset,
                batch_length,
                partition_leader_epoch,
                2,
                0,
                attributes,
                last_offset_delta,
                base_timestamp,
                max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                len(items),
            )
        )
    except struct.error as exc:
        raise EncodeError(f"record batch header field out of range: {exc}") from None
    header += payload
    _UINT32.pack_into(header, 17, crc32c(memoryview(header)[21:]))
    return bytes(header)


def encode_control_batch(
    kind,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch: ``kind`` is ``"commit"``/``"abort"`` (or CONTROL_COMMIT/CONTROL_ABORT)."""
    kinds = {"abort": CONTROL_ABORT, "commit": CONTROL_COMMIT}
    code = kinds.get(kind, kind) if isinstance(kind, str) else kind
    if code not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise EncodeError(f"control batch kind must be 'commit' or 'abort', got {kind!r}")
    record = Record(key=CONTROL_KEY.pack(0, code), value=CONTROL_VALUE.pack(0, coordinator_epoch), timestamp=timestamp)
    return RecordBatch.encode(
        [record],
        base_offset=base_offset,
        is_transactional=True,
        is_control=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
    )

"""Pure-Python twin of kproto/_c/_records.pyx, part 1: checksums, records, magic 2 batches.

The layouts (from Kafka's implementation notes): a RecordBatch (magic 2) is a
61-byte header, then ``records_count`` records, compressed as a whole when the
attributes name a codec; CRC-32C covers the bytes from ``attributes`` to the end
of the batch. kproto/_py/records.py puts the parts together (``Records``) and is
the module both implementations are loaded as.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from kproto import compression as _compression
from kproto._common.records import (
    ATTR_COMPRESSION,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_COLUMNS,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_KEY,
    CONTROL_VALUE,
    LOG_OVERHEAD,
    MAGIC_AT,
    MIN_LENGTH_BY_MAGIC,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    V2_ATTRIBUTES_AT,
    V2_HEADER_SIZE,
    V2_RECORDS_COUNT_AT,
    ControlRecord,
    arrow_type,
    batch_values,
    control_record,
    decompression_allowance,
    decompression_failure,
    record_schema,
    short_repr,
    too_many_in_batch,
    too_many_in_set,
)
from kproto._py.buffer import Reader, Writer, wrap_int64
from kproto.errors import (
    CorruptRecordError,
    CrcMismatchError,
    DecodeError,
    DecompressionError,
    EncodeError,
)
from kproto.limits import (
    DEFAULT_MAX_RECORDS_PER_BATCH,
    MIN_RECORD_SIZE,
)

IMPLEMENTATION = "py"


_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_LEGACY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT8 = struct.Struct(">b")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


_DEFAULT_MAX = _compression.DEFAULT_MAX_DECOMPRESSED_SIZE
_DEFAULT_MAX_RECORDS = DEFAULT_MAX_RECORDS_PER_BATCH
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


# ---------------------------------------------------------------- checksums
def _make_crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C_TABLE = _make_crc32c_table()


def _crc32c_pure(data, crc: int = 0) -> int:
    table = _CRC32C_TABLE
    crc ^= 0xFFFFFFFF
    for byte in memoryview(data).cast("B"):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_crc32c_accelerated: Callable[[Any, int], int] | None = None
try:  # an optional C implementation keeps the pure twin usable on large batches
    from crc32c import crc32c as _crc32c_installed
    _crc32c_accelerated = _crc32c_installed
except ImportError:  # pragma: no cover - depends on what is installed
    pass


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object; pass a previous result as ``crc`` to continue it."""
    if _crc32c_accelerated is not None:
        return _crc32c_accelerated(data, crc)
    return _crc32c_pure(data, crc)


# ---------------------------------------------------------------- records
_NO_VALUE = object()


class Record:
    """One record: offset, timestamp, key, value and headers.

    ``headers`` is a tuple of ``(key, value)`` pairs in wire order (duplicate keys
    kept); keys are str, values bytes or None. ``timestamp`` is None for magic 0.
    ``timestamp_delta`` is the delta stored in a magic 2 batch (None when the
    record was not decoded from one); it differs from ``timestamp - base`` only in
    log-append-time batches, where ``timestamp`` is the batch's max timestamp.
    Build records to encode with ``Record(key=..., value=..., headers=...)``.
    """

    __slots__ = ("offset", "timestamp", "key", "value", "headers", "attributes", "timestamp_delta")

    def __init__(self, key=None, value=None, headers=(), timestamp: int | None = None,
                 offset: int | None = None, attributes: int = 0) -> None:
        self.key = key
        self.value = value
        self.headers = tuple(headers) if headers else ()
        self.timestamp = timestamp
        self.offset = offset
        self.attributes = attributes
        self.timestamp_delta = None

    def __repr__(self) -> str:
        return (f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, "
                f"value={short_repr(self.value)}, headers={self.headers!r})")

    def _fields(self):
        return (self.offset, self.timestamp, self.key, self.value, self.headers, self.attributes)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable (object's __hash__ is a method)




def _new_record(offset, timestamp, key, value, headers, attributes, timestamp_delta=None) -> Record:
    record = Record.__new__(Record)
    record.offset = offset
    record.timestamp = timestamp
    record.key = key
    record.value = value
    record.headers = headers
    record.attributes = attributes
    record.timestamp_delta = timestamp_delta
    return record




# ---------------------------------------------------------------- magic 2 batches
class _Limits:
    """The settings of the Records a batch was read from, and what one pass over its batches
    has read so far (one object shared by the batches of a pass)."""

    __slots__ = ("max_decompressed_size", "max_records_per_batch", "verify_crc", "max_records_per_set",
                 "max_decompressed_size_per_set", "records_read", "bytes_decompressed")

    def __init__(self, max_decompressed_size: int, max_records_per_batch: int, verify_crc: bool,
                 max_records_per_set: int, max_decompressed_size_per_set: int) -> None:
        self.max_decompressed_size = max_decompressed_size
        self.max_records_per_batch = max_records_per_batch
        self.verify_crc = verify_crc
        self.max_records_per_set = max_records_per_set
        self.max_decompressed_size_per_set = max_decompressed_size_per_set
        self.records_read = 0
        self.bytes_decompressed = 0

    def count_records(self, count: int, start: int, base_offset: int) -> None:
        """Add a batch's records to the set's, raising before the set passes its limit."""
        before = self.records_read
        if before + count > self.max_records_per_set:
            raise too_many_in_set(before, count, self.max_records_per_set, start, base_offset)
        self.records_read = before + count

    def decompress(self, codec: int, data, charged: bool, what: str, start: int, base_offset: int):
        """Decompress a batch's payload within the caps of the batch and of the set.

        A batch is charged once (``charged`` says it was): its output, or all it was
        allowed when decompression fails (the work it caused is not known).
        """
        used = self.bytes_decompressed
        allowed, set_binds = decompression_allowance(self.max_decompressed_size, self.max_decompressed_size_per_set,
                                                     used, charged)
        try:
            out = _compression.decompress(codec, data, max_size=allowed)
        except DecompressionError as exc:
            if not charged:
                self.bytes_decompressed += allowed
            raise decompression_failure(exc, set_binds, self.max_decompressed_size_per_set, used, what, start,
                                        base_offset) from None
        if not charged:
            self.bytes_decompressed += len(out)
        return out


def _single_batch_limits(max_decompressed_size: int, max_records_per_batch: int, verify_crc: bool) -> _Limits:
    # A batch read on its own is a set of one: its own limits are the set's.
    return _Limits(max_decompressed_size, max_records_per_batch, verify_crc, max_records_per_batch,
                   max_decompressed_size)


_SomeBatch = TypeVar("_SomeBatch", bound="_OneBatch")


class _OneBatch:
    """How a magic 2 batch and a legacy message are made: from a buffer holding one
    (``RecordBatch(data)``), or at a position of a record set (``_at``)."""

    __slots__ = ()
    _WHAT = "batch"     # in the error for a buffer that ends inside it

    def __init__(self, data, *, max_decompressed_size: int = _DEFAULT_MAX,
                 max_records_per_batch: int = _DEFAULT_MAX_RECORDS, verify_crc: bool = True) -> None:
        view = _byte_view(data)
        size = _complete_size(view, 0)
        if size <= 0:     # worded as in C, which does not know the size a cut batch needs
            raise CorruptRecordError(f"{self._WHAT} is truncated: {len(view)} bytes", 0)
        limits = _single_batch_limits(max_decompressed_size, max_records_per_batch, verify_crc)
        self._setup(view, 0, size, limits)

    @classmethod
    def _at(cls: type[_SomeBatch], view, start, end, limits: _Limits) -> _SomeBatch:
        batch = cls.__new__(cls)
        batch._setup(view, start, end, limits)
        return batch

    def _setup(self, view, start, end, limits: _Limits) -> None:
        raise NotImplementedError

    # Set by _setup: the buffer and where in it the batch lies.
    _view: memoryview
    _start: int
    _end: int

    @property
    def size(self) -> int:
        """Bytes the batch takes on the wire, header included."""
        return self._end - self._start

    @property
    def position(self) -> int:
        """Where the batch starts in the buffer it was read from."""
        return self._start

    @property
    def raw(self) -> memoryview:
        """The batch's bytes, without copying them."""
        return self._view[self._start:self._end]

    # ---- checksum: each kind computes its own (computed_crc) and names it (_CRC_WHAT)
    _CRC_WHAT = "CRC"
    crc: int

    @property
    def computed_crc(self) -> int:
        raise NotImplementedError

    @property
    def crc_valid(self) -> bool:
        return self.computed_crc == self.crc

    def verify_crc(self) -> None:
        """Raise CrcMismatchError (naming the base offset) unless the stored CRC matches."""
        computed = self.computed_crc
        if computed != self.crc:
            raise CrcMismatchError(
                f"{self._CRC_WHAT} mismatch: stored {self.crc:#010x}, computed {computed:#010x}",
                self._start, base_offset=self._offset_in_errors(), stored_crc=self.crc, computed_crc=computed)

    def _offset_in_errors(self) -> int:
        """The offset an error about the batch names (read without decompressing)."""
        raise NotImplementedError


class RecordBatch(_OneBatch):
    """A magic 2 record batch, read lazily from a buffer it does not copy.

    The header fields are read when the batch is made; the records are
    decompressed and decoded only when asked for (``records()``, iteration,
    ``to_arrow()``), and the CRC-32C is verified then (or by ``verify_crc()``).
    ``RecordBatch(data)`` reads the batch at the start of ``data``.
    """

    __slots__ = ("_view", "_start", "_end", "_limits", "_max_records", "_verify", "_checked", "_counted",
                 "_charged", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
                 "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
                 "producer_id", "producer_epoch", "base_sequence", "record_count")

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
        self._counted = False    # its records added to the set's (once, however often read)
        self._charged = False    # its decompressed bytes added to the set's
        base_offset, magic = _INT64.unpack_from(view, start)[0], _INT8.unpack_from(view, start + 16)[0]
        if magic != 2:      # before the header is read: a legacy message may be shorter than it
            raise CorruptRecordError(f"magic {magic} is not a record batch (magic 2)", start,
                                     base_offset=base_offset)
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic, self.crc,
         self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
         self.producer_id, self.producer_epoch, self.base_sequence,
         self.record_count) = _V2_HEADER.unpack_from(view, start)

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
        return (f"RecordBatch(base_offset={self.base_offset}, records={self.record_count}, "
                f"compression={self.compression_name!r}, size={self.size}"
                f"{', control' if self.is_control else ''}{', transactional' if self.is_transactional else ''})")

    def header_fields(self) -> dict:
        """The header as keyword arguments of :meth:`encode` (to rebuild this batch)."""
        return dict(
            base_offset=self.base_offset, compression=self.compression,
            timestamp_type=self.timestamp_type, is_transactional=self.is_transactional,
            is_control=self.is_control, has_delete_horizon=self.has_delete_horizon,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence, partition_leader_epoch=self.partition_leader_epoch,
            base_timestamp=self.base_timestamp, max_timestamp=self.max_timestamp,
            last_offset_delta=self.last_offset_delta,
        )

    # ---- checksum
    @property
    def computed_crc(self) -> int:
        return crc32c(self._view[self._start + V2_ATTRIBUTES_AT:self._end])

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
        body = self._view[self._start + V2_HEADER_SIZE:self._end]
        if self.compression == 0:
            return body
        charged, self._charged = self._charged, True
        return self._limits.decompress(self.compression, body, charged, "record batch", self._start,
                                       self.base_offset)

    def _check_record_limit(self) -> None:
        # Before decompressing: the declared count decides what decoding will allocate.
        if self.record_count > self._max_records:
            raise too_many_in_batch(self.record_count, self._max_records, self._start + V2_RECORDS_COUNT_AT,
                                    self.base_offset)
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
            where = (f"at byte {exc.offset} of the decompressed records" if compressed
                     else f"at byte offset {base + (exc.offset or 0)}")
            raise CorruptRecordError(f"record batch is corrupt: {exc.reason} {where}",
                                     self._start if compressed else base + (exc.offset or 0),
                                     base_offset=self.base_offset) from None

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
        return _to_arrow([self], batch_columns, zero_copy)

    # ---- encoding
    @staticmethod
    def encode(records: Iterable, *, base_offset: int = 0, compression=None,
               compression_level: int | None = None, timestamp_type: int = TIMESTAMP_CREATE_TIME,
               is_transactional: bool = False, is_control: bool = False, has_delete_horizon: bool = False,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               partition_leader_epoch: int = -1, base_timestamp: int | None = None,
               max_timestamp: int | None = None, last_offset_delta: int | None = None) -> bytes:
        """Build one magic 2 batch from records (see :func:`encode_records`)."""
        return _encode_v2(records, base_offset, compression, compression_level, timestamp_type,
                          is_transactional, is_control, has_delete_horizon, producer_id, producer_epoch,
                          base_sequence, partition_leader_epoch, base_timestamp, max_timestamp,
                          last_offset_delta)


def _check_record_count(batch: RecordBatch, size: int) -> None:
    """The declared record count against what ``size`` bytes of records can hold."""
    count = batch.record_count
    if count < 0 or count > size // MIN_RECORD_SIZE:
        raise CorruptRecordError(f"record count {count} is invalid for {size} bytes of records",
                                 batch._start, base_offset=batch.base_offset)


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
            raise CorruptRecordError(f"records end after {len(records)} of {count}",
                                     batch._start, base_offset=base_offset)
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
        raise CorruptRecordError(f"{reader.remaining} bytes left after the {count} records of the batch",
                                 batch._start, base_offset=base_offset)
    return records


def _read_varint_bytes(reader: Reader, what: str):
    # A length past the record's end is an invalid length (not a truncation), as in C.
    n = reader.read_varint_length(True, f"{what} length")
    return None if n < 0 else reader.read_bytes_body(n)


def _read_header_key(reader: Reader, n: int) -> str:
    try:
        key = str(reader.data[reader.pos:reader.pos + n], "utf-8")
    except UnicodeDecodeError as exc:
        raise reader.error(DecodeError, f"invalid UTF-8 in header key: {exc.reason}") from None
    reader.pos += n
    return key


def _as_record(item) -> Record:
    if isinstance(item, Record):
        return item
    if isinstance(item, tuple) and 2 <= len(item) <= 4:
        return Record(*item)
    raise EncodeError(f"expected a Record or a (key, value[, headers[, timestamp]]) tuple, got {item!r:.80}")


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


def _encode_v2(records, base_offset, compression, compression_level, timestamp_type, is_transactional,
               is_control, has_delete_horizon, producer_id, producer_epoch, base_sequence,
               partition_leader_epoch, base_timestamp, max_timestamp, last_offset_delta) -> bytes:
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
    attributes = (codec | (ATTR_TIMESTAMP_TYPE if timestamp_type else 0)
                  | (ATTR_TRANSACTIONAL if is_transactional else 0) | (ATTR_CONTROL if is_control else 0)
                  | (ATTR_DELETE_HORIZON if has_delete_horizon else 0))
    batch_length = V2_HEADER_SIZE - LOG_OVERHEAD + len(payload)
    try:
        header = bytearray(_V2_HEADER.pack(
            base_offset, batch_length, partition_leader_epoch, 2, 0, attributes, last_offset_delta,
            base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, len(items)))
    except struct.error as exc:
        raise EncodeError(f"record batch header field out of range: {exc}") from None
    header += payload
    _UINT32.pack_into(header, 17, crc32c(memoryview(header)[21:]))
    return bytes(header)


def encode_control_batch(kind, *, producer_id: int, producer_epoch: int, base_offset: int = 0,
                         timestamp: int | None = None, coordinator_epoch: int = 0,
                         partition_leader_epoch: int = -1) -> bytes:
    """A transaction marker batch: ``kind`` is ``"commit"``/``"abort"`` (or CONTROL_COMMIT/CONTROL_ABORT)."""
    kinds = {"abort": CONTROL_ABORT, "commit": CONTROL_COMMIT}
    code = kinds.get(kind, kind) if isinstance(kind, str) else kind
    if code not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise EncodeError(f"control batch kind must be 'commit' or 'abort', got {kind!r}")
    record = Record(key=CONTROL_KEY.pack(0, code), value=CONTROL_VALUE.pack(0, coordinator_epoch),
                    timestamp=timestamp)
    return RecordBatch.encode([record], base_offset=base_offset, is_transactional=True, is_control=True,
                              producer_id=producer_id, producer_epoch=producer_epoch,
                              partition_leader_epoch=partition_leader_epoch)


# ---------------------------------------------------------------- scanning a buffer
class _OverBuffer:
    """An object over a buffer it never copies (Records): a batch made from it reads its view."""

    __slots__ = ()
    _view: memoryview


def _byte_view(data) -> memoryview:
    if isinstance(data, _OverBuffer):
        return data._view
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _complete_size(view: memoryview, pos: int) -> int:
    """Size of the batch at pos; negative (-needed) when it is cut short; 0 at the end.

    Raises CorruptRecordError when the header cannot be a batch at all.
    """
    left = len(view) - pos
    if left == 0:
        return 0
    if left < LOG_OVERHEAD:
        return -LOG_OVERHEAD
    base_offset, length = struct.unpack_from(">qi", view, pos)
    if length < 0:
        raise CorruptRecordError(f"batch length {length} is negative", pos + 8, base_offset=base_offset)
    if left >= 17:
        magic = view[pos + MAGIC_AT]
        if magic > 2:
            raise CorruptRecordError(f"unknown magic {magic - 256 if magic > 127 else magic}", pos + MAGIC_AT,
                                     base_offset=base_offset)
        if length < MIN_LENGTH_BY_MAGIC[magic]:
            raise CorruptRecordError(f"batch length {length} is too small for magic {magic}", pos + 8,
                                     base_offset=base_offset)
    if LOG_OVERHEAD + length > left:
        return -(LOG_OVERHEAD + length)
    if length < 5:
        raise CorruptRecordError(f"batch length {length} is too small", pos + 8, base_offset=base_offset)
    return LOG_OVERHEAD + length


def _to_arrow(batches, batch_columns: bool, zero_copy: bool = False):
    import pyarrow as pa

    columns: dict[str, list] = {name: [] for name in ("offset", "timestamp", "key", "value", "header_count",
                                                      "headers")}
    batch_rows: dict[str, list] = {name: [] for name, _ in BATCH_COLUMNS}
    for batch in batches:
        records = batch.records()
        for record in records:
            columns["offset"].append(record.offset)
            columns["timestamp"].append(record.timestamp)
            columns["key"].append(record.key)
            columns["value"].append(record.value)
            columns["header_count"].append(len(record.headers))
            columns["headers"].append([{"key": k, "value": v} for k, v in record.headers])
        if batch_columns:
            for (name, _), value in zip(BATCH_COLUMNS, batch_values(batch)):
                batch_rows[name].extend([value] * len(records))
    schema = record_schema(batch_columns)
    if zero_copy:
        schema = schema.set(2, pa.field("key", pa.binary_view())).set(3, pa.field("value", pa.binary_view()))
    arrays = [pa.array(columns[name], type=schema.field(name).type)
              for name in ("offset", "timestamp", "key", "value", "header_count", "headers")]
    if batch_columns:
        arrays += [pa.array(batch_rows[name], type=arrow_type(kind)) for name, kind in BATCH_COLUMNS]
    return pa.Table.from_arrays(arrays, schema=schema)

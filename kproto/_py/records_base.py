"""Pure-Python twin of the core of kproto/_c/_records.pyx: checksums, records, set limits, one batch.

What every part of the records twin builds on, as the top of _records.pyx is for its
include files: CRC-32C, ``Record``, the limits one pass over a record set shares
(``_Limits``, C's ``_SetCount`` and ``_decompress``), the base of a batch and a legacy
message (``_OneBatch``) and the size of the batch at a position (``_complete_size``,
C's ``_batch_size``). Python modules cannot include one another as the Cython ones do,
so this part has a module of its own below the others; kproto/_py/records.py puts the
parts together (``Records``) and is the module both implementations are loaded as.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeVar

from kproto import compression as _compression
from kproto._common.records import (
    LOG_OVERHEAD,
    MAGIC_AT,
    MIN_LENGTH_BY_MAGIC,
    decompression_allowance,
    decompression_failure,
    short_repr,
    too_many_in_set,
)
from kproto.errors import (
    CorruptRecordError,
    CrcMismatchError,
    DecompressionError,
    EncodeError,
)
from kproto.limits import DEFAULT_MAX_RECORDS_PER_BATCH

_DEFAULT_MAX = _compression.DEFAULT_MAX_DECOMPRESSED_SIZE
_DEFAULT_MAX_RECORDS = DEFAULT_MAX_RECORDS_PER_BATCH


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

    def __init__(
        self,
        key=None,
        value=None,
        headers=(),
        timestamp: int | None = None,
        offset: int | None = None,
        attributes: int = 0,
    ) -> None:
        self.key = key
        self.value = value
        self.headers = tuple(headers) if headers else ()
        self.timestamp = timestamp
        self.offset = offset
        self.attributes = attributes
        self.timestamp_delta = None

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, "
            f"value={short_repr(self.value)}, headers={self.headers!r})"
        )

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


def _as_record(item) -> Record:
    if isinstance(item, Record):
        return item
    if isinstance(item, tuple) and 2 <= len(item) <= 4:
        return Record(*item)
    raise EncodeError(f"expected a Record or a (key, value[, headers[, timestamp]]) tuple, got {item!r:.80}")


# ---------------------------------------------------------------- one batch, in a set
class _Limits:
    """The settings of the Records a batch was read from, and what one pass over its batches
    has read so far (one object shared by the batches of a pass)."""

    __slots__ = (
        "max_decompressed_size",
        "max_records_per_batch",
        "verify_crc",
        "max_records_per_set",
        "max_decompressed_size_per_set",
        "records_read",
        "bytes_decompressed",
    )

    def __init__(
        self,
        max_decompressed_size: int,
        max_records_per_batch: int,
        verify_crc: bool,
        max_records_per_set: int,
        max_decompressed_size_per_set: int,
    ) -> None:
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
        allowed, set_binds = decompression_allowance(
            self.max_decompressed_size, self.max_decompressed_size_per_set, used, charged
        )
        try:
            out = _compression.decompress(codec, data, max_size=allowed)
        except DecompressionError as exc:
            if not charged:
                self.bytes_decompressed += allowed
            raise decompression_failure(
                exc, set_binds, self.max_decompressed_size_per_set, used, what, start, base_offset
            ) from None
        if not charged:
            self.bytes_decompressed += len(out)
        return out


def _single_batch_limits(max_decompressed_size: int, max_records_per_batch: int, verify_crc: bool) -> _Limits:
    # A batch read on its own is a set of one: its own limits are the set's.
    return _Limits(
        max_decompressed_size, max_records_per_batch, verify_crc, max_records_per_batch, max_decompressed_size
    )


_SomeBatch = TypeVar("_SomeBatch", bound="_OneBatch")


class _OneBatch:
    """How a magic 2 batch and a legacy message are made: from a buffer holding one
    (``RecordBatch(data)``), or at a position of a record set (``_at``)."""

    __slots__ = ()
    _WHAT = "batch"  # in the error for a buffer that ends inside it

    def __init__(
        self,
        data,
        *,
        max_decompressed_size: int = _DEFAULT_MAX,
        max_records_per_batch: int = _DEFAULT_MAX_RECORDS,
        verify_crc: bool = True,
    ) -> None:
        view = _byte_view(data)
        size = _complete_size(view, 0)
        if size <= 0:  # worded as in C, which does not know the size a cut batch needs
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
        return self._view[self._start : self._end]

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
                self._start,
                base_offset=self._offset_in_errors(),
                stored_crc=self.crc,
                computed_crc=computed,
            )

    def _offset_in_errors(self) -> int:
        """The offset an error about the batch names (read without decompressing)."""
        raise NotImplementedError


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
            raise CorruptRecordError(
                f"unknown magic {magic - 256 if magic > 127 else magic}", pos + MAGIC_AT, base_offset=base_offset
            )
        if length < MIN_LENGTH_BY_MAGIC[magic]:
            raise CorruptRecordError(
                f"batch length {length} is too small for magic {magic}", pos + 8, base_offset=base_offset
            )
    if LOG_OVERHEAD + length > left:
        return -(LOG_OVERHEAD + length)
    if length < 5:
        raise CorruptRecordError(f"batch length {length} is too small", pos + 8, base_offset=base_offset)
    return LOG_OVERHEAD + length

"""Pure-Python twin of kproto/_c/_records_legacy.pxi: legacy message sets, magic 0 and 1.

A legacy message is offset, size, CRC-32 (from ``magic`` to the end), magic,
attributes, [timestamp,] key, value. A compressed message is a *wrapper* whose
value is a compressed message set; magic 1 inner messages carry offsets relative
to the wrapper's, which is the offset of the last one.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import cast

from kproto import compression as _compression
from kproto._common.records import (
    ATTR_COMPRESSION,
    ATTR_TIMESTAMP_TYPE,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    encode_legacy,
)
from kproto._py.buffer import Reader, Writer, wrap_int64
from kproto._py.records_base import (
    Record,
    _as_record,
    _byte_view,
    _complete_size,
    _Limits,
    _new_record,
    _OneBatch,
)
from kproto._py.records_columns import _columnar
from kproto.errors import (
    CorruptRecordError,
    DecodeError,
    TooManyRecordsError,
)

_LEGACY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes


# ---------------------------------------------------------------- legacy message sets
class LegacyBatch(_OneBatch):
    """One top-level message of a magic 0 or 1 message set (a plain message or a compressed wrapper).

    Iterating gives its records: the message itself, or for a wrapper the inner
    messages with absolute offsets. The CRC-32 is verified when records are read.
    """

    __slots__ = (
        "_view",
        "_start",
        "_end",
        "_limits",
        "_counted",
        "_charged",
        "offset",
        "message_size",
        "crc",
        "magic",
        "attributes",
        "timestamp",
        "_key_span",
        "_value_span",
    )

    _WHAT = "message"
    _CRC_WHAT = "message CRC-32"

    def _setup(self, view, start, end, limits: _Limits) -> None:
        self._view, self._start, self._end = view, start, end
        self._limits = limits
        self._counted = False  # its records added to the set's (once, however often read)
        self._charged = False  # its decompressed bytes added to the set's
        self.offset, self.message_size, self.crc, self.magic, self.attributes = _LEGACY_HEAD.unpack_from(view, start)
        if self.magic not in (0, 1):
            raise CorruptRecordError(
                f"magic {self.magic} is not a legacy message (magic 0 or 1)", start, base_offset=self.offset
            )
        reader = Reader(view, start + 18, end)
        try:
            self.timestamp = reader.read_int64() if self.magic == 1 else None
            self._key_span = _read_span(reader, "key")
            self._value_span = _read_span(reader, "value")
        except DecodeError as exc:
            raise CorruptRecordError(
                f"legacy message is corrupt: {exc.reason}", exc.offset, base_offset=self.offset
            ) from None
        if reader.pos != end:
            raise CorruptRecordError(
                f"legacy message has {end - reader.pos} bytes beyond its value", reader.pos, base_offset=self.offset
            )

    # ---- header facts
    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION

    @property
    def compression_name(self) -> str:
        return _compression.codec_name(self.compression)

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & ATTR_TIMESTAMP_TYPE) >> 3 if self.magic == 1 else 0

    @property
    def is_wrapper(self) -> bool:
        return self.compression != 0

    is_transactional = False
    is_control = False

    @property
    def key(self):
        return None if self._key_span is None else bytes(self._view[self._key_span[0] : self._key_span[1]])

    @property
    def value(self):
        return None if self._value_span is None else bytes(self._view[self._value_span[0] : self._value_span[1]])

    @property
    def base_offset(self) -> int:
        """Offset of the first record (for a wrapper this decompresses it)."""
        if not self.is_wrapper:
            return self.offset
        records = self.records()
        # Records read from a batch always carry their offset (only records built to encode lack one).
        return cast(int, records[0].offset) if records else self.offset

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return wrap_int64(self.offset + 1)

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(magic={self.magic}, offset={self.offset}, "
            f"compression={self.compression_name!r}, size={self.size})"
        )

    # ---- checksum
    @property
    def computed_crc(self) -> int:
        return zlib.crc32(self._view[self._start + 16 : self._end])

    def _offset_in_errors(self) -> int:
        return self.offset

    # ---- records
    def records(self) -> list[Record]:
        if not self.is_wrapper:
            record = self._plain_record()
            if not self._counted:
                self._counted = True
                self._limits.count_records(1, self._start, self.offset)
            return [record]
        if self._limits.verify_crc:
            self.verify_crc()
        return self._inner_records()

    def _plain_record(self) -> Record:
        # Not counted here: an inner message is counted by its wrapper.
        if self._limits.verify_crc:
            self.verify_crc()
        return _new_record(self.offset, self.timestamp, self.key, self.value, (), self.attributes)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return len(self.records()) if self.is_wrapper else 1

    def header_fields(self) -> dict:
        """The message's fields as keyword arguments of :meth:`encode` (to rebuild it)."""
        return dict(
            magic=self.magic,
            base_offset=self.base_offset,
            compression=self.compression,
            timestamp_type=self.timestamp_type,
            timestamp=self.timestamp if self.is_wrapper else None,
        )

    def control_record(self):
        return None

    def to_arrow(self, batch_columns: bool = True, zero_copy: bool = False):
        return _columnar([self], batch_columns, zero_copy)

    def _inner_records(self) -> list[Record]:
        limits = self._limits
        if self._value_span is None:
            raise CorruptRecordError(
                "compressed wrapper message has a null value", self._start, base_offset=self.offset
            )
        compressed = self._view[self._value_span[0] : self._value_span[1]]
        charged, self._charged = self._charged, True
        inner = _byte_view(
            limits.decompress(self.compression, compressed, charged, "wrapper message", self._start, self.offset)
        )
        counting, self._counted = not self._counted, True
        # One inner message at a time, each checked before the next is looked at (as the
        # compiled twin does), so both report the same first problem.
        records: list[Record] = []
        pos = 0
        while pos < len(inner):
            if len(records) == limits.max_records_per_batch:
                raise TooManyRecordsError(
                    f"wrapper message holds more than {limits.max_records_per_batch} records (max_records_per_batch)",
                    self._start,
                    base_offset=self.offset,
                )
            if counting:
                limits.count_records(1, self._start, self.offset)
            try:
                size = _complete_size(inner, pos)
            except CorruptRecordError as exc:
                raise CorruptRecordError(
                    f"inner message is corrupt: {exc.reason}", self._start, base_offset=self.offset
                ) from None
            if size <= 0:
                raise CorruptRecordError(
                    f"inner message set is truncated at byte {pos} of the decompressed value",
                    self._start,
                    base_offset=self.offset,
                )
            message = LegacyBatch._at(inner, pos, pos + size, limits)
            if message.is_wrapper:
                raise CorruptRecordError(
                    "wrapper message holds another compressed message", self._start, base_offset=self.offset
                )
            if message.magic != self.magic:
                raise CorruptRecordError(
                    f"inner message magic {message.magic} differs from wrapper magic {self.magic}",
                    self._start,
                    base_offset=self.offset,
                )
            records.append(message._plain_record())
            pos += size
        if self.magic >= 1 and records:
            # Inner offsets are relative; the wrapper holds the absolute offset of the last.
            # A wrapper straight from a producer has offset 0 (the broker has not assigned
            # one yet): its inner offsets are then kept as written. int64 sums wrap, as in Java.
            shift = wrap_int64(self.offset - records[-1].offset)
            log_append = self.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
            for record in records:
                if shift >= 0 and record.offset is not None:  # inner records always have one
                    record.offset = wrap_int64(record.offset + shift)
                if log_append:
                    record.timestamp = self.timestamp
        return records

    # ---- encoding
    @staticmethod
    def encode(
        records: Iterable,
        *,
        magic: int = 1,
        base_offset: int = 0,
        compression=None,
        compression_level: int | None = None,
        timestamp_type: int = TIMESTAMP_CREATE_TIME,
        timestamp: int | None = None,
    ) -> bytes:
        """A magic 0/1 message set: one message per record, or one compressed wrapper holding them."""
        return encode_legacy(
            records, magic, base_offset, compression, compression_level, timestamp_type, timestamp, _as_record, Writer
        )


def _read_span(reader: Reader, what: str):
    n = reader.read_length32(True, f"{what} length")
    if n < 0:
        return None
    start = reader.pos
    reader.pos += n
    return (start, start + n)

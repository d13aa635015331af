"""Pure-Python twin of kproto/_c/_records.pyx: Kafka record batches and legacy message sets.

Same public names, behaviour and errors as the Cython module; used when the
extension is not built or ``KPROTO_NO_EXTENSIONS=1``. Split as the Cython module
is: magic 2 batches in records_v2.py (_records_v2.pxi), legacy message sets in
records_legacy.py (_records_legacy.pxi), Arrow columns in records_columns.py
(_records_columns.pxi), and the top of _records.pyx in two: what the others build on
(checksums, Record, set limits, one batch) in records_base.py, and here the record
set (``Records``) that holds either kind of batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kproto._common.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    MAGIC_AT,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    ControlRecord,
    batch_table,
    record_schema,
    to_numpy,
)
from kproto._py.records_base import (
    _DEFAULT_MAX,
    _DEFAULT_MAX_RECORDS,
    Record,
    _byte_view,
    _complete_size,
    _Limits,
    _OverBuffer,
    crc32c,
)
from kproto._py.records_columns import _columnar
from kproto._py.records_legacy import LegacyBatch
from kproto._py.records_v2 import RecordBatch, encode_control_batch
from kproto.limits import (
    DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET,
    DEFAULT_MAX_RECORDS_PER_SET,
)

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

IMPLEMENTATION = "py"


def encode_records(records: Iterable, *, magic: int = 2, **options) -> bytes:
    """Records as bytes: a magic 2 batch (options of RecordBatch.encode) or a magic 0/1 message set."""
    if magic == 2:
        return RecordBatch.encode(records, **options)
    return LegacyBatch.encode(records, magic=magic, **options)


class Records(_OverBuffer):
    """The records field of a Produce request or Fetch response: batches over a buffer it never copies.

    Making one is O(1): nothing is parsed until it is iterated. ``for batch in
    records`` yields :class:`RecordBatch` (magic 2) and :class:`LegacyBatch`
    (magic 0/1) objects whose headers are read without decompressing. A batch cut
    short at the end of the buffer (brokers send partial batches in Fetch
    responses) ends the iteration quietly and sets :attr:`truncated_tail`;
    corruption anywhere else raises :class:`~kproto.errors.CorruptRecordError`.
    """

    __slots__ = (
        "_source",
        "_view",
        "max_decompressed_size",
        "max_records_per_batch",
        "max_records_per_set",
        "max_decompressed_size_per_set",
        "verify_crc",
        "_tail",
    )
    _source: Any  # the object the bytes came from, kept alive for the view
    _view: memoryview

    def __init__(
        self,
        data=b"",
        *,
        max_decompressed_size: int = _DEFAULT_MAX,
        max_records_per_batch: int = _DEFAULT_MAX_RECORDS,
        max_records_per_set: int = DEFAULT_MAX_RECORDS_PER_SET,
        max_decompressed_size_per_set: int = DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET,
        verify_crc: bool = True,
    ) -> None:
        if isinstance(data, Records):
            self._source = data._source
            self._view = data._view
        else:
            self._source = data
            self._view = _byte_view(data)
        self.max_decompressed_size = max_decompressed_size
        self.max_records_per_batch = max_records_per_batch
        self.max_records_per_set = max_records_per_set
        self.max_decompressed_size_per_set = max_decompressed_size_per_set
        self.verify_crc = verify_crc
        self._tail: int | None = None  # position where a cut-short batch starts, once known

    # ---- the buffer
    @property
    def raw(self) -> memoryview:
        """The bytes, as a read-only memoryview over the original buffer."""
        return self._view.toreadonly()

    def __bytes__(self) -> bytes:
        return bytes(self._view)

    def __len__(self) -> int:
        return len(self._view)

    def __bool__(self) -> bool:
        return len(self._view) > 0

    def __eq__(self, other) -> bool:
        if isinstance(other, Records):
            return self._view == other._view
        try:
            return self._view == _byte_view(other)
        except TypeError:
            return NotImplemented

    def __hash__(self) -> int:
        return hash(bytes(self._view))

    def __repr__(self) -> str:
        return f"Records({len(self._view)} bytes)"

    # ---- batches
    def __iter__(self) -> Iterator[RecordBatch | LegacyBatch]:
        return self.batches()

    def batches(self) -> Iterator[RecordBatch | LegacyBatch]:
        """The complete batches, read lazily (headers only; records on demand).

        The records and decompressed bytes read from the batches of one pass count
        toward ``max_records_per_set`` and ``max_decompressed_size_per_set``.
        """
        view = self._view
        limits = _Limits(
            self.max_decompressed_size,
            self.max_records_per_batch,
            self.verify_crc,
            self.max_records_per_set,
            self.max_decompressed_size_per_set,
        )
        pos = 0
        while True:
            size = _complete_size(view, pos)
            if size == 0:
                self._tail = len(view)
                return
            if size < 0:
                self._tail = pos
                return
            cls = RecordBatch if view[pos + MAGIC_AT] == 2 else LegacyBatch
            yield cls._at(view, pos, pos + size, limits)
            pos += size

    def _scan(self) -> int:
        # Sizes only, like the compiled twin: a batch whose contents are corrupt still
        # has a complete size, so it is not a truncated tail.
        if self._tail is None:
            view = self._view
            pos = 0
            while True:
                size = _complete_size(view, pos)
                if size <= 0:
                    break
                pos += size
            self._tail = pos
        return self._tail

    @property
    def truncated_tail(self) -> bool:
        """True when the buffer ends inside a batch (the complete ones before it stay readable)."""
        return self._scan() < len(self._view)

    @property
    def complete_size(self) -> int:
        """Bytes taken by the complete batches (the rest is the truncated tail)."""
        return self._scan()

    @property
    def tail(self) -> memoryview:
        """The bytes of the cut-short batch at the end (empty when there is none)."""
        return self._view[self._scan() :]

    def records(self) -> list[Record]:
        """Every record of every complete batch, in order, as a list (like a batch's
        ``records()``); walk ``batches()`` to hold one batch's records at a time."""
        out: list[Record] = []
        for batch in self.batches():
            out.extend(batch.records())
        return out

    # ---- columns
    def to_arrow(self, batch_columns: bool = True, zero_copy: bool = False):
        """All records as a pyarrow.Table: offset, timestamp, key, value, header_count, headers
        (list<struct<key: string, value: binary>>) and, with ``batch_columns``, the fields
        of the batch each record came from. ``zero_copy`` gives binary_view key and value
        columns (the Cython version points them into the record bytes; this twin copies)."""
        return _columnar(self.batches(), batch_columns, zero_copy)

    def to_numpy(self) -> dict:
        """Fixed-width columns as numpy arrays (timestamp -1 where there is none; key_length and
        value_length -1 for null), plus the batch columns."""
        return to_numpy(self.to_arrow())

    def batch_table(self):
        """One row per batch, read from the headers only (nothing decompressed): a pyarrow.Table."""
        return batch_table(self.batches())

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kafka record batches and legacy message sets: the Cython hot path.

Twin of kproto/_py/records.py (same names, behaviour and errors). What is hot
here: scanning batch headers, CRC-32C (kp_crc32c.h), decoding magic 2 records
into Record objects, encoding them, and the columnar reader, which walks the
records once into C arrays of spans and builds Arrow buffers from them without
a Python object per record. Legacy (magic 0/1) messages and the rarely used
helpers share code with the pure twin.
"""

cimport cython
from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE,
                             PyBUF_FORMAT, PyBUF_ND)
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.mem cimport PyMem_Malloc, PyMem_Realloc, PyMem_Free
from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef extern from "Python.h":
    int PyGC_Disable() noexcept
    int PyGC_Enable() noexcept
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t,
                          INT8_MIN, INT8_MAX, INT16_MIN, INT16_MAX, INT32_MIN, INT32_MAX,
                          INT64_MIN, INT64_MAX)
from libc.string cimport memcmp, memcpy, memset

from kproto._c._wire cimport wire_utf8_valid
from kproto._c._buffer cimport (
    ByteReader, ByteWriter, reader_init, read_int8, read_int64, read_varint, read_varlong,
    read_length32, raise_decode, raise_invalid_length, writer_init, writer_free, writer_reserve,
    writer_to_bytes, write_raw, write_int8, write_int32, write_varint, write_varlong,
    unsigned_varint_size, as_int, wrapping_add64, wrapping_sub64, kp_load_be16, kp_load_be32, kp_load_be64,
    kp_store_be32, kp_store_be16, kp_store_be64,
)

import time
import zlib


from kproto import compression as _compression
from kproto import limits as _limits
from kproto._c._buffer import Writer as _Writer
from kproto._common import records as _common
from kproto._common.records import (CONTROL_ABORT, CONTROL_COMMIT, TIMESTAMP_CREATE_TIME,
                                    TIMESTAMP_LOG_APPEND_TIME, ControlRecord, record_schema)
from kproto.errors import (
    CorruptRecordError, CrcMismatchError, DecodeError, DecompressedSizeError, DecompressionError, EncodeError,
    TooManyRecordsError,
)

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL

cdef extern from "kp_crc32c.h":
    uint32_t kp_crc32c(uint32_t crc, const unsigned char *p, size_t n) nogil
    uint32_t kp_crc32c_portable(uint32_t crc, const unsigned char *p, size_t n) nogil

__all__ = [
    "Record", "ControlRecord", "RecordBatch", "LegacyBatch", "Records",
    "crc32c", "encode_records", "encode_control_batch", "record_schema",
    "TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "CONTROL_ABORT", "CONTROL_COMMIT",
    "IMPLEMENTATION",
]

IMPLEMENTATION = "c"

# Plain helpers that are not hot are shared with the pure twin (kproto/_common/records.py).
cdef object _control_record = _common.control_record
cdef object _BATCH_COLUMNS = _common.BATCH_COLUMNS
cdef object _DEFAULT_MAX = _compression.DEFAULT_MAX_DECOMPRESSED_SIZE
cdef object _DEFAULT_MAX_RECORDS = _limits.DEFAULT_MAX_RECORDS_PER_BATCH
cdef object _DEFAULT_MAX_RECORDS_PER_SET = _limits.DEFAULT_MAX_RECORDS_PER_SET
cdef object _DEFAULT_MAX_PER_SET = _limits.DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET
cdef Py_ssize_t _MIN_RECORD_SIZE = _limits.MIN_RECORD_SIZE

cdef enum:
    LOG_OVERHEAD = 12
    V2_HEADER_SIZE = 61
    CRC_START = 21              # the CRC covers attributes .. end
    RECORD_COUNT_AT = 57        # where records_count sits in the header
    ATTR_COMPRESSION = 0x07
    ATTR_TIMESTAMP_TYPE = 0x08
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40
    # Record._flags
    HAS_OFFSET = 1
    HAS_TIMESTAMP = 2
    HAS_DELTA = 4

# The layout constants above are compile-time copies of kproto/_common/records.py; a mismatch
# must stop the import, not misread batches.
if (LOG_OVERHEAD, V2_HEADER_SIZE, CRC_START, RECORD_COUNT_AT, ATTR_COMPRESSION, ATTR_TIMESTAMP_TYPE,
        ATTR_TRANSACTIONAL, ATTR_CONTROL, ATTR_DELETE_HORIZON) != (
        _common.LOG_OVERHEAD, _common.V2_HEADER_SIZE, _common.V2_ATTRIBUTES_AT, _common.V2_RECORDS_COUNT_AT,
        _common.ATTR_COMPRESSION, _common.ATTR_TIMESTAMP_TYPE, _common.ATTR_TRANSACTIONAL,
        _common.ATTR_CONTROL, _common.ATTR_DELETE_HORIZON):
    raise ImportError("kproto/_c/_records.pyx: layout constants differ from kproto._common.records")


cdef char *_FORMAT_BYTES = "B"


# ---------------------------------------------------------------- checksums
def crc32c(data, uint32_t crc=0) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object; pass a previous result as ``crc`` to continue it."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            crc = kp_crc32c(crc, <const unsigned char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return crc


def _crc32c_portable(data, uint32_t crc=0) -> int:
    """The table-driven CRC-32C used where the CPU has no crc32 instruction (for tests)."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        crc = kp_crc32c_portable(crc, <const unsigned char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return crc


# ---------------------------------------------------------------- records
# Not tracked by the cyclic GC: a record holds bytes, str, ints and a tuple of
# them, so it cannot be part of a cycle unless one is built on purpose by
# storing a record inside itself (then it is leaked, never freed twice). Tracking
# made a consumer's 1,000 records cost a quarter of their decode time in GC scans.
@cython.freelist(1024)     # a batch's worth of records comes back for the next batch
@cython.no_gc
cdef class Record:
    """One record: offset, timestamp, key, value and headers.

    ``headers`` is a tuple of ``(key, value)`` pairs in wire order (duplicate keys
    kept); keys are str, values bytes or None. ``timestamp`` is None for magic 0.
    ``timestamp_delta`` is the delta stored in a magic 2 batch (None when the
    record was not decoded from one); it differs from ``timestamp - base`` only in
    log-append-time batches, where ``timestamp`` is the batch's max timestamp.
    Build records to encode with ``Record(key=..., value=..., headers=...)``.
    """
    cdef public object key
    cdef public object value
    cdef public object headers
    cdef public int attributes
    cdef int64_t _offset
    cdef int64_t _timestamp
    cdef int64_t _timestamp_delta
    cdef int _flags

    def __init__(self, key=None, value=None, headers=(), timestamp=None, offset=None, int attributes=0):
        self.key = key
        self.value = value
        self.headers = tuple(headers) if headers else ()
        self.attributes = attributes
        self._flags = 0
        self.timestamp = timestamp
        self.offset = offset

    @property
    def offset(self):
        return self._offset if self._flags & HAS_OFFSET else None

    @offset.setter
    def offset(self, value):
        if value is None:
            self._flags &= ~HAS_OFFSET
        else:
            self._offset = value
            self._flags |= HAS_OFFSET

    @property
    def timestamp(self):
        return self._timestamp if self._flags & HAS_TIMESTAMP else None

    @timestamp.setter
    def timestamp(self, value):
        if value is None:
            self._flags &= ~HAS_TIMESTAMP
        else:
            self._timestamp = value
            self._flags |= HAS_TIMESTAMP

    @property
    def timestamp_delta(self):
        return self._timestamp_delta if self._flags & HAS_DELTA else None

    @timestamp_delta.setter
    def timestamp_delta(self, value):
        if value is None:
            self._flags &= ~HAS_DELTA
        else:
            self._timestamp_delta = value
            self._flags |= HAS_DELTA

    def __repr__(self):
        return (f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, "
                f"value={_common.short_repr(self.value)}, headers={self.headers!r})")

    def _fields(self):
        return (self.offset, self.timestamp, self.key, self.value, self.headers, self.attributes)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == (<Record>other)._fields()

    __hash__ = None

    def __reduce__(self):
        return (_rebuild_record, (self.key, self.value, self.headers, self.timestamp, self.offset,
                                  self.attributes, self.timestamp_delta))


def _rebuild_record(key, value, headers, timestamp, offset, attributes, timestamp_delta):
    record = Record(key, value, headers, timestamp, offset, attributes)
    record.timestamp_delta = timestamp_delta
    return record


cdef inline Record _new_record(int64_t offset, int64_t timestamp, bint has_timestamp, object key,
                               object value, object headers, int attributes):
    cdef Record record = Record.__new__(Record)
    record._offset = offset
    record._timestamp = timestamp
    record._flags = HAS_OFFSET | (HAS_TIMESTAMP if has_timestamp else 0)
    record.key = key
    record.value = value
    record.headers = headers
    record.attributes = attributes
    return record


cdef Record _as_record(object item):
    if isinstance(item, Record):
        return <Record>item
    if isinstance(item, tuple) and 2 <= len(<tuple>item) <= 4:
        return Record(*item)
    raise EncodeError(f"expected a Record or a (key, value[, headers[, timestamp]]) tuple, got {item!r:.80}")


def _as_record_py(item):
    return _as_record(item)


# ---------------------------------------------------------------- the buffer
cdef Py_ssize_t _batch_size(const unsigned char *data, Py_ssize_t size, Py_ssize_t pos) except -3:
    """Size of the batch at pos: > 0 complete, 0 at the end, -1 cut short; raises when corrupt."""
    cdef Py_ssize_t left = size - pos
    cdef int64_t base_offset
    cdef int32_t length
    cdef int magic
    if left == 0:
        return 0
    if left < LOG_OVERHEAD:
        return -1
    base_offset = <int64_t>kp_load_be64(data + pos)
    length = <int32_t>kp_load_be32(data + pos + 8)
    if length < 0:
        raise CorruptRecordError(f"batch length {length} is negative", pos + 8, base_offset=base_offset)
    if left >= 17:
        magic = data[pos + 16]
        if magic > 2:
            raise CorruptRecordError(f"unknown magic {<int8_t>magic}", pos + 16, base_offset=base_offset)
        if length < (14 if magic == 0 else 22 if magic == 1 else V2_HEADER_SIZE - LOG_OVERHEAD):
            raise CorruptRecordError(f"batch length {length} is too small for magic {magic}", pos + 8,
                                     base_offset=base_offset)
    if LOG_OVERHEAD + <Py_ssize_t>length > left:
        return -1
    if length < 5:
        raise CorruptRecordError(f"batch length {length} is too small", pos + 8, base_offset=base_offset)
    return LOG_OVERHEAD + length


cdef class Records:
    """The records field of a Produce request or Fetch response: batches over a buffer it never copies.

    Making one is O(1): nothing is parsed until it is iterated. ``for batch in
    records`` yields :class:`RecordBatch` (magic 2) and :class:`LegacyBatch`
    (magic 0/1) objects whose headers are read without decompressing. A batch cut
    short at the end of the buffer (brokers send partial batches in Fetch
    responses) ends the iteration quietly and sets :attr:`truncated_tail`;
    corruption anywhere else raises :class:`~kproto.errors.CorruptRecordError`.
    Supports the buffer protocol (read-only), ``bytes()``, ``len()`` and ``==``.
    """
    def __cinit__(self, data=b"", *, max_decompressed_size=_DEFAULT_MAX, max_records_per_batch=_DEFAULT_MAX_RECORDS,
                  max_records_per_set=_DEFAULT_MAX_RECORDS_PER_SET,
                  max_decompressed_size_per_set=_DEFAULT_MAX_PER_SET, bint verify_crc=True):
        # Another Records is exported through its own buffer (its slice, kept alive by it).
        source = data
        PyObject_GetBuffer(source, &self._view, PyBUF_SIMPLE)
        self._has_view = True
        self._source = source
        self._data = <const unsigned char *>self._view.buf
        self._size = self._view.len
        self._shape[0] = self._size
        self._tail = -1
        self.max_decompressed_size = max_decompressed_size
        self.max_records_per_batch = max_records_per_batch
        self.max_records_per_set = max_records_per_set
        self.max_decompressed_size_per_set = max_decompressed_size_per_set
        self.verify_crc = verify_crc

    def __dealloc__(self):
        if self._has_view:
            PyBuffer_Release(&self._view)

    def __getbuffer__(self, Py_buffer *buffer, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("Records is read-only")
        buffer.buf = <void *>self._data
        buffer.len = self._size
        buffer.readonly = 1
        buffer.itemsize = 1
        buffer.format = _FORMAT_BYTES if flags & PyBUF_FORMAT else NULL
        buffer.ndim = 1
        buffer.shape = self._shape if flags & PyBUF_ND else NULL
        buffer.strides = NULL
        buffer.suboffsets = NULL
        buffer.internal = NULL
        buffer.obj = self

    def __releasebuffer__(self, Py_buffer *buffer):
        pass

    @property
    def raw(self):
        """The bytes, as a read-only memoryview over the original buffer."""
        return memoryview(self)

    def __bytes__(self):
        return PyBytes_FromStringAndSize(<const char *>self._data, self._size)

    def __len__(self):
        return self._size

    def __bool__(self):
        return self._size > 0

    def __eq__(self, other):
        cdef Py_buffer view
        if isinstance(other, Records):
            return (self._size == (<Records>other)._size
                    and (self._size == 0 or _same_bytes(self._data, (<Records>other)._data, self._size)))
        try:
            PyObject_GetBuffer(other, &view, PyBUF_SIMPLE)
        except (TypeError, BufferError):
            return NotImplemented
        try:
            return self._size == view.len and (self._size == 0 or _same_bytes(
                self._data, <const unsigned char *>view.buf, self._size))
        finally:
            PyBuffer_Release(&view)

    def __hash__(self):
        return hash(bytes(self))

    def __repr__(self):
        return f"Records({self._size} bytes)"

    def __iter__(self):
        return _BatchIterator(self)

    def batches(self):
        """The complete batches, read lazily (headers only; records on demand).

        The records and decompressed bytes read from the batches of one pass count
        toward ``max_records_per_set`` and ``max_decompressed_size_per_set``.
        """
        return _BatchIterator(self)

    cdef Py_ssize_t _scan(self) except -2:
        cdef Py_ssize_t pos = 0, size
        if self._tail < 0:
            while True:
                size = _batch_size(self._data, self._size, pos)
                if size <= 0:
                    break
                pos += size
            self._tail = pos
        return self._tail

    @property
    def truncated_tail(self):
        """True when the buffer ends inside a batch (the complete ones before it stay readable)."""
        return self._scan() < self._size

    @property
    def complete_size(self):
        """Bytes taken by the complete batches (the rest is the truncated tail)."""
        return self._scan()

    @property
    def tail(self):
        """The bytes of the cut-short batch at the end (empty when there is none)."""
        return memoryview(self)[self._scan():]

    def records(self):
        """Every record of every complete batch, in order, as a list (like a batch's
        ``records()``); walk ``batches()`` to hold one batch's records at a time."""
        cdef list out = []
        for batch in _BatchIterator(self):
            out.extend(batch.records())
        return out

    def to_arrow(self, bint batch_columns=True, bint zero_copy=False):
        """All records as a pyarrow.Table: offset, timestamp, key, value, header_count, headers
        (list<struct<key: string, value: binary>>) and, with ``batch_columns``, the fields
        of the batch each record came from. Built from C arrays, no Python object per record.

        With ``zero_copy`` the key and value columns are Arrow ``binary_view`` arrays that
        point into the record bytes (or a batch's decompressed bytes) instead of copies.
        """
        return _columnar(_BatchIterator(self), batch_columns, zero_copy)

    def to_numpy(self):
        """Fixed-width columns as numpy arrays (timestamp -1 where there is none; key_length and
        value_length -1 for null), plus the batch columns."""
        return _common.to_numpy(self.to_arrow())

    def batch_table(self):
        """One row per batch, read from the headers only (nothing decompressed): a pyarrow.Table."""
        return _common.batch_table(_BatchIterator(self))


cdef bint _same_bytes(const unsigned char *a, const unsigned char *b, Py_ssize_t n) noexcept:
    return memcmp(a, b, n) == 0


cdef class _SetCount:
    """What one pass over a Records has read so far (shared by the batches of the pass)."""
    cdef Py_ssize_t records_read
    cdef Py_ssize_t bytes_decompressed


cdef int _count_records(Records owner, _SetCount totals, Py_ssize_t count, Py_ssize_t start,
                        int64_t base_offset) except -1:
    """Add a batch's records to the set's, raising before the set passes its limit."""
    cdef Py_ssize_t before = totals.records_read
    if before + count > owner.max_records_per_set:
        raise TooManyRecordsError(
            f"record set holds more than {owner.max_records_per_set} records (max_records_per_set): "
            f"the batch at byte {start} brings {before} to {before + count}", start,
            base_offset=base_offset)
    totals.records_read = before + count
    return 0


cdef object _decompress(Records owner, _SetCount totals, int codec, object data, bint charged, str what,
                        Py_ssize_t start, int64_t base_offset):
    """Decompress a batch's payload within the caps of the batch and of the set.

    A batch is charged once (``charged`` says it was): its output, or all it was
    allowed when decompression fails (the work it caused is not known).
    """
    cdef Py_ssize_t allowed = owner.max_decompressed_size
    cdef Py_ssize_t left = owner.max_decompressed_size_per_set - totals.bytes_decompressed
    cdef bint set_binds = not charged and left < allowed
    if set_binds:
        allowed = max(left, 0)
    try:
        out = _compression.decompress(codec, data, max_size=allowed)
    except DecompressionError as exc:
        if not charged:
            totals.bytes_decompressed += allowed
        if set_binds and isinstance(exc, DecompressedSizeError):
            raise DecompressedSizeError(
                f"record set decompresses to more than {owner.max_decompressed_size_per_set} bytes "
                f"(max_decompressed_size_per_set): {owner.max_decompressed_size_per_set - left} before "
                f"the {what} at byte {start}", start, base_offset=base_offset) from None
        raise type(exc)(f"{exc.reason} in {what}", start, base_offset=base_offset) from None
    if not charged:
        totals.bytes_decompressed += len(out)
    return out


cdef Records _single_batch_records(object data, object max_decompressed_size, object max_records_per_batch,
                                   bint verify_crc):
    # A batch read on its own is a set of one: its own limits are the set's.
    return Records(data, max_decompressed_size=max_decompressed_size,
                   max_records_per_batch=max_records_per_batch, max_records_per_set=max_records_per_batch,
                   max_decompressed_size_per_set=max_decompressed_size, verify_crc=verify_crc)


cdef class _BatchIterator:
    cdef Records records
    cdef _SetCount totals
    cdef Py_ssize_t pos
    cdef bint done

    def __cinit__(self, Records records):
        self.records = records
        self.totals = _SetCount()
        self.pos = 0
        self.done = False

    def __iter__(self):
        return self

    def __next__(self):
        cdef Records records = self.records
        cdef Py_ssize_t size, start
        if self.done:
            raise StopIteration
        size = _batch_size(records._data, records._size, self.pos)
        if size <= 0:
            self.done = True
            records._tail = self.pos
            raise StopIteration
        start = self.pos
        self.pos += size
        if records._data[start + 16] == 2:
            return _record_batch_at(records, self.totals, start, start + size)
        return _legacy_at(records, self.totals, start, start + size)


# ---------------------------------------------------------------- magic 2 batches
cdef class RecordBatch:
    """A magic 2 record batch, read lazily from a buffer it does not copy.

    The header fields are read when the batch is made; the records are
    decompressed and decoded only when asked for (``records()``, iteration,
    ``to_arrow()``), and the CRC-32C is verified then (or by ``verify_crc()``).
    ``RecordBatch(data)`` reads the batch at the start of ``data``.
    """
    cdef Records _owner
    cdef _SetCount _totals
    cdef Py_ssize_t _start
    cdef Py_ssize_t _end
    cdef bint _checked
    cdef bint _counted      # its records added to the set's (once, however often read)
    cdef bint _charged      # its decompressed bytes added to the set's
    cdef readonly int64_t base_offset
    cdef readonly int32_t batch_length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int magic
    cdef readonly uint32_t crc
    cdef readonly int attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t record_count

    def __init__(self, data, *, max_decompressed_size=_DEFAULT_MAX, max_records_per_batch=_DEFAULT_MAX_RECORDS,
                 bint verify_crc=True):
        cdef Records owner = _single_batch_records(data, max_decompressed_size, max_records_per_batch,
                                                   verify_crc)
        cdef Py_ssize_t size = _batch_size(owner._data, owner._size, 0)
        if size <= 0:
            raise CorruptRecordError(f"record batch is truncated: {owner._size} bytes", 0)
        _setup_batch(self, owner, _SetCount(), 0, size)

    # ---- header facts
    @property
    def compression(self):
        """Codec code from the attributes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & ATTR_COMPRESSION

    @property
    def compression_name(self):
        return _compression.codec_name(self.attributes & ATTR_COMPRESSION)

    @property
    def timestamp_type(self):
        """0: create time (set by the producer); 1: log-append time (set by the broker)."""
        return (self.attributes & ATTR_TIMESTAMP_TYPE) >> 3

    @property
    def is_transactional(self):
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self):
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self):
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def last_offset(self):
        return wrapping_add64(self.base_offset, self.last_offset_delta)

    @property
    def next_offset(self):
        return wrapping_add64(self.base_offset, <int64_t>self.last_offset_delta + 1)

    @property
    def size(self):
        """Bytes the batch takes on the wire, header included."""
        return self._end - self._start

    @property
    def position(self):
        """Where the batch starts in the buffer it was read from."""
        return self._start

    @property
    def raw(self):
        """The batch's bytes, without copying them."""
        return memoryview(self._owner)[self._start:self._end]

    def __len__(self):
        return self.record_count

    def __repr__(self):
        return (f"RecordBatch(base_offset={self.base_offset}, records={self.record_count}, "
                f"compression={self.compression_name!r}, size={self.size}"
                f"{', control' if self.is_control else ''}{', transactional' if self.is_transactional else ''})")

    def header_fields(self):
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
    def computed_crc(self):
        cdef const unsigned char *p = self._owner._data + self._start + CRC_START
        cdef size_t n = self._end - self._start - CRC_START
        cdef uint32_t crc
        with nogil:
            crc = kp_crc32c(0, p, n)
        return crc

    @property
    def crc_valid(self):
        return self.computed_crc == self.crc

    def verify_crc(self):
        """Raise CrcMismatchError (naming the base offset) unless the stored CRC-32C matches."""
        cdef uint32_t computed = self.computed_crc
        if computed != self.crc:
            raise CrcMismatchError(
                f"record batch CRC-32C mismatch: stored {self.crc:#010x}, computed {computed:#010x}",
                self._start, base_offset=self.base_offset, stored_crc=self.crc, computed_crc=computed)
        self._checked = True

    # ---- records
    def payload(self):
        """The record bytes after the header, decompressed (CRC verified first)."""
        if self._owner.verify_crc and not self._checked:
            self.verify_crc()
        body = memoryview(self._owner)[self._start + V2_HEADER_SIZE:self._end]
        if not (self.attributes & ATTR_COMPRESSION):
            return body
        charged, self._charged = self._charged, True
        return _decompress(self._owner, self._totals, self.attributes & ATTR_COMPRESSION, body, charged,
                           "record batch", self._start, self.base_offset)

    def records(self):
        """Decode every record of the batch into a list of Record."""
        cdef Py_buffer view
        cdef object payload
        if self._owner.verify_crc and not self._checked:
            self.verify_crc()
        _check_record_limit(self)
        if not (self.attributes & ATTR_COMPRESSION):
            return _decode_v2(self, self._owner._data + self._start + V2_HEADER_SIZE,
                              self._end - self._start - V2_HEADER_SIZE, self._start + V2_HEADER_SIZE, False)
        payload = self.payload()
        PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
        try:
            return _decode_v2(self, <const unsigned char *>view.buf, view.len, 0, True)
        finally:
            PyBuffer_Release(&view)

    def __iter__(self):
        return iter(self.records())

    def control_record(self):
        """The commit/abort marker of a control batch (None for a data batch)."""
        if not self.is_control:
            return None
        records = self.records()
        if not records:
            raise CorruptRecordError("control batch has no record", self._start, base_offset=self.base_offset)
        return _control_record(records[0], self.base_offset)

    def to_arrow(self, bint batch_columns=True, bint zero_copy=False):
        """This batch's records as a pyarrow.Table (see Records.to_arrow)."""
        return _columnar([self], batch_columns, zero_copy)

    # ---- encoding
    @staticmethod
    def encode(records, *, base_offset=0, compression=None, compression_level=None,
               int timestamp_type=TIMESTAMP_CREATE_TIME, bint is_transactional=False, bint is_control=False,
               bint has_delete_horizon=False, producer_id=-1, producer_epoch=-1, base_sequence=-1,
               partition_leader_epoch=-1, base_timestamp=None, max_timestamp=None, last_offset_delta=None):
        """Build one magic 2 batch from records (see :func:`encode_records`)."""
        return _encode_v2(records, base_offset, compression, compression_level, timestamp_type,
                          is_transactional, is_control, has_delete_horizon, producer_id, producer_epoch,
                          base_sequence, partition_leader_epoch, base_timestamp, max_timestamp,
                          last_offset_delta)


cdef int _check_record_limit(RecordBatch batch) except -1:
    # Before decompressing: the declared count decides what decoding will allocate.
    if batch.record_count > batch._owner.max_records_per_batch:
        raise TooManyRecordsError(
            f"record batch declares {batch.record_count} records, more than the limit of "
            f"{batch._owner.max_records_per_batch} (max_records_per_batch)",
            batch._start + RECORD_COUNT_AT, base_offset=batch.base_offset)
    if not batch._counted:
        batch._counted = True
        # a negative count is corrupt (raised when decoding), not a credit
        _count_records(batch._owner, batch._totals, max(batch.record_count, 0), batch._start,
                       batch.base_offset)
    return 0


cdef int _check_record_count(RecordBatch batch, Py_ssize_t size) except -1:
    """The declared record count against what `size` bytes of records can hold."""
    cdef int32_t count = batch.record_count
    if count < 0 or count > size // _MIN_RECORD_SIZE:
        raise CorruptRecordError(f"record count {count} is invalid for {size} bytes of records",
                                 batch._start, base_offset=batch.base_offset)
    return 0


cdef RecordBatch _record_batch_at(Records owner, _SetCount totals, Py_ssize_t start, Py_ssize_t end):
    cdef RecordBatch batch = RecordBatch.__new__(RecordBatch)
    _setup_batch(batch, owner, totals, start, end)
    return batch


cdef int _setup_batch(RecordBatch batch, Records owner, _SetCount totals, Py_ssize_t start,
                      Py_ssize_t end) except -1:
    cdef const unsigned char *p = owner._data + start
    batch._owner = owner
    batch._totals = totals
    batch._start = start
    batch._end = end
    batch._checked = False
    batch._counted = False
    batch._charged = False
    batch.base_offset = <int64_t>kp_load_be64(p)
    batch.magic = <int8_t>p[16]
    if batch.magic != 2:    # before the header is read: a legacy message may be shorter than it
        raise CorruptRecordError(f"magic {batch.magic} is not a record batch (magic 2)", start,
                                 base_offset=batch.base_offset)
    batch.batch_length = <int32_t>kp_load_be32(p + 8)
    batch.partition_leader_epoch = <int32_t>kp_load_be32(p + 12)
    batch.crc = kp_load_be32(p + 17)
    batch.attributes = <int16_t>kp_load_be16(p + 21)
    batch.last_offset_delta = <int32_t>kp_load_be32(p + 23)
    batch.base_timestamp = <int64_t>kp_load_be64(p + 27)
    batch.max_timestamp = <int64_t>kp_load_be64(p + 35)
    batch.producer_id = <int64_t>kp_load_be64(p + 43)
    batch.producer_epoch = <int16_t>kp_load_be16(p + 51)
    batch.base_sequence = <int32_t>kp_load_be32(p + 53)
    batch.record_count = <int32_t>kp_load_be32(p + 57)
    return 0


cdef inline object _varint_bytes(ByteReader *r, const char *what):
    cdef int32_t n = read_varint(r)
    cdef object out
    if n < 0:
        if n == -1:
            return None
        raise_invalid_length(r, n, what)
    if r.end - r.p < n:
        raise_invalid_length(r, n, what)
    out = PyBytes_FromStringAndSize(<const char *>r.p, n)
    r.p += n
    return out


cdef object _read_headers(ByteReader *r, int32_t count):
    cdef list pairs = []
    cdef int32_t i, n
    cdef object key
    for i in range(count):
        n = read_varint(r)
        if n < 0:
            if n != -1:
                raise_invalid_length(r, n, "header key length")
            key = None
        else:
            if r.end - r.p < n:
                raise_invalid_length(r, n, "header key length")
            try:
                key = PyUnicode_DecodeUTF8(<const char *>r.p, n, NULL)
            except UnicodeDecodeError as exc:
                raise_decode(r, DecodeError, f"invalid UTF-8 in header key: {exc.reason}")
            r.p += n
        pairs.append((key, _varint_bytes(r, "header value length")))
    return tuple(pairs)


cdef list _decode_v2(RecordBatch batch, const unsigned char *data, Py_ssize_t size, Py_ssize_t base,
                     bint compressed):
    try:
        return _decode_v2_records(batch, data, size)
    except CorruptRecordError:
        raise
    except DecodeError as exc:
        where = (f"at byte {exc.offset} of the decompressed records" if compressed
                 else f"at byte offset {base + (exc.offset or 0)}")
        raise CorruptRecordError(f"record batch is corrupt: {exc.reason} {where}",
                                 batch._start if compressed else base + (exc.offset or 0),
                                 base_offset=batch.base_offset) from None


cdef list _decode_v2_records(RecordBatch batch, const unsigned char *data, Py_ssize_t size):
    # Records are not GC-tracked, but a collection started by some other
    # allocation mid-batch would still scan everything young: paused meanwhile.
    cdef int was_enabled = PyGC_Disable()
    try:
        return _decode_v2_loop(batch, data, size)
    finally:
        if was_enabled:
            PyGC_Enable()


cdef list _decode_v2_loop(RecordBatch batch, const unsigned char *data, Py_ssize_t size):
    cdef ByteReader r
    cdef int32_t count = batch.record_count
    cdef int64_t base_offset = batch.base_offset
    cdef int64_t base_timestamp = batch.base_timestamp
    cdef int64_t max_timestamp = batch.max_timestamp
    cdef bint log_append = (batch.attributes & ATTR_TIMESTAMP_TYPE) != 0
    cdef list records = []
    cdef int32_t i, length, offset_delta, header_count
    cdef int attributes
    cdef int64_t timestamp_delta
    cdef const unsigned char *outer_end
    cdef const unsigned char *record_end
    cdef object key, value, headers
    cdef Record record
    reader_init(&r, data, size)
    _check_record_count(batch, size)
    outer_end = r.end
    for i in range(count):
        if r.p >= outer_end:
            raise CorruptRecordError(f"records end after {i} of {count}", batch._start, base_offset=base_offset)
        length = read_varint(&r)
        if length < 0 or length > r.end - r.p:
            raise_invalid_length(&r, length, "record length")
        record_end = r.p + length
        r.end = record_end          # a record may not read past its own length
        attributes = read_int8(&r)
        timestamp_delta = read_varlong(&r)
        offset_delta = read_varint(&r)
        key = _varint_bytes(&r, "key length")
        value = _varint_bytes(&r, "value length")
        header_count = read_varint(&r)
        if header_count < 0 or header_count > r.end - r.p:
            raise_invalid_length(&r, header_count, "header count")
        headers = _read_headers(&r, header_count) if header_count else ()
        if r.p != record_end:
            raise_decode(&r, DecodeError, f"record has {record_end - r.p} bytes beyond its fields")
        r.end = outer_end
        record = Record.__new__(Record)
        record._offset = wrapping_add64(base_offset, offset_delta)
        record._timestamp = max_timestamp if log_append else wrapping_add64(base_timestamp, timestamp_delta)
        record._timestamp_delta = timestamp_delta
        record._flags = HAS_OFFSET | HAS_TIMESTAMP | HAS_DELTA
        record.key = key
        record.value = value
        record.headers = headers
        record.attributes = attributes
        records.append(record)
    if r.p != r.end:
        raise CorruptRecordError(f"{r.end - r.p} bytes left after the {count} records of the batch",
                                 batch._start, base_offset=base_offset)
    return records


# ---------------------------------------------------------------- encoding magic 2
cdef inline Py_ssize_t _zigzag_size(int64_t v) noexcept:
    return unsigned_varint_size((<uint64_t>v << 1) ^ <uint64_t>(v >> 63))


cdef inline int _buffer_of(object value, Py_buffer *view, const char *what) except -1:
    try:
        PyObject_GetBuffer(value, view, PyBUF_SIMPLE)
    except (TypeError, BufferError):
        raise EncodeError(f"record {what.decode()} must be bytes-like or None, got {type(value).__name__}")
    if view.len > INT32_MAX:
        PyBuffer_Release(view)
        raise EncodeError(f"record {what.decode()} is longer than 2 GiB")
    return 0


cdef int _write_varint_bytes(ByteWriter *w, object value, const char *what) except -1:
    cdef Py_buffer view
    if value is None:
        return write_varint(w, -1)
    if isinstance(value, bytes):
        write_varint(w, <int32_t>PyBytes_GET_SIZE(value))
        return write_raw(w, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
    _buffer_of(value, &view, what)
    try:
        write_varint(w, <int32_t>view.len)
        write_raw(w, view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef Py_ssize_t _value_size(object value, const char *what) except -1:
    cdef Py_buffer view
    cdef Py_ssize_t n
    if value is None:
        return 1
    if isinstance(value, bytes):
        n = PyBytes_GET_SIZE(value)
    elif isinstance(value, str):
        PyUnicode_AsUTF8AndSize(value, &n)
    else:
        _buffer_of(value, &view, what)
        n = view.len
        PyBuffer_Release(&view)
    return _zigzag_size(n) + n


cdef int _write_record(ByteWriter *w, Record item, int64_t offset_delta, int64_t timestamp_delta) except -1:
    cdef object headers = item.headers
    cdef Py_ssize_t size, n
    cdef const char *text
    if offset_delta < INT32_MIN or offset_delta > INT32_MAX:
        raise EncodeError(f"record offset delta {offset_delta} does not fit in a varint")
    size = 1 + _zigzag_size(timestamp_delta) + _zigzag_size(offset_delta)
    size += _value_size(item.key, "key") + _value_size(item.value, "value")
    size += _zigzag_size(len(headers))
    for header in headers:
        try:
            header_key, header_value = header
        except (TypeError, ValueError):
            raise EncodeError(f"a header must be a (key, value) pair, got {header!r:.80}") from None
        size += _value_size(header_key, "header key") + _value_size(header_value, "header value")
    if size > INT32_MAX:
        raise EncodeError("record is larger than 2 GiB")
    write_varint(w, <int32_t>size)
    write_int8(w, <int8_t>as_int(item.attributes, INT8_MIN, INT8_MAX, "record attributes"))
    write_varlong(w, timestamp_delta)
    write_varint(w, <int32_t>offset_delta)
    _write_varint_bytes(w, item.key, "key")
    _write_varint_bytes(w, item.value, "value")
    write_varint(w, <int32_t>len(headers))
    for header_key, header_value in headers:
        if isinstance(header_key, str):
            text = PyUnicode_AsUTF8AndSize(header_key, &n)
            write_varint(w, <int32_t>n)
            write_raw(w, text, n)
        else:
            _write_varint_bytes(w, header_key, "header key")
        _write_varint_bytes(w, header_value, "header value")
    return 0


def _encode_v2(records, base_offset, compression, compression_level, int timestamp_type, bint is_transactional,
               bint is_control, bint has_delete_horizon, producer_id, producer_epoch, base_sequence,
               partition_leader_epoch, base_timestamp, max_timestamp, last_offset_delta):
    cdef int codec = _compression.codec_id(compression)
    cdef list items = [_as_record(entry) for entry in records]
    cdef Py_ssize_t n = len(items), i
    cdef int64_t base = as_int(base_offset, INT64_MIN, INT64_MAX, "base offset")
    cdef int64_t base_ts, now = 0, highest = -1, stamp, ts_delta, offset_delta = -1
    cdef bint have_now = False
    cdef bint log_append = timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    cdef Record item
    cdef ByteWriter w
    cdef unsigned char *h
    cdef int attributes
    cdef uint32_t crc
    cdef object payload
    cdef Py_buffer view
    if base_timestamp is None:
        if n and (<Record>items[0])._flags & HAS_TIMESTAMP:
            base_ts = (<Record>items[0])._timestamp
        elif n:
            base_ts = now = int(time.time() * 1000)
            have_now = True
        else:
            base_ts = -1
    else:
        base_ts = as_int(base_timestamp, INT64_MIN, INT64_MAX, "base timestamp")
    writer_init(&w, V2_HEADER_SIZE + 64 * n + 64)
    try:
        w.length = V2_HEADER_SIZE          # the header is filled in at the end
        for i in range(n):
            item = <Record>items[i]
            if item._flags & HAS_TIMESTAMP:
                stamp = item._timestamp
            else:
                stamp = now if have_now else base_ts
            if stamp > highest:
                highest = stamp
            if log_append and item._flags & HAS_DELTA:
                ts_delta = item._timestamp_delta
            else:
                ts_delta = stamp - base_ts
            offset_delta = item._offset - base if item._flags & HAS_OFFSET else i
            _write_record(&w, item, offset_delta, ts_delta)
        if codec:
            payload = _compression.compress(
                codec, PyBytes_FromStringAndSize(<const char *>w.buf + V2_HEADER_SIZE, w.length - V2_HEADER_SIZE),
                level=compression_level, magic=2)
            w.length = V2_HEADER_SIZE
            write_raw(&w, PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload))
        if w.length - LOG_OVERHEAD > INT32_MAX:
            raise EncodeError("record batch is larger than 2 GiB")
        attributes = (codec | (ATTR_TIMESTAMP_TYPE if timestamp_type else 0)
                      | (ATTR_TRANSACTIONAL if is_transactional else 0) | (ATTR_CONTROL if is_control else 0)
                      | (ATTR_DELETE_HORIZON if has_delete_horizon else 0))
        h = w.buf
        kp_store_be64(h, <uint64_t>base)
        kp_store_be32(h + 8, <uint32_t>(w.length - LOG_OVERHEAD))
        kp_store_be32(h + 12, <uint32_t><int32_t>as_int(partition_leader_epoch, INT32_MIN, INT32_MAX,
                                                         "partition leader epoch"))
        h[16] = 2
        kp_store_be16(h + 21, <uint16_t>attributes)
        kp_store_be32(h + 23, <uint32_t><int32_t>as_int(
            (max(offset_delta, 0) if last_offset_delta is None else last_offset_delta),
            INT32_MIN, INT32_MAX, "last offset delta"))
        kp_store_be64(h + 27, <uint64_t>base_ts)
        kp_store_be64(h + 35, <uint64_t>(
            (highest if n else -1) if max_timestamp is None
            else as_int(max_timestamp, INT64_MIN, INT64_MAX, "max timestamp")))
        kp_store_be64(h + 43, <uint64_t>as_int(producer_id, INT64_MIN, INT64_MAX, "producer id"))
        kp_store_be16(h + 51, <uint16_t><int16_t>as_int(producer_epoch, INT16_MIN, INT16_MAX, "producer epoch"))
        kp_store_be32(h + 53, <uint32_t><int32_t>as_int(base_sequence, INT32_MIN, INT32_MAX, "base sequence"))
        kp_store_be32(h + 57, <uint32_t>n)
        with nogil:
            crc = kp_crc32c(0, h + CRC_START, w.length - CRC_START)
        kp_store_be32(h + 17, crc)
        return writer_to_bytes(&w)
    finally:
        writer_free(&w)


def encode_control_batch(kind, *, producer_id, producer_epoch, base_offset=0, timestamp=None,
                         coordinator_epoch=0, partition_leader_epoch=-1):
    """A transaction marker batch: ``kind`` is ``"commit"``/``"abort"`` (or CONTROL_COMMIT/CONTROL_ABORT)."""
    kinds = {"abort": CONTROL_ABORT, "commit": CONTROL_COMMIT}
    code = kinds.get(kind, kind) if isinstance(kind, str) else kind
    if code not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise EncodeError(f"control batch kind must be 'commit' or 'abort', got {kind!r}")
    record = Record(key=_common.CONTROL_KEY.pack(0, code), value=_common.CONTROL_VALUE.pack(0, coordinator_epoch),
                    timestamp=timestamp)
    return RecordBatch.encode([record], base_offset=base_offset, is_transactional=True, is_control=True,
                              producer_id=producer_id, producer_epoch=producer_epoch,
                              partition_leader_epoch=partition_leader_epoch)


def encode_records(records, *, int magic=2, **options):
    """Records as bytes: a magic 2 batch (options of RecordBatch.encode) or a magic 0/1 message set."""
    if magic == 2:
        return RecordBatch.encode(records, **options)
    return LegacyBatch.encode(records, magic=magic, **options)


# ---------------------------------------------------------------- legacy message sets
cdef class LegacyBatch:
    """One top-level message of a magic 0 or 1 message set (a plain message or a compressed wrapper).

    Iterating gives its records: the message itself, or for a wrapper the inner
    messages with absolute offsets. The CRC-32 is verified when records are read.
    """
    cdef Records _owner
    cdef _SetCount _totals
    cdef Py_ssize_t _start
    cdef Py_ssize_t _end
    cdef bint _counted      # its records added to the set's (once, however often read)
    cdef bint _charged      # its decompressed bytes added to the set's
    cdef readonly int64_t offset
    cdef readonly int32_t message_size
    cdef readonly uint32_t crc
    cdef readonly int magic
    cdef readonly int attributes
    cdef readonly object timestamp
    cdef Py_ssize_t _key_start, _key_len, _value_start, _value_len   # len -1: null

    is_transactional = False
    is_control = False

    def __init__(self, data, *, max_decompressed_size=_DEFAULT_MAX, max_records_per_batch=_DEFAULT_MAX_RECORDS,
                 bint verify_crc=True):
        cdef Records owner = _single_batch_records(data, max_decompressed_size, max_records_per_batch,
                                                   verify_crc)
        cdef Py_ssize_t size = _batch_size(owner._data, owner._size, 0)
        if size <= 0:
            raise CorruptRecordError(f"message is truncated: {owner._size} bytes", 0)
        _setup_legacy(self, owner, _SetCount(), 0, size)

    @property
    def compression(self):
        return self.attributes & ATTR_COMPRESSION

    @property
    def compression_name(self):
        return _compression.codec_name(self.attributes & ATTR_COMPRESSION)

    @property
    def timestamp_type(self):
        return (self.attributes & ATTR_TIMESTAMP_TYPE) >> 3 if self.magic == 1 else 0

    @property
    def is_wrapper(self):
        return (self.attributes & ATTR_COMPRESSION) != 0

    @property
    def key(self):
        if self._key_len < 0:
            return None
        return PyBytes_FromStringAndSize(<const char *>self._owner._data + self._key_start, self._key_len)

    @property
    def value(self):
        if self._value_len < 0:
            return None
        return PyBytes_FromStringAndSize(<const char *>self._owner._data + self._value_start, self._value_len)

    @property
    def base_offset(self):
        """Offset of the first record (for a wrapper this decompresses it)."""
        if not self.is_wrapper:
            return self.offset
        records = self.records()
        return records[0].offset if records else self.offset

    @property
    def last_offset(self):
        return self.offset

    @property
    def next_offset(self):
        return wrapping_add64(self.offset, 1)

    @property
    def size(self):
        return self._end - self._start

    @property
    def position(self):
        return self._start

    @property
    def raw(self):
        return memoryview(self._owner)[self._start:self._end]

    def __repr__(self):
        return (f"LegacyBatch(magic={self.magic}, offset={self.offset}, "
                f"compression={self.compression_name!r}, size={self.size})")

    @property
    def computed_crc(self):
        return zlib.crc32(memoryview(self._owner)[self._start + 16:self._end])

    @property
    def crc_valid(self):
        return self.computed_crc == self.crc

    def verify_crc(self):
        computed = self.computed_crc
        if computed != self.crc:
            raise CrcMismatchError(
                f"message CRC-32 mismatch: stored {self.crc:#010x}, computed {computed:#010x}",
                self._start, base_offset=self.offset, stored_crc=self.crc, computed_crc=computed)

    def records(self):
        cdef Record record
        if not self.is_wrapper:
            record = self._plain_record()
            if not self._counted:
                self._counted = True
                _count_records(self._owner, self._totals, 1, self._start, self.offset)
            return [record]
        if self._owner.verify_crc:
            self.verify_crc()
        return self._inner_records()

    cdef Record _plain_record(self):
        # Not counted here: an inner message is counted by its wrapper.
        if self._owner.verify_crc:
            self.verify_crc()
        return _new_record(self.offset, self.timestamp if self.magic == 1 else 0, self.magic == 1,
                           self.key, self.value, (), self.attributes)

    def __iter__(self):
        return iter(self.records())

    def __len__(self):
        return len(self.records()) if self.is_wrapper else 1

    def header_fields(self):
        """The message's fields as keyword arguments of :meth:`encode` (to rebuild it)."""
        return dict(magic=self.magic, base_offset=self.base_offset, compression=self.compression,
                    timestamp_type=self.timestamp_type,
                    timestamp=self.timestamp if self.is_wrapper else None)

    def control_record(self):
        return None

    def to_arrow(self, bint batch_columns=True, bint zero_copy=False):
        return _columnar([self], batch_columns, zero_copy)

    def _inner_records(self):
        cdef Records inner
        cdef Py_ssize_t pos = 0, size
        cdef Py_ssize_t max_records = self._owner.max_records_per_batch
        cdef LegacyBatch message
        cdef int64_t shift
        if self._value_len < 0:
            raise CorruptRecordError("compressed wrapper message has a null value", self._start,
                                     base_offset=self.offset)
        compressed = memoryview(self._owner)[self._value_start:self._value_start + self._value_len]
        charged, self._charged = self._charged, True
        inner = Records(_decompress(self._owner, self._totals, self.attributes & ATTR_COMPRESSION, compressed,
                                    charged, "wrapper message", self._start, self.offset),
                        verify_crc=self._owner.verify_crc)
        counting, self._counted = not self._counted, True
        records = []
        while pos < inner._size:
            if len(records) == max_records:
                raise TooManyRecordsError(f"wrapper message holds more than {max_records} records "
                                          f"(max_records_per_batch)", self._start, base_offset=self.offset)
            if counting:
                _count_records(self._owner, self._totals, 1, self._start, self.offset)
            try:
                size = _batch_size(inner._data, inner._size, pos)
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"inner message is corrupt: {exc.reason}", self._start,
                                         base_offset=self.offset) from None
            if size <= 0:
                raise CorruptRecordError(
                    f"inner message set is truncated at byte {pos} of the decompressed value",
                    self._start, base_offset=self.offset)
            message = _legacy_at(inner, self._totals, pos, pos + size)
            if message.is_wrapper:
                raise CorruptRecordError("wrapper message holds another compressed message", self._start,
                                         base_offset=self.offset)
            if message.magic != self.magic:
                raise CorruptRecordError(f"inner message magic {message.magic} differs from wrapper "
                                         f"magic {self.magic}", self._start, base_offset=self.offset)
            records.append(message._plain_record())
            pos += size
        if self.magic >= 1 and records:
            # A wrapper straight from a producer has offset 0 (the broker has not assigned
            # one yet): its inner offsets are then kept as written.
            shift = wrapping_sub64(self.offset, (<Record>records[len(records) - 1])._offset)
            log_append = self.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
            for record in records:
                if shift >= 0:
                    (<Record>record)._offset = wrapping_add64((<Record>record)._offset, shift)
                if log_append:
                    record.timestamp = self.timestamp
        return records

    @staticmethod
    def encode(records, *, int magic=1, base_offset=0, compression=None, compression_level=None,
               int timestamp_type=TIMESTAMP_CREATE_TIME, timestamp=None):
        """A magic 0/1 message set: one message per record, or one compressed wrapper holding them."""
        return _common.encode_legacy(records, magic, base_offset, compression, compression_level,
                                     timestamp_type, timestamp, _as_record_py, _Writer)


cdef LegacyBatch _legacy_at(Records owner, _SetCount totals, Py_ssize_t start, Py_ssize_t end):
    cdef LegacyBatch batch = LegacyBatch.__new__(LegacyBatch)
    _setup_legacy(batch, owner, totals, start, end)
    return batch


cdef int _setup_legacy(LegacyBatch batch, Records owner, _SetCount totals, Py_ssize_t start,
                       Py_ssize_t end) except -1:
    cdef const unsigned char *p = owner._data + start
    cdef ByteReader r
    batch._owner = owner
    batch._totals = totals
    batch._counted = False
    batch._charged = False
    batch._start = start
    batch._end = end
    batch.offset = <int64_t>kp_load_be64(p)
    batch.message_size = <int32_t>kp_load_be32(p + 8)
    batch.crc = kp_load_be32(p + 12)
    batch.magic = <int8_t>p[16]
    batch.attributes = <int8_t>p[17]
    if batch.magic != 0 and batch.magic != 1:
        raise CorruptRecordError(f"magic {batch.magic} is not a legacy message (magic 0 or 1)", start,
                                 base_offset=batch.offset)
    reader_init(&r, owner._data, end)
    r.p = p + 18
    try:
        batch.timestamp = read_int64(&r) if batch.magic == 1 else None
        batch._key_len = read_length32(&r, True, "key length")
        batch._key_start = r.p - owner._data
        if batch._key_len > 0:
            r.p += batch._key_len
        batch._value_len = read_length32(&r, True, "value length")
        batch._value_start = r.p - owner._data
        if batch._value_len > 0:
            r.p += batch._value_len
    except DecodeError as exc:
        raise CorruptRecordError(f"legacy message is corrupt: {exc.reason}", exc.offset,
                                 base_offset=batch.offset) from None
    if r.p != r.end:
        raise CorruptRecordError(f"legacy message has {r.end - r.p} bytes beyond its value",
                                 r.p - owner._data, base_offset=batch.offset)
    return 0


# ---------------------------------------------------------------- columnar
cdef struct RecordSpan:
    int64_t offset
    int64_t timestamp
    const unsigned char *key
    const unsigned char *value
    int32_t key_len             # -1: null
    int32_t value_len
    int64_t header_start        # index into the header spans
    int32_t header_count
    int32_t batch_index
    bint has_timestamp


cdef struct HeaderSpan:
    const unsigned char *key
    const unsigned char *value
    int32_t key_len
    int32_t value_len


cdef class _Spans:
    """Growing C arrays of record and header spans; the buffers they point into are kept in `keep`."""
    cdef RecordSpan *records
    cdef HeaderSpan *headers
    cdef Py_ssize_t n_records, cap_records, n_headers, cap_headers
    cdef list keep

    def __cinit__(self):
        self.keep = []

    def __dealloc__(self):
        PyMem_Free(self.records)
        PyMem_Free(self.headers)

    cdef RecordSpan *add_record(self) except NULL:
        cdef void *grown
        if self.n_records == self.cap_records:
            self.cap_records = self.cap_records * 2 + 256
            grown = PyMem_Realloc(self.records, self.cap_records * sizeof(RecordSpan))
            if grown == NULL:
                raise MemoryError()
            self.records = <RecordSpan *>grown
        self.n_records += 1
        return &self.records[self.n_records - 1]

    cdef HeaderSpan *add_header(self) except NULL:
        cdef void *grown
        if self.n_headers == self.cap_headers:
            self.cap_headers = self.cap_headers * 2 + 64
            grown = PyMem_Realloc(self.headers, self.cap_headers * sizeof(HeaderSpan))
            if grown == NULL:
                raise MemoryError()
            self.headers = <HeaderSpan *>grown
        self.n_headers += 1
        return &self.headers[self.n_headers - 1]


cdef inline int32_t _span_bytes(ByteReader *r, const unsigned char **out, const char *what) except -2:
    cdef int32_t n = read_varint(r)
    if n < 0:
        if n != -1:
            raise_invalid_length(r, n, what)
        out[0] = NULL
        return -1
    if r.end - r.p < n:
        raise_invalid_length(r, n, what)
    out[0] = r.p
    r.p += n
    return n


cdef int _scan_v2(_Spans spans, RecordBatch batch, const unsigned char *data, Py_ssize_t size,
                  int32_t batch_index) except -1:
    """The columnar twin of _decode_v2_records: same checks, spans instead of objects."""
    cdef ByteReader r
    cdef int32_t count = batch.record_count
    cdef int32_t i, j, length, header_count
    cdef int64_t timestamp_delta
    cdef bint log_append = (batch.attributes & ATTR_TIMESTAMP_TYPE) != 0
    cdef const unsigned char *outer_end
    cdef const unsigned char *record_end
    cdef RecordSpan *span
    cdef HeaderSpan *header
    reader_init(&r, data, size)
    _check_record_count(batch, size)
    outer_end = r.end
    for i in range(count):
        if r.p >= outer_end:
            raise CorruptRecordError(f"records end after {i} of {count}", batch._start,
                                     base_offset=batch.base_offset)
        length = read_varint(&r)
        if length < 0 or length > r.end - r.p:
            raise_invalid_length(&r, length, "record length")
        record_end = r.p + length
        r.end = record_end
        read_int8(&r)
        timestamp_delta = read_varlong(&r)
        span = spans.add_record()
        span.offset = wrapping_add64(batch.base_offset, read_varint(&r))
        span.timestamp = batch.max_timestamp if log_append else wrapping_add64(batch.base_timestamp, timestamp_delta)
        span.has_timestamp = True
        span.batch_index = batch_index
        span.key_len = _span_bytes(&r, &span.key, "key length")
        span.value_len = _span_bytes(&r, &span.value, "value length")
        header_count = read_varint(&r)
        if header_count < 0 or header_count > r.end - r.p:
            raise_invalid_length(&r, header_count, "header count")
        span.header_start = spans.n_headers
        span.header_count = header_count
        for j in range(header_count):
            header = spans.add_header()
            header.key_len = _span_bytes(&r, &header.key, "header key length")
            if header.key_len > 0 and not wire_utf8_valid(header.key, header.key_len):
                _raise_bad_header_key(&r, header.key, header.key_len)
            header.value_len = _span_bytes(&r, &header.value, "header value length")
        if r.p != record_end:
            raise_decode(&r, DecodeError, f"record has {record_end - r.p} bytes beyond its fields")
        r.end = outer_end
    if r.p != r.end:
        raise CorruptRecordError(f"{r.end - r.p} bytes left after the {count} records of the batch",
                                 batch._start, base_offset=batch.base_offset)
    return 0


cdef int _add_object_records(_Spans spans, list records, int32_t batch_index) except -1:
    # Legacy records are few and already objects: point the spans at their bytes.
    cdef RecordSpan *span
    cdef Record record
    spans.keep.append(records)
    for item in records:
        record = <Record>item
        span = spans.add_record()
        span.offset = record._offset
        span.timestamp = record._timestamp
        span.has_timestamp = (record._flags & HAS_TIMESTAMP) != 0
        span.batch_index = batch_index
        span.header_start = spans.n_headers
        span.header_count = 0
        # if/else, not a conditional expression: Cython gives that a non-const temporary,
        # and the C compiler warns about the const it drops.
        span.key_len = -1
        span.key = NULL
        if record.key is not None:
            span.key_len = <int32_t>PyBytes_GET_SIZE(record.key)
            span.key = <const unsigned char *>PyBytes_AS_STRING(record.key)
        span.value_len = -1
        span.value = NULL
        if record.value is not None:
            span.value_len = <int32_t>PyBytes_GET_SIZE(record.value)
            span.value = <const unsigned char *>PyBytes_AS_STRING(record.value)
    return 0


# numpy and pyarrow, loaded by the columnar paths on first use (plain message
# decoding never loads them); module globals, not an import statement per call.
cdef object np = None
cdef object pa = None


cdef int _load_arrow() except -1:
    global np, pa
    if pa is None:
        import numpy
        import pyarrow
        np = numpy
        pa = pyarrow
    return 0


cdef object _binary_array(Py_ssize_t n, const unsigned char **pointers, int32_t *lengths, Py_ssize_t stride,
                          bint text=False):
    """An Arrow binary array from n (pointer, length) pairs spaced `stride` bytes apart; length -1 is null."""
    _load_arrow()
    cdef Py_ssize_t i, total = 0, nulls = 0
    cdef int32_t length
    cdef const unsigned char *p
    cdef char *base_p = <char *>pointers
    cdef char *base_l = <char *>lengths
    for i in range(n):
        length = (<int32_t *>(base_l + i * stride))[0]
        if length > 0:
            total += length
        elif length < 0:
            nulls += 1
    large = total > INT32_MAX
    offsets = np.empty(n + 1, dtype=np.int64 if large else np.int32)
    data = np.empty(max(total, 1), dtype=np.uint8)
    validity = np.empty((n + 7) // 8 if nulls else 0, dtype=np.uint8)   # set to 0xFF below
    cdef unsigned char[::1] data_view = data
    cdef unsigned char[::1] validity_view = validity
    cdef int32_t[::1] off32
    cdef int64_t[::1] off64
    cdef unsigned char *out = &data_view[0]
    cdef Py_ssize_t position = 0
    if large:
        off64 = offsets
    else:
        off32 = offsets
    if nulls:
        memset(&validity_view[0], 0xFF, validity_view.shape[0])
    for i in range(n):
        if large:
            off64[i] = position
        else:
            off32[i] = <int32_t>position
        length = (<int32_t *>(base_l + i * stride))[0]
        if length > 0:
            p = (<const unsigned char **>(base_p + i * stride))[0]
            memcpy(out + position, p, length)
            position += length
        elif length < 0:
            validity_view[i >> 3] &= ~(1 << (i & 7))
    if large:
        off64[n] = position
    else:
        off32[n] = <int32_t>position
    return pa.Array.from_buffers(
        (pa.large_string() if large else pa.string()) if text else (pa.large_binary() if large else pa.binary()), n,
        [pa.py_buffer(validity) if nulls else None, pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=nulls)


cdef object _view_array(list owners, Py_ssize_t n, const unsigned char **pointers, int32_t *lengths,
                        Py_ssize_t stride):
    """An Arrow binary_view array over the owners' bytes (no copy of values over 12 bytes).

    Each view is 16 bytes: the length, then either the value itself (12 bytes or less)
    or its first 4 bytes, the index of the buffer holding it and its offset there.
    None when an offset does not fit in 32 bits (the caller copies instead).
    """
    _load_arrow()
    cdef list distinct = []
    cdef list seen_ids = []
    for owner in owners:
        if id(owner) not in seen_ids:
            seen_ids.append(id(owner))
            distinct.append(owner)
    cdef Py_ssize_t nbuf = len(distinct)
    cdef Py_ssize_t k, last = 0, i, nulls = 0
    cdef Py_buffer view
    bases = np.empty(max(nbuf, 1), dtype=np.uintp)
    sizes = np.empty(max(nbuf, 1), dtype=np.intp)
    cdef size_t[::1] base_v = bases
    cdef Py_ssize_t[::1] size_v = sizes
    for k in range(nbuf):
        PyObject_GetBuffer(distinct[k], &view, PyBUF_SIMPLE)
        base_v[k] = <size_t>view.buf
        size_v[k] = view.len
        PyBuffer_Release(&view)     # the owners stay alive: the Arrow buffers below hold them
    views = np.zeros(n * 16 if n else 16, dtype=np.uint8)
    validity = np.empty((n + 7) // 8 if n else 1, dtype=np.uint8)      # set to 0xFF below
    cdef unsigned char[::1] views_v = views
    cdef unsigned char[::1] validity_v = validity
    cdef unsigned char *slot
    cdef const unsigned char *p
    cdef int32_t length
    cdef size_t address, offset
    cdef char *base_p = <char *>pointers
    cdef char *base_l = <char *>lengths
    if n:
        memset(&validity_v[0], 0xFF, validity_v.shape[0])
    for i in range(n):
        length = (<int32_t *>(base_l + i * stride))[0]
        slot = &views_v[i * 16]
        if length < 0:
            validity_v[i >> 3] &= ~(1 << (i & 7))
            nulls += 1
            continue
        memcpy(slot, &length, 4)
        if length == 0:
            continue
        p = (<const unsigned char **>(base_p + i * stride))[0]
        if length <= 12:
            memcpy(slot + 4, p, length)
            continue
        address = <size_t>p
        if not (base_v[last] <= address < base_v[last] + <size_t>size_v[last]):
            for k in range(nbuf):
                if base_v[k] <= address < base_v[k] + <size_t>size_v[k]:
                    last = k
                    break
            else:
                raise AssertionError("record value outside its batch buffers")
        offset = address - base_v[last]
        if offset > <size_t>INT32_MAX:
            return None
        memcpy(slot + 4, p, 4)
        (<int32_t *>(slot + 8))[0] = <int32_t>last
        (<int32_t *>(slot + 12))[0] = <int32_t>offset
    buffers = [pa.py_buffer(validity) if nulls else None, pa.py_buffer(views)]
    buffers += [pa.py_buffer(owner) for owner in distinct]
    return pa.Array.from_buffers(pa.binary_view(), n, buffers, null_count=nulls)


cdef dict _EMPTY = {}


cdef void *_data_pointer(object array) except NULL:
    # The data pointer of a fresh contiguous numpy array (it keeps its memory while alive);
    # cheaper than a typed memoryview for the few columns filled in C here.
    cdef Py_buffer view
    PyObject_GetBuffer(array, &view, PyBUF_SIMPLE)
    cdef void *data = view.buf
    PyBuffer_Release(&view)
    if data == NULL:
        raise ValueError("array without data")
    return data


cdef object _fixed_array(object arrow_type, object values):
    # pa.array() on numpy goes through pandas-compatibility checks that cost more
    # than the rest of a small batch; the buffer is already in Arrow's layout.
    _load_arrow()
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


cdef dict _SCHEMAS = {}


cdef object _schema(bint batch_columns):
    schema = _SCHEMAS.get(batch_columns)
    if schema is None:
        schema = _SCHEMAS[batch_columns] = record_schema(batch_columns)
    return schema


cdef object _view_schema(bint batch_columns, key_type, value_type):
    """The record schema with other key / value types (binary_view for zero-copy columns)."""
    cache_key = (batch_columns, str(key_type), str(value_type))
    schema = _SCHEMAS.get(cache_key)
    if schema is None:
        schema = _SCHEMAS[cache_key] = _schema(batch_columns).set(2, pa.field("key", key_type)).set(
            3, pa.field("value", value_type))
    return schema


cdef int _raise_bad_header_key(ByteReader *r, const unsigned char *key, int32_t n) except -1:
    # The error _read_headers raises for the same key: the columnar reader words it alike.
    r.p = key
    try:
        PyUnicode_DecodeUTF8(<const char *>key, n, NULL)
    except UnicodeDecodeError as exc:
        raise_decode(r, DecodeError, f"invalid UTF-8 in header key: {exc.reason}")
    raise AssertionError("wire_utf8_valid and Python's decoder disagree on a header key")


def _columnar(batches, bint batch_columns, bint zero_copy=False):
    _load_arrow()
    cdef _Spans spans = _Spans()
    cdef int32_t batch_index = 0
    cdef RecordBatch v2
    cdef Py_buffer view
    cdef Py_ssize_t i, n
    cdef RecordSpan *span
    cdef bint object_records = False
    batch_rows = []
    for batch in batches:
        if isinstance(batch, RecordBatch):
            v2 = <RecordBatch>batch
            if v2._owner.verify_crc and not v2._checked:
                v2.verify_crc()
            _check_record_limit(v2)
            if not (v2.attributes & ATTR_COMPRESSION):
                try:
                    _scan_v2(spans, v2, v2._owner._data + v2._start + V2_HEADER_SIZE,
                             v2._end - v2._start - V2_HEADER_SIZE, batch_index)
                except CorruptRecordError:
                    raise
                except DecodeError as exc:
                    base = v2._start + V2_HEADER_SIZE
                    raise CorruptRecordError(
                        f"record batch is corrupt: {exc.reason} at byte offset {base + (exc.offset or 0)}",
                        base + (exc.offset or 0), base_offset=v2.base_offset) from None
                spans.keep.append(v2._owner)
            else:
                payload = v2.payload()
                spans.keep.append(payload)
                PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
                try:
                    _scan_v2(spans, v2, <const unsigned char *>view.buf, view.len, batch_index)
                except CorruptRecordError:
                    raise
                except DecodeError as exc:
                    raise CorruptRecordError(
                        f"record batch is corrupt: {exc.reason} at byte {exc.offset} of the decompressed records",
                        v2._start, base_offset=v2.base_offset) from None
                finally:
                    PyBuffer_Release(&view)
        else:
            _add_object_records(spans, batch.records(), batch_index)
            object_records = True
        if batch_columns:
            batch_rows.append(_common.batch_values(batch))
        batch_index += 1

    n = spans.n_records
    offset = np.empty(n, dtype=np.int64)
    timestamp = np.empty(n, dtype=np.int64)
    header_count = np.empty(n, dtype=np.int32)
    header_offsets = np.empty(n + 1, dtype=np.int32)
    batch_of = np.empty(n, dtype=np.int32)
    cdef int64_t *offset_v = <int64_t *>_data_pointer(offset)
    cdef int64_t *timestamp_v = <int64_t *>_data_pointer(timestamp)
    cdef int32_t *header_count_v = <int32_t *>_data_pointer(header_count)
    cdef int32_t *header_offsets_v = <int32_t *>_data_pointer(header_offsets)
    cdef int32_t *batch_of_v = <int32_t *>_data_pointer(batch_of)
    cdef Py_ssize_t missing_timestamps = 0
    if spans.n_headers > INT32_MAX:
        raise DecodeError("more than 2**31 record headers in one table")
    for i in range(n):
        span = &spans.records[i]
        offset_v[i] = span.offset
        timestamp_v[i] = span.timestamp if span.has_timestamp else 0
        if not span.has_timestamp:
            missing_timestamps += 1
        header_count_v[i] = span.header_count
        header_offsets_v[i] = <int32_t>span.header_start
        batch_of_v[i] = span.batch_index
    header_offsets_v[n] = <int32_t>spans.n_headers

    timestamp_array = _fixed_array(pa.int64(), timestamp)
    if missing_timestamps:
        has_timestamp = np.fromiter((spans.records[i].has_timestamp for i in range(n)), dtype=bool, count=n)
        timestamp_array = pa.array(timestamp, mask=~has_timestamp)
    keys = values = None
    if zero_copy and not object_records:
        keys = _view_array(spans.keep, n, &spans.records[0].key if n else NULL,
                           &spans.records[0].key_len if n else NULL, sizeof(RecordSpan))
        values = _view_array(spans.keep, n, &spans.records[0].value if n else NULL,
                             &spans.records[0].value_len if n else NULL, sizeof(RecordSpan))
    if keys is None or values is None:
        # Not asked for; or legacy records (values in bytes objects of their own, not in a
        # batch buffer) or a buffer too large for 32-bit view offsets: copied, and still
        # binary_view when zero_copy was asked for, so the type does not depend on the data.
        keys = _binary_array(n, &spans.records[0].key if n else NULL, &spans.records[0].key_len if n else NULL,
                             sizeof(RecordSpan))
        values = _binary_array(n, &spans.records[0].value if n else NULL,
                               &spans.records[0].value_len if n else NULL, sizeof(RecordSpan))
        if zero_copy:
            keys = keys.cast(pa.binary_view())
            values = values.cast(pa.binary_view())
    if spans.n_headers:
        header_keys = _binary_array(spans.n_headers, &spans.headers[0].key, &spans.headers[0].key_len,
                                    sizeof(HeaderSpan), text=True)
        header_values = _binary_array(spans.n_headers, &spans.headers[0].value, &spans.headers[0].value_len,
                                      sizeof(HeaderSpan))
    schema = _schema(batch_columns)
    header_type = schema.field("headers").type
    if spans.n_headers:
        headers = pa.ListArray.from_arrays(
            _fixed_array(pa.int32(), header_offsets),
            pa.StructArray.from_arrays([header_keys, header_values], fields=list(header_type.value_type)),
            type=header_type)
    else:   # most batches carry no headers: n empty lists over one shared empty struct array
        empty = _EMPTY.get("headers")
        if empty is None:
            empty = _EMPTY["headers"] = pa.StructArray.from_arrays(
                [pa.array([], pa.string()), pa.array([], pa.binary())], fields=list(header_type.value_type))
        headers = pa.Array.from_buffers(header_type, n, [None, pa.py_buffer(header_offsets)], children=[empty])
    if keys.type != pa.binary() or values.type != pa.binary():
        schema = _view_schema(batch_columns, keys.type, values.type)
    arrays = [_fixed_array(pa.int64(), offset), timestamp_array, keys, values,
              _fixed_array(pa.int32(), header_count), headers]
    if batch_columns:
        # One value per batch, spread to the records with one numpy gather.
        per_batch = np.array([[0 if value is None else value for value in row] for row in batch_rows],
                             dtype=np.int64).reshape(len(batch_rows), len(_BATCH_COLUMNS))
        missing = np.array([[value is None for value in row] for row in batch_rows],
                           dtype=bool).reshape(per_batch.shape)
        spread = per_batch[batch_of] if n else per_batch[:0]
        any_missing = missing.any(axis=0)
        for column, (name, kind) in enumerate(_BATCH_COLUMNS):
            values_np = spread[:, column].astype(np.bool_ if kind == "bool" else kind)
            if any_missing[column]:
                arrays.append(pa.array(values_np, mask=missing[batch_of, column]))
            else:
                arrays.append(pa.array(values_np))
    return pa.Table.from_arrays(arrays, schema=schema)


cdef Records records_view_over(object owner, Py_ssize_t offset, Py_ssize_t size):
    """A Records over owner's bytes [offset, offset + size), for the message codec.

    For an immutable bytes owner the pointer is taken directly (no buffer export,
    no memoryview): the decoder makes one per partition of a Fetch or Produce.
    """
    cdef Records view = Records.__new__(Records, b"")
    cdef Py_buffer buf
    PyBuffer_Release(&view._view)
    view._has_view = False
    if PyBytes_CheckExact(owner):
        view._data = <const unsigned char *>PyBytes_AS_STRING(owner) + offset
    else:
        PyObject_GetBuffer(owner, &view._view, PyBUF_SIMPLE)
        view._has_view = True
        view._data = <const unsigned char *>view._view.buf + offset
    view._source = owner
    view._size = size
    view._shape[0] = size
    return view

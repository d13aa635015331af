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
from cpython.mem cimport PyMem_Realloc, PyMem_Free
from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef extern from "Python.h":
    int PyGC_Disable() noexcept
    int PyGC_Enable() noexcept
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t,
                          INT8_MIN, INT8_MAX, INT16_MIN, INT16_MAX, INT32_MIN, INT32_MAX,
                          INT64_MIN, INT64_MAX)
from libc.string cimport memcmp, memcpy, memset

from kproto._c._wire cimport (
    ATTR_COMPRESSION, ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, LENGTH_AT,
    LOG_OVERHEAD, V2_ATTRIBUTES_AT, V2_HEADER_SIZE, V2_RECORDS_COUNT_AT, wire_utf8_valid,
)
from kproto._c._buffer cimport (
    ByteReader, ByteWriter, reader_init, read_int8, read_int64, read_varint, read_varint_length, read_varlong,
    read_length32, raise_decode, writer_init, writer_free,
    writer_to_bytes, write_raw, write_int8, write_varint, write_varlong,
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
    CorruptRecordError, CrcMismatchError, DecodeError, DecompressionError, EncodeError,
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
# The same defaults as C values, for Records.__cinit__ (run once per partition decoded).
cdef Py_ssize_t _DEFAULT_MAX_C = _DEFAULT_MAX
cdef Py_ssize_t _DEFAULT_MAX_RECORDS_C = _DEFAULT_MAX_RECORDS
cdef Py_ssize_t _DEFAULT_MAX_RECORDS_PER_SET_C = _DEFAULT_MAX_RECORDS_PER_SET
cdef Py_ssize_t _DEFAULT_MAX_PER_SET_C = _DEFAULT_MAX_PER_SET

# The record-batch layout (LOG_OVERHEAD, V2_ATTRIBUTES_AT, ATTR_*, ...) is the wire layer's (_wire.pxd).
cdef enum:
    # Record._flags
    HAS_OFFSET = 1
    HAS_TIMESTAMP = 2
    HAS_DELTA = 4

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

    # Optional int64 fields: each a value and a bit of _flags saying it is there (None when not).
    @property
    def offset(self):
        return _optional_int64(self._flags, HAS_OFFSET, self._offset)

    @offset.setter
    def offset(self, value):
        _set_optional_int64(&self._flags, HAS_OFFSET, &self._offset, value)

    @property
    def timestamp(self):
        return _optional_int64(self._flags, HAS_TIMESTAMP, self._timestamp)

    @timestamp.setter
    def timestamp(self, value):
        _set_optional_int64(&self._flags, HAS_TIMESTAMP, &self._timestamp, value)

    @property
    def timestamp_delta(self):
        return _optional_int64(self._flags, HAS_DELTA, self._timestamp_delta)

    @timestamp_delta.setter
    def timestamp_delta(self, value):
        _set_optional_int64(&self._flags, HAS_DELTA, &self._timestamp_delta, value)

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


cdef inline object _optional_int64(int flags, int flag, int64_t value):
    """An optional field's value, or None when its flag is clear."""
    return value if flags & flag else None


cdef inline int _set_optional_int64(int *flags, int flag, int64_t *slot, object value) except -1:
    """Set an optional field: None clears its flag, an int is stored and sets it."""
    if value is None:
        flags[0] &= ~flag
    else:
        slot[0] = value
        flags[0] |= flag
    return 0


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


cdef const unsigned char *EMPTY_RECORDS = <const unsigned char *>b""


@cython.freelist(256)   # a Fetch or Produce decode makes one per partition and drops them together
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
    def __cinit__(self):
        # Empty, with the default limits, until __init__ (or the codec's records_view_over,
        # which makes one per partition and so skips __init__'s argument parsing) points
        # it at bytes. A __cinit__ without arguments ignores the constructor's.
        self._data = EMPTY_RECORDS
        self._tail = -1
        self._set_limits(_DEFAULT_MAX_C, _DEFAULT_MAX_RECORDS_C, _DEFAULT_MAX_RECORDS_PER_SET_C,
                         _DEFAULT_MAX_PER_SET_C, True)

    def __init__(self, data=b"", *, max_decompressed_size=_DEFAULT_MAX, max_records_per_batch=_DEFAULT_MAX_RECORDS,
                 max_records_per_set=_DEFAULT_MAX_RECORDS_PER_SET,
                 max_decompressed_size_per_set=_DEFAULT_MAX_PER_SET, bint verify_crc=True):
        cdef Py_buffer view
        # Another Records is exported through its own buffer (its slice, kept alive by it).
        source = data
        PyObject_GetBuffer(source, &view, PyBUF_SIMPLE)
        if self._has_view:   # __init__ called again: the new bytes replace the old
            PyBuffer_Release(&self._view)
        self._view = view
        self._has_view = True
        self._source = source
        self._data = <const unsigned char *>self._view.buf
        self._size = self._view.len
        self._shape[0] = self._size
        self._tail = -1
        self._set_limits(max_decompressed_size, max_records_per_batch, max_records_per_set,
                         max_decompressed_size_per_set, verify_crc)

    cdef void _set_limits(self, Py_ssize_t max_decompressed_size, Py_ssize_t max_records_per_batch,
                          Py_ssize_t max_records_per_set, Py_ssize_t max_decompressed_size_per_set,
                          bint verify_crc) noexcept:
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
        raise _common.too_many_in_set(before, count, owner.max_records_per_set, start, base_offset)
    totals.records_read = before + count
    return 0


cdef object _decompress(Records owner, _SetCount totals, int codec, object data, bint charged, str what,
                        Py_ssize_t start, int64_t base_offset):
    """Decompress a batch's payload within the caps of the batch and of the set.

    A batch is charged once (``charged`` says it was): its output, or all it was
    allowed when decompression fails (the work it caused is not known).
    """
    # _common.decompression_allowance's rule, inline: a call per batch costs 8% on small batches
    cdef Py_ssize_t used = totals.bytes_decompressed
    cdef Py_ssize_t allowed = owner.max_decompressed_size
    cdef Py_ssize_t left = owner.max_decompressed_size_per_set - used
    cdef bint set_binds = not charged and left < allowed
    if set_binds:
        allowed = max(left, 0)
    try:
        out = _compression.decompress(codec, data, max_size=allowed)
    except DecompressionError as exc:
        if not charged:
            totals.bytes_decompressed += allowed
        raise _common.decompression_failure(exc, set_binds, owner.max_decompressed_size_per_set, used, what,
                                            start, base_offset) from None
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
        cdef _OneBatch batch
        if records._data[start + 16] == 2:
            batch = RecordBatch.__new__(RecordBatch)
        else:
            batch = LegacyBatch.__new__(LegacyBatch)
        batch._setup(records, self.totals, start, start + size)
        return batch


# ---------------------------------------------------------------- one batch
cdef class _OneBatch:
    """What a magic 2 batch and a legacy message share: where they lie in their Records,
    how one is made from a buffer holding it (``RecordBatch(data)``), and the CRC check.
    Each kind sets itself up (_setup), computes its CRC (computed_crc) and names both."""
    cdef Records _owner
    cdef _SetCount _totals
    cdef Py_ssize_t _start
    cdef Py_ssize_t _end
    cdef bint _counted      # its records added to the set's (once, however often read)
    cdef bint _charged      # its decompressed bytes added to the set's
    cdef readonly int magic
    cdef readonly uint32_t crc
    cdef readonly int attributes

    _WHAT = "batch"         # in the error for a buffer that ends inside it
    _CRC_WHAT = "CRC"

    def __init__(self, data, *, max_decompressed_size=_DEFAULT_MAX, max_records_per_batch=_DEFAULT_MAX_RECORDS,
                 bint verify_crc=True):
        cdef Records owner = _single_batch_records(data, max_decompressed_size, max_records_per_batch,
                                                   verify_crc)
        cdef Py_ssize_t size = _batch_size(owner._data, owner._size, 0)
        if size <= 0:
            raise CorruptRecordError(f"{self._WHAT} is truncated: {owner._size} bytes", 0)
        self._setup(owner, _SetCount(), 0, size)

    cdef int _setup(self, Records owner, _SetCount totals, Py_ssize_t start, Py_ssize_t end) except -1:
        """Read the header of the batch at owner[start:end] (each kind its own)."""
        raise NotImplementedError

    cdef int _place(self, Records owner, _SetCount totals, Py_ssize_t start, Py_ssize_t end) except -1:
        """Where the batch lies; nothing of it counted or charged yet."""
        self._owner = owner
        self._totals = totals
        self._start = start
        self._end = end
        self._counted = False
        self._charged = False
        return 0

    cdef int64_t _offset_in_errors(self):
        """The offset an error about the batch names (read without decompressing)."""
        return 0

    @property
    def compression(self):
        """Codec code from the attributes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & ATTR_COMPRESSION

    @property
    def compression_name(self):
        return _compression.codec_name(self.attributes & ATTR_COMPRESSION)

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

    @property
    def crc_valid(self):
        return self.computed_crc == self.crc

    def verify_crc(self):
        """Raise CrcMismatchError (naming the base offset) unless the stored CRC matches."""
        computed = self.computed_crc
        if computed != self.crc:
            raise CrcMismatchError(
                f"{self._CRC_WHAT} mismatch: stored {self.crc:#010x}, computed {computed:#010x}",
                self._start, base_offset=self._offset_in_errors(), stored_crc=self.crc, computed_crc=computed)


include "_records_v2.pxi"
include "_records_legacy.pxi"
include "_records_columns.pxi"

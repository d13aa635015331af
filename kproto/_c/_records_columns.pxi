# Part of _records.pyx (included there; one module split by responsibility).
# Records as columns: spans over the record bytes, then Arrow arrays without a Python object per record.

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

    # The count check stays here, on every record's path; the rare growth is one helper.
    cdef RecordSpan *add_record(self) except NULL:
        if self.n_records == self.cap_records:
            _grow_array(<void **>&self.records, &self.cap_records, sizeof(RecordSpan), 256)
        self.n_records += 1
        return &self.records[self.n_records - 1]

    cdef HeaderSpan *add_header(self) except NULL:
        if self.n_headers == self.cap_headers:
            _grow_array(<void **>&self.headers, &self.cap_headers, sizeof(HeaderSpan), 64)
        self.n_headers += 1
        return &self.headers[self.n_headers - 1]


cdef int _grow_array(void **items, Py_ssize_t *capacity, size_t item_size, Py_ssize_t first) except -1:
    """Make room in a PyMem array of capacity[0] items: double it, plus first (its size
    when empty); the capacity changes only once the memory is there."""
    cdef Py_ssize_t grown_capacity = capacity[0] * 2 + first
    cdef void *grown = PyMem_Realloc(items[0], grown_capacity * item_size)
    if grown == NULL:
        raise MemoryError()
    items[0] = grown
    capacity[0] = grown_capacity
    return 0


cdef inline int32_t _span_bytes(ByteReader *r, const unsigned char **out, const char *what) except -2:
    cdef int32_t n = read_varint_length(r, True, what)
    if n < 0:
        out[0] = NULL
        return -1
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
        length = read_varint_length(&r, False, "record length")
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
        header_count = read_varint_length(&r, False, "header count")
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
    cdef Records view = Records.__new__(Records)
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

# Part of _records.pyx (included there; one module split by responsibility).
# Magic 2 record batches: reading (RecordBatch) and encoding.

# ---------------------------------------------------------------- magic 2 batches
cdef class RecordBatch(_OneBatch):
    """A magic 2 record batch, read lazily from a buffer it does not copy.

    The header fields are read when the batch is made; the records are
    decompressed and decoded only when asked for (``records()``, iteration,
    ``to_arrow()``), and the CRC-32C is verified then (or by ``verify_crc()``).
    ``RecordBatch(data)`` reads the batch at the start of ``data``.
    """
    cdef bint _checked
    cdef readonly int64_t base_offset
    cdef readonly int32_t batch_length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t record_count

    _WHAT = "record batch"
    _CRC_WHAT = "record batch CRC-32C"

    cdef int _setup(self, Records owner, _SetCount totals, Py_ssize_t start, Py_ssize_t end) except -1:
        return _setup_batch(self, owner, totals, start, end)

    cdef int64_t _offset_in_errors(self):
        return self.base_offset

    # ---- header facts
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
        cdef const unsigned char *p = self._owner._data + self._start + V2_ATTRIBUTES_AT
        cdef size_t n = self._end - self._start - V2_ATTRIBUTES_AT
        cdef uint32_t crc
        with nogil:
            crc = kp_crc32c(0, p, n)
        return crc

    def verify_crc(self):
        """Raise CrcMismatchError (naming the base offset) unless the stored CRC-32C matches."""
        _OneBatch.verify_crc(self)
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
        raise _common.too_many_in_batch(batch.record_count, batch._owner.max_records_per_batch,
                                        batch._start + V2_RECORDS_COUNT_AT, batch.base_offset)
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


cdef int _setup_batch(RecordBatch batch, Records owner, _SetCount totals, Py_ssize_t start,
                      Py_ssize_t end) except -1:
    cdef const unsigned char *p = owner._data + start
    batch._place(owner, totals, start, end)
    batch._checked = False
    batch.base_offset = <int64_t>kp_load_be64(p)
    batch.magic = <int8_t>p[16]
    if batch.magic != 2:    # before the header is read: a legacy message may be shorter than it
        raise CorruptRecordError(f"magic {batch.magic} is not a record batch (magic 2)", start,
                                 base_offset=batch.base_offset)
    batch.batch_length = <int32_t>kp_load_be32(p + LENGTH_AT)
    batch.partition_leader_epoch = <int32_t>kp_load_be32(p + 12)
    batch.crc = kp_load_be32(p + 17)
    batch.attributes = <int16_t>kp_load_be16(p + V2_ATTRIBUTES_AT)
    batch.last_offset_delta = <int32_t>kp_load_be32(p + 23)
    batch.base_timestamp = <int64_t>kp_load_be64(p + 27)
    batch.max_timestamp = <int64_t>kp_load_be64(p + 35)
    batch.producer_id = <int64_t>kp_load_be64(p + 43)
    batch.producer_epoch = <int16_t>kp_load_be16(p + 51)
    batch.base_sequence = <int32_t>kp_load_be32(p + 53)
    batch.record_count = <int32_t>kp_load_be32(p + 57)
    return 0


cdef inline object _varint_bytes(ByteReader *r, const char *what):
    cdef int32_t n = read_varint_length(r, True, what)
    cdef object out
    if n < 0:
        return None
    out = PyBytes_FromStringAndSize(<const char *>r.p, n)
    r.p += n
    return out


cdef object _read_headers(ByteReader *r, int32_t count):
    cdef list pairs = []
    cdef int32_t i, n
    cdef object key
    for i in range(count):
        n = read_varint_length(r, True, "header key length")
        if n < 0:
            key = None
        else:
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
        length = read_varint_length(&r, False, "record length")
        record_end = r.p + length
        r.end = record_end          # a record may not read past its own length
        attributes = read_int8(&r)
        timestamp_delta = read_varlong(&r)
        offset_delta = read_varint(&r)
        key = _varint_bytes(&r, "key length")
        value = _varint_bytes(&r, "value length")
        header_count = read_varint_length(&r, False, "header count")
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
            crc = kp_crc32c(0, h + V2_ATTRIBUTES_AT, w.length - V2_ATTRIBUTES_AT)
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

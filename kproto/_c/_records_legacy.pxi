# Part of _records.pyx (included there; one module split by responsibility).
# Legacy message sets, magic 0 and 1 (LegacyBatch).

# ---------------------------------------------------------------- legacy message sets
cdef class LegacyBatch(_OneBatch):
    """One top-level message of a magic 0 or 1 message set (a plain message or a compressed wrapper).

    Iterating gives its records: the message itself, or for a wrapper the inner
    messages with absolute offsets. The CRC-32 is verified when records are read.
    """
    cdef readonly int64_t offset
    cdef readonly int32_t message_size
    cdef readonly object timestamp
    cdef Py_ssize_t _key_start, _key_len, _value_start, _value_len   # len -1: null

    is_transactional = False
    is_control = False

    _WHAT = "message"
    _CRC_WHAT = "message CRC-32"

    cdef int _setup(self, Records owner, _SetCount totals, Py_ssize_t start, Py_ssize_t end) except -1:
        return _setup_legacy(self, owner, totals, start, end)

    cdef int64_t _offset_in_errors(self):
        return self.offset

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

    def __repr__(self):
        return (f"LegacyBatch(magic={self.magic}, offset={self.offset}, "
                f"compression={self.compression_name!r}, size={self.size})")

    @property
    def computed_crc(self):
        return zlib.crc32(memoryview(self._owner)[self._start + 16:self._end])

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
            message = LegacyBatch.__new__(LegacyBatch)
            _setup_legacy(message, inner, self._totals, pos, pos + size)
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


cdef int _setup_legacy(LegacyBatch batch, Records owner, _SetCount totals, Py_ssize_t start,
                       Py_ssize_t end) except -1:
    cdef const unsigned char *p = owner._data + start
    cdef ByteReader r
    batch._place(owner, totals, start, end)
    batch.offset = <int64_t>kp_load_be64(p)
    batch.message_size = <int32_t>kp_load_be32(p + LENGTH_AT)
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

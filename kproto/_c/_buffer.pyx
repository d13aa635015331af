# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Byte reader and writer of the Cython hot path, and their Python faces.

`Reader` and `Writer` expose every Kafka primitive to Python (the tests and
hand-written codecs use them); the message codec, record batches and the
batch decoder use the inline C functions of _buffer.pxd directly.
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Malloc, PyMem_Realloc, PyMem_Free
from cpython.unicode cimport PyUnicode_DecodeUTF8
from kproto._c._wire cimport WIRE_NO_LENGTH, WIRE_TAG_BOUND, WIRE_TAG_ORDER
from libc.stdint cimport INT8_MIN, INT8_MAX, INT16_MIN, INT16_MAX, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX

import uuid as _uuid_module

from kproto.errors import (
    DecodeError, EncodeError, InvalidLengthError, InvalidVarintError, TruncatedError,
)

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL

cdef object UUID = _uuid_module.UUID
cdef object SAFE_UNKNOWN = _uuid_module.SafeUUID.unknown
cdef object ZERO_UUID = _uuid_module.UUID(int=0)
cdef object _object_setattr = object.__setattr__
cdef object _uuid_new = _uuid_module.UUID.__new__

cdef extern from *:
    """
    /* A 128-bit big-endian unsigned integer as a Python int, in one call. */
    static PyObject *kp_uint128_be(const unsigned char *p) {
    #if PY_VERSION_HEX >= 0x030D0000
        return PyLong_FromUnsignedNativeBytes(p, 16, Py_ASNATIVEBYTES_BIG_ENDIAN);
    #else
        return _PyLong_FromByteArray(p, 16, 0, 0);
    #endif
    }
    /* An instance of the uuid.UUID class tp with its int and is_safe slots set. */
    static PyObject *kp_uuid_with_slots(PyObject *tp, Py_ssize_t int_offset, Py_ssize_t safe_offset,
                                        PyObject *value, PyObject *safe) {
        PyObject *u = ((PyTypeObject *)tp)->tp_alloc((PyTypeObject *)tp, 0);
        if (u == NULL)
            return NULL;
        Py_INCREF(value);
        *(PyObject **)((char *)u + int_offset) = value;
        Py_INCREF(safe);
        *(PyObject **)((char *)u + safe_offset) = safe;
        return u;
    }
    """
    object kp_uint128_be(const unsigned char *p)
    object kp_uuid_with_slots(PyObject *tp, Py_ssize_t int_offset, Py_ssize_t safe_offset, object value,
                              object safe)
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member


cdef Py_ssize_t member_slot_offset(object descr):
    """The offset in its instances of the slot a class attribute describes, or -1 when
    the attribute is not a slot's member descriptor."""
    if descr is None or type(descr).__name__ != "member_descriptor":
        return -1
    return (<PyMemberDescrObject *>descr).d_member.offset


# uuid.UUID is immutable through __setattr__, so uuid.py itself writes its two slots
# with object.__setattr__; the decoder writes them in place (same objects, no call).
# (-1: not plain slots, another uuid module; then the decoder calls as uuid.py does.)
cdef Py_ssize_t UUID_INT_OFFSET = member_slot_offset(UUID.__dict__.get("int"))
cdef Py_ssize_t UUID_SAFE_OFFSET = member_slot_offset(UUID.__dict__.get("is_safe"))
cdef bint UUID_SLOTS_KNOWN = UUID_INT_OFFSET > 0 and UUID_SAFE_OFFSET > 0


# ---------------------------------------------------------------- errors
cdef str format_path(ByteReader *r):
    cdef list parts = []
    cdef int i
    if r.root_name != NULL:
        parts.append(<str>r.root_name)
    for i in range(min(r.depth, MAX_PATH_DEPTH)):
        if r.path[i].name != NULL:
            if parts:
                parts.append(".")
            parts.append(<str>r.path[i].name)
        if r.path[i].index >= 0:
            parts.append(f"[{r.path[i].index}]")
    return "".join(parts) or None


cdef int raise_decode(ByteReader *r, object exc_type, str reason) except -1:
    raise exc_type(
        reason,
        r.p - r.start,
        format_path(r),
        r.api_key if r.api_key >= 0 else None,
        r.api_version if r.api_version >= 0 else None,
    )


cdef int raise_truncated(ByteReader *r, Py_ssize_t need) except -1:
    return raise_decode(r, TruncatedError,
                        f"truncated: need {need} bytes, {r.end - r.p} left")


cdef int raise_invalid_length(ByteReader *r, int64_t length, const char *what) except -1:
    return raise_decode(r, InvalidLengthError,
                        f"invalid {what.decode()} {length} with {r.end - r.p} bytes left")


cdef int raise_invalid_varint(ByteReader *r, const char *what) except -1:
    return raise_decode(r, InvalidVarintError, f"invalid varint: {what.decode()}")


cdef int raise_varint_status(ByteReader *r, int status, const char *what) except -1:
    if status == ST_TRUNCATED:
        return raise_truncated(r, 1)
    return raise_invalid_varint(r, what)


cdef int raise_tag_status(ByteReader *r, int status, const WireTag *t) except -1:
    if t.step == WIRE_TAG_ORDER:
        return raise_decode(r, DecodeError, f"tagged field {t.tag} out of order (after {t.previous})")
    if t.step == WIRE_TAG_BOUND:
        return raise_truncated(r, t.size)
    return raise_varint_status(r, status, UVARINT_ERROR)


cdef int raise_length_status(ByteReader *r, int status, Py_ssize_t pos, bint compact, bint wide, int64_t length,
                             const char *what) except -1:
    """The error of a length prefix wire_length refused (pos: where it stopped, from r.p)."""
    if length == WIRE_NO_LENGTH and not compact:                # a fixed-width prefix cut short
        return raise_truncated(r, 4 if wide else 2)
    r.p += pos
    if length == WIRE_NO_LENGTH:                                # a compact prefix's varint
        return raise_varint_status(r, status, UVARINT_ERROR)
    if status == ST_BAD_LENGTH:
        return raise_invalid_length(r, length, what)
    return raise_truncated(r, length)


cdef int raise_encode_range(object value, const char *type_name) except -1:
    raise EncodeError(f"{value!r} does not fit in {type_name.decode()}")


# ---------------------------------------------------------------- object values
cdef object read_str_body(ByteReader *r, Py_ssize_t n):
    # Caller has proven n <= bytes left.
    cdef const unsigned char *p = r.p
    try:
        s = PyUnicode_DecodeUTF8(<const char *>p, n, NULL)
    except UnicodeDecodeError as exc:
        raise_decode(r, DecodeError, f"invalid UTF-8 in string: {exc.reason}")
    r.p += n
    return s


cdef object read_bytes_body(ByteReader *r, Py_ssize_t n):
    cdef bytes b = PyBytes_FromStringAndSize(<const char *>r.p, n)
    r.p += n
    return b


cdef object read_uuid(ByteReader *r):
    if r.end - r.p < 16:
        raise_truncated(r, 16)
    cdef uint64_t hi = kp_load_be64(r.p)
    cdef uint64_t lo = kp_load_be64(r.p + 8)
    r.p += 16
    if hi == 0 and lo == 0:
        return ZERO_UUID
    # UUID(int=...) validates and is slow; build the immutable object directly.
    if UUID_SLOTS_KNOWN:
        return new_uuid(kp_uint128_be(r.p - 16))
    u = _uuid_new(UUID)
    _object_setattr(u, "int", (<object>hi << 64) | <object>lo)
    _object_setattr(u, "is_safe", SAFE_UNKNOWN)
    return u


cdef inline object new_uuid(object value):
    """A uuid.UUID holding value, its two slots written as object.__setattr__ would."""
    return kp_uuid_with_slots(<PyObject *>UUID, UUID_INT_OFFSET, UUID_SAFE_OFFSET, value, SAFE_UNKNOWN)


cdef object read_string_value(ByteReader *r, bint compact, bint nullable):
    cdef Py_ssize_t n
    if compact:
        n = read_compact_length(r, nullable, "string length")
    else:
        n = read_length16(r, nullable, "string length")
    if n < 0:
        return None
    return read_str_body(r, n)


cdef object read_bytes_value(ByteReader *r, bint compact, bint nullable):
    cdef Py_ssize_t n
    if compact:
        n = read_compact_length(r, nullable, "bytes length")
    else:
        n = read_length32(r, nullable, "bytes length")
    if n < 0:
        return None
    return read_bytes_body(r, n)


cdef dict read_raw_tagged_fields(ByteReader *r):
    """A tagged-field section kept raw: {tag: bytes}, or None when it is empty."""
    cdef uint32_t count = read_tag_count(r)
    cdef uint32_t i
    cdef WireTag t
    if count == 0:
        return None
    fields = {}
    t.previous = -1
    for i in range(count):  # no-cython-lint: a typed counter makes a C loop
        read_tag_entry(r, &t)
        fields[t.tag] = read_bytes_body(r, t.size)
    return fields


# ---------------------------------------------------------------- writer
cdef int write_raw_tagged_fields(ByteWriter *w, object fields) except -1:
    """A tagged-field section from {tag: raw bytes} (None or empty: no fields), tags ascending."""
    if not fields:
        return write_unsigned_varint(w, 0)
    write_unsigned_varint(w, <uint32_t>len(fields))
    for tag in sorted(fields):
        data = bytes(fields[tag])
        write_unsigned_varint(w, <uint32_t>as_int(tag, 0, 0xFFFFFFFF, "tag"))
        write_unsigned_varint(w, <uint32_t>PyBytes_GET_SIZE(data))
        write_raw(w, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    return 0


cdef int writer_init(ByteWriter *w, Py_ssize_t capacity) except -1:
    w.buf = <unsigned char *>PyMem_Malloc(capacity)
    if w.buf == NULL:
        raise MemoryError()
    w.length = 0
    w.capacity = capacity
    return 0


cdef void writer_free(ByteWriter *w) noexcept:
    PyMem_Free(w.buf)
    w.buf = NULL
    w.length = 0
    w.capacity = 0


cdef int writer_grow(ByteWriter *w, Py_ssize_t extra) except -1:
    cdef Py_ssize_t capacity = w.capacity * 2
    if capacity < w.length + extra:
        capacity = w.length + extra + 64
    cdef unsigned char *grown = <unsigned char *>PyMem_Realloc(w.buf, capacity)
    if grown == NULL:
        raise MemoryError()
    w.buf = grown
    w.capacity = capacity
    return 0


cdef bytes writer_to_bytes(ByteWriter *w):
    return PyBytes_FromStringAndSize(<const char *>w.buf, w.length)


cdef int64_t as_int(object value, int64_t lo, int64_t hi, const char *type_name) except? -1:
    # bool is an int in Python; Kafka ints are not booleans, but True/False still fit.
    cdef int64_t v = 0  # set: the compiler cannot see that raise_encode_range never returns
    try:
        v = value
    except OverflowError:
        raise_encode_range(value, type_name)
    except TypeError:
        raise EncodeError(f"expected an int for {type_name.decode()}, got {type(value).__name__}")
    if v < lo or v > hi:
        raise_encode_range(value, type_name)
    return v


cdef int write_length(ByteWriter *w, Py_ssize_t n, bint compact, bint wide) except -1:
    # n == -1 writes the null marker.
    if compact:
        if n > 0x7FFFFFFE:
            raise EncodeError(f"length {n} too large for a compact length")
        return write_unsigned_varint(w, <uint32_t>(n + 1))
    if wide:
        if n > INT32_MAX:
            raise EncodeError(f"length {n} too large for an int32 length")
        return write_int32(w, <int32_t>n)
    if n > INT16_MAX:
        raise EncodeError(f"string of {n} bytes is longer than an int16 length allows (32767)")
    return write_int16(w, <int16_t>n)


cdef int write_string_value(ByteWriter *w, object value, bint compact, bint nullable) except -1:
    cdef Py_ssize_t n
    cdef const char *data
    if value is None:
        if not nullable:
            raise EncodeError("null string in a non-nullable field")
        return write_length(w, -1, compact, False)
    if not isinstance(value, str):
        raise EncodeError(f"expected str, got {type(value).__name__}")
    data = PyUnicode_AsUTF8AndSize(value, &n)
    write_length(w, n, compact, False)
    return write_raw(w, data, n)


cdef int write_bytes_value(ByteWriter *w, object value, bint compact, bint nullable) except -1:
    cdef Py_buffer view
    if value is None:
        if not nullable:
            raise EncodeError("null bytes in a non-nullable field")
        return write_length(w, -1, compact, True)
    if isinstance(value, bytes):
        write_length(w, PyBytes_GET_SIZE(value), compact, True)
        return write_raw(w, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
    try:
        PyObject_GetBuffer(value, &view, PyBUF_SIMPLE)
    except (TypeError, BufferError):
        raise EncodeError(f"expected bytes-like, got {type(value).__name__}")
    try:
        write_length(w, view.len, compact, True)
        write_raw(w, view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef int write_uuid(ByteWriter *w, object value) except -1:
    cdef object as_int_value
    if value is None:
        as_int_value = 0
    elif isinstance(value, UUID):
        as_int_value = value.int
    else:
        raise EncodeError(f"expected uuid.UUID, got {type(value).__name__}")
    write_int64(w, <int64_t><uint64_t>(as_int_value >> 64))
    write_int64(w, <int64_t><uint64_t>(as_int_value & 0xFFFFFFFFFFFFFFFF))
    return 0


# ---------------------------------------------------------------- Python faces
cdef class Reader:
    """Reads Kafka primitives from any contiguous buffer, without copying it.

    Every method raises a :class:`kproto.errors.DecodeError` subclass carrying the
    byte offset when the bytes are too few or malformed.
    """
    cdef Py_buffer view
    cdef bint has_view
    cdef ByteReader r
    cdef readonly object source

    def __cinit__(self, source):
        PyObject_GetBuffer(source, &self.view, PyBUF_SIMPLE)
        self.has_view = True
        self.source = source
        reader_init(&self.r, <const unsigned char *>self.view.buf, self.view.len)

    def __dealloc__(self):
        if self.has_view:
            PyBuffer_Release(&self.view)

    @property
    def offset(self) -> int:
        return self.r.p - self.r.start

    @property
    def remaining(self) -> int:
        return self.r.end - self.r.p

    def read_bool(self):
        return read_bool(&self.r) != 0

    def read_int8(self):
        return read_int8(&self.r)

    def read_int16(self):
        return read_int16(&self.r)

    def read_int32(self):
        return read_int32(&self.r)

    def read_int64(self):
        return read_int64(&self.r)

    def read_uint16(self):
        return read_uint16(&self.r)

    def read_uint32(self):
        return read_uint32(&self.r)

    def read_float64(self):
        return read_float64(&self.r)

    def read_uuid(self):
        return read_uuid(&self.r)

    def read_unsigned_varint(self):
        return read_unsigned_varint(&self.r)

    def read_varint(self):
        return read_varint(&self.r)

    def read_varlong(self):
        return read_varlong(&self.r)

    def read_unsigned_varlong(self):
        return read_unsigned_varlong(&self.r)

    def read_string(self):
        return read_string_value(&self.r, False, False)

    def read_nullable_string(self):
        return read_string_value(&self.r, False, True)

    def read_compact_string(self):
        return read_string_value(&self.r, True, False)

    def read_compact_nullable_string(self):
        return read_string_value(&self.r, True, True)

    def read_bytes(self):
        return read_bytes_value(&self.r, False, False)

    def read_nullable_bytes(self):
        return read_bytes_value(&self.r, False, True)

    def read_compact_bytes(self):
        return read_bytes_value(&self.r, True, False)

    def read_compact_nullable_bytes(self):
        return read_bytes_value(&self.r, True, True)

    def read_array_count(self, bint compact=False, bint nullable=True):
        """Element count of an array (None for null), checked against the bytes left."""
        cdef Py_ssize_t n = read_array_count(&self.r, compact, nullable)
        return None if n < 0 else n

    def read_tagged_fields(self):
        """A tagged-field section as {tag: raw bytes}, tags strictly ascending."""
        return read_raw_tagged_fields(&self.r) or {}


cdef class Writer:
    """Writes Kafka primitives into a growing buffer; `getvalue()` returns the bytes."""
    cdef ByteWriter w

    def __cinit__(self, Py_ssize_t capacity=256):
        writer_init(&self.w, capacity if capacity > 0 else 16)

    def __dealloc__(self):
        writer_free(&self.w)

    def __len__(self):
        return self.w.length

    def getvalue(self) -> bytes:
        return writer_to_bytes(&self.w)

    def write_bool(self, value):
        if not isinstance(value, bool):
            raise EncodeError(f"expected bool, got {type(value).__name__}")
        write_int8(&self.w, 1 if value else 0)

    def write_int8(self, value):
        write_int8(&self.w, <int8_t>as_int(value, INT8_MIN, INT8_MAX, "int8"))

    def write_int16(self, value):
        write_int16(&self.w, <int16_t>as_int(value, INT16_MIN, INT16_MAX, "int16"))

    def write_int32(self, value):
        write_int32(&self.w, <int32_t>as_int(value, INT32_MIN, INT32_MAX, "int32"))

    def write_int64(self, value):
        write_int64(&self.w, as_int(value, INT64_MIN, INT64_MAX, "int64"))

    def write_uint16(self, value):
        write_int16(&self.w, <int16_t><uint16_t>as_int(value, 0, 0xFFFF, "uint16"))

    def write_uint32(self, value):
        write_int32(&self.w, <int32_t><uint32_t>as_int(value, 0, 0xFFFFFFFF, "uint32"))

    def write_float64(self, value):
        try:
            write_float64(&self.w, value)
        except TypeError:
            raise EncodeError(f"expected float, got {type(value).__name__}")

    def write_uuid(self, value):
        write_uuid(&self.w, value)

    def write_unsigned_varint(self, value):
        write_unsigned_varint(&self.w, <uint32_t>as_int(value, 0, 0xFFFFFFFF, "unsigned varint"))

    def write_varint(self, value):
        write_varint(&self.w, <int32_t>as_int(value, INT32_MIN, INT32_MAX, "varint"))

    def write_varlong(self, value):
        write_varlong(&self.w, as_int(value, INT64_MIN, INT64_MAX, "varlong"))

    def write_unsigned_varlong(self, value):
        if not isinstance(value, int) or value < 0 or value > 0xFFFFFFFFFFFFFFFF:
            raise_encode_range(value, "unsigned varlong")
        write_unsigned_varlong(&self.w, <uint64_t>value)

    def write_string(self, value):
        write_string_value(&self.w, value, False, False)

    def write_nullable_string(self, value):
        write_string_value(&self.w, value, False, True)

    def write_compact_string(self, value):
        write_string_value(&self.w, value, True, False)

    def write_compact_nullable_string(self, value):
        write_string_value(&self.w, value, True, True)

    def write_bytes(self, value):
        write_bytes_value(&self.w, value, False, False)

    def write_nullable_bytes(self, value):
        write_bytes_value(&self.w, value, False, True)

    def write_compact_bytes(self, value):
        write_bytes_value(&self.w, value, True, False)

    def write_compact_nullable_bytes(self, value):
        write_bytes_value(&self.w, value, True, True)

    def write_array_count(self, count, bint compact=False):
        """Element count of an array; None writes the null marker."""
        if count is None:
            write_length(&self.w, -1, compact, True)
        else:
            write_length(&self.w, as_int(count, 0, INT32_MAX, "array count"), compact, True)

    def write_tagged_fields(self, fields):
        """A tagged-field section from {tag: raw bytes}, written in ascending tag order."""
        write_raw_tagged_fields(&self.w, fields)

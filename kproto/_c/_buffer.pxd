# The hot path's byte reader and writer: small inline functions over a C struct.
#
# Every read checks the bytes it needs against `end` before touching memory and
# raises through one out-of-line function (defined in _buffer.pyx), so the inline
# bodies stay a compare, a load and a pointer bump.

from cpython.ref cimport PyObject
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t)
from libc.string cimport memcpy

from kproto._c._wire cimport (
    ST_BAD_LENGTH, ST_TRUNCATED, WireTag, wire_array_count, wire_length, wire_varint_length,
    wire_zigzag32, wire_zigzag64, wire_tag_count, wire_tag_entry, wire_uvarint, wire_uvarlong,
)

cdef extern from "kp_endian.h":
    uint16_t kp_load_be16(const unsigned char *p) nogil
    uint32_t kp_load_be32(const unsigned char *p) nogil
    uint64_t kp_load_be64(const unsigned char *p) nogil
    uint64_t kp_load_le64(const unsigned char *p) nogil
    double kp_load_be_double(const unsigned char *p) nogil
    void kp_store_be16(unsigned char *p, uint16_t v) nogil
    void kp_store_be32(unsigned char *p, uint32_t v) nogil
    void kp_store_be64(unsigned char *p, uint64_t v) nogil
    void kp_store_be_double(unsigned char *p, double v) nogil

# How deep a field path is remembered for error messages (and how deep structs may nest).
cdef enum:
    MAX_PATH_DEPTH = 64


cdef struct PathFrame:
    PyObject *name        # borrowed str: the field name at this level
    Py_ssize_t index      # element index when the field is an array, else -1


cdef struct ByteReader:
    const unsigned char *start   # offsets in errors are measured from here
    const unsigned char *p       # next byte to read
    const unsigned char *end     # one past the last readable byte
    # Where the decoder is, for errors only: written as it descends, read when raising.
    PyObject *root_name          # borrowed str (message name) or NULL
    int api_key                  # -1 when unknown
    int api_version              # -1 when unknown
    int depth
    bint prevalidated            # the bytes passed a full scan already: read eagerly, skip UTF-8 checks
    bint eager                   # build struct arrays as they are read (decode with lazy=False)
    PathFrame path[MAX_PATH_DEPTH]


cdef struct ByteWriter:
    unsigned char *buf
    Py_ssize_t length
    Py_ssize_t capacity


# ---- out-of-line error raisers (always return -1 with an exception set) ----
cdef int raise_truncated(ByteReader *r, Py_ssize_t need) except -1
cdef int raise_invalid_length(ByteReader *r, int64_t length, const char *what) except -1
cdef int raise_invalid_varint(ByteReader *r, const char *what) except -1
cdef int raise_varint_status(ByteReader *r, int status, const char *what) except -1
cdef int raise_tag_status(ByteReader *r, int status, const WireTag *t) except -1
cdef int raise_length_status(ByteReader *r, int status, Py_ssize_t pos, bint compact, bint wide, int64_t length,
                             const char *what) except -1
cdef int raise_decode(ByteReader *r, object exc_type, str reason) except -1
cdef str format_path(ByteReader *r)
cdef int writer_grow(ByteWriter *w, Py_ssize_t extra) except -1
cdef int raise_encode_range(object value, const char *type_name) except -1

# ---- reader set-up ----
cdef inline void reader_init(ByteReader *r, const unsigned char *data, Py_ssize_t size) noexcept:
    r.start = data
    r.p = data
    r.end = data + size
    r.root_name = NULL
    r.api_key = -1
    r.api_version = -1
    r.depth = 0
    r.prevalidated = 0
    r.eager = 0


cdef inline int reader_need(ByteReader *r, Py_ssize_t n) except -1:
    if r.end - r.p < n:
        return raise_truncated(r, n)
    return 0


# ---- fixed-width reads ----
cdef inline const unsigned char *reader_take(ByteReader *r, Py_ssize_t n) except NULL:
    # The n bytes at the cursor, which moves past them: the one bounds check of every
    # fixed-width read (NULL only with TruncatedError raised).
    cdef const unsigned char *at = r.p
    reader_need(r, n)
    r.p = at + n
    return at


cdef inline int8_t read_int8(ByteReader *r) except? -1:
    return <int8_t>reader_take(r, 1)[0]


cdef inline int read_bool(ByteReader *r) except -1:
    return reader_take(r, 1)[0] != 0


cdef inline int16_t read_int16(ByteReader *r) except? -1:
    return <int16_t>kp_load_be16(reader_take(r, 2))


cdef inline uint16_t read_uint16(ByteReader *r) except? 0xFFFF:
    return kp_load_be16(reader_take(r, 2))


cdef inline int32_t read_int32(ByteReader *r) except? -1:
    return <int32_t>kp_load_be32(reader_take(r, 4))


cdef inline uint32_t read_uint32(ByteReader *r) except? 0xFFFFFFFF:
    return kp_load_be32(reader_take(r, 4))


cdef inline int64_t read_int64(ByteReader *r) except? -1:
    return <int64_t>kp_load_be64(reader_take(r, 8))


cdef inline double read_float64(ByteReader *r) except? -1.0:
    return kp_load_be_double(reader_take(r, 8))


# ---- varints: the wire layer's readers (_wire.pxd), raising at the failing byte ----
cdef extern from *:
    const char *UVARINT_ERROR "\"unsigned varint longer than 5 bytes or above 32 bits\""

cdef inline uint32_t read_unsigned_varint(ByteReader *r) except? 0xFFFFFFFF:
    cdef Py_ssize_t pos = 0
    cdef uint32_t value = 0
    cdef int status = wire_uvarint(r.p, r.end - r.p, &pos, &value)
    r.p += pos
    if status:
        raise_varint_status(r, status, UVARINT_ERROR)
    return value


cdef inline uint64_t read_unsigned_varlong(ByteReader *r) except? 0xFFFFFFFFFFFFFFFF:
    cdef Py_ssize_t pos = 0
    cdef uint64_t value = 0
    cdef int status = wire_uvarlong(r.p, r.end - r.p, &pos, &value)
    r.p += pos
    if status:
        raise_varint_status(r, status, "varlong longer than 10 bytes or above 64 bits")
    return value


# ---- tagged-field sections: the wire layer's rules (_wire.pxd), raising as the codec does ----
cdef inline uint32_t read_tag_count(ByteReader *r) except? 0xFFFFFFFF:
    cdef Py_ssize_t pos = 0
    cdef uint32_t count = 0
    cdef int status = wire_tag_count(r.p, r.end - r.p, &pos, &count)
    r.p += pos
    if status == ST_BAD_LENGTH:
        raise_invalid_length(r, count, "tagged field count")
    elif status:
        raise_varint_status(r, status, UVARINT_ERROR)
    return count


cdef inline int read_tag_entry(ByteReader *r, WireTag *t) except -1:
    """The next tag and size into t (t.previous: the tag before, -1 at the first); r is
    left at the value's first byte."""
    cdef Py_ssize_t pos = 0
    cdef int status = wire_tag_entry(r.p, r.end - r.p, &pos, t)
    r.p += pos
    if status:
        raise_tag_status(r, status, t)
    return 0


cdef inline int32_t read_varint(ByteReader *r) except? -1:
    cdef uint32_t u = read_unsigned_varint(r)
    return wire_zigzag32(u)


cdef inline int64_t read_varlong(ByteReader *r) except? -1:
    cdef uint64_t u = read_unsigned_varlong(r)
    return wire_zigzag64(u)


# ---- 64-bit arithmetic on wire values: wraps around as Java's long does (and without
# the undefined behaviour of signed overflow in C); the twin's wrap_int64 does the same.
cdef inline int64_t wrapping_add64(int64_t a, int64_t b) noexcept:
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef inline int64_t wrapping_sub64(int64_t a, int64_t b) noexcept:
    return <int64_t>(<uint64_t>a - <uint64_t>b)


# ---- length prefixes: return -1 for null, else a length proven to fit in what is left ----
cdef inline Py_ssize_t read_length(ByteReader *r, bint compact, bint wide, bint nullable,
                                   const char *what) except -2:
    cdef Py_ssize_t pos = 0
    cdef int64_t n
    cdef int status = wire_length(r.p, r.end - r.p, &pos, compact, wide, nullable, &n)
    if status:
        raise_length_status(r, status, pos, compact, wide, n, what)
    r.p += pos
    return <Py_ssize_t>n


cdef inline Py_ssize_t read_length16(ByteReader *r, bint nullable, const char *what) except -2:
    return read_length(r, False, False, nullable, what)


cdef inline Py_ssize_t read_length32(ByteReader *r, bint nullable, const char *what) except -2:
    return read_length(r, False, True, nullable, what)


cdef inline Py_ssize_t read_compact_length(ByteReader *r, bint nullable, const char *what) except -2:
    return read_length(r, True, False, nullable, what)


cdef inline int32_t read_varint_length(ByteReader *r, bint nullable, const char *what) except -2:
    """A record field's zigzag-varint length or count (-1: null), within the bytes left."""
    cdef Py_ssize_t pos = 0
    cdef int64_t n
    cdef int status = wire_varint_length(r.p, r.end - r.p, &pos, nullable, &n)
    if status:
        raise_length_status(r, status, pos, True, False, n, what)
    r.p += pos
    return <int32_t>n


cdef inline Py_ssize_t read_array_count(ByteReader *r, bint compact, bint nullable) except -2:
    cdef Py_ssize_t pos = 0
    cdef int64_t n
    cdef int status = wire_array_count(r.p, r.end - r.p, &pos, compact, nullable, &n)
    if status:
        raise_length_status(r, status, pos, compact, True, n,
                            "array count" if n < 0 else "array count (more elements than bytes left)")
    r.p += pos
    return <Py_ssize_t>n


# ---- writer ----
cdef inline int writer_reserve(ByteWriter *w, Py_ssize_t extra) except -1:
    if w.capacity - w.length < extra:
        return writer_grow(w, extra)
    return 0


cdef inline int write_raw(ByteWriter *w, const void *data, Py_ssize_t n) except -1:
    writer_reserve(w, n)
    if n:
        memcpy(w.buf + w.length, data, n)
    w.length += n
    return 0


cdef inline unsigned char *writer_put(ByteWriter *w, Py_ssize_t n) except NULL:
    # Room for n bytes at the end, counted as written: the one reservation of every
    # fixed-width write, which stores its value at the pointer returned.
    writer_reserve(w, n)
    cdef unsigned char *at = w.buf + w.length
    w.length += n
    return at


cdef inline int write_int8(ByteWriter *w, int8_t v) except -1:
    writer_put(w, 1)[0] = <unsigned char>v
    return 0


cdef inline int write_int16(ByteWriter *w, int16_t v) except -1:
    kp_store_be16(writer_put(w, 2), <uint16_t>v)
    return 0


cdef inline int write_int32(ByteWriter *w, int32_t v) except -1:
    kp_store_be32(writer_put(w, 4), <uint32_t>v)
    return 0


cdef inline int write_int64(ByteWriter *w, int64_t v) except -1:
    kp_store_be64(writer_put(w, 8), <uint64_t>v)
    return 0


cdef inline int write_float64(ByteWriter *w, double v) except -1:
    kp_store_be_double(writer_put(w, 8), v)
    return 0


cdef inline int write_unsigned_varlong(ByteWriter *w, uint64_t v) except -1:
    writer_reserve(w, 10)
    cdef unsigned char *out = w.buf + w.length
    while v >= 0x80:
        out[0] = <unsigned char>((v & 0x7F) | 0x80)
        out += 1
        v >>= 7
    out[0] = <unsigned char>v
    w.length = (out + 1) - w.buf
    return 0


cdef inline int write_unsigned_varint(ByteWriter *w, uint32_t v) except -1:
    return write_unsigned_varlong(w, v)


cdef inline int write_varint(ByteWriter *w, int32_t v) except -1:
    return write_unsigned_varlong(w, <uint32_t>((<uint32_t>v << 1) ^ <uint32_t>(v >> 31)))


cdef inline int write_varlong(ByteWriter *w, int64_t v) except -1:
    return write_unsigned_varlong(w, (<uint64_t>v << 1) ^ <uint64_t>(v >> 63))


cdef inline Py_ssize_t unsigned_varint_size(uint64_t v) noexcept:
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


# ---- values that need Python objects (defined in _buffer.pyx) ----
cdef object read_str_body(ByteReader *r, Py_ssize_t n)
cdef object read_bytes_body(ByteReader *r, Py_ssize_t n)
cdef object read_uuid(ByteReader *r)
cdef Py_ssize_t member_slot_offset(object descr)
cdef object read_string_value(ByteReader *r, bint compact, bint nullable)
cdef object read_bytes_value(ByteReader *r, bint compact, bint nullable)
cdef int write_string_value(ByteWriter *w, object value, bint compact, bint nullable) except -1
cdef int write_bytes_value(ByteWriter *w, object value, bint compact, bint nullable) except -1
cdef int write_uuid(ByteWriter *w, object value) except -1
cdef int write_length(ByteWriter *w, Py_ssize_t n, bint compact, bint wide) except -1
cdef dict read_raw_tagged_fields(ByteReader *r)
cdef int write_raw_tagged_fields(ByteWriter *w, object fields) except -1
cdef int writer_init(ByteWriter *w, Py_ssize_t capacity) except -1
cdef void writer_free(ByteWriter *w) noexcept
cdef bytes writer_to_bytes(ByteWriter *w)
cdef int64_t as_int(object value, int64_t lo, int64_t hi, const char *type_name) except? -1

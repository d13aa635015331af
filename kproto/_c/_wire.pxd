# The wire layer: the Kafka rules every C module reads bytes by, written once.
#
# Status-returning and GIL-free: a primitive returns 0, or the kproto.arrow.frames.Status
# number of what went wrong with the failing byte's offset left in *pos. The batch
# decoder stores the status in a row and goes on; the codec's readers in _buffer.pxd
# are thin wrappers that turn a status into an exception with the field's path.
# The twin's rules live in kproto/_py/buffer.py and kproto.schema.header_version.

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t

cdef extern from "kp_utf8.h":
    int kp_utf8_valid(const unsigned char *p, Py_ssize_t n) nogil

cdef extern from "kp_endian.h":   # named apart from _buffer.pxd's declarations, which cimport this file
    uint16_t wire_load_be16 "kp_load_be16"(const unsigned char *p) nogil
    uint32_t wire_load_be32 "kp_load_be32"(const unsigned char *p) nogil

# Status numbers: compile-time copies of kproto._common.batch.Status (_wire.pyx checks
# them at import; a mismatch stops the import).
cdef enum:
    ST_OK = 0
    ST_TRUNCATED = 1
    ST_BAD_LENGTH = 2
    ST_UNKNOWN_API = 3
    ST_UNSUPPORTED_VERSION = 4
    ST_EMPTY_RESPONSE = 5
    ST_MALFORMED = 6
    ST_NO_REQUEST_INFO = 7
    ST_NULL_FRAME = 8
    ST_LIMIT_EXCEEDED = 9
    ST_NOT_CAPTURED = 10
    ST_NO_MEMORY = 250

# Record-batch layout: compile-time copies of kproto/_common/records.py (checked by _wire.pyx).
cdef enum:
    LOG_OVERHEAD = 12
    LENGTH_AT = 8
    MAGIC_AT = 16
    LEGACY_ATTRIBUTES_AT = 17
    V2_ATTRIBUTES_AT = 21       # the CRC-32C covers the bytes from here to the end
    V2_PRODUCER_ID_AT = 43
    V2_RECORDS_COUNT_AT = 57
    V2_HEADER_SIZE = 61
    ATTR_COMPRESSION = 0x07
    ATTR_TIMESTAMP_TYPE = 0x08
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40

cdef enum:
    WIRE_MAX_API_KEY = 256     # API keys below this have table entries
    WIRE_MAX_VERSION = 64      # versions at or above this read the entry of WIRE_MAX_VERSION - 1


# ---- strings: strict UTF-8 as CPython decodes it (no overlong forms, no surrogates, <= U+10FFFF)
cdef inline bint wire_utf8_valid(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    return kp_utf8_valid(p, n) != 0


# ---- unsigned varints: at most 5 bytes for 32 bits, 10 for 64; bits beyond are MALFORMED
cdef inline int wire_unsigned(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, uint64_t *out,
                              int last_shift, uint64_t overflow_bits) noexcept nogil:
    # Seven bits a byte, low first; at the last allowed byte, bits beyond the width are an error.
    cdef uint64_t value = 0
    cdef uint64_t b
    cdef int shift = 0
    while True:
        if pos[0] >= n:
            return ST_TRUNCATED
        b = p[pos[0]]
        if shift == last_shift and (b & overflow_bits):
            return ST_MALFORMED
        pos[0] += 1
        value |= (b & 0x7F) << shift
        if not (b & 0x80):
            out[0] = value
            return ST_OK
        shift += 7


cdef inline int wire_uvarint(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, uint32_t *out) noexcept nogil:
    cdef uint64_t value = 0
    cdef int status = wire_unsigned(p, n, pos, &value, 28, 0xF0)
    out[0] = <uint32_t>value
    return status


cdef inline int wire_uvarlong(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, uint64_t *out) noexcept nogil:
    return wire_unsigned(p, n, pos, out, 63, 0xFE)


# ---- length prefixes of strings and bytes: int16 / int32 (-1 null) or compact (N + 1, 0 null)
cdef extern from *:   # no length read: outside every prefix's range (a C enum is only an int)
    const int64_t WIRE_NO_LENGTH "(-(int64_t)0x100000000)"

cdef inline int wire_prefix(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, bint compact, bint wide,
                            int64_t *out) noexcept nogil:
    # The value of a length or count prefix: compact N + 1 as N (so 0 is -1, null), else a
    # signed int16 / int32. *out stays WIRE_NO_LENGTH when the prefix is cut short or malformed.
    cdef uint32_t u
    cdef int st
    out[0] = WIRE_NO_LENGTH
    if compact:
        st = wire_uvarint(p, n, pos, &u)
        if st:
            return st
        out[0] = <int64_t>u - 1
    elif n - pos[0] < (4 if wide else 2):
        return ST_TRUNCATED
    elif wide:
        out[0] = <int32_t>wire_load_be32(p + pos[0])
        pos[0] += 4
    else:
        out[0] = <int16_t>wire_load_be16(p + pos[0])
        pos[0] += 2
    return ST_OK


cdef inline int wire_length(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, bint compact, bint wide,
                            bint nullable, int64_t *out) noexcept nogil:
    """The length after a prefix, proven to fit in the bytes left (-1: null). On a status,
    *out is the refused length (BAD_LENGTH, or TRUNCATED with *pos after the prefix), or
    WIRE_NO_LENGTH when the prefix itself is cut short or malformed (*pos: the failing byte)."""
    cdef int st = wire_prefix(p, n, pos, compact, wide, out)
    if st:
        return st
    if out[0] < 0:
        return ST_OK if out[0] == -1 and nullable else ST_BAD_LENGTH
    if out[0] > 0x7FFFFFFF:   # a compact length above int32
        return ST_BAD_LENGTH
    if n - pos[0] < out[0]:
        return ST_TRUNCATED
    return ST_OK


# ---- zigzag: signed varints and varlongs carry (n << 1) ^ (n >> 31 or 63)
cdef inline int32_t wire_zigzag32(uint32_t u) noexcept nogil:
    return <int32_t>((u >> 1) ^ (-(<int32_t>(u & 1))))


cdef inline int64_t wire_zigzag64(uint64_t u) noexcept nogil:
    return <int64_t>((u >> 1) ^ (-(<int64_t>(u & 1))))


# ---- counts and record lengths that must fit: -1 is null where nullable; any other
# negative, or more than the bytes left (an element takes at least one), is BAD_LENGTH
cdef inline int wire_count_fits(int64_t count, bint nullable, Py_ssize_t left) noexcept nogil:
    if count < 0:
        return ST_OK if count == -1 and nullable else ST_BAD_LENGTH
    return ST_BAD_LENGTH if count > left else ST_OK


# ---- record fields' lengths and counts: a zigzag varint (-1 null where nullable)
cdef inline int wire_varint_length(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, bint nullable,
                                   int64_t *out) noexcept nogil:
    """A record's key, value or header length, or a record's length or header count: over
    the bytes left is BAD_LENGTH (not a truncation). *out as wire_length leaves it."""
    cdef uint32_t u
    cdef int32_t v
    cdef int st
    out[0] = WIRE_NO_LENGTH
    st = wire_uvarint(p, n, pos, &u)
    if st:
        return st
    v = wire_zigzag32(u)
    out[0] = v
    return wire_count_fits(v, nullable, n - pos[0])


# ---- array counts: int32 (-1 null) or compact (N + 1, 0 null)
cdef inline int wire_array_count(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, bint compact,
                                 bint nullable, int64_t *out) noexcept nogil:
    """The element count after a prefix (-1: null). An element takes at least one byte, so
    a count above the bytes left is a lie: BAD_LENGTH, refused before anything is
    allocated. *out as wire_length leaves it."""
    cdef int st = wire_prefix(p, n, pos, compact, True, out)
    if st:
        return st
    return wire_count_fits(out[0], nullable, n - pos[0])


# ---- tagged fields (KIP-482): a count, then (tag, size, bytes) with tags strictly rising
cdef inline int wire_tag_count(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos,
                               uint32_t *count) noexcept nogil:
    # A field takes at least two bytes, so a count above the bytes left is a lie (BAD_LENGTH).
    cdef int st
    if pos[0] < n and p[pos[0]] == 0:   # no tagged fields: the usual case
        pos[0] += 1
        count[0] = 0
        return ST_OK
    st = wire_uvarint(p, n, pos, count)
    if st:
        return st
    if count[0] > <uint32_t>(n - pos[0]):
        return ST_BAD_LENGTH
    return ST_OK


# Which step of a tag entry a status is about (a raising reader words its error by it).
cdef enum:
    WIRE_TAG_ID = 0         # the tag's varint
    WIRE_TAG_ORDER = 1      # the tag is not above the one before (ST_MALFORMED)
    WIRE_TAG_SIZE = 2       # the size's varint
    WIRE_TAG_BOUND = 3      # the size is over the bytes left (ST_TRUNCATED)

cdef struct WireTag:
    uint32_t tag
    uint32_t size
    int64_t previous        # the tag before (-1 at the first); the new one once in order
    int8_t step


cdef inline int wire_tag_entry(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, WireTag *t) noexcept nogil:
    """One tag and its size; *pos is left at the value's first byte."""
    cdef int st
    t.step = WIRE_TAG_ID
    st = wire_uvarint(p, n, pos, &t.tag)
    if st:
        return st
    if <int64_t>t.tag <= t.previous:
        t.step = WIRE_TAG_ORDER
        return ST_MALFORMED
    t.previous = t.tag
    t.step = WIRE_TAG_SIZE
    st = wire_uvarint(p, n, pos, &t.size)
    if st:
        return st
    if t.size > <uint32_t>(n - pos[0]):
        t.step = WIRE_TAG_BOUND
        return ST_TRUNCATED
    return ST_OK


cdef inline int wire_skip_tags(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos,
                               int32_t *count_out) noexcept nogil:
    cdef uint32_t count, k
    cdef WireTag t
    cdef int st = wire_tag_count(p, n, pos, &count)
    if st:
        return st
    count_out[0] = <int32_t>count
    t.previous = -1
    for k in range(count):  # no-cython-lint: a typed counter makes a C loop
        st = wire_tag_entry(p, n, pos, &t)
        if st:
            return st
        pos[0] += t.size
    return ST_OK


# ---- header versions: kproto.schema.header_version, read into a table at import (_wire.pyx)
cdef int request_header_version(int api_key, int api_version) noexcept nogil
cdef int response_header_version(int api_key, int api_version) noexcept nogil


# ---- request and response headers: the one parser of their layouts
# Which part of a header a status is about: a raising reader re-reads that part to
# describe the error with the part's own path (see _codec_headers.pxi).
cdef enum:
    WIRE_PART_FIXED = 0         # api key, api version, correlation id (a response: correlation id)
    WIRE_PART_CLIENT_ID = 1     # from the client id's length prefix
    WIRE_PART_TAGS = 2          # from the tagged-field section's count

cdef struct WireHeader:
    int16_t api_key             # requests only
    int16_t api_version
    int32_t correlation_id
    int8_t version              # the header version (0, 1, 2; a response 0 or 1)
    int8_t part                 # the part being read: on a status, the part that broke
    int32_t client_id_length    # -1: null, or no client id field (header v0)
    Py_ssize_t client_id_at     # the client id's first byte (after its length prefix)
    Py_ssize_t tags_at          # the tagged-field section's first byte; -1: none
    int32_t tag_count
    Py_ssize_t end              # one past the header: the body's first byte

# Offsets are from p; the header starts at *pos and the bytes end at n. On a status,
# *pos is the failing byte's offset and the fields read so far are filled in.

cdef inline void wire_header_init(WireHeader *h) noexcept nogil:
    h.api_key = 0
    h.api_version = 0
    h.correlation_id = 0
    h.version = 0
    h.part = WIRE_PART_FIXED
    h.client_id_length = -1
    h.client_id_at = 0
    h.tags_at = -1
    h.tag_count = 0
    h.end = 0


cdef inline int wire_nullable_string(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos,
                                     int32_t *length_out) noexcept nogil:
    # An int16 length (-1: null) and that many bytes of strict UTF-8.
    cdef int64_t length
    cdef int st = wire_length(p, n, pos, False, False, True, &length)
    if st:
        return st
    length_out[0] = <int32_t>length
    if length > 0:
        if not wire_utf8_valid(p + pos[0], length):
            return ST_MALFORMED
        pos[0] += length
    return ST_OK


cdef inline int wire_header_tags(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos,
                                 WireHeader *h) noexcept nogil:
    h.part = WIRE_PART_TAGS
    h.tags_at = pos[0]
    return wire_skip_tags(p, n, pos, &h.tag_count)


# The request header's first part alone: api key, api version, correlation id and the
# header version (for a reader that has only a frame's first bytes: the capture resync).
cdef inline int wire_request_fixed(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos,
                                   WireHeader *h) noexcept nogil:
    cdef Py_ssize_t start = pos[0]
    wire_header_init(h)
    if n - start < 8:
        pos[0] = start + (0 if n - start < 2 else (2 if n - start < 4 else 4))
        return ST_TRUNCATED
    h.api_key = <int16_t>wire_load_be16(p + start)
    h.api_version = <int16_t>wire_load_be16(p + start + 2)
    h.correlation_id = <int32_t>wire_load_be32(p + start + 4)
    h.version = <int8_t>request_header_version(h.api_key, h.api_version)
    pos[0] = start + 8
    return ST_OK


cdef inline int wire_request_header(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos,
                                    WireHeader *h) noexcept nogil:
    cdef int st = wire_request_fixed(p, n, pos, h)
    if st:
        return st
    if h.version >= 1:
        h.part = WIRE_PART_CLIENT_ID
        st = wire_nullable_string(p, n, pos, &h.client_id_length)
        if st:
            h.client_id_length = -1
            return st
        h.client_id_at = pos[0] - (h.client_id_length if h.client_id_length > 0 else 0)
    if h.version >= 2:
        st = wire_header_tags(p, n, pos, h)
        if st:
            return st
    h.end = pos[0]
    return ST_OK


# version: response_header_version() of the request's API, or -1 when the request is
# unknown (ST_NO_REQUEST_INFO after the correlation id: the header's length is unknown).
# empty_is_error: a header of only a correlation id is ST_EMPTY_RESPONSE (the batch
# decoder's rule, before the tagged fields are read; the codec says it after the header).
cdef inline int wire_response_header(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, int version,
                                     bint empty_is_error, WireHeader *h) noexcept nogil:
    cdef Py_ssize_t start = pos[0]
    cdef int st
    wire_header_init(h)
    if n - start < 4:
        return ST_TRUNCATED
    h.correlation_id = <int32_t>wire_load_be32(p + start)
    pos[0] = start + 4
    if version < 0:
        return ST_NO_REQUEST_INFO
    h.version = <int8_t>version
    if empty_is_error and pos[0] == n:
        return ST_EMPTY_RESPONSE
    if version >= 1:
        st = wire_header_tags(p, n, pos, h)
        if st:
            return st
    h.end = pos[0]
    return ST_OK

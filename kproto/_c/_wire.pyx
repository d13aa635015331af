# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The wire layer's tables and header parsers (see _wire.pxd).

The header-version rule is written once, in :func:`kproto.schema.header_version`;
this module asks it for every API key and version below the table's bounds at
import, so the compiled modules read the same answer without a copy of the rule.
The request and response header layouts are parsed here, once, for every module.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, uint16_t, uint32_t

cdef extern from "kp_endian.h":
    uint16_t kp_load_be16(const unsigned char *p) nogil
    uint32_t kp_load_be32(const unsigned char *p) nogil

from kproto import schema
from kproto._common import records as _records_layout
from kproto._common.batch import Status

STATUS_NUMBERS = {
    "OK": ST_OK, "TRUNCATED": ST_TRUNCATED, "BAD_LENGTH": ST_BAD_LENGTH,
    "UNKNOWN_API": ST_UNKNOWN_API, "UNSUPPORTED_VERSION": ST_UNSUPPORTED_VERSION,
    "EMPTY_RESPONSE": ST_EMPTY_RESPONSE, "MALFORMED": ST_MALFORMED,
    "NO_REQUEST_INFO": ST_NO_REQUEST_INFO, "NULL_FRAME": ST_NULL_FRAME,
    "LIMIT_EXCEEDED": ST_LIMIT_EXCEEDED,
}
# The C constants mirror the one definition; a mismatch must stop the import, not mislabel rows.
if STATUS_NUMBERS != {status.name: int(status) for status in Status}:
    raise ImportError("kproto/_c/_wire.pxd: ST_* constants differ from kproto._common.batch.Status")

_LAYOUT = ("LOG_OVERHEAD", "LENGTH_AT", "MAGIC_AT", "LEGACY_ATTRIBUTES_AT", "V2_ATTRIBUTES_AT", "V2_PRODUCER_ID_AT",
           "V2_RECORDS_COUNT_AT", "V2_HEADER_SIZE", "ATTR_COMPRESSION", "ATTR_TIMESTAMP_TYPE", "ATTR_TRANSACTIONAL",
           "ATTR_CONTROL", "ATTR_DELETE_HORIZON")
if (LOG_OVERHEAD, LENGTH_AT, MAGIC_AT, LEGACY_ATTRIBUTES_AT, V2_ATTRIBUTES_AT, V2_PRODUCER_ID_AT, V2_RECORDS_COUNT_AT,
        V2_HEADER_SIZE, ATTR_COMPRESSION, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, ATTR_CONTROL,
        ATTR_DELETE_HORIZON) != tuple(getattr(_records_layout, name) for name in _LAYOUT):
    raise ImportError("kproto/_c/_wire.pxd: record-batch layout constants differ from kproto._common.records")

# [direction][api key][version]: direction 0 request, 1 response.
cdef int8_t header_versions[2][WIRE_MAX_API_KEY][WIRE_MAX_VERSION]
cdef int8_t unknown_api_header[2]


cdef void load_header_versions() except *:
    cdef int d, key, version
    for d in range(2):
        unknown_api_header[d] = schema.header_version(-1, 0, d == 0)
        for key in range(WIRE_MAX_API_KEY):
            for version in range(WIRE_MAX_VERSION):
                header_versions[d][key][version] = schema.header_version(key, version, d == 0)
            # Flexible versions are open-ended ("12+"), so the last entry stands for every
            # version above it; a definition that closed its range would break this.
            if schema.header_version(key, 0x7FFF, d == 0) != header_versions[d][key][WIRE_MAX_VERSION - 1]:
                raise ImportError(f"kproto/_c/_wire.pyx: the header version of API {key} changes above "
                                  f"version {WIRE_MAX_VERSION - 1}; raise WIRE_MAX_VERSION")


load_header_versions()


cdef inline int _lookup(int d, int api_key, int api_version) noexcept nogil:
    if api_key < 0 or api_key >= WIRE_MAX_API_KEY or api_version < 0:
        return unknown_api_header[d]
    if api_version >= WIRE_MAX_VERSION:
        api_version = WIRE_MAX_VERSION - 1
    return header_versions[d][api_key][api_version]


cdef int request_header_version(int api_key, int api_version) noexcept nogil:
    return _lookup(0, api_key, api_version)


cdef int response_header_version(int api_key, int api_version) noexcept nogil:
    return _lookup(1, api_key, api_version)


def header_version(int api_key, int api_version, bint is_request):
    """The C tables' answer (tests compare it with kproto.schema.header_version)."""
    return request_header_version(api_key, api_version) if is_request \
        else response_header_version(api_key, api_version)


# ---------------------------------------------------------------- headers
# The one parser of the request and response header layouts (see _wire.pxd): the batch
# decoder stores its status in a row, the codec's raising readers turn it into an error.

cdef inline void header_init(WireHeader *h) noexcept nogil:
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


cdef inline int nullable_string(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos,
                                int32_t *length_out) noexcept nogil:
    # An int16 length (-1: null) and that many bytes of strict UTF-8.
    cdef int16_t length
    if n - pos[0] < 2:
        return ST_TRUNCATED
    length = <int16_t>kp_load_be16(p + pos[0])
    pos[0] += 2
    if length < -1:
        return ST_BAD_LENGTH
    length_out[0] = length
    if length < 0:
        return ST_OK
    if n - pos[0] < length:
        return ST_TRUNCATED
    if not wire_utf8_valid(p + pos[0], length):
        return ST_MALFORMED
    pos[0] += length
    return ST_OK


cdef inline int header_tags(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, WireHeader *h) noexcept nogil:
    h.part = WIRE_PART_TAGS
    h.tags_at = pos[0]
    if pos[0] < n and p[pos[0]] == 0:   # no tagged fields: the usual case
        pos[0] += 1
        return ST_OK
    return wire_skip_tags(p, n, pos, &h.tag_count)


cdef int wire_request_fixed(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos,
                            WireHeader *h) noexcept nogil:
    cdef Py_ssize_t start = pos[0]
    header_init(h)
    if n - start < 8:
        pos[0] = start + (0 if n - start < 2 else (2 if n - start < 4 else 4))
        return ST_TRUNCATED
    h.api_key = <int16_t>kp_load_be16(p + start)
    h.api_version = <int16_t>kp_load_be16(p + start + 2)
    h.correlation_id = <int32_t>kp_load_be32(p + start + 4)
    h.version = <int8_t>request_header_version(h.api_key, h.api_version)
    pos[0] = start + 8
    return ST_OK


cdef int wire_request_header(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos,
                             WireHeader *h) noexcept nogil:
    cdef int st = wire_request_fixed(p, n, pos, h)
    if st:
        return st
    if h.version >= 1:
        h.part = WIRE_PART_CLIENT_ID
        st = nullable_string(p, n, pos, &h.client_id_length)
        if st:
            h.client_id_length = -1
            return st
        h.client_id_at = pos[0] - (h.client_id_length if h.client_id_length > 0 else 0)
    if h.version >= 2:
        st = header_tags(p, n, pos, h)
        if st:
            return st
    h.end = pos[0]
    return ST_OK


cdef int wire_response_header(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, int version,
                              bint empty_is_error, WireHeader *h) noexcept nogil:
    cdef Py_ssize_t start = pos[0]
    cdef int st
    header_init(h)
    if n - start < 4:
        return ST_TRUNCATED
    h.correlation_id = <int32_t>kp_load_be32(p + start)
    pos[0] = start + 4
    if version < 0:
        return ST_NO_REQUEST_INFO
    h.version = <int8_t>version
    if empty_is_error and pos[0] == n:
        return ST_EMPTY_RESPONSE
    if version >= 1:
        st = header_tags(p, n, pos, h)
        if st:
            return st
    h.end = pos[0]
    return ST_OK

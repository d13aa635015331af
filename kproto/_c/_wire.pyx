# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The wire layer's tables and header parsers (see _wire.pxd).

The header-version rule is written once, in :func:`kproto.schema.header_version`;
this module asks it for every API key and version below the table's bounds at
import, so the compiled modules read the same answer without a copy of the rule.
The request and response header parsers are inline functions in _wire.pxd.
"""

from libc.stdint cimport int8_t

from kproto import schema
from kproto._common import records as _records_layout
from kproto._common.batch import Status

STATUS_NUMBERS = {
    "OK": ST_OK, "TRUNCATED": ST_TRUNCATED, "BAD_LENGTH": ST_BAD_LENGTH,
    "UNKNOWN_API": ST_UNKNOWN_API, "UNSUPPORTED_VERSION": ST_UNSUPPORTED_VERSION,
    "EMPTY_RESPONSE": ST_EMPTY_RESPONSE, "MALFORMED": ST_MALFORMED,
    "NO_REQUEST_INFO": ST_NO_REQUEST_INFO, "NULL_FRAME": ST_NULL_FRAME,
    "LIMIT_EXCEEDED": ST_LIMIT_EXCEEDED, "NOT_CAPTURED": ST_NOT_CAPTURED,
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

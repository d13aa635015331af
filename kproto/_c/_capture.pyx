# Captures to Kafka frames, compiled. The pure-Python twin (kproto/_py/capture.py and
# the capture_*.py modules beside it) is the readable reference and documents the
# rules; this module does exactly the same, packet for packet and counter for counter.
#
# Hot path: record header -> link -> IP -> TCP -> connection (last-hit cache, then
# a dict keyed by the canonical 5-tuple) -> in-order append into the direction's
# buffer -> cut frames into the output buffers. Out-of-order segments, gaps,
# resyncs and direction inference are rare and use Python objects.
#
# The engine is three stages, each a final cdef class holding the next one as a typed
# attribute (so every call between them is a direct C call), with the same names and
# shape as the twin's; kproto/_common/capture_engine.py builds them (Engine, below, is
# that shared engine given these classes) and states the contract both satisfy:
#   _capture_reader.pxi       RecordReader: pcap / pcapng records, the link / IP / TCP
#                             layers of each packet; scan_frames reads frame dumps
#   _capture_reassembly.pxi   Reassembly: TCP segments into per-direction streams (order,
#                             retransmissions, gaps), connection endings and their rows
#   _capture_framer.pxi       Framer: size-prefixed Kafka frames out of a direction's
#                             stream, resync, which side is the client, the output batch
#   _capture_kinds.pxi        functions the framer calls: which protocol a connection
#                             speaks (only Kafka gives frames), SASL's raw tokens
#   _capture_connections.pxi  per-connection state: a direction's stream buffer, its
#                             segments' timestamps, the correlation ids it sent

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove, memcmp

from kproto._c._wire cimport ST_TRUNCATED, WireHeader, wire_request_fixed, wire_request_header

import ipaddress

import numpy as np

from kproto.limits import CAPTURE_MAX_RECORD_SIZE

from kproto._common import capture as _shapes
from kproto._common import capture_engine as _engine
from kproto._common.capture import (CAPTURE_COUNTERS, CLOSED_BY, CONNECTION_COLUMNS, DIRECTION_REQUEST,
                                    DIRECTION_RESPONSE, DIRECTION_SOURCE, FRAME_COLUMNS, HALF_COUNTERS, KINDS)

__all__ = ["Engine", "scan_frames", "DIRECTION_REQUEST", "DIRECTION_RESPONSE", "FRAME_COLUMNS",
           "CONNECTION_COLUMNS", "CAPTURE_COUNTERS"]

# File magics and link types, read once from kproto/_common/capture.py (their one definition).
cdef uint32_t PCAP_MAGIC_US = _shapes.PCAP_MAGIC_US
cdef uint32_t PCAP_MAGIC_NS = _shapes.PCAP_MAGIC_NS
cdef uint32_t PCAPNG_SHB = _shapes.PCAPNG_SHB
cdef uint32_t PCAPNG_BOM = _shapes.PCAPNG_BOM
cdef uint32_t LINK_NULL = _shapes.LINK_NULL
cdef uint32_t LINK_ETHERNET = _shapes.LINK_ETHERNET
cdef uint32_t LINK_LOOP = _shapes.LINK_LOOP
cdef uint32_t LINK_RAW = _shapes.LINK_RAW
cdef uint32_t LINK_RAW_DLT = _shapes.LINK_RAW_DLT
cdef uint32_t LINK_RAW_DLT_OPENBSD = _shapes.LINK_RAW_DLT_OPENBSD
cdef uint32_t LINK_IPV4 = _shapes.LINK_IPV4
cdef uint32_t LINK_IPV6 = _shapes.LINK_IPV6

cdef extern from "kp_endian.h":
    uint16_t kp_load_be16(const unsigned char *p) nogil
    uint32_t kp_load_be32(const unsigned char *p) nogil
    uint16_t kp_load_le16(const unsigned char *p) nogil
    uint32_t kp_load_le32(const unsigned char *p) nogil


# Indexes into the per-direction counters (same order as HALF_COUNTERS).
cdef enum:
    H_PACKETS = 0
    H_PAYLOAD_BYTES
    H_DUPLICATE_BYTES
    H_RETRANSMITTED_SEGMENTS
    H_CONFLICTING_SEGMENTS
    H_STREAM_BYTES
    H_FRAMES
    H_FRAME_BYTES
    H_SKIPPED_BYTES
    H_RESYNCS
    H_GAPS
    H_GAP_BYTES
    H_TAIL_BYTES
    H_TRUNCATED_PACKETS
    H_SNAPPED_BYTES
    H_SASL_TOKENS
    H_SASL_BYTES
    H_OTHER_BYTES
    H_COUNT

# Capture counters (same order as CAPTURE_COUNTERS).
cdef enum:
    C_FILE_BYTES = 0
    C_PACKETS
    C_UNSUPPORTED_LINK
    C_NON_TCP
    C_IP_FRAGMENTS
    C_MALFORMED
    C_TCP_PACKETS
    C_TCP_PAYLOAD_BYTES
    C_TCP_WITHOUT_CONNECTION
    C_CONNECTIONS
    C_EVICTED
    C_SKIPPED_BLOCKS
    C_TRAILING_BYTES
    C_UNREAD_BYTES
    C_COUNT

cdef enum:
    MAX_CORRS = 256
    MAX_UNDECIDED_FRAMES = 64
    MAX_CANDIDATES = 64
    CHAIN_CONFIRMS = 4
    RESPONSE_CHAIN_CONFIRMS = 16
    FORMAT_NONE = 0
    FORMAT_PCAP = 1
    FORMAT_PCAPNG = 2
    TCP_FIN = 0x01
    TCP_SYN = 0x02
    TCP_RST = 0x04
    TCP_ACK = 0x10

assert len(HALF_COUNTERS) == H_COUNT and len(CAPTURE_COUNTERS) == C_COUNT

cdef int64_t MAX_RECORD = CAPTURE_MAX_RECORD_SIZE


include "_capture_connections.pxi"
include "_capture_batch.pxi"
include "_capture_framer.pxi"
include "_capture_kinds.pxi"
include "_capture_reassembly.pxi"
include "_capture_reader.pxi"


class Engine(_engine.Engine):
    __doc__ = _engine.Engine.__doc__
    RecordReader = RecordReader
    Reassembly = Reassembly
    Framer = Framer


cdef void *_grow(void *p, size_t size) except NULL:
    cdef void *q = realloc(p, size)
    if q == NULL:
        raise MemoryError()
    return q

# Captures to Kafka frames, compiled. The pure-Python twin (kproto/_py/capture.py)
# is the readable reference and documents the rules; this module does exactly the
# same, packet for packet and counter for counter.
#
# Hot path: record header -> link -> IP -> TCP -> connection (last-hit cache, then
# a dict keyed by the canonical 5-tuple) -> in-order append into the direction's
# buffer -> cut frames into the output buffers. Out-of-order segments, gaps,
# resyncs and direction inference are rare and use Python objects.

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove, memcmp

from kproto._c._wire cimport WireHeader, wire_request_fixed

import ipaddress

import numpy as np

from kproto.limits import CAPTURE_MAX_RECORD_SIZE

from kproto._common import capture as _shapes
from kproto._common.capture import (CAPTURE_COUNTERS, CLOSED_BY, CONNECTION_COLUMNS, DIRECTION_REQUEST,
                                    DIRECTION_RESPONSE, DIRECTION_SOURCE, FRAME_COLUMNS, HALF_COUNTERS)

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
cdef uint32_t LINK_SLL = _shapes.LINK_SLL
cdef uint32_t LINK_SLL2 = _shapes.LINK_SLL2
cdef uint32_t LINK_IPV4 = _shapes.LINK_IPV4
cdef uint32_t LINK_IPV6 = _shapes.LINK_IPV6

cdef extern from "kp_endian.h":
    uint16_t kp_load_be16(const unsigned char *p) nogil
    uint32_t kp_load_be32(const unsigned char *p) nogil
    uint16_t kp_load_le16(const unsigned char *p) nogil
    uint32_t kp_load_le32(const unsigned char *p) nogil

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include "kp_platform.h"
    static inline int64_t kpc_binary_ts(uint64_t units, int exponent) {
        return (int64_t)kp_mul_shr_u64(units, 1000000000u, (unsigned)exponent);
    }
    """
    int64_t kpc_binary_ts(uint64_t units, int exponent) nogil

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
    LIMIT = 512 * 1024 * 1024
    FORMAT_NONE = 0
    FORMAT_PCAP = 1
    FORMAT_PCAPNG = 2
    TCP_FIN = 0x01
    TCP_SYN = 0x02
    TCP_RST = 0x04
    TCP_ACK = 0x10

assert len(HALF_COUNTERS) == H_COUNT and len(CAPTURE_COUNTERS) == C_COUNT

cdef int64_t MAX_RECORD = CAPTURE_MAX_RECORD_SIZE


cdef struct Chunk:
    int64_t end      # stream offset one past the chunk
    int64_t ts


cdef struct Interface:
    int linktype
    int mode         # 0: multiply, 1: divide, 2: binary, 3: always 0 (divisor beyond 64 bits)
    uint64_t factor
    int exponent
    int64_t offset_ns


cdef class _Half:
    """One direction of one TCP connection (see the twin's _Half)."""
    cdef int side
    cdef bint started
    cdef int64_t isn
    cdef uint32_t next_seq
    cdef int64_t next_pos
    cdef unsigned char *buf          # allocation; live bytes are buf[head : head + length]
    cdef Py_ssize_t head, length, capacity
    cdef int64_t buf_pos             # stream offset of the first live byte
    cdef Chunk *chunks
    cdef Py_ssize_t chunk_head, chunk_count, chunk_capacity
    cdef list pending                # out-of-order [start, bytes, ts], sorted, non-overlapping
    cdef int64_t pending_bytes
    cdef bint synced
    cdef int64_t scan_from
    cdef int64_t fin_pos
    cdef int64_t sequence
    cdef int32_t corrs[MAX_CORRS]    # ring of correlation ids of request-like frames
    cdef int corr_count, corr_next
    cdef int64_t c[H_COUNT]

    def __cinit__(self, int side):
        self.side = side
        self.isn = -1
        self.fin_pos = -1
        self.pending = []

    def __dealloc__(self):
        free(self.buf)
        free(self.chunks)

    cdef inline unsigned char *data(self) noexcept:
        return self.buf + self.head

    cdef int append(self, const unsigned char *src, Py_ssize_t n, int64_t ts) except -1:
        cdef Py_ssize_t need
        cdef unsigned char *grown
        cdef Chunk *more
        if self.head + self.length + n > self.capacity:
            if self.head:
                memmove(self.buf, self.buf + self.head, self.length)
                self.head = 0
            need = self.length + n
            if need > self.capacity:
                need = max(need, self.capacity * 2, 4096)
                grown = <unsigned char *>realloc(self.buf, need)
                if grown == NULL:
                    raise MemoryError()
                self.buf = grown
                self.capacity = need
        memcpy(self.buf + self.head + self.length, src, n)
        self.length += n
        self.next_pos += n
        self.next_seq = <uint32_t>(self.next_seq + <uint32_t>n)
        self.c[H_STREAM_BYTES] += n
        if self.chunk_head + self.chunk_count >= self.chunk_capacity:
            if self.chunk_head:
                memmove(self.chunks, self.chunks + self.chunk_head, self.chunk_count * sizeof(Chunk))
                self.chunk_head = 0
            if self.chunk_count >= self.chunk_capacity:
                need = max(16, self.chunk_capacity * 2)
                more = <Chunk *>realloc(self.chunks, need * sizeof(Chunk))
                if more == NULL:
                    raise MemoryError()
                self.chunks = more
                self.chunk_capacity = need
        self.chunks[self.chunk_head + self.chunk_count].end = self.next_pos
        self.chunks[self.chunk_head + self.chunk_count].ts = ts
        self.chunk_count += 1
        return 0

    cdef void drop(self, Py_ssize_t n) noexcept:
        self.head += n
        self.length -= n
        self.buf_pos += n
        if self.length == 0:
            self.head = 0
            if self.capacity > (4 << 20):  # give back the room a big frame needed
                free(self.buf)
                self.buf = NULL
                self.capacity = 0
        while self.chunk_count and self.chunks[self.chunk_head].end <= self.buf_pos:
            self.chunk_head += 1
            self.chunk_count -= 1
        if self.chunk_count == 0:
            self.chunk_head = 0

    cdef bint has_corr(self, int32_t corr) noexcept:
        cdef int i
        for i in range(self.corr_count):
            if self.corrs[i] == corr:
                return True
        return False

    cdef void add_corr(self, int32_t corr) noexcept:
        self.corrs[self.corr_next] = corr
        self.corr_next = (self.corr_next + 1) % MAX_CORRS
        if self.corr_count < MAX_CORRS:
            self.corr_count += 1

    cdef dict counters(self):
        return {name: self.c[i] for i, name in enumerate(HALF_COUNTERS)}


cdef class _Connection:
    cdef int64_t id
    cdef bytes key
    cdef unsigned char ep[2][17]     # family (4 / 6) + address, per side
    cdef uint16_t port[2]
    cdef _Half h0, h1
    cdef int client_side
    cdef int direction_source
    cdef bint handshake_seen
    cdef int64_t first_ts, last_ts
    cdef list undecided
    cdef int64_t request_like[2]
    cdef bint closed

    def __cinit__(self):
        self.h0 = _Half(0)
        self.h1 = _Half(1)
        self.client_side = -1
        self.direction_source = -1
        self.undecided = []

    cdef inline _Half half(self, int side):
        return self.h0 if side == 0 else self.h1


cdef inline int64_t _position(_Half h, uint32_t seq) noexcept:
    return h.next_pos + <int32_t>(seq - h.next_seq)


cdef class Engine:
    """Capture bytes in, Kafka frames and accounting out (see kproto/_py/capture.py)."""
    cdef int16_t *versions
    cdef Py_ssize_t n_versions
    cdef frozenset broker_ports
    cdef uint8_t port_is_broker[65536]
    cdef readonly int64_t max_frame_size
    cdef readonly int64_t max_pending_bytes
    cdef readonly Py_ssize_t max_connections
    cdef Py_ssize_t batch_frames, batch_bytes
    cdef int64_t cnt[C_COUNT]
    cdef int format
    cdef bint big_endian
    cdef bint pcap_nanos
    cdef int linktype
    cdef Interface *interfaces
    cdef Py_ssize_t n_interfaces, interface_capacity
    cdef dict connections
    cdef _Connection last
    cdef int64_t next_conn_id
    cdef bint finished
    cdef list closed_rows
    cdef readonly object error       # None, or (category, reason, file offset): see the twin
    # output batch
    cdef Py_ssize_t n_out, out_capacity
    cdef int64_t *o_conn
    cdef int8_t *o_dir
    cdef int64_t *o_seq
    cdef int64_t *o_first
    cdef int64_t *o_last
    cdef int32_t *o_size
    cdef object out_data             # numpy uint8 array
    cdef unsigned char *out_ptr
    cdef Py_ssize_t out_len, out_data_capacity

    def __cinit__(self):
        self.connections = {}
        self.closed_rows = []

    def __init__(self, request_versions, broker_ports=(9092,), max_frame_size=100 * 1024 * 1024,
                 max_pending_bytes=8 * 1024 * 1024, max_connections=65536, batch_frames=65536,
                 batch_bytes=64 * 1024 * 1024):
        versions = [int(v) for v in request_versions]
        self.n_versions = len(versions)
        self.versions = <int16_t *>malloc(max(1, self.n_versions) * sizeof(int16_t))
        if self.versions == NULL:
            raise MemoryError()
        for i, v in enumerate(versions):
            self.versions[i] = <int16_t>max(-1, min(v, 0x7FFF))
        self.broker_ports = frozenset(int(p) for p in broker_ports)
        for p in self.broker_ports:
            if 0 <= p <= 0xFFFF:
                self.port_is_broker[p] = 1
        # Capped (as in the twin) so a batch's payloads fit Arrow's int32 offsets.
        self.max_frame_size = min(int(max_frame_size), LIMIT)
        self.max_pending_bytes = min(int(max_pending_bytes), LIMIT)
        self.max_connections = max(1, int(max_connections))
        self.batch_frames = max(1, int(batch_frames))
        self.batch_bytes = min(max(1, int(batch_bytes)), LIMIT)
        self._new_output()

    def __dealloc__(self):
        free(self.versions)
        free(self.interfaces)
        free(self.o_conn)
        free(self.o_dir)
        free(self.o_seq)
        free(self.o_first)
        free(self.o_last)
        free(self.o_size)

    # ------------------------------------------------------------------ output
    cdef int _new_output(self) except -1:
        self.n_out = 0
        self.out_len = 0
        # Room for a whole batch up front: growing by doubling would copy it twice,
        # and untouched pages cost nothing.
        self.out_data_capacity = min(self.batch_bytes, 1 << 30) + (1 << 16)
        self.out_data = np.empty(self.out_data_capacity, dtype=np.uint8)
        self.out_ptr = <unsigned char *><size_t>self.out_data.ctypes.data
        return 0

    cdef int _grow_rows(self) except -1:
        cdef Py_ssize_t cap = max(1024, self.out_capacity * 2)
        self.o_conn = <int64_t *>_grow(self.o_conn, cap * 8)
        self.o_dir = <int8_t *>_grow(self.o_dir, cap)
        self.o_seq = <int64_t *>_grow(self.o_seq, cap * 8)
        self.o_first = <int64_t *>_grow(self.o_first, cap * 8)
        self.o_last = <int64_t *>_grow(self.o_last, cap * 8)
        self.o_size = <int32_t *>_grow(self.o_size, cap * 4)
        self.out_capacity = cap
        return 0

    cdef int _reserve_data(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t cap
        if self.out_len + n <= self.out_data_capacity:
            return 0
        cap = max(self.out_data_capacity * 2, self.out_len + n)
        grown = np.empty(cap, dtype=np.uint8)
        cdef unsigned char *p = <unsigned char *><size_t>grown.ctypes.data
        memcpy(p, self.out_ptr, self.out_len)
        self.out_data = grown
        self.out_ptr = p
        self.out_data_capacity = cap
        return 0

    cdef int _emit(self, _Connection conn, int side, int64_t sequence, int64_t first_ts, int64_t last_ts,
                   int32_t size, const unsigned char *payload) except -1:
        cdef Py_ssize_t i = self.n_out
        if i >= self.out_capacity:
            self._grow_rows()
        self._reserve_data(size)
        self.o_conn[i] = conn.id
        self.o_dir[i] = 0 if side == conn.client_side else 1
        self.o_seq[i] = sequence
        self.o_first[i] = first_ts
        self.o_last[i] = last_ts
        self.o_size[i] = size
        memcpy(self.out_ptr + self.out_len, payload, size)
        self.out_len += size
        self.n_out = i + 1
        return 0

    def batch_ready(self):
        return self._batch_ready()

    cdef inline bint _batch_ready(self) noexcept:
        return self.n_out >= self.batch_frames or self.out_len >= self.batch_bytes

    def take_batch(self):
        cdef Py_ssize_t n = self.n_out
        if n == 0:
            return None
        sizes = _copy_array(self.o_size, n, np.int32)
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(sizes, out=offsets[1:])
        batch = {
            "connection_id": _copy_array(self.o_conn, n, np.int64),
            "direction": _copy_array(self.o_dir, n, np.int8),
            "sequence": _copy_array(self.o_seq, n, np.int64),
            "ts_first_ns": _copy_array(self.o_first, n, np.int64),
            "ts_last_ns": _copy_array(self.o_last, n, np.int64),
            "size": sizes,
            "payload_offsets": offsets,
            "payload_data": self.out_data[: self.out_len],
        }
        self._new_output()
        return batch

    def take_connections(self):
        rows, self.closed_rows = self.closed_rows, []
        return rows

    def capture_counters(self):
        return {name: self.cnt[i] for i, name in enumerate(CAPTURE_COUNTERS)}

    def open_connections(self):
        return len(self.connections)

    # ------------------------------------------------------------------ file formats
    def feed(self, data):
        """Read whole records from ``data``; returns the bytes consumed (see the twin)."""
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            return self._feed(<const unsigned char *>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    cdef Py_ssize_t _feed(self, const unsigned char *p, Py_ssize_t n) except -1:
        cdef Py_ssize_t pos = 0
        cdef uint32_t magic_le, magic_be
        if self.error is None and self.format == FORMAT_NONE:
            if n < 4:
                return 0
            magic_le = kp_load_le32(p)
            magic_be = kp_load_be32(p)
            if magic_le == PCAPNG_SHB:
                self.format = FORMAT_PCAPNG
            elif (magic_le == PCAP_MAGIC_US or magic_le == PCAP_MAGIC_NS
                  or magic_be == PCAP_MAGIC_US or magic_be == PCAP_MAGIC_NS):
                if n < 24:
                    return 0
                self.big_endian = not (magic_le == PCAP_MAGIC_US or magic_le == PCAP_MAGIC_NS)
                self.pcap_nanos = (magic_be if self.big_endian else magic_le) == PCAP_MAGIC_NS
                self.linktype = self._u32(p + 20) & 0xFFFF
                self.format = FORMAT_PCAP
                pos = 24
            else:
                self._stop("not_a_capture", f"not a pcap or pcapng file (magic 0x{magic_be:08x})", 0)
        if self.error is None:
            if self.format == FORMAT_PCAP:
                pos = self._feed_pcap(p, n, pos)
            else:
                pos = self._feed_pcapng(p, n, pos)
            self.cnt[C_FILE_BYTES] += pos
        if self.error is not None:
            self.cnt[C_UNREAD_BYTES] += n - pos
            pos = n
        return pos

    cdef void _stop(self, str category, str reason, Py_ssize_t pos):
        self.error = (category, reason, self.cnt[C_FILE_BYTES] + pos)

    cdef inline uint32_t _u32(self, const unsigned char *p) noexcept:
        return kp_load_be32(p) if self.big_endian else kp_load_le32(p)

    cdef inline uint16_t _u16(self, const unsigned char *p) noexcept:
        return kp_load_be16(p) if self.big_endian else kp_load_le16(p)

    cdef Py_ssize_t _feed_pcap(self, const unsigned char *p, Py_ssize_t end, Py_ssize_t pos) except -1:
        cdef uint32_t seconds, fraction, caplen, origlen
        cdef int64_t scale = 1 if self.pcap_nanos else 1000
        while end - pos >= 16 and not self._batch_ready():
            seconds = self._u32(p + pos)
            fraction = self._u32(p + pos + 4)
            caplen = self._u32(p + pos + 8)
            origlen = self._u32(p + pos + 12)
            if caplen > MAX_RECORD:
                self._stop("oversized_record", f"pcap record with captured length {caplen} "
                           f"(limit {MAX_RECORD})", pos)
                break
            if end - pos - 16 < caplen:
                break
            self._packet(self.linktype, p + pos + 16, caplen, origlen,
                         <int64_t>seconds * 1000000000 + <int64_t>fraction * scale)
            pos += 16 + caplen
        return pos

    cdef Py_ssize_t _feed_pcapng(self, const unsigned char *p, Py_ssize_t end, Py_ssize_t pos) except -1:
        cdef uint32_t block_type, length
        while end - pos >= 12 and not self._batch_ready():
            block_type = self._u32(p + pos)
            if block_type == PCAPNG_SHB:
                if kp_load_le32(p + pos + 8) == PCAPNG_BOM:
                    self.big_endian = False
                elif kp_load_be32(p + pos + 8) == PCAPNG_BOM:
                    self.big_endian = True
                else:
                    self._stop("bad_block", "pcapng section header with a bad byte-order magic", pos)
                    break
                self.n_interfaces = 0
            length = self._u32(p + pos + 4)
            if length < 12 or length % 4:
                self._stop("bad_block", f"pcapng block of length {length}", pos)
                break
            if length > MAX_RECORD:
                self._stop("oversized_record", f"pcapng block of length {length} (limit {MAX_RECORD})", pos)
                break
            if end - pos < length:
                break
            if not self._block(block_type, p + pos + 8, length - 12, pos):
                break
            pos += length
        return pos

    cdef int _block(self, uint32_t block_type, const unsigned char *body, Py_ssize_t n, Py_ssize_t pos) except -1:
        # 1: read (or counted as malformed); 0: cannot be read, reading stops (self.error)
        cdef Interface *iface
        cdef Py_ssize_t opt
        cdef uint16_t code, olen
        cdef int resolution, exponent, k
        cdef int64_t offset
        cdef uint32_t index, high, low, caplen, origlen
        cdef uint64_t units
        if block_type == 1:
            if n < 8:
                self._stop("bad_block", "short pcapng interface block", pos)
                return 0
            if self.n_interfaces >= self.interface_capacity:
                self.interface_capacity = max(4, self.interface_capacity * 2)
                self.interfaces = <Interface *>_grow(self.interfaces, self.interface_capacity * sizeof(Interface))
            iface = &self.interfaces[self.n_interfaces]
            iface.linktype = self._u16(body)
            resolution = 6
            offset = 0
            opt = 8
            while n - opt >= 4:
                code = self._u16(body + opt)
                olen = self._u16(body + opt + 2)
                if code == 0:
                    break
                if code == 9 and olen >= 1 and n - opt - 4 >= 1:
                    resolution = body[opt + 4]
                elif code == 14 and olen >= 8 and n - opt - 4 >= 8:
                    offset = <int64_t>((<uint64_t>self._u32(body + opt + 8) << 32) | self._u32(body + opt + 4)) \
                        if not self.big_endian else \
                        <int64_t>((<uint64_t>self._u32(body + opt + 4) << 32) | self._u32(body + opt + 8))
                opt += 4 + ((olen + 3) & ~3)
            exponent = resolution & 0x7F
            iface.exponent = exponent
            iface.offset_ns = <int64_t>(<uint64_t>offset * <uint64_t>1000000000)
            iface.factor = 1
            if resolution & 0x80:
                iface.mode = 2
            elif exponent <= 9:
                iface.mode = 0
                for k in range(9 - exponent):
                    iface.factor *= 10
            elif exponent - 9 > 19:
                iface.mode = 3
            else:
                iface.mode = 1
                for k in range(exponent - 9):
                    iface.factor *= 10
            self.n_interfaces += 1
        elif block_type == 6 or block_type == 2:
            if n < 20:
                self._stop("bad_block", "short pcapng packet block", pos)
                return 0
            if block_type == 6:
                index = self._u32(body)
            else:
                index = self._u16(body)
            high = self._u32(body + 4)
            low = self._u32(body + 8)
            caplen = self._u32(body + 12)
            origlen = self._u32(body + 16)
            if index >= self.n_interfaces or caplen > n - 20:
                self.cnt[C_PACKETS] += 1
                self.cnt[C_MALFORMED] += 1
                return 1
            iface = &self.interfaces[index]
            units = (<uint64_t>high << 32) | low
            self._packet(iface.linktype, body + 20, caplen, origlen, _to_ns(iface, units))
        elif block_type == 3:
            if n < 4 or self.n_interfaces == 0:
                self.cnt[C_PACKETS] += 1
                self.cnt[C_MALFORMED] += 1
                return 1
            origlen = self._u32(body)
            caplen = <uint32_t>min(<Py_ssize_t>origlen, n - 4)
            self._packet(self.interfaces[0].linktype, body + 4, caplen, origlen, 0)
        elif block_type != PCAPNG_SHB:
            self.cnt[C_SKIPPED_BLOCKS] += 1
        return 1

    # ------------------------------------------------------------------ packet layers
    cdef int _packet(self, int linktype, const unsigned char *pkt, Py_ssize_t n, uint32_t origlen,
                     int64_t ts) except -1:
        cdef Py_ssize_t off, tcp, ip_end, ihl, total, doff, data_start, captured_end, ext_len
        cdef uint32_t family, ethertype
        cdef int next_header, version
        cdef const unsigned char *src
        cdef const unsigned char *dst
        cdef int addr_len
        cdef uint16_t payload_len
        self.cnt[C_PACKETS] += 1
        if linktype == LINK_ETHERNET:
            if n < 14:
                self.cnt[C_MALFORMED] += 1
                return 0
            ethertype = kp_load_be16(pkt + 12)
            off = 14
            while ethertype == 0x8100 or ethertype == 0x88A8 or ethertype == 0x9100:
                if n - off < 4:
                    self.cnt[C_MALFORMED] += 1
                    return 0
                ethertype = kp_load_be16(pkt + off + 2)
                off += 4
        elif linktype == LINK_SLL:
            if n < 16:
                self.cnt[C_MALFORMED] += 1
                return 0
            ethertype = kp_load_be16(pkt + 14)
            off = 16
        elif linktype == LINK_SLL2:
            if n < 20:
                self.cnt[C_MALFORMED] += 1
                return 0
            ethertype = kp_load_be16(pkt)
            off = 20
        elif linktype == LINK_NULL or linktype == LINK_LOOP:
            if n < 4:
                self.cnt[C_MALFORMED] += 1
                return 0
            family = kp_load_le32(pkt) if linktype == LINK_NULL else kp_load_be32(pkt)
            if linktype == LINK_NULL and family > 0xFFFF:
                family = kp_load_be32(pkt)
            ethertype = 0x0800 if family == 2 else (0x86DD if family in (10, 24, 28, 30) else 0)
            off = 4
        elif linktype == LINK_RAW or linktype == LINK_RAW_DLT or linktype == LINK_RAW_DLT_OPENBSD:
            version = pkt[0] >> 4 if n else 0
            ethertype = 0x0800 if version == 4 else (0x86DD if version == 6 else 0)
            off = 0
        elif linktype == LINK_IPV4:
            ethertype = 0x0800
            off = 0
        elif linktype == LINK_IPV6:
            ethertype = 0x86DD
            off = 0
        else:
            self.cnt[C_UNSUPPORTED_LINK] += 1
            return 0
        if ethertype == 0x0800:
            if n - off < 20 or pkt[off] >> 4 != 4:
                self.cnt[C_MALFORMED] += 1
                return 0
            ihl = (pkt[off] & 0x0F) * 4
            total = kp_load_be16(pkt + off + 2)
            if total == 0:
                total = max(<Py_ssize_t>origlen, n) - off
            if ihl < 20 or total < ihl or n - off < ihl:
                self.cnt[C_MALFORMED] += 1
                return 0
            if kp_load_be16(pkt + off + 6) & 0x3FFF:
                self.cnt[C_IP_FRAGMENTS] += 1
                return 0
            if pkt[off + 9] != 6:
                self.cnt[C_NON_TCP] += 1
                return 0
            src = pkt + off + 12
            dst = pkt + off + 16
            addr_len = 4
            ip_end = off + total
            tcp = off + ihl
        elif ethertype == 0x86DD:
            if n - off < 40 or pkt[off] >> 4 != 6:
                self.cnt[C_MALFORMED] += 1
                return 0
            payload_len = kp_load_be16(pkt + off + 4)
            next_header = pkt[off + 6]
            src = pkt + off + 8
            dst = pkt + off + 24
            addr_len = 16
            tcp = off + 40
            ip_end = tcp + payload_len if payload_len else max(<Py_ssize_t>origlen, n)
            while next_header != 6:
                if next_header == 0 or next_header == 43 or next_header == 60 or next_header == 51:
                    if n - tcp < 2:
                        self.cnt[C_MALFORMED] += 1
                        return 0
                    ext_len = (pkt[tcp + 1] + 2) * 4 if next_header == 51 else (pkt[tcp + 1] + 1) * 8
                    next_header = pkt[tcp]
                    tcp += ext_len
                elif next_header == 44:
                    if n - tcp < 8:
                        self.cnt[C_MALFORMED] += 1
                        return 0
                    if kp_load_be16(pkt + tcp + 2) & 0xFFF9:
                        self.cnt[C_IP_FRAGMENTS] += 1
                        return 0
                    next_header = pkt[tcp]
                    tcp += 8
                else:
                    self.cnt[C_NON_TCP] += 1
                    return 0
        else:
            self.cnt[C_UNSUPPORTED_LINK] += 1
            return 0
        if n - tcp < 20 or tcp > ip_end:
            self.cnt[C_MALFORMED] += 1
            return 0
        doff = (pkt[tcp + 12] >> 4) * 4
        if doff < 20 or n - tcp < doff or tcp + doff > ip_end:
            self.cnt[C_MALFORMED] += 1
            return 0
        data_start = tcp + doff
        captured_end = min(n, ip_end)
        self.cnt[C_TCP_PACKETS] += 1
        self.cnt[C_TCP_PAYLOAD_BYTES] += captured_end - data_start
        self._segment(src, dst, addr_len, kp_load_be16(pkt + tcp), kp_load_be16(pkt + tcp + 2), kp_load_be32(pkt + tcp + 4),
                      pkt[tcp + 13], pkt + data_start, captured_end - data_start, ip_end - data_start, ts)
        return 0

    # ------------------------------------------------------------------ connections
    cdef int _segment(self, const unsigned char *src, const unsigned char *dst, int addr_len, uint16_t sport,
                      uint16_t dport, uint32_t seq, int flags, const unsigned char *payload, Py_ssize_t plen,
                      int64_t wire_len, int64_t ts) except -1:
        cdef unsigned char a[19]
        cdef unsigned char b[19]
        cdef int side = 0
        cdef _Connection conn = None
        cdef _Half half
        cdef int cmp
        cdef int64_t end
        a[0] = addr_len
        b[0] = addr_len
        memcpy(a + 1, src, addr_len)
        memcpy(b + 1, dst, addr_len)
        if addr_len == 4:
            memset16(a + 5)
            memset16(b + 5)
        a[17] = sport >> 8
        a[18] = sport & 0xFF
        b[17] = dport >> 8
        b[18] = dport & 0xFF
        # The previous packet's connection is the likeliest one.
        if self.last is not None and not self.last.closed:
            if _same_endpoint(self.last, 0, a) and _same_endpoint(self.last, 1, b):
                conn = self.last
                side = 0
            elif _same_endpoint(self.last, 1, a) and _same_endpoint(self.last, 0, b):
                conn = self.last
                side = 1
        if conn is None:
            cmp = memcmp(a, b, 19)
            key = PyBytes_FromStringAndSize(<char *>a, 19) + PyBytes_FromStringAndSize(<char *>b, 19) \
                if cmp <= 0 else PyBytes_FromStringAndSize(<char *>b, 19) + PyBytes_FromStringAndSize(<char *>a, 19)
            found = self.connections.get(key)
            if found is not None:
                conn = <_Connection>found
                side = 0 if _same_endpoint(conn, 0, a) else 1
        if conn is not None:
            half = conn.half(side)
            if flags & TCP_SYN and half.started and half.isn != <int64_t>seq:
                self._close(conn, 4)
                conn = None
        if conn is None:
            if plen == 0 and wire_len == 0 and not (flags & TCP_SYN):
                self.cnt[C_TCP_WITHOUT_CONNECTION] += 1
                return 0
            cmp = memcmp(a, b, 19)
            key = PyBytes_FromStringAndSize(<char *>a, 19) + PyBytes_FromStringAndSize(<char *>b, 19) \
                if cmp <= 0 else PyBytes_FromStringAndSize(<char *>b, 19) + PyBytes_FromStringAndSize(<char *>a, 19)
            conn = _Connection()
            conn.id = self.next_conn_id
            conn.key = key
            memcpy(conn.ep[0], a, 17)
            memcpy(conn.ep[1], b, 17)
            conn.port[0] = sport
            conn.port[1] = dport
            conn.first_ts = ts
            conn.last_ts = ts
            self.next_conn_id += 1
            self.cnt[C_CONNECTIONS] += 1
            self.connections[key] = conn
            if self.port_is_broker[sport] != self.port_is_broker[dport]:
                conn.client_side = 1 if self.port_is_broker[sport] else 0
                conn.direction_source = 0
            side = 0
            if len(self.connections) > self.max_connections:
                self._evict(conn)
        self.last = conn
        conn.last_ts = ts
        half = conn.half(side)
        if flags & TCP_SYN:
            if not half.started:
                half.started = True
                half.isn = seq
                half.next_seq = seq + 1
                half.synced = True
                conn.handshake_seen = True
                if not (flags & TCP_ACK) and conn.client_side < 0:
                    conn.client_side = side
                    conn.direction_source = 1
            seq = seq + 1
        if plen or wire_len:
            self._data(conn, half, seq, payload, plen, wire_len, ts)
        if flags & TCP_FIN:
            if not half.started:
                half.started = True
                half.next_seq = seq
            end = _position(half, <uint32_t>(seq + <uint32_t>wire_len))
            if half.fin_pos < 0:
                half.fin_pos = end
        if flags & TCP_RST:
            self._close(conn, 2)
            return 0
        if conn.h0.fin_pos >= 0 and conn.h1.fin_pos >= 0 and not conn.h0.pending and not conn.h1.pending:
            self._close(conn, 1)
        return 0

    cdef int _data(self, _Connection conn, _Half half, uint32_t seq, const unsigned char *payload, Py_ssize_t plen,
                   int64_t wire_len, int64_t ts) except -1:
        cdef int64_t start, end, overlap_end, held_from, cut
        cdef bint duplicate = False, conflict = False
        half.c[H_PACKETS] += 1
        half.c[H_PAYLOAD_BYTES] += plen
        if not half.started:
            half.started = True
            half.next_seq = seq
            half.scan_from = 0
        if plen < wire_len:
            half.c[H_TRUNCATED_PACKETS] += 1
        start = _position(half, seq)
        end = start + plen
        if start < half.next_pos:
            overlap_end = min(end, half.next_pos)
            half.c[H_DUPLICATE_BYTES] += overlap_end - start
            duplicate = True
            held_from = max(start, half.buf_pos)
            if held_from < overlap_end:
                if memcmp(half.data() + (held_from - half.buf_pos), payload + (held_from - start),
                          overlap_end - held_from) != 0:
                    conflict = True
            cut = min(half.next_pos - start, <int64_t>plen)
            payload += cut
            plen -= cut
            start = half.next_pos
        if start < end:
            if not half.pending and start == half.next_pos:
                half.append(payload, plen, ts)
            else:
                held = self._hold(half, start, PyBytes_FromStringAndSize(<const char *>payload, plen), ts)
                duplicate = duplicate or held[0]
                conflict = conflict or held[1]
                self._drain(half)
        if duplicate:
            half.c[H_RETRANSMITTED_SEGMENTS] += 1
        if conflict:
            half.c[H_CONFLICTING_SEGMENTS] += 1
        if half.pending_bytes > self.max_pending_bytes:
            self._gap(half)
            self._drain(half)
        self._cut(conn, half, False)
        return 0

    cdef tuple _hold(self, _Half half, int64_t start, bytes data, int64_t ts):
        cdef bint duplicate = False, conflict = False
        cdef int64_t end = start + len(data)
        cdef int64_t cursor = start, held_start, held_end, lo, hi
        cdef list pieces = []
        for entry in half.pending:
            held_start = entry[0]
            held = entry[1]
            held_end = held_start + len(held)
            if held_end <= cursor:
                continue
            if held_start >= end:
                break
            if held_start > cursor:
                pieces.append((cursor, data[cursor - start: held_start - start]))
            lo = max(cursor, held_start)
            hi = min(end, held_end)
            half.c[H_DUPLICATE_BYTES] += hi - lo
            duplicate = True
            if held[lo - held_start: hi - held_start] != data[lo - start: hi - start]:
                conflict = True
            cursor = hi
        if cursor < end:
            pieces.append((cursor, data[cursor - start:]))
        cdef Py_ssize_t index
        for piece_start, piece in pieces:
            index = 0
            while index < len(half.pending) and half.pending[index][0] < piece_start:
                index += 1
            half.pending.insert(index, [piece_start, piece, ts])
            half.pending_bytes += len(piece)
        return duplicate, conflict

    cdef int _drain(self, _Half half) except -1:
        cdef bytes data
        while half.pending and half.pending[0][0] == half.next_pos:
            entry = half.pending.pop(0)
            data = entry[1]
            half.pending_bytes -= len(data)
            half.append(<const unsigned char *><char *>data, len(data), entry[2])
        return 0

    cdef int _gap(self, _Half half) except -1:
        cdef int64_t hole_end = half.pending[0][0]
        cdef int64_t resume = -1
        cdef int32_t size
        half.c[H_GAPS] += 1
        half.c[H_GAP_BYTES] += hole_end - half.next_pos
        if half.synced and half.length >= 4:
            size = <int32_t>kp_load_be32(half.data())
            if 0 <= size <= self.max_frame_size:
                resume = half.buf_pos + 4 + size
        half.c[H_SKIPPED_BYTES] += half.length
        half.drop(half.length)
        half.synced = False
        half.c[H_RESYNCS] += 1
        half.scan_from = max(resume, hole_end)
        half.next_seq = <uint32_t>(half.next_seq + <uint32_t>(hole_end - half.next_pos))
        half.next_pos = hole_end
        half.buf_pos = hole_end
        # drop() kept chunk bookkeeping relative to the old position; nothing is live now.
        half.chunk_head = 0
        half.chunk_count = 0
        return 0

    # ------------------------------------------------------------------ frames
    cdef bint _request_ok(self, const unsigned char *p, Py_ssize_t avail, int64_t size) noexcept:
        # Plausible as a request's first bytes: the wire layer reads the fixed part; the
        # client id's bytes may not have arrived yet, so only its length is checked.
        cdef WireHeader h
        cdef Py_ssize_t pos = 0
        cdef uint16_t client_id
        if wire_request_fixed(p, min(avail, size), &pos, &h):
            return False
        if h.api_key < 0 or h.api_key >= self.n_versions or h.api_version < 0 \
                or h.api_version > self.versions[h.api_key]:
            return False
        if h.correlation_id < 0:
            return False
        if h.version == 0:   # no client id field
            return True
        if size < 10 or avail < 10:
            return False
        client_id = kp_load_be16(p + 8)
        if client_id >= 0x8000:
            return client_id == 0xFFFF
        return client_id <= size - 10

    cdef int _header_ok(self, _Connection conn, _Half half, const unsigned char *p, Py_ssize_t avail) noexcept:
        cdef int32_t size
        cdef int role
        if avail < 8:
            return -1
        size = <int32_t>kp_load_be32(p)
        if size < 4 or size > self.max_frame_size:
            return 0
        if avail < min(14, 4 + <Py_ssize_t>size):
            return -1
        role = -1 if conn.client_side < 0 else (0 if conn.client_side == half.side else 1)
        if role != 1 and self._request_ok(p + 4, avail - 4, size):
            return 1
        if role != 0 and <int32_t>kp_load_be32(p + 4) >= 0:
            return 1
        return 0

    cdef bint _scan(self, _Connection conn, _Half half, bint final) except -1:
        cdef const unsigned char *buf = half.data()
        cdef Py_ssize_t length = half.length
        cdef Py_ssize_t i = <Py_ssize_t>min(max(<int64_t>0, half.scan_from - half.buf_pos), <int64_t>length)
        cdef Py_ssize_t after
        cdef bint found = False, confirmed
        cdef int ok, next_ok
        cdef _Half other = conn.half(1 - half.side)
        while i < length:
            ok = self._header_ok(conn, half, buf + i, length - i)
            if ok < 0:
                if final:
                    i = length
                break
            if ok:
                after = i + 4 + <int32_t>kp_load_be32(buf + i)
                confirmed = other.has_corr(<int32_t>kp_load_be32(buf + i + 4))
                if not confirmed:
                    next_ok = self._header_ok(conn, half, buf + after, length - after) if after <= length else -1
                    if next_ok < 0:
                        if not final:
                            break
                        confirmed = after <= length
                    else:
                        confirmed = next_ok == 1
                if confirmed:
                    found = True
                    break
            i += 1
        half.scan_from = max(half.scan_from, half.buf_pos + i)
        if i:
            half.c[H_SKIPPED_BYTES] += i
            half.drop(i)
        if found:
            half.synced = True
        return found

    cdef int _cut(self, _Connection conn, _Half half, bint final) except -1:
        cdef int32_t size
        cdef int64_t frame_end, first_ts, last_ts
        cdef Py_ssize_t k
        cdef const unsigned char *buf
        cdef bint have_first
        while True:
            if not half.synced and not self._scan(conn, half, final):
                return 0
            if half.length < 4:
                return 0
            buf = half.data()
            size = <int32_t>kp_load_be32(buf)
            if size < 4 or size > self.max_frame_size:
                half.synced = False
                half.c[H_RESYNCS] += 1
                half.scan_from = half.buf_pos + 1
                continue
            if half.length < 4 + <Py_ssize_t>size:
                return 0
            frame_end = half.buf_pos + 4 + size
            first_ts = last_ts = 0
            have_first = False
            for k in range(half.chunk_head, half.chunk_head + half.chunk_count):
                if not have_first and half.chunks[k].end > half.buf_pos:
                    first_ts = half.chunks[k].ts
                    have_first = True
                if half.chunks[k].end >= frame_end:
                    last_ts = half.chunks[k].ts
                    break
            half.c[H_FRAMES] += 1
            half.c[H_FRAME_BYTES] += 4 + size
            if self._request_ok(buf + 4, size, size):
                half.add_corr(<int32_t>kp_load_be32(buf + 8))
                conn.request_like[half.side] += 1
            if conn.client_side < 0:
                self._infer(conn, half, half.sequence, first_ts, last_ts, size,
                            PyBytes_FromStringAndSize(<const char *>buf + 4, size))
            else:
                self._emit(conn, half.side, half.sequence, first_ts, last_ts, size, buf + 4)
            half.sequence += 1
            half.drop(4 + size)

    cdef int _infer(self, _Connection conn, _Half half, int64_t sequence, int64_t first_ts, int64_t last_ts,
                    int32_t size, bytes payload) except -1:
        conn.undecided.append((half.side, sequence, first_ts, last_ts, size, payload))
        cdef _Half other = conn.half(1 - half.side)
        if size >= 4 and other.has_corr(<int32_t>kp_load_be32(<const unsigned char *><char *>payload)):
            self._decide(conn, 1 - half.side, 2)
        elif len(conn.undecided) >= MAX_UNDECIDED_FRAMES:
            self._guess(conn)
        return 0

    cdef int _guess(self, _Connection conn) except -1:
        cdef int side
        if conn.request_like[0] != conn.request_like[1]:
            side = 0 if conn.request_like[0] > conn.request_like[1] else 1
        else:
            side = 0 if conn.port[0] >= conn.port[1] else 1
        return self._decide(conn, side, 3)

    cdef int _decide(self, _Connection conn, int client_side, int source) except -1:
        cdef bytes payload
        conn.client_side = client_side
        conn.direction_source = source
        for side, sequence, first_ts, last_ts, size, payload in conn.undecided:
            self._emit(conn, side, sequence, first_ts, last_ts, size, <const unsigned char *><char *>payload)
        conn.undecided = []
        return 0

    # ------------------------------------------------------------------ endings
    cdef int _close(self, _Connection conn, int reason) except -1:
        cdef _Half half
        for half in (conn.h0, conn.h1):
            while half.pending:
                self._gap(half)
                self._drain(half)
                self._cut(conn, half, False)
            self._cut(conn, half, True)
            half.c[H_TAIL_BYTES] += half.length
            half.drop(half.length)
        if conn.client_side < 0:
            self._guess(conn)
        del self.connections[conn.key]
        conn.closed = True
        if self.last is conn:
            self.last = None
        cdef int cs = conn.client_side
        row = {
            "connection_id": conn.id,
            "client_ip": _format_ip(conn.ep[cs]), "client_port": conn.port[cs],
            "server_ip": _format_ip(conn.ep[1 - cs]), "server_port": conn.port[1 - cs],
            "first_ts_ns": conn.first_ts, "last_ts_ns": conn.last_ts,
            "handshake_seen": bool(conn.handshake_seen),
            "closed_by": CLOSED_BY[reason],
            "direction_source": DIRECTION_SOURCE[conn.direction_source],
        }
        for prefix, half in (("request_", conn.half(cs)), ("response_", conn.half(1 - cs))):
            for name, value in half.counters().items():
                row[prefix + name] = value
        self.closed_rows.append(row)
        return 0

    cdef int _evict(self, _Connection keep) except -1:
        victims = sorted((c for c in self.connections.values() if c is not keep),
                         key=lambda c: ((<_Connection>c).last_ts, (<_Connection>c).id))
        for conn in victims[: max(1, len(victims) // 8)]:
            self.cnt[C_EVICTED] += 1
            self._close(conn, 3)
        return 0

    def finish(self, remaining=0):
        """The input ended: flush every connection, in the order they were opened."""
        if self.finished:
            return
        self.finished = True
        self.cnt[C_TRAILING_BYTES] += remaining
        for conn in sorted(self.connections.values(), key=lambda c: (<_Connection>c).id):
            self._close(conn, 0)


cdef inline void memset16(unsigned char *p) noexcept:
    cdef int i
    for i in range(12):
        p[i] = 0


cdef inline bint _same_endpoint(_Connection conn, int side, const unsigned char *ep) noexcept:
    return memcmp(conn.ep[side], ep, 17) == 0 and conn.port[side] == ((ep[17] << 8) | ep[18])


cdef inline int64_t _to_ns(Interface *iface, uint64_t units) noexcept:
    cdef uint64_t ns
    if iface.mode == 0:
        ns = units * iface.factor
    elif iface.mode == 1:
        ns = units // iface.factor
    elif iface.mode == 2:
        ns = <uint64_t>kpc_binary_ts(units, iface.exponent)
    else:
        ns = 0
    return <int64_t>(ns + <uint64_t>iface.offset_ns)


cdef void *_grow(void *p, size_t size) except NULL:
    cdef void *q = realloc(p, size)
    if q == NULL:
        raise MemoryError()
    return q


cdef object _copy_array(void *src, Py_ssize_t n, dtype):
    out = np.empty(n, dtype=dtype)
    memcpy(<void *><size_t>out.ctypes.data, src, n * out.itemsize)
    return out


cdef str _format_ip(const unsigned char *ep):
    return str(ipaddress.ip_address(PyBytes_FromStringAndSize(<const char *>ep + 1, ep[0])))


def scan_frames(data, max_frame_size=100 * 1024 * 1024, max_frames=1 << 62):
    """Split concatenated size-prefixed frames (see the twin for the result)."""
    cdef Py_buffer view
    cdef Py_ssize_t pos = 0, end, count = 0, total = 0, limit
    cdef int32_t size
    cdef int64_t max_size = max_frame_size
    cdef int64_t max_count = max_frames
    cdef const unsigned char *p
    cdef int64_t *s_ptr
    cdef int32_t *z_ptr
    cdef unsigned char *d_ptr
    error = None
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char *>view.buf
        end = view.len
        # First pass: find the frames; second: copy their payloads.
        while end - pos >= 4 and count < max_count:
            size = <int32_t>kp_load_be32(p + pos)
            if size < 0 or size > max_size:
                error = f"invalid frame size {size} (maximum {max_frame_size})"
                break
            if end - pos - 4 < size:
                break
            count += 1
            total += size
            pos += 4 + size
        limit = pos
        starts = np.empty(count, dtype=np.int64)
        sizes = np.empty(count, dtype=np.int32)
        payloads = np.empty(total, dtype=np.uint8)
        s_ptr = <int64_t *><size_t>starts.ctypes.data
        z_ptr = <int32_t *><size_t>sizes.ctypes.data
        d_ptr = <unsigned char *><size_t>payloads.ctypes.data
        pos = 0
        count = 0
        total = 0
        while pos < limit:
            size = <int32_t>kp_load_be32(p + pos)
            s_ptr[count] = pos + 4
            z_ptr[count] = size
            memcpy(d_ptr + total, p + pos + 4, size)
            count += 1
            total += size
            pos += 4 + size
        return starts, sizes, limit, error, payloads
    finally:
        PyBuffer_Release(&view)

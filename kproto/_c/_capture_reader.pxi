# Included by _capture.pyx: capture files as records (twin: kproto/_py/capture_reader.py).
# A pcap or pcapng file is read record by record as its bytes come; each packet's link,
# IP and TCP layers are taken apart and its segment goes to the reassembly stage. scan_frames
# reads the other input, a dump of concatenated size-prefixed frames.


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


cdef struct Interface:
    int linktype
    uint32_t snaplen
    int mode         # 0: multiply, 1: divide, 2: binary, 3: always 0 (divisor beyond 64 bits)
    uint64_t factor
    int exponent
    int64_t offset_ns


# Link headers that carry an ethertype, and the VLAN tags' ethertypes, read once from
# kproto/_common/capture.py (their one definition).
cdef enum:
    N_ETHERTYPE_LINKS = 3
    N_VLAN_ETHERTYPES = 3
cdef int ETHERTYPE_LINKS[N_ETHERTYPE_LINKS][3]   # link type, header length, ethertype offset
cdef uint16_t VLAN_ETHERTYPES[N_VLAN_ETHERTYPES]
assert len(_shapes.ETHERTYPE_LINKS) == N_ETHERTYPE_LINKS and len(_shapes.VLAN_ETHERTYPES) == N_VLAN_ETHERTYPES
for _k, _link in enumerate(_shapes.ETHERTYPE_LINKS):
    ETHERTYPE_LINKS[_k][0], ETHERTYPE_LINKS[_k][1], ETHERTYPE_LINKS[_k][2] = _link
for _k, _ethertype in enumerate(_shapes.VLAN_ETHERTYPES):
    VLAN_ETHERTYPES[_k] = _ethertype


cdef inline int _ethertype_link(int linktype) noexcept:
    # Index into ETHERTYPE_LINKS, or -1.
    cdef int k
    for k in range(N_ETHERTYPE_LINKS):
        if ETHERTYPE_LINKS[k][0] == linktype:
            return k
    return -1


cdef inline bint _is_vlan(uint32_t ethertype) noexcept:
    cdef int k
    for k in range(N_VLAN_ETHERTYPES):
        if VLAN_ETHERTYPES[k] == ethertype:
            return True
    return False


@cython.final
cdef class RecordReader:
    """Records and packet layers: the engine's first stage (kproto/_common/capture_engine.py)."""
    cdef Reassembly reassembly       # where each TCP segment goes
    cdef Framer framer               # asked whether the batch is full
    cdef int64_t *cnt                # the capture counters (the reassembly's)
    cdef int format
    cdef bint big_endian
    cdef bint pcap_nanos
    cdef int linktype
    cdef Interface *interfaces
    cdef Py_ssize_t n_interfaces, interface_capacity
    cdef readonly object error       # None, or (category, reason, file offset): see the twin

    def __init__(self, Reassembly reassembly, Framer framer):
        self.reassembly = reassembly
        self.framer = framer
        self.cnt = &reassembly.cnt[0]

    def __dealloc__(self):
        free(self.interfaces)

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
                self.reassembly.snaplen = self._u32(p + 16)
                self.format = FORMAT_PCAP
                pos = 24
            else:
                self._stop("not_a_capture", _engine.not_a_capture(magic_be), 0)
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
        while end - pos >= 16 and not self.framer._batch_ready():
            seconds = self._u32(p + pos)
            fraction = self._u32(p + pos + 4)
            caplen = self._u32(p + pos + 8)
            origlen = self._u32(p + pos + 12)
            if caplen > MAX_RECORD:
                self._stop("oversized_record", _engine.oversized_pcap_record(caplen, MAX_RECORD), pos)
                break
            if end - pos - 16 < caplen:
                break
            self._packet(self.linktype, p + pos + 16, caplen, origlen,
                         <int64_t>seconds * 1000000000 + <int64_t>fraction * scale)
            pos += 16 + caplen
        return pos

    cdef Py_ssize_t _feed_pcapng(self, const unsigned char *p, Py_ssize_t end, Py_ssize_t pos) except -1:
        cdef uint32_t block_type, length
        while end - pos >= 12 and not self.framer._batch_ready():
            block_type = self._u32(p + pos)
            if block_type == PCAPNG_SHB:
                if kp_load_le32(p + pos + 8) == PCAPNG_BOM:
                    self.big_endian = False
                elif kp_load_be32(p + pos + 8) == PCAPNG_BOM:
                    self.big_endian = True
                else:
                    self._stop("bad_block", _engine.BAD_BYTE_ORDER, pos)
                    break
                self.n_interfaces = 0
            length = self._u32(p + pos + 4)
            if length < 12 or length % 4:
                self._stop("bad_block", _engine.bad_pcapng_block_length(length), pos)
                break
            if length > MAX_RECORD:
                self._stop("oversized_record", _engine.oversized_pcapng_block(length, MAX_RECORD), pos)
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
        cdef int resolution, exponent, k
        cdef int64_t offset
        cdef uint32_t index, high, low, caplen, origlen
        cdef uint64_t units
        if block_type == 1:
            if n < 8:
                self._stop("bad_block", _engine.SHORT_INTERFACE_BLOCK, pos)
                return 0
            if self.n_interfaces >= self.interface_capacity:
                self.interface_capacity = max(4, self.interface_capacity * 2)
                self.interfaces = <Interface *>_grow(self.interfaces, self.interface_capacity * sizeof(Interface))
            iface = &self.interfaces[self.n_interfaces]
            iface.linktype = self._u16(body)
            iface.snaplen = self._u32(body + 4)
            order = ">" if self.big_endian else "<"
            resolution, offset = _shapes.pcapng_interface_time(
                _shapes.pcapng_options(PyBytes_FromStringAndSize(<const char *>body, n), order, 8), order)
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
                self._stop("bad_block", _engine.SHORT_PACKET_BLOCK, pos)
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
            self.reassembly.snaplen = iface.snaplen
            units = (<uint64_t>high << 32) | low
            self._packet(iface.linktype, body + 20, caplen, origlen, _to_ns(iface, units))
        elif block_type == 3:
            if n < 4 or self.n_interfaces == 0:
                self.cnt[C_PACKETS] += 1
                self.cnt[C_MALFORMED] += 1
                return 1
            origlen = self._u32(body)
            caplen = <uint32_t>min(<Py_ssize_t>origlen, n - 4)
            self.reassembly.snaplen = self.interfaces[0].snaplen
            self._packet(self.interfaces[0].linktype, body + 4, caplen, origlen, 0)
        elif block_type != PCAPNG_SHB:
            self.cnt[C_SKIPPED_BLOCKS] += 1
        return 1

    # ------------------------------------------------------------------ packet layers
    cdef int _packet(self, int linktype, const unsigned char *pkt, Py_ssize_t n, uint32_t origlen,
                     int64_t ts) except -1:
        cdef Py_ssize_t off, tcp, ip_end, ihl, total, doff, data_start, captured_end, ext_len
        cdef uint32_t family, ethertype
        cdef int next_header, version, k
        cdef const unsigned char *src
        cdef const unsigned char *dst
        cdef int addr_len
        cdef uint16_t payload_len
        self.cnt[C_PACKETS] += 1
        k = _ethertype_link(linktype)
        if k >= 0:
            off = ETHERTYPE_LINKS[k][1]
            if n < off:
                self.cnt[C_MALFORMED] += 1
                return 0
            ethertype = kp_load_be16(pkt + ETHERTYPE_LINKS[k][2])
            while linktype == LINK_ETHERNET and _is_vlan(ethertype):
                if n - off < 4:
                    self.cnt[C_MALFORMED] += 1
                    return 0
                ethertype = kp_load_be16(pkt + off + 2)
                off += 4
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
        self.reassembly._segment(src, dst, addr_len, kp_load_be16(pkt + tcp), kp_load_be16(pkt + tcp + 2), kp_load_be32(pkt + tcp + 4),
                      kp_load_be32(pkt + tcp + 8), pkt[tcp + 13], pkt + data_start, captured_end - data_start,
                      ip_end - data_start, ts)
        return 0


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
                error = _engine.invalid_frame_size(size, max_frame_size)
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

"""Pure-Python twin of kproto/_c/_capture.pyx: capture files to Kafka frames.

The engine reads pcap / pcapng bytes as they come (``feed``), takes every packet
apart (link layer, IPv4 / IPv6, TCP), reassembles each TCP connection per
direction and cuts the byte streams into Kafka frames (int32 size + payload).
It is deliberately written as the readable reference; the Cython module does
exactly the same, packet for packet and counter for counter, only faster.

Public surface (identical in both implementations):

* ``Engine``: the capture state machine; see its docstring.
* ``scan_frames``: splits a buffer of concatenated size-prefixed frames.
* ``DIRECTION_REQUEST`` (0), ``DIRECTION_RESPONSE`` (1).
* ``FRAME_COLUMNS``, ``CONNECTION_COLUMNS``, ``CAPTURE_COUNTERS``: output names.

Reassembly rules (the contract the tests check):

* Stream positions are 64-bit offsets from the first byte of the stream; TCP
  sequence numbers are unwrapped against the next expected one, so wrap-around
  is invisible.
* The first copy of a byte wins. Later copies count as duplicate bytes; a later
  copy that differs from a still-held first copy counts as a conflict.
* Segments ahead of the next expected byte wait (out of order) until the hole
  fills. When more than ``max_pending_bytes`` wait, or the stream ends, the hole
  is declared a gap: its bytes are counted lost, the frame it cut is discarded
  (counted skipped) and reading resumes at the next frame boundary that
  validates.
* A stream whose start was not captured (no SYN) is scanned for the first
  plausible frame boundary; the bytes before it are counted skipped.
* Per direction, after the end: ``stream_bytes == frame_bytes + skipped_bytes +
  tail_bytes`` (tail = an incomplete frame left at the end).
"""

from __future__ import annotations

import struct
from collections import deque

import numpy as np

from kproto._common.capture import (
    CAPTURE_COUNTERS,
    CLOSED_BY,
    CONNECTION_COLUMNS,
    DIRECTION_REQUEST,
    DIRECTION_RESPONSE,
    DIRECTION_SOURCE,
    FRAME_COLUMNS,
    HALF_COUNTERS,
    LINK_ETHERNET,
    LINK_IPV4,
    LINK_IPV6,
    LINK_LOOP,
    LINK_NULL,
    LINK_SLL,
    LINK_SLL2,
    PCAPNG_BOM,
    PCAPNG_SHB,
    PCAP_MAGIC_NS,
    PCAP_MAGIC_US,
    RAW_LINKS,
    pcapng_ts_converter,
)
from kproto._py import wire
from kproto.limits import CAPTURE_MAX_RECORD_SIZE

__all__ = [
    "Engine",
    "scan_frames",
    "DIRECTION_REQUEST",
    "DIRECTION_RESPONSE",
    "FRAME_COLUMNS",
    "CONNECTION_COLUMNS",
    "CAPTURE_COUNTERS",
]

_TCP_FIN = 0x01
_TCP_SYN = 0x02
_TCP_RST = 0x04
_TCP_ACK = 0x10

_BE16 = struct.Struct(">H")
_BE32 = struct.Struct(">I")
_BE32S = struct.Struct(">i")
_MAX_CORRS = 256
_MAX_UNDECIDED_FRAMES = 64
_LIMIT = 512 * 1024 * 1024  # cap of max_frame_size, max_pending_bytes and batch_bytes


def _wrap64(value: int) -> int:
    """Clamp to int64 the way the C engine's arithmetic does (two's complement)."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


class _Half:
    """One direction of one TCP connection."""

    def __init__(self, side: int) -> None:
        self.side = side
        self.started = False
        self.isn = -1              # initial sequence number, when the SYN was seen
        self.next_seq = 0          # sequence number of the next expected byte
        self.next_pos = 0          # its stream offset
        self.buf = bytearray()     # assembled bytes not yet cut into frames
        self.buf_pos = 0           # stream offset of buf[0]
        self.chunks: deque = deque()  # (stream end offset, ts) of the segments in buf
        self.pending: list = []    # out-of-order [start, bytes, ts], sorted, non-overlapping
        self.pending_bytes = 0
        self.synced = False        # True when buf[0] is a frame boundary
        self.scan_from = 0         # while not synced: no boundary before this offset
        self.fin_pos = -1
        self.sequence = 0
        self.request_corrs: deque = deque()  # correlation ids of frames that read as requests
        self.counters = dict.fromkeys(HALF_COUNTERS, 0)


class _Connection:
    def __init__(self, conn_id: int, key, endpoints, ts: int) -> None:
        self.id = conn_id
        self.key = key
        self.endpoints = endpoints  # ((ip bytes, port) of side 0, of side 1)
        self.halves = (_Half(0), _Half(1))
        self.client_side = -1       # which side sends requests; -1 until known
        self.direction_source = -1
        self.handshake_seen = False
        self.first_ts = ts
        self.last_ts = ts
        self.undecided: list = []   # frames waiting for the direction
        self.request_like = [0, 0]


class Engine:
    """Capture bytes in, Kafka frames and accounting out.

    Args:
        request_versions: highest plausible request version per api_key (index),
            -1 for keys that do not exist; used to validate frame boundaries.
        broker_ports: TCP ports of brokers; the other end of such a connection
            sends the requests.
        max_frame_size: larger size prefixes are not frame boundaries.
        max_pending_bytes: out-of-order bytes held per direction before the
            missing ones are declared lost.
        max_connections: open connections kept; beyond it the least recently
            active eighth is closed (counted as evicted).
        batch_frames, batch_bytes: ``feed`` stops once this many frames or
            payload bytes are ready, so output stays bounded.
    """

    def __init__(self, request_versions, broker_ports=(9092,), max_frame_size: int = 100 * 1024 * 1024,
                 max_pending_bytes: int = 8 * 1024 * 1024, max_connections: int = 65536,
                 batch_frames: int = 65536, batch_bytes: int = 64 * 1024 * 1024) -> None:
        self.request_versions = [int(v) for v in request_versions]
        self.broker_ports = frozenset(int(p) for p in broker_ports)
        # Capped so one batch's payloads always fit Arrow's int32 offsets: a batch
        # stops filling under batch_bytes, then one packet can finish at most a
        # frame plus the out-of-order bytes it releases.
        self.max_frame_size = min(int(max_frame_size), _LIMIT)
        self.max_pending_bytes = min(int(max_pending_bytes), _LIMIT)
        self.max_connections = max(1, int(max_connections))
        self.batch_frames = max(1, int(batch_frames))
        self.batch_bytes = min(max(1, int(batch_bytes)), _LIMIT)
        self.counters = dict.fromkeys(CAPTURE_COUNTERS, 0)
        self.format: str | None = None   # "pcap" / "pcapng" once the header is read
        self.order = "<"
        self.linktype = 0
        self.pcap_nanos = False
        self.interfaces: list = []  # pcapng: (linktype, ts converter)
        self.connections: dict = {}
        self.next_conn_id = 0
        self.finished = False
        # (category, reason, file offset) once a record cannot be framed: nothing
        # after it can be trusted, so the rest is counted as unread_bytes. The
        # categories are kproto.capture.ERROR_CATEGORIES' first three.
        self.error: tuple[str, str, int] | None = None
        self._reset_batch()
        self._closed: list = []

    # ------------------------------------------------------------------ output
    def _reset_batch(self) -> None:
        self.out: dict[str, list] = {name: [] for name in FRAME_COLUMNS}
        self.out_bytes = 0

    def batch_ready(self) -> bool:
        """True when ``feed`` stopped because a batch is full."""
        return len(self.out["size"]) >= self.batch_frames or self.out_bytes >= self.batch_bytes

    def take_batch(self):
        """Frames found since the last call, or None: a dict of numpy columns plus
        ``payload_offsets`` (int32, n + 1) and ``payload_data`` (bytes)."""
        out = self.out
        if not out["size"]:
            return None
        payloads = out["payload"]
        offsets = np.zeros(len(payloads) + 1, dtype=np.int32)
        np.cumsum([len(p) for p in payloads], out=offsets[1:])
        batch = {
            "connection_id": np.array(out["connection_id"], dtype=np.int64),
            "direction": np.array(out["direction"], dtype=np.int8),
            "sequence": np.array(out["sequence"], dtype=np.int64),
            "ts_first_ns": np.array(out["ts_first_ns"], dtype=np.int64),
            "ts_last_ns": np.array(out["ts_last_ns"], dtype=np.int64),
            "size": np.array(out["size"], dtype=np.int32),
            "payload_offsets": offsets,
            "payload_data": b"".join(payloads),
        }
        self._reset_batch()
        return batch

    def take_connections(self) -> list:
        """Rows (dicts keyed by CONNECTION_COLUMNS) of connections closed since the last call."""
        rows, self._closed = self._closed, []
        return rows

    def capture_counters(self) -> dict:
        return dict(self.counters)

    def open_connections(self) -> int:
        return len(self.connections)

    # ------------------------------------------------------------------ file formats
    def feed(self, data) -> int:
        """Read whole records from ``data`` (the file's bytes from where the last
        call stopped); returns how many bytes were consumed. Stops early when a
        batch is full; call again with the rest. After an error (see ``error``)
        every byte is consumed and counted as unread."""
        view = memoryview(data).cast("B")
        pos = 0
        if self.error is None and self.format is None:
            if len(view) < 4:
                return 0
            magic_le = struct.unpack_from("<I", view, 0)[0]
            magic_be = struct.unpack_from(">I", view, 0)[0]
            if magic_le == PCAPNG_SHB:
                self.format = "pcapng"
            elif magic_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS) or magic_be in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
                if len(view) < 24:
                    return 0
                self.order = "<" if magic_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS) else ">"
                self.pcap_nanos = struct.unpack_from(self.order + "I", view, 0)[0] == PCAP_MAGIC_NS
                self.linktype = struct.unpack_from(self.order + "I", view, 20)[0] & 0xFFFF
                self.format = "pcap"
                pos = 24
            else:
                self._stop("not_a_capture", f"not a pcap or pcapng file (magic 0x{magic_be:08x})", 0)
        if self.error is None:
            if self.format == "pcap":
                pos = self._feed_pcap(view, pos)
            else:
                pos = self._feed_pcapng(view, pos)
            self.counters["file_bytes"] += pos
        if self.error is not None:
            self.counters["unread_bytes"] += len(view) - pos
            pos = len(view)
        return pos

    def _stop(self, category: str, reason: str, pos: int) -> None:
        """The record at ``pos`` of this feed cannot be framed: stop reading there."""
        self.error = (category, reason, self.counters["file_bytes"] + pos)

    def _feed_pcap(self, view, pos: int) -> int:
        header = struct.Struct(self.order + "IIII")
        end = len(view)
        scale = 1 if self.pcap_nanos else 1000
        while end - pos >= 16 and not self.batch_ready():
            seconds, fraction, caplen, origlen = header.unpack_from(view, pos)
            if caplen > CAPTURE_MAX_RECORD_SIZE:  # no link layer has packets this big: the file is corrupt
                self._stop("oversized_record", f"pcap record with captured length {caplen} "
                           f"(limit {CAPTURE_MAX_RECORD_SIZE})", pos)
                break
            if end - pos - 16 < caplen:
                break
            ts = seconds * 1_000_000_000 + fraction * scale
            self._packet(self.linktype, view[pos + 16: pos + 16 + caplen], origlen, ts)
            pos += 16 + caplen
        return pos

    def _feed_pcapng(self, view, pos: int) -> int:
        end = len(view)
        while end - pos >= 12 and not self.batch_ready():
            block_type = struct.unpack_from(self.order + "I", view, pos)[0]
            if block_type == PCAPNG_SHB:
                bom_le = struct.unpack_from("<I", view, pos + 8)[0]
                if bom_le == PCAPNG_BOM:
                    self.order = "<"
                elif struct.unpack_from(">I", view, pos + 8)[0] == PCAPNG_BOM:
                    self.order = ">"
                else:
                    self._stop("bad_block", "pcapng section header with a bad byte-order magic", pos)
                    break
                self.interfaces = []
            length = struct.unpack_from(self.order + "I", view, pos + 4)[0]
            if length < 12 or length % 4:
                self._stop("bad_block", f"pcapng block of length {length}", pos)
                break
            if length > CAPTURE_MAX_RECORD_SIZE:
                self._stop("oversized_record", f"pcapng block of length {length} "
                           f"(limit {CAPTURE_MAX_RECORD_SIZE})", pos)
                break
            if end - pos < length:
                break
            if not self._block(block_type, view[pos + 8: pos + length - 4], pos):
                break
            pos += length
        return pos

    def _block(self, block_type: int, body, pos: int) -> bool:
        """Read one pcapng block; False when it cannot be read (reading stops)."""
        order = self.order
        if block_type == 1:  # interface description
            if len(body) < 8:
                self._stop("bad_block", "short pcapng interface block", pos)
                return False
            linktype = struct.unpack_from(order + "H", body, 0)[0]
            resolution, offset = 6, 0
            opt = 8
            while len(body) - opt >= 4:
                code, olen = struct.unpack_from(order + "HH", body, opt)
                if code == 0:
                    break
                value = body[opt + 4: opt + 4 + olen]
                if code == 9 and olen >= 1 and len(value) >= 1:
                    resolution = value[0]
                elif code == 14 and olen >= 8 and len(value) >= 8:
                    offset = struct.unpack_from(order + "q", value, 0)[0]
                opt += 4 + ((olen + 3) & ~3)
            self.interfaces.append((linktype, pcapng_ts_converter(resolution, offset)))
        elif block_type == 6 or block_type == 2:  # enhanced packet / obsolete packet
            if len(body) < 20:
                self._stop("bad_block", "short pcapng packet block", pos)
                return False
            if block_type == 6:
                iface, high, low, caplen, origlen = struct.unpack_from(order + "IIIII", body, 0)
            else:
                iface, _drops, high, low, caplen, origlen = struct.unpack_from(order + "HHIIII", body, 0)
            if iface >= len(self.interfaces) or caplen > len(body) - 20:
                self.counters["packets"] += 1
                self.counters["malformed"] += 1
                return True
            linktype, convert = self.interfaces[iface]
            self._packet(linktype, body[20: 20 + caplen], origlen, _wrap64(convert((high << 32) | low)))
        elif block_type == 3:  # simple packet: no timestamp, interface 0
            if len(body) < 4 or not self.interfaces:
                self.counters["packets"] += 1
                self.counters["malformed"] += 1
                return True
            origlen = struct.unpack_from(order + "I", body, 0)[0]
            caplen = min(origlen, len(body) - 4)
            self._packet(self.interfaces[0][0], body[4: 4 + caplen], origlen, 0)
        elif block_type != PCAPNG_SHB:
            self.counters["skipped_blocks"] += 1
        return True

    # ------------------------------------------------------------------ packet layers
    def _packet(self, linktype: int, pkt, origlen: int, ts: int) -> None:
        counters = self.counters
        counters["packets"] += 1
        n = len(pkt)
        # Link layer -> (ethertype-ish family, offset of the IP header)
        if linktype == LINK_ETHERNET:
            if n < 14:
                counters["malformed"] += 1
                return
            ethertype = _BE16.unpack_from(pkt, 12)[0]
            off = 14
            while ethertype in (0x8100, 0x88A8, 0x9100):  # 802.1Q / QinQ tags
                if n - off < 4:
                    counters["malformed"] += 1
                    return
                ethertype = _BE16.unpack_from(pkt, off + 2)[0]
                off += 4
        elif linktype == LINK_SLL:
            if n < 16:
                counters["malformed"] += 1
                return
            ethertype = _BE16.unpack_from(pkt, 14)[0]
            off = 16
        elif linktype == LINK_SLL2:
            if n < 20:
                counters["malformed"] += 1
                return
            ethertype = _BE16.unpack_from(pkt, 0)[0]
            off = 20
        elif linktype == LINK_NULL or linktype == LINK_LOOP:
            if n < 4:
                counters["malformed"] += 1
                return
            family = struct.unpack_from("<I" if linktype == LINK_NULL else ">I", pkt, 0)[0]
            if linktype == LINK_NULL and family > 0xFFFF:  # written by a big-endian host
                family = _BE32.unpack_from(pkt, 0)[0]
            ethertype = 0x0800 if family == 2 else 0x86DD if family in (10, 24, 28, 30) else 0
            off = 4
        elif linktype in RAW_LINKS:
            ethertype = 0x0800 if n and pkt[0] >> 4 == 4 else 0x86DD if n and pkt[0] >> 4 == 6 else 0
            off = 0
        elif linktype == LINK_IPV4:
            ethertype, off = 0x0800, 0
        elif linktype == LINK_IPV6:
            ethertype, off = 0x86DD, 0
        else:
            counters["unsupported_link"] += 1
            return
        # Network layer -> addresses, offset and end of the TCP segment
        if ethertype == 0x0800:
            if n - off < 20 or pkt[off] >> 4 != 4:
                counters["malformed"] += 1
                return
            ihl = (pkt[off] & 0x0F) * 4
            total = _BE16.unpack_from(pkt, off + 2)[0]
            if total == 0:  # segmentation offload: the length was never filled in
                total = max(origlen, n) - off
            if ihl < 20 or total < ihl or n - off < ihl:
                counters["malformed"] += 1
                return
            if _BE16.unpack_from(pkt, off + 6)[0] & 0x3FFF:  # more-fragments flag or an offset
                counters["ip_fragments"] += 1
                return
            if pkt[off + 9] != 6:
                counters["non_tcp"] += 1
                return
            src = bytes(pkt[off + 12: off + 16])
            dst = bytes(pkt[off + 16: off + 20])
            ip_end = off + total  # beyond the captured bytes when the snap length cut the packet
            tcp = off + ihl
        elif ethertype == 0x86DD:
            if n - off < 40 or pkt[off] >> 4 != 6:
                counters["malformed"] += 1
                return
            payload_len = _BE16.unpack_from(pkt, off + 4)[0]
            next_header = pkt[off + 6]
            src = bytes(pkt[off + 8: off + 24])
            dst = bytes(pkt[off + 24: off + 40])
            tcp = off + 40
            ip_end = tcp + payload_len if payload_len else max(origlen, n)  # 0: jumbogram
            while next_header != 6:
                if next_header in (0, 43, 60, 51):  # hop-by-hop, routing, destination options, AH
                    if n - tcp < 2:
                        counters["malformed"] += 1
                        return
                    ext_len = (pkt[tcp + 1] + 2) * 4 if next_header == 51 else (pkt[tcp + 1] + 1) * 8
                    next_header = pkt[tcp]
                    tcp += ext_len
                elif next_header == 44:  # fragment header: only an atomic fragment carries a whole segment
                    if n - tcp < 8:
                        counters["malformed"] += 1
                        return
                    if _BE16.unpack_from(pkt, tcp + 2)[0] & 0xFFF9:
                        counters["ip_fragments"] += 1
                        return
                    next_header = pkt[tcp]
                    tcp += 8
                else:
                    counters["non_tcp"] += 1
                    return
        else:
            counters["unsupported_link"] += 1
            return
        # Transport layer
        if n - tcp < 20 or tcp > ip_end:
            counters["malformed"] += 1
            return
        doff = (pkt[tcp + 12] >> 4) * 4
        if doff < 20 or n - tcp < doff or tcp + doff > ip_end:
            counters["malformed"] += 1
            return
        sport, dport = struct.unpack_from(">HH", pkt, tcp)
        seq = _BE32.unpack_from(pkt, tcp + 4)[0]
        flags = pkt[tcp + 13]
        data_start = tcp + doff
        wire_len = ip_end - data_start  # payload length on the wire
        captured = pkt[data_start: min(n, ip_end)]
        counters["tcp_packets"] += 1
        counters["tcp_payload_bytes"] += len(captured)
        self._segment(src, sport, dst, dport, seq, flags, captured, wire_len, ts)

    # ------------------------------------------------------------------ connections
    def _segment(self, src, sport, dst, dport, seq, flags, payload, wire_len, ts) -> None:
        a, b = (src, sport), (dst, dport)
        key = (a, b) if a <= b else (b, a)
        conn = self.connections.get(key)
        side = 0
        if conn is not None:
            side = 0 if conn.endpoints[0] == a else 1
            half = conn.halves[side]
            if flags & _TCP_SYN and half.started and half.isn != seq:
                # A new connection on the same addresses and ports: the old one is over.
                self._close(conn, 4)
                conn = None
        if conn is None:
            if not payload and not wire_len and not flags & _TCP_SYN:
                self.counters["tcp_without_connection"] += 1
                return
            conn = _Connection(self.next_conn_id, key, (a, b), ts)
            self.next_conn_id += 1
            self.counters["connections"] += 1
            self.connections[key] = conn
            a_broker, b_broker = sport in self.broker_ports, dport in self.broker_ports
            if a_broker != b_broker:
                conn.client_side = 1 if a_broker else 0
                conn.direction_source = 0
            side = 0
            if len(self.connections) > self.max_connections:
                self._evict(conn)
        conn.last_ts = ts
        half = conn.halves[side]
        if flags & _TCP_SYN:
            if not half.started:
                half.started = True
                half.isn = seq
                half.next_seq = (seq + 1) & 0xFFFFFFFF
                half.synced = True
                conn.handshake_seen = True
                if not flags & _TCP_ACK and conn.client_side < 0:
                    conn.client_side = side
                    conn.direction_source = 1
            seq = (seq + 1) & 0xFFFFFFFF
        if payload or wire_len:
            self._data(conn, half, seq, payload, wire_len, ts)
        if flags & _TCP_FIN:
            if not half.started:
                half.started = True
                half.next_seq = seq
            end = self._position(half, (seq + wire_len) & 0xFFFFFFFF)
            if half.fin_pos < 0:
                half.fin_pos = end
        if flags & _TCP_RST:
            self._close(conn, 2)
            return
        h0, h1 = conn.halves
        if h0.fin_pos >= 0 and h1.fin_pos >= 0 and not h0.pending and not h1.pending:
            self._close(conn, 1)

    @staticmethod
    def _position(half: _Half, seq: int) -> int:
        delta = ((seq - half.next_seq + 0x80000000) & 0xFFFFFFFF) - 0x80000000
        return half.next_pos + delta

    def _data(self, conn: _Connection, half: _Half, seq: int, payload, wire_len: int, ts: int) -> None:
        c = half.counters
        c["packets"] += 1
        c["payload_bytes"] += len(payload)
        if not half.started:  # the capture began mid-stream: this byte is offset 0
            half.started = True
            half.next_seq = seq
            half.scan_from = 0
        if len(payload) < wire_len:
            c["truncated_packets"] += 1
        start = self._position(half, seq)
        end = start + len(payload)
        duplicate = False
        conflict = False
        if start < half.next_pos:  # some or all of it arrived before
            overlap_end = min(end, half.next_pos)
            c["duplicate_bytes"] += overlap_end - start
            duplicate = True
            held_from = max(start, half.buf_pos)
            if held_from < overlap_end:
                old = half.buf[held_from - half.buf_pos: overlap_end - half.buf_pos]
                if old != payload[held_from - start: overlap_end - start]:
                    conflict = True
            payload = payload[max(0, half.next_pos - start):]
            start = max(start, half.next_pos)
        if start < end:
            if not half.pending and start == half.next_pos:
                self._append(half, payload, ts)
            else:
                dup, conf = self._hold(half, start, payload, ts)
                duplicate = duplicate or dup
                conflict = conflict or conf
                self._drain(half)
        if duplicate:
            c["retransmitted_segments"] += 1
        if conflict:
            c["conflicting_segments"] += 1
        if half.pending_bytes > self.max_pending_bytes:
            self._gap(half)
            self._drain(half)
        self._cut(conn, half, False)

    def _append(self, half: _Half, data, ts: int) -> None:
        half.buf += data
        half.next_pos += len(data)
        half.next_seq = (half.next_seq + len(data)) & 0xFFFFFFFF
        half.counters["stream_bytes"] += len(data)
        half.chunks.append((half.next_pos, ts))

    def _hold(self, half: _Half, start: int, data, ts: int):
        """Keep the parts of an out-of-order segment not already held (first copy wins)."""
        duplicate = conflict = False
        end = start + len(data)
        pieces = []
        cursor = start
        for held_start, held, _ in half.pending:
            held_end = held_start + len(held)
            if held_end <= cursor:
                continue
            if held_start >= end:
                break
            if held_start > cursor:
                pieces.append((cursor, data[cursor - start: held_start - start]))
            lo, hi = max(cursor, held_start), min(end, held_end)
            half.counters["duplicate_bytes"] += hi - lo
            duplicate = True
            if held[lo - held_start: hi - held_start] != data[lo - start: hi - start]:
                conflict = True
            cursor = hi
        if cursor < end:
            pieces.append((cursor, data[cursor - start:]))
        for piece_start, piece in pieces:
            entry = [piece_start, bytes(piece), ts]
            index = 0
            while index < len(half.pending) and half.pending[index][0] < piece_start:
                index += 1
            half.pending.insert(index, entry)
            half.pending_bytes += len(piece)
        return duplicate, conflict

    def _drain(self, half: _Half) -> None:
        while half.pending and half.pending[0][0] == half.next_pos:
            _, data, ts = half.pending.pop(0)
            half.pending_bytes -= len(data)
            self._append(half, data, ts)

    def _gap(self, half: _Half) -> None:
        """Give up on the hole before the first held segment."""
        hole_end = half.pending[0][0]
        c = half.counters
        c["gaps"] += 1
        c["gap_bytes"] += hole_end - half.next_pos
        resume = -1
        if half.synced and len(half.buf) >= 4:
            size = _BE32S.unpack_from(half.buf, 0)[0]
            if 0 <= size <= self.max_frame_size:
                resume = half.buf_pos + 4 + size  # the cut frame's end is a known boundary
        c["skipped_bytes"] += len(half.buf)
        self._drop_buf(half, len(half.buf))
        half.synced = False
        c["resyncs"] += 1
        half.scan_from = max(resume, hole_end)
        half.next_seq = (half.next_seq + hole_end - half.next_pos) & 0xFFFFFFFF
        half.next_pos = hole_end
        half.buf_pos = hole_end

    def _drop_buf(self, half: _Half, count: int) -> None:
        del half.buf[:count]
        half.buf_pos += count
        while half.chunks and half.chunks[0][0] <= half.buf_pos:
            half.chunks.popleft()

    # ------------------------------------------------------------------ frames
    def _request_ok(self, data, p: int, size: int) -> bool:
        """Does the frame payload at ``data[p:]`` (``size`` bytes long) start with a request header?"""
        # The wire layer reads the fixed part; the client id's bytes may not have arrived
        # yet, so only its length is checked.
        h = wire.WireHeader()
        try:
            wire.request_fixed(data, h, p, p + min(len(data) - p, size))
        except wire.WireError:
            return False
        if not 0 <= h.api_key < len(self.request_versions) or not 0 <= h.api_version <= self.request_versions[h.api_key]:
            return False
        if h.correlation_id < 0:
            return False
        if h.version == 0:  # no client id field
            return True
        if size < 10 or len(data) - p < 10:
            return False
        client_id = _BE16.unpack_from(data, p + 8)[0]
        if client_id >= 0x8000:
            return client_id == 0xFFFF  # null
        return client_id <= size - 10

    def _header_ok(self, conn: _Connection, half: _Half, data, i: int) -> int:
        """1 when a plausible frame header starts at i, 0 when not, -1 when more bytes are needed."""
        avail = len(data) - i
        if avail < 8:
            return -1
        size = _BE32S.unpack_from(data, i)[0]
        if size < 4 or size > self.max_frame_size:
            return 0
        if avail < min(14, 4 + size):
            return -1
        role = -1 if conn.client_side < 0 else (DIRECTION_REQUEST if conn.client_side == half.side
                                                 else DIRECTION_RESPONSE)
        if role != DIRECTION_RESPONSE and self._request_ok(data, i + 4, size):
            return 1
        if role != DIRECTION_REQUEST and _BE32S.unpack_from(data, i + 4)[0] >= 0:
            return 1
        return 0

    def _scan(self, conn: _Connection, half: _Half, final: bool) -> bool:
        """Drop bytes until buf starts at a plausible frame boundary; False if more bytes are needed.

        A candidate is confirmed by a correlation id the other direction sent as a
        request, or by the next frame's header, or (at the end) by ending exactly
        where the data does.
        """
        buf = half.buf
        i = min(max(0, half.scan_from - half.buf_pos), len(buf))
        found = False
        other = conn.halves[1 - half.side]
        while i < len(buf):
            ok = self._header_ok(conn, half, buf, i)
            if ok < 0:
                if final:
                    i = len(buf)
                break
            if ok:
                after = i + 4 + _BE32S.unpack_from(buf, i)[0]
                confirmed = _BE32S.unpack_from(buf, i + 4)[0] in other.request_corrs
                if not confirmed:
                    next_ok = self._header_ok(conn, half, buf, after) if after <= len(buf) else -1
                    if next_ok < 0:
                        if not final:
                            break  # wait for the bytes that decide
                        confirmed = after <= len(buf)
                    else:
                        confirmed = next_ok == 1
                if confirmed:
                    found = True
                    break
            i += 1
        half.scan_from = max(half.scan_from, half.buf_pos + i)
        if i:
            half.counters["skipped_bytes"] += i
            self._drop_buf(half, i)
        if found:
            half.synced = True
        return found

    def _cut(self, conn: _Connection, half: _Half, final: bool) -> None:
        """Cut complete frames off the front of buf."""
        while True:
            if not half.synced and not self._scan(conn, half, final):
                return
            buf = half.buf
            if len(buf) < 4:
                return
            size = _BE32S.unpack_from(buf, 0)[0]
            if size < 4 or size > self.max_frame_size:
                half.synced = False
                half.counters["resyncs"] += 1
                half.scan_from = half.buf_pos + 1
                continue
            if len(buf) < 4 + size:
                return
            first_ts = last_ts = None
            frame_end = half.buf_pos + 4 + size
            for chunk_end, ts in half.chunks:
                if first_ts is None and chunk_end > half.buf_pos:
                    first_ts = ts
                if chunk_end >= frame_end:
                    last_ts = ts
                    break
            payload = bytes(buf[4: 4 + size])
            self._drop_buf(half, 4 + size)
            c = half.counters
            c["frames"] += 1
            c["frame_bytes"] += 4 + size
            frame = (half.sequence, first_ts, last_ts, size, payload)
            half.sequence += 1
            if self._request_ok(payload, 0, size):
                half.request_corrs.append(_BE32S.unpack_from(payload, 4)[0])
                if len(half.request_corrs) > _MAX_CORRS:
                    half.request_corrs.popleft()
                conn.request_like[half.side] += 1
            if conn.client_side < 0:
                self._infer(conn, half, frame)
            else:
                self._emit(conn, half.side, frame)

    def _infer(self, conn: _Connection, half: _Half, frame) -> None:
        conn.undecided.append((half.side, frame))
        other = conn.halves[1 - half.side]
        if len(frame[4]) >= 4 and _BE32S.unpack_from(frame[4], 0)[0] in other.request_corrs:
            self._decide(conn, 1 - half.side, 2)
        elif len(conn.undecided) >= _MAX_UNDECIDED_FRAMES:
            self._guess(conn)

    def _guess(self, conn: _Connection) -> None:
        like = conn.request_like
        if like[0] != like[1]:
            side = 0 if like[0] > like[1] else 1
        else:  # clients use the ephemeral (higher) port
            side = 0 if conn.endpoints[0][1] >= conn.endpoints[1][1] else 1
        self._decide(conn, side, 3)

    def _decide(self, conn: _Connection, client_side: int, source: int) -> None:
        conn.client_side = client_side
        conn.direction_source = source
        for side, frame in conn.undecided:
            self._emit(conn, side, frame)
        conn.undecided = []

    def _emit(self, conn: _Connection, side: int, frame) -> None:
        sequence, first_ts, last_ts, size, payload = frame
        out = self.out
        out["connection_id"].append(conn.id)
        out["direction"].append(DIRECTION_REQUEST if side == conn.client_side else DIRECTION_RESPONSE)
        out["sequence"].append(sequence)
        out["ts_first_ns"].append(first_ts)
        out["ts_last_ns"].append(last_ts)
        out["size"].append(size)
        out["payload"].append(payload)
        self.out_bytes += len(payload)

    # ------------------------------------------------------------------ endings
    def _close(self, conn: _Connection, reason: int) -> None:
        for half in conn.halves:
            while half.pending:
                self._gap(half)
                self._drain(half)
                self._cut(conn, half, False)
            self._cut(conn, half, True)
            half.counters["tail_bytes"] += len(half.buf)
            self._drop_buf(half, len(half.buf))
        if conn.client_side < 0:
            self._guess(conn)
        del self.connections[conn.key]
        client = conn.endpoints[conn.client_side]
        server = conn.endpoints[1 - conn.client_side]
        row = {
            "connection_id": conn.id,
            "client_ip": _format_ip(client[0]), "client_port": client[1],
            "server_ip": _format_ip(server[0]), "server_port": server[1],
            "first_ts_ns": conn.first_ts, "last_ts_ns": conn.last_ts,
            "handshake_seen": conn.handshake_seen,
            "closed_by": CLOSED_BY[reason],
            "direction_source": DIRECTION_SOURCE[conn.direction_source],
        }
        for prefix, half in (("request_", conn.halves[conn.client_side]),
                             ("response_", conn.halves[1 - conn.client_side])):
            for name in HALF_COUNTERS:
                row[prefix + name] = half.counters[name]
        self._closed.append(row)

    def _evict(self, keep: _Connection) -> None:
        victims = sorted((c for c in self.connections.values() if c is not keep), key=lambda c: (c.last_ts, c.id))
        for conn in victims[: max(1, len(victims) // 8)]:
            self.counters["evicted_connections"] += 1
            self._close(conn, 3)

    def finish(self, remaining: int = 0) -> None:
        """The input ended (``remaining`` unconsumed bytes were an incomplete record):
        flush every connection, in the order they were opened."""
        if self.finished:
            return
        self.finished = True
        self.counters["trailing_bytes"] += remaining
        for conn in sorted(self.connections.values(), key=lambda c: c.id):
            self._close(conn, 0)


def _format_ip(raw: bytes) -> str:
    import ipaddress
    return str(ipaddress.ip_address(raw))


def scan_frames(data, max_frame_size: int = 100 * 1024 * 1024, max_frames: int = 1 << 62):
    """Split concatenated size-prefixed frames.

    Returns (starts, sizes, consumed, error, payloads): numpy int64 offsets of
    each payload and int32 sizes, the bytes consumed (whole frames only), None or
    the text of why reading stopped at a size prefix (negative, or above
    ``max_frame_size``), and the payloads concatenated.
    """
    view = memoryview(data).cast("B")
    starts: list[int] = []
    sizes: list[int] = []
    payloads: list[memoryview] = []
    pos, end = 0, len(view)
    error: str | None = None
    while end - pos >= 4 and len(sizes) < max_frames:
        size = _BE32S.unpack_from(view, pos)[0]
        if size < 0 or size > max_frame_size:
            error = f"invalid frame size {size} (maximum {max_frame_size})"
            break
        if end - pos - 4 < size:
            break
        starts.append(pos + 4)
        sizes.append(size)
        payloads.append(view[pos + 4: pos + 4 + size])
        pos += 4 + size
    return (np.array(starts, dtype=np.int64), np.array(sizes, dtype=np.int32), pos, error,
            b"".join(payloads))

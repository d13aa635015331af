"""TCP segments into per-direction byte streams (part of the capture engine,
kproto/_py/capture.py; compiled: kproto/_c/_capture_reassembly.pxi).

Connections are found by their endpoints; sequence numbers become stream offsets;
out-of-order segments wait until the hole fills; retransmissions are counted; a hole
is given up on as a gap; a connection that ends becomes a row. Each direction's new
bytes go to the framer stage.
"""

from __future__ import annotations

import ipaddress

from kproto._common.capture import CAPTURE_COUNTERS, CLOSED_BY, DIRECTION_SOURCE, HALF_COUNTERS, KIND_KAFKA, KINDS
from kproto._common.capture_engine import early_row
from kproto._py.capture_connections import _Connection, _Half, _hole_answers, _unproved_end
from kproto._py.capture_framer import _BE32S, Framer
from kproto._py.capture_kinds import _kind_end

_TCP_FIN = 0x01
_TCP_SYN = 0x02
_TCP_RST = 0x04
_TCP_ACK = 0x10


class Reassembly:
    """Segments into streams, connection endings: the engine's second stage
    (kproto/_common/capture_engine.py)."""

    def __init__(self, settings, framer: Framer) -> None:
        self.framer = framer  # where each direction's new bytes go
        self.broker_ports = settings.broker_ports
        self.kafka_ports = settings.kafka_ports
        self.max_pending_bytes = settings.max_pending_bytes
        self.max_connections = settings.max_connections
        self.counters = dict.fromkeys(CAPTURE_COUNTERS, 0)  # the capture's (the reader counts into them too)
        self.connections: dict = {}
        self.ended: dict = {}  # keys of connections closed by their FINs or a RST (_segment)
        self.next_conn_id = 0
        self.finished = False
        self._closed: list = []
        self.early: dict = {}  # connection id -> counts since the last mark about bytes before it (early_counts)
        self.snaplen = 0  # the snap length of the record being read (its interface's; the reader sets it)
        self.cut_snaplens: set = set()  # the snap lengths of the records that cut a TCP segment

    def capture_counters(self) -> dict:
        return dict(self.counters)

    def snap_lengths(self) -> list:
        """The snap lengths (from the pcap header, or the pcapng interfaces) of the
        records whose TCP payload they cut, sorted: what "bodies not captured" was cut at."""
        return sorted(self.cut_snaplens)

    def take_connections(self) -> list:
        """Rows (dicts keyed by CONNECTION_COLUMNS) of connections closed since the last call."""
        rows, self._closed = self._closed, []
        return rows

    def take_endpoints(self) -> list:
        """Who talks on the connections whose first frame was emitted since the last call:
        dicts of ``connection_id``, ``client_ip``, ``client_port``, ``server_ip``,
        ``server_port`` (as in their connection rows, which come only at their close)."""
        opened, self.framer.opened = self.framer.opened, []
        return [_endpoints(conn, conn.client_side) for conn in opened]

    def open_connections(self) -> int:
        return len(self.connections)

    # ------------------------------------------------------------------ connections
    def _segment(self, src, sport, dst, dport, seq, ack, flags, payload, wire_len, ts) -> None:
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
            # A payload-less segment opens no connection, but a FIN or RST does (a capture or a
            # range that began after its last byte sees how it ended), unless its connection
            # ended already (a last ACK, a RST after the FINs, a FIN sent again).
            if (
                not payload
                and not wire_len
                and not flags & _TCP_SYN
                and (not flags & (_TCP_FIN | _TCP_RST) or key in self.ended)
            ):
                self.counters["tcp_without_connection"] += 1
                return
            self.ended.pop(key, None)
            conn = _Connection(self.next_conn_id, key, (a, b), ts)
            self.next_conn_id += 1
            self.counters["connections"] += 1
            self.connections[key] = conn
            a_broker, b_broker = sport in self.broker_ports, dport in self.broker_ports
            if a_broker != b_broker:
                conn.client_side = 1 if a_broker else 0
                conn.direction_source = 0
            if sport in self.kafka_ports or dport in self.kafka_ports:
                conn.kind = KIND_KAFKA  # forced: no confirmation needed
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
                if conn.client_side < 0:  # a SYN comes from the client, a SYN-ACK from the server
                    conn.client_side = 1 - side if flags & _TCP_ACK else side
                    conn.direction_source = 1
            other = conn.halves[1 - side]
            if flags & _TCP_ACK and not other.started:
                # a SYN-ACK acknowledges the client's SYN: the client's stream starts at its ack
                other.started = True
                other.isn = (ack - 1) & 0xFFFFFFFF
                other.next_seq = ack
                other.synced = True
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
            self.cut_snaplens.add(self.snaplen)
        start = self._position(half, seq)
        end = start + len(payload)
        lost_end = start + wire_len
        duplicate = False
        conflict = False
        if start < half.next_pos:  # some or all of it arrived before
            overlap_end = min(end, half.next_pos)
            c["duplicate_bytes"] += overlap_end - start
            duplicate = True
            held_from = max(start, half.buf_pos)
            if held_from < overlap_end:
                old = half.buf[held_from - half.buf_pos : overlap_end - half.buf_pos]
                if old != payload[held_from - start : overlap_end - start]:
                    conflict = True
            payload = payload[max(0, half.next_pos - start) :]
            start = max(start, half.next_pos)
        if start < end:
            if not half.pending and start == half.next_pos:
                half.append(payload, ts)
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
            self._gap(conn, half, half.pending[0][0])
            self._drain(half)
        self.framer._cut(conn, half, False)
        if end < lost_end and half.next_pos == end and not half.pending:
            # The snap length cut the packet: the rest of it is lost for certain, now.
            self._gap(conn, half, lost_end, True)
            self.framer._cut(conn, half, False)

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
                pieces.append((cursor, data[cursor - start : held_start - start]))
            lo, hi = max(cursor, held_start), min(end, held_end)
            half.counters["duplicate_bytes"] += hi - lo
            duplicate = True
            if held[lo - held_start : hi - held_start] != data[lo - start : hi - start]:
                conflict = True
            cursor = hi
        if cursor < end:
            pieces.append((cursor, data[cursor - start :]))
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
            half.append(data, ts)

    def _gap(self, conn: _Connection, half: _Half, hole_end: int, snapped: bool = False) -> None:
        """Give up on the bytes up to ``hole_end``: a hole before held segments (a gap),
        or the part of a packet the snap length cut off (``snapped``).

        A frame the hole cuts whose start was confirmed is emitted with the bytes that
        were captured (its header columns can be read; its payload is shorter than its
        size), and its end is a known boundary, kept across further gaps until reading
        reaches it, so the frames after it are read without a search. Candidates still
        waiting are decided first as at the end of the data: the hole is where the
        bytes that would decide them stop.
        """
        c = half.counters
        held, frames = half.cut_frame, c["frames"]  # a frame an earlier hole cut: kept if it ends after this one
        cut_frame = (
            held if held is not None and held[0] >= hole_end else self.framer._cut_candidate(conn, half, hole_end)
        )
        self.framer._cut(conn, half, not snapped)  # a snap length's cut is no frame's end: it proves nothing
        if not snapped:
            _hole_answers(conn, half)
        if half.synced or c["frames"] != frames:
            cut_frame = None  # the search found a boundary before the hole after all
        if snapped:
            c["snapped_bytes"] += hole_end - half.next_pos
        else:
            c["gaps"] += 1
            c["gap_bytes"] += hole_end - half.next_pos
        if half.synced and len(half.buf) >= 4:
            size = _BE32S.unpack_from(half.buf, 0)[0]
            if 4 <= size <= self.framer.max_frame_size:
                half.boundary = half.buf_pos + 4 + size
                if len(half.buf) > 4 and not half.sasl:  # a raw SASL token is no frame: skipped
                    self.framer._frame(conn, half, size, len(half.buf) - 4)
        half.count_skipped(len(half.buf), half.buf_pos)
        half.drop(len(half.buf))
        if half.boundary < hole_end:
            half.boundary = -1  # the next frame's start was lost too: search for it
        # the frame a hole cut where no boundary was known yet waits for the header after it
        half.cut_frame = cut_frame
        half.synced = False
        half.candidates = []
        c["resyncs"] += 1
        half.scan_from = hole_end
        half.next_seq = (half.next_seq + hole_end - half.next_pos) & 0xFFFFFFFF
        half.next_pos = hole_end
        half.buf_pos = hole_end

    # ------------------------------------------------------------------ endings
    def _close(self, conn: _Connection, reason: int) -> None:
        # Every hole of both directions first: what one direction's frames are (a raw SASL
        # token, a response) can wait on the other's bytes after its hole. The requests' side
        # first, each time: a response chain is proved by the request it answers.
        requests_first = conn.halves[::-1] if conn.client_side == 1 else conn.halves
        for half in requests_first:
            while half.pending:
                self._gap(conn, half, half.pending[0][0])
                self._drain(half)
                self.framer._cut(conn, half, False)
        # then their ends
        for half in requests_first:
            if half.next_pos < half.fin_pos:  # its FIN says where it ended: the bytes before it were lost
                self._gap(conn, half, half.fin_pos)
            if half.cut_frame is not None and half.cut_frame[0] > half.next_pos:
                half.cut_frame = None  # a frame a hole cut whose end never came: it stays skipped
            self.framer._cut(conn, half, True)
            half.counters["tail_bytes"] += len(half.buf)
            half.drop(len(half.buf))
        _kind_end(conn)
        if conn.client_side < 0:
            self.framer._guess(conn)
        self.framer._release(conn)
        _unproved_end(self.framer, conn)
        del self.connections[conn.key]
        if reason in (1, 2):  # its FINs or a RST: what comes after opens nothing (bounded)
            self.ended[conn.key] = None
            if len(self.ended) > self.max_connections:
                del self.ended[next(iter(self.ended))]
        self._closed.append(_connection_row(conn, CLOSED_BY[reason]))
        early = _early_row(conn)
        if early:
            self.early[conn.id] = early

    def mark_open_connections(self) -> None:
        """A mark (a range's start): what is counted from now on about bytes read before now is
        counted early too (``early_counts``), so that a range can leave it to the range before."""
        self.early = {}
        for conn in self.connections.values():
            for half in conn.halves:
                half.mark_pos = half.next_pos
                half.early = [0, 0, 0]

    def early_counts(self) -> dict:
        """connection id -> the counters (as ``request_``/``response_`` columns of its row) counted
        since the last mark about bytes before it, as they are now; the connections that have any."""
        counts = dict(self.early)
        for conn in self.connections.values():
            early = _early_row(conn)
            if early:
                counts[conn.id] = early
        return counts

    def open_connection_rows(self) -> list:
        """Rows of the connections still open, their counters as they are now (closed_by None; a
        direction or kind not known yet: side 0 as the client, kind None). Nothing is changed."""
        return [_connection_row(conn, None) for conn in sorted(self.connections.values(), key=lambda c: c.id)]

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


def _endpoints(conn: _Connection, client_side: int) -> dict:
    """The connection's client (``client_side``) and server, as its row names them."""
    client = conn.endpoints[client_side]
    server = conn.endpoints[1 - client_side]
    return {
        "connection_id": conn.id,
        "client_ip": _format_ip(client[0]),
        "client_port": client[1],
        "server_ip": _format_ip(server[0]),
        "server_port": server[1],
    }


def _connection_row(conn: _Connection, closed_by: str | None) -> dict:
    """A connection's row (CONNECTION_COLUMNS): when it closes, and for open_connection_rows."""
    client_side = conn.client_side if conn.client_side >= 0 else 0
    row = _endpoints(conn, client_side)
    row.update(
        {
            "first_ts_ns": conn.first_ts,
            "last_ts_ns": conn.last_ts,
            "handshake_seen": conn.handshake_seen,
            "closed_by": closed_by,
            "direction_source": DIRECTION_SOURCE[conn.direction_source] if conn.direction_source >= 0 else None,
            "kind": KINDS[conn.kind] if conn.kind >= 0 else None,
        }
    )
    for prefix, half in (("request_", conn.halves[client_side]), ("response_", conn.halves[1 - client_side])):
        for name in HALF_COUNTERS:
            row[prefix + name] = half.counters[name]
    return row


def _early_row(conn: _Connection) -> dict:
    """A closed connection's early counts (EARLY_COUNTERS), by its row's sides; empty when none."""
    client_side = conn.client_side if conn.client_side >= 0 else 0
    return early_row(conn.halves[client_side].early, conn.halves[1 - client_side].early)


def _format_ip(raw: bytes) -> str:
    return str(ipaddress.ip_address(raw))

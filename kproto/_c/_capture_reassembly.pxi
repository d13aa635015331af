# Included by _capture.pyx: TCP segments into per-direction byte streams (twin:
# kproto/_py/capture_reassembly.py): connections found by their endpoints, sequence
# numbers to stream offsets, out-of-order segments held until the hole fills,
# retransmissions counted, holes given up on as gaps, and the connection rows written
# when a connection ends. Each direction's new bytes go to the framer stage.


@cython.final
cdef class Reassembly:
    """Segments into streams, connection endings: the engine's second stage
    (kproto/_common/capture_engine.py)."""
    cdef Framer framer               # where each direction's new bytes go
    cdef frozenset broker_ports
    cdef uint8_t port_is_broker[65536]
    cdef frozenset kafka_ports
    cdef uint8_t port_is_kafka[65536]
    cdef readonly int64_t max_pending_bytes
    cdef readonly Py_ssize_t max_connections
    cdef int64_t cnt[C_COUNT]
    cdef dict connections
    cdef dict ended                  # keys of connections closed by their FINs or a RST (see the twin)
    cdef _Connection last
    cdef int64_t next_conn_id
    cdef bint finished
    cdef list closed_rows
    cdef dict early                  # connection id -> counts since the last mark about bytes before it
    cdef uint32_t snaplen            # the snap length of the record being read (its interface's)
    cdef set cut_snaplens            # the snap lengths of the records that cut a TCP segment

    def __cinit__(self):
        self.connections = {}
        self.ended = {}
        self.closed_rows = []
        self.early = {}
        self.cut_snaplens = set()

    def __init__(self, settings, Framer framer):
        self.framer = framer
        self.kafka_ports = settings.kafka_ports
        self.broker_ports = settings.broker_ports
        for p in self.broker_ports:
            if 0 <= p <= 0xFFFF:
                self.port_is_broker[p] = 1
        for p in self.kafka_ports:
            if 0 <= p <= 0xFFFF:
                self.port_is_kafka[p] = 1
        self.max_pending_bytes = settings.max_pending_bytes
        self.max_connections = settings.max_connections

    def capture_counters(self):
        return {name: self.cnt[i] for i, name in enumerate(CAPTURE_COUNTERS)}

    def take_connections(self):
        rows, self.closed_rows = self.closed_rows, []
        return rows

    def take_endpoints(self):
        """Who talks on the connections whose first frame was emitted since the last call (see the twin)."""
        cdef _Connection conn
        opened, self.framer.opened = self.framer.opened, []
        return [_endpoints(conn, conn.client_side) for conn in opened]

    def snap_lengths(self):
        """The snap lengths of the records whose TCP payload they cut, sorted (see the twin)."""
        return sorted(self.cut_snaplens)

    def open_connections(self):
        return len(self.connections)

    # ------------------------------------------------------------------ connections
    cdef int _segment(self, const unsigned char *src, const unsigned char *dst, int addr_len, uint16_t sport,
                      uint16_t dport, uint32_t seq, uint32_t ack, int flags, const unsigned char *payload,
                      Py_ssize_t plen, int64_t wire_len, int64_t ts) except -1:
        cdef unsigned char a[19]
        cdef unsigned char b[19]
        cdef int side = 0
        cdef _Connection conn = None
        cdef _Half half, other
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
            cmp = memcmp(a, b, 19)
            key = PyBytes_FromStringAndSize(<char *>a, 19) + PyBytes_FromStringAndSize(<char *>b, 19) \
                if cmp <= 0 else PyBytes_FromStringAndSize(<char *>b, 19) + PyBytes_FromStringAndSize(<char *>a, 19)
            # a payload-less segment opens no connection, but a FIN or RST does, unless its
            # connection ended already (see the twin)
            if plen == 0 and wire_len == 0 and not (flags & TCP_SYN) \
                    and (not (flags & (TCP_FIN | TCP_RST)) or key in self.ended):
                self.cnt[C_TCP_WITHOUT_CONNECTION] += 1
                return 0
            self.ended.pop(key, None)
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
            if self.port_is_kafka[sport] or self.port_is_kafka[dport]:
                conn.kind = KIND_KAFKA_    # forced: no confirmation needed
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
                if conn.client_side < 0:    # a SYN comes from the client, a SYN-ACK from the server
                    conn.client_side = 1 - side if flags & TCP_ACK else side
                    conn.direction_source = 1
            other = conn.half(1 - side)
            if flags & TCP_ACK and not other.started:
                # a SYN-ACK acknowledges the client's SYN: the client's stream starts at its ack
                other.started = True
                other.isn = <uint32_t>(ack - 1)
                other.next_seq = ack
                other.synced = True
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
        cdef int64_t start, end, overlap_end, held_from, cut, lost_end
        cdef bint duplicate = False, conflict = False
        half.c[H_PACKETS] += 1
        half.c[H_PAYLOAD_BYTES] += plen
        if not half.started:
            half.started = True
            half.next_seq = seq
            half.scan_from = 0
        if plen < wire_len:
            half.c[H_TRUNCATED_PACKETS] += 1
            self.cut_snaplens.add(self.snaplen)
        start = _position(half, seq)
        end = start + plen
        lost_end = start + wire_len
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
            self._gap(conn, half, half.pending[0][0])
            self._drain(half)
        self.framer._cut(conn, half, False)
        if end < lost_end and half.next_pos == end and not half.pending:
            # The snap length cut the packet: the rest of it is lost for certain, now.
            self._gap(conn, half, lost_end, True)
            self.framer._cut(conn, half, False)
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

    cdef int _gap(self, _Connection conn, _Half half, int64_t hole_end, bint snapped=False) except -1:
        # Give up on the bytes up to hole_end (a gap, or what the snap length cut off); a
        # frame the hole cuts whose start was confirmed is emitted with its captured bytes,
        # and its end is a known boundary kept across further gaps; candidates still waiting
        # are decided first as at the end of the data (see the twin).
        cdef int32_t size
        cdef int64_t frames = half.c[H_FRAMES]
        cdef Py_ssize_t cut_at = -1
        cdef list cut_frames = None
        cdef int64_t cut_end = -1
        if half.cut_end >= hole_end:    # a frame an earlier hole cut, ending after this one: kept
            cut_at, cut_end, cut_frames = 0, half.cut_end, half.cut_frames
        else:
            cut_at = self.framer._cut_candidate(conn, half, hole_end)
        if cut_frames is None and cut_at >= 0:
            size = <int32_t>kp_load_be32(half.data() + cut_at)
            cut_end = half.buf_pos + cut_at + 4 + size
            cut_frames = _chained_to(self.framer, conn, half, cut_at, RESPONSE_CHAIN_CONFIRMS) + [(
                size, PyBytes_FromStringAndSize(<const char *>half.data() + cut_at + 4, half.length - cut_at - 4),
                half.captured_at(half.buf_pos + cut_at), half.chunks[half.chunk_head + half.chunk_count - 1].ts,
                half.buf_pos + cut_at)]
        self.framer._cut(conn, half, not snapped)   # a snap length's cut is no frame's end: it proves nothing
        if not snapped:
            _hole_answers(conn, half)
        if half.synced or half.c[H_FRAMES] != frames:
            cut_at = -1     # the search found a boundary before the hole after all
        if snapped:
            half.c[H_SNAPPED_BYTES] += hole_end - half.next_pos
        else:
            half.c[H_GAPS] += 1
            half.c[H_GAP_BYTES] += hole_end - half.next_pos
        if half.synced and half.length >= 4:
            size = <int32_t>kp_load_be32(half.data())
            if 4 <= size <= self.framer.max_frame_size:
                half.boundary = half.buf_pos + 4 + size
                if half.length > 4 and not half.sasl:   # a raw SASL token is no frame: skipped
                    self.framer._frame(conn, half, size, half.length - 4)
        half.count_skipped(half.length, half.buf_pos)
        half.drop(half.length)
        if half.boundary < hole_end:
            half.boundary = -1
        # the frame a hole cut where no boundary was known yet waits for the header after it
        half.cut_end = cut_end if cut_at >= 0 else -1
        half.cut_frames = cut_frames if cut_at >= 0 else None
        half.synced = False
        half.n_candidates = 0
        half.c[H_RESYNCS] += 1
        half.scan_from = hole_end
        half.next_seq = <uint32_t>(half.next_seq + <uint32_t>(hole_end - half.next_pos))
        half.next_pos = hole_end
        half.buf_pos = hole_end
        # drop() kept chunk bookkeeping relative to the old position; nothing is live now.
        half.chunk_head = 0
        half.chunk_count = 0
        return 0

    # ------------------------------------------------------------------ endings
    cdef int _close(self, _Connection conn, int reason) except -1:
        cdef _Half half
        # every hole of both directions first, then their ends: the requests' side first, each
        # time (a response chain is proved by the request it answers; see the twin)
        requests_first = (conn.h1, conn.h0) if conn.client_side == 1 else (conn.h0, conn.h1)
        for half in requests_first:
            while half.pending:
                self._gap(conn, half, half.pending[0][0])
                self._drain(half)
                self.framer._cut(conn, half, False)
        for half in requests_first:
            if half.next_pos < half.fin_pos:     # its FIN says where it ended: the bytes before it were lost
                self._gap(conn, half, half.fin_pos)
            if half.cut_end > half.next_pos:    # a frame a hole cut whose end never came: it stays skipped
                half.cut_end = -1
                half.cut_frames = None
            self.framer._cut(conn, half, True)
            half.c[H_TAIL_BYTES] += half.length
            half.drop(half.length)
        _kind_end(conn)
        if conn.client_side < 0:
            self.framer._guess(conn)
        self.framer._release(conn)
        _unproved_end(self.framer, conn)
        del self.connections[conn.key]
        if reason == 1 or reason == 2:  # its FINs or a RST: what comes after opens nothing (bounded)
            self.ended[conn.key] = None
            if len(self.ended) > self.max_connections:
                del self.ended[next(iter(self.ended))]
        conn.closed = True
        if self.last is conn:
            self.last = None
        self.closed_rows.append(_connection_row(conn, CLOSED_BY[reason]))
        early = _early_row(conn)
        if early:
            self.early[conn.id] = early
        return 0

    def mark_open_connections(self):
        """A mark (a range's start): what is counted from now on about bytes read before now is
        counted early too (see the twin)."""
        cdef _Half half
        self.early = {}
        for conn in self.connections.values():
            for half in ((<_Connection>conn).h0, (<_Connection>conn).h1):
                half.mark_pos = half.next_pos
                half.early[0] = half.early[1] = half.early[2] = 0

    def early_counts(self):
        """connection id -> the counters counted since the last mark about bytes before it, as they
        are now (see the twin)."""
        counts = dict(self.early)
        for conn in self.connections.values():
            early = _early_row(<_Connection>conn)
            if early:
                counts[(<_Connection>conn).id] = early
        return counts

    def open_connection_rows(self):
        """Rows of the connections still open, their counters as they are now (closed_by None; a
        direction or kind not known yet: side 0 as the client, kind None). Nothing is changed."""
        return [_connection_row(conn, None) for conn in sorted(self.connections.values(),
                                                                key=lambda c: (<_Connection>c).id)]

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


cdef dict _endpoints(_Connection conn, int cs):
    # The connection's client (side cs) and server, as its row names them.
    return {"connection_id": conn.id,
            "client_ip": _format_ip(conn.ep[cs]), "client_port": conn.port[cs],
            "server_ip": _format_ip(conn.ep[1 - cs]), "server_port": conn.port[1 - cs]}


cdef dict _early_row(_Connection conn):
    # A closed connection's early counts (EARLY_COUNTERS), by its row's sides; empty when none.
    cdef int cs = conn.client_side if conn.client_side >= 0 else 0
    cdef _Half req = conn.half(cs), resp = conn.half(1 - cs)
    if not (req.early[0] or req.early[1] or req.early[2] or resp.early[0] or resp.early[1] or resp.early[2]):
        return {}
    return _engine.early_row(req.early, resp.early)


cdef dict _connection_row(_Connection conn, object closed_by):
    """A connection's row (CONNECTION_COLUMNS): when it closes, and for open_connection_rows."""
    cdef int cs = conn.client_side if conn.client_side >= 0 else 0
    cdef _Half half
    row = _endpoints(conn, cs)
    row.update({
        "first_ts_ns": conn.first_ts, "last_ts_ns": conn.last_ts,
        "handshake_seen": bool(conn.handshake_seen),
        "closed_by": closed_by,
        "direction_source": DIRECTION_SOURCE[conn.direction_source] if conn.direction_source >= 0 else None,
        "kind": KINDS[conn.kind] if conn.kind >= 0 else None,
    })
    for prefix, half in (("request_", conn.half(cs)), ("response_", conn.half(1 - cs))):
        for name, value in half.counters().items():
            row[prefix + name] = value
    return row

# Included by _capture.pyx: the state of one TCP connection and of each of its
# directions (twin: kproto/_py/capture_connections.py).


cdef struct Chunk:
    int64_t end      # stream offset one past the chunk
    int64_t ts


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
    cdef int64_t scan_from           # while not synced: offsets before it were examined
    cdef int64_t candidates[MAX_CANDIDATES]  # while not synced: plausible headers not yet decided
    cdef int n_candidates
    cdef int64_t boundary            # a frame boundary known ahead (the end of a frame a gap cut), or -1
    # while not synced: a strong candidate a hole cut exactly at its end, waiting for the header
    # after the hole to prove it (Framer._cut_frame_proved; cut_end -1: none), and the frames it
    # proves: those chained to it, then itself, each (size, payload, first ts, last ts, stream offset)
    cdef int64_t cut_end
    cdef list cut_frames
    # marks: the stream offset of the last mark, and the frames, frame bytes and skipped bytes
    # counted since then about bytes before it (see the twin)
    cdef int64_t mark_pos
    cdef int64_t early[3]
    cdef int64_t fin_pos
    cdef int64_t sequence
    cdef int32_t corrs[MAX_CORRS]    # ring of correlation ids of request-like frames
    cdef int64_t corr_ends[MAX_CORRS]  # and when each one's last byte was captured (ts)
    cdef int corr_count, corr_next
    cdef int corr_live               # slots older than this (by age) are blank: answered
    cdef int64_t whole_requests      # how many request-like frames were read from the SYN with no byte lost before
    cdef int64_t c[H_COUNT]
    # kinds (_capture_kinds.pxi)
    cdef bint sniffed
    cdef int32_t hello_corr
    cdef int64_t run
    cdef int32_t run_corr
    cdef bint sasl
    cdef int32_t sasl_corr
    # raw tokens a late start's chain proved: the stream offsets of the first and of the
    # frame after them (-1: none; see the twin)
    cdef int64_t tokens_from, tokens_to
    # responses held unproved after a whole successful SaslHandshake response whose request
    # was not captured, after the handshake's id (-1: none; _unproved_hold)
    cdef int32_t unproved_corr
    cdef list unproved
    # a successful SaslHandshake response cut before its v0 request was read, with frames cut after
    # it (its id; -1: none): they may be raw tokens (_handshake_hold; see the twin)
    cdef int32_t handshake_first
    cdef int64_t held_not_frames     # held ones found no frames (tokens, a weak chain's): no sequence number
    # a weak chain (Framer._confirm: only the end of the data before a hole proves it): where it
    # ends (-1: none), and its frames once cut, [sequence, stream offset, chain end, frame once
    # held], held until the next response decides them (_weak_hold)
    cdef int64_t weak_end
    cdef list weak

    def __cinit__(self, int side):
        self.side = side
        # -1: not known (yet), none
        self.isn = self.fin_pos = self.boundary = self.cut_end = self.tokens_from = self.tokens_to = -1
        self.hello_corr = self.run_corr = self.sasl_corr = self.unproved_corr = self.handshake_first = -1
        self.weak_end = -1
        self.pending = []
        self.unproved = []
        self.weak = []

    def __dealloc__(self):
        free(self.buf)
        free(self.chunks)

    cdef inline unsigned char *data(self) noexcept:
        return self.buf + self.head

    cdef void count_skipped(self, int64_t count, int64_t at) noexcept:
        # count bytes from stream offset at on are skipped (negative: no longer skipped)
        cdef int64_t before_mark = max(<int64_t>0, min(at + (count if count > 0 else -count), self.mark_pos) - at)
        self.c[H_SKIPPED_BYTES] += count
        self.early[2] += before_mark if count > 0 else -before_mark

    cdef inline bint whole_from_syn(self) noexcept:
        # read whole from its SYN so far: no gap, no byte skipped, no resync, no packet the snap length cut
        return self.isn >= 0 and not (self.c[H_GAPS] or self.c[H_SKIPPED_BYTES] or self.c[H_RESYNCS]
                                      or self.c[H_TRUNCATED_PACKETS])

    cdef int count_frame(self, int64_t frame_bytes, int64_t at) except -1:
        # a frame of frame_bytes captured bytes (with its size prefix) from stream offset at on
        # (one of a weak chain is noted for _weak_hold)
        self.c[H_FRAMES] += 1
        self.c[H_FRAME_BYTES] += frame_bytes
        if at + frame_bytes <= self.mark_pos:
            self.early[0] += 1
            self.early[1] += frame_bytes
        if at < self.weak_end:
            self.weak.append([self.sequence, at, self.weak_end, None])
        return 0

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

    cdef int64_t captured_at(self, int64_t at) noexcept:
        # When the byte at stream offset `at` (held in buf) was captured.
        cdef Py_ssize_t k
        for k in range(self.chunk_head, self.chunk_head + self.chunk_count):
            if self.chunks[k].end > at:
                return self.chunks[k].ts
        return self.chunks[self.chunk_head + self.chunk_count - 1].ts

    cdef bint has_corr(self, int32_t corr) noexcept:
        cdef int i
        for i in range(self.corr_count):
            if self.corrs[i] == corr:
                return True
        return False

    cdef int count_corr(self, int32_t corr) noexcept:
        cdef int i, n = 0
        for i in range(self.corr_count):
            if self.corrs[i] == corr:
                n += 1
        return n

    cdef void add_corr(self, int32_t corr, int64_t end_ts) noexcept:
        if self.corr_count == MAX_CORRS and self.corr_live > 0:
            self.corr_live -= 1      # the oldest slot, blank, is overwritten
        self.corrs[self.corr_next] = corr
        self.corr_ends[self.corr_next] = end_ts
        self.corr_next = (self.corr_next + 1) % MAX_CORRS
        if self.corr_count < MAX_CORRS:
            self.corr_count += 1

    cdef void answered(self, int32_t corr) noexcept:
        # A response with this correlation id was read: blank the oldest slot holding it
        # (the twin's _answered), so an old id in record bytes is no evidence. The slots
        # older than corr_live are all blank: responses come in order, so the search
        # usually ends at once.
        cdef int k, slot
        cdef int oldest = (self.corr_next - self.corr_count + MAX_CORRS) % MAX_CORRS
        for k in range(self.corr_live, self.corr_count):
            slot = (oldest + k) % MAX_CORRS
            if self.corrs[slot] == corr:
                self.corrs[slot] = -1
                while self.corr_live < self.corr_count \
                        and self.corrs[(oldest + self.corr_live) % MAX_CORRS] == -1:
                    self.corr_live += 1
                return

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
    cdef list undecided              # frames waiting for the direction or the kind
    cdef int64_t held_bytes
    cdef int kind
    cdef int64_t matched             # request/response pairs counted (_pair_counts)
    cdef int32_t pair_corr           # the last counted pair's correlation id
    cdef int64_t pair_response       # and its response's sequence number
    cdef int64_t request_like[2]
    cdef bint closed
    cdef bint told                   # its endpoints were reported (take_endpoints), with its first frame

    def __cinit__(self):
        self.h0 = _Half(0)
        self.h1 = _Half(1)
        self.client_side = -1
        self.direction_source = -1
        self.undecided = []
        self.kind = -1
        self.pair_corr = self.pair_response = -1     # no pair counted yet

    cdef inline _Half half(self, int side):
        return self.h0 if side == 0 else self.h1


cdef inline int64_t _position(_Half h, uint32_t seq) noexcept:
    return h.next_pos + <int32_t>(seq - h.next_seq)


cdef inline void memset16(unsigned char *p) noexcept:
    cdef int i
    for i in range(12):
        p[i] = 0


cdef inline bint _same_endpoint(_Connection conn, int side, const unsigned char *ep) noexcept:
    return memcmp(conn.ep[side], ep, 17) == 0 and conn.port[side] == ((ep[17] << 8) | ep[18])


cdef str _format_ip(const unsigned char *ep):
    return str(ipaddress.ip_address(PyBytes_FromStringAndSize(<const char *>ep + 1, ep[0])))


# A direction's requests, as the framer's resync reads them (kept here: _capture_framer.pxi's size cap)
cdef bint _requested(_Half other, int32_t corr, _Half half, int64_t at) noexcept:
    # Did the other direction send a request with this correlation id, not answered yet
    # (a frame cut there, or the one it is receiving: its start confirmed), its last byte
    # (so far) captured no later than the byte at stream offset `at` of half? (see the twin)
    cdef int i
    cdef bint found = False
    cdef int64_t end = 0
    for i in range(other.corr_count):
        if other.corrs[i] == corr and (not found or other.corr_ends[i] < end):
            end = other.corr_ends[i]
            found = True
    if other.synced and other.length >= 12 and <int32_t>kp_load_be32(other.data() + 8) == corr:
        if not found or other.chunks[other.chunk_head + other.chunk_count - 1].ts < end:
            end = other.chunks[other.chunk_head + other.chunk_count - 1].ts
        found = True
    if other.cut_frames is not None:     # a whole request header a hole cut, waiting for its end
        for cut in other.cut_frames:
            if len(cut[1]) >= 8 and <int32_t>kp_load_be32(<const unsigned char *><char *>cut[1] + 4) == corr \
                    and (not found or cut[3] < end):
                end = cut[3]
                found = True
    return found and end <= half.captured_at(at)


cdef int _all_requests_seen(_Half requests) noexcept:
    # Which requests this direction holds: 2 every one sent so far (read whole from its SYN),
    # 1 every one since its first confirmed frame (a late start, no gap or resync since), 0 neither
    # (see the twin)
    if not requests.synced or requests.pending or requests.c[H_GAPS] or requests.c[H_TRUNCATED_PACKETS]:
        return 0
    if requests.isn >= 0 and requests.c[H_SKIPPED_BYTES] == 0:
        return 2
    return 1 if requests.isn < 0 and requests.c[H_RESYNCS] <= 1 and requests.sequence else 0


cdef bint _request_after(_Half requests, _Half half, int64_t at) noexcept:
    # Was a request captured whole after the byte at stream offset `at` of half? (see the twin)
    return requests.corr_count > 0 \
        and requests.corr_ends[(requests.corr_next - 1 + MAX_CORRS) % MAX_CORRS] >= half.captured_at(at)


cdef int _hole_answers(_Connection conn, _Half half) except -1:
    # A hole in a response direction read whole from its SYN starts inside a response whose id was
    # not captured: it answers the oldest request still outstanding, when the requests up to it
    # were all read and no response read is still held; that request is answered (see the twin).
    cdef _Half other = conn.half(1 - half.side)
    cdef int oldest = (other.corr_next - other.corr_count + MAX_CORRS) % MAX_CORRS
    if (conn.client_side != other.side or not half.whole_from_syn()
            or not half.synced or half.length >= 8 or half.sasl or half.tokens_to >= 0
            or half.unproved or half.weak or other.corr_live >= other.corr_count):
        return 0
    for held in conn.undecided:
        if held[0] == half.side:
            return 0
    if conn.request_like[other.side] - other.corr_count + other.corr_live < other.whole_requests:
        other.answered(other.corrs[(oldest + other.corr_live) % MAX_CORRS])
    return 0


cdef bint _answer_seen(_Connection conn, _Half half, int32_t corr, int32_t max_size) noexcept:
    # The direction unknown: does the other side hold what may answer a request with this
    # correlation id (a frame held, or a plausible header with that id in its bytes, in order or
    # held after a hole, whose frame ends where they do or at another plausible size)? (see the twin)
    cdef _Half other = conn.half(1 - half.side)
    cdef bytes held
    if _answered_already(conn, half.side, corr, 0) >= 0:
        return True
    if _answer_in(other.data(), other.length, corr, max_size):
        return True
    for segment in other.pending:
        held = segment[1]
        if _answer_in(<const unsigned char *><char *>held, len(held), corr, max_size):
            return True
    return False


cdef bint _answer_in(const unsigned char *buf, Py_ssize_t length, int32_t corr, int32_t max_size) noexcept:
    # Does a plausible header with this correlation id start in buf[:length]? (see _answer_seen)
    cdef Py_ssize_t at, after
    for at in range(4, length - 3):
        if <int32_t>kp_load_be32(buf + at) != corr:
            continue
        after = at + <int32_t>kp_load_be32(buf + at - 4)
        if at + 4 <= after <= at + max_size and (after == length or (
                after + 4 <= length and 4 <= <int32_t>kp_load_be32(buf + after) <= max_size)):
            return True
    return False


cdef bint _in_order(const int32_t *corrs, int n, int last) noexcept:
    # Do corrs[0:n] and then corrs[last] (last == n: none more) never fall, each at least the
    # one before? (-1: a link too short to hold one; see the twin)
    cdef int k
    cdef int32_t before = 0
    for k in range(n):
        if corrs[k] < before:
            return False
        before = corrs[k]
    return last >= n or corrs[last] >= before


cdef inline int _role(_Connection conn, _Half half) noexcept:
    if conn.client_side < 0:
        return -1
    return 0 if conn.client_side == half.side else 1


cdef object _copy_array(void *src, Py_ssize_t n, dtype):
    out = np.empty(n, dtype=dtype)
    memcpy(<void *><size_t>out.ctypes.data, src, n * out.itemsize)
    return out

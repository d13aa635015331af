# Included by _capture.pyx: Kafka frames out of a direction's byte stream (twin:
# kproto/_py/capture_framer.py). A frame is an int32 size and that many bytes; where a stream's
# start was not captured or a gap swallowed a frame's start, the framer searches for the next
# confirmed frame boundary (resync; see the twin's _confirm). It also decides which side of a
# connection is the client, and holds the output batch the frames are copied into.


@cython.final
cdef class Framer:
    """Frames out of each direction's stream into the output batch: the engine's last stage
    (kproto/_common/capture_engine.py)."""
    cdef int16_t *versions           # highest plausible request version per api key
    cdef Py_ssize_t n_versions
    cdef readonly int64_t max_frame_size
    cdef Py_ssize_t needed           # where the last undecided _confirm waits for bytes
    cdef Py_ssize_t tokens_first, tokens_end  # raw SASL tokens the last confirmed chain holds (-1: none)
    # the last confirmed chain: proved by the end of the data, its links, the id of its response
    # answering a captured request (-1: none; a response chain the end proves with none is weak)
    cdef bint end_proved
    cdef int chain_links
    cdef int32_t strong_corr
    cdef int64_t held_limit          # held bytes of an unconfirmed connection (_capture_kinds.pxi)
    cdef list opened                 # connections whose first frame was just emitted (take_endpoints)
    cdef _FrameBatch batch           # the frames found since the last take_batch

    def __cinit__(self):
        self.opened = []
        self.tokens_first = -1

    def __init__(self, settings):
        versions = settings.request_versions
        self.n_versions = len(versions)
        self.versions = <int16_t *>malloc(max(1, self.n_versions) * sizeof(int16_t))
        if self.versions == NULL:
            raise MemoryError()
        for i, v in enumerate(versions):
            self.versions[i] = <int16_t>max(-1, min(v, 0x7FFF))
        self.max_frame_size = settings.max_frame_size
        self.held_limit = settings.held_limit
        self.batch = _FrameBatch(settings.batch_frames, settings.batch_bytes)

    def __dealloc__(self):
        free(self.versions)

    # ------------------------------------------------------------------ output
    cdef int _emit(self, _Connection conn, int side, int64_t sequence, int64_t first_ts, int64_t last_ts,
                   int32_t size, Py_ssize_t captured, const unsigned char *payload) except -1:
        # `captured` payload bytes of a frame of `size` (fewer when a gap cut it)
        if side != conn.client_side and captured >= 4:     # a response answers its request
            conn.half(1 - side).answered(<int32_t>kp_load_be32(payload))
        if not conn.told:       # its first frame: say who talks (the connection row comes at its close)
            conn.told = True
            self.opened.append(conn)
        return self.batch.add(conn.id, 0 if side == conn.client_side else 1,
                              sequence - conn.half(side).held_not_frames, first_ts, last_ts, size, captured, payload)

    def batch_ready(self):
        return self.batch.ready()

    cdef inline bint _batch_ready(self) noexcept:
        return self.batch.ready()

    def take_batch(self):
        return self.batch.take()

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
        cdef int32_t size, corr
        cdef int role
        if avail < 8:
            return -1
        size = <int32_t>kp_load_be32(p)
        if size < 4 or size > self.max_frame_size:
            return 0
        if avail < min(14, 4 + <Py_ssize_t>size):
            return -1
        role = _role(conn, half)
        if role != 1 and self._request_ok(p + 4, avail - 4, size):
            return 1
        corr = <int32_t>kp_load_be32(p + 4)
        if role != 0 and corr >= 0:
            # every request is in hand: a response header answers one of them, or it is none
            if role == 1 and _all_requests_seen(conn.half(1 - half.side)) == 2 \
                    and _request_after(conn.half(1 - half.side), half, half.buf_pos + (p - half.data())) \
                    and not _requested(conn.half(1 - half.side), corr, half, half.buf_pos + (p - half.data())):
                return 0
            return 1
        return 0

    cdef int _strong(self, _Connection conn, _Half half, const unsigned char *p, Py_ssize_t avail) noexcept:
        # 1 when the plausible header at p (in half's buf) is evidence of a boundary on its
        # own (a whole request header, or a response to a request the other side sent before
        # it and that is not answered), 0 when not, -1 when the request header's bytes have
        # not all arrived.
        cdef int role = _role(conn, half)
        cdef int whole
        if role != 0 and _requested(conn.half(1 - half.side), <int32_t>kp_load_be32(p + 4),
                                    half, half.buf_pos + (p - half.data())):
            return 1
        if role == 1:
            return 0
        whole = self._whole_request_header(p, avail)
        if role < 0 and whole > 0 and not _answer_seen(conn, half, <int32_t>kp_load_be32(p + 8), self.max_frame_size):
            return 0    # the direction unknown: a request header is evidence once the other side answers it
        return whole

    cdef int _whole_request_header(self, const unsigned char *p, Py_ssize_t avail) noexcept:
        # 1 when the frame at p starts with a whole valid request header, 0 when not, -1
        # when its bytes have not all arrived (see the twin).
        cdef int32_t size = <int32_t>kp_load_be32(p)
        cdef WireHeader h
        cdef Py_ssize_t pos = 0
        cdef int st
        if not self._request_ok(p + 4, avail - 4, size):
            return 0
        st = wire_request_header(p + 4, min(avail - 4, <Py_ssize_t>size), &pos, &h)
        if st == 0:
            return 1
        return -1 if st == ST_TRUNCATED and avail - 4 < size else 0

    cdef int _confirm(self, _Connection conn, _Half half, const unsigned char *buf, Py_ssize_t length,
                      Py_ssize_t i, bint final) noexcept:
        # Is the plausible header at i a frame boundary? 1 yes, 0 no, -1 more bytes needed
        # (self.needed: the offset the decision waits for). A chain of responses must read as
        # a broker's answers (_answers: self.tokens_first/tokens_end). See the twin.
        cdef int hop, hops, strong, following
        cdef int plausible = 1          # the link at i: 1 a header, 2 only a raw token
        cdef int role = _role(conn, half)
        cdef bint response = role != 0  # (the direction unknown: requests, or a broker's answers)
        cdef bint requests = role < 0   # every link so far a request header
        cdef Py_ssize_t after
        cdef Py_ssize_t links[RESPONSE_CHAIN_CONFIRMS]
        cdef int n_links = 0, handshake = -1
        hops = RESPONSE_CHAIN_CONFIRMS if role == 1 else CHAIN_CONFIRMS
        self.tokens_first = self.strong_corr = -1
        self.end_proved = False
        for hop in range(hops):
            self.chain_links = hop + 1
            strong = self._strong(conn, half, buf + i, length - i) if plausible == 1 else 0
            if strong > 0 and role == 1:
                self.strong_corr = <int32_t>kp_load_be32(buf + i + 4)
            if strong > 0 and _sasl_handshake(conn, half, buf, length, i):
                return 1    # raw SASL tokens, not a header, follow it
            if response:
                links[n_links] = i
                n_links += 1
                requests = requests and plausible == 1 \
                    and self._request_ok(buf + i + 4, length - i - 4, <int32_t>kp_load_be32(buf + i))
                if handshake < 0 and plausible == 1 \
                        and _handshake_answer(buf + i, length - i, <int32_t>kp_load_be32(buf + i + 4)) \
                        and kp_load_be16(buf + i + 8) == 0:
                    handshake = n_links - 1
            after = i + 4 + <int32_t>kp_load_be32(buf + i)
            following = self._link_ok(conn, half, buf + after, length - after, handshake >= 0) \
                if after <= length else -1
            if following < 0 or strong < 0:
                if final:
                    self.end_proved = True
                    return self._chain(conn, half, buf, length, final, links, n_links, handshake, False, requests, -1) \
                        if after == length else 0
                self.needed = after
                return -1
            if not following:
                return 0
            if strong > 0:
                return self._chain(conn, half, buf, length, final, links, n_links, handshake, True, requests,
                                   after if following == 1 else -1)
            i = after
            plausible = following
        return self._chain(conn, half, buf, length, final, links, n_links, handshake, False, requests, -1)

    cdef int _link_ok(self, _Connection conn, _Half half, const unsigned char *p, Py_ssize_t avail,
                      bint tokens) noexcept:
        # What a chain's link at p is plausible as: 1 a header, 2 only a raw SASL token (where
        # tokens may come), 0 neither, -1 more bytes needed (see the twin)
        cdef int ok = self._header_ok(conn, half, p, avail)
        cdef int32_t size
        if tokens and ok <= 0 and avail >= 4:
            size = <int32_t>kp_load_be32(p)
            if 0 <= size < 4 or (ok == 0 and size <= self.max_frame_size):
                return 2
        return ok

    cdef int _chain(self, _Connection conn, _Half half, const unsigned char *buf, Py_ssize_t length, bint final,
                    const Py_ssize_t *links, int n_links, int handshake, bint proved, bint requests,
                    Py_ssize_t following) noexcept:
        # _answers, and where the requests are in hand, the chain's answers (then the header at
        # following) answer outstanding requests in order, or wait (-1) (see the twin)
        cdef _Half other = conn.half(1 - half.side)
        cdef int k, found, at = 0
        cdef int32_t corr, last = -1
        cdef bint wait = False
        cdef Py_ssize_t link
        cdef int oldest = (other.corr_next - other.corr_count + MAX_CORRS) % MAX_CORRS
        cdef int seen = _all_requests_seen(other)
        if not self._answers(buf, links, n_links, handshake, proved, requests):
            return 0
        if requests or _role(conn, half) != 1 or not seen:
            return 1
        for k in range(n_links + 1):
            if k == n_links:
                if following < 0 or length - following < 8:
                    break
                link = following
            elif self.tokens_first >= 0 and handshake < k < n_links - 1:
                continue    # a raw token
            else:
                link = links[k]
            if <int32_t>kp_load_be32(buf + link) < 4:
                continue
            corr = <int32_t>kp_load_be32(buf + link + 4)
            if seen == 1 and last < 0 and other.count_corr(corr) > 1:
                continue    # after a late start, an id reused: it may answer a request before the capture
            found = at
            while found < other.corr_count and other.corrs[(oldest + found) % MAX_CORRS] != corr:
                found += 1
            if found < other.corr_count:
                at = found + 1
                last = corr
            elif last >= 0 or seen == 2:
                if _request_after(other, half, half.buf_pos + link) \
                        or (final and 0 <= other.fin_pos <= other.next_pos):
                    return 0
                wait = not final
        if wait:
            self.needed = length
            return -1
        return 1

    cdef int _answers(self, const unsigned char *buf, const Py_ssize_t *links, int n_links, int handshake,
                      bint proved, bint requests) noexcept:
        # Does the response chain whose links start at links[] read as a broker's answers, their
        # correlation ids never falling? 1 yes, 0 no; after a whole successful SaslHandshake response
        # (links[handshake]) the links up to a proved response may all be raw tokens instead:
        # self.tokens_first and tokens_end say where. requests: the direction unknown, every link
        # reads as a request header (see the twin)
        cdef int32_t corrs[RESPONSE_CHAIN_CONFIRMS]
        cdef int k
        if requests:
            return 1
        for k in range(n_links):
            corrs[k] = <int32_t>kp_load_be32(buf + links[k] + 4) \
                if <int32_t>kp_load_be32(buf + links[k]) >= 4 else -1
        if _in_order(corrs, n_links, n_links):
            return 1
        if 0 <= handshake < n_links - 1 and proved and _in_order(corrs, handshake + 1, n_links - 1):
            self.tokens_first = links[handshake + 1]
            self.tokens_end = links[n_links - 1]
            return 1
        return 0

    cdef bint _inside_strong(self, _Connection conn, _Half half, const int64_t *waiting, int n_waiting,
                             int64_t position) noexcept:
        # Is position inside the frame a waiting strong candidate announces? (see the twin)
        cdef const unsigned char *buf = half.data()
        cdef int k
        cdef int64_t c
        for k in range(n_waiting):
            c = waiting[k]
            if c < position < c + 4 + <int32_t>kp_load_be32(buf + (c - half.buf_pos)) \
                    and self._strong(conn, half, buf + (c - half.buf_pos), half.length - (c - half.buf_pos)) == 1:
                return True
        return False

    cdef bint _scan(self, _Connection conn, _Half half, bint final) except -1:
        # Drop bytes until buf starts at a confirmed frame boundary; False if more bytes are
        # needed. A known boundary is taken as it is; otherwise candidates wait in parallel
        # for the bytes that decide them, the first confirmed wins unless it lies inside the
        # frame of a strong candidate still waiting (see the twin).
        cdef const unsigned char *buf = half.data()
        cdef Py_ssize_t length = half.length
        cdef int64_t base = half.buf_pos
        cdef int64_t found = -1, keep_from
        cdef int64_t waiting[MAX_CANDIDATES + 1]
        cdef int64_t needs[MAX_CANDIDATES + 1]
        cdef int n_waiting = 0, k, farthest
        cdef int decided, ok
        cdef Py_ssize_t i, skip
        if half.boundary >= 0:
            skip = <Py_ssize_t>min(half.boundary - base, <int64_t>length)
            if skip:
                half.count_skipped(skip, base)
                half.drop(skip)
            if half.boundary > half.buf_pos:
                return False
            half.boundary = -1
            half.n_candidates = 0
            half.synced = True
            return True
        # a frame a hole cut, still waiting for its end, does not hold the search up (see the twin)
        if half.cut_end >= 0 and self._cut_frame_proved(conn, half, final) > 0:
            return True
        for k in range(half.n_candidates):
            decided = self._confirm(conn, half, buf, length, <Py_ssize_t>(half.candidates[k] - base), final)
            if decided > 0 and not self._inside_strong(conn, half, waiting, n_waiting, half.candidates[k]):
                found = half.candidates[k]
                break
            if decided:
                waiting[n_waiting] = half.candidates[k]
                needs[n_waiting] = base + self.needed if decided < 0 else half.candidates[k]
                n_waiting += 1
        if found < 0:
            i = <Py_ssize_t>min(max(<int64_t>0, half.scan_from - base), <int64_t>length)
            while i < length:
                ok = self._header_ok(conn, half, buf + i, length - i)
                if ok < 0:
                    if final:
                        i = length
                    break
                if ok:
                    decided = self._confirm(conn, half, buf, length, i, final)
                    if decided > 0 and not self._inside_strong(conn, half, waiting, n_waiting, base + i):
                        found = base + i
                        break
                    if decided:
                        waiting[n_waiting] = base + i
                        needs[n_waiting] = base + self.needed if decided < 0 else base + i
                        n_waiting += 1
                        if n_waiting > MAX_CANDIDATES:
                            # the one waiting for the farthest byte is the likeliest false
                            farthest = 0
                            for k in range(1, n_waiting):
                                if needs[k] > needs[farthest] or (needs[k] == needs[farthest]
                                                                  and waiting[k] > waiting[farthest]):
                                    farthest = k
                            for k in range(farthest, n_waiting - 1):
                                waiting[k] = waiting[k + 1]
                                needs[k] = needs[k + 1]
                            n_waiting -= 1
                i += 1
            half.scan_from = base + i
        response = _role(conn, half) == 1
        if found >= 0 and final and response:
            found = self._strongest_inside(conn, half, found, final)
        if found >= 0:
            half.n_candidates = 0
            half.cut_end = -1
            half.cut_frames = None
            keep_from = found
            if self.tokens_first >= 0:  # the winner's chain holds raw SASL tokens: _cut skips them
                half.tokens_from = base + self.tokens_first
                half.tokens_to = base + self.tokens_end
            # a weak winner: only the end proves its chain, and no link answers a captured request
            half.weak_end = base + length if response and self.end_proved and self.strong_corr < 0 else -1
        else:
            for k in range(n_waiting):
                half.candidates[k] = waiting[k]
            half.n_candidates = n_waiting
            keep_from = waiting[0] if n_waiting else half.scan_from
        if keep_from > base:
            half.count_skipped(keep_from - base, base)
            half.drop(<Py_ssize_t>(keep_from - base))
        if found >= 0:
            half.synced = True
        return found >= 0

    cdef int64_t _strongest_inside(self, _Connection conn, _Half half, int64_t found, bint final) noexcept:
        # At the end of the data (or a hole), a response chain that only that end proves yields to the first
        # candidate inside its frame whose chain answers a later captured request (or, neither
        # answering one, is longer); the winner, _confirm's state its own (see the twin).
        cdef const unsigned char *buf = half.data()
        cdef Py_ssize_t at, end, i, better
        cdef int32_t corr
        cdef int links
        while self.end_proved:
            at = <Py_ssize_t>(found - half.buf_pos)
            corr, links = self.strong_corr, self.chain_links
            end = at + 4 + <int32_t>kp_load_be32(buf + at)
            better = -1
            for i in range(at + 1, end - 7):
                if self._header_ok(conn, half, buf + i, half.length - i) == 1 \
                        and self._confirm(conn, half, buf, half.length, i, final) > 0 \
                        and (self.strong_corr > corr or (self.strong_corr == corr < 0 and self.chain_links > links)):
                    better = i
                    break
            self._confirm(conn, half, buf, half.length, at if better < 0 else better, final)   # the winner's state
            if better < 0:
                break
            found = half.buf_pos + better
        return found

    cdef int _cut(self, _Connection conn, _Half half, bint final) except -1:
        cdef int32_t size
        cdef const unsigned char *buf
        cdef int token
        while True:
            if conn.kind != KIND_KAFKA_ and _kind_before(conn, half, final):
                return 0
            if not half.synced and not self._scan(conn, half, final):
                return 0
            if half.length < 4:
                return 0
            buf = half.data()
            size = <int32_t>kp_load_be32(buf)
            if half.tokens_to >= 0 and half.buf_pos >= half.tokens_from:
                # raw SASL tokens a late start's chain proved (_confirm, _answers) end at tokens_to
                half.sasl = half.buf_pos < half.tokens_to
                if not half.sasl:
                    half.tokens_to = -1
            if half.sasl and 0 <= size <= self.max_frame_size:
                token = _sasl_token(self, conn, half, size, final)
                if token < 0:
                    return 0
                if token:
                    continue
            if size < 4 or size > self.max_frame_size:
                half.synced = False
                half.c[H_RESYNCS] += 1
                half.scan_from = half.buf_pos + 1
                continue
            if half.length < 4 + <Py_ssize_t>size:
                return 0
            self._frame(conn, half, size, size)

    cdef int _frame(self, _Connection conn, _Half half, int32_t size, Py_ssize_t captured) except -1:
        # Emit the frame at the front of buf (its size prefix and `captured` bytes of its payload: fewer
        # than `size` when a gap or snap length cut it) and drop it (see the twin).
        cdef const unsigned char *buf = half.data()
        cdef int64_t frame_end = half.buf_pos + 4 + captured
        cdef int64_t first_ts = 0, last_ts = 0
        cdef bint have_first = False
        cdef Py_ssize_t k
        for k in range(half.chunk_head, half.chunk_head + half.chunk_count):
            if not have_first and half.chunks[k].end > half.buf_pos:
                first_ts = half.chunks[k].ts
                have_first = True
            if half.chunks[k].end >= frame_end:
                last_ts = half.chunks[k].ts
                break
        self._frame_out(conn, half, size, buf + 4, captured, first_ts, last_ts, 4 + captured, half.buf_pos)
        return 0

    cdef int _frame_out(self, _Connection conn, _Half half, int32_t size, const unsigned char *payload,
                        Py_ssize_t captured, int64_t first_ts, int64_t last_ts, Py_ssize_t held,
                        int64_t at) except -1:
        # Count and emit (or hold) a frame of `captured` payload bytes; `held`: its bytes at the front
        # of buf, dropped once counted (0: a cut frame kept aside). 0: another protocol (see the twin).
        cdef bint request_like = self._request_ok(payload, captured, size)
        _kind_frame(conn, half, payload, captured, size, request_like, last_ts)
        if conn.kind > KIND_KAFKA_:
            return 0    # this frame showed another protocol: its bytes went with the rest
        half.count_frame(4 + captured, at)
        if request_like:
            if half.whole_requests == conn.request_like[half.side] and half.whole_from_syn():
                half.whole_requests += 1    # every request before it read from the SYN (_hole_answers)
            half.add_corr(<int32_t>kp_load_be32(payload + 4), last_ts)
            conn.request_like[half.side] += 1
        if conn.client_side < 0 or conn.kind != KIND_KAFKA_ or conn.undecided:
            self._infer(conn, half, half.sequence, first_ts, last_ts, size,
                        PyBytes_FromStringAndSize(<const char *>payload, captured))
        elif conn.client_side == half.side or not _unproved_hold(self, conn, half, half.sequence, first_ts,
                                                                 last_ts, size, captured, payload):
            self._emit(conn, half.side, half.sequence, first_ts, last_ts, size, captured, payload)
        half.sequence += 1
        half.drop(held)
        return 1

    cdef Py_ssize_t _cut_candidate(self, _Connection conn, _Half half, int64_t hole_end) noexcept:
        # The offset in buf of a strong candidate whose frame ends where the hole after buf ends, or -1 (see the twin).
        cdef const unsigned char *buf = half.data()
        cdef Py_ssize_t i
        if half.synced or half.boundary >= 0 or half.sasl or conn.kind > KIND_KAFKA_:
            return -1
        for i in range(half.length - 7):
            if (<int64_t><int32_t>kp_load_be32(buf + i) >= hole_end - half.buf_pos - i - 4
                    and self._header_ok(conn, half, buf + i, half.length - i) == 1
                    and self._strong(conn, half, buf + i, half.length - i) == 1):
                return i
        return -1

    cdef int _cut_frame_proved(self, _Connection conn, _Half half, bint final) except -2:
        # Is the frame a hole cut (half.cut_*; its bytes counted as skipped meanwhile) proved by a
        # plausible header right after the hole? 1 yes (emitted after the frames chained to it), 0 no,
        # -1 more bytes needed (see the twin).
        cdef int ok = 0
        cdef bytes payload
        cdef list frames = half.cut_frames
        cdef int64_t inside = half.cut_end - half.buf_pos    # past a hole, the bytes before its end are its own
        if inside > half.length:
            ok = -1     # reading has not reached its end (at a hole, _gap keeps it if it ends after the hole)
        elif inside >= 0:
            ok = self._header_ok(conn, half, half.data() + inside, half.length - inside)
            if ok < 0 and final:
                ok = 0 if half.length > inside else 1
        if ok < 0:
            return -1
        half.cut_end = -1
        half.cut_frames = None
        if ok and inside:
            half.count_skipped(inside, half.buf_pos)
            half.drop(<Py_ssize_t>inside)
        if ok:
            for size, payload, first_ts, last_ts, at in frames:     # those chained to it, then itself
                half.count_skipped(-(4 + len(payload)), at)
                if not self._frame_out(conn, half, size, <const unsigned char *><char *>payload, len(payload),
                                       first_ts, last_ts, 0, at):
                    half.c[H_OTHER_BYTES] += 4 + len(payload)     # _not_kafka moved the rest
                    break
            half.n_candidates = 0
            half.synced = True
        return ok

    cdef int _infer(self, _Connection conn, _Half half, int64_t sequence, int64_t first_ts, int64_t last_ts,
                    int32_t size, bytes payload) except -1:
        conn.undecided.append((half.side, sequence, first_ts, last_ts, size, payload))
        conn.held_bytes += len(payload)
        cdef _Half other = conn.half(1 - half.side)
        if conn.client_side < 0:
            if len(payload) >= 4 and other.has_corr(<int32_t>kp_load_be32(<const unsigned char *><char *>payload)):
                conn.client_side, conn.direction_source = 1 - half.side, 2     # a correlation
            elif len(conn.undecided) >= MAX_UNDECIDED_FRAMES:
                self._guess(conn)
        _kind_held(conn, self.held_limit)
        self._release(conn)
        return 0

    cdef int _guess(self, _Connection conn) except -1:
        cdef int side
        if conn.request_like[0] != conn.request_like[1]:
            side = 0 if conn.request_like[0] > conn.request_like[1] else 1
        else:
            side = 0 if conn.port[0] >= conn.port[1] else 1
        conn.client_side, conn.direction_source = side, 3
        return 0

    cdef int _release(self, _Connection conn) except -1:
        # Emit the held frames once the direction is known and the connection is Kafka.
        cdef bytes payload
        if conn.client_side < 0 or conn.kind != KIND_KAFKA_ or not conn.undecided:
            return 0
        for side, sequence, first_ts, last_ts, size, payload in conn.undecided:
            if side == conn.client_side or not _unproved_hold(self, conn, conn.half(side), sequence, first_ts,
                                                              last_ts, size, len(payload), payload):
                self._emit(conn, side, sequence, first_ts, last_ts, size, len(payload), payload)
        conn.undecided = []
        conn.held_bytes = 0
        return 0

# Included by _capture.pyx: which protocol a connection speaks, and SASL's raw tokens
# (twin: kproto/_py/capture_kinds.py, which states the rules). Module-level functions the
# framer calls at its few hooks, so the framer's own logic stays its own.

from kproto._c._api_keys cimport API_KEY_API_VERSIONS, API_KEY_SASL_HANDSHAKE, SASL_RAW_TOKENS_HANDSHAKE_VERSION

cdef enum:
    RUN_TO_CONFIRM = 4
    HELD_FRAMES = 1024
    UNPROVED_FRAMES = 8         # responses held unproved after a SaslHandshake response
    TLS_MAX_RECORD = 18432
    TLS_REACH = 5 + TLS_MAX_RECORD
    ZK_PASSWORD_MAX = 64
    SNIFF_BYTES = 8

cdef int KIND_UNKNOWN_ = _shapes.KIND_UNKNOWN
cdef int KIND_KAFKA_ = _shapes.KIND_KAFKA
cdef int KIND_TLS_ = _shapes.KIND_TLS
cdef int KIND_ZOOKEEPER_ = _shapes.KIND_ZOOKEEPER
cdef int KIND_HTTP_ = _shapes.KIND_HTTP
cdef int KIND_OTHER_ = _shapes.KIND_OTHER
cdef int KIND_EMPTY_ = _shapes.KIND_EMPTY

cdef tuple HTTP_STARTS = (b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ", b"OPTIONS ", b"PATCH ", b"CONNECT ",
                          b"TRACE ", b"HTTP/1.", b"PRI * HT")


cdef inline int _tls_record(const unsigned char *p, Py_ssize_t avail) noexcept:
    cdef int length
    if avail < 5:
        return -1
    if p[0] < 20 or p[0] > 23 or p[1] != 3 or p[2] < 1 or p[2] > 4:
        return -1
    length = (p[3] << 8) | p[4]
    return length if 0 < length <= TLS_MAX_RECORD else -1


cdef int _zookeeper_connect(const unsigned char *p, Py_ssize_t n) noexcept:
    cdef int32_t size = <int32_t>kp_load_be32(p)
    cdef int32_t password
    cdef int k
    cdef int timeout_at, password_at
    if size < 20 or size > 28 + ZK_PASSWORD_MAX + 1:
        return 0
    if n < 4 + <Py_ssize_t>size:
        return -1
    if <int32_t>kp_load_be32(p + 4) != 0:
        return 0
    for k in range(2):
        timeout_at = 12 if k == 0 else 4
        password_at = 24 if k == 0 else 16
        if password_at + 4 > size:
            continue
        password = <int32_t>kp_load_be32(p + 4 + password_at)
        if <int32_t>kp_load_be32(p + 4 + timeout_at) > 0 and 0 <= password <= ZK_PASSWORD_MAX \
                and 0 <= size - password_at - 4 - password <= 1:
            return 1
    return 0


cdef int _sniff(const unsigned char *p, Py_ssize_t n, bint at_start, bint final) noexcept:
    cdef Py_ssize_t q, start_len
    cdef const unsigned char *start
    cdef int length, zk
    if n < SNIFF_BYTES and not final:
        return -1
    for item in HTTP_STARTS:
        start = <const unsigned char *><char *>(<bytes>item)
        start_len = len(<bytes>item)
        if n >= start_len and memcmp(p, start, start_len) == 0:
            return KIND_HTTP_
    if at_start:
        length = _tls_record(p, n)
        if length >= 0 and p[0] == 22 and n > 5 and (p[5] == 1 or p[5] == 2):
            return KIND_TLS_
        if n >= 4:
            zk = _zookeeper_connect(p, n)
            if zk < 0 and not final:
                return -1
            if zk > 0:
                return KIND_ZOOKEEPER_
    cdef bint pending = False
    for q in range(min(n - 4, <Py_ssize_t>TLS_REACH)):
        length = _tls_record(p + q, n - q)
        if length < 0:
            continue
        if q + 5 + length + 5 <= n:
            if _tls_record(p + q + 5 + length, n - q - 5 - length) >= 0:
                return KIND_TLS_
        else:
            pending = True
    return -1 if pending and not final else 0


cdef bint _kind_before(_Connection conn, _Half half, bint final) except -1:
    """True when there is nothing to frame now (see the twin's _kind_before)."""
    cdef int kind
    if conn.kind > KIND_KAFKA_:
        half.c[H_OTHER_BYTES] += half.length + half.c[H_SKIPPED_BYTES]
        half.c[H_SKIPPED_BYTES] = 0
        half.drop(half.length)
        return True
    cdef bint at_start
    if half.sniffed:
        return False
    at_start = half.isn >= 0 and half.buf_pos == 0
    kind = _sniff(half.data(), half.length, at_start, final)
    if kind < 0:
        return True
    if kind == 0:
        half.sniffed = at_start     # mid-stream: looked at again with new bytes until known
        return False
    half.sniffed = True
    _not_kafka(conn, kind)
    return True


cdef int _sasl_token(Framer fr, _Connection conn, _Half half, int32_t size, bint final) except -2:
    """1: a raw token (counted, dropped); 0: Kafka again; -1: not complete or not decided yet."""
    cdef const unsigned char *buf = half.data()
    cdef _Half other = conn.half(1 - half.side)
    if half.length < 4 + <Py_ssize_t>size:
        return -1
    if conn.client_side == -1 or conn.client_side == half.side:    # (unknown: a request header ends them)
        if size >= 4 and fr._request_ok(buf + 4, size, size):
            half.sasl = False
            return 0
    elif half.tokens_to >= 0:
        pass            # a token its chain proved (Framer._answers): the response after them ends them
    elif not other.sasl and size >= 4 and other.has_corr(<int32_t>kp_load_be32(buf + 4)):
        half.sasl = False
        return 0
    elif other.sasl and (other.pending or not other.synced) and not final and half.length <= fr.held_limit:
        return -1       # the client's side is in its tokens behind a hole: wait for its next request
    half.c[H_SASL_TOKENS] += 1
    half.c[H_SASL_BYTES] += 4 + size
    half.drop(4 + size)
    return 1


cdef int64_t _answered_already(_Connection conn, int side, int32_t corr, int64_t request_end_ts) except -2:
    # The sequence number of the first frame the other side sent after this request, held
    # undecided, that is a response with this correlation id; -1 when none is (see the twin)
    cdef bytes payload
    if corr < 0:
        return -1
    for held in conn.undecided:
        payload = held[5]
        if held[0] != side and <int64_t>held[2] >= request_end_ts and len(payload) >= 4 \
                and <int32_t>kp_load_be32(<const unsigned char *><char *>payload) == corr:
            return <int64_t>held[1]
    return -1


cdef bint _handshake_answer(const unsigned char *p, Py_ssize_t avail, int32_t corr) noexcept:
    # Does a whole SaslHandshake response with this correlation id start at p: an error
    # code, then its array of mechanism names filling the frame exactly? (see the twin)
    cdef int32_t size, count, k
    cdef Py_ssize_t q, end
    if avail < 14:
        return False
    size = <int32_t>kp_load_be32(p)
    if size < 10 or size > avail - 4 or <int32_t>kp_load_be32(p + 4) != corr:
        return False
    q = 14
    end = 4 + <Py_ssize_t>size
    count = <int32_t>kp_load_be32(p + 10)
    for k in range(count):      # each name takes 2 bytes at least
        if q + 2 > end:
            return False
        q += 2 + kp_load_be16(p + q)
    return q == end


cdef bint _sasl_handshake(_Connection conn, _Half half, const unsigned char *data, Py_ssize_t length,
                          Py_ssize_t i) noexcept:
    # Is the strong header at i (in half's buf) a frame of a SaslHandshake v0 exchange,
    # proved by the other one, so raw tokens rather than a header may follow it? (see the twin)
    cdef _Half other = conn.half(1 - half.side)
    cdef int32_t size = <int32_t>kp_load_be32(data + i)
    cdef int32_t corr
    cdef Py_ssize_t end = i + 4 + <Py_ssize_t>size, at
    cdef int64_t sent
    cdef const unsigned char *buf
    if conn.client_side != half.side and other.sasl_corr >= 0 \
            and _handshake_answer(data + i, length - i, other.sasl_corr):
        return True
    if (conn.client_side != -1 and conn.client_side != half.side) or size < 8 or end > length \
            or kp_load_be16(data + i + 4) != API_KEY_SASL_HANDSHAKE \
            or kp_load_be16(data + i + 6) != SASL_RAW_TOKENS_HANDSHAKE_VERSION:
        return False
    corr = <int32_t>kp_load_be32(data + i + 8)
    sent = half.captured_at(half.buf_pos + end - 1)
    buf = other.data()
    for at in range(other.length - 13):
        if _handshake_answer(buf + at, other.length - at, corr) and other.captured_at(other.buf_pos + at) >= sent:
            return True
    for _, held, ts in other.pending:   # or in the bytes it holds after a hole (not in its buf yet)
        if ts >= sent:
            buf = <const unsigned char *><char *>held
            for at in range(len(held) - 13):
                if _handshake_answer(buf + at, len(held) - at, corr):
                    return True
    return False


cdef int _handshake_held(_Connection conn, int side, int32_t corr) except -1:
    # The other side's frames cut first: does it hold undecided a successful response to the
    # SaslHandshake v0 request with this id? 1 as its last frame, 2 with frames cut after it, 0 no
    # (see the twin)
    cdef bytes payload
    cdef int found = 0
    for held in conn.undecided:
        if held[0] == side:
            continue
        if found:
            return 2
        payload = held[5]
        if len(payload) >= 6 and <int32_t>kp_load_be32(<const unsigned char *><char *>payload) == corr \
                and kp_load_be16(<const unsigned char *><char *>payload + 4) == 0:
            found = 1
    return found


cdef bint _pair_counts(_Connection conn, int32_t corr, int64_t response_sequence, int seen) noexcept:
    # A pair counts only as a broker answers: an id unique among the requests seen, higher
    # than the last counted pair's, a response after that pair's (see the twin)
    if seen != 1 or corr <= conn.pair_corr or response_sequence <= conn.pair_response:
        return False
    conn.pair_corr = corr
    conn.pair_response = response_sequence
    conn.matched += 1
    return True


cdef int _kind_frame(_Connection conn, _Half half, const unsigned char *payload, Py_ssize_t captured,
                     int32_t size, bint request_like, int64_t last_ts) except -1:
    # payload holds `captured` bytes of the frame's `size` (fewer when a gap or the snap
    # length cut it): only those are read (see the twin's _kind_frame)
    cdef _Half other = conn.half(1 - half.side)
    cdef int32_t corr = <int32_t>kp_load_be32(payload) if captured >= 4 else -1
    cdef bint as_request = request_like and (conn.client_side == -1 or conn.client_side == half.side)
    cdef bint as_response = conn.client_side != half.side
    cdef int32_t request_corr = <int32_t>kp_load_be32(payload + 4) if as_request else -1
    cdef uint16_t api_key, api_version
    cdef int64_t answer
    if as_request:
        api_key = kp_load_be16(payload)
        api_version = kp_load_be16(payload + 2)
        if api_key == API_KEY_SASL_HANDSHAKE or api_key == API_KEY_API_VERSIONS:
            half.hello_corr = request_corr
        if api_key == API_KEY_SASL_HANDSHAKE and api_version == SASL_RAW_TOKENS_HANDSHAKE_VERSION \
                and half.sequence < 8:     # (the direction unknown: this request says who the client is)
            half.sasl = True
            half.sasl_corr = request_corr
            held = _handshake_held(conn, half.side, request_corr)
            if held:
                half.sasl_corr = -1     # its response came first: the broker's tokens follow it
                other.sasl = held == 1
                other.handshake_first = request_corr if held == 2 else -1
    if as_response and other.sasl_corr >= 0 and corr == other.sasl_corr and captured >= 6:
        other.sasl_corr = -1
        if kp_load_be16(payload + 4) == 0:
            half.sasl = True
        else:
            other.sasl = False
    if conn.kind != KIND_UNKNOWN_:
        return 0
    if corr == -2 and ((size == 8 and captured == 8 and <int32_t>kp_load_be32(payload + 4) == 11) or size == 16):
        _not_kafka(conn, KIND_ZOOKEEPER_)
        return 0
    if as_response and corr >= 0 and _pair_counts(conn, corr, half.sequence, other.count_corr(corr)):
        if corr == other.hello_corr or conn.matched >= 2 or conn.direction_source == 0:
            conn.kind = KIND_KAFKA_
            return 0
    answer = _answered_already(conn, half.side, request_corr, last_ts) if as_request else -1
    if answer >= 0 and _pair_counts(conn, request_corr, answer, half.count_corr(request_corr) + 1):
        # the pair in the other order: its response was confirmed first (see the twin)
        if conn.client_side < 0:
            conn.client_side = half.side
            conn.direction_source = 2
        if conn.matched >= 2 or conn.direction_source == 0:
            conn.kind = KIND_KAFKA_
            return 0
    if as_request:
        half.run = half.run + 1 if half.run and request_corr > half.run_corr else 1
        half.run_corr = request_corr
        if half.run >= RUN_TO_CONFIRM:
            conn.kind = KIND_KAFKA_
    else:
        half.run = 0
    return 0


cdef int _kind_held(_Connection conn, int64_t held_limit) except -1:
    if conn.kind == KIND_UNKNOWN_ and (len(conn.undecided) >= HELD_FRAMES or conn.held_bytes > held_limit):
        _kind_end(conn)
    return 0


cdef int _kind_end(_Connection conn) except -1:
    if conn.kind != KIND_UNKNOWN_:
        return 0
    if conn.matched or conn.direction_source == 0:
        conn.kind = KIND_KAFKA_
    elif conn.h0.c[H_STREAM_BYTES] or conn.h1.c[H_STREAM_BYTES]:
        _not_kafka(conn, KIND_OTHER_)
    else:
        _not_kafka(conn, KIND_EMPTY_)
    return 0


cdef int _not_kafka(_Connection conn, int kind) except -1:
    cdef _Half half
    cdef object k
    conn.kind = kind
    conn.undecided = []
    conn.held_bytes = 0
    for half in (conn.h0, conn.h1):
        half.c[H_OTHER_BYTES] += (half.c[H_FRAME_BYTES] + half.c[H_SKIPPED_BYTES] + half.c[H_TAIL_BYTES]
                                  + half.c[H_SASL_BYTES] + half.length)
        for k in (H_FRAMES, H_FRAME_BYTES, H_SKIPPED_BYTES, H_TAIL_BYTES, H_SASL_TOKENS, H_SASL_BYTES):
            half.c[<int>k] = 0
        half.drop(half.length)
        half.synced = True
        half.cut_end = -1
    return 0


cdef int _unproved_hold(Framer fr, _Connection conn, _Half half, int64_t sequence, int64_t first_ts,
                        int64_t last_ts, int32_t size, Py_ssize_t captured,
                        const unsigned char *payload) except -1:
    # A response about to be emitted: 1 when it is held instead, as a weak chain's frame or after
    # a SaslHandshake response (see the twin, in kproto/_py/capture_connections.py).
    return (_weak_hold(fr, conn, half, sequence, first_ts, last_ts, size, captured, payload)
            or _handshake_hold(fr, conn, half, sequence, first_ts, last_ts, size, captured, payload))


cdef int _weak_hold(Framer fr, _Connection conn, _Half half, int64_t sequence, int64_t first_ts,
                    int64_t last_ts, int32_t size, Py_ssize_t captured, const unsigned char *payload) except -1:
    # A response about to be emitted: 1 when it is a frame of a weak chain (half.weak), held; the next
    # response decides them (_weak_settle; see the twin).
    cdef list entry = None
    cdef int64_t chain = -1
    if not half.weak:
        return 0
    for candidate in half.weak:
        if candidate[0] == sequence:
            entry = candidate
            chain = entry[2]
            break
    if half.weak[0][2] != chain:
        _weak_settle(fr, conn, half, <int32_t>kp_load_be32(payload) if captured >= 4 else -1, chain)
    if entry is None or half.unproved_corr >= 0:
        return 0
    entry[3] = (sequence, first_ts, last_ts, size, PyBytes_FromStringAndSize(<const char *>payload, captured))
    return 1


cdef int _weak_settle(Framer fr, _Connection conn, _Half half, int32_t corr, int64_t keep) except -1:
    # The held frames of the weak chains before the one ending at keep, decided by the id of the
    # response after them (-1: none) and by the requests captured after them: those with a higher
    # id are no frames (see the twin).
    cdef bytes payload
    cdef const unsigned char *p
    cdef int32_t held_corr
    for _, at, chain, held in half.weak:
        if chain == keep or held is None:
            continue
        payload = held[4]
        p = <const unsigned char *><char *>payload
        held_corr = _held_corr(payload)
        if 0 <= corr < held_corr or _sent_lower_after(conn.half(1 - half.side), held_corr, held[2]):
            _weak_disproved(half, len(payload), at)
        elif not _handshake_hold(fr, conn, half, held[0], held[1], held[2], held[3], len(payload), p):
            fr._emit(conn, half.side, held[0], held[1], held[2], held[3], len(payload), p)
    half.weak = [entry for entry in half.weak if entry[2] == keep]
    return 0


cdef list _chained_to(Framer fr, _Connection conn, _Half half, Py_ssize_t i, int hops):
    # The whole frames in buf that chain to the strong candidate at i a hole cut: from the first
    # offset whose plausible headers, each at the size the one before announced (at most hops;
    # responses' ids never falling), land exactly on i (see the twin).
    cdef const unsigned char *buf = half.data()
    cdef Py_ssize_t start, at
    cdef Py_ssize_t links[RESPONSE_CHAIN_CONFIRMS]
    cdef int32_t corrs[RESPONSE_CHAIN_CONFIRMS + 1]
    cdef int n, k
    cdef int32_t size
    cdef bint answers = conn.client_side != -1 and conn.client_side != half.side
    hops = min(hops, RESPONSE_CHAIN_CONFIRMS)
    for start in range(i - 7):
        n = 0
        at = start
        while at < i and n < hops and fr._header_ok(conn, half, buf + at, half.length - at) == 1:
            links[n] = at
            n += 1
            at += 4 + <int32_t>kp_load_be32(buf + at)
        if at != i or n == 0:
            continue
        for k in range(n):
            corrs[k] = <int32_t>kp_load_be32(buf + links[k] + 4)
        corrs[n] = <int32_t>kp_load_be32(buf + i + 4)
        if answers and not _in_order(corrs, n + 1, n + 1):
            continue
        frames = []
        for k in range(n):
            size = <int32_t>kp_load_be32(buf + links[k])
            frames.append((size, PyBytes_FromStringAndSize(<const char *>buf + links[k] + 4, size),
                           half.captured_at(half.buf_pos + links[k]),
                           half.captured_at(half.buf_pos + links[k] + 3 + size), half.buf_pos + links[k]))
        return frames
    return []


cdef bint _sent_lower_after(_Half requests, int32_t corr, int64_t ts) noexcept:
    # Did the client send a request with a lower id than corr, captured whole after ts? (A client
    # numbers its requests upwards: a response's id is no higher than those sent after it.)
    cdef int k
    for k in range(requests.corr_count):
        if 0 <= requests.corrs[k] < corr and requests.corr_ends[k] > ts:
            return True
    return False


cdef void _weak_disproved(_Half half, Py_ssize_t captured, int64_t at) noexcept:
    # A weak chain's frame from stream offset at is no frame: its bytes count as skipped, and it
    # takes no sequence number.
    half.c[H_FRAMES] -= 1
    half.c[H_FRAME_BYTES] -= 4 + captured
    if at + 4 + captured <= half.mark_pos:
        half.early[0] -= 1
        half.early[1] -= 4 + captured
    half.count_skipped(4 + captured, at)
    half.held_not_frames += 1


cdef int _handshake_hold(Framer fr, _Connection conn, _Half half, int64_t sequence, int64_t first_ts,
                         int64_t last_ts, int32_t size, Py_ssize_t captured,
                         const unsigned char *payload) except -1:
    # A response about to be emitted: 1 when it is held unproved instead, after a whole
    # successful SaslHandshake response whose request was not captured (see the twin, in
    # kproto/_py/capture_connections.py: this needs the Framer, declared before this file).
    cdef _Half other = conn.half(1 - half.side)
    cdef int32_t corr = <int32_t>kp_load_be32(payload) if captured >= 4 else -1
    cdef bytes framed
    if half.unproved_corr >= 0:
        half.unproved.append((sequence, first_ts, last_ts, size,
                              PyBytes_FromStringAndSize(<const char *>payload, captured)))
        if corr >= 0 and other.has_corr(corr):
            _unproved_settle(fr, conn, half, len(half.unproved) - 1)
        elif len(half.unproved) > UNPROVED_FRAMES:     # too many held: emitted as before
            _unproved_settle(fr, conn, half, -1)
        return 1
    if (half.sasl or corr < 0 or captured != size or captured < 6
            or (other.has_corr(corr) and corr != half.handshake_first) or kp_load_be16(payload + 4) != 0):
        return 0
    framed = size.to_bytes(4, "big", signed=True) + PyBytes_FromStringAndSize(<const char *>payload, captured)
    if _handshake_answer(<const unsigned char *><char *>framed, 4 + captured, corr):
        half.unproved_corr = corr
    return 0


cdef inline int32_t _held_corr(bytes payload) noexcept:
    return <int32_t>kp_load_be32(<const unsigned char *><char *>payload) if len(payload) >= 4 else -1


cdef int _unproved_settle(Framer fr, _Connection conn, _Half half, Py_ssize_t proof) except -1:
    # The held responses up to `proof` (-1: every one) decided: the ids rising from the
    # handshake's to the proof's are emitted, the others are raw tokens; the ones after the
    # proof stay held (see the twin).
    cdef list held = half.unproved
    cdef int64_t top = _held_corr(held[proof][4]) if proof >= 0 else (<int64_t>1 << 31)
    cdef int64_t before = half.unproved_corr
    cdef int32_t corr
    cdef Py_ssize_t k
    cdef bytes payload
    for k in range(proof + 1 if proof >= 0 else len(held)):
        payload = held[k][4]
        corr = _held_corr(payload)
        if k == proof or before < corr < top:
            before = corr
            fr._emit(conn, half.side, held[k][0], held[k][1], held[k][2], held[k][3], len(payload),
                     <const unsigned char *><char *>payload)
        else:
            _unproved_token(half, len(payload))
    half.unproved_corr = -1
    half.unproved = held[proof + 1:] if proof >= 0 else []
    return 0


cdef void _unproved_token(_Half half, Py_ssize_t captured) noexcept:
    # A held response never proved: a raw SASL token, not a frame.
    half.c[H_FRAMES] -= 1
    half.c[H_FRAME_BYTES] -= 4 + captured
    half.c[H_SASL_TOKENS] += 1
    half.c[H_SASL_BYTES] += 4 + captured
    half.held_not_frames += 1


cdef int _unproved_end(Framer fr, _Connection conn) except -1:
    # The connection ended (its requests all read): see the twin.
    cdef _Half half, other
    cdef Py_ssize_t k
    cdef int32_t corr
    for half in (conn.h0, conn.h1):
        _weak_settle(fr, conn, half, -1, -1)     # no response after them: the requests after them decide
        other = conn.half(1 - half.side)
        for k in range(len(half.unproved) - 1, -1, -1):
            corr = _held_corr(half.unproved[k][4])
            if corr >= 0 and other.has_corr(corr):
                _unproved_settle(fr, conn, half, k)
                break
        for held in half.unproved:
            _unproved_token(half, len(held[4]))
        half.unproved = []
        half.unproved_corr = -1
    return 0

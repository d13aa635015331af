# Included by _capture.pyx: Kafka frames out of a direction's byte stream (twin:
# kproto/_py/capture_framer.py). A frame is an int32 size and that many bytes; where a
# stream's start was not captured or a gap cut a frame, the framer scans for the next
# plausible frame header (resync). It also decides which side of a connection is the
# client, and holds the output batch the frames are copied into.


cdef class _Framer:
    """Frames out of each direction's stream into the output batch (settings: Engine)."""
    cdef int16_t *versions           # highest plausible request version per api key
    cdef Py_ssize_t n_versions
    cdef readonly int64_t max_frame_size
    cdef int64_t held_limit          # held bytes of an unconfirmed connection (_capture_kinds.pxi)
    cdef Py_ssize_t batch_frames, batch_bytes
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

    def __dealloc__(self):
        free(self.versions)
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
        cdef bint have_first, request_like
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
            if half.sasl and 0 <= size <= self.max_frame_size:
                token = _sasl_token(self, conn, half, size)
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
            request_like = self._request_ok(buf + 4, size, size)
            _kind_frame(conn, half, buf + 4, size, request_like)
            if conn.kind > KIND_KAFKA_:
                continue    # this frame showed another protocol: its bytes went with the rest
            half.c[H_FRAMES] += 1
            half.c[H_FRAME_BYTES] += 4 + size
            if request_like:
                half.add_corr(<int32_t>kp_load_be32(buf + 8))
                conn.request_like[half.side] += 1
            if conn.client_side < 0 or conn.kind != KIND_KAFKA_ or conn.undecided:
                self._infer(conn, half, half.sequence, first_ts, last_ts, size,
                            PyBytes_FromStringAndSize(<const char *>buf + 4, size))
            else:
                self._emit(conn, half.side, half.sequence, first_ts, last_ts, size, buf + 4)
            half.sequence += 1
            half.drop(4 + size)

    cdef int _infer(self, _Connection conn, _Half half, int64_t sequence, int64_t first_ts, int64_t last_ts,
                    int32_t size, bytes payload) except -1:
        conn.undecided.append((half.side, sequence, first_ts, last_ts, size, payload))
        conn.held_bytes += size
        cdef _Half other = conn.half(1 - half.side)
        if conn.client_side < 0:
            if size >= 4 and other.has_corr(<int32_t>kp_load_be32(<const unsigned char *><char *>payload)):
                self._decide(conn, 1 - half.side, 2)
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
        return self._decide(conn, side, 3)

    cdef int _decide(self, _Connection conn, int client_side, int source) except -1:
        conn.client_side = client_side
        conn.direction_source = source
        return 0

    cdef int _release(self, _Connection conn) except -1:
        """Emit the held frames once the direction is known and the connection is Kafka."""
        cdef bytes payload
        if conn.client_side < 0 or conn.kind != KIND_KAFKA_ or not conn.undecided:
            return 0
        for side, sequence, first_ts, last_ts, size, payload in conn.undecided:
            self._emit(conn, side, sequence, first_ts, last_ts, size, <const unsigned char *><char *>payload)
        conn.undecided = []
        conn.held_bytes = 0
        return 0


cdef object _copy_array(void *src, Py_ssize_t n, dtype):
    out = np.empty(n, dtype=dtype)
    memcpy(<void *><size_t>out.ctypes.data, src, n * out.itemsize)
    return out

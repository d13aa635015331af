# Included by _capture.pyx: the output batch the Framer copies frames into (_capture_framer.pxi).
# Columns grow as rows come; take() hands them out as numpy arrays and starts a new batch
# (the twin keeps lists in Framer.out, kproto/_py/capture_framer.py).


@cython.final
cdef class _FrameBatch:
    """Frames found since the last take: one row each, their payloads back to back."""
    cdef Py_ssize_t batch_frames, batch_bytes   # a batch is ready at either
    cdef Py_ssize_t n_out, out_capacity
    cdef int64_t *o_conn
    cdef int8_t *o_dir
    cdef int64_t *o_seq
    cdef int64_t *o_first
    cdef int64_t *o_last
    cdef int32_t *o_size
    cdef int32_t *o_captured         # payload bytes held (the size, or fewer when a gap cut the frame)
    cdef object out_data             # numpy uint8 array
    cdef unsigned char *out_ptr
    cdef Py_ssize_t out_len, out_data_capacity

    def __init__(self, Py_ssize_t batch_frames, Py_ssize_t batch_bytes):
        self.batch_frames = batch_frames
        self.batch_bytes = batch_bytes
        self._new_output()

    def __dealloc__(self):
        free(self.o_conn)
        free(self.o_dir)
        free(self.o_seq)
        free(self.o_first)
        free(self.o_last)
        free(self.o_size)
        free(self.o_captured)

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
        self.o_captured = <int32_t *>_grow(self.o_captured, cap * 4)
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

    cdef int add(self, int64_t connection_id, int8_t direction, int64_t sequence, int64_t first_ts,
                 int64_t last_ts, int32_t size, Py_ssize_t captured, const unsigned char *payload) except -1:
        # a row: `captured` payload bytes of a frame of `size` (fewer when a gap cut it)
        cdef Py_ssize_t i = self.n_out
        if i >= self.out_capacity:
            self._grow_rows()
        self._reserve_data(captured)
        self.o_conn[i] = connection_id
        self.o_dir[i] = direction
        self.o_seq[i] = sequence
        self.o_first[i] = first_ts
        self.o_last[i] = last_ts
        self.o_size[i] = size
        self.o_captured[i] = <int32_t>captured
        memcpy(self.out_ptr + self.out_len, payload, captured)
        self.out_len += captured
        self.n_out = i + 1
        return 0

    cdef inline bint ready(self) noexcept:
        return self.n_out >= self.batch_frames or self.out_len >= self.batch_bytes

    cdef object take(self):
        # the rows as numpy columns plus payload_offsets / payload_data, or None; a new batch starts
        cdef Py_ssize_t n = self.n_out
        if n == 0:
            return None
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(_copy_array(self.o_captured, n, np.int32), out=offsets[1:])
        batch = {
            "connection_id": _copy_array(self.o_conn, n, np.int64),
            "direction": _copy_array(self.o_dir, n, np.int8),
            "sequence": _copy_array(self.o_seq, n, np.int64),
            "ts_first_ns": _copy_array(self.o_first, n, np.int64),
            "ts_last_ns": _copy_array(self.o_last, n, np.int64),
            "size": _copy_array(self.o_size, n, np.int32),
            "payload_offsets": offsets,
            "payload_data": self.out_data[: self.out_len],
        }
        self._new_output()
        return batch

# Part of _batch.pyx (included there; one module split by responsibility).
# Column memory: the arrays the header pass fills, pooled and grown without copies where the
# platform allows (kp_platform.h).

# ------------------------------------------------------------------ column memory
cdef class CBuffer:
    """Column memory owned by a Python object and exported with the buffer protocol.

    On Linux columns are anonymous memory maps asking for huge pages: a million
    frames write tens of megabytes of fresh columns, and 4 KiB page faults would
    cost more than decoding. They grow and shrink by remapping (pages move, bytes
    are not copied). Elsewhere they are malloc/realloc blocks (kp_platform.h).
    Either way they go to numpy / Arrow without a copy.
    """
    cdef char *data
    cdef Py_ssize_t length
    cdef size_t mapped         # 0: not owned (the shared zeros)
    cdef Py_ssize_t shape[1]

    def __dealloc__(self):
        if self.data != NULL and self.mapped:
            pool_put(self.data, self.mapped)

    def __getbuffer__(self, Py_buffer *view, int flags):
        if not self.mapped and flags & PyBUF_WRITABLE:
            raise BufferError("a column of shared zeros is read-only")
        self.shape[0] = self.length
        view.buf = self.data
        view.obj = self
        view.len = self.length
        view.readonly = 0 if self.mapped else 1
        view.itemsize = 1
        view.format = "B"
        view.ndim = 1
        view.shape = self.shape
        view.strides = NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer *view):
        pass

    def __len__(self):
        return self.length


# One read-only anonymous map, never written: every page of it is the kernel's zero
# page, so columns that are all zero cost neither memory nor writes. Address space
# only; kept for the life of the process (arrays may point into it).
cdef size_t ZERO_MAP_BYTES = (<size_t>1) << 30
cdef void *zero_map_ptr = NULL


cdef void *zero_map() noexcept:
    global zero_map_ptr
    cdef void *p
    if zero_map_ptr == NULL:
        p = kp_zero_map(ZERO_MAP_BYTES)
        if p != NULL:
            zero_map_ptr = p
    return zero_map_ptr


cdef CBuffer take_zeros(Py_ssize_t length):
    cdef CBuffer b = CBuffer.__new__(CBuffer)
    b.data = <char *>zero_map_ptr
    b.length = length
    b.mapped = 0
    return b


cdef CBuffer take_buffer(void *data, Py_ssize_t length, size_t mapped):
    cdef CBuffer b = CBuffer.__new__(CBuffer)
    b.data = <char *>data
    b.length = length
    b.mapped = mapped
    return b


cdef inline size_t page_round(size_t n) noexcept nogil:
    return (n + 4095) & ~(<size_t>4095) if n else 4096


# Freed column maps are kept for the next call (up to a bound): fresh pages cost a
# fault and a kernel zeroing each, and that would be most of a header-only decode.
# The pool is touched only with the GIL held (allocation before the loop, and
# CBuffer deallocation).
cdef enum:
    POOL_SLOTS = 64
cdef size_t POOL_MAX_BYTES = (<size_t>256) << 20
cdef void *pool_ptr[POOL_SLOTS]
cdef size_t pool_size[POOL_SLOTS]
cdef size_t pool_total = 0
memset(pool_ptr, 0, sizeof(pool_ptr))
memset(pool_size, 0, sizeof(pool_size))


cdef void pool_put(void *p, size_t size) noexcept:
    global pool_total
    cdef int k
    if pool_total + size <= POOL_MAX_BYTES:
        for k in range(POOL_SLOTS):
            if pool_ptr[k] == NULL:
                pool_ptr[k] = p
                pool_size[k] = size
                pool_total += size
                return
    kp_column_free(p, size)


cdef void *pool_take(size_t want, size_t *got) noexcept:
    """A pooled map of at least ``want`` bytes (or the largest one, to be grown); NULL if none."""
    global pool_total
    cdef int k, best = -1
    cdef void *p
    for k in range(POOL_SLOTS):
        if pool_ptr[k] == NULL:
            continue
        if best < 0:
            best = k
        elif pool_size[best] < want:
            if pool_size[k] > pool_size[best]:
                best = k
        elif want <= pool_size[k] < pool_size[best]:
            best = k
    if best < 0:
        return NULL
    p = pool_ptr[best]
    got[0] = pool_size[best]
    pool_ptr[best] = NULL
    pool_total -= pool_size[best]
    return p


cdef void *pool_map(size_t want, size_t *got) noexcept:
    """A map of at least ``want`` bytes (page-rounded; its size in got), from the pool
    where it has one, grown if need be (GIL held): NULL when out of memory."""
    cdef void *p = pool_take(want, got)
    cdef void *grown
    if p == NULL:
        got[0] = 0
    if got[0] < want:
        grown = map_resize(p, got[0], want)
        if grown == NULL:
            if p != NULL:
                pool_put(p, got[0])
            return NULL
        p = grown
        got[0] = want
    return p


cdef int columns_from_pool(Columns *c, size_t *mapped, Py_ssize_t capacity) noexcept:
    """Start the columns from pooled maps where there are some (GIL held)."""
    cdef void **slots = column_slots(c)
    cdef int k
    cdef size_t got
    cdef void *p
    for k in range(NCOLUMNS):
        if slots[k] == NULL:
            p = pool_take(page_round(capacity * ELEMENT_SIZE[k]), &got)
            if p != NULL:
                slots[k] = p
                mapped[k] = got
    return 0


cdef void *map_resize(void *p, size_t old_bytes, size_t new_bytes) noexcept nogil:
    """Map (p NULL) or remap a column to new_bytes (page-rounded); NULL when out of memory."""
    return kp_column_resize(p, old_bytes, new_bytes)


cdef enum:
    NCOLUMNS = 13

# Element size of each column, in the order of the Columns struct's pointers.
cdef Py_ssize_t ELEMENT_SIZE[NCOLUMNS]
ELEMENT_SIZE[:] = [8, 4, 1, 2, 2, 4, 4, 4, 1, 4, 4, 1, 1]
# The columns a plain request leaves zero (see clear_zero_columns_of).
cdef bint ZERO_COLUMN[NCOLUMNS]
ZERO_COLUMN[:] = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0]
COLUMN_NAMES = ("offset", "size", "header_version", "api_key", "api_version", "correlation_id",
                "client_id", "tag_count", "status", "error_offset", "body_offset", "direction",
                "present")
COLUMN_TYPES = (np.int64, np.int32, np.int8, np.int16, np.int16, np.int32, np.int32, np.int32,
                np.uint8, np.int32, np.int32, np.int8, np.uint8)


cdef inline void **column_slots(Columns *c) noexcept nogil:
    return <void **>c


cdef int columns_resize(Columns *c, size_t *mapped, Py_ssize_t capacity) noexcept nogil:
    """Map or remap every column to hold ``capacity`` frames; -1 when out of memory."""
    cdef void **slots = column_slots(c)
    cdef void *p
    cdef size_t want
    cdef int k
    for k in range(NCOLUMNS):
        want = page_round(capacity * ELEMENT_SIZE[k])
        p = map_resize(slots[k], mapped[k], want)
        if p == NULL:
            return -1
        slots[k] = p
        mapped[k] = want
    return 0


cdef void columns_free(Columns *c, size_t *mapped) noexcept nogil:
    cdef void **slots = column_slots(c)
    cdef int k
    for k in range(NCOLUMNS):
        if slots[k] != NULL:
            kp_column_free(slots[k], mapped[k])
        slots[k] = NULL


cdef extern from "kp_flags.h" nogil:
    uint8_t kp_split_flags(const uint8_t *flags, int64_t n, uint8_t **bitmaps)

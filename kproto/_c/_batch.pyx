# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The batch decoder's loops in C: frames to column buffers, without a Python object per frame.

Two passes, both without the GIL:

* the **header pass** reads every frame's header into plain C arrays (the
  columns of ``kproto.arrow.frames``) and finds each body;
* the **JSON pass** (optional) walks the message codec's compiled plans over each
  body and writes JSON text straight from the bytes: the same shape as
  ``Message.to_dict()``, with no Python object per field.

A bad frame never raises: it gets a status code and an error offset, and the
loop goes on. ``kproto/arrow/frames.py`` turns the arrays into Arrow; the pure twin is
``kproto/_py/batch.py``.
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memcpy, memset, strlen
from libc.stdio cimport snprintf

# Column memory: mmap/mremap on Linux, malloc/realloc elsewhere (kp_platform.h).
cdef extern from "kp_platform.h" nogil:
    void *kp_zero_map(size_t bytes)
    void *kp_column_resize(void *p, size_t old_bytes, size_t new_bytes)
    void kp_column_free(void *p, size_t bytes)

from kproto._c._wire cimport *
from kproto._c._buffer cimport kp_load_be16, kp_load_be32, kp_load_be64, kp_load_le64, kp_load_be_double
from kproto._c._codec cimport (
    CPlan, FieldOp, native_plan,
    K_BOOL, K_INT8, K_INT16, K_INT32, K_INT64, K_UINT16, K_UINT32, K_FLOAT64, K_UUID,
    K_STRING, K_BYTES, K_RECORDS, K_STRUCT, K_ARRAY,
)

import json as _json

import numpy as np

from kproto import schema
from kproto._common.batch import Status  # no-cython-lint: a module name, as in the twin (check_stubs)
from kproto.schema import _plain

IMPLEMENTATION = "c"

# Status numbers (ST_*) come from the wire layer, checked there against kproto._common.batch.Status.
from kproto._c._wire import STATUS_NUMBERS  # no-cython-lint: a module name, as in the twin

cdef enum:
    MAX_KEY = 256
    MAX_VERSION = 64
    MAX_DEPTH = 64


# ------------------------------------------------------------------ protocol facts as C tables
# Per API key and direction (0 request, 1 response): valid versions, deprecated
# versions (KIP-896) and the lowest version Kafka 4.x defines; -1 where none.
cdef int16_t valid_lo[2][MAX_KEY]
cdef int16_t valid_hi[2][MAX_KEY]
cdef int16_t deprecated_lo[2][MAX_KEY]
cdef int16_t deprecated_hi[2][MAX_KEY]
cdef int16_t min_4x[2][MAX_KEY]


cdef void load_tables():
    cdef int d, key
    for d in range(2):
        for key in range(MAX_KEY):
            valid_lo[d][key] = -1
            valid_hi[d][key] = -2
            deprecated_lo[d][key] = -1
            deprecated_hi[d][key] = -2
            min_4x[d][key] = -1
    for info in schema.MESSAGES.values():
        if info["type"] not in ("request", "response") or info["api_key"] is None:
            continue
        d = 0 if info["type"] == "request" else 1
        key = info["api_key"]
        if not 0 <= key < MAX_KEY:
            continue
        valid_lo[d][key], valid_hi[d][key] = info["valid_versions"]
        # A response shares its request's deprecation (KIP-896 deprecates the exchange).
        for src in (info, schema.MESSAGES.get(schema.request_name(key) or "", info)):
            if src["deprecated_versions"] is not None:
                deprecated_lo[d][key], deprecated_hi[d][key] = src["deprecated_versions"]
                break
        if info["min_version_4x"] is not None:
            min_4x[d][key] = info["min_version_4x"]


# One byte per (direction, api_key, version) for the hot loop: header version and
# the API checks in a single load.
cdef enum:
    I_HEADER_VERSION = 3   # mask: 0, 1 or 2
    I_KNOWN = 4            # the API has a schema
    I_VALID = 8            # ... and this version is one of its valid versions
    I_DEPRECATED = 16
    I_REMOVED = 32

cdef uint8_t info_table[2][MAX_KEY][MAX_VERSION]


cdef uint8_t compute_info(int d, int key, int version) noexcept nogil:
    cdef uint8_t info = <uint8_t>(request_header_version(key, version) if d == 0
                                  else response_header_version(key, version))
    if key < 0 or key >= MAX_KEY or valid_lo[d][key] < 0:
        return info
    info |= I_KNOWN
    if version < valid_lo[d][key] or version > valid_hi[d][key]:
        return info
    info |= I_VALID
    if deprecated_lo[d][key] <= version <= deprecated_hi[d][key]:
        info |= I_DEPRECATED
    if version < min_4x[d][key]:
        info |= I_REMOVED
    return info


cdef inline uint8_t version_info(int d, int key, int version) noexcept nogil:
    if 0 <= key < MAX_KEY and 0 <= version < MAX_VERSION:
        return info_table[d][key][version]
    return compute_info(d, key, version)


cdef void load_info_table():
    cdef int d, key, version
    for d in range(2):
        for key in range(MAX_KEY):
            for version in range(MAX_VERSION):
                info_table[d][key][version] = compute_info(d, key, version)


load_tables()


load_info_table()
assert all(info["valid_versions"][1] < MAX_VERSION for info in schema.MESSAGES.values())


include "_batch_ids.pxi"
include "_batch_scan.pxi"
include "_batch_columns.pxi"


# ------------------------------------------------------------------ the driver
def count_frames(data, Py_ssize_t max_frame_size):
    """(frames, bytes framed) of a buffer of size-prefixed frames.

    A frame is counted when its 4-byte prefix is complete; counting stops after a
    size that is negative or above max_frame_size, or a frame cut short by the
    end of the buffer (both are rows, with a status). Bytes framed: up to the end
    of the last complete frame.
    """
    cdef Py_buffer view
    cdef Py_ssize_t pos = 0, n = 0, framed = 0
    cdef int32_t size
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const unsigned char *buf = <const unsigned char *>view.buf
    cdef Py_ssize_t length = view.len
    try:
        with nogil:
            while length - pos >= 4:
                size = <int32_t>kp_load_be32(buf + pos)
                n += 1
                if size < 0 or size > max_frame_size or length - pos - 4 < size:
                    break
                pos += 4 + size
                framed = pos
        return n, framed
    finally:
        PyBuffer_Release(&view)


cdef inline const void *array_ptr(object arr):
    return NULL if arr is None else <const void *><Py_ssize_t>arr.ctypes.data


cdef object id_text_offsets(const int32_t *lengths, Py_ssize_t rows, Py_ssize_t text_size):
    """The client ids' Arrow string offsets (int32, rows + 1) from each row's id length
    (0 for a row without one), in a pooled map; None when the text is past 2 GiB (the
    caller says so)."""
    cdef size_t got
    cdef int32_t *offsets
    cdef int32_t end = 0
    cdef Py_ssize_t k
    if text_size > 0x7FFFFFFF:
        return None
    offsets = <int32_t *>pool_map(page_round((rows + 1) * sizeof(int32_t)), &got)
    if offsets == NULL:
        raise MemoryError()
    offsets[0] = 0
    with nogil:
        for k in range(rows):
            end += lengths[k]
            offsets[k + 1] = end
    return np.frombuffer(take_buffer(offsets, (rows + 1) * sizeof(int32_t), got), dtype=np.int32)


cdef bint wide_offsets(offsets, Py_ssize_t count) except -1:
    """True for int64 offsets, False for int32; ValueError unless there are count + 1."""
    if count < 0 or len(offsets) != count + 1:
        raise ValueError("offsets must hold count + 1 values")
    return offsets.dtype == np.int64


cdef dict hand_over(Columns *c, size_t *mapped, Py_ssize_t rows, bint all_plain):
    """The columns as numpy arrays over their memory (no copy), and the F_* flags split
    into Arrow validity bitmaps. ``all_plain``: the plain loop took every row and never
    wrote the all-zero columns, which become a shared page of zeros where possible."""
    cdef uint8_t *bitmaps[8]
    cdef uint8_t every_frame_has
    cdef void **slots = column_slots(c)
    cols = {}
    for k in range(NCOLUMNS):
        if all_plain and ZERO_COLUMN[k] and rows * ELEMENT_SIZE[k] <= ZERO_MAP_BYTES and zero_map() != NULL:
            pool_put(slots[k], mapped[k])
            owner = take_zeros(rows * ELEMENT_SIZE[k])
        else:
            if all_plain and ZERO_COLUMN[k]:
                # No shared zeros (no mmap on this platform, or too many rows): the
                # plain loop never wrote this column, so it gets its zeros here.
                memset(slots[k], 0, rows * ELEMENT_SIZE[k])
            owner = take_buffer(slots[k], rows * ELEMENT_SIZE[k], mapped[k])
        slots[k] = NULL
        cols[COLUMN_NAMES[k]] = np.frombuffer(owner, dtype=COLUMN_TYPES[k])
    nbytes = (rows + 7) // 8
    arrays = [np.empty(nbytes, np.uint8) for _ in range(8)]
    for k in range(8):
        bitmaps[k] = <uint8_t *>array_ptr(arrays[k])
    cdef const uint8_t *present = <const uint8_t *>array_ptr(cols["present"])
    with nogil:
        every_frame_has = kp_split_flags(present, rows, bitmaps)
    for k in range(8):
        # A validity bitmap with every bit set is no bitmap at all (Arrow: no nulls).
        all_set = (every_frame_has >> k) & 1 and k < 6
        cols[BITMAP_NAMES[k]] = None if all_set else arrays[k]
    return cols


def scan(data, Py_ssize_t count=-1, offsets=None, valid=None, directions=None, request_keys=None,
         request_versions=None, Py_ssize_t max_frame_size=0x7FFFFFFF, int default_direction=0,
         int default_key=-1, int default_version=-1, bint body_offsets=True):
    """Decode the headers of frames into column arrays (see kproto/arrow/frames.py).

    ``offsets`` None: ``data`` holds size-prefixed frames back to back, read in
    one pass (``count`` -1: as many as there are; per-frame inputs need the count).
    Otherwise ``offsets`` (int32 or int64, count + 1 values) delimit payloads in
    ``data``, as an Arrow binary array does, and ``valid`` (uint8 per frame, or
    None) marks null entries. Per-frame inputs are numpy arrays or None (then the
    ``default_*`` value applies to every frame). ``body_offsets`` False: no
    ``body_offset`` column (the header-only decode does not need where bodies start).
    Client ids come as text: ``client_id`` holds each row's id length (0 without one),
    ``client_id_data`` the ids' text in row order and ``client_id_offsets`` its Arrow
    offsets (int32; None past 2 GiB).
    """
    cdef Py_buffer view
    cdef Columns c
    cdef Py_ssize_t i = 0, pos = 0, framed = 0, start, n, capacity, limit
    cdef int32_t size
    cdef IdText ids
    cdef bint wide = False, prefixed = offsets is None, no_memory = False, plain_requests, shared_zeros
    cdef bint zeros_written = False
    cdef Py_ssize_t zero_from = 0
    cdef const int32_t *off32 = NULL
    cdef const int64_t *off64 = NULL
    cdef const uint8_t *validity = <const uint8_t *>array_ptr(valid)
    cdef const int8_t *dirs = <const int8_t *>array_ptr(directions)
    cdef const int16_t *rkeys = <const int16_t *>array_ptr(request_keys)
    cdef const int16_t *rversions = <const int16_t *>array_ptr(request_versions)
    cdef int direction, key, version
    cdef size_t mapped[NCOLUMNS]

    if not prefixed:
        wide = wide_offsets(offsets, count)
        off64 = <const int64_t *>array_ptr(offsets) if wide else NULL
        off32 = NULL if wide else <const int32_t *>array_ptr(offsets)
    elif count < 0 and (dirs != NULL or rkeys != NULL or rversions != NULL):
        raise ValueError("per-frame inputs need the frame count")

    plain_requests = prefixed and dirs == NULL and default_direction == 0
    # Header-only decodes of plain requests do not write the four all-zero columns
    # (tag count, status, error offset, direction) for the rows of the plain loop.
    # While the other rows have zeros there too, the columns end up as a shared
    # page of zeros; from the first row with a value, they are written (see
    # general_row_done).
    shared_zeros = plain_requests and not body_offsets
    memset(&c, 0, sizeof(c))
    memset(mapped, 0, sizeof(mapped))
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const unsigned char *buf = <const unsigned char *>view.buf
    cdef Py_ssize_t length = view.len
    # Requests take at least 12 bytes with their prefix: grow (by remapping) if not.
    capacity = count if count >= 0 else length // 16 + 64
    if id_text_init(&ids, capacity) < 0:
        PyBuffer_Release(&view)
        raise MemoryError()
    columns_from_pool(&c, mapped, capacity)
    try:
        with nogil:
            if columns_resize(&c, mapped, capacity) < 0:
                no_memory = True
            while not no_memory:
                if plain_requests:
                    limit = capacity if count < 0 else min(capacity, count)
                    # Constant flags: one specialized loop each (see scan_plain_requests).
                    if shared_zeros:       # header-only: no body offsets, zeros left to general_row_done
                        i = scan_plain_requests(&c, i, limit, buf, length, &pos, max_frame_size, &ids,
                                                False, False)
                    else:                  # body offsets (for the body passes), zeros block by block
                        i = scan_plain_requests(&c, i, limit, buf, length, &pos, max_frame_size, &ids,
                                                True, True)
                    framed = pos
                if count >= 0 and i >= count:
                    break
                if prefixed and length - pos < 4:
                    break
                if i == capacity:
                    capacity *= 2
                    if columns_resize(&c, mapped, capacity) < 0:
                        no_memory = True
                        break
                if zeros_written and zero_from < i:
                    # a row the plain loop did not take: the plain rows before it get their zeros now
                    clear_zero_columns_of(&c, zero_from, i)
                direction = dirs[i] if dirs != NULL else default_direction
                c.direction[i] = <int8_t>direction
                key = rkeys[i] if rkeys != NULL else default_key
                version = rversions[i] if rversions != NULL else default_version
                if prefixed:
                    size = <int32_t>kp_load_be32(buf + pos)
                    c.offset[i] = pos
                    c.size[i] = size
                    if size < 0 or size > max_frame_size:
                        clear_row(&c, i)
                        fail(&c, i, ST_BAD_LENGTH, -4)
                        if shared_zeros:
                            general_row_done(&c, i, &zeros_written, &zero_from)
                        i += 1
                        break   # no way to find the next frame
                    n = length - pos - 4
                    if n > size:
                        n = size
                    scan_frame(&c, i, buf + pos + 4, n, direction, key, version, &ids)
                    if n < size:
                        # The buffer ends inside this frame, whatever its header said.
                        if c.status[i] != ST_TRUNCATED:
                            fail(&c, i, ST_TRUNCATED, n)
                        c.body_offset[i] = -1
                        if shared_zeros:
                            general_row_done(&c, i, &zeros_written, &zero_from)
                        i += 1
                        break
                    pos += 4 + size
                    framed = pos
                else:
                    start = off64[i] if wide else off32[i]
                    n = (off64[i + 1] if wide else off32[i + 1]) - start
                    c.offset[i] = start
                    c.size[i] = <int32_t>n
                    if (validity != NULL and not validity[i]) or n < 0 or start < 0 or start + n > length:
                        clear_row(&c, i)
                        fail(&c, i, ST_NULL_FRAME if n >= 0 else ST_BAD_LENGTH, 0)
                    else:
                        scan_frame(&c, i, buf + start, n, direction, key, version, &ids)
                if c.status[i] == ST_NO_MEMORY:
                    no_memory = True
                if shared_zeros:
                    general_row_done(&c, i, &zeros_written, &zero_from)
                i += 1
            if zeros_written and zero_from < i:
                clear_zero_columns_of(&c, zero_from, i)
        if no_memory:
            raise MemoryError()
        client_id_text = take_text(&ids)
    except BaseException:
        columns_free(&c, mapped)
        raise
    finally:
        PyBuffer_Release(&view)
        id_text_free(&ids)

    cols = hand_over(&c, mapped, i, shared_zeros and not zeros_written)
    cols["client_id_data"] = client_id_text
    cols["client_id_offsets"] = id_text_offsets(<const int32_t *>array_ptr(cols["client_id"]), i, len(client_id_text))
    cols["count"] = i
    cols["framed"] = framed
    if not body_offsets:
        del cols["body_offset"]     # not kept up to date: nobody may read it
    return cols


include "_batch_json_plans.pxi"
include "_batch_json_out.pxi"
include "_batch_json_walk.pxi"
include "_batch_partitions.pxi"

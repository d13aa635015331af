# Part of _codec.pyx (included there; one module split by responsibility).
# The Check sink's primitives: what the plan walker (_codec_walk.pxi) does with a value
# when it only validates. Each makes the checks of its Build counterpart (the readers of
# _buffer.pxd), in the same order and with the same error, and builds nothing.

cdef inline int skip_fixed(ByteReader *r, Py_ssize_t width) except -1:
    if r.end - r.p < width:
        return reader_need(r, width)
    r.p += width
    return 0


cdef int skip_string(ByteReader *r, bint compact, bint nullable) except -1:
    cdef Py_ssize_t n
    if compact:
        n = read_compact_length(r, nullable, "string length")
    else:
        n = read_length16(r, nullable, "string length")
    if n > 0:
        if not r.prevalidated and not wire_utf8_valid(r.p, n):
            read_str_body(r, n)   # raises the decoder's own error, at the same offset
        r.p += n
    return 0


cdef int skip_length_prefixed(ByteReader *r, bint compact, bint nullable, const char *what) except -1:
    """Bytes and records: a 32-bit or compact length, then that many bytes."""
    cdef Py_ssize_t n
    if compact:
        n = read_compact_length(r, nullable, what)
    else:
        n = read_length32(r, nullable, what)
    if n > 0:
        r.p += n
    return 0


cdef int skip_fixed_array(ByteReader *r, Py_ssize_t n, Py_ssize_t width, PathFrame *frame) except -1:
    cdef Py_ssize_t fit
    if r.end - r.p < width * n:
        # Fail exactly where an element-by-element read would: same offset and index.
        fit = (r.end - r.p) // width
        frame.index = fit
        r.p += width * fit
        raise_truncated(r, width)
    r.p += width * n
    frame.index = -1
    return 0

# generated: begin widths (tools/gen_walkers.py renders it from _kinds.pxi.in: edit that)
cdef Py_ssize_t fixed_width(int kind) noexcept:
    """The size of a fixed-width kind's values, 0 for the others (arrays of them are skipped whole)."""
    if kind == K_INT8 or kind == K_BOOL:
        return 1
    if kind == K_INT16 or kind == K_UINT16:
        return 2
    if kind == K_INT32 or kind == K_UINT32:
        return 4
    if kind == K_INT64 or kind == K_FLOAT64:
        return 8
    if kind == K_UUID:
        return 16
    return 0
# generated: end widths

# Part of _codec.pyx (included there; one module split by responsibility).
# The validating scan: a plan walked over the bytes without building objects (bad input fails at decode).

# ------------------------------------------------------------------ validating scan
# skip_* mirror read_* check for check, in the same order, so that a lazy array
# fails at decode time exactly where (and how) an eager read would.

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


cdef int skip_fixed_array(ByteReader *r, Py_ssize_t n, Py_ssize_t width, PathFrame *frame) except -1:
    cdef Py_ssize_t fit
    if r.end - r.p < width * n:
        fit = (r.end - r.p) // width
        frame.index = fit
        r.p += width * fit
        raise_truncated(r, width)
    r.p += width * n
    return 0


cdef Py_ssize_t fixed_width(int kind) noexcept:
    if kind == K_BOOL or kind == K_INT8:
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


cdef int skip_value(ByteReader *r, FieldOp *op, int kind, bint nullable, PathFrame *frame) except -1:
    cdef Py_ssize_t n, i, width
    cdef int8_t marker
    width = fixed_width(kind)
    if width:
        return reader_need(r, width) if r.end - r.p < width else skip_n(r, width)
    if kind == K_STRING:
        return skip_string(r, op.compact, nullable)
    if kind == K_ARRAY:
        n = read_array_count(r, op.compact, nullable)
        if n <= 0:
            return 0
        width = fixed_width(op.elem_kind)
        if width:
            skip_fixed_array(r, n, width, frame)
        else:
            for i in range(n):
                frame.index = i
                skip_value(r, op, op.elem_kind, False, frame)
        frame.index = -1
        return 0
    if kind == K_STRUCT:
        if nullable:
            marker = read_int8(r)
            if marker == -1:
                return 0
            if marker != 1:
                raise_decode(r, DecodeError, f"invalid nullable struct marker {marker}")
        return skip_struct(r, <CPlan>op.child)
    if kind == K_BYTES or kind == K_RECORDS:
        if op.compact:
            n = read_compact_length(r, nullable, "records length" if kind == K_RECORDS else "bytes length")
        else:
            n = read_length32(r, nullable, "records length" if kind == K_RECORDS else "bytes length")
        if n > 0:
            r.p += n
        return 0
    raise AssertionError(f"unknown field kind {kind}")


cdef inline int skip_n(ByteReader *r, Py_ssize_t n) except -1:
    r.p += n
    return 0


cdef int skip_struct(ByteReader *r, CPlan plan) except -1:
    cdef int depth = r.depth
    if depth >= MAX_PATH_DEPTH:
        raise_decode(r, LimitExceededError, f"structs nested deeper than {MAX_PATH_DEPTH}")
    cdef PathFrame *frame = &r.path[depth]
    frame.name = NULL
    frame.index = -1
    r.depth = depth + 1
    cdef Py_ssize_t i
    cdef FieldOp *op
    for i in range(plan.nfields):
        op = &plan.fields[i]
        frame.name = op.name
        skip_value(r, op, op.kind, op.nullable, frame)
    if plan.flexible:
        skip_tagged(r, plan, frame)
    r.depth = depth
    return 0


cdef int skip_tagged(ByteReader *r, CPlan plan, PathFrame *frame) except -1:
    cdef uint32_t count, k
    cdef WireTag t
    cdef Py_ssize_t j
    cdef const unsigned char *outer_end
    count = read_tagged_count(r, frame)
    t.previous = -1
    for k in range(count):
        read_tag_entry(r, &t)
        j = find_tagged(plan, t.tag)
        if j < 0:
            r.p += t.size
            continue
        outer_end = enter_tagged_value(r, &plan.tagged[j], t.size, frame)
        skip_value(r, &plan.tagged[j], plan.tagged[j].kind, plan.tagged[j].nullable, frame)
        leave_tagged_value(r, outer_end, t.tag, t.size, frame)
    return 0


# ---- the tagged-field section, shared by the eager read and the validating scan
cdef uint32_t read_tagged_count(ByteReader *r, PathFrame *frame) except? 0xFFFFFFFF:
    frame.name = <PyObject *>TAGGED_SECTION
    return read_tag_count(r)


cdef Py_ssize_t find_tagged(CPlan plan, uint32_t tag) noexcept:
    """The index of the plan's tagged field with this tag, or -1 for a tag it does not know."""
    cdef Py_ssize_t j
    for j in range(plan.ntagged):
        if plan.tagged[j].tag == <int>tag:
            return j
    return -1


cdef inline const unsigned char *enter_tagged_value(ByteReader *r, FieldOp *op, uint32_t size,
                                                    PathFrame *frame) noexcept:
    # The value must fit its declared size exactly: read it with the end moved in.
    frame.name = op.name
    cdef const unsigned char *outer_end = r.end
    r.end = r.p + size
    return outer_end


cdef int leave_tagged_value(ByteReader *r, const unsigned char *outer_end, uint32_t tag, uint32_t size,
                            PathFrame *frame) except -1:
    if r.p != r.end:
        raise_decode(r, InvalidLengthError,
                     f"tagged field {tag} declared {size} bytes but its value ended {r.end - r.p} early")
    r.end = outer_end
    frame.name = <PyObject *>TAGGED_SECTION
    return 0


cdef str TAGGED_SECTION = "<tagged fields>"


cdef object read_tagged(ByteReader *r, CPlan plan, object obj, PathFrame *frame, object source):
    cdef char seen[MAX_TAGGED_PER_STRUCT]
    cdef uint32_t count, k
    cdef WireTag t
    cdef Py_ssize_t j
    cdef const unsigned char *outer_end
    cdef dict unknown = None
    count = read_tagged_count(r, frame)
    for j in range(plan.ntagged):
        seen[j] = 0
    t.previous = -1
    for k in range(count):
        read_tag_entry(r, &t)
        j = find_tagged(plan, t.tag)
        if j < 0:
            if unknown is None:
                unknown = {}
            unknown[t.tag] = read_bytes_body(r, t.size)
            continue
        outer_end = enter_tagged_value(r, &plan.tagged[j], t.size, frame)
        value = read_value(r, &plan.tagged[j], plan.tagged[j].kind, plan.tagged[j].nullable, frame, source)
        leave_tagged_value(r, outer_end, t.tag, t.size, frame)
        set_slot(obj, plan.tagged[j].offset, value)
        seen[j] = 1
    for j in range(plan.ntagged):
        if not seen[j]:
            set_slot(obj, plan.tagged[j].offset, fresh_default(&plan.tagged[j]))
    return unknown


cdef inline void prepare(ByteReader *r, CPlan cp):
    plan = cp.plan
    r.root_name = <PyObject *>plan.name
    r.api_key = plan.api_key
    r.api_version = plan.version


cdef int check_consumed(ByteReader *r, object plan) except -1:
    if r.p != r.end:
        r.depth = 0
        raise_decode(r, InvalidLengthError, f"{r.end - r.p} bytes left over after {plan.name}")
    return 0


def decode_struct(buf, plan, Py_ssize_t offset=0, end=None):
    """Decode one message body spanning exactly buf[offset:end]."""
    cdef ByteReader r
    cdef CPlan cp = native_plan(plan)
    cdef Source src = Source(buf)
    reader_init(&r, src.base, src.size)
    if end is not None:
        if end < offset or end > src.size:
            raise ValueError("end out of range")
        r.end = r.start + <Py_ssize_t>end
    if offset < 0 or offset > r.end - r.start:
        raise ValueError("offset out of range")
    r.p = r.start + offset
    prepare(&r, cp)
    obj = read_struct_top(&r, cp, src)
    check_consumed(&r, plan)
    return obj

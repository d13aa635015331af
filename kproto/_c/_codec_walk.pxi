# Part of _codec.pyx (included there; one module split by responsibility).
# The plan walker: one walk over a compiled plan, specialised by Cython for each sink.

# ------------------------------------------------------------------ the walker
# One walker reads every plan: the per-kind dispatch and the struct / array /
# tagged-section recursion are written once, here. What it makes of the bytes is
# the sink's: Cython compiles one specialised copy per sink (`if Sink is ...` is
# decided at compile time, so each copy holds only its own code):
#   Build  the eager read: every value becomes an object (the constructors are in
#          _codec.pyx); a walk leaves what it made in the sink, for its caller to take;
#   Check  validation only: every check Build makes, in the same order and with the
#          same error, and no objects; lazy struct arrays are scanned with it so bad
#          input fails at decode time exactly where (and how) an eager read would.
# The walks return 0 or raise (-1), never an object: a fused return type would make
# Cython test PyErr_Occurred() after every call of the Check copy.
# A new field kind is one row of _kinds.pxi.in, which walk_value below is rendered from.
# (The sinks' types are declared in _codec.pyx, before the Build sink's functions.)

cdef inline int null_value(Sink *s) except -1:
    # What a null array or struct gives.
    if Sink is Build:
        return made(s, None)
    else:
        return 0

# generated: begin codec (tools/gen_walkers.py renders it from _kinds.pxi.in: edit that)
cdef int walk_value(Sink *s, ByteReader *r, FieldOp *op, int kind, bint nullable, PathFrame *frame) except -1:
    """One value of ``kind``, made into an object in the sink (Build) or only checked (Check)."""
    cdef Py_ssize_t n
    cdef int8_t marker
    if kind == K_INT32:
        if Sink is Check:
            return skip_fixed(r, 4)
        else:
            return made(s, int_object(read_int32(r)))
    if kind == K_STRING:
        if Sink is Check:
            return skip_string(r, op.compact, nullable)
        else:
            return made(s, read_string_value(r, op.compact, nullable))
    if kind == K_INT16:
        if Sink is Check:
            return skip_fixed(r, 2)
        else:
            return made(s, int_object(read_int16(r)))
    if kind == K_INT64:
        if Sink is Check:
            return skip_fixed(r, 8)
        else:
            return made(s, int_object(read_int64(r)))
    if kind == K_ARRAY:
        n = read_array_count(r, op.compact, nullable)
        if n < 0:
            return null_value(s)
        return walk_array(s, r, op, n, frame)
    if kind == K_STRUCT:
        if nullable:
            marker = read_int8(r)
            if marker == -1:
                return null_value(s)
            if marker != 1:
                raise_decode(r, DecodeError, f"invalid nullable struct marker {marker}")
        return walk_struct(s, r, <CPlan>op.child)
    if kind == K_INT8:
        if Sink is Check:
            return skip_fixed(r, 1)
        else:
            return made(s, int_object(read_int8(r)))
    if kind == K_BOOL:
        if Sink is Check:
            return skip_fixed(r, 1)
        else:
            return made(s, read_bool(r) != 0)
    if kind == K_UUID:
        if Sink is Check:
            return skip_fixed(r, 16)
        else:
            return made(s, build_uuid(r))
    if kind == K_BYTES:
        if Sink is Check:
            return skip_length_prefixed(r, op.compact, nullable, "bytes length")
        else:
            return made(s, read_bytes_value(r, op.compact, nullable))
    if kind == K_RECORDS:
        if Sink is Check:
            return skip_length_prefixed(r, op.compact, nullable, "records length")
        else:
            return made(s, build_records(r, op.compact, nullable, <object>s.source))
    if kind == K_UINT16:
        if Sink is Check:
            return skip_fixed(r, 2)
        else:
            return made(s, int_object(read_uint16(r)))
    if kind == K_UINT32:
        if Sink is Check:
            return skip_fixed(r, 4)
        else:
            return made(s, PyLong_FromUnsignedLong(read_uint32(r)))
    if kind == K_FLOAT64:
        if Sink is Check:
            return skip_fixed(r, 8)
        else:
            return made(s, read_float64(r))
    raise AssertionError(f"unknown field kind {kind}")
# generated: end codec

cdef int walk_array(Sink *s, ByteReader *r, FieldOp *op, Py_ssize_t n, PathFrame *frame) except -1:
    """The n elements of an array field (its count already read)."""
    cdef Py_ssize_t i, width
    cdef Check check
    if Sink is Check:
        width = fixed_width(op.elem_kind)
        if width:
            return skip_fixed_array(r, n, width, frame)
        for i in range(n):
            frame.index = i
            walk_value(s, r, op, op.elem_kind, False, frame)
        frame.index = -1
        return 0
    else:
        if op.elem_kind == K_STRUCT and not r.prevalidated and not r.eager:
            # Checked now, built on first read (LazyField).
            start = r.p
            for i in range(n):
                frame.index = i
                walk_struct(&check, r, <CPlan>op.child)
            frame.index = -1
            return made(s, pending_struct_array(r, op, n, start, <object>s.source))
        out = PyList_New(n)
        holds_tracked = False
        for i in range(n):
            frame.index = i
            walk_value(s, r, op, op.elem_kind, False, frame)
            holds_tracked |= list_put_made(out, i, s)
        frame.index = -1
        if not holds_tracked:
            untrack(out)
        return made(s, out)


cdef int walk_struct(Sink *s, ByteReader *r, CPlan plan) except -1:
    cdef int depth = r.depth
    cdef PathFrame *frame = enter_struct(r.path, &r.depth)
    if frame == NULL:
        raise_decode(r, LimitExceededError, f"structs nested deeper than {MAX_PATH_DEPTH}")
    cdef Py_ssize_t i
    cdef FieldOp *op
    cdef int kind
    if Sink is Check:
        i = 0
        while i < plan.nfields:
            op = &plan.fields[i]
            if op.run_count > 1 and r.end - r.p >= op.run_width:
                # Fixed-width fields that all fit: nothing in them to check.
                r.p += op.run_width
                i += op.run_count
                continue
            # (a run cut short goes field by field: its error names the field and offset)
            frame.name = op.name
            walk_value(s, r, op, op.kind, op.nullable, frame)
            i += 1
        if plan.flexible:
            walk_tagged(s, r, plan, None, frame)
        r.depth = depth
        return 0
    else:
        obj = new_struct(plan)
        holds_tracked = False   # whether a field's value is tracked by the cyclic GC
        for i in range(plan.nfields):
            op = &plan.fields[i]
            frame.name = op.name
            # The eager read's fast paths: the commonest kinds without walk_value's dispatch.
            kind = op.kind
            if kind == K_INT32:
                set_slot(obj, op.offset, int_object(read_int32(r)))
            elif kind == K_INT16:
                set_slot(obj, op.offset, int_object(read_int16(r)))
            elif kind == K_STRING:
                set_slot(obj, op.offset, read_string_value(r, op.compact, op.nullable))
            elif kind == K_INT64:
                set_slot(obj, op.offset, int_object(read_int64(r)))
            elif kind == K_ARRAY and op.elem_kind == K_INT32:
                set_slot(obj, op.offset, read_int32_array(r, op, frame))
            elif kind == K_RECORDS:
                value = build_records(r, op.compact, op.nullable, <object>s.source)
                holds_tracked |= is_tracked(value)
                set_slot(obj, op.offset, value)
            else:
                # (the fast paths above make ints, str and untracked lists: never tracked)
                walk_value(s, r, op, kind, op.nullable, frame)
                holds_tracked |= made_is_tracked(s, kind)
                set_slot_made(obj, op.offset, s)
        set_absent_defaults(obj, plan)
        if plan.flexible:
            walk_tagged(s, r, plan, obj, frame)
            set_slot_made(obj, plan.unknown_tags_offset, s)
        else:
            set_slot(obj, plan.unknown_tags_offset, None)
        if holds_tracked or others_hold_tracked(obj, plan):
            track(obj)
        r.depth = depth
        return made(s, obj)


cdef int walk_tagged(Sink *s, ByteReader *r, CPlan plan, object obj, PathFrame *frame) except -1:
    """A struct's tagged-field section: known tags into obj, the unknown ones' bytes made (Build)."""
    cdef char seen[MAX_TAGGED_PER_STRUCT]
    cdef uint32_t count, k
    cdef WireTag t
    cdef Py_ssize_t j
    cdef const unsigned char *outer_end
    cdef dict unknown
    count = read_tagged_count(r, frame)
    if Sink is Build:
        unknown = None
        memset(seen, 0, plan.ntagged)
    t.previous = -1
    for k in range(count):
        read_tag_entry(r, &t)
        j = find_tagged(plan, t.tag)
        if j < 0:
            if Sink is Build:
                if unknown is None:
                    unknown = {}
                unknown[t.tag] = read_bytes_body(r, t.size)
            else:
                r.p += t.size
            continue
        outer_end = enter_tagged_value(r, &plan.tagged[j], t.size, frame)
        walk_value(s, r, &plan.tagged[j], plan.tagged[j].kind, plan.tagged[j].nullable, frame)
        if Sink is Build:
            # Into its slot before the size check: nothing is left in the sink if that fails.
            set_slot_made(obj, plan.tagged[j].offset, s)
            seen[j] = 1
        leave_tagged_value(r, outer_end, t.tag, t.size, frame)
    if Sink is Build:
        for j in range(plan.ntagged):
            if not seen[j]:
                set_slot(obj, plan.tagged[j].offset, fresh_default(&plan.tagged[j]))
        return made(s, unknown)
    else:
        return 0


# ---- the tagged-field section's steps
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


# ---- the walker's entry points
cdef object read_struct(ByteReader *r, CPlan plan, object source):
    cdef Build build
    build.source = <PyObject *>source
    build.made = NULL
    walk_struct(&build, r, plan)
    return take_made(&build)


cdef inline void prepare(ByteReader *r, CPlan cp, bint lazy):
    """Set a reader up to decode a body of the plan: its names for errors, and whether
    struct arrays wait for their first read (lazy) or are built as they are met."""
    plan = cp.plan
    r.root_name = <PyObject *>plan.name
    r.api_key = plan.api_key
    r.api_version = plan.version
    r.eager = not lazy


cdef int check_consumed(ByteReader *r, object plan) except -1:
    if r.p != r.end:
        r.depth = 0
        raise_decode(r, InvalidLengthError, f"{r.end - r.p} bytes left over after {plan.name}")
    return 0


def decode_struct(buf, plan, Py_ssize_t offset=0, end=None, *, bint lazy=True):
    """Decode one message body spanning exactly buf[offset:end]; ``lazy=False`` builds its
    struct arrays now instead of on first read (one pass instead of a scan, then a build)."""
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
    prepare(&r, cp, lazy)
    obj = read_struct_top(&r, cp, src)
    check_consumed(&r, plan)
    return obj

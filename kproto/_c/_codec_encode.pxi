# Part of _codec.pyx (included there; one module split by responsibility).
# Writing messages: objects to bytes along a plan (the encoder).

# ------------------------------------------------------------------ encoding
cdef struct EncodeState:
    int depth
    PathFrame path[MAX_PATH_DEPTH]


cdef inline int64_t fast_int(object value, int64_t lo, int64_t hi, const char *type_name) except? -1:
    # Exact ints that fit take the short path; everything else (bools, ints that
    # overflow, wrong types) goes through as_int for the full checks and errors.
    cdef int overflow = 0
    cdef long long v
    if PyLong_CheckExact(value):
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if not overflow and lo <= v <= hi:
            return v
    return as_int(value, lo, hi, type_name)


cdef int is_default(FieldOp *op, object value) except -1:
    cdef object default = <object>op.default
    if op.kind == K_ARRAY:
        if default is None:
            return value is None
        return value is not None and len(value) == 0
    if op.kind <= K_FLOAT64:
        return PyObject_RichCompareBool(value, default, Py_EQ)
    if op.kind == K_STRUCT:
        if default is None or value is None:
            return value is None and default is None
        return value is ABSENT_STRUCT or is_default_struct(value, <object>op.struct_cls)
    return (<object>op.pyop).is_default(value)


cdef int is_default_struct(object value, object cls) except -1:
    """Whether a struct equals ``cls()``: every field at its default, no unknown tags."""
    if type(value) is not cls:
        return 0
    cdef DefaultMaker m = default_maker(cls)
    cdef Py_ssize_t i
    cdef PyObject *field
    cdef int kind
    field = get_slot(value, m.unknown_offset)
    if field != NULL and <object>field:
        return 0
    for i in range(m.n):
        field = get_slot(value, m.offsets[i])
        if field == NULL:
            return 0
        kind = m.kinds[i]
        default = m.defaults[i]
        if kind == K_ARRAY:
            if default is None:
                if <object>field is not None:
                    return 0
            elif <object>field is None or len(<object>field) != 0:
                return 0
        elif kind == K_STRUCT:
            if default is None or <object>field is None:
                if not (default is None and <object>field is None):
                    return 0
            elif <object>field is not ABSENT_STRUCT and not is_default_struct(<object>field, m.children[i]):
                return 0
        elif kind == K_BYTES or kind == K_RECORDS:
            if default is None or <object>field is None:
                if not (default is None and <object>field is None):
                    return 0
            elif bytes(<object>field) != bytes(default):
                return 0
        elif not PyObject_RichCompareBool(<object>field, default, Py_EQ):
            return 0
    return 1


cdef int write_value(ByteWriter *w, FieldOp *op, int kind, bint nullable, object value,
                     EncodeState *st) except -1:
    cdef Py_ssize_t i, n
    cdef PathFrame *frame = &st.path[st.depth - 1]
    if kind == K_INT32:
        return write_int32(w, <int32_t>fast_int(value, INT32_MIN, INT32_MAX, "int32"))
    if kind == K_STRING:
        return write_string_value(w, value, op.compact, nullable)
    if kind == K_INT16:
        return write_int16(w, <int16_t>fast_int(value, INT16_MIN, INT16_MAX, "int16"))
    if kind == K_INT64:
        return write_int64(w, fast_int(value, INT64_MIN, INT64_MAX, "int64"))
    if kind == K_ARRAY:
        if value is None:
            if not nullable:
                raise EncodeError("null array in a non-nullable field")
            return write_length(w, -1, op.compact, True)
        if type(value) is PendingArray:
            # Built and written like any list, never copied: input Kafka reads but never
            # writes (a bool byte of 2, an over-long varint, a tagged field at its default)
            # is written as the twin and Kafka's own codec write it.
            value = materialize(<PendingArray>value)
        if type(value) is not list and not isinstance(value, (list, tuple)):
            raise EncodeError(f"expected a list, got {type(value).__name__}")
        n = PyList_GET_SIZE(value) if type(value) is list else len(value)
        write_length(w, n, op.compact, True)
        if type(value) is list and op.elem_kind == K_INT32:
            writer_reserve(w, 4 * n)
            for i in range(n):
                frame.index = i
                if i >= PyList_GET_SIZE(value):   # shrunk by an __index__ side effect
                    raise EncodeError("list changed size while encoding")
                write_int32(w, <int32_t>fast_int(<object>PyList_GET_ITEM(value, i), INT32_MIN, INT32_MAX,
                                                 "int32"))
        elif type(value) is list:
            for i in range(n):
                frame.index = i
                if i >= PyList_GET_SIZE(value):   # the list shrank under us (a __eq__ side effect?)
                    raise EncodeError("list changed size while encoding")
                write_value(w, op, op.elem_kind, False, <object>PyList_GET_ITEM(value, i), st)
        else:
            for i in range(n):
                frame.index = i
                write_value(w, op, op.elem_kind, False, value[i], st)
        frame.index = -1
        return 0
    if kind == K_STRUCT:
        if value is ABSENT_STRUCT:   # left by a decode: the struct of defaults
            value = new_default_struct(<object>op.struct_cls)
        if nullable:
            if value is None:
                return write_int8(w, -1)
            write_int8(w, 1)
        elif value is None:
            raise EncodeError("null struct in a non-nullable field")
        return write_struct(w, value, <CPlan>op.child, st)
    if kind == K_INT8:
        return write_int8(w, <int8_t>as_int(value, INT8_MIN, INT8_MAX, "int8"))
    if kind == K_BOOL:
        if value is True:
            return write_int8(w, 1)
        if value is False:
            return write_int8(w, 0)
        raise EncodeError(f"expected bool, got {type(value).__name__}")
    if kind == K_UUID:
        return write_uuid(w, value)
    if kind == K_RECORDS and value is not None and hasattr(value, "raw") and not isinstance(value, bytes):
        value = value.raw      # a Records view (either implementation's)
    if kind == K_BYTES or kind == K_RECORDS:
        return write_bytes_value(w, value, op.compact, nullable)
    if kind == K_UINT16:
        return write_int16(w, <int16_t><uint16_t>as_int(value, 0, 0xFFFF, "uint16"))
    if kind == K_UINT32:
        return write_int32(w, <int32_t><uint32_t>as_int(value, 0, 0xFFFFFFFF, "uint32"))
    if kind == K_FLOAT64:
        try:
            return write_float64(w, value)
        except TypeError:
            raise EncodeError(f"expected float, got {type(value).__name__}")
    raise AssertionError(f"unknown field kind {kind}")


cdef object field_value(object obj, FieldOp *op):
    cdef PyObject *v = get_slot(obj, op.offset)
    if v == NULL:
        raise EncodeError(f"field {<str>op.name} is not set")
    return <object>v


cdef int write_struct(ByteWriter *w, object obj, CPlan plan, EncodeState *st) except -1:
    cdef Py_ssize_t i
    cdef FieldOp *op
    if not PyObject_TypeCheck(obj, plan.cls):
        raise EncodeError(f"expected {(<object>plan.cls).__qualname__}, got {type(obj).__name__}")
    cdef int depth = st.depth
    cdef PathFrame *frame = enter_struct(st.path, &st.depth)
    if frame == NULL:
        raise EncodeError(f"structs nested deeper than {MAX_PATH_DEPTH}")
    cdef PyObject *value
    for i in range(plan.nfields):
        op = &plan.fields[i]
        frame.name = op.name
        value = get_slot(obj, op.offset)
        if value == NULL:
            raise EncodeError(f"field {<str>op.name} is not set")
        # The common scalar kinds inline; everything else through write_value.
        if op.kind == K_INT32:
            write_int32(w, <int32_t>fast_int(<object>value, INT32_MIN, INT32_MAX, "int32"))
        elif op.kind == K_INT16:
            write_int16(w, <int16_t>fast_int(<object>value, INT16_MIN, INT16_MAX, "int16"))
        else:
            write_value(w, op, op.kind, op.nullable, <object>value, st)
    for i in range(plan.nabsent):
        op = &plan.absent[i]
        frame.name = op.name
        if not op.ignorable and not is_default(op, field_value(obj, op)):
            p = plan.plan
            raise EncodeError(f"field {<str>op.name} has a non-default value but version "
                              f"{p.version} of {p.name} does not have it")
    if plan.flexible:
        write_tagged(w, obj, plan, st, frame)
    st.depth = depth
    return 0


cdef int write_tagged(ByteWriter *w, object obj, CPlan plan, EncodeState *st, PathFrame *frame) except -1:
    cdef Py_ssize_t i
    cdef FieldOp *op
    cdef ByteWriter inner
    cdef PyObject *unknown_ptr = get_slot(obj, plan.unknown_tags_offset)
    cdef object unknown = <object>unknown_ptr if unknown_ptr != NULL else None
    entries = None
    cdef int count = 0
    cdef bint present[MAX_TAGGED_PER_STRUCT]
    frame.name = <PyObject *>TAGGED_SECTION
    for i in range(plan.ntagged):
        op = &plan.tagged[i]
        present[i] = not is_default(op, field_value(obj, op))
        count += present[i]
    if not unknown:
        # Common case: only known tags, already in ascending order.
        write_unsigned_varint(w, count)
        for i in range(plan.ntagged):
            if present[i]:
                op = &plan.tagged[i]
                frame.name = op.name
                write_one_tagged(w, op, field_value(obj, op), st)
        return 0
    entries = []
    for i in range(plan.ntagged):
        if present[i]:
            entries.append((plan.tagged[i].tag, i, None))
    for tag, raw in unknown.items():
        for i in range(plan.ntagged):
            if plan.tagged[i].tag == tag:
                raise EncodeError(f"unknown tagged field {tag} collides with known field "
                                  f"{<str>plan.tagged[i].name}")
        entries.append((<int64_t>as_int(tag, 0, 0xFFFFFFFF, "tag"), -1, bytes(raw)))
    entries.sort(key=lambda e: e[0])
    write_unsigned_varint(w, <uint32_t>len(entries))
    for tag, index, raw in entries:
        if index >= 0:
            op = &plan.tagged[<Py_ssize_t>index]
            frame.name = op.name
            write_one_tagged(w, op, field_value(obj, op), st)
        else:
            write_unsigned_varint(w, <uint32_t>tag)
            write_unsigned_varint(w, <uint32_t>PyBytes_GET_SIZE(raw))
            write_raw(w, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
    return 0


cdef int write_one_tagged(ByteWriter *w, FieldOp *op, object value, EncodeState *st) except -1:
    cdef ByteWriter inner
    writer_init(&inner, 64)
    try:
        write_value(&inner, op, op.kind, op.nullable, value, st)
        write_unsigned_varint(w, <uint32_t>op.tag)
        write_unsigned_varint(w, <uint32_t>inner.length)
        write_raw(w, inner.buf, inner.length)
    finally:
        writer_free(&inner)
    return 0


cdef str format_encode_path(object plan, EncodeState *st):
    parts = [plan.name]
    cdef int i
    for i in range(min(st.depth, MAX_PATH_DEPTH)):
        if st.path[i].name != NULL:
            parts.append("." + <str>st.path[i].name)
        if st.path[i].index >= 0:
            parts.append(f"[{st.path[i].index}]")
    return "".join(parts)


cdef int encode_into(ByteWriter *w, object obj, object plan) except -1:
    cdef EncodeState st
    st.depth = 0
    cdef CPlan cp = native_plan(plan)
    try:
        write_struct(w, obj, cp, &st)
    except EncodeError as exc:
        raise EncodeError(exc.reason, format_encode_path(plan, &st),
                          plan.api_key if plan.api_key >= 0 else None, plan.version) from None
    return 0


def encode_struct(obj, plan, writer=None):
    """Encode a message body; EncodeErrors name the field path."""
    cdef ByteWriter w
    writer_init(&w, 256)
    try:
        encode_into(&w, obj, plan)
        return writer_to_bytes(&w)
    finally:
        writer_free(&w)

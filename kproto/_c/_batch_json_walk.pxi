# Part of _batch.pyx (included there; one module split by responsibility).
# The JSON pass, part 3: the walk over a body, and json_bodies, its entry point.

from kproto._c._api_keys cimport response_fallback_version

cdef inline const unsigned char *jtake(JCtx *x, Py_ssize_t n) noexcept nogil:
    # The n bytes at the cursor, which moves past them: the one bounds check of every
    # fixed-width read, as _buffer.pxd's reader_take (NULL with TRUNCATED stored).
    cdef const unsigned char *at = x.p
    if x.end - at < n:
        jfail(x, ST_TRUNCATED)
        return NULL
    x.p = at + n
    return at


cdef inline int juvarint(JCtx *x, uint32_t *out) noexcept nogil:
    cdef Py_ssize_t pos = x.p - x.start
    cdef int st = wire_uvarint(x.start, x.end - x.start, &pos, out)
    x.p = x.start + pos
    if st:
        return jfail(x, st)
    return 0


cdef inline int jtag_count(JCtx *x, uint32_t *count) noexcept nogil:
    cdef Py_ssize_t pos = x.p - x.start
    cdef int st = wire_tag_count(x.start, x.end - x.start, &pos, count)
    x.p = x.start + pos
    return jfail(x, st) if st else 0


cdef inline int jtag_entry(JCtx *x, WireTag *t) noexcept nogil:
    cdef Py_ssize_t pos = x.p - x.start
    cdef int st = wire_tag_entry(x.start, x.end - x.start, &pos, t)
    x.p = x.start + pos
    return jfail(x, st) if st else 0


cdef int jlength(JCtx *x, bint compact, bint wide, bint nullable, Py_ssize_t *n) noexcept nogil:
    """A string / bytes length prefix: n = -1 for null; checked against the bytes left."""
    cdef Py_ssize_t pos = x.p - x.start
    cdef int64_t v
    cdef int st = wire_length(x.start, x.end - x.start, &pos, compact, wide, nullable, &v)
    x.p = x.start + pos
    if st:
        return jfail(x, st)
    n[0] = <Py_ssize_t>v
    return 0


cdef enum:
    # How jlength_prefixed writes a value's bytes (each kind's row in _kinds.pxi.in says which).
    TEXT_STRING = 0      # UTF-8 text, as a JSON string (16-bit length, or compact)
    TEXT_BASE64 = 1      # base64, as a JSON string (32-bit length, or compact)
    TEXT_RECORDS = 2     # a record set: base64, or its summary when the pass asks for one


cdef inline int jlength_prefixed(JCtx *x, JField *f, bint nullable, int text) noexcept nogil:
    """A string, bytes or records value, written as ``text`` says. The cursor moves past
    the bytes once they are written: an error is at their start."""
    cdef Py_ssize_t n
    cdef int st
    if jlength(x, f.compact, text != TEXT_STRING, nullable, &n) < 0:
        return -1
    if n < 0:
        return put(x, "null", 4)
    if text == TEXT_STRING:
        st = put_string(x, x.p, n)
    elif text == TEXT_RECORDS and x.records_summary:
        st = put_records_summary(x, x.p, n)
    else:
        st = put_base64(x, x.p, n)
    if st < 0:
        return -1
    x.p += n
    return 0


# generated: begin json (tools/gen_walkers.py renders it from _kinds.pxi.in: edit that)
cdef int jvalue(JCtx *x, JField *f, int kind, bint nullable) noexcept nogil:
    """One value of ``kind`` as JSON text (a failure stores its status and offset: jfail)."""
    cdef Py_ssize_t i, pos
    cdef int st
    cdef int64_t count
    cdef const unsigned char *at
    if kind == K_INT32:
        at = jtake(x, 4)
        return put_int(x, <int32_t>kp_load_be32(at)) if at != NULL else -1
    if kind == K_STRING:
        return jlength_prefixed(x, f, nullable, TEXT_STRING)
    if kind == K_INT16:
        at = jtake(x, 2)
        return put_int(x, <int16_t>kp_load_be16(at)) if at != NULL else -1
    if kind == K_INT64:
        at = jtake(x, 8)
        return put_int(x, <int64_t>kp_load_be64(at)) if at != NULL else -1
    if kind == K_ARRAY:
        pos = x.p - x.start
        st = wire_array_count(x.start, x.end - x.start, &pos, f.compact, nullable, &count)
        x.p = x.start + pos
        if st:
            return jfail(x, st)
        if count < 0:
            return put(x, "null", 4)
        if put_char(x, b'[') < 0:
            return -1
        for i in range(count):
            if i and put_char(x, b',') < 0:
                return -1
            if jvalue(x, f, f.elem_kind, False) < 0:
                return -1
        return put_char(x, b']')
    if kind == K_STRUCT:
        if nullable:
            at = jtake(x, 1)
            if at == NULL:
                return -1
            if <int8_t>at[0] == -1:
                return put(x, "null", 4)
            if at[0] != 1:
                return jfail(x, ST_MALFORMED)
        return jstruct(x, <JPlan *>f.child)
    if kind == K_INT8:
        at = jtake(x, 1)
        return put_int(x, <int8_t>at[0]) if at != NULL else -1
    if kind == K_BOOL:
        at = jtake(x, 1)
        return (put(x, "true", 4) if at[0] else put(x, "false", 5)) if at != NULL else -1
    if kind == K_UUID:
        at = jtake(x, 16)
        return put_uuid(x, at) if at != NULL else -1
    if kind == K_BYTES:
        return jlength_prefixed(x, f, nullable, TEXT_BASE64)
    if kind == K_RECORDS:
        return jlength_prefixed(x, f, nullable, TEXT_RECORDS)
    if kind == K_UINT16:
        at = jtake(x, 2)
        return put_int(x, kp_load_be16(at)) if at != NULL else -1
    if kind == K_UINT32:
        at = jtake(x, 4)
        return put_int(x, kp_load_be32(at)) if at != NULL else -1
    if kind == K_FLOAT64:
        at = jtake(x, 8)
        return put_float(x, kp_load_be_double(at)) if at != NULL else -1
    return jfail(x, ST_MALFORMED)
# generated: end json


cdef inline int jkey(JCtx *x, bint *first, const char *key, Py_ssize_t n) noexcept nogil:
    if not first[0] and put_char(x, b',') < 0:
        return -1
    first[0] = False
    return put(x, key, n)


cdef inline void part_enter(JCtx *x, int level) noexcept nogil:
    # A topic starts afresh; a partition keeps its topic's name and id.
    if level == 1:
        x.current.topic = NULL
        x.current.topic_len = 0
        x.current.topic_id = NULL
    x.current.partition = 0
    x.current.error_code = 0
    x.current.has_error_code = False
    x.current.records = NULL
    x.current.records_len = 0


cdef inline Py_ssize_t length_at(const unsigned char *p, bint compact, bint wide, Py_ssize_t *prefix) noexcept nogil:
    """A length prefix jvalue has already checked: the length (-1 null) and the prefix's size."""
    cdef Py_ssize_t pos = 0
    cdef uint32_t u = 0
    if compact:
        wire_uvarint(p, 5, &pos, &u)
        prefix[0] = pos
        return <Py_ssize_t>u - 1
    prefix[0] = 4 if wide else 2
    return <int32_t>kp_load_be32(p) if wide else <int16_t>kp_load_be16(p)


cdef void part_note(JCtx *x, JField *f, const unsigned char *p) noexcept nogil:
    """Take a marked field's value from its bytes (p: where it starts; jvalue read it whole)."""
    cdef Py_ssize_t n, prefix
    if f.role == R_TOPIC_NAME:
        n = length_at(p, f.compact, False, &prefix)
        x.current.topic = p + prefix if n > 0 else NULL   # an empty name reads as null
        x.current.topic_len = <int32_t>n if n > 0 else 0
    elif f.role == R_TOPIC_ID:
        x.current.topic_id = p
    elif f.role == R_PARTITION_INDEX:
        x.current.partition = <int32_t>kp_load_be32(p)
    elif f.role == R_ERROR_CODE:
        x.current.error_code = <int16_t>kp_load_be16(p)
        x.current.has_error_code = True
    elif f.role == R_RECORDS:
        n = length_at(p, f.compact, True, &prefix)
        x.current.records = p + prefix if n >= 0 else NULL
        x.current.records_len = n if n >= 0 else 0


cdef int part_append(JCtx *x) noexcept nogil:
    cdef PartRows *rows = x.parts
    cdef PartRow *grown
    cdef Py_ssize_t capacity
    if rows.count == rows.capacity:
        capacity = rows.capacity * 2 if rows.capacity else 1024
        grown = <PartRow *>realloc(rows.rows, capacity * sizeof(PartRow))
        if grown == NULL:
            return jfail(x, ST_NO_MEMORY)
        rows.rows = grown
        rows.capacity = capacity
    rows.rows[rows.count] = x.current
    rows.count += 1
    return 0


cdef int jstruct(JCtx *x, JPlan *jp) noexcept nogil:
    cdef bint first = True
    cdef Py_ssize_t i, j
    cdef uint32_t count, k, tag, size
    cdef int64_t previous
    cdef WireTag t
    cdef uint64_t seen = 0
    cdef bint unknown = False
    cdef const unsigned char *section
    cdef const unsigned char *outer_end
    cdef JField *f
    cdef const unsigned char *field_start
    if x.depth >= MAX_DEPTH:
        return jfail(x, ST_LIMIT_EXCEEDED)
    x.depth += 1
    if x.parts != NULL and jp.level:
        part_enter(x, jp.level)
    if put_char(x, b'{') < 0:
        return -1
    for i in range(jp.nfields):
        f = &jp.fields[i]
        field_start = x.p
        if jkey(x, &first, f.key, f.key_len) < 0 or jvalue(x, f, f.kind, f.nullable) < 0:
            return -1
        if f.role and x.parts != NULL:
            part_note(x, f, field_start)
    if jp.flexible:
        section = x.p
        if jtag_count(x, &count) < 0:
            return -1
        t.previous = -1
        for k in range(count):
            if jtag_entry(x, &t) < 0:
                return -1
            f = NULL
            for j in range(jp.ntagged):
                if jp.tagged[j].tag == <int>t.tag:
                    f = &jp.tagged[j]
                    break
            if f == NULL:
                unknown = True
                x.p += t.size
                continue
            seen |= (<uint64_t>1) << j
            outer_end = x.end
            x.end = x.p + t.size
            if jkey(x, &first, f.key, f.key_len) < 0 or jvalue(x, f, f.kind, f.nullable) < 0:
                return -1
            if x.p != x.end:
                return jfail(x, ST_BAD_LENGTH)
            x.end = outer_end
        for j in range(jp.ntagged):
            if not (seen >> j) & 1:
                f = &jp.tagged[j]
                if jkey(x, &first, f.key, f.key_len) < 0 or put(x, f.default_json, f.default_len) < 0:
                    return -1
    if jp.absent_len and not x.version_fields:
        if not first and put_char(x, b',') < 0:
            return -1
        first = False
        if put(x, jp.absent, jp.absent_len) < 0:
            return -1
    if unknown:
        # Second walk over the (already checked) section for the tags no plan knows.
        outer_end = x.p
        x.p = section
        juvarint(x, &count)
        if jkey(x, &first, "\"_unknown_tags\":{", 17) < 0:
            return -1
        previous = 0   # now: "an entry was written"
        for k in range(count):
            juvarint(x, &tag)
            juvarint(x, &size)
            f = NULL
            for j in range(jp.ntagged):
                if jp.tagged[j].tag == <int>tag:
                    f = &jp.tagged[j]
                    break
            if f == NULL:
                if previous and put_char(x, b',') < 0:
                    return -1
                previous = 1
                if put_char(x, b'"') < 0 or put_int(x, tag) < 0 or put(x, "\":", 2) < 0 \
                        or put_base64(x, x.p, size) < 0:
                    return -1
            x.p += size
        if put_char(x, b'}') < 0:
            return -1
        x.p = outer_end
    x.depth -= 1
    if x.parts != NULL and jp.level == 2 and part_append(x) < 0:
        return -1
    return put_char(x, b'}')


cdef JPlan *table_plan(int direction, int key, int version) noexcept nogil:
    if direction < 0 or direction > 1 or key < 0 or key >= MAX_KEY or version < 0 or version >= MAX_VERSION:
        return NULL
    return plan_table[direction][key][version]


cdef int ensure_plan(int direction, int key, int version) except -1:
    if table_plan(direction, key, version) != NULL:
        return 0
    name = schema.response_name(key) if direction == 1 else schema.request_name(key)
    plan_table[direction][key][version] = json_plan(native_plan(schema.plan(name, version)))
    return 0


cdef list present_versions(dict cols, rows):
    """The distinct (direction, api_key, api_version) of ``rows`` (a mask or indices)."""
    codes = np.unique(cols["direction"][rows].astype(np.int64) * 1_000_000
                      + cols["api_key"][rows].astype(np.int64) * 1000 + cols["api_version"][rows])
    return [(code // 1_000_000, (code // 1000) % 1000, code % 1000) for code in codes.tolist()]


cdef int out_init(Out *out, Py_ssize_t capacity) except -1:
    out.capacity = capacity
    out.length = 0
    out.buf = <char *>malloc(capacity)
    if out.buf == NULL:
        raise MemoryError()
    return 0


cdef inline void start_body(JCtx *x, Frames *f, Py_ssize_t i, Out *out, bint records_summary,
                            PartRows *parts, bint version_fields=False) noexcept nogil:
    """Set up the walk of frame i's body (error offsets count from its payload, after the size prefix)."""
    x.start = f.data + f.c.offset[i] + f.prefix
    x.end = x.start + f.c.size[i]
    x.p = x.start + f.c.body_offset[i]
    x.out = out
    x.status = ST_OK
    x.error = 0
    x.depth = 0
    x.records_summary = records_summary
    x.version_fields = version_fields
    x.parts = parts


def json_bodies(data, dict cols, offsets=None, bint records_summary=False, bint version_fields=False):
    """JSON text of the body of every frame whose header read OK: (int64 offsets, UTF-8 bytes).

    ``records_summary``: records fields as a summary of their batch headers
    (``{"batches","records","bytes","compression"}``) instead of base64.
    ``version_fields``: only the fields of the frame's version (a plan's ``absent``
    fields, otherwise written with their defaults as ``to_dict()`` does, are left out).

    A body that fails to decode gets its status and error offset written into
    ``cols`` and no text (the caller marks it null).
    """
    cdef Py_buffer view
    cdef Frames f
    cdef Columns *c = &f.c
    cdef Py_ssize_t i, row_start
    out_offsets = np.zeros(len(cols["status"]) + 1, np.int64)
    cdef int64_t[::1] text_offset = out_offsets
    cdef Out out
    cdef JCtx x
    cdef JPlan *jp
    cdef int version, first_status, fallback
    cdef Py_ssize_t first_error
    cdef bint no_memory = False

    # Plans for every (direction, api, version) present, built with the GIL held.
    ok = (cols["status"] == ST_OK) & (cols["body_offset"] >= 0)
    for d, key, version in present_versions(cols, ok):
        ensure_plan(d, key, version)
        fallback = response_fallback_version(key, version) if d == 1 else -1
        if fallback >= 0:
            ensure_plan(1, key, fallback)

    out_init(&out, 1 << 16)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        bind_frames(&f, <const unsigned char *>view.buf, cols, offsets, True)
        with nogil:
            for i in range(f.count):
                text_offset[i] = out.length
                if c.status[i] != ST_OK or c.body_offset[i] < 0:
                    continue
                start_body(&x, &f, i, &out, records_summary, NULL, version_fields)
                version = c.api_version[i]
                jp = table_plan(c.direction[i], c.api_key[i], version)
                if jp == NULL:
                    continue
                row_start = out.length
                if jstruct(&x, jp) == 0 and x.p != x.end:
                    jfail(&x, ST_BAD_LENGTH)
                # ApiVersions responses as kproto.api.decode_response reads them (KIP-511, as
                # Java does): at the version asked, else at the generated fallback version
                # (_api_keys.pxd: v0); neither: the first error.
                fallback = response_fallback_version(c.api_key[i], version) \
                    if x.status != ST_OK and x.status != ST_NO_MEMORY and c.direction[i] == 1 else -1
                if fallback >= 0:
                    first_status = x.status
                    first_error = x.error
                    out.length = row_start
                    start_body(&x, &f, i, &out, records_summary, NULL, version_fields)
                    if jstruct(&x, table_plan(1, c.api_key[i], fallback)) == 0 and x.p != x.end:
                        jfail(&x, ST_BAD_LENGTH)
                    if x.status != ST_OK and x.status != ST_NO_MEMORY:
                        x.status = first_status
                        x.error = first_error
                if x.status != ST_OK:
                    out.length = row_start
                    if x.status == ST_NO_MEMORY:
                        no_memory = True
                        break
                    c.status[i] = <uint8_t>x.status
                    c.error_offset[i] = <int32_t>x.error
            text_offset[f.count] = out.length
        if no_memory:
            raise MemoryError()
        return out_offsets, PyBytes_FromStringAndSize(out.buf, out.length)
    finally:
        PyBuffer_Release(&view)
        free(out.buf)

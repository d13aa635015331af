# Part of _batch.pyx (included there; one module split by responsibility).
# The partition pass: one row per topic-partition of Produce requests and Fetch responses.

# ------------------------------------------------------------------ the partition pass
# Produce requests and Fetch responses, one row per topic-partition: the JSON walk
# (output thrown away frame by frame) notes the fields marked with a role, and
# each record set is summarized from its batch headers. Record sets this loop
# does not summarize itself (legacy magic 0/1, unknown codecs, corrupt batches)
# go back to Python as "fallback" rows, which kproto.batch reads with the records
# module, so their counts and error text are the records module's own.
cdef enum:
    PRODUCE = 0
    FETCH = 1
    CODEC_MIXED = 5


cdef void mark_roles(JPlan *jp, CPlan cp, int level, bint produce) except *:
    cdef Py_ssize_t i
    cdef JField *f
    for i in range(cp.nfields):
        name = <str>cp.fields[i].name
        f = &jp.fields[i]
        if level == 0:
            if name == ("topic_data" if produce else "responses") and f.child != NULL:
                (<JPlan *>f.child).level = 1
                mark_roles(<JPlan *>f.child, <CPlan>cp.fields[i].child, 1, produce)
        elif level == 1:
            if name == ("name" if produce else "topic"):
                f.role = R_TOPIC_NAME
            elif name == "topic_id":
                f.role = R_TOPIC_ID
            elif name == ("partition_data" if produce else "partitions") and f.child != NULL:
                (<JPlan *>f.child).level = 2
                mark_roles(<JPlan *>f.child, <CPlan>cp.fields[i].child, 2, produce)
        else:
            if name == ("index" if produce else "partition_index"):
                f.role = R_PARTITION_INDEX
            elif name == "error_code" and not produce:
                f.role = R_ERROR_CODE
            elif name == "records":
                f.role = R_RECORDS


cdef set _marked = set()


cdef int ensure_partition_plan(int direction, int key, int version) except -1:
    ensure_plan(direction, key, version)
    if (direction, key, version) not in _marked:
        name = schema.response_name(key) if direction == 1 else schema.request_name(key)
        mark_roles(table_plan(direction, key, version), native_plan(schema.plan(name, version)), 0,
                   key == PRODUCE)
        _marked.add((direction, key, version))
    return 0


cdef struct RecordsSummary:
    int32_t batches
    int64_t records
    int codec               # -1 no batch, 0-4, CODEC_MIXED
    int64_t producer_id
    bint has_producer_id
    bint fallback           # not summarized here: the records module reads it


cdef void summarize_v2(const unsigned char *p, Py_ssize_t n, RecordsSummary *s) noexcept nogil:
    """What kproto.batch._partition_row reads from a record set, for magic 2 batches.

    The checks are those of the records module's batch iterator; anything it
    would raise on, and every legacy batch, sets ``fallback`` instead.
    """
    cdef Py_ssize_t pos = 0, left
    cdef int32_t length
    cdef int magic, codec
    s.batches = 0
    s.records = 0
    s.codec = -1
    s.producer_id = 0
    s.has_producer_id = False
    s.fallback = False
    while True:
        left = n - pos
        if left < LOG_OVERHEAD:
            return            # the end, or a cut-short tail (not an error)
        length = <int32_t>kp_load_be32(p + pos + LENGTH_AT)
        if length < 0:
            s.fallback = True
            return
        if left > MAGIC_AT:
            magic = p[pos + MAGIC_AT]
            if magic != 2 or length < V2_HEADER_SIZE - LOG_OVERHEAD:
                s.fallback = True   # legacy, unknown magic or too short: the records module says
                return
        if LOG_OVERHEAD + <Py_ssize_t>length > left:
            return            # cut short
        codec = kp_load_be16(p + pos + V2_ATTRIBUTES_AT) & ATTR_COMPRESSION
        if codec > 4:
            s.fallback = True
            return
        if s.batches == 0:
            s.producer_id = <int64_t>kp_load_be64(p + pos + V2_PRODUCER_ID_AT)
            s.has_producer_id = True
        s.batches += 1
        s.records += <int32_t>kp_load_be32(p + pos + V2_RECORDS_COUNT_AT)
        s.codec = codec if s.codec == -1 or s.codec == codec else CODEC_MIXED
        pos += LOG_OVERHEAD + length


def partition_rows(data, dict cols, offsets=None):
    """Produce requests and Fetch responses per topic-partition, from the header columns.

    Returns the dict kproto.batch.partitions builds its table from (the same
    keys from the twin): numeric columns as numpy arrays with ``*_valid`` masks,
    ``topic`` / ``topic_id`` as (offsets, bytes, valid), ``codec`` (-1 none,
    0-4, 5 mixed) and ``fallback``: (row, memoryview) of the record sets the
    records module must summarize. Frames whose body does not decode give no rows.
    """
    cdef Py_buffer view
    cdef Py_ssize_t count = len(cols["status"]), i, j, n, start
    cdef const uint8_t[::1] status = cols["status"]
    cdef const int32_t[::1] body_offset = cols["body_offset"]
    cdef const int64_t[::1] frame_offset = cols["offset"]
    cdef const int32_t[::1] size = cols["size"]
    cdef const int16_t[::1] api_key = cols["api_key"]
    cdef const int16_t[::1] api_version = cols["api_version"]
    cdef const int8_t[::1] direction = cols["direction"]
    cdef Py_ssize_t prefix = 4 if offsets is None else 0
    cdef Out out
    cdef JCtx x
    cdef JPlan *jp
    cdef PartRows parts
    cdef Py_ssize_t row_start
    cdef bint no_memory = False
    cdef RecordsSummary *summaries = NULL

    candidates = np.flatnonzero((cols["status"] == ST_OK) & (cols["body_offset"] >= 0) & (
        ((cols["api_key"] == PRODUCE) & (cols["direction"] == 0))
        | ((cols["api_key"] == FETCH) & (cols["direction"] == 1))))
    for d, key, version in present_versions(cols, candidates):
        ensure_partition_plan(d, key, version)
    cdef const int64_t[::1] rows = candidates.astype(np.int64)
    cdef Py_ssize_t nrows = len(candidates)

    memset(&parts, 0, sizeof(parts))
    out_init(&out, 1 << 12)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            for j in range(nrows):
                i = rows[j]
                jp = table_plan(direction[i], api_key[i], api_version[i])
                if jp == NULL:
                    continue
                start = frame_offset[i] + prefix
                # records summarized (skipped), not written out as base64
                jctx_start(&x, <const unsigned char *>view.buf + start, size[i], body_offset[i], &out,
                           True, &parts)
                memset(&x.current, 0, sizeof(PartRow))
                x.current.frame = i
                out.length = 0
                row_start = parts.count
                if jstruct(&x, jp) == 0 and x.p != x.end:
                    jfail(&x, ST_BAD_LENGTH)
                if x.status != ST_OK:
                    parts.count = row_start   # a body that does not decode has no rows
                    if x.status == ST_NO_MEMORY:
                        no_memory = True
                        break
            if not no_memory and parts.count:
                summaries = <RecordsSummary *>malloc(parts.count * sizeof(RecordsSummary))
                if summaries == NULL:
                    no_memory = True
                else:
                    for j in range(parts.count):
                        if parts.rows[j].records == NULL:
                            memset(&summaries[j], 0, sizeof(RecordsSummary))
                            summaries[j].codec = -1
                        else:
                            summarize_v2(parts.rows[j].records, parts.rows[j].records_len, &summaries[j])
        if no_memory:
            raise MemoryError()

        n = parts.count
        columns = {
            "frame": np.empty(n, np.int64), "api_key": np.empty(n, np.int16),
            "direction": np.empty(n, np.int8), "partition": np.empty(n, np.int32),
            "error_code": np.zeros(n, np.int16), "error_code_valid": np.zeros(n, np.bool_),
            "batch_count": np.zeros(n, np.int32), "record_count": np.zeros(n, np.int64),
            "record_count_valid": np.ones(n, np.bool_), "bytes": np.zeros(n, np.int64),
            "codec": np.full(n, -1, np.int8), "producer_id": np.zeros(n, np.int64),
            "producer_id_valid": np.zeros(n, np.bool_),
        }
        fill_partition_columns(parts.rows, summaries, n, api_key, direction, columns)
        columns["topic"] = topic_column(parts.rows, n)
        columns["topic_id"] = topic_id_column(parts.rows, n)
        frame_view = memoryview(data).cast("B")
        fallback = []
        for j in range(n):
            if summaries[j].fallback:
                start = parts.rows[j].records - <const unsigned char *>view.buf
                fallback.append((j, frame_view[start:start + parts.rows[j].records_len]))
        columns["fallback"] = fallback
        return columns
    finally:
        PyBuffer_Release(&view)
        free(out.buf)
        free(parts.rows)
        free(summaries)


cdef void fill_partition_columns(PartRow *rows, RecordsSummary *summaries, Py_ssize_t n,
                                 const int16_t[::1] api_key, const int8_t[::1] direction, dict columns):
    cdef int64_t[::1] frame = columns["frame"]
    cdef int16_t[::1] keys = columns["api_key"]
    cdef int8_t[::1] dirs = columns["direction"]
    cdef int32_t[::1] partition = columns["partition"]
    cdef int16_t[::1] error_code = columns["error_code"]
    cdef uint8_t[::1] error_code_valid = columns["error_code_valid"].view(np.uint8)
    cdef int32_t[::1] batch_count = columns["batch_count"]
    cdef int64_t[::1] record_count = columns["record_count"]
    cdef int64_t[::1] nbytes = columns["bytes"]
    cdef int8_t[::1] codec = columns["codec"]
    cdef int64_t[::1] producer_id = columns["producer_id"]
    cdef uint8_t[::1] producer_id_valid = columns["producer_id_valid"].view(np.uint8)
    cdef Py_ssize_t j, i
    with nogil:
        for j in range(n):
            i = rows[j].frame
            frame[j] = i
            keys[j] = api_key[i]
            dirs[j] = direction[i]
            partition[j] = rows[j].partition
            if rows[j].has_error_code:
                error_code[j] = rows[j].error_code
                error_code_valid[j] = 1
            nbytes[j] = rows[j].records_len
            if summaries[j].fallback:
                continue
            batch_count[j] = summaries[j].batches
            record_count[j] = summaries[j].records
            codec[j] = <int8_t>summaries[j].codec
            if summaries[j].has_producer_id:
                producer_id[j] = summaries[j].producer_id
                producer_id_valid[j] = 1


cdef tuple topic_column(PartRow *rows, Py_ssize_t n):
    """(int32 offsets, bytes, bool valid) of the topic names (null: NULL pointer)."""
    cdef Py_ssize_t j, total = 0
    offsets = np.zeros(n + 1, np.int32)
    valid = np.zeros(n, np.bool_)
    cdef int32_t[::1] off = offsets
    cdef uint8_t[::1] ok = valid.view(np.uint8)
    for j in range(n):
        if rows[j].topic != NULL:
            total += rows[j].topic_len
            ok[j] = 1
        off[j + 1] = <int32_t>total
    text = PyBytes_FromStringAndSize(NULL, total)
    cdef char *w = PyBytes_AS_STRING(text)
    for j in range(n):
        if rows[j].topic != NULL:
            memcpy(w + off[j], rows[j].topic, rows[j].topic_len)
    return offsets, text, valid


cdef tuple topic_id_column(PartRow *rows, Py_ssize_t n):
    """Topic ids as canonical UUID text; absent ones and the all-zero id (no id) null."""
    cdef Py_ssize_t j, total = 0
    cdef const unsigned char *p
    cdef int k, w
    offsets = np.zeros(n + 1, np.int32)
    valid = np.zeros(n, np.bool_)
    cdef int32_t[::1] off = offsets
    cdef uint8_t[::1] ok = valid.view(np.uint8)
    for j in range(n):
        p = rows[j].topic_id
        if p != NULL:
            for k in range(16):
                if p[k]:
                    ok[j] = 1
                    total += 36
                    break
        off[j + 1] = <int32_t>total
    text = PyBytes_FromStringAndSize(NULL, total)
    cdef char *out = PyBytes_AS_STRING(text)
    for j in range(n):
        if not ok[j]:
            continue
        p = rows[j].topic_id
        w = off[j]
        for k in range(16):
            if k == 4 or k == 6 or k == 8 or k == 10:
                out[w] = b'-'
                w += 1
            out[w] = HEX[p[k] >> 4]
            out[w + 1] = HEX[p[k] & 15]
            w += 2
    return offsets, text, valid

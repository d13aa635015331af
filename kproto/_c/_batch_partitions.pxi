# Part of _batch.pyx (included there; one module split by responsibility).
# The partition pass: one row per topic-partition of Produce requests and Fetch responses.

# ------------------------------------------------------------------ the partition pass
# Produce requests and Fetch responses, one row per topic-partition: the JSON walk
# (output thrown away frame by frame) notes the fields marked with a role, and
# each record set is summarized from its batch headers. Record sets this loop
# does not summarize itself (legacy magic 0/1, unknown codecs, corrupt batches)
# go back to Python as "fallback" rows, which kproto.arrow.frames reads with the records
# module, so their counts and error text are the records module's own.
from kproto._c._api_keys cimport API_KEY_FETCH, API_KEY_PRODUCE

cdef enum:
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
                   key == API_KEY_PRODUCE)
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
    """What kproto.arrow.partitions._partition_row reads from a record set, for magic 2 batches.

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


# The partition pass's output: one C array per column, made by partition_columns from
# PART_COLUMNS (in the struct's order: name, type, the value a row starts with).
cdef struct PartColumns:
    int64_t *frame
    int16_t *api_key
    int8_t *direction
    int32_t *partition
    int16_t *error_code
    uint8_t *error_code_valid
    int32_t *batch_count
    int64_t *record_count
    uint8_t *record_count_valid
    int64_t *bytes
    int8_t *codec
    int64_t *producer_id
    uint8_t *producer_id_valid


cdef tuple PART_COLUMNS = (
    ("frame", np.int64, 0), ("api_key", np.int16, 0), ("direction", np.int8, 0), ("partition", np.int32, 0),
    ("error_code", np.int16, 0), ("error_code_valid", np.bool_, 0), ("batch_count", np.int32, 0),
    ("record_count", np.int64, 0), ("record_count_valid", np.bool_, 1), ("bytes", np.int64, 0),
    ("codec", np.int8, -1), ("producer_id", np.int64, 0), ("producer_id_valid", np.bool_, 0))
if len(PART_COLUMNS) * sizeof(void *) != sizeof(PartColumns):
    raise ImportError("PART_COLUMNS and the PartColumns struct disagree")


cdef dict partition_columns(PartColumns *out, Py_ssize_t n):
    """The output columns as numpy arrays (by name), out pointing at their memory."""
    cdef void **slots = <void **>out
    columns = {}
    for k, (name, dtype, start) in enumerate(PART_COLUMNS):
        columns[name] = np.full(n, start, dtype)
        slots[k] = <void *>array_ptr(columns[name])
    return columns


def partition_rows(data, dict cols, offsets=None):
    """Produce requests and Fetch responses per topic-partition, from the header columns.

    Returns the dict kproto.arrow.frames.partitions builds its table from (the same
    keys from the twin): numeric columns as numpy arrays with ``*_valid`` masks,
    ``topic`` / ``topic_id`` as (offsets, bytes, valid), ``codec`` (-1 none,
    0-4, 5 mixed) and ``fallback``: (row, memoryview) of the record sets the
    records module must summarize. Frames whose body does not decode give no rows.
    """
    cdef Py_buffer view
    cdef Frames f
    cdef Columns *c = &f.c
    cdef Py_ssize_t i, j, n, start
    cdef Out out
    cdef JCtx x
    cdef JPlan *jp
    cdef PartRows parts
    cdef PartColumns part_columns
    cdef Py_ssize_t row_start
    cdef bint no_memory = False
    cdef RecordsSummary *summaries = NULL

    candidates = np.flatnonzero((cols["status"] == ST_OK) & (cols["body_offset"] >= 0) & (
        ((cols["api_key"] == API_KEY_PRODUCE) & (cols["direction"] == 0))
        | ((cols["api_key"] == API_KEY_FETCH) & (cols["direction"] == 1))))
    for d, key, version in present_versions(cols, candidates):
        ensure_partition_plan(d, key, version)
    cdef const int64_t[::1] rows = candidates.astype(np.int64)
    cdef Py_ssize_t nrows = len(candidates)

    memset(&parts, 0, sizeof(parts))
    out_init(&out, 1 << 12)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        bind_frames(&f, <const unsigned char *>view.buf, cols, offsets, False)
        with nogil:
            for j in range(nrows):
                i = rows[j]
                jp = table_plan(c.direction[i], c.api_key[i], c.api_version[i])
                if jp == NULL:
                    continue
                # records summarized (skipped), not written out as base64
                start_body(&x, &f, i, &out, True, &parts)
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
        columns = partition_columns(&part_columns, n)
        with nogil:
            fill_partition_columns(&part_columns, parts.rows, summaries, n, c)
        columns["topic"] = text_column(parts.rows, n, False)
        columns["topic_id"] = text_column(parts.rows, n, True)
        frame_view = memoryview(data).cast("B")
        fallback = []
        for j in range(n):
            if summaries[j].fallback:
                start = parts.rows[j].records - f.data
                fallback.append((j, frame_view[start:start + parts.rows[j].records_len]))
        columns["fallback"] = fallback
        return columns
    finally:
        PyBuffer_Release(&view)
        free(out.buf)
        free(parts.rows)
        free(summaries)


cdef void fill_partition_columns(PartColumns *out, PartRow *rows, RecordsSummary *summaries, Py_ssize_t n,
                                 Columns *frames) noexcept nogil:
    cdef Py_ssize_t j, i
    for j in range(n):
        i = rows[j].frame
        out.frame[j] = i
        out.api_key[j] = frames.api_key[i]
        out.direction[j] = frames.direction[i]
        out.partition[j] = rows[j].partition
        if rows[j].has_error_code:
            out.error_code[j] = rows[j].error_code
            out.error_code_valid[j] = 1
        out.bytes[j] = rows[j].records_len
        if summaries[j].fallback:
            continue
        out.batch_count[j] = summaries[j].batches
        out.record_count[j] = summaries[j].records
        out.codec[j] = <int8_t>summaries[j].codec
        if summaries[j].has_producer_id:
            out.producer_id[j] = summaries[j].producer_id
            out.producer_id_valid[j] = 1


cdef inline bint is_topic_id(const unsigned char *p) noexcept nogil:
    # Present and not the all-zero id (Kafka's "no id").
    cdef int k
    if p != NULL:
        for k in range(16):
            if p[k]:
                return True
    return False


cdef tuple text_column(PartRow *rows, Py_ssize_t n, bint topic_ids):
    """(int32 offsets, bytes, bool valid) of the topic names, or (topic_ids) of the topic ids as
    canonical UUID text. Null: no name or id (a NULL pointer), or the all-zero id."""
    cdef Py_ssize_t j, total = 0
    offsets = np.zeros(n + 1, np.int32)
    valid = np.zeros(n, np.bool_)
    cdef int32_t[::1] off = offsets
    cdef uint8_t[::1] ok = valid.view(np.uint8)
    for j in range(n):
        ok[j] = is_topic_id(rows[j].topic_id) if topic_ids else rows[j].topic != NULL
        if ok[j]:
            total += 36 if topic_ids else rows[j].topic_len
        off[j + 1] = <int32_t>total
    text = PyBytes_FromStringAndSize(NULL, total)
    cdef char *w = PyBytes_AS_STRING(text)
    for j in range(n):
        if not ok[j]:
            continue
        if topic_ids:
            uuid_text(rows[j].topic_id, w + off[j])
        else:
            memcpy(w + off[j], rows[j].topic, rows[j].topic_len)
    return offsets, text, valid

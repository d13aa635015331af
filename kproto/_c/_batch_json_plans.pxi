# Part of _batch.pyx (included there; one module split by responsibility).
# The JSON pass, part 1: the plans it walks (built once per message version from the
# codec's compiled plans) and the walk's state.

# ------------------------------------------------------------------ the JSON pass
# A second, small interpreter over the message codec's compiled plans: it writes
# JSON text straight from the bytes, in the shape of Message.to_dict() (bytes and
# records as base64, UUIDs as canonical strings, unknown tagged fields under
# "_unknown_tags"). Fields a version lacks appear with their defaults, as in
# to_dict(); that text is rendered once per plan.

cdef struct JField:
    int kind
    int elem_kind
    bint nullable
    bint compact
    int tag
    const char *key          # '"name":'
    Py_ssize_t key_len
    const char *default_json  # for tagged fields that are absent
    Py_ssize_t default_len
    void *child              # JPlan of struct fields and struct arrays
    int role                 # R_*: what the partition pass takes from this field (0: nothing)


cdef struct JPlan:
    JField *fields
    Py_ssize_t nfields
    JField *tagged
    Py_ssize_t ntagged
    const char *absent       # '"a":0,"b":null' of the fields this version lacks
    Py_ssize_t absent_len
    bint flexible
    int level                # partition pass: 1 a topic struct, 2 a partition struct, else 0


cdef list _keep_alive = []          # bytes the plans point into: kept for the process
cdef dict _jplans = {}              # id(CPlan) -> address of its JPlan
cdef JPlan *plan_table[2][MAX_KEY][MAX_VERSION]
memset(plan_table, 0, sizeof(plan_table))


cdef const char *kept(bytes text):
    _keep_alive.append(text)
    return <const char *>text


cdef void fill_field(JField *f, FieldOp *op) except *:
    name = <str>op.name
    key = (_json.dumps(name) + ":").encode()
    f.kind = op.kind
    f.elem_kind = op.elem_kind
    f.nullable = op.nullable
    f.compact = op.compact
    f.tag = op.tag
    f.key = kept(key)
    f.key_len = len(key)
    default = _json.dumps(_plain((<object>op.pyop).fresh_default()), separators=(",", ":"),
                          ensure_ascii=False).encode()
    f.default_json = kept(default)
    f.default_len = len(default)
    f.child = NULL
    if op.child != NULL:
        f.child = json_plan(<CPlan>op.child)


cdef JPlan *json_plan(CPlan cp) except NULL:
    cached = _jplans.get(id(cp))
    if cached is not None:
        return <JPlan *><Py_ssize_t>cached
    _keep_alive.append(cp)
    cdef JPlan *jp = <JPlan *>calloc(1, sizeof(JPlan))
    if jp == NULL:
        raise MemoryError()
    jp.fields = <JField *>calloc(cp.nfields + 1, sizeof(JField))
    jp.tagged = <JField *>calloc(cp.ntagged + 1, sizeof(JField))
    if jp.fields == NULL or jp.tagged == NULL:
        raise MemoryError()
    jp.nfields = cp.nfields
    jp.ntagged = cp.ntagged
    jp.flexible = cp.flexible
    cdef Py_ssize_t i
    for i in range(cp.nfields):
        fill_field(&jp.fields[i], &cp.fields[i])
    for i in range(cp.ntagged):
        fill_field(&jp.tagged[i], &cp.tagged[i])
    parts = []
    for i in range(cp.nabsent):
        op = <object>cp.absent[i].pyop
        parts.append(_json.dumps(op.name) + ":" + _json.dumps(_plain(op.fresh_default()),
                                                             separators=(",", ":"), ensure_ascii=False))
    absent = ",".join(parts).encode()
    jp.absent = kept(absent)
    jp.absent_len = len(absent)
    _jplans[id(cp)] = <Py_ssize_t>jp
    return jp


cdef struct Out:
    char *buf
    Py_ssize_t length
    Py_ssize_t capacity


# Produce requests and Fetch responses per topic-partition (the partition pass):
# the JSON walk, with fields marked by role noted as they pass.
cdef enum:
    R_TOPIC_NAME = 1
    R_TOPIC_ID = 2
    R_PARTITION_INDEX = 3
    R_ERROR_CODE = 4
    R_RECORDS = 5


cdef struct PartRow:
    int64_t frame
    const unsigned char *topic       # NULL: null (or absent)
    int32_t topic_len
    const unsigned char *topic_id    # 16 bytes; NULL: absent
    int32_t partition
    int16_t error_code
    bint has_error_code
    const unsigned char *records     # NULL: null
    int64_t records_len


cdef struct PartRows:
    PartRow *rows
    Py_ssize_t count
    Py_ssize_t capacity


cdef struct JCtx:
    const unsigned char *start   # the payload: error offsets count from here
    const unsigned char *p
    const unsigned char *end
    Out *out
    int status
    Py_ssize_t error
    int depth
    bint records_summary   # records fields as {"batches","records","bytes","compression"}, not base64
    bint version_fields    # leave out the fields the version lacks (a plan's absent ones)
    PartRows *parts        # the partition pass's rows (NULL in the JSON pass)
    PartRow current        # ... and the topic and partition being read


# ---- the frames both body passes read: the header pass's columns (its Columns struct,
# bound from the dict it returned in one loop) and the frames' bytes
cdef struct Frames:
    Columns c
    const unsigned char *data
    Py_ssize_t prefix        # 4: size-prefixed frames back to back; 0: payloads at offsets
    Py_ssize_t count


# The columns the body passes read, and those the JSON pass also writes (a body that fails).
cdef tuple BODY_PASS_COLUMNS = ("offset", "size", "api_key", "api_version", "status", "error_offset",
                               "body_offset", "direction")
cdef tuple WRITTEN_COLUMNS = ("status", "error_offset")


cdef int bind_frames(Frames *f, const unsigned char *data, dict cols, offsets, bint writes) except -1:
    """Point f at the header columns in ``cols`` (as the header pass made them) and at ``data``;
    ``writes``: the pass writes WRITTEN_COLUMNS, which must be writable."""
    cdef void **slots = column_slots(&f.c)
    memset(f, 0, sizeof(Frames))
    f.data = data
    f.prefix = 4 if offsets is None else 0
    f.count = len(cols["status"])
    for k in range(NCOLUMNS):
        name = COLUMN_NAMES[k]
        column = cols.get(name)
        if column is None:
            if name in BODY_PASS_COLUMNS:
                raise KeyError(name)
            continue
        if column.dtype != COLUMN_TYPES[k] or not column.flags.c_contiguous or len(column) < f.count:
            raise ValueError(f"column {name!r}: a contiguous {np.dtype(COLUMN_TYPES[k])} array of "
                             f"{f.count} values expected")
        if writes and name in WRITTEN_COLUMNS and not column.flags.writeable:
            raise ValueError(f"column {name!r} is read-only")
        slots[k] = <void *>array_ptr(column)
    return 0

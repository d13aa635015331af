# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The table-driven message codec and the headers, in Cython.

A :class:`kproto.schema.StructPlan` (shared with the pure twin) is compiled once
into a `CPlan`: a C array of field ops holding the slot offset of each field in
the generated class. One loop reads any plan, writing decoded values straight
into the object's slots, without calling ``__init__`` or ``setattr``.
"""

cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.list cimport PyList_New, PyList_SET_ITEM, PyList_GET_SIZE, PyList_GET_ITEM
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.long cimport PyLong_FromLongLong, PyLong_FromUnsignedLong, PyLong_CheckExact, PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.object cimport PyObject_RichCompareBool, Py_EQ, PyTypeObject, PyObject_TypeCheck
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT8_MIN, INT8_MAX, INT16_MIN, INT16_MAX, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX
from libc.string cimport memcmp, memset

from kproto._c._buffer cimport *
from kproto._c._wire cimport (
    WIRE_PART_CLIENT_ID, WIRE_PART_FIXED, WireHeader, WireTag, request_header_version, response_header_version,
    wire_request_header, wire_response_header, wire_utf8_valid,
)

from kproto import schema
from kproto.errors import (
    DecodeError, EncodeError, InvalidLengthError, LimitExceededError,
    UnsupportedRequestError,
)

cdef extern from "Python.h":
    int PyGC_Disable() noexcept
    int PyGC_Enable() noexcept
    int PyObject_GC_IsTracked(PyObject *op) noexcept
    void PyObject_GC_UnTrack(void *op) noexcept
    void PyObject_GC_Track(void *op) noexcept
    void list_set_item "PyList_SET_ITEM"(object list, Py_ssize_t i, PyObject *item) noexcept   # steals item

cdef extern from "kp_structs.h":
    # Instances of the generated classes: untracked, from a free list (see the header).
    object kp_struct_new(PyTypeObject *tp)
    int kp_struct_adopt(PyTypeObject *tp, Py_ssize_t declared_slots) noexcept

# Field kinds (K_*) are declared in _codec.pxd with the same numbers as kproto.schema.
assert (schema.BOOL, schema.INT32, schema.STRING, schema.RECORDS, schema.STRUCT, schema.ARRAY) == \
    (K_BOOL, K_INT32, K_STRING, K_RECORDS, K_STRUCT, K_ARRAY)

cdef enum:
    MAX_TAGGED_PER_STRUCT = 64


# The plan walker's sinks (_codec_walk.pxi says what each makes).
cdef struct Build:
    PyObject *source        # the Source being decoded: records fields view it
    PyObject *made          # the value a walk made: a new reference, until taken


cdef struct Check:
    char unused


ctypedef fused Sink:
    Build
    Check


cdef Py_ssize_t slot_offset(object cls, str name) except -1:
    descr = None
    for klass in cls.__mro__:
        descr = klass.__dict__.get(name)
        if descr is not None:
            break
    if type(descr) is LazyField:
        return (<LazyField>descr).offset
    cdef Py_ssize_t offset = member_slot_offset(descr)
    if offset < 0:
        raise TypeError(f"{cls.__name__}.{name} is not a slot")
    return offset


cdef int install_lazy_field(object cls, str name, object default_cls) except -1:
    """Put a LazyField in front of a struct-array or struct slot, once per class.

    ``default_cls`` is the class of a struct field whose absence leaves ABSENT_STRUCT
    in the slot (None for a struct array)."""
    cdef LazyField field
    descr = cls.__dict__.get(name)
    if type(descr) is LazyField:
        field = <LazyField>descr
    else:
        field = LazyField.__new__(LazyField)
        field.offset = slot_offset(cls, name)
        field.name = name
        type.__setattr__(cls, name, field)
    if default_cls is not None:
        field.default_cls = default_cls
    return 0


cdef class CPlan:
    """A StructPlan compiled to C arrays."""

    def __dealloc__(self):
        PyMem_Free(self.fields)
        PyMem_Free(self.tagged)
        PyMem_Free(self.absent)


cdef FieldOp *compile_ops(CPlan cp, tuple ops) except NULL:
    cdef Py_ssize_t n = len(ops)
    cdef FieldOp *out = <FieldOp *>PyMem_Malloc(sizeof(FieldOp) * (n if n else 1))
    if out == NULL:
        raise MemoryError()
    cdef Py_ssize_t i
    cdef object cls = <object>cp.cls
    for i in range(n):
        op = ops[i]
        name = sys_intern(op.name)
        cp.keep.append(name)
        cp.keep.append(op)
        out[i].name = <PyObject *>name
        out[i].offset = slot_offset(cls, name)
        out[i].kind = op.kind
        out[i].elem_kind = op.elem_kind
        out[i].nullable = op.nullable
        out[i].compact = op.compact
        out[i].ignorable = op.ignorable
        out[i].tag = op.tag
        out[i].pyop = <PyObject *>op
        out[i].default = <PyObject *>op.default
        out[i].struct_cls = <PyObject *>op.struct_cls
        out[i].run_width = 0
        out[i].run_count = 0
        if op.kind == K_ARRAY and op.elem_kind == K_STRUCT:
            install_lazy_field(cls, name, None)
        elif op.kind == K_STRUCT and op.default is not None:
            install_lazy_field(cls, name, op.struct_cls)
        if op.child is not None:
            child = native_plan(op.child)
            cp.keep.append(child)
            out[i].child = <PyObject *>child
        else:
            out[i].child = NULL
    return out


cdef object sys_intern = __import__("sys").intern


cdef void mark_fixed_runs(FieldOp *ops, Py_ssize_t n) noexcept:
    # The validating walk skips consecutive fixed-width fields with one bounds check
    # (e.g. a Metadata partition's error code, index, leader and epoch: 14 bytes).
    cdef Py_ssize_t i, width
    cdef Py_ssize_t run_width = 0, run_count = 0
    for i in range(n - 1, -1, -1):
        width = fixed_width(ops[i].kind)
        if width:
            run_width += width
            run_count += 1
        else:
            run_width = 0
            run_count = 0
        ops[i].run_width = run_width
        ops[i].run_count = run_count


cdef int adopt_struct_class(object cls) except -1:
    # Its fields' slots and Message's _unknown_tags; a class laid out otherwise keeps
    # CPython's deallocator (kp_struct_adopt checks).
    kp_struct_adopt(<PyTypeObject *>cls, len(cls._field_names) + 1)
    return 0


cdef CPlan native_plan(object plan):
    """The compiled form of a StructPlan, made once and cached on the plan."""
    cached = plan.native
    if cached is not None:
        return <CPlan>cached
    cdef CPlan cp = CPlan.__new__(CPlan)
    adopt_struct_class(plan.cls)
    cp.keep = [plan.cls]
    cp.plan = plan
    cp.cls = <PyTypeObject *>plan.cls
    cp.flexible = plan.flexible
    cp.unknown_tags_offset = slot_offset(plan.cls, "_unknown_tags")
    if len(plan.tagged) > MAX_TAGGED_PER_STRUCT:
        raise ValueError(f"{plan.name} has more than {MAX_TAGGED_PER_STRUCT} tagged fields")
    cp.fields = compile_ops(cp, plan.fields)
    cp.nfields = len(plan.fields)
    mark_fixed_runs(cp.fields, cp.nfields)
    cp.tagged = compile_ops(cp, plan.tagged)
    cp.ntagged = len(plan.tagged)
    cp.absent = compile_ops(cp, plan.absent)
    cp.nabsent = len(plan.absent)
    plan.native = cp   # only once complete: a failed compile must not leave half a plan
    return cp


# ------------------------------------------------------------------ int values
# Most integers a message holds are small (error codes, partition indexes, node ids,
# epochs): CPython keeps one object for each of -5..256, and taking it here saves
# PyLong_FromLong's call for each (a Metadata response has thousands).
cdef enum:
    SMALL_INT_MIN = -5
    SMALL_INT_COUNT = 262
cdef PyObject *small_ints[SMALL_INT_COUNT]


cdef int fill_small_ints() except -1:
    cdef Py_ssize_t i
    cdef object value   # an object: the table holds a reference to each
    for i in range(SMALL_INT_COUNT):
        value = i + SMALL_INT_MIN
        Py_INCREF(value)   # held for the life of the module
        small_ints[i] = <PyObject *>value
    return 0


fill_small_ints()


cdef inline object int_object(long long value):
    """The int of any signed Kafka integer (int8 to int64, uint16)."""
    # Unsigned arithmetic: one compare for the range, no signed overflow at the extremes.
    if <unsigned long long>value + <unsigned long long>(-SMALL_INT_MIN) < SMALL_INT_COUNT:
        return <object>small_ints[value - SMALL_INT_MIN]
    return PyLong_FromLongLong(value)


# ------------------------------------------------------------------ slots
cdef inline void set_slot(object obj, Py_ssize_t offset, object value) noexcept:
    cdef PyObject **slot = <PyObject **>((<char *><PyObject *>obj) + offset)
    cdef PyObject *old = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject *>value
    Py_XDECREF(old)


cdef inline PyObject *get_slot(object obj, Py_ssize_t offset) noexcept:
    return (<PyObject **>((<char *><PyObject *>obj) + offset))[0]


# ------------------------------------------------------------------ the cyclic GC
# What a decode builds is a tree: structs, lists, UUIDs, record views, holding
# ints, str, bytes and each other. A tree has no cycles, yet CPython's GC scans
# every tracked container at least once (the first collection after the decode)
# and again in older generations while it lives: for a 1,000-partition Metadata
# response that was more than the building itself. So, as CPython does for
# tuples and dicts of atomic values, a container is untracked once built when
# nothing it holds is tracked; parents of tracked values stay tracked (structs are
# made untracked, kp_structs.h, and tracked only then). The
# classes have __slots__ and no __dict__, so a cycle through decoded objects can
# only be made by storing an object inside its own subtree; such a cycle is
# leaked, never freed twice (as for records, see _records.pyx). Assigning a
# struct array through its attribute tracks the object again.

cdef inline bint is_tracked(object value) noexcept:
    return PyObject_GC_IsTracked(<PyObject *>value)


cdef inline void untrack(object container) noexcept:
    # Only for instances of GC types (lists, structs, UUIDs, views); a no-op when untracked.
    PyObject_GC_UnTrack(<PyObject *>container)


cdef bint ops_hold_tracked(object obj, FieldOp *ops, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    cdef PyObject *value
    cdef int kind
    for i in range(n):
        kind = ops[i].kind
        if is_container_kind(kind):
            value = get_slot(obj, ops[i].offset)
            if value != NULL and PyObject_GC_IsTracked(value):
                return True
    return False


cdef inline void track(object container) noexcept:
    if not PyObject_GC_IsTracked(<PyObject *>container):
        PyObject_GC_Track(<PyObject *>container)


cdef inline bint is_container_kind(int kind) noexcept:
    # ints, floats, bools, str and bytes are never tracked: only containers can be.
    return kind == K_ARRAY or kind == K_STRUCT or kind == K_UUID or kind == K_RECORDS


cdef inline bint made_is_tracked(Build *s, int kind) noexcept:
    """Whether the value a walk just made (about to go into a slot) is tracked."""
    return is_container_kind(kind) and PyObject_GC_IsTracked(s.made)


cdef bint others_hold_tracked(object obj, CPlan plan) noexcept:
    """Whether a built struct's tagged fields, absent fields' defaults or unknown tags hold
    something tracked (its fields proper were looked at as they were set)."""
    cdef PyObject *unknown = get_slot(obj, plan.unknown_tags_offset)
    return (unknown != NULL and PyObject_GC_IsTracked(unknown)) \
        or ops_hold_tracked(obj, plan.tagged, plan.ntagged) or ops_hold_tracked(obj, plan.absent, plan.nabsent)


cdef object fresh_default(FieldOp *op):
    if op.kind == K_ARRAY:
        if <object>op.default is None:
            return None
        empty = []
        untrack(empty)
        return empty
    if op.kind == K_STRUCT:
        if <object>op.default is None:
            return None
        return ABSENT_STRUCT   # its LazyField builds the struct of defaults if it is read
    return <object>op.default


cdef class AbsentStruct:
    """Stands in a decoded struct's slot for a struct field the input did not carry.

    Kafka fills such a field (an absent version's, a tagged one left out; e.g. each
    FetchResponse partition's CurrentLeader, DivergingEpoch and SnapshotId) with a
    struct of defaults. Most readers never look at them, so the slot's LazyField
    builds that struct on first read, and the encoder takes it as the default. Never
    seen by users; holds nothing, so the cyclic GC ignores it.
    """


cdef AbsentStruct ABSENT_STRUCT = AbsentStruct.__new__(AbsentStruct)


cdef class DefaultMaker:
    """Builds a struct of defaults (what ``cls()`` makes) without running Python code.

    Kafka fills absent struct fields (e.g. FetchResponse's tagged CurrentLeader) with
    a struct of defaults; calling the class for each partition dominated decoding.
    """
    cdef object cls
    cdef Py_ssize_t n
    cdef Py_ssize_t *offsets
    cdef tuple defaults
    cdef tuple kinds
    cdef tuple children
    cdef int *kind_codes        # kinds as C ints, for the allocation loop
    cdef Py_ssize_t unknown_offset

    def __dealloc__(self):
        PyMem_Free(self.offsets)
        PyMem_Free(self.kind_codes)


cdef dict default_makers = {}


cdef DefaultMaker default_maker(object cls):
    found = default_makers.get(cls)
    if found is not None:
        return <DefaultMaker>found
    cdef DefaultMaker m = DefaultMaker.__new__(DefaultMaker)
    m.cls = cls
    names = cls._field_names
    m.n = len(names)
    m.offsets = <Py_ssize_t *>PyMem_Malloc(sizeof(Py_ssize_t) * (m.n if m.n else 1))
    m.kind_codes = <int *>PyMem_Malloc(sizeof(int) * (m.n if m.n else 1))
    if m.offsets == NULL or m.kind_codes == NULL:
        raise MemoryError()
    cdef Py_ssize_t i
    m.defaults = tuple(cls._field_defaults)
    m.kinds = tuple(cls._field_kinds)
    for i in range(m.n):
        m.offsets[i] = slot_offset(cls, names[i])
        m.kind_codes[i] = m.kinds[i]
    m.children = tuple(cls._field_struct)
    m.unknown_offset = slot_offset(cls, "_unknown_tags")
    adopt_struct_class(cls)
    default_makers[cls] = m
    return m


cdef object new_default_struct(object cls):
    cdef DefaultMaker m = default_maker(cls)
    cdef object obj = kp_struct_new(<PyTypeObject *>cls)
    cdef Py_ssize_t i
    cdef int kind
    cdef bint holds_tracked = False
    cdef object default
    for i in range(m.n):
        kind = m.kind_codes[i]
        default = <object>PyTuple_GET_ITEM(m.defaults, i)
        if kind == K_ARRAY:
            value = None
            if default is not None:
                value = []
                untrack(value)
        elif kind == K_STRUCT:
            value = None
            if default is not None:
                value = new_default_struct(<object>PyTuple_GET_ITEM(m.children, i))
                holds_tracked |= is_tracked(value)
        else:
            value = default    # immutable scalars, never tracked
        set_slot(obj, m.offsets[i], value)
    set_slot(obj, m.unknown_offset, None)
    if holds_tracked:
        track(obj)
    return obj


# ------------------------------------------------------------------ the Build sink's objects
# What the plan walker (_codec_walk.pxi) calls to make objects in the eager read.

cdef inline object new_struct(CPlan plan):
    """An empty instance of the plan's class (slots filled by the walker, no __init__)."""
    return kp_struct_new(plan.cls)


cdef inline void set_absent_defaults(object obj, CPlan plan):
    # Fields this version lacks hold their defaults, as cls() would give them.
    cdef Py_ssize_t i
    for i in range(plan.nabsent):
        set_slot(obj, plan.absent[i].offset, fresh_default(&plan.absent[i]))


# The walker's Build sink holds the value a walk made (a new reference) until the caller
# takes it: into a slot, a list, or out of the walk.
cdef inline int made(Build *s, object value) except -1:
    Py_INCREF(value)
    s.made = <PyObject *>value
    return 0


cdef inline object take_made(Build *s):
    value = <object>s.made
    Py_DECREF(value)   # the sink's reference, now value's
    s.made = NULL
    return value


cdef inline void set_slot_made(object obj, Py_ssize_t offset, Build *s) noexcept:
    cdef PyObject **slot = <PyObject **>((<char *><PyObject *>obj) + offset)
    cdef PyObject *old = slot[0]
    slot[0] = s.made   # the reference moves into the slot
    s.made = NULL
    Py_XDECREF(old)


cdef inline bint list_put_made(object out, Py_ssize_t i, Build *s) noexcept:
    """Move the made value into a new list's slot i; whether it is GC-tracked (untracked lists stay so)."""
    cdef PyObject *item = s.made
    s.made = NULL
    list_set_item(out, i, item)
    return PyObject_GC_IsTracked(item)


cdef inline object build_uuid(ByteReader *r):
    value = read_uuid(r)
    untrack(value)   # immutable: it can never hold anything
    return value


cdef object build_records(ByteReader *r, bint compact, bint nullable, object source):
    cdef Py_ssize_t n, start
    if compact:
        n = read_compact_length(r, nullable, "records length")
    else:
        n = read_length32(r, nullable, "records length")
    if n < 0:
        return None
    start = r.p - r.start
    r.p += n
    # A lazy, zero-copy view of the input: batches are parsed only when asked for.
    value = records_view_over((<Source>source).obj, start, n)
    if PyBytes_CheckExact((<Source>source).obj):
        untrack(value)   # holds only the immutable input (another owner could refer back)
    return value


cdef object read_int32_array(ByteReader *r, FieldOp *op, PathFrame *frame):
    cdef Py_ssize_t n = read_array_count(r, op.compact, op.nullable)
    cdef Py_ssize_t i
    if n < 0:
        return None
    if r.end - r.p < 4 * n:
        # Fail exactly where an element-by-element read would: same offset and index.
        frame.index = (r.end - r.p) // 4
        r.p += 4 * frame.index
        raise_truncated(r, 4)
    out = PyList_New(n)
    for i in range(n):
        item = int_object(<int32_t>kp_load_be32(r.p))
        r.p += 4
        Py_INCREF(item)
        PyList_SET_ITEM(out, i, item)
    untrack(out)
    return out


cdef object read_struct_top(ByteReader *r, CPlan plan, object source):
    # A decode allocates thousands of container objects that cannot form cycles
    # yet; letting the cyclic GC scan them mid-decode costs a third of the time.
    # Pause it for the duration (as json decoders do) and restore its state.
    cdef int was_enabled = PyGC_Disable()
    try:
        return read_struct(r, plan, source)
    finally:
        if was_enabled:
            PyGC_Enable()


from kproto._c._records cimport records_view_over


cdef class Source:
    """The decoded buffer, held for as long as a zero-copy view or lazy array needs it.

    bytes are used in place; any other buffer is exported once (which also stops a
    bytearray from being resized under the views).
    """
    cdef object obj
    cdef Py_buffer view
    cdef bint has_view
    cdef const unsigned char *base
    cdef Py_ssize_t size

    def __cinit__(self, obj):
        self.obj = obj
        if PyBytes_CheckExact(obj):
            self.base = <const unsigned char *>PyBytes_AS_STRING(obj)
            self.size = PyBytes_GET_SIZE(obj)
        else:
            PyObject_GetBuffer(obj, &self.view, PyBUF_SIMPLE)
            self.has_view = True
            self.base = <const unsigned char *>self.view.buf
            self.size = self.view.len

    def __dealloc__(self):
        if self.has_view:
            PyBuffer_Release(&self.view)


# ------------------------------------------------------------------ lazy struct arrays
# Arrays of structs are where decoding spends its time (a Metadata response's
# partitions, a Fetch response's topics). Decoding scans them fully -- every length,
# varint, tag and UTF-8 string is checked, so bad input still fails at decode time
# with its path and offset -- but builds their objects only when the attribute is
# first read. A LazyField descriptor in front of the slot does that transparently:
# users only ever see lists. Re-encoding an untouched array at the same version
# copies its bytes.

cdef class PendingArray:
    """The still-encoded elements of a struct array (never seen by users).

    Only the outermost struct arrays of a decode are pending; reading one builds
    everything below it.
    """
    cdef Source src
    cdef Py_ssize_t start
    cdef Py_ssize_t end
    cdef Py_ssize_t count
    cdef CPlan elem
    cdef object root_name
    cdef int api_key
    cdef int api_version

    def __len__(self):
        return self.count

    def __repr__(self):
        return f"<pending array of {self.count} {self.elem.plan.name}>"


cdef object pending_struct_array(ByteReader *r, FieldOp *op, Py_ssize_t n, const unsigned char *start,
                                 object source):
    """The n elements from start to r.p (already checked by the walker), to build on first read."""
    cdef PendingArray pending = PendingArray.__new__(PendingArray)
    pending.src = <Source>source
    pending.start = start - pending.src.base
    pending.end = r.p - pending.src.base
    pending.count = n
    pending.elem = <CPlan>op.child
    pending.root_name = <object>r.root_name if r.root_name != NULL else None
    pending.api_key = r.api_key
    pending.api_version = r.api_version
    return pending


cdef object materialize(PendingArray pending):
    # The whole subtree is built at once (nested arrays too), under one GC pause:
    # materializing level by level let the collector run between small bursts,
    # which cost more than the objects themselves.
    cdef ByteReader r
    cdef Py_ssize_t i
    reader_init(&r, pending.src.base, pending.end)
    r.p = pending.src.base + pending.start
    r.prevalidated = 1
    r.root_name = <PyObject *>pending.root_name if pending.root_name is not None else NULL
    r.api_key = pending.api_key
    r.api_version = pending.api_version
    r.depth = 1
    r.path[0].name = NULL
    cdef int was_enabled = PyGC_Disable()
    try:
        out = PyList_New(pending.count)
        holds_tracked = False
        for i in range(pending.count):
            r.path[0].index = i
            r.depth = 1
            item = read_struct(&r, pending.elem, pending.src)
            holds_tracked |= is_tracked(item)
            Py_INCREF(item)
            PyList_SET_ITEM(out, i, item)
        if not holds_tracked:
            untrack(out)
    finally:
        if was_enabled:
            PyGC_Enable()
    if r.p != r.end:
        raise_decode(&r, InvalidLengthError, "lazy array ended before its scanned end")
    return out


cdef class LazyField:
    """Descriptor for a struct-array or struct slot: turns a PendingArray into a list, and
    ABSENT_STRUCT into a struct of defaults, on first read."""
    cdef Py_ssize_t offset
    cdef str name
    cdef object default_cls   # the struct field's class, or None for a struct array

    def __get__(self, obj, objtype):
        if obj is None:
            return self
        cdef PyObject *value = get_slot(obj, self.offset)
        if value == NULL:
            raise AttributeError(f"'{type(obj).__name__}' object has no attribute '{self.name}'")
        if type(<object>value) is PendingArray:
            items = materialize(<PendingArray>value)
            set_slot(obj, self.offset, items)
            return items
        if value == <PyObject *>ABSENT_STRUCT:
            default = new_default_struct(self.default_cls)
            set_slot(obj, self.offset, default)
            if is_tracked(default):
                track(obj)
            return default
        return <object>value

    def __set__(self, obj, value):
        set_slot(obj, self.offset, value)
        # A decoded struct may be untracked; a list put here may come to hold it.
        if is_tracked(value) and not is_tracked(obj):
            PyObject_GC_Track(<PyObject *>obj)

    def __delete__(self, obj):
        cdef PyObject **slot = <PyObject **>((<char *><PyObject *>obj) + self.offset)
        if slot[0] == NULL:
            raise AttributeError(self.name)
        cdef PyObject *old = slot[0]
        slot[0] = NULL
        Py_XDECREF(old)


# ------------------------------------------------------------------ struct depth
# The decode walk and the encoder enter a nested struct alike; each raises its own error
# (LimitExceededError with the reader's path, EncodeError) when this returns NULL.
cdef inline PathFrame *enter_struct(PathFrame *path, int *depth) noexcept:
    """The cleared path frame of a struct one level below depth[0], depth[0] moved onto it;
    NULL, with nothing changed, when structs would nest deeper than MAX_PATH_DEPTH."""
    cdef int level = depth[0]
    if level >= MAX_PATH_DEPTH:
        return NULL
    cdef PathFrame *frame = &path[level]
    frame.name = NULL
    frame.index = -1
    depth[0] = level + 1
    return frame


include "_codec_walk.pxi"
include "_codec_scan.pxi"
include "_codec_encode.pxi"
include "_codec_headers.pxi"

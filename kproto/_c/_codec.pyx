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
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.long cimport PyLong_FromLong, PyLong_FromLongLong, PyLong_FromUnsignedLong, PyLong_CheckExact, PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.memoryview cimport PyMemoryView_FromObject
from cpython.object cimport PyObject_RichCompareBool, Py_EQ, PyTypeObject, PyObject_TypeCheck
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT8_MIN, INT8_MAX, INT16_MIN, INT16_MAX, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX
from libc.string cimport memcmp, memcpy

from kproto._c._buffer cimport *
from kproto._c._wire cimport request_header_version, response_header_version, wire_utf8_valid

from kproto import schema
from kproto.errors import (
    DecodeError, EncodeError, InvalidLengthError, LimitExceededError,
    UnsupportedRequestError,
)

cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject *tp, Py_ssize_t nitems)
    int PyGC_Disable() noexcept
    int PyGC_Enable() noexcept
    int PyObject_GC_IsTracked(PyObject *op) noexcept
    void PyObject_GC_UnTrack(void *op) noexcept
    void PyObject_GC_Track(void *op) noexcept
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member

# Field kinds (K_*) are declared in _codec.pxd with the same numbers as kproto.schema.
assert (schema.BOOL, schema.INT32, schema.STRING, schema.RECORDS, schema.STRUCT, schema.ARRAY) == \
    (K_BOOL, K_INT32, K_STRING, K_RECORDS, K_STRUCT, K_ARRAY)

cdef enum:
    MAX_TAGGED_PER_STRUCT = 64


cdef Py_ssize_t slot_offset(object cls, str name) except -1:
    descr = None
    for klass in cls.__mro__:
        descr = klass.__dict__.get(name)
        if descr is not None:
            break
    if type(descr) is LazyField:
        return (<LazyField>descr).offset
    if descr is None or type(descr).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{name} is not a slot")
    return (<PyMemberDescrObject *>descr).d_member.offset


cdef int install_lazy_field(object cls, str name) except -1:
    """Put a LazyField in front of a struct-array slot, once per class."""
    descr = cls.__dict__.get(name)
    if type(descr) is LazyField:
        return 0
    cdef LazyField field = LazyField.__new__(LazyField)
    field.offset = slot_offset(cls, name)
    field.name = name
    type.__setattr__(cls, name, field)
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
        if op.kind == K_ARRAY and op.elem_kind == K_STRUCT:
            install_lazy_field(cls, name)
        if op.child is not None:
            child = native_plan(op.child)
            cp.keep.append(child)
            out[i].child = <PyObject *>child
        else:
            out[i].child = NULL
    return out


cdef object sys_intern = __import__("sys").intern


cdef CPlan native_plan(object plan):
    """The compiled form of a StructPlan, made once and cached on the plan."""
    cached = plan.native
    if cached is not None:
        return <CPlan>cached
    cdef CPlan cp = CPlan.__new__(CPlan)
    cp.keep = [plan.cls]
    cp.plan = plan
    cp.cls = <PyTypeObject *>plan.cls
    cp.flexible = plan.flexible
    cp.unknown_tags_offset = slot_offset(plan.cls, "_unknown_tags")
    if len(plan.tagged) > MAX_TAGGED_PER_STRUCT:
        raise ValueError(f"{plan.name} has more than {MAX_TAGGED_PER_STRUCT} tagged fields")
    cp.fields = compile_ops(cp, plan.fields)
    cp.nfields = len(plan.fields)
    cp.tagged = compile_ops(cp, plan.tagged)
    cp.ntagged = len(plan.tagged)
    cp.absent = compile_ops(cp, plan.absent)
    cp.nabsent = len(plan.absent)
    plan.native = cp   # only once complete: a failed compile must not leave half a plan
    return cp


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
# nothing it holds is tracked; parents of tracked values stay tracked. The
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
        # ints, floats, bools, str and bytes are never tracked: only look at containers.
        if kind == K_ARRAY or kind == K_STRUCT or kind == K_UUID or kind == K_RECORDS:
            value = get_slot(obj, ops[i].offset)
            if value != NULL and PyObject_GC_IsTracked(value):
                return True
    return False


cdef void untrack_struct_if_acyclic(object obj, CPlan plan) noexcept:
    cdef PyObject *unknown = get_slot(obj, plan.unknown_tags_offset)
    if unknown != NULL and PyObject_GC_IsTracked(unknown):
        return
    if ops_hold_tracked(obj, plan.fields, plan.nfields) or ops_hold_tracked(obj, plan.tagged, plan.ntagged) \
            or ops_hold_tracked(obj, plan.absent, plan.nabsent):
        return
    untrack(obj)


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
        return new_default_struct(<object>op.struct_cls)
    return <object>op.default


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
    default_makers[cls] = m
    return m


cdef object new_default_struct(object cls):
    cdef DefaultMaker m = default_maker(cls)
    cdef object obj = PyType_GenericAlloc(<PyTypeObject *>cls, 0)
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
    if not holds_tracked:
        untrack(obj)
    return obj


# ------------------------------------------------------------------ decoding
cdef object read_value(ByteReader *r, FieldOp *op, int kind, bint nullable, PathFrame *frame,
                       object source):
    cdef Py_ssize_t n, i
    cdef int8_t marker
    if kind == K_INT32:
        return PyLong_FromLong(read_int32(r))
    if kind == K_STRING:
        return read_string_value(r, op.compact, nullable)
    if kind == K_INT16:
        return PyLong_FromLong(read_int16(r))
    if kind == K_INT64:
        return PyLong_FromLongLong(read_int64(r))
    if kind == K_ARRAY:
        n = read_array_count(r, op.compact, nullable)
        if n < 0:
            return None
        if op.elem_kind == K_STRUCT and not r.prevalidated:
            return pending_struct_array(r, op, n, frame, source)
        out = PyList_New(n)
        holds_tracked = False
        for i in range(n):
            frame.index = i
            item = read_value(r, op, op.elem_kind, False, frame, source)
            holds_tracked |= is_tracked(item)
            Py_INCREF(item)
            PyList_SET_ITEM(out, i, item)
        frame.index = -1
        if not holds_tracked:
            untrack(out)
        return out
    if kind == K_STRUCT:
        if nullable:
            marker = read_int8(r)
            if marker == -1:
                return None
            if marker != 1:
                raise_decode(r, DecodeError, f"invalid nullable struct marker {marker}")
        return read_struct(r, <CPlan>op.child, source)
    if kind == K_INT8:
        return PyLong_FromLong(read_int8(r))
    if kind == K_BOOL:
        return read_bool(r) != 0
    if kind == K_UUID:
        value = read_uuid(r)
        untrack(value)   # immutable: it can never hold anything
        return value
    if kind == K_BYTES:
        return read_bytes_value(r, op.compact, nullable)
    if kind == K_RECORDS:
        if op.compact:
            n = read_compact_length(r, nullable, "records length")
        else:
            n = read_length32(r, nullable, "records length")
        if n < 0:
            return None
        i = r.p - r.start
        r.p += n
        # A lazy, zero-copy view of the input: batches are parsed only when asked for.
        value = records_view_over((<Source>source).obj, i, n)
        if PyBytes_CheckExact((<Source>source).obj):
            untrack(value)   # holds only the immutable input (another owner could refer back)
        return value
    if kind == K_UINT16:
        return PyLong_FromLong(read_uint16(r))
    if kind == K_UINT32:
        return PyLong_FromUnsignedLong(read_uint32(r))
    if kind == K_FLOAT64:
        return read_float64(r)
    raise AssertionError(f"unknown field kind {kind}")


cdef object read_struct(ByteReader *r, CPlan plan, object source):
    cdef int depth = r.depth
    if depth >= MAX_PATH_DEPTH:
        raise_decode(r, LimitExceededError, f"structs nested deeper than {MAX_PATH_DEPTH}")
    cdef PathFrame *frame = &r.path[depth]
    frame.name = NULL
    frame.index = -1
    r.depth = depth + 1
    cdef object obj = PyType_GenericAlloc(plan.cls, 0)
    cdef Py_ssize_t i
    cdef FieldOp *op
    cdef int kind
    for i in range(plan.nfields):
        op = &plan.fields[i]
        frame.name = op.name
        kind = op.kind
        # The common scalar kinds inline; everything else through read_value.
        if kind == K_INT32:
            set_slot(obj, op.offset, PyLong_FromLong(read_int32(r)))
        elif kind == K_INT16:
            set_slot(obj, op.offset, PyLong_FromLong(read_int16(r)))
        elif kind == K_STRING:
            set_slot(obj, op.offset, read_string_value(r, op.compact, op.nullable))
        elif kind == K_ARRAY and op.elem_kind == K_INT32:
            set_slot(obj, op.offset, read_int32_array(r, op, frame))
        else:
            set_slot(obj, op.offset, read_value(r, op, kind, op.nullable, frame, source))
    for i in range(plan.nabsent):
        op = &plan.absent[i]
        set_slot(obj, op.offset, fresh_default(op))
    if plan.flexible:
        set_slot(obj, plan.unknown_tags_offset, read_tagged(r, plan, obj, frame, source))
    else:
        set_slot(obj, plan.unknown_tags_offset, None)
    untrack_struct_if_acyclic(obj, plan)
    r.depth = depth
    return obj


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
        item = PyLong_FromLong(<int32_t>kp_load_be32(r.p))
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


cdef object pending_struct_array(ByteReader *r, FieldOp *op, Py_ssize_t n, PathFrame *frame, object source):
    cdef Py_ssize_t i
    cdef const unsigned char *start = r.p
    for i in range(n):
        frame.index = i
        skip_struct(r, <CPlan>op.child)
    frame.index = -1
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
    """Descriptor for a struct-array slot: turns a PendingArray into a list on first read."""
    cdef Py_ssize_t offset
    cdef str name

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
    cdef uint32_t count, k, tag, size
    cdef int64_t previous = -1
    cdef Py_ssize_t j
    cdef const unsigned char *outer_end
    count = read_tagged_count(r, frame)
    for k in range(count):
        j = read_tag_entry(r, plan, &previous, &tag, &size)
        if j < 0:
            r.p += size
            continue
        outer_end = enter_tagged_value(r, &plan.tagged[j], size, frame)
        skip_value(r, &plan.tagged[j], plan.tagged[j].kind, plan.tagged[j].nullable, frame)
        leave_tagged_value(r, outer_end, tag, size, frame)
    return 0


# ---- the tagged-field section, shared by the eager read and the validating scan
cdef uint32_t read_tagged_count(ByteReader *r, PathFrame *frame) except? 0xFFFFFFFF:
    frame.name = <PyObject *>TAGGED_SECTION
    cdef uint32_t count = read_unsigned_varint(r)
    if count > <uint32_t>(r.end - r.p):
        raise_invalid_length(r, count, "tagged field count")
    return count


cdef Py_ssize_t read_tag_entry(ByteReader *r, CPlan plan, int64_t *previous, uint32_t *tag_out,
                               uint32_t *size_out) except -2:
    """One tag and size, in strictly ascending tag order, the size within the bytes left.
    Returns the index of the known tagged field, or -1 for a tag this plan does not know."""
    cdef uint32_t tag = read_unsigned_varint(r)
    if <int64_t>tag <= previous[0]:
        raise_decode(r, DecodeError, f"tagged field {tag} out of order (after {previous[0]})")
    previous[0] = tag
    cdef uint32_t size = read_unsigned_varint(r)
    if size > <uint32_t>(r.end - r.p):
        raise_truncated(r, size)
    tag_out[0] = tag
    size_out[0] = size
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
    cdef uint32_t count, k, tag, size
    cdef int64_t previous = -1
    cdef Py_ssize_t j
    cdef const unsigned char *outer_end
    cdef dict unknown = None
    count = read_tagged_count(r, frame)
    for j in range(plan.ntagged):
        seen[j] = 0
    for k in range(count):
        j = read_tag_entry(r, plan, &previous, &tag, &size)
        if j < 0:
            if unknown is None:
                unknown = {}
            unknown[tag] = read_bytes_body(r, size)
            continue
        outer_end = enter_tagged_value(r, &plan.tagged[j], size, frame)
        value = read_value(r, &plan.tagged[j], plan.tagged[j].kind, plan.tagged[j].nullable, frame, source)
        leave_tagged_value(r, outer_end, tag, size, frame)
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
        return is_default_struct(value, <object>op.struct_cls)
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
            elif not is_default_struct(<object>field, m.children[i]):
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
            if (<PendingArray>value).elem is <CPlan>op.child:
                # Untouched and encoded with the very same plan: copy its bytes.
                write_length(w, (<PendingArray>value).count, op.compact, True)
                return write_raw(w, (<PendingArray>value).src.base + (<PendingArray>value).start,
                                 (<PendingArray>value).end - (<PendingArray>value).start)
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
    if st.depth >= MAX_PATH_DEPTH:
        raise EncodeError(f"structs nested deeper than {MAX_PATH_DEPTH}")
    cdef int depth = st.depth
    cdef PathFrame *frame = &st.path[depth]
    frame.name = NULL
    frame.index = -1
    st.depth = depth + 1
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


# ------------------------------------------------------------------ headers
# The header-version rule is kproto.schema.header_version, read into C tables by _wire.
from kproto._c._wire import header_version


@cython.final
@cython.freelist(64)
@cython.no_gc   # ints, a str and a dict of bytes: nothing here can form a reference cycle
cdef class RequestHeader:
    """A request header, v0, v1 or v2 (the version follows from the API key and version).

    ``request_api_key``, ``request_api_version``, ``correlation_id``, ``client_id``
    (None in v0 or when null) and ``_unknown_tags`` (v2 tagged fields as {tag: bytes}).
    """
    cdef public int request_api_key
    cdef public int request_api_version
    cdef public int correlation_id
    cdef public str client_id
    cdef public dict _unknown_tags

    def __init__(self, *, int request_api_key=0, int request_api_version=0, int correlation_id=0,
                 str client_id=None, dict _unknown_tags=None):
        self.request_api_key = request_api_key
        self.request_api_version = request_api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self._unknown_tags = _unknown_tags

    # Deprecated short names (docs/api.md). A Cython property makes no Python frame, so
    # the warning points one level up less than the twin's.
    @property
    def api_key(self):
        _warn_deprecated("RequestHeader.api_key", "RequestHeader.request_api_key", stacklevel=2)
        return self.request_api_key

    @property
    def api_version(self):
        _warn_deprecated("RequestHeader.api_version", "RequestHeader.request_api_version", stacklevel=2)
        return self.request_api_version

    def to_dict(self):
        return header_dict(self)

    def __eq__(self, other):
        return header_eq(self, other)

    def __repr__(self):
        return header_repr(self)

    def __reduce__(self):
        return (header_rebuild, (type(self), header_fields(self)))


@cython.final
@cython.freelist(64)
@cython.no_gc
cdef class ResponseHeader:
    """A response header, v0 or v1: ``correlation_id`` and ``_unknown_tags`` (v1)."""
    cdef public int correlation_id
    cdef public dict _unknown_tags

    def __init__(self, *, int correlation_id=0, dict _unknown_tags=None):
        self.correlation_id = correlation_id
        self._unknown_tags = _unknown_tags

    def to_dict(self):
        return header_dict(self)

    def __eq__(self, other):
        return header_eq(self, other)

    def __repr__(self):
        return header_repr(self)

    def __reduce__(self):
        return (header_rebuild, (type(self), header_fields(self)))


from kproto._headers import header_dict, header_eq, header_fields, header_rebuild, header_repr
from kproto._deprecation import warn as _warn_deprecated


cdef str REQUEST_HEADER_NAME = "RequestHeader"
cdef str RESPONSE_HEADER_NAME = "ResponseHeader"
cdef str CLIENT_ID_NAME = "client_id"

# Clients send the same client id on every request: remember the last one decoded.
cdef bytes last_client_id_raw = b""
cdef str last_client_id = ""


cdef str read_client_id(ByteReader *r):
    global last_client_id_raw, last_client_id
    cdef Py_ssize_t n = read_length16(r, True, "string length")
    if n < 0:
        return None
    if n == PyBytes_GET_SIZE(last_client_id_raw) and \
            memcmp(r.p, PyBytes_AS_STRING(last_client_id_raw), n) == 0:
        r.p += n
        return last_client_id
    cdef const unsigned char *start = r.p
    s = read_str_body(r, n)
    if n <= 256:
        last_client_id_raw = (<char *>start)[:n]
        last_client_id = s
    return s


cdef object read_request_header(ByteReader *r, int *version_out):
    r.root_name = <PyObject *>REQUEST_HEADER_NAME
    cdef int api_key = read_int16(r)
    cdef int api_version = read_int16(r)
    cdef int32_t correlation_id = read_int32(r)
    cdef int version = request_header_version(api_key, api_version)
    cdef RequestHeader h = RequestHeader.__new__(RequestHeader)
    h.request_api_key = api_key
    h.request_api_version = api_version
    h.correlation_id = correlation_id
    r.depth = 1
    r.path[0].name = <PyObject *>CLIENT_ID_NAME
    r.path[0].index = -1
    if version >= 1:
        h.client_id = read_client_id(r)
    r.path[0].name = <PyObject *>TAGGED_SECTION
    if version >= 2:
        h._unknown_tags = read_raw_tagged_fields(r)
    r.depth = 0
    r.root_name = NULL
    version_out[0] = version
    return h


cdef object read_response_header(ByteReader *r, int api_key, int api_version, int *version_out):
    r.root_name = <PyObject *>RESPONSE_HEADER_NAME
    cdef int32_t correlation_id = read_int32(r)
    cdef int version = response_header_version(api_key, api_version)
    cdef ResponseHeader h = ResponseHeader.__new__(ResponseHeader)
    h.correlation_id = correlation_id
    if version >= 1:
        h._unknown_tags = read_raw_tagged_fields(r)
    r.root_name = NULL
    version_out[0] = version
    return h


def decode_request_header_info(buf):
    """Decode just the request header of a payload; returns (header, header_version, body_offset)."""
    cdef Py_buffer view
    cdef ByteReader r
    cdef int version
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        reader_init(&r, <const unsigned char *>view.buf, view.len)
        h = read_request_header(&r, &version)
        return h, version, r.p - r.start
    finally:
        PyBuffer_Release(&view)


def decode_request_header(payload, *, bint size_prefixed=False):
    """The request header of a payload (or of a whole frame with ``size_prefixed=True``)."""
    cdef Py_buffer view
    cdef ByteReader r
    cdef int version
    if PyBytes_CheckExact(payload):
        # The common case, without the buffer-protocol round trip.
        reader_init(&r, <const unsigned char *>PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload))
        if size_prefixed:
            check_size_prefix(&r)
        return read_request_header(&r, &version)
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        reader_init(&r, <const unsigned char *>view.buf, view.len)
        if size_prefixed:
            check_size_prefix(&r)
        return read_request_header(&r, &version)
    finally:
        PyBuffer_Release(&view)


cdef int check_size_prefix(ByteReader *r) except -1:
    cdef int32_t size = read_int32(r)
    if size != r.end - r.p:
        raise DecodeError(f"frame size {size} does not match the {r.end - r.p} bytes that follow", 0)
    # Offsets in errors stay relative to the frame start, as for any other field.
    return 0


def decode_response_header(buf, int api_key, int api_version):
    cdef Py_buffer view
    cdef ByteReader r
    cdef int version
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        reader_init(&r, <const unsigned char *>view.buf, view.len)
        h = read_response_header(&r, api_key, api_version, &version)
        return h, version, r.p - r.start
    finally:
        PyBuffer_Release(&view)


cdef dict request_plans = {}


cdef CPlan request_plan(int api_key, int api_version, object header, Py_ssize_t offset):
    cdef int key = (api_key << 16) | (api_version & 0xFFFF)
    cached = request_plans.get(key)
    if cached is not None:
        return <CPlan>cached
    plan = schema.api_plan(api_key, api_version, True, header=header, offset=offset)
    cp = native_plan(plan)
    request_plans[key] = cp
    return cp


def decode_request(buf):
    """(header, header_version, body) of a request payload (no size prefix)."""
    cdef ByteReader r
    cdef int version
    cdef Source src = Source(buf)
    reader_init(&r, src.base, src.size)
    h = read_request_header(&r, &version)
    cp = request_plan((<RequestHeader>h).request_api_key, (<RequestHeader>h).request_api_version,
                      h, r.p - r.start)
    prepare(&r, cp)
    body = read_struct_top(&r, cp, src)
    check_consumed(&r, cp.plan)
    return h, version, body


def decode_response(buf, int api_key, int api_version, plan):
    """(header, header_version, body) of a response payload, given the request's API and version."""
    cdef ByteReader r
    cdef int version
    cdef CPlan cp = native_plan(plan)
    cdef Source src = Source(buf)
    reader_init(&r, src.base, src.size)
    h = read_response_header(&r, api_key, api_version, &version)
    if r.p == r.end:
        raise UnsupportedRequestError(
            "response holds only a correlation id: the broker did not support the request",
            r.p - r.start, None, api_key, api_version)
    prepare(&r, cp)
    body = read_struct_top(&r, cp, src)
    check_consumed(&r, plan)
    return h, version, body


def encode_request(body, plan, correlation_id, client_id, header_tags=None):
    cdef ByteWriter w
    cdef int api_key = plan.api_key
    cdef int api_version = plan.version
    cdef int version = request_header_version(api_key, api_version)
    writer_init(&w, 256)
    try:
        write_int16(&w, <int16_t>api_key)
        write_int16(&w, <int16_t>api_version)
        write_int32(&w, <int32_t>as_int(correlation_id, INT32_MIN, INT32_MAX, "int32"))
        if version >= 1:
            write_string_value(&w, client_id, False, True)
        if version >= 2:
            write_raw_tagged_fields(&w, header_tags)
        encode_into(&w, body, plan)
        return writer_to_bytes(&w)
    finally:
        writer_free(&w)


def encode_response(body, plan, correlation_id, header_tags=None):
    cdef ByteWriter w
    writer_init(&w, 256)
    try:
        write_int32(&w, <int32_t>as_int(correlation_id, INT32_MIN, INT32_MAX, "int32"))
        if response_header_version(plan.api_key, plan.version) >= 1:
            write_raw_tagged_fields(&w, header_tags)
        encode_into(&w, body, plan)
        return writer_to_bytes(&w)
    finally:
        writer_free(&w)


def encode_request_header(header, int header_version):
    cdef ByteWriter w
    writer_init(&w, 64)
    try:
        write_int16(&w, <int16_t>as_int(header.request_api_key, INT16_MIN, INT16_MAX, "int16"))
        write_int16(&w, <int16_t>as_int(header.request_api_version, INT16_MIN, INT16_MAX, "int16"))
        write_int32(&w, <int32_t>as_int(header.correlation_id, INT32_MIN, INT32_MAX, "int32"))
        if header_version >= 1:
            write_string_value(&w, header.client_id, False, True)
        if header_version >= 2:
            write_raw_tagged_fields(&w, header._unknown_tags)
        return writer_to_bytes(&w)
    finally:
        writer_free(&w)

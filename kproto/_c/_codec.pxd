# The message codec's compiled plans, shared with other Cython modules (the batch decoder).

from cpython.ref cimport PyObject
from cpython.object cimport PyTypeObject
from kproto._c._buffer cimport ByteReader, ByteWriter, PathFrame

cdef enum:
    K_BOOL = 1
    K_INT8 = 2
    K_INT16 = 3
    K_INT32 = 4
    K_INT64 = 5
    K_UINT16 = 6
    K_UINT32 = 7
    K_FLOAT64 = 8
    K_UUID = 9
    K_STRING = 10
    K_BYTES = 11
    K_RECORDS = 12
    K_STRUCT = 13
    K_ARRAY = 14


cdef struct FieldOp:
    PyObject *name          # interned field name (owned by CPlan.keep)
    Py_ssize_t offset       # slot offset in instances of the plan's class
    int kind
    int elem_kind
    bint nullable
    bint compact
    bint ignorable
    int tag
    PyObject *child         # CPlan of struct / struct-array fields, else NULL
    PyObject *default       # default value (immutable kinds) or None
    PyObject *pyop          # the schema.FieldOp, for rare slow paths
    PyObject *struct_cls    # class of struct / struct-array fields, else None
    Py_ssize_t run_width    # fields only: bytes of the fixed-width fields from this one on,
    Py_ssize_t run_count    # and how many they are (0 when this field is not fixed-width)


cdef class CPlan:
    cdef FieldOp *fields
    cdef Py_ssize_t nfields
    cdef FieldOp *tagged
    cdef Py_ssize_t ntagged
    cdef FieldOp *absent
    cdef Py_ssize_t nabsent
    cdef PyTypeObject *cls
    cdef Py_ssize_t unknown_tags_offset
    cdef bint flexible
    cdef readonly object plan       # the schema.StructPlan
    cdef list keep                  # owns every object the ops point to


cdef CPlan native_plan(object plan)
cdef object read_struct(ByteReader *r, CPlan plan, object source)
cdef object read_struct_top(ByteReader *r, CPlan plan, object source)

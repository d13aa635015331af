/* The floor of any decoder that returns kproto's objects (benchmarks/object_floor.py).
 *
 * copy_tree(message, immutable) makes a new copy of an already decoded message
 * with the fewest operations C has: each struct from a free list with its slots
 * written directly (kproto's own allocator, kp_structs.h), each array a new list (or,
 * with immutable true, a tuple from CPython's free list), untracked by the cyclic GC
 * when it holds nothing tracked. Every other value (ints, strings, UUIDs, records) is
 * the original object with one more reference: the floor parses nothing, validates
 * nothing and makes no value, so a real decoder can only be slower than it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "kp_structs.h"

static PyObject *copy_value(PyObject *value, int immutable);

static PyObject *copy_array(PyObject *list, int immutable) {
    Py_ssize_t n = PyList_GET_SIZE(list), i;
    PyObject *out = immutable ? PyTuple_New(n) : PyList_New(n);
    int holds_tracked = 0;
    if (out == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *item = copy_value(PyList_GET_ITEM(list, i), immutable);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        holds_tracked |= PyObject_GC_IsTracked(item);
        if (immutable)
            PyTuple_SET_ITEM(out, i, item);
        else
            PyList_SET_ITEM(out, i, item);
    }
    if (!holds_tracked)
        PyObject_GC_UnTrack(out);
    return out;
}

static PyObject *copy_struct(PyObject *obj, int immutable) {
    PyTypeObject *tp = Py_TYPE(obj);
    Py_ssize_t n = kp_struct_slots(tp), i;
    PyObject **from = kp_struct_slot_array(obj);
    PyObject *out = kp_struct_new(tp);
    int holds_tracked = 0;
    if (out == NULL)
        return NULL;
    PyObject **to = kp_struct_slot_array(out);
    for (i = 0; i < n; i++) {
        if (from[i] == NULL)
            continue;
        to[i] = copy_value(from[i], immutable);
        if (to[i] == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        holds_tracked |= PyObject_GC_IsTracked(to[i]);
    }
    if (holds_tracked)
        PyObject_GC_Track(out);
    return out;
}

/* A struct is recognised by its deallocator: adopt() gave it this module's. */
static PyObject *copy_value(PyObject *value, int immutable) {
    if (PyList_CheckExact(value))
        return copy_array(value, immutable);
    if (Py_TYPE(value)->tp_dealloc == kp_struct_dealloc)
        return copy_struct(value, immutable);
    Py_INCREF(value);
    return value;
}

/* Give every struct class of a decoded tree this module's allocator (done once, before
 * timing; the process then makes kproto structs only here). */
static int adopt_tree(PyObject *value, PyTypeObject *base) {
    if (PyList_CheckExact(value)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++)
            if (adopt_tree(PyList_GET_ITEM(value, i), base) < 0)
                return -1;
        return 0;
    }
    if (!PyObject_TypeCheck(value, base))
        return 0;
    PyTypeObject *tp = Py_TYPE(value);
    if (!kp_struct_adopt(tp, kp_struct_slots(tp))) {
        PyErr_Format(PyExc_TypeError, "%s is not laid out as a plain slotted struct", tp->tp_name);
        return -1;
    }
    PyObject **slots = kp_struct_slot_array(value);
    for (Py_ssize_t i = 0; i < kp_struct_slots(tp); i++)
        if (slots[i] != NULL && adopt_tree(slots[i], base) < 0)
            return -1;
    return 0;
}

static PyObject *adopt(PyObject *self, PyObject *args) {
    PyObject *message, *base;
    if (!PyArg_ParseTuple(args, "OO!", &message, &PyType_Type, &base))
        return NULL;
    if (adopt_tree(message, (PyTypeObject *)base) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *copy_tree(PyObject *self, PyObject *args) {
    PyObject *message;
    int immutable;
    if (!PyArg_ParseTuple(args, "Op", &message, &immutable))
        return NULL;
    return copy_value(message, immutable);
}

static PyMethodDef methods[] = {
    {"adopt", adopt, METH_VARARGS, "Give the struct classes of a decoded message this module's allocator."},
    {"copy_tree", copy_tree, METH_VARARGS, "A copy of a decoded message, made with the fewest operations."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "object_floor", NULL, -1, methods};

PyMODINIT_FUNC PyInit_object_floor(void) {
    return PyModule_Create(&module);
}

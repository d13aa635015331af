/* Allocating and freeing instances of the generated message classes (kproto.schema).
 *
 * A decode builds thousands of small slotted objects and a reader drops them all at
 * once. CPython's generic paths for a class made by type() are general: allocation
 * zeroes and links the object into the cyclic GC (counting it toward a collection),
 * and subtype_dealloc looks for finalizers and walks the class's member descriptors
 * to find the slots. The generated classes are simpler than that: every slot is an
 * object pointer right after the object header, and there is no __dict__, no
 * __weakref__, no finalizer. kp_struct_adopt checks that of a class and then gives it
 * kp_struct_dealloc, which clears the slots in one loop and keeps the memory on a free
 * list per slot count (as CPython does for tuples); kp_struct_new takes from it.
 *
 * Objects come out of kp_struct_new untracked by the cyclic GC: the decoder tracks a
 * struct only when it holds something tracked (see _codec.pyx, "the cyclic GC").
 * Only GIL builds are supported (pyproject.toml), so the free lists need no lock.
 */
#ifndef KP_STRUCTS_H
#define KP_STRUCTS_H

#include <Python.h>

/* Free lists for classes of up to KP_FREE_SLOTS - 1 slots (Kafka structs have a few
 * fields; a larger one is allocated the generic way), KP_FREE_PER_SLOTS objects each
 * at most: what one decode of a 1,000-partition Metadata response frees. */
#define KP_FREE_SLOTS 20
#define KP_FREE_PER_SLOTS 2000

static PyObject *kp_free_head[KP_FREE_SLOTS];
static int kp_free_count[KP_FREE_SLOTS];

static void kp_struct_dealloc(PyObject *self);

static inline Py_ssize_t kp_struct_slots(PyTypeObject *tp) {
    return (tp->tp_basicsize - (Py_ssize_t)sizeof(PyObject)) / (Py_ssize_t)sizeof(PyObject *);
}

static inline PyObject **kp_struct_slot_array(PyObject *self) {
    return (PyObject **)((char *)self + sizeof(PyObject));
}

/* Give a generated class the fast deallocator when its layout is the plain one;
 * returns 1 when adopted (or already), 0 when the class keeps CPython's. */
static int kp_struct_adopt(PyTypeObject *tp, Py_ssize_t declared_slots) {
    if (tp->tp_dealloc == kp_struct_dealloc)
        return 1;
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || !(tp->tp_flags & Py_TPFLAGS_HAVE_GC)
            || tp->tp_itemsize != 0 || tp->tp_dictoffset != 0 || tp->tp_weaklistoffset != 0
            || tp->tp_finalize != NULL || tp->tp_del != NULL
            || declared_slots < 1   /* a dead object's first slot links the free list */
            || kp_struct_slots(tp) != declared_slots
            || tp->tp_free != PyObject_GC_Del)
        return 0;
#ifdef Py_TPFLAGS_MANAGED_DICT
    if (tp->tp_flags & Py_TPFLAGS_MANAGED_DICT)
        return 0;
#endif
#ifdef Py_TPFLAGS_MANAGED_WEAKREF
    if (tp->tp_flags & Py_TPFLAGS_MANAGED_WEAKREF)
        return 0;
#endif
    tp->tp_dealloc = kp_struct_dealloc;
    return 1;
}

/* A new, untracked instance with every slot NULL (an unset attribute). */
static PyObject *kp_struct_new(PyTypeObject *tp) {
    Py_ssize_t n = kp_struct_slots(tp);
    PyObject *op;
    if (tp->tp_dealloc == kp_struct_dealloc && n < KP_FREE_SLOTS && kp_free_head[n] != NULL) {
        op = kp_free_head[n];
        kp_free_head[n] = kp_struct_slot_array(op)[0];
        kp_free_count[n]--;
        kp_struct_slot_array(op)[0] = NULL;
        return PyObject_Init(op, tp);   /* sets the type (a new reference) and the refcount */
    }
    op = PyType_GenericAlloc(tp, 0);
    if (op != NULL)
        PyObject_GC_UnTrack(op);
    return op;
}

static void kp_struct_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    /* A user's subclass of a generated class reaches here from subtype_dealloc, which
     * has cleared the subclass's own attributes: clear the generated class's slots. */
    PyTypeObject *own = tp;
    while (own->tp_dealloc != kp_struct_dealloc)
        own = own->tp_base;
    Py_ssize_t n = kp_struct_slots(own), i;
    PyObject **slots = kp_struct_slot_array(self);
    PyObject_GC_UnTrack(self);
    Py_TRASHCAN_BEGIN(self, kp_struct_dealloc)
    for (i = 0; i < n; i++)
        Py_CLEAR(slots[i]);
    if (tp == own && n < KP_FREE_SLOTS && kp_free_count[n] < KP_FREE_PER_SLOTS) {
        slots[0] = kp_free_head[n];   /* the dead object's first slot links the list */
        kp_free_head[n] = self;
        kp_free_count[n]++;
    } else {
        tp->tp_free(self);
    }
    Py_DECREF(tp);   /* instances of heap types own a reference to their type */
    Py_TRASHCAN_END
}

#endif

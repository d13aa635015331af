# Records, shared with the message codec (which makes one per records field).

cdef class Records:
    cdef object _source
    cdef Py_buffer _view
    cdef bint _has_view
    cdef const unsigned char *_data
    cdef Py_ssize_t _size
    cdef Py_ssize_t _shape[1]
    cdef Py_ssize_t _tail
    cdef public Py_ssize_t max_decompressed_size
    cdef public Py_ssize_t max_records_per_batch
    cdef public Py_ssize_t max_records_per_set
    cdef public Py_ssize_t max_decompressed_size_per_set
    cdef public bint verify_crc

    cdef Py_ssize_t _scan(self) except -2
    cdef void _set_limits(self, Py_ssize_t max_decompressed_size, Py_ssize_t max_records_per_batch,
                          Py_ssize_t max_records_per_set, Py_ssize_t max_decompressed_size_per_set,
                          bint verify_crc) noexcept


cdef Records records_view_over(object owner, Py_ssize_t offset, Py_ssize_t size)

# Part of _batch.pyx (included there; one module split by responsibility).
# The client ids as text: each request's id is checked (its tag byte, UTF-8) and its
# text appended in row order; the row's client_id holds the id's length, from which
# id_text_offsets makes the Arrow offsets. There is no table of distinct ids, so the
# cost does not grow with them; kproto.arrow.frames makes a dictionary from the text when one
# is asked for.

cdef enum:
    ID_WORD_BYTES = 24     # bytes the header loop loads at an id's length prefix (three words)
    ID_TEXT_PER_FRAME = 16     # bytes of id text first mapped per frame (grown by doubling)

# WORD_MASK[n][k]: keep the bytes of word k that are among bytes 0..n-1 of the id's
# length prefix, text and tag byte (n = 0..24); a row's three masks side by side, one
# cache line for the header loop's loads.
cdef uint64_t WORD_MASK[ID_WORD_BYTES + 1][4]
for _n in range(ID_WORD_BYTES + 1):
    for _k in range(4):
        WORD_MASK[_n][_k] = (1 << (8 * min(max(_n - 8 * _k, 0), 8))) - 1


cdef struct IdText:
    char *text             # the ids' text in row order: a pooled column map, handed over as Arrow's data
    Py_ssize_t size
    Py_ssize_t capacity
    size_t mapped          # bytes of the map text is (0 once taken)


cdef int id_text_init(IdText *t, Py_ssize_t frames) noexcept:
    """The text in a pooled column map (GIL held), sized for ``frames`` ids of 16 bytes:
    megabytes of fresh pages would cost a fault each, and the map is handed over as the
    Arrow data buffer without a copy (take_text). 0, or -1 when out of memory."""
    cdef size_t got
    t.size = 0
    t.text = <char *>pool_map(page_round(<size_t>frames * ID_TEXT_PER_FRAME), &got)
    if t.text == NULL:
        t.capacity = 0
        t.mapped = 0
        return -1
    t.mapped = got
    t.capacity = <Py_ssize_t>got
    return 0


cdef void id_text_free(IdText *t) noexcept nogil:
    if t.mapped:
        kp_column_free(t.text, t.mapped)
    t.text = NULL
    t.mapped = 0


cdef CBuffer take_text(IdText *t):
    """The ids' text as a buffer over its map (GIL held): ``t`` lets go of it."""
    cdef CBuffer owner = take_buffer(t.text, t.size, t.mapped)
    t.text = NULL
    t.mapped = 0
    return owner


cdef int id_text_room(IdText *t, Py_ssize_t text_bytes) noexcept nogil:
    """Room for text_bytes more bytes (doubling the map): 0, or -1 when out of memory."""
    cdef char *text
    cdef Py_ssize_t capacity
    if t.size + text_bytes <= t.capacity:
        return 0
    capacity = 2 * t.capacity
    while t.size + text_bytes > capacity:
        capacity *= 2
    text = <char *>map_resize(t.text, t.mapped, page_round(capacity))
    if text == NULL:
        return -1
    t.text = text
    t.mapped = page_round(capacity)
    t.capacity = <Py_ssize_t>t.mapped
    return 0


cdef int id_append_text(IdText *t, const unsigned char *text, Py_ssize_t n) noexcept nogil:
    """Append n bytes of id text (already checked): 0, or -1 when out of memory."""
    if id_text_room(t, n) < 0:
        return -1
    memcpy(t.text + t.size, text, n)
    t.size += n
    return 0


cdef inline bint id_ok_in_loop(const unsigned char *q, int32_t n, uint32_t tag) noexcept nogil:
    """Whether the header loop may take an id (q its length prefix, n its length, tag 1 for
    header v2): its tag byte is 0 and its text UTF-8. Else the frame is the general
    loop's, which reports it."""
    return not (tag and q[2 + n] != 0) and wire_utf8_valid(q + 2, n)


cdef inline int32_t id_short_checked(const unsigned char *q, uint32_t tag, uint64_t key_bits) noexcept nogil:
    """The length of the header loop's id of up to 22 bytes with its tag byte (q its length
    prefix; key_bits its masked words or'ed), checked as id_ok_in_loop checks it (UTF-8
    validation only when a byte is over 0x7F); -1 for the general loop (a status to report)."""
    cdef int32_t n = kp_load_be16(q)
    if tag and q[2 + n] != 0:
        return -1
    # Up to 22 bytes of text: both length bytes are below 0x80, so a key with no high bit set is ASCII.
    if key_bits & 0x8080808080808080ULL and not wire_utf8_valid(q + 2, n):
        return -1
    return n


cdef int32_t id_text_long(IdText *t, const unsigned char *q, uint32_t tag) noexcept nogil:
    """The header loop's id past 22 bytes (whole in the frame with its tag byte), q its
    length prefix: checked and appended. Its length, or -1 for the general loop (a status
    to report, or out of memory)."""
    cdef int32_t n = kp_load_be16(q)
    if not id_ok_in_loop(q, n, tag) or id_append_text(t, q + 2, n) < 0:
        return -1
    return n

# Part of _batch.pyx (included there; one module split by responsibility).
# The header pass: one frame's header into the column arrays, statuses instead of exceptions.

# ------------------------------------------------------------------ the header pass
# Which optional values a frame has: one byte per frame while scanning, split into
# Arrow validity bitmaps afterwards (cheaper than eight read-modify-writes per frame).
cdef enum:
    F_API = 1
    F_CORRELATION = 2
    F_HEADER_VERSION = 4
    F_CLIENT_ID = 8
    F_TAG_COUNT = 16
    F_ERROR = 32
    F_DEPRECATED = 64
    F_REMOVED = 128

BITMAP_NAMES = ("has_api", "has_correlation", "has_header_version", "has_client_id",
                "has_tag_count", "has_error", "deprecated", "removed")


# Column pointers, all malloc'd with the same capacity (column_slots walks them as an array).
cdef struct Columns:
    int64_t *offset
    int32_t *size
    int8_t *header_version
    int16_t *api_key
    int16_t *api_version
    int32_t *correlation_id
    int32_t *client_id
    int32_t *tag_count
    uint8_t *status
    int32_t *error_offset
    int32_t *body_offset
    int8_t *direction
    uint8_t *present         # F_* flags per frame


cdef inline void set_bit(Columns *c, Py_ssize_t i, uint8_t flag) noexcept nogil:
    c.present[i] |= flag


cdef inline void clear_row(Columns *c, Py_ssize_t i) noexcept nogil:
    # Every slot gets a value, null or not: no stale heap bytes reach Arrow.
    c.header_version[i] = 0
    c.api_key[i] = 0
    c.api_version[i] = 0
    c.correlation_id[i] = 0
    c.client_id[i] = 0
    c.tag_count[i] = 0
    c.status[i] = ST_OK
    c.error_offset[i] = 0
    c.body_offset[i] = -1
    c.present[i] = 0


cdef inline void fail(Columns *c, Py_ssize_t i, int status, Py_ssize_t where) noexcept nogil:
    c.status[i] = <uint8_t>status
    c.error_offset[i] = <int32_t>where
    set_bit(c, i, F_ERROR)


cdef inline void api_checks(Columns *c, Py_ssize_t i, int d, int key, int version, Py_ssize_t body) noexcept nogil:
    if key < 0 or key >= MAX_KEY or valid_lo[d][key] < 0:
        fail(c, i, ST_UNKNOWN_API, body)
        return
    if version < valid_lo[d][key] or version > valid_hi[d][key]:
        fail(c, i, ST_UNSUPPORTED_VERSION, body)
        return
    if deprecated_lo[d][key] <= version <= deprecated_hi[d][key]:
        set_bit(c, i, F_DEPRECATED)
    if version < min_4x[d][key]:
        set_bit(c, i, F_REMOVED)


cdef inline void scan_request(Columns *c, Py_ssize_t i, const unsigned char *p, Py_ssize_t n,
                              IdText *ids) noexcept nogil:
    # The wire layer parses the header (wire_request_header, the one parser); this
    # puts what it read into the row: the fields read before a failure stay in it.
    cdef WireHeader h
    cdef Py_ssize_t pos = 0
    cdef uint8_t info
    cdef uint8_t flags = F_API | F_CORRELATION | F_HEADER_VERSION
    cdef int st = wire_request_header(p, n, &pos, &h)
    c.header_version[i] = h.version
    c.api_key[i] = h.api_key
    c.api_version[i] = h.api_version
    c.correlation_id[i] = h.correlation_id
    c.tag_count[i] = h.tag_count
    if (st == ST_OK or h.part == WIRE_PART_TAGS) and h.client_id_length >= 0:
        # the row's value is the id's length, its text appended (see _batch_ids.pxi)
        if id_append_text(ids, p + h.client_id_at, h.client_id_length) < 0:
            st = ST_NO_MEMORY
            pos = h.client_id_at
        else:
            c.client_id[i] = h.client_id_length
            flags |= F_CLIENT_ID
    if st:
        c.present[i] = flags if h.part != WIRE_PART_FIXED else 0
        fail(c, i, st, pos)
        return
    if h.tags_at >= 0:
        flags |= F_TAG_COUNT
    c.body_offset[i] = <int32_t>pos
    info = version_info(0, h.api_key, h.api_version)
    if info & I_DEPRECATED:
        flags |= F_DEPRECATED
    if info & I_REMOVED:
        flags |= F_REMOVED
    c.present[i] = flags
    if not info & I_VALID:
        fail(c, i, ST_UNSUPPORTED_VERSION if info & I_KNOWN else ST_UNKNOWN_API, pos)


cdef inline void scan_response(Columns *c, Py_ssize_t i, const unsigned char *p, Py_ssize_t n,
                               int key, int version) noexcept nogil:
    cdef WireHeader h
    cdef Py_ssize_t pos = 0
    cdef int st = wire_response_header(p, n, &pos, -1 if key < 0 else version_info(1, key, version) & I_HEADER_VERSION,
                                       True, &h)
    if pos == 0:
        fail(c, i, st, 0)   # not even a correlation id
        return
    c.correlation_id[i] = h.correlation_id
    set_bit(c, i, F_CORRELATION)
    if st == ST_NO_REQUEST_INFO:
        fail(c, i, st, pos)
        return
    c.api_key[i] = <int16_t>key
    c.api_version[i] = <int16_t>version
    set_bit(c, i, F_API)
    c.header_version[i] = h.version
    set_bit(c, i, F_HEADER_VERSION)
    c.tag_count[i] = h.tag_count
    if st:
        fail(c, i, st, pos)
        return
    if h.tags_at >= 0:
        set_bit(c, i, F_TAG_COUNT)
    c.body_offset[i] = <int32_t>pos
    api_checks(c, i, 1, key, version, pos)


cdef inline void scan_frame(Columns *c, Py_ssize_t i, const unsigned char *p, Py_ssize_t n,
                            int direction, int key, int version, IdText *ids) noexcept nogil:
    if direction == 1:
        clear_row(c, i)
        scan_response(c, i, p, n, key, version)
    else:
        # Requests are the hot path: scan_request writes the header columns itself on
        # every path, so only the columns it may leave untouched are reset here.
        c.status[i] = ST_OK
        c.error_offset[i] = 0
        c.client_id[i] = 0
        c.tag_count[i] = 0
        c.body_offset[i] = -1
        scan_request(c, i, p, n, ids)


cdef inline void clear_zero_columns_of(Columns *c, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    """Rows [start, end) of the columns a plain request leaves zero: tag count, status, error offset, direction."""
    memset(c.tag_count + start, 0, (end - start) * sizeof(int32_t))
    memset(c.status + start, ST_OK, (end - start) * sizeof(uint8_t))
    memset(c.error_offset + start, 0, (end - start) * sizeof(int32_t))
    memset(c.direction + start, 0, (end - start) * sizeof(int8_t))


# What the plain-request loop needs to know of (api_key, api_version), at
# [api_key * MAX_VERSION + api_version]: 0 when it cannot take the frame (unknown
# API, unsupported version, header v0); else the row's flags (F_*) and, in bit 8,
# whether the header is v2 (ends with a tagged-field section).
cdef uint16_t plain_request[MAX_KEY * MAX_VERSION]


cdef void load_plain_request_table():
    cdef int key, version, hv
    cdef uint8_t info
    cdef uint16_t flags
    for key in range(MAX_KEY):
        for version in range(MAX_VERSION):
            info = info_table[0][key][version]
            hv = info & I_HEADER_VERSION
            if not (info & I_VALID) or hv == 0:
                plain_request[key * MAX_VERSION + version] = 0
                continue
            flags = F_API | F_CORRELATION | F_HEADER_VERSION
            if hv == 2:
                flags |= F_TAG_COUNT | 0x100
            if info & I_DEPRECATED:
                flags |= F_DEPRECATED
            if info & I_REMOVED:
                flags |= F_REMOVED
            plain_request[key * MAX_VERSION + version] = flags


load_plain_request_table()


cdef inline void general_row_done(Columns *c, Py_ssize_t i, bint *zeros_written,
                                  Py_ssize_t *zero_from) noexcept nogil:
    """After a row of the general loop in a header-only decode (see scan): the first
    row with a value in the four zero columns makes them real columns."""
    if not zeros_written[0]:
        if c.tag_count[i] == 0 and c.status[i] == ST_OK and c.error_offset[i] == 0 and c.direction[i] == 0:
            return
        zeros_written[0] = True
        clear_zero_columns_of(c, 0, i)   # the plain rows so far (the general ones hold zeros already)
    zero_from[0] = i + 1


cdef inline Py_ssize_t scan_plain_requests(Columns *c, Py_ssize_t i, Py_ssize_t limit,
                                           const unsigned char *buf, Py_ssize_t length, Py_ssize_t *pos_io,
                                           Py_ssize_t max_frame_size, IdText *ids,
                                           bint body_offsets, bint clear_zero_columns) noexcept nogil:
    """The common case in a loop of its own: size-prefixed requests, whole, of a valid
    API version, with a null client id or a UTF-8 one, and no tagged fields.

    Returns the row count at the first frame that is anything else (or at ``limit``,
    or near the end of the buffer); the general loop takes that frame, then comes
    back. The columns that are zero on this path are not written per row: a block
    of rows at a time when ``clear_zero_columns``, else by the caller (see scan).
    Callers pass ``body_offsets`` and ``clear_zero_columns`` as constants, so the
    compiler makes a loop for each case with the test gone.
    """
    cdef Py_ssize_t block_end
    while i < limit:
        block_end = i + 4096 if limit - i > 4096 else limit
        if clear_zero_columns:
            clear_zero_columns_of(c, i, block_end)
        i = scan_plain_block(c, i, block_end, buf, length, pos_io, max_frame_size, ids, body_offsets)
        if i < block_end:
            break
    return i


cdef inline Py_ssize_t scan_plain_block(Columns *c, Py_ssize_t i, Py_ssize_t limit,
                                        const unsigned char *buf, Py_ssize_t length, Py_ssize_t *pos_io,
                                        Py_ssize_t max_frame_size, IdText *ids, bint body_offsets) noexcept nogil:
    """Rows [i, limit) of scan_plain_requests, as far as they go: each id checked and its
    text appended (see _batch_ids.pxi). Column pointers and the text's end are copied
    into locals first: a store through a one-byte column may alias any memory the
    compiler cannot see is private, and it would reload every pointer after each such
    store."""
    cdef int64_t *offset = c.offset
    cdef int32_t *size_col = c.size
    cdef int8_t *header_version = c.header_version
    cdef int16_t *api_key = c.api_key
    cdef int16_t *api_version = c.api_version
    cdef int32_t *correlation_id = c.correlation_id
    cdef int32_t *client_id = c.client_id
    cdef int32_t *body_offset = c.body_offset
    cdef uint8_t *present = c.present
    cdef Py_ssize_t pos = pos_io[0], next_pos, body
    # The loop reads 24 bytes at every frame's client id (p + 8) before it knows the frame
    # is that long, and copies 24 from p + 10: it leaves frames in the last 38 bytes to the general loop.
    cdef Py_ssize_t last_pos = length - (4 + 8 + ID_WORD_BYTES + 2)
    cdef const unsigned char *p
    cdef uint32_t size, key_version, plain, tag, id_length, covered
    cdef const uint64_t *masks
    cdef uint64_t key_bits
    cdef uint8_t flags
    cdef int32_t text_length
    cdef char *text = ids.text
    cdef Py_ssize_t text_size = ids.size, text_capacity = ids.capacity
    while i < limit and pos <= last_pos:
        size = kp_load_be32(buf + pos)
        next_pos = pos + 4 + <Py_ssize_t>size
        if size > <uint32_t>max_frame_size or next_pos > length:
            break
        p = buf + pos + 4
        key_version = kp_load_be32(p)             # api_key << 16 | api_version
        if key_version & 0xFF00FFC0U:              # api_key >= 256 or api_version >= 64 (MAX_KEY, MAX_VERSION)
            break
        plain = plain_request[(key_version >> 10) + (key_version & 0x3F)]   # [api_key * 64 + api_version]
        if plain == 0:
            break
        tag = plain >> 8                           # 1: header v2, whose tag section must be the byte 0
        id_length = kp_load_be16(p + 8)
        covered = id_length + 2 + tag              # the length prefix, the id and the tag byte
        if covered <= ID_WORD_BYTES:
            body = 10 + id_length + tag
            if body > <Py_ssize_t>size:
                break
            # The id's bytes (with its length and tag byte) in three masked words: if no
            # high bit is set, the text is ASCII.
            masks = WORD_MASK[covered]
            key_bits = ((kp_load_le64(p + 8) & masks[0]) | (kp_load_le64(p + 16) & masks[1])
                        | (kp_load_le64(p + 24) & masks[2]))
            text_length = id_short_checked(p + 8, tag, key_bits)
            if text_length < 0:
                break
            if text_size + ID_WORD_BYTES > text_capacity:
                ids.size = text_size
                if id_text_room(ids, ID_WORD_BYTES) < 0:
                    break           # out of memory: the general loop says so
                text = ids.text
                text_capacity = ids.capacity
            # 24 bytes in one fixed-size copy; the next id overwrites the bytes past this one
            memcpy(text + text_size, p + 10, ID_WORD_BYTES)
            text_size += text_length
            flags = <uint8_t>plain | F_CLIENT_ID
        elif id_length == 0xFFFF:                  # a null client id (p[10] is in the buffer)
            body = 10 + tag
            if body > <Py_ssize_t>size or (tag and p[10] != 0):    # a frame shorter than its header
                break
            text_length = 0
            flags = <uint8_t>plain
        elif id_length <= 0x7FFF:                  # a long id: read once known whole in the frame
            body = 10 + id_length + tag
            if body > <Py_ssize_t>size:
                break
            ids.size = text_size
            text_length = id_text_long(ids, p + 8, tag)
            if text_length < 0:
                break
            text = ids.text
            text_size = ids.size
            text_capacity = ids.capacity
            flags = <uint8_t>plain | F_CLIENT_ID
        else:
            break
        offset[i] = pos
        size_col[i] = <int32_t>size
        header_version[i] = <int8_t>(1 + tag)
        api_key[i] = <int16_t>(key_version >> 16)
        api_version[i] = <int16_t>key_version
        correlation_id[i] = <int32_t>kp_load_be32(p + 4)
        client_id[i] = text_length
        if body_offsets:
            body_offset[i] = <int32_t>body
        present[i] = flags
        pos = next_pos
        i += 1
    ids.size = text_size
    pos_io[0] = pos
    return i

# Part of _batch.pyx (included there; one module split by responsibility).
# The JSON pass, part 2: the writer (growing output, numbers, strings, base64, record-set
# summaries).

cdef inline int jfail(JCtx *x, int status) noexcept nogil:
    if x.status == ST_OK:
        x.status = status
        x.error = x.p - x.start
    return -1


cdef int out_grow(JCtx *x, Py_ssize_t n) noexcept nogil:
    cdef Out *o = x.out
    cdef Py_ssize_t capacity = o.capacity * 2
    cdef char *buf
    if capacity < o.length + n:
        capacity = o.length + n
    buf = <char *>realloc(o.buf, capacity)
    if buf == NULL:
        return jfail(x, ST_NO_MEMORY)
    o.buf = buf
    o.capacity = capacity
    return 0


cdef inline int put(JCtx *x, const char *s, Py_ssize_t n) noexcept nogil:
    cdef Out *o = x.out
    if o.capacity - o.length < n and out_grow(x, n) < 0:
        return -1
    memcpy(o.buf + o.length, s, n)
    o.length += n
    return 0


cdef inline int put_char(JCtx *x, char ch) noexcept nogil:
    cdef Out *o = x.out
    if o.capacity - o.length < 1 and out_grow(x, 1) < 0:
        return -1
    o.buf[o.length] = ch
    o.length += 1
    return 0


cdef inline int put_int(JCtx *x, int64_t v) noexcept nogil:
    cdef char tmp[24]
    cdef int n = 0
    cdef uint64_t u = <uint64_t>(-(v + 1)) + 1 if v < 0 else <uint64_t>v
    while True:
        tmp[23 - n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    if v < 0:
        tmp[23 - n] = b'-'
        n += 1
    return put(x, tmp + 24 - n, n)


cdef int put_float(JCtx *x, double v) noexcept nogil:
    cdef char tmp[40]
    cdef int n, k
    cdef bint plain = True
    if v != v:
        return put(x, "NaN", 3)
    if v == 1.0 / 0.0:
        return put(x, "Infinity", 8)
    if v == -1.0 / 0.0:
        return put(x, "-Infinity", 9)
    n = snprintf(tmp, 32, "%.17g", v)
    for k in range(n):
        if tmp[k] == b'.' or tmp[k] == b'e':
            plain = False
    if plain:   # keep it a float, as json.dumps does
        tmp[n] = b'.'
        tmp[n + 1] = b'0'
        n += 2
    return put(x, tmp, n)


cdef const char *HEX = "0123456789abcdef"


cdef inline void uuid_text(const unsigned char *p, char *out) noexcept nogil:
    """A 16-byte UUID as its canonical text: 36 characters, 8-4-4-4-12 hex digits."""
    cdef int k, w = 0
    for k in range(16):
        if k == 4 or k == 6 or k == 8 or k == 10:
            out[w] = b'-'
            w += 1
        out[w] = HEX[p[k] >> 4]
        out[w + 1] = HEX[p[k] & 15]
        w += 2


cdef inline int put_uuid(JCtx *x, const unsigned char *p) noexcept nogil:
    """A UUID value: its canonical text, quoted."""
    cdef char quoted[38]
    quoted[0] = b'"'
    uuid_text(p, quoted + 1)
    quoted[37] = b'"'
    return put(x, quoted, 38)


cdef const char *CODEC_NAMES[5]
CODEC_NAMES[:] = [b"none", b"gzip", b"snappy", b"lz4", b"zstd"]


cdef int put_records_summary(JCtx *x, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """{"batches":B,"records":R,"bytes":N,"compression":C} of a record set, from batch headers only.

    Batches are counted while whole ones follow (a partial last batch, which
    Kafka allows in Fetch responses, is left out); records is null when a legacy
    compressed wrapper hides the count; compression is null without batches,
    "mixed" for several codecs.
    """
    cdef Py_ssize_t pos = 0, batches = 0, length
    cdef int64_t records = 0
    cdef bint records_known = True
    cdef int codec = -1, this_codec, magic
    while n - pos > MAGIC_AT:
        length = <int32_t>kp_load_be32(p + pos + LENGTH_AT)
        if length < 5 or length > n - pos - LOG_OVERHEAD:
            break
        magic = p[pos + MAGIC_AT]
        if magic == 2:
            if length < V2_HEADER_SIZE - LOG_OVERHEAD:
                break
            this_codec = kp_load_be16(p + pos + V2_ATTRIBUTES_AT) & ATTR_COMPRESSION
            records += <int32_t>kp_load_be32(p + pos + V2_RECORDS_COUNT_AT)
        elif magic == 0 or magic == 1:
            if length < 6:
                break
            this_codec = p[pos + LEGACY_ATTRIBUTES_AT] & ATTR_COMPRESSION
            if this_codec == 0:
                records += 1
            else:
                records_known = False
        else:
            break
        codec = this_codec if codec == -1 or codec == this_codec else 8
        batches += 1
        pos += LOG_OVERHEAD + length
    if put(x, "{\"batches\":", 11) < 0 or put_int(x, batches) < 0 or put(x, ",\"records\":", 11) < 0:
        return -1
    if (put_int(x, records) if records_known else put(x, "null", 4)) < 0:
        return -1
    if put(x, ",\"bytes\":", 9) < 0 or put_int(x, n) < 0 or put(x, ",\"compression\":", 15) < 0:
        return -1
    if codec == -1:
        return put(x, "null}", 5)
    if codec == 8:
        return put(x, "\"mixed\"}", 8)
    if codec > 4:
        if put(x, "\"unknown(", 9) < 0 or put_int(x, codec) < 0:
            return -1
        return put(x, ")\"}", 3)
    if put_char(x, b'"') < 0 or put(x, CODEC_NAMES[codec], strlen(CODEC_NAMES[codec])) < 0:
        return -1
    return put(x, "\"}", 2)


cdef const char *B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


cdef int put_base64(JCtx *x, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t need = 2 + 4 * ((n + 2) // 3), i = 0
    cdef Out *o = x.out
    cdef char *w
    cdef uint32_t v
    if o.capacity - o.length < need and out_grow(x, need) < 0:
        return -1
    w = o.buf + o.length
    w[0] = b'"'
    w += 1
    while n - i >= 3:
        v = (<uint32_t>p[i] << 16) | (<uint32_t>p[i + 1] << 8) | p[i + 2]
        w[0] = B64[(v >> 18) & 63]
        w[1] = B64[(v >> 12) & 63]
        w[2] = B64[(v >> 6) & 63]
        w[3] = B64[v & 63]
        w += 4
        i += 3
    if n - i == 1:
        v = <uint32_t>p[i] << 16
        w[0] = B64[(v >> 18) & 63]
        w[1] = B64[(v >> 12) & 63]
        w[2] = b'='
        w[3] = b'='
        w += 4
    elif n - i == 2:
        v = (<uint32_t>p[i] << 16) | (<uint32_t>p[i + 1] << 8)
        w[0] = B64[(v >> 18) & 63]
        w[1] = B64[(v >> 12) & 63]
        w[2] = B64[(v >> 6) & 63]
        w[3] = b'='
        w += 4
    w[0] = b'"'
    o.length += need
    return 0


cdef int put_string(JCtx *x, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """A JSON string of UTF-8 text, escaped; MALFORMED (at the text) when not UTF-8."""
    cdef Py_ssize_t i, run = 0
    cdef unsigned char ch
    cdef char esc[6]
    if not wire_utf8_valid(p, n):
        return jfail(x, ST_MALFORMED)
    if put_char(x, b'"') < 0:
        return -1
    for i in range(n):
        ch = p[i]
        if ch >= 0x20 and ch != b'"' and ch != b'\\':
            continue
        if put(x, <const char *>p + run, i - run) < 0:
            return -1
        run = i + 1
        if ch == b'"' or ch == b'\\':
            esc[0] = b'\\'
            esc[1] = ch
            if put(x, esc, 2) < 0:
                return -1
        else:
            esc[0] = b'\\'
            esc[1] = b'u'
            esc[2] = b'0'
            esc[3] = b'0'
            esc[4] = HEX[ch >> 4]
            esc[5] = HEX[ch & 15]
            if put(x, esc, 6) < 0:
                return -1
    if put(x, <const char *>p + run, n - run) < 0:
        return -1
    return put_char(x, b'"')

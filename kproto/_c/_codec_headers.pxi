# Part of _codec.pyx (included there; one module split by responsibility).
# Request and response headers, and whole requests and responses.

# ------------------------------------------------------------------ headers
# The header-version rule is kproto.schema.header_version, read into C tables by _wire.
from kproto._c._wire import header_version
# Both classes' behaviour, shared with the twin. No common base class: Cython allows a free
# list on no subtype, and decode_request_header took 10-25% longer without one.
from kproto._headers import header_dict, header_eq, header_reduce, header_repr
from kproto._deprecation import warn as _warn_deprecated


# Each class names the shared functions: plain methods as class attributes; __eq__ and
# __repr__ as defs, since only a def fills the type's C slot.
@cython.final
@cython.freelist(64)
@cython.no_gc   # ints, a str and a dict of bytes: nothing here can form a reference cycle
@cython.auto_pickle(False)   # pickled by header_reduce
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

    to_dict = header_dict
    __reduce__ = header_reduce

    def __eq__(self, other):
        return header_eq(self, other)

    def __repr__(self):
        return header_repr(self)


@cython.final
@cython.freelist(64)
@cython.no_gc
@cython.auto_pickle(False)
cdef class ResponseHeader:
    """A response header, v0 or v1: ``correlation_id`` and ``_unknown_tags`` (v1)."""
    cdef public int correlation_id
    cdef public dict _unknown_tags

    def __init__(self, *, int correlation_id=0, dict _unknown_tags=None):
        self.correlation_id = correlation_id
        self._unknown_tags = _unknown_tags

    to_dict = header_dict
    __reduce__ = header_reduce

    def __eq__(self, other):
        return header_eq(self, other)

    def __repr__(self):
        return header_repr(self)


cdef str REQUEST_HEADER_NAME = "RequestHeader"
cdef str RESPONSE_HEADER_NAME = "ResponseHeader"
cdef str CLIENT_ID_NAME = "client_id"

# Clients send the same client id on every request: remember the last one decoded.
cdef bytes last_client_id_raw = b""
cdef str last_client_id = ""


cdef str client_id_of(const unsigned char *p, Py_ssize_t n):
    """The str of a client id the wire layer checked (n bytes of strict UTF-8 at p)."""
    global last_client_id_raw, last_client_id
    if n == PyBytes_GET_SIZE(last_client_id_raw) and memcmp(p, PyBytes_AS_STRING(last_client_id_raw), n) == 0:
        return last_client_id
    s = PyUnicode_DecodeUTF8(<const char *>p, n, NULL)
    if n <= 256:
        last_client_id_raw = (<char *>p)[:n]
        last_client_id = s
    return s


cdef int raise_header_error(ByteReader *r, const WireHeader *h, Py_ssize_t start, bint request) except -1:
    """The exception for a header the wire layer refused (start: the header's offset): the
    raising readers re-read the part that broke, so the error has that part's path,
    offset and message."""
    r.root_name = <PyObject *>(REQUEST_HEADER_NAME if request else RESPONSE_HEADER_NAME)
    r.p = r.start + start
    if h.part == WIRE_PART_FIXED:
        if request:
            read_int16(r)
            read_int16(r)
        read_int32(r)
    else:
        r.depth = 1
        r.path[0].index = -1
        if h.part == WIRE_PART_CLIENT_ID:
            r.path[0].name = <PyObject *>CLIENT_ID_NAME
            r.p += 8
            read_string_value(r, False, True)
        else:
            r.path[0].name = <PyObject *>TAGGED_SECTION
            r.p = r.start + h.tags_at
            read_raw_tagged_fields(r)
    raise SystemError("kproto: the wire layer refused a header its readers accept")


cdef inline dict header_tags(ByteReader *r, const WireHeader *h):
    """A checked header's tagged fields, {tag: bytes} (called when it has some)."""
    r.p = r.start + h.tags_at
    return read_raw_tagged_fields(r)


cdef inline void leave_header(ByteReader *r, const WireHeader *h, int *version_out) noexcept:
    """After a checked header: the reader at the body, version_out at the header version."""
    r.p = r.start + h.end
    version_out[0] = h.version


cdef object read_request_header(ByteReader *r, int *version_out):
    cdef WireHeader h
    cdef Py_ssize_t start = r.p - r.start, pos = start
    if wire_request_header(r.start, r.end - r.start, &pos, &h):
        raise_header_error(r, &h, start, True)
    cdef RequestHeader header = RequestHeader.__new__(RequestHeader)
    header.request_api_key = h.api_key
    header.request_api_version = h.api_version
    header.correlation_id = h.correlation_id
    if h.client_id_length >= 0:
        header.client_id = client_id_of(r.start + h.client_id_at, h.client_id_length)
    if h.tag_count:   # else None, as __new__ leaves it
        header._unknown_tags = header_tags(r, &h)
    leave_header(r, &h, version_out)
    return header


cdef object read_response_header(ByteReader *r, int api_key, int api_version, int *version_out):
    cdef WireHeader h
    cdef Py_ssize_t start = r.p - r.start, pos = start
    if wire_response_header(r.start, r.end - r.start, &pos, response_header_version(api_key, api_version),
                            False, &h):
        raise_header_error(r, &h, start, False)
    cdef ResponseHeader header = ResponseHeader.__new__(ResponseHeader)
    header.correlation_id = h.correlation_id
    if h.tag_count:   # else None, as __new__ leaves it
        header._unknown_tags = header_tags(r, &h)
    leave_header(r, &h, version_out)
    return header


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


def decode_request(buf, *, bint lazy=True):
    """(header, header_version, body) of a request payload (no size prefix)."""
    cdef ByteReader r
    cdef int version
    cdef Source src = Source(buf)
    reader_init(&r, src.base, src.size)
    h = read_request_header(&r, &version)
    cp = request_plan((<RequestHeader>h).request_api_key, (<RequestHeader>h).request_api_version,
                      h, r.p - r.start)
    prepare(&r, cp, lazy)
    body = read_struct_top(&r, cp, src)
    check_consumed(&r, cp.plan)
    return h, version, body


def decode_response(buf, int api_key, int api_version, plan, *, bint lazy=True):
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
    prepare(&r, cp, lazy)
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

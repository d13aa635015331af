"""Pure-Python twin of kproto/_c/_codec.pyx: the table-driven message codec and headers.

One loop walks a :class:`kproto.schema.StructPlan`; the Cython version walks the
same plans, so the two agree by construction and the tests check they do.
"""

from __future__ import annotations

from typing import Any

from kproto import schema
from kproto._py import wire
from kproto._py.buffer import (
    INT8_RANGE,
    INT16_RANGE,
    INT32_RANGE,
    INT64_RANGE,
    UINT16_RANGE,
    UINT32_RANGE,
    Reader,
    Writer,
    check_int,
)
from kproto.errors import (
    DecodeError,
    EncodeError,
    InvalidLengthError,
    LimitExceededError,
    UnsupportedRequestError,
)
from kproto.schema import (
    ARRAY,
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    STRUCT,
    UINT16,
    UINT32,
    UUID,
    StructPlan,
)

MAX_DEPTH = 64  # same as MAX_PATH_DEPTH in _buffer.pxd

from kproto._headers import RequestHeader, ResponseHeader  # noqa: E402

_set = object.__setattr__


# ------------------------------------------------------------------ decoding
def _read_value(r: Reader, op, kind: int, nullable: bool, frame: list) -> Any:
    if kind == INT32:
        return r.read_int32()
    if kind == STRING:
        return r.read_string_value(op.compact, nullable)
    if kind == INT16:
        return r.read_int16()
    if kind == INT64:
        return r.read_int64()
    if kind == ARRAY:
        n = r.read_array_count(op.compact, nullable)
        if n is None:
            return None
        elem = op.elem_kind
        out = []
        for i in range(n):
            frame[1] = i
            out.append(_read_value(r, op, elem, False, frame))
        frame[1] = -1
        return out
    if kind == STRUCT:
        if nullable:
            marker = r.read_int8()
            if marker == -1:
                return None
            if marker != 1:
                raise r.error(DecodeError, f"invalid nullable struct marker {marker}")
        return read_struct(r, op.child)
    if kind == INT8:
        return r.read_int8()
    if kind == BOOL:
        return r.read_bool()
    if kind == UUID:
        return r.read_uuid()
    if kind == BYTES:
        return r.read_bytes_value(op.compact, nullable)
    if kind == RECORDS:
        if op.compact:
            n = r.read_compact_length(nullable, "records length")
        else:
            n = r.read_length32(nullable, "records length")
        # A lazy, zero-copy view of the input: batches are parsed only when asked for.
        if n < 0:
            return None
        from kproto._py.records import Records  # first use only: it imports numpy

        return Records(r.take(n))
    if kind == UINT16:
        return r.read_uint16()
    if kind == UINT32:
        return r.read_uint32()
    if kind == FLOAT64:
        return r.read_float64()
    raise AssertionError(f"unknown field kind {kind}")


def read_struct(r: Reader, plan: StructPlan):
    """Read one struct of a plan; the reader's path tracks where we are for errors."""
    if len(r.path) >= MAX_DEPTH:
        raise r.error(LimitExceededError, f"structs nested deeper than {MAX_DEPTH}")
    cls = plan.cls
    obj = cls.__new__(cls)
    frame: list = [None, -1]
    r.path.append(frame)
    for op in plan.fields:
        frame[0] = op.name
        _set(obj, op.name, _read_value(r, op, op.kind, op.nullable, frame))
    for op in plan.absent:
        _set(obj, op.name, op.fresh_default())
    unknown = None
    if plan.flexible:
        unknown = _read_tagged(r, plan, obj, frame)
    _set(obj, "_unknown_tags", unknown)
    r.path.pop()
    return obj


def _read_tagged(r: Reader, plan: StructPlan, obj, frame: list):
    seen = set()
    unknown = None
    frame[0] = "<tagged fields>"
    t = wire.WireTag()
    for _ in range(r.read_tag_count()):
        r.read_tag_entry(t)
        tag, size = t.tag, t.size
        op = plan.tag_map.get(tag)
        if op is None:
            if unknown is None:
                unknown = {}
            unknown[tag] = r.read_bytes_body(size)
            continue
        frame[0] = op.name
        outer_end = r.end
        r.end = r.pos + size
        value = _read_value(r, op, op.kind, op.nullable, frame)
        if r.pos != r.end:
            raise r.error(
                InvalidLengthError,
                f"tagged field {tag} declared {size} bytes but its value ended {r.end - r.pos} early",
            )
        r.end = outer_end
        _set(obj, op.name, value)
        seen.add(tag)
        frame[0] = "<tagged fields>"
    for op in plan.tagged:
        if op.tag not in seen:
            _set(obj, op.name, op.fresh_default())
    return unknown


def _prepare(r: Reader, plan: StructPlan) -> None:
    r.root_name = plan.name
    r.api_key = plan.api_key
    r.api_version = plan.version


def decode_struct(buf, plan: StructPlan, offset: int = 0, end: int | None = None, *, lazy: bool = True):
    """Decode one message body spanning exactly buf[offset:end]. This implementation
    always builds everything at once: ``lazy`` (the C decoder's choice between building
    struct arrays on first read or now) changes nothing here."""
    r = Reader(buf, offset, end)
    _prepare(r, plan)
    obj = read_struct(r, plan)
    if r.pos != r.end:
        raise r.error(InvalidLengthError, f"{r.end - r.pos} bytes left over after {plan.name}")
    return obj


# ------------------------------------------------------------------ encoding
_INT_RANGES = {
    INT8: (INT8_RANGE, "int8"),
    INT16: (INT16_RANGE, "int16"),
    INT32: (INT32_RANGE, "int32"),
    INT64: (INT64_RANGE, "int64"),
    UINT16: (UINT16_RANGE, "uint16"),
    UINT32: (UINT32_RANGE, "uint32"),
}


def _write_value(w: Writer, op, kind: int, nullable: bool, value, path: list) -> None:
    if kind in _INT_RANGES:
        bounds, type_name = _INT_RANGES[kind]
        v = check_int(value, bounds, type_name)
        getattr(w, "write_" + type_name)(v)
    elif kind == STRING:
        w.write_string_value(value, op.compact, nullable)
    elif kind == ARRAY:
        if value is None:
            if not nullable:
                raise EncodeError("null array in a non-nullable field")
            w.write_length(-1, op.compact, True)
            return
        if not isinstance(value, (list, tuple)):
            raise EncodeError(f"expected a list, got {type(value).__name__}")
        w.write_length(len(value), op.compact, True)
        elem = op.elem_kind
        for i, item in enumerate(value):
            path[-1][1] = i
            _write_value(w, op, elem, False, item, path)
        path[-1][1] = -1
    elif kind == STRUCT:
        if nullable:
            if value is None:
                w.write_int8(-1)
                return
            w.write_int8(1)
        elif value is None:
            raise EncodeError("null struct in a non-nullable field")
        write_struct(w, value, op.child, path)
    elif kind == BOOL:
        if not isinstance(value, bool):
            raise EncodeError(f"expected bool, got {type(value).__name__}")
        w.write_bool(value)
    elif kind == UUID:
        w.write_uuid(value)
    elif kind in (BYTES, RECORDS):
        if kind == RECORDS and value is not None and hasattr(value, "raw") and not isinstance(value, bytes):
            value = value.raw  # a Records view (either implementation's)
        w.write_bytes_value(value, op.compact, nullable)
    elif kind == FLOAT64:
        w.write_float64(value)
    else:
        raise AssertionError(f"unknown field kind {kind}")


def write_struct(w: Writer, obj, plan: StructPlan, path: list) -> None:
    if not isinstance(obj, plan.cls):
        raise EncodeError(f"expected {plan.cls.__qualname__}, got {type(obj).__name__}")
    if len(path) >= MAX_DEPTH:
        raise EncodeError(f"structs nested deeper than {MAX_DEPTH}")
    frame: list = [None, -1]
    path.append(frame)
    for op in plan.fields:
        frame[0] = op.name
        _write_value(w, op, op.kind, op.nullable, _get(obj, op.name), path)
    for op in plan.absent:
        frame[0] = op.name
        if not op.ignorable and not op.is_default(_get(obj, op.name)):
            raise EncodeError(
                f"field {op.name} has a non-default value but version {plan.version} of {plan.name} does not have it"
            )
    if plan.flexible:
        frame[0] = "<tagged fields>"
        entries = []
        for op in plan.tagged:
            value = _get(obj, op.name)
            if op.is_default(value):
                continue
            frame[0] = op.name
            inner = Writer()
            _write_value(inner, op, op.kind, op.nullable, value, path)
            entries.append((op.tag, inner.getvalue()))
        unknown = obj._unknown_tags
        if unknown:
            known = plan.tag_map
            for tag, raw in unknown.items():
                if tag in known:
                    raise EncodeError(f"unknown tagged field {tag} collides with known field {known[tag].name}")
                entries.append((check_int(tag, UINT32_RANGE, "tag"), bytes(raw)))
            entries.sort()
        w.write_unsigned_varint(len(entries))
        for tag, raw in entries:
            w.write_unsigned_varint(tag)
            w.write_unsigned_varint(len(raw))
            w.write_raw(raw)
    path.pop()


def _get(obj, name: str):
    try:
        return getattr(obj, name)
    except AttributeError:
        raise EncodeError(f"field {name} is not set") from None


def _format_encode_path(plan: StructPlan, path: list) -> str:
    parts = [plan.name]
    for name, index in path:
        if name is not None:
            parts.append("." + name)
        if index >= 0:
            parts.append(f"[{index}]")
    return "".join(parts)


def encode_struct(obj, plan: StructPlan, writer: Writer | None = None) -> bytes:
    """Encode a message body; EncodeErrors name the field path."""
    w = writer if writer is not None else Writer()
    path: list = []
    try:
        write_struct(w, obj, plan, path)
    except EncodeError as exc:
        raise EncodeError(
            exc.reason, _format_encode_path(plan, path), plan.api_key if plan.api_key >= 0 else None, plan.version
        ) from None
    return w.getvalue()


# ------------------------------------------------------------------ headers
def _header_error(r: Reader, h: wire.WireHeader, start: int, root_name: str):
    """The exception for a header the wire layer refused: the Reader re-reads the part
    that broke, so the error has that part's path, offset and message."""
    r.root_name = root_name
    r.pos = start
    if h.part == wire.PART_FIXED:
        if root_name == "RequestHeader":
            r.read_int16()
            r.read_int16()
        r.read_int32()
    elif h.part == wire.PART_CLIENT_ID:
        r.path.append(["client_id", -1])
        r.pos = start + 8
        r.read_string_value(False, True)
    else:
        r.path.append(["<tagged fields>", -1])
        r.pos = h.tags_at
        r.read_tagged_fields()
    return SystemError("kproto: the wire layer refused a header its readers accept")


def _header_tags(r: Reader, h: wire.WireHeader):
    if not h.tag_count:
        return None
    r.pos = h.tags_at
    return r.read_tagged_fields()


def read_request_header(r: Reader):
    """Read a request header at the reader's position, choosing its version from the API."""
    h = wire.WireHeader()
    start = r.pos
    try:
        wire.request_header(r.data, h, start, r.end)
    except wire.WireError:
        raise _header_error(r, h, start, "RequestHeader") from None
    header = RequestHeader.__new__(RequestHeader)
    _set(header, "request_api_key", h.api_key)
    _set(header, "request_api_version", h.api_version)
    _set(header, "correlation_id", h.correlation_id)
    _set(
        header,
        "client_id",
        None if h.client_id_length < 0 else str(r.data[h.client_id_at : h.client_id_at + h.client_id_length], "utf-8"),
    )
    _set(header, "_unknown_tags", _header_tags(r, h))
    r.pos = h.end
    return header, h.version


def read_response_header(r: Reader, api_key: int, api_version: int):
    h = wire.WireHeader()
    start = r.pos
    try:
        wire.response_header(r.data, h, schema.header_version(api_key, api_version, False), False, start, r.end)
    except wire.WireError:
        raise _header_error(r, h, start, "ResponseHeader") from None
    header = ResponseHeader.__new__(ResponseHeader)
    _set(header, "correlation_id", h.correlation_id)
    _set(header, "_unknown_tags", _header_tags(r, h))
    r.pos = h.end
    return header, h.version


def decode_request_header_info(buf):
    """Decode just the request header of a payload; returns (header, header_version, body_offset)."""
    r = Reader(buf)
    h, version = read_request_header(r)
    return h, version, r.pos


def decode_request_header(payload, *, size_prefixed: bool = False):
    """The request header of a payload (or of a whole frame with ``size_prefixed=True``)."""
    r = Reader(payload)
    if size_prefixed:
        size = r.read_int32()
        if size != r.end - r.pos:
            raise DecodeError(f"frame size {size} does not match the {r.end - r.pos} bytes that follow", 0)
    return read_request_header(r)[0]


def decode_response_header(buf, api_key: int, api_version: int):
    r = Reader(buf)
    h, version = read_response_header(r, api_key, api_version)
    return h, version, r.pos


def write_request_header(w: Writer, api_key: int, api_version: int, correlation_id: int, client_id, tags=None) -> None:
    version = schema.header_version(api_key, api_version, True)
    w.write_int16(api_key)
    w.write_int16(api_version)
    w.write_int32(correlation_id)
    if version >= 1:
        w.write_nullable_string(client_id)
    if version >= 2:
        w.write_tagged_fields(tags)


def write_response_header(w: Writer, api_key: int, api_version: int, correlation_id: int, tags=None) -> None:
    w.write_int32(correlation_id)
    if schema.header_version(api_key, api_version, False) >= 1:
        w.write_tagged_fields(tags)


def encode_request_header(header, header_version: int) -> bytes:
    w = Writer()
    w.write_int16(header.request_api_key)
    w.write_int16(header.request_api_version)
    w.write_int32(header.correlation_id)
    if header_version >= 1:
        w.write_nullable_string(header.client_id)
    if header_version >= 2:
        w.write_tagged_fields(header._unknown_tags)
    return w.getvalue()


# ------------------------------------------------------------------ whole frames
def decode_request(buf, *, lazy: bool = True):
    """(header, header_version, body) of a request payload (no size prefix); ``lazy`` as in decode_struct."""
    r = Reader(buf)
    header, header_version = read_request_header(r)
    api_key, api_version = header.request_api_key, header.request_api_version
    plan = schema.api_plan(api_key, api_version, True, header=header, offset=r.pos)
    _prepare(r, plan)
    body = read_struct(r, plan)
    if r.pos != r.end:
        raise r.error(InvalidLengthError, f"{r.end - r.pos} bytes left over after {plan.name}")
    return header, header_version, body


def decode_response(buf, api_key: int, api_version: int, plan: StructPlan, *, lazy: bool = True):
    """(header, header_version, body) of a response payload, given the request's API and
    version; ``lazy`` as in decode_struct."""
    r = Reader(buf)
    header, header_version = read_response_header(r, api_key, api_version)
    if r.pos == r.end:
        raise UnsupportedRequestError(
            "response holds only a correlation id: the broker did not support the request",
            r.pos,
            None,
            api_key,
            api_version,
        )
    _prepare(r, plan)
    body = read_struct(r, plan)
    if r.pos != r.end:
        raise r.error(InvalidLengthError, f"{r.end - r.pos} bytes left over after {plan.name}")
    return header, header_version, body


def encode_request(body, plan: StructPlan, correlation_id: int, client_id, header_tags=None) -> bytes:
    w = Writer()
    write_request_header(w, plan.api_key, plan.version, correlation_id, client_id, header_tags)
    return encode_struct(body, plan, w)


def encode_response(body, plan: StructPlan, correlation_id: int, header_tags=None) -> bytes:
    w = Writer()
    write_response_header(w, plan.api_key, plan.version, correlation_id, header_tags)
    return encode_struct(body, plan, w)

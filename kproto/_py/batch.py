"""Pure-Python twin of kproto/_c/_batch.pyx: the batch decoder's loops, one frame at a time.

Same inputs, same numpy column arrays, same statuses and error offsets as the
Cython loops; slow, but written to be read and to check the fast path against.
The JSON column comes from the message codec (``to_dict()`` + ``json.dumps``).
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from kproto import schema
from kproto._common.api_keys import ApiKey, response_fallback_version
from kproto._common.batch import Status
from kproto._common.records import (
    ATTR_COMPRESSION,
    LOG_OVERHEAD,
    MAGIC_AT,
    MIN_LENGTH_BY_MAGIC,
    V2_ATTRIBUTES_AT,
    V2_RECORDS_COUNT_AT,
)
from kproto._py import codec as _codec
from kproto._py import wire
from kproto._py.wire import WireError, WireHeader
from kproto.errors import (
    DecodeError,
    InvalidLengthError,
    InvalidVarintError,
    LimitExceededError,
    TruncatedError,
)

IMPLEMENTATION = "py"

(
    OK,
    TRUNCATED,
    BAD_LENGTH,
    UNKNOWN_API,
    UNSUPPORTED_VERSION,
    EMPTY_RESPONSE,
    MALFORMED,
    NO_REQUEST_INFO,
    NULL_FRAME,
    LIMIT_EXCEEDED,
    NOT_CAPTURED,
) = (int(status) for status in Status)
STATUS_NUMBERS = {status.name: int(status) for status in Status}

_BE32 = struct.Struct(">i")


# ------------------------------------------------------------------ protocol facts
def _facts() -> dict[tuple[int, int], tuple]:
    """(direction, api_key) -> (valid versions, deprecated versions, min 4.x version)."""
    out: dict[tuple[int, int], tuple] = {}
    for info in schema.MESSAGES.values():
        if info["type"] not in ("request", "response") or info["api_key"] is None:
            continue
        d = 0 if info["type"] == "request" else 1
        key = info["api_key"]
        deprecated = info["deprecated_versions"]
        if deprecated is None:  # a response shares its request's deprecation (KIP-896)
            request = schema.MESSAGES.get(schema.request_name(key) or "")
            deprecated = request["deprecated_versions"] if request else None
        out[(d, key)] = (info["valid_versions"], deprecated, info["min_version_4x"])
    return out


_FACTS = _facts()


class _Row:
    """One frame's header fields while it is being read (None: not read)."""

    __slots__ = (
        "api_key",
        "api_version",
        "correlation_id",
        "header_version",
        "client_id",
        "tag_count",
        "status",
        "error_offset",
        "body_offset",
        "deprecated",
        "removed",
    )

    def __init__(self) -> None:
        self.api_key: int | None = None
        self.api_version: int | None = None
        self.correlation_id: int | None = None
        self.header_version: int | None = None
        self.client_id: int | None = None  # the id's length (its text appended to the call's ids)
        self.tag_count: int | None = None
        self.error_offset: int | None = None
        self.status = OK
        self.body_offset = -1
        self.deprecated = self.removed = False

    def fail(self, status: int, offset: int) -> None:
        self.status = status
        self.error_offset = offset


def _api_checks(row: _Row, d: int, key: int, version: int, body: int) -> None:
    facts = _FACTS.get((d, key))
    if facts is None:
        row.fail(UNKNOWN_API, body)
        return
    (lo, hi), deprecated, min_4x = facts
    if not lo <= version <= hi:
        row.fail(UNSUPPORTED_VERSION, body)
        return
    row.deprecated = deprecated is not None and deprecated[0] <= version <= deprecated[1]
    row.removed = min_4x is not None and version < min_4x


def _scan_request(row: _Row, p: memoryview, clients: list[bytes]) -> None:
    h = WireHeader()
    try:
        pos = wire.request_header(p, h)
    except WireError:
        if h.part != wire.PART_FIXED:  # what was read before the failure stays in the row
            _request_fields(row, h, p, clients)
        raise
    _request_fields(row, h, p, clients)
    if h.tags_at >= 0:
        row.tag_count = h.tag_count
    row.body_offset = pos
    _api_checks(row, 0, h.api_key, h.api_version, pos)


def _request_fields(row: _Row, h: WireHeader, p: memoryview, clients: list[bytes]) -> None:
    """``clients``: the ids' text in row order, which the id is appended to (the row's value its length)."""
    row.api_key, row.api_version, row.correlation_id = h.api_key, h.api_version, h.correlation_id
    row.header_version = h.version
    if h.client_id_length >= 0:
        raw = bytes(p[h.client_id_at : h.client_id_at + h.client_id_length])
        clients.append(raw)
        row.client_id = len(raw)


def _scan_response(row: _Row, p: memoryview, key: int, version: int) -> None:
    h = WireHeader()
    hv = -1 if key < 0 else schema.header_version(key, version, False)
    try:
        pos = wire.response_header(p, h, hv, True)
    finally:
        if len(p) >= 4:
            row.correlation_id = h.correlation_id
        if key >= 0 and len(p) >= 4:
            row.api_key, row.api_version, row.header_version = key, version, hv
    if h.tags_at >= 0:
        row.tag_count = h.tag_count
    row.body_offset = pos
    _api_checks(row, 1, key, version, pos)


def _scan_frame(p: memoryview, direction: int, key: int, version: int, clients: list[bytes]) -> _Row:
    row = _Row()
    try:
        if direction == 1:
            _scan_response(row, p, key, version)
        else:
            _scan_request(row, p, clients)
    except WireError as exc:
        row.fail(exc.status, exc.offset)
        row.body_offset = -1
    return row


def count_frames(data, max_frame_size: int) -> tuple[int, int]:
    """(frames, bytes framed) of size-prefixed frames; see the Cython twin."""
    view = memoryview(data).cast("B")
    pos = n = framed = 0
    while len(view) - pos >= 4:
        size = _BE32.unpack_from(view, pos)[0]
        n += 1
        if size < 0 or size > max_frame_size or len(view) - pos - 4 < size:
            break
        pos += 4 + size
        framed = pos
    return n, framed


def _columns(rows: list[_Row], count: int, offset_col, size_col, clients, directions, default_direction) -> dict:
    """scan's column arrays from its rows (the Cython twin fills them in its loop)."""

    def column(name, dtype, fill=0):
        return np.array([fill if getattr(r, name) is None else getattr(r, name) for r in rows], dtype=dtype).reshape(
            count
        )

    def bits(name, test=lambda v: v is not None):
        flags = np.array([bool(test(getattr(r, name))) for r in rows], dtype=bool).reshape(count)
        return np.packbits(flags, bitorder="little")

    cols = {
        "offset": np.array(offset_col, np.int64).reshape(count),
        "size": np.array(size_col, np.int32).reshape(count),
        "header_version": column("header_version", np.int8),
        "api_key": column("api_key", np.int16),
        "api_version": column("api_version", np.int16),
        "correlation_id": column("correlation_id", np.int32),
        "client_id": column("client_id", np.int32),
        "tag_count": column("tag_count", np.int32),
        "status": column("status", np.uint8),
        "error_offset": column("error_offset", np.int32),
        "body_offset": column("body_offset", np.int32),
        "direction": (
            np.array(directions, np.int8) if directions is not None else np.full(count, default_direction, np.int8)
        ).reshape(count),
        "has_api": bits("api_key"),
        "has_correlation": bits("correlation_id"),
        "has_header_version": bits("header_version"),
        "has_client_id": bits("client_id"),
        "has_tag_count": bits("tag_count"),
        "has_error": bits("error_offset"),
        "deprecated": bits("deprecated", bool),
        "removed": bits("removed", bool),
        "client_id_data": b"".join(clients),
        # Arrow's int32 offsets from each row's id length (None past 2 GiB)
        "client_id_offsets": (
            None
            if sum(len(raw) for raw in clients) > 0x7FFFFFFF
            else np.concatenate(([0], np.cumsum(column("client_id", np.int64)))).astype(np.int32)
        ),
        "count": count,
    }
    return cols


def scan(
    data,
    count: int = -1,
    offsets=None,
    valid=None,
    directions=None,
    request_keys=None,
    request_versions=None,
    max_frame_size: int = 0x7FFFFFFF,
    default_direction: int = 0,
    default_key: int = -1,
    default_version: int = -1,
    body_offsets: bool = True,
) -> dict:
    """Decode the headers of frames into numpy column arrays (see the Cython twin and kproto/arrow/frames.py)."""
    view = memoryview(data).cast("B")
    framed = 0
    if offsets is None:
        frames, framed = count_frames(view, max_frame_size)
        if count < 0:
            count = frames
        elif count != frames:
            raise ValueError(f"count {count} but the buffer holds {frames} frames")
    clients: list[bytes] = []
    rows: list[_Row] = []
    offset_col, size_col = [], []
    pos = 0
    for i in range(count):
        direction = int(directions[i]) if directions is not None else default_direction
        key = int(request_keys[i]) if request_keys is not None else default_key
        version = int(request_versions[i]) if request_versions is not None else default_version
        if offsets is None:
            size = _BE32.unpack_from(view, pos)[0] if len(view) - pos >= 4 else -1
            offset_col.append(pos)
            size_col.append(size)
            if size < 0 or size > max_frame_size:
                row = _Row()
                row.fail(BAD_LENGTH, -4)
                rows.append(row)
                continue
            n = min(size, len(view) - pos - 4)
            row = _scan_frame(view[pos + 4 : pos + 4 + n], direction, key, version, clients)
            if n < size:
                if row.status != TRUNCATED:
                    row.fail(TRUNCATED, n)
                row.body_offset = -1
            rows.append(row)
            pos += 4 + size
        else:
            start, end = int(offsets[i]), int(offsets[i + 1])
            offset_col.append(start)
            size_col.append(end - start)
            if (valid is not None and not valid[i]) or end < start or start < 0 or end > len(view):
                row = _Row()
                row.fail(NULL_FRAME if end >= start else BAD_LENGTH, 0)
                rows.append(row)
                continue
            rows.append(_scan_frame(view[start:end], direction, key, version, clients))
    cols = _columns(rows, count, offset_col, size_col, clients, directions, default_direction)
    cols["framed"] = framed
    if not body_offsets:
        del cols["body_offset"]
    return cols


# ------------------------------------------------------------------ bodies as JSON
_ERROR_STATUS = (
    (TruncatedError, TRUNCATED),
    (InvalidLengthError, BAD_LENGTH),
    (InvalidVarintError, MALFORMED),
    (LimitExceededError, LIMIT_EXCEEDED),
    (DecodeError, MALFORMED),
)


def body_plan(direction: int, api_key: int, version: int):
    """The plan a body is read with: its API's at its version."""
    name = schema.response_name(api_key) if direction == 1 else schema.request_name(api_key)
    if name is None:  # the KeyError schema.plan raises for an unknown name
        raise KeyError(f"unknown Kafka message {name!r}")
    return schema.plan(name, version)


def summarize_records(raw: bytes) -> dict:
    """{"batches", "records", "bytes", "compression"} of a record set, from its batch headers only.

    Batches are counted while whole ones follow (a partial last batch is left
    out); ``records`` is None when a legacy compressed wrapper hides the count;
    ``compression`` is None without batches, "mixed" for several codecs.
    """
    n = len(raw)
    pos = batches = records = 0
    records_known = True
    codec = -1
    while n - pos > MAGIC_AT:
        length = struct.unpack_from(">i", raw, pos + 8)[0]
        if length < 5 or length > n - pos - LOG_OVERHEAD:
            break
        magic = raw[pos + MAGIC_AT]
        if magic == 2:
            if length < MIN_LENGTH_BY_MAGIC[2]:
                break
            this_codec = struct.unpack_from(">H", raw, pos + V2_ATTRIBUTES_AT)[0] & ATTR_COMPRESSION
            records += struct.unpack_from(">i", raw, pos + V2_RECORDS_COUNT_AT)[0]
        elif magic in (0, 1):
            if length < 6:
                break
            this_codec = raw[pos + MAGIC_AT + 1] & ATTR_COMPRESSION  # legacy attributes follow the magic
            if this_codec == 0:
                records += 1
            else:
                records_known = False
        else:
            break
        codec = this_codec if codec in (-1, this_codec) else 8
        batches += 1
        pos += LOG_OVERHEAD + length
    names = ("none", "gzip", "snappy", "lz4", "zstd")
    compression = (
        None if codec == -1 else "mixed" if codec == 8 else names[codec] if codec < len(names) else f"unknown({codec})"
    )
    return {"batches": batches, "records": records if records_known else None, "bytes": n, "compression": compression}


def _summarized_dict(message: Any) -> dict:
    """``message.to_dict()``, with records fields as :func:`summarize_records` instead of base64."""
    out: dict[str, Any] = {}
    for name, kind in zip(message._field_names, message._field_kinds):
        value = getattr(message, name)
        if kind == schema.RECORDS:
            out[name] = None if value is None else summarize_records(bytes(value))
        elif isinstance(value, schema.Message):
            out[name] = _summarized_dict(value)
        elif isinstance(value, list):
            out[name] = [_summarized_dict(v) if isinstance(v, schema.Message) else schema._plain(v) for v in value]
        else:
            out[name] = schema._plain(value)
    plain = message.to_dict() if message._unknown_tags else None
    if plain is not None:
        out["_unknown_tags"] = plain["_unknown_tags"]
    return out


def _decode_body(payload: memoryview, body_at: int, direction: int, api_key: int, version: int):
    """One body as an object, and the plan it was read with. ApiVersions responses as
    kproto.api.decode_response reads them (KIP-511, as Java does): at the version asked,
    else as v0; neither: the first error."""
    plan = body_plan(direction, api_key, version)
    try:
        return _codec.decode_struct(payload, plan, body_at), plan
    except DecodeError as exc:
        fallback = response_fallback_version(api_key, version) if direction == 1 else -1
        if fallback < 0:
            raise
        first = exc
    plan = body_plan(direction, api_key, fallback)
    try:
        return _codec.decode_struct(payload, plan, body_at), plan
    except DecodeError:
        raise first from None


def _version_fields(value: Any, plan: Any) -> Any:
    """A body's dict without the fields its plan's version lacks (``plan.absent``), nested structs
    too; ``_unknown_tags`` stays. What the C pass does by not writing a plan's absent fields."""
    if isinstance(value, list):
        return [_version_fields(item, plan) for item in value]
    if not isinstance(value, dict):
        return value
    absent = {op.name for op in plan.absent}
    children = {op.name: op.child for op in plan.fields + plan.tagged if op.child is not None}
    return {
        name: _version_fields(item, children[name]) if name in children and item is not None else item
        for name, item in value.items()
        if name not in absent
    }


def json_bodies(
    data, cols: dict, offsets=None, records_summary: bool = False, version_fields: bool = False
) -> tuple[np.ndarray, bytes]:
    """JSON text of every frame whose header read OK: (int64 offsets, UTF-8 data).

    ``records_summary``: records fields as a summary of their batch headers
    (``{"batches","records","bytes","compression"}``) instead of base64.
    ``version_fields``: only the fields of the frame's version (not those it lacks,
    which are otherwise written with their defaults, as ``to_dict()`` does).

    Frames whose body fails to decode get a status and error offset (written into
    ``cols``) and no text; the caller marks them null.
    """
    view = memoryview(data).cast("B")
    count = len(cols["status"])
    out_offsets = np.zeros(count + 1, np.int64)
    chunks: list[bytes] = []
    total = 0
    has_error = cols["status"] != OK
    for i in range(count):
        out_offsets[i] = total
        if cols["status"][i] != OK or cols["body_offset"][i] < 0:
            continue
        start = int(cols["offset"][i]) + (4 if offsets is None else 0)
        payload = view[start : start + int(cols["size"][i])]
        body_at = int(cols["body_offset"][i])
        try:
            obj, plan = _decode_body(
                payload, body_at, int(cols["direction"][i]), int(cols["api_key"][i]), int(cols["api_version"][i])
            )
        except DecodeError as exc:
            status = next(s for cls, s in _ERROR_STATUS if isinstance(exc, cls))
            cols["status"][i] = status
            cols["error_offset"][i] = exc.offset
            has_error[i] = True
            continue
        fields = _summarized_dict(obj) if records_summary else obj.to_dict()
        if version_fields:
            fields = _version_fields(fields, plan)
        text = json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        chunks.append(text)
        total += len(text)
    out_offsets[count] = total
    cols["has_error"] = np.packbits(has_error, bitorder="little")
    return out_offsets, b"".join(chunks)


# ------------------------------------------------------------------ Produce / Fetch per partition
_PRODUCE = int(ApiKey.PRODUCE)  # plain ints: compared per frame
_FETCH = int(ApiKey.FETCH)


def _string_column(values: list[bytes | None]) -> tuple[np.ndarray, bytes, np.ndarray]:
    offsets = np.zeros(len(values) + 1, np.int32)
    offsets[1:] = np.cumsum([len(v) if v is not None else 0 for v in values], dtype=np.int64)
    return offsets, b"".join(v for v in values if v is not None), np.array([v is not None for v in values], np.bool_)


def partition_rows(data, cols: dict, offsets=None) -> dict:
    """Produce requests and Fetch responses per topic-partition, through the message codec.

    The same dict as the compiled pass; every record set goes to ``fallback``
    (kproto.arrow.frames summarizes it with the records module).
    """
    view = memoryview(data).cast("B")
    rows: dict[str, list] = {
        name: []
        for name in (
            "frame",
            "api_key",
            "direction",
            "partition",
            "error_code",
            "error_code_valid",
            "topic",
            "topic_id",
            "bytes",
        )
    }
    fallback: list[tuple[int, Any]] = []
    for i in range(len(cols["status"])):
        key, direction = int(cols["api_key"][i]), int(cols["direction"][i])
        if (
            cols["status"][i] != OK
            or cols["body_offset"][i] < 0
            or not ((key == _PRODUCE and direction == 0) or (key == _FETCH and direction == 1))
        ):
            continue
        start = int(cols["offset"][i]) + (4 if offsets is None else 0)
        payload = view[start : start + int(cols["size"][i])]
        body_at = int(cols["body_offset"][i])
        try:
            obj = _codec.decode_struct(payload, body_plan(direction, key, int(cols["api_version"][i])), body_at)
        except DecodeError:
            continue  # a body that does not decode has no rows
        produce = key == _PRODUCE
        for topic in (obj.topic_data if produce else obj.responses) or ():
            name = topic.name if produce else topic.topic
            topic_id = getattr(topic, "topic_id", None)
            for part in (topic.partition_data if produce else topic.partitions) or ():
                records = part.records
                if records is not None:
                    fallback.append((len(rows["frame"]), bytes(records)))
                rows["frame"].append(i)
                rows["api_key"].append(key)
                rows["direction"].append(direction)
                rows["partition"].append(part.index if produce else part.partition_index)
                rows["error_code"].append(0 if produce else part.error_code)
                rows["error_code_valid"].append(not produce)
                rows["topic"].append(name.encode("utf-8") if name else None)
                rows["topic_id"].append(str(topic_id).encode() if topic_id is not None and topic_id.int else None)
                rows["bytes"].append(0 if records is None else len(records))
    n = len(rows["frame"])
    return {
        "frame": np.array(rows["frame"], np.int64),
        "api_key": np.array(rows["api_key"], np.int16),
        "direction": np.array(rows["direction"], np.int8),
        "partition": np.array(rows["partition"], np.int32),
        "topic": _string_column(rows["topic"]),
        "topic_id": _string_column(rows["topic_id"]),
        "error_code": np.array(rows["error_code"], np.int16),
        "error_code_valid": np.array(rows["error_code_valid"], np.bool_),
        "batch_count": np.zeros(n, np.int32),
        "record_count": np.zeros(n, np.int64),
        "record_count_valid": np.ones(n, np.bool_),
        "bytes": np.array(rows["bytes"], np.int64),
        "codec": np.full(n, -1, np.int8),
        "producer_id": np.zeros(n, np.int64),
        "producer_id_valid": np.zeros(n, np.bool_),
        "fallback": fallback,
    }

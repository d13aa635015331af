"""Decode millions of Kafka frames into Arrow columns, without a Python object per frame.

The loops are in C (``kproto/_c/_batch.pyx``) and release the GIL; the pure-Python
twin (``kproto/_py/batch.py``) gives the same results, slowly. See docs/batch.md.

::

    import kproto.arrow.frames as kb

    frames = kb.decode_frames(buffer_of_size_prefixed_frames)      # pyarrow.RecordBatch
    frames = kb.decode_frames(capture_batch["payload"],            # Arrow binary, used in place
                              directions=capture_batch["direction"],
                              request_api_keys=keys, request_api_versions=versions,
                              body="json")

Bad frames never raise: each row has a :class:`Status` and the byte offset of the
problem; rows always equal frames read, and bytes after the last whole frame are
reported in the schema metadata (:func:`trailing_bytes`). Requests with their
responses: :func:`kproto.arrow.exchanges.pair`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

try:
    import numpy as np
    import pyarrow as pa
except ImportError as _missing:
    from kproto._extras import install_hint
    raise ImportError(f"kproto.arrow.frames needs numpy and pyarrow ({_missing.name} is missing): "
                      f"{install_hint('arrow')}", name=_missing.name) from _missing

from kproto import _impl, schema
from kproto._common.batch import PairStatus, Status
from kproto._common.capture import DIRECTION_REQUEST, DIRECTION_RESPONSE
from kproto import compression as _compression
from kproto.limits import DEFAULT_MAX_FRAME_SIZE as _DEFAULT_MAX_FRAME_SIZE

if TYPE_CHECKING:   # checked against the compiled module's stub; the twin has the same names
    from kproto._c import _batch
else:
    _batch = _impl.load("batch")

__all__ = [
    "Status", "PairStatus", "REQUEST", "RESPONSE",
    "decode_frames", "frame_schema", "trailing_bytes",
    "body_type", "decode_struct_column", "partitions", "partition_schema",
    "topic_names", "topic_names_schema", "topic_naming_versions",
]

# Directions, as the capture engines number them.
REQUEST, RESPONSE = DIRECTION_REQUEST, DIRECTION_RESPONSE


_DIRECTION_TYPE = pa.int8()


CLIENT_ID_TYPES = {"string": pa.string(), "dictionary": pa.dictionary(pa.int32(), pa.string())}


def frame_schema(body: str | None = None, client_ids: str = "string") -> pa.Schema:
    """The schema of :func:`decode_frames`' output (without its metadata)."""
    _check_client_ids(client_ids)
    fields = [
        pa.field("offset", pa.int64(), False),
        pa.field("size", pa.int32(), False),
        pa.field("direction", pa.int8(), False),
        pa.field("header_version", pa.int8()),
        pa.field("api_key", pa.int16()),
        pa.field("api_version", pa.int16()),
        pa.field("correlation_id", pa.int32()),
        pa.field("client_id", CLIENT_ID_TYPES[client_ids]),
        pa.field("header_tag_count", pa.int32()),
        pa.field("status", pa.uint8(), False),
        pa.field("error_offset", pa.int32()),
        pa.field("deprecated", pa.bool_(), False),
        pa.field("removed_in_4x", pa.bool_(), False),
    ]
    if body == "json":
        fields.append(pa.field("body", pa.string()))
    return pa.schema(fields)


def one_array(values: Any) -> Any:
    """A ChunkedArray as one Array (other values as they are): a single chunk is used in place,
    since ``combine_chunks`` copies even then (hundreds of MB for a split's payloads)."""
    if not isinstance(values, pa.ChunkedArray):
        return values
    if values.num_chunks == 1:
        return values.chunk(0)
    return values.combine_chunks()


def _per_frame(values: Any, count: int, dtype, name: str, fill: int) -> np.ndarray | None:
    """A per-frame input (None, a scalar, numpy or Arrow) as a contiguous numpy array."""
    if values is None:
        return None
    if isinstance(values, (int, np.integer)):
        return None   # one value for all frames: passed as a default
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if values.null_count:
            values = values.fill_null(fill)
        values = values.to_numpy(zero_copy_only=False)
    arr = np.ascontiguousarray(np.asarray(values), dtype=dtype)
    if arr.shape != (count,):
        raise ValueError(f"{name} has {arr.shape[0] if arr.ndim else 1} values for {count} frames")
    return arr


def _binary_input(frames: pa.Array) -> tuple[Any, np.ndarray, np.ndarray | None, int]:
    """(data buffer, offsets, validity, count) of an Arrow binary array, all in place."""
    if pa.types.is_binary(frames.type) or pa.types.is_string(frames.type):
        offset_type = np.int32
    elif pa.types.is_large_binary(frames.type) or pa.types.is_large_string(frames.type):
        offset_type = np.int64
    else:
        raise TypeError(f"frames must be binary or large_binary, not {frames.type}")
    count = len(frames)
    validity_buf, offsets_buf, data_buf = frames.buffers()[:3]
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[frames.offset:frames.offset + count + 1] \
        if offsets_buf is not None else np.zeros(count + 1, offset_type)
    valid = None
    if frames.null_count:
        valid = np.ascontiguousarray(frames.is_valid().to_numpy(zero_copy_only=False), dtype=np.uint8)
    data = data_buf if data_buf is not None else b""
    return data, np.ascontiguousarray(offsets), valid, count


def _array(arrow_type: pa.DataType, count: int, values: np.ndarray, bitmap: np.ndarray | None) -> pa.Array:
    if bitmap is None:
        return pa.Array.from_buffers(arrow_type, count, [None, pa.py_buffer(values)], null_count=0)
    return pa.Array.from_buffers(arrow_type, count, [pa.py_buffer(bitmap), pa.py_buffer(values)],
                                 null_count=-1)


def _check_client_ids(client_ids: str) -> None:
    if client_ids not in CLIENT_ID_TYPES:
        raise ValueError(f"client_ids must be 'string' or 'dictionary', not {client_ids!r}")


def _client_id_column(count: int, cols: dict, client_ids: str) -> pa.Array:
    """The client_id column from the loops' ids as text (each row's id in row order, its
    Arrow offsets), already checked UTF-8; ``client_ids="dictionary"`` encodes it, the
    dictionary in order of first appearance."""
    present = cols["has_client_id"]
    offsets = cols["client_id_offsets"]   # int32, None past 2 GiB
    if offsets is None:
        raise ValueError("the client ids of one call take over 2 GiB: decode fewer frames at a time")
    text = pa.Array.from_buffers(pa.string(), count, [None if present is None else pa.py_buffer(present),
                                                      pa.py_buffer(offsets), pa.py_buffer(cols["client_id_data"])],
                                 null_count=0 if present is None else -1)
    return text.dictionary_encode() if client_ids == "dictionary" else text


def _bool_array(count: int, bits: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(pa.bool_(), count, [None, pa.py_buffer(bits)], null_count=0)


def decode_frames(
    frames: Any,
    *,
    directions: Any = None,
    request_api_keys: Any = None,
    request_api_versions: Any = None,
    body: str | None = None,
    max_frame_size: int = _DEFAULT_MAX_FRAME_SIZE,
    records: str = "base64",
    client_ids: str = "string",
    body_fields: str = "all",
) -> pa.RecordBatch:
    """Decode the headers (and optionally bodies) of many frames into one RecordBatch.

    ``frames`` is either one contiguous buffer (bytes, memoryview, numpy, Arrow
    buffer...) of size-prefixed frames back to back, or an Arrow ``binary`` /
    ``large_binary`` array of payloads (frames without their size prefix, as
    ``kproto.arrow.capture`` writes them), whose offsets and data are read in place.

    ``directions``: per frame 0 (request) or 1 (response), or one int for all
    (default: all requests). ``request_api_keys`` / ``request_api_versions``:
    per frame, the API and version of the request a response answers (ignored for
    requests; without them a response's status is ``NO_REQUEST_INFO``).
    ``body="json"`` adds a ``body`` string column: the decoded body as JSON, the
    same shape as ``Message.to_dict()``, null where the frame's status is not OK.
    ``body_fields="version"`` leaves out of it the fields the frame's version does
    not have (``"all"``, the default, writes them with their defaults, as
    ``to_dict()`` does): what ``kproto dump`` shows.
    ``records="summary"`` writes records fields (Produce / Fetch record sets) as
    ``{"batches", "records", "bytes", "compression"}`` from the batch headers
    instead of base64 of their bytes (nothing decompressed; ``records`` null when
    a legacy compressed wrapper hides the count).
    ``client_id`` is a plain ``string`` column: the decode's speed does not depend
    on how many distinct ids there are. ``client_ids="dictionary"`` gives it
    dictionary-encoded instead (``pyarrow.compute.dictionary_encode`` of the text,
    each distinct id once, in order of first appearance), at a cost: see docs/batch.md.

    Columns: see :func:`frame_schema` and docs/batch.md. Never raises for bad
    frame bytes; raises TypeError / ValueError for bad arguments.
    """
    if body not in (None, "json"):
        raise ValueError(f"body must be None or 'json', not {body!r} (typed columns: decode_struct_column)")
    if records not in ("base64", "summary"):
        raise ValueError(f"records must be 'base64' or 'summary', not {records!r}")
    if body_fields not in ("all", "version"):
        raise ValueError(f"body_fields must be 'all' or 'version', not {body_fields!r}")
    _check_client_ids(client_ids)
    data, offsets, cols = _scan(frames, directions, request_api_keys, request_api_versions, max_frame_size,
                                body_offsets=body == "json")
    count = cols["count"]
    json_offsets = json_data = None
    if body == "json":
        json_offsets, json_data = _batch.json_bodies(data, cols, offsets, records == "summary",
                                                     body_fields == "version")
        # Bodies that failed now have an error offset too.
        cols["has_error"] = np.packbits(cols["status"] != Status.OK, bitorder="little")

    arrays = [
        pa.array(cols["offset"]),
        pa.array(cols["size"]),
        pa.array(cols["direction"]),
        _array(pa.int8(), count, cols["header_version"], cols["has_header_version"]),
        _array(pa.int16(), count, cols["api_key"], cols["has_api"]),
        _array(pa.int16(), count, cols["api_version"], cols["has_api"]),
        _array(pa.int32(), count, cols["correlation_id"], cols["has_correlation"]),
        _client_id_column(count, cols, client_ids),
        _array(pa.int32(), count, cols["tag_count"], cols["has_tag_count"]),
        pa.array(cols["status"]),
        _array(pa.int32(), count, cols["error_offset"], cols["has_error"]),
        _bool_array(count, cols["deprecated"]),
        _bool_array(count, cols["removed"]),
    ]
    if json_offsets is not None and json_data is not None:   # body == "json"
        arrays.append(_json_array(count, cols, json_offsets, json_data))
    metadata = None
    if offsets is None:
        total = len(memoryview(data).cast("B"))
        metadata = {
            b"kproto.trailing_offset": str(cols["framed"]).encode(),
            b"kproto.trailing_bytes": str(total - cols["framed"]).encode(),
        }
    schema_ = frame_schema(body, client_ids)
    if metadata:
        schema_ = schema_.with_metadata(metadata)
    return pa.RecordBatch.from_arrays(arrays, schema=schema_)


def _scan(frames: Any, directions: Any, request_api_keys: Any, request_api_versions: Any,
          max_frame_size: int, body_offsets: bool = True) -> tuple[Any, np.ndarray | None, dict]:
    """The header pass over ``frames``: (data, payload offsets or None, the column dict)."""
    frames = one_array(frames)
    defaults = {}
    for name, value in (("default_direction", directions), ("default_key", request_api_keys),
                        ("default_version", request_api_versions)):
        if isinstance(value, (int, np.integer)):
            defaults[name] = int(value)
    per_frame = [v for v in (directions, request_api_keys, request_api_versions)
                 if v is not None and not isinstance(v, (int, np.integer))]
    if isinstance(frames, pa.Array):
        data, offsets, valid, count = _binary_input(frames)
    else:
        data, offsets, valid = frames, None, None
        # One pass when nothing per frame has to be checked against the count.
        count = _batch.count_frames(data, max_frame_size)[0] if per_frame else -1
    dirs = _per_frame(directions, count, np.int8, "directions", 0)
    keys = _per_frame(request_api_keys, count, np.int16, "request_api_keys", -1)
    versions = _per_frame(request_api_versions, count, np.int16, "request_api_versions", -1)
    cols = _batch.scan(data, count, offsets, valid, dirs, keys, versions, max_frame_size, **defaults,
                       body_offsets=body_offsets)
    return data, offsets, cols


def _json_array(count: int, cols: dict, offsets: np.ndarray, data: bytes) -> pa.Array:
    ok = (cols["status"] == Status.OK) & (cols["body_offset"] >= 0)
    validity = pa.py_buffer(np.packbits(ok, bitorder="little"))
    if offsets[-1] <= np.iinfo(np.int32).max:
        return pa.Array.from_buffers(pa.string(), count,
                                     [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
                                     null_count=-1)
    large = pa.Array.from_buffers(pa.large_string(), count,
                                  [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=-1)
    return large   # over 2 GiB of JSON: the column is large_string


def trailing_bytes(batch: pa.RecordBatch) -> int:
    """Bytes after the last whole frame of a size-prefixed buffer (0 for Arrow input).

    They include a last frame cut short (which is also a ``TRUNCATED`` row) and
    everything after a ``BAD_LENGTH`` size prefix; fewer than 4 bytes left over
    form no row at all.
    """
    metadata = batch.schema.metadata or {}
    return int(metadata.get(b"kproto.trailing_bytes", b"0"))


# ------------------------------------------------------------------ typed struct columns
_SCALAR_TYPES = {
    schema.BOOL: pa.bool_(), schema.INT8: pa.int8(), schema.INT16: pa.int16(),
    schema.INT32: pa.int32(), schema.INT64: pa.int64(), schema.UINT16: pa.uint16(),
    schema.UINT32: pa.uint32(), schema.FLOAT64: pa.float64(), schema.UUID: pa.string(),
    schema.STRING: pa.string(), schema.BYTES: pa.binary(),
}


def _message_name(message: str | int, direction: int) -> str:
    if isinstance(message, str):
        return schema.message_class(message)._message_name
    name = schema.response_name(message) if direction == RESPONSE else schema.request_name(message)
    if name is None:
        raise ValueError(f"no schema for api_key {message}")
    return name


def _element_kinds(name: str) -> dict[tuple[type[schema.Message], str], int]:
    """(struct class, field) -> element kind of array fields, over every version."""
    out: dict[tuple[type[schema.Message], str], int] = {}

    def walk(plan: schema.StructPlan) -> None:
        for op in plan.fields + plan.tagged:
            if op.kind == schema.ARRAY:
                out[(plan.cls, op.name)] = op.elem_kind
            if op.child is not None:
                walk(op.child)

    lo, hi = schema.spec(name)["valid_versions"]
    for version in range(lo, hi + 1):
        walk(schema.plan(name, version))
    return out


def _struct_type(cls: type[schema.Message], elements: dict) -> pa.StructType:
    fields = []
    for name, kind, child in zip(cls._field_names, cls._field_kinds, cls._field_struct):
        if kind == schema.RECORDS:
            fields += [pa.field(name, pa.binary()), pa.field(name + "_batch_count", pa.int32()),
                       pa.field(name + "_record_count", pa.int64())]
            continue
        if kind == schema.STRUCT:
            arrow_type = _struct_type(child, elements)
        elif kind == schema.ARRAY:
            elem = elements.get((cls, name), schema.STRUCT if child is not None else schema.INT32)
            item = _struct_type(child, elements) if elem == schema.STRUCT else _SCALAR_TYPES[elem]
            arrow_type = pa.list_(item)
        else:
            arrow_type = _SCALAR_TYPES[kind]
        fields.append(pa.field(name, arrow_type))
    return pa.struct(fields)


def body_type(message: str | int, direction: int = REQUEST) -> pa.StructType:
    """The Arrow struct type of a message over all its versions (a message name, or an api_key).

    Fields are the union of every version's (absent in a version: null); nested
    arrays are lists of structs; a ``records`` field is ``binary`` plus
    ``<name>_batch_count`` and ``<name>_record_count`` summary fields.
    """
    name = _message_name(message, direction)
    return _struct_type(schema.message_class(name), _element_kinds(name))


def _records_summary(records: Any) -> tuple[int, int | None]:
    batches = 0
    records_count: int | None = 0
    for batch in records:
        batches += 1
        count = getattr(batch, "record_count", None)
        if count is None:
            count = 1 if not getattr(batch, "is_wrapper", False) else None
        records_count = None if count is None or records_count is None else records_count + count
    return batches, records_count


def _typed(value: Any, cls: type[schema.Message], plan: schema.StructPlan) -> dict:
    """A decoded struct as a dict of the union type: fields this version lacks are null."""
    out: dict[str, Any] = {}
    ops = {op.name: op for op in plan.fields + plan.tagged}
    for name, kind, child in zip(cls._field_names, cls._field_kinds, cls._field_struct):
        op = ops.get(name)
        v = getattr(value, name) if op is not None else None
        if kind == schema.RECORDS:
            out[name] = None if v is None else bytes(v)
            summary: tuple[int | None, int | None] = (None, None)
            if v is not None:
                try:
                    summary = _records_summary(v)
                except Exception:   # a corrupt record set: bytes kept, no summary
                    pass
            out[name + "_batch_count"], out[name + "_record_count"] = summary
        elif v is None or op is None:   # op is None only for a field this version lacks: v is None
            out[name] = None
        elif kind == schema.STRUCT:
            out[name] = _typed(v, child, op.child)
        elif kind == schema.ARRAY and child is not None:
            out[name] = [_typed(item, child, op.child) for item in v]
        elif kind == schema.UUID:
            out[name] = str(v)
        elif kind == schema.ARRAY:
            out[name] = [str(item) if not isinstance(item, (int, float, str, bool, bytes)) else item
                         for item in v]
        else:
            out[name] = v
    return out


def _decode_bodies(frames: Any, batch: pa.RecordBatch, direction_of: np.ndarray, rows: np.ndarray):
    """Yield (row, body object, version it was read as) for ``rows`` of a decoded batch whose bodies decode."""
    from kproto import api
    from kproto.errors import DecodeError

    if isinstance(frames, pa.ChunkedArray):
        frames = frames.combine_chunks()
    view = None if isinstance(frames, pa.Array) else memoryview(frames).cast("B")
    offsets = batch["offset"].to_numpy()
    sizes = batch["size"].to_numpy()
    keys = batch["api_key"].fill_null(-1).to_numpy(zero_copy_only=False)
    versions = batch["api_version"].fill_null(-1).to_numpy(zero_copy_only=False)
    for i in rows:
        if view is None:
            payload = frames[int(i)].as_py()
        else:
            payload = view[int(offsets[i]) + 4:int(offsets[i]) + 4 + int(sizes[i])]
        try:
            if direction_of[i] == RESPONSE:
                response = api.decode_response(payload, int(keys[i]), int(versions[i]))
                yield i, response.body, response.api_version
            else:
                yield i, api.decode_request(payload).body, int(versions[i])
        except DecodeError:
            continue


def decode_struct_column(frames: Any, message: str | int, *, directions: Any = None,
                         request_api_keys: Any = None, request_api_versions: Any = None,
                         max_frame_size: int = _DEFAULT_MAX_FRAME_SIZE) -> pa.StructArray:
    """A typed struct column (:func:`body_type`) of one message, one row per frame.

    Rows that are not that message (other API or direction), or whose status is
    not OK, are null. Inputs are those of :func:`decode_frames`. Bodies go
    through the message codec (one object per matching frame): use the JSON
    column when every API is wanted at full speed.
    """
    if isinstance(message, str):
        info = schema.spec(message)
        direction = RESPONSE if info["type"] == "response" else REQUEST
        api_key = info["api_key"]
    else:
        direction = RESPONSE if directions is not None and np.all(np.asarray(directions) == RESPONSE) \
            else REQUEST
        api_key = message
    name = _message_name(message, direction)
    arrow_type = body_type(name, direction)
    batch = decode_frames(frames, directions=directions, request_api_keys=request_api_keys,
                          request_api_versions=request_api_versions, max_frame_size=max_frame_size)
    status = batch["status"].to_numpy()
    dirs = batch["direction"].to_numpy()
    keys = batch["api_key"].fill_null(-1).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero((status == Status.OK) & (dirs == direction) & (keys == api_key))
    values: list[dict | None] = [None] * batch.num_rows
    cls = schema.message_class(name)
    for i, body_obj, version in _decode_bodies(frames, batch, dirs, rows):
        values[i] = _typed(body_obj, cls, schema.plan(name, version))
    return pa.array(values, type=arrow_type)


# ------------------------------------------------------------------ Produce / Fetch per partition


def partition_schema() -> pa.Schema:
    """The schema of :func:`partitions`' output."""
    return pa.schema([
        pa.field("frame", pa.int64(), False),
        pa.field("api_key", pa.int16(), False),
        pa.field("direction", pa.int8(), False),
        pa.field("topic", pa.string()),
        pa.field("topic_id", pa.string()),
        pa.field("partition", pa.int32(), False),
        pa.field("error_code", pa.int16()),
        pa.field("batch_count", pa.int32()),
        pa.field("record_count", pa.int64()),
        pa.field("bytes", pa.int64(), False),
        pa.field("compression", pa.string()),
        pa.field("producer_id", pa.int64()),
        pa.field("records_error", pa.string()),
    ])


def partitions(frames: Any, *, directions: Any = None, request_api_keys: Any = None,
               request_api_versions: Any = None,
               max_frame_size: int = _DEFAULT_MAX_FRAME_SIZE) -> pa.Table:
    """Produce requests and Fetch responses flattened: one row per topic-partition.

    ``frame`` is the row of the frame in :func:`decode_frames`' output. Record
    batches are read header-only (nothing decompressed): ``batch_count``,
    ``record_count`` (null when a legacy compressed wrapper hides it),
    ``bytes`` (the record set's size), ``compression`` (the batches' codec, or
    ``"mixed"``), ``producer_id`` (of the first batch; null for legacy
    messages). A record set that does not parse keeps its counts so far and says
    why in ``records_error``.
    """
    data, offsets, cols = _scan(frames, directions, request_api_keys, request_api_versions, max_frame_size)
    found = _batch.partition_rows(data, cols, offsets)
    return _partition_table(found)


#: Compression column values by the codes partition_rows gives (0-4 Kafka's codecs, 5 mixed; -1 null).
_COMPRESSION_NAMES = (*(_compression.codec_name(code) for code in range(5)), "mixed")


def _partition_table(found: dict) -> pa.Table:
    """The partitions table from partition_rows' columns; fallback record sets summarized here."""
    from kproto.records import Records

    n = len(found["frame"])
    codec = found["codec"].astype(np.int32)
    names = list(_COMPRESSION_NAMES)
    errors: list[str | None] = [None] * n if found["fallback"] else []
    for row, raw in found["fallback"]:
        summary = _partition_row(Records(raw))
        found["batch_count"][row] = summary["batch_count"]
        record_count = summary["record_count"]
        found["record_count"][row] = record_count or 0
        found["record_count_valid"][row] = record_count is not None
        producer_id = summary["producer_id"]
        found["producer_id"][row] = producer_id or 0
        found["producer_id_valid"][row] = producer_id is not None
        name = summary["compression"]
        if name is None:
            codec[row] = -1
        else:
            if name not in names:
                names.append(name)
            codec[row] = names.index(name)
        errors[row] = summary["records_error"]

    def text(column: tuple) -> pa.Array:
        offsets, data, valid = column
        return pa.Array.from_buffers(pa.string(), n, [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                                      pa.py_buffer(offsets), pa.py_buffer(data)], null_count=-1)

    def masked(values: np.ndarray, valid: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
        return pa.array(values, arrow_type, mask=~valid)

    compression = pa.DictionaryArray.from_arrays(pa.array(codec, pa.int32(), mask=codec < 0),
                                                 pa.array(names, pa.string())).cast(pa.string())
    return pa.table({
        "frame": pa.array(found["frame"], pa.int64()),
        "api_key": pa.array(found["api_key"], pa.int16()),
        "direction": pa.array(found["direction"], pa.int8()),
        "topic": text(found["topic"]),
        "topic_id": text(found["topic_id"]),
        "partition": pa.array(found["partition"], pa.int32()),
        "error_code": masked(found["error_code"], found["error_code_valid"], pa.int16()),
        "batch_count": pa.array(found["batch_count"], pa.int32()),
        "record_count": masked(found["record_count"], found["record_count_valid"], pa.int64()),
        "bytes": pa.array(found["bytes"], pa.int64()),
        "compression": compression,
        "producer_id": masked(found["producer_id"], found["producer_id_valid"], pa.int64()),
        "records_error": pa.array(errors, pa.string()) if errors else pa.nulls(n, pa.string()),
    }, schema=partition_schema())


def _partition_row(records: Any) -> dict:
    row: dict[str, Any] = {"batch_count": 0, "record_count": 0, "bytes": 0, "compression": None,
                           "producer_id": None, "records_error": None}
    if records is None:
        return row
    row["bytes"] = len(memoryview(bytes(records)))
    codecs = set()
    try:
        for batch in records:
            row["batch_count"] += 1
            count = getattr(batch, "record_count", None)
            if count is None and not getattr(batch, "is_wrapper", False):
                count = 1
            row["record_count"] = None if count is None or row["record_count"] is None \
                else row["record_count"] + count
            codecs.add(batch.compression_name)
            if row["batch_count"] == 1:
                row["producer_id"] = getattr(batch, "producer_id", None)
    except Exception as exc:   # a corrupt record set: keep what was read, say why
        row["records_error"] = str(exc)
    if codecs:
        row["compression"] = codecs.pop() if len(codecs) == 1 else "mixed"
    return row


# ------------------------------------------------------------------ topic IDs named by responses

#: Fields that name the topic next to a ``topic_id`` in a response struct (KIP-516).
_TOPIC_NAME_FIELDS = ("name", "topic", "topic_name")


def _naming_ops(plan: schema.StructPlan) -> tuple[str, str] | None:
    """(topic_id field, name field) when this struct carries a topic's ID and its name, else None."""
    ops = {op.name: op for op in plan.fields + plan.tagged}
    id_op = ops.get("topic_id")
    if id_op is None or id_op.kind != schema.UUID:
        return None
    for name in _TOPIC_NAME_FIELDS:
        op = ops.get(name)
        if op is not None and op.kind == schema.STRING:
            return id_op.name, op.name
    return None


def _names_topic_ids(plan: schema.StructPlan) -> bool:
    if _naming_ops(plan) is not None:
        return True
    return any(op.child is not None and _names_topic_ids(op.child) for op in plan.fields + plan.tagged)


@functools.cache
def topic_naming_versions() -> dict[int, frozenset[int]]:
    """api_key -> the response versions with a struct that carries a topic ID and its name.

    Read from the message definitions (Metadata v10+, CreateTopics v7+,
    DescribeTopicPartitions, DeleteTopics v6+, ConsumerGroupDescribe ...), so a
    new definition that names topic IDs is found without a list kept here.
    """
    found: dict[int, frozenset[int]] = {}
    for api_key in schema.api_keys():
        name = schema.response_name(api_key)
        if name is None:
            continue
        lo, hi = schema.spec(name)["valid_versions"]
        versions = frozenset(v for v in range(lo, hi + 1) if _names_topic_ids(schema.plan(name, v)))
        if versions:
            found[api_key] = versions
    return found


def topic_names_schema() -> pa.Schema:
    """The schema of :func:`topic_names`' output."""
    return pa.schema([pa.field("frame", pa.int64(), False), pa.field("topic_id", pa.string(), False),
                      pa.field("topic", pa.string(), False)])


def topic_names(frames: Any, *, directions: Any = None, request_api_keys: Any = None,
                request_api_versions: Any = None, max_frame_size: int = _DEFAULT_MAX_FRAME_SIZE) -> pa.Table:
    """Topic IDs and the names responses give them: one row per (frame, topic ID, name) a response carries.

    Inputs are those of :func:`decode_frames`. Only OK responses of the versions
    in :func:`topic_naming_versions` are decoded (one message object each);
    ``topic_id`` is formatted as :func:`partitions` formats it, and an all-zero
    ID or a null name gives no row.
    """
    batch = decode_frames(frames, directions=directions, request_api_keys=request_api_keys,
                          request_api_versions=request_api_versions, max_frame_size=max_frame_size)
    naming = topic_naming_versions()
    status = batch["status"].to_numpy()
    dirs = batch["direction"].to_numpy()
    keys = batch["api_key"].fill_null(-1).to_numpy(zero_copy_only=False)
    versions = batch["api_version"].fill_null(-1).to_numpy(zero_copy_only=False)
    wanted = np.zeros(len(keys), bool)
    for api_key, api_versions in naming.items():
        wanted |= (keys == api_key) & np.isin(versions, sorted(api_versions))
    rows = np.flatnonzero((status == Status.OK) & (dirs == RESPONSE) & wanted)
    found: dict[str, list] = {"frame": [], "topic_id": [], "topic": []}

    def walk(value: Any, plan: schema.StructPlan, frame: int) -> None:
        if value is None:
            return
        fields = _naming_ops(plan)
        if fields is not None:
            topic_id, name = getattr(value, fields[0]), getattr(value, fields[1])
            if topic_id is not None and topic_id != schema.ZERO_UUID and name is not None:
                found["frame"].append(frame)
                found["topic_id"].append(str(topic_id))
                found["topic"].append(name)
        for op in plan.fields + plan.tagged:
            if op.child is None:
                continue
            child = getattr(value, op.name)
            for item in (child if op.kind == schema.ARRAY else [child]) if child is not None else ():
                walk(item, op.child, frame)

    for i, body, version in _decode_bodies(frames, batch, dirs, rows):
        walk(body, schema.plan(schema.response_name(int(keys[i])) or "", version), int(i))
    return pa.table({"frame": pa.array(found["frame"], pa.int64()),
                     "topic_id": pa.array(found["topic_id"], pa.string()),
                     "topic": pa.array(found["topic"], pa.string())}, schema=topic_names_schema())


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

This module decodes; the tables built from what it decodes have their own modules,
whose entry points are here: typed struct columns (:func:`decode_struct_column`,
:func:`body_type`) in kproto.arrow.structs, one row per partition (:func:`partitions`,
:func:`partition_schema`) in kproto.arrow.partitions. The topic IDs responses name
are kproto.arrow.topic_names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:
    import numpy as np
    import pyarrow as pa
except ImportError as _missing:
    from kproto._extras import install_hint

    raise ImportError(
        f"kproto.arrow.frames needs numpy and pyarrow ({_missing.name} is missing): {install_hint('arrow')}",
        name=_missing.name,
    ) from _missing

from kproto import _impl
from kproto._common.batch import PairStatus, Status
from kproto._common.capture import DIRECTION_REQUEST, DIRECTION_RESPONSE
from kproto.arrow import partitions as _partitions
from kproto.arrow import structs
from kproto.arrow.partitions import partition_schema
from kproto.arrow.structs import body_type
from kproto.limits import DEFAULT_MAX_FRAME_SIZE as _DEFAULT_MAX_FRAME_SIZE

if TYPE_CHECKING:  # checked against the compiled module's stub; the twin has the same names
    from kproto._c import _batch
else:
    _batch = _impl.load("batch")

__all__ = [
    "Status",
    "PairStatus",
    "REQUEST",
    "RESPONSE",
    "decode_frames",
    "frame_schema",
    "trailing_bytes",
    "body_type",
    "decode_struct_column",
    "partitions",
    "partition_schema",
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
        return None  # one value for all frames: passed as a default
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
    offsets = (
        np.frombuffer(offsets_buf, dtype=offset_type)[frames.offset : frames.offset + count + 1]
        if offsets_buf is not None
        else np.zeros(count + 1, offset_type)
    )
    valid = None
    if frames.null_count:
        valid = np.ascontiguousarray(frames.is_valid().to_numpy(zero_copy_only=False), dtype=np.uint8)
    data = data_buf if data_buf is not None else b""
    return data, np.ascontiguousarray(offsets), valid, count


def _array(arrow_type: pa.DataType, count: int, values: np.ndarray, bitmap: np.ndarray | None) -> pa.Array:
    if bitmap is None:
        return pa.Array.from_buffers(arrow_type, count, [None, pa.py_buffer(values)], null_count=0)
    return pa.Array.from_buffers(arrow_type, count, [pa.py_buffer(bitmap), pa.py_buffer(values)], null_count=-1)


def _check_client_ids(client_ids: str) -> None:
    if client_ids not in CLIENT_ID_TYPES:
        raise ValueError(f"client_ids must be 'string' or 'dictionary', not {client_ids!r}")


def _client_id_column(count: int, cols: dict, client_ids: str) -> pa.Array:
    """The client_id column from the loops' ids as text (each row's id in row order, its
    Arrow offsets), already checked UTF-8; ``client_ids="dictionary"`` encodes it, the
    dictionary in order of first appearance."""
    present = cols["has_client_id"]
    offsets = cols["client_id_offsets"]  # int32, None past 2 GiB
    if offsets is None:
        raise ValueError("the client ids of one call take over 2 GiB: decode fewer frames at a time")
    text = pa.Array.from_buffers(
        pa.string(),
        count,
        [
            None if present is None else pa.py_buffer(present),
            pa.py_buffer(offsets),
            pa.py_buffer(cols["client_id_data"]),
        ],
        null_count=0 if present is None else -1,
    )
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
    data, offsets, cols = _scan(
        frames, directions, request_api_keys, request_api_versions, max_frame_size, body_offsets=body == "json"
    )
    count = cols["count"]
    json_offsets = json_data = None
    if body == "json":
        json_offsets, json_data = _batch.json_bodies(
            data, cols, offsets, records == "summary", body_fields == "version"
        )
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
    if json_offsets is not None and json_data is not None:  # body == "json"
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


def _scan(
    frames: Any,
    directions: Any,
    request_api_keys: Any,
    request_api_versions: Any,
    max_frame_size: int,
    body_offsets: bool = True,
) -> tuple[Any, np.ndarray | None, dict]:
    """The header pass over ``frames``: (data, payload offsets or None, the column dict)."""
    frames = one_array(frames)
    defaults = {}
    for name, value in (
        ("default_direction", directions),
        ("default_key", request_api_keys),
        ("default_version", request_api_versions),
    ):
        if isinstance(value, (int, np.integer)):
            defaults[name] = int(value)
    per_frame = [
        v
        for v in (directions, request_api_keys, request_api_versions)
        if v is not None and not isinstance(v, (int, np.integer))
    ]
    if isinstance(frames, pa.Array):
        data, offsets, valid, count = _binary_input(frames)
    else:
        data, offsets, valid = frames, None, None
        # One pass when nothing per frame has to be checked against the count.
        count = _batch.count_frames(data, max_frame_size)[0] if per_frame else -1
    dirs = _per_frame(directions, count, np.int8, "directions", 0)
    keys = _per_frame(request_api_keys, count, np.int16, "request_api_keys", -1)
    versions = _per_frame(request_api_versions, count, np.int16, "request_api_versions", -1)
    cols = _batch.scan(
        data, count, offsets, valid, dirs, keys, versions, max_frame_size, **defaults, body_offsets=body_offsets
    )
    return data, offsets, cols


def _json_array(count: int, cols: dict, offsets: np.ndarray, data: bytes) -> pa.Array:
    ok = (cols["status"] == Status.OK) & (cols["body_offset"] >= 0)
    validity = pa.py_buffer(np.packbits(ok, bitorder="little"))
    if offsets[-1] <= np.iinfo(np.int32).max:
        return pa.Array.from_buffers(
            pa.string(), count, [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)], null_count=-1
        )
    large = pa.Array.from_buffers(
        pa.large_string(), count, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=-1
    )
    return large  # over 2 GiB of JSON: the column is large_string


def trailing_bytes(batch: pa.RecordBatch) -> int:
    """Bytes after the last whole frame of a size-prefixed buffer (0 for Arrow input).

    They include a last frame cut short (which is also a ``TRUNCATED`` row) and
    everything after a ``BAD_LENGTH`` size prefix; fewer than 4 bytes left over
    form no row at all.
    """
    metadata = batch.schema.metadata or {}
    return int(metadata.get(b"kproto.trailing_bytes", b"0"))


# ------------------------------------------------------------------ typed struct columns (kproto.arrow.structs)
def decode_struct_column(
    frames: Any,
    message: str | int,
    *,
    directions: Any = None,
    request_api_keys: Any = None,
    request_api_versions: Any = None,
    max_frame_size: int = _DEFAULT_MAX_FRAME_SIZE,
) -> pa.StructArray:
    """A typed struct column (:func:`body_type`) of one message, one row per frame.

    Rows that are not that message (other API or direction), or whose status is
    not OK, are null. Inputs are those of :func:`decode_frames`. Bodies go
    through the message codec (one object per matching frame): use the JSON
    column when every API is wanted at full speed.
    """
    name, direction, api_key = structs.wanted_message(message, directions)
    batch = decode_frames(
        frames,
        directions=directions,
        request_api_keys=request_api_keys,
        request_api_versions=request_api_versions,
        max_frame_size=max_frame_size,
    )
    return structs.struct_column(frames, batch, name, direction, api_key)


# ------------------------------------------------------------------ Produce / Fetch per partition (kproto.arrow.partitions)
def partitions(
    frames: Any,
    *,
    directions: Any = None,
    request_api_keys: Any = None,
    request_api_versions: Any = None,
    max_frame_size: int = _DEFAULT_MAX_FRAME_SIZE,
) -> pa.Table:
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
    return _partitions.partition_table(found)

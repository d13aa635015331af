"""Decode millions of Kafka frames into Arrow columns, without a Python object per frame.

The loops are in C (``kproto/_c/_batch.pyx``) and release the GIL; the pure-Python
twin (``kproto/_py/batch.py``) gives the same results, slowly. See docs/batch.md.

::

    import kproto.batch as kb

    frames = kb.decode_frames(buffer_of_size_prefixed_frames)      # pyarrow.RecordBatch
    frames = kb.decode_frames(capture_batch["payload"],            # Arrow binary, used in place
                              directions=capture_batch["direction"],
                              request_api_keys=keys, request_api_versions=versions,
                              body="json")
    pairs = kb.pair(capture_table)                                 # requests with their responses

Bad frames never raise: each row has a :class:`Status` and the byte offset of the
problem; rows always equal frames read, and bytes after the last whole frame are
reported in the schema metadata (:func:`trailing_bytes`).
"""

from __future__ import annotations

import enum
import json
from typing import Any

import numpy as np
import pyarrow as pa

from kproto import _impl, schema

_batch = _impl.load("batch")

__all__ = [
    "Status", "PairStatus", "REQUEST", "RESPONSE", "DEFAULT_MAX_FRAME_SIZE",
    "decode_frames", "frame_schema", "trailing_bytes", "pair", "pair_schema",
    "body_type", "decode_struct_column", "partitions", "partition_schema",
]

REQUEST = 0
RESPONSE = 1
DEFAULT_MAX_FRAME_SIZE = 512 * 1024 * 1024   # same cap as kproto.capture: fits Arrow int32 offsets


class Status(enum.IntEnum):
    """Why a frame (row) did not decode; ``OK`` when it did.

    The ``error_offset`` column says where, in bytes from the start of the
    frame's payload (after the 4-byte size prefix; -4 is the prefix itself).
    """

    OK = 0
    #: The frame, or a field inside it, needs more bytes than there are (including
    #: a last frame cut short by the end of the buffer).
    TRUNCATED = 1
    #: A size prefix that is negative or above ``max_frame_size`` (framing stops
    #: there), a negative length or a count larger than the bytes left, or a body
    #: that does not end where its frame does.
    BAD_LENGTH = 2
    #: An API key kproto has no schema for (the header is still read, as v1).
    UNKNOWN_API = 3
    #: A version outside the API's valid versions.
    UNSUPPORTED_VERSION = 4
    #: A response holding only a correlation id: what a broker sends back for a
    #: request it does not support.
    EMPTY_RESPONSE = 5
    #: Invalid varint, tagged fields out of order, bad nullable-struct marker,
    #: invalid UTF-8 in a string.
    MALFORMED = 6
    #: A response without its request's api_key / api_version: only the
    #: correlation id can be read.
    NO_REQUEST_INFO = 7
    #: A null entry in an Arrow input array.
    NULL_FRAME = 8
    #: Structs nested deeper than 64 levels.
    LIMIT_EXCEEDED = 9


class PairStatus(enum.IntEnum):
    """How a row of :func:`pair` came about."""

    #: A request and its response.
    PAIRED = 0
    #: A request that gets no response by design: Produce with acks=0.
    NO_RESPONSE_EXPECTED = 1
    #: A request whose response was not captured (or has not come yet).
    UNPAIRED_REQUEST = 2
    #: A response whose request was not captured.
    UNPAIRED_RESPONSE = 3


for _name, _number in _batch.STATUS_NUMBERS.items():
    assert Status[_name] == _number, (_name, _number)

_DIRECTION_TYPE = pa.int8()


def frame_schema(body: str | None = None) -> pa.Schema:
    """The schema of :func:`decode_frames`' output (without its metadata)."""
    fields = [
        pa.field("offset", pa.int64(), False),
        pa.field("size", pa.int32(), False),
        pa.field("direction", pa.int8(), False),
        pa.field("header_version", pa.int8()),
        pa.field("api_key", pa.int16()),
        pa.field("api_version", pa.int16()),
        pa.field("correlation_id", pa.int32()),
        pa.field("client_id", pa.dictionary(pa.int32(), pa.string())),
        pa.field("header_tag_count", pa.int32()),
        pa.field("status", pa.uint8(), False),
        pa.field("error_offset", pa.int32()),
        pa.field("deprecated", pa.bool_(), False),
        pa.field("removed_in_4x", pa.bool_(), False),
    ]
    if body == "json":
        fields.append(pa.field("body", pa.string()))
    return pa.schema(fields)


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


def _bool_array(count: int, bits: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(pa.bool_(), count, [None, pa.py_buffer(bits)], null_count=0)


def decode_frames(
    frames: Any,
    *,
    directions: Any = None,
    request_api_keys: Any = None,
    request_api_versions: Any = None,
    body: str | None = None,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
) -> pa.RecordBatch:
    """Decode the headers (and optionally bodies) of many frames into one RecordBatch.

    ``frames`` is either one contiguous buffer (bytes, memoryview, numpy, Arrow
    buffer...) of size-prefixed frames back to back, or an Arrow ``binary`` /
    ``large_binary`` array of payloads (frames without their size prefix, as
    ``kproto.capture`` writes them), whose offsets and data are read in place.

    ``directions``: per frame 0 (request) or 1 (response), or one int for all
    (default: all requests). ``request_api_keys`` / ``request_api_versions``:
    per frame, the API and version of the request a response answers (ignored for
    requests; without them a response's status is ``NO_REQUEST_INFO``).
    ``body="json"`` adds a ``body`` string column: the decoded body as JSON, the
    same shape as ``Message.to_dict()``, null where the frame's status is not OK.

    Columns: see :func:`frame_schema` and docs/batch.md. Never raises for bad
    frame bytes; raises TypeError / ValueError for bad arguments.
    """
    if body not in (None, "json"):
        raise ValueError(f"body must be None or 'json', not {body!r} (typed columns: decode_struct_column)")
    if isinstance(frames, pa.ChunkedArray):
        frames = frames.combine_chunks()
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
    cols = _batch.scan(data, count, offsets, valid, dirs, keys, versions, max_frame_size, **defaults)
    count = cols["count"]
    json_offsets = json_data = None
    if body == "json":
        json_offsets, json_data = _batch.json_bodies(data, cols, offsets)

    client_ids = pa.array([raw.decode("utf-8") for raw in cols["client_ids"]], pa.string())
    client_indices = _array(pa.int32(), count, cols["client_id"], cols["has_client_id"])
    arrays = [
        pa.array(cols["offset"]),
        pa.array(cols["size"]),
        pa.array(cols["direction"]),
        _array(pa.int8(), count, cols["header_version"], cols["has_header_version"]),
        _array(pa.int16(), count, cols["api_key"], cols["has_api"]),
        _array(pa.int16(), count, cols["api_version"], cols["has_api"]),
        _array(pa.int32(), count, cols["correlation_id"], cols["has_correlation"]),
        pa.DictionaryArray.from_arrays(client_indices, client_ids, safe=False),
        _array(pa.int32(), count, cols["tag_count"], cols["has_tag_count"]),
        pa.array(cols["status"]),
        _array(pa.int32(), count, cols["error_offset"], cols["has_error"]),
        _bool_array(count, cols["deprecated"]),
        _bool_array(count, cols["removed"]),
    ]
    if body == "json":
        arrays.append(_json_array(count, cols, json_offsets, json_data))
    metadata = None
    if offsets is None:
        total = len(memoryview(data).cast("B"))
        metadata = {
            b"kproto.trailing_offset": str(cols["framed"]).encode(),
            b"kproto.trailing_bytes": str(total - cols["framed"]).encode(),
        }
    schema_ = frame_schema(body)
    if metadata:
        schema_ = schema_.with_metadata(metadata)
    return pa.RecordBatch.from_arrays(arrays, schema=schema_)


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

"""Typed struct columns: a message's bodies as one Arrow struct column, the union of its versions.

:func:`kproto.arrow.frames.decode_struct_column` decodes the frames and calls
:func:`struct_column` here; :func:`body_type` is the column's type. Bodies go through
the message codec, one object per matching frame (:func:`decode_bodies`, which
kproto.arrow.topic_names uses too).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from kproto import schema
from kproto._common.batch import Status
from kproto._common.capture import DIRECTION_REQUEST as REQUEST
from kproto._common.capture import DIRECTION_RESPONSE as RESPONSE

_SCALAR_TYPES = {
    schema.BOOL: pa.bool_(),
    schema.INT8: pa.int8(),
    schema.INT16: pa.int16(),
    schema.INT32: pa.int32(),
    schema.INT64: pa.int64(),
    schema.UINT16: pa.uint16(),
    schema.UINT32: pa.uint32(),
    schema.FLOAT64: pa.float64(),
    schema.UUID: pa.string(),
    schema.STRING: pa.string(),
    schema.BYTES: pa.binary(),
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
            fields += [
                pa.field(name, pa.binary()),
                pa.field(name + "_batch_count", pa.int32()),
                pa.field(name + "_record_count", pa.int64()),
            ]
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
                except Exception:  # a corrupt record set: bytes kept, no summary
                    pass
            out[name + "_batch_count"], out[name + "_record_count"] = summary
        elif v is None or op is None:  # op is None only for a field this version lacks: v is None
            out[name] = None
        elif kind == schema.STRUCT:
            out[name] = _typed(v, child, op.child)
        elif kind == schema.ARRAY and child is not None:
            out[name] = [_typed(item, child, op.child) for item in v]
        elif kind == schema.UUID:
            out[name] = str(v)
        elif kind == schema.ARRAY:
            out[name] = [str(item) if not isinstance(item, (int, float, str, bool, bytes)) else item for item in v]
        else:
            out[name] = v
    return out


def decode_bodies(frames: Any, batch: pa.RecordBatch, direction_of: np.ndarray, rows: np.ndarray):
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
            payload = view[int(offsets[i]) + 4 : int(offsets[i]) + 4 + int(sizes[i])]
        try:
            if direction_of[i] == RESPONSE:
                response = api.decode_response(payload, int(keys[i]), int(versions[i]))
                yield i, response.body, response.api_version
            else:
                yield i, api.decode_request(payload).body, int(versions[i])
        except DecodeError:
            continue


def wanted_message(message: str | int, directions: Any) -> tuple[str, int, int]:
    """(message name, direction, api_key) of a struct column: ``message`` is a name, or an
    api_key read as responses when every direction is a response, else as requests."""
    if isinstance(message, str):
        info = schema.spec(message)
        direction = RESPONSE if info["type"] == "response" else REQUEST
        api_key = info["api_key"]
    else:
        direction = RESPONSE if directions is not None and np.all(np.asarray(directions) == RESPONSE) else REQUEST
        api_key = message
    return _message_name(message, direction), direction, api_key


def struct_column(frames: Any, batch: pa.RecordBatch, name: str, direction: int, api_key: int) -> pa.StructArray:
    """The typed column of message ``name`` over ``batch`` (decode_frames' rows of ``frames``):
    null where a row is another API or direction, or not OK."""
    arrow_type = body_type(name, direction)
    status = batch["status"].to_numpy()
    dirs = batch["direction"].to_numpy()
    keys = batch["api_key"].fill_null(-1).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero((status == Status.OK) & (dirs == direction) & (keys == api_key))
    values: list[dict | None] = [None] * batch.num_rows
    cls = schema.message_class(name)
    for i, body_obj, version in decode_bodies(frames, batch, dirs, rows):
        values[i] = _typed(body_obj, cls, schema.plan(name, version))
    return pa.array(values, type=arrow_type)

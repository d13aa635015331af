"""Topic IDs named by responses: which responses carry a topic's ID beside its name, and their rows.

Fetch v13+ and Produce v13 address topics by ID alone; Metadata v10+, CreateTopics v7+,
DescribeTopicPartitions and others answer with the ID and the name. :func:`topic_names`
collects those pairs, so the exchanges can name a topic given by its ID.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa

from kproto import schema
from kproto._common.batch import Status
from kproto._common.capture import DIRECTION_RESPONSE as RESPONSE
from kproto.arrow.frames import decode_frames
from kproto.arrow.structs import decode_bodies
from kproto.limits import DEFAULT_MAX_FRAME_SIZE as _DEFAULT_MAX_FRAME_SIZE

__all__ = ["topic_names", "topic_names_schema", "topic_naming_versions"]

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
    return pa.schema(
        [
            pa.field("frame", pa.int64(), False),
            pa.field("topic_id", pa.string(), False),
            pa.field("topic", pa.string(), False),
        ]
    )


def topic_names(
    frames: Any,
    *,
    directions: Any = None,
    request_api_keys: Any = None,
    request_api_versions: Any = None,
    max_frame_size: int = _DEFAULT_MAX_FRAME_SIZE,
) -> pa.Table:
    """Topic IDs and the names responses give them: one row per (frame, topic ID, name) a response carries.

    Inputs are those of :func:`decode_frames`. Only OK responses of the versions
    in :func:`topic_naming_versions` are decoded (one message object each);
    ``topic_id`` is formatted as :func:`kproto.arrow.frames.partitions` formats it, and an all-zero
    ID or a null name gives no row.
    """
    batch = decode_frames(
        frames,
        directions=directions,
        request_api_keys=request_api_keys,
        request_api_versions=request_api_versions,
        max_frame_size=max_frame_size,
    )
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

    for i, body, version in decode_bodies(frames, batch, dirs, rows):
        walk(body, schema.plan(schema.response_name(int(keys[i])) or "", version), int(i))
    return pa.table(
        {
            "frame": pa.array(found["frame"], pa.int64()),
            "topic_id": pa.array(found["topic_id"], pa.string()),
            "topic": pa.array(found["topic"], pa.string()),
        },
        schema=topic_names_schema(),
    )

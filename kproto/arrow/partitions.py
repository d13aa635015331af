"""Produce requests and Fetch responses per partition: the table of one row per topic-partition.

:func:`kproto.arrow.frames.partitions` scans the frames and the compiled pass (or
its twin) gives the rows' columns (``partition_rows``); :func:`partition_table`
here makes them a table, summarizing with kproto.records the record sets that pass
left to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from kproto import compression as _compression


def partition_schema() -> pa.Schema:
    """The schema of :func:`kproto.arrow.frames.partitions`' output."""
    return pa.schema(
        [
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
        ]
    )


#: Compression column values by the codes partition_rows gives (0-4 Kafka's codecs, 5 mixed; -1 null).
_COMPRESSION_NAMES = (*(_compression.codec_name(code) for code in range(5)), "mixed")


def partition_table(found: dict) -> pa.Table:
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
        return pa.Array.from_buffers(
            pa.string(),
            n,
            [pa.py_buffer(np.packbits(valid, bitorder="little")), pa.py_buffer(offsets), pa.py_buffer(data)],
            null_count=-1,
        )

    def masked(values: np.ndarray, valid: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
        return pa.array(values, arrow_type, mask=~valid)

    compression = pa.DictionaryArray.from_arrays(
        pa.array(codec, pa.int32(), mask=codec < 0), pa.array(names, pa.string())
    ).cast(pa.string())
    return pa.table(
        {
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
        },
        schema=partition_schema(),
    )


def _partition_row(records: Any) -> dict:
    row: dict[str, Any] = {
        "batch_count": 0,
        "record_count": 0,
        "bytes": 0,
        "compression": None,
        "producer_id": None,
        "records_error": None,
    }
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
            row["record_count"] = None if count is None or row["record_count"] is None else row["record_count"] + count
            codecs.add(batch.compression_name)
            if row["batch_count"] == 1:
                row["producer_id"] = getattr(batch, "producer_id", None)
    except Exception as exc:  # a corrupt record set: keep what was read, say why
        row["records_error"] = str(exc)
    if codecs:
        row["compression"] = codecs.pop() if len(codecs) == 1 else "mixed"
    return row

"""What runs inside Spark's Python workers: the output rows, where the tables go, reading a split.

Nothing here imports pyspark: every function takes and returns pyarrow objects,
so the same code runs in a Spark task, in a test, or in a plain script.

The pipeline (see docs/analyze.md):

1. ``planning.plan_file`` (kproto/analyze/spark/planning.py) cuts each input file into
   *splits*: byte ranges of a large pcap, else the whole file.
2. ``task.process_split`` (kproto/analyze/spark/task.py) reads one split (:func:`capture_reader`),
   decodes and pairs its frames (``decode.decode_frames_table``, kproto/analyze/spark/decode.py;
   a range of a pcap in bounded batches, kproto/analyze/spark/range_pipeline.py; a capture set,
   kproto/analyze/spark/set_reader.py) and hands the ``frames`` and ``exchanges`` rows it owns to
   a :class:`Sink` (:class:`ParquetSink` in Spark tasks). A big file that cannot be cut is
   emitted as ``raw`` frames instead (:func:`raw_rows`), which Spark groups by connection
   before ``decode.decode_raw_batches`` does the same.
3. What goes back to Spark are compact rows in :data:`PARTS_SCHEMA`
   (``decode.summarize``, and the accounting rows here): per-capture counts, usage per
   connection / client / API version, per topic-partition sums, and the accounting;
   kproto/analyze/spark/combine.py makes the small tables of them (in the driver, or per key
   in Spark's partitions).

This module is the bottom of the worker side: decode.py, task.py and the readers import it,
it imports none of them (tests/analyze/test_spark_structure.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from kproto.analyze.spark.planning import PCAP_HEADER_SIZE, Split, local_path, shown_path
from kproto.arrow import exchanges as E
from kproto.arrow.capture import CaptureReader, frame_schema


# ---------------------------------------------------------------- the output rows
# The frames and exchanges tables are written by the tasks themselves (Parquet, one
# file per task); what goes back to Spark are a few compact rows per task, in one
# schema for every kind:
#   usage       requests per (capture, connection, client_id, API version, client software)
#   topic       Produce requests / Fetch responses per (topic, topic ID, partition, API, compression)
#   topic_name  topic IDs and the names responses gave them (KIP-516), resolved on the driver
#   connection  one connection's accounting (JSON in ``info``)
#   capture     one split's accounting and frame / exchange counts (JSON in ``info``)
#   raw         frames on their way to the grouping step (ranges of pcapng, Parquet inputs)
def parts_schema() -> pa.Schema:
    """Columns of every compact row kind (Spark types only: no unsigned, no dictionaries)."""
    frame = frame_schema()  # raw frames carry the capture's frame columns as they are
    return pa.schema(
        [
            ("kind", pa.string()),
            frame.field("capture"),
            frame.field("connection_id"),
            ("split_index", pa.int32()),
            # raw frames
            *(frame.field(name) for name in ("direction", "sequence", "ts_first_ns", "ts_last_ns", "size", "payload")),
            # usage
            ("client_id", pa.string()),
            ("api_key", pa.int16()),
            ("api_version", pa.int16()),
            ("client_software_name", pa.string()),
            ("client_software_version", pa.string()),
            ("requests", pa.int64()),
            ("deprecated_requests", pa.int64()),
            ("removed_in_4x_requests", pa.int64()),
            ("error_responses", pa.int64()),
            ("first_ns", pa.int64()),
            ("last_ns", pa.int64()),
            # topic
            ("topic", pa.string()),
            ("topic_id", pa.string()),
            ("partition", pa.int32()),
            ("compression", pa.string()),
            ("messages", pa.int64()),
            ("batches", pa.int64()),
            ("records", pa.int64()),
            ("bytes", pa.int64()),
            ("records_errors", pa.int64()),
            # connection and capture accounting: JSON objects of counters
            ("info", pa.string()),
        ]
    )


PARTS_SCHEMA = parts_schema()


def frames_schema() -> pa.Schema:
    """The ``frames`` table."""
    return pa.schema(
        [
            ("capture", pa.string()),
            ("connection_id", pa.int64()),
            ("direction", pa.int8()),
            ("sequence", pa.int64()),
            ("ts_first_ns", pa.int64()),
            ("ts_last_ns", pa.int64()),
            ("size", pa.int32()),
            ("header_version", pa.int8()),
            ("api_key", pa.int16()),
            ("api_version", pa.int16()),
            ("correlation_id", pa.int32()),
            ("client_id", pa.string()),
            ("header_tag_count", pa.int32()),
            ("status", pa.int16()),
            ("status_name", pa.string()),
            ("error_offset", pa.int32()),
            ("deprecated", pa.bool_()),
            ("removed_in_4x", pa.bool_()),
            ("body", pa.string()),
        ]
    )


FRAMES_SCHEMA = frames_schema()
EXCHANGES_SCHEMA = E.exchanges_schema()
RAW_COLUMNS = (
    "capture",
    "connection_id",
    "direction",
    "sequence",
    "ts_first_ns",
    "ts_last_ns",
    "size",
    "payload",
    "split_index",
)


def as_parts(kind: str, columns: dict[str, Any], rows: int) -> pa.RecordBatch:
    """One batch of ``kind`` rows in :data:`PARTS_SCHEMA`; absent columns are null."""
    return conform(PARTS_SCHEMA, dict(columns, kind=pa.array([kind] * rows, pa.string())), rows)


def conform(schema: pa.Schema, columns: dict[str, Any], rows: int) -> pa.RecordBatch:
    arrays = []
    for field_ in schema:
        value = columns.get(field_.name)
        if value is None:
            arrays.append(pa.nulls(rows, field_.type))
            continue
        if isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        if not isinstance(value, pa.Array):
            value = pa.array(value)
        if pa.types.is_dictionary(value.type):
            value = value.cast(value.type.value_type)
        if value.type != field_.type:
            value = value.cast(field_.type)
        arrays.append(value)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# ---------------------------------------------------------------- where the tables go
class Sink:
    """Receives the ``frames`` and ``exchanges`` rows of one task (a list of tables per name)."""

    def __init__(self) -> None:
        self.tables: dict[str, list[pa.Table]] = {"frames": [], "exchanges": []}

    def add(self, name: str, table: pa.Table) -> None:
        if table.num_rows:
            self.tables[name].append(table)

    def table(self, name: str) -> pa.Table:
        schema = FRAMES_SCHEMA if name == "frames" else EXCHANGES_SCHEMA
        return pa.concat_tables(self.tables[name]) if self.tables[name] else schema.empty_table()

    def close(self) -> None:
        """Nothing to flush: the tables stay in memory (tests, scripts)."""


class ParquetSink(Sink):
    """Writes each table to one Parquet file ``<out>/<name>/part-<part>.parquet``, each add as it
    comes (its own row groups), so a task holds no more than what it decodes at once.

    The file is written under a hidden name and renamed when the sink is closed, so a
    task that fails leaves nothing Spark would read, and a retried task replaces its own file.
    """

    def __init__(self, out: str, part: str) -> None:
        super().__init__()
        self.out = out.rstrip("/")
        self.part = part
        self.writers: dict[str, Any] = {}

    def add(self, name: str, table: pa.Table) -> None:
        if not table.num_rows:
            return
        writer = self.writers.get(name)
        if writer is None:
            filesystem, base = output_filesystem(self.out)
            writer = pq.ParquetWriter(
                f"{base}/{name}/.part-{self.part}.parquet.tmp", table.schema, filesystem=filesystem
            )
            self.writers[name] = writer
        writer.write_table(table, row_group_size=256 * 1024)

    def close(self) -> None:
        filesystem, base = output_filesystem(self.out)
        for name, writer in self.writers.items():
            writer.close()
            filesystem.move(f"{base}/{name}/.part-{self.part}.parquet.tmp", f"{base}/{name}/part-{self.part}.parquet")
        self.writers = {}


def output_filesystem(out: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) for a local path or a URI."""
    local = local_path(out)
    if local is not None:
        return fs.LocalFileSystem(), os.path.abspath(local)
    return fs.FileSystem.from_uri(out)


# ---------------------------------------------------------------- reading a split
#: Bytes fed to a reader up to which a decoded split's frames come out in one batch.
ONE_BATCH_BYTES = 1 << 30


def one_batch_bytes(fed_bytes: int | None) -> int | None:
    """The batch size that gives a split decoded in its task its frames in one batch per piece
    fed (a whole local file: one; a set: one per file), which decoding reads in place or joins
    once, where batches of 64 MiB were joined into a copy of them all; None (the reader's
    default) for raw splits and inputs over ONE_BATCH_BYTES."""
    return fed_bytes + 1 if fed_bytes is not None and fed_bytes <= ONE_BATCH_BYTES else None


def capture_reader(
    source: Any,
    name: str,
    broker_ports: tuple[int, ...],
    batch_bytes: int | None = None,
    kafka_ports: tuple[int, ...] = (),
):
    """A reader of ``source`` whose batches hold under ``batch_bytes`` of payloads (None: the reader's default);
    ``kafka_ports``: ports read as Kafka whatever they carry (``--port``)."""
    batching: dict[str, Any] = {}
    if batch_bytes is not None:
        # Every frame takes at least its 4-byte size prefix: batches are cut by bytes, not by count.
        batching = {"batch_bytes": batch_bytes, "batch_frames": batch_bytes // 4 + 1}
    return CaptureReader(
        source, name=name, broker_ports=broker_ports, kafka_ports=kafka_ports, on_error="keep", **batching
    )


def frames_of(batches: list[pa.RecordBatch]) -> pa.Table:
    """The frame batches a reader gave, as one table (one chunk); ``batches`` is emptied, so the
    reader's buffers are freed once they are joined (in place when there is one batch)."""
    frames = pa.Table.from_batches(batches, schema=frame_schema()).combine_chunks()
    batches.clear()
    return frames


class InputError(Exception):
    """An input that could not be read completely, under ``fail_fast``: names the file, offset and reason."""


def error_entry(category: str, offset: int, reason: str, unread_bytes: int) -> dict:
    """One entry of a split's ``errors`` list (the ``errors`` table's row, without the capture)."""
    return {"category": category, "offset": int(offset), "reason": reason, "unread_bytes": int(unread_bytes)}


def read_batches(batches: Iterator[pa.RecordBatch]) -> tuple[list[pa.RecordBatch], BaseException | None]:
    """Every batch an iterator gives until it ends or fails: the batches read stay, the failure is returned."""
    kept: list[pa.RecordBatch] = []
    try:
        for batch in batches:
            kept.append(batch)
    except Exception as exc:  # an input problem or a bug: reported in the errors table, never lost in silence
        return kept, exc
    return kept, None


def _file_offset(split: Split, stream_offset: int) -> int:
    """Where a byte of what a split's reader was fed lies in the file (ranges: a pcap header, then the range)."""
    if split.split_count == 1 or stream_offset < PCAP_HEADER_SIZE:
        return stream_offset
    return split.context_start + stream_offset - PCAP_HEADER_SIZE


def capture_errors(split: Split, reader: Any, counters: dict, failure: BaseException | None) -> list[dict]:
    """The errors a capture split found: where reading stopped (and why), an incomplete last record.

    ``counters`` are the split's own share (see range_pipeline.process_range). A range reports an error
    its neighbour owns only when bytes of its own share went unread because of it.
    """
    errors = []
    if failure is not None:
        # Where the reader had got to; everything of the share from there on is unread.
        offset = _file_offset(split, reader.counters["file_bytes"])
        errors.append(
            error_entry("read_failed", offset, f"{type(failure).__name__}: {failure}", counters["unread_bytes"])
        )
        return errors
    stopped = reader.error
    if stopped is not None:
        offset = _file_offset(split, stopped.offset)
        owned = split.start <= offset < split.end or split.split_count == 1
        if owned or counters["unread_bytes"]:
            errors.append(error_entry(stopped.category, offset, stopped.reason, counters["unread_bytes"]))
    if counters["trailing_bytes"]:
        offset = split.end - counters["trailing_bytes"]
        errors.append(
            error_entry(
                "truncated_record",
                offset,
                f"incomplete record: {counters['trailing_bytes']} bytes at the end of the file",
                counters["trailing_bytes"],
            )
        )
    return errors


def _accounting_rows(split: Split, counters: dict, connections: pa.Table) -> list[pa.RecordBatch]:
    info = dict(
        counters,
        split_index=split.split_index,
        split_count=split.split_count,
        format=split.format,
        file=shown_path(split.path),
    )
    return [capture_row(split, info)] + connection_rows(split, connections)


def capture_row(split: Split, info: dict) -> pa.RecordBatch:
    """The ``capture`` compact row of one file's (or range's) accounting ``info``."""
    return as_parts(
        "capture",
        {"capture": [split.capture], "split_index": [split.split_index], "info": [json.dumps(info, sort_keys=True)]},
        1,
    )


def connection_rows(split: Split, connections: pa.Table) -> list[pa.RecordBatch]:
    """The ``connection`` compact rows of the connections a reader saw (none: no row)."""
    if not connections.num_rows:
        return []
    records = connections.to_pylist()
    return [
        as_parts(
            "connection",
            {
                "capture": [split.capture] * len(records),
                "connection_id": [r["connection_id"] for r in records],
                "split_index": [split.split_index] * len(records),
                "info": [json.dumps(r, sort_keys=True) for r in records],
            },
            len(records),
        )
    ]


def count_unreached(counters: dict) -> None:
    """After a reader failed: the input bytes it never reached are unread (the byte identity holds again)."""
    reached = counters["file_bytes"] + counters["trailing_bytes"] + counters["unread_bytes"]
    counters["unread_bytes"] += max(0, counters["input_bytes"] - reached)


def checked_accounting(split: Split, counters: dict, connections: pa.Table, fail_fast: bool) -> list[pa.RecordBatch]:
    """The accounting rows, after raising :class:`InputError` on the first error under ``fail_fast``."""
    if fail_fast and counters["errors"]:
        first = counters["errors"][0]
        raise InputError(f"{split.capture}: byte offset {first['offset']}: {first['reason']} ({first['category']})")
    return _accounting_rows(split, counters, connections)


def raw_rows(batch: pa.RecordBatch, split: Split) -> pa.RecordBatch:
    columns: dict[str, Any] = {name: batch[name] for name in RAW_COLUMNS if name != "split_index"}
    columns["split_index"] = pa.array(np.full(batch.num_rows, split.split_index, np.int32))
    return as_parts("raw", columns, batch.num_rows)


def connection_hash(client_ip: str, client_port: int, server_ip: str, server_port: int) -> int:
    """A stable, non-negative 63-bit id for a connection's addresses (same in every process)."""
    digest = hashlib.blake2b(f"{client_ip}|{client_port}|{server_ip}|{server_port}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") >> 1


def global_connection_ids(connections: pa.Table) -> np.ndarray:
    """Local connection id -> address hash, as a lookup array."""
    rows = connections.select(["connection_id", "client_ip", "client_port", "server_ip", "server_port"]).to_pylist()
    size = max((r["connection_id"] for r in rows), default=-1) + 1
    ids = np.zeros(size, np.int64)
    for r in rows:
        ids[r["connection_id"]] = connection_hash(r["client_ip"], r["client_port"], r["server_ip"], r["server_port"])
    return ids

"""What runs inside Spark's Python workers: captures in, tables and compact rows out.

Nothing here imports pyspark: every function takes and returns pyarrow objects,
so the same code runs in a Spark task, in a test, or in a plain script.

The pipeline (see docs/analyze.md):

1. ``planning.plan_file`` (kproto/analyze/spark/planning.py) cuts each input file into
   *splits*: byte ranges of a large pcap, else the whole file.
2. ``task.process_split`` (kproto/analyze/spark/task.py) reads one split, decodes and pairs
   its frames (:func:`decode_frames_table`; a range of a pcap in bounded batches,
   kproto/analyze/spark/range_pipeline.py; a capture set, kproto/analyze/spark/set_reader.py) and
   hands the ``frames`` and ``exchanges`` rows it owns to a :class:`Sink`
   (:class:`ParquetSink` in Spark tasks). A big file that cannot be cut is emitted
   as ``raw`` frames instead, which Spark groups by connection before
   :func:`decode_raw_batches` does the same.
3. What goes back to Spark are compact rows in :data:`PARTS_SCHEMA`
   (:func:`summarize`): per-capture counts, usage per connection / client /
   API version, per topic-partition sums, and the accounting; kproto/analyze/spark/combine.py
   makes the small tables of them (in the driver, or per key in Spark's partitions).

This module is the bottom of the worker side: task.py and the readers import it, it
imports none of them (tests/analyze/test_spark_structure.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs

import kproto.arrow.frames as kb
from kproto import versions as kv
from kproto._common.api_keys import CLIENT_SOFTWARE_FIRST_VERSION, ApiKey
from kproto.arrow import exchanges as E
from kproto.arrow.frames import one_array
from kproto.arrow.capture import CaptureReader, frame_schema, not_captured
from kproto.arrow.credentials import redact_bodies
from kproto.analyze.spark.planning import PCAP_HEADER_SIZE, Split, local_path, shown_path

API_VERSIONS = int(ApiKey.API_VERSIONS)


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
    frame = frame_schema()        # raw frames carry the capture's frame columns as they are
    return pa.schema([
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
    ])


PARTS_SCHEMA = parts_schema()


def frames_schema() -> pa.Schema:
    """The ``frames`` table."""
    return pa.schema([
        ("capture", pa.string()), ("connection_id", pa.int64()), ("direction", pa.int8()),
        ("sequence", pa.int64()), ("ts_first_ns", pa.int64()), ("ts_last_ns", pa.int64()), ("size", pa.int32()),
        ("header_version", pa.int8()), ("api_key", pa.int16()), ("api_version", pa.int16()),
        ("correlation_id", pa.int32()), ("client_id", pa.string()), ("header_tag_count", pa.int32()),
        ("status", pa.int16()), ("status_name", pa.string()), ("error_offset", pa.int32()),
        ("deprecated", pa.bool_()), ("removed_in_4x", pa.bool_()), ("body", pa.string()),
    ])


FRAMES_SCHEMA = frames_schema()
EXCHANGES_SCHEMA = E.exchanges_schema()
RAW_COLUMNS = ("capture", "connection_id", "direction", "sequence", "ts_first_ns", "ts_last_ns", "size",
               "payload", "split_index")


def as_parts(kind: str, columns: dict[str, Any], rows: int) -> pa.RecordBatch:
    """One batch of ``kind`` rows in :data:`PARTS_SCHEMA`; absent columns are null."""
    return _conform(PARTS_SCHEMA, dict(columns, kind=pa.array([kind] * rows, pa.string())), rows)


def _conform(schema: pa.Schema, columns: dict[str, Any], rows: int) -> pa.RecordBatch:
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
            writer = pq.ParquetWriter(f"{base}/{name}/.part-{self.part}.parquet.tmp", table.schema,
                                      filesystem=filesystem)
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


def capture_reader(source: Any, name: str, broker_ports: tuple[int, ...], batch_bytes: int | None = None,
                    kafka_ports: tuple[int, ...] = ()):
    """A reader of ``source`` whose batches hold under ``batch_bytes`` of payloads (None: the reader's default);
    ``kafka_ports``: ports read as Kafka whatever they carry (``--port``)."""
    batching: dict[str, Any] = {}
    if batch_bytes is not None:
        # Every frame takes at least its 4-byte size prefix: batches are cut by bytes, not by count.
        batching = {"batch_bytes": batch_bytes, "batch_frames": batch_bytes // 4 + 1}
    return CaptureReader(source, name=name, broker_ports=broker_ports, kafka_ports=kafka_ports, on_error="keep",
                         **batching)


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
    except Exception as exc:   # an input problem or a bug: reported in the errors table, never lost in silence
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
        errors.append(error_entry("read_failed", offset, f"{type(failure).__name__}: {failure}",
                             counters["unread_bytes"]))
        return errors
    stopped = reader.error
    if stopped is not None:
        offset = _file_offset(split, stopped.offset)
        owned = split.start <= offset < split.end or split.split_count == 1
        if owned or counters["unread_bytes"]:
            errors.append(error_entry(stopped.category, offset, stopped.reason, counters["unread_bytes"]))
    if counters["trailing_bytes"]:
        offset = split.end - counters["trailing_bytes"]
        errors.append(error_entry("truncated_record", offset, f"incomplete record: {counters['trailing_bytes']} bytes "
                             "at the end of the file", counters["trailing_bytes"]))
    return errors


def _accounting_rows(split: Split, counters: dict, connections: pa.Table) -> list[pa.RecordBatch]:
    info = dict(counters, split_index=split.split_index, split_count=split.split_count, format=split.format,
                file=shown_path(split.path))
    return [capture_row(split, info)] + connection_rows(split, connections)


def capture_row(split: Split, info: dict) -> pa.RecordBatch:
    """The ``capture`` compact row of one file's (or range's) accounting ``info``."""
    return as_parts("capture", {"capture": [split.capture], "split_index": [split.split_index],
                                "info": [json.dumps(info, sort_keys=True)]}, 1)


def connection_rows(split: Split, connections: pa.Table) -> list[pa.RecordBatch]:
    """The ``connection`` compact rows of the connections a reader saw (none: no row)."""
    if not connections.num_rows:
        return []
    records = connections.to_pylist()
    return [as_parts("connection", {
        "capture": [split.capture] * len(records),
        "connection_id": [r["connection_id"] for r in records],
        "split_index": [split.split_index] * len(records),
        "info": [json.dumps(r, sort_keys=True) for r in records],
    }, len(records))]


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


# ---------------------------------------------------------------- decoding and pairing
def _error_codes(bodies: pa.Array) -> pa.Array:
    """The first non-zero error code anywhere in each JSON body; 0 when all are zero; null without one."""
    pattern = r'"error_code":(?P<code>-?[1-9][0-9]*)'
    matched = pc.fill_null(pc.match_substring_regex(bodies, pattern), False)
    text = pc.extract_regex(pc.if_else(matched, bodies, '"error_code":1'), pattern).field("code")
    first = pc.if_else(matched, text.cast(pa.int16()), pa.scalar(None, pa.int16()))
    has_any = pc.match_substring(bodies, '"error_code":')
    zero = pc.if_else(has_any, pa.scalar(0, pa.int16()), pa.scalar(None, pa.int16()))
    return pc.coalesce(first, zero)


def _software(api_key: np.ndarray, api_version: np.ndarray, status: np.ndarray,
              bodies: pa.Array | None) -> tuple[pa.Array, pa.Array, pa.Array]:
    """ClientSoftwareName / Version of ApiVersions v3+ requests, and what is wrong with them.

    Per frame: its header's API and version, its status and its body (only the few
    ApiVersions ones are read, none copied)."""
    m = len(api_key)
    names: list[str | None] = [None] * m
    versions: list[str | None] = [None] * m
    problems: list[str | None] = [None] * m
    if bodies is not None:
        candidates = np.flatnonzero((api_key == API_VERSIONS) & (api_version >= CLIENT_SOFTWARE_FIRST_VERSION)
                                      & (status == 0))
        for i in candidates.tolist():
            body = bodies[i].as_py()
            if body is None:
                continue
            fields = json.loads(body)
            name, soft_version = fields.get("client_software_name"), fields.get("client_software_version")
            names[i], versions[i] = name, soft_version
            found = kv.client_software_problems(name, soft_version)
            problems[i] = "; ".join(found) if found else None
    return pa.array(names, pa.string()), pa.array(versions, pa.string()), pa.array(problems, pa.string())


@dataclass
class Decoded:
    """The decoded rows of a set of whole connections, and the frame each partition and topic-name row comes from."""

    frames: pa.Table              # FRAMES_SCHEMA, one row per input frame
    exchanges: pa.Table           # EXCHANGES_SCHEMA
    partitions: pa.Table          # Produce requests and Fetch responses per topic-partition
    partition_frame: np.ndarray   # row of each partition's frame
    topic_names: pa.Table         # topic IDs and the names responses give them (topic_id, topic)
    topic_name_frame: np.ndarray  # row of each name's frame


@dataclass
class ChunkRows:
    """The decoded rows of some of the frames (all of them, or a range's chunk), rows counted from its first."""

    frames: pa.Table              # FRAMES_SCHEMA
    facts: pa.Table               # per frame, what its exchange takes from the decoded frame (see decode_chunk)
    partitions: pa.Table          # Produce requests and Fetch responses per topic-partition (every frame's)
    partition_frame: np.ndarray
    topic_names: pa.Table         # topic IDs and the names responses give them (topic_id, topic)
    topic_name_frame: np.ndarray


def decode_chunk(frames: pa.Table, keys: np.ndarray, versions: np.ndarray, key_of: np.ndarray,
                 version_of: np.ndarray, unanswered: np.ndarray, *, body: str | None,
                 records: str, show_credentials: bool = False) -> ChunkRows:
    """Decode frames once, responses with their request's API and version (``key_of`` / ``version_of``,
    from the pairing); ``keys`` / ``versions``: the header pass's; ``unanswered``: see E.unanswered_produce."""
    frames = frames.combine_chunks()
    n = frames.num_rows
    payload = one_array(frames["payload"])
    directions = frames["direction"].fill_null(0).to_numpy().astype(np.int8)
    # client ids as text: the tables hold strings, and a dictionary's table costs more with more ids
    decoded = kb.decode_frames(payload, directions=directions, request_api_keys=key_of,
                               request_api_versions=version_of, body=body, records=records, client_ids="string")
    # a frame the capture did not hold all of reads as cut short: say why instead
    decoded_status = not_captured(frames, decoded["status"])
    status = decoded_status.to_numpy(zero_copy_only=False)
    frame_columns: dict[str, Any] = {name: frames[name] for name in (
        "capture", "connection_id", "direction", "sequence", "ts_first_ns", "ts_last_ns", "size")}
    frame_columns.update({name: decoded[name] for name in (
        "header_version", "api_key", "api_version", "correlation_id", "client_id", "header_tag_count",
        "error_offset", "deprecated", "removed_in_4x")})
    frame_columns["status"] = decoded_status
    frame_columns["status_name"] = E.status_names(decoded_status, kb.Status)
    bodies = decoded["body"] if body == "json" else None
    if bodies is not None and not show_credentials:
        bodies = redact_bodies(decoded["api_key"], bodies)
    if bodies is not None:
        frame_columns["body"] = bodies
    frame_table = pa.Table.from_batches([_conform(FRAMES_SCHEMA, frame_columns, n)])

    # What an exchange takes from its frames: the error code of a response's body, the client
    # software of an ApiVersions request, whether an unanswered Produce asked for no response.
    responses = np.flatnonzero(directions == kb.RESPONSE)
    error_code = pa.nulls(n, pa.int16())
    if bodies is not None and len(responses):
        index = np.full(n, -1, np.int64)
        index[responses] = np.arange(len(responses))
        error_code = _error_codes(bodies.take(pa.array(responses))).take(pa.array(index, mask=index < 0))
    names, soft_versions, problems = _software(keys, versions, status, bodies)
    facts = pa.table({"status": decoded_status, "client_id": decoded["client_id"],
                      "deprecated": decoded["deprecated"], "removed_in_4x": decoded["removed_in_4x"],
                      "error_code": error_code, "client_software_name": names,
                      "client_software_version": soft_versions, "software_problems": problems,
                      "acks_zero": pa.array(E.acks_zero_frames(payload, unanswered))})

    # Produce requests and Fetch responses, per topic-partition (record batch headers only).
    parts = kb.partitions(payload, directions=directions, request_api_keys=key_of, request_api_versions=version_of)
    partition_frame = parts["frame"].to_numpy().astype(np.int64) if parts.num_rows else np.zeros(0, np.int64)

    # Topic IDs and names from the responses that carry both (Metadata v10+, CreateTopics v7+ ...):
    # only those responses are decoded again, as message objects.
    naming = kb.topic_naming_versions()
    candidates = np.flatnonzero((directions == kb.RESPONSE) & (status == kb.Status.OK)
                                & np.isin(key_of, sorted(naming))) if n else np.zeros(0, np.int64)
    names_table = kb.topic_names(payload.take(pa.array(candidates, pa.int64())), directions=kb.RESPONSE,
                                 request_api_keys=key_of[candidates], request_api_versions=version_of[candidates])
    name_frame = candidates[names_table["frame"].to_numpy().astype(np.int64)] if names_table.num_rows \
        else np.zeros(0, np.int64)
    return ChunkRows(frame_table, facts, parts, partition_frame, names_table.drop_columns(["frame"]), name_frame)


def decode_frames_table(frames: pa.Table, *, body: str | None = "json", records: str = "summary",
                        show_credentials: bool = False) -> Decoded:
    """Decode and pair a table of capture frames (whole connections).

    ``frames`` has the kproto.arrow.capture frame columns. Requests and responses
    pair by (capture, connection, correlation id), the n-th request with an id
    to the n-th response with it, in sequence order (as ``kproto.arrow.exchanges.pair``);
    every frame is decoded once with its request's API and version. ``records``:
    how JSON bodies show record sets ("summary" of the batch headers, or "base64").
    (A range of a pcap, whose rows some other range owns, goes through kproto.analyze.spark.range_pipeline.)
    """
    frames = frames.combine_chunks()
    payload = one_array(frames["payload"])
    directions = frames["direction"].fill_null(0).to_numpy().astype(np.int8)
    # 1. Headers only: API, version and correlation id of requests, correlation id of responses.
    heads = E.frame_heads(frames, kb.decode_frames(payload, directions=directions, client_ids="string"))
    pairing = E.pair_heads(heads)
    # 2. Every frame decoded once, responses with their request's API and version; 3. the exchanges.
    rows = decode_chunk(frames, heads.keys, heads.versions, pairing.key_of, pairing.version_of,
                        E.unanswered_produce(heads, pairing), body=body, records=records,
                        show_credentials=show_credentials)
    exchanges = E.exchanges_table(heads, pairing, rows.facts, rows.partitions, rows.partition_frame,
                                  rows.topic_names)
    return Decoded(rows.frames, exchanges, rows.partitions, rows.partition_frame, rows.topic_names,
                   rows.topic_name_frame)


def decode_and_summarize(frames: pa.Table, *, body: str | None, sink: Sink,
                         records: str = "summary", show_credentials: bool = False) -> Iterator[pa.RecordBatch]:
    """Decode and pair ``frames``; its frames and exchanges go to ``sink``; yield compact rows."""
    if frames.num_rows == 0:
        return
    ts_first = frames["ts_first_ns"]
    decoded = decode_frames_table(frames, body=body, records=records, show_credentials=show_credentials)
    del frames      # the payloads, the largest buffer of a task: free before the tables are written
    frame_table, exchanges, partitions = decoded.frames, decoded.exchanges, decoded.partitions
    partition_ts = ts_first.take(pa.array(decoded.partition_frame))
    names = decoded.topic_names.append_column("ts_first_ns", ts_first.take(pa.array(decoded.topic_name_frame)))
    sink.add("frames", frame_table)
    sink.add("exchanges", exchanges)
    yield from summarize(frame_table, exchanges, partitions.append_column("ts_first_ns", partition_ts), names)


def summarize(frames: pa.Table, exchanges: pa.Table, partitions: pa.Table,
              topic_names: pa.Table | None = None) -> Iterator[pa.RecordBatch]:
    """The compact rows Spark combines: counts per capture, usage per client and API, topics,
    and the topic IDs responses named (``topic_names``: kproto.arrow.frames.topic_names' rows with ts_first_ns)."""
    # Frame and exchange counts per capture (the summary's accounting).
    status = frames["status"]
    direction = frames["direction"]
    counted = pa.table({
        "capture": frames["capture"],
        "frames": pa.array(np.ones(frames.num_rows, np.int64)),
        "request_frames": pc.equal(direction, 0).cast(pa.int64()),
        "response_frames": pc.equal(direction, 1).cast(pa.int64()),
        "frame_bytes": pc.add(frames["size"].cast(pa.int64()), 4),
        "frames_ok": pc.equal(status, 0).cast(pa.int64()),
        "frames_undecodable": pc.not_equal(status, 0).cast(pa.int64()),
        "first_ts_ns": frames["ts_first_ns"], "last_ts_ns": frames["ts_last_ns"],
    }).group_by("capture").aggregate([(name, "sum") for name in (
        "frames", "request_frames", "response_frames", "frame_bytes", "frames_ok", "frames_undecodable")]
        + [("first_ts_ns", "min"), ("last_ts_ns", "max")])
    pairs = pa.table({"capture": exchanges["capture"], "status": exchanges["pair_status_name"]}) \
        .group_by(["capture", "status"]).aggregate([([], "count_all")])
    per_capture: dict[str, dict[str, Any]] = {}
    for row in counted.to_pylist():
        capture = row.pop("capture")
        per_capture[capture] = {name.rsplit("_", 1)[0] if name.endswith(("_sum", "_min", "_max"))
                                           else name: value for name, value in row.items()}
    for row in pairs.to_pylist():
        per_capture.setdefault(row["capture"], {})[PAIR_COUNTS[row["status"]]] = row["count_all"]
    if per_capture:
        captures = sorted(per_capture)
        yield as_parts("counts", {"capture": captures,
                                  "info": [json.dumps(per_capture[c], sort_keys=True) for c in captures]},
                       len(captures))

    # Requests per connection, client, API version and client software.
    requests = exchanges.filter(exchanges["request_sequence"].is_valid())
    if requests.num_rows:
        keys = ["capture", "connection_id", "client_id", "api_key", "api_version", "client_software_name",
                "client_software_version"]
        usage = pa.table({
            **{name: requests[name] for name in keys},
            "deprecated": requests["deprecated"].cast(pa.int64()),
            "removed": requests["removed_in_4x"].cast(pa.int64()),
            "errors": pc.fill_null(pc.not_equal(requests["error_code"], 0), False).cast(pa.int64()),
            "ts": requests["request_ts_ns"],
        }).group_by(keys).aggregate([([], "count_all"), ("deprecated", "sum"), ("removed", "sum"),
                                     ("errors", "sum"), ("ts", "min"), ("ts", "max")])
        yield as_parts("usage", {
            **{name: usage[name] for name in keys}, "requests": usage["count_all"],
            "deprecated_requests": usage["deprecated_sum"], "removed_in_4x_requests": usage["removed_sum"],
            "error_responses": usage["errors_sum"], "first_ns": usage["ts_min"], "last_ns": usage["ts_max"],
        }, usage.num_rows)

    # Produce requests and Fetch responses per topic-partition.
    if partitions.num_rows:
        keys = ["topic", "topic_id", "partition", "api_key", "compression"]
        topics = pa.table({
            **{name: partitions[name] for name in keys},
            "bytes": partitions["bytes"].cast(pa.int64()), "records": partitions["record_count"].cast(pa.int64()),
            "batches": partitions["batch_count"].cast(pa.int64()),
            "errors": partitions["records_error"].is_valid().cast(pa.int64()), "ts": partitions["ts_first_ns"],
        }).group_by(keys).aggregate([([], "count_all"), ("bytes", "sum"), ("records", "sum"),
                                     ("batches", "sum"), ("errors", "sum"), ("ts", "min"), ("ts", "max")])
        yield as_parts("topic", {
            **{name: topics[name] for name in keys}, "messages": topics["count_all"],
            "bytes": topics["bytes_sum"], "records": topics["records_sum"], "batches": topics["batches_sum"],
            "records_errors": topics["errors_sum"], "first_ns": topics["ts_min"], "last_ns": topics["ts_max"],
        }, topics.num_rows)

    # Topic IDs and their names, from every response that carries both (combined over the run).
    if topic_names is not None and topic_names.num_rows:
        named = topic_names.group_by(["topic_id", "topic"]).aggregate(
            [([], "count_all"), ("ts_first_ns", "min"), ("ts_first_ns", "max")])
        yield as_parts("topic_name", {
            "topic_id": named["topic_id"], "topic": named["topic"], "messages": named["count_all"],
            "first_ns": named["ts_first_ns_min"], "last_ns": named["ts_first_ns_max"],
        }, named.num_rows)


PAIR_COUNTS = {"PAIRED": "exchanges_paired", "NO_RESPONSE_EXPECTED": "no_response_expected",
               "UNPAIRED_REQUEST": "unpaired_requests", "UNPAIRED_RESPONSE": "unpaired_responses"}


def decode_raw_batches(batches: Iterable[pa.RecordBatch], *, body: str | None = "json", records: str = "summary",
                       sink: Sink | None = None, show_credentials: bool = False) -> Iterator[pa.RecordBatch]:
    """The grouping step: raw frames of whole connections (any order) to compact rows; tables to ``sink``."""
    tables = [pa.Table.from_batches([b]).select(list(RAW_COLUMNS)) for b in batches if b.num_rows]
    if not tables:
        return
    raw = pa.concat_tables(tables).combine_chunks()
    tables.clear()
    raw = raw.sort_by([("capture", "ascending"), ("connection_id", "ascending"), ("direction", "ascending"),
                       ("sequence", "ascending")])
    frames = raw.select([f.name for f in frame_schema()]).cast(frame_schema())
    rows = decode_and_summarize(frames, body=body, sink=sink if sink is not None else Sink(), records=records,
                                show_credentials=show_credentials)
    del raw, frames     # the generator holds the frames alone, and lets their payloads go once decoded
    yield from rows

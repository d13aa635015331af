"""What runs inside Spark's Python workers: captures in, tables and compact rows out.

Nothing here imports pyspark: every function takes and returns pyarrow objects,
so the same code runs in a Spark task, in a test, or in a plain script.

The pipeline (see docs/analyze.md):

1. :func:`plan_file` looks at one input file and cuts it into *splits*. A pcap
   larger than ``split_bytes`` is cut at record boundaries (found by
   :func:`find_record_boundary`); each split owns the frames whose first byte
   was captured in ``[ts_lo, ts_hi)`` and is read with some context before and
   overlap after. Other files make one split.
2. :func:`process_split` reads one split, decodes and pairs its frames
   (:func:`decode_frames_table`) and hands the ``frames`` and ``exchanges`` rows
   it owns to a :class:`Sink` (:class:`ParquetSink` in Spark tasks). A big
   file that cannot be cut is emitted as ``raw`` frames instead, which Spark
   groups by connection before :func:`decode_raw_batches` does the same.
3. What goes back to Spark are compact rows in :data:`PARTS_SCHEMA`
   (:func:`summarize`): per-capture counts, usage per connection / client /
   API version, per topic-partition sums, and the accounting.
"""

from __future__ import annotations

import hashlib
import io
import json
import mmap
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kproto.batch import occurrence_rank

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

DEFAULT_SPLIT_BYTES = 256 * 1024 * 1024
DEFAULT_OVERLAP_BYTES = 32 * 1024 * 1024

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", False), b"\xa1\xb2\xc3\xd4": (">", False),
    b"\x4d\x3c\xb2\xa1": ("<", True), b"\xa1\xb2\x3c\x4d": (">", True),
}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
PCAP_HEADER_SIZE = 24
PCAP_RECORD_HEADER = 16
_MAX_RECORD = 256 * 1024        # a plausible captured packet, for boundary search
_BOUNDARY_CHAIN = 8             # consecutive valid record headers that make a boundary
_BOUNDARY_SEARCH = 4 * 1024 * 1024

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35


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
    return pa.schema([
        ("kind", pa.string()),
        ("capture", pa.string()),
        ("connection_id", pa.int64()),
        ("split_index", pa.int32()),
        # raw frames
        ("direction", pa.int8()),
        ("sequence", pa.int64()),
        ("ts_first_ns", pa.int64()),
        ("ts_last_ns", pa.int64()),
        ("size", pa.int32()),
        ("payload", pa.binary()),
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


def exchanges_schema() -> pa.Schema:
    """The ``exchanges`` table."""
    return pa.schema([
        ("capture", pa.string()), ("connection_id", pa.int64()), ("correlation_id", pa.int32()),
        ("api_key", pa.int16()), ("api_version", pa.int16()), ("client_id", pa.string()),
        ("pair_status", pa.int16()), ("pair_status_name", pa.string()),
        ("request_sequence", pa.int64()), ("response_sequence", pa.int64()),
        ("request_ts_ns", pa.int64()), ("response_ts_ns", pa.int64()), ("latency_ns", pa.int64()),
        ("request_status", pa.int16()), ("response_status", pa.int16()),
        ("request_size", pa.int32()), ("response_size", pa.int32()),
        ("error_code", pa.int16()), ("error_name", pa.string()),
        ("deprecated", pa.bool_()), ("removed_in_4x", pa.bool_()),
        ("client_software_name", pa.string()), ("client_software_version", pa.string()),
        ("software_problems", pa.string()),
        # Produce / Fetch: the one topic the request and response address, as the frames name it.
        ("topic", pa.string()), ("topic_id", pa.string()),
    ])


FRAMES_SCHEMA = frames_schema()
EXCHANGES_SCHEMA = exchanges_schema()
FRAME_COLUMNS = tuple(FRAMES_SCHEMA.names)
EXCHANGE_COLUMNS = tuple(EXCHANGES_SCHEMA.names)
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
    """Writes each table as one Parquet file ``<out>/<name>/part-<part>.parquet`` when closed.

    The file is written under a hidden name and renamed, so a task that fails
    leaves nothing Spark would read, and a retried task replaces its own file.
    """

    def __init__(self, out: str, part: str) -> None:
        super().__init__()
        self.out = out.rstrip("/")
        self.part = part

    def close(self) -> None:
        import pyarrow.parquet as pq

        filesystem, base = output_filesystem(self.out)
        for name in ("frames", "exchanges"):
            if not self.tables[name]:
                continue
            final = f"{base}/{name}/part-{self.part}.parquet"
            hidden = f"{base}/{name}/.part-{self.part}.parquet.tmp"
            pq.write_table(self.table(name), hidden, filesystem=filesystem, row_group_size=256 * 1024)
            filesystem.move(hidden, final)
        self.tables = {"frames": [], "exchanges": []}


def output_filesystem(out: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) for a local path or a URI."""
    from pyarrow import fs

    local = local_path(out)
    if local is not None:
        return fs.LocalFileSystem(), os.path.abspath(local)
    return fs.FileSystem.from_uri(out)


# ---------------------------------------------------------------- inputs
@dataclass
class Split:
    """One unit of work: a whole file, or a byte range of a pcap."""

    path: str                 # a local path or a URI (file:, hdfs:, s3a: ...)
    capture: str              # the ``capture`` column's value
    format: str               # pcap, pcapng, frames
    mode: str                 # decode (whole file, or a range of a pcap) or raw (to the grouping step)
    split_index: int
    split_count: int
    start: int                # first byte of the range (records, after the pcap header)
    end: int                  # byte after the range
    ts_lo: int                # owns frames with ts_lo <= ts_first_ns < ts_hi
    ts_hi: int
    overlap: int = DEFAULT_OVERLAP_BYTES
    context_start: int = -1   # a range is read from here (a record boundary before start): context only


SPLIT_FIELDS = (("path", pa.string()), ("capture", pa.string()), ("format", pa.string()),
                ("mode", pa.string()), ("split_index", pa.int32()), ("split_count", pa.int32()),
                ("start", pa.int64()), ("end", pa.int64()), ("ts_lo", pa.int64()), ("ts_hi", pa.int64()),
                ("overlap", pa.int64()), ("context_start", pa.int64()))
SPLIT_SCHEMA = pa.schema(SPLIT_FIELDS)


def splits_to_batch(splits: list[Split]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([vars(s) for s in splits], schema=SPLIT_SCHEMA)


def splits_from_batch(batch: pa.RecordBatch) -> list[Split]:
    return [Split(**row) for row in batch.to_pylist()]


def local_path(path: str) -> str | None:
    """The local file a path or ``file:`` URI names; None for other schemes."""
    if "://" not in path and not path.startswith("file:"):
        return path
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return None


class _Source:
    """Random access to an input: a memory map of a local file, or a pyarrow filesystem file."""

    def __init__(self, path: str) -> None:
        local = local_path(path)
        self._handle = None
        self._mapped = None
        if local is not None:
            self.size = os.path.getsize(local)
            self._handle = open(local, "rb")
            if self.size:
                self._mapped = mmap.mmap(self._handle.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            from pyarrow import fs

            filesystem, inner = fs.FileSystem.from_uri(path)
            self._file = filesystem.open_input_file(inner)
            self.size = self._file.size()

    @property
    def mapped(self) -> bool:
        """A local file, memory-mapped: view() works."""
        return self._mapped is not None

    def view(self, offset: int, count: int) -> memoryview:
        """The bytes in place, a memoryview of the mapped file (mapped sources only)."""
        assert self._mapped is not None
        count = max(0, min(count, self.size - offset))
        return memoryview(self._mapped)[offset:offset + count]

    def read(self, offset: int, count: int) -> bytes:
        count = max(0, min(count, self.size - offset))
        if self._mapped is not None:
            return self._mapped[offset:offset + count]
        if self._handle is not None:
            return b""
        return self._file.read_at(count, offset)

    def close(self) -> None:
        if self._mapped is not None:
            self._mapped.close()
        if self._handle is not None:
            self._handle.close()


def detect_format(head: bytes) -> str:
    """pcap, pcapng or frames (size-prefixed frames back to back), from the first bytes."""
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    if head[:4] == PCAPNG_MAGIC:
        return "pcapng"
    return "frames"


def _pcap_record(data: bytes, pos: int, order: str, nanos: bool, snaplen: int) -> tuple[int, int] | None:
    """(timestamp ns, record length) of a plausible pcap record header at ``pos``, else None."""
    if pos + PCAP_RECORD_HEADER > len(data):
        return None
    seconds, fraction, captured, original = struct.unpack_from(order + "IIII", data, pos)
    if fraction >= (1_000_000_000 if nanos else 1_000_000):
        return None
    if captured > original or captured > max(snaplen, 65535) or captured > _MAX_RECORD or captured < 14:
        return None
    return seconds * 1_000_000_000 + fraction * (1 if nanos else 1000), PCAP_RECORD_HEADER + captured


def find_record_boundary(data: bytes, base: int, order: str, nanos: bool, snaplen: int,
                         ts_window: tuple[int, int]) -> tuple[int, int] | None:
    """The first safe split point in ``data`` (file bytes from offset ``base``).

    A safe point starts a chain of :data:`_BOUNDARY_CHAIN` plausible record headers
    with timestamps inside ``ts_window``, and its timestamp is strictly greater
    than the previous record's, so ownership by timestamp is unambiguous.
    Returns (file offset, timestamp ns) or None.
    """
    lo, hi = ts_window
    for start in range(0, max(0, len(data) - PCAP_RECORD_HEADER)):
        chain: list[tuple[int, int]] = []
        pos = start
        while len(chain) < _BOUNDARY_CHAIN + 16:
            record = _pcap_record(data, pos, order, nanos, snaplen)
            if record is None or not lo <= record[0] <= hi:
                break
            chain.append((pos, record[0]))
            pos += record[1]
        if len(chain) < _BOUNDARY_CHAIN:
            continue
        for (_, previous_ts), (pos, ts) in zip(chain, chain[1:]):
            if ts > previous_ts:
                return base + pos, ts
    return None


def plan_file(path: str, size: int, *, capture: str | None = None, split_bytes: int = DEFAULT_SPLIT_BYTES,
              overlap: int = DEFAULT_OVERLAP_BYTES) -> list[Split]:
    """The splits of one input file.

    A pcap larger than ``split_bytes`` is cut into ranges that are decoded where
    they are read: each range is read from a record boundary about ``overlap``
    bytes before its start (context: the requests whose responses it owns) to
    ``overlap`` bytes past its end (the responses to its requests). Other large
    files go whole to the grouping step (``raw``).
    """
    capture = capture or path
    try:
        source = _Source(path)
    except OSError:
        # Read by its task, which reports why it cannot be (a row of the errors table).
        return [Split(path, capture, "frames", "decode", 0, 1, 0, size, INT64_MIN, INT64_MAX, 0, 0)]
    try:
        size = source.size
        head = source.read(0, PCAP_HEADER_SIZE)
        fmt = detect_format(head)
        whole = [Split(path, capture, fmt, "decode" if size <= split_bytes else "raw", 0, 1, 0, size,
                       INT64_MIN, INT64_MAX, 0, 0)]
        if fmt != "pcap" or size <= split_bytes or len(head) < PCAP_HEADER_SIZE:
            return whole
        order, nanos = PCAP_MAGICS[head[:4]]
        snaplen = struct.unpack_from(order + "I", head, 16)[0]
        first = _pcap_record(source.read(PCAP_HEADER_SIZE, PCAP_RECORD_HEADER), 0, order, nanos, snaplen)
        if first is None:
            return whole
        # Records more than a day away from the first are not plausible neighbours.
        window = (first[0] - 86400 * 10**9, first[0] + 86400 * 10**9 * 365)

        def boundary(offset: int) -> tuple[int, int] | None:
            return find_record_boundary(source.read(offset, _BOUNDARY_SEARCH), offset, order, nanos, snaplen,
                                        window)

        points = [(PCAP_HEADER_SIZE, INT64_MIN)]
        nominal = split_bytes
        while nominal < size - split_bytes // 4:
            found = boundary(nominal)
            if found is not None and found[0] > points[-1][0]:
                points.append(found)
                nominal = found[0] + split_bytes
            else:
                nominal += split_bytes
        count = len(points)
        splits = []
        for index, (start, ts) in enumerate(points):
            context = start
            if index:
                found = boundary(max(points[index - 1][0], start - overlap))
                context = found[0] if found is not None and found[0] < start else points[index - 1][0]
            splits.append(Split(path, capture, fmt, "decode", index, count, start,
                                points[index + 1][0] if index + 1 < count else size,
                                ts, points[index + 1][1] if index + 1 < count else INT64_MAX, overlap, context))
        return splits
    finally:
        source.close()


class _RangeStream(io.RawIOBase):
    """A pcap header, then the records from ``context_start`` to ``end``, then up to ``overlap`` more bytes.

    ``on_mark(name)`` is called with "start" and "end" when the reader asks for
    bytes past the range's start and end: by then it has consumed exactly the
    bytes before (which end on a record boundary), so counters read at those
    moments delimit the range's own share.
    """

    def __init__(self, source: _Source, split: Split, on_mark: Callable[[str], None]) -> None:
        super().__init__()
        self.source = source
        self.header = source.read(0, PCAP_HEADER_SIZE)
        self.pos = split.context_start if split.context_start >= 0 else split.start
        self.marks = [(split.start, "start"), (split.end, "end")]
        self.stop = min(source.size, split.end + split.overlap)
        self.on_mark = on_mark
        self.header_sent = False

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a range of a file")

    def read(self, size: int | None = -1) -> bytes:
        if not self.header_sent:
            self.header_sent = True
            return self.header
        size = 4 * 1024 * 1024 if size is None or size < 0 else size
        while self.marks and self.pos >= self.marks[0][0]:
            self.on_mark(self.marks.pop(0)[1])
        limit = self.marks[0][0] if self.marks else self.stop
        data = self.source.read(self.pos, min(size, limit - self.pos))
        self.pos += len(data)
        return data


def _range_pieces(source: _Source, split: Split, on_mark: Callable[[str], None]) -> Iterator[Any]:
    """The bytes _RangeStream reads, as views of the mapped file (no copy), marks at the same points.

    The reader pulls a piece once it has read everything before it, and the range's
    start and end are record boundaries: marks fall exactly where the stream's do.
    """
    yield source.read(0, PCAP_HEADER_SIZE)
    pos = split.context_start if split.context_start >= 0 else split.start
    stop = min(source.size, split.end + split.overlap)
    for boundary, name in ((split.start, "start"), (split.end, "end")):
        if pos < boundary:
            yield source.view(pos, boundary - pos)
            pos = boundary
        on_mark(name)
    if pos < stop:
        yield source.view(pos, stop - pos)


# ---------------------------------------------------------------- reading a split
def _capture_reader(source: Any, name: str, broker_ports: tuple[int, ...]):
    from kproto.capture import CaptureReader

    return CaptureReader(source, name=name, broker_ports=broker_ports, on_error="keep")


class InputError(Exception):
    """An input that could not be read completely, under ``fail_fast``: names the file, offset and reason."""


def _error(category: str, offset: int, reason: str, unread_bytes: int) -> dict:
    """One entry of a split's ``errors`` list (the ``errors`` table's row, without the capture)."""
    return {"category": category, "offset": int(offset), "reason": reason, "unread_bytes": int(unread_bytes)}


def _read_batches(batches: Iterator[pa.RecordBatch]) -> tuple[list[pa.RecordBatch], BaseException | None]:
    """Every batch an iterator gives until it ends or fails: the batches read stay, the failure is returned."""
    kept: list[pa.RecordBatch] = []
    try:
        for batch in batches:
            kept.append(batch)
    except Exception as exc:   # an input problem or a bug: reported in the errors table, never lost in silence
        return kept, exc
    return kept, None


def _frames_of_frame_file(source: _Source, split: Split) -> tuple[list[pa.RecordBatch], dict]:
    """A file of size-prefixed frames: one pseudo-connection of requests, no timestamps.

    Returns the frame batches read before any problem and the accounting:
    ``input_bytes == file_bytes + trailing_bytes + unread_bytes``, and ``errors``.
    """
    from kproto.capture import frame_schema, read_frame_file
    from kproto.errors import DecodeError, TruncatedError

    data = source.read(0, source.size)
    read, failure = _read_batches(read_frame_file(data))
    batches, sequence, frame_bytes = [], 0, 0
    for batch in read:
        n = batch.num_rows
        batches.append(pa.RecordBatch.from_arrays([
            pa.array([split.capture] * n, pa.string()), pa.array(np.zeros(n, np.int64)),
            pa.array(np.zeros(n, np.int8)), pa.array(np.arange(sequence, sequence + n, dtype=np.int64)),
            pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64()), batch["size"], batch["payload"],
        ], schema=frame_schema()))
        sequence += n
        frame_bytes += n * 4 + pc.sum(batch["size"].cast(pa.int64())).as_py()
    errors: list[dict] = []
    counters: dict[str, Any] = {"input_bytes": source.size, "file_bytes": frame_bytes, "trailing_bytes": 0,
                                "unread_bytes": 0, "errors": errors}
    if failure is not None:
        left = source.size - frame_bytes
        if frame_bytes == 0 and isinstance(failure, DecodeError):
            # Not one whole frame from the first byte: whatever this file is, it is no capture.
            counters["unread_bytes"] = left
            errors.append(_error("not_a_capture", 0, "neither a pcap or pcapng file nor size-prefixed "
                                             f"frames (first bytes 0x{bytes(data[:4]).hex()}: {failure.reason})",
                                             left))
        elif isinstance(failure, TruncatedError):
            counters["trailing_bytes"] = left
            errors.append(_error("truncated_record", frame_bytes, f"incomplete frame: {left} bytes "
                                             "at the end of the file", left))
        else:
            counters["unread_bytes"] = left
            if isinstance(failure, DecodeError):
                category, reason = "bad_frame_size", failure.reason
            else:
                category, reason = "read_failed", f"{type(failure).__name__}: {failure}"
            errors.append(_error(category, frame_bytes, reason, left))
    return batches, counters


def _file_offset(split: Split, stream_offset: int) -> int:
    """Where a byte of what a split's reader was fed lies in the file (ranges: a pcap header, then the range)."""
    if split.split_count == 1 or stream_offset < PCAP_HEADER_SIZE:
        return stream_offset
    return split.context_start + stream_offset - PCAP_HEADER_SIZE


def _capture_errors(split: Split, reader: Any, counters: dict, failure: BaseException | None) -> list[dict]:
    """The errors a capture split found: where reading stopped (and why), an incomplete last record.

    ``counters`` are the split's own share (see _process_range). A range reports an error
    its neighbour owns only when bytes of its own share went unread because of it.
    """
    errors = []
    if failure is not None:
        # Where the reader had got to; everything of the share from there on is unread.
        offset = _file_offset(split, reader.counters["file_bytes"])
        errors.append(_error("read_failed", offset, f"{type(failure).__name__}: {failure}",
                             counters["unread_bytes"]))
        return errors
    stopped = reader.error
    if stopped is not None:
        offset = _file_offset(split, stopped.offset)
        owned = split.start <= offset < split.end or split.split_count == 1
        if owned or counters["unread_bytes"]:
            errors.append(_error(stopped.category, offset, stopped.reason, counters["unread_bytes"]))
    if counters["trailing_bytes"]:
        offset = split.end - counters["trailing_bytes"]
        errors.append(_error("truncated_record", offset, f"incomplete record: {counters['trailing_bytes']} bytes "
                             "at the end of the file", counters["trailing_bytes"]))
    return errors


def _accounting_rows(split: Split, counters: dict, connections: pa.Table) -> list[pa.RecordBatch]:
    info = dict(counters, split_index=split.split_index, split_count=split.split_count, format=split.format)
    rows = [as_parts("capture", {"capture": [split.capture], "split_index": [split.split_index],
                                 "info": [json.dumps(info, sort_keys=True)]}, 1)]
    if connections.num_rows:
        records = connections.to_pylist()
        rows.append(as_parts("connection", {
            "capture": [split.capture] * len(records),
            "connection_id": [r["connection_id"] for r in records],
            "split_index": [split.split_index] * len(records),
            "info": [json.dumps(r, sort_keys=True) for r in records],
        }, len(records)))
    return rows


def process_split(split: Split, *, broker_ports: Iterable[int] = (9092,), body: str | None = "json",
                  records: str = "summary", sink: Sink | None = None,
                  fail_fast: bool = False) -> Iterator[pa.RecordBatch]:
    """Read one split: its frames and exchanges go to ``sink``; yields compact rows (or raw frames).

    ``body``: "json" or None (no body column); ``records``: record sets in the
    bodies as a "summary" of their batch headers or as "base64".

    An input that cannot be read completely never fails the task: the frames
    read before the problem are decoded as usual and the accounting row lists
    the errors (category, file offset, reason, bytes unread). With
    ``fail_fast`` the first such error raises :class:`InputError` instead.
    """
    from kproto.capture import connection_schema, frame_schema

    ports = tuple(broker_ports)
    sink = sink if sink is not None else Sink()
    try:
        source = _Source(split.path)
    except OSError as exc:
        size = max(0, split.end - split.start)
        counters = {"input_bytes": size, "file_bytes": 0, "trailing_bytes": 0, "unread_bytes": size,
                    "errors": [_error("read_failed", split.start, f"{type(exc).__name__}: {exc}", size)]}
        yield from _checked(split, counters, connection_schema().empty_table(), fail_fast)
        return
    try:
        if split.format == "frames":
            batches, counters = _frames_of_frame_file(source, split)
            rows = _checked(split, counters, connection_schema().empty_table(), fail_fast)
            # One connection: decoded here whatever its size.
            yield from decode_and_summarize(pa.Table.from_batches(batches, schema=frame_schema()),
                                            body=body, sink=sink, records=records)
            yield from rows
            return
        if split.split_count > 1:
            yield from _process_range(split, source, ports, body, records, sink, fail_fast)
            return
        local = local_path(split.path)
        reader = _capture_reader(local if local is not None else source.read(0, source.size),
                                 split.capture, ports)
        if split.mode == "decode":
            batches, failure = _read_batches(iter(reader))
            counters = _whole_file_counters(split, reader, failure)
            rows = _checked(split, counters, reader.connections(), fail_fast)
            frames = pa.Table.from_batches(batches, schema=frame_schema())
            yield from decode_and_summarize(frames, body=body, sink=sink, records=records)
        else:
            # A big file that cannot be cut: frames stream out, the grouping step pairs them.
            failure = None
            try:
                for batch in reader:
                    yield _raw(batch, split)
            except Exception as exc:
                failure = exc
            counters = _whole_file_counters(split, reader, failure)
            rows = _checked(split, counters, reader.connections(), fail_fast)
        yield from rows
    finally:
        source.close()


def _whole_file_counters(split: Split, reader: Any, failure: BaseException | None) -> dict:
    """A whole file's accounting: the reader's counters, the bytes left unread by a failure, the errors."""
    counters = reader.counters
    if failure is not None:
        _count_unreached(counters)
    counters["errors"] = _capture_errors(split, reader, counters, failure)
    return counters


def _count_unreached(counters: dict) -> None:
    """After a reader failed: the input bytes it never reached are unread (the byte identity holds again)."""
    reached = counters["file_bytes"] + counters["trailing_bytes"] + counters["unread_bytes"]
    counters["unread_bytes"] += max(0, counters["input_bytes"] - reached)


def _checked(split: Split, counters: dict, connections: pa.Table, fail_fast: bool) -> list[pa.RecordBatch]:
    """The accounting rows, after raising :class:`InputError` on the first error under ``fail_fast``."""
    if fail_fast and counters["errors"]:
        first = counters["errors"][0]
        raise InputError(f"{split.capture}: byte offset {first['offset']}: {first['reason']} ({first['category']})")
    return _accounting_rows(split, counters, connections)


def _process_range(split: Split, source: _Source, ports: tuple[int, ...], body: str | None, records: str,
                   sink: Sink, fail_fast: bool) -> Iterator[pa.RecordBatch]:
    """A range of a pcap, decoded and paired on its own, with its context and overlap.

    Every range reads the same bytes around a boundary, so it reassembles and
    pairs them alike: a request and its response pair in both ranges that see
    them, and only the range that owns the request (or, alone, the response)
    writes the exchange. Connection ids are hashes of the addresses and
    sequences ``(owning split << 32) + rank``, which every range computes alike.
    """
    from kproto.capture import frame_schema

    marks: dict[str, dict] = {}
    holder: list[Any] = []

    def on_mark(name: str) -> None:
        marks[name] = dict(holder[0].counters)

    if source.mapped:
        from kproto.capture import Chunks

        ranged: Any = Chunks(_range_pieces(source, split, on_mark))   # a local file: views of its map
    else:
        ranged = _RangeStream(source, split, on_mark)
    reader = _capture_reader(ranged, split.capture, ports)
    holder.append(reader)
    batches, failure = _read_batches(iter(reader))
    frames = pa.Table.from_batches(batches, schema=frame_schema())
    connections = reader.connections()
    global_ids = _global_connection_ids(connections)
    if frames.num_rows:
        local_ids = frames["connection_id"].to_numpy()
        frames = frames.set_column(1, "connection_id", pa.array(global_ids[local_ids], pa.int64()))
    connections = connections.set_column(
        connections.schema.get_field_index("connection_id"), "connection_id",
        pa.array(global_ids[connections["connection_id"].to_numpy()], pa.int64()))
    # The split that owns a frame holds the timestamp of its first byte: -1 before, 0 this, 1 after.
    ts = frames["ts_first_ns"].fill_null(INT64_MIN).to_numpy()
    owner = np.where(ts < split.ts_lo, -1, np.where(ts < split.ts_hi, 0, 1)).astype(np.int64)
    rank = occurrence_rank(frames["connection_id"].to_numpy(), frames["direction"].to_numpy().astype(np.int64),
                       owner, order_by=frames["sequence"].to_numpy())
    frames = frames.set_column(frames.schema.get_field_index("sequence"), "sequence",
                               pa.array((split.split_index + owner) * (1 << 32) + rank, pa.int64()))
    yield from decode_and_summarize(frames, body=body, sink=sink, owned=owner == 0, records=records)
    # The range's own share of the counters: between the marks at its start and end (the
    # first range owns the file header too; the last one the end of the file).
    last = split.split_index == split.split_count - 1
    end = reader.counters if last else marks.get("end", reader.counters)
    start = marks.get("start", {}) if split.split_index else {}
    counters = {name: value - start.get(name, 0) for name, value in end.items()}
    counters["input_bytes"] = (source.size if last else split.end) - (split.start if split.split_index else 0)
    if failure is not None:
        _count_unreached(counters)
    counters["errors"] = _capture_errors(split, reader, counters, failure)
    yield from _checked(split, counters, connections, fail_fast)


def _raw(batch: pa.RecordBatch, split: Split) -> pa.RecordBatch:
    columns: dict[str, Any] = {name: batch[name] for name in RAW_COLUMNS if name != "split_index"}
    columns["split_index"] = pa.array(np.full(batch.num_rows, split.split_index, np.int32))
    return as_parts("raw", columns, batch.num_rows)


def connection_hash(client_ip: str, client_port: int, server_ip: str, server_port: int) -> int:
    """A stable, non-negative 63-bit id for a connection's addresses (same in every process)."""
    digest = hashlib.blake2b(f"{client_ip}|{client_port}|{server_ip}|{server_port}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") >> 1


def _global_connection_ids(connections: pa.Table) -> np.ndarray:
    """Local connection id -> address hash, as a lookup array."""
    rows = connections.select(["connection_id", "client_ip", "client_port", "server_ip", "server_port"]).to_pylist()
    size = max((r["connection_id"] for r in rows), default=-1) + 1
    ids = np.zeros(size, np.int64)
    for r in rows:
        ids[r["connection_id"]] = connection_hash(r["client_ip"], r["client_port"], r["server_ip"], r["server_port"])
    return ids


# ---------------------------------------------------------------- decoding and pairing
def _status_names(values: pa.Array, enum_type: Any) -> pa.Array:
    names = [member.name for member in sorted(enum_type, key=int)]
    lookup = pa.array(names + [None], pa.string())
    index = pc.fill_null(values.cast(pa.int32()), len(names))
    index = pc.if_else(pc.less(index, len(names)), index, len(names))
    return lookup.take(index)


def _error_codes(bodies: pa.Array) -> pa.Array:
    """The first non-zero error code anywhere in each JSON body; 0 when all are zero; null without one."""
    pattern = r'"error_code":(?P<code>-?[1-9][0-9]*)'
    matched = pc.fill_null(pc.match_substring_regex(bodies, pattern), False)
    text = pc.extract_regex(pc.if_else(matched, bodies, '"error_code":1'), pattern).field("code")
    first = pc.if_else(matched, text.cast(pa.int16()), pa.scalar(None, pa.int16()))
    has_any = pc.match_substring(bodies, '"error_code":')
    zero = pc.if_else(has_any, pa.scalar(0, pa.int16()), pa.scalar(None, pa.int16()))
    return pc.coalesce(first, zero)


def _error_names(codes: pa.Array) -> pa.Array:
    from kproto.errors import error_name

    names = {code: error_name(code) for code in pc.unique(codes.drop_null()).to_pylist()}
    keys = pa.array(list(names), pa.int16())
    index = pc.index_in(codes, value_set=keys)
    return pa.array(list(names.values()), pa.string()).take(index)


def _software(api_key: np.ndarray, api_version: np.ndarray, status: np.ndarray, bodies: pa.Array | None,
              present: np.ndarray) -> tuple[pa.Array, pa.Array, pa.Array]:
    """ClientSoftwareName / Version of ApiVersions v3+ requests, and what is wrong with them."""
    from kproto import versions as kv

    m = len(api_key)
    names: list[str | None] = [None] * m
    versions: list[str | None] = [None] * m
    problems: list[str | None] = [None] * m
    if bodies is not None:
        candidates = np.flatnonzero(present & (api_key == API_VERSIONS) & (api_version >= 3) & (status == 0))
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
    """The decoded rows of a set of whole connections, and the frame that owns each row."""

    frames: pa.Table              # FRAMES_SCHEMA, one row per input frame
    exchanges: pa.Table           # EXCHANGES_SCHEMA
    exchange_frame: np.ndarray    # row of the request (else the response) of each exchange
    partitions: pa.Table          # Produce requests and Fetch responses per topic-partition
    partition_frame: np.ndarray   # row of each partition's frame
    topic_names: pa.Table         # topic IDs and the names responses give them (topic_id, topic)
    topic_name_frame: np.ndarray  # row of each name's frame


def _masked(values: np.ndarray, index: np.ndarray, present: np.ndarray, type_: pa.DataType) -> pa.Array:
    """values[index] where present, else null."""
    picked = values[np.where(present, index, 0)] if len(values) else np.zeros(len(index), values.dtype)
    return pa.array(picked, type_, mask=~present)


def decode_frames_table(frames: pa.Table, *, body: str | None = "json", records: str = "summary",
                        owned: np.ndarray | None = None) -> Decoded:
    """Decode and pair a table of capture frames (whole connections).

    ``frames`` has the kproto.capture frame columns. Requests and responses
    pair by (capture, connection, correlation id), the n-th request with an id
    to the n-th response with it, in sequence order (as ``kproto.batch.pair``);
    every frame is decoded once with its request's API and version. ``records``:
    how JSON bodies show record sets ("summary" of the batch headers, or "base64").
    ``owned`` (a mask of rows): the only frames whose partitions are wanted.
    """
    import kproto.batch as kb

    frames = frames.combine_chunks()
    n = frames.num_rows
    payload = frames["payload"]
    if isinstance(payload, pa.ChunkedArray):
        payload = payload.combine_chunks() if payload.num_chunks else pa.array([], pa.binary())
    directions = frames["direction"].fill_null(0).to_numpy().astype(np.int8)
    # 1. Headers only: API, version and correlation id of requests, correlation id of responses.
    headers = kb.decode_frames(payload, directions=directions)
    capture = frames["capture"].cast(pa.string()).fill_null("")
    capture_codes = capture.dictionary_encode().combine_chunks().indices.to_numpy().astype(np.int64) \
        if n else np.zeros(0, np.int64)
    connection = frames["connection_id"].to_numpy().astype(np.int64)
    sequence = frames["sequence"].to_numpy().astype(np.int64)
    corr_valid = headers["correlation_id"].is_valid().to_numpy(zero_copy_only=False)
    corr = headers["correlation_id"].fill_null(0).to_numpy().astype(np.int64)
    req, resp = kb.pair_rows(capture_codes, connection, directions, corr, corr_valid, sequence)
    has_req, has_resp = req >= 0, resp >= 0
    owner_row = np.where(has_req, req, resp)
    # Requests in order, then responses without a request, per connection (kproto.batch.pair's order).
    order = np.lexsort((np.where(has_resp, resp, n), np.where(has_req, req, n), connection[owner_row],
                        capture_codes[owner_row])) if len(owner_row) else np.zeros(0, np.int64)
    req, resp, has_req, has_resp, owner_row = req[order], resp[order], has_req[order], has_resp[order], \
        owner_row[order]
    m = len(req)

    # 2. Every frame decoded once, responses with their request's API and version.
    header_keys = headers["api_key"].fill_null(-1).to_numpy().astype(np.int16)
    header_versions = headers["api_version"].fill_null(-1).to_numpy().astype(np.int16)
    both = has_req & has_resp
    key_of = np.full(n, -1, np.int16)
    version_of = np.full(n, -1, np.int16)
    key_of[resp[both]] = header_keys[req[both]]
    version_of[resp[both]] = header_versions[req[both]]
    decoded = kb.decode_frames(payload, directions=directions, request_api_keys=key_of,
                               request_api_versions=version_of, body=body, records=records)
    status = decoded["status"].to_numpy()
    frame_columns: dict[str, Any] = {name: frames[name] for name in (
        "capture", "connection_id", "direction", "sequence", "ts_first_ns", "ts_last_ns", "size")}
    frame_columns.update({name: decoded[name] for name in (
        "header_version", "api_key", "api_version", "correlation_id", "client_id", "header_tag_count",
        "error_offset", "deprecated", "removed_in_4x")})
    frame_columns["status"] = decoded["status"]
    frame_columns["status_name"] = _status_names(decoded["status"], kb.Status)
    bodies = decoded["body"] if body == "json" else None
    if bodies is not None:
        frame_columns["body"] = bodies
    frame_table = pa.Table.from_batches([_conform(FRAMES_SCHEMA, frame_columns, n)])

    # 3. Produce requests and Fetch responses, per topic-partition (record batch headers only).
    parts = kb.partitions(payload, directions=directions, request_api_keys=key_of,
                          request_api_versions=version_of)
    partition_frame = parts["frame"].to_numpy().astype(np.int64) if parts.num_rows else np.zeros(0, np.int64)
    exchange_topic, exchange_topic_id = _exchange_topics(parts, partition_frame, req, resp, n)

    # 4. Exchanges.
    pair_status = np.full(m, kb.PairStatus.PAIRED, np.uint8)
    pair_status[has_req & ~has_resp] = kb.PairStatus.UNPAIRED_REQUEST
    pair_status[~has_req] = kb.PairStatus.UNPAIRED_RESPONSE
    for i in np.flatnonzero(has_req & ~has_resp & (header_keys[np.where(has_req, req, 0)] == 0)).tolist():
        if kb._acks_zero(payload[int(req[i])].as_py()):
            pair_status[i] = kb.PairStatus.NO_RESPONSE_EXPECTED
    ts_first = frames["ts_first_ns"]
    ts_last = frames["ts_last_ns"]
    req_ts_valid = has_req & ts_first.is_valid().to_numpy(zero_copy_only=False)[np.where(has_req, req, 0)] \
        if n else has_req
    resp_ts_valid = has_resp & ts_last.is_valid().to_numpy(zero_copy_only=False)[np.where(has_resp, resp, 0)] \
        if n else has_resp
    first = ts_first.fill_null(0).to_numpy().astype(np.int64)
    last = ts_last.fill_null(0).to_numpy().astype(np.int64)
    request_ts = first[np.where(has_req, req, 0)] if n else np.zeros(m, np.int64)
    response_ts = last[np.where(has_resp, resp, 0)] if n else np.zeros(m, np.int64)
    sizes = frames["size"].to_numpy().astype(np.int32)
    request_key = _masked(header_keys, req, has_req, pa.int16())
    request_version = _masked(header_versions, req, has_req, pa.int16())
    req_index = pa.array(np.where(has_req, req, 0), mask=~has_req)
    resp_index = pa.array(np.where(has_resp, resp, 0), mask=~has_resp)
    if bodies is not None:
        error_codes = _error_codes(bodies.take(resp_index))
        names, versions, problems = _software(header_keys[np.where(has_req, req, 0)] if n else np.zeros(0),
                                              header_versions[np.where(has_req, req, 0)] if n else np.zeros(0),
                                              status[np.where(has_req, req, 0)] if n else np.zeros(0),
                                              bodies.take(req_index), has_req)
    else:
        error_codes = pa.nulls(m, pa.int16())
        names = versions = problems = pa.nulls(m, pa.string())
    exchange_table = pa.Table.from_batches([_conform(EXCHANGES_SCHEMA, {
        "capture": capture.take(pa.array(owner_row)) if n else None,
        "connection_id": pa.array(connection[owner_row] if n else np.zeros(0, np.int64)),
        "correlation_id": _masked(corr, owner_row, corr_valid[owner_row] if n else np.zeros(0, bool), pa.int32()),
        "api_key": request_key, "api_version": request_version,
        "client_id": decoded["client_id"].take(req_index),
        "pair_status": pa.array(pair_status), "pair_status_name": _status_names(pa.array(pair_status),
                                                                               kb.PairStatus),
        "request_sequence": _masked(sequence, req, has_req, pa.int64()),
        "response_sequence": _masked(sequence, resp, has_resp, pa.int64()),
        "request_ts_ns": pa.array(request_ts, pa.int64(), mask=~req_ts_valid),
        "response_ts_ns": pa.array(response_ts, pa.int64(), mask=~resp_ts_valid),
        "latency_ns": pa.array(response_ts - request_ts, pa.int64(), mask=~(req_ts_valid & resp_ts_valid)),
        "request_status": _masked(status, req, has_req, pa.int16()),
        "response_status": _masked(status, resp, has_resp, pa.int16()),
        "request_size": _masked(sizes, req, has_req, pa.int32()),
        "response_size": _masked(sizes, resp, has_resp, pa.int32()),
        "error_code": error_codes, "error_name": _error_names(error_codes),
        "deprecated": decoded["deprecated"].take(req_index),
        "removed_in_4x": decoded["removed_in_4x"].take(req_index),
        "client_software_name": names, "client_software_version": versions, "software_problems": problems,
        "topic": exchange_topic, "topic_id": exchange_topic_id,
    }, m)])

    # 5. Topic IDs and names from the responses that carry both (Metadata v10+, CreateTopics v7+ ...):
    # only those responses are decoded again, as message objects.
    naming = kb.topic_naming_versions()
    candidates = np.flatnonzero((directions == kb.RESPONSE) & (status == kb.Status.OK)
                                & np.isin(key_of, sorted(naming))) if n else np.zeros(0, np.int64)
    names_table = kb.topic_names(payload.take(pa.array(candidates, pa.int64())), directions=kb.RESPONSE,
                                 request_api_keys=key_of[candidates], request_api_versions=version_of[candidates])
    name_frame = candidates[names_table["frame"].to_numpy().astype(np.int64)] if names_table.num_rows \
        else np.zeros(0, np.int64)
    names_table = names_table.drop_columns(["frame"])
    if owned is not None and names_table.num_rows:
        keep = owned[name_frame]
        names_table, name_frame = names_table.filter(pa.array(keep)), name_frame[keep]

    # Of the frames this task owns (taking the owned payloads first would copy them all).
    if owned is not None and parts.num_rows:
        keep = owned[partition_frame]
        parts, partition_frame = parts.filter(pa.array(keep)), partition_frame[keep]
    return Decoded(frame_table, exchange_table, owner_row, parts, partition_frame, names_table, name_frame)


def _exchange_topics(parts: pa.Table, partition_frame: np.ndarray, req: np.ndarray, resp: np.ndarray,
                     n: int) -> tuple[pa.Array, pa.Array]:
    """(topic, topic_id) of each exchange whose request and response address exactly one topic, else null."""
    m = len(req)
    exchange_of = np.full(n, -1, np.int64)
    exchange_of[req[req >= 0]] = np.flatnonzero(req >= 0)
    exchange_of[resp[resp >= 0]] = np.flatnonzero(resp >= 0)
    addressed = pa.table({"exchange": pa.array(exchange_of[partition_frame], pa.int64()),
                          "topic": parts["topic"], "topic_id": parts["topic_id"]})
    distinct = addressed.group_by(["exchange", "topic", "topic_id"]).aggregate([])
    counts = distinct.group_by("exchange").aggregate([([], "count_all"), ("topic", "min"),
                                                      ("topic_id", "min")])
    single = counts.filter(pc.equal(counts["count_all"], 1))
    exchange = single["exchange"].to_numpy()
    in_exchange = exchange >= 0   # a frame in no exchange (no correlation id) addresses nothing here
    index = np.full(m, -1, np.int64)
    index[exchange[in_exchange]] = np.flatnonzero(in_exchange)
    pick = pa.array(index, mask=index < 0)
    return (single["topic_min"].combine_chunks().take(pick).cast(pa.string()),
            single["topic_id_min"].combine_chunks().take(pick).cast(pa.string()))


def decode_and_summarize(frames: pa.Table, *, body: str | None, sink: Sink, owned: np.ndarray | None = None,
                         records: str = "summary") -> Iterator[pa.RecordBatch]:
    """Decode and pair ``frames``; the owned frames and exchanges go to ``sink``; yield compact rows."""
    if frames.num_rows == 0:
        return
    decoded = decode_frames_table(frames, body=body, records=records, owned=owned)
    frame_table, exchanges, partitions = decoded.frames, decoded.exchanges, decoded.partitions
    partition_ts = frames["ts_first_ns"].take(pa.array(decoded.partition_frame))
    names = decoded.topic_names.append_column(
        "ts_first_ns", frames["ts_first_ns"].take(pa.array(decoded.topic_name_frame)))
    if owned is not None:
        frame_table = frame_table.filter(pa.array(owned))
        exchanges = exchanges.filter(pa.array(owned[decoded.exchange_frame]))
    sink.add("frames", frame_table)
    sink.add("exchanges", exchanges)
    yield from summarize(frame_table, exchanges, partitions.append_column("ts_first_ns", partition_ts), names)


def summarize(frames: pa.Table, exchanges: pa.Table, partitions: pa.Table,
              topic_names: pa.Table | None = None) -> Iterator[pa.RecordBatch]:
    """The compact rows Spark combines: counts per capture, usage per client and API, topics,
    and the topic IDs responses named (``topic_names``: kproto.batch.topic_names' rows with ts_first_ns)."""
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
                       sink: Sink | None = None) -> Iterator[pa.RecordBatch]:
    """The grouping step: raw frames of whole connections (any order) to compact rows; tables to ``sink``."""
    from kproto.capture import frame_schema

    tables = [pa.Table.from_batches([b]).select(list(RAW_COLUMNS)) for b in batches if b.num_rows]
    if not tables:
        return
    raw = pa.concat_tables(tables).combine_chunks()
    raw = raw.sort_by([("capture", "ascending"), ("connection_id", "ascending"), ("direction", "ascending"),
                       ("sequence", "ascending")])
    frames = raw.select([f.name for f in frame_schema()]).cast(frame_schema())
    yield from decode_and_summarize(frames, body=body, sink=sink if sink is not None else Sink(), records=records)


# ---------------------------------------------------------------- combining compact rows (driver)
def combine(parts: pa.Table) -> dict[str, pa.Table]:
    """``connections``, ``clients`` and ``topics`` from the compact rows, as Spark SQL would combine them.

    For runs whose compact rows fit the driver comfortably (a few per connection
    and API version): the same tables as :func:`kproto.spark.jobs.build_tables`,
    without a Spark job each.
    """
    from kproto import versions as kv
    from kproto.capture import connection_schema

    kinds = parts["kind"].to_pylist()

    def rows_of(kind: str, columns: list[str]) -> list[dict]:
        keep = pa.array([k == kind for k in kinds])
        return parts.filter(keep).select(columns).to_pylist()

    # Connections: one row per (capture, connection); ranges' counters add up.
    schema = connection_schema()
    counters = [f.name for f in schema if f.name.startswith(("request_", "response_"))]
    merged: dict[tuple, dict] = {}
    for r in sorted(rows_of("connection", ["capture", "split_index", "info"]), key=lambda r: r["split_index"]):
        info = json.loads(r["info"])
        key = (r["capture"], info["connection_id"])
        row = merged.get(key)
        if row is None:
            merged[key] = dict(info, capture=r["capture"])
            continue
        row["first_ts_ns"] = _least(row["first_ts_ns"], info["first_ts_ns"])
        row["last_ts_ns"] = _most(row["last_ts_ns"], info["last_ts_ns"])
        row["handshake_seen"] = bool(row["handshake_seen"] or info["handshake_seen"])
        row["closed_by"] = info["closed_by"] if info["closed_by"] is not None else row["closed_by"]
        for name in counters:
            row[name] = (row[name] or 0) + (info[name] or 0)
    order = ["capture", "connection_id", "client_ip", "client_port", "server_ip", "server_port", "first_ts_ns",
             "last_ts_ns", "handshake_seen", "closed_by", "direction_source", *counters]
    connections = pa.Table.from_pylist(list(merged.values()), schema=pa.schema([schema.field(n) for n in order]))

    # Clients: usage rows with their connection's client address.
    client_ip = {key: row["client_ip"] for key, row in merged.items()}
    names = {info.api_key: info.name for info in kv.api_table()}
    clients: dict[tuple, dict] = {}
    for u in rows_of("usage", ["capture", "connection_id", "client_id", "api_key", "api_version",
                               "client_software_name", "client_software_version", "requests",
                               "deprecated_requests", "removed_in_4x_requests", "error_responses",
                               "first_ns", "last_ns"]):
        key = (client_ip.get((u["capture"], u["connection_id"])), u["client_id"])
        c = clients.setdefault(key, {"names": [], "versions": [], "software": set(), "connections": set(),
                                     "requests": 0, "apis": set(), "deprecated": 0, "removed": 0, "errors": 0,
                                     "first": [], "last": []})
        c["names"].append(u["client_software_name"])
        c["versions"].append(u["client_software_version"])
        c["software"].add("/".join(v for v in (u["client_software_name"], u["client_software_version"])
                                   if v is not None))
        c["connections"].add((u["capture"], u["connection_id"]))
        c["requests"] += u["requests"]
        c["apis"].add((u["api_key"], u["api_version"]))
        c["deprecated"] += u["deprecated_requests"]
        c["removed"] += u["removed_in_4x_requests"]
        c["errors"] += u["error_responses"]
        c["first"].append(u["first_ns"])
        c["last"].append(u["last_ns"])

    def api(key: int | None, version: int | None) -> str | None:
        if key is None or version is None:
            return None
        return f"{names.get(key, f'UNKNOWN({key})')} v{version}"

    def nulls_first(value: tuple) -> tuple:
        return tuple((v is not None, v if v is not None else 0) for v in value)

    client_rows = [{
        "client_ip": ip, "client_id": client_id,
        "client_software_name": max((v for v in c["names"] if v is not None), default=None),
        "client_software_version": max((v for v in c["versions"] if v is not None), default=None),
        "client_software": sorted(c["software"]), "connections": len(c["connections"]),
        "requests": c["requests"], "deprecated_requests": c["deprecated"],
        "removed_in_4x_requests": c["removed"], "error_responses": c["errors"],
        "first_seen_ns": _least(*c["first"]), "last_seen_ns": _most(*c["last"]),
        "apis": [api(*v) for v in sorted(c["apis"], key=nulls_first)],
    } for (ip, client_id), c in sorted(clients.items(), key=lambda item: nulls_first(item[0]))]
    clients_table = pa.Table.from_pylist(client_rows, schema=CLIENTS_SCHEMA)

    # Topics: Produce requests and Fetch responses per topic-partition, a topic named by its ID
    # under the name a response of the run gave that ID (and the reverse: see resolve_topic_ids).
    name_of, id_of = resolve_topic_ids(rows_of("topic_name", ["topic_id", "topic"]))
    topics: dict[tuple, dict] = {}
    for t in rows_of("topic", ["topic", "topic_id", "partition", "api_key", "compression", "messages", "bytes",
                               "records", "batches", "records_errors", "first_ns", "last_ns"]):
        topic = t["topic"] if t["topic"] is not None else name_of.get(t["topic_id"])
        topic_id = t["topic_id"] if t["topic_id"] is not None else id_of.get(t["topic"])
        row = topics.setdefault((topic, topic_id, t["partition"]), {"codecs": set(), "first": [], "last": [],
                                                                    "records_errors": None})
        side = {0: "produce", 1: "fetch"}.get(t["api_key"])
        for prefix in ("produce", "fetch"):
            for name, value in ((f"{prefix}_{'requests' if prefix == 'produce' else 'responses'}", t["messages"]),
                                (f"{prefix}_bytes", t["bytes"]), (f"{prefix}_records", t["records"]),
                                (f"{prefix}_batches", t["batches"])):
                # Spark: sum(when(this API, value).otherwise(0)), a null value adds nothing.
                contribution = value if side == prefix else 0
                row[name] = _sum(row.get(name, _UNSET), contribution)
        if t["compression"] is not None:
            row["codecs"].add(t["compression"])
        row["records_errors"] = _sum(row["records_errors"] if row["records_errors"] is not None else _UNSET,
                                     t["records_errors"])
        row["first"].append(t["first_ns"])
        row["last"].append(t["last_ns"])
    topic_rows = []
    for (topic, topic_id, partition), row in sorted(topics.items(), key=lambda item: nulls_first(item[0])):
        out = {"topic": topic, "topic_id": topic_id, "partition": partition}
        out.update({name: (None if row[name] is _UNSET else row[name]) for name in TOPIC_SUMS})
        out.update({"compression": ",".join(sorted(row["codecs"])), "records_errors": row["records_errors"],
                    "first_ts_ns": _least(*row["first"]), "last_ts_ns": _most(*row["last"])})
        topic_rows.append(out)
    topics_table = pa.Table.from_pylist(topic_rows, schema=TOPICS_SCHEMA)
    return {"connections": connections, "clients": clients_table, "topics": topics_table}


def resolve_topic_ids(rows: Iterable[dict]) -> tuple[dict[str, str], dict[str, str]]:
    """(name of each topic ID, the ID of each name that has exactly one) from ``topic_name`` rows.

    An ID named differently by two responses takes the least name (Spark's min);
    a name with several IDs (a topic deleted and created again) gets none.
    """
    names: dict[str, str] = {}
    for r in rows:
        if r["topic_id"] is not None and r["topic"] is not None:
            names[r["topic_id"]] = min(r["topic"], names.get(r["topic_id"], r["topic"]))
    ids: dict[str, list[str]] = {}
    for topic_id, name in names.items():
        ids.setdefault(name, []).append(topic_id)
    return names, {name: found[0] for name, found in ids.items() if len(found) == 1}


class _Unset:
    """No value yet in a sum (Spark's sum of only nulls is null; of nothing at all, too)."""


_UNSET: Any = _Unset()


def _sum(total: Any, value: int | None) -> Any:
    if value is None:
        return total
    return value if total is _UNSET or total is None else total + value


def _least(*values: int | None) -> int | None:
    return min((v for v in values if v is not None), default=None)


def _most(*values: int | None) -> int | None:
    return max((v for v in values if v is not None), default=None)


TOPIC_SUMS = ("produce_requests", "produce_bytes", "produce_records", "produce_batches", "fetch_responses",
              "fetch_bytes", "fetch_records", "fetch_batches")
TOPICS_SCHEMA = pa.schema([("topic", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32())]
                          + [(name, pa.int64()) for name in TOPIC_SUMS]
                          + [("compression", pa.string()), ("records_errors", pa.int64()),
                             ("first_ts_ns", pa.int64()), ("last_ts_ns", pa.int64())])
CLIENTS_SCHEMA = pa.schema([
    ("client_ip", pa.string()), ("client_id", pa.string()), ("client_software_name", pa.string()),
    # Element fields as Spark names them (collect_set never holds a null).
    ("client_software_version", pa.string()),
    ("client_software", pa.list_(pa.field("element", pa.string(), nullable=False))),
    ("connections", pa.int64()), ("requests", pa.int64()), ("deprecated_requests", pa.int64()),
    ("removed_in_4x_requests", pa.int64()), ("error_responses", pa.int64()), ("first_seen_ns", pa.int64()),
    ("last_seen_ns", pa.int64()), ("apis", pa.list_(pa.field("element", pa.string()))),
])

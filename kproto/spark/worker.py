"""What runs inside Spark's Python workers: captures in, Arrow batches of results out.

Nothing here imports pyspark: every function takes and returns pyarrow objects,
so the same code runs in a Spark task, in a test, or in a plain script.

The pipeline (see docs/analyze.md):

1. :func:`plan_file` looks at one input file and cuts it into *splits*. A pcap
   larger than ``split_bytes`` is cut at record boundaries (found by
   :func:`find_record_boundary`); each split owns the frames whose first byte
   was captured in ``[ts_lo, ts_hi)``. Other files make one split.
2. :func:`process_split` reads one split. A small whole file is decoded and
   paired right there (``mode="decode"``); a range of a big file, or a big file
   that cannot be cut, is emitted as ``raw`` frames that Spark groups by
   connection before :func:`decode_frames_table` decodes them.
3. Every output row is one of a few *kinds* sharing :func:`union_schema`:
   ``frame``, ``exchange``, ``partition``, ``connection``, ``capture`` (the
   accounting) and ``raw`` (frames on their way to the grouping step).
"""

from __future__ import annotations

import hashlib
import io
import json
import mmap
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
def union_schema() -> pa.Schema:
    """Columns of every row kind (Spark types only: no unsigned, no dictionaries)."""
    return pa.schema([
        ("kind", pa.string()),
        # where: the frame (or the exchange's request, or the partition's frame)
        ("capture", pa.string()),
        ("connection_id", pa.int64()),
        ("direction", pa.int8()),
        ("sequence", pa.int64()),
        ("ts_first_ns", pa.int64()),
        ("ts_last_ns", pa.int64()),
        ("size", pa.int32()),
        # raw frames on their way to the grouping step
        ("payload", pa.binary()),
        ("split_index", pa.int32()),
        # frame header and status
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
        # exchanges
        ("pair_status", pa.int16()),
        ("pair_status_name", pa.string()),
        ("request_sequence", pa.int64()),
        ("response_sequence", pa.int64()),
        ("request_ts_ns", pa.int64()),
        ("response_ts_ns", pa.int64()),
        ("latency_ns", pa.int64()),
        ("request_status", pa.int16()),
        ("response_status", pa.int16()),
        ("request_size", pa.int32()),
        ("response_size", pa.int32()),
        ("error_code", pa.int16()),
        ("error_name", pa.string()),
        ("client_software_name", pa.string()),
        ("client_software_version", pa.string()),
        ("software_problems", pa.string()),
        # Produce / Fetch partitions
        ("topic", pa.string()),
        ("topic_id", pa.string()),
        ("partition", pa.int32()),
        ("batch_count", pa.int32()),
        ("record_count", pa.int64()),
        ("bytes", pa.int64()),
        ("compression", pa.string()),
        ("producer_id", pa.int64()),
        ("records_error", pa.string()),
        # accounting (connection and capture rows): JSON objects of counters
        ("info", pa.string()),
    ])


UNION_SCHEMA = union_schema()

FRAME_COLUMNS = (
    "capture", "connection_id", "direction", "sequence", "ts_first_ns", "ts_last_ns", "size",
    "header_version", "api_key", "api_version", "correlation_id", "client_id", "header_tag_count",
    "status", "status_name", "error_offset", "deprecated", "removed_in_4x", "body",
)
EXCHANGE_COLUMNS = (
    "capture", "connection_id", "correlation_id", "api_key", "api_version", "client_id",
    "pair_status", "pair_status_name", "request_sequence", "response_sequence",
    "request_ts_ns", "response_ts_ns", "latency_ns", "request_status", "response_status",
    "request_size", "response_size", "error_code", "error_name", "deprecated", "removed_in_4x",
    "client_software_name", "client_software_version", "software_problems",
)
PARTITION_COLUMNS = (
    "capture", "connection_id", "direction", "sequence", "ts_first_ns", "api_key", "api_version",
    "client_id", "topic", "topic_id", "partition", "error_code", "batch_count", "record_count",
    "bytes", "compression", "producer_id", "records_error",
)
RAW_COLUMNS = ("capture", "connection_id", "direction", "sequence", "ts_first_ns", "ts_last_ns", "size",
               "payload", "split_index")


def as_union(kind: str, columns: dict[str, Any], rows: int) -> pa.RecordBatch:
    """One batch of ``kind`` rows in the union schema; absent columns are null."""
    arrays = []
    for field in UNION_SCHEMA:
        if field.name == "kind":
            arrays.append(pa.array([kind] * rows, pa.string()) if rows else pa.array([], pa.string()))
            continue
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(rows, field.type))
            continue
        if isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        if not isinstance(value, pa.Array):
            value = pa.array(value)
        if pa.types.is_dictionary(value.type):
            value = value.cast(value.type.value_type)
        if value.type != field.type:
            value = value.cast(field.type)
        arrays.append(value)
    return pa.RecordBatch.from_arrays(arrays, schema=UNION_SCHEMA)


# ---------------------------------------------------------------- inputs
@dataclass
class Split:
    """One unit of work: a whole file, or a byte range of a pcap."""

    path: str                 # a local path or a URI (file:, hdfs:, s3a: ...)
    capture: str              # the ``capture`` column's value
    format: str               # pcap, pcapng, frames
    mode: str                 # decode (whole small file) or raw (range / big file)
    split_index: int
    split_count: int
    start: int                # first byte of the range (records, after the pcap header)
    end: int                  # byte after the range
    ts_lo: int                # owns frames with ts_lo <= ts_first_ns < ts_hi
    ts_hi: int
    overlap: int = DEFAULT_OVERLAP_BYTES


SPLIT_FIELDS = (("path", pa.string()), ("capture", pa.string()), ("format", pa.string()),
                ("mode", pa.string()), ("split_index", pa.int32()), ("split_count", pa.int32()),
                ("start", pa.int64()), ("end", pa.int64()), ("ts_lo", pa.int64()), ("ts_hi", pa.int64()),
                ("overlap", pa.int64()))
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
        chain = []
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
    """The splits of one input file."""
    capture = capture or path
    source = _Source(path)
    try:
        size = source.size
        head = source.read(0, PCAP_HEADER_SIZE)
        fmt = detect_format(head)
        whole_mode = "decode" if size <= split_bytes else "raw"
        if fmt != "pcap" or size <= split_bytes or len(head) < PCAP_HEADER_SIZE:
            return [Split(path, capture, fmt, whole_mode, 0, 1, 0, size, INT64_MIN, INT64_MAX, 0)]
        order, nanos = PCAP_MAGICS[head[:4]]
        snaplen = struct.unpack_from(order + "I", head, 16)[0]
        first = _pcap_record(source.read(PCAP_HEADER_SIZE, PCAP_RECORD_HEADER), 0, order, nanos, snaplen)
        if first is None:
            return [Split(path, capture, fmt, whole_mode, 0, 1, 0, size, INT64_MIN, INT64_MAX, 0)]
        # Records more than a day away from the first are not plausible neighbours.
        window = (first[0] - 86400 * 10**9, first[0] + 86400 * 10**9 * 365)
        points = [(PCAP_HEADER_SIZE, INT64_MIN)]
        nominal = split_bytes
        while nominal < size - split_bytes // 4:
            found = find_record_boundary(source.read(nominal, _BOUNDARY_SEARCH), nominal, order, nanos,
                                         snaplen, window)
            if found is not None and found[0] > points[-1][0]:
                points.append(found)
                nominal = found[0] + split_bytes
            else:
                nominal += split_bytes
        count = len(points)
        return [Split(path, capture, fmt, "raw", index, count, start,
                      points[index + 1][0] if index + 1 < count else size,
                      ts, points[index + 1][1] if index + 1 < count else INT64_MAX, overlap)
                for index, (start, ts) in enumerate(points)]
    finally:
        source.close()


class _RangeStream(io.RawIOBase):
    """A pcap header, then the range's records, then up to ``overlap`` more bytes.

    ``on_range_end`` is called when the reader asks for bytes past the range: by
    then it has consumed exactly the range (which ends on a record boundary), so
    counters read at that moment describe the range alone.
    """

    def __init__(self, source: _Source, split: Split, on_range_end) -> None:
        super().__init__()
        self.source = source
        self.header = source.read(0, PCAP_HEADER_SIZE)
        self.pos = split.start
        self.end = split.end
        self.stop = min(source.size, split.end + split.overlap)
        self.on_range_end = on_range_end
        self.header_sent = split.start == 0
        self.ended = False

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a range of a file")

    def read(self, size: int = -1) -> bytes:
        if not self.header_sent:
            self.header_sent = True
            return self.header
        size = 4 * 1024 * 1024 if size is None or size < 0 else size
        if self.pos >= self.end and not self.ended:
            self.ended = True
            self.on_range_end()
        limit = self.end if self.pos < self.end else self.stop
        data = self.source.read(self.pos, min(size, limit - self.pos))
        self.pos += len(data)
        return data


# ---------------------------------------------------------------- reading a split
def _capture_reader(source: Any, name: str, broker_ports: tuple[int, ...]):
    from kproto.capture import CaptureReader

    return CaptureReader(source, name=name, broker_ports=broker_ports)


def _frames_of_frame_file(source: _Source, split: Split) -> Iterator[pa.RecordBatch]:
    """A file of size-prefixed frames: one pseudo-connection of requests, no timestamps."""
    from kproto.capture import frame_schema, read_frame_file

    sequence = 0
    data = source.read(0, source.size)
    for batch in read_frame_file(data):
        n = batch.num_rows
        yield pa.RecordBatch.from_arrays([
            pa.array([split.capture] * n, pa.string()), pa.array(np.zeros(n, np.int64)),
            pa.array(np.zeros(n, np.int8)), pa.array(np.arange(sequence, sequence + n, dtype=np.int64)),
            pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64()), batch["size"], batch["payload"],
        ], schema=frame_schema())
        sequence += n


def _accounting_rows(split: Split, counters: dict, connections: pa.Table) -> list[pa.RecordBatch]:
    info = dict(counters, split_index=split.split_index, split_count=split.split_count, format=split.format)
    rows = [as_union("capture", {"capture": [split.capture], "split_index": [split.split_index],
                                 "info": [json.dumps(info, sort_keys=True)]}, 1)]
    if connections.num_rows:
        records = connections.to_pylist()
        rows.append(as_union("connection", {
            "capture": [split.capture] * len(records),
            "connection_id": [r["connection_id"] for r in records],
            "split_index": [split.split_index] * len(records),
            "info": [json.dumps(r, sort_keys=True) for r in records],
        }, len(records)))
    return rows


def process_split(split: Split, *, broker_ports: Iterable[int] = (9092,), body: str | None = "json",
                  ) -> Iterator[pa.RecordBatch]:
    """Read one split; yield union batches (decoded kinds, or raw frames, plus accounting)."""
    ports = tuple(broker_ports)
    source = _Source(split.path)
    try:
        if split.format == "frames":
            try:
                batches = list(_frames_of_frame_file(source, split))
                error = None
            except Exception as exc:   # a broken frame file: say why in its accounting row
                batches, error = [], f"{type(exc).__name__}: {exc}"
            counters = {"file_bytes": source.size, "frames_file_error": error}
            from kproto.capture import connection_schema
            yield from _emit(split, batches, body)
            yield from _accounting_rows(split, counters, connection_schema().empty_table())
            return
        snapshot: dict = {}
        if split.split_count > 1:
            reader = None

            def range_end() -> None:
                snapshot.update(reader.counters)

            stream = _RangeStream(source, split, range_end)
            reader = _capture_reader(stream, split.capture, ports)
        else:
            local = local_path(split.path)
            reader = _capture_reader(local if local is not None else source.read(0, source.size),
                                     split.capture, ports)
        if split.mode == "decode":
            yield from _emit(split, list(reader), body)
            connections = reader.connections()
        elif split.split_count == 1:
            # A big file read whole: frames stream out, the grouping step pairs them.
            for batch in reader:
                yield _raw(batch, split)
            connections = reader.connections()
        else:
            # A range: connection ids are local to this reader, so they are replaced by a
            # hash of the connection's addresses, which every range computes alike.
            owned = [_owned(batch, split) for batch in reader]
            connections = reader.connections()
            global_ids = _global_connection_ids(connections)
            for batch in owned:
                if batch.num_rows:
                    local = batch["connection_id"].to_numpy()
                    batch = batch.set_column(1, "connection_id", pa.array(global_ids[local], pa.int64()))
                    yield _raw(batch, split)
            connections = connections.set_column(
                connections.schema.get_field_index("connection_id"), "connection_id",
                pa.array(global_ids[connections["connection_id"].to_numpy()], pa.int64()))
        counters = snapshot or reader.counters
        yield from _accounting_rows(split, counters, connections)
    finally:
        source.close()


def _raw(batch: pa.RecordBatch, split: Split) -> pa.RecordBatch:
    columns = {name: batch[name] for name in RAW_COLUMNS if name != "split_index"}
    columns["split_index"] = pa.array(np.full(batch.num_rows, split.split_index, np.int32))
    return as_union("raw", columns, batch.num_rows)


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


def _owned(batch: pa.RecordBatch, split: Split) -> pa.RecordBatch:
    if split.ts_lo == INT64_MIN and split.ts_hi == INT64_MAX:
        return batch
    ts = batch["ts_first_ns"].to_numpy(zero_copy_only=False)
    keep = (ts >= split.ts_lo) & (ts < split.ts_hi)
    return batch.filter(pa.array(keep))


def _emit(split: Split, batches: list[pa.RecordBatch], body: str | None) -> Iterator[pa.RecordBatch]:
    from kproto.capture import frame_schema

    table = pa.Table.from_batches(batches, schema=frame_schema())
    yield from decode_frames_table(table, body=body)


# ---------------------------------------------------------------- decoding and pairing
def _status_names(values: pa.Array, enum_type) -> pa.Array:
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

    values = codes.to_pylist()
    return pa.array([None if c is None else error_name(c) for c in values], pa.string())


def _software(requests: pa.Table) -> tuple[list, list, list]:
    """ClientSoftwareName / Version of ApiVersions v3+ requests, and what is wrong with them."""
    from kproto import versions as kv

    names, versions, problems = [], [], []
    for key, version, status, body in zip(*(requests[c].to_pylist() for c in
                                            ("api_key", "api_version", "status", "body"))):
        if key != API_VERSIONS or version is None or version < 3 or status != 0 or body is None:
            names.append(None)
            versions.append(None)
            problems.append(None)
            continue
        fields = json.loads(body)
        name, soft_version = fields.get("client_software_name"), fields.get("client_software_version")
        names.append(name)
        versions.append(soft_version)
        found = kv.client_software_problems(name, soft_version)
        problems.append("; ".join(found) if found else None)
    return names, versions, problems


def decode_frames_table(frames: pa.Table, *, body: str | None = "json") -> Iterator[pa.RecordBatch]:
    """Decode and pair a table of capture frames (whole connections); yield union batches.

    ``frames`` has the kproto.capture frame columns. Rows come out as ``frame``
    (one per input frame), ``exchange`` (one per request, plus one per response
    without its request) and ``partition`` (Produce requests and Fetch responses
    per topic-partition).
    """
    import kproto.batch as kb

    frames = frames.combine_chunks()
    n = frames.num_rows
    if n == 0:
        return
    payload = frames["payload"]
    if isinstance(payload, pa.ChunkedArray):
        payload = payload.combine_chunks()
    # 1. Match requests and responses from their headers (cheap, no bodies).
    pairs = _pair(frames)
    request_row = pairs["request_row"].to_numpy(zero_copy_only=False)
    response_row = pairs["response_row"].to_numpy(zero_copy_only=False)
    has_request = ~np.isnan(request_row) if request_row.dtype.kind == "f" else np.ones(len(request_row), bool)
    has_response = ~np.isnan(response_row) if response_row.dtype.kind == "f" else np.ones(len(response_row), bool)
    both = has_request & has_response
    key_of = np.full(n, -1, np.int16)
    version_of = np.full(n, -1, np.int16)
    api_keys = pairs["api_key"].fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int16)
    api_versions = pairs["api_version"].fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int16)
    rows_resp = response_row[both].astype(np.int64)
    key_of[rows_resp] = api_keys[both]
    version_of[rows_resp] = api_versions[both]

    # 2. Decode every frame once, bodies included, responses with their request's API.
    decoded = kb.decode_frames(payload, directions=frames["direction"], request_api_keys=key_of,
                               request_api_versions=version_of, body=body)
    status = decoded["status"].cast(pa.int16())
    frame_columns = {name: frames[name] for name in ("capture", "connection_id", "direction", "sequence",
                                                     "ts_first_ns", "ts_last_ns", "size")}
    frame_columns.update({name: decoded[name] for name in (
        "header_version", "api_key", "api_version", "correlation_id", "client_id", "header_tag_count",
        "error_offset", "deprecated", "removed_in_4x")})
    frame_columns["status"] = status
    frame_columns["status_name"] = _status_names(decoded["status"], kb.Status)
    if body == "json":
        frame_columns["body"] = decoded["body"]
    yield as_union("frame", frame_columns, n)

    # 3. Exchanges: the pairs, with sizes, statuses and error codes from the full decode.
    m = pairs.num_rows
    req_index = pa.array(np.where(has_request, request_row, 0).astype(np.int64), mask=~has_request)
    resp_index = pa.array(np.where(has_response, response_row, 0).astype(np.int64), mask=~has_response)
    requests = pa.table({name: decoded[name].take(req_index) for name in
                         ("api_key", "api_version", "status", "deprecated", "removed_in_4x")
                         + (("body",) if body == "json" else ())})
    response_status = decoded["status"].take(resp_index)
    if body == "json":
        response_bodies = decoded["body"].take(resp_index)
        error_codes = _error_codes(response_bodies)
        software_names, software_versions, problems = _software(requests)
    else:
        error_codes = pa.nulls(m, pa.int16())
        software_names = software_versions = problems = [None] * m
    yield as_union("exchange", {
        "capture": pairs["capture"], "connection_id": pairs["connection_id"],
        "correlation_id": pairs["correlation_id"], "api_key": pairs["api_key"],
        "api_version": pairs["api_version"], "client_id": pairs["client_id"],
        "pair_status": pairs["pair_status"].cast(pa.int16()),
        "pair_status_name": _status_names(pairs["pair_status"], kb.PairStatus),
        "request_sequence": pairs["request_sequence"], "response_sequence": pairs["response_sequence"],
        "request_ts_ns": pairs["request_ts_ns"], "response_ts_ns": pairs["response_ts_ns"],
        "latency_ns": pairs["latency_ns"],
        "request_status": requests["status"].cast(pa.int16()), "response_status": response_status.cast(pa.int16()),
        "request_size": frames["size"].take(req_index), "response_size": frames["size"].take(resp_index),
        "error_code": error_codes, "error_name": _error_names(error_codes),
        "deprecated": requests["deprecated"], "removed_in_4x": requests["removed_in_4x"],
        "client_software_name": pa.array(software_names, pa.string()),
        "client_software_version": pa.array(software_versions, pa.string()),
        "software_problems": pa.array(problems, pa.string()),
    }, m)

    # 4. Produce requests and Fetch responses, per topic-partition (record batch headers only).
    parts = kb.partitions(payload, directions=frames["direction"], request_api_keys=key_of,
                          request_api_versions=version_of)
    if parts.num_rows:
        rows = pa.array(parts["frame"].to_numpy().astype(np.int64))
        yield as_union("partition", {
            "capture": frames["capture"].take(rows), "connection_id": frames["connection_id"].take(rows),
            "direction": parts["direction"], "sequence": frames["sequence"].take(rows),
            "ts_first_ns": frames["ts_first_ns"].take(rows), "api_key": parts["api_key"],
            "api_version": decoded["api_version"].take(rows), "client_id": decoded["client_id"].take(rows),
            **{name: parts[name] for name in ("topic", "topic_id", "partition", "error_code", "batch_count",
                                              "record_count", "bytes", "compression", "producer_id",
                                              "records_error")},
        }, parts.num_rows)


def _pair(frames: pa.Table) -> pa.Table:
    """kproto.batch.pair, and its answer for frames without any response (requests only)."""
    import kproto.batch as kb

    directions = frames["direction"].to_numpy()
    if (directions == kb.RESPONSE).any() or frames.num_rows == 0:
        return kb.pair(frames)
    # No responses at all: every request is unpaired, or expects no response (acks=0).
    pairs = kb.pair(frames.slice(0, 0))   # the schema
    decoded = kb.decode_frames(frames["payload"])
    n = frames.num_rows
    status = np.full(n, kb.PairStatus.UNPAIRED_REQUEST, np.uint8)
    keys = decoded["api_key"].fill_null(-1).to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(keys == 0):
        if kb._acks_zero(frames["payload"][int(i)].as_py()):
            status[i] = kb.PairStatus.NO_RESPONSE_EXPECTED
    nulls = {name: pa.nulls(n, pairs.schema.field(name).type) for name in pairs.column_names}
    columns = dict(nulls, capture=frames["capture"], connection_id=frames["connection_id"],
                   correlation_id=decoded["correlation_id"], api_key=decoded["api_key"],
                   api_version=decoded["api_version"], client_id=decoded["client_id"].cast(pa.string()),
                   pair_status=pa.array(status), request_row=pa.array(np.arange(n, dtype=np.int64)),
                   request_sequence=frames["sequence"], request_ts_ns=frames["ts_first_ns"],
                   request_status=decoded["status"])
    return pa.table({name: columns[name] for name in pairs.column_names}, schema=pairs.schema)


def decode_raw_batches(batches: Iterable[pa.RecordBatch], *, body: str | None = "json"
                       ) -> Iterator[pa.RecordBatch]:
    """The grouping step: raw frames of whole connections (any order) to decoded union batches.

    Sequences are renumbered per (capture, connection, direction) in capture
    order, so frames of one connection read by several splits line up.
    """
    from kproto.capture import frame_schema

    tables = [pa.Table.from_batches([b]).select(list(RAW_COLUMNS)) for b in batches if b.num_rows]
    if not tables:
        return
    raw = pa.concat_tables(tables).combine_chunks()
    raw = raw.sort_by([("capture", "ascending"), ("connection_id", "ascending"), ("direction", "ascending"),
                       ("ts_first_ns", "ascending"), ("split_index", "ascending"), ("sequence", "ascending")])
    raw = raw.set_column(raw.schema.get_field_index("sequence"), "sequence",
                         pa.array(_renumber(raw), pa.int64()))
    frames = raw.select([f.name for f in frame_schema()]).cast(frame_schema())
    yield from decode_frames_table(frames, body=body)


def _renumber(raw: pa.Table) -> np.ndarray:
    """0, 1, 2... within each run of equal (capture, connection_id, direction) in a sorted table."""
    n = raw.num_rows
    changed = np.zeros(n, bool)
    changed[0] = True
    for name in ("capture", "connection_id", "direction"):
        column = raw[name]
        if pa.types.is_string(column.type):
            column = column.dictionary_encode().combine_chunks().indices
        values = column.to_numpy(zero_copy_only=False) if not isinstance(column, pa.ChunkedArray) \
            else column.combine_chunks().to_numpy(zero_copy_only=False)
        changed[1:] |= values[1:] != values[:-1]
    starts = np.maximum.accumulate(np.where(changed, np.arange(n), 0))
    return np.arange(n) - starts

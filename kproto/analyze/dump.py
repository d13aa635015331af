"""Frames of a capture as records, streamed: what ``kproto dump`` writes (docs/dump.md).

Memory stays flat whatever the input's size: frames are read in batches
(:class:`kproto.arrow.capture.CaptureReader`, or chunks of a size-prefixed frame
dump), each batch is decoded with :mod:`kproto.arrow.frames`, turned into records and
dropped. What is kept from one batch to the next are the requests still waiting
for their response (:class:`kproto.arrow.exchanges.OpenRequests`), so that a response is decoded with
its request's API and version.

::

    from kproto.analyze.dump import Filters, records

    source = Input("broker.pcap")
    for record in records(source, Filters(apis={3})):     # dicts, one per frame
        ...
    source.error        # None, or an InputProblem: where reading stopped and why
"""

from __future__ import annotations

import io
import os
import re
import sys
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

import kproto.arrow.frames as kb
from kproto import versions
from kproto._common.capture import PCAP_FILE_MAGICS, PCAPNG_FILE_MAGIC
from kproto._tree import tree_of
from kproto.arrow.capture import DEFAULT_BROKER_PORTS, CaptureReader, frame_schema, not_captured, read_frame_file
from kproto.arrow.credentials import redact_bodies
from kproto.arrow.exchanges import MAX_OPEN_REQUESTS, OpenRequests
from kproto.errors import FrameTooLargeError, TruncatedError
from kproto.limits import DEFAULT_MAX_FRAME_SIZE

__all__ = [
    "Input",
    "InputProblem",
    "Filters",
    "OpenRequests",
    "records",
    "record_batches",
    "FRAME_DUMP_CHUNK",
    "MAX_OPEN_REQUESTS",
]

PCAP_MAGICS = tuple(PCAP_FILE_MAGICS)
PCAPNG_MAGIC = PCAPNG_FILE_MAGIC
FRAME_DUMP_CHUNK = 4 * 1024 * 1024  # the most read at once (a read returns what has arrived)
#: Seconds between looks at a followed file's end (``--follow``): a new frame is printed within this.
FOLLOW_INTERVAL = 0.05
STATUS_NAMES = {int(s): s.name for s in kb.Status}
#: An ``error_code`` field and its value in the batch decoder's JSON (compact: no spaces).
_ERROR_CODE_FIELD = re.compile(r'"error_code":(-?\d+)')


@dataclass
class InputProblem:
    """Why an input was not read completely: where (byte offset in the input), which kind, why."""

    capture: str
    offset: int
    category: str
    reason: str

    def __str__(self) -> str:
        return f"{self.capture}: byte offset {self.offset:,}: {self.category}: {self.reason}"


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were already read (to tell its format): those, then the rest.

    A read returns what has arrived (``read1``), never waiting for a full block, so that
    a pipe that stays open (``tcpdump -U -w - | kproto dump -``) is decoded as it comes.
    """

    def __init__(self, head: bytes, rest: Any) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            return head
        if size is None or size < 0:
            return self._rest.read()
        return self._rest.read1(size)


class _Following(io.RawIOBase):
    """A growing file read as a stream that never ends (``--follow``): at the end of what
    was written so far, wait ``interval`` seconds and look again, until interrupted."""

    def __init__(self, handle: io.BufferedIOBase, interval: float = FOLLOW_INTERVAL) -> None:
        self._handle = handle
        self._interval = interval

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self.read1(size)

    def read1(self, size: int = -1) -> bytes:
        while True:
            data = self._handle.read1(size if size is not None and size > 0 else FRAME_DUMP_CHUNK)
            if data:
                return data
            time.sleep(self._interval)


def _first_frame_end(pending: bytearray, max_frame_size: int) -> int:
    """How many bytes the first size-prefixed frame of ``pending`` needs (4 until its size is known;
    a size that is no frame's is for the frame reader to refuse now, so it needs nothing more)."""
    if len(pending) < 4:
        return 4
    size = int.from_bytes(pending[:4], "big", signed=True)
    return 4 + size if 0 <= size <= max_frame_size else 0


def _read_head(handle: Any, count: int) -> bytes:
    head = b""
    while len(head) < count:
        more = handle.read1(count - len(head))
        if not more:
            break
        head += more
    return head


class Input:
    """One input (a path, or ``"-"`` for stdin): its frames in the kproto.arrow.capture shape.

    pcap and pcapng go through :class:`~kproto.arrow.capture.CaptureReader`; anything
    else is read as size-prefixed frames back to back (one pseudo-connection of
    requests, no timestamps, as ``kproto analyze`` reads it). Iterate once; then
    ``error`` is None or the :class:`InputProblem` where reading stopped.
    """

    def __init__(
        self,
        path: str,
        *,
        broker_ports: tuple[int, ...] = DEFAULT_BROKER_PORTS,
        kafka_ports: tuple[int, ...] = (),
        batch_frames: int = 65536,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        follow: bool = False,
    ) -> None:
        self.path = path
        self.name = "<stdin>" if path == "-" else os.fspath(path)
        self.broker_ports = tuple(broker_ports)
        self.kafka_ports = tuple(kafka_ports)
        #: After iteration: the connections that are not Kafka, per kind: (count, bytes, server ports).
        self.other_protocols: dict[str, tuple[int, int, list[int]]] = {}
        self.batch_frames = batch_frames
        self.max_frame_size = max_frame_size
        self.follow = follow and path != "-"  # stdin is read as it comes anyway
        self.format: str | None = None
        self.error: InputProblem | None = None
        #: Bytes of the capture's TCP streams lost ("gap_bytes" in "gaps", never captured;
        #: "snapped_bytes", cut off by the snap length) or not framed ("skipped_bytes",
        #: "tail_bytes"), summed over the Kafka connections and directions, once read.
        self.losses: dict[str, int] = {}
        #: After iteration: the snap lengths that cut packets' TCP payload (kproto.arrow.capture.CaptureReader.snap_lengths).
        self.snap_lengths: list[int] = []
        self.bytes_read = 0
        self.frames_read = 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        handle: Any = sys.stdin.buffer if self.path == "-" else open(self.path, "rb")
        try:
            stream: Any = _Following(handle) if self.follow else handle
            head = _read_head(stream, 4)
            if not head:
                self.error = InputProblem(self.name, 0, "not_a_capture", "empty input (0 bytes): nothing to read")
                return
            if head in PCAP_MAGICS or head == PCAPNG_MAGIC:
                self.format = "pcapng" if head == PCAPNG_MAGIC else "pcap"
                if self.path == "-" or self.follow:
                    source: Any = _Prefixed(head, stream)
                else:  # the reader maps the file itself
                    handle.close()
                    source = self.path
                batches = self._capture(source)
            else:
                self.format = "frames"
                batches = self._frame_dump(_Prefixed(head, stream))
            for batch in batches:
                self.frames_read += batch.num_rows
                yield batch
        finally:
            if handle is not sys.stdin.buffer:
                handle.close()

    def _capture(self, source: Any) -> Iterator[pa.RecordBatch]:
        reader = CaptureReader(
            source,
            name=self.name,
            broker_ports=self.broker_ports,
            kafka_ports=self.kafka_ports,
            on_error="keep",
            batch_frames=self.batch_frames,
            max_frame_size=self.max_frame_size,
        )
        for batch in reader:
            yield with_addresses(batch, reader.endpoints)
        self.snap_lengths = reader.snap_lengths
        connections = reader.connections().to_pylist()
        self.losses = {
            name: sum(
                row[side + name] for row in connections if row["kind"] == "kafka" for side in ("request_", "response_")
            )
            for name in ("gaps", "gap_bytes", "snapped_bytes", "skipped_bytes", "tail_bytes")
        }
        self.other_protocols = other_protocols(connections)
        stopped = reader.error
        counters = reader.counters
        self.bytes_read = counters["input_bytes"]
        if stopped is not None:
            self.error = InputProblem(self.name, stopped.offset or 0, stopped.category, stopped.reason)
        elif counters["trailing_bytes"]:
            left = counters["trailing_bytes"]
            self.error = InputProblem(
                self.name,
                counters["input_bytes"] - left,
                "truncated_record",
                f"incomplete record: {left} bytes at the end of the file",
            )

    def _frame_dump(self, handle: BinaryIO | io.RawIOBase) -> Iterator[pa.RecordBatch]:
        """Size-prefixed frames, as they arrive; a frame a read cuts short waits for the rest.

        The bytes of a cut frame are only looked at again once its size has arrived, so a
        large frame coming in small reads is not scanned over and over.
        """
        pending = bytearray()  # bytes read and not yet taken as frames
        base = 0  # the input offset of pending's first byte
        sequence = 0
        while True:
            chunk = handle.read(FRAME_DUMP_CHUNK)
            pending += chunk
            self.bytes_read = base + len(pending)
            if chunk and len(pending) < _first_frame_end(pending, self.max_frame_size):
                continue
            data = bytes(pending)
            used = len(data)
            try:
                for frames in read_frame_file(data, max_frame_size=self.max_frame_size, batch_frames=self.batch_frames):
                    yield self._as_capture_frames(frames, sequence)
                    sequence += frames.num_rows
            except TruncatedError as exc:
                used = exc.offset or 0
            except FrameTooLargeError as exc:
                offset = base + (exc.offset or 0)
                category = "not_a_capture" if offset == 0 else "bad_frame_size"
                reason = (
                    exc.reason
                    if offset
                    else (
                        f"neither a pcap or pcapng file nor size-prefixed frames "
                        f"(first bytes 0x{data[:4].hex()}: {exc.reason})"
                    )
                )
                self.error = InputProblem(self.name, offset, category, reason)
                return
            del pending[:used]
            base += used
            if not chunk:
                break
        if pending:
            self.error = InputProblem(
                self.name,
                base,
                "not_a_capture" if base == 0 else "truncated_record",
                f"incomplete frame: {len(pending)} bytes at the end of the input",
            )

    def _as_capture_frames(self, frames: pa.RecordBatch, sequence: int) -> pa.RecordBatch:
        n = frames.num_rows
        return pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar(self.name, pa.string()), n),
                pa.array(np.zeros(n, np.int64)),
                pa.array(np.zeros(n, np.int8)),
                pa.array(np.arange(sequence, sequence + n, dtype=np.int64)),
                pa.nulls(n, pa.int64()),
                pa.nulls(n, pa.int64()),
                frames["size"],
                frames["payload"],
            ],
            schema=frame_schema(),
        )


def address(ip: str, port: int) -> str:
    """``IP:port``, an IPv6 address in brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def with_addresses(frames: pa.RecordBatch, endpoints: dict[int, dict]) -> pa.RecordBatch:
    """The frames with ``client`` and ``broker`` columns (``IP:port``) from the capture
    reader's endpoints, which it knows from each connection's first frame."""
    ids, index = np.unique(frames["connection_id"].to_numpy(), return_inverse=True)
    known = [endpoints.get(int(i)) for i in ids]
    client = [None if e is None else address(e["client_ip"], e["client_port"]) for e in known]
    broker = [None if e is None else address(e["server_ip"], e["server_port"]) for e in known]
    return frames.append_column("client", pa.array(np.array(client, dtype=object)[index], pa.string())).append_column(
        "broker", pa.array(np.array(broker, dtype=object)[index], pa.string())
    )


@dataclass
class Filters:
    """Which frames to show; an empty set means any. A response matches the API, version and
    client id of its request."""

    apis: set[int] = field(default_factory=set)
    api_versions: set[int] = field(default_factory=set)
    client_ids: set[str] = field(default_factory=set)
    connections: set[int] = field(default_factory=set)
    direction: int | None = None  # kb.REQUEST or kb.RESPONSE
    status: str | None = None  # "ok" or "error": the frame decoded, or not
    error_codes: set[int] = field(default_factory=set)  # Kafka error codes a body holds (any depth)

    def header_mask(
        self, frames: pa.RecordBatch, api_key: np.ndarray, api_version: np.ndarray, client_id: np.ndarray
    ) -> np.ndarray:
        """The frames that pass every filter that needs no body."""
        keep = np.ones(frames.num_rows, bool)
        if self.apis:
            keep &= np.isin(api_key, list(self.apis))
        if self.api_versions:
            keep &= np.isin(api_version, list(self.api_versions))
        if self.client_ids:
            keep &= np.array([c in self.client_ids for c in client_id.tolist()], bool)
        if self.connections:
            keep &= np.isin(frames["connection_id"].to_numpy(), list(self.connections))
        if self.direction is not None:
            keep &= frames["direction"].to_numpy() == self.direction
        return keep

    def status_mask(self, status: np.ndarray) -> np.ndarray:
        if self.status is None:
            return np.ones(len(status), bool)
        return (status == kb.Status.OK) == (self.status == "ok")

    def error_mask(self, bodies: pa.Array) -> np.ndarray:
        """The frames whose body holds an ``error_code`` field (top level or nested) of ``error_codes``."""
        if not self.error_codes:
            return np.ones(len(bodies), bool)
        return np.array(
            [
                body is not None and any(int(code) in self.error_codes for code in _ERROR_CODE_FIELD.findall(body))
                for body in bodies.to_pylist()
            ],
            bool,
        )


def other_protocols(connections: list[dict]) -> dict[str, tuple[int, int, list[int]]]:
    """Connection rows that are not Kafka, per kind: (connections, bytes, server ports)."""
    kinds: dict[str, tuple[int, int, list[int]]] = {}
    for row in connections:
        if row["kind"] == "kafka":
            continue
        count, size, ports = kinds.get(row["kind"], (0, 0, []))
        kinds[row["kind"]] = (
            count + 1,
            size + row["request_other_bytes"] + row["response_other_bytes"],
            sorted(set(ports) | {row["server_port"]}),
        )
    return kinds


def record_batches(
    source: Input,
    filters: Filters | None = None,
    *,
    records: str = "summary",
    show_credentials: bool = False,
) -> Generator[tuple[pa.RecordBatch, pa.RecordBatch, np.ndarray], None, None]:
    """Per batch of ``source``: (frames, decoded, client ids) of the frames ``filters`` keep.

    ``decoded`` is ``kb.decode_frames(..., body="json")`` of those frames, responses
    with their request's API and version, credentials redacted (kproto.arrow.credentials)
    unless ``show_credentials``; ``client ids`` those of the requests.
    """
    filters = filters or Filters()
    open_requests = OpenRequests()
    for frames in source:
        if not frames.num_rows:
            continue
        directions = frames["direction"].to_numpy()
        headers = kb.decode_frames(frames["payload"], directions=directions, client_ids="string")  # read as str
        api_key, api_version, client_id = open_requests.match(frames, headers)
        keep = filters.header_mask(frames, api_key, api_version, client_id)
        if not keep.all():
            mask = pa.array(keep)
            frames, directions = frames.filter(mask), directions[keep]
            api_key, api_version, client_id = api_key[keep], api_version[keep], client_id[keep]
        if not frames.num_rows:
            continue
        decoded = kb.decode_frames(
            frames["payload"],
            directions=directions,
            request_api_keys=api_key,
            request_api_versions=api_version,
            body="json",
            records=records,
            body_fields="version",
        )  # a body shows what its version has
        status = not_captured(frames, decoded["status"])
        if status is not decoded["status"]:
            decoded = decoded.set_column(decoded.schema.get_field_index("status"), "status", status)
        if not show_credentials:
            decoded = decoded.set_column(
                decoded.schema.get_field_index("body"), "body", redact_bodies(api_key, decoded["body"])
            )
        keep = filters.status_mask(decoded["status"].to_numpy()) & filters.error_mask(decoded["body"])
        if not keep.all():
            mask = pa.array(keep)
            frames, decoded, client_id = frames.filter(mask), decoded.filter(mask), client_id[keep]
        if frames.num_rows:
            yield frames, decoded, client_id


def warm_up() -> None:
    """Pay the one-time costs of the first batch now, before a live input's first frame arrives:
    pyarrow imports pandas the first time it converts a numpy array (when pandas is installed)
    and its dataset modules when pairing first filters a table, about a second together. The
    whole path runs once on an ApiVersions v0 request and its response, and the output is dropped."""
    request = b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff"  # ApiVersions v0, correlation id 1, no client id
    response = b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00"  # correlation id 1, error 0, no APIs
    data = b"".join(len(p).to_bytes(4, "big") + p for p in (request, response))
    (frames,) = read_frame_file(data)
    batch = Input("<warm-up>")._as_capture_frames(frames, 0).to_pydict()
    batch["direction"] = [kb.REQUEST, kb.RESPONSE]
    batch["connection_id"] = [0, 0]
    batch["sequence"] = [0, 0]
    for found in record_batches([pa.RecordBatch.from_pydict(batch, schema=frame_schema())]):  # type: ignore[arg-type]
        jsonl_lines(*found)


def records(
    source: Input, filters: Filters | None = None, *, records: str = "summary", show_credentials: bool = False
) -> Iterator[dict]:
    """One dict per frame (the shape of ``kproto dump --format jsonl``; the body parsed)."""
    import json

    for frames, decoded, client_id in record_batches(
        source, filters, records=records, show_credentials=show_credentials
    ):
        for line in jsonl_lines(frames, decoded, client_id):
            yield json.loads(line)


# ------------------------------------------------------------------ output
_API_NAMES: dict[int, str] = {}


def api_name(api_key: int) -> str:
    name = _API_NAMES.get(api_key)
    if name is None:
        name = _API_NAMES[api_key] = versions.api_name(api_key)
    return name


def _columns(frames: pa.RecordBatch, decoded: pa.RecordBatch, client_id: np.ndarray) -> dict[str, list]:
    return {
        "capture": frames["capture"].to_pylist(),
        "connection": frames["connection_id"].to_pylist(),
        # from a capture (kproto.arrow.capture.CaptureReader.endpoints); a frame dump has no addresses
        "client": frames["client"].to_pylist() if "client" in frames.schema.names else [None] * frames.num_rows,
        "broker": frames["broker"].to_pylist() if "broker" in frames.schema.names else [None] * frames.num_rows,
        "direction": frames["direction"].to_pylist(),
        "sequence": frames["sequence"].to_pylist(),
        "ts_first_ns": frames["ts_first_ns"].to_pylist(),
        "ts_last_ns": frames["ts_last_ns"].to_pylist(),
        "size": frames["size"].to_pylist(),
        "api_key": decoded["api_key"].to_pylist(),
        "api_version": decoded["api_version"].to_pylist(),
        "correlation_id": decoded["correlation_id"].to_pylist(),
        "client_id": client_id.tolist(),
        "status": decoded["status"].to_pylist(),
        "error_offset": decoded["error_offset"].to_pylist(),
        "body": decoded["body"].to_pylist(),
    }


def jsonl_lines(frames: pa.RecordBatch, decoded: pa.RecordBatch, client_id: np.ndarray) -> list[str]:
    """The JSON Lines of a batch, one per frame (each ends with a newline).

    The body is the batch decoder's JSON text, put in as it is.
    """
    import json

    c = _columns(frames, decoded, client_id)
    text: dict[Any, str] = {None: "null"}  # JSON of strings seen in this batch

    def quoted(value: Any) -> str:
        found = text.get(value)
        if found is None:
            found = text[value] = json.dumps(value, ensure_ascii=False)
        return found

    def number(value: int | None) -> str:
        return "null" if value is None else str(value)

    lines = []
    for i in range(len(c["size"])):
        key = c["api_key"][i]
        lines.append(
            f'{{"capture":{quoted(c["capture"][i])},"connection":{c["connection"][i]},'
            f'"client":{quoted(c["client"][i])},"broker":{quoted(c["broker"][i])},'
            f'"direction":"{"response" if c["direction"][i] == kb.RESPONSE else "request"}",'
            f'"sequence":{c["sequence"][i]},"ts_first_ns":{number(c["ts_first_ns"][i])},'
            f'"ts_last_ns":{number(c["ts_last_ns"][i])},"size":{c["size"][i]},'
            f'"header":{{"api_key":{number(key)},"api":{"null" if key is None else quoted(api_name(key))},'
            f'"api_version":{number(c["api_version"][i])},"correlation_id":{number(c["correlation_id"][i])},'
            f'"client_id":{quoted(c["client_id"][i])}}},'
            f'"status":"{STATUS_NAMES[c["status"][i]]}","error_offset":{number(c["error_offset"][i])},'
            f'"body":{c["body"][i] or "null"}}}\n'
        )
    return lines


def tree_lines(frames: pa.RecordBatch, decoded: pa.RecordBatch, client_id: np.ndarray) -> list[str]:
    """The same records as readable indented text, one block per frame."""
    import json
    from datetime import datetime, timezone

    c = _columns(frames, decoded, client_id)
    out = []
    for i in range(len(c["size"])):
        direction = "response" if c["direction"][i] == kb.RESPONSE else "request"
        key = c["api_key"][i]
        api = f"{api_name(key)}({key}) v{c['api_version'][i]}" if key is not None else "unknown API"
        addresses = f" ({c['client'][i]} -> {c['broker'][i]})" if c["client"][i] is not None else ""
        out.append(
            f"{c['capture'][i]}  connection {c['connection'][i]}{addresses}  {direction} #{c['sequence'][i]}  {api}\n"
        )
        ts = c["ts_first_ns"][i]
        if ts is not None:
            when = datetime.fromtimestamp(ts // 1_000_000_000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
            span = (c["ts_last_ns"][i] - ts) / 1000
            out.append(f"  time            {when}.{ts % 1_000_000_000:09d}Z (+{span:g} µs to the last byte)\n")
        out.append(f"  size            {c['size'][i]}\n")
        out.append(f"  correlation_id  {c['correlation_id'][i]}\n")
        if c["client_id"][i] is not None:
            out.append(f"  client_id       {c['client_id'][i]!r}\n")
        status = STATUS_NAMES[c["status"][i]]
        if c["error_offset"][i] is not None:
            status += f" at byte {c['error_offset'][i]}"
        out.append(f"  status          {status}\n")
        if c["body"][i] is not None:
            out.append("  body\n")
            out.extend(tree_of(json.loads(c["body"][i]), "    "))
        out.append("\n")
    return out

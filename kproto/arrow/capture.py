"""Captured Kafka traffic (pcap / pcapng) to Kafka frames, as Arrow batches.

>>> from kproto.arrow.capture import CaptureReader
>>> reader = CaptureReader("traffic.pcapng", broker_ports=[9092])
>>> for batch in reader:              # pyarrow.RecordBatch of frames
...     ...
>>> reader.connections()              # pyarrow.Table: one row per TCP connection
>>> reader.counters                   # capture-level accounting

Files are memory-mapped (so captures larger than RAM work); pipes, sockets and
``"-"`` (stdin) are read in chunks. Every packet and every byte is accounted
for: see ``docs/capture.md`` for the columns and counters. A record that cannot
be framed (an oversized or malformed pcap record or pcapng block, a file that is
no capture) stops the reading there: the frames before it are delivered, the
rest of the input is counted as ``unread_bytes``, and ``CaptureReader.error``
says where and why (``on_error="raise"``, the default, then raises it).

Frame columns (``FRAME_SCHEMA``):

* ``capture``: the capture's name (file path, or the name given).
* ``connection_id``: int64, numbered per capture in order of first packet.
* ``direction``: int8, 0 = request (client to broker), 1 = response.
* ``sequence``: int64, the frame's index within its connection and direction:
  requests and responses pair up in this order.
* ``ts_first_ns`` / ``ts_last_ns``: int64 capture timestamps (ns since the epoch)
  of the segments that carried the frame's first and last byte.
* ``size``: int32, the frame's size prefix.
* ``payload``: binary, the frame without its 4-byte size prefix (``size`` bytes; fewer
  when the capture did not hold all of it: a snap length or a gap cut it, see
  :func:`not_captured`).
"""

from __future__ import annotations

import functools
import io
import mmap
import os
import sys
from collections.abc import Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

from kproto import _impl
from kproto._common.capture import CONNECTION_COLUMNS, DIRECTION_REQUEST, DIRECTION_RESPONSE, FRAME_COLUMNS
from kproto._common.capture_engine import CaptureEngine
from kproto.errors import CorruptCaptureError
from kproto.limits import DEFAULT_MAX_FRAME_SIZE as _DEFAULT_MAX_FRAME_SIZE

if TYPE_CHECKING:  # the public functions' types, for mypy --strict in user programs
    import pyarrow as pa

__all__ = [
    "Capture",
    "CaptureReader",
    "Chunks",
    "read_capture",
    "read_frame_file",
    "request_versions",
    "not_captured",
    "frame_schema",
    "connection_schema",
    "frame_file_schema",
    "DIRECTION_REQUEST",
    "DIRECTION_RESPONSE",
    "ERROR_CATEGORIES",
    "DEFAULT_BROKER_PORTS",
]

#: Why a capture stopped being read before its end (CorruptCaptureError.category), and
#: the other ways its bytes go unread, as the ``errors`` table of ``kproto analyze`` names them.
ERROR_CATEGORIES = {
    "not_a_capture": "neither pcap, pcapng nor size-prefixed frames",
    "oversized_record": "a pcap record or pcapng block above kproto.limits.CAPTURE_MAX_RECORD_SIZE",
    "bad_block": "a pcapng block whose length or contents cannot be framed",
    "truncated_record": "an incomplete record (or frame, in a frame dump) at the end of the input",
    "bad_frame_size": "a frame dump's size prefix that is negative or above the frame size limit",
    "read_failed": "the input could not be read (an I/O error, or an error of kproto itself)",
    "changed_after_read": "a followed file that grew or changed after it was read as closed (analyze --follow)",
}
DEFAULT_BROKER_PORTS = (9092,)
# Keys the broker-api-versions table knows but that have no message definitions
# yet: plausible, with versions up to this.
_UNDEFINED_KEY_MAX_VERSION = 10
_CHUNK = 4 * 1024 * 1024
_WINDOW = 16 * 1024 * 1024  # bytes of a file mapped at once


class Chunks:
    """A capture handed over in consecutive pieces (bytes-like), read without copying them.

    For ranges of memory-mapped files and other sources already in memory: only
    the bytes of a record that one piece cuts short are carried into the next.
    The pieces are pulled one at a time, after everything before them was read.
    """

    def __init__(self, pieces: Iterable) -> None:
        self.pieces = pieces


Source = str | os.PathLike | bytes | bytearray | memoryview | BinaryIO | Chunks


def request_versions() -> list[int]:
    """Highest plausible request version per api_key (list index); -1 for unknown keys.

    From the generated protocol facts: request messages' valid versions, widened by
    the broker-release table (which also knows keys without definitions).
    """
    return list(_request_versions())


@functools.lru_cache(maxsize=1)
def _request_versions() -> tuple[int, ...]:
    # computed once: a reader per small capture must not walk the schema each time
    from kproto.schema import MESSAGES
    from kproto.versions import broker_api_versions

    highest: dict[int, int] = {}
    for message in MESSAGES.values():
        if message["type"] == "request":
            key = message["api_key"]
            highest[key] = max(highest.get(key, -1), message["valid_versions"][1])
    for _release, key, _low, high in broker_api_versions():
        if key not in highest:
            highest[key] = _UNDEFINED_KEY_MAX_VERSION
        highest[key] = max(highest[key], high)
    table = [-1] * (max(highest) + 1)
    for key, high in highest.items():
        table[key] = high
    return tuple(table)


def _pa():
    """pyarrow, once numpy is known to be there too: the engines hand their columns over as numpy arrays."""
    try:
        import numpy  # noqa: F401
        import pyarrow
    except ImportError as exc:
        from kproto._extras import install_hint

        raise ImportError(
            f"kproto.arrow.capture needs numpy and pyarrow ({exc.name} is missing): {install_hint('arrow')}",
            name=exc.name,
        ) from exc
    return pyarrow


@functools.lru_cache(maxsize=1)
def frame_schema() -> pa.Schema:
    pa = _pa()
    types = {
        "connection_id": pa.int64(),
        "direction": pa.int8(),
        "sequence": pa.int64(),
        "ts_first_ns": pa.int64(),
        "ts_last_ns": pa.int64(),
        "size": pa.int32(),
        "payload": pa.binary(),
    }
    return pa.schema([("capture", pa.string())] + [(name, types[name]) for name in FRAME_COLUMNS])


@functools.lru_cache(maxsize=1)
def connection_schema() -> pa.Schema:
    pa = _pa()
    fields = [("capture", pa.string())]
    for name in CONNECTION_COLUMNS:
        if name in ("client_ip", "server_ip", "closed_by", "direction_source", "kind"):
            fields.append((name, pa.string()))
        elif name == "handshake_seen":
            fields.append((name, pa.bool_()))
        elif name.endswith("_port"):
            fields.append((name, pa.int32()))
        else:
            fields.append((name, pa.int64()))
    return pa.schema(fields)


def frame_file_schema() -> pa.Schema:
    pa = _pa()
    return pa.schema([("offset", pa.int64()), ("size", pa.int32()), ("payload", pa.binary())])


def not_captured(frames, status=None):
    """Where a capture's frames were not all captured: its payload is shorter than its
    size (the snap length cut its packets, or a gap cut it; see docs/capture.md).

    ``frames``: a batch or table with ``size`` and ``payload``. Without ``status``, a
    boolean numpy mask; with the decoder's ``status`` column of the same frames, that
    column with ``Status.NOT_CAPTURED`` in those rows (the decoder cannot tell: it sees
    only the payload, which ends early).
    """
    import numpy as np
    import pyarrow.compute as pc

    pa = _pa()
    lengths = pc.binary_length(frames["payload"])
    mask = pc.less(lengths, frames["size"].cast(lengths.type)).to_numpy(zero_copy_only=False).astype(bool)
    if status is None:
        return mask
    if not mask.any():
        return status
    from kproto._common.batch import Status

    if isinstance(status, pa.ChunkedArray):
        status = status.combine_chunks()
    values = np.where(mask, int(Status.NOT_CAPTURED), status.to_numpy(zero_copy_only=False))
    return pa.array(values, status.type)


class CaptureReader:
    """Reads one capture; iterate for frame batches, then ask for connections and counters.

    Args:
        source: a path, ``"-"`` for stdin, a binary file object, or bytes.
        name: the ``capture`` column's value (default: the path).
        broker_ports: ports of brokers; the other end sends requests. Without a
            match the direction comes from the SYN, else from the traffic itself.
        kafka_ports: ports whose connections are read as Kafka whatever they carry
            (and are broker ports too). The others give frames only once their
            frames confirm Kafka; TLS, ZooKeeper, HTTP and other protocols are
            counted by kind in the connections table (its ``kind`` column).
        max_frame_size: larger size prefixes are not frame boundaries.
        max_pending_bytes: out-of-order bytes held per connection direction before
            the missing bytes are declared lost.
        max_connections: connections tracked at once (memory is bounded by this).
        batch_frames, batch_bytes: frames / payload bytes per batch at most (a
            single larger frame makes its own batch).
        on_error: what a record that cannot be framed does once every frame
            before it was yielded: "raise" a DecodeError naming its offset, or
            "keep" going quietly (the caller reads ``error`` and ``counters``).
        implementation: "c", "py" or None (the active one).
    """

    def __init__(
        self,
        source: Source,
        *,
        name: str | None = None,
        broker_ports: Iterable[int] = DEFAULT_BROKER_PORTS,
        kafka_ports: Iterable[int] = (),
        max_frame_size: int = _DEFAULT_MAX_FRAME_SIZE,
        max_pending_bytes: int = 8 * 1024 * 1024,
        max_connections: int = 65536,
        batch_frames: int = 65536,
        batch_bytes: int = 64 * 1024 * 1024,
        on_error: str = "raise",
        implementation: str | None = None,
    ) -> None:
        if on_error not in ("raise", "keep"):
            raise ValueError(f"on_error must be 'raise' or 'keep', not {on_error!r}")
        self.source = source
        self.on_error = on_error
        if name is None:
            name = (
                "<stdin>"
                if source == "-"
                else (os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<memory>")
            )
        self.name = name
        _pa()  # a clear error naming the extra, before the engine's own imports fail
        module = _impl.load("capture", implementation)
        self._engine: CaptureEngine = module.Engine(
            request_versions(),
            broker_ports=tuple(broker_ports),
            kafka_ports=tuple(kafka_ports),
            max_frame_size=max_frame_size,
            max_pending_bytes=max_pending_bytes,
            max_connections=max_connections,
            batch_frames=batch_frames,
            batch_bytes=batch_bytes,
        )
        self._connections: list = []
        self._endpoints: dict[int, dict] = {}
        self._done = False
        self._input_bytes = 0

    # -------------------------------------------------------------- reading
    def __iter__(self) -> Iterator:
        if self._done:
            raise RuntimeError("a CaptureReader reads its source once")
        self._done = True
        source = self.source
        if isinstance(source, (bytes, bytearray, memoryview)):
            yield from self._from_buffer(memoryview(source))
        elif isinstance(source, Chunks):
            yield from self._from_chunks(source.pieces)
        elif isinstance(source, (str, os.PathLike)):
            if source == "-":
                yield from self._from_stream(sys.stdin.buffer)
            else:
                with open(source, "rb") as handle:
                    yield from self._from_file(handle)
        else:
            yield from self._from_file(source)
        if self.on_error == "raise" and self.error is not None:
            raise self.error

    def _from_file(self, handle) -> Iterator:
        try:
            size = os.fstat(handle.fileno()).st_size
            seekable = handle.seekable() and handle.tell() == 0
        except (OSError, AttributeError, io.UnsupportedOperation):
            size, seekable = 0, False
        if size > 0 and seekable:
            yield from self._from_mapped_file(handle.fileno(), size)
        else:
            yield from self._from_stream(handle)

    def _from_mapped_file(self, fileno: int, size: int) -> Iterator:
        """Map the file a window at a time, so resident memory stays bounded however big it is."""
        engine = self._engine
        self._input_bytes = size
        window = _WINDOW
        pos = 0
        while pos < size:
            base = pos - pos % mmap.ALLOCATIONGRANULARITY
            length = min(size - base, window)
            with mmap.mmap(fileno, length, offset=base, access=mmap.ACCESS_READ) as mapped:
                if hasattr(mapped, "madvise"):
                    mapped.madvise(mmap.MADV_SEQUENTIAL)
                view = memoryview(mapped)
                part = view[pos - base :]
                try:
                    used = engine.feed(part)
                finally:
                    part.release()
                    view.release()
            pos += used
            batch = self._batch()
            if batch is not None:
                yield batch
            if not used and not engine.batch_ready():
                if base + length >= size:
                    break  # an incomplete record at the end
                window *= 2  # a record larger than the window
        engine.finish(size - pos)
        yield from self._tail()

    def _feed(self, view: memoryview) -> Generator[Any, None, int]:
        """Feed ``view`` until the engine takes no more, yielding batches; returns the bytes used."""
        engine = self._engine
        pos = 0
        while True:
            part = view[pos:]
            used = engine.feed(part)
            part.release()
            pos += used
            batch = self._batch()
            if batch is not None:
                yield batch
            if not used and not engine.batch_ready():
                return pos  # the rest is a record cut short (or nothing)

    def _from_buffer(self, view: memoryview) -> Iterator:
        self._input_bytes = len(view)
        pos = yield from self._feed(view)
        self._engine.finish(len(view) - pos)
        yield from self._tail()

    def _from_chunks(self, pieces: Iterable) -> Iterator:
        carried = b""  # the start of a record cut by the end of the previous piece
        for piece in pieces:
            view = memoryview(bytes(carried) + bytes(piece)) if carried else memoryview(piece).cast("B")
            self._input_bytes += len(view) - len(carried)
            pos = yield from self._feed(view)
            carried = bytes(view[pos:])
            view.release()
        self._engine.finish(len(carried))
        yield from self._tail()

    def _from_stream(self, handle) -> Iterator:
        engine = self._engine
        pending = bytearray()
        eof = False
        while True:
            if not eof:
                chunk = handle.read(_CHUNK)
                if chunk:
                    pending += chunk
                    self._input_bytes += len(chunk)
                else:
                    eof = True
            while True:
                used = engine.feed(pending)
                del pending[:used]
                batch = self._batch()
                if batch is not None:
                    yield batch
                # The engine stops feeding when a batch is full: go on until it takes nothing more
                # (stopping once the batch was taken lost the rest of the last read at the end).
                if not used and not engine.batch_ready():
                    break
            if eof:
                break
        engine.finish(len(pending))
        yield from self._tail()

    def _tail(self) -> Iterator:
        while True:
            batch = self._batch()
            if batch is None:
                break
            yield batch
        self._connections.extend(self._engine.take_connections())

    def _batch(self):
        engine = self._engine
        self._connections.extend(engine.take_connections())
        for row in engine.take_endpoints():
            self._endpoints[row["connection_id"]] = row
        columns = engine.take_batch()
        if columns is None:
            return None
        pa = _pa()
        n = len(columns["size"])
        payload = pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(columns["payload_offsets"]), pa.py_buffer(columns["payload_data"])]
        )
        return pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar(self.name, pa.string()), n),
                pa.array(columns["connection_id"]),
                pa.array(columns["direction"]),
                pa.array(columns["sequence"]),
                pa.array(columns["ts_first_ns"]),
                pa.array(columns["ts_last_ns"]),
                pa.array(columns["size"]),
                payload,
            ],
            schema=frame_schema(),
        )

    # -------------------------------------------------------------- results
    def read_all(self) -> pa.Table:
        """All frames as one pyarrow.Table."""
        pa = _pa()
        return pa.Table.from_batches(list(self), schema=frame_schema())

    def connections(self) -> pa.Table:
        """Per-connection accounting (pyarrow.Table), complete once iteration ended."""
        pa = _pa()
        schema = connection_schema()
        rows = self._connections
        columns = [pa.array([self.name] * len(rows), pa.string())]
        columns += [pa.array([row[field.name] for row in rows], field.type) for field in list(schema)[1:]]
        return pa.Table.from_arrays(columns, schema=schema)

    def connections_so_far(self) -> list[dict]:
        """Every connection read so far, its counters as they are now: the closed ones as
        :meth:`connections` gives them, the open ones with ``closed_by`` None (a direction not known
        yet: side 0 as the client; ``kind`` None until decided). Asked between the pieces of a
        :class:`Chunks` source, it gives the counters at a byte position (kproto/analyze/spark/range_pipeline.py)."""
        self._connections.extend(self._engine.take_connections())
        return self._connections + self._engine.open_connection_rows()

    def mark_connections(self) -> None:
        """A mark at a byte position (a range's start): from now on, what is counted about bytes
        read before it (a reader that started inside a connection finds its frames late) is also
        counted apart, in :meth:`early_counts`."""
        self._engine.mark_open_connections()

    def early_counts(self) -> dict[int, dict]:
        """Connection id -> the frames, frame bytes and skipped bytes (``request_``/``response_``
        columns, as in its row) counted since the last :meth:`mark_connections` about bytes read
        before it, as they are now (asked at a later mark: the counts up to there)."""
        return self._engine.early_counts()

    @property
    def endpoints(self) -> dict[int, dict]:
        """Who talks on each connection that gave frames, known from its first frame on
        (its row in :meth:`connections` comes only once it closed): ``connection_id`` ->
        dict of ``connection_id``, ``client_ip``, ``client_port``, ``server_ip``,
        ``server_port``. Complete for the frames of every batch yielded so far."""
        return self._endpoints

    @property
    def snap_lengths(self) -> list[int]:
        """The snap lengths (the pcap header's, or the pcapng interfaces') of the packets
        whose TCP payload they cut, sorted; empty when no payload was cut."""
        return self._engine.snap_lengths()

    @property
    def counters(self) -> dict:
        """Capture-level accounting: packets read, skipped and why, connections.

        Once iteration ended, ``input_bytes == file_bytes + trailing_bytes + unread_bytes``.
        """
        counters = self._engine.capture_counters()
        counters["input_bytes"] = self._input_bytes
        return counters

    @property
    def error(self) -> CorruptCaptureError | None:
        """None, or a CorruptCaptureError for the record where reading stopped (its
        ``offset`` in the input, its ``category``); the bytes from there are ``unread_bytes``."""
        stopped = self._engine.error
        if stopped is None:
            return None
        category, reason, offset = stopped
        return CorruptCaptureError(reason, offset, category=category)


class Capture(NamedTuple):
    """A whole capture read at once: what a :class:`CaptureReader` gives at its end.

    A tuple, so ``frames, connections, counters = read_capture(path)`` keeps working.
    """

    #: pyarrow.Table of frames (``frame_schema()``): the reader's batches, concatenated.
    frames: Any
    #: pyarrow.Table, one row per TCP connection (``connection_schema()``).
    connections: Any
    #: Capture-level accounting (``CaptureReader.counters``).
    counters: dict


def read_capture(source: Source, **options) -> Capture:
    """Read a whole capture: a :class:`Capture` (frames and connections tables, counters).

    ``options`` are :class:`CaptureReader`'s.
    """
    reader = CaptureReader(source, **options)
    frames = reader.read_all()
    return Capture(frames, reader.connections(), reader.counters)


def read_frame_file(
    source: str | os.PathLike | bytes | bytearray | memoryview,
    *,
    max_frame_size: int = _DEFAULT_MAX_FRAME_SIZE,
    batch_frames: int = 65536,
    implementation: str | None = None,
) -> Iterator:
    """Batches (offset, size, payload) of a plain file of concatenated size-prefixed frames.

    ``offset`` is the frame's byte offset in the file: where its 4-byte size prefix
    starts (the payload follows at ``offset + 4``), as in kproto.arrow.frames.decode_frames
    and in the offsets errors name. A size prefix that is
    negative or above ``max_frame_size`` raises FrameTooLargeError / DecodeError
    naming its offset; an incomplete last frame raises TruncatedError.
    """
    from kproto.errors import FrameTooLargeError, TruncatedError

    pa = _pa()
    module = _impl.load("capture", implementation)
    schema = frame_file_schema()

    def batches(view: memoryview):
        """Yield batches; return the offset where whole frames end."""
        import numpy as np

        pos = 0
        while True:
            part = view[pos:]
            starts, sizes, used, error, data = module.scan_frames(part, max_frame_size, batch_frames)
            part.release()
            if len(sizes):
                offsets = np.zeros(len(sizes) + 1, dtype=np.int32)
                np.cumsum(sizes, out=offsets[1:])
                payload = pa.Array.from_buffers(
                    pa.binary(), len(sizes), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
                )
                # scan_frames gives where payloads start; a frame starts 4 bytes earlier, at its size.
                yield pa.RecordBatch.from_arrays(
                    [pa.array(starts + (pos - 4)), pa.array(sizes), payload], schema=schema
                )
            pos += used
            if error is not None:
                raise FrameTooLargeError(error, pos)
            if not len(sizes):
                return pos

    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source)
        end = yield from batches(view)
        if end != len(view):
            raise TruncatedError(f"incomplete frame: {len(view) - end} bytes left", end)
        return
    with open(source, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                end = yield from batches(view)
                if end != len(view):
                    raise TruncatedError(f"incomplete frame: {len(view) - end} bytes left", end)
            finally:
                view.release()

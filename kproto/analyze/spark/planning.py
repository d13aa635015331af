"""Planning the work: which files, in which byte ranges (*splits*), read how.

Runs in the driver when it sees the input files, else on the executors (the file
heads are read there), and in tests; nothing here imports pyspark. :func:`plan_file` looks at one input file and cuts it into splits:
a pcap larger than ``split_bytes`` is cut at record boundaries (found by
:func:`find_record_boundary`); each split owns the frames whose first byte was
captured in ``[ts_lo, ts_hi)`` and is read with some context before and overlap
after. Other files make one split. kproto/analyze/spark/worker.py reads them.
"""

from __future__ import annotations

import io
import json
import mmap
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyarrow import fs

from kproto._common.capture import PCAP_FILE_MAGICS, PCAPNG_FILE_MAGIC
from kproto.analyze.spark.capture_sets import (
    PCAP_HEADER_SIZE,
    PCAP_RECORD_HEADER,
    FileHead,
    plausible_window,
    read_head,
)
from kproto.analyze.spark.capture_sets import pcap_record as _pcap_record

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

DEFAULT_SPLIT_BYTES = 256 * 1024 * 1024
DEFAULT_OVERLAP_BYTES = 32 * 1024 * 1024

PCAP_MAGICS = PCAP_FILE_MAGICS  # first four bytes -> (byte order, nanosecond timestamps)
PCAPNG_MAGIC = PCAPNG_FILE_MAGIC
_BOUNDARY_CHAIN = 8  # consecutive valid record headers that make a boundary
_BOUNDARY_SEARCH = 4 * 1024 * 1024


# ---------------------------------------------------------------- inputs
@dataclass
class Split:
    """One unit of work: a whole file, or a byte range of a pcap."""

    path: str  # a local path or a URI (file:, hdfs:, s3a: ...)
    capture: str  # the ``capture`` column's value
    format: str  # pcap, pcapng, frames
    mode: str  # decode (whole file, or a range of a pcap) or raw (to the grouping step)
    split_index: int
    split_count: int
    start: int  # first byte of the range (records, after the pcap header)
    end: int  # byte after the range
    ts_lo: int  # owns frames with ts_lo <= ts_first_ns < ts_hi
    ts_hi: int
    overlap: int = DEFAULT_OVERLAP_BYTES
    context_start: int = -1  # a range is read from here (a record boundary before start): context only
    set_files: str = ""  # a capture set: JSON [[path, size], ...] of its files in capture order (set_reader.py)


SPLIT_FIELDS = (
    ("path", pa.string()),
    ("capture", pa.string()),
    ("format", pa.string()),
    ("mode", pa.string()),
    ("split_index", pa.int32()),
    ("split_count", pa.int32()),
    ("start", pa.int64()),
    ("end", pa.int64()),
    ("ts_lo", pa.int64()),
    ("ts_hi", pa.int64()),
    ("overlap", pa.int64()),
    ("context_start", pa.int64()),
    ("set_files", pa.string()),
)
SPLIT_SCHEMA = pa.schema(SPLIT_FIELDS)


def splits_to_batch(splits: list[Split]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([vars(s) for s in splits], schema=SPLIT_SCHEMA)


def local_path(path: str) -> str | None:
    """The local file a path or ``file:`` URI names; None for other schemes."""
    if "://" not in path and not path.startswith("file:"):
        return path
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return None


def shown_path(path: str) -> str:
    """How the tables name a file (``capture``, ``file``): the local path for ``file:`` URIs, else the URI."""
    local = local_path(path)
    return local if local is not None else path


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
        return memoryview(self._mapped)[offset : offset + count]

    def read(self, offset: int, count: int) -> bytes:
        count = max(0, min(count, self.size - offset))
        if self._mapped is not None:
            return self._mapped[offset : offset + count]
        if self._handle is not None:
            return b""
        return self._file.read_at(count, offset)

    def close(self) -> None:
        if self._mapped is not None:
            try:
                self._mapped.close()
            except BufferError:
                # Views of the map are still alive (a reader failure's traceback holds its frames):
                # the map is unmapped when the last goes. Raising here would replace the accounting
                # row that names the failure with a crash of the task.
                pass
            self._mapped = None
        if self._handle is not None:
            self._handle.close()


def detect_format(head: bytes) -> str:
    """pcap, pcapng or frames (size-prefixed frames back to back), from the first bytes."""
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    if head[:4] == PCAPNG_MAGIC:
        return "pcapng"
    return "frames"


def find_record_boundary(
    data: bytes, base: int, order: str, nanos: bool, snaplen: int, ts_window: tuple[int, int]
) -> tuple[int, int] | None:
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


def plan_file(
    path: str,
    size: int,
    *,
    capture: str | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    overlap: int = DEFAULT_OVERLAP_BYTES,
) -> list[Split]:
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
        whole = [
            Split(
                path,
                capture,
                fmt,
                "decode" if size <= split_bytes else "raw",
                0,
                1,
                0,
                size,
                INT64_MIN,
                INT64_MAX,
                0,
                0,
            )
        ]
        if fmt != "pcap" or size <= split_bytes or len(head) < PCAP_HEADER_SIZE:
            return whole
        order, nanos = PCAP_MAGICS[head[:4]]
        snaplen = struct.unpack_from(order + "I", head, 16)[0]
        first = _pcap_record(source.read(PCAP_HEADER_SIZE, PCAP_RECORD_HEADER), 0, order, nanos, snaplen)
        if first is None:
            return whole
        window = plausible_window(first[0])

        def boundary(offset: int) -> tuple[int, int] | None:
            return find_record_boundary(source.read(offset, _BOUNDARY_SEARCH), offset, order, nanos, snaplen, window)

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
            splits.append(
                Split(
                    path,
                    capture,
                    fmt,
                    "decode",
                    index,
                    count,
                    start,
                    points[index + 1][0] if index + 1 < count else size,
                    ts,
                    points[index + 1][1] if index + 1 < count else INT64_MAX,
                    overlap,
                    context,
                )
            )
        return splits
    finally:
        source.close()


def plan_set(name: str, files: list[tuple[str, int]], fmt: str, *, split_bytes: int = DEFAULT_SPLIT_BYTES) -> Split:
    """The one split of a capture set (its files as (path, size), in capture order): read by one task as
    one capture; decoded there when it is no larger than ``split_bytes``, else sent to the grouping step."""
    total = sum(size for _, size in files)
    return Split(
        files[0][0],
        name,
        fmt,
        "decode" if total <= split_bytes else "raw",
        0,
        1,
        0,
        total,
        INT64_MIN,
        INT64_MAX,
        0,
        0,
        json.dumps(files),
    )


def file_head(path: str, size: int) -> FileHead:
    """What set detection needs of one input file (kproto/analyze/spark/capture_sets.py); an unreadable file
    is a "frames" head (never in a set: its own task reports why it cannot be read)."""
    try:
        source = _Source(path)
    except OSError:
        return FileHead(path, size, "frames")
    try:
        return read_head(path, source.size, source.read)
    finally:
        source.close()


def range_bounds(split: Split, file_size: int) -> tuple[int, int]:
    """The file bytes ``[first, stop)`` a range's reader is fed after the pcap header: its context,
    the range and the overlap after it."""
    first = split.context_start if split.context_start >= 0 else split.start
    return first, min(file_size, split.end + split.overlap)


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
        self.pos, self.stop = range_bounds(split, source.size)
        self.marks = [(split.start, "start"), (split.end, "end")]
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
    pos, stop = range_bounds(split, source.size)
    for boundary, name in ((split.start, "start"), (split.end, "end")):
        if pos < boundary:
            yield source.view(pos, boundary - pos)
            pos = boundary
        on_mark(name)
    if pos < stop:
        yield source.view(pos, stop - pos)

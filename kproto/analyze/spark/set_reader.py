"""Reading a capture set (kproto/analyze/spark/capture_sets.py): its files as one capture, in one task.

The reader is fed the files one after the other - a pcap set as the first file's
header and every file's records, a pcapng set as the files themselves (a pcapng file
may hold several sections) - so connections and frames that cross a file boundary
are reassembled as in the unsplit capture. The reader's counters, taken at every
file boundary, give each file its own share of the byte accounting.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from kproto.analyze.spark import decode as D
from kproto.analyze.spark import worker as W
from kproto.analyze.spark.planning import PCAP_HEADER_SIZE, Split, _Source, shown_path
from kproto.arrow.capture import Chunks

_PIECE = 4 * 1024 * 1024  # bytes per read of a file that is not memory-mapped


def set_files(split: Split) -> list[tuple[str, int]]:
    """The files of a set split, (path, size as listed), in capture order."""
    return [(path, size) for path, size in json.loads(split.set_files)]


def process_set(
    split: Split,
    *,
    broker_ports: tuple[int, ...],
    body: str | None,
    records: str,
    sink: W.Sink,
    fail_fast: bool,
    kafka_ports: tuple[int, ...] = (),
    show_credentials: bool = False,
) -> Iterator[pa.RecordBatch]:
    """A set split: frames and exchanges to ``sink``; yields compact rows (raw frames when ``split.mode`` is raw)."""
    listed = set_files(split)
    sources: list[_Source | None] = []
    opened: list[tuple[str, int, BaseException]] = []
    for path, size in listed:
        try:
            sources.append(_Source(path))
        except OSError as exc:
            sources.append(None)
            opened.append((path, size, exc))
    try:
        readable = [(path, s) for (path, _), s in zip(listed, sources) if s is not None]
        marks: list[dict] = []
        holder: list[Any] = []
        segments: list[tuple[int, str, int]] = []  # (stream offset, path, file offset) of each file's bytes
        pieces = _stream(split.format, readable, segments, lambda: marks.append(dict(holder[0].counters)))
        fed_bytes = sum(source.size for _, source in readable) if split.mode == "decode" else None
        reader = W.capture_reader(
            Chunks(pieces), split.capture, broker_ports, W.one_batch_bytes(fed_bytes), kafka_ports
        )
        holder.append(reader)
        if split.mode == "decode":
            batches, failure = W.read_batches(iter(reader))
            rows = _accounting(split, readable, opened, reader, marks, segments, failure, fail_fast)
            yield from D.decode_and_summarize(
                W.frames_of(batches), body=body, sink=sink, records=records, show_credentials=show_credentials
            )
        else:
            failure = None
            try:
                for batch in reader:
                    yield W.raw_rows(batch, split)
            except Exception as exc:  # reported in the errors table, never lost in silence
                failure = exc
            rows = _accounting(split, readable, opened, reader, marks, segments, failure, fail_fast)
        yield from rows
    finally:
        for source in sources:
            if source is not None:
                source.close()


def _stream(fmt: str, files: list[tuple[str, _Source]], segments: list, mark) -> Iterator[Any]:
    """The bytes the reader is fed, file after file; ``mark()`` before each file's bytes, when the reader
    has read everything before them (the last file's share ends with the reader's final counters)."""
    position = 0
    for index, (path, source) in enumerate(files):
        mark()
        begin = PCAP_HEADER_SIZE if fmt == "pcap" and index else 0
        segments.append((position, path, begin))
        for offset in range(begin, source.size, _PIECE if not source.mapped else max(1, source.size)):
            count = min(source.size - offset, _PIECE) if not source.mapped else source.size - offset
            yield source.view(offset, count) if source.mapped else source.read(offset, count)
        position += source.size - begin


def _accounting(
    split: Split,
    files: list[tuple[str, _Source]],
    opened: list[tuple[str, int, BaseException]],
    reader: Any,
    marks: list[dict],
    segments: list,
    failure: BaseException | None,
    fail_fast: bool,
) -> list[pa.RecordBatch]:
    """One accounting row per file (its own share of the counters, its errors) and the set's connections."""
    final = reader.counters
    stopped = reader.error
    stop_at = None  # the stream offset where reading stopped
    if stopped is not None:
        stop_at = stopped.offset
    elif failure is not None:
        stop_at = final["file_bytes"]
    names = [name for name in final if isinstance(final[name], int)]
    # Bytes of a file's last record the reader had not finished when the next file began (a record the
    # head check did not see cut): read on into the next file, they are counted in their own file.
    carried = (
        [0]
        + [
            max(0, segments[i][0] - marks[i]["file_bytes"] - marks[i]["unread_bytes"])
            if i < len(marks) and stop_at is None
            else 0
            for i in range(1, len(files))
        ]
        + [0]
    )
    rows = []
    first_error = None
    for index, (path, source) in enumerate(files):
        begin = marks[index] if index < len(marks) else None
        end = marks[index + 1] if index + 1 < len(marks) else (final if begin is not None else None)
        counters: dict[str, Any] = {
            name: (end[name] - begin.get(name, 0)) if begin is not None and end is not None else 0 for name in names
        }
        counters["input_bytes"] = source.size
        counters["file_bytes"] += carried[index + 1] - carried[index]
        stream_start = segments[index][0] if index < len(segments) else None
        skipped_header = split.format == "pcap" and index > 0
        reached = stream_start is not None and (stop_at is None or stop_at >= stream_start)
        if skipped_header:
            # Its header was checked against the first file's (the set's planning), not fed again.
            counters["file_bytes" if reached else "unread_bytes"] += PCAP_HEADER_SIZE
        if stop_at is not None:
            W.count_unreached(counters)
        errors = _file_errors(path, source.size, index, segments, counters, stopped, failure, stop_at)
        if carried[index + 1]:
            errors.append(
                W.error_entry(
                    "truncated_record",
                    source.size - carried[index + 1],
                    f"incomplete record: {carried[index + 1]} bytes at the end of the file, read "
                    "on into the next file of its capture set",
                    0,
                )
            )
        counters["errors"] = errors
        counters["snap_lengths"] = reader.snap_lengths  # the report's "snaplen N"
        first_error = first_error or (errors[0] if errors else None)
        info = dict(counters, split_index=0, split_count=1, format=split.format, file=shown_path(path))
        rows.append(W.capture_row(split, info))
    for path, size, exc in opened:
        # A file of the set that could not be opened: the files around it are read on (a connection that
        # crossed it shows the missing bytes as a gap).
        error = W.error_entry("read_failed", 0, f"{type(exc).__name__}: {exc}", size)
        first_error = first_error or error
        info = {
            "input_bytes": size,
            "file_bytes": 0,
            "trailing_bytes": 0,
            "unread_bytes": size,
            "errors": [error],
            "split_index": 0,
            "split_count": 1,
            "format": split.format,
            "file": shown_path(path),
        }
        rows.append(W.capture_row(split, info))
    if fail_fast and first_error is not None:
        raise W.InputError(
            f"{split.capture}: byte offset {first_error['offset']}: {first_error['reason']} ({first_error['category']})"
        )
    return rows + W.connection_rows(split, reader.connections())


def _file_errors(
    path: str,
    size: int,
    index: int,
    segments: list,
    counters: dict,
    stopped: Any,
    failure: BaseException | None,
    stop_at: int | None,
) -> list[dict]:
    """A file's errors: where reading stopped (in it, or in an earlier file of the set), an incomplete end."""
    errors = []
    if stop_at is not None and counters["unread_bytes"]:
        category = stopped.category if stopped is not None else "read_failed"
        reason = stopped.reason if stopped is not None else f"{type(failure).__name__}: {failure}"
        where = next((s for s in reversed(segments) if s[0] <= stop_at), segments[0])
        offset = where[2] + stop_at - where[0]
        if where[1] == path:
            errors.append(W.error_entry(category, offset, reason, counters["unread_bytes"]))
        else:
            errors.append(
                W.error_entry(
                    category,
                    0,
                    f"not read: reading its capture set stopped in "
                    f"{shown_path(where[1])} at byte offset {offset} ({reason})",
                    counters["unread_bytes"],
                )
            )
    if counters["trailing_bytes"]:
        errors.append(
            W.error_entry(
                "truncated_record",
                size - counters["trailing_bytes"],
                f"incomplete record: {counters['trailing_bytes']} bytes at the end of the file",
                counters["trailing_bytes"],
            )
        )
    return errors

"""One Spark task's work: a split dispatched to the reader of its kind (the top of the worker side).

:func:`process_split` reads a whole file here, hands a range of a pcap to
kproto/analyze/spark/range_pipeline.py and a capture set to kproto/analyze/spark/set_reader.py;
all three decode with kproto/analyze/spark/decode.py and use the frame and compact-row helpers of
kproto/analyze/spark/worker.py, which imports none of them (imports go one way:
task -> readers -> decode -> worker -> planning).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kproto.analyze.spark.decode import decode_and_summarize
from kproto.analyze.spark.planning import Split, _Source, local_path
from kproto.analyze.spark.range_pipeline import process_range
from kproto.analyze.spark.set_reader import process_set
from kproto.analyze.spark.worker import (
    InputError,
    Sink,
    capture_errors,
    capture_reader,
    checked_accounting,
    count_unreached,
    error_entry,
    frames_of,
    one_batch_bytes,
    raw_rows,
    read_batches,
)
from kproto.arrow.capture import connection_schema, frame_schema, read_frame_file
from kproto.errors import DecodeError, TruncatedError

__all__ = ["InputError", "process_split"]


def process_split(
    split: Split,
    *,
    broker_ports: Iterable[int] = (9092,),
    body: str | None = "json",
    records: str = "summary",
    sink: Sink | None = None,
    fail_fast: bool = False,
    kafka_ports: Iterable[int] = (),
    show_credentials: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Read one split: its frames and exchanges go to ``sink``; yields compact rows (or raw frames).

    ``body``: "json" or None (no body column); ``records``: record sets in the
    bodies as a "summary" of their batch headers or as "base64"; ``kafka_ports``:
    read as Kafka whatever they carry; ``show_credentials``: bodies keep them
    (kproto.arrow.credentials; redacted by default).

    An input that cannot be read completely never fails the task: the frames
    read before the problem are decoded as usual and the accounting row lists
    the errors (category, file offset, reason, bytes unread). With
    ``fail_fast`` the first such error raises :class:`InputError` instead.
    """
    ports = tuple(broker_ports)
    forced = tuple(kafka_ports)
    sink = sink if sink is not None else Sink()
    if split.set_files:
        yield from process_set(
            split,
            broker_ports=ports,
            body=body,
            records=records,
            sink=sink,
            fail_fast=fail_fast,
            kafka_ports=forced,
            show_credentials=show_credentials,
        )
        return
    try:
        source = _Source(split.path)
    except OSError as exc:
        size = max(0, split.end - split.start)
        counters = {
            "input_bytes": size,
            "file_bytes": 0,
            "trailing_bytes": 0,
            "unread_bytes": size,
            "errors": [error_entry("read_failed", split.start, f"{type(exc).__name__}: {exc}", size)],
        }
        yield from checked_accounting(split, counters, connection_schema().empty_table(), fail_fast)
        return
    try:
        if split.format == "frames":
            batches, counters = _frames_of_frame_file(source, split)
            rows = checked_accounting(split, counters, connection_schema().empty_table(), fail_fast)
            # One connection: decoded here whatever its size.
            yield from decode_and_summarize(
                frames_of(batches), body=body, sink=sink, records=records, show_credentials=show_credentials
            )
            yield from rows
            return
        if split.split_count > 1:
            yield from process_range(split, source, ports, body, records, sink, fail_fast, forced, show_credentials)
            return
        local = local_path(split.path)
        reader = capture_reader(
            local if local is not None else source.read(0, source.size),
            split.capture,
            ports,
            one_batch_bytes(source.size if split.mode == "decode" else None),
            forced,
        )
        if split.mode == "decode":
            batches, failure = read_batches(iter(reader))
            counters = _whole_file_counters(split, reader, failure)
            rows = checked_accounting(split, counters, reader.connections(), fail_fast)
            yield from decode_and_summarize(
                frames_of(batches), body=body, sink=sink, records=records, show_credentials=show_credentials
            )
        else:
            # A big file that cannot be cut: frames stream out, the grouping step pairs them.
            failure = None
            try:
                for batch in reader:
                    yield raw_rows(batch, split)
            except Exception as exc:
                failure = exc
            counters = _whole_file_counters(split, reader, failure)
            rows = checked_accounting(split, counters, reader.connections(), fail_fast)
        yield from rows
    finally:
        source.close()


def _whole_file_counters(split: Split, reader: Any, failure: BaseException | None) -> dict:
    """A whole file's accounting: the reader's counters, the bytes left unread by a failure, the errors."""
    counters = reader.counters
    if failure is not None:
        count_unreached(counters)
    counters["errors"] = capture_errors(split, reader, counters, failure)
    counters["snap_lengths"] = reader.snap_lengths  # the report's "snaplen N"
    return counters


def _frames_of_frame_file(source: _Source, split: Split) -> tuple[list[pa.RecordBatch], dict]:
    """A file of size-prefixed frames: one pseudo-connection of requests, no timestamps.

    Returns the frame batches read before any problem and the accounting:
    ``input_bytes == file_bytes + trailing_bytes + unread_bytes``, and ``errors``.
    """
    data = source.read(0, source.size)
    read, failure = read_batches(read_frame_file(data))
    batches, sequence, frame_bytes = [], 0, 0
    for batch in read:
        n = batch.num_rows
        batches.append(
            pa.RecordBatch.from_arrays(
                [
                    pa.array([split.capture] * n, pa.string()),
                    pa.array(np.zeros(n, np.int64)),
                    pa.array(np.zeros(n, np.int8)),
                    pa.array(np.arange(sequence, sequence + n, dtype=np.int64)),
                    pa.nulls(n, pa.int64()),
                    pa.nulls(n, pa.int64()),
                    batch["size"],
                    batch["payload"],
                ],
                schema=frame_schema(),
            )
        )
        sequence += n
        frame_bytes += n * 4 + pc.sum(batch["size"].cast(pa.int64())).as_py()
    errors: list[dict] = []
    counters: dict[str, Any] = {
        "input_bytes": source.size,
        "file_bytes": frame_bytes,
        "trailing_bytes": 0,
        "unread_bytes": 0,
        "errors": errors,
    }
    if failure is not None:
        left = source.size - frame_bytes
        if frame_bytes == 0 and isinstance(failure, DecodeError):
            # Not one whole frame from the first byte: whatever this file is, it is no capture.
            counters["unread_bytes"] = left
            errors.append(
                error_entry(
                    "not_a_capture",
                    0,
                    "neither a pcap or pcapng file nor size-prefixed "
                    f"frames (first bytes 0x{bytes(data[:4]).hex()}: {failure.reason})",
                    left,
                )
            )
        elif isinstance(failure, TruncatedError):
            counters["trailing_bytes"] = left
            errors.append(
                error_entry(
                    "truncated_record", frame_bytes, f"incomplete frame: {left} bytes at the end of the file", left
                )
            )
        else:
            counters["unread_bytes"] = left
            if isinstance(failure, DecodeError):
                category, reason = "bad_frame_size", failure.reason
            else:
                category, reason = "read_failed", f"{type(failure).__name__}: {failure}"
            errors.append(error_entry(category, frame_bytes, reason, left))
    return batches, counters

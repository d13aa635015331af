"""A range of a pcap decoded in bounded chunks, so that a task's memory does not grow with the range.

The range is read twice, from the mapped file (page cache) or the stream, by readers whose
batches are at most :data:`CHUNK_BYTES` of payloads:

1. Headers only. Each batch's frames keep their columns without the payload, and the
   headers of ``kproto.arrow.frames.decode_frames`` (API, version, correlation id): enough to give
   frames their connection ids (the connections' addresses are known once the reader ends)
   and sequences, and to pair every request of the range with its response, as if the range
   were one table. The payloads go with each batch.
2. Bodies. The same batches again, one at a time: each is decoded with its responses'
   request API and version (from the pairing) and its owned ``frames`` rows go to the sink;
   kept of it: what an exchange takes from a decoded frame (status, client id, error code,
   client software, acks=0), the topics its frames address, and the columns the compact
   rows count (no bodies).

The exchanges are then built from the headers and those facts: the same rows, in the same
order, as decoding the range as one table (``decode.decode_frames_table``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

import kproto.arrow.frames as kb
from kproto.analyze.spark import decode as D
from kproto.analyze.spark import worker as W
from kproto.analyze.spark.planning import INT64_MIN, Split, _range_pieces, _RangeStream, _Source
from kproto.arrow import exchanges as E
from kproto.arrow.capture import Chunks

#: Payload bytes per batch of a range's readers: what a range's task decodes at once. Under
#: the workers' mmap threshold (session.WORKER_MEMORY_ENV, 32 MiB), so a batch's buffers come
#: from the heap and the next batch reuses them, where 32 MiB batches were mapped afresh each time.
CHUNK_BYTES = 16 << 20


#: The frame columns summarize reads (kept per batch until the range's compact rows are made).
SUMMARIZED = ("capture", "direction", "size", "status", "ts_first_ns", "ts_last_ns")


def _reader(
    split: Split, source: _Source, ports: tuple[int, ...], on_mark: Any, kafka_ports: tuple[int, ...] = ()
) -> Any:
    """A reader of the range (with its context and overlap) in batches of at most CHUNK_BYTES of payloads."""
    if source.mapped:
        ranged: Any = Chunks(_range_pieces(source, split, on_mark))  # a local file: views of its map
    else:
        ranged = _RangeStream(source, split, on_mark)
    return W.capture_reader(ranged, split.capture, ports, CHUNK_BYTES, kafka_ports)


def _batches(reader: Any) -> Iterator[pa.RecordBatch]:
    """The reader's batches; a failure ends them and is kept in ``reader.failure``."""
    reader.failure = None
    try:
        yield from reader
    except Exception as exc:  # an input problem or a bug: reported in the errors table, never lost in silence
        reader.failure = exc


def _range_ids(frames: pa.Table, split: Split, global_ids: np.ndarray) -> tuple[pa.Table, np.ndarray]:
    """Frames with connection ids hashed from the addresses and sequences ``(owning split << 32) + rank``,
    which every range computes alike; and each frame's owner (-1 the split before, 0 this one, 1 the next)."""
    if frames.num_rows:
        local_ids = frames["connection_id"].to_numpy()
        frames = frames.set_column(1, "connection_id", pa.array(global_ids[local_ids], pa.int64()))
    # The split that owns a frame holds the timestamp of its first byte.
    ts = frames["ts_first_ns"].fill_null(INT64_MIN).to_numpy()
    owner = np.where(ts < split.ts_lo, -1, np.where(ts < split.ts_hi, 0, 1)).astype(np.int64)
    rank = E.occurrence_rank(
        frames["connection_id"].to_numpy(),
        frames["direction"].to_numpy().astype(np.int64),
        owner,
        order_by=frames["sequence"].to_numpy(),
    )
    frames = frames.set_column(
        frames.schema.get_field_index("sequence"),
        "sequence",
        pa.array((split.split_index + owner) * (1 << 32) + rank, pa.int64()),
    )
    return frames, owner


def connection_shares(
    seen: pa.Table, at_start: list[dict], at_end: list[dict] | None, early: dict[int, dict] | None = None
) -> pa.Table:
    """A range's own share of each connection it read (``seen``: the reader's rows at its end).

    A range reads context before its start and overlap after its end, so its reader's rows count
    bytes and frames its neighbours count too. Its share of each counter is the counter at the
    range's end (``at_end``, the reader's :meth:`~kproto.arrow.capture.CaptureReader.connections_so_far`
    there; None for the last range: the rows at the end of the file) less the counter at its start
    (``at_start``): every packet is counted by the range whose bytes hold it, and the shares of a
    connection add up to what one reader of the whole file counts. A connection closed before
    the start, or opened after the end, is not the range's; one still open at the start without
    a packet in the range leaves no row. Addresses, kind and times stay the reader's (the tables
    take the least first and greatest last time, the last range's ``closed_by``). What the
    reader counted after the start about bytes before it, by its end (``early``, its
    :meth:`~kproto.arrow.capture.CaptureReader.early_counts`: a reader that started inside a connection
    finds its first frames late, where a reader of the whole file found them before the start)
    counts as at the start: the range before counted it.
    """
    counters = [name for name in seen.schema.names if name.startswith(("request_", "response_"))]
    before_of = {r["connection_id"]: r for r in at_start}
    after_of = None if at_end is None else {r["connection_id"]: r for r in at_end}
    rows = []
    for row in seen.to_pylist():
        before = before_of.get(row["connection_id"])
        if before is not None and before["closed_by"] is not None:
            continue  # over before the range started
        after = row if after_of is None else after_of.get(row["connection_id"])
        if after is None:
            continue  # opened after the range ended
        if before is not None and after["last_ts_ns"] == before["last_ts_ns"]:
            continue  # no packet of it in the range: only read as context
        share = dict(row)
        after, before = _as_in(after, row), _as_in(before, row)
        late = (early or {}).get(row["connection_id"], {})
        for name in counters:
            share[name] = after[name] - (before[name] if before is not None else 0) - late.get(name, 0)
        if row["kind"] not in ("kafka", None):
            # Another protocol: all its stream bytes are other_bytes (the engine moves the counts of
            # what it held there once it knows; a reader that started inside the connection knows later).
            for side in ("request_", "response_"):
                share[side + "other_bytes"] = share[side + "stream_bytes"]
                for name in NOT_KAFKA_ZEROED:
                    share[side + name] = 0
        rows.append(share)
    return pa.Table.from_pylist(rows, schema=seen.schema)


#: Counters a connection of another protocol has none of (capture_kinds: ``_not_kafka``).
NOT_KAFKA_ZEROED = ("frames", "frame_bytes", "skipped_bytes", "tail_bytes", "sasl_tokens", "sasl_bytes")


def _as_in(snapshot: dict | None, final: dict) -> dict | None:
    """A connection's earlier row with its sides as in its final row (its direction may have been
    decided since: an open connection's row takes side 0 as the client until then)."""
    if snapshot is None or (snapshot["client_ip"], snapshot["client_port"]) == (
        final["client_ip"],
        final["client_port"],
    ):
        return snapshot
    swapped = {"request_": "response_", "response_": "request_"}
    return {
        swapped[name[: name.index("_") + 1]] + name[name.index("_") + 1 :]
        if name.startswith(tuple(swapped))
        else name: value
        for name, value in snapshot.items()
    }


def process_range(
    split: Split,
    source: _Source,
    ports: tuple[int, ...],
    body: str | None,
    records: str,
    sink: W.Sink,
    fail_fast: bool,
    kafka_ports: tuple[int, ...] = (),
    show_credentials: bool = False,
) -> Iterator[pa.RecordBatch]:
    """A range of a pcap, decoded and paired on its own, with its context and overlap.

    Every range reads the same bytes around a boundary, so it reassembles and
    pairs them alike: a request and its response pair in both ranges that see
    them, and only the range that owns the request (or, alone, the response)
    writes the exchange.
    """
    marks: dict[str, dict] = {}
    connections_at: dict[str, list[dict]] = {}
    early_at: dict[str, dict] = {}
    holder: list[Any] = []

    def on_mark(name: str) -> None:
        marks[name] = dict(holder[0].counters)
        connections_at[name] = holder[0].connections_so_far()
        if name == "start":
            holder[0].mark_connections()
        else:
            early_at[name] = holder[0].early_counts()

    # 1. Headers: every frame's columns but the payload, and its header.
    reader = _reader(split, source, ports, on_mark, kafka_ports)
    holder.append(reader)
    columns, headers = [], []
    for batch in _batches(reader):
        directions = batch.column("direction").fill_null(0).to_numpy().astype(np.int8)
        # ids as text: a cost that does not grow with the capture's distinct client ids
        headers.append(kb.decode_frames(batch.column("payload"), directions=directions, client_ids="string"))
        columns.append(pa.Table.from_batches([batch]).drop_columns(["payload"]))
        del batch
    failure = reader.failure
    last = split.split_index == split.split_count - 1
    seen = reader.connections()
    global_ids = W.global_connection_ids(seen)
    # The range's own share of each connection, as for the capture counters below.
    connections = connection_shares(
        seen,
        connections_at.get("start", []),
        None if last else connections_at.get("end"),
        reader.early_counts() if last else early_at.get("end", reader.early_counts()),
    )
    connections = connections.set_column(
        connections.schema.get_field_index("connection_id"),
        "connection_id",
        pa.array(global_ids[connections["connection_id"].to_numpy()], pa.int64()),
    )
    frames = pa.concat_tables(columns).combine_chunks() if columns else None
    columns.clear()
    if frames is not None and frames.num_rows:
        frames, owner = _range_ids(frames, split, global_ids)
        yield from _decode_range(
            split,
            source,
            ports,
            frames,
            owner,
            pa.Table.from_batches(headers),
            body=body,
            records=records,
            sink=sink,
            kafka_ports=kafka_ports,
            show_credentials=show_credentials,
        )
    # The range's own share of the counters: between the marks at its start and end (the
    # first range owns the file header too; the last one the end of the file).
    end = reader.counters if last else marks.get("end", reader.counters)
    start = marks.get("start", {}) if split.split_index else {}
    counters = {name: value - start.get(name, 0) for name, value in end.items()}
    counters["input_bytes"] = (source.size if last else split.end) - (split.start if split.split_index else 0)
    if failure is not None:
        W.count_unreached(counters)
    counters["errors"] = W.capture_errors(split, reader, counters, failure)
    counters["snap_lengths"] = reader.snap_lengths  # the report's "snaplen N"
    yield from W.checked_accounting(split, counters, connections, fail_fast)


def _decode_range(
    split: Split,
    source: _Source,
    ports: tuple[int, ...],
    frames: pa.Table,
    owner: np.ndarray,
    headers: pa.Table,
    *,
    body: str | None,
    records: str,
    sink: W.Sink,
    kafka_ports: tuple[int, ...] = (),
    show_credentials: bool = False,
) -> Iterator[pa.RecordBatch]:
    """2. The range read again, a batch at a time: its owned frames to ``sink``, compact rows out;
    then the exchanges. ``frames``: every frame of the range without payloads, with its ids."""
    heads = E.frame_heads(frames, headers)
    pairing = E.pair_heads(heads)
    unanswered = E.unanswered_produce(heads, pairing)
    owned = owner == 0
    connection_ids, sequences = frames["connection_id"], frames["sequence"]
    n = frames.num_rows
    facts, topics, topic_frames, topic_names = [], [], [], []
    counted, owned_partitions, owned_names = [], [], []  # what summarize reads: no bodies
    lo = 0
    for batch in _batches(_reader(split, source, ports, lambda name: None, kafka_ports)):
        hi = lo + batch.num_rows
        if hi > n:
            break
        chunk = pa.Table.from_batches([batch])
        del batch
        chunk = chunk.set_column(1, "connection_id", connection_ids.slice(lo, hi - lo))
        chunk = chunk.set_column(chunk.schema.get_field_index("sequence"), "sequence", sequences.slice(lo, hi - lo))
        rows = D.decode_chunk(
            chunk,
            heads.keys[lo:hi],
            heads.versions[lo:hi],
            pairing.key_of[lo:hi],
            pairing.version_of[lo:hi],
            unanswered[lo:hi],
            body=body,
            records=records,
            show_credentials=show_credentials,
        )
        ts_first = chunk["ts_first_ns"]
        del chunk  # the payloads: decoded
        keep = owned[lo:hi]
        frame_table = rows.frames if keep.all() else rows.frames.filter(pa.array(keep))  # a filter copies
        sink.add("frames", frame_table)
        part_keep = keep[rows.partition_frame]
        partitions = rows.partitions.filter(pa.array(part_keep)).append_column(
            "ts_first_ns", ts_first.take(pa.array(rows.partition_frame[part_keep]))
        )
        name_keep = keep[rows.topic_name_frame]
        names = rows.topic_names.filter(pa.array(name_keep)).append_column(
            "ts_first_ns", ts_first.take(pa.array(rows.topic_name_frame[name_keep]))
        )
        counted.append(frame_table.select(list(SUMMARIZED)))
        owned_partitions.append(partitions)
        owned_names.append(names)
        facts.append(rows.facts)
        topics.append(rows.partitions.select(["topic", "topic_id"]))
        topic_frames.append(rows.partition_frame + lo)
        topic_names.append(rows.topic_names)
        lo = hi
    if lo != n:
        # The same bytes read the same way give the same frames: anything else is a bug, never hidden.
        raise RuntimeError(f"{split.capture}: range {split.split_index} read {n} frames, then {lo}")
    exchanges = E.exchanges_table(
        heads,
        pairing,
        pa.concat_tables(facts),
        pa.concat_tables(topics),
        np.concatenate(topic_frames),
        pa.concat_tables(topic_names),
    )
    exchanges = exchanges.filter(pa.array(owned[pairing.owner_row]))
    sink.add("exchanges", exchanges)
    yield from D.summarize(
        pa.concat_tables(counted), exchanges, pa.concat_tables(owned_partitions), pa.concat_tables(owned_names)
    )

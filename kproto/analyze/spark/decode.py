"""Decoding in Spark's Python workers: a split's frames to the ``frames`` and ``exchanges`` tables,
and the compact rows of them (:data:`kproto.analyze.spark.worker.PARTS_SCHEMA`).

:func:`decode_frames_table` decodes and pairs whole connections (every frame once, responses with
their request's API and version); a range of a pcap decodes in chunks of it
(:func:`decode_chunk`, kproto/analyze/spark/range_pipeline.py). :func:`summarize` makes the compact
rows Spark combines; :func:`decode_raw_batches` is the grouping step of raw frames. Nothing here
imports pyspark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import kproto.arrow.frames as kb
from kproto import versions as kv
from kproto._common.api_keys import CLIENT_SOFTWARE_FIRST_VERSION, ApiKey
from kproto.analyze.spark import worker as W
from kproto.arrow import exchanges as E
from kproto.arrow.capture import frame_schema, not_captured
from kproto.arrow.credentials import redact_bodies
from kproto.arrow.frames import one_array
from kproto.arrow.topic_names import topic_names, topic_naming_versions

API_VERSIONS = int(ApiKey.API_VERSIONS)


def _error_codes(bodies: pa.Array) -> pa.Array:
    """The first non-zero error code anywhere in each JSON body; 0 when all are zero; null without one."""
    pattern = r'"error_code":(?P<code>-?[1-9][0-9]*)'
    matched = pc.fill_null(pc.match_substring_regex(bodies, pattern), False)
    text = pc.extract_regex(pc.if_else(matched, bodies, '"error_code":1'), pattern).field("code")
    first = pc.if_else(matched, text.cast(pa.int16()), pa.scalar(None, pa.int16()))
    has_any = pc.match_substring(bodies, '"error_code":')
    zero = pc.if_else(has_any, pa.scalar(0, pa.int16()), pa.scalar(None, pa.int16()))
    return pc.coalesce(first, zero)


def _software(
    api_key: np.ndarray, api_version: np.ndarray, status: np.ndarray, bodies: pa.Array | None
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """ClientSoftwareName / Version of ApiVersions v3+ requests, and what is wrong with them.

    Per frame: its header's API and version, its status and its body (only the few
    ApiVersions ones are read, none copied)."""
    m = len(api_key)
    names: list[str | None] = [None] * m
    versions: list[str | None] = [None] * m
    problems: list[str | None] = [None] * m
    if bodies is not None:
        candidates = np.flatnonzero(
            (api_key == API_VERSIONS) & (api_version >= CLIENT_SOFTWARE_FIRST_VERSION) & (status == 0)
        )
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

    frames: pa.Table  # W.FRAMES_SCHEMA, one row per input frame
    exchanges: pa.Table  # EXCHANGES_SCHEMA
    partitions: pa.Table  # Produce requests and Fetch responses per topic-partition
    partition_frame: np.ndarray  # row of each partition's frame
    topic_names: pa.Table  # topic IDs and the names responses give them (topic_id, topic)
    topic_name_frame: np.ndarray  # row of each name's frame


@dataclass
class ChunkRows:
    """The decoded rows of some of the frames (all of them, or a range's chunk), rows counted from its first."""

    frames: pa.Table  # W.FRAMES_SCHEMA
    facts: pa.Table  # per frame, what its exchange takes from the decoded frame (see decode_chunk)
    partitions: pa.Table  # Produce requests and Fetch responses per topic-partition (every frame's)
    partition_frame: np.ndarray
    topic_names: pa.Table  # topic IDs and the names responses give them (topic_id, topic)
    topic_name_frame: np.ndarray


def decode_chunk(
    frames: pa.Table,
    keys: np.ndarray,
    versions: np.ndarray,
    key_of: np.ndarray,
    version_of: np.ndarray,
    unanswered: np.ndarray,
    *,
    body: str | None,
    records: str,
    show_credentials: bool = False,
) -> ChunkRows:
    """Decode frames once, responses with their request's API and version (``key_of`` / ``version_of``,
    from the pairing); ``keys`` / ``versions``: the header pass's; ``unanswered``: see E.unanswered_produce."""
    frames = frames.combine_chunks()
    n = frames.num_rows
    payload = one_array(frames["payload"])
    directions = frames["direction"].fill_null(0).to_numpy().astype(np.int8)
    # client ids as text: the tables hold strings, and a dictionary's table costs more with more ids
    decoded = kb.decode_frames(
        payload,
        directions=directions,
        request_api_keys=key_of,
        request_api_versions=version_of,
        body=body,
        records=records,
        client_ids="string",
    )
    # a frame the capture did not hold all of reads as cut short: say why instead
    decoded_status = not_captured(frames, decoded["status"])
    status = decoded_status.to_numpy(zero_copy_only=False)
    frame_columns: dict[str, Any] = {
        name: frames[name]
        for name in ("capture", "connection_id", "direction", "sequence", "ts_first_ns", "ts_last_ns", "size")
    }
    frame_columns.update(
        {
            name: decoded[name]
            for name in (
                "header_version",
                "api_key",
                "api_version",
                "correlation_id",
                "client_id",
                "header_tag_count",
                "error_offset",
                "deprecated",
                "removed_in_4x",
            )
        }
    )
    frame_columns["status"] = decoded_status
    frame_columns["status_name"] = E.status_names(decoded_status, kb.Status)
    bodies = decoded["body"] if body == "json" else None
    if bodies is not None and not show_credentials:
        bodies = redact_bodies(decoded["api_key"], bodies)
    if bodies is not None:
        frame_columns["body"] = bodies
    frame_table = pa.Table.from_batches([W.conform(W.FRAMES_SCHEMA, frame_columns, n)])

    # What an exchange takes from its frames: the error code of a response's body, the client
    # software of an ApiVersions request, whether an unanswered Produce asked for no response.
    responses = np.flatnonzero(directions == kb.RESPONSE)
    error_code = pa.nulls(n, pa.int16())
    if bodies is not None and len(responses):
        index = np.full(n, -1, np.int64)
        index[responses] = np.arange(len(responses))
        error_code = _error_codes(bodies.take(pa.array(responses))).take(pa.array(index, mask=index < 0))
    names, soft_versions, problems = _software(keys, versions, status, bodies)
    facts = pa.table(
        {
            "status": decoded_status,
            "client_id": decoded["client_id"],
            "deprecated": decoded["deprecated"],
            "removed_in_4x": decoded["removed_in_4x"],
            "error_code": error_code,
            "client_software_name": names,
            "client_software_version": soft_versions,
            "software_problems": problems,
            "acks_zero": pa.array(E.acks_zero_frames(payload, unanswered)),
        }
    )

    # Produce requests and Fetch responses, per topic-partition (record batch headers only).
    parts = kb.partitions(payload, directions=directions, request_api_keys=key_of, request_api_versions=version_of)
    partition_frame = parts["frame"].to_numpy().astype(np.int64) if parts.num_rows else np.zeros(0, np.int64)

    names_table, name_frame = _topic_names(payload, directions, status, key_of, version_of)
    return ChunkRows(frame_table, facts, parts, partition_frame, names_table.drop_columns(["frame"]), name_frame)


def _topic_names(
    payload: pa.Array, directions: np.ndarray, status: np.ndarray, key_of: np.ndarray, version_of: np.ndarray
) -> tuple[pa.Table, np.ndarray]:
    """Topic IDs and names from the responses that carry both (Metadata v10+, CreateTopics v7+ ...),
    and the frame (row) each came from: only those responses are decoded again, as message objects."""
    n = len(directions)
    naming = topic_naming_versions()
    candidates = (
        np.flatnonzero((directions == kb.RESPONSE) & (status == kb.Status.OK) & np.isin(key_of, sorted(naming)))
        if n
        else np.zeros(0, np.int64)
    )
    names_table = topic_names(
        payload.take(pa.array(candidates, pa.int64())),
        directions=kb.RESPONSE,
        request_api_keys=key_of[candidates],
        request_api_versions=version_of[candidates],
    )
    name_frame = (
        candidates[names_table["frame"].to_numpy().astype(np.int64)] if names_table.num_rows else np.zeros(0, np.int64)
    )
    return names_table, name_frame


def decode_frames_table(
    frames: pa.Table, *, body: str | None = "json", records: str = "summary", show_credentials: bool = False
) -> Decoded:
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
    rows = decode_chunk(
        frames,
        heads.keys,
        heads.versions,
        pairing.key_of,
        pairing.version_of,
        E.unanswered_produce(heads, pairing),
        body=body,
        records=records,
        show_credentials=show_credentials,
    )
    exchanges = E.exchanges_table(heads, pairing, rows.facts, rows.partitions, rows.partition_frame, rows.topic_names)
    return Decoded(
        rows.frames, exchanges, rows.partitions, rows.partition_frame, rows.topic_names, rows.topic_name_frame
    )


def decode_and_summarize(
    frames: pa.Table, *, body: str | None, sink: W.Sink, records: str = "summary", show_credentials: bool = False
) -> Iterator[pa.RecordBatch]:
    """Decode and pair ``frames``; its frames and exchanges go to ``sink``; yield compact rows."""
    if frames.num_rows == 0:
        return
    ts_first = frames["ts_first_ns"]
    decoded = decode_frames_table(frames, body=body, records=records, show_credentials=show_credentials)
    del frames  # the payloads, the largest buffer of a task: free before the tables are written
    frame_table, exchanges, partitions = decoded.frames, decoded.exchanges, decoded.partitions
    partition_ts = ts_first.take(pa.array(decoded.partition_frame))
    names = decoded.topic_names.append_column("ts_first_ns", ts_first.take(pa.array(decoded.topic_name_frame)))
    sink.add("frames", frame_table)
    sink.add("exchanges", exchanges)
    yield from summarize(frame_table, exchanges, partitions.append_column("ts_first_ns", partition_ts), names)


def summarize(
    frames: pa.Table, exchanges: pa.Table, partitions: pa.Table, topic_names: pa.Table | None = None
) -> Iterator[pa.RecordBatch]:
    """The compact rows Spark combines: counts per capture, usage per client and API, topics,
    and the topic IDs responses named (``topic_names``: kproto.arrow.topic_names.topic_names' rows with ts_first_ns)."""
    yield from _counts(frames, exchanges)
    yield from _usage(exchanges)
    yield from _topics(partitions)
    if topic_names is not None:
        yield from _topic_name_rows(topic_names)


def _counts(frames: pa.Table, exchanges: pa.Table) -> Iterator[pa.RecordBatch]:
    """Frame and exchange counts per capture (the summary's accounting)."""
    status = frames["status"]
    direction = frames["direction"]
    counted = (
        pa.table(
            {
                "capture": frames["capture"],
                "frames": pa.array(np.ones(frames.num_rows, np.int64)),
                "request_frames": pc.equal(direction, 0).cast(pa.int64()),
                "response_frames": pc.equal(direction, 1).cast(pa.int64()),
                "frame_bytes": pc.add(frames["size"].cast(pa.int64()), 4),
                "frames_ok": pc.equal(status, 0).cast(pa.int64()),
                "frames_undecodable": pc.not_equal(status, 0).cast(pa.int64()),
                "first_ts_ns": frames["ts_first_ns"],
                "last_ts_ns": frames["ts_last_ns"],
            }
        )
        .group_by("capture")
        .aggregate(
            [
                (name, "sum")
                for name in (
                    "frames",
                    "request_frames",
                    "response_frames",
                    "frame_bytes",
                    "frames_ok",
                    "frames_undecodable",
                )
            ]
            + [("first_ts_ns", "min"), ("last_ts_ns", "max")]
        )
    )
    pairs = (
        pa.table({"capture": exchanges["capture"], "status": exchanges["pair_status_name"]})
        .group_by(["capture", "status"])
        .aggregate([([], "count_all")])
    )
    per_capture: dict[str, dict[str, Any]] = {}
    for row in counted.to_pylist():
        capture = row.pop("capture")
        per_capture[capture] = {
            name.rsplit("_", 1)[0] if name.endswith(("_sum", "_min", "_max")) else name: value
            for name, value in row.items()
        }
    for row in pairs.to_pylist():
        per_capture.setdefault(row["capture"], {})[PAIR_COUNTS[row["status"]]] = row["count_all"]
    if per_capture:
        captures = sorted(per_capture)
        yield W.as_parts(
            "counts",
            {"capture": captures, "info": [json.dumps(per_capture[c], sort_keys=True) for c in captures]},
            len(captures),
        )


def _usage(exchanges: pa.Table) -> Iterator[pa.RecordBatch]:
    """Requests per connection, client, API version and client software."""
    requests = exchanges.filter(exchanges["request_sequence"].is_valid())
    if requests.num_rows:
        keys = [
            "capture",
            "connection_id",
            "client_id",
            "api_key",
            "api_version",
            "client_software_name",
            "client_software_version",
        ]
        usage = (
            pa.table(
                {
                    **{name: requests[name] for name in keys},
                    "deprecated": requests["deprecated"].cast(pa.int64()),
                    "removed": requests["removed_in_4x"].cast(pa.int64()),
                    "errors": pc.fill_null(pc.not_equal(requests["error_code"], 0), False).cast(pa.int64()),
                    "ts": requests["request_ts_ns"],
                }
            )
            .group_by(keys)
            .aggregate(
                [
                    ([], "count_all"),
                    ("deprecated", "sum"),
                    ("removed", "sum"),
                    ("errors", "sum"),
                    ("ts", "min"),
                    ("ts", "max"),
                ]
            )
        )
        yield W.as_parts(
            "usage",
            {
                **{name: usage[name] for name in keys},
                "requests": usage["count_all"],
                "deprecated_requests": usage["deprecated_sum"],
                "removed_in_4x_requests": usage["removed_sum"],
                "error_responses": usage["errors_sum"],
                "first_ns": usage["ts_min"],
                "last_ns": usage["ts_max"],
            },
            usage.num_rows,
        )


def _topics(partitions: pa.Table) -> Iterator[pa.RecordBatch]:
    """Produce requests and Fetch responses per topic-partition."""
    if partitions.num_rows:
        keys = ["topic", "topic_id", "partition", "api_key", "compression"]
        topics = (
            pa.table(
                {
                    **{name: partitions[name] for name in keys},
                    "bytes": partitions["bytes"].cast(pa.int64()),
                    "records": partitions["record_count"].cast(pa.int64()),
                    "batches": partitions["batch_count"].cast(pa.int64()),
                    "errors": partitions["records_error"].is_valid().cast(pa.int64()),
                    "ts": partitions["ts_first_ns"],
                }
            )
            .group_by(keys)
            .aggregate(
                [
                    ([], "count_all"),
                    ("bytes", "sum"),
                    ("records", "sum"),
                    ("batches", "sum"),
                    ("errors", "sum"),
                    ("ts", "min"),
                    ("ts", "max"),
                ]
            )
        )
        yield W.as_parts(
            "topic",
            {
                **{name: topics[name] for name in keys},
                "messages": topics["count_all"],
                "bytes": topics["bytes_sum"],
                "records": topics["records_sum"],
                "batches": topics["batches_sum"],
                "records_errors": topics["errors_sum"],
                "first_ns": topics["ts_min"],
                "last_ns": topics["ts_max"],
            },
            topics.num_rows,
        )


def _topic_name_rows(topic_names: pa.Table) -> Iterator[pa.RecordBatch]:
    """Topic IDs and their names, from every response that carries both (combined over the run)."""
    if topic_names.num_rows:
        named = topic_names.group_by(["topic_id", "topic"]).aggregate(
            [([], "count_all"), ("ts_first_ns", "min"), ("ts_first_ns", "max")]
        )
        yield W.as_parts(
            "topic_name",
            {
                "topic_id": named["topic_id"],
                "topic": named["topic"],
                "messages": named["count_all"],
                "first_ns": named["ts_first_ns_min"],
                "last_ns": named["ts_first_ns_max"],
            },
            named.num_rows,
        )


PAIR_COUNTS = {
    "PAIRED": "exchanges_paired",
    "NO_RESPONSE_EXPECTED": "no_response_expected",
    "UNPAIRED_REQUEST": "unpaired_requests",
    "UNPAIRED_RESPONSE": "unpaired_responses",
}


def decode_raw_batches(
    batches: Iterable[pa.RecordBatch],
    *,
    body: str | None = "json",
    records: str = "summary",
    sink: W.Sink | None = None,
    show_credentials: bool = False,
) -> Iterator[pa.RecordBatch]:
    """The grouping step: raw frames of whole connections (any order) to compact rows; tables to ``sink``."""
    tables = [pa.Table.from_batches([b]).select(list(W.RAW_COLUMNS)) for b in batches if b.num_rows]
    if not tables:
        return
    raw = pa.concat_tables(tables).combine_chunks()
    tables.clear()
    raw = raw.sort_by(
        [
            ("capture", "ascending"),
            ("connection_id", "ascending"),
            ("direction", "ascending"),
            ("sequence", "ascending"),
        ]
    )
    frames = raw.select([f.name for f in frame_schema()]).cast(frame_schema())
    rows = decode_and_summarize(
        frames,
        body=body,
        sink=sink if sink is not None else W.Sink(),
        records=records,
        show_credentials=show_credentials,
    )
    del raw, frames  # the generator holds the frames alone, and lets their payloads go once decoded
    yield from rows

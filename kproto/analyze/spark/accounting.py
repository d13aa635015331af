"""The accounting of a run: the ``summary`` table (every byte, packet and frame read, and where it
went) and the ``errors`` table (every input not read completely, where and why), from the
compact rows of kinds capture, counts and connection."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from kproto.analyze.spark.connection_totals import CONNECTION_SUMS, connection_totals

#: The summary's counters that are sums of its splits' counters: (summary name, split info name).
_SPLIT_COUNTERS = (
    ("file_bytes", "input_bytes"),
    ("record_bytes", "file_bytes"),
    ("truncated_bytes", "trailing_bytes"),
    ("unread_bytes", "unread_bytes"),
    ("packets", "packets"),
    ("tcp_packets", "tcp_packets"),
    ("tcp_payload_bytes", "tcp_payload_bytes"),
    ("malformed_packets", "malformed"),
    ("ip_fragments", "ip_fragments"),
    ("non_tcp_packets", "non_tcp"),
    ("unsupported_link_packets", "unsupported_link"),
)


def summary_rows(
    accounting: Iterable[Any], errors: list[dict], connections: dict[str, dict] | None = None
) -> list[dict]:
    """One row per capture and a total row ("*"): every frame read, and where it went.

    ``accounting``: the compact rows of kinds capture, counts and connection
    (anything indexable by kind, capture, connection_id and info); ``errors``:
    the errors table's rows (:func:`error_rows` of the same rows); ``connections``:
    the per-capture :func:`connection_totals` when the connection rows are not in
    ``accounting`` (:func:`connection_totals_spark`).
    """
    accounting = list(accounting)
    if connections is None:
        connections = connection_totals(accounting)
    rows: dict[str, dict] = {}

    def row(capture: str) -> dict:
        return rows.setdefault(capture, {"capture": capture})

    files: dict[str, set] = {}  # the files of each capture (several for a capture set)
    streams_add_up: dict[str, bool] = {}
    for capture, total in connections.items():
        row(capture).update({name: total[name] for name in ("connections", *CONNECTION_SUMS)})
        streams_add_up[capture] = total["streams_add_up"]
    for r in accounting:
        if r["kind"] == "connection":
            continue
        info = json.loads(r["info"])
        target = row(r["capture"])
        if r["kind"] == "counts":
            for name, value in info.items():
                if name == "first_ts_ns":
                    target[name] = (
                        min(v for v in (value, target.get(name)) if v is not None)
                        if value is not None or target.get(name) is not None
                        else None
                    )
                elif name == "last_ts_ns":
                    target[name] = (
                        max(v for v in (value, target.get(name)) if v is not None)
                        if value is not None or target.get(name) is not None
                        else None
                    )
                else:
                    target[name] = target.get(name, 0) + (value or 0)
            continue
        target["format"] = info.get("format")
        target["snap_lengths"] = sorted(set(target.get("snap_lengths", [])) | set(info.get("snap_lengths", [])))
        target["splits"] = info.get("split_count", 1)
        files.setdefault(r["capture"], set()).add(info.get("file", r["capture"]))
        target["files"] = len(files[r["capture"]])
        # Each split's counters are its own share of the file: they add up.
        for summary_name, name in _SPLIT_COUNTERS:
            if isinstance(info.get(name), int):
                target[summary_name] = target.get(summary_name, 0) + info[name]
    for error in errors:
        target = row(error["capture"])
        target["errors"] = target.get("errors", 0) + 1
        if not target.get("error"):
            target["error"] = f"{error['category']} at byte offset {error['offset']}: {error['reason']}"
    out = []
    for capture in sorted(rows):
        r = rows[capture]
        for name in SUMMARY_COUNTS:
            r.setdefault(name, 0)
        out.append(r)
    total: dict[str, Any] = {"capture": "*"}
    for name in SUMMARY_COUNTS:
        total[name] = sum(r.get(name) or 0 for r in out)
    total["files"] = sum(r.get("files") or 0 for r in out)
    total["first_ts_ns"] = min((r["first_ts_ns"] for r in out if r.get("first_ts_ns") is not None), default=None)
    total["last_ts_ns"] = max((r["last_ts_ns"] for r in out if r.get("last_ts_ns") is not None), default=None)
    out.append(total)
    for r in out:
        frames_add_up = (
            r["frames"] == r["frames_ok"] + r["frames_undecodable"]
            and r["request_frames"] == r["exchanges_paired"] + r["no_response_expected"] + r["unpaired_requests"]
            and r["response_frames"] == r["exchanges_paired"] + r["unpaired_responses"]
        )
        # Every byte of every file: read as records (frames, in a frame dump), an incomplete
        # record at the end, or unread after an error that has a row in the errors table.
        files_add_up = r["file_bytes"] == r["record_bytes"] + r["truncated_bytes"] + r["unread_bytes"]
        packets_add_up = r["packets"] == (
            r["tcp_packets"]
            + r["malformed_packets"]
            + r["ip_fragments"]
            + r["non_tcp_packets"]
            + r["unsupported_link_packets"]
        )
        if r.get("format") == "frames":
            files_add_up = files_add_up and r["record_bytes"] == r["frame_bytes"]
        losses_explained = r["errors"] > 0 or not (r["truncated_bytes"] or r["unread_bytes"])
        streams = streams_add_up.get(r["capture"], True) if r["capture"] != "*" else all(streams_add_up.values())
        r["accounted"] = bool(frames_add_up and files_add_up and packets_add_up and losses_explained and streams)
    return out


def error_rows(accounting: Iterable[Any]) -> list[dict]:
    """The ``errors`` table: every input that could not be read completely, where and why.

    Ranges of one file that stopped at the same record give one row, their unread bytes summed.
    """
    merged: dict[tuple, dict] = {}
    for r in accounting:
        if r["kind"] != "capture":
            continue
        info = json.loads(r["info"])
        file = info.get("file", r["capture"])
        for error in info.get("errors") or []:
            key = (r["capture"], file, error["offset"], error["category"], error["reason"])
            row = merged.setdefault(
                key,
                {
                    "capture": r["capture"],
                    "file": file,
                    "category": error["category"],
                    "offset": error["offset"],
                    "reason": error["reason"],
                    "unread_bytes": 0,
                },
            )
            row["unread_bytes"] += error["unread_bytes"]
    return [merged[key] for key in sorted(merged)]


ERRORS_SCHEMA = pa.schema(
    [
        ("capture", pa.string()),
        ("category", pa.string()),
        ("offset", pa.int64()),
        ("reason", pa.string()),
        ("unread_bytes", pa.int64()),
        ("file", pa.string()),  # the file ``offset`` is in (a capture set has several)
        # stream_loss rows (stream_loss_rows): the connection, its direction, the bytes
        ("connection_id", pa.int64()),
        ("direction", pa.string()),
        ("lost_bytes", pa.int64()),
    ]
)


SUMMARY_COUNTS = (
    "file_bytes",
    "record_bytes",
    "truncated_bytes",
    "unread_bytes",
    "errors",
    "packets",
    "tcp_packets",
    "tcp_payload_bytes",
    "malformed_packets",
    "ip_fragments",
    "non_tcp_packets",
    "unsupported_link_packets",
    "connections",
    "frames",
    "request_frames",
    "response_frames",
    "frame_bytes",
    "frames_ok",
    "frames_undecodable",
    "exchanges_paired",
    "no_response_expected",
    "unpaired_requests",
    "unpaired_responses",
    "skipped_bytes",
    "gap_bytes",
    "tail_bytes",
    "duplicate_bytes",
    "snapped_bytes",
    "sasl_bytes",
    "other_bytes",
)
SUMMARY_SCHEMA = pa.schema(
    [("capture", pa.string()), ("format", pa.string()), ("splits", pa.int32()), ("files", pa.int32())]
    + [(name, pa.int64()) for name in SUMMARY_COUNTS]
    + [("first_ts_ns", pa.int64()), ("last_ts_ns", pa.int64()), ("accounted", pa.bool_()), ("error", pa.string())]
)

"""The small tables from the compact rows of every task: the one place their rules live.

The tasks of kproto/analyze/spark/worker.py return compact rows (:data:`worker.PARTS_SCHEMA`);
:func:`connections_table`, :func:`clients_table` and :func:`topics_table` turn the rows
of each key (a connection, a client, a topic-partition) into its row of ``connections``,
``clients`` and ``topics``. :func:`combine` calls them on every row at once in the driver
(few rows: the usual case); for many rows, :func:`kproto.analyze.spark.jobs.build_tables` has
Spark bring the rows of each key into one partition and calls the same functions there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kproto import versions as kv
from kproto._common.api_keys import ApiKey
from kproto._common.capture import KINDS
from kproto.analyze import fingerprint as FP
from kproto.arrow.capture import connection_schema
from kproto.arrow.exchanges import resolve_topic_ids  # the rule of a topic named by its ID: one home


# ---------------------------------------------------------------- combining compact rows
def merged_kind(a: str, b: str) -> str:
    """The kind of a connection two ranges read: the one confirmed first in KINDS (kafka first, empty last)."""
    return min(a, b, key=KINDS.index)


def rows_of(parts: pa.Table, kind: str, columns: Sequence[str]) -> list[dict]:
    """The compact rows of one kind, as dicts of ``columns``."""
    return parts.filter(pc.equal(parts["kind"], kind)).select(list(columns)).to_pylist()


def combine(parts: pa.Table, *, fingerprint: bool = True) -> dict[str, pa.Table]:
    """``connections``, ``clients`` and ``topics`` from the compact rows, in the driver.

    ``fingerprint=False`` leaves the fingerprint columns null (tools/record_fingerprints.py
    records the table they are computed from).

    For runs whose compact rows fit the driver comfortably (a few per connection
    and API version). For more, :func:`kproto.analyze.spark.jobs.build_tables` has Spark
    bring the rows of each key together and calls the same functions on them.
    """
    connections = connections_table(rows_of(parts, "connection", CONNECTION_COLUMNS))
    client_ip = {
        (c, i): ip
        for c, i, ip in zip(
            connections["capture"].to_pylist(),
            connections["connection_id"].to_pylist(),
            connections["client_ip"].to_pylist(),
        )
    }
    usage = [
        dict(u, client_ip=client_ip.get((u["capture"], u["connection_id"])))
        for u in rows_of(parts, "usage", USAGE_COLUMNS)
    ]
    name_of, id_of = resolve_topic_ids(rows_of(parts, "topic_name", ["topic_id", "topic"]))
    topics = named_topic_rows(rows_of(parts, "topic", TOPIC_COLUMNS), name_of, id_of)
    return {
        "connections": connections,
        "clients": clients_table(usage, fingerprint=fingerprint),
        "topics": topics_table(topics),
    }


#: The compact-row columns each table reads.
CONNECTION_COLUMNS = ("capture", "split_index", "info")
USAGE_COLUMNS = (
    "capture",
    "connection_id",
    "client_id",
    "api_key",
    "api_version",
    "client_software_name",
    "client_software_version",
    "requests",
    "deprecated_requests",
    "removed_in_4x_requests",
    "error_responses",
    "first_ns",
    "last_ns",
)
TOPIC_COLUMNS = (
    "topic",
    "topic_id",
    "partition",
    "api_key",
    "compression",
    "messages",
    "bytes",
    "records",
    "batches",
    "records_errors",
    "first_ns",
    "last_ns",
)


def connections_table(rows: Iterable[dict]) -> pa.Table:
    """Connections: one row per (capture, connection); ranges' counters add up.

    ``rows``: ``connection`` compact rows (capture, split_index, info), every row of each connection.
    """
    schema = connection_schema()
    counters = [f.name for f in schema if f.name.startswith(("request_", "response_"))]
    merged: dict[tuple, dict] = {}
    for r in sorted(rows, key=lambda r: r["split_index"]):
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
        row["kind"] = merged_kind(row["kind"], info["kind"])
        for name in counters:
            row[name] = (row[name] or 0) + (info[name] or 0)
    return pa.Table.from_pylist(list(merged.values()), schema=schema)


def clients_table(usage: Iterable[dict], *, fingerprint: bool = True) -> pa.Table:
    """Clients: usage rows with their connection's client address (``client_ip``), every row of each
    (client_ip, client_id), sorted by it."""
    names = {info.api_key: info.name for info in kv.api_table()}
    clients: dict[tuple, dict] = {}
    for u in usage:
        key = (u["client_ip"], u["client_id"])
        c = clients.setdefault(
            key,
            {
                "sent": [],
                "software": set(),
                "connections": set(),
                "requests": 0,
                "apis": set(),
                "deprecated": 0,
                "removed": 0,
                "errors": 0,
                "first": [],
                "last": [],
                "seen": {},
                "handshakes": {},
            },
        )
        if u["client_software_name"] is not None or u["client_software_version"] is not None:
            c["sent"].append((u["client_software_name"], u["client_software_version"]))
        c["software"].add(
            "/".join(v for v in (u["client_software_name"], u["client_software_version"]) if v is not None)
        )
        c["connections"].add((u["capture"], u["connection_id"]))
        c["requests"] += u["requests"]
        c["apis"].add((u["api_key"], u["api_version"]))
        pair = (u["api_key"], u["api_version"])
        if None not in pair:
            c["seen"][pair] = _least(c["seen"].get(pair), u["first_ns"])
        if u["api_key"] == kv.API_VERSIONS_KEY:
            connection = (u["capture"], u["connection_id"])
            c["handshakes"][connection] = _sum(c["handshakes"].get(connection, _UNSET), u["requests"])
        c["deprecated"] += u["deprecated_requests"]
        c["removed"] += u["removed_in_4x_requests"]
        c["errors"] += u["error_responses"]
        c["first"].append(u["first_ns"])
        c["last"].append(u["last_ns"])

    def api(key: int | None, version: int | None) -> str | None:
        if key is None or version is None:
            return None
        return f"{names.get(key, f'UNKNOWN({key})')} v{version}"

    def sent_pair(sent: list[tuple]) -> tuple:
        """The greatest KIP-511 (name, version) pair one request sent, nulls least (Spark's max of the
        struct): never the name of one program with the version of another sharing the client.id."""
        return max(sent, key=lambda pair: tuple((v is not None, v or "") for v in pair), default=(None, None))

    client_rows = [
        _with_fingerprint(
            fingerprint,
            {
                "client_ip": ip,
                "client_id": client_id,
                "client_software_name": sent_pair(c["sent"])[0],
                "client_software_version": sent_pair(c["sent"])[1],
                "client_software": sorted(c["software"]),
                "connections": len(c["connections"]),
                "requests": c["requests"],
                "deprecated_requests": c["deprecated"],
                "removed_in_4x_requests": c["removed"],
                "error_responses": c["errors"],
                "first_seen_ns": _least(*c["first"]),
                "last_seen_ns": _most(*c["last"]),
                "apis": [api(*v) for v in sorted(c["apis"], key=nulls_first)],
                "api_order": [api(*v) for v in FP.order_of_use(c["seen"])],
                "api_versions_per_connection": _most(*(n for n in c["handshakes"].values() if n is not _UNSET)),
            },
        )
        for (ip, client_id), c in sorted(clients.items(), key=lambda item: nulls_first(item[0]))
    ]
    return pa.Table.from_pylist(client_rows, schema=CLIENTS_SCHEMA)


def named_topic_rows(rows: Iterable[dict], name_of: dict[str, str], id_of: dict[str, str]) -> list[dict]:
    """``topic`` rows, a topic named by its ID under the name a response of the run gave that ID
    (and the reverse: see resolve_topic_ids)."""
    named = []
    for t in rows:
        topic = t["topic"] if t["topic"] is not None else name_of.get(t["topic_id"])
        topic_id = t["topic_id"] if t["topic_id"] is not None else id_of.get(t["topic"])
        named.append(dict(t, topic=topic, topic_id=topic_id))
    return named


def topics_table(rows: Iterable[dict]) -> pa.Table:
    """Topics: Produce requests and Fetch responses per topic-partition, from named ``topic`` rows
    (:func:`named_topic_rows`), every row of each (topic, topic_id, partition); sorted by it."""
    topics: dict[tuple, dict] = {}
    for t in rows:
        topic, topic_id = t["topic"], t["topic_id"]
        row = topics.setdefault(
            (topic, topic_id, t["partition"]), {"codecs": set(), "first": [], "last": [], "records_errors": None}
        )
        side = {ApiKey.PRODUCE: "produce", ApiKey.FETCH: "fetch"}.get(t["api_key"])
        for prefix in ("produce", "fetch"):
            for name, value in (
                (f"{prefix}_{'requests' if prefix == 'produce' else 'responses'}", t["messages"]),
                (f"{prefix}_bytes", t["bytes"]),
                (f"{prefix}_records", t["records"]),
                (f"{prefix}_batches", t["batches"]),
            ):
                # Spark: sum(when(this API, value).otherwise(0)), a null value adds nothing.
                contribution = value if side == prefix else 0
                row[name] = _sum(row.get(name, _UNSET), contribution)
        if t["compression"] is not None:
            row["codecs"].add(t["compression"])
        row["records_errors"] = _sum(
            row["records_errors"] if row["records_errors"] is not None else _UNSET, t["records_errors"]
        )
        row["first"].append(t["first_ns"])
        row["last"].append(t["last_ns"])
    topic_rows = []
    for (topic, topic_id, partition), row in sorted(topics.items(), key=lambda item: nulls_first(item[0])):
        out = {"topic": topic, "topic_id": topic_id, "partition": partition}
        out.update({name: (None if row[name] is _UNSET else row[name]) for name in TOPIC_SUMS})
        out.update(
            {
                "compression": ",".join(sorted(row["codecs"])),
                "records_errors": row["records_errors"],
                "first_ts_ns": _least(*row["first"]),
                "last_ts_ns": _most(*row["last"]),
            }
        )
        topic_rows.append(out)
    return pa.Table.from_pylist(topic_rows, schema=TOPICS_SCHEMA)


def nulls_first(value: tuple) -> tuple:
    """A sort key of a tuple that may hold None: ascending, nulls first (Spark's orderBy)."""
    return tuple((v is not None, v if v is not None else 0) for v in value)


def _with_fingerprint(wanted: bool, row: dict) -> dict:
    if wanted:
        row.update(
            FP.classify_row(
                row["client_id"],
                row["api_order"],
                row["client_software_name"],
                row["client_software_version"],
                row["api_versions_per_connection"],
                row["client_software"],
            )
        )
    else:
        row.update(dict.fromkeys(FP.FINGERPRINT_COLUMNS))
    return row


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


TOPIC_SUMS = (
    "produce_requests",
    "produce_bytes",
    "produce_records",
    "produce_batches",
    "fetch_responses",
    "fetch_bytes",
    "fetch_records",
    "fetch_batches",
)
TOPICS_SCHEMA = pa.schema(
    [("topic", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32())]
    + [(name, pa.int64()) for name in TOPIC_SUMS]
    + [
        ("compression", pa.string()),
        ("records_errors", pa.int64()),
        ("first_ts_ns", pa.int64()),
        ("last_ts_ns", pa.int64()),
    ]
)
CLIENTS_SCHEMA = pa.schema(
    [
        ("client_ip", pa.string()),
        ("client_id", pa.string()),
        ("client_software_name", pa.string()),
        # Element fields as Spark names them (collect_set never holds a null).
        ("client_software_version", pa.string()),
        ("client_software", pa.list_(pa.field("element", pa.string(), nullable=False))),
        ("connections", pa.int64()),
        ("requests", pa.int64()),
        ("deprecated_requests", pa.int64()),
        ("removed_in_4x_requests", pa.int64()),
        ("error_responses", pa.int64()),
        ("first_seen_ns", pa.int64()),
        ("last_seen_ns", pa.int64()),
        ("apis", pa.list_(pa.field("element", pa.string()))),
        # Every (API, version) in the order the client first used it: what kproto.analyze.fingerprint reads.
        ("api_order", pa.list_(pa.field("element", pa.string()))),
        # The most ApiVersions requests it sent on one connection (kafka-python 1.4 asks twice): the fingerprint reads it.
        ("api_versions_per_connection", pa.int64()),
        ("likely_software", pa.string()),
        ("likely_versions", pa.string()),
        ("fingerprint_confidence", pa.string()),
        ("fingerprint_mismatch", pa.string()),
        ("fingerprint_evidence", pa.string()),
    ]
)

"""What the report counts, written once: each raw list of the report's facts as a query.

A :class:`Query` names its rows (a table or a :class:`View` of one: rows that hold, the
columns kept, the joins by connection), the keys it groups them by, what it counts per
group, its order and how many rows the report keeps. Two executors run the same queries:
:func:`run_arrow` over pyarrow Tables in the driver (small runs: no Spark job), and
:func:`run_spark` as Spark SQL over the written tables (any size: Spark's aggregations
stream). They differ only in how they say a condition or an aggregate; what is counted,
and over which rows, lives here. kproto.analyze.spark.report turns the raw lists into the facts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kproto._common.api_keys import ApiKey

LIMIT = 1000  # rows per report section; the tables hold everything
#: The error code of a refused ApiVersions request (UNSUPPORTED_VERSION, KIP-511).
UNSUPPORTED_VERSION = 35

#: A condition is (column, test) or (column, test, value); a row is kept when every condition holds
#: (a null never satisfies a comparison). Tests: "==", "!=", "valid", "null", "true" (true, not null),
#: "not true" (false or null), "not in".
Condition = tuple


@dataclass(frozen=True)
class View:
    """Rows of ``source`` (a table or another view) that meet ``where``; ``columns`` kept (a name, or
    (name, new name)), all when None; then ``joins`` (view, key columns): left outer joins."""

    source: str
    where: tuple[Condition, ...] = ()
    columns: tuple[str | tuple[str, str], ...] | None = None
    joins: tuple[tuple[View, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Query:
    """Rows of ``source`` that meet ``where``, grouped by ``keys``, with ``aggregates`` per group:
    (name, "count"), (name, "max" / "min" / "any", column), (name, "sum", (columns added)),
    (name, "distinct", (columns: distinct non-null tuples)), (name, "percentile", (column, q)).
    Without aggregates: the distinct keys. ``order``: ascending, nulls first; ``limit`` rows kept."""

    source: str
    keys: tuple[str, ...]
    where: tuple[Condition, ...] = ()
    aggregates: tuple[tuple, ...] = ()
    order: tuple[str, ...] = ()
    limit: int = LIMIT


ADDRESS = ("capture", "connection_id", "client_ip", "server_ip", "server_port")
CONNECTION = ("capture", "connection_id")
API_VERSIONS = int(ApiKey.API_VERSIONS)  # a plain int: Spark and Arrow expressions take it

VIEWS = {
    # Exchanges with their connection's addresses; requests are those with a request frame.
    "with_address": View("exchanges", joins=((View("connections", columns=ADDRESS), CONNECTION),)),
    "requests": View("with_address", where=(("request_sequence", "valid"),)),
    # The brokers' ApiVersions answers, with the broker's address.
    "api_answers": View(
        "frames",
        where=(("direction", "==", 1), ("api_key", "==", API_VERSIONS), ("status", "==", 0)),
        joins=((View("connections", columns=("capture", "connection_id", "server_ip", "server_port")), CONNECTION),),
    ),
    # KIP-511 fallbacks: an ApiVersions request refused as unsupported, the body of the refusal, and the
    # version of the ApiVersions request that then succeeded on the same connection.
    "refusals": View(
        "with_address",
        where=(("api_key", "==", API_VERSIONS), ("error_code", "==", UNSUPPORTED_VERSION)),
        joins=(
            (
                View(
                    "frames",
                    where=(("direction", "==", 1),),
                    columns=("capture", "connection_id", ("sequence", "response_sequence"), "body"),
                ),
                ("capture", "connection_id", "response_sequence"),
            ),
            (
                View(
                    "with_address",
                    where=(("api_key", "==", API_VERSIONS), ("error_code", "==", 0)),
                    columns=("capture", "connection_id", ("api_version", "retry_version")),
                ),
                CONNECTION,
            ),
        ),
    ),
}

CLIENT_BROKER_KEYS = ("client_ip", "client_id", "server_ip", "server_port")  # who sent requests to whom
FALLBACK_KEYS = ("client_ip", "client_id", "server_ip", "server_port", "api_version", "retry_version", "body")
INVALID_NAME_KEYS = ("client_ip", "client_id", "client_software_name", "client_software_version", "software_problems")
USAGE_KEYS = ("client_ip", "client_id", "api_key", "api_version")
USAGE = (
    ("software_name", "max", "client_software_name"),
    ("requests", "count"),
    ("first_ns", "min", "request_ts_ns"),
    ("last_ns", "max", "request_ts_ns"),
)
LATENCY_QUANTILES = (0.5, 0.99)

#: The tables the report shows the head of, as written (already in their order).
HEADS = ("clients", "topics")

QUERIES = {
    # KIP-516: IDs no captured response named (the topics table keeps them with topic null).
    "unnamed_topic_ids": Query(
        "topics", ("topic_id",), (("topic", "null"), ("topic_id", "valid")), order=("topic_id",)
    ),
    "api_versions": Query(
        "requests",
        ("api_key", "api_version"),
        aggregates=(
            ("requests", "count"),
            ("clients", "distinct", ("client_ip", "client_id")),
            ("deprecated", "any", "deprecated"),
            ("removed_in_4x", "any", "removed_in_4x"),
        ),
        order=("api_key", "api_version"),
    ),
    "removed": Query("requests", USAGE_KEYS, (("removed_in_4x", "true"),), USAGE, USAGE_KEYS),
    "deprecated": Query(
        "requests", USAGE_KEYS, (("deprecated", "true"), ("removed_in_4x", "not true")), USAGE, USAGE_KEYS
    ),
    "client_brokers": Query("requests", CLIENT_BROKER_KEYS, order=CLIENT_BROKER_KEYS, limit=LIMIT * 10),
    "api_responses": Query("api_answers", ("server_ip", "server_port", "api_version", "body"), limit=200),
    "fallbacks": Query("refusals", FALLBACK_KEYS, aggregates=(("connections", "count"),)),
    "invalid_software_names": Query(
        "requests",
        INVALID_NAME_KEYS,
        (("software_problems", "valid"),),
        (("requests", "count"), ("broker_answer", "max", "error_name")),
        ("client_ip", "client_id"),
    ),
    "errors": Query(
        "exchanges",
        ("api_key", "error_code", "error_name"),
        (("error_code", "!=", 0),),
        (("responses", "count"),),
        ("api_key", "error_code"),
    ),
    "latency": Query(
        "exchanges",
        ("api_key",),
        (("latency_ns", "valid"),),
        (
            ("exchanges", "count"),
            ("p50_ns", "percentile", ("latency_ns", LATENCY_QUANTILES[0])),
            ("p99_ns", "percentile", ("latency_ns", LATENCY_QUANTILES[1])),
            ("max_ns", "max", "latency_ns"),
        ),
        ("api_key",),
    ),
    "undecodable_frames": Query(
        "frames",
        ("direction", "api_key", "api_version", "status_name"),
        (("status", "!=", 0),),
        (("frames", "count"), ("first_error_offset", "min", "error_offset")),
        ("status_name", "api_key"),
    ),
    "unpaired": Query(
        "exchanges",
        ("pair_status_name", "api_key"),
        (("pair_status", "!=", 0),),
        (("exchanges", "count"),),
        ("pair_status_name", "api_key"),
    ),
    # Connections that are not Kafka (the connections table's kind): counted, never in frames.
    "other_protocols": Query(
        "connections",
        ("kind", "server_port"),
        (("kind", "not in", ("kafka", "empty")),),
        (
            ("connections", "count"),
            ("bytes", "sum", ("request_other_bytes", "response_other_bytes")),
            ("packets", "sum", ("request_packets", "response_packets")),
        ),
        ("kind", "server_port"),
    ),
}


# ---------------------------------------------------------------- pyarrow, in the driver
def run_arrow(tables: Mapping[str, pa.Table]) -> dict[str, list[dict]]:
    """Every raw list from pyarrow Tables (frames, exchanges, connections, clients, topics)."""
    views: dict[str, Any] = dict(tables)
    raw = {name: tables[name].slice(0, LIMIT).to_pylist() for name in HEADS}
    for name, query in QUERIES.items():
        raw[name] = _arrow_query(_view(views, query.source, ARROW), query)
    return raw


def _view(views: dict[str, Any], name: str | View, executor: Executor):
    """The rows of a table or view (a view named in VIEWS made once per run, kept in ``views``)."""
    view = VIEWS.get(name) if isinstance(name, str) else name
    if view is None:
        return views[name]
    key = name if isinstance(name, str) else None
    if key is not None and key in views:
        return views[key]
    rows = executor.where(_view(views, view.source, executor), view.where)
    if view.columns is not None:
        rows = executor.select(rows, [(c, c) if isinstance(c, str) else c for c in view.columns])
    for other, on in view.joins:
        rows = executor.join(rows, _view(views, other, executor), list(on))
    if key is not None:
        views[key] = rows
    return rows


@dataclass(frozen=True)
class Executor:
    """How one engine says a view's steps: rows that meet conditions, columns kept (old, new), a left join."""

    where: Callable[[Any, Sequence[Condition]], Any]
    select: Callable[[Any, list[tuple[str, str]]], Any]
    join: Callable[[Any, Any, list[str]], Any]


def _arrow_where(table: pa.Table, where: Sequence[Condition]) -> pa.Table:
    if not where:
        return table
    mask = None
    for condition in where:
        holds = _arrow_condition(table, *condition)
        mask = holds if mask is None else pc.and_(mask, holds)
    return table.filter(mask)


def _arrow_condition(table: pa.Table, column: str, test: str, value: Any = None):
    values = table[column]
    if test == "==":
        return pc.equal(values, value)
    if test == "!=":
        return pc.not_equal(values, value)
    if test == "valid":
        return pc.is_valid(values)
    if test == "null":
        return pc.is_null(values)
    if test == "true":
        return pc.fill_null(values, False)
    if test == "not true":
        return pc.invert(pc.fill_null(values, False))
    if test == "not in":
        return pc.invert(pc.is_in(values, pa.array(list(value))))
    raise ValueError(f"unknown test {test!r}")


ARROW = Executor(
    where=lambda table, where: _arrow_where(table, where),
    select=lambda table, pairs: table.select([old for old, _ in pairs]).rename_columns([new for _, new in pairs]),
    join=lambda table, other, on: table.join(other, on, join_type="left outer"),
)


def _arrow_query(source: pa.Table, query: Query) -> list[dict]:
    table = _arrow_where(source, query.where)
    keys = list(query.keys)
    plain, distinct, picks = [], {}, []
    for name, op, *column in query.aggregates:
        if op == "count":
            plain.append(([], "count_all", name))
        elif op == "sum":
            table = table.append_column(f"_{name}", _added(table, column[0]))
            plain.append((f"_{name}", "sum", name))
        elif op == "any":
            table = table.append_column(f"_{name}", pc.cast(table[column[0]], pa.int8()))
            plain.append((f"_{name}", "max", name))
        elif op in ("max", "min"):
            plain.append((column[0], op, name))
        elif op == "distinct":
            known = table
            for c in column[0]:
                known = known.filter(pc.is_valid(known[c]))
            counted = (
                known.group_by(keys + list(column[0]), use_threads=False)
                .aggregate([])
                .group_by(keys, use_threads=False)
                .aggregate([([], "count_all")])
            )
            distinct[name] = {tuple(r[k] for k in keys): r["count_all"] for r in counted.to_pylist()}
        else:
            picks.append((name, *column[0]))
    result = table.group_by(keys, use_threads=False).aggregate([(c, op) for c, op, _ in plain])
    produced = {("count_all" if op == "count_all" else f"{c}_{op}"): name for c, op, name in plain}
    rows = []
    for r in result.to_pylist():
        row = {k: r[k] for k in keys}
        for name, op, *_ in query.aggregates:
            if op == "distinct":
                row[name] = distinct[name].get(tuple(r[k] for k in keys), 0)
            elif op == "percentile":
                row[name] = None
            else:
                value = r[next(p for p, n in produced.items() if n == name)]
                row[name] = bool(value) if op == "any" else value
        rows.append(row)
    if query.order:
        rows.sort(key=lambda r: tuple((r[k] is not None, r[k] if r[k] is not None else 0) for k in query.order))
    rows = rows[: query.limit]
    for name, column, q in picks:
        for row in rows:
            group = table
            for k in keys:
                group = group.filter(pc.equal(group[k], row[k]))
            values = np.sort(group[column].to_numpy())
            # The element at rank ceil(q * n), as Spark's percentile_approx gives on data this small.
            row[name] = int(values[max(0, min(len(values) - 1, int(np.ceil(q * len(values))) - 1))])
    return rows


def _added(table: pa.Table, columns: Sequence[str]) -> pa.ChunkedArray:
    total = table[columns[0]]
    for c in columns[1:]:
        total = pc.add(total, table[c])
    return total


# ---------------------------------------------------------------- Spark SQL, any size
def run_spark(tables: Mapping[str, Any]) -> dict[str, list[dict]]:
    """Every raw list as Spark queries over DataFrames (frames, exchanges, connections, clients, topics)."""
    views: dict[str, Any] = dict(tables)
    raw = {name: _spark_rows(tables[name], LIMIT) for name in HEADS}
    for name, query in QUERIES.items():
        raw[name] = _spark_query(_view(views, query.source, SPARK), query)
    return raw


def _spark_rows(frame, limit: int) -> list[dict]:
    return [r.asDict(recursive=True) for r in frame.limit(limit).collect()]


def _spark_where(frame, where: Sequence[Condition]):
    for condition in where:
        frame = frame.filter(_spark_condition(*condition))
    return frame


def _spark_condition(column: str, test: str, value: Any = None):
    from pyspark.sql import functions as F

    c = F.col(column)
    if test == "==":
        return c == value
    if test == "!=":
        return c != value
    if test == "valid":
        return c.isNotNull()
    if test == "null":
        return c.isNull()
    if test == "true":
        return c
    if test == "not true":
        return ~F.coalesce(c, F.lit(False))
    if test == "not in":
        return ~c.isin(*value)
    raise ValueError(f"unknown test {test!r}")


def _spark_select(frame, pairs: list[tuple[str, str]]):
    from pyspark.sql import functions as F

    return frame.select(*[F.col(old).alias(new) if old != new else F.col(old) for old, new in pairs])


SPARK = Executor(
    where=lambda frame, where: _spark_where(frame, where),
    select=_spark_select,
    join=lambda frame, other, on: frame.join(other, on, "left"),
)


def _spark_query(source, query: Query) -> list[dict]:
    from pyspark.sql import functions as F

    frame = _spark_where(source, query.where)
    if not query.aggregates:
        frame = frame.select(*query.keys).distinct()
    else:
        columns = []
        for name, op, *column in query.aggregates:
            if op == "count":
                columns.append(F.count(F.lit(1)).alias(name))
            elif op == "sum":
                added = F.col(column[0][0])
                for c in column[0][1:]:
                    added = added + F.col(c)
                columns.append(F.sum(added).alias(name))
            elif op == "any":
                columns.append(F.max(F.col(column[0]).cast("int")).cast("boolean").alias(name))
            elif op == "distinct":
                columns.append(F.countDistinct(*column[0]).alias(name))
            elif op == "percentile":
                columns.append(F.percentile_approx(column[0][0], column[0][1], 10000).alias(name))
            else:
                columns.append(getattr(F, op)(column[0]).alias(name))
        frame = frame.groupBy(*query.keys).agg(*columns)
    if query.order:
        frame = frame.orderBy(*query.order)
    return _spark_rows(frame, query.limit)

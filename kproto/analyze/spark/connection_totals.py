"""The summary's figures of a capture's connections: how many, their byte counters, their streams' identity.

:func:`kproto.analyze.spark.accounting.summary_rows` takes them from :func:`connection_totals` (the
``connection`` compact rows in the driver) or :func:`connection_totals_spark` (the written
connections table, aggregated by Spark: for runs whose connections stay out of the driver).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

#: The byte counters of the connections table the summary adds up (both directions).
CONNECTION_SUMS = (
    "skipped_bytes",
    "gap_bytes",
    "tail_bytes",
    "duplicate_bytes",
    "snapped_bytes",
    "sasl_bytes",
    "other_bytes",
)
#: Where every byte that entered a stream went: a frame, skipped to find a boundary, a tail, a raw
#: SASL token, or another protocol's (a connection that is not Kafka); bytes never captured (gaps,
#: snap length) never entered it. Per connection and direction, stream_bytes is their sum.
STREAM_PARTS = ("frame_bytes", "skipped_bytes", "tail_bytes", "sasl_bytes", "other_bytes")
SIDES = ("request_", "response_")


def connection_totals(accounting: Iterable[Any]) -> dict[str, dict]:
    """Per capture, from the ``connection`` compact rows: its connections, the :data:`CONNECTION_SUMS`,
    and ``streams_add_up`` (:data:`STREAM_PARTS`), checked on each connection's merged counters (a
    range's row holds only its share of a connection, kproto/analyze/spark/range_pipeline.py).
    :func:`connection_totals_spark` is the same from the connections table in Spark."""
    names = {"stream_bytes", *STREAM_PARTS, *CONNECTION_SUMS}
    merged: dict[tuple, dict] = {}
    for r in accounting:
        if r["kind"] != "connection":
            continue
        info = json.loads(r["info"])
        counts = merged.setdefault((r["capture"], r["connection_id"]), {})
        for side in SIDES:
            for name in names:
                # .get: connection rows written before a counter existed (a followed run's earlier parts)
                counts[side + name] = counts.get(side + name, 0) + info.get(side + name, 0)
    totals: dict[str, dict] = {}
    for (capture, _), counts in merged.items():
        total = totals.setdefault(
            capture, {"connections": 0, "streams_add_up": True, **dict.fromkeys(CONNECTION_SUMS, 0)}
        )
        total["connections"] += 1
        for name in CONNECTION_SUMS:
            total[name] += counts["request_" + name] + counts["response_" + name]
        total["streams_add_up"] = total["streams_add_up"] and all(
            counts[side + "stream_bytes"] == sum(counts[side + part] for part in STREAM_PARTS) for side in SIDES
        )
    return totals


def connection_totals_spark(connections) -> dict[str, dict]:
    """:func:`connection_totals` from the connections table (a Spark DataFrame, one row per connection):
    one small row per capture comes to the driver, not the connections."""
    from pyspark.sql import functions as F

    def side_sum(side: str):
        total = F.col(side + STREAM_PARTS[0])
        for part in STREAM_PARTS[1:]:
            total = total + F.col(side + part)
        return total

    adds_up = F.when(F.col("request_stream_bytes") == side_sum("request_"), 1).otherwise(0) * F.when(
        F.col("response_stream_bytes") == side_sum("response_"), 1
    ).otherwise(0)
    rows = (
        connections.groupBy("capture")
        .agg(
            F.count(F.lit(1)).alias("connections"),
            F.min(adds_up).alias("streams_add_up"),
            *[F.sum(F.col("request_" + name) + F.col("response_" + name)).alias(name) for name in CONNECTION_SUMS],
        )
        .collect()
    )
    return {r["capture"]: dict(r.asDict(), streams_add_up=bool(r["streams_add_up"])) for r in rows}

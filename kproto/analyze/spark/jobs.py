"""A run of ``kproto analyze`` from start to end: list and plan the inputs, the one pass over the
data, and the end of a run (the small tables, ``summary``, ``errors`` and the report).

pyspark is imported inside the functions, so importing this module loads no Spark. Each step
has its module: the session (kproto.analyze.spark.session), progress on stderr (.progress), the
inputs and their splits (.inputs), the Spark job that decodes them (.decode_job), the accounting
(.accounting); the small tables' rules are in :mod:`kproto.analyze.spark.combine`, whichever side
runs them (here: in the driver, or per key in Spark's partitions, :func:`build_tables`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from kproto.analyze.spark import combine as C
from kproto.analyze.spark import decode as D
from kproto.analyze.spark import planning as P
from kproto.analyze.spark import report as R
from kproto.analyze.spark import worker as W
from kproto.analyze.spark.accounting import ERRORS_SCHEMA, SUMMARY_SCHEMA, error_rows, summary_rows
from kproto.analyze.spark.connection_totals import connection_totals_spark
from kproto.analyze.spark.decode_job import compact_rows, finish_output, prepare_output
from kproto.analyze.spark.inputs import input_bytes, list_inputs, plan_splits, split_size
from kproto.analyze.spark.options import Options
from kproto.analyze.spark.progress import Progress
from kproto.analyze.spark.session import spark_session
from kproto.analyze.spark.stream_losses import STREAM_LOSSES, stream_loss_rows
from kproto.arrow.capture import connection_schema

__all__ = ["TABLES", "Options", "Result", "analyze", "build_tables", "finish_run", "spark_session"]

TABLES = ("frames", "exchanges", "clients", "topics", "summary", "connections", "errors")

#: Compact rows there are about as many of as connections: kept out of the driver for large inputs.
PER_CONNECTION_KINDS = ("connection", "usage")


@dataclass
class Result:
    out: Path
    summary: list[dict]
    facts: dict | None
    tables: dict[str, str]
    errors: list[dict] = field(default_factory=list)  # the errors table's rows

    @property
    def complete(self) -> bool:
        """Every input was read completely (no row in the errors table)."""
        return not self.errors


def analyze(
    paths: Sequence[str],
    out: str | os.PathLike,
    *,
    spark=None,
    master: str | None = None,
    options: Options | None = None,
    progress: bool | Callable = True,
    profile=None,
) -> Result:
    """Read captures and frame tables, write the Parquet tables and the report under ``out``.

    ``profile``: a :class:`kproto.analyze.spark.profile.PhaseProfile` to time the phases in."""
    from pyspark.sql import functions as F

    options = options or Options()
    spark = spark or spark_session(master)
    out_text = str(out).rstrip("/")
    local_out = P.local_path(out_text)
    if local_out is not None:
        local_out = os.path.abspath(local_out)
        out_text = local_out
        Path(local_out).mkdir(parents=True, exist_ok=True)
    with Progress(spark, enabled=bool(progress), profile=profile) as show:
        show.step("listing inputs")
        inputs = list_inputs(spark, paths)
        if not inputs.files and not inputs.parquet:
            raise FileNotFoundError(f"no input files in {', '.join(paths)}")
        split_bytes = split_size(options, inputs, spark.sparkContext.defaultParallelism)
        show.step(f"planning {len(inputs.files)} capture file(s)")
        splits = plan_splits(
            spark,
            inputs,
            split_bytes=split_bytes,
            overlap_bytes=options.overlap_bytes,
            capture_sets=options.capture_sets,
            named_sets=options.named_sets,
        )
        tables_read = f" and {len(inputs.parquet)} Parquet frame table(s)" if inputs.parquet else ""
        show.step(f"reading, decoding and writing {len(splits)} split(s) of the captures{tables_read}")
        prepare_output(out_text)
        parts, stage1 = compact_rows(spark, inputs, splits, options, out_text)
        parts = parts.persist()
        # The one pass over the data: frames and exchanges are written now, and the compact rows
        # come back to the driver in the same job (a count first would be a second job). For a
        # large input only the rows that do not grow with its connections come in that job: it may
        # hold millions of connections, which the driver's heap would hold at once. Their rows then
        # come from the cached rows when they are few (at most driver_rows in all), else Spark
        # combines them.
        size = input_bytes(inputs)
        complete = options.driver_rows > 0 and size is not None and size <= options.driver_input_bytes
        if complete:
            collected = parts.toArrow()
        else:
            per_connection = F.col("kind").isin(*PER_CONNECTION_KINDS)
            collected = parts.filter(~per_connection).toArrow()
            room = options.driver_rows - collected.num_rows
            if options.driver_rows > 0 and room >= 0:
                more = parts.filter(per_connection).limit(room + 1).toArrow()
                complete = more.num_rows <= room
                collected = pa.concat_tables([collected, more]) if complete else collected
        result = finish_run(
            spark,
            out_text,
            collected,
            options,
            parts=parts,
            rows_complete=complete,
            report=options.report,
            report_dir=Path(local_out) if local_out is not None else None,
            step=show.step,
        )
        parts.unpersist()
        if stage1 is not None and stage1.is_cached:
            stage1.unpersist()
        show.done()
    return result


def finish_run(
    spark,
    out: str,
    rows: pa.Table,
    options: Options,
    *,
    parts=None,
    rows_complete: bool = True,
    extra_errors: Sequence[dict] = (),
    report: bool = True,
    report_dir: Path | None = None,
    step: Callable[[str], None] = lambda _phase: None,
) -> Result:
    """The end of a run, for ``kproto analyze`` and ``--follow`` alike: from the compact rows of every
    task (``rows``), the small tables, ``summary`` and ``errors`` under ``out``, and the report's facts
    (when ``report``; written under ``report_dir`` when given).

    ``parts``: the same rows as a Spark DataFrame, to combine with Spark when there are more than
    ``options.driver_rows`` of them (None: always in the driver); ``rows_complete``: whether ``rows``
    hold the per-connection rows too (a large input leaves them in ``parts``, out of the driver's
    heap: Spark combines them and the summary's connection figures come from the written
    connections table); ``extra_errors``: rows of the errors
    table the compact rows do not hold (a followed file that changed after it was read); ``step(phase)``
    is told of each phase.
    """
    compact_count = rows.num_rows
    finish_output(out, rows)
    written = {
        name: f"{out}/{name}"
        for name in ("frames", "exchanges", "connections", "clients", "topics", "summary", "errors")
    }
    has_connections = parts is None or rows_complete
    # The accounting: a row per capture and split, and per connection and split when the rows hold them.
    accounting = [
        r
        for r in rows.select(["kind", "capture", "connection_id", "info"]).to_pylist()
        if r["kind"] in ("capture", "counts") or (has_connections and r["kind"] == "connection")
    ]
    errors = error_rows(accounting)
    if extra_errors:
        errors = sorted(
            errors + list(extra_errors), key=lambda e: (e["capture"], e["offset"], e["category"], e["reason"])
        )
    in_driver = has_connections and (parts is None or compact_count <= options.driver_rows)
    if in_driver:
        # Few compact rows (the usual case): combine them here, no Spark job per table.
        step(f"combining {compact_count:,} compact rows, writing the tables")
        tables = C.combine(rows)
        for name in ("connections", "clients", "topics"):
            write_table(tables[name], out, name)
    else:
        tables = build_tables(spark, parts)
        for name in ("connections", "clients", "topics"):
            step(f"writing {name}")
            tables[name].write.mode("overwrite").parquet(f"{out}/{name}")
    if has_connections:
        summary = summary_rows(accounting, errors)
        losses = stream_loss_rows(accounting)
    else:
        # The summary's connection figures from the table just written (one row per capture), and
        # the stream losses from the connection rows that have any (few, whatever the input's size).
        summary = summary_rows(accounting, errors, connection_totals_spark(spark.read.parquet(written["connections"])))
        losses = stream_loss_rows(
            parts.filter(_has_stream_loss()).select("kind", "capture", "connection_id", "info").toArrow().to_pylist()
        )
    write_table(pa.Table.from_pylist(summary, schema=SUMMARY_SCHEMA), out, "summary")
    write_table(
        pa.Table.from_pylist(errors + losses, schema=ERRORS_SCHEMA), out, "errors"
    )  # the input errors, then each connection direction's stream losses
    facts = None
    if report:
        step("building the report")
        import pyspark

        total_frames = next(r for r in summary if r["capture"] == "*")["frames"]
        if in_driver and total_frames <= options.driver_report_frames:
            # Small tables: read them back here and compute the facts with pyarrow (no Spark job).
            in_memory = {name: tables[name] for name in ("connections", "clients", "topics")}
            in_memory.update(report_inputs_arrow(written))
            facts = R.collect_facts_arrow(in_memory, summary, errors, pyspark.__version__)
        else:
            facts = R.collect_facts(spark, report_tables(spark, written), summary, errors)
        if report_dir is not None:
            R.write_report(facts, report_dir)
    return Result(report_dir or Path(out), summary, facts, written, errors)


def _has_stream_loss():
    """A Spark condition: a connection row whose counters hold a stream loss (stream_losses.STREAM_LOSSES)."""
    from pyspark.sql import functions as F

    lost = [
        F.coalesce(F.get_json_object("info", f"$.{side}_{name}").cast("long"), F.lit(0)) > 0
        for side in ("request", "response")
        for name, _text in STREAM_LOSSES
    ]
    condition = lost[0]
    for more in lost[1:]:
        condition = condition | more
    return (F.col("kind") == "connection") & condition


def write_table(table: pa.Table, out: str, name: str) -> None:
    """One small table as ``<out>/<name>/part-00000.parquet`` (replacing what was there), with _SUCCESS."""
    filesystem, base = W.output_filesystem(out)
    filesystem.create_dir(f"{base}/{name}", recursive=True)
    filesystem.delete_dir_contents(f"{base}/{name}", missing_dir_ok=True)
    pq.write_table(table, f"{base}/{name}/part-00000.parquet", filesystem=filesystem)
    with filesystem.open_output_stream(f"{base}/{name}/_SUCCESS") as stream:
        stream.write(b"")


#: The columns of ``frames`` the report reads (the JSON body only of ApiVersions responses).
REPORT_FRAME_COLUMNS = (
    "capture",
    "connection_id",
    "direction",
    "sequence",
    "api_key",
    "api_version",
    "status",
    "status_name",
    "error_offset",
)


def report_inputs_arrow(written: dict[str, str]) -> dict[str, pa.Table]:
    """``frames`` (the columns the report reads) and ``exchanges`` as pyarrow Tables, from the written Parquet."""
    read = {}
    for name in ("frames", "exchanges"):
        filesystem, base = W.output_filesystem(written[name])
        read[name] = ds.dataset(
            base,
            filesystem=filesystem,
            format="parquet",
            schema=W.FRAMES_SCHEMA if name == "frames" else W.EXCHANGES_SCHEMA,
            exclude_invalid_files=False,
            ignore_prefixes=[".", "_"],
        )
    is_api_versions_response = (ds.field("direction") == 1) & (ds.field("api_key") == D.API_VERSIONS)
    columns = {name: ds.field(name) for name in REPORT_FRAME_COLUMNS}
    columns["body"] = pc.if_else(is_api_versions_response, ds.field("body"), pa.scalar(None, pa.string()))
    return {"frames": read["frames"].to_table(columns=columns), "exchanges": read["exchanges"].to_table()}


def report_tables(spark, written: dict[str, str]) -> dict[str, Any]:
    """The written tables as DataFrames, for the report's queries (kproto/analyze/spark/report_facts.py joins them)."""
    return {name: spark.read.parquet(path) for name, path in written.items()}


def build_tables(spark, parts) -> dict[str, Any]:
    """DataFrames of the small tables (connections, clients, topics), from many compact rows.

    Spark brings the rows of each key (a connection, a client, a topic-partition) into one
    partition; kproto.analyze.spark.combine makes each key's row there, with the functions the driver
    calls on few rows (:func:`kproto.analyze.spark.combine.combine`): one rule for both.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    kind = F.col("kind")
    connection_rows = parts.filter(kind == "connection").select("capture", "connection_id", *C.CONNECTION_COLUMNS[1:])
    connections = connection_rows.repartition("capture", "connection_id").mapInArrow(
        _per_partition(C.connections_table), from_arrow_schema(connection_schema())
    )

    # Clients: the usage rows with their connection's client address.
    address = connections.select("capture", "connection_id", "client_ip")
    usage = parts.filter(kind == "usage").select(*C.USAGE_COLUMNS).join(address, ["capture", "connection_id"], "left")
    clients = (
        usage.repartition("client_ip", "client_id")
        .mapInArrow(_per_partition(C.clients_table), from_arrow_schema(C.CLIENTS_SCHEMA))
        .orderBy("client_ip", "client_id")
    )

    # Topics: the names and IDs responses gave (a few rows per topic) resolved in the driver, then every
    # row of a topic-partition brought together under its resolved name and ID.
    names = parts.filter(kind == "topic_name").select("topic_id", "topic").distinct().collect()
    name_of, id_of = C.resolve_topic_ids(row.asDict() for row in names)
    topic_rows = parts.filter(kind == "topic").select(*C.TOPIC_COLUMNS)
    topic_type = topic_rows.schema

    def named(batches):
        for batch in batches:
            rows = C.named_topic_rows(batch.to_pylist(), name_of, id_of)
            yield pa.RecordBatch.from_pylist(rows, schema=batch.schema)

    topics = (
        topic_rows.mapInArrow(named, topic_type)
        .repartition("topic", "topic_id", "partition")
        .mapInArrow(_per_partition(C.topics_table), from_arrow_schema(C.TOPICS_SCHEMA))
        .orderBy("topic", "topic_id", "partition")
    )
    return {"connections": connections, "clients": clients, "topics": topics}


def _per_partition(make_table: Callable[[list[dict]], pa.Table]) -> Callable:
    """A mapInArrow function: ``make_table`` on every row of the partition at once."""

    def rows_of_partition(batches):
        rows = [row for batch in batches for row in batch.to_pylist()]
        if rows:
            yield from make_table(rows).to_batches()

    return rows_of_partition

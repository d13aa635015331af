"""The one pass over the data: Spark tasks decode the splits, write ``frames`` and ``exchanges``
themselves and return the compact rows (kproto.analyze.spark.worker.PARTS_SCHEMA).

A task runs :func:`kproto.analyze.spark.task.process_split` through ``mapInArrow`` (Arrow batches
in and out: no Python or pandas UDFs); raw frames (ranges of pcapng, Parquet inputs) are grouped
by connection first. pyspark is imported inside the functions.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from kproto.analyze.spark import decode as D
from kproto.analyze.spark import planning as P
from kproto.analyze.spark import task
from kproto.analyze.spark import worker as W
from kproto.analyze.spark.exchange_topics import name_written_topics
from kproto.analyze.spark.inputs import Inputs
from kproto.analyze.spark.options import Options

#: Bytes of raw frames per partition of the grouping step (at least one partition per core).
RAW_PARTITION_BYTES = 128 * 1024 * 1024


def _part_name(split: P.Split) -> str:
    """A file name for a split's tables: the same when a task is retried, distinct across captures."""
    digest = hashlib.blake2b(split.capture.encode(), digest_size=6).hexdigest()
    return f"{digest}-{split.split_index:05d}"


def prepare_output(out: str) -> None:
    """Empty ``frames`` and ``exchanges`` directories (the tasks write into them)."""
    filesystem, base = W.output_filesystem(out)
    for name in ("frames", "exchanges"):
        filesystem.create_dir(f"{base}/{name}", recursive=True)
        filesystem.delete_dir_contents(f"{base}/{name}", missing_dir_ok=True)


def finish_output(out: str, compact_rows: pa.Table) -> None:
    """A table nobody wrote a part of gets an empty one (so it reads back with its columns), and _SUCCESS;
    the exchanges' topic IDs get the names the run's responses give them (``compact_rows``: all of the run)."""
    name_written_topics(out, compact_rows)
    filesystem, base = W.output_filesystem(out)
    for name, schema in (("frames", W.FRAMES_SCHEMA), ("exchanges", W.EXCHANGES_SCHEMA)):
        infos = filesystem.get_file_info(fs.FileSelector(f"{base}/{name}"))
        if not any(i.base_name.startswith("part-") for i in infos):
            pq.write_table(schema.empty_table(), f"{base}/{name}/part-empty.parquet", filesystem=filesystem)
        with filesystem.open_output_stream(f"{base}/{name}/_SUCCESS") as stream:
            stream.write(b"")


def compact_rows(spark, inputs: Inputs, splits: list[P.Split], options: Options, out: str):
    """Decode everything once; the tasks write ``frames`` / ``exchanges`` and return the compact rows."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    parts_type = from_arrow_schema(W.PARTS_SCHEMA)
    ports = options.broker_ports
    body = options.body
    records = options.records
    fail_fast = options.fail_fast
    forced = options.kafka_ports
    show_credentials = options.show_credentials

    def read(batches):
        for batch in batches:
            for split in (split_list.value[index] for index in batch.column("id").to_pylist()):
                sink = W.ParquetSink(out, _part_name(split))
                yield from task.process_split(
                    split,
                    broker_ports=ports,
                    kafka_ports=forced,
                    show_credentials=show_credentials,
                    body=body,
                    records=records,
                    sink=sink,
                    fail_fast=fail_fast,
                )
                sink.close()

    def decode(batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        sink = W.ParquetSink(out, f"group-{context.partitionId() if context else 0:05d}")
        yield from D.decode_raw_batches(
            batches, body=body, records=records, sink=sink, show_credentials=show_credentials
        )
        sink.close()

    parts = []
    raw_inputs = []
    stage1 = None
    if splits:
        # One task per split: a range of split numbers, each task looking its split up in a broadcast
        # (read once per Python worker). A DataFrame of the split rows themselves would need a Python
        # worker of its own in every task, and a second worker daemon started in the first one.
        split_list = spark.sparkContext.broadcast(splits)
        split_df = spark.range(0, len(splits), 1, len(splits))
        stage1 = split_df.mapInArrow(read, parts_type)
        if any(s.mode == "raw" for s in splits):
            stage1 = stage1.persist()
            raw_inputs.append(stage1.filter(F.col("kind") == "raw"))
            parts.append(stage1.filter(F.col("kind") != "raw"))
        else:
            parts.append(stage1)
    if inputs.parquet:
        table = spark.read.parquet(*inputs.parquet)
        columns = [
            F.col(name).cast(parts_type[name].dataType).alias(name) for name in W.RAW_COLUMNS if name != "split_index"
        ]
        raw_inputs.append(table.select(F.lit("raw").alias("kind"), *columns, F.lit(0).cast("int").alias("split_index")))
    if raw_inputs:
        raw = raw_inputs[0]
        for more in raw_inputs[1:]:
            raw = raw.unionByName(more, allowMissingColumns=True)
        raw_bytes = sum(s.end - s.start for s in splits if s.mode == "raw")
        count = max(spark.sparkContext.defaultParallelism, raw_bytes // RAW_PARTITION_BYTES + 1)
        grouped = raw.select(*W.RAW_COLUMNS).repartition(int(count), "capture", "connection_id")
        parts.append(grouped.mapInArrow(decode, parts_type))
    result = parts[0]
    for more in parts[1:]:
        result = result.unionByName(more)
    return result.drop("payload"), stage1

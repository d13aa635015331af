"""Spark figures for kproto analyze (not part of the test suite).

    .venv/bin/python benchmarks/bench_spark.py [--mb 200] [--master local[2]]

1. Decoding inside Spark against a ``mapInArrow`` that returns its input
   unchanged, on the same DataFrame of frames (cached, so both read the same
   in-memory data): the ratio says whether decoding is the bottleneck.
2. End to end, pcap file to Parquet tables (``kproto analyze`` without the
   report), in MB of capture per second per core.

The capture: 16 interleaved connections of Produce v9 requests (~1.9 KiB) and
their responses (~60 B): 1 KiB average frames.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def make_capture(path: Path, megabytes: int) -> int:
    from tests import spark_captures as sc
    from tests.pcapwriter import Conversation, PcapWriter

    conversations = [Conversation(client=(f"10.2.0.{i + 1}", 42000 + i), server=("10.2.0.200", 9092),
                                  client_isn=1000 * (i + 1), server_isn=700000 + i) for i in range(16)]
    writer = PcapWriter()
    ts = sc.START_NS
    data = sc.records(1, "none")
    value = sc.RecordBatch.encode([(None, os.urandom(900).hex().encode()[:1750], [], 1_700_000_000_000)],
                                  base_offset=0)
    del data
    for c in conversations:
        for p in c.handshake():
            writer.add(ts, p.data)
            ts += 1000
    n = 0
    with open(path, "wb") as out:
        while sum(len(x) for x in writer.parts) < megabytes * 1_000_000:
            for i, c in enumerate(conversations):
                for p in c.data("client", sc.request(sc.produce("bench", i % 8, value), 9, n, f"bench-{i}"), [1448]):
                    writer.add(ts, p.data)
                    ts += 1000
                for p in c.data("server", sc.response(sc.produce_ok("bench", i % 8), 9, n), [1448]):
                    writer.add(ts, p.data)
                    ts += 1000
            n += 1
        out.write(writer.getvalue())
    return path.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    cores = int(args.master[6:-1]) if args.master.startswith("local[") and args.master[6:-1].isdigit() else 1

    import pyspark

    from kproto.capture import read_capture
    from kproto.spark import Options, analyze, spark_session
    from kproto.spark import worker as W

    work = Path(tempfile.mkdtemp(prefix="kproto-bench-"))
    pcap = work / "bench.pcap"
    size = make_capture(pcap, args.mb)
    frames, _, _ = read_capture(str(pcap))
    average = pa.compute.mean(frames["size"]).as_py() + 4
    print(f"capture: {size / 1e6:.0f} MB, {frames.num_rows:,} frames, {average:,.0f} B average frame")
    pq.write_table(frames, work / "frames.parquet", row_group_size=100_000)

    spark = spark_session(args.master, conf={"spark.sql.shuffle.partitions": str(cores),
                                             "spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(work / "frames.parquet")).repartition(cores * 2).cache()
    df.count()

    def identity(batches):
        yield from batches

    def decode(body):
        def run(batches):
            import kproto.batch as kb
            for batch in batches:
                out = kb.decode_frames(batch["payload"], directions=batch["direction"], body=body)
                yield pa.RecordBatch.from_arrays([out["api_key"], out["status"].cast(pa.int16())],
                                                 names=["api_key", "status"])
        return run

    def timed(label, function, schema, repeat=3):
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            df.mapInArrow(function, schema).write.format("noop").mode("overwrite").save()
            best = min(best, time.perf_counter() - started)
        rate = frames.num_rows / best
        print(f"  {label:<40} {best:6.2f} s  {rate / 1e6:6.2f} M frames/s")
        return rate

    print(f"Spark {pyspark.__version__}, master {args.master}")
    base = timed("mapInArrow identity", identity, df.schema)
    headers = timed("mapInArrow decode_frames (headers)", decode(None), "api_key short, status short")
    bodies = timed("mapInArrow decode_frames (JSON bodies)", decode("json"), "api_key short, status short")
    print(f"  decode / identity: headers {headers / base:.2f}x, JSON bodies {bodies / base:.2f}x")
    df.unpersist()

    out = work / "out"
    started = time.perf_counter()
    analyze([str(pcap)], str(out), spark=spark, options=Options(report=False), progress=False)
    seconds = time.perf_counter() - started
    print(f"end to end (pcap -> Parquet tables, JSON bodies): {seconds:.1f} s, "
          f"{size / 1e6 / seconds:.0f} MB/s, {size / 1e6 / seconds / cores:.0f} MB/s per core")
    started = time.perf_counter()
    analyze([str(pcap)], str(work / "out2"), spark=spark, options=Options(report=False, body=None), progress=False)
    seconds = time.perf_counter() - started
    print(f"end to end without JSON bodies (--no-body): {seconds:.1f} s, "
          f"{size / 1e6 / seconds / cores:.0f} MB/s per core")
    _ = W
    return 0


if __name__ == "__main__":
    sys.exit(main())

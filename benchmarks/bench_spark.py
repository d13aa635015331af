"""Spark figures for kproto analyze (not part of the test suite).

    .venv/bin/python benchmarks/bench_spark.py [--mb 1000] [--master local[2]]

0. `kproto analyze samples/sample.pcap` in a new process, as a user runs it:
   wall time including session start, and its phases (median of 3).
1. Decoding inside Spark against a ``mapInArrow`` that returns its input
   unchanged, on the same DataFrame of frames (cached, so both read the same
   in-memory data): the ratio says whether decoding is the bottleneck.
2. End to end, pcap file to Parquet tables (``kproto analyze`` without the
   report), in MB of capture per second per core (bytes / seconds / cores), and
   as a fraction of the identity ``mapInArrow``'s MB/s measured in the same run.

The capture: 16 interleaved connections of Produce v9 requests (~1.9 KiB) and
their responses (~60 B): 1 KiB average frames.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def make_capture(path: Path, megabytes: int, produce_version: int = 9) -> int:
    """A pcap of ``megabytes`` MB: a block of 16 connections written once, then copied.

    Produce requests and responses are of ``produce_version`` (benchmarks/bench_dump.py
    uses 8, the newest tshark 4.0 decodes).

    Each copy is 16 new connections (other client ports, later timestamps), so the
    file holds every frame once however big it is, and writing it takes seconds.
    """
    import struct

    from tests import spark_captures as sc
    from tests.pcapwriter import Conversation, PcapWriter

    block_mb = min(megabytes, 50)
    conversations = [Conversation(client=(f"10.2.0.{i + 1}", 42000 + i), server=("10.2.0.200", 9092),
                                  client_isn=1000 * (i + 1), server_isn=700000 + i) for i in range(16)]
    writer = PcapWriter()
    ts = sc.START_NS
    value = sc.RecordBatch.encode([(None, os.urandom(900).hex().encode()[:1750], [], 1_700_000_000_000)],
                                  base_offset=0)
    for c in conversations:
        for p in c.handshake():
            writer.add(ts, p.data)
            ts += 1000
    size = 0
    n = 0
    while size < block_mb * 1_000_000:
        for i, c in enumerate(conversations):
            for side, frame in (("client", sc.request(sc.produce("bench", i % 8, value), produce_version, n,
                                                      f"bench-{i}")),
                                ("server", sc.response(sc.produce_ok("bench", i % 8), produce_version, n))):
                for p in c.data(side, frame, [1448]):
                    writer.add(ts, p.data)
                    size += 16 + len(p.data)
                    ts += 1000
        n += 1
    block = writer.getvalue()
    span_us = (ts - sc.START_NS) // 1000 + 1000
    with open(path, "wb") as out:
        out.write(block)
        copy = 1
        while out.tell() < megabytes * 1_000_000:
            data = bytearray(block[24:])
            pos = 0
            while pos < len(data):
                seconds, micros, captured, _ = struct.unpack_from("<IIII", data, pos)
                total = seconds * 1_000_000 + micros + copy * span_us
                struct.pack_into("<II", data, pos, total // 1_000_000, total % 1_000_000)
                tcp_at = pos + 16 + 14 + (data[pos + 16 + 14] & 15) * 4     # Ethernet, then IPv4
                src, dst = struct.unpack_from(">HH", data, tcp_at)
                if dst == 9092:
                    struct.pack_into(">H", data, tcp_at, src + 16 * copy)
                else:
                    struct.pack_into(">H", data, tcp_at + 2, dst + 16 * copy)
                pos += 16 + captured
            out.write(data)
            copy += 1
    return path.stat().st_size


def small_run(master: str, runs: int = 3) -> float:
    """`kproto analyze samples/sample.pcap --profile` as a user runs it: a new process each time;
    wall time, the load average beside it, and the phases (``kproto.spark.profile``). Returns the median wall."""
    import re
    import statistics
    import subprocess

    root = Path(__file__).resolve().parent.parent
    kproto = Path(sys.executable).with_name("kproto")
    walls, loads, phases = [], [], []
    for _ in range(runs):
        out = tempfile.mkdtemp(prefix="kproto-small-")
        loads.append(os.getloadavg()[0])
        started = time.perf_counter()
        run = subprocess.run([str(kproto), "analyze", "samples/sample.pcap", "--out", out, "--master", master,
                              "--profile", "--quiet"], cwd=root, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - started
        shutil.rmtree(out)
        # The profile's table rows: "| <phase> | <seconds> | <jobs> | <tasks> |"
        steps = {m.group(1): (float(m.group(2)), int(m.group(3)))
                 for m in re.finditer(r"^\| (.+?) \| (\d+\.\d+) \| (\d+) \| \d+ \|$", run.stderr, re.M)}
        steps["(process start and exit, outside the phases)"] = (wall - steps.pop("total")[0], 0)
        walls.append(wall)
        phases.append(steps)
    print(f"kproto analyze samples/sample.pcap --master {master}: wall {statistics.median(walls):.1f} s median "
          f"of {runs} ({min(walls):.1f}-{max(walls):.1f}), load average {statistics.median(loads):.1f}")
    for name in phases[0]:
        values = [p.get(name, (0.0, 0))[0] for p in phases]
        print(f"  {name[:60]:<60} {statistics.median(values):5.2f} s, {phases[0][name][1]} Spark job(s)")
    return statistics.median(walls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--small-only", action="store_true", help="only the small-capture wall time")
    args = parser.parse_args()
    small_run(args.master)
    if args.small_only:
        return 0
    cores = int(args.master[6:-1]) if args.master.startswith("local[") and args.master[6:-1].isdigit() else 1

    import pyspark

    from kproto.capture import read_capture
    from kproto.spark import Options, analyze, spark_session

    work = Path(tempfile.mkdtemp(prefix="kproto-bench-"))
    pcap = work / "bench.pcap"
    size = make_capture(pcap, args.mb)
    frames, _, _ = read_capture(str(pcap))
    frame_count = frames.num_rows
    average = pa.compute.mean(frames["size"]).as_py() + 4
    print(f"capture: {size / 1e6:.0f} MB, {frame_count:,} frames, {average:,.0f} B average frame")
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
        rate = frame_count / best
        print(f"  {label:<40} {best:6.2f} s  {rate / 1e6:6.2f} M frames/s  {size / 1e6 / best:6.0f} MB/s")
        return rate

    print(f"Spark {pyspark.__version__}, master {args.master}")
    base = timed("mapInArrow identity", identity, df.schema)
    headers = timed("mapInArrow decode_frames (headers)", decode(None), "api_key short, status short")
    bodies = timed("mapInArrow decode_frames (JSON bodies)", decode("json"), "api_key short, status short")
    print(f"  decode / identity: headers {headers / base:.2f}x, JSON bodies {bodies / base:.2f}x")
    df.unpersist()

    identity_mb_s = size / 1e6 / (frame_count / base)
    del frames
    # The first analysis of a session also pays one-time costs (JVM code paths, Python
    # worker start); the JSON run is timed twice to show both.
    for label, options in (("JSON bodies, first run", Options(report=False)),
                           ("JSON bodies", Options(report=False)),
                           ("--no-body", Options(report=False, body=None))):
        started = time.perf_counter()
        result = analyze([str(pcap)], str(work / "out"), spark=spark, options=options, progress=False)
        seconds = time.perf_counter() - started
        rate = size / 1e6 / seconds
        assert result.summary[-1]["accounted"]
        print(f"end to end, pcap -> Parquet tables ({label}): {seconds:.1f} s, {rate:.0f} MB/s, "
              f"{rate / cores:.0f} MB/s per core; {rate / identity_mb_s:.2f}x the identity mapInArrow's MB/s")
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Spark figures for kproto analyze (not part of the test suite).

    .venv/bin/python benchmarks/bench_spark.py [--mb 1000] [--master local[2]]

0. `kproto analyze samples/sample.pcap` in a new process, as a user runs it:
   wall time including session start, and its phases (median of 3).

Steps 1 and 2 run ``--repeat`` times, each in a new process (a new session) on the same
capture; ratios are taken within a run, then their median and range over the runs are shown.
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
    conversations = [
        Conversation(
            client=(f"10.2.0.{i + 1}", 42000 + i),
            server=("10.2.0.200", 9092),
            client_isn=1000 * (i + 1),
            server_isn=700000 + i,
        )
        for i in range(16)
    ]
    writer = PcapWriter()
    ts = sc.START_NS
    value = sc.RecordBatch.encode([(None, os.urandom(900).hex().encode()[:1750], [], 1_700_000_000_000)], base_offset=0)
    for c in conversations:
        for p in c.handshake():
            writer.add(ts, p.data)
            ts += 1000
    size = 0
    n = 0
    while size < block_mb * 1_000_000:
        for i, c in enumerate(conversations):
            for side, frame in (
                ("client", sc.request(sc.produce("bench", i % 8, value), produce_version, n, f"bench-{i}")),
                ("server", sc.response(sc.produce_ok("bench", i % 8), produce_version, n)),
            ):
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
                tcp_at = pos + 16 + 14 + (data[pos + 16 + 14] & 15) * 4  # Ethernet, then IPv4
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
    wall time, the load average beside it, and the phases (``kproto.analyze.spark.profile``). Returns the median wall."""
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
        run = subprocess.run(
            [str(kproto), "analyze", "samples/sample.pcap", "--out", out, "--master", master, "--profile", "--quiet"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - started
        shutil.rmtree(out)
        # The profile's table rows: "| <phase> | <seconds> | <jobs> | <tasks> |"
        steps = {
            m.group(1): (float(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"^\| (.+?) \| (\d+\.\d+) \| (\d+) \| \d+ \|$", run.stderr, re.M)
        }
        steps["(process start and exit, outside the phases)"] = (wall - steps.pop("total")[0], 0)
        walls.append(wall)
        phases.append(steps)
    print(
        f"kproto analyze samples/sample.pcap --master {master}: wall {statistics.median(walls):.1f} s median "
        f"of {runs} ({min(walls):.1f}-{max(walls):.1f}), load average {statistics.median(loads):.1f}"
    )
    for name in phases[0]:
        values = [p.get(name, (0.0, 0))[0] for p in phases]
        print(f"  {name[:60]:<60} {statistics.median(values):5.2f} s, {phases[0][name][1]} Spark job(s)")
    return statistics.median(walls)


def session_run(work: Path, master: str, analysis_first: bool) -> dict:
    """One process's figures on the capture in ``work``: a new session, the identity and decode
    ``mapInArrow`` runs (best of 3), the first analysis of the process, the same again (warm) and
    ``--no-body``. ``analysis_first``: the first analysis is the session's first job (what the
    command line pays after the session start), else it comes after the identity and decode runs,
    whose jobs have started the JVM's code paths and the Python workers already."""
    import pyspark

    from kproto.analyze.spark import Options, analyze, spark_session
    from kproto.analyze.spark.profile import PhaseProfile

    cores = int(master[6:-1]) if master.startswith("local[") and master[6:-1].isdigit() else 1
    pcap = work / "bench.pcap"
    size = pcap.stat().st_size
    figures: dict = {"spark": pyspark.__version__, "size": size, "cores": cores, "load": os.getloadavg()[0]}
    started = time.perf_counter()
    spark = spark_session(master, conf={"spark.sql.shuffle.partitions": str(cores), "spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    figures["session start"] = time.perf_counter() - started

    def analysis(label: str, options) -> None:
        profile = PhaseProfile()
        profile.attach(spark)
        started = time.perf_counter()
        result = analyze([str(pcap)], str(work / "out"), spark=spark, options=options, progress=False, profile=profile)
        figures[label] = time.perf_counter() - started
        profile.finish()
        figures[f"{label} phases"] = [(p.name, p.seconds, p.jobs) for p in profile.phases]
        assert result.summary[-1]["accounted"]

    if analysis_first:
        analysis("first analysis", Options(report=False))
    df = spark.read.parquet(str(work / "frames.parquet")).repartition(cores * 2).cache()
    df.count()

    def identity(batches):
        yield from batches

    def decode(body):
        def run(batches):
            import kproto.arrow.frames as kb

            for batch in batches:
                out = kb.decode_frames(batch["payload"], directions=batch["direction"], body=body)
                yield pa.RecordBatch.from_arrays(
                    [out["api_key"], out["status"].cast(pa.int16())], names=["api_key", "status"]
                )

        return run

    def best_of_3(label, function, schema) -> None:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            df.mapInArrow(function, schema).write.format("noop").mode("overwrite").save()
            times.append(time.perf_counter() - started)
        figures[label] = min(times)

    best_of_3("identity", identity, df.schema)
    best_of_3("decode headers", decode(None), "api_key short, status short")
    best_of_3("decode JSON bodies", decode("json"), "api_key short, status short")
    df.unpersist()
    if not analysis_first:
        analysis("first analysis", Options(report=False))
    analysis("warm analysis", Options(report=False))
    analysis("--no-body", Options(report=False, body=None))
    spark.stop()
    return figures


def report_runs(runs: list[dict]) -> None:
    """Each run's figures, then the medians and ranges over the runs (ratios are taken within a run)."""
    import statistics

    size, cores = runs[0]["size"], runs[0]["cores"]
    labels = ("identity", "decode headers", "decode JSON bodies", "first analysis", "warm analysis", "--no-body")

    def ratio(run: dict, label: str) -> float:
        return run["identity"] / run[label]  # MB/s against the identity's MB/s of the same run

    print(
        f"Spark {runs[0]['spark']}: {len(runs)} run(s), each in a new process; load average "
        + ", ".join(f"{r['load']:.1f}" for r in runs)
    )
    for label in ("session start",) + labels:
        seconds = [r[label] for r in runs]
        line = (
            f"  {label:<22} {statistics.median(seconds):6.2f} s ({min(seconds):.2f}-{max(seconds):.2f}), "
            f"{size / 1e6 / statistics.median(seconds) / cores:5.0f} MB/s per core"
        )
        if label in labels[1:]:
            ratios = [ratio(r, label) for r in runs]
            line += f"; {statistics.median(ratios):.2f}x identity ({min(ratios):.2f}-{max(ratios):.2f}): " + ", ".join(
                f"{v:.2f}" for v in ratios
            )
        print(line)
    for label in ("first analysis", "warm analysis"):
        print(f"  phases of the {label} (median seconds):")
        for index, (name, _, jobs) in enumerate(runs[0][f"{label} phases"]):
            seconds = [r[f"{label} phases"][index][1] for r in runs]
            print(f"    {name[:60]:<60} {statistics.median(seconds):5.2f} s, {jobs} Spark job(s)")


def main() -> int:
    import json
    import subprocess

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--small-only", action="store_true", help="only the small-capture wall time")
    parser.add_argument("--skip-small", action="store_true", help="leave out the small-capture runs")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the large capture, each in a new process")
    parser.add_argument(
        "--analysis-first",
        action="store_true",
        help="make the first analysis the first job of its process (before the identity)",
    )
    parser.add_argument("--work", help="a directory that keeps the generated capture between benches")
    parser.add_argument("--session-run", metavar="WORK", help=argparse.SUPPRESS)  # one run, in this process
    args = parser.parse_args()
    if args.session_run:
        print("RUN " + json.dumps(session_run(Path(args.session_run), args.master, args.analysis_first)))
        return 0
    if not args.skip_small:
        small_run(args.master)
    if args.small_only:
        return 0

    from kproto.arrow.capture import read_capture

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="kproto-bench-"))
    try:
        pcap = work / "bench.pcap"
        if not (work / "frames.parquet").exists():  # --work keeps the capture for the next bench
            work.mkdir(parents=True, exist_ok=True)
            make_capture(pcap, args.mb)
            pq.write_table(read_capture(str(pcap))[0], work / "frames.parquet", row_group_size=100_000)
        frames = pq.read_table(work / "frames.parquet", columns=["size"])
        print(
            f"capture: {pcap.stat().st_size / 1e6:.0f} MB, {frames.num_rows:,} frames, "
            f"{pa.compute.mean(frames['size']).as_py() + 4:,.0f} B average frame; master {args.master}; "
            "first analysis "
            + ("first in its process" if args.analysis_first else "after the identity and decode runs")
        )
        del frames
        runs = []
        for _ in range(args.repeat):
            command = [sys.executable, __file__, "--session-run", str(work), "--master", args.master]
            if args.analysis_first:
                command.append("--analysis-first")
            run = subprocess.run(command, capture_output=True, text=True, check=True)
            runs.append(json.loads(next(line[4:] for line in run.stdout.splitlines() if line.startswith("RUN "))))
        report_runs(runs)
    finally:
        if not args.work:
            shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""End-to-end throughput of kproto analyze on a Spark standalone cluster against local mode (not a test).

    .venv/bin/python benchmarks/bench_spark_cluster.py [--mb 400] [--repeat 3] [--runs 3]

One capture (benchmarks/bench_spark.py's generator), one standalone cluster of two
workers with one core each (tools/spark_cluster.py; executors in a virtualenv holding a
wheel of this checkout, as docs/analyze.md ships kproto), and ``local[2]``: the same
cores. Each repetition starts a new driver process per master, back to back, the order
alternating, and times ``analyze()`` (pcap to Parquet tables, no report) ``--runs`` times
in that session: the first analysis pays the executors' Python start and warm-up, the
next ones do not. Session start (the driver's JVM; on the cluster, also the executors')
is reported apart. MB per core = capture bytes / seconds / 2.

The machine this runs on may be shared: compare the two masters within a repetition
(the ratio column) and read the medians with their spread.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

CORES = 2


def one_session(master: str, pcap: str, runs: int, out: str, event_log: str | None = None) -> dict:
    """In a new driver process: start a session on ``master``, analyse ``pcap`` ``runs`` times; seconds.

    With ``event_log`` (a directory), Spark logs its events there and the result holds each
    analysis's breakdown (``spark_events.breakdown``)."""
    from kproto.analyze.spark import Options, analyze, spark_session

    started = time.perf_counter()
    conf = {
        "spark.ui.enabled": "false",
        "spark.executor.memory": "1g",
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        # What spark_session sets for local workers, given to the executors too: the same allocator set-up.
        "spark.executorEnv.MIMALLOC_LARGE_OS_PAGES": "1",
    }
    if event_log:
        conf.update(
            {"spark.eventLog.enabled": "true", "spark.eventLog.dir": event_log, "spark.eventLog.compress": "false"}
        )
    spark = spark_session(master, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(CORES).count()  # the cluster's executors registered: not counted as analysis
    session = time.perf_counter() - started
    seconds = []
    windows = []
    for _ in range(runs):
        started = time.perf_counter()
        started_ms = int(time.time() * 1000)
        result = analyze([pcap], out, spark=spark, options=Options(report=False), progress=False)
        seconds.append(time.perf_counter() - started)
        windows.append((started_ms, int(time.time() * 1000)))
        assert result.summary[-1]["accounted"], result.summary[-1]
        frames = result.summary[-1]["frames"]
    application = spark.sparkContext.applicationId
    spark.stop()
    breakdowns = []
    if event_log:
        from spark_events import breakdown

        # Spark 4 rolls event logs by default: a directory eventlog_v2_<app> of events_<n>_<app> files.
        logs = sorted(Path(event_log).rglob(f"events_*_{application}"), key=lambda p: int(p.name.split("_")[1]))
        breakdowns = [breakdown(logs, start, end) for start, end in windows]
    return {
        "session": session,
        "seconds": seconds,
        "frames": frames,
        "parallelism": CORES,
        "splits": result.summary[0]["splits"],
        "breakdowns": breakdowns,
    }


def run_session(master: str, pcap: Path, runs: int, work: Path, executor_python: Path, breakdown: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_HOME")}
    if not master.startswith("local"):
        env.pop("PYTHONPATH", None)
        env.update(PYSPARK_PYTHON=str(executor_python), SPARK_LOCAL_IP="127.0.0.1")
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        __file__,
        "--session",
        master,
        "--pcap",
        str(pcap),
        "--runs",
        str(runs),
        "--out",
        str(out),
    ]
    if breakdown:
        events = work / "events"
        events.mkdir(exist_ok=True)
        command += ["--event-log", str(events)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=work)
    if done.returncode != 0:
        raise SystemExit(f"{master}: driver failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3, help="driver processes per master")
    parser.add_argument("--runs", type=int, default=3, help="analyses per driver process")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="log Spark's events and print where each analysis's time went (jobs, stages, tasks)",
    )
    parser.add_argument("--session", help=argparse.SUPPRESS)
    parser.add_argument("--event-log", help=argparse.SUPPRESS)
    parser.add_argument("--pcap", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.session:
        print(json.dumps(one_session(args.session, args.pcap, args.runs, args.out, args.event_log)))
        return 0

    import pyspark
    import spark_cluster
    from bench_spark import make_capture

    work = Path(tempfile.mkdtemp(prefix="kproto-bench-cluster-"))
    cluster = spark_cluster.Cluster(work / "cluster")
    try:
        executor_python = spark_cluster.executor_env()
        pcap = work / "bench.pcap"
        size = make_capture(pcap, args.mb)
        cluster.start(workers=CORES, cores=1, memory="2g")
        masters = {"local[2]": "local[2]", "standalone 2x1": cluster.url}
        print(
            f"Spark {pyspark.__version__}; capture {size / 1e6:.0f} MB; {os.cpu_count()} CPUs, "
            f"load {os.getloadavg()[0]:.1f} at start"
        )
        results: dict[str, list[dict]] = {name: [] for name in masters}
        for rep in range(args.repeat):
            order = list(masters) if rep % 2 == 0 else list(reversed(masters))
            for name in order:
                result = run_session(masters[name], pcap, args.runs, work, executor_python, args.breakdown)
                results[name].append(result)
                rates = [size / 1e6 / s / CORES for s in result["seconds"]]
                print(
                    f"  rep {rep} {name:<15} session {result['session']:5.1f} s; analyses "
                    + ", ".join(f"{s:.1f} s" for s in result["seconds"])
                    + " = "
                    + ", ".join(f"{r:.0f}" for r in rates)
                    + " MB/s per core"
                    + f"; {result['frames']:,} frames, {result['splits']} split(s); "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
                for run, lines in enumerate(result["breakdowns"]):
                    print(f"   analysis {run + 1}:\n" + "\n".join(lines), flush=True)
        print(f"\nMB/s per core, median (min-max) of {args.repeat} driver processes; warm = median of runs 2..")
        for name in masters:
            first = [size / 1e6 / r["seconds"][0] / CORES for r in results[name]]
            warm = (
                [size / 1e6 / statistics.median(r["seconds"][1:]) / CORES for r in results[name]]
                if args.runs > 1
                else first
            )
            sessions = [r["session"] for r in results[name]]
            print(
                f"  {name:<15} first analysis {spread(first)}, warm {spread(warm)}; session start {spread(sessions)} s"
            )
        local, remote = results["local[2]"], results["standalone 2x1"]
        first_ratio = [lo["seconds"][0] / cl["seconds"][0] for lo, cl in zip(local, remote)]
        print(
            f"  standalone / local[2] MB/s per core, paired by repetition: first analysis {spread(first_ratio)}", end=""
        )
        if args.runs > 1:
            warm_ratio = [
                statistics.median(lo["seconds"][1:]) / statistics.median(cl["seconds"][1:])
                for lo, cl in zip(local, remote)
            ]
            print(f", warm {spread(warm_ratio)}")
        else:
            print()
    finally:
        cluster.stop(remove=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Analyze captures with Spark: Parquet tables (frames, exchanges, clients, topics, summary) and a report.

    kproto analyze samples/sample.pcap --out out/
    kproto analyze 'captures/*.pcapng' frames.parquet --out out/ --broker-port 9092 --broker-port 9094
    kproto analyze hdfs:///captures/ --out hdfs:///reports/today --master yarn

Local mode (the default) runs Spark inside this process and needs pyspark and a
Java runtime (``scripts/setup.sh --spark`` installs both). See docs/analyze.md.
"""

from __future__ import annotations

import argparse
import sys

HELP = "Analyze captures with Spark: Parquet tables and a report (HTML, JSON, Markdown)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="capture files (pcap, pcapng, size-prefixed frame dumps), globs, directories, "
                             "or Parquet tables of frames")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (a path or URI)")
    parser.add_argument("--master", default=None,
                        help="Spark master (default: the one spark-submit set, else local[*])")
    parser.add_argument("--broker-port", type=int, action="append", metavar="PORT",
                        help="a broker port, to tell requests from responses (repeatable; default 9092)")
    parser.add_argument("--split-mb", type=int, default=None, metavar="MB",
                        help="cut pcap files larger than this into ranges read by separate tasks "
                             "(default: about one range per core, 32 to 256 MB each)")
    parser.add_argument("--no-body", action="store_true",
                        help="leave the JSON body column out of the frames table (faster, smaller)")
    parser.add_argument("--records-base64", action="store_true",
                        help="record sets in the JSON bodies as base64 of their bytes (default: a summary: "
                             "batches, records, bytes, compression)")
    parser.add_argument("--no-report", action="store_true", help="write the tables only")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark configuration (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no progress display")


def run(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("kproto analyze: pyspark is not installed: pip install 'kproto[spark]' "
              "(or scripts/setup.sh --spark)", file=sys.stderr)
        return 2
    from kproto.spark import Options, analyze, spark_session

    conf = {}
    for item in args.conf:
        key, _, value = item.partition("=")
        conf[key] = value
    options = Options(broker_ports=tuple(args.broker_port or (9092,)),
                      split_bytes=args.split_mb * 1024 * 1024 if args.split_mb else None,
                      body=None if args.no_body else "json",
                      records="base64" if args.records_base64 else "summary", report=not args.no_report)
    try:
        spark = spark_session(args.master, conf=conf)
        spark.sparkContext.setLogLevel("ERROR")
        result = analyze(args.paths, args.out, spark=spark, options=options, progress=not args.quiet)
    except FileNotFoundError as exc:
        print(f"kproto analyze: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:   # Spark reports most failures as Py4J / analysis exceptions
        message = str(exc).strip().splitlines()
        print(f"kproto analyze: failed: {message[0] if message else type(exc).__name__}", file=sys.stderr)
        return 1
    total = next(r for r in result.summary if r["capture"] == "*")
    print(f"{total['frames']:,} frames in {total['connections']:,} connections "
          f"({total['frames_ok']:,} decoded, {total['frames_undecodable']:,} undecodable), "
          f"{total['exchanges_paired']:,} exchanges paired; every frame accounted for: "
          f"{'yes' if total['accounted'] else 'NO'}")
    for name, path in result.tables.items():
        print(f"  {name:<12} {path}")
    if result.facts is not None:
        readiness = result.facts["readiness"]
        print(f"  report       {result.out}/report.html (.json, .md)")
        print(f"Kafka 4.x readiness: {readiness['removed_in_4x_requests']:,} request(s) from "
              f"{readiness['clients_sending_removed_versions']} client(s) use versions 4.x removed")
    return 0

"""Analyze captures with Spark: Parquet tables (frames, exchanges, clients, topics, summary) and a report.

    kproto analyze samples/sample.pcap --out out/
    kproto analyze 'captures/*.pcapng' frames.parquet --out out/ --broker-port 9092 --broker-port 9094
    kproto analyze hdfs:///captures/ --out hdfs:///reports/today --master yarn
    kproto analyze /captures/ --out out/ --follow       # add files as they are closed

Local mode (the default) runs Spark inside this process and needs pyspark and a
Java runtime (``scripts/setup.sh --spark`` installs both). See docs/analyze.md.

Exit status: 0 when every input was read completely; 3 when the tables were
written but some input could not be read completely (the ``errors`` table, the
report and the console say which, where and why); 1 when nothing could be
analysed (or, with ``--fail-fast``, at the first such input); 2 for usage errors
and inputs refused before Spark starts (a missing input, a file named on the
command line that is no capture, --out an existing file), and when pyspark is
not installed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from kproto.analyze import cli_dump, follow_options

HELP = "Analyze captures with Spark: Parquet tables and a report (HTML, JSON, Markdown)"

EXIT_OK = 0
EXIT_FAILED = 1  # nothing analysed, or --fail-fast stopped at an input
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3  # tables written, but some input was not read completely


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="capture files (pcap, pcapng, size-prefixed frame dumps), globs, directories, or Parquet tables of frames",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (a path or URI)")
    parser.add_argument(
        "--master", default=None, help="Spark master (default: the one spark-submit set, else local[*])"
    )
    cli_dump.add_connection_arguments(parser, "keep them in the frames table's bodies")
    parser.add_argument(
        "--split-mb",
        type=int,
        default=None,
        metavar="MB",
        help="cut pcap files larger than this into ranges read by separate tasks "
        "(default: about one range per core, 32 to 256 MB each)",
    )
    parser.add_argument(
        "--no-body", action="store_true", help="leave the JSON body column out of the frames table (faster, smaller)"
    )
    parser.add_argument(
        "--records-base64",
        action="store_true",
        help="record sets in the JSON bodies as base64 of their bytes (default: a summary: "
        "batches, records, bytes, compression)",
    )
    parser.add_argument("--no-report", action="store_true", help="write the tables only")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark configuration (repeatable)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument(
        "--profile", action="store_true", help="print the wall time and Spark jobs of each phase at the end (on stderr)"
    )
    parser.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first input that cannot be read completely (default: analyse the "
        "rest, list the problem in the errors table and exit with status 3)",
    )
    add_capture_set_arguments(parser)
    follow_options.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    problems = input_problems(args.paths) + out_problems(args.out)
    if problems:
        for problem in problems:
            print(f"kproto analyze: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        import pyspark  # noqa: F401
    except ImportError:
        from kproto._extras import install_hint

        print(
            f"kproto analyze: pyspark is not installed: {install_hint('spark')} (or scripts/setup.sh --spark)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from kproto.analyze.spark import Options, analyze, jvm_archive, spark_session
    from kproto.analyze.spark.capture_sets import CaptureSetError
    from kproto.analyze.spark.inputs import local_input_bytes
    from kproto.analyze.spark.profile import PhaseProfile
    from kproto.analyze.spark.session import local_driver_memory

    conf = {}
    for item in args.conf:
        key, _, value = item.partition("=")
        conf[key] = value
    options = Options(
        broker_ports=tuple(args.broker_port or (9092,)),
        kafka_ports=tuple(args.port),
        show_credentials=args.show_credentials,
        split_bytes=args.split_mb * 1024 * 1024 if args.split_mb else None,
        body=None if args.no_body else "json",
        records="base64" if args.records_base64 else "summary",
        report=not args.no_report,
        fail_fast=args.fail_fast,
    )
    try:
        apply_capture_set_arguments(args, options)
    except ValueError as exc:
        print(f"kproto analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if follow_options.wanted(args) and args.capture_set:
        # Following reads every file as a capture of its own (docs/analyze.md): a set asked
        # for by name would be silently split, so it is refused.
        print(
            "kproto analyze: --capture-set cannot be used with --follow, --once or --max-batches "
            "(a followed file is a capture of its own)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    profile = PhaseProfile() if args.profile else None
    if profile is not None:
        profile.mark("JVM and session start")
    input_size = local_input_bytes(args.paths)
    try:
        spark = spark_session(args.master, conf=conf, input_bytes=input_size, record_jvm_archive=True)
        archive = getattr(spark, "_kproto_jvm_archive", None)
        if archive is not None and archive.action == "record" and not args.quiet:
            print(
                "kproto analyze: first run with this Java and Spark: recording the JVM's classes so that "
                f"later runs start faster (once; {archive.path})",
                file=sys.stderr,
            )
        spark.sparkContext.setLogLevel("ERROR")
        if profile is not None:
            profile.attach(spark)
        if follow_options.wanted(args):
            result = follow_options.run(args, spark, options)
        else:
            result = analyze(
                args.paths, args.out, spark=spark, options=options, progress=not args.quiet, profile=profile
            )
        if profile is not None:
            profile.finish()
            print(profile.table(), file=sys.stderr)
        jvm_archive.finish(spark)
    except (FileNotFoundError, CaptureSetError, follow_options.UsageError) as exc:
        print(f"kproto analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # Spark reports most failures as Py4J / analysis exceptions
        shown = dict(conf)  # the settings the message names: a local session's chosen heap too
        memory = local_driver_memory(input_size) if (args.master or "local").startswith("local") else None
        if memory is not None:
            shown.setdefault("spark.driver.memory", memory)
        print(f"kproto analyze: failed: {failure_message(exc, shown)}", file=sys.stderr)
        return EXIT_FAILED
    _print_result(result)
    return exit_status(result)


def _print_result(result) -> None:
    """What a finished run read and wrote: the inputs not read completely, the totals, the tables and the report."""
    total = next(r for r in result.summary if r["capture"] == "*")
    if result.errors:
        inputs = len({e["capture"] for e in result.errors})
        print(
            f"kproto analyze: {inputs} input(s) not read completely ({total['unread_bytes']:,} bytes not read, "
            f"{total['truncated_bytes']:,} in incomplete last records):",
            file=sys.stderr,
        )
        for error in result.errors:
            where = error.get("file") or error["capture"]  # the file of a capture set the offset is in
            print(
                f"  {where}: byte offset {error['offset']:,}: {error['category']}: {error['reason']}", file=sys.stderr
            )
    print(
        f"{total['frames']:,} frames in {total['connections']:,} connections "
        f"({total['frames_ok']:,} decoded, {total['frames_undecodable']:,} undecodable), "
        f"{total['exchanges_paired']:,} exchanges paired; every frame and byte accounted for: "
        f"{'yes' if total['accounted'] else 'NO'}"
    )
    for name, path in result.tables.items():
        print(f"  {name:<12} {path}")
    if result.facts is not None:
        readiness = result.facts["readiness"]
        print(f"  report       {result.out}/report.html (.json, .md)")
        print(
            f"Kafka 4.x readiness: {readiness['removed_in_4x_requests']:,} request(s) from "
            f"{readiness['clients_sending_removed_versions']} client(s) use versions 4.x removed"
        )


def input_problems(paths: list[str]) -> list[str]:
    """Why local inputs cannot be analysed, found before Spark starts (a JVM takes seconds to say it).

    Remote paths (hdfs:, s3a:, ...) are Spark's to list. A directory or glob may hold a file that is
    no capture (it becomes a row of the errors table); a file named on its own must be one.
    """
    import glob

    from kproto.analyze.spark.planning import local_path
    from kproto.arrow._sniff import input_format

    problems = []
    for path in paths:
        local = local_path(path)
        if local is None:
            continue
        if glob.has_magic(local):
            if not glob.glob(local):
                problems.append(f"{path}: no file matches")
            continue
        if os.path.isdir(local):
            continue
        if not os.path.exists(local):
            problems.append(f"{path}: no such file or directory")
            continue
        try:
            with open(local, "rb") as handle:
                head = handle.read(4)
        except OSError as exc:
            problems.append(f"{path}: cannot be read: {exc.strerror or exc}")
            continue
        found = input_format(head)
        if found is None:
            problems.append(
                f"{path}: not a capture (neither pcap, pcapng, size-prefixed frames nor Parquet; "
                f"first bytes 0x{head.hex()})"
            )
        elif found == "empty":
            problems.append(f"{path}: empty file (0 bytes)")
    return problems


def out_problems(out: str) -> list[str]:
    """Why ``--out`` cannot be written, when it is local: it, or a directory above it, is a file."""
    from kproto.analyze.spark.planning import local_path

    local = local_path(out)
    if local is None:
        return []
    path = os.path.abspath(local)
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    if os.path.exists(path) and not os.path.isdir(path):
        where = "is an existing file" if path == os.path.abspath(local) else f"is inside a file ({path})"
        return [f"--out {out}: {where}; give a directory"]
    return []


def exit_status(result) -> int:
    """0: every input read completely; 3: some were not, but something was analysed; 1: nothing was."""
    if not result.errors:
        return EXIT_OK
    captures = [r for r in result.summary if r["capture"] != "*"]
    nothing = all(r["errors"] for r in captures) and not sum(r["frames"] for r in captures)
    return EXIT_FAILED if nothing else EXIT_INCOMPLETE


def failure_message(exc: BaseException, conf: dict[str, str] | None = None) -> str:
    """The line of a failure that says what went wrong: an input error's own text when Spark wraps one,
    a JVM out of memory with the setting that gives it more (``conf``: the run's --conf settings)."""
    text = str(exc)
    found = re.search(r"InputError: (.+)", text)
    if found:
        return found.group(1).strip()
    memory = out_of_memory(text, conf or {})
    if memory is not None:
        return memory
    lines = text.strip().splitlines()
    return lines[0] if lines else type(exc).__name__


#: Spark's default heap of the driver and of each executor.
SPARK_DEFAULT_MEMORY = "1g"


def out_of_memory(text: str, conf: dict[str, str]) -> str | None:
    """A Java heap that ran out (java.lang.OutOfMemoryError or Spark's own SparkOutOfMemoryError anywhere
    in a Py4J error's text, or a broadcast the driver had no memory to build), in one line naming the
    JVM and the setting to raise; None for any other failure.

    A task lost on an executor of a cluster names ``spark.executor.memory``; anything else (the driver,
    and local mode, whose tasks run in the driver's JVM: "executor driver") ``spark.driver.memory``.
    """
    found = re.search(
        r"(?:java\.lang\.|org\.apache\.spark\.memory\.Spark)OutOfMemoryError(?:: *([^\r\n]*))?"
        r"|(Not enough memory to build and broadcast the table)",
        text,
    )
    if found is None:
        return None
    what = (found.group(1) or found.group(2) or "").strip() or "OutOfMemoryError"
    lost = re.search(r"Lost task [^\n]*?\(([^()\n]*executor [^()\n]*)\)[^\n]*OutOfMemoryError", text)
    on_executor = lost is not None and not lost.group(1).rstrip().endswith("executor driver")
    setting = "spark.executor.memory" if on_executor else "spark.driver.memory"
    jvm = "an executor's JVM" if on_executor else "the Spark driver's JVM"
    now = conf.get(setting, SPARK_DEFAULT_MEMORY)
    return f"{jvm} ran out of memory ({what}); give it more: --conf {setting}=8g (now {now})"


# ---------------------------------------------------------------- capture sets (kproto/analyze/spark/capture_sets.py)
def add_capture_set_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--capture-set",
        action="append",
        default=[],
        metavar="NAME=GLOB",
        help="read the input files GLOB matches (the path, or the base name for a GLOB without /) "
        "as the consecutive pieces of one capture named NAME (repeatable)",
    )
    parser.add_argument(
        "--no-capture-sets",
        action="store_true",
        help="read every file as a capture of its own: no automatic capture sets (rotated "
        "tcpdump -C / -G files and dumpcap ring buffers are detected by default)",
    )


def apply_capture_set_arguments(args: argparse.Namespace, options) -> None:
    """--capture-set and --no-capture-sets into ``options``; ValueError for a malformed NAME=GLOB."""
    named = []
    for item in args.capture_set:
        name, equals, pattern = item.partition("=")
        if not equals or not name or not pattern:
            raise ValueError(f"--capture-set {item}: expected NAME=GLOB")
        named.append((name, pattern))
    options.named_sets = tuple(named)
    options.capture_sets = not args.no_capture_sets

"""The Spark side of ``kproto analyze``: plan, read and decode captures, write the tables.

pyspark is imported inside the functions, so importing this module loads no Spark.
The Python work happens in :mod:`kproto.analyze.spark.task` (and the modules under it) through
``mapInArrow`` (Arrow batches in and out: no Python or pandas UDFs); the small tables'
rules in :mod:`kproto.analyze.spark.combine`, whichever side runs them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow import fs

from kproto.analyze.spark import jvm_archive, jvm_noise
from kproto.analyze.spark import report as R
from kproto.analyze.spark import capture_sets as CS
from kproto.analyze.spark import combine as C
from kproto.analyze.spark.connection_totals import CONNECTION_SUMS, connection_totals, connection_totals_spark
from kproto.analyze.spark import planning as P
from kproto.analyze.spark import task
from kproto.analyze.spark import worker as W
from kproto.analyze.spark.stream_losses import STREAM_LOSSES, stream_loss_rows
from kproto.analyze.spark.exchange_topics import name_written_topics

TABLES = ("frames", "exchanges", "clients", "topics", "summary", "connections", "errors")
RAW_PARTITION_BYTES = 128 * 1024 * 1024


# ---------------------------------------------------------------- the session
#: Local input bytes up to which an embedded session is tuned for start-up time rather than throughput.
LATENCY_INPUT_BYTES = 256 * 1024 * 1024

#: Allocator settings of local sessions' Python workers: keep memory a task freed for the next task.
#: On a machine whose fresh memory is slow (a VM's guest pages cold until touched), a task that
#: touches freed pages again is faster than one that gets new ones from the kernel.
#: mimalloc (pyarrow's buffers) never hands freed pages back (purge delay -1); glibc (numpy, the
#: C extension) keeps up to 4 GiB free at the top of its heap, pads each heap growth by 256 MiB,
#: and serves blocks under 32 MiB from the heap, where they can be reused; it asks for transparent
#: huge pages (glibc 2.35+; older ones ignore it), so fresh memory comes in a fault per 2 MiB, not
#: per 4 KiB: a 256 MiB range's task took 30 k page faults instead of 92 k. A worker thus keeps at
#: most the peak of one task (tasks run one after another in a worker) until it exits, when the
#: session stops or Spark ends it as idle; only local masters set them (cores = workers, known).
WORKER_MEMORY_ENV = {
    "MIMALLOC_PURGE_DELAY": "-1",
    "MALLOC_TRIM_THRESHOLD_": str(4 << 30),
    "MALLOC_TOP_PAD_": str(256 << 20),
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
}


def spark_session(master: str | None = None, *, app_name: str = "kproto analyze",
                  conf: dict[str, str] | None = None, input_bytes: int | None = None,
                  record_jvm_archive: bool = False):
    """A SparkSession: the active one, the one spark-submit configured, or an embedded local one.

    Without ``master`` and outside spark-submit, Spark runs in this process
    (``local[*]``) with this interpreter for its Python workers. A local session
    starts without the web UI (``--conf spark.ui.enabled=true`` brings it back) and with
    :mod:`kproto.analyze.spark.daemon` as its Python worker daemon;
    when ``input_bytes`` is known and under :data:`LATENCY_INPUT_BYTES`, its JVM
    also compiles with the quick JIT tier only, which halves the start-up and the
    first job (docs/analyze.md, "Where the time goes"). A local JVM maps the class-data
    archive of :mod:`kproto.analyze.spark.jvm_archive` when there is one, or records it when
    ``record_jvm_archive`` (then call ``jvm_archive.finish(session)`` at the end).
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    configured = "spark.master" in dict(SparkConf().getAll()) if os.environ.get("SPARK_SUBMIT_OPTS") \
        or os.environ.get("SPARK_ENV_LOADED") else False
    if master is None and not configured:
        master = "local[*]"
    if master and master.startswith("local"):
        # Local workers are child processes of this one: same interpreter, same kproto.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # pyarrow's allocator (mimalloc) backs large buffers with huge pages: a worker's first
        # split touches a few hundred MB of fresh memory, and 4 KiB page faults were a third of it.
        os.environ.setdefault("MIMALLOC_LARGE_OS_PAGES", "1")
        package_root = str(Path(__file__).resolve().parents[2])
        paths = os.environ.get("PYTHONPATH", "")
        if package_root not in paths.split(os.pathsep):
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, paths) if p)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    defaults = {
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "true",
    }
    archive = None
    if master and master.startswith("local"):
        defaults["spark.ui.enabled"] = "false"
        # The Python workers fork from a daemon that has imported kproto and pyarrow already:
        # a session's first tasks do not import them once per worker (kproto/analyze/spark/daemon.py).
        defaults["spark.python.daemon.module"] = "kproto.analyze.spark.daemon"
        # Only the Python workers get them (not this process, nor the JVM); the user's own win.
        for key, value in WORKER_MEMORY_ENV.items():
            if key not in os.environ:
                defaults[f"spark.executorEnv.{key}"] = value
        memory = local_driver_memory(input_bytes)
        if memory is not None and "spark.driver.memory" not in (conf or {}):
            defaults["spark.driver.memory"] = memory
        java_options = []
        if input_bytes is not None and input_bytes <= LATENCY_INPUT_BYTES:
            # The JVM only passes a few compact rows for small inputs: C2's optimised code
            # never pays for its compile time there.
            java_options.append("-XX:TieredStopAtLevel=1")
        from pyspark import SparkContext

        # Only a JVM this call starts takes the options (and only without the user's own).
        if SparkContext._gateway is None and "spark.driver.extraJavaOptions" not in (conf or {}):
            archive = jvm_archive.plan(record=record_jvm_archive)
            java_options.append(archive.java_options())
        if any(java_options):
            defaults["spark.driver.extraJavaOptions"] = " ".join(o for o in java_options if o)
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    from pyspark import SparkContext

    # A JVM started here writes its start-up banners through kproto.analyze.spark.jvm_noise's filter.
    starting = SparkContext._gateway is None and master is not None and master.startswith("local")
    with jvm_noise.banners_dropped() if starting else contextlib.nullcontext():
        session = builder.getOrCreate()
    # What jvm_archive.finish looks at (setattr: SparkSession declares no such attribute).
    setattr(session, "_kproto_jvm_archive", archive)  # noqa: B010
    return session


#: Local input bytes above which an embedded session's JVM gets more heap than Spark's default 1 GB.
LARGE_INPUT_BYTES = 64 << 20


def local_driver_memory(input_bytes: int | None) -> str | None:
    """The heap of a local session's JVM (driver and executors in one) for a large input: a quarter of the
    machine's memory, at most 4 GB (a cap, taken only when used); None: Spark's default. Its cache of
    the compact rows and the broadcasts of its joins grow with the input's connections: on 100,000 short
    connections 1 GB ran out (docs/analyze.md, "Many short connections")."""
    if input_bytes is None or input_bytes <= LARGE_INPUT_BYTES:
        return None
    try:
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    return f"{max(1024, min(4096, machine // 4 >> 20))}m"


# ---------------------------------------------------------------- progress
class Progress:
    """Phases and task counts on stderr while Spark works (a live line on a terminal)."""

    def __init__(self, spark, enabled: bool = True, stream=None, profile=None) -> None:
        self.spark = spark
        self.profile = profile      # a kproto.analyze.spark.profile.PhaseProfile told of every phase, or None
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.phase = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = ""

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self.enabled:
            self._thread.join(2)
            if self.phase and exc[0] is None:
                self._finish_phase()

    def step(self, phase: str) -> None:
        """A new phase starts: the one before it is printed with how long it took."""
        if self.phase and self.enabled:
            self._finish_phase()
        self.phase = phase
        self.phase_started = time.monotonic()
        self.run_started = getattr(self, "run_started", self.phase_started)
        if self.profile is not None:
            self.profile.mark(phase)
        if self.enabled and self._tty:
            self._write(f"kproto analyze: {phase} ...", final=False)

    def done(self) -> None:
        """The last phase ended: it, then the whole run's time."""
        if self.profile is not None:
            self.profile.mark("done")
        if self.enabled and self.phase:
            self._finish_phase()
            self._write(f"kproto analyze: done in {time.monotonic() - self.run_started:.1f} s", final=True)
        self.phase = ""

    def _finish_phase(self) -> None:
        took = time.monotonic() - self.phase_started
        self._write(f"kproto analyze: {self.phase}: {took:.1f} s", final=True)

    def _write(self, text: str, final: bool) -> None:
        if self._tty:
            self.stream.write("\r" + text.ljust(len(self._last)) + ("\n" if final else ""))
            text = "" if final else text
        elif final:
            self.stream.write(text + "\n")
        self._last = text
        self.stream.flush()

    def _poll(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not self._stop.wait(0.5):
            done = total = 0
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total and self._tty:
                self._write(f"kproto analyze: {self.phase} [{done}/{total} tasks]", final=False)


# ---------------------------------------------------------------- inputs
@dataclass
class Inputs:
    files: list[tuple[str, int]] = field(default_factory=list)     # (path, length): captures
    parquet: list[str] = field(default_factory=list)               # tables of frames


def _is_parquet(path: str) -> bool:
    local = P.local_path(path)
    if path.rstrip("/").endswith(".parquet"):
        return True
    return local is not None and os.path.isdir(local) and any(
        name.endswith(".parquet") for name in os.listdir(local))


def list_inputs(spark, paths: Sequence[str]) -> Inputs:
    """Capture files (listed by Spark, globs expanded, contents not read) and Parquet frame tables."""
    inputs = Inputs()
    captures: list[str] = []
    for path in paths:
        (inputs.parquet if _is_parquet(path) else captures).append(path)
    if captures and all(P.local_path(p) == p for p in captures):
        # Local paths: list them here, as Spark's binaryFile would (no job, no JVM warm-up). On a
        # cluster too when the driver sees them (a shared file system, one host): Spark's own
        # listing of a few paths runs in the driver as well, and its job only returned the lengths.
        try:
            inputs.files = sorted((path, os.path.getsize(path)) for path in _list_local(captures))
            return inputs
        except FileNotFoundError:
            if spark.sparkContext.master.startswith("local"):
                raise
    if captures:
        resolved = [str(Path(p).resolve()) if "://" not in p and not p.startswith("file:") else p
                    for p in captures]
        listing = spark.read.format("binaryFile").load(resolved).select("path", "length").collect()
        # Sorted here: orderBy would add a sampling job and a shuffle to the listing's one job.
        inputs.files = sorted((row["path"], int(row["length"])) for row in listing)
    return inputs


def local_input_bytes(paths: Sequence[str]) -> int | None:
    """The bytes of the capture files when every path is a local capture that exists, else None
    (without raising). Parquet inputs give None: their frames go through the JVM, whatever their size."""
    if any(P.local_path(p) != p or _is_parquet(p) for p in paths):
        return None
    try:
        return sum(os.path.getsize(p) for p in _list_local(paths))
    except OSError:
        return None


def _list_local(paths: Sequence[str]) -> list[str]:
    """Files named by local paths, globs and directories (their files; names starting "." or "_" skipped)."""
    found: set[str] = set()
    for path in paths:
        matches = glob.glob(path) if glob.has_magic(path) else [path]
        if not matches:
            raise FileNotFoundError(f"no input files in {path}")
        for match in matches:
            if os.path.isdir(match):
                found.update(os.path.join(match, name) for name in os.listdir(match)
                             if not name.startswith((".", "_")) and os.path.isfile(os.path.join(match, name)))
            elif os.path.isfile(match):
                found.add(match)
            else:
                raise FileNotFoundError(f"no such file: {match}")
    return [os.path.abspath(path) for path in found]


def plan_splits(spark, inputs: Inputs, *, split_bytes: int, overlap_bytes: int, capture_sets: bool = True,
                named_sets: Sequence[tuple[str, str]] = ()) -> list[P.Split]:
    """Splits of every capture file, planned in the driver when it sees the files, else on the executors.

    The consecutive files of a capture set (kproto/analyze/spark/capture_sets.py) make one split;
    ``capture_sets`` False leaves each file alone but for the sets ``named_sets`` names.
    """
    if not inputs.files:
        return []
    files = inputs.files
    splits: list[P.Split] = []
    names: dict[str, str] = {}      # the capture names of files not named by their path
    if (len(files) > 1 and capture_sets) or named_sets:
        sets = CS.detect_sets(file_heads(spark, files), automatic=capture_sets, named=named_sets)
        sizes = dict(files)
        for found in sets:
            if len(found.files) > 1:
                splits.append(P.plan_set(P.shown_path(found.name), [(h.path, sizes[h.path]) for h in found.files],
                                         found.files[0].format, split_bytes=split_bytes))
            elif found.name != found.files[0].path:    # one file, named with --capture-set
                names[found.files[0].path] = found.name
        in_sets = {h.path for found in sets if len(found.files) > 1 for h in found.files}
        files = [(path, length) for path, length in files if path not in in_sets]
    splits += _plan_files(spark, files, names, split_bytes=split_bytes, overlap_bytes=overlap_bytes)
    return sorted(splits, key=lambda s: (s.capture, s.split_index))


def _runs_locally(spark, files: list[tuple[str, int]]) -> bool:
    """Whether the driver plans: it sees every file the tasks will read, at its listed length.

    In local mode, and on a cluster whose inputs are on a file system the driver shares (or on
    the driver's host): a job on the executors would read the same bytes, and costs a task
    launch and a Python worker's round trip per analysis."""
    for path, length in files:
        local = P.local_path(path)
        if local is None or not os.path.isfile(local) or os.path.getsize(local) != length:
            return False
    return True


def _files_frame(spark, files: list[tuple[str, int]]):
    """The input files as a DataFrame of (path, length), for a job that reads them on the executors."""
    return spark.createDataFrame(spark.sparkContext.parallelize(files, max(1, min(len(files), 64))),
                                 "path string, length long")


def file_heads(spark, files: list[tuple[str, int]]) -> list[CS.FileHead]:
    """The heads of the capture files (set detection), read in the driver or by one job on the executors."""
    if _runs_locally(spark, files):
        return [P.file_head(path, length) for path, length in files]
    frame = _files_frame(spark, files)

    def heads(batches):
        for batch in batches:
            found = [json.dumps(dataclasses.asdict(P.file_head(r["path"], r["length"])))
                     for r in batch.to_pylist()]
            yield pa.RecordBatch.from_pydict({"head": found})

    return [CS.FileHead(**json.loads(row["head"])) for row in frame.mapInArrow(heads, "head string").collect()]


def _plan_files(spark, files: list[tuple[str, int]], names: dict[str, str], *, split_bytes: int,
                overlap_bytes: int) -> list[P.Split]:
    """Splits of capture files read on their own, ``capture`` named by ``names`` or by their path."""
    from pyspark.sql.pandas.types import from_arrow_schema

    if not files:
        return []
    if _runs_locally(spark, files):
        return [s for path, length in files
                for s in P.plan_file(path, length, capture=names.get(path) or P.shown_path(path),
                                     split_bytes=split_bytes, overlap=overlap_bytes)]
    frame = _files_frame(spark, files)

    def plan(batches):
        for batch in batches:
            for row in batch.to_pylist():
                capture = names.get(row["path"]) or P.shown_path(row["path"])
                yield P.splits_to_batch(P.plan_file(row["path"], row["length"], capture=capture,
                                                    split_bytes=split_bytes, overlap=overlap_bytes))

    rows = frame.mapInArrow(plan, from_arrow_schema(P.SPLIT_SCHEMA)).collect()
    return [P.Split(**row.asDict()) for row in rows]


# ---------------------------------------------------------------- the pipeline
@dataclass
class Options:
    broker_ports: tuple[int, ...] = (9092,)
    kafka_ports: tuple[int, ...] = ()   # read as Kafka whatever they carry (--port)
    show_credentials: bool = False      # bodies keep SASL tokens and other credentials (kproto.arrow.credentials)
    split_bytes: int | None = None      # None: about one range per core, 32-256 MiB each
    overlap_bytes: int = P.DEFAULT_OVERLAP_BYTES
    body: str | None = "json"
    records: str = "summary"            # record sets in the JSON bodies: "summary" or "base64"
    fail_fast: bool = False             # an input that cannot be read completely fails the run
    report: bool = True
    driver_rows: int = 200_000          # compact rows combined in the driver up to this many, else by Spark
    driver_input_bytes: int = 64 << 20  # rows of connections come to the driver for inputs up to this size
    driver_report_frames: int = 250_000  # the report's facts computed in the driver (pyarrow) up to this many
                                         # frames, else by Spark queries
    capture_sets: bool = True           # consecutive files of one rotated capture read as one (capture_sets.py)
    named_sets: tuple[tuple[str, str], ...] = ()   # (name, glob): files read as one capture set, named so


MIN_AUTO_SPLIT = 32 * 1024 * 1024

#: Compact rows there are about as many of as connections: kept out of the driver for large inputs.
PER_CONNECTION_KINDS = ("connection", "usage")


def input_bytes(inputs: Inputs) -> int | None:
    """The bytes of the inputs: capture files, and Parquet tables on a local file system (else None)."""
    total = sum(length for _, length in inputs.files)
    for table in inputs.parquet:
        local = P.local_path(table)
        if local is None or not os.path.exists(local):
            return None
        if os.path.isfile(local):
            total += os.path.getsize(local)
            continue
        for folder, _dirs, names in os.walk(local):
            total += sum(os.path.getsize(os.path.join(folder, name)) for name in names)
    return total


def split_size(options: Options, inputs: Inputs, parallelism: int) -> int:
    """The split size: the one asked for, else enough ranges of the pcap bytes to keep every core busy."""
    if options.split_bytes is not None:
        return options.split_bytes
    total = sum(length for _, length in inputs.files)
    per_core = -(-total // max(1, parallelism))
    return max(MIN_AUTO_SPLIT, min(P.DEFAULT_SPLIT_BYTES, per_core))


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
                yield from task.process_split(split, broker_ports=ports, kafka_ports=forced,
                                           show_credentials=show_credentials, body=body, records=records, sink=sink,
                                           fail_fast=fail_fast)
                sink.close()

    def decode(batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        sink = W.ParquetSink(out, f"group-{context.partitionId() if context else 0:05d}")
        yield from W.decode_raw_batches(batches, body=body, records=records, sink=sink,
                                        show_credentials=show_credentials)
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
        columns = [F.col(name).cast(parts_type[name].dataType).alias(name) for name in W.RAW_COLUMNS
                   if name != "split_index"]
        raw_inputs.append(table.select(F.lit("raw").alias("kind"), *columns,
                                       F.lit(0).cast("int").alias("split_index")))
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
        _per_partition(C.connections_table), from_arrow_schema(C.CONNECTIONS_SCHEMA))

    # Clients: the usage rows with their connection's client address.
    address = connections.select("capture", "connection_id", "client_ip")
    usage = parts.filter(kind == "usage").select(*C.USAGE_COLUMNS).join(address, ["capture", "connection_id"], "left")
    clients = usage.repartition("client_ip", "client_id").mapInArrow(
        _per_partition(C.clients_table), from_arrow_schema(C.CLIENTS_SCHEMA)).orderBy("client_ip", "client_id")

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

    topics = topic_rows.mapInArrow(named, topic_type).repartition("topic", "topic_id", "partition") \
        .mapInArrow(_per_partition(C.topics_table), from_arrow_schema(C.TOPICS_SCHEMA)) \
        .orderBy("topic", "topic_id", "partition")
    return {"connections": connections, "clients": clients, "topics": topics}


def _per_partition(make_table: Callable[[list[dict]], pa.Table]) -> Callable:
    """A mapInArrow function: ``make_table`` on every row of the partition at once."""
    def rows_of_partition(batches):
        rows = [row for batch in batches for row in batch.to_pylist()]
        if rows:
            yield from make_table(rows).to_batches()

    return rows_of_partition


def summary_rows(accounting: Iterable[Any], errors: list[dict], connections: dict[str, dict] | None = None) -> list[dict]:
    """One row per capture and a total row ("*"): every frame read, and where it went.

    ``accounting``: the compact rows of kinds capture, counts and connection
    (anything indexable by kind, capture, connection_id and info); ``errors``:
    the errors table's rows (:func:`error_rows` of the same rows); ``connections``:
    the per-capture :func:`connection_totals` when the connection rows are not in
    ``accounting`` (:func:`connection_totals_spark`).
    """
    accounting = list(accounting)
    if connections is None:
        connections = connection_totals(accounting)
    rows: dict[str, dict] = {}

    def row(capture: str) -> dict:
        return rows.setdefault(capture, {"capture": capture})

    files: dict[str, set] = {}       # the files of each capture (several for a capture set)
    streams_add_up: dict[str, bool] = {}
    for capture, total in connections.items():
        row(capture).update({name: total[name] for name in ("connections", *CONNECTION_SUMS)})
        streams_add_up[capture] = total["streams_add_up"]
    for r in accounting:
        if r["kind"] == "connection":
            continue
        info = json.loads(r["info"])
        target = row(r["capture"])
        if r["kind"] == "counts":
            for name, value in info.items():
                if name == "first_ts_ns":
                    target[name] = min(v for v in (value, target.get(name)) if v is not None) \
                        if value is not None or target.get(name) is not None else None
                elif name == "last_ts_ns":
                    target[name] = max(v for v in (value, target.get(name)) if v is not None) \
                        if value is not None or target.get(name) is not None else None
                else:
                    target[name] = target.get(name, 0) + (value or 0)
            continue
        target["format"] = info.get("format")
        target["snap_lengths"] = sorted(set(target.get("snap_lengths", [])) | set(info.get("snap_lengths", [])))
        target["splits"] = info.get("split_count", 1)
        files.setdefault(r["capture"], set()).add(info.get("file", r["capture"]))
        target["files"] = len(files[r["capture"]])
        # Each split's counters are its own share of the file: they add up.
        for summary_name, name in (("file_bytes", "input_bytes"), ("record_bytes", "file_bytes"),
                                   ("truncated_bytes", "trailing_bytes"), ("unread_bytes", "unread_bytes"),
                                   ("packets", "packets"), ("tcp_packets", "tcp_packets"),
                                   ("tcp_payload_bytes", "tcp_payload_bytes"), ("malformed_packets", "malformed"),
                                   ("ip_fragments", "ip_fragments"), ("non_tcp_packets", "non_tcp"),
                                   ("unsupported_link_packets", "unsupported_link")):
            if isinstance(info.get(name), int):
                target[summary_name] = target.get(summary_name, 0) + info[name]
    for error in errors:
        target = row(error["capture"])
        target["errors"] = target.get("errors", 0) + 1
        if not target.get("error"):
            target["error"] = f"{error['category']} at byte offset {error['offset']}: {error['reason']}"
    out = []
    for capture in sorted(rows):
        r = rows[capture]
        for name in SUMMARY_COUNTS:
            r.setdefault(name, 0)
        out.append(r)
    total: dict[str, Any] = {"capture": "*"}
    for name in SUMMARY_COUNTS:
        total[name] = sum(r.get(name) or 0 for r in out)
    total["files"] = sum(r.get("files") or 0 for r in out)
    total["first_ts_ns"] = min((r["first_ts_ns"] for r in out if r.get("first_ts_ns") is not None), default=None)
    total["last_ts_ns"] = max((r["last_ts_ns"] for r in out if r.get("last_ts_ns") is not None), default=None)
    out.append(total)
    for r in out:
        frames_add_up = (
            r["frames"] == r["frames_ok"] + r["frames_undecodable"]
            and r["request_frames"] == r["exchanges_paired"] + r["no_response_expected"] + r["unpaired_requests"]
            and r["response_frames"] == r["exchanges_paired"] + r["unpaired_responses"])
        # Every byte of every file: read as records (frames, in a frame dump), an incomplete
        # record at the end, or unread after an error that has a row in the errors table.
        files_add_up = r["file_bytes"] == r["record_bytes"] + r["truncated_bytes"] + r["unread_bytes"]
        packets_add_up = r["packets"] == (r["tcp_packets"] + r["malformed_packets"] + r["ip_fragments"]
                                          + r["non_tcp_packets"] + r["unsupported_link_packets"])
        if r.get("format") == "frames":
            files_add_up = files_add_up and r["record_bytes"] == r["frame_bytes"]
        losses_explained = r["errors"] > 0 or not (r["truncated_bytes"] or r["unread_bytes"])
        streams = streams_add_up.get(r["capture"], True) if r["capture"] != "*" else all(streams_add_up.values())
        r["accounted"] = bool(frames_add_up and files_add_up and packets_add_up and losses_explained and streams)
    return out


def error_rows(accounting: Iterable[Any]) -> list[dict]:
    """The ``errors`` table: every input that could not be read completely, where and why.

    Ranges of one file that stopped at the same record give one row, their unread bytes summed.
    """
    merged: dict[tuple, dict] = {}
    for r in accounting:
        if r["kind"] != "capture":
            continue
        info = json.loads(r["info"])
        file = info.get("file", r["capture"])
        for error in info.get("errors") or []:
            key = (r["capture"], file, error["offset"], error["category"], error["reason"])
            row = merged.setdefault(key, {"capture": r["capture"], "file": file, "category": error["category"],
                                          "offset": error["offset"], "reason": error["reason"],
                                          "unread_bytes": 0})
            row["unread_bytes"] += error["unread_bytes"]
    return [merged[key] for key in sorted(merged)]


ERRORS_SCHEMA = pa.schema([("capture", pa.string()), ("category", pa.string()), ("offset", pa.int64()),
                           ("reason", pa.string()), ("unread_bytes", pa.int64()),
                           ("file", pa.string()),    # the file ``offset`` is in (a capture set has several)
                           # stream_loss rows (stream_loss_rows): the connection, its direction, the bytes
                           ("connection_id", pa.int64()), ("direction", pa.string()), ("lost_bytes", pa.int64())])


SUMMARY_COUNTS = (
    "file_bytes", "record_bytes", "truncated_bytes", "unread_bytes", "errors",
    "packets", "tcp_packets", "tcp_payload_bytes", "malformed_packets", "ip_fragments", "non_tcp_packets",
    "unsupported_link_packets", "connections", "frames", "request_frames",
    "response_frames", "frame_bytes", "frames_ok", "frames_undecodable", "exchanges_paired",
    "no_response_expected", "unpaired_requests", "unpaired_responses", "skipped_bytes", "gap_bytes",
    "tail_bytes", "duplicate_bytes", "snapped_bytes", "sasl_bytes", "other_bytes",
)
SUMMARY_SCHEMA = pa.schema([("capture", pa.string()), ("format", pa.string()), ("splits", pa.int32()),
                            ("files", pa.int32())]
                           + [(name, pa.int64()) for name in SUMMARY_COUNTS]
                           + [("first_ts_ns", pa.int64()), ("last_ts_ns", pa.int64()),
                              ("accounted", pa.bool_()), ("error", pa.string())])


@dataclass
class Result:
    out: Path
    summary: list[dict]
    facts: dict | None
    tables: dict[str, str]
    errors: list[dict] = field(default_factory=list)   # the errors table's rows

    @property
    def complete(self) -> bool:
        """Every input was read completely (no row in the errors table)."""
        return not self.errors


def analyze(paths: Sequence[str], out: str | os.PathLike, *, spark=None, master: str | None = None,
            options: Options | None = None, progress: bool | Callable = True, profile=None) -> Result:
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
        splits = plan_splits(spark, inputs, split_bytes=split_bytes, overlap_bytes=options.overlap_bytes,
                             capture_sets=options.capture_sets, named_sets=options.named_sets)
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
        result = finish_run(spark, out_text, collected, options, parts=parts, rows_complete=complete,
                            report=options.report,
                            report_dir=Path(local_out) if local_out is not None else None, step=show.step)
        parts.unpersist()
        if stage1 is not None and stage1.is_cached:
            stage1.unpersist()
        show.done()
    return result


def finish_run(spark, out: str, rows: pa.Table, options: Options, *, parts=None, rows_complete: bool = True,
               extra_errors: Sequence[dict] = (), report: bool = True, report_dir: Path | None = None,
               step: Callable[[str], None] = lambda _phase: None) -> Result:
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
    written = {name: f"{out}/{name}"
               for name in ("frames", "exchanges", "connections", "clients", "topics", "summary", "errors")}
    has_connections = parts is None or rows_complete
    # The accounting: a row per capture and split, and per connection and split when the rows hold them.
    accounting = [r for r in rows.select(["kind", "capture", "connection_id", "info"]).to_pylist()
                  if r["kind"] in ("capture", "counts") or (has_connections and r["kind"] == "connection")]
    errors = error_rows(accounting)
    if extra_errors:
        errors = sorted(errors + list(extra_errors), key=lambda e: (e["capture"], e["offset"], e["category"],
                                                                    e["reason"]))
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
        losses = stream_loss_rows(parts.filter(_has_stream_loss()).select(
            "kind", "capture", "connection_id", "info").toArrow().to_pylist())
    write_table(pa.Table.from_pylist(summary, schema=SUMMARY_SCHEMA), out, "summary")
    write_table(pa.Table.from_pylist(errors + losses, schema=ERRORS_SCHEMA), out,
                "errors")     # the input errors, then each connection direction's stream losses
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

    lost = [F.coalesce(F.get_json_object("info", f"$.{side}_{name}").cast("long"), F.lit(0)) > 0
            for side in ("request", "response") for name, _text in STREAM_LOSSES]
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
REPORT_FRAME_COLUMNS = ("capture", "connection_id", "direction", "sequence", "api_key", "api_version", "status",
                        "status_name", "error_offset")


def report_inputs_arrow(written: dict[str, str]) -> dict[str, pa.Table]:
    """``frames`` (the columns the report reads) and ``exchanges`` as pyarrow Tables, from the written Parquet."""
    read = {}
    for name in ("frames", "exchanges"):
        filesystem, base = W.output_filesystem(written[name])
        read[name] = ds.dataset(base, filesystem=filesystem, format="parquet",
                                schema=W.FRAMES_SCHEMA if name == "frames" else W.EXCHANGES_SCHEMA,
                                exclude_invalid_files=False, ignore_prefixes=[".", "_"])
    is_api_versions_response = (ds.field("direction") == 1) & (ds.field("api_key") == W.API_VERSIONS)
    columns = {name: ds.field(name) for name in REPORT_FRAME_COLUMNS}
    columns["body"] = pc.if_else(is_api_versions_response, ds.field("body"), pa.scalar(None, pa.string()))
    return {"frames": read["frames"].to_table(columns=columns), "exchanges": read["exchanges"].to_table()}


def report_tables(spark, written: dict[str, str]) -> dict[str, Any]:
    """The written tables as DataFrames, for the report's queries (kproto/analyze/spark/report_facts.py joins them)."""
    return {name: spark.read.parquet(path) for name, path in written.items()}

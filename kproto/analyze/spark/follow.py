"""Following a directory: ``kproto analyze DIR --follow`` (issue 21, item 3).

A driver loop. Every ``trigger`` seconds it lists the inputs, takes the files that
are *closed* and not processed yet, and runs one batch on them:

1. :func:`process_files` reads and decodes them with the same Spark job as
   ``kproto analyze`` (:func:`kproto.analyze.spark.decode_job.compact_rows`), writing their
   ``frames`` / ``exchanges`` parts into a staging directory of the checkpoint;
2. the batch's compact rows are saved in the checkpoint (``rows/batch-NNNNNN.parquet``);
3. the staged parts move into the output tables as ``part-bNNNNNN-*.parquet``
   (new files next to the old ones: nothing already written is rewritten);
4. ``state.json`` records the batch and its files (path, bytes read, mtime), written
   atomically: this is the commit.

A stop anywhere before step 4 leaves parts and rows of a batch the state does not
know; the next start deletes everything of batches at or after the state's
``next_batch`` and reads those files again, so nothing is counted twice or lost.
After each batch the small tables (``connections``, ``clients``, ``topics``,
``summary``, ``errors``) are rebuilt from the saved compact rows of every batch
(no capture is read again), and the report is rewritten every ``report_interval``.

A file is *closed* when it has not been modified for ``settle`` seconds (its mtime
is that old). Each file is its own capture, as in ``kproto analyze --no-capture-sets DIR``;
:func:`process_files` is the one place that turns files into compact rows, where
capture sets (rotated pieces read as one capture) can be plugged in.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kproto.analyze.spark import decode_job
from kproto.analyze.spark import jobs as J
from kproto.analyze.spark import planning as P
from kproto.analyze.spark import worker as W
from kproto.analyze.spark.inputs import Inputs, list_local, plan_files
from kproto.analyze.spark.options import Options

STATE_FILE = "state.json"
STATE_VERSION = 1


class FollowSetupError(ValueError):
    """Following cannot start as asked: remote paths, a checkpoint of other options or in use by another
    follower, an output holding tables the checkpoint did not write."""


@dataclass
class FollowOptions:
    trigger: float = 10.0  # seconds between listings
    settle: float = 30.0  # a file unmodified this long is closed
    report_interval: float = 60.0  # seconds between report rewrites (the tables follow every batch)
    checkpoint: str | None = None  # default: <out>/_follow
    once: bool = False  # one listing, one batch of what is closed, then stop
    max_batches: int | None = None  # stop after this many batches


@dataclass(frozen=True)
class SeenFile:
    path: str  # absolute local path (the ``capture`` column)
    size: int
    mtime_ns: int


# ---------------------------------------------------------------- listing
def scan(paths: Sequence[str], settle: float, now: float | None = None) -> tuple[list[SeenFile], list[SeenFile]]:
    """(closed, still open) input files under ``paths``, each sorted by path.

    Directories are listed as ``kproto analyze`` lists them (names starting "." or
    "_" skipped); a glob or directory with nothing in it yet is not an error here.
    """
    now = time.time() if now is None else now
    closed: list[SeenFile] = []
    still_open: list[SeenFile] = []
    for path in paths:
        try:
            found = list_local([path])
        except FileNotFoundError:
            continue
        for name in found:
            try:
                info = os.stat(name)
            except OSError:
                continue  # gone since the listing: not seen
            seen = SeenFile(name, info.st_size, info.st_mtime_ns)
            (closed if now - info.st_mtime_ns / 1e9 >= settle else still_open).append(seen)
    return sorted(set(closed), key=lambda f: f.path), sorted(set(still_open), key=lambda f: f.path)


# ---------------------------------------------------------------- the checkpoint
class Checkpoint:
    """What was processed: ``state.json`` (batches, files, options) and each batch's compact rows."""

    def __init__(self, directory: str, fingerprint: dict) -> None:
        self.directory = Path(directory)
        self.state_path = self.directory / STATE_FILE
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "rows").mkdir(exist_ok=True)
        self._rows: dict[int, pa.Table] = {}  # compact rows of committed batches read so far
        if self.state_path.exists():
            self.state = json.loads(self.state_path.read_text())
            if self.state.get("options") != fingerprint:
                raise FollowSetupError(
                    f"the checkpoint {self.directory} was written with other options "
                    f"({self.state.get('options')}); use the same ones or another --checkpoint"
                )
        else:
            self.state = {"version": STATE_VERSION, "options": fingerprint, "next_batch": 0, "files": {}}

    @property
    def next_batch(self) -> int:
        return int(self.state["next_batch"])

    @property
    def files(self) -> dict[str, dict]:
        return self.state["files"]

    @property
    def staging(self) -> str:
        return str(self.directory / "staging")

    def rows_path(self, batch: int) -> Path:
        return self.directory / "rows" / f"batch-{batch:06d}.parquet"

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Held while following: a second follower of the same checkpoint is refused."""
        with open(self.directory / "lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise FollowSetupError(f"another follower is using the checkpoint {self.directory}") from None
            yield

    def claim_output(self, out: str) -> None:
        """A new checkpoint takes only an output without parts (others would be counted with its own)
        and records itself at once; an existing one resumes whatever it wrote, committed or not."""
        if self.state_path.exists():
            return
        for name in ("frames", "exchanges"):
            table = Path(out) / name
            written = (
                [p.name for p in table.glob("part-*.parquet") if p.name != "part-empty.parquet"]
                if table.is_dir()
                else []
            )
            if written:
                raise FollowSetupError(
                    f"{table} already holds parts this checkpoint ({self.directory}) did not "
                    "write: follow into an empty --out, or give the checkpoint that wrote them"
                )
        self.write()

    def discard_uncommitted(self, out: str) -> None:
        """Delete the parts and rows of batches the state does not record (a stop before their commit)."""
        for name in ("frames", "exchanges"):
            table = Path(out) / name
            for part in table.glob("part-b*.parquet") if table.is_dir() else ():
                if _batch_of(part.name) >= self.next_batch:
                    part.unlink()
        for rows in (self.directory / "rows").glob("batch-*.parquet"):
            if _batch_of(rows.name) >= self.next_batch:
                rows.unlink()
        shutil.rmtree(self.staging, ignore_errors=True)

    def save_rows(self, batch: int, rows: pa.Table) -> None:
        hidden = self.rows_path(batch).with_suffix(".tmp")
        pq.write_table(rows, hidden)
        os.replace(hidden, self.rows_path(batch))

    def all_rows(self) -> pa.Table:
        """The compact rows of every committed batch (each file read once per run, then kept)."""
        for batch in range(self.next_batch):
            if batch not in self._rows:
                self._rows[batch] = pq.read_table(self.rows_path(batch))
        tables = [self._rows[batch] for batch in range(self.next_batch)]
        return pa.concat_tables(tables, promote_options="default") if tables else W.PARTS_SCHEMA.empty_table()

    def commit(self, batch: int, files: Sequence[SeenFile], started: float) -> None:
        """Record ``batch`` and its files: after this, they count as processed."""
        now = time.time()
        for f in files:
            self.files[f.path] = {
                "size": f.size,
                "mtime_ns": f.mtime_ns,
                "batch": batch,
                "taken_at": started,
                "committed_at": now,
            }
        self.state["next_batch"] = batch + 1
        self.write()

    def write(self) -> None:
        hidden = self.state_path.with_suffix(".tmp")
        with open(hidden, "w") as stream:
            json.dump(self.state, stream, indent=1, sort_keys=True)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(hidden, self.state_path)

    def note_changes(self, current: dict[str, SeenFile]) -> bool:
        """Record processed files that changed after they were read; True when a record changed."""
        changed = False
        for path, entry in self.files.items():
            now = current.get(path)
            if now is None or (now.size, now.mtime_ns) == (entry["size"], entry["mtime_ns"]):
                continue
            if entry.get("changed_to") != [now.size, now.mtime_ns]:
                entry["changed_to"] = [now.size, now.mtime_ns]
                changed = True
        return changed

    def change_errors(self) -> list[dict]:
        """Rows of the errors table for files that changed after they were read (their new bytes unread)."""
        rows = []
        for path, entry in sorted(self.files.items()):
            if "changed_to" not in entry:
                continue
            size, _mtime = entry["changed_to"]
            grew = size > entry["size"]
            reason = (
                f"the file grew by {size - entry['size']:,} bytes after it was read as closed"
                if grew
                else "the file was rewritten after it was read as closed (a name reused by the writer's ring buffer?)"
            )
            rows.append(
                {
                    "capture": path,
                    "category": "changed_after_read",
                    "offset": entry["size"],
                    "reason": reason + " (not read again: raise --settle)",
                    "unread_bytes": max(0, size - entry["size"]),
                }
            )
        return rows


def _batch_of(name: str) -> int:
    """The batch number in ``part-bNNNNNN-...`` or ``batch-NNNNNN.parquet``."""
    digits = name.split("-")[1].lstrip("b").split(".")[0]
    return int(digits) if digits.isdigit() else -1


def fingerprint(options: Options) -> dict:
    """The options that change the tables' contents: a checkpoint resumes only with the same ones."""
    chosen = {
        "broker_ports": list(options.broker_ports),
        "split_bytes": options.split_bytes,
        "overlap_bytes": options.overlap_bytes,
        "body": options.body,
        "records": options.records,
    }
    # Named only when set, so checkpoints written before these options existed still resume.
    if options.kafka_ports:
        chosen["kafka_ports"] = list(options.kafka_ports)
    if options.show_credentials:
        chosen["show_credentials"] = True
    return chosen


# ---------------------------------------------------------------- one batch
def process_files(spark, files: Sequence[SeenFile], options: Options, staging: str) -> pa.Table:
    """Read, decode and pair ``files`` (each its own capture): their frames and exchanges are
    written under ``staging``; returns their compact rows (:data:`worker.PARTS_SCHEMA`)."""
    inputs = Inputs()
    for f in files:
        if f.path.endswith(".parquet"):
            inputs.parquet.append(f.path)
        else:
            inputs.files.append((f.path, f.size))
    # Not inputs.split_size: a file's ranges (and so its connection ids) must not depend on which
    # batch it lands in; 256 MiB is what a plain analysis of a large directory uses.
    split_bytes = options.split_bytes or P.DEFAULT_SPLIT_BYTES
    # Planned file by file, each its own capture named by its path: a plain run's planning of
    # files outside capture sets.
    splits = sorted(
        plan_files(spark, inputs.files, {}, split_bytes=split_bytes, overlap_bytes=options.overlap_bytes),
        key=lambda s: (s.capture, s.split_index),
    )
    decode_job.prepare_output(staging)
    parts, stage1 = decode_job.compact_rows(spark, inputs, splits, options, staging)
    rows = parts.toArrow()
    if stage1 is not None and stage1.is_cached:
        stage1.unpersist()
    return rows


def run_batch(spark, batch: int, files: Sequence[SeenFile], options: Options, out: str, checkpoint: Checkpoint) -> None:
    """Process ``files`` as batch number ``batch`` and commit it (the order the module docstring gives)."""
    started = time.time()
    rows = process_files(spark, files, options, checkpoint.staging)
    # The size recorded is what the tasks read (a file can grow between the listing and the read).
    read = bytes_read(rows)
    files = [SeenFile(f.path, read.get(f.path, f.size), f.mtime_ns) for f in files]
    checkpoint.save_rows(batch, rows)
    for name in ("frames", "exchanges"):
        staged = Path(checkpoint.staging) / name
        for part in sorted(staged.glob("part-*.parquet")):
            os.replace(part, Path(out) / name / f"part-b{batch:06d}-{part.name[len('part-') :]}")
    checkpoint.commit(batch, files, started)


def bytes_read(rows: pa.Table) -> dict[str, int]:
    """The bytes of each capture file its tasks read (the ``input_bytes`` of its splits' accounting rows)."""
    read: dict[str, int] = {}
    for r in rows.select(["kind", "capture", "info"]).to_pylist():
        if r["kind"] == "capture":
            read[r["capture"]] = read.get(r["capture"], 0) + json.loads(r["info"]).get("input_bytes", 0)
    return read


# ---------------------------------------------------------------- the tables and the report
def write_tables(spark, out: str, checkpoint: Checkpoint, options: Options, report: bool) -> J.Result:
    """The small tables (and the report when ``report``) from the compact rows of every committed batch,
    as a plain run ends (:func:`kproto.analyze.spark.jobs.finish_run`), with a row for every file that changed
    after it was read."""
    return J.finish_run(
        spark,
        out,
        checkpoint.all_rows(),
        options,
        extra_errors=checkpoint.change_errors(),
        report=report,
        report_dir=Path(out),
    )


# ---------------------------------------------------------------- the loop
@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set ``stop`` (the current batch finishes) instead of interrupting; main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda _sig, _frame: stop.set())
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def follow(
    paths: Sequence[str],
    out: str | os.PathLike,
    *,
    spark,
    options: Options | None = None,
    follow_options: FollowOptions | None = None,
    stop: threading.Event | None = None,
    log=None,
) -> J.Result:
    """Follow local ``paths`` (directories, globs, files): process closed files as they come, until stopped.

    Stops on ``stop`` being set (SIGINT / SIGTERM set it when called in the main
    thread), after one listing with ``once``, or after ``max_batches`` batches; the
    current batch always finishes and commits first. ``log(text)`` is told of each batch.
    """
    options = options or Options()
    how = follow_options or FollowOptions()
    if any(P.local_path(p) != p for p in paths) or P.local_path(str(out)) != str(out):
        raise FollowSetupError("--follow reads and writes local paths only")
    out_text = os.path.abspath(str(out))
    for name in ("frames", "exchanges"):
        Path(out_text, name).mkdir(parents=True, exist_ok=True)
    checkpoint = Checkpoint(how.checkpoint or os.path.join(out_text, "_follow"), fingerprint(options))
    with checkpoint.locked():
        checkpoint.claim_output(out_text)
        return _follow(
            paths, out_text, spark, options, how, checkpoint, stop or threading.Event(), log or (lambda _text: None)
        )


def _follow(
    paths: Sequence[str],
    out_text: str,
    spark,
    options: Options,
    how: FollowOptions,
    checkpoint: Checkpoint,
    stop: threading.Event,
    say,
) -> J.Result:
    """The loop of :func:`follow`, the checkpoint locked."""
    checkpoint.discard_uncommitted(out_text)
    result = None
    tables_stale = True  # the small tables do not show every committed batch yet
    report_current = False  # the report shows the tables as written
    last_report = None
    batches = 0
    with stop_on_signals(stop) as stopping:
        while True:
            tick = time.monotonic()
            if not stopping.is_set():
                closed, still_open = scan(paths, how.settle)
                if checkpoint.note_changes({f.path: f for f in closed + still_open}):
                    checkpoint.write()
                    tables_stale = True
                new = [f for f in closed if f.path not in checkpoint.files]
                if new:
                    batch = checkpoint.next_batch
                    say(f"batch {batch}: {len(new)} new closed file(s), {len(still_open)} still open")
                    try:
                        run_batch(spark, batch, new, options, out_text, checkpoint)
                    except Exception:
                        if not stopping.is_set():
                            raise
                        # Ctrl-C in a terminal reaches Spark's Python workers too, failing their tasks.
                        say(
                            f"batch {batch} was interrupted by the stop: not committed, its files are read "
                            "again at the next start"
                        )
                    else:
                        batches += 1
                        tables_stale = True
            finishing = how.once or stopping.is_set() or (how.max_batches is not None and batches >= how.max_batches)
            report_current = report_current and not tables_stale
            report_due = (
                options.report
                and not report_current
                and (finishing or last_report is None or time.monotonic() - last_report >= how.report_interval)
            )
            if tables_stale or report_due:
                result = write_tables(spark, out_text, checkpoint, options, report=report_due)
                tables_stale = False
                report_current = report_due
                if report_due:
                    last_report = time.monotonic()
            if finishing:
                break
            stopping.wait(max(0.0, how.trigger - (time.monotonic() - tick)))
    say(f"stopped: {checkpoint.next_batch} batch(es), {len(checkpoint.files)} file(s) committed")
    assert result is not None
    return result

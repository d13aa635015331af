"""What a run reads: the input files listed (captures and Parquet frame tables), and cut into splits.

Listing and planning run in the driver when it sees the files (local paths, a shared file
system), else as one small Spark job on the executors; pyspark is imported where it is used.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from kproto.analyze.spark import capture_sets as CS
from kproto.analyze.spark import planning as P
from kproto.analyze.spark.options import Options

#: The smallest split an automatic split size makes (split_size).
MIN_AUTO_SPLIT = 32 * 1024 * 1024


@dataclass
class Inputs:
    files: list[tuple[str, int]] = field(default_factory=list)  # (path, length): captures
    parquet: list[str] = field(default_factory=list)  # tables of frames


def _is_parquet(path: str) -> bool:
    local = P.local_path(path)
    if path.rstrip("/").endswith(".parquet"):
        return True
    return local is not None and os.path.isdir(local) and any(name.endswith(".parquet") for name in os.listdir(local))


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
            inputs.files = sorted((path, os.path.getsize(path)) for path in list_local(captures))
            return inputs
        except FileNotFoundError:
            if spark.sparkContext.master.startswith("local"):
                raise
    if captures:
        resolved = [str(Path(p).resolve()) if "://" not in p and not p.startswith("file:") else p for p in captures]
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
        return sum(os.path.getsize(p) for p in list_local(paths))
    except OSError:
        return None


def list_local(paths: Sequence[str]) -> list[str]:
    """Files named by local paths, globs and directories (their files; names starting "." or "_" skipped)."""
    found: set[str] = set()
    for path in paths:
        matches = glob.glob(path) if glob.has_magic(path) else [path]
        if not matches:
            raise FileNotFoundError(f"no input files in {path}")
        for match in matches:
            if os.path.isdir(match):
                found.update(
                    os.path.join(match, name)
                    for name in os.listdir(match)
                    if not name.startswith((".", "_")) and os.path.isfile(os.path.join(match, name))
                )
            elif os.path.isfile(match):
                found.add(match)
            else:
                raise FileNotFoundError(f"no such file: {match}")
    return [os.path.abspath(path) for path in found]


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


def plan_splits(
    spark,
    inputs: Inputs,
    *,
    split_bytes: int,
    overlap_bytes: int,
    capture_sets: bool = True,
    named_sets: Sequence[tuple[str, str]] = (),
) -> list[P.Split]:
    """Splits of every capture file, planned in the driver when it sees the files, else on the executors.

    The consecutive files of a capture set (kproto/analyze/spark/capture_sets.py) make one split;
    ``capture_sets`` False leaves each file alone but for the sets ``named_sets`` names.
    """
    if not inputs.files:
        return []
    files = inputs.files
    splits: list[P.Split] = []
    names: dict[str, str] = {}  # the capture names of files not named by their path
    if (len(files) > 1 and capture_sets) or named_sets:
        sets = CS.detect_sets(file_heads(spark, files), automatic=capture_sets, named=named_sets)
        sizes = dict(files)
        for found in sets:
            if len(found.files) > 1:
                splits.append(
                    P.plan_set(
                        P.shown_path(found.name),
                        [(h.path, sizes[h.path]) for h in found.files],
                        found.files[0].format,
                        split_bytes=split_bytes,
                    )
                )
            elif found.name != found.files[0].path:  # one file, named with --capture-set
                names[found.files[0].path] = found.name
        in_sets = {h.path for found in sets if len(found.files) > 1 for h in found.files}
        files = [(path, length) for path, length in files if path not in in_sets]
    splits += plan_files(spark, files, names, split_bytes=split_bytes, overlap_bytes=overlap_bytes)
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
    return spark.createDataFrame(
        spark.sparkContext.parallelize(files, max(1, min(len(files), 64))), "path string, length long"
    )


def file_heads(spark, files: list[tuple[str, int]]) -> list[CS.FileHead]:
    """The heads of the capture files (set detection), read in the driver or by one job on the executors."""
    if _runs_locally(spark, files):
        return [P.file_head(path, length) for path, length in files]
    frame = _files_frame(spark, files)

    def heads(batches):
        for batch in batches:
            found = [json.dumps(dataclasses.asdict(P.file_head(r["path"], r["length"]))) for r in batch.to_pylist()]
            yield pa.RecordBatch.from_pydict({"head": found})

    return [CS.FileHead(**json.loads(row["head"])) for row in frame.mapInArrow(heads, "head string").collect()]


def plan_files(
    spark, files: list[tuple[str, int]], names: dict[str, str], *, split_bytes: int, overlap_bytes: int
) -> list[P.Split]:
    """Splits of capture files read on their own, ``capture`` named by ``names`` or by their path."""
    from pyspark.sql.pandas.types import from_arrow_schema

    if not files:
        return []
    if _runs_locally(spark, files):
        return [
            s
            for path, length in files
            for s in P.plan_file(
                path,
                length,
                capture=names.get(path) or P.shown_path(path),
                split_bytes=split_bytes,
                overlap=overlap_bytes,
            )
        ]
    frame = _files_frame(spark, files)

    def plan(batches):
        for batch in batches:
            for row in batch.to_pylist():
                capture = names.get(row["path"]) or P.shown_path(row["path"])
                yield P.splits_to_batch(
                    P.plan_file(
                        row["path"], row["length"], capture=capture, split_bytes=split_bytes, overlap=overlap_bytes
                    )
                )

    rows = frame.mapInArrow(plan, from_arrow_schema(P.SPLIT_SCHEMA)).collect()
    return [P.Split(**row.asDict()) for row in rows]

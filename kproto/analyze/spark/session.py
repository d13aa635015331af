"""The SparkSession of ``kproto analyze``: the active one, or an embedded local one tuned for it.

A local session's Python workers get allocator settings that keep freed memory for the next
task (:data:`WORKER_MEMORY_ENV`), its JVM a heap sized to the input (:func:`local_driver_memory`)
and, for small inputs, the quick JIT tier only. pyspark is imported inside the functions.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import kproto
from kproto.analyze.spark import jvm_archive, jvm_noise

#: The directory that holds the kproto package, put on local workers' PYTHONPATH so that they
#: import this kproto (a checkout run without installing it too).
PACKAGE_PARENT = Path(kproto.__file__).resolve().parent.parent


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


def spark_session(
    master: str | None = None,
    *,
    app_name: str = "kproto analyze",
    conf: dict[str, str] | None = None,
    input_bytes: int | None = None,
    record_jvm_archive: bool = False,
):
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
    configured = (
        "spark.master" in dict(SparkConf().getAll())
        if os.environ.get("SPARK_SUBMIT_OPTS") or os.environ.get("SPARK_ENV_LOADED")
        else False
    )
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
        package_root = str(PACKAGE_PARENT)
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

"""The Python worker daemon of local sessions: pyspark's daemon, started with kproto already imported.

pyspark starts one daemon per session, which forks a Python worker for each task slot;
each worker imports pyspark.worker, numpy, pyarrow, pandas (through pyarrow's pandas
shim) and kproto after the fork, then builds the message plans of its first decode:
1-3 s per worker, paid on the first task of every session (docs/analyze.md, "Where the
time goes"). This daemon (``spark.python.daemon.module``, set by
:func:`kproto.analyze.spark.spark_session` for local masters) does that work once, before it
forks, so every worker starts with it done and shares its memory with the daemon.

pyspark imports in the worker on purpose: a process must not fork while other threads
run. Importing numpy starts OpenBLAS's threads and importing pyarrow starts jemalloc's
background thread; :func:`prepare` turns both off first (``OPENBLAS_NUM_THREADS=1``,
``JE_ARROW_MALLOC_CONF=background_thread:false``, unless already set: kproto's work
uses neither BLAS nor jemalloc, pyarrow allocates with mimalloc) and runs nothing that
starts a thread pool. :func:`prepare` returns the threads the process has then, and
:func:`main` says on stderr when there is more than one.
"""

from __future__ import annotations

import importlib
import os
import sys

#: Modules every kproto task imports (the jobs' functions are pickled with references to them).
PRELOADED = (
    "pyspark.worker",
    "numpy",
    "pandas",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.parquet",
    "pyarrow.fs",
    "pyarrow.dataset",
    "pyarrow.acero",
    "kproto.arrow.frames",
    "kproto.arrow.capture",
    "kproto.records",
    "kproto.versions",
    "kproto.analyze.spark.jobs",
)

#: Environment that keeps the preloaded modules from starting threads.
THREAD_FREE_ENV = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}


def thread_count() -> int | None:
    """This process's threads (Linux's /proc; None where it cannot be read)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def prepare() -> int | None:
    """Import :data:`PRELOADED` and build the plans a first decode builds; the thread count after."""
    for key, value in THREAD_FREE_ENV.items():
        os.environ.setdefault(key, value)
    for name in PRELOADED:
        importlib.import_module(name)
    from kproto.arrow.topic_names import topic_naming_versions

    topic_naming_versions()  # hundreds of message plans, built once per process and cached
    return thread_count()


def main() -> None:
    threads = prepare()
    if threads is not None and threads > 1:
        print(
            f"kproto.analyze.spark.daemon: {threads} threads after the imports (one expected); workers are forked "
            f"anyway (check {', '.join(THREAD_FREE_ENV)})",
            file=sys.stderr,
        )
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()

"""Kafka captures to tables and a report, with Spark (``kproto analyze``).

>>> from kproto.analyze.spark import analyze
>>> result = analyze(["samples/sample.pcap"], "out/")     # local Spark unless one is active
>>> result.summary[-1]["accounted"]
True

Reads pcap, pcapng and size-prefixed frame dumps (paths, globs, directories,
any URI Spark and pyarrow can open) and Parquet tables of frames; writes
``frames``, ``exchanges``, ``connections``, ``clients``, ``topics`` and
``summary`` as Parquet, and ``report.html`` / ``.json`` / ``.md``.

pyspark is imported only when a function needs it. The per-file work lives
in :mod:`kproto.analyze.spark.worker` (pyarrow only) and runs inside ``mapInArrow``.
See docs/analyze.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kproto.analyze.spark.jobs import TABLES, Options, Result, analyze, spark_session

__all__ = ["TABLES", "Options", "Result", "analyze", "spark_session"]


def __getattr__(name: str) -> Any:
    # Imported on first use: the worker daemon (kproto.analyze.spark.daemon) must set its environment
    # before pyarrow and numpy are imported, and importing this package must not import them.
    if name in __all__:
        from kproto.analyze.spark import jobs

        return getattr(jobs, name)
    raise AttributeError(f"module 'kproto.analyze.spark' has no attribute {name!r}")

"""The Python worker daemon of local sessions (kproto/analyze/spark/daemon.py).

Its workers fork with kproto and pyarrow imported, from a process that must have no
other thread when it forks; a local session made by ``spark_session`` uses it, and the
tables it writes are the tables pyspark's own daemon gives (the test session of
tests/analyze/test_spark.py uses pyspark's).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (scripts/setup.sh --spark)")

import pyarrow.parquet as pq  # noqa: E402

from kproto.analyze.spark import TABLES, Options, analyze  # noqa: E402
from kproto.analyze.spark.session import WORKER_MEMORY_ENV  # noqa: E402
from tests.analyze import test_spark  # noqa: E402

spark = test_spark.spark  # the one Spark session of the test run (tests/analyze/test_spark.py)
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "sample.pcap"


def _python(code: str, env: dict[str, str] | None = None) -> str:
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_importing_the_package_imports_neither_pyarrow_nor_numpy():
    # The daemon sets its thread-free environment first, so the package must not import them.
    out = _python("""
        import sys
        import kproto.analyze.spark
        print(sorted(m for m in ("pyarrow", "numpy", "pandas") if m in sys.modules))
    """)
    assert out.strip() == "[]"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads counted from Linux's /proc")
def test_the_daemon_forks_from_one_thread_with_kproto_imported():
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "JE_ARROW_MALLOC_CONF")}
    out = _python(
        """
        import sys
        from kproto.analyze.spark import daemon
        threads = daemon.prepare()
        print(threads, all(name in sys.modules for name in daemon.PRELOADED))
    """,
        env=env,
    )
    assert out.split() == ["1", "True"]


def _rows(out: Path, name: str) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in pq.read_table(out / name).to_pylist())


@pytest.mark.spark
def test_a_local_session_s_workers_come_from_the_daemon_and_give_the_same_tables(spark, tmp_path):
    ours = tmp_path / "daemon"
    # The workers' allocator settings, unless the user's environment has its own.
    env = {k: v for k, v in os.environ.items() if k not in WORKER_MEMORY_ENV}
    env["MALLOC_TOP_PAD_"] = "1234567"
    out = _python(
        f"""
        import json, os, sys
        from kproto.analyze.spark import Options, analyze, spark_session
        spark = spark_session("local[1]", conf={{"spark.ui.showConsoleProgress": "false"}})

        def main_module(batches):
            import pyarrow as pa
            for _ in batches:
                loaded = "kproto.analyze.spark.jobs" in sys.modules
                settings = {{k: v for k, v in os.environ.items() if k.startswith(("MALLOC_", "MIMALLOC_", "GLIBC_TUNABLES"))}}
                yield pa.RecordBatch.from_pydict({{"name": [sys.modules["__main__"].__spec__.name],
                                                   "kproto_loaded": [loaded], "env": [json.dumps(settings)]}})

        row = spark.range(1, numPartitions=1).mapInArrow(main_module,
                                                         "name string, kproto_loaded boolean, env string").first()
        print(row["env"])
        print("mine", json.dumps({{k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}}))
        print(row["name"], row["kproto_loaded"])
        analyze([{str(SAMPLE)!r}], {str(ours)!r}, spark=spark, options=Options(), progress=False)
        spark.stop()
    """,
        env=env,
    )
    lines = out.splitlines()
    assert lines[-1].split() == ["kproto.analyze.spark.daemon", "True"]
    assert json.loads(lines[-3]) == {**WORKER_MEMORY_ENV, "MALLOC_TOP_PAD_": "1234567", "MIMALLOC_LARGE_OS_PAGES": "1"}
    assert json.loads(lines[-2].split(" ", 1)[1]) == {"MALLOC_TOP_PAD_": "1234567"}  # not the driver's
    plain = tmp_path / "plain"
    analyze([str(SAMPLE)], str(plain), spark=spark, options=Options(), progress=False)
    for name in TABLES:
        assert _rows(ours, name) == _rows(plain, name), name
    assert _undated(ours / "report.md") == _undated(plain / "report.md")


def _undated(report: Path) -> str:
    """The report without the time it was written at."""
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", "<time>", report.read_text())

"""kproto analyze on a Spark standalone cluster gives the tables local mode gives, exactly.

A master and two workers (1 core each) started from pyspark's own spark-class on
127.0.0.1 (tools/spark_cluster.py); executors whose Python is a virtualenv holding a
wheel built from this checkout (docs/analyze.md, "Local mode, clusters and
spark-submit", 2a), never the source tree. The same inputs - a small pcap, a pcap cut
into ranges (the shuffle by connection), a Parquet table of frames, a pcap with a bad
record, a file that is no capture and a capture set of three rotated files - are
analysed with ``--master local[2]`` and with ``--master spark://...``; every table's
sorted rows and the report's facts must match.

Run with ``make test-cluster`` (marked ``cluster`` and ``slow``: ``make test`` skips it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (scripts/setup.sh --spark)")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime (scripts/install-java.sh installs one)", allow_module_level=True)

import pyarrow.parquet as pq  # noqa: E402

from kproto.arrow.capture import read_capture  # noqa: E402
from tests import spark_captures as sc  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import spark_cluster  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TABLES = ("frames", "exchanges", "connections", "clients", "topics", "summary", "errors")
JOB_TIMEOUT = 900


@pytest.fixture(scope="module")
def executor_python() -> Path:
    return spark_cluster.executor_env()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = spark_cluster.Cluster(tmp_path_factory.mktemp("cluster"))
    cluster.start(workers=2, cores=1, memory="2g")
    yield cluster
    cluster.stop(remove=False)  # pytest's tmp dir keeps the logs of a failed run


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[str]:
    data = tmp_path_factory.mktemp("captures")
    good = sc.small_capture()
    (data / "a-small.pcap").write_bytes(good)
    (data / "b-big.pcap").write_bytes(sc.big_capture(connections=8, exchanges=900))  # ~2.7 MB: 3 ranges
    (data / "c-bad.pcap").write_bytes(good + struct.pack("<IIII", 1_700_000_100, 0, 0xFFFFFFFF, 0xFFFFFFFF))
    (data / "d-notes.pcap").write_text("These are my notes, not a capture.\n" * 20)
    # A capture set (tcpdump -C names): the driver sees these files, so it reads their heads itself.
    from tests import capture_pieces

    capture_pieces.write_pieces(
        data,
        capture_pieces.tcpdump_size_names("e-rotated.pcap", 3),
        capture_pieces.cut_pcap(sc.big_capture(connections=2, exchanges=20), 3),
    )
    frames, _connections, _counters = read_capture(str(data / "a-small.pcap"), name="from-parquet")
    tables = tmp_path_factory.mktemp("tables")
    pq.write_table(frames, tables / "frames.parquet")
    return [str(data), str(tables / "frames.parquet")]


def analyze(inputs: list[str], out: Path, master: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "kproto.analyze.cli",
        "analyze",
        *inputs,
        "--out",
        str(out),
        "--master",
        master,
        "--split-mb",
        "1",
        "--quiet",
        "--conf",
        "spark.executor.memory=1g",
        "--conf",
        "spark.sql.shuffle.partitions=4",
        # Jobs wait for both executors (up to 30 s), so the tasks spread over both workers.
        "--conf",
        "spark.scheduler.minRegisteredResourcesRatio=1.0",
    ]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=JOB_TIMEOUT, cwd=out.parent)


def checksums(out: Path) -> dict[str, tuple[int, str]]:
    """Per table: rows, and a digest of its schema and sorted rows (the order of parts and rows is free)."""
    found = {}
    for name in TABLES:
        table = pq.read_table(out / name)
        rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())
        digest = hashlib.sha256(str(table.schema).encode())
        for row in rows:
            digest.update(row.encode() + b"\n")
        found[name] = (table.num_rows, digest.hexdigest())
    facts = json.loads((out / "report.json").read_text())
    facts.pop("generated_at")
    found["report.json"] = (1, hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest())
    return found


@pytest.fixture(scope="module")
def local_run(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_HOME")}
    return analyze(inputs, out, "local[2]", env), out


@pytest.fixture(scope="module")
def cluster_run(inputs, cluster, executor_python, tmp_path_factory):
    out = tmp_path_factory.mktemp("on-cluster") / "out"
    # As docs/analyze.md tells users: the executors' Python is the environment holding the wheel. The driver
    # (this checkout's kproto) adds nothing to the executors' PYTHONPATH for a non-local master.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    env.update(PYSPARK_PYTHON=str(executor_python), SPARK_LOCAL_IP="127.0.0.1")
    return analyze(inputs, out, cluster.url, env), out


def test_the_executors_get_kproto_from_the_wheel_not_the_checkout(executor_python):
    root = Path(__file__).resolve().parents[2]
    probe = subprocess.run(
        [str(executor_python), "-c", "import kproto; print(kproto.__file__, kproto.extension_loaded())"],
        capture_output=True,
        text=True,
        cwd="/",
        env=spark_cluster.daemon_environment(),
        check=True,
    )
    where, extension = probe.stdout.split()
    assert Path(where).is_relative_to(executor_python.parent.parent) and not Path(where).is_relative_to(root / "kproto")
    assert extension == "True"
    assert "PYTHONPATH" not in spark_cluster.daemon_environment()


def test_the_cluster_runs_the_job_on_its_workers(cluster, cluster_run):
    run, _out = cluster_run
    assert run.returncode == 3, run.stderr[-4000:]  # the bad inputs: tables written, status 3
    status = cluster.master_status()
    assert status is not None and status["aliveworkers"] == 2 and status["cores"] == 2
    finished = status["completedapps"]
    assert [app["name"] for app in finished] == ["kproto analyze"]
    # Executors ran on both workers: each work dir has the application's executor directory.
    apps = [list((cluster.directory / f"work-{i}").glob("app-*/*/stderr")) for i in range(2)]
    assert all(apps), apps


def test_tables_on_the_cluster_equal_local_mode(local_run, cluster_run):
    local, local_out = local_run
    remote, remote_out = cluster_run
    assert local.returncode == 3, local.stderr[-4000:]
    assert remote.returncode == 3, remote.stderr[-4000:]
    expected = checksums(local_out)
    assert expected["frames"][0] == 2 * 8 * 900 + 3 * 10 + 2 * 2 * 20
    # two input errors; the rest of the table are the stream_loss rows of the connections they cut
    errors = pq.read_table(local_out / "errors").to_pylist()
    assert len([e for e in errors if e["category"] != "stream_loss"]) == 2
    summary = {os.path.basename(r["capture"]): r for r in pq.read_table(local_out / "summary").to_pylist()}
    assert summary["b-big.pcap"]["splits"] == 3 and summary["*"]["accounted"]
    rotated = summary["e-rotated.pcap*"]
    assert (rotated["files"], rotated["connections"], rotated["exchanges_paired"]) == (3, 2, 40)
    assert checksums(remote_out) == expected
    # The console names the same bad inputs in both modes.
    assert [line for line in remote.stderr.splitlines() if "byte offset" in line] == [
        line for line in local.stderr.splitlines() if "byte offset" in line
    ]


def test_stopping_leaves_no_process(tmp_path):
    """The cluster tool's stop ends every process group it started, executors included."""
    cluster = spark_cluster.Cluster(tmp_path / "c")
    cluster.state = {"processes": []}
    cluster.directory.mkdir()
    (cluster.directory / "logs").mkdir()
    # A stand-in daemon in its own session with children of its own, as a worker has executors: all must go.
    sleeper = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300"], start_new_session=True)
    cluster.state["processes"].append({"name": "stand-in", "pid": sleeper.pid, "log": str(tmp_path / "none")})
    cluster._children[sleeper.pid] = sleeper
    assert "stand-in" in cluster.alive()
    cluster.stop()
    assert cluster.alive() == [] and not cluster.directory.exists()
    with pytest.raises(ProcessLookupError):
        os.killpg(sleeper.pid, 0)

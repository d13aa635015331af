"""``kproto analyze DIR --follow`` on a local Spark: the followed tables equal a plain analysis of the
same files; new files are added within two trigger intervals; a restart (or a crash before a
commit) counts nothing twice and reads no finished file again; open files wait.

Shares the Spark session of tests/analyze/test_spark.py (imported fixture).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (scripts/setup.sh --spark)")

import pyarrow.parquet as pq  # noqa: E402

from kproto.analyze.spark import Options, analyze  # noqa: E402
from kproto.analyze.spark import follow as F  # noqa: E402
from tests import spark_captures as sc  # noqa: E402
from tests.analyze import test_spark  # noqa: E402

pytestmark = pytest.mark.spark

spark = test_spark.spark  # the one Spark session of the test run (tests/analyze/test_spark.py)

TABLES = ("frames", "exchanges", "connections", "clients", "topics", "summary", "errors")
OPTIONS = Options(split_bytes=16_000, overlap_bytes=8_000)  # the big capture is cut into ranges


def _write(path, data: bytes, age: float = 3600) -> None:
    """A capture file, last modified ``age`` seconds ago (0: now, still settling)."""
    path.write_bytes(data)
    if age:
        then = time.time() - age
        os.utime(path, (then, then))


def _rows(out, name) -> list[str]:
    """A table's rows in a canonical order (the part files' order is not the rows' order)."""
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in pq.read_table(out / name).to_pylist())


def _summary(out) -> dict:
    return {r["capture"]: r for r in pq.read_table(out / "summary").to_pylist()}


def _state(out) -> dict:
    return json.loads((out / "_follow" / "state.json").read_text())


@pytest.fixture(scope="module")
def captures():
    """Five inputs: a small pcap, one cut into ranges, two whose topic IDs name each other, a truncated one."""
    ids_a, ids_b = sc.topic_id_captures()
    small = sc.small_capture()
    return {
        "a-small.pcap": small,
        "b-big.pcap": sc.big_capture(connections=3, exchanges=20),
        "c-ids.pcap": ids_a,
        "d-ids.pcap": ids_b,
        "e-truncated.pcap": small[:-30],
    }


@pytest.fixture(scope="module")
def plain(spark, captures, tmp_path_factory):
    """A plain ``kproto analyze DIR`` of every capture."""
    data = tmp_path_factory.mktemp("plain-in")
    for name, content in captures.items():
        _write(data / name, content)
    out = tmp_path_factory.mktemp("plain-out")
    analyze([str(data)], str(out), spark=spark, options=OPTIONS, progress=False)
    return data, out


def _same_tables(followed, plain_out, data, plain_data):
    for name in TABLES:
        expected = sorted(r.replace(str(plain_data), str(data)) for r in _rows(plain_out, name))
        assert _rows(followed, name) == expected, name


def test_followed_in_two_runs_equals_a_plain_analysis(spark, captures, plain, tmp_path, monkeypatch):
    plain_data, plain_out = plain
    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    read = []
    process_files = F.process_files
    monkeypatch.setattr(
        F, "process_files", lambda s, files, *a: read.append([f.path for f in files]) or process_files(s, files, *a)
    )
    names = sorted(captures)
    for name in names[:3]:
        _write(data / name, captures[name])
    first = F.follow([str(data)], out, spark=spark, options=OPTIONS, follow_options=F.FollowOptions(once=True))
    assert {first.summary[i]["capture"] for i in range(3)} == {str(data / n) for n in names[:3]}
    for name in names[3:]:
        _write(data / name, captures[name])
    # A new run resumes from the checkpoint: only the two new files are read.
    result = F.follow([str(data)], out, spark=spark, options=OPTIONS, follow_options=F.FollowOptions(once=True))
    assert read == [[str(data / n) for n in names[:3]], [str(data / n) for n in names[3:]]]
    state = _state(out)
    assert state["next_batch"] == 2
    assert {os.path.basename(p): f["batch"] for p, f in state["files"].items()} == {
        n: 0 if n in names[:3] else 1 for n in names
    }
    _same_tables(out, plain_out, data, plain_data)
    assert result.errors and result.errors[0]["capture"] == str(data / "e-truncated.pcap")
    assert (out / "report.html").exists() and result.facts is not None
    # A third run finds nothing new and reads nothing.
    F.follow([str(data)], out, spark=spark, options=OPTIONS, follow_options=F.FollowOptions(once=True))
    assert len(read) == 2 and _state(out)["next_batch"] == 2
    _same_tables(out, plain_out, data, plain_data)


def test_a_stop_between_the_data_and_the_commit_is_replayed_once(spark, captures, plain, tmp_path, monkeypatch):
    plain_data, plain_out = plain
    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    for name, content in captures.items():
        _write(data / name, content)
    _write(data / "x-gone.pcap", captures["a-small.pcap"])  # deleted before the restart

    def crash(*_args):
        raise RuntimeError("stopped before the commit")

    monkeypatch.setattr(F.Checkpoint, "commit", crash)
    with pytest.raises(RuntimeError, match="before the commit"):
        F.follow([str(data)], out, spark=spark, options=OPTIONS, follow_options=F.FollowOptions(once=True))
    assert any((out / "frames").glob("part-b000000-*"))  # the data was written, not committed
    monkeypatch.undo()
    (data / "x-gone.pcap").unlink()  # its parts must go: the batch that wrote them was not committed
    F.follow([str(data)], out, spark=spark, options=OPTIONS, follow_options=F.FollowOptions(once=True))
    assert _state(out)["next_batch"] == 1
    _same_tables(out, plain_out, data, plain_data)


def test_open_files_wait_and_files_changed_after_reading_are_reported(spark, captures, tmp_path):
    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    _write(data / "closed.pcap", captures["a-small.pcap"])
    _write(data / "open.pcap", captures["a-small.pcap"], age=0)
    once = F.FollowOptions(once=True, settle=600)
    F.follow([str(data)], out, spark=spark, options=OPTIONS, follow_options=once)
    assert set(_summary(out)) == {str(data / "closed.pcap"), "*"}
    # Closed now (not modified for the settle time); and the first file grew after it was read.
    _write(data / "open.pcap", captures["a-small.pcap"])
    with open(data / "closed.pcap", "ab") as stream:
        stream.write(b"\0" * 100)
    result = F.follow([str(data)], out, spark=spark, options=OPTIONS, follow_options=once)
    summary = _summary(out)
    assert summary[str(data / "open.pcap")]["frames"] == 10
    assert summary["*"]["frames"] == 20 and summary["*"]["accounted"]
    assert [(e["capture"], e["category"], e["offset"], e["unread_bytes"]) for e in result.errors] == [
        (str(data / "closed.pcap"), "changed_after_read", len(captures["a-small.pcap"]), 100)
    ]
    assert summary[str(data / "closed.pcap")]["errors"] == 1


def test_a_file_deleted_before_its_batch_reads_it_gets_an_errors_row(spark, captures, tmp_path, monkeypatch):
    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    _write(data / "here.pcap", captures["a-small.pcap"])
    listed = F.scan

    def listing_then_deleted(paths, settle):
        closed, still_open = listed(paths, settle)
        return closed + [F.SeenFile(str(data / "gone.pcap"), 500, time.time_ns())], still_open

    monkeypatch.setattr(F, "scan", listing_then_deleted)
    result = F.follow([str(data)], out, spark=spark, options=OPTIONS, follow_options=F.FollowOptions(once=True))
    assert [(e["capture"], e["category"], e["unread_bytes"]) for e in result.errors] == [
        (str(data / "gone.pcap"), "read_failed", 500)
    ]
    summary = _summary(out)
    assert summary[str(data / "here.pcap")]["frames"] == 10 and summary["*"]["accounted"]


def test_a_new_file_is_added_within_two_trigger_intervals(spark, captures, tmp_path):
    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    _write(data / "first.pcap", captures["a-small.pcap"])
    trigger = 2.0
    stop = threading.Event()
    arrived = {}

    def add_a_file_after_the_first_batch():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not stop.is_set():
            if (out / "_follow" / "state.json").exists() and _state(out)["next_batch"] == 1:
                _write(data / "second.pcap", captures["b-big.pcap"], age=0)
                arrived["mtime"] = os.stat(data / "second.pcap").st_mtime
                return
            time.sleep(0.1)

    writer = threading.Thread(target=add_a_file_after_the_first_batch)
    writer.start()
    timeout = threading.Timer(180, stop.set)  # a bound, should the second batch never come
    timeout.start()
    try:
        F.follow(
            [str(data)],
            out,
            spark=spark,
            options=OPTIONS,
            stop=stop,
            follow_options=F.FollowOptions(trigger=trigger, settle=1.0, max_batches=2, report_interval=0),
        )
    finally:
        stop.set()
        timeout.cancel()
        writer.join()
    summary = _summary(out)
    assert summary[str(data / "second.pcap")]["frames"] == 120
    second = _state(out)["files"][str(data / "second.pcap")]
    assert second["batch"] == 1
    # Taken at the first listing after it settled; its frames committed within two trigger intervals
    # of its last write (on a loaded 2-core machine the batch itself takes a few seconds: printed).
    taken_after = second["taken_at"] - arrived["mtime"]
    committed_after = second["committed_at"] - arrived["mtime"]
    print(
        f"new file taken {taken_after:.2f} s and committed {committed_after:.2f} s after its last write "
        f"(trigger {trigger} s, settle 1 s)"
    )
    assert taken_after <= 2 * trigger
    assert committed_after <= 2 * trigger + 10


def test_sigterm_stops_after_the_current_batch(spark, captures, tmp_path):
    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    _write(data / "first.pcap", captures["a-small.pcap"])
    before = signal.getsignal(signal.SIGTERM)

    def terminate_after_the_first_commit():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (out / "_follow" / "state.json").exists():
                break
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_after_the_first_commit)
    killer.start()
    result = F.follow(
        [str(data)],
        out,
        spark=spark,
        options=OPTIONS,
        follow_options=F.FollowOptions(trigger=0.5, settle=0.1, report_interval=3600),
    )
    killer.join()
    assert signal.getsignal(signal.SIGTERM) is before
    assert _state(out)["next_batch"] == 1
    assert result.facts is not None and (out / "report.json").exists()  # the report is written at exit
    assert next(r for r in result.summary if r["capture"] == "*")["frames"] == 10


def test_an_empty_directory_gives_empty_tables_and_a_report(spark, tmp_path):
    (tmp_path / "in").mkdir()
    result = F.follow(
        [str(tmp_path / "in")],
        tmp_path / "out",
        spark=spark,
        options=OPTIONS,
        follow_options=F.FollowOptions(once=True),
    )
    assert [r["capture"] for r in result.summary] == ["*"] and result.summary[0]["frames"] == 0
    assert all(pq.read_table(tmp_path / "out" / name).num_rows == 0 for name in TABLES if name != "summary")
    assert (tmp_path / "out" / "report.html").exists()


def test_the_command_line_follows_once(spark, captures, tmp_path, capsys):
    from kproto.analyze import cli

    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    _write(data / "first.pcap", captures["a-small.pcap"])
    args = ["analyze", str(data), "--out", str(out), "--once", "--settle", "5", "--split-mb", "1"]
    assert cli.main(args) == 0
    assert "10 frames in 2 connections" in capsys.readouterr().out
    assert _state(out)["next_batch"] == 1
    # The same checkpoint with other options: a usage error, nothing read.
    assert cli.main(args[:-2] + ["--broker-port", "9094"]) == 2
    assert "other options" in capsys.readouterr().err

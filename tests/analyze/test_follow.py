"""The parts of ``kproto analyze --follow`` that need no Spark: which files are closed, the checkpoint."""

from __future__ import annotations

import json
import os
import time

import pytest

pytest.importorskip("pyarrow")

from kproto.analyze.spark import follow as F  # noqa: E402
from kproto.analyze.spark.options import Options  # noqa: E402
from kproto.arrow.capture import ERROR_CATEGORIES  # noqa: E402


def _write(path, data: bytes, age: float) -> None:
    path.write_bytes(data)
    then = time.time() - age
    os.utime(path, (then, then))


def test_a_file_is_closed_once_unmodified_for_the_settle_time(tmp_path):
    _write(tmp_path / "old.pcap", b"x" * 10, age=120)
    _write(tmp_path / "new.pcap", b"y" * 20, age=0)
    _write(tmp_path / ".hidden.pcap", b"z", age=120)
    _write(tmp_path / "_tmp.pcap", b"z", age=120)
    closed, still_open = F.scan([str(tmp_path)], settle=60)
    assert [(f.path, f.size) for f in closed] == [(str(tmp_path / "old.pcap"), 10)]
    assert [(f.path, f.size) for f in still_open] == [(str(tmp_path / "new.pcap"), 20)]
    # The same files a while later: the new one is closed too.
    closed, still_open = F.scan([str(tmp_path)], settle=60, now=time.time() + 61)
    assert [f.path for f in closed] == [str(tmp_path / "new.pcap"), str(tmp_path / "old.pcap")]
    assert still_open == []


def test_an_empty_or_missing_input_is_not_an_error_while_following(tmp_path):
    assert F.scan([str(tmp_path), str(tmp_path / "*.pcap"), str(tmp_path / "later")], settle=1) == ([], [])


def test_uncommitted_batches_are_discarded(tmp_path):
    out = tmp_path / "out"
    checkpoint = F.Checkpoint(str(tmp_path / "ck"), F.fingerprint(Options()))
    checkpoint.state["next_batch"] = 2
    for name in ("frames", "exchanges"):
        (out / name).mkdir(parents=True)
        for batch in (0, 1, 2, 3):
            (out / name / f"part-b{batch:06d}-abc-00000.parquet").write_bytes(b"")
        (out / name / "part-empty.parquet").write_bytes(b"")
    for batch in (1, 2):
        checkpoint.rows_path(batch).write_bytes(b"")
    os.makedirs(checkpoint.staging)
    checkpoint.discard_uncommitted(str(out))
    assert sorted(p.name for p in (out / "frames").iterdir()) == [
        "part-b000000-abc-00000.parquet",
        "part-b000001-abc-00000.parquet",
        "part-empty.parquet",
    ]
    assert [p.name for p in (tmp_path / "ck" / "rows").iterdir()] == ["batch-000001.parquet"]
    assert not os.path.exists(checkpoint.staging)


def test_a_checkpoint_resumes_only_with_the_same_options(tmp_path):
    checkpoint = F.Checkpoint(str(tmp_path), F.fingerprint(Options()))
    checkpoint.commit(0, [F.SeenFile("/x.pcap", 10, 5)], started=time.time())
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["next_batch"] == 1 and state["files"]["/x.pcap"]["size"] == 10
    assert F.Checkpoint(str(tmp_path), F.fingerprint(Options())).files["/x.pcap"]["batch"] == 0
    with pytest.raises(F.FollowSetupError, match="other options"):
        F.Checkpoint(str(tmp_path), F.fingerprint(Options(broker_ports=(9094,))))


def test_a_file_changed_after_it_was_read_gets_an_errors_row(tmp_path):
    checkpoint = F.Checkpoint(str(tmp_path), F.fingerprint(Options()))
    checkpoint.commit(0, [F.SeenFile("/a.pcap", 100, 5), F.SeenFile("/b.pcap", 50, 5)], started=time.time())
    assert not checkpoint.note_changes({"/a.pcap": F.SeenFile("/a.pcap", 100, 5)})
    assert checkpoint.change_errors() == []
    assert checkpoint.note_changes({"/a.pcap": F.SeenFile("/a.pcap", 160, 9)})
    assert not checkpoint.note_changes({"/a.pcap": F.SeenFile("/a.pcap", 160, 9)})  # noted once
    [row] = checkpoint.change_errors()
    assert (row["capture"], row["category"], row["offset"], row["unread_bytes"]) == (
        "/a.pcap",
        "changed_after_read",
        100,
        60,
    )
    assert "grew by 60 bytes" in row["reason"]
    assert row["category"] in ERROR_CATEGORIES


def test_follow_reads_local_paths_only(tmp_path):
    with pytest.raises(F.FollowSetupError, match="local paths"):
        F.follow(["hdfs:///captures"], str(tmp_path), spark=None)


def test_one_follower_per_checkpoint(tmp_path):
    checkpoint = F.Checkpoint(str(tmp_path), F.fingerprint(Options()))
    with checkpoint.locked():
        with pytest.raises(F.FollowSetupError, match="another follower"):
            with F.Checkpoint(str(tmp_path), F.fingerprint(Options())).locked():
                pass
    with checkpoint.locked():  # released when the first one stopped
        pass


def test_the_size_recorded_is_the_bytes_the_tasks_read():
    import pyarrow as pa

    rows = pa.Table.from_pylist(
        [
            {"kind": "capture", "capture": "/a.pcap", "info": json.dumps({"input_bytes": 700})},
            {"kind": "capture", "capture": "/a.pcap", "info": json.dumps({"input_bytes": 300})},  # a second range
            {"kind": "connection", "capture": "/a.pcap", "info": json.dumps({"input_bytes": 5})},
            {"kind": "capture", "capture": "/b.pcap", "info": json.dumps({"input_bytes": 0})},
        ]
    )
    assert F.bytes_read(rows) == {"/a.pcap": 1000, "/b.pcap": 0}


def test_a_new_checkpoint_refuses_output_it_did_not_write(tmp_path):
    (tmp_path / "out" / "frames").mkdir(parents=True)
    (tmp_path / "out" / "frames" / "part-empty.parquet").write_bytes(b"")
    (tmp_path / "out" / "frames" / "part-1a2b3c-00000.parquet").write_bytes(b"")  # a plain run's part
    with pytest.raises(F.FollowSetupError, match="did not write"):
        F.Checkpoint(str(tmp_path / "ck"), F.fingerprint(Options())).claim_output(str(tmp_path / "out"))
    assert not (tmp_path / "ck" / "state.json").exists()
    (tmp_path / "out" / "frames" / "part-1a2b3c-00000.parquet").unlink()
    F.Checkpoint(str(tmp_path / "ck"), F.fingerprint(Options())).claim_output(str(tmp_path / "out"))
    assert json.loads((tmp_path / "ck" / "state.json").read_text())["next_batch"] == 0
    # Resuming: its own parts (committed or not) are its business.
    (tmp_path / "out" / "frames" / "part-b000000-1a2b3c-00000.parquet").write_bytes(b"")
    F.Checkpoint(str(tmp_path / "ck"), F.fingerprint(Options())).claim_output(str(tmp_path / "out"))


def test_a_batch_failing_after_a_stop_ends_the_run_without_a_commit(tmp_path, monkeypatch):
    import threading

    _write(tmp_path / "in.pcap", b"x" * 10, age=120)
    stop = threading.Event()

    def interrupted(*_args):
        stop.set()  # Ctrl-C: the handler sets stop, and the workers' tasks fail
        raise RuntimeError("Python worker exited unexpectedly")

    monkeypatch.setattr(F, "process_files", interrupted)
    said = []
    result = F.follow(
        [str(tmp_path / "in.pcap")],
        tmp_path / "out",
        spark=None,
        stop=stop,
        options=Options(report=False),
        log=said.append,
    )
    assert result.summary == [r for r in result.summary if r["capture"] == "*"]
    state = json.loads((tmp_path / "out" / "_follow" / "state.json").read_text())
    assert state["next_batch"] == 0 and state["files"] == {}
    assert any("not committed" in line for line in said)
    # Without a stop, a failing batch is an error.
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        F.follow(
            [str(tmp_path / "in.pcap")],
            tmp_path / "out",
            spark=None,
            options=Options(report=False),
            follow_options=F.FollowOptions(once=True),
        )


def test_the_follow_options_on_the_command_line():
    import argparse

    from kproto.analyze import follow_options

    parser = argparse.ArgumentParser()
    follow_options.add_arguments(parser)
    args = parser.parse_args(["--max-batches", "0", "--trigger", "0.5", "--settle", "0"])
    assert follow_options.wanted(args) and (args.trigger, args.settle, args.report_interval) == (0.5, 0.0, 60.0)
    assert not follow_options.wanted(parser.parse_args([]))
    for wrong in (["--trigger", "0"], ["--settle", "-1"], ["--report-interval", "nan"]):
        with pytest.raises(SystemExit):
            parser.parse_args(wrong)

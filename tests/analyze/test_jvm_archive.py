"""The Spark JVM's class-data archive (kproto/analyze/spark/jvm_archive.py): which archive a
session maps or records, the switch that turns it off, and no half-written archive used."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from kproto.analyze.spark import jvm_archive  # noqa: E402


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KPROTO_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(jvm_archive.ENV_SWITCH, raising=False)
    if jvm_archive.archive_path() is None:
        pytest.skip("no java")
    return tmp_path


def test_without_an_archive_the_cli_records_one_and_a_library_session_does_not(cache):
    path = jvm_archive.archive_path()
    assert path.parent == cache and path.name.startswith("spark-") and path.suffix == ".jsa"
    assert jvm_archive.plan(record=False).action == "off"
    recording = jvm_archive.plan(record=True)
    assert recording.action == "record" and recording.recording.parent == cache
    assert recording.java_options() == f"-XX:ArchiveClassesAtExit={recording.recording} {jvm_archive.QUIET}"


def test_an_archive_in_place_is_mapped(cache):
    path = jvm_archive.archive_path()
    path.write_bytes(b"archive")
    for record in (False, True):
        chosen = jvm_archive.plan(record=record)
        assert chosen.action == "use"
        assert chosen.java_options() == f"-XX:SharedArchiveFile={path} {jvm_archive.QUIET}"


def test_the_switch_turns_it_off(cache, monkeypatch):
    jvm_archive.archive_path().write_bytes(b"archive")
    monkeypatch.setenv(jvm_archive.ENV_SWITCH, "off")
    chosen = jvm_archive.plan(record=True)
    assert chosen.action == "off" and chosen.java_options() == ""


def test_recordings_of_runs_that_did_not_finish_are_removed_never_used(cache):
    path = jvm_archive.archive_path()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = path.with_name(f"{path.name}.{int(ended.stdout)}.tmp")
    live = path.with_name(f"{path.name}.{__import__('os').getpid()}.tmp")
    dead.write_bytes(b"half")
    live.write_bytes(b"being written")
    assert jvm_archive.plan(record=True).action == "record"
    assert not dead.exists() and live.exists() and not path.exists()


def test_finish_leaves_a_session_that_was_not_recording_alone():
    class Session:
        _kproto_jvm_archive = jvm_archive.Plan("use", None)

        def stop(self):
            raise AssertionError("a session that maps an archive is not stopped by finish")

    assert jvm_archive.finish(Session()) is False
    assert jvm_archive.finish(object()) is False


def test_a_new_archive_replaces_the_ones_it_supersedes(cache):
    path = jvm_archive.archive_path()
    older = path.with_name(path.name.rsplit("-", 1)[0] + "-0123456789abcdef.jsa")
    other_spark = path.with_name("spark-0.0.0-0123456789abcdef.jsa")
    for old in (older, other_spark):
        old.write_bytes(b"old")
    path.write_bytes(b"new")
    jvm_archive._remove_superseded(path)
    assert path.exists() and not older.exists() and other_spark.exists()

"""``kproto analyze`` refuses what it cannot analyse before Spark starts (no JVM: well under a
second), with exit status 2 as ``--help`` says; the JVM's start-up banners are filtered out."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kproto.analyze.spark import jvm_noise

COMMAND = [sys.executable, "-m", "kproto.analyze.cli", "analyze"]


def refuse(tmp_path, *argv: str) -> str:
    out = str(tmp_path / "out") if "--out" not in argv else None
    result = subprocess.run(
        COMMAND + list(argv) + (["--out", out] if out else []),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=dict(os.environ, PYSPARK_SUBMIT_ARGS="--this-would-fail"),
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
    return result.stderr


def test_missing_input(tmp_path):
    assert refuse(tmp_path, "missing.pcap") == "kproto analyze: missing.pcap: no such file or directory\n"


def test_glob_without_match(tmp_path):
    assert "no file matches" in refuse(tmp_path, "caps/*.pcap")


def test_text_file_named_on_its_own(tmp_path):
    (tmp_path / "notes.txt").write_text("These are my notes, not a capture.\n")
    assert "notes.txt: not a capture (neither pcap, pcapng, size-prefixed frames nor Parquet" in refuse(
        tmp_path, "notes.txt"
    )


def test_empty_file(tmp_path):
    (tmp_path / "empty.pcap").write_bytes(b"")
    assert "empty.pcap: empty file (0 bytes)" in refuse(tmp_path, "empty.pcap")


@pytest.mark.parametrize("out,said", [("taken", "is an existing file"), ("taken/sub", "is inside a file")])
def test_out_is_a_file(tmp_path, out, said):
    (tmp_path / "taken").write_text("x")
    from tests.spark_captures import small_capture

    (tmp_path / "small.pcap").write_bytes(small_capture())
    assert said in refuse(tmp_path, "small.pcap", "--out", out)


def test_follow_is_not_a_subcommand():
    result = subprocess.run(
        [sys.executable, "-m", "kproto.analyze.cli", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "follow" not in result.stdout
    assert (
        subprocess.run(
            [sys.executable, "-m", "kproto.analyze.cli", "follow"], capture_output=True, timeout=60
        ).returncode
        == 2
    )


def test_banners_are_dropped_and_other_lines_kept():
    code = (
        "import subprocess, sys\n"
        "from kproto.analyze.spark import jvm_noise\n"
        "with jvm_noise.banners_dropped():\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stderr.write("
        '"WARNING: Using incubator modules: jdk.incubator.vector\\\\nreal trouble\\\\n'
        'Setting default log level to \\\\"WARN\\\\".\\\\n")\'])\n'
        "print('mine', file=sys.stderr, flush=True)\n"
        "child.wait()\n"
        "import time; time.sleep(0.5)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stderr.splitlines()) == ["mine", "real trouble"]


def test_banner_patterns():
    assert jvm_noise.is_banner(
        "26/11/27 11:26:58 WARN NativeCodeLoader: Unable to load native-hadoop library "
        "for your platform... using builtin-java classes where applicable\n"
    )
    assert jvm_noise.is_banner("Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties")
    assert not jvm_noise.is_banner("26/11/27 11:26:58 ERROR Executor: Exception in task 0.0")


@pytest.mark.parametrize("command", ["analyze", "dump", "decode", "versions"])
def test_help_ends_with_the_exit_statuses(command):
    result = subprocess.run(
        [sys.executable, "-m", "kproto.analyze.cli", command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    text = " ".join(result.stdout.split())
    assert "Exit status: 0 " in text and " 2 for usage errors" in text


def test_progress_lines_give_durations():
    import io
    from types import SimpleNamespace

    from kproto.analyze.spark.progress import Progress

    tracker = SimpleNamespace(getActiveStageIds=lambda: [])
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))
    stream = io.StringIO()
    with Progress(spark, stream=stream) as show:
        show.step("listing inputs")
        show.step("planning 1 capture file(s)")
        show.done()
    lines = stream.getvalue().splitlines()
    assert [line.rsplit(":", 1)[0] for line in lines[:2]] == [
        "kproto analyze: listing inputs",
        "kproto analyze: planning 1 capture file(s)",
    ]
    assert all(line.endswith(" s") for line in lines) and lines[2].startswith("kproto analyze: done in ")
    assert len(lines) == 3


# ---------------------------------------------------------------- a JVM out of memory (issue 35)
def py4j_error(java_text: str):
    """A Py4JJavaError as Spark raises it, its Java side's toString() being ``java_text``."""
    from py4j.protocol import Py4JJavaError, escape_new_line

    class Gateway:
        def send_command(self, command):
            return "ys" + escape_new_line(java_text)

    class JavaException:
        _target_id = "o81"
        _gateway_client = Gateway()

    return Py4JJavaError("An error occurred while calling o80.getResult.\n", JavaException())


DRIVER_HEAP = (
    "org.apache.spark.SparkException: Exception thrown in awaitResult: \n"
    "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:56)\n"
    "Caused by: java.lang.OutOfMemoryError: Java heap space\n"
    "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n"
)
LOCAL_TASK = (
    "org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage 1.0 failed 1 "
    "times, most recent failure: Lost task 3.0 in stage 1.0 (TID 4) (127.0.0.1 executor driver): "
    "java.lang.OutOfMemoryError: Java heap space\n\tat java.base/java.nio.HeapByteBuffer.<init>\n"
)
BROADCAST = (
    "org.apache.spark.SparkException: Not enough memory to build and broadcast the table to all worker "
    "nodes. As a workaround, you can either disable broadcast by setting "
    "spark.sql.autoBroadcastJoinThreshold to -1 or increase the spark driver memory\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.notEnoughMemoryToBuildAndBroadcastTableError\n"
)
CLUSTER_TASK = (
    "org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 2.0 failed 4 "
    "times, most recent failure: Lost task 0.3 in stage 2.0 (TID 9) (10.0.0.5 executor 1): "
    "java.lang.OutOfMemoryError: GC overhead limit exceeded\n"
)


@pytest.mark.parametrize(
    "java_text, said",
    [
        (
            DRIVER_HEAP,
            "the Spark driver's JVM ran out of memory (Java heap space); give it more: "
            "--conf spark.driver.memory=8g (now 1g)",
        ),
        (
            LOCAL_TASK,
            "the Spark driver's JVM ran out of memory (Java heap space); give it more: "
            "--conf spark.driver.memory=8g (now 1g)",
        ),
        (
            BROADCAST,
            "the Spark driver's JVM ran out of memory (Not enough memory to build and broadcast the table); "
            "give it more: --conf spark.driver.memory=8g (now 1g)",
        ),
        (
            CLUSTER_TASK,
            "an executor's JVM ran out of memory (GC overhead limit exceeded); give it more: "
            "--conf spark.executor.memory=8g (now 1g)",
        ),
    ],
)
def test_a_jvm_out_of_memory_is_named_with_its_setting(java_text, said):
    from kproto.analyze.cli_analyze import failure_message

    error = py4j_error(java_text)
    assert "o80.getResult" in str(error) and "memory" in str(error).lower()
    assert failure_message(error) == said
    # The setting the run gave is the one it names as the present value.
    assert failure_message(error, {"spark.driver.memory": "2g", "spark.executor.memory": "3g"}).endswith(
        "(now 2g)" if "driver" in said else "(now 3g)"
    )


def test_other_jvm_failures_keep_their_first_line():
    from kproto.analyze.cli_analyze import failure_message

    error = py4j_error("java.io.IOException: No space left on device\n\tat java.base/...")
    assert failure_message(error) == "An error occurred while calling o80.getResult."


def test_the_command_exits_1_with_the_one_line(tmp_path, monkeypatch, capsys):
    """What a user sees when the heap runs out: one line, exit status 1 (README's table), no Py4J text."""
    pytest.importorskip("pyspark")
    import kproto.analyze.spark
    from kproto.analyze import cli
    from kproto.analyze.spark import jvm_archive

    class Context:
        def setLogLevel(self, level):
            pass

    class Session:
        sparkContext = Context()

    def analyze(*args, **kwargs):
        raise py4j_error(DRIVER_HEAP)

    monkeypatch.setattr(kproto.analyze.spark, "spark_session", lambda *args, **kwargs: Session())
    monkeypatch.setattr(kproto.analyze.spark, "analyze", analyze)
    monkeypatch.setattr(jvm_archive, "finish", lambda spark: None)
    capture = tmp_path / "one.pcap"
    capture.write_bytes(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
    status = cli.main(["analyze", str(capture), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 1
    assert err == (
        "kproto analyze: failed: the Spark driver's JVM ran out of memory (Java heap space); "
        "give it more: --conf spark.driver.memory=8g (now 1g)\n"
    )

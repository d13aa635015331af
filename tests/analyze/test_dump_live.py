"""``kproto dump -`` and ``kproto dump FILE --follow`` print frames as they arrive.

A writer keeps the input open (a pipe, or a file that grows); each test checks
that a frame is printed *before* the writer closes or stops, which a reader of
whole 4 MiB blocks never does. Timeouts are generous and nothing is timed: the
test fails only when a frame does not appear while the input is still open.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys

from kproto.messages import MetadataRequest, MetadataResponse
from tests import spark_captures as sc
from tests.pcapwriter import Conversation, PcapWriter

COMMAND = [sys.executable, "-m", "kproto.analyze.cli", "dump", "--format", "jsonl"]
WAIT = 60.0  # seconds a line may take on a loaded machine: a hang fails, slowness does not


def capture_parts() -> tuple[bytes, bytes]:
    """A pcap cut in two: the file header, a handshake, a Metadata request and its response;
    then the next exchange. The response is there because a connection's frames are shown once
    the connection is proven to be Kafka (an answered request, kproto.arrow.capture's kinds); after
    that, each frame shows as it comes."""
    connection = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 9092))

    def exchange(correlation_id: int) -> list:
        return connection.data(
            "client", sc.request(MetadataRequest(topics=None), 12, correlation_id, "live"), [1000]
        ) + connection.data("server", sc.response(MetadataResponse(topics=[]), 12, correlation_id), [1000])

    first = connection.handshake() + exchange(1)
    second = exchange(2)
    writer = PcapWriter()
    for index, packet in enumerate(first + second):
        writer.add(sc.START_NS + index * 1000, packet.data)
    data = writer.getvalue()
    cut = len(data) - sum(16 + len(p.data) for p in second)
    return data[:cut], data[cut:]


def read_record(process: subprocess.Popen) -> dict | None:
    """The next JSON line of the process's stdout, parsed; None when none came in time."""
    return json.loads(read_line(process) or "null")


def read_line(process: subprocess.Popen) -> str:
    """The next line of the process's stdout, or "" when none came within WAIT seconds."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(WAIT):
            return ""
    return process.stdout.readline().decode()


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(WAIT)


def test_stdin_pipe_prints_frames_while_it_is_open():
    first, second = capture_parts()
    process = subprocess.Popen(
        COMMAND + ["-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
    )
    try:
        process.stdin.write(first)
        process.stdin.flush()
        record = read_record(process)
        assert record, "no frame printed while the pipe was open"
        assert record["header"]["correlation_id"] == 1 and record["header"]["client_id"] == "live"
        assert read_record(process)["direction"] == "response"
        process.stdin.write(second)
        process.stdin.flush()
        assert read_record(process)["header"]["correlation_id"] == 2
        assert read_record(process)["direction"] == "response"
        process.stdin.close()
        assert process.wait(WAIT) == 0
        assert process.stdout.read() == b""
    finally:
        stop(process)


def test_frame_dump_on_stdin_prints_frames_while_it_is_open():
    import kproto

    frames = [
        kproto.encode_request(
            MetadataRequest(topics=None), version=12, correlation_id=i, client_id="live", size_prefixed=True
        )
        for i in range(3)
    ]
    process = subprocess.Popen(
        COMMAND + ["-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
    )
    try:
        process.stdin.write(frames[0] + frames[1][:7])  # a frame, and the start of the next
        process.stdin.flush()
        assert json.loads(read_line(process) or "null")["header"]["correlation_id"] == 0
        process.stdin.write(frames[1][7:] + frames[2])
        process.stdin.close()
        assert [json.loads(read_line(process))["header"]["correlation_id"] for _ in range(2)] == [1, 2]
        assert process.wait(WAIT) == 0
    finally:
        stop(process)


def test_follow_prints_what_a_growing_file_gets(tmp_path):
    first, second = capture_parts()
    path = tmp_path / "growing.pcap"
    path.write_bytes(first[:10])  # not even the whole file header yet
    process = subprocess.Popen(
        COMMAND + [str(path), "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
    )
    try:
        with path.open("ab") as out:
            out.write(first[10:])
        assert read_record(process)["header"]["correlation_id"] == 1
        assert read_record(process)["direction"] == "response"
        with path.open("ab") as out:
            out.write(second)
        assert read_record(process)["header"]["correlation_id"] == 2
        assert process.poll() is None, "--follow ended at the end of the file"
        process.send_signal(signal.SIGINT)  # Ctrl-C ends following, quietly
        assert process.wait(WAIT) == 0
        assert process.stderr.read() == b""
    finally:
        stop(process)


def test_directory_and_empty_input(tmp_path):
    result = subprocess.run(COMMAND + [str(tmp_path)], capture_output=True, text=True, timeout=WAIT)
    assert result.returncode == 2 and "is a directory" in result.stderr
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    result = subprocess.run(COMMAND + [str(empty)], capture_output=True, text=True, timeout=WAIT)
    assert result.returncode == 3 and "empty input" in result.stderr and result.stdout == ""
    header_only = tmp_path / "quiet.pcap"
    header_only.write_bytes(PcapWriter().getvalue())
    result = subprocess.run(COMMAND + [str(header_only)], capture_output=True, text=True, timeout=WAIT)
    assert result.returncode == 0 and "no Kafka frames (pcap, 24 bytes)" in result.stderr
    assert os.path.getsize(header_only) == 24

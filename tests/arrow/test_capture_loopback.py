"""Real traffic: a tiny client and server on 127.0.0.1 exchange Kafka frames while
tcpdump or tshark captures the loopback interface; the frames read back from the
capture must be the frames the client and server sent.

A capture tool says "listening on" / "Capturing on" before it really captures
(tshark's dumpcap notably), so the test sends UDP probes to a port of its own
until one shows up in the capture file, and only then the traffic it checks; a
last probe after that traffic shows every packet before it reached the file.
The probes are UDP, so the capture reader counts them apart (``non_tcp``).

Each tool installed is tested (scripts/install-capture-tools.sh installs
tcpdump, or tshark where tcpdump cannot be had); a missing tool, or no right
to capture, skips with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from dataclasses import dataclass

import pytest

from kproto.arrow.capture import read_capture
from tests.pcapwriter import request_frame, response_frame

FRAMES = 12
TOOLS = ("tcpdump", "tshark")
PROBE_TIMEOUT = 30  # seconds: a starved tool on a loaded CI machine can take a while to start


def _capture_command(tool: str, path: str, capture_filter: str):
    executable = shutil.which(tool)
    if executable is None:
        return None
    if tool == "tcpdump":
        # --immediate-mode: some kernels never hand over a half-filled ring block on exit;
        # -U: each packet written as it comes, so the probes show in the file at once
        return [
            executable,
            "-i",
            "lo",
            "--immediate-mode",
            "-U",
            "-B",
            "16384",
            "-n",
            "-s",
            "0",
            "-w",
            path,
            capture_filter,
        ]
    return [executable, "-i", "lo", "-n", "-B", "16", "-w", path, "-f", capture_filter]


def _file_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


class _Probes:
    """UDP datagrams to a socket of the test's own (so no ICMP error comes back), each
    holding a random marker the test then looks for in the capture file."""

    def __init__(self) -> None:
        self.receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.receiver.bind(("127.0.0.1", 0))
        self.port = self.receiver.getsockname()[1]
        self.sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.marker = b"kproto-probe-" + os.urandom(8).hex().encode()

    def until_captured(self, label: bytes, path: str, capture: subprocess.Popen) -> bool:
        """Send probes until one is in the file; False if the tool exits or time runs out."""
        payload = self.marker + b"-" + label
        deadline = time.monotonic() + PROBE_TIMEOUT
        while time.monotonic() < deadline and capture.poll() is None:
            self.sender.sendto(payload, ("127.0.0.1", self.port))
            if payload in _file_bytes(path):
                return True
            time.sleep(0.05)
        return False

    def count(self, path: str) -> int:
        return _file_bytes(path).count(self.marker)

    def close(self) -> None:
        self.sender.close()
        self.receiver.close()


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return data


def _serve(listener: socket.socket, sent_responses: list, errors: list) -> None:
    try:
        conn, _ = listener.accept()
        conn.settimeout(5)
        with conn:
            for _ in range(FRAMES):
                size = struct.unpack(">i", _read_exact(conn, 4))[0]
                payload = _read_exact(conn, size)
                correlation_id = struct.unpack_from(">i", payload, 4)[0]
                response = response_frame(correlation_id, b"r" * (correlation_id * 97 % 3000))
                sent_responses.append(response)
                conn.sendall(response)
    except Exception as exc:  # reported by the test
        errors.append(exc)


@dataclass
class Capture:
    path: str
    port: int
    requests: list
    responses: list
    probes: int  # probe datagrams in the file


def _stop(capture: subprocess.Popen) -> None:
    capture.send_signal(signal.SIGINT)
    try:
        capture.wait(timeout=10)
    except subprocess.TimeoutExpired:
        capture.kill()
        capture.wait()


@pytest.fixture(scope="module", params=TOOLS)
def loopback_capture(request, tmp_path_factory) -> Capture:
    """Frames exchanged on 127.0.0.1 while the tool captures them; read back by each test."""
    tool = request.param
    directory = tmp_path_factory.mktemp(tool)
    path = str(directory / "loopback.pcap")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(5)
    port = listener.getsockname()[1]
    probes = _Probes()
    command = _capture_command(tool, path, f"tcp port {port} or udp port {probes.port}")
    if command is None:
        listener.close()
        probes.close()
        pytest.skip(f"{tool} is not installed (scripts/install-capture-tools.sh installs tcpdump, or tshark)")
    # the tool's messages go to a file: nothing to read while it runs, and no pipe to fill
    report_path = directory / "tool.stderr"
    with open(report_path, "w") as report:
        capture = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=report)
    try:
        if not probes.until_captured(b"start", path, capture):
            report = report_path.read_text(errors="replace").strip() or "no output"
            if capture.poll() is not None:
                pytest.skip(f"{tool} cannot capture on the loopback interface: {report}")
            pytest.fail(f"{tool} captured no probe in {PROBE_TIMEOUT} s: {report}")

        sent_requests, sent_responses, errors = [], [], []
        server = threading.Thread(target=_serve, args=(listener, sent_responses, errors), daemon=True)
        server.start()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            for i in range(FRAMES):
                request = request_frame(
                    18 if i == 0 else 3, 3 if i == 0 else 12, i + 1, b"q" * (i * 1531 % 70000)
                )  # some frames span many segments
                sent_requests.append(request)
                client.sendall(request)
                size = struct.unpack(">i", _read_exact(client, 4))[0]
                _read_exact(client, size)
        server.join(5)
        assert not errors, errors
        # The tool writes packets in order: once a probe sent after the traffic is in the
        # file, so is every packet of the traffic (a tool starved of CPU can be seconds behind).
        if not probes.until_captured(b"end", path, capture):
            pytest.fail(
                f"{tool} did not write the traffic within {PROBE_TIMEOUT} s: "
                f"{report_path.read_text(errors='replace').strip()}"
            )
    finally:
        _stop(capture)
        listener.close()
        probes.close()
    tool_report = report_path.read_text(errors="replace")
    # tcpdump: "N packets dropped by kernel"; tshark: "N packets dropped from lo" (only when N > 0)
    dropped = re.search(r"(\d+) packets? dropped", tool_report)
    if dropped and int(dropped.group(1)) > 0:
        pytest.skip(f"{tool} lost packets on this machine: {dropped.group(0)}")
    return Capture(path, port, sent_requests, sent_responses, probes.count(path))


def test_loopback_capture_matches_the_frames_sent(loopback_capture, impl):
    capture = loopback_capture
    frames, connections, counters = read_capture(capture.path, broker_ports=[capture.port], implementation=impl.name)
    rows = frames.to_pylist()
    assert [r["payload"] for r in rows if r["direction"] == 0] == [r[4:] for r in capture.requests]
    assert [r["payload"] for r in rows if r["direction"] == 1] == [r[4:] for r in capture.responses]
    assert all(r["ts_first_ns"] <= r["ts_last_ns"] for r in rows)
    [connection] = connections.to_pylist()
    assert connection["server_port"] == capture.port and connection["handshake_seen"]
    assert connection["request_gap_bytes"] == connection["response_gap_bytes"] == 0
    # every packet is the traffic or a probe (at least the start and end ones)
    assert capture.probes >= 2
    assert counters["non_tcp"] == capture.probes
    assert counters["tcp_packets"] == counters["packets"] - capture.probes

"""Capture reading speed: MB of pcap per second, per core.

Two captures are generated at benchmark time (nothing is shipped): Kafka
request/response traffic on 16 interleaved connections, cut into 64 KiB TCP
segments (the largest an IPv4 packet holds) and into 200-byte segments. Each is
read end to end through ``kproto.arrow.capture.CaptureReader`` (mmap, reassembly,
frames into Arrow batches). Peers in the same run: reading the file with plain
Python (the floor any reader pays) and, when installed, dpkt parsing the same
packets without reassembly.

Run:  .venv/bin/python -m pytest benchmarks/bench_capture.py --benchmark-only
(also ``python benchmarks/bench_capture.py`` for a quick table, and peak memory).
"""

from __future__ import annotations

import struct
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kproto import _impl
from kproto.arrow.capture import CaptureReader

SEGMENT_64K = 65495  # 65535 - 20 (IPv4) - 20 (TCP)
SEGMENT_SMALL = 200
CONNECTIONS = 16


def _frames(connection: int, target_bytes: int, frame_size: int):
    """(request stream, response stream) of one connection: produce-like requests, small responses."""
    requests, responses = [], []
    total = 0
    corr = 0
    while total < target_bytes:
        body = bytes([corr & 0xFF]) * (frame_size - 21)
        payload = struct.pack(">hhih", 0, 9, corr, 7) + b"bencher" + body
        requests.append(struct.pack(">i", len(payload)) + payload)
        responses.append(struct.pack(">ii", 40, corr) + b"\x00" * 36)
        total += len(requests[-1])
        corr += 1
    return b"".join(requests), b"".join(responses)


def write_capture(path: Path, total_bytes: int, segment: int, frame_size: int) -> int:
    """Write an Ethernet pcap of CONNECTIONS interleaved connections; returns its size."""
    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
    record = struct.Struct("<IIII")
    out = open(path, "wb", buffering=1 << 22)
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
    ts = [0]

    def packet(src, dst, sport, dport, seq, flags, payload=b""):
        ip_total = 40 + len(payload)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, ip_total, 0, 0x4000, 64, 6, 0, src, dst)
        tcp = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, 0, 0x50, flags, 65535, 0, 0)
        data = eth + ip + tcp
        ts[0] += 1
        out.write(
            record.pack(
                1_700_000_000 + ts[0] // 1_000_000,
                ts[0] % 1_000_000,
                len(data) + len(payload),
                len(data) + len(payload),
            )
        )
        out.write(data)
        out.write(payload)

    per_connection = total_bytes // CONNECTIONS
    streams = []
    for c in range(CONNECTIONS):
        client, server = bytes([10, 0, 1, c + 1]), bytes([10, 0, 0, 1])
        requests, responses = _frames(c, per_connection, frame_size)
        streams.append([client, server, 40000 + c, requests, responses, 0, 0])
        packet(client, server, 40000 + c, 9092, 0, 0x02)
        packet(server, client, 9092, 40000 + c, 0, 0x12)
    active = True
    while active:
        active = False
        for s in streams:
            client, server, port, requests, responses, rpos, spos = s
            if rpos < len(requests):
                chunk = requests[rpos : rpos + segment]
                packet(client, server, port, 9092, 1 + rpos, 0x18, chunk)
                s[5] = rpos + len(chunk)
                active = True
            if spos < len(responses) and spos < s[5] * len(responses) // len(requests):
                chunk = responses[spos : spos + segment]
                packet(server, client, 9092, port, 1 + spos, 0x18, chunk)
                s[6] = spos + len(chunk)
                active = True
            elif spos < len(responses) and rpos >= len(requests):
                chunk = responses[spos : spos + segment]
                packet(server, client, 9092, port, 1 + spos, 0x18, chunk)
                s[6] = spos + len(chunk)
                active = True
    out.close()
    return path.stat().st_size


CASES = {
    # name: (capture bytes, segment size, request frame size)
    "64k-segments": (512 << 20, SEGMENT_64K, 256 << 10),
    "200b-segments": (96 << 20, SEGMENT_SMALL, 1000),
}


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    root = tmp_path_factory.mktemp("captures")
    return {name: (root / f"{name}.pcap", write_capture(root / f"{name}.pcap", *spec)) for name, spec in CASES.items()}


def read_with_kproto(path: Path, implementation: str | None = None) -> int:
    frames = 0
    for batch in CaptureReader(str(path), implementation=implementation):
        frames += batch.num_rows
    return frames


def read_plain(path: Path) -> int:
    total = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(4 << 20):
            total += len(chunk)
    return total


def read_with_dpkt(path: Path) -> int:
    import dpkt

    segments = 0
    with open(path, "rb") as handle:
        for _ts, buf in dpkt.pcap.Reader(handle):
            eth = dpkt.ethernet.Ethernet(buf)
            if isinstance(eth.data, dpkt.ip.IP) and isinstance(eth.data.data, dpkt.tcp.TCP):
                segments += len(eth.data.data.data) > 0
    return segments


def _throughput(benchmark, size: int) -> None:
    benchmark.extra_info["capture_MB"] = round(size / 1e6, 1)
    benchmark.extra_info["MB_per_s"] = round(size / 1e6 / benchmark.stats.stats.mean, 1)


@pytest.mark.parametrize("case", list(CASES))
def test_kproto_capture(benchmark, captures, case):
    path, size = captures[case]
    frames = benchmark.pedantic(read_with_kproto, args=(path,), rounds=3, iterations=1, warmup_rounds=1)
    assert frames > 0
    _throughput(benchmark, size)


@pytest.mark.parametrize("case", list(CASES))
def test_plain_python_read(benchmark, captures, case):
    path, size = captures[case]
    benchmark.pedantic(read_plain, args=(path,), rounds=3, iterations=1, warmup_rounds=1)
    _throughput(benchmark, size)


@pytest.mark.parametrize("case", list(CASES))
def test_dpkt_parse_only(benchmark, captures, case):
    pytest.importorskip("dpkt")
    path, size = captures[case]
    benchmark.pedantic(read_with_dpkt, args=(path,), rounds=1, iterations=1)
    _throughput(benchmark, size)


def main() -> None:
    """A quick table without pytest-benchmark: MB/s and peak resident memory of the reading."""
    import multiprocessing
    import resource

    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in CASES.items():
            path = Path(tmp) / f"{name}.pcap"
            # Written by a child process, so this process's peak memory is the reader's alone.
            writer = multiprocessing.get_context("fork").Process(target=write_capture, args=(path, *spec))
            writer.start()
            writer.join()
            size = path.stat().st_size
            for label, fn in (
                ("kproto (%s)" % ("c" if _impl.USE_EXTENSION else "py"), read_with_kproto),
                ("plain read", read_plain),
            ):
                fn(path)
                start = time.perf_counter()
                fn(path)
                elapsed = time.perf_counter() - start
                print(f"{name:14s} {label:14s} {size / 1e6 / elapsed:8.1f} MB/s  ({size / 1e6:.0f} MB)")
            print(f"  peak RSS so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()

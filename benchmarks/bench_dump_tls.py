"""`kproto dump`'s peak memory on TLS traffic against the same volume of plain Kafka (issue 35).

    .venv/bin/python benchmarks/bench_dump_tls.py [--connections 32] [--mb 40] [--dir /tmp/kproto-bench-tls]

A host capture holds TLS listeners (9093) as well as plain Kafka. TLS bytes cannot be
Kafka frames: once a connection shows TLS records its bytes are counted and dropped, so
dump's peak RSS on N TLS connections of M MB each must stay that of the same volume of
plain Kafka (the ratio printed), not grow with the TLS volume (before: 1.39 GB for
32 x 40 MB against 194 MB). Half the TLS connections are caught mid-record (no SYN).
Peak RSS of a new process (``/usr/bin/time -f %M``), wall time alongside.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_spark import make_capture  # noqa: E402

KPROTO = [sys.executable, "-m", "kproto.analyze.cli", "dump", "--format", "jsonl"]
CHUNK = 8  # TLS records of 16,000 bytes per segment batch


def tls_capture(path: Path, connections: int, megabytes: int) -> None:
    from tests.pcapwriter import Conversation, PcapWriter

    writer = PcapWriter()
    ts = 1_700_000_000_000_000_000
    conversations = []
    for i in range(connections):
        conversation = Conversation(client=(f"10.0.{1 + i // 250}.{1 + i % 250}", 40000 + i), server=("10.0.0.9", 9093))
        conversations.append(conversation)
        if i % 2 == 0:
            for packet in conversation.handshake():
                writer.add(ts, packet.data)
                ts += 1000
    record = os.urandom(16000)
    block = b"".join(struct.pack(">BHH", 23, 0x0303, len(record)) + record for _ in range(CHUNK))
    for rounds in range(megabytes * 1_000_000 // len(block)):
        for i, conversation in enumerate(conversations):
            data = block[7000:] if rounds == 0 and i % 2 else block  # mid-record: no SYN, cut record
            for packet in conversation.data("server", data, (16000,)):
                writer.add(ts, packet.data)
                ts += 1000
    path.write_bytes(writer.getvalue())


def peak(path: Path) -> tuple[int, float]:
    """(peak RSS in MB, wall seconds) of dumping ``path`` in a new process."""
    result = subprocess.run(
        ["/usr/bin/time", "-f", "%M %e", *KPROTO, str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    rss_kb, wall = result.stderr.strip().splitlines()[-1].split()
    return int(rss_kb) // 1024, float(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--mb", type=int, default=40, help="MB per TLS connection")
    parser.add_argument("--dir", default="/tmp/kproto-bench-tls")
    args = parser.parse_args()
    directory = Path(args.dir)
    directory.mkdir(parents=True, exist_ok=True)
    tls = directory / f"tls-{args.connections}x{args.mb}mb.pcap"
    if not tls.exists():
        tls_capture(tls, args.connections, args.mb)
    plain = directory / f"plain-{args.connections * args.mb}mb.pcap"
    if not plain.exists():
        make_capture(plain, args.connections * args.mb)
    tls_rss, tls_wall = peak(tls)
    plain_rss, plain_wall = peak(plain)
    print(f"TLS   {tls.stat().st_size / 1e6:8.0f} MB  peak RSS {tls_rss:6d} MB  {tls_wall:6.1f} s")
    print(f"plain {plain.stat().st_size / 1e6:8.0f} MB  peak RSS {plain_rss:6d} MB  {plain_wall:6.1f} s")
    print(f"TLS / plain peak RSS: {tls_rss / plain_rss:.2f}")


if __name__ == "__main__":
    main()

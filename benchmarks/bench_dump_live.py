"""How long `kproto dump -` takes to print a frame once its last packet is in the pipe (not a test).

    .venv/bin/python benchmarks/bench_dump_live.py [--frames 30]

A pcap goes into the command's stdin packet by packet, as `tcpdump -U -w -` writes it:
the file header, a TCP handshake and one answered Metadata request first (a connection's
frames are shown once an answered request proves it is Kafka; then a pause, as a capture
starts before traffic does), then one Metadata request at a time; each time, the clock
runs from the write of its last packet to the line on stdout. Prints the median and the largest delay.
"""

from __future__ import annotations

import argparse
import os
import selectors
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kproto.messages import MetadataRequest, MetadataResponse  # noqa: E402
from tests import spark_captures as sc  # noqa: E402
from tests.pcapwriter import Conversation, PcapWriter  # noqa: E402


def pcap_bytes(packets, header: bool) -> bytes:
    writer = PcapWriter()
    for packet in packets:
        writer.add(sc.START_NS, packet.data)
    data = writer.getvalue()
    return data if header else data[24:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=30)
    args = parser.parse_args()
    connection = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 9092))
    proof = connection.data(
        "client", sc.request(MetadataRequest(topics=None), 12, 0, "live"), [1000]
    ) + connection.data("server", sc.response(MetadataResponse(topics=[]), 12, 0), [1000])
    start = pcap_bytes(connection.handshake() + proof, header=True)
    requests = [
        pcap_bytes(
            connection.data("client", sc.request(MetadataRequest(topics=None), 12, i, "live"), [1000]), header=False
        )
        for i in range(1, args.frames + 1)
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "kproto.analyze.cli", "dump", "-", "--format", "jsonl"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(start)
    time.sleep(3)
    process.stdout.readline()  # the proving request and its response
    process.stdout.readline()
    delays = []
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        for request in requests:
            began = time.perf_counter()
            process.stdin.write(request)
            if not selector.select(30):
                print("no line within 30 s", file=sys.stderr)
                break
            process.stdout.readline()
            delays.append((time.perf_counter() - began) * 1000)
    process.stdin.close()
    process.wait(60)
    if not delays:
        print("no frame was printed while the pipe was open")
        return 1
    print(
        f"{len(delays)} frames: median {statistics.median(delays):.1f} ms, first {delays[0]:.1f} ms, "
        f"largest {max(delays):.1f} ms (load {os.getloadavg()[0]:.1f})"
    )
    return 0 if len(delays) == args.frames else 1


if __name__ == "__main__":
    sys.exit(main())

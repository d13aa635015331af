"""A capture of many short client connections, with the truth of every connection (issue 35).

    PYTHONPATH=. .venv/bin/python tools/many_connections.py OUT.pcap [--connections 100000]
                                                          [--concurrent 32] [--truth OUT.json]

Each connection is what a short-lived Java client (``kafka-console-producer``, a batch
job, a serverless function) puts on the wire against a 3.9 broker: the TCP handshake,
ApiVersions v3 (with its KIP-511 software name and version) and the broker's version
ranges, Metadata v12 for one topic and the broker's answer (one broker, the topic's
partitions), one Produce v9 of a small record batch (acks=all) and its response, then
FIN / FIN / ACK: 3 requests and 3 responses, cut into segments of at most 1448 bytes.
The frames are encoded by kproto from the message definitions, so they are the
frames of those versions. Clients are 200 hosts (``10.50.x.y``), each with its own
ports and client id; ``--concurrent`` connections are open at once (their packets
interleaved), so a split boundary crosses some of them. Timestamps step 2 us.

The truth (``truth()`` / ``--truth``): per connection (client ip, client port), the
counters the connections table must show: frames, frame bytes, payload packets and
payload bytes in each direction.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: the kproto used is the one it names

from tests.pcapwriter import Conversation, PcapWriter  # noqa: E402

START_NS = 1_750_000_000_000_000_000
STEP_NS = 2_000
MSS = 1448
BROKER = ("10.60.0.9", 9092)
HOSTS = 200
TOPIC = "events"


def client_of(index: int) -> tuple[str, int]:
    """Connection ``index``'s client address: one of HOSTS hosts, a port of its own."""
    host, nth = index % HOSTS, index // HOSTS
    return f"10.50.{host // 250}.{host % 250 + 1}", 20000 + nth % 40000


def frames_of(host: int) -> list[tuple[str, bytes]]:
    """The size-prefixed frames of one connection, in wire order: (sender, frame)."""
    import kproto
    from kproto import versions as kv
    from kproto.messages import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        MetadataRequest,
        MetadataResponse,
        ProduceRequest,
        ProduceResponse,
    )
    from kproto.records import RecordBatch

    client_id = f"producer-{host}"

    def request(body, version: int, correlation_id: int) -> bytes:
        return kproto.encode_request(
            body, version=version, correlation_id=correlation_id, client_id=client_id, size_prefixed=True
        )

    def response(body, version: int, correlation_id: int) -> bytes:
        return kproto.encode_response(body, version=version, correlation_id=correlation_id, size_prefixed=True)

    ranges = kv.release_table("3.9")
    versions = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ranges.items())
        ],
    )
    metadata = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="kafka-1.internal", port=BROKER[1])],
        cluster_id="k8V3nQ2pT7eR1uX4yZ6wAa",
        controller_id=1,
        topics=[
            MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name=TOPIC,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        error_code=0, partition_index=p, leader_id=1, leader_epoch=0, replica_nodes=[1], isr_nodes=[1]
                    )
                    for p in range(6)
                ],
            )
        ],
    )
    batch = RecordBatch.encode(
        [(f"key-{host}".encode(), b'{"event":"login","user":%d}' % host, [], START_NS // 10**6)], base_offset=0
    )
    produce = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=host % 6, records=batch)]
            )
        ],
    )
    produced = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=TOPIC, partition_responses=[ProduceResponse.PartitionProduceResponse(index=host % 6, error_code=0)]
            )
        ]
    )
    return [
        (
            "client",
            request(
                ApiVersionsRequest(client_software_name="apache-kafka-java", client_software_version="3.9.0"), 3, 1
            ),
        ),
        ("server", response(versions, 3, 1)),
        (
            "client",
            request(
                MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True
                ),
                12,
                2,
            ),
        ),
        ("server", response(metadata, 12, 2)),
        ("client", request(produce, 9, 3)),
        ("server", response(produced, 9, 3)),
    ]


def connection_packets(index: int, frames: list[tuple[str, bytes]]) -> list:
    """One connection's packets (tests.pcapwriter.Packet), handshake to close."""
    conv = Conversation(
        client=client_of(index),
        server=BROKER,
        client_isn=(index * 7919) & 0xFFFFFFFF,
        server_isn=(index * 104729 + 1) & 0xFFFFFFFF,
    )
    packets = conv.handshake()
    for sender, frame in frames:
        packets += conv.data(sender, frame, [MSS])
    return packets + conv.close()


def truth_of(frames: list[tuple[str, bytes]]) -> dict[str, int]:
    """What the connections table says of one such connection."""
    truth = {}
    for side, sender in (("request_", "client"), ("response_", "server")):
        sent = [frame for who, frame in frames if who == sender]
        truth[side + "frames"] = len(sent)
        truth[side + "frame_bytes"] = sum(len(frame) for frame in sent)
        truth[side + "packets"] = sum(-(-len(frame) // MSS) for frame in sent)
        truth[side + "stream_bytes"] = truth[side + "frame_bytes"]
    return truth


def packets(connections: int, concurrent: int = 32) -> Iterator[tuple[int, bytes]]:
    """(timestamp, link-layer frame) of the capture, in capture order: ``concurrent`` connections at a
    time, a packet of each in turn."""
    templates = [frames_of(host) for host in range(min(HOSTS, connections))]
    ts = START_NS
    for first in range(0, connections, concurrent):
        group = [
            connection_packets(i, templates[i % HOSTS]) for i in range(first, min(connections, first + concurrent))
        ]
        for step in range(max(len(p) for p in group)):
            for conn in group:
                if step < len(conn):
                    yield ts, conn[step].data
                    ts += STEP_NS


def truth(connections: int) -> dict[tuple[str, int], dict[str, int]]:
    """Per connection (client ip, client port): its counters in the connections table."""
    templates = [truth_of(frames_of(host)) for host in range(min(HOSTS, connections))]
    return {client_of(i): templates[i % HOSTS] for i in range(connections)}


def write(path: str | Path, connections: int, concurrent: int = 32) -> int:
    """Write the capture; returns its size in bytes."""
    writer = PcapWriter()
    size = 0
    with open(path, "wb") as out:
        for ts, data in packets(connections, concurrent):
            writer.add(ts, data)
            if len(writer.parts) > 20_000:
                chunk = b"".join(writer.parts)
                out.write(chunk)
                size += len(chunk)
                writer.parts.clear()
        chunk = b"".join(writer.parts)
        out.write(chunk)
        size += len(chunk)
    return size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the pcap to write")
    parser.add_argument("--connections", type=int, default=100_000)
    parser.add_argument("--concurrent", type=int, default=32, help="connections open at once")
    parser.add_argument("--truth", help="also write the truth per connection (JSON)")
    args = parser.parse_args(argv)
    size = write(args.out, args.connections, args.concurrent)
    print(f"wrote {args.out}: {size:,} bytes, {args.connections:,} connections, {6 * args.connections:,} frames")
    if args.truth:
        rows = [
            {"client_ip": ip, "client_port": port, **counts} for (ip, port), counts in truth(args.connections).items()
        ]
        Path(args.truth).write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Small hand-made captures for the Spark pipeline tests: every row they produce is known.

``small_capture()`` is one pcap with two clients of a broker at 10.0.0.9:9092:

* connection 0 (10.0.0.1:40001), client_id ``shop``: ApiVersions v3 (software
  ``shop-app`` / ``2.0``) answered with NONE and the broker's ranges (those of
  Kafka 3.9); Produce v9 to ``orders`` partition 0 (one uncompressed batch of
  3 records) answered with NONE; Metadata v12 unanswered when the capture ends.
* connection 1 (10.0.0.2:40002), client_id ``old``: ApiVersions v3 with an
  invalid software name (``bad name``) refused with INVALID_REQUEST (42);
  Produce v2 with acks=0 (removed in Kafka 4.x; no response by design) to
  ``audit`` partition 1 (a gzip batch of 2 records); a response to correlation
  id 77, whose request was not captured.

``big_capture(n)`` is ``n`` connections of Produce / response pairs, for splits.
"""

from __future__ import annotations

import struct
import uuid

import kproto
from kproto import versions as kv
from kproto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kproto.records import RecordBatch
from tests.pcapwriter import Conversation, PcapWriter

START_NS = 1_700_000_000_000_000_000
STEP_NS = 1_000_000  # 1 ms between packets


def records(count: int, compression: str = "none") -> bytes:
    return RecordBatch.encode(
        [(None, b"value-%d" % i, [], 1_700_000_000_000) for i in range(count)], base_offset=0, compression=compression
    )


def _prefixed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request(body, version: int, correlation_id: int, client_id: str) -> bytes:
    return kproto.encode_request(
        body, version=version, correlation_id=correlation_id, client_id=client_id, size_prefixed=True
    )


def response(body, version: int, correlation_id: int) -> bytes:
    return kproto.encode_response(body, version=version, correlation_id=correlation_id, size_prefixed=True)


def produce(topic: str, partition: int, data: bytes, acks: int = -1):
    return ProduceRequest(
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=data)]
            )
        ],
    )


def produce_ok(topic: str, partition: int):
    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=topic,
                partition_responses=[ProduceResponse.PartitionProduceResponse(index=partition, error_code=0)],
            )
        ]
    )


def broker_api_versions(error_code: int = 0):
    ranges = kv.release_table("3.9") if error_code == 0 else {}
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ranges.items())
        ],
    )


class Timeline:
    """Packets of several conversations in one pcap, 1 ms apart, in the order they are added."""

    def __init__(self) -> None:
        self.writer = PcapWriter()
        self.ts = START_NS

    def add(self, packets) -> int:
        first = self.ts
        for packet in packets:
            self.writer.add(self.ts, packet.data)
            self.ts += STEP_NS
        return first

    def getvalue(self) -> bytes:
        return self.writer.getvalue()


def small_capture() -> bytes:
    shop = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 9092))
    old = Conversation(client=("10.0.0.2", 40002), server=("10.0.0.9", 9092), client_isn=7000, server_isn=90000)
    t = Timeline()
    t.add(shop.handshake())
    t.add(old.handshake())
    t.add(
        shop.data(
            "client",
            request(ApiVersionsRequest(client_software_name="shop-app", client_software_version="2.0"), 3, 1, "shop"),
            [1000],
        )
    )
    t.add(shop.data("server", response(broker_api_versions(), 3, 1), [1000]))
    bad = kv.encode_api_versions_request(
        correlation_id=1,
        version=3,
        client_id="old",
        client_software_name="bad name",
        client_software_version="1.0",
        allow_invalid=True,
        size_prefixed=True,
    )
    t.add(old.data("client", bad, [1000]))
    t.add(old.data("server", response(ApiVersionsResponse(error_code=42), 3, 1), [1000]))
    t.add(shop.data("client", request(produce("orders", 0, records(3)), 9, 2, "shop"), [100]))
    t.add(old.data("client", request(produce("audit", 1, records(2, "gzip"), acks=0), 2, 2, "old"), [1000]))
    t.add(shop.data("server", response(produce_ok("orders", 0), 9, 2), [1000]))
    # An API key kproto has no schema for: the header reads, the frame does not decode.
    t.add(old.data("client", _prefixed(struct.pack(">hhih", 999, 0, 3, 3) + b"old" + b"\x00" * 6), [1000]))
    t.add(old.data("server", _prefixed(struct.pack(">i", 77) + b"\x00\x00"), [1000]))
    t.add(shop.data("client", request(MetadataRequest(topics=None), 12, 3, "shop"), [1000]))
    t.add(shop.close())
    t.add(old.close())
    return t.getvalue()


def big_capture(connections: int = 6, exchanges: int = 40) -> bytes:
    """Interleaved connections, each ``exchanges`` Produce v9 requests with their responses."""
    conversations = [
        Conversation(
            client=("10.1.0.%d" % (i + 1), 41000 + i),
            server=("10.1.0.200", 9092),
            client_isn=1000 * (i + 1),
            server_isn=500000 + 1000 * i,
        )
        for i in range(connections)
    ]
    t = Timeline()
    for c in conversations:
        t.add(c.handshake())
    data = records(5)
    for n in range(exchanges):
        for i, c in enumerate(conversations):
            t.add(c.data("client", request(produce("bulk", i % 3, data), 9, n, f"bulk-{i}"), [700]))
            t.add(c.data("server", response(produce_ok("bulk", i % 3), 9, n), [1000]))
    for c in conversations:
        t.add(c.close())
    return t.getvalue()


# ---------------------------------------------------------------- topic IDs (KIP-516)
ORDERS_ID = "0f0e0d0c-0b0a-4908-8706-050403020100"  # named by a Metadata response in the other file
PAYMENTS_ID = "11111111-2222-4333-8444-555555555555"  # named by a Metadata response on another connection
GHOST_ID = "99999999-8888-4777-8666-555555555555"  # named by no response at all


def fetch_by_id(topic_id: str, partition: int):
    return FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            FetchRequest.FetchTopic(
                topic_id=uuid.UUID(topic_id), partitions=[FetchRequest.FetchPartition(partition=partition)]
            )
        ],
    )


def fetched_by_id(topic_id: str, partition: int, data: bytes):
    return FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic_id=uuid.UUID(topic_id),
                partitions=[FetchResponse.PartitionData(partition_index=partition, records=data)],
            )
        ]
    )


def metadata_naming(*topics: tuple[str, str]):
    return MetadataResponse(
        topics=[
            MetadataResponse.MetadataResponseTopic(name=name, topic_id=uuid.UUID(topic_id)) for name, topic_id in topics
        ]
    )


def topic_id_captures() -> tuple[bytes, bytes]:
    """Two pcaps of one run: Fetch v16 by topic ID in the first, the names elsewhere.

    First file: connection 10.0.1.1 (``fraud-detector``) fetches ``ORDERS_ID``
    partition 0 (4 records), ``PAYMENTS_ID`` partition 1 (2 records) and
    ``GHOST_ID`` partition 2 (1 record); connection 10.0.1.2 (``admin``) gets a
    Metadata v12 response naming ``PAYMENTS_ID`` ``payments``. Second file:
    connection 10.0.2.1 (``admin``) gets a Metadata v12 response naming
    ``ORDERS_ID`` ``orders`` and produces 3 records to ``orders`` by name (v9).
    """
    fraud = Conversation(client=("10.0.1.1", 40100), server=("10.0.0.9", 9092))
    admin = Conversation(client=("10.0.1.2", 40101), server=("10.0.0.9", 9092), client_isn=3000, server_isn=70000)
    t = Timeline()
    t.add(fraud.handshake())
    t.add(admin.handshake())
    for correlation_id, (topic_id, partition, count) in enumerate(
        [(ORDERS_ID, 0, 4), (PAYMENTS_ID, 1, 2), (GHOST_ID, 2, 1)], start=1
    ):
        t.add(
            fraud.data(
                "client", request(fetch_by_id(topic_id, partition), 16, correlation_id, "fraud-detector"), [1000]
            )
        )
        t.add(
            fraud.data(
                "server", response(fetched_by_id(topic_id, partition, records(count)), 16, correlation_id), [1000]
            )
        )
    t.add(admin.data("client", request(MetadataRequest(topics=None), 12, 1, "admin"), [1000]))
    t.add(admin.data("server", response(metadata_naming(("payments", PAYMENTS_ID)), 12, 1), [1000]))
    t.add(fraud.close())
    t.add(admin.close())
    first = t.getvalue()

    other = Conversation(client=("10.0.2.1", 40200), server=("10.0.0.9", 9092))
    t = Timeline()
    t.ts += 10 * 1_000_000_000
    t.add(other.handshake())
    t.add(other.data("client", request(MetadataRequest(topics=None), 12, 1, "admin"), [1000]))
    t.add(other.data("server", response(metadata_naming(("orders", ORDERS_ID)), 12, 1), [1000]))
    t.add(other.data("client", request(produce("orders", 0, records(3)), 9, 2, "admin"), [1000]))
    t.add(other.data("server", response(produce_ok("orders", 0), 9, 2), [1000]))
    t.add(other.close())
    return first, t.getvalue()

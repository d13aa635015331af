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

import kproto
from kproto import versions as kv
from kproto.messages import (ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, ProduceRequest,
                             ProduceResponse)
from kproto.records import RecordBatch
from tests.pcapwriter import Conversation, PcapWriter

START_NS = 1_700_000_000_000_000_000
STEP_NS = 1_000_000        # 1 ms between packets


def records(count: int, compression: str = "none") -> bytes:
    return RecordBatch.encode([(None, b"value-%d" % i, [], 1_700_000_000_000) for i in range(count)],
                              base_offset=0, compression=compression)


def _prefixed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request(body, version: int, correlation_id: int, client_id: str) -> bytes:
    return kproto.encode_request(body, version=version, correlation_id=correlation_id, client_id=client_id,
                                 size_prefixed=True)


def response(body, version: int, correlation_id: int) -> bytes:
    return kproto.encode_response(body, version=version, correlation_id=correlation_id, size_prefixed=True)


def produce(topic: str, partition: int, data: bytes, acks: int = -1):
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=data)])])


def produce_ok(topic: str, partition: int):
    return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name=topic, partition_responses=[ProduceResponse.PartitionProduceResponse(index=partition, error_code=0)])])


def broker_api_versions(error_code: int = 0):
    ranges = kv.release_table("3.9") if error_code == 0 else {}
    return ApiVersionsResponse(error_code=error_code, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(ranges.items())])


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
    t.add(shop.data("client", request(ApiVersionsRequest(client_software_name="shop-app",
                                                         client_software_version="2.0"), 3, 1, "shop"), [1000]))
    t.add(shop.data("server", response(broker_api_versions(), 3, 1), [1000]))
    bad = kv.encode_api_versions_request(correlation_id=1, version=3, client_id="old",
                                         client_software_name="bad name", client_software_version="1.0",
                                         allow_invalid=True, size_prefixed=True)
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
    conversations = [Conversation(client=("10.1.0.%d" % (i + 1), 41000 + i), server=("10.1.0.200", 9092),
                                  client_isn=1000 * (i + 1), server_isn=500000 + 1000 * i)
                     for i in range(connections)]
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

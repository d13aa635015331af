"""A small fake Kafka broker built on kproto, for generating sample traffic.

It listens on 127.0.0.1, speaks enough of the protocol for real client libraries
(kafka-python, aiokafka, confluent-kafka / librdkafka) to connect, discover the
cluster, produce and fetch, and it records every frame it receives and sends,
with a timestamp and a connection id, in a shared :class:`TrafficLog`. The log
turns into a pcap (:func:`TrafficLog.pcap`), so the recording needs neither
tcpdump nor the right to capture.

One process can run several brokers: each pretends to be one Kafka release (its
ApiVersions table comes from ``kproto.versions.release_table``). A broker of a
release before 2.4 speaks ApiVersions v0-2 only, so a client that starts at v3
(KIP-511) is answered with UNSUPPORTED_VERSION and falls back.

Not a broker: one node, every topic has one partition (or as many as asked),
nothing is replicated, groups and transactions get empty successful answers.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import kproto
import kproto.records
from kproto import schema
from kproto import versions as kv
from kproto.errors import KprotoError

NONE = 0
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3


# ---------------------------------------------------------------- the recording
@dataclass
class Connection:
    """One accepted TCP connection, as the recording will show it."""

    conn_id: int
    client: tuple[str, int]
    server: tuple[str, int]  # the broker's logical address (what the pcap shows)
    opened_ns: int
    closed_ns: int | None = None


@dataclass
class TrafficLog:
    """Everything the brokers saw: connections and (timestamp, connection, sender, bytes) events."""

    connections: list[Connection] = field(default_factory=list)
    events: list[tuple[int, int, str, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def open(self, client: tuple[str, int], server: tuple[str, int]) -> Connection:
        with self.lock:
            conn = Connection(len(self.connections), client, server, time.time_ns())
            self.connections.append(conn)
            return conn

    def record(self, conn: Connection, sender: str, data: bytes) -> None:
        with self.lock:
            self.events.append((time.time_ns(), conn.conn_id, sender, data))

    def close(self, conn: Connection) -> None:
        with self.lock:
            if conn.closed_ns is None:
                conn.closed_ns = time.time_ns()

    def pcap(self, segment_size: int = 1448) -> bytes:
        """The traffic as a pcap (Ethernet, microseconds): handshakes, data segments, closes."""
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests.pcapwriter import Conversation, PcapWriter

        with self.lock:
            conversations = {
                c.conn_id: Conversation(
                    client=c.client,
                    server=c.server,
                    client_isn=1000 + 7919 * c.conn_id,
                    server_isn=500000 + 104729 * c.conn_id,
                )
                for c in self.connections
            }
            timeline: list[tuple[int, int, list]] = []
            for c in self.connections:
                timeline.append((c.opened_ns, 0, conversations[c.conn_id].handshake()))
            # Data in the order it happened; closes last for each connection.
            for order, (ts, conn_id, sender, data) in enumerate(self.events):
                timeline.append((ts, 1 + order, conversations[conn_id].data(sender, data, [segment_size])))
            last = max((ts for ts, *_ in timeline), default=time.time_ns())
            for c in self.connections:
                closed = c.closed_ns if c.closed_ns is not None else last + 1000
                timeline.append((closed, 1 << 40, conversations[c.conn_id].close()))
        writer = PcapWriter()
        # Packets of one event get consecutive microseconds, so timestamps never go backwards.
        previous = 0
        for ts, _order, packets in sorted(timeline, key=lambda item: (item[0], item[1])):
            for packet in packets:
                ts = max(ts, previous + 1000)
                writer.add(ts, packet.data)
                previous = ts
        return writer.getvalue()


# ---------------------------------------------------------------- the broker
def _response_class(api_key: int) -> type:
    return schema.message_class(schema.response_name(api_key))


class FakeBroker:
    """One fake broker node on 127.0.0.1.

    ``release``: the Kafka release whose ApiVersions table it advertises (and whose
    ApiVersions range it speaks). ``logical_port``: the port the recording shows.
    """

    def __init__(
        self, log: TrafficLog, *, release: str = "3.9", logical_port: int = 9092, node_id: int = 0, partitions: int = 1
    ) -> None:
        self.log = log
        self.release = release
        self.table = kv.release_table(release)
        self.api_versions_max = self.table[kv.API_VERSIONS_KEY][1]
        self.logical_port = logical_port
        self.node_id = node_id
        self.partitions = partitions
        self.topics: dict[str, list[list[bytes]]] = {}  # topic -> partition -> record batches
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.lock = threading.Lock()
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._handlers: dict[int, Callable] = {
            0: self._produce,
            1: self._fetch,
            2: self._list_offsets,
            3: self._metadata,
            10: self._find_coordinator,
            11: self._join_group,
            14: self._sync_group,
            18: self._api_versions,
            22: self._init_producer_id,
        }

    # -- lifecycle
    def start(self) -> FakeBroker:
        thread = threading.Thread(target=self._accept_loop, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping = True
        try:
            self.server.close()
        except OSError:
            pass

    def _accept_loop(self) -> None:
        while not self._stopping:
            try:
                sock, address = self.server.accept()
            except OSError:
                return
            conn = self.log.open(address[:2], ("127.0.0.1", self.logical_port))
            thread = threading.Thread(target=self._serve, args=(sock, conn), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, sock: socket.socket, conn: Connection) -> None:
        try:
            with sock:
                while True:
                    prefix = _read_exactly(sock, 4)
                    if prefix is None:
                        return
                    size = struct.unpack(">i", prefix)[0]
                    payload = _read_exactly(sock, size)
                    if payload is None:
                        return
                    self.log.record(conn, "client", prefix + payload)
                    answer = self.answer(payload)
                    if answer is None:  # Produce with acks=0: no response, by design
                        continue
                    frame = struct.pack(">i", len(answer)) + answer
                    self.log.record(conn, "server", frame)
                    sock.sendall(frame)
        except OSError:
            return
        finally:
            self.log.close(conn)

    # -- requests
    def answer(self, payload: bytes) -> bytes | None:
        """The response payload to one request payload (None when none is due)."""
        api_key, version, correlation_id = struct.unpack_from(">hhi", payload)
        if api_key == kv.API_VERSIONS_KEY:
            return self._api_versions(payload, version, correlation_id)
        request = kproto.decode_request(payload)
        handler = self._handlers.get(api_key)
        body = handler(request) if handler else _default_body(api_key)
        if body is None:
            return None
        return kproto.encode_response(body, version=version, correlation_id=correlation_id)

    def _api_versions(self, payload: bytes, version: int, correlation_id: int) -> bytes:
        response = _response_class(18)
        if version > self.api_versions_max:
            # What a KIP-511 broker answers to a newer ApiVersions: v0 body, its own range.
            body = response(
                error_code=UNSUPPORTED_VERSION,
                api_keys=[response.ApiVersion(api_key=18, min_version=0, max_version=self.api_versions_max)],
            )
            return kproto.encode_response(body, version=0, correlation_id=correlation_id)
        try:
            _request, problems = kv.decode_api_versions_request(payload)
        except KprotoError:
            problems = ["undecodable"]
        if problems:
            body = response(error_code=INVALID_REQUEST)
        else:
            body = response(
                error_code=NONE,
                api_keys=[
                    response.ApiVersion(api_key=key, min_version=lo, max_version=hi)
                    for key, (lo, hi) in sorted(self.table.items())
                ],
            )
        return kproto.encode_response(body, version=version, correlation_id=correlation_id)

    def _topic(self, name: str) -> list[list[bytes]]:
        with self.lock:
            if name not in self.topics:
                self.topics[name] = [[] for _ in range(self.partitions)]
                self.topic_ids[name] = uuid.uuid5(uuid.NAMESPACE_DNS, name + ".kproto.sample")
            return self.topics[name]

    def _metadata(self, request):
        response = _response_class(3)
        requested = request.body.topics
        names = sorted(self.topics) if requested is None else [t.name for t in requested]
        topics = []
        for name in names:
            if name is None:
                continue
            partitions = self._topic(name)
            topics.append(
                response.MetadataResponseTopic(
                    error_code=NONE,
                    name=name,
                    is_internal=False,
                    topic_id=self.topic_ids[name] if request.api_version >= 10 else schema.ZERO_UUID,
                    partitions=[
                        response.MetadataResponsePartition(
                            error_code=NONE,
                            partition_index=i,
                            leader_id=self.node_id,
                            leader_epoch=0,
                            replica_nodes=[self.node_id],
                            isr_nodes=[self.node_id],
                            offline_replicas=[],
                        )
                        for i in range(len(partitions))
                    ],
                )
            )
        return response(
            brokers=[response.MetadataResponseBroker(node_id=self.node_id, host="127.0.0.1", port=self.port)],
            cluster_id="kproto-sample-cluster",
            controller_id=self.node_id,
            topics=topics,
        )

    def _produce(self, request):
        response = _response_class(0)
        results = []
        for topic in request.body.topic_data:
            partitions = self._topic(topic.name)
            parts = []
            for data in topic.partition_data:
                if data.index >= len(partitions):
                    parts.append(
                        response.PartitionProduceResponse(index=data.index, error_code=UNKNOWN_TOPIC_OR_PARTITION)
                    )
                    continue
                with self.lock:
                    log = partitions[data.index]
                    base = sum(_record_count(b) for b in log)
                    if data.records is not None:
                        log.append(bytes(data.records))
                parts.append(response.PartitionProduceResponse(index=data.index, error_code=NONE, base_offset=base))
            results.append(response.TopicProduceResponse(name=topic.name, partition_responses=parts))
        if request.body.acks == 0:
            return None
        return response(responses=results)

    def _fetch(self, request):
        response = _response_class(1)
        topics = []
        for topic in request.body.topics:
            name = topic.topic
            if request.api_version >= 13:  # Fetch v13+ names topics by id
                name = next((n for n, i in self.topic_ids.items() if i == topic.topic_id), "")
            partitions = self._topic(name) if name else []
            parts = []
            for wanted in topic.partitions:
                if wanted.partition >= len(partitions):
                    parts.append(
                        response.PartitionData(partition_index=wanted.partition, error_code=UNKNOWN_TOPIC_OR_PARTITION)
                    )
                    continue
                records, high = _records_from(partitions[wanted.partition], wanted.fetch_offset)
                # An empty record set, not a null one: librdkafka refuses a size of -1.
                parts.append(
                    response.PartitionData(
                        partition_index=wanted.partition,
                        error_code=NONE,
                        high_watermark=high,
                        last_stable_offset=high,
                        log_start_offset=0,
                        records=records or b"",
                    )
                )
            topics.append(response.FetchableTopicResponse(topic=name, topic_id=topic.topic_id, partitions=parts))
        if not any(p.records for t in topics for p in t.partitions):
            time.sleep(min(request.body.max_wait_ms, 100) / 1000)  # long-poll, briefly
        return response(responses=topics)

    def _list_offsets(self, request):
        response = _response_class(2)
        topics = []
        for topic in request.body.topics:
            partitions = self._topic(topic.name)
            parts = []
            for wanted in topic.partitions:
                end = (
                    sum(_record_count(b) for b in partitions[wanted.partition_index])
                    if wanted.partition_index < len(partitions)
                    else 0
                )
                offset = 0 if wanted.timestamp == -2 else end
                if request.api_version == 0:
                    answer = dict(old_style_offsets=[offset])
                else:
                    answer = dict(timestamp=-1, offset=offset)
                parts.append(
                    response.ListOffsetsPartitionResponse(
                        partition_index=wanted.partition_index, error_code=NONE, **answer
                    )
                )
            topics.append(response.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
        return response(topics=topics)

    def _find_coordinator(self, request):
        response = _response_class(10)
        if request.api_version < 4:
            return response(error_code=NONE, node_id=self.node_id, host="127.0.0.1", port=self.port)
        return response(
            coordinators=[
                response.Coordinator(key=key, node_id=self.node_id, host="127.0.0.1", port=self.port, error_code=NONE)
                for key in request.body.coordinator_keys
            ]
        )

    def _join_group(self, request):
        """Every joiner is the only member and the leader of a new generation, with its first protocol."""
        response = _response_class(11)
        body = request.body
        member_id = body.member_id or f"{request.header.client_id or 'member'}-{uuid.uuid4()}"
        protocol = body.protocols[0] if body.protocols else None
        return response(
            error_code=NONE,
            generation_id=1,
            protocol_type=body.protocol_type,
            protocol_name=protocol.name if protocol else None,
            leader=member_id,
            member_id=member_id,
            members=[
                response.JoinGroupResponseMember(member_id=member_id, metadata=protocol.metadata if protocol else b"")
            ],
        )

    def _sync_group(self, request):
        """The leader's assignment for itself, handed back."""
        body = request.body
        mine = next((a.assignment for a in body.assignments if a.member_id == body.member_id), b"")
        return _response_class(14)(
            error_code=NONE, protocol_type=body.protocol_type, protocol_name=body.protocol_name, assignment=mine
        )

    def _init_producer_id(self, request):
        return _response_class(22)(error_code=NONE, producer_id=4242, producer_epoch=0)


def _default_body(api_key: int):
    """A response with every field at its default: success, nothing in it."""
    return _response_class(api_key)()


def _record_count(batch: bytes) -> int:
    """Records in a stored record set (v2 batches: the header's count; legacy: one per message)."""
    count = 0
    for batch_view in kproto.records.Records(batch):
        count += getattr(batch_view, "record_count", None) or 1
    return count


def _records_from(log: list[bytes], offset: int) -> tuple[bytes, int]:
    """Stored v2 batches from ``offset`` on, base offsets rewritten; and the high watermark."""
    out = []
    position = 0
    for record_set in log:
        count = _record_count(record_set)
        if position + count > offset and len(record_set) > 16 and record_set[16] == 2:
            # The base offset is outside the batch CRC, so it can be rewritten in place.
            out.append(struct.pack(">q", position) + record_set[8:])
        position += count
    return b"".join(out), position


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    chunks = []
    while count:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)

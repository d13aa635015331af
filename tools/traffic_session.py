"""A kproto-driven client session against a real Kafka broker (issue 36, deliver 4).

Every request is built from kproto's message classes and encoded by kproto; every
answer is read by kproto. What the broker answers is recorded per exchange
(:class:`Exchange`): the error codes found anywhere in the response body, or that
the connection was closed / nothing came back. tools/real_traffic.py captures the
traffic of this session with tcpdump and checks it byte for byte.

The session, in order:

* ApiVersions at every version kproto knows (a version the broker does not know is
  answered as v0 with UNSUPPORTED_VERSION: a fact, recorded);
* the core of a client: CreateTopics, Metadata, Produce (magic 2 batches, each codec:
  none, gzip, snappy, lz4, zstd; several records, headers, null keys and values),
  Fetch, ListOffsets, FindCoordinator, a classic group's JoinGroup / SyncGroup /
  Heartbeat / OffsetCommit / OffsetFetch / LeaveGroup, DescribeConfigs, DescribeCluster;
* SaslHandshake and SaslAuthenticate (PLAIN) on the SASL_PLAINTEXT listener, then a
  Metadata request on the authenticated connection;
* every other API the broker advertises, with a minimal body that harms nothing
  (validate-only, empty lists, ids nobody has): :data:`STANDALONE`.

Read-only APIs (:data:`EVERY_VERSION`) go out at every version both kproto and the
broker know; the others at the newest common version.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import kproto
from kproto import schema
from kproto.errors import KprotoError, error_name
from kproto.framing import FrameReader
from kproto.records import Record, RecordBatch
from kproto.versions import api_name

CLIENT_ID = "kproto-traffic"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Error codes that say the broker could not read a well-formed request: findings, never facts.
MEMBER_ID_REQUIRED = 79  # KIP-394: a classic group's first JoinGroup is answered with the member id
NOT_LEADER_OR_FOLLOWER = 6
RETRIABLE = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
PARSE_ERRORS = {2: "CORRUPT_MESSAGE", 42: "INVALID_REQUEST", 87: "INVALID_RECORD"}
ANSWER_TIMEOUT = 30.0  # seconds; JoinGroup and Fetch wait on the broker's side at most a few
FETCH_WAIT_MS = 100

# Versions above these are the brokers' own (AddPartitionsToTxn v4+ batches transactions between
# brokers; an empty batch of them was never answered by 4.4.0): the session sends the clients' newest.
CLIENT_MAX = {24: 3}
# Keys sent at every version both sides know: reading, never changing anything.
EVERY_VERSION = frozenset(
    {
        2,
        3,
        9,
        10,
        15,
        16,
        18,
        29,
        32,
        35,
        41,
        46,
        48,
        50,
        55,
        60,
        61,
        65,
        66,
        69,
        74,
        75,
        77,
        89,
        90,
    }
)


@dataclass
class Exchange:
    """One request kproto sent and what became of it."""

    listener: str
    api_key: int
    api_version: int
    correlation_id: int
    errors: tuple[int, ...] = ()  # every non-zero error code in the answer, in body order
    outcome: str = "answered"  # answered | closed | timeout | undecodable
    detail: str = ""

    @property
    def parse_errors(self) -> list[str]:
        return [PARSE_ERRORS[c] for c in self.errors if c in PARSE_ERRORS]


@dataclass
class SessionLog:
    """What a session sent and what the broker answered."""

    exchanges: list[Exchange] = field(default_factory=list)
    advertised: dict[int, tuple[int, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def findings(self) -> list[str]:
        """A closed connection, no answer, or a parse-level error code, per exchange."""
        found = []
        for ex in self.exchanges:
            where = f"{api_name(ex.api_key)} v{ex.api_version} ({ex.listener})"
            if ex.outcome != "answered":
                found.append(f"{where}: {ex.outcome} {ex.detail}".rstrip())
            elif ex.parse_errors:
                found.append(f"{where}: {', '.join(ex.parse_errors)}")
        return found

    def error_counts(self) -> Counter:
        return Counter(error_name(code) for ex in self.exchanges for code in ex.errors)

    def apis(self) -> set[int]:
        return {ex.api_key for ex in self.exchanges}


def error_codes(value: Any) -> Iterator[int]:
    """Every non-zero ``error_code`` field anywhere in a decoded body."""
    if isinstance(value, schema.Message):
        for name in value._field_names:
            item = getattr(value, name)
            if name == "error_code" and isinstance(item, int):
                if item:
                    yield item
            elif isinstance(item, (schema.Message, list)):
                yield from error_codes(item)
    elif isinstance(value, list):
        for item in value:
            yield from error_codes(item)


def fit(body: Any, plan: schema.StructPlan) -> Any:
    """``body`` with the fields ``plan``'s version lacks set back to their defaults, at every level.

    The session writes one body per API for all versions; like Java's client drops the
    fields a version cannot carry, so does this (kproto's encoder refuses them, rightly).
    """
    for op in plan.absent:
        setattr(body, op.name, op.fresh_default())
    for op in (*plan.fields, *plan.tagged):
        if op.child is None:
            continue
        value = getattr(body, op.name)
        for item in value if isinstance(value, list) else [value] if value is not None else []:
            if isinstance(item, schema.Message):
                fit(item, op.child)
    return body


class Link:
    """One connection to the broker; requests encoded by kproto, answers decoded by kproto."""

    def __init__(self, address: tuple[str, int], listener: str, log: SessionLog) -> None:
        self.address = address
        self.listener = listener
        self.log = log
        self.correlation_id = 0
        self.sock: socket.socket | None = None
        self.reader = FrameReader()
        self.waiting: list[bytes] = []

    def open(self) -> None:
        self.sock = socket.create_connection(self.address, timeout=ANSWER_TIMEOUT)
        self.reader = FrameReader()
        self.waiting = []

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _next_frame(self) -> bytes | None:
        assert self.sock is not None
        while not self.waiting:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self.waiting.extend(bytes(f) for f in self.reader.feed(chunk))
        return self.waiting.pop(0)

    def call(self, body: schema.Message, version: int) -> Any:
        """Send ``body`` at ``version``; the decoded response body, or None (recorded why)."""
        if self.sock is None:
            self.open()
        assert self.sock is not None
        self.correlation_id += 1
        key = schema.spec(type(body)._message_name)["api_key"]
        exchange = Exchange(self.listener, key, version, self.correlation_id)
        self.log.exchanges.append(exchange)
        fit(body, schema.plan(type(body)._message_name, version))
        frame = kproto.encode_request(
            body, version=version, correlation_id=self.correlation_id, client_id=CLIENT_ID, size_prefixed=True
        )
        try:
            self.sock.sendall(frame)
            payload = self._next_frame()
        except TimeoutError:
            exchange.outcome, exchange.detail = "timeout", f"no answer in {ANSWER_TIMEOUT:.0f} s"
            self.close()
            return None
        except OSError as error:
            payload, exchange.detail = None, str(error)
        if payload is None:
            exchange.outcome = "closed"
            self.close()  # the next call opens a new connection
            return None
        try:
            response = kproto.decode_response(payload, key, version, lazy=False)
        except KprotoError as error:
            exchange.outcome, exchange.detail = "undecodable", str(error)
            return None
        exchange.errors = tuple(error_codes(response.body))
        return response.body


# ---------------------------------------------------------------- bodies
def message(message_name: str, /, **fields: Any) -> schema.Message:
    return schema.message_class(message_name)(**fields)


def sub(message_name: str, path: str, /, **fields: Any) -> schema.Message:
    """A nested struct of message ``message_name``: ``path`` is the dotted chain of its field names."""
    cls = schema.message_class(message_name)
    for part in path.split("."):
        cls = cls._field_struct[cls._field_names.index(part)]
    return cls(**fields)


def record_batches(codec: str, base_timestamp: int) -> list[bytes]:
    """Record-batch shapes for one codec: several records with headers, null key, null value, empty."""
    many = [
        Record(
            key=f"key-{i}".encode(),
            value=(f"value-{i}-" * (i + 1)).encode(),
            headers=[("trace", f"t{i}".encode()), ("dup", b"1"), ("dup", None)],
            timestamp=base_timestamp + i,
        )
        for i in range(5)
    ]
    odd = [
        Record(key=None, value=b"null key", timestamp=base_timestamp),
        Record(key=b"null value", value=None, timestamp=base_timestamp + 1),
        Record(key=b"", value=b"", headers=[("", b"")], timestamp=base_timestamp + 2),
    ]
    return [RecordBatch.encode(many, compression=codec), RecordBatch.encode(odd, compression=codec)]


class Session:
    """The whole kproto session against one broker (tools/kafka_broker.Broker)."""

    def __init__(self, broker: Any, log: SessionLog | None = None) -> None:
        self.broker = broker
        self.log = log or SessionLog()
        self.link = Link(broker.address("PLAINTEXT"), "PLAINTEXT", self.log)
        suffix = uuid.uuid4().hex[:8]
        self.topic = f"kproto-traffic-{suffix}"
        self.scratch_topic = f"kproto-scratch-{suffix}"
        self.group = f"kproto-group-{suffix}"
        self.topic_id = uuid.UUID(int=0)
        self.produced = 0

    # the newest version both sides know, or None
    def version(self, key: int) -> int | None:
        common = self.common_versions(key)
        return common[-1] if common else None

    def common_versions(self, key: int) -> list[int]:
        if key not in self.log.advertised or key not in schema.api_keys():
            return []
        low, high = self.log.advertised[key]
        k_low, k_high = schema.spec(schema.request_name(key))["valid_versions"]
        return list(range(max(low, k_low), min(high, k_high) + 1))

    def call(
        self,
        key: int,
        make: Callable[[int], schema.Message | None],
        *,
        every: bool = False,
        versions: list[int] | None = None,
        link: Link | None = None,
    ) -> Any:
        """Send ``make(version)`` at the newest common version (or each one); the last answer."""
        if versions is None:
            versions = self.common_versions(key)
            if not every:
                versions = versions[-1:]
        answer = None
        for version in versions:
            body = make(version)
            if body is not None:
                answer = (link or self.link).call(body, version)
        return answer

    def run(self) -> SessionLog:
        try:
            self.api_versions()
            self.topics()
            self.produce_and_fetch()
            self.classic_group()
            self.sasl()
            self.share_group()
            self.standalone()
            self.call(
                20,
                lambda v: (
                    message("DeleteTopicsRequest", topic_names=[self.scratch_topic], timeout_ms=5000)
                    if v < 6
                    else message(
                        "DeleteTopicsRequest",
                        timeout_ms=5000,
                        topics=[sub("DeleteTopicsRequest", "topics", name=self.scratch_topic)],
                    )
                ),
            )
        finally:
            self.link.close()
        return self.log

    # ------------------------------------------------------------ steps
    def api_versions(self) -> None:
        from kproto.versions import api_versions_request

        top = schema.spec("ApiVersionsRequest")["valid_versions"][1]
        answer = None
        for version in range(top + 1):
            body = self.link.call(api_versions_request(version), version)
            if body is not None and body.error_code == 0:
                answer = body
        if answer is None:
            raise RuntimeError("the broker answered no ApiVersions request")
        self.log.advertised = {e.api_key: (e.min_version, e.max_version) for e in answer.api_keys}

    def topics(self) -> None:
        topic = sub("CreateTopicsRequest", "topics", name=self.topic, num_partitions=1, replication_factor=1)
        scratch = sub(
            "CreateTopicsRequest",
            "topics",
            name=self.scratch_topic,
            num_partitions=2,
            replication_factor=-1,
            configs=[sub("CreateTopicsRequest", "topics.configs", name="retention.ms", value="3600000")],
        )
        self.call(19, lambda v: message("CreateTopicsRequest", topics=[topic, scratch], timeout_ms=10000))
        names = [sub("MetadataRequest", "topics", name=self.topic)]
        for version in self.common_versions(3):
            body = self.link.call(
                message("MetadataRequest", topics=None if version else [], allow_auto_topic_creation=False), version
            )
            body = self.link.call(
                message(
                    "MetadataRequest",
                    topics=names,
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=version >= 8,
                ),
                version,
            )
            if body is not None:
                for item in body.topics:
                    if item.name == self.topic and item.topic_id.int:
                        self.topic_id = item.topic_id
        self.wait_for_leader(names)

    def wait_for_leader(self, names: list, timeout: float = 30.0) -> None:
        """Metadata until the new topic's partition has a leader, as a client does before producing."""
        version = self.version(3)
        deadline = time.monotonic() + timeout
        while version is not None and time.monotonic() < deadline:
            body = self.link.call(message("MetadataRequest", topics=names, allow_auto_topic_creation=False), version)
            topics = [t for t in body.topics if t.name == self.topic] if body is not None else []
            if (
                topics
                and not topics[0].error_code
                and topics[0].partitions
                and not topics[0].partitions[0].error_code
                and topics[0].partitions[0].leader_id >= 0
            ):
                if topics[0].topic_id.int:
                    self.topic_id = topics[0].topic_id
                return
            time.sleep(0.2)
        self.log.notes.append(f"{self.topic} had no leader within {timeout:.0f} s")

    def produce_and_fetch(self) -> None:
        base = int(time.time() * 1000)
        produce = self.version(0)
        for codec in CODECS:
            for batch in record_batches(codec, base):
                self.produced += len(list(RecordBatch(batch)))
                part = sub("ProduceRequest", "topic_data.partition_data", index=0, records=batch)
                data = sub(
                    "ProduceRequest", "topic_data", name=self.topic, topic_id=self.topic_id, partition_data=[part]
                )
                for _attempt in range(50):
                    # a new partition's leader is in the metadata a moment before it takes writes:
                    # NOT_LEADER_OR_FOLLOWER then, retried as Java's producer does
                    answer = self.call(
                        0,
                        lambda v, data=data: message("ProduceRequest", acks=-1, timeout_ms=10000, topic_data=[data]),
                        versions=[produce] if produce is not None else [],
                    )
                    if (
                        answer is None
                        or set(error_codes(answer)) - {NOT_LEADER_OR_FOLLOWER}
                        or not any(error_codes(answer))
                    ):
                        break
                    time.sleep(0.1)

        def fetch(version: int) -> schema.Message:
            part = sub("FetchRequest", "topics.partitions", partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
            topic = sub("FetchRequest", "topics", topic=self.topic, topic_id=self.topic_id, partitions=[part])
            return message(
                "FetchRequest",
                replica_id=-1,
                max_wait_ms=FETCH_WAIT_MS,
                min_bytes=1,
                max_bytes=1 << 22,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[topic],
            )

        fetchable = [v for v in self.common_versions(1) if v >= 4]  # magic 2 is read from v4 on
        self.call(1, fetch, versions=fetchable[-3:])

        def list_offsets(version: int, stamp: int = -1) -> schema.Message:
            part = sub("ListOffsetsRequest", "topics.partitions", partition_index=0, timestamp=stamp, max_num_offsets=1)
            return message(
                "ListOffsetsRequest",
                replica_id=-1,
                topics=[sub("ListOffsetsRequest", "topics", name=self.topic, partitions=[part])],
            )

        self.call(2, list_offsets, every=True)
        for stamp in (-2, base, -3):  # earliest, by time, max timestamp (v7+)
            self.call(2, lambda v, stamp=stamp: list_offsets(v, stamp) if v >= 7 or stamp != -3 else None)

    def classic_group(self) -> None:
        """FindCoordinator, then a classic consumer group of one member through its whole life."""
        self.call(
            10,
            lambda v: message("FindCoordinatorRequest", key=self.group, key_type=0, coordinator_keys=[self.group]),
            every=True,
        )
        self.wait_for_coordinator()
        join_v, sync_v = self.version(11), self.version(14)
        if join_v is None or sync_v is None:
            self.log.notes.append("no JoinGroup / SyncGroup version in common: classic group skipped")
            return
        subscription = struct.pack(">h", 3) + message("ConsumerProtocolSubscription", topics=[self.topic]).encode(3)
        protocol = sub("JoinGroupRequest", "protocols", name="range", metadata=subscription)

        def join(member_id: str) -> Any:
            return self.link.call(
                message(
                    "JoinGroupRequest",
                    group_id=self.group,
                    session_timeout_ms=30000,
                    rebalance_timeout_ms=30000,
                    member_id=member_id,
                    protocol_type="consumer",
                    protocols=[protocol],
                ),
                join_v,
            )

        joined = None
        for _attempt in range(50):  # the coordinator may still be loading the group's partition
            joined = join(joined.member_id if joined is not None else "")
            if joined is None or joined.error_code not in (MEMBER_ID_REQUIRED, *RETRIABLE):
                break
            if joined.error_code != MEMBER_ID_REQUIRED:
                time.sleep(0.2)
        if joined is None or joined.error_code:
            code = "no answer" if joined is None else error_name(joined.error_code)
            self.log.notes.append(f"JoinGroup failed ({code}): the rest of the classic group skipped")
            return
        member, generation = joined.member_id, joined.generation_id
        assignment = struct.pack(">h", 3) + message(
            "ConsumerProtocolAssignment",
            assigned_partitions=[
                sub("ConsumerProtocolAssignment", "assigned_partitions", topic=self.topic, partitions=[0])
            ],
        ).encode(3)
        self.link.call(
            message(
                "SyncGroupRequest",
                group_id=self.group,
                generation_id=generation,
                member_id=member,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[sub("SyncGroupRequest", "assignments", member_id=member, assignment=assignment)],
            ),
            sync_v,
        )
        self.call(
            12, lambda v: message("HeartbeatRequest", group_id=self.group, generation_id=generation, member_id=member)
        )
        commit_part = sub(
            "OffsetCommitRequest",
            "topics.partitions",
            partition_index=0,
            committed_offset=self.produced,
            committed_metadata="kproto",
        )
        self.call(
            8,
            lambda v: message(
                "OffsetCommitRequest",
                group_id=self.group,
                generation_id_or_member_epoch=generation,
                member_id=member,
                topics=[
                    sub(
                        "OffsetCommitRequest",
                        "topics",
                        name=self.topic,
                        topic_id=self.topic_id,
                        partitions=[commit_part],
                    )
                ],
            ),
        )
        self.offset_fetch()
        self.call(
            15,
            lambda v: message("DescribeGroupsRequest", groups=[self.group], include_authorized_operations=v >= 3),
            every=True,
        )
        self.call(
            13,
            lambda v: message(
                "LeaveGroupRequest",
                group_id=self.group,
                member_id=member,
                members=[sub("LeaveGroupRequest", "members", member_id=member, reason="kproto session ends")],
            ),
        )

    def wait_for_coordinator(self, timeout: float = 30.0) -> None:
        """FindCoordinator until the group coordinator is up (the offsets topic is made on first ask)."""
        version = self.version(10)
        deadline = time.monotonic() + timeout
        while version is not None and time.monotonic() < deadline:
            found = self.link.call(
                message("FindCoordinatorRequest", key=self.group, key_type=0, coordinator_keys=[self.group]), version
            )
            codes = list(error_codes(found)) if found is not None else [-1]
            if not codes:
                return
            time.sleep(0.2)
        self.log.notes.append("the group coordinator was not available in time")

    def share_group(self) -> None:
        """A share group's member: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge, then it leaves."""
        beat_v, fetch_v, ack_v = self.version(76), self.version(78), self.version(79)
        if beat_v is None:
            return
        group, member = f"{self.group}-share", str(uuid.uuid4())

        def beat(epoch: int) -> Any:
            return self.link.call(
                message(
                    "ShareGroupHeartbeatRequest",
                    group_id=group,
                    member_id=member,
                    member_epoch=epoch,
                    subscribed_topic_names=[self.topic] if epoch == 0 else None,
                ),
                beat_v,
            )

        joined = beat(0)
        epoch = joined.member_epoch if joined is not None and not joined.error_code else 0
        if fetch_v is not None:  # sent even when the group could not be joined: its answer is a fact
            part = sub("ShareFetchRequest", "topics.partitions", partition_index=0, partition_max_bytes=1 << 20)
            self.link.call(
                message(
                    "ShareFetchRequest",
                    group_id=group,
                    member_id=member,
                    share_session_epoch=0,
                    max_wait_ms=FETCH_WAIT_MS,
                    min_bytes=1,
                    max_bytes=1 << 22,
                    max_records=50,
                    batch_size=50,
                    topics=[sub("ShareFetchRequest", "topics", topic_id=self.topic_id, partitions=[part])],
                ),
                fetch_v,
            )
            if ack_v is not None:
                ack = sub(
                    "ShareAcknowledgeRequest",
                    "topics.partitions.acknowledgement_batches",
                    first_offset=0,
                    last_offset=0,
                    acknowledge_types=[1],
                )
                part = sub(
                    "ShareAcknowledgeRequest", "topics.partitions", partition_index=0, acknowledgement_batches=[ack]
                )
                self.link.call(
                    message(
                        "ShareAcknowledgeRequest",
                        group_id=group,
                        member_id=member,
                        share_session_epoch=1,
                        topics=[sub("ShareAcknowledgeRequest", "topics", topic_id=self.topic_id, partitions=[part])],
                    ),
                    ack_v,
                )
        if epoch:
            beat(-1)

    def offset_fetch(self) -> None:
        def body(version: int) -> schema.Message:
            if version < 8:
                return message(
                    "OffsetFetchRequest",
                    group_id=self.group,
                    topics=[sub("OffsetFetchRequest", "topics", name=self.topic, partition_indexes=[0])],
                )
            topic = sub(
                "OffsetFetchRequest", "groups.topics", name=self.topic, topic_id=self.topic_id, partition_indexes=[0]
            )
            return message(
                "OffsetFetchRequest", groups=[sub("OffsetFetchRequest", "groups", group_id=self.group, topics=[topic])]
            )

        self.call(9, body, every=True)

    def sasl(self) -> None:
        """SaslHandshake (PLAIN) and SaslAuthenticate on the SASL listener, then one request on it."""
        from kafka_broker import SASL_MECHANISM, SASL_PASSWORD, SASL_USER

        link = Link(self.broker.address("SASL_PLAINTEXT"), "SASL_PLAINTEXT", self.log)
        try:
            versions = self.common_versions(17)
            auth = self.version(36)
            if not versions or auth is None:
                self.log.notes.append("no SaslHandshake / SaslAuthenticate in common: SASL skipped")
                return
            handshake = link.call(message("SaslHandshakeRequest", mechanism=SASL_MECHANISM), versions[-1])
            if handshake is None or handshake.error_code:
                return
            token = b"\0" + SASL_USER.encode() + b"\0" + SASL_PASSWORD.encode()
            link.call(message("SaslAuthenticateRequest", auth_bytes=token), auth)
            self.call(3, lambda v: message("MetadataRequest", topics=None, allow_auto_topic_creation=False), link=link)
        finally:
            link.close()

    def standalone(self) -> None:
        """Every API the broker advertises that the core steps did not send, with a harmless body."""
        done = self.log.apis() | {17, 20, 36}  # SASL: its own listener; DeleteTopics: at the end
        for key in sorted(self.log.advertised):
            if key in done or key not in schema.api_keys():
                continue
            make = STANDALONE.get(key)
            if make is None:
                self.log.notes.append(f"{api_name(key)}: no minimal body, not sent")
                continue
            versions = [v for v in self.common_versions(key) if v <= CLIENT_MAX.get(key, v)]
            self.call(
                key, lambda v, make=make: make(self, v), versions=versions if key in EVERY_VERSION else versions[-1:]
            )


def _configs(s: Session, v: int) -> schema.Message:
    return message(
        "DescribeConfigsRequest",
        include_synonyms=v >= 1,
        include_documentation=v >= 3,
        resources=[
            sub("DescribeConfigsRequest", "resources", resource_type=2, resource_name=s.topic, configuration_keys=None),
            sub(
                "DescribeConfigsRequest",
                "resources",
                resource_type=4,
                resource_name="1",
                configuration_keys=["log.retention.ms", "num.io.threads"],
            ),
        ],
    )


_NOBODY = 987654  # a broker / voter id no cluster of the tests has
_ANY = 1  # ACL filters: ANY resource / pattern / operation / permission

#: api_key -> (session, version) -> a minimal body that changes nothing, or None to skip that version.
STANDALONE: dict[int, Callable[[Session, int], schema.Message | None]] = {
    16: lambda s, v: message("ListGroupsRequest", states_filter=[], types_filter=[]),
    21: lambda s, v: message(
        "DeleteRecordsRequest",
        timeout_ms=5000,
        topics=[
            sub(
                "DeleteRecordsRequest",
                "topics",
                name=s.topic,
                partitions=[sub("DeleteRecordsRequest", "topics.partitions", partition_index=0, offset=1)],
            )
        ],
    ),
    22: lambda s, v: message("InitProducerIdRequest", transactional_id=None, transaction_timeout_ms=60000),
    23: lambda s, v: message(
        "OffsetForLeaderEpochRequest",
        replica_id=-1,
        topics=[
            sub(
                "OffsetForLeaderEpochRequest",
                "topics",
                topic=s.topic,
                partitions=[sub("OffsetForLeaderEpochRequest", "topics.partitions", partition=0, leader_epoch=0)],
            )
        ],
    ),
    24: lambda s, v: (
        message(
            "AddPartitionsToTxnRequest",
            v3_and_below_transactional_id="kproto-no-txn",
            v3_and_below_producer_id=_NOBODY,
            v3_and_below_topics=[sub("AddPartitionsToTxnRequest", "v3_and_below_topics", name=s.topic, partitions=[0])],
        )
        if v <= 3
        else None
    ),
    25: lambda s, v: message(
        "AddOffsetsToTxnRequest",
        transactional_id="kproto-no-txn",
        producer_id=_NOBODY,
        producer_epoch=0,
        group_id=s.group,
    ),
    26: lambda s, v: message(
        "EndTxnRequest", transactional_id="kproto-no-txn", producer_id=_NOBODY, producer_epoch=0, committed=False
    ),
    27: lambda s, v: message("WriteTxnMarkersRequest", markers=[]),
    28: lambda s, v: message(
        "TxnOffsetCommitRequest",
        transactional_id="kproto-no-txn",
        group_id=s.group,
        producer_id=_NOBODY,
        producer_epoch=0,
        topics=[],
    ),
    29: lambda s, v: message(
        "DescribeAclsRequest",
        resource_type_filter=_ANY,
        resource_name_filter=None,
        pattern_type_filter=_ANY if v else 3,
        principal_filter=None,
        host_filter=None,
        operation=_ANY,
        permission_type=_ANY,
    ),
    30: lambda s, v: message("CreateAclsRequest", creations=[]),
    31: lambda s, v: message("DeleteAclsRequest", filters=[]),
    32: _configs,
    33: lambda s, v: message("AlterConfigsRequest", resources=[], validate_only=True),
    34: lambda s, v: message("AlterReplicaLogDirsRequest", dirs=[]),
    35: lambda s, v: message("DescribeLogDirsRequest", topics=None),
    37: lambda s, v: message("CreatePartitionsRequest", topics=[], timeout_ms=5000, validate_only=True),
    38: lambda s, v: message("CreateDelegationTokenRequest", renewers=[], max_lifetime_ms=-1),
    39: lambda s, v: message("RenewDelegationTokenRequest", hmac=b"kproto", renew_period_ms=-1),
    40: lambda s, v: message("ExpireDelegationTokenRequest", hmac=b"kproto", expiry_time_period_ms=-1),
    41: lambda s, v: message("DescribeDelegationTokenRequest", owners=None),
    42: lambda s, v: message("DeleteGroupsRequest", groups_names=[f"{s.group}-never"]),
    43: lambda s, v: message("ElectLeadersRequest", election_type=0, topic_partitions=[], timeout_ms=5000),
    44: lambda s, v: message("IncrementalAlterConfigsRequest", resources=[], validate_only=True),
    45: lambda s, v: message("AlterPartitionReassignmentsRequest", timeout_ms=5000, topics=[]),
    46: lambda s, v: message("ListPartitionReassignmentsRequest", timeout_ms=5000, topics=None),
    47: lambda s, v: message("OffsetDeleteRequest", group_id=s.group, topics=[]),
    48: lambda s, v: message("DescribeClientQuotasRequest", components=[], strict=False),
    49: lambda s, v: message("AlterClientQuotasRequest", entries=[], validate_only=True),
    50: lambda s, v: message("DescribeUserScramCredentialsRequest", users=None),
    51: lambda s, v: message("AlterUserScramCredentialsRequest", deletions=[], upsertions=[]),
    55: lambda s, v: message(
        "DescribeQuorumRequest",
        topics=[
            sub(
                "DescribeQuorumRequest",
                "topics",
                topic_name="__cluster_metadata",
                partitions=[sub("DescribeQuorumRequest", "topics.partitions", partition_index=0)],
            )
        ],
    ),
    57: lambda s, v: message("UpdateFeaturesRequest", timeout_ms=5000, feature_updates=[], validate_only=True),
    60: lambda s, v: message("DescribeClusterRequest", include_cluster_authorized_operations=True, endpoint_type=1),
    61: lambda s, v: message(
        "DescribeProducersRequest",
        topics=[sub("DescribeProducersRequest", "topics", name=s.topic, partition_indexes=[0])],
    ),
    64: lambda s, v: message("UnregisterBrokerRequest", broker_id=_NOBODY),
    65: lambda s, v: message("DescribeTransactionsRequest", transactional_ids=["kproto-no-txn"]),
    66: lambda s, v: message("ListTransactionsRequest", state_filters=[], producer_id_filters=[]),
    68: lambda s, v: message(
        "ConsumerGroupHeartbeatRequest",
        group_id=f"{s.group}-next",
        member_id=str(uuid.uuid4()) if v >= 1 else "",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=[s.topic],
        topic_partitions=[],
    ),
    69: lambda s, v: message(
        "ConsumerGroupDescribeRequest", group_ids=[f"{s.group}-next"], include_authorized_operations=True
    ),
    74: lambda s, v: message("ListConfigResourcesRequest", resource_types=[2] if v else []),
    75: lambda s, v: message(
        "DescribeTopicPartitionsRequest",
        topics=[sub("DescribeTopicPartitionsRequest", "topics", name=s.topic)],
        response_partition_limit=100,
    ),
    76: lambda s, v: message(
        "ShareGroupHeartbeatRequest",
        group_id=f"{s.group}-share",
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        subscribed_topic_names=[s.topic],
    ),
    77: lambda s, v: message(
        "ShareGroupDescribeRequest", group_ids=[f"{s.group}-share"], include_authorized_operations=True
    ),
    80: lambda s, v: message(
        "AddRaftVoterRequest",
        cluster_id=None,
        timeout_ms=5000,
        voter_id=_NOBODY,
        voter_directory_id=uuid.uuid4(),
        listeners=[sub("AddRaftVoterRequest", "listeners", name="CONTROLLER", host="127.0.0.1", port=9)],
    ),
    81: lambda s, v: message(
        "RemoveRaftVoterRequest", cluster_id=None, voter_id=_NOBODY, voter_directory_id=uuid.uuid4()
    ),
    83: lambda s, v: message("InitializeShareGroupStateRequest", group_id=f"{s.group}-share-never", topics=[]),
    84: lambda s, v: message("ReadShareGroupStateRequest", group_id=f"{s.group}-share-never", topics=[]),
    85: lambda s, v: message("WriteShareGroupStateRequest", group_id=f"{s.group}-share-never", topics=[]),
    86: lambda s, v: message("DeleteShareGroupStateRequest", group_id=f"{s.group}-share-never", topics=[]),
    87: lambda s, v: message("ReadShareGroupStateSummaryRequest", group_id=f"{s.group}-share-never", topics=[]),
    88: lambda s, v: message(
        "StreamsGroupHeartbeatRequest",
        group_id=f"{s.group}-streams",
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        rebalance_timeout_ms=30000,
        process_id=str(uuid.uuid4()),
        active_tasks=[],
        standby_tasks=[],
        warmup_tasks=[],
        topology=sub(
            "StreamsGroupHeartbeatRequest",
            "topology",
            epoch=0,
            subtopologies=[
                sub(
                    "StreamsGroupHeartbeatRequest",
                    "topology.subtopologies",
                    subtopology_id="0",
                    source_topics=[s.topic],
                )
            ],
        ),
    ),
    89: lambda s, v: message(
        "StreamsGroupDescribeRequest", group_ids=[f"{s.group}-streams"], include_authorized_operations=True
    ),
    90: lambda s, v: message(
        "DescribeShareGroupOffsetsRequest",
        groups=[sub("DescribeShareGroupOffsetsRequest", "groups", group_id=f"{s.group}-share", topics=None)],
    ),
    91: lambda s, v: message("AlterShareGroupOffsetsRequest", group_id=f"{s.group}-share-never", topics=[]),
    92: lambda s, v: message("DeleteShareGroupOffsetsRequest", group_id=f"{s.group}-share-never", topics=[]),
    93: lambda s, v: message("StreamsGroupTopologyDescriptionUpdateRequest", group_id=f"{s.group}-streams"),
    94: lambda s, v: message("UnregisterControllerRequest", controller_id=_NOBODY),
}

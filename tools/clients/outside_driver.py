"""Software outside the fingerprint table, for tools/record_clients.py --held-out: it must come out `unknown`.

    python outside_driver.py kproto|codec BOOTSTRAP PREFIX TOPIC COUNT

Two small clients written on kproto, through the steps every driver runs (``STEP <label> ok|FAILED
<why>``): producer, group, admin, default-id-producer.

- ``kproto``: kproto's own handshake (ApiVersions at its newest version, with the KIP-511 name
  "kproto"), then each request at the version kproto and the broker negotiate.
- ``codec``: a client an operator might write on the codec alone: ApiVersions v0 (no KIP-511
  name), then versions chosen by hand (ones Kafka 4.x still serves), and no client.id at all
  (null) on its default-id step.

The "group" step reads the topic as a group member would before joining: FindCoordinator,
ListOffsets and Fetch (no join: the clients are here for what their requests look like).
"""

import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's kproto

import kproto  # noqa: E402
from kproto import messages as M  # noqa: E402
from kproto import versions as kv  # noqa: E402
from kproto.records import Record, RecordBatch  # noqa: E402

STEP_SECONDS = 10.0
# The codec client's hand-chosen versions (Kafka 2.1 to 4.x all serve them).
CODEC_VERSIONS = {"Metadata": 7, "Produce": 7, "FindCoordinator": 2, "ListOffsets": 4, "Fetch": 8, "DescribeConfigs": 2}


class Connection:
    """One TCP connection: requests out, responses decoded, in order."""

    def __init__(self, bootstrap, client_id, kip511):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=STEP_SECONDS)
        self.exchange = kv.socket_exchange(self.sock)
        self.client_id = client_id
        self.correlation = 10
        if kip511:
            options = {"client_id": client_id} if client_id else {}
            result = kv.handshake(self.exchange, **options)
            self.versions = {kv.api_name(key): v for key, v in kv.negotiate(None, result.response).items()}
        else:
            self.call("ApiVersions", M.ApiVersionsRequest(), 0)
            self.versions = dict(CODEC_VERSIONS)

    def call(self, api, body, version=None):
        version = self.versions[api] if version is None else version
        self.correlation += 1
        frame = kproto.encode_request(
            body, version=version, correlation_id=self.correlation, client_id=self.client_id, size_prefixed=True
        )
        return kproto.decode_response(self.exchange(frame), api, version, size_prefixed=True, lazy=False).body

    def close(self):
        self.sock.close()


def _topic(conn, topic):
    """(topic id, partition 0's leader is answered) from a Metadata request."""
    metadata = conn.call("Metadata", M.MetadataRequest(topics=[M.MetadataRequest.MetadataRequestTopic(name=topic)]))
    found = [t for t in metadata.topics if t.name == topic]
    if not found or found[0].error_code:
        raise RuntimeError(f"metadata for {topic}: {found[0].error_code if found else 'missing'}")
    return getattr(found[0], "topic_id", None)


def produce(bootstrap, client_id, kip511, topic, count):
    conn = Connection(bootstrap, client_id, kip511)
    try:
        topic_id = _topic(conn, topic)
        records = RecordBatch.encode([Record(key=b"k", value=b'{"n":%d}' % i) for i in range(count)])
        P = M.ProduceRequest
        data = P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])
        if topic_id is not None and conn.versions["Produce"] >= 13:
            data = P.TopicProduceData(topic_id=topic_id, partition_data=data.partition_data)
        answer = conn.call("Produce", P(acks=-1, timeout_ms=5000, topic_data=[data]))
        errors = [p.error_code for t in answer.responses for p in t.partition_responses if p.error_code]
        if errors:
            raise RuntimeError(f"produce errors {errors}")
    finally:
        conn.close()


def group(bootstrap, client_id, kip511, topic, prefix):
    conn = Connection(bootstrap, client_id, kip511)
    try:
        topic_id = _topic(conn, topic)
        find = M.FindCoordinatorRequest
        if conn.versions["FindCoordinator"] >= 4:
            conn.call("FindCoordinator", find(key_type=0, coordinator_keys=[prefix + "-readers"]))
        else:
            conn.call("FindCoordinator", find(key=prefix + "-readers", key_type=0))
        L = M.ListOffsetsRequest
        conn.call(
            "ListOffsets",
            L(
                replica_id=-1,
                topics=[
                    L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])
                ],
            ),
        )
        F = M.FetchRequest
        partition = F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        wanted = F.FetchTopic(topic=topic, partitions=[partition])
        if topic_id is not None and conn.versions["Fetch"] >= 13:
            wanted = F.FetchTopic(topic_id=topic_id, partitions=[partition])
        answer = conn.call("Fetch", F(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, topics=[wanted]))
        if getattr(answer, "error_code", 0):
            raise RuntimeError(f"fetch error {answer.error_code}")
    finally:
        conn.close()


def admin(bootstrap, client_id, kip511, topic):
    conn = Connection(bootstrap, client_id, kip511)
    try:
        D = M.DescribeConfigsRequest
        answer = conn.call(
            "DescribeConfigs",
            D(resources=[D.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None)]),
        )
        if any(r.error_code for r in answer.results):
            raise RuntimeError(f"describe configs errors {[r.error_code for r in answer.results]}")
    finally:
        conn.close()


def main(argv):
    kind, bootstrap, prefix, topic, count = argv[:5]
    kip511 = kind == "kproto"
    default_id = "kproto" if kip511 else None  # kproto's handshake default; the codec client sends none
    steps = [
        ("producer", lambda: produce(bootstrap, prefix + "-producer", kip511, topic, int(count))),
        ("group", lambda: group(bootstrap, prefix + "-group", kip511, topic, prefix)),
        ("admin", lambda: admin(bootstrap, prefix + "-admin", kip511, topic)),
        ("default-id-producer", lambda: produce(bootstrap, default_id, kip511, topic, int(count))),
    ]
    failed = 0
    for label, step in steps:
        started = time.monotonic()
        try:
            step()
            print(f"STEP {label} ok {time.monotonic() - started:.1f}s", flush=True)
        except Exception as exc:  # one step failing must not lose the others' traffic
            failed += 1
            print(f"STEP {label} FAILED {type(exc).__name__}: {exc}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

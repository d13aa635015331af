"""Real traffic, byte-exact (issue 36, deliver 4): tools/real_traffic.py against every broker release.

Per release, one tcpdump captures a kproto session (every API the broker advertises) and
a Java client session (the release's own kafka-clients: producers of every codec,
consumers in a group, admin client). Then: the broker closed no connection and answered
no parse-level error to a kproto request; every frame of the capture decodes and
encodes back to the same bytes, and so does every record batch, in this process's
implementation (``make test-kafka`` runs the file on the extension, then on the twin).

The first tests need no broker: the checker itself must catch a frame that does not
re-encode exactly, or these tests could not fail.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

import kproto
from kproto import schema
from kproto.messages import MetadataRequest, MetadataResponse
from tests.pcapwriter import Conversation, pcap_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import real_traffic  # noqa: E402  (tools/ is no package)
import traffic_session  # noqa: E402
from kafka_broker import release_key, releases  # noqa: E402

RELEASES = releases()
_RESULTS: dict[str, real_traffic.ReleaseResult] = {}


# ---------------------------------------------------------------- the checker, without a broker
def _capture(tmp_path, exchanges: list[tuple[bytes, bytes]]):
    talk = Conversation()
    packets = talk.handshake()
    for request, response in exchanges:
        packets += talk.data("client", request, [700]) + talk.data("server", response, [700])
    path = tmp_path / "synthetic.pcap"
    path.write_bytes(pcap_of(packets + talk.close()))
    return real_traffic.check_capture(path, [talk.server[1]])


def _metadata_exchange(correlation_id: int) -> tuple[bytes, bytes]:
    request = kproto.encode_request(
        MetadataRequest(topics=None, allow_auto_topic_creation=True),
        version=4,
        correlation_id=correlation_id,
        client_id="t",
        size_prefixed=True,
    )
    response = kproto.encode_response(
        MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092)]),
        version=4,
        correlation_id=correlation_id,
        size_prefixed=True,
    )
    return request, response


def test_checker_counts_exact_frames(tmp_path):
    check = _capture(tmp_path, [_metadata_exchange(1), _metadata_exchange(2)])
    assert (check.frames, check.exact, check.failures) == (4, 4, [])
    assert check.frames_by_client == {"t": 4} and check.apis_by_client == {"t": [3]}


def test_checker_catches_a_frame_that_does_not_reencode(tmp_path):
    request, response = _metadata_exchange(2)
    # Kafka reads any non-zero byte as true; written back it is 1: not the bytes that were sent
    assert request[-1] == 1
    odd = request[:-1] + b"\x02"
    check = _capture(tmp_path, [_metadata_exchange(1), (odd, response)])
    assert check.frames == 4 and check.exact == 3
    [failure] = check.failures
    assert failure.startswith("connection 0 correlation 2: request")


def test_checker_catches_a_response_cut_short(tmp_path):
    request, response = _metadata_exchange(1)
    short = struct.pack(">i", len(response) - 5) + response[4:-1]
    check = _capture(tmp_path, [(request, short)])
    assert check.exact == 1 and len(check.failures) == 1 and "does not decode" in check.failures[0]


def test_session_bodies_fit_every_version():
    """fit() drops what a version lacks: every standalone body encodes at every version kproto knows."""
    session = traffic_session.Session.__new__(traffic_session.Session)
    session.topic, session.group = "t", "g"
    session.topic_id = __import__("uuid").UUID(int=1)
    for key, make in traffic_session.STANDALONE.items():
        low, high = schema.spec(schema.request_name(key))["valid_versions"]
        for version in range(low, high + 1):
            body = make(session, version)
            if body is not None:
                traffic_session.fit(body, schema.plan(type(body)._message_name, version))
                kproto.encode_request(body, version=version, correlation_id=1, client_id="t")


# ---------------------------------------------------------------- real brokers
def _result(broker, tmp_path_factory) -> real_traffic.ReleaseResult:
    if broker.release not in _RESULTS:
        workdir = tmp_path_factory.mktemp(f"traffic-{broker.release}")
        _RESULTS[broker.release] = real_traffic.run_release(broker, workdir, java=True, twin=False)
    return _RESULTS[broker.release]


@pytest.mark.kafka
@pytest.mark.parametrize("kafka_release", RELEASES)
def test_kproto_requests_are_all_answered(kafka_broker, kafka_release, tmp_path_factory):
    result = _result(kafka_broker, tmp_path_factory)
    assert result.session.findings() == []
    assert result.session.notes == []  # every step ran: topic led, group joined, nothing skipped
    # every batch stored: the last answer to each is clean (a new partition's leader may first say
    # NOT_LEADER_OR_FOLLOWER, which the session retries)
    produce = [e for e in result.session.exchanges if e.api_key == 0]
    assert {code for e in produce for code in e.errors} <= {traffic_session.NOT_LEADER_OR_FOLLOWER}
    assert sum(not e.errors for e in produce) == 2 * len(traffic_session.CODECS)
    advertised = {key for key in result.session.advertised if key in schema.api_keys()}
    assert advertised - result.session.apis() == set(), result.session.notes
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 17, 18, 19, 32, 36, 60} <= result.session.apis()


@pytest.mark.kafka
@pytest.mark.parametrize("kafka_release", RELEASES)
def test_every_captured_frame_is_byte_exact(kafka_broker, kafka_release, tmp_path_factory):
    [check] = _result(kafka_broker, tmp_path_factory).checks
    assert check.implementation == ("c" if kproto.extension_loaded() else "py")
    assert check.failures == []
    # a Java client may close with a request in flight (a consumer's long-polling Fetch); kproto never does
    assert [u for u in check.unanswered if not u.startswith("java-")] == []
    assert check.frames > 300 and check.exact == check.frames
    # every batch read back: kproto's own (and Java's uncompressed) byte for byte, Java's compressed
    # ones at least record for record (another compressor's bytes)
    assert check.batches >= 40 and check.batches_exact + check.batches_records_exact == check.batches


@pytest.mark.kafka
@pytest.mark.parametrize("kafka_release", RELEASES)
def test_java_client_traffic_is_byte_exact(kafka_broker, kafka_release, tmp_path_factory):
    result = _result(kafka_broker, tmp_path_factory)
    [check] = result.checks
    assert "done" in result.java_output.split()
    java = {client: n for client, n in check.frames_by_client.items() if client.startswith("java-")}
    assert {f"java-producer-{codec}" for codec in traffic_session.CODECS} | {
        "java-admin",
        "java-consumer-classic",
    } <= set(java)
    apis = {key for client, keys in check.apis_by_client.items() if client.startswith("java-") for key in keys}
    assert {0, 1, 3, 8, 9, 10, 11, 13, 14, 18, 19, 22, 26, 28} <= apis  # Heartbeat only if the session lasts
    assert "java-producer-txn" in java
    # the broker's own client writes the transaction markers to itself; Fetch brings them back
    all_apis = {key for keys in check.apis_by_client.values() for key in keys}
    assert 27 in all_apis and check.control_batches >= 2
    if release_key(kafka_release) >= (4, 0, 0):
        assert 68 in apis and "java-consumer-consumer" in java  # the KIP-848 consumer
    assert check.exact == check.frames

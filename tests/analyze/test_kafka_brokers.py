"""Against real Apache Kafka brokers (issue 36): each release of scripts/install-kafka.sh
started once (tools/kafka_broker.py), one at a time, and asked:

* its ApiVersions answer equals the recording kproto's broker-release table holds
  (kproto/broker_recordings.py, by tools/record_brokers.py), on both listeners;
* ``kproto versions`` names its release from that answer (the raw frame, as a user would
  save it), or says which releases it cannot tell apart;
* every KIP-896 deprecated / 4.x removed version, and the lowest kept one, sent as kproto
  encodes it, gets the answer recorded (closed connection, or an answer) and the one
  kproto's facts predict;
* the SASL_PLAINTEXT listener authenticates the test user with PLAIN through kproto's messages.

Run with ``make test-kafka`` (marked ``kafka``: ``make test`` skips it). A missing Java or
release is a failure naming scripts/install-kafka.sh, never a skip.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

import kproto
from kproto import broker_recordings
from kproto import versions as v
from kproto.analyze.cli import main as kproto_main
from kproto.messages import SaslAuthenticateRequest, SaslHandshakeRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import kafka_broker as broker_tool  # noqa: E402  (tools/ is no package)
import record_brokers  # noqa: E402

pytestmark = pytest.mark.kafka
RELEASES = broker_tool.releases()


def recorded(name: str) -> dict[int, tuple[int, int]]:
    return {key: (lo, hi) for release, key, lo, hi in broker_recordings.API_VERSIONS if release == name}


def ask_api_versions(broker, listener: str, version: int) -> bytes:
    """The raw ApiVersionsResponse frame (size-prefixed) for a request at ``version``."""
    frame = v.encode_api_versions_request(correlation_id=11, version=version, size_prefixed=True)
    answer = record_brokers.exchange_one(broker.address(listener), frame)
    assert isinstance(answer, bytes), f"{broker.release} {listener}: {answer}"
    return len(answer).to_bytes(4, "big") + answer


@pytest.mark.parametrize("kafka_release", RELEASES)
def test_api_versions_equal_the_recording(kafka_broker, kafka_release):
    name = record_brokers.table_name(kafka_release)
    assert broker_recordings.RECORDED_FROM[name] == kafka_release
    assert kafka_broker.api_versions.ranges == recorded(name) == v.release_table(name)
    for listener in ("PLAINTEXT", "SASL_PLAINTEXT"):  # before authentication, on the SASL listener too
        response = kproto.decode_response(ask_api_versions(kafka_broker, listener, 3), 18, 3, size_prefixed=True)
        assert response.body.error_code == 0
        assert v.as_ranges(response.body) == recorded(name), listener


@pytest.mark.parametrize("kafka_release", RELEASES)
def test_kproto_versions_names_the_release(kafka_broker, kafka_release, tmp_path, capsys):
    name = record_brokers.table_name(kafka_release)
    path = tmp_path / "api-versions.bin"
    path.write_bytes(ask_api_versions(kafka_broker, "PLAINTEXT", 3))
    assert kproto_main(["versions", "--response", str(path)]) == 0
    inferred = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Inferred release: ")]
    assert inferred == [
        f"Inferred release: {name} (exact match with the answer of a real {kafka_release} broker; "
        f"patch releases that advertise the same versions are not told apart)"
    ]
    match = v.infer_release(kafka_broker.api_versions.response)
    assert (match.exact, match.release) == ((name,), name)


@pytest.mark.parametrize("kafka_release", RELEASES)
def test_removed_and_kept_versions_get_the_recorded_answer(kafka_broker, kafka_release):
    name = record_brokers.table_name(kafka_release)
    expected = {
        (key, version): (outcome, detail)
        for release, key, version, outcome, detail in broker_recordings.PROBES
        if release == name
    }
    plan = record_brokers.probe_plan()
    assert set(plan) == set(expected), "kproto's removal tables changed: run tools/record_brokers.py again"
    seen = {
        (key, version): record_brokers.probe(kafka_broker, key, version, correlation_id=n)
        for n, (key, version) in enumerate(plan, 1)
    }
    assert {k: seen[k] for k in plan if seen[k] != expected[k]} == {}
    # and what kproto's facts say this release serves is what it served
    for key, version in plan:
        served = name in v.version_info(key, version).releases
        assert served == (seen[key, version][0] == "answered"), (v.api_label(key), version)
    # the broker survived every probe
    assert kafka_broker.process.poll() is None


@pytest.mark.parametrize("kafka_release", RELEASES)
def test_sasl_plain_authenticates_the_test_user(kafka_broker, kafka_release):
    def authenticate(password: str) -> tuple[int, int]:
        with socket.create_connection(kafka_broker.address("SASL_PLAINTEXT"), timeout=10) as sock:
            exchange = v.socket_exchange(sock)
            shake = kproto.encode_request(
                SaslHandshakeRequest(mechanism="PLAIN"),
                version=1,
                correlation_id=1,
                client_id="kproto-test",
                size_prefixed=True,
            )
            handshake = kproto.decode_response(exchange(shake), 17, 1, size_prefixed=True).body
            token = b"\0" + broker_tool.SASL_USER.encode() + b"\0" + password.encode()
            auth = kproto.encode_request(
                SaslAuthenticateRequest(auth_bytes=token),
                version=2,
                correlation_id=2,
                client_id="kproto-test",
                size_prefixed=True,
            )
            answer = kproto.decode_response(exchange(auth), 36, 2, size_prefixed=True).body
            return handshake.error_code, answer.error_code

    assert authenticate(broker_tool.SASL_PASSWORD) == (0, 0)
    assert authenticate("wrong") == (0, 58)  # SASL_AUTHENTICATION_FAILED


def test_each_release_was_started_once(kafka_brokers):
    """Runs after the parametrized tests (conftest orders them by release): one start each."""
    started = kafka_brokers.started
    assert len(started) == len(set(started)), started

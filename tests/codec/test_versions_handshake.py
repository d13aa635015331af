"""KIP-511: the ApiVersions handshake and its fallback, end to end against simulated
brokers built with kproto's own codec (in process, and over a socket on 127.0.0.1),
and the ClientSoftwareName / ClientSoftwareVersion rules."""

from __future__ import annotations

import socket
import threading

import pytest

import kproto
from kproto import versions as v
from kproto.framing import FrameReader
from kproto.messages import ApiVersionsResponse

#: kproto's newest ApiVersions version (v5 since Kafka 4.4): the handshake starts there
NEWEST = v.api_info(18).max_version


class FakeBroker:
    """A broker that speaks ApiVersions v0..max_version only.

    A newer request gets what real brokers send: a v0 body with UNSUPPORTED_VERSION,
    whose ApiKeys holds the broker's own ApiVersions range when it implements
    KIP-511 (Kafka 2.4+) and nothing before. Invalid software names get INVALID_REQUEST.
    """

    def __init__(
        self, max_version: int, *, kip511: bool = True, advertise_max: int | None = None, release: str = "2.3"
    ) -> None:
        self.max_version = max_version
        self.kip511 = kip511
        self.advertise_max = max_version if advertise_max is None else advertise_max
        self.table = v.release_table(release)
        self.table[18] = (0, max_version)
        self.seen: list[tuple[int, str | None, str | None, list[str]]] = []

    def __call__(self, frame: bytes) -> bytes:
        request, problems = v.decode_api_versions_request(frame, size_prefixed=True)
        body = request.body
        software = (
            (body.client_software_name, body.client_software_version) if request.api_version >= 3 else (None, None)
        )
        self.seen.append((request.api_version, *software, problems))
        version = request.api_version
        if version > self.max_version:
            keys = (
                [ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=self.advertise_max)]
                if self.kip511
                else []
            )
            answer = ApiVersionsResponse(error_code=v.UNSUPPORTED_VERSION, api_keys=keys)
            return kproto.encode_response(answer, version=0, correlation_id=request.correlation_id, size_prefixed=True)
        if problems:
            answer = ApiVersionsResponse(error_code=v.INVALID_REQUEST)
        else:
            answer = ApiVersionsResponse(
                error_code=0,
                api_keys=[
                    ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                    for k, (lo, hi) in sorted(self.table.items())
                ],
            )
        return kproto.encode_response(
            answer, version=version, correlation_id=request.correlation_id, size_prefixed=True
        )


# ---------------------------------------------------------------- the fallback
def test_kip511_broker_on_v0_to_2_tells_the_client_its_max():
    broker = FakeBroker(2, kip511=True)
    result = v.handshake(broker)
    assert result.attempts == [NEWEST, 2]  # highest first, then the broker's own max
    assert result.version == 2
    assert result.ranges == broker.table
    first = broker.seen[0]
    assert first[:3] == (NEWEST, v.DEFAULT_CLIENT_SOFTWARE_NAME, v.DEFAULT_CLIENT_SOFTWARE_VERSION)
    assert first[3] == []  # kproto's own name and version are valid


def test_pre_kip511_broker_sends_empty_api_keys_so_the_client_falls_back_to_v0():
    broker = FakeBroker(2, kip511=False)
    result = v.handshake(broker)
    assert result.attempts == [NEWEST, 0]
    assert result.ranges[18] == (0, 2)


def test_broker_on_v0_to_3_gets_the_software_name_on_the_retry():
    broker = FakeBroker(3, release="3.0")
    result = v.handshake(broker, client_software_name="my-app", client_software_version="1.2.3")
    assert result.attempts == [NEWEST, 3]
    assert broker.seen[1][:3] == (3, "my-app", "1.2.3")


def test_a_41_broker_answers_after_one_step_down():
    broker = FakeBroker(4, release="4.1")
    result = v.handshake(broker)
    assert NEWEST == 5 and result.attempts == [5, 4]
    assert v.handshake(broker, max_version=4).attempts == [4]  # a client at its version: at once
    assert v.infer_release(result.response).release == "4.1"
    assert v.negotiate(None, result.response)[0] == 13


def test_a_confused_broker_cannot_make_the_client_loop():
    # it refuses v4 yet claims to support up to v4: the client still steps down
    broker = FakeBroker(2, advertise_max=4)
    result = v.handshake(broker)
    assert result.attempts == [NEWEST, 4, 3, 2]
    assert v.retry_version(ApiVersionsResponse(error_code=35, api_keys=[]), 1) == 0


def test_starting_lower_and_errors():
    assert v.handshake(FakeBroker(2), max_version=2).attempts == [2]
    with pytest.raises(ValueError, match=f"v0-{NEWEST}"):
        v.ApiVersionsHandshake(max_version=NEWEST + 1)
    broker = FakeBroker(2)
    with pytest.raises(v.ApiVersionsError, match="INVALID_REQUEST") as caught:
        v.handshake(FakeBroker(4), client_software_name="my app", allow_invalid=True)
    assert caught.value.error_code == 42
    shake = v.ApiVersionsHandshake()
    frame = shake.request()
    answer = broker(frame)
    wrong_id = answer[:4] + (99).to_bytes(4, "big") + answer[8:]
    with pytest.raises(kproto.DecodeError, match="correlation id 99"):
        shake.receive(wrong_id)


def test_handshake_over_a_socket():
    broker = FakeBroker(2, kip511=True)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(10)
            reader = FrameReader()
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                for payload in reader.feed(chunk):
                    conn.sendall(broker(len(payload).to_bytes(4, "big") + payload))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with socket.create_connection(server.getsockname(), timeout=10) as sock:
            result = v.handshake(v.socket_exchange(sock))
    finally:
        server.close()
    thread.join(timeout=10)
    assert result.attempts == [NEWEST, 2]
    assert result.ranges == broker.table


# ---------------------------------------------------------------- software name and version
@pytest.mark.parametrize("value", ["apache-kafka-java", "3.3.1", "kproto", "0.1.0.dev0", "a", "librdkafka", "A-1.b"])
def test_valid_software_fields(value):
    assert v.client_software_problems(value, value) == []


@pytest.mark.parametrize(
    "value, reason",
    [
        ("", "is empty"),
        ("-lead", "must begin and end with a letter or digit"),
        ("trail.", "must begin and end with a letter or digit"),
        (".", "must begin and end with a letter or digit"),
        ("my app", "characters outside"),
        ("my_app", "characters outside"),
        ("caf\u00e9", "characters outside"),
        (None, "is missing"),
    ],
)
def test_invalid_software_fields(value, reason):
    problems = v.client_software_problems(value, "1.0")
    assert len(problems) == 1 and reason in problems[0] and problems[0].startswith("ClientSoftwareName")


def test_default_software_version_is_valid():
    assert v.CLIENT_SOFTWARE_PATTERN.fullmatch(v.DEFAULT_CLIENT_SOFTWARE_VERSION)


def test_encoding_refuses_invalid_software_fields_unless_allowed():
    with pytest.raises(v.InvalidClientSoftwareError, match="ClientSoftwareName 'my app'.*allow_invalid") as caught:
        v.encode_api_versions_request(correlation_id=1, client_software_name="my app")
    assert isinstance(caught.value, kproto.EncodeError)
    with pytest.raises(v.InvalidClientSoftwareError):
        v.ApiVersionsHandshake(client_software_version="")
    frame = v.encode_api_versions_request(correlation_id=1, client_software_name="my app", allow_invalid=True)
    request, problems = v.decode_api_versions_request(frame)
    assert request.body.client_software_name == "my app"
    assert problems == ["ClientSoftwareName 'my app' has characters outside [.-a-zA-Z0-9]: ' '"]
    # v0-2 carry no software fields: nothing to check, nothing flagged
    old = v.encode_api_versions_request(correlation_id=1, version=2, client_software_name="my app")
    assert v.decode_api_versions_request(old)[1] == []


def test_decoding_flags_what_other_clients_send():
    from kproto.messages import ApiVersionsRequest

    raw = kproto.encode_request(
        ApiVersionsRequest(client_software_name="ok", client_software_version="1-"),
        version=3,
        correlation_id=5,
        client_id="x",
    )
    request, problems = v.decode_api_versions_request(raw)
    assert request.api_version == 3
    assert problems == ["ClientSoftwareVersion '1-' must begin and end with a letter or digit"]
    from kproto.messages import MetadataRequest

    with pytest.raises(kproto.DecodeError, match="expected an ApiVersions request"):
        v.decode_api_versions_request(kproto.encode_request(MetadataRequest(topics=None), version=12, correlation_id=1))

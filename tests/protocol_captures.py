"""Captures of a host where Kafka is not the only protocol, and of SASL (built, not stored).

Every Kafka frame put on the wire is returned with the capture, so a test knows exactly
which frames must come back, and which bytes (ZooKeeper, HTTP, TLS, SASL tokens, the
credentials in them) must not.

* ``host_capture()``: a Kafka client on 9092 interleaved with a ZooKeeper session on
  2181 (connect, requests, pings), an HTTP exchange on 8080, a TLS connection on 9093
  (ClientHello, ServerHello, application data), and two connections whose start was not
  captured: TLS records on 9093 and a ZooKeeper session (requests and pings) on 2181.
* ``sasl_capture(mechanism, handshake_version)``: one client authenticating with PLAIN,
  SCRAM-SHA-256 or GSSAPI, then Metadata and Produce. With SaslHandshake v0 the tokens
  are raw (size + bytes, no Kafka header); with v1 they are in SaslAuthenticate.
"""

from __future__ import annotations

import os
import struct

from kproto.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from tests.pcapwriter import Conversation, PcapWriter
from tests.spark_captures import START_NS, STEP_NS, broker_api_versions, produce, produce_ok, records, request, response

SECRET = b"s3cr3t-pa55word"
USER = b"alice"


def _prefixed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Interleaved:
    """Packets of several conversations in one pcap, in the order they are added."""

    def __init__(self) -> None:
        self.writer = PcapWriter()
        self.ts = START_NS

    def add(self, packets) -> None:
        for packet in packets:
            self.writer.add(self.ts, packet.data)
            self.ts += STEP_NS

    def getvalue(self) -> bytes:
        return self.writer.getvalue()


def kafka_exchanges(client_id: str = "app"):
    """(request frames, response frames) of a Kafka client: ApiVersions, Metadata, Produce."""
    requests = [
        request(ApiVersionsRequest(), 0, 0, client_id),
        request(MetadataRequest(topics=None), 1, 1, client_id),
        request(produce("orders", 0, records(3)), 3, 2, client_id),
    ]
    responses = [
        response(broker_api_versions(), 0, 0),
        response(MetadataResponse(brokers=[], topics=[]), 1, 1),
        response(produce_ok("orders", 0), 3, 2),
    ]
    return requests, responses


def zookeeper_frames(first_xid: int = 1, count: int = 20, connect: bool = True):
    """(client frames, server frames) of a ZooKeeper session: connect, getData, pings."""
    password = bytes(range(16))
    client, server = [], []
    if connect:
        client.append(_prefixed(struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + password + b"\x00"))
        server.append(_prefixed(struct.pack(">iiqi", 0, 30000, 0x1000000AB, 16) + password + b"\x00"))
    for i in range(count):
        xid = first_xid + i
        path = b"/brokers/ids/%d" % i
        client.append(_prefixed(struct.pack(">iii", xid, 4, len(path)) + path + b"\x00"))
        data = b'{"host":"b%d"}' % i
        server.append(_prefixed(struct.pack(">iqii", xid, 0x100000100 + i, 0, len(data)) + data + bytes(68)))
        if i % 5 == 4:
            client.append(_prefixed(struct.pack(">ii", -2, 11)))
            server.append(_prefixed(struct.pack(">iqi", -2, 0x100000100 + i, 0)))
    return client, server


def tls_records(kind: int, chunks) -> bytes:
    return b"".join(struct.pack(">BHH", kind, 0x0303, len(chunk)) + chunk for chunk in chunks)


def tls_frames(records_each: int = 6, size: int = 16000):
    """(client bytes, server bytes) of a TLS 1.2-shaped connection, in the order they are sent."""
    hello = b"\x01" + struct.pack(">I", 200)[1:] + b"\x03\x03" + os.urandom(196)
    server_hello = b"\x02" + struct.pack(">I", 80)[1:] + b"\x03\x03" + os.urandom(76)
    client = [struct.pack(">BHH", 22, 0x0301, len(hello)) + hello]
    server = [tls_records(22, [server_hello])]
    client.append(tls_records(23, [os.urandom(size) for _ in range(records_each)]))
    server.append(tls_records(23, [os.urandom(size) for _ in range(records_each)]))
    return client, server


def _talk(
    timeline: Interleaved, conv: Conversation, client, server, handshake: bool = True, close: bool = True, sizes=(1400,)
) -> None:
    if handshake:
        timeline.add(conv.handshake())
    for i in range(max(len(client), len(server))):
        if i < len(client):
            timeline.add(conv.data("client", client[i], sizes))
        if i < len(server):
            timeline.add(conv.data("server", server[i], sizes))
    if close:
        timeline.add(conv.close())


def host_capture(with_others: bool = True, segment: int = 1400):
    """(pcap bytes, Kafka request frames, Kafka response frames, {kind: connections}).

    Without ``with_others``: the Kafka connection alone, the figure the host capture's
    Kafka tables must equal. ``segment``: the largest TCP payload."""
    sizes = (segment,)
    timeline = Interleaved()
    requests, responses = kafka_exchanges()
    kafka = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 9092))
    others = {"kafka": 1}
    if with_others:
        zk_client, zk_server = zookeeper_frames()
        zk = Conversation(client=("10.0.0.9", 40100), server=("10.0.0.20", 2181))
        http = Conversation(client=("10.0.0.5", 40200), server=("10.0.0.9", 8080))
        tls = Conversation(client=("10.0.0.6", 40300), server=("10.0.0.9", 9093))
        tls_late = Conversation(client=("10.0.0.7", 40400), server=("10.0.0.9", 9093))
        zk_late = Conversation(client=("10.0.0.9", 40500), server=("10.0.0.21", 2181))
        tls_client, tls_server = tls_frames()
        late_client, late_server = tls_frames()
        zk_late_client, zk_late_server = zookeeper_frames(first_xid=70000, connect=False)
        timeline.add(kafka.handshake())
        _talk(timeline, zk, zk_client[:3], zk_server[:3], close=False, sizes=sizes)
        timeline.add(kafka.data("client", requests[0], sizes) + kafka.data("server", responses[0], sizes))
        _talk(
            timeline,
            http,
            [b"GET /metrics HTTP/1.1\r\nHost: b\r\n\r\n"],
            [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"],
            sizes=sizes,
        )
        _talk(timeline, tls, tls_client, tls_server, close=False, sizes=sizes)
        # mid-connection: the capture starts inside a record
        _talk(timeline, tls_late, [late_client[1][7000:]], [late_server[1][3000:]], handshake=False, sizes=sizes)
        _talk(
            timeline,
            zk_late,
            [b"".join(zk_late_client)[5:]],
            [b"".join(zk_late_server)[9:]],
            handshake=False,
            sizes=sizes,
        )
        for request_frame, response_frame in zip(requests[1:], responses[1:]):
            timeline.add(kafka.data("client", request_frame, sizes) + kafka.data("server", response_frame, sizes))
        _talk(timeline, zk, zk_client[3:], zk_server[3:], handshake=False, sizes=sizes)
        timeline.add(tls.close())
        timeline.add(kafka.close())
        others.update({"zookeeper": 2, "http": 1, "tls": 2})
    else:
        _talk(timeline, kafka, requests, responses, sizes=sizes)
    return timeline.getvalue(), requests, responses, others


# ---------------------------------------------------------------- SASL
def scram_tokens():
    client_first = b"n,,n=" + USER + b",r=fyko+d2lbbFgONRv9qkxdawL"
    server_first = b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    client_final = b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=" + SECRET
    server_final = b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="
    return [client_first, client_final], [server_first, server_final]


def gssapi_tokens():
    """Kerberos-shaped tokens: AP-REQ, AP-REP, the client's empty token, the security layer wraps."""
    ap_req = b"\x60\x82\x02\x10\x06\x09\x2a\x86\x48\x86\xf7\x12\x01\x02\x02" + SECRET + bytes(500)
    ap_rep = b"\x60\x81\x90\x06\x09\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x02\x00" + bytes(130)
    wrap_server = b"\x05\x04\x01\xff\x00\x0c\x00\x00" + bytes(8) + b"\x01\x00\x10\x00" + bytes(12)
    wrap_client = b"\x05\x04\x00\xff\x00\x0c\x00\x00" + bytes(8) + b"\x01\x00\x10\x00" + bytes(12)
    return [ap_req, b"", wrap_client], [ap_rep, wrap_server]


def mechanism_tokens(mechanism: str):
    """(client tokens, server tokens) in the order they are sent (the client's first)."""
    if mechanism == "PLAIN":
        return [b"\x00" + USER + b"\x00" + SECRET], [b""]
    if mechanism == "SCRAM-SHA-256":
        return scram_tokens()
    return gssapi_tokens()


def sasl_capture(mechanism: str, handshake_version: int = 0, coalesce: bool = False, segment: int = 1400):
    """(pcap bytes, Kafka request frames, Kafka response frames, secrets: bytes no output may hold).

    ``coalesce``: the client's last token and its next request leave in one segment;
    ``segment``: the largest TCP payload (tokens and frames cut across segments below it)."""
    timeline = Interleaved()
    sizes = (segment,)
    conv = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 9092))
    client_tokens, server_tokens = mechanism_tokens(mechanism)
    requests = [
        request(ApiVersionsRequest(), 0, 0, "app"),
        request(SaslHandshakeRequest(mechanism=mechanism), handshake_version, 1, "app"),
    ]
    responses = [
        response(broker_api_versions(), 0, 0),
        response(SaslHandshakeResponse(error_code=0, mechanisms=[mechanism]), handshake_version, 1),
    ]
    timeline.add(conv.handshake())
    for request_frame, response_frame in zip(requests, responses):
        timeline.add(conv.data("client", request_frame, sizes) + conv.data("server", response_frame, sizes))
    after = [
        request(MetadataRequest(topics=None), 1, 10, "app"),
        request(produce("orders", 0, records(3)), 3, 11, "app"),
    ]
    after_responses = [
        response(MetadataResponse(brokers=[], topics=[]), 1, 10),
        response(produce_ok("orders", 0), 3, 11),
    ]
    if handshake_version == 0:
        pending = b""
        for i in range(max(len(client_tokens), len(server_tokens))):
            if i < len(client_tokens):
                token = _prefixed(client_tokens[i])
                if coalesce and i == len(client_tokens) - 1 and i >= len(server_tokens):
                    pending = token
                else:
                    timeline.add(conv.data("client", token, sizes))
            if i < len(server_tokens):
                timeline.add(conv.data("server", _prefixed(server_tokens[i]), sizes))
        first = pending + after[0]
        timeline.add(conv.data("client", first, sizes))
    else:
        correlation = 2
        for i in range(max(len(client_tokens), len(server_tokens))):
            if i < len(client_tokens):
                frame = request(SaslAuthenticateRequest(auth_bytes=client_tokens[i]), 1, correlation, "app")
                answer = response(
                    SaslAuthenticateResponse(
                        error_code=0, auth_bytes=server_tokens[i] if i < len(server_tokens) else b""
                    ),
                    1,
                    correlation,
                )
                requests.append(frame)
                responses.append(answer)
                timeline.add(conv.data("client", frame, sizes) + conv.data("server", answer, sizes))
                correlation += 1
        timeline.add(conv.data("client", after[0], sizes))
    timeline.add(conv.data("server", after_responses[0], sizes))
    timeline.add(conv.data("client", after[1], sizes) + conv.data("server", after_responses[1], sizes))
    timeline.add(conv.close())
    secrets = [SECRET] + [t for t in client_tokens + server_tokens if len(t) >= 8]
    return timeline.getvalue(), requests + after, responses + after_responses, secrets

"""The capture engine at the edges of what a capture holds (issue 35's leftovers, issue 38's
addresses): a late start on a port nobody named, a gap inside SASL's raw tokens, a
connection's endpoints before it closes, the snap length that cut the packets.

Every capture is read by the compiled engine and its twin, which must agree exactly.
"""

from __future__ import annotations

import struct

import pytest

from kproto import _impl
from kproto.arrow.capture import CaptureReader, read_capture
from tests.pcapwriter import Conversation, PcapngWriter, PcapWriter
from tests.protocol_captures import (
    SECRET,
    USER,
    Interleaved,
    _prefixed,
    kafka_exchanges,
    mechanism_tokens,
    sasl_capture,
)


def read_both(data, **options):
    """(frames, connections) as lists of dicts, the compiled engine and its twin agreeing exactly."""
    results = [read_capture(data, implementation=name, **options) for name in _impl.available()]
    for other in results[1:]:
        assert other.frames.equals(results[0].frames)
        assert other.connections.equals(results[0].connections)
        assert other.counters == results[0].counters
    return results[0].frames.to_pylist(), results[0].connections.to_pylist()


def assert_accounted(connections):
    for row in connections:
        for side in ("request_", "response_"):
            assert row[side + "stream_bytes"] == sum(
                row[side + name] for name in ("frame_bytes", "skipped_bytes", "tail_bytes", "sasl_bytes", "other_bytes")
            ), row


# ---------------------------------------------------------------- a late start on another port
def late_start(with_request: bool) -> bytes:
    """A connection on port 19092 (no broker port) caught late: the capture's first packet is
    the end of a response, then (``with_request``) one whole Metadata request, then its
    response. The response's stream is the first one seen, so it is confirmed (at the end)
    before the request is."""
    requests, responses = kafka_exchanges()
    conv = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 19092))
    timeline = Interleaved()
    timeline.add(conv.data("server", responses[0][-9:], (1400,)))  # the end of ApiVersions' response
    if with_request:
        conv.data("client", requests[0][:-7], (1400,))  # sent before the capture started
        timeline.add(conv.data("client", requests[0][-7:] + requests[1], (1400,)))
    timeline.add(conv.data("server", responses[1], (1400,)))
    timeline.add(conv.close())
    return timeline.getvalue(), requests[1], responses[1]


def test_a_late_start_on_another_port_is_kafka_by_its_request_and_response_in_any_order():
    data, request, response = late_start(with_request=True)
    frames, connections = read_both(data)
    (row,) = connections
    assert row["kind"] == "kafka" and row["client_port"] == 40001
    assert row["direction_source"] == "correlation"
    assert [(f["direction"], f["payload"]) for f in frames] == [(0, request[4:]), (1, response[4:])] or [
        (f["direction"], f["payload"]) for f in frames
    ] == [(1, response[4:]), (0, request[4:])]
    assert_accounted(connections)


def test_a_response_sent_before_the_request_answers_nothing():
    """The same frames, the "response" on the wire before the "request" with its id: no pair
    (a protocol whose ids rise, as ZooKeeper's, would pair its requests with old answers)."""
    requests, responses = kafka_exchanges()
    conv = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 19092))
    timeline = Interleaved()
    timeline.add(conv.data("server", responses[0][-9:] + responses[1], (1400,)))
    conv.data("client", requests[0][:-7], (1400,))
    timeline.add(conv.data("client", requests[0][-7:] + requests[1], (1400,)))
    timeline.add(conv.close())
    frames, connections = read_both(timeline.getvalue())
    assert frames == [] and [row["kind"] for row in connections] == ["other"]
    assert_accounted(connections)


def test_a_lone_response_on_another_port_proves_nothing():
    """No request of it was captured: nothing says it is Kafka, so no frame; its bytes are counted."""
    data, _, _ = late_start(with_request=False)
    frames, connections = read_both(data)
    assert frames == []
    (row,) = connections
    # (which side sent requests is a guess here: nothing answered anything)
    assert (
        row["kind"] == "other"
        and row["request_other_bytes"] + row["response_other_bytes"]
        == row["request_stream_bytes"] + row["response_stream_bytes"]
        > 0
    )
    assert_accounted(connections)


# ---------------------------------------------------------------- SASL tokens and a gap
def _records(data: bytes) -> list[bytes]:
    records, pos = [], 24
    while pos < len(data):
        length = struct.unpack_from("<I", data, pos + 8)[0]
        records.append(data[pos : pos + 16 + length])
        pos += 16 + length
    return records


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "GSSAPI"])
def test_a_client_gap_in_the_sasl_tokens_loses_no_kafka_frame_after_them(mechanism):
    """A client packet inside its first raw token is lost. The hole is only given up on at the
    close, so the broker's answers to the requests after the tokens arrive while the client's
    side still reads as tokens: they wait for it, and every Kafka frame comes out."""
    data, requests, responses, secrets = sasl_capture(mechanism, 0, segment=8)
    client_tokens, _ = mechanism_tokens(mechanism)
    token = _prefixed(client_tokens[0])
    records = _records(data)
    # Ethernet, IPv4 and TCP headers (54 bytes) before each payload; the client's packets go to port 9092
    in_token = [
        i
        for i, r in enumerate(records)
        if len(r) > 16 + 54 and r[16 + 54 :] in token and struct.unpack_from(">H", r, 16 + 34 + 2)[0] == 9092
    ]
    assert len(in_token) >= 3
    del records[in_token[len(in_token) // 2]]
    frames, connections = read_both(data[:24] + b"".join(records))
    assert [f["payload"] for f in frames if f["direction"] == 0] == [r[4:] for r in requests]
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses]
    assert not any(secret in f["payload"] for f in frames for secret in secrets + [SECRET, USER + b"\x00"])
    (row,) = connections
    assert row["kind"] == "kafka" and row["request_gaps"] == 1 and row["response_gaps"] == 0
    assert row["response_sasl_tokens"] >= 1 and row["response_skipped_bytes"] == 0
    assert_accounted(connections)


def test_an_id_alone_is_no_sasl_handshake_answer_after_a_gap():
    """The broker's first packet is lost; after the hole, the data of the frame it cut (the answer
    to the client's first request) holds a "header" carrying the id of the SaslHandshake v0
    request, with no header after it. A SaslHandshake v0 answer needs no header after it (raw
    tokens follow), but only a whole one (an error code and mechanism names filling it): the
    fake is no frame; the real answer, the tokens (counted) and the response after them are."""
    from kproto.messages import (
        ApiVersionsRequest,
        MetadataRequest,
        MetadataResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )
    from tests.spark_captures import request, response

    conv = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 9092))
    fake = struct.pack(">ii", 16, 1) + bytes(12) + b"\xff" * 8  # size 16, the handshake's id 1
    cut = _prefixed(struct.pack(">i", 0) + bytes(60) + fake + bytes(30))  # the answer to id 0
    handshake = response(SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"]), 0, 1)
    metadata = response(MetadataResponse(brokers=[], topics=[]), 1, 10)
    timeline = Interleaved()
    timeline.add(conv.handshake())
    timeline.add(conv.data("client", request(ApiVersionsRequest(), 0, 0, "app"), [1400]))
    timeline.add(conv.data("client", request(SaslHandshakeRequest(mechanism="PLAIN"), 0, 1, "app"), [1400]))
    timeline.add(conv.data("server", cut, [40])[1:])  # its first 40 bytes are lost
    timeline.add(conv.data("server", handshake, [1400]))
    timeline.add(conv.data("client", _prefixed(b"\x00" + USER + b"\x00" + SECRET), [1400]))
    timeline.add(conv.data("server", _prefixed(b""), [1400]))
    timeline.add(conv.data("client", request(MetadataRequest(topics=None), 1, 10, "app"), [1400]))
    timeline.add(conv.data("server", metadata, [1400]))
    timeline.add(conv.close())
    frames, connections = read_both(timeline.getvalue())
    assert [f["payload"] for f in frames if f["direction"] == 1] == [handshake[4:], metadata[4:]]
    (row,) = connections
    assert (row["response_sasl_tokens"], row["request_sasl_tokens"], row["response_gaps"]) == (1, 1, 1)
    assert_accounted(connections)


def test_a_handshake_answer_read_before_its_v0_request_holds_the_tokens_after_it():
    """SCRAM behind a SaslHandshake v0, from the SYN: the ApiVersions request and the client's
    first token are lost, so the handshake request waits behind the client's hole while the
    broker's answer and raw tokens are cut as frames. Once the request is read it says "v0":
    the frames after its answer are held until a response answers a captured request, and the
    tokens (ids read from "r=…" and "v=…", above the next answer's) are SASL tokens."""
    from tests.capture_pieces import pcap_records
    from tests.protocol_captures import sasl_capture

    data, requests, responses, _ = sasl_capture("SCRAM-SHA-256", 0, segment=200)
    header, records = pcap_records(data)
    kept = header + b"".join(record for i, record in enumerate(records) if i not in (3, 8))
    frames, connections = read_both(kept)
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses]
    (row,) = connections
    assert (row["response_sasl_tokens"], row["request_gaps"]) == (2, 2)
    assert_accounted(connections)


# ---------------------------------------------------------------- endpoints before the close
@pytest.mark.parametrize("implementation", _impl.available())
def test_endpoints_are_known_with_the_first_frame(implementation):
    requests, responses = kafka_exchanges()
    timeline = Interleaved()
    conv = Conversation(client=("2001:db8::1", 40001), server=("2001:db8::9", 9092))
    timeline.add(conv.handshake())
    for request, response in zip(requests, responses):
        timeline.add(conv.data("client", request, (1400,)) + conv.data("server", response, (1400,)))
    # no close: the connection is still open when the batches come out
    reader = CaptureReader(timeline.getvalue(), batch_frames=1, implementation=implementation)
    batches = iter(reader)
    first = next(batches)
    assert first.num_rows < len(requests) + len(responses) and set(first["connection_id"].to_pylist()) == {0}
    assert reader.endpoints == {
        0: {
            "connection_id": 0,
            "client_ip": "2001:db8::1",
            "client_port": 40001,
            "server_ip": "2001:db8::9",
            "server_port": 9092,
        }
    }
    assert reader.connections().num_rows == 0  # its row comes at its close
    rest = list(batches)
    assert first.num_rows + sum(b.num_rows for b in rest) == len(requests) + len(responses)
    (row,) = reader.connections().to_pylist()
    assert {k: row[k] for k in reader.endpoints[0]} == reader.endpoints[0]


# ---------------------------------------------------------------- the snap length that cut packets
@pytest.mark.parametrize("implementation", _impl.available())
def test_snap_lengths_name_the_cuts(implementation):
    requests, responses = kafka_exchanges()
    conv = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 9092))
    packets = conv.handshake()
    for request, response in zip(requests, responses):
        packets += conv.data("client", request, (1400,)) + conv.data("server", response, (1400,))
    packets += conv.close()
    cut = PcapWriter(snaplen=96)
    whole = PcapWriter()
    ng = PcapngWriter()
    ng.add_interface(snaplen=1500)  # its packets are whole
    ng.add_interface(snaplen=96)  # its packets are cut
    for i, packet in enumerate(packets):
        cut.add(1_700_000_000_000_000_000 + i, packet.data)
        whole.add(1_700_000_000_000_000_000 + i, packet.data)
        interface = i % 2
        captured = packet.data[:96] if interface else packet.data
        ng._block(
            6,
            struct.pack("<IIIII", interface, 0, i, len(captured), len(packet.data))
            + captured
            + b"\x00" * (-len(captured) % 4),
        )
    readers = {}
    for name, data in (("cut", cut.getvalue()), ("whole", whole.getvalue()), ("ng", ng.getvalue())):
        reader = readers[name] = CaptureReader(data, implementation=implementation)
        reader.read_all()
    assert readers["cut"].snap_lengths == [96]
    assert readers["whole"].snap_lengths == []
    assert readers["ng"].snap_lengths == [96]
    (row,) = readers["cut"].connections().to_pylist()
    assert row["request_snapped_bytes"] > 0 and row["request_truncated_packets"] > 0


def test_dump_says_why_a_connection_is_not_kafka_and_how_to_force_it(tmp_path, capsys):
    from kproto.analyze.cli import main

    data, _, _ = late_start(with_request=False)
    path = tmp_path / "late.pcap"
    path.write_bytes(data)
    assert main(["dump", str(path), "--format", "jsonl"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    # (which end is the server is a guess when nothing was answered: the port named may be either)
    assert "1 connection on port " in err and " is another protocol, not Kafka" in err
    assert "its frames did not prove Kafka" in err and " reads it as Kafka" in err


# ---------------------------------------------------------------- analyze: the errors table and the report
def test_stream_losses_are_rows_of_the_errors_table():
    """One ``stream_loss`` row per connection direction that lost or skipped bytes, its counts
    summed over the ranges that read it; no row for a whole one (no Spark needed)."""
    import json

    from kproto.analyze.spark.stream_losses import stream_loss_rows

    _, connections = read_both(sasl_capture("PLAIN", 0, segment=8)[0])
    whole = connections[0]
    lossy = dict(
        whole,
        connection_id=1,
        request_gaps=2,
        request_gap_bytes=100,
        request_skipped_bytes=30,
        response_snapped_bytes=400,
    )
    accounting = [
        {"kind": "connection", "capture": "c.pcap", "connection_id": row["connection_id"], "info": json.dumps(row)}
        for row in (
            whole,
            lossy,
            dict(lossy, request_gaps=1, request_gap_bytes=5, request_skipped_bytes=0, response_snapped_bytes=0),
        )
    ]
    rows = stream_loss_rows(
        accounting + [{"kind": "capture", "capture": "c.pcap", "connection_id": None, "info": "{}"}]
    )
    assert [(r["connection_id"], r["direction"], r["lost_bytes"]) for r in rows] == [
        (1, "request", 135),
        (1, "response", 400),
    ]
    assert all(r["category"] == "stream_loss" and r["offset"] is None and r["unread_bytes"] == 0 for r in rows)
    assert rows[0]["reason"] == (
        "connection 1 (10.0.0.1:40001 -> 10.0.0.9:9092), requests: 105 bytes never "
        "captured in 3 gap(s); 30 bytes skipped to find a frame boundary (a "
        "mid-connection start, after a gap, an invalid size)"
    )
    assert "400 bytes of bodies not captured (cut off by the snap length)" in rows[1]["reason"]
    import pyarrow as pa

    from kproto.analyze.spark.accounting import ERRORS_SCHEMA

    assert pa.Table.from_pylist(rows, schema=ERRORS_SCHEMA).num_rows == 2


def test_the_report_names_the_snap_length():
    from kproto.analyze.spark.accounting import summary_rows
    from kproto.analyze.spark.report_sections import sections

    info = {"format": "pcap", "snap_lengths": [96]}
    accounting = [
        {"kind": "capture", "capture": "short.pcap", "connection_id": None, "info": __import__("json").dumps(info)}
    ]
    summary = summary_rows(accounting, [])
    assert summary[0]["snap_lengths"] == [96]
    facts = {"summary": [dict(r, snapped_bytes=1200) for r in summary]}
    from kproto.analyze.spark.report_sections import LOSSES, _snaplen_label

    label = dict(LOSSES)["snapped_bytes"]
    assert _snaplen_label(facts, label) == "snaplen 96: bodies not captured (bytes cut off)"
    assert _snaplen_label({"summary": [{"capture": "x"}]}, label) == label
    assert callable(sections)


def snaplen_128_capture(tmp_path):
    """2 connections of 20 exchanges each, every packet cut to 128 bytes (``tcpdump -s 128``): every
    request's body is cut, the responses are whole."""
    from tests import capture_pieces as cp
    from tests.spark_captures import big_capture

    writer = PcapWriter(snaplen=128)
    for record in cp.pcap_records(big_capture(connections=2, exchanges=20))[1]:
        seconds, fraction = struct.unpack_from("<II", record, 0)
        writer.add(seconds * 1_000_000_000 + fraction * 1000, record[16:])
    path = tmp_path / "short.pcap"
    path.write_bytes(writer.getvalue())
    return path


@pytest.mark.parametrize("split_bytes", [1 << 30, 3_000])
def test_analyze_accounting_knows_the_snap_length_and_the_errors_table_the_stream_losses(tmp_path, split_bytes):
    """The worker's accounting carries the snap lengths (a whole file and ranges alike), so the
    report can name them; the errors table gets the stream losses (no Spark: as the driver combines)."""
    import json

    import pyarrow as pa

    from kproto.analyze.spark import accounting as A
    from kproto.analyze.spark import planning as P
    from kproto.analyze.spark import task, worker
    from kproto.analyze.spark.report_sections import LOSSES, _snaplen_label
    from tests import capture_pieces as cp

    path = snaplen_128_capture(tmp_path)
    splits = P.plan_file(str(path), path.stat().st_size, split_bytes=split_bytes, overlap=1_000)
    assert (len(splits) > 1) == (split_bytes < 1 << 30)
    parts = pa.Table.from_batches(
        [b for split in splits for b in task.process_split(split, sink=worker.Sink())], schema=worker.PARTS_SCHEMA
    )
    accounting = [
        r
        for r in parts.select(["kind", "capture", "connection_id", "info"]).to_pylist()
        if r["kind"] in ("capture", "counts", "connection")
    ]
    assert all(json.loads(r["info"])["snap_lengths"] == [128] for r in accounting if r["kind"] == "capture")
    (row, _total) = A.summary_rows(accounting, [])
    assert row["snap_lengths"] == [128] and row["snapped_bytes"] > 0 and row["accounted"]
    assert _snaplen_label({"summary": [row]}, dict(LOSSES)["snapped_bytes"]).startswith("snaplen 128: ")
    errors = cp.analysed(splits)["errors"].to_pylist()
    losses = [e for e in errors if e["category"] == "stream_loss"]
    assert losses and sum(e["lost_bytes"] for e in losses) >= row["snapped_bytes"]
    assert any("bytes of bodies not captured (cut off by the snap length)" in e["reason"] for e in losses)


def test_a_range_reads_every_frame_of_a_capture_whose_requests_the_snap_length_cut(tmp_path, impl):
    """A range starts inside connections: where the snap length cut every request, the search cannot
    see the header after a request until the cut is passed; the request whose frame ends exactly where
    the cut does is kept aside and proved by the header after it, so the ranges give the frames of the
    whole file (they lost all requests but the first range's, and the responses' pairs)."""
    from kproto.analyze.spark import planning as P
    from tests import capture_pieces as cp

    path = snaplen_128_capture(tmp_path)
    frames = {}
    for split_bytes in (1 << 30, 3_000):
        splits = P.plan_file(str(path), path.stat().st_size, split_bytes=split_bytes, overlap=1_000)
        frames[len(splits)] = cp.table_rows(
            cp.analysed(splits)["frames"], drop=cp.NAMING_COLUMNS + ("connection_id", "sequence")
        )
    whole, split = frames[1], frames[4]
    assert len(whole) == 80 and sum('"status_name": "NOT_CAPTURED"' in row for row in whole) == 40
    assert split == whole

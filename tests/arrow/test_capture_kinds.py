"""Only Kafka is Kafka: other protocols on the host are counted by kind, SASL tokens as SASL.

The captures (tests/protocol_captures.py) are built frame by frame, so every Kafka frame
that must come back is known, and so is every byte that must not (ZooKeeper, HTTP, TLS,
SASL tokens and the credentials in them).
"""

from __future__ import annotations

import collections
import struct

import pytest

from kproto import _impl
from kproto.arrow.capture import read_capture
from tests.pcapwriter import Conversation
from tests.protocol_captures import Interleaved, _talk, host_capture, sasl_capture, zookeeper_frames


def read_both(data, **options):
    """The capture's (frames, connections, counters), the compiled engine and its twin agreeing exactly."""
    results = [read_capture(data, implementation=name, **options) for name in _impl.available()]
    first = results[0]
    for other in results[1:]:
        assert other.frames.equals(first.frames)
        assert other.connections.equals(first.connections)
        assert other.counters == first.counters
    return first.frames.to_pylist(), first.connections.to_pylist(), first.counters


def kafka_frames(frames):
    """Frames without their connection id (numbered per capture, so it differs between captures)."""
    return [{k: v for k, v in f.items() if k not in ("connection_id", "ts_first_ns", "ts_last_ns")} for f in frames]


def assert_accounted(connections):
    for row in connections:
        for side in ("request_", "response_"):
            assert row[side + "stream_bytes"] == sum(
                row[side + name] for name in ("frame_bytes", "skipped_bytes", "tail_bytes", "sasl_bytes", "other_bytes")
            ), row


@pytest.mark.parametrize("segment", [1400, 61])
def test_host_capture_gives_the_kafka_frames_alone_and_counts_the_other_kinds(segment):
    data, requests, responses, kinds = host_capture(segment=segment)
    frames, connections, _ = read_both(data)
    alone, alone_connections, _ = read_both(host_capture(with_others=False, segment=segment)[0])
    assert kafka_frames(frames) == kafka_frames(alone)
    assert [f["payload"] for f in frames if f["direction"] == 0] == [r[4:] for r in requests]
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses]
    assert collections.Counter(row["kind"] for row in connections) == kinds
    assert_accounted(connections)
    for row in connections:
        if row["kind"] == "kafka":
            assert row["request_other_bytes"] == row["response_other_bytes"] == 0
            assert row["request_frames"] == len(requests) and row["response_frames"] == len(responses)
        else:  # every byte counted as the other protocol's, none framed
            assert row["request_frames"] == row["response_frames"] == 0
            for side in ("request_", "response_"):
                assert row[side + "other_bytes"] == row[side + "stream_bytes"] > 0
    tls = [row for row in connections if row["kind"] == "tls"]
    assert {row["server_port"] for row in tls} == {9093}


@pytest.mark.parametrize("mid_stream", [False, True])
def test_zookeeper_is_not_produce(mid_stream):
    """The issue's session: ZooKeeper requests read as "Produce v0...v40"; now no frame at all."""
    client, server = zookeeper_frames(first_xid=1 if not mid_stream else 5000, connect=not mid_stream)
    timeline = Interleaved()
    conv = Conversation(client=("10.0.0.9", 40100), server=("10.0.0.20", 2181))
    _talk(timeline, conv, client, server, handshake=not mid_stream)
    frames, connections, _ = read_both(timeline.getvalue())
    assert frames == []
    assert [row["kind"] for row in connections] == ["zookeeper"]
    assert_accounted(connections)


def test_a_forced_port_is_kafka_whatever_it_carries():
    client, server = zookeeper_frames()
    timeline = Interleaved()
    _talk(timeline, Conversation(client=("10.0.0.9", 40100), server=("10.0.0.20", 2181)), client, server)
    frames, connections, _ = read_both(timeline.getvalue(), kafka_ports=[2181])
    assert [row["kind"] for row in connections] == ["kafka"]
    assert len(frames) == len(client) + len(server)
    assert connections[0]["client_port"] == 40100  # a forced port is a broker port too


def test_kafka_on_another_port_is_confirmed_by_its_frames():
    from tests.protocol_captures import kafka_exchanges

    requests, responses = kafka_exchanges()
    timeline = Interleaved()
    _talk(timeline, Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 19092)), requests, responses)
    frames, connections, _ = read_both(timeline.getvalue())
    assert [row["kind"] for row in connections] == ["kafka"]
    assert [f["payload"] for f in frames if f["direction"] == 0] == [r[4:] for r in requests]
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses]


def test_an_unconfirmed_stream_on_another_port_is_other():
    timeline = Interleaved()
    conv = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 5432))
    # length-prefixed, but no request / response pair
    _talk(timeline, conv, [b"\x00\x00\x00\x08\x00\x03\x00\x00\x00\x00\x00\x01"], [b"\x00\x00\x00\x04\x00\x00\x00\x63"])
    frames, connections, _ = read_both(timeline.getvalue())
    assert frames == []
    assert [row["kind"] for row in connections] == ["other"]
    assert_accounted(connections)


def test_tls_bytes_are_counted_and_dropped_as_they_come():
    """A long TLS connection: counted as it goes, never held (the issue's memory growth)."""
    from kproto.arrow.capture import CaptureReader
    from tests.protocol_captures import tls_frames

    client, server = tls_frames(records_each=200)
    timeline = Interleaved()
    _talk(timeline, Conversation(client=("10.0.0.6", 40300), server=("10.0.0.9", 9093)), client, server, close=False)
    for name in _impl.available():
        reader = CaptureReader(timeline.getvalue(), implementation=name)
        engine = reader._engine
        assert list(reader) == []
        # still open: nothing of its 6 MB is held by the engine
        held = (
            [len(half.buf) for conn in engine.reassembly.connections.values() for half in conn.halves]
            if name == "py"
            else []
        )
        assert all(size == 0 for size in held)
        rows = reader.connections().to_pylist()
        assert [row["kind"] for row in rows] == ["tls"]
        assert rows[0]["request_other_bytes"] > 3_000_000


@pytest.mark.parametrize("segment", [1400, 7, 1])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "GSSAPI"])
@pytest.mark.parametrize("handshake_version, coalesce", [(0, False), (0, True), (1, False)])
def test_sasl_frames_exact_tokens_counted(mechanism, handshake_version, coalesce, segment):
    """``coalesce``: the client's last raw token and its next request in one segment (v0 only);
    ``segment``: tokens and frames cut into segments of at most this many bytes."""
    data, requests, responses, secrets = sasl_capture(mechanism, handshake_version, coalesce=coalesce, segment=segment)
    frames, connections, _ = read_both(data)
    assert [f["payload"] for f in frames if f["direction"] == 0] == [r[4:] for r in requests]
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses]
    for direction in (0, 1):
        assert [f["sequence"] for f in frames if f["direction"] == direction] == list(range(len(requests)))
    (row,) = connections
    assert row["kind"] == "kafka"
    assert_accounted(connections)
    if handshake_version == 0:
        assert row["request_sasl_tokens"] >= 1 and row["response_sasl_tokens"] >= 1
        assert row["request_skipped_bytes"] == row["response_skipped_bytes"] == 0
        for frame in frames:
            assert not any(secret in frame["payload"] for secret in secrets)
    else:
        assert row["request_sasl_tokens"] == row["response_sasl_tokens"] == 0


# ---------------------------------------------------------------- dump and analyze (without Spark)
def run_dump(capsys, *argv):
    import json

    from kproto.analyze.cli import main

    status = main(["dump", *map(str, argv), "--format", "jsonl"])
    out, err = capsys.readouterr()
    return status, out, [json.loads(line) for line in out.splitlines()], err


def test_dump_names_the_other_protocols_and_prints_only_kafka(tmp_path, capsys):
    data, requests, responses, _ = host_capture()
    path = tmp_path / "host.pcap"
    path.write_bytes(data)
    status, _, records, err = run_dump(capsys, path)
    assert status == 0
    assert len(records) == len(requests) + len(responses)
    assert {r["connection"] for r in records} == {0}
    assert "2 connections on port 9093 are TLS, not Kafka" in err and "cannot be read without keys" in err
    assert "2 connections on port 2181 are ZooKeeper, not Kafka" in err
    assert "1 connection on port 8080 is HTTP, not Kafka" in err
    # --port forces: ZooKeeper's frames come out (as garbage Kafka), which is what the user asked for
    status, _, forced, _ = run_dump(capsys, path, "--port", "2181")
    assert len(forced) > len(records)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "GSSAPI"])
@pytest.mark.parametrize("handshake_version", [0, 1])
def test_dump_never_prints_credentials_unless_asked(tmp_path, capsys, mechanism, handshake_version):
    import base64

    data, requests, responses, secrets = sasl_capture(mechanism, handshake_version)
    path = tmp_path / "sasl.pcap"
    path.write_bytes(data)
    for output in ("jsonl", "tree"):
        from kproto.analyze.cli import main

        assert main(["dump", str(path), "--format", output]) == 0
        out, _ = capsys.readouterr()
        for secret in secrets:
            assert secret.decode("latin-1") not in out
            assert base64.b64encode(secret).decode() not in out
    status, _, records, _ = run_dump(capsys, path)
    assert status == 0 and len(records) == len(requests) + len(responses)
    assert not any(r["header"]["api_key"] == 97 for r in records)
    if handshake_version:
        auth = [r for r in records if r["header"]["api_key"] == 36]
        assert auth and all(r["body"]["auth_bytes"].startswith("<redacted") for r in auth)
        _, out, shown, _ = run_dump(capsys, path, "--show-credentials")
        assert base64.b64encode(secrets[0]).decode() in out or any(base64.b64encode(s).decode() in out for s in secrets)


def timeless(value):
    """``value`` without the times in it (first / last seen): interleaving other connections moves them."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if not (k.endswith("_ns") or "seen" in k)}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def test_analyze_tables_of_the_host_capture_are_the_kafka_traffic_alone(tmp_path):
    from kproto.analyze.spark import planning as P
    from kproto.analyze.spark.report import collect_facts_arrow
    from kproto.analyze.spark.report_sections import markdown
    from tests.capture_pieces import analysed, table_rows

    data, _, _, _ = host_capture()
    alone = host_capture(with_others=False)[0]
    tables = {}
    for name, capture in (("host", data), ("alone", alone)):
        path = tmp_path / f"{name}.pcap"
        path.write_bytes(capture)
        tables[name] = analysed(P.plan_file(str(path), 0, split_bytes=1 << 30, overlap=0))
    for table in ("frames", "exchanges", "clients", "topics"):
        # timestamps differ: the other connections' packets come in between
        drop = [n for n in tables["host"][table].column_names if n.endswith("_ns")] + ["capture"]
        assert table_rows(tables["host"][table], drop) == table_rows(tables["alone"][table], drop), table
    connections = tables["host"]["connections"].to_pylist()
    assert collections.Counter(r["kind"] for r in connections) == host_capture()[3]
    facts = {}
    for name in ("host", "alone"):
        t = tables[name]
        facts[name] = collect_facts_arrow(t, t["summary"].to_pylist(), [])
    for name in ("readiness", "next_steps", "clients"):
        assert timeless(facts["host"][name]) == timeless(facts["alone"][name]), name
    assert facts["alone"]["other_protocols"] == []
    assert [(r["kind"], r["server_port"], r["connections"]) for r in facts["host"]["other_protocols"]] == [
        ("http", 8080, 1),
        ("tls", 9093, 2),
        ("zookeeper", 2181, 2),
    ]
    report = markdown(facts["host"])
    assert "2 connections on port 9093 are TLS" in report and "cannot be read without keys" in report
    (total,) = [r for r in facts["host"]["summary"] if r["capture"] == "*"]
    assert total["accounted"] and total["other_bytes"] > 0


@pytest.mark.parametrize("show", [False, True])
@pytest.mark.parametrize(
    "mechanism, handshake_version",
    [("PLAIN", 0), ("PLAIN", 1), ("SCRAM-SHA-256", 0), ("SCRAM-SHA-256", 1), ("GSSAPI", 0), ("GSSAPI", 1)],
)
def test_analyze_tables_of_sasl_have_no_phantom_and_no_credential(tmp_path, show, mechanism, handshake_version):
    import base64

    from kproto.analyze.spark import planning as P
    from tests.capture_pieces import analysed

    data, requests, responses, secrets = sasl_capture(mechanism, handshake_version)
    path = tmp_path / "sasl.pcap"
    path.write_bytes(data)
    tables = analysed(P.plan_file(str(path), 0, split_bytes=1 << 30, overlap=0), show_credentials=show)
    frames = tables["frames"].to_pylist()
    assert len(frames) == len(requests) + len(responses)
    assert all(f["status_name"] == "OK" for f in frames)
    assert [(c["client_id"], c["requests"]) for c in tables["clients"].to_pylist()] == [("app", len(requests))]
    (summary,) = [r for r in tables["summary"].to_pylist() if r["capture"] == "*"]
    assert summary["accounted"] and summary["exchanges_paired"] == len(requests)
    bodies = " ".join(f["body"] for f in frames if f["body"])
    shown = [base64.b64encode(secret).decode() in bodies for secret in secrets]
    if handshake_version == 0 or not show:  # raw tokens are never frames; SaslAuthenticate is redacted
        assert not any(shown) and not any(secret.decode("latin-1") in bodies for secret in secrets)
    if handshake_version == 1:
        assert ("<redacted: " in bodies) != show
        assert any(shown) == show


def test_a_raw_sasl_token_cut_by_a_gap_is_never_a_frame():
    """A gap inside the client's PLAIN token: its captured bytes are skipped, not a frame
    (they hold the password), and the requests after it are read from the token's known end."""
    from tests.protocol_captures import SECRET, USER, _prefixed

    data, requests, responses, secrets = sasl_capture("PLAIN", 0, segment=8)
    token = _prefixed(b"\x00" + USER + b"\x00" + SECRET)
    records, pos = [], 24
    while pos < len(data):
        length = struct.unpack_from("<I", data, pos + 8)[0]
        records.append(data[pos : pos + 16 + length])
        pos += 16 + length
    # Ethernet, IPv4 and TCP headers (54 bytes) before each payload
    in_token = [i for i, r in enumerate(records) if len(r) > 16 + 54 and r[16 + 54 :] in token]
    assert len(in_token) >= 3
    del records[in_token[len(in_token) // 2]]
    frames, connections, _ = read_both(data[:24] + b"".join(records))
    assert [f["payload"] for f in frames if f["direction"] == 0] == [r[4:] for r in requests]
    # (the client's requests after the hole are only read when the hole is given up on, at the
    # close: the broker's answers to them wait for them; tests/arrow/test_capture_edges.py for every mechanism)
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses]
    assert not any(token[4:12] in f["payload"] or secret in f["payload"] for f in frames for secret in secrets)
    (row,) = connections
    assert row["kind"] == "kafka" and row["request_gaps"] == 1
    assert_accounted(connections)

"""``kproto dump`` and ``kproto decode``: records, filters, streaming, broken inputs, pipes."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import struct
import subprocess
import sys

import pyarrow as pa
import pytest

import kproto
import kproto.arrow.frames as kb
from kproto.analyze import dump
from kproto.analyze.cli import main
from kproto.arrow import exchanges
from kproto.arrow.capture import read_capture
from kproto.messages import MetadataRequest, MetadataResponse
from tests import spark_captures as sc

COMMAND = [sys.executable, "-m", "kproto.analyze.cli"]


@pytest.fixture
def loops(impl, monkeypatch):
    """kproto.arrow.frames (so the dump) running on one implementation's loops."""
    monkeypatch.setattr(kb, "_batch", impl.load("batch"))
    return impl


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("dump") / "small.pcap"
    path.write_bytes(sc.small_capture())
    return path


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("dump") / "big.pcap"
    path.write_bytes(sc.big_capture(connections=6, exchanges=40))
    return path


def run_cli(capsys, *argv) -> tuple[int, list[dict], str]:
    status = main(["dump", *map(str, argv), "--format", "jsonl"])
    out, err = capsys.readouterr()
    return status, [json.loads(line) for line in out.splitlines()], err


def test_every_frame_once_responses_decoded_with_their_request(small, loops):
    records = list(dump.records(dump.Input(str(small))))
    frames, _, _ = read_capture(str(small))
    assert len(records) == frames.num_rows == 10
    # The whole-capture pairing of kproto.arrow.frames gives every response the same request.
    pairs = exchanges.pair(frames).to_pylist()
    expected = {
        (p["connection_id"], p["response_sequence"]): (p["api_key"], p["api_version"])
        for p in pairs
        if p["response_row"] is not None
    }
    for record in records:
        if record["direction"] == "response":
            key = (record["connection"], record["sequence"])
            assert (record["header"]["api_key"], record["header"]["api_version"]) == expected[key]
    by_status = {(r["header"]["correlation_id"], r["direction"]): r for r in records if r["connection"] == 1}
    orphan = by_status[(77, "response")]
    assert orphan["status"] == "NO_REQUEST_INFO" and orphan["body"] is None and orphan["header"]["api"] is None
    assert by_status[(3, "request")]["status"] == "UNKNOWN_API"
    api_versions = by_status[(1, "response")]
    assert api_versions["header"] == {
        "api_key": 18,
        "api": "ApiVersions",
        "api_version": 3,
        "correlation_id": 1,
        "client_id": "old",
    }
    assert api_versions["body"]["error_code"] == 42 and api_versions["status"] == "OK"
    produce = next(r for r in records if r["header"]["api"] == "Produce" and r["direction"] == "request")
    assert produce["body"]["topic_data"][0]["partition_data"][0]["records"]["records"] == 3  # a summary
    assert produce["ts_first_ns"] >= sc.START_NS and produce["size"] > 0


def test_many_small_batches_give_the_same_records(big, loops):
    whole = list(dump.records(dump.Input(str(big))))
    source = dump.Input(str(big), batch_frames=7)
    batches = list(dump.record_batches(source))
    assert len(batches) > 60
    assert [json.loads(line) for b in batches for line in dump.jsonl_lines(*b)] == whole
    assert len(whole) == 6 * 40 * 2
    assert {r["status"] for r in whole} == {"OK"}
    assert all(r["header"]["api"] == "Produce" for r in whole)


def test_requests_held_across_batches_stay_few(big, loops):
    # Each batch ends with at most one request per connection whose response is in the next.
    source = dump.Input(str(big), batch_frames=5)
    held = []
    open_requests = dump.OpenRequests()
    for frames in source:
        headers = kb.decode_frames(frames["payload"], directions=frames["direction"].to_numpy())
        keys, _, _ = open_requests.match(frames, headers)
        assert (keys == 0).all()
        held.append(len(open_requests))
    assert max(held) <= 6 and held[-1] == 0


def test_acks_zero_produce_is_not_held(small, loops):
    open_requests = dump.OpenRequests()
    for frames in dump.Input(str(small)):
        headers = kb.decode_frames(frames["payload"], directions=frames["direction"].to_numpy())
        open_requests.match(frames, headers)
    # Held at the end: shop's Metadata (unanswered) and old's request of API 999; not the acks=0 Produce.
    assert sorted(open_requests.api_key.tolist()) == [3, 999]


def capture_batch(payloads: list[bytes], direction: int, first_sequence: int = 0) -> pa.RecordBatch:
    from kproto.arrow.capture import frame_schema

    n = len(payloads)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(["cap"] * n),
            pa.array([0] * n, pa.int64()),
            pa.array([direction] * n, pa.int8()),
            pa.array(range(first_sequence, first_sequence + n), pa.int64()),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.int64()),
            pa.array([len(p) for p in payloads], pa.int32()),
            pa.array(payloads, pa.binary()),
        ],
        schema=frame_schema(),
    )


@pytest.mark.parametrize("limit,answered", [(10, [3, 3, 3]), (1, [-1, -1, 3])])
def test_held_requests_beyond_the_limit_are_forgotten(loops, limit, answered):
    requests = capture_batch(metadata_requests(3), kb.REQUEST)
    responses = capture_batch(
        [kproto.encode_response(MetadataResponse(), version=12, correlation_id=i) for i in range(3)], kb.RESPONSE
    )
    open_requests = dump.OpenRequests(limit=limit)
    for frames in (requests, responses):
        headers = kb.decode_frames(frames["payload"], directions=frames["direction"].to_numpy())
        keys, versions, clients = open_requests.match(frames, headers)
    assert keys.tolist() == answered
    assert versions.tolist() == [12 if k == 3 else -1 for k in answered]
    assert clients.tolist() == ["dumper" if k == 3 else None for k in answered]
    assert len(open_requests) == 0


@pytest.mark.parametrize(
    "argv,check",
    [
        (["--api", "Produce"], lambda r: r["header"]["api_key"] == 0),
        (["--api", "18", "--api", "metadata"], lambda r: r["header"]["api_key"] in (18, 3)),
        (["--api-version", "9"], lambda r: r["header"]["api_version"] == 9),
        (["--client-id", "shop"], lambda r: r["connection"] == 0),
        (["--connection", "1"], lambda r: r["connection"] == 1),
        (["--direction", "response"], lambda r: r["direction"] == "response"),
        (["--status", "error"], lambda r: r["status"] != "OK"),
        (["--status", "ok", "--direction", "request"], lambda r: r["status"] == "OK" and r["direction"] == "request"),
    ],
)
def test_filters(small, capsys, argv, check):
    status, everything, _ = run_cli(capsys, small)
    status, kept, err = run_cli(capsys, small, *argv)
    assert status == 0 and err == ""
    assert kept == [r for r in everything if check(r)]
    assert 0 < len(kept) < len(everything)


def test_client_id_keeps_the_responses_of_its_requests(small, capsys):
    _, kept, _ = run_cli(capsys, small, "--client-id", "shop")
    assert {r["header"]["client_id"] for r in kept} == {"shop"}
    assert sorted(r["direction"] for r in kept) == ["request"] * 3 + ["response"] * 2


def test_limit(big, capsys):
    _, everything, _ = run_cli(capsys, big)
    status, first, _ = run_cli(capsys, big, "--limit", "3")
    assert status == 0 and first == everything[:3]
    _, two_files, _ = run_cli(capsys, big, big, "--limit", len(everything) + 2)
    assert two_files == everything + everything[:2]


def test_unknown_api_name_is_a_usage_error(small, capsys):
    assert main(["dump", str(small), "--api", "NoSuchApi"]) == 2
    assert "NoSuchApi" in capsys.readouterr().err


def test_stdin_gives_what_the_file_gives(small):
    from_file = subprocess.run(COMMAND + ["dump", str(small)], capture_output=True, check=True).stdout
    from_stdin = subprocess.run(
        COMMAND + ["dump", "-"], input=small.read_bytes(), capture_output=True, check=True
    ).stdout
    assert from_stdin.replace(b'"<stdin>"', json.dumps(str(small)).encode()) == from_file
    assert from_file.count(b"\n") == 10


def frames_file(tmp_path, payloads: list[bytes], tail: bytes = b""):
    path = tmp_path / "frames.bin"
    path.write_bytes(b"".join(struct.pack(">i", len(p)) + p for p in payloads) + tail)
    return path


def metadata_requests(count: int) -> list[bytes]:
    return [
        kproto.encode_request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=f"t{i}")]),
            version=12,
            correlation_id=i,
            client_id="dumper",
        )
        for i in range(count)
    ]


def test_frame_dump_read_in_chunks_that_cut_frames(tmp_path, monkeypatch, loops):
    payloads = metadata_requests(50)
    path = frames_file(tmp_path, payloads)
    whole = list(dump.records(dump.Input(str(path))))
    monkeypatch.setattr(dump, "FRAME_DUMP_CHUNK", 37)  # a frame is 50-odd bytes: every chunk cuts one
    assert list(dump.records(dump.Input(str(path)))) == whole
    assert [r["body"]["topics"][0]["name"] for r in whole] == [f"t{i}" for i in range(50)]
    assert [r["sequence"] for r in whole] == list(range(50))
    assert whole[0]["ts_first_ns"] is None and whole[0]["header"]["client_id"] == "dumper"


def test_broken_capture_mid_file(small, tmp_path, capsys):
    data = small.read_bytes()
    # A pcap record claiming 100 MiB: reading stops there, everything before it is printed.
    broken = tmp_path / "broken.pcap"
    broken.write_bytes(data + struct.pack("<IIII", 1, 0, 100 << 20, 100 << 20) + b"\x00" * 64)
    _, expected, _ = run_cli(capsys, small)
    status, printed, err = run_cli(capsys, broken)
    assert status == 3
    assert [dict(r, capture=None) for r in printed] == [dict(r, capture=None) for r in expected]
    assert (
        err == f"kproto dump: {broken}: byte offset {len(data):,}: oversized_record: "
        f"{err.split('oversized_record: ', 1)[1]}"
    )
    assert "record" in err and err.endswith("\n") and err.count("\n") == 1


def test_capture_cut_in_a_record(small, tmp_path, capsys):
    data = small.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-10])
    status, printed, err = run_cli(capsys, cut)
    # The last record is a FIN: every frame came before it.
    assert status == 3 and len(printed) == 10
    assert f"{cut}: byte offset " in err and "truncated_record: incomplete record: " in err


@pytest.mark.parametrize(
    "tail,category,reason",
    [
        (struct.pack(">i", -5) + b"x" * 20, "bad_frame_size", "-5"),
        (struct.pack(">i", 40) + b"x" * 20, "truncated_record", "incomplete frame: 24 bytes"),
    ],
)
def test_broken_frame_dump(tmp_path, capsys, tail, category, reason):
    payloads = metadata_requests(5)
    path = frames_file(tmp_path, payloads, tail)
    status, printed, err = run_cli(capsys, path)
    assert status == 3 and len(printed) == 5
    offset = sum(4 + len(p) for p in payloads)
    assert f"kproto dump: {path}: byte offset {offset}: {category}: " in err and reason in err


def test_not_a_capture(tmp_path, capsys):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"hello, this is text\n")
    status, printed, err = run_cli(capsys, path)
    assert status == 3 and printed == []
    assert "byte offset 0: not_a_capture" in err


def test_missing_file_is_a_usage_error(tmp_path, capsys):
    assert main(["dump", str(tmp_path / "nope.pcap")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_tree_format(small, capsys):
    assert main(["dump", str(small), "--format", "tree", "--api", "Produce", "--direction", "response"]) == 0
    out = capsys.readouterr().out
    frames, connections, _ = read_capture(str(small))
    row = connections.to_pylist()[0]
    assert out.startswith(
        f"{small}  connection 0 ({row['client_ip']}:{row['client_port']} -> "
        f"{row['server_ip']}:{row['server_port']})  response #1  Produce(0) v9\n"
    )
    assert "  status          OK\n" in out and "        partition_responses:\n" in out


def test_closed_pipe_before_the_first_write(big):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(COMMAND + ["dump", str(big)], stdout=write_end, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write_end)
    assert result.stderr == b"" and result.returncode == 0


def test_reader_stops_after_one_line(big):
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # far less than the output: still writing when closed
    try:
        process = subprocess.Popen(COMMAND + ["dump", str(big)], stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        first = json.loads(reader.readline())
    _, err = process.communicate(timeout=60)
    assert first["header"]["api"] == "Produce"
    assert err == b"" and process.returncode == 0


# ------------------------------------------------------------------ kproto decode
REQUEST = kproto.encode_request(
    MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")]),
    version=12,
    correlation_id=7,
    client_id="me",
)
RESPONSE = kproto.encode_response(MetadataResponse(cluster_id="c1", controller_id=3), version=12, correlation_id=7)


def decode(capsys, *argv, stdin: bytes | None = None, monkeypatch=None) -> tuple[int, dict | None, str]:
    status = main(["decode", *argv])
    out, err = capsys.readouterr()
    return status, json.loads(out) if out else None, err


@pytest.mark.parametrize("prefixed", [False, True])
@pytest.mark.parametrize("form", ["hex", "base64", "file"])
def test_decode_request(capsys, tmp_path, form, prefixed):
    data = struct.pack(">i", len(REQUEST)) + REQUEST if prefixed else REQUEST
    if form == "hex":
        argv = ["--hex", " ".join(f"{b:02x}" for b in data)]
    elif form == "base64":
        argv = ["--base64", base64.b64encode(data).decode()]
    else:
        (tmp_path / "frame.bin").write_bytes(data)
        argv = ["--file", str(tmp_path / "frame.bin")]
    status, record, err = decode(capsys, *argv)
    assert status == 0 and err == ""
    assert record == {
        "direction": "request",
        "size_prefixed": prefixed,
        "header": {"api_key": 3, "api": "Metadata", "api_version": 12, "correlation_id": 7, "client_id": "me"},
        "body": kproto.decode_request(REQUEST).body.to_dict(),
    }


def test_decode_response_from_stdin():
    result = subprocess.run(
        COMMAND + ["decode", "--api-key", "Metadata", "--api-version", "12"],
        input=RESPONSE,
        capture_output=True,
        check=True,
    )
    record = json.loads(result.stdout)
    assert record["header"] == {"api_key": 3, "api": "Metadata", "api_version": 12, "correlation_id": 7}
    assert record["body"]["cluster_id"] == "c1" and record["body"]["controller_id"] == 3


def test_decode_forced_framing(capsys):
    # Read with a size prefix it does not have, the frame's first 4 bytes are taken as its size.
    status, _, err = decode(capsys, "--hex", REQUEST.hex(), "--size-prefixed")
    assert status == 1 and "frame size" in err
    status, record, _ = decode(capsys, "--hex", REQUEST.hex(), "--no-size-prefix", "--format", "json")
    assert status == 0 and record["header"]["correlation_id"] == 7


def test_decode_tree(capsys):
    assert main(["decode", "--hex", REQUEST.hex(), "--format", "tree"]) == 0
    out = capsys.readouterr().out
    assert 'header: {api_key: 3, api: "Metadata", api_version: 12, correlation_id: 7, client_id: "me"}' in out
    assert '  topics:\n    - {topic_id: "00000000-0000-0000-0000-000000000000", name: "orders"}' in out


def test_decode_bad_input_names_api_version_path_and_offset(capsys):
    status, record, err = decode(capsys, "--hex", REQUEST[:-6].hex())
    assert status == 1 and record is None
    with pytest.raises(kproto.DecodeError) as info:
        kproto.decode_request(REQUEST[:-6])
    assert str(info.value) in err
    assert "api_key=3, v12" in err and "MetadataRequest.topics[0]" in err and "byte offset" in err
    status, _, err = decode(capsys, "--hex", RESPONSE[:-2].hex(), "--api-key", "3", "--api-version", "12")
    assert status == 1 and "MetadataResponse" in err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--hex", "0g"], "not hex"),
        (["--base64", "@@@"], "--base64"),
        (["--hex", "00", "--api-key", "3"], "--api-version"),
        (["--hex", "00", "--api-version", "3"], "--api-key"),
        (["--hex", "00", "--api-key", "NoSuchApi", "--api-version", "1"], "NoSuchApi"),
    ],
)
def test_decode_usage_errors(capsys, argv, message):
    status, _, err = decode(capsys, *argv)
    assert status == 2 and message in err


def test_lost_bytes_are_summed_on_stderr_with_exit_status_4(tmp_path, capsys):
    """A capture read completely whose streams lost bytes: its frames, then one line, exit 4."""
    from tests.pcapwriter import Conversation, pcap_of, request_frame, response_frame

    conv = Conversation()
    packets = conv.handshake()
    topic = struct.pack(">ih", 1, 290) + b"t" * 290  # Metadata v1: one topic, a long name
    requests = [request_frame(3, 1, 10 + i, topic) for i in range(4)]
    answer = struct.pack(">iiii", 0, -1, 0, 0)  # no brokers, no cluster id, controller 0, no topics
    for i, request in enumerate(requests):
        packets += conv.data("client", request, (100,))
        packets += conv.data("server", response_frame(10 + i, answer), (100,))
    client = [p for p in packets if p.sender == "client" and p.payload]
    lost = client[5]  # inside the second request
    packets = [p for p in packets if p is not lost] + conv.close()
    path = tmp_path / "lossy.pcap"
    path.write_bytes(pcap_of(packets))
    status, rows, err = run_cli(capsys, path)
    assert status == 4
    requests_out = [r for r in rows if r["direction"] == "request"]
    # the request the gap cut is there, its header read, its status saying why its body is not
    assert [r["status"] for r in requests_out] == ["OK", "NOT_CAPTURED", "OK", "OK"]
    assert [r["header"]["correlation_id"] for r in requests_out] == [10, 11, 12, 13]
    assert f"lossy.pcap: {len(lost.payload)} bytes never captured in 1 gap; 0 bytes cut off" in err


def test_records_name_the_connections_addresses(small, capsys):
    """Each record says who talks (issue 38): known from the connection's first frame, so a live
    input prints them before the connection closes (tests/arrow/test_capture_edges.py)."""
    _, connections, _ = read_capture(str(small))
    expected = {
        row["connection_id"]: (f"{row['client_ip']}:{row['client_port']}", f"{row['server_ip']}:{row['server_port']}")
        for row in connections.to_pylist()
    }
    status, rows, _ = run_cli(capsys, small)
    assert status == 0 and rows
    assert all((r["client"], r["broker"]) == expected[r["connection"]] for r in rows)
    assert list(rows[0])[:4] == ["capture", "connection", "client", "broker"]
    assert dump.address("2001:db8::1", 9092) == "[2001:db8::1]:9092"


def test_snap_length_is_named_on_stderr(tmp_path, capsys):
    """A capture taken with -s 96: the request headers are rows (NOT_CAPTURED), and stderr names
    the snap length that cut the bodies."""
    from tests.pcapwriter import Conversation, PcapWriter, request_frame, response_frame

    conv = Conversation()
    packets = conv.handshake()
    topic = struct.pack(">ih", 1, 290) + b"t" * 290
    for i in range(3):
        packets += conv.data("client", request_frame(3, 1, 10 + i, topic), (1400,))
        packets += conv.data("server", response_frame(10 + i, struct.pack(">iiii", 0, -1, 0, 0)), (1400,))
    writer = PcapWriter(snaplen=96)
    for i, packet in enumerate(packets + conv.close()):
        writer.add(1_700_000_000_000_000_000 + i * 1000, packet.data)
    path = tmp_path / "short.pcap"
    path.write_bytes(writer.getvalue())
    status, rows, err = run_cli(capsys, path)
    assert status == 4
    assert [r["status"] for r in rows if r["direction"] == "request"] == ["NOT_CAPTURED"] * 3
    assert "short.pcap: 0 bytes never captured in 0 gaps; snaplen 96: bodies not captured, " in err

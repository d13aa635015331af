"""kproto.analyze.spark.worker without Spark: split planning, range reading, decoding and pairing rows."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from kproto.analyze.spark import combine as C
from kproto.analyze.spark import decode as D
from kproto.analyze.spark import planning as P
from kproto.analyze.spark import task as T
from kproto.analyze.spark import worker as W
from tests import spark_captures as sc


def _kind(batches, kind: str) -> pa.Table:
    table = pa.Table.from_batches(list(batches), schema=W.PARTS_SCHEMA)
    return table.filter(pc.equal(table["kind"], kind))


def _tables(split, **options) -> tuple[W.Sink, pa.Table]:
    """The split's frames and exchanges (in a Sink) and its compact rows."""
    sink = W.Sink()
    parts = pa.Table.from_batches(list(T.process_split(split, sink=sink, **options)), schema=W.PARTS_SCHEMA)
    return sink, parts


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("captures") / "small.pcap"
    path.write_bytes(sc.small_capture())
    return str(path)


def test_small_capture_exchanges_exactly(small):
    (split,) = P.plan_file(small, 0)
    assert (split.mode, split.split_count, split.format) == ("decode", 1, "pcap")
    sink, _parts = _tables(split)
    rows = (
        sink.table("exchanges")
        .select(
            [
                "connection_id",
                "api_key",
                "api_version",
                "client_id",
                "pair_status_name",
                "error_code",
                "client_software_name",
                "latency_ns",
                "removed_in_4x",
            ]
        )
        .to_pylist()
    )
    assert [tuple(r.values()) for r in rows] == [
        (0, 18, 3, "shop", "PAIRED", 0, "shop-app", 1_000_000, False),
        (0, 0, 9, "shop", "PAIRED", 0, None, 3_000_000, False),
        (0, 3, 12, "shop", "UNPAIRED_REQUEST", None, None, None, False),
        (1, 18, 3, "old", "PAIRED", 42, "bad name", 1_000_000, False),
        (1, 0, 2, "old", "NO_RESPONSE_EXPECTED", None, None, None, True),
        (1, 999, 0, "old", "UNPAIRED_REQUEST", None, None, None, False),
        (1, None, None, None, "UNPAIRED_RESPONSE", None, None, None, None),
    ]
    problems = sink.table("exchanges")["software_problems"].to_pylist()
    assert problems[3] == "ClientSoftwareName 'bad name' has characters outside [.-a-zA-Z0-9]: ' '"
    assert [p for i, p in enumerate(problems) if i != 3] == [None] * 6


def test_small_capture_frames_and_compact_rows(small):
    sink, out = _tables(P.plan_file(small, 0)[0])
    frames = sink.table("frames")
    assert frames.num_rows == 10
    assert pc.value_counts(frames["status_name"]).to_pylist() == [
        {"values": "OK", "counts": 8},
        {"values": "UNKNOWN_API", "counts": 1},
        {"values": "NO_REQUEST_INFO", "counts": 1},
    ]
    # Record sets show in the bodies as a summary of their batch headers, not as base64.
    produce = frames.filter(pc.and_(pc.equal(frames["api_key"], 0), pc.equal(frames["direction"], 0)))
    first = json.loads(produce["body"][0].as_py())["topic_data"][0]["partition_data"][0]["records"]
    assert first == {"batches": 1, "records": 3, "bytes": 103, "compression": "none"}
    sink64, _ = _tables(P.plan_file(small, 0)[0], records="base64")
    same = {(r["connection_id"], r["direction"], r["sequence"]): r for r in sink64.table("frames").to_pylist()}
    key = (produce["connection_id"][0].as_py(), 0, produce["sequence"][0].as_py())
    raw = json.loads(same[key]["body"])["topic_data"][0]["partition_data"][0]["records"]
    assert len(base64.b64decode(raw)) == 103
    topics = (
        _kind(out.to_batches(), "topic")
        .select(["topic", "partition", "api_key", "messages", "records", "batches", "bytes", "compression"])
        .to_pylist()
    )
    assert [tuple(p.values()) for p in topics] == [
        ("orders", 0, 0, 1, 3, 1, 103, "none"),
        ("audit", 1, 0, 1, 2, 1, 102, "gzip"),
    ]
    usage = {
        (r["connection_id"], r["api_key"], r["api_version"]): r for r in _kind(out.to_batches(), "usage").to_pylist()
    }
    assert sorted(usage) == [(0, 0, 9), (0, 3, 12), (0, 18, 3), (1, 0, 2), (1, 18, 3), (1, 999, 0)]
    assert (
        usage[(1, 0, 2)]["removed_in_4x_requests"],
        usage[(1, 18, 3)]["error_responses"],
        usage[(1, 18, 3)]["client_software_name"],
    ) == (1, 1, "bad name")
    (counts,) = _kind(out.to_batches(), "counts")["info"].to_pylist()
    assert json.loads(counts) == {
        "frames": 10,
        "request_frames": 6,
        "response_frames": 4,
        "frame_bytes": 931,
        "frames_ok": 8,
        "frames_undecodable": 2,
        "first_ts_ns": sc.START_NS + 6_000_000,
        "last_ts_ns": sc.START_NS + 16_000_000,
        "exchanges_paired": 3,
        "no_response_expected": 1,
        "unpaired_requests": 2,
        "unpaired_responses": 1,
    }
    (capture,) = _kind(out.to_batches(), "capture")["info"].to_pylist()
    assert '"connections": 2' in capture and '"split_count": 1' in capture
    assert _kind(out.to_batches(), "connection").num_rows == 2


def test_error_code_is_the_first_nonzero_anywhere():
    bodies = pa.array(
        [
            '{"error_code":0,"x":[{"error_code":0},{"error_code":6}]}',
            '{"error_code":0}',
            '{"a":1}',
            None,
            '{"error_code":-1}',
        ]
    )
    assert D._error_codes(bodies).to_pylist() == [6, 0, None, None, -1]


def test_a_split_pcap_gives_the_same_frames_and_pairs_as_whole(tmp_path):
    path = tmp_path / "big.pcap"
    path.write_bytes(sc.big_capture(connections=4, exchanges=30))
    splits = P.plan_file(str(path), 0, split_bytes=12_000, overlap=8_000)
    assert len(splits) > 3
    assert [s.split_index for s in splits] == list(range(len(splits)))
    assert all(a.end == b.start and a.ts_hi == b.ts_lo for a, b in zip(splits, splits[1:]))
    # Every range but the first is read from a record boundary before its start (its context).
    assert splits[0].context_start == splits[0].start
    assert all(s.start - 8_000 - 4096 <= s.context_start < s.start for s in splits[1:])
    ranges = W.Sink()
    parts = [b for s in splits for b in T.process_split(s, sink=ranges)]
    assert not any(b["kind"][0].as_py() == "raw" for b in parts if b.num_rows)
    whole, _ = _tables(P.plan_file(str(path), 0)[0])
    split_frames, whole_frames = ranges.table("frames"), whole.table("frames")
    key = ["direction", "ts_first_ns", "size", "api_key", "correlation_id", "client_id", "status"]

    def rows(table):
        return sorted(tuple(r.values()) for r in table.select(key).to_pylist())

    assert split_frames.num_rows == whole_frames.num_rows == 4 * 30 * 2
    assert rows(split_frames) == rows(whole_frames)
    exchanges = ranges.table("exchanges")
    assert pc.value_counts(exchanges["pair_status_name"]).to_pylist() == [{"values": "PAIRED", "counts": 120}]
    # Connection ids of split files are address hashes, the same from every range.
    ids = set(split_frames["connection_id"].to_pylist())
    assert ids == {W.connection_hash(f"10.1.0.{i + 1}", 41000 + i, "10.1.0.200", 9092) for i in range(4)}
    # Sequences are unique per connection and direction, increase in capture order, and every
    # exchange names frames that exist (a range computes its neighbour's sequences alike).
    frames = split_frames.sort_by(
        [("connection_id", "ascending"), ("direction", "ascending"), ("ts_first_ns", "ascending")]
    ).to_pylist()
    for a, b in zip(frames, frames[1:]):
        if (a["connection_id"], a["direction"]) == (b["connection_id"], b["direction"]):
            assert a["sequence"] < b["sequence"]
    present = {(f["connection_id"], f["direction"], f["sequence"]) for f in frames}
    for e in exchanges.to_pylist():
        assert (e["connection_id"], 0, e["request_sequence"]) in present
        assert (e["connection_id"], 1, e["response_sequence"]) in present


def test_big_unsplittable_files_go_raw_to_the_grouping_step(tmp_path):
    path = tmp_path / "big.pcap"
    path.write_bytes(sc.big_capture(connections=2, exchanges=10))
    whole, _ = _tables(P.plan_file(str(path), 0)[0])
    (split,) = P.plan_file(str(path), 0)
    split.mode = "raw"  # as a pcapng file larger than the split size
    raw = [b for b in T.process_split(split) if b.num_rows and b["kind"][0].as_py() == "raw"]
    grouped = W.Sink()
    counts = _kind(D.decode_raw_batches(raw, sink=grouped), "counts")
    assert json.loads(counts["info"][0].as_py())["exchanges_paired"] == 20
    order = [("connection_id", "ascending"), ("direction", "ascending"), ("sequence", "ascending")]
    assert grouped.table("frames").sort_by(order).equals(whole.table("frames").sort_by(order))
    assert grouped.table("frames").num_rows == 40


def test_record_boundary_search_skips_mid_record_offsets(tmp_path):
    data = sc.big_capture(connections=2, exchanges=5)
    boundary = P.find_record_boundary(data[100:], 100, "<", False, 262144, (sc.START_NS - 10**12, sc.START_NS + 10**12))
    assert boundary is not None
    offset, ts = boundary
    # The offset starts a record: walking the records from the file header reaches it.
    pos = P.PCAP_HEADER_SIZE
    while pos < offset:
        pos += P._pcap_record(data, pos, "<", False, 262144)[1]
    assert pos == offset and P._pcap_record(data, pos, "<", False, 262144)[0] == ts


def test_frame_files_are_one_connection_of_requests(tmp_path):
    path = tmp_path / "frames.bin"
    path.write_bytes(
        sc.request(sc.produce("t", 0, sc.records(1)), 9, 5, "dump")
        + sc.request(sc.produce("t", 0, sc.records(1)), 9, 6, "dump")
    )
    (split,) = P.plan_file(str(path), 0)
    assert split.format == "frames"
    sink, _parts = _tables(split)
    frames = sink.table("frames")
    assert frames.select(["connection_id", "direction", "sequence", "correlation_id", "status_name"]).to_pylist() == [
        {"connection_id": 0, "direction": 0, "sequence": s, "correlation_id": s + 5, "status_name": "OK"}
        for s in (0, 1)
    ]


def test_local_listing_expands_globs_and_directories(tmp_path):
    from kproto.analyze.spark.inputs import list_local

    for name in ("a.pcap", "b.pcap", "_SUCCESS", ".hidden", "c.txt"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    assert sorted(list_local([str(tmp_path / "*.pcap")])) == [str(tmp_path / "a.pcap"), str(tmp_path / "b.pcap")]
    assert sorted(list_local([str(tmp_path)])) == [str(tmp_path / n) for n in ("a.pcap", "b.pcap", "c.txt")]
    with pytest.raises(FileNotFoundError):
        list_local([str(tmp_path / "missing.pcap")])
    with pytest.raises(FileNotFoundError):
        list_local([str(tmp_path / "*.pcapng")])


# ---------------------------------------------------------------- topic IDs (KIP-516)
@pytest.fixture(scope="module")
def topic_id_run(tmp_path_factory):
    """The two files of sc.topic_id_captures, read as one run: (sinks by file, compact rows of both)."""
    directory = tmp_path_factory.mktemp("topic-ids")
    sinks, parts = {}, []
    for name, data in zip(("a.pcap", "b.pcap"), sc.topic_id_captures()):
        path = directory / name
        path.write_bytes(data)
        sinks[name], rows = _tables(P.plan_file(str(path), len(data))[0])
        parts.append(rows)
    return sinks, pa.concat_tables(parts)


def test_responses_naming_topic_ids_give_topic_name_rows(topic_id_run):
    _sinks, parts = topic_id_run
    named = _kind(parts.to_batches(), "topic_name").select(["topic_id", "topic", "messages"]).to_pylist()
    assert sorted(tuple(r.values()) for r in named) == [(sc.ORDERS_ID, "orders", 1), (sc.PAYMENTS_ID, "payments", 1)]


def test_topic_ids_are_named_from_other_connections_and_files(topic_id_run):
    _sinks, parts = topic_id_run
    topics = C.combine(parts)["topics"]
    assert topics.schema == C.TOPICS_SCHEMA
    rows = [
        (r["topic"], r["topic_id"], r["partition"], r["produce_records"], r["fetch_records"])
        for r in topics.to_pylist()
    ]
    # orders: fetched by ID in a.pcap, named and produced to by name in b.pcap: one row.
    assert rows == [
        (None, sc.GHOST_ID, 2, 0, 1),
        ("orders", sc.ORDERS_ID, 0, 3, 4),
        ("payments", sc.PAYMENTS_ID, 1, 0, 2),
    ]


def test_exchanges_carry_the_topic_their_frames_name_or_their_ids_name(topic_id_run):
    sinks, _parts = topic_id_run
    fetches = sinks["a.pcap"].table("exchanges").filter(pc.equal(sinks["a.pcap"].table("exchanges")["api_key"], 1))
    # PAYMENTS_ID is named by a Metadata response decoded with it (another connection of a.pcap);
    # ORDERS_ID only in b.pcap, another task (the topics table names it: see above); GHOST_ID never.
    assert [(r["topic"], r["topic_id"]) for r in fetches.to_pylist()] == [
        (None, sc.ORDERS_ID),
        ("payments", sc.PAYMENTS_ID),
        (None, sc.GHOST_ID),
    ]
    by_name = sinks["b.pcap"].table("exchanges").to_pylist()
    assert [(r["api_key"], r["topic"], r["topic_id"]) for r in by_name] == [(3, None, None), (0, "orders", None)]


def test_an_id_named_twice_takes_one_name_and_a_recreated_name_gets_no_id():
    names, ids = C.resolve_topic_ids(
        [
            {"topic_id": "a", "topic": "y"},
            {"topic_id": "a", "topic": "x"},
            {"topic_id": "b", "topic": "z"},
            {"topic_id": "c", "topic": "z"},
        ]
    )
    assert names == {"a": "x", "b": "z", "c": "z"} and ids == {"x": "a"}


def test_sample_capture_names_every_topic_it_fetches_by_id():
    sample = Path(__file__).resolve().parents[2] / "samples" / "sample.pcap"
    sink, parts = _tables(P.plan_file(str(sample), 0)[0])
    # The exchanges of fraud-detector's Fetch v16 carry the name, as the topics table does.
    by_id_exchanges = sink.table("exchanges").filter(pc.is_valid(sink.table("exchanges")["topic_id"]))
    assert [(r["api_key"], r["api_version"], r["topic"]) for r in by_id_exchanges.to_pylist()] == [
        (1, 16, "orders"),
        (1, 16, "orders"),
    ]
    by_id = _kind(parts.to_batches(), "topic").filter(pc.is_null(_kind(parts.to_batches(), "topic")["topic"]))
    assert by_id.num_rows and set(by_id["topic_id"].to_pylist()) == {"08d54946-e234-5fc2-9c59-d53e4cf610d0"}
    topics = C.combine(parts)["topics"].to_pylist()
    assert all(t["topic"] is not None for t in topics)
    orders = next(t for t in topics if t["topic"] == "orders")
    # Fetch v11 (by name) twice, and fraud-detector's Fetch v16 (by ID) twice.
    assert (orders["topic_id"], orders["fetch_responses"]) == ("08d54946-e234-5fc2-9c59-d53e4cf610d0", 4)


# ---------------------------------------------------------------- copies of the payloads
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.pcap"


def test_one_array_uses_a_single_chunk_in_place_and_joins_several():
    from kproto.arrow.frames import one_array

    values = pa.array([b"ab", b"cde", None], pa.binary())
    alone = one_array(pa.chunked_array([values]))
    assert alone.buffers()[2].address == values.buffers()[2].address  # not a copy
    joined = one_array(pa.chunked_array([values, values]))
    assert joined.to_pylist() == values.to_pylist() * 2
    assert one_array(values) is values
    assert one_array(pa.chunked_array([], pa.binary())).to_pylist() == []


def test_a_decoded_split_s_reader_gives_its_frames_in_one_batch():
    size = SAMPLE.stat().st_size
    whole = list(W.capture_reader(str(SAMPLE), "s", (9092,), W.one_batch_bytes(size)))
    small_batches = list(W.capture_reader(str(SAMPLE), "s", (9092,), W.one_batch_bytes(1000)))
    assert len(whole) == 1 and len(small_batches) > 1
    assert pa.Table.from_batches(whole).equals(pa.Table.from_batches(small_batches).combine_chunks())
    batches = list(small_batches)
    frames = W.frames_of(batches)
    assert batches == [] and frames.equals(pa.Table.from_batches(whole))

"""kproto.spark.worker without Spark: split planning, range reading, decoding and pairing rows."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from kproto.spark import worker as W
from tests import spark_captures as sc


def _kind(batches, kind: str) -> pa.Table:
    table = pa.Table.from_batches(list(batches), schema=W.UNION_SCHEMA)
    return table.filter(pc.equal(table["kind"], kind))


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("captures") / "small.pcap"
    path.write_bytes(sc.small_capture())
    return str(path)


def test_small_capture_exchanges_exactly(small):
    (split,) = W.plan_file(small, 0)
    assert (split.mode, split.split_count, split.format) == ("decode", 1, "pcap")
    rows = _kind(W.process_split(split), "exchange").select(
        ["connection_id", "api_key", "api_version", "client_id", "pair_status_name", "error_code",
         "client_software_name", "latency_ns", "removed_in_4x"]).to_pylist()
    assert [tuple(r.values()) for r in rows] == [
        (0, 18, 3, "shop", "PAIRED", 0, "shop-app", 1_000_000, False),
        (0, 0, 9, "shop", "PAIRED", 0, None, 3_000_000, False),
        (0, 3, 12, "shop", "UNPAIRED_REQUEST", None, None, None, False),
        (1, 18, 3, "old", "PAIRED", 42, "bad name", 1_000_000, False),
        (1, 0, 2, "old", "NO_RESPONSE_EXPECTED", None, None, None, True),
        (1, 999, 0, "old", "UNPAIRED_REQUEST", None, None, None, False),
        (1, None, None, None, "UNPAIRED_RESPONSE", None, None, None, None),
    ]
    problems = _kind(W.process_split(split), "exchange")["software_problems"].to_pylist()
    assert problems[3] == "ClientSoftwareName 'bad name' has characters outside [.-a-zA-Z0-9]: ' '"
    assert [p for i, p in enumerate(problems) if i != 3] == [None] * 6


def test_small_capture_frames_and_partitions(small):
    out = list(W.process_split(W.plan_file(small, 0)[0]))
    frames = _kind(out, "frame")
    assert frames.num_rows == 10
    assert pc.value_counts(frames["status_name"]).to_pylist() == [
        {"values": "OK", "counts": 8}, {"values": "UNKNOWN_API", "counts": 1},
        {"values": "NO_REQUEST_INFO", "counts": 1}]
    parts = _kind(out, "partition").select(["topic", "partition", "api_key", "api_version", "client_id",
                                            "record_count", "batch_count", "compression"]).to_pylist()
    assert [tuple(p.values()) for p in parts] == [("orders", 0, 0, 9, "shop", 3, 1, "none"),
                                                  ("audit", 1, 0, 2, "old", 2, 1, "gzip")]
    (capture,) = _kind(out, "capture")["info"].to_pylist()
    assert '"connections": 2' in capture and '"split_count": 1' in capture
    assert _kind(out, "connection").num_rows == 2


def test_error_code_is_the_first_nonzero_anywhere():
    bodies = pa.array(['{"error_code":0,"x":[{"error_code":0},{"error_code":6}]}', '{"error_code":0}',
                       '{"a":1}', None, '{"error_code":-1}'])
    assert W._error_codes(bodies).to_pylist() == [6, 0, None, None, -1]


def test_a_split_pcap_gives_the_same_frames_and_pairs_as_whole(tmp_path):
    path = tmp_path / "big.pcap"
    path.write_bytes(sc.big_capture(connections=4, exchanges=30))
    splits = W.plan_file(str(path), 0, split_bytes=12_000, overlap=8_000)
    assert len(splits) > 3
    assert [s.split_index for s in splits] == list(range(len(splits)))
    assert all(a.end == b.start and a.ts_hi == b.ts_lo for a, b in zip(splits, splits[1:]))
    raw = [b for s in splits for b in W.process_split(s) if b.num_rows and b["kind"][0].as_py() == "raw"]
    split_frames = _kind(W.decode_raw_batches(raw), "frame")
    whole_frames = _kind(W.process_split(W.plan_file(str(path), 0)[0]), "frame")
    key = ["direction", "sequence", "ts_first_ns", "size", "api_key", "correlation_id", "client_id", "status"]

    def rows(table):
        return sorted(tuple(r.values()) for r in table.select(key).to_pylist())

    assert split_frames.num_rows == whole_frames.num_rows == 4 * 30 * 2
    assert rows(split_frames) == rows(whole_frames)
    exchanges = _kind(W.decode_raw_batches(raw), "exchange")
    assert pc.value_counts(exchanges["pair_status_name"]).to_pylist() == [{"values": "PAIRED", "counts": 120}]
    # Connection ids of split files are address hashes, the same from every range.
    ids = set(split_frames["connection_id"].to_pylist())
    assert ids == {W.connection_hash(f"10.1.0.{i + 1}", 41000 + i, "10.1.0.200", 9092) for i in range(4)}


def test_record_boundary_search_skips_mid_record_offsets(tmp_path):
    data = sc.big_capture(connections=2, exchanges=5)
    boundary = W.find_record_boundary(data[100:], 100, "<", False, 262144,
                                      (sc.START_NS - 10**12, sc.START_NS + 10**12))
    assert boundary is not None
    offset, ts = boundary
    # The offset starts a record: walking the records from the file header reaches it.
    pos = W.PCAP_HEADER_SIZE
    while pos < offset:
        pos += W._pcap_record(data, pos, "<", False, 262144)[1]
    assert pos == offset and W._pcap_record(data, pos, "<", False, 262144)[0] == ts


def test_frame_files_are_one_connection_of_requests(tmp_path):
    path = tmp_path / "frames.bin"
    path.write_bytes(sc.request(sc.produce("t", 0, sc.records(1)), 9, 5, "dump")
                     + sc.request(sc.produce("t", 0, sc.records(1)), 9, 6, "dump"))
    (split,) = W.plan_file(str(path), 0)
    assert split.format == "frames"
    frames = _kind(W.process_split(split), "frame")
    assert frames.select(["connection_id", "direction", "sequence", "correlation_id", "status_name"]).to_pylist() \
        == [{"connection_id": 0, "direction": 0, "sequence": s, "correlation_id": s + 5, "status_name": "OK"}
            for s in (0, 1)]

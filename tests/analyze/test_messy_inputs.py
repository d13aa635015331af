"""Messy inputs through the analysis pipeline, without Spark: nothing is lost in silence.

Each case builds an input that cannot be read completely and checks what the
worker and the driver make of it: the frames before the problem are kept and
decoded, the problem is a row of the ``errors`` table (file, byte offset,
category, reason, bytes not read), and the summary's byte identity holds, so
``accounted`` is true only because every lost byte has a row saying why.
"""

from __future__ import annotations

import json
import struct

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from kproto.analyze.spark import accounting as A
from kproto.analyze.spark import inputs, jobs
from kproto.analyze.spark import planning as P
from kproto.analyze.spark import task as T
from kproto.analyze.spark import worker as W
from kproto.limits import CAPTURE_MAX_RECORD_SIZE
from tests import spark_captures as sc
from tests.pcapwriter import PcapngWriter


def analyse(paths, **options):
    """Plan, read and combine as `kproto analyze` does in the driver: (frames, summary rows by capture, errors)."""
    sink = W.Sink()
    parts = []
    for path in paths:
        for split in P.plan_file(str(path), 0, **options):
            parts += list(T.process_split(split, sink=sink))
    table = pa.Table.from_batches(parts, schema=W.PARTS_SCHEMA)
    accounting = [
        r
        for r in table.select(["kind", "capture", "connection_id", "info"]).to_pylist()
        if r["kind"] in ("capture", "counts", "connection")
    ]
    errors = A.error_rows(accounting)
    summary = {r["capture"]: r for r in A.summary_rows(accounting, errors)}
    return sink.table("frames"), summary, errors


def assert_bytes_add_up(row):
    assert row["file_bytes"] == row["record_bytes"] + row["truncated_bytes"] + row["unread_bytes"], row


def frames_of(frames, capture):
    return frames.filter(pc.equal(frames["capture"], str(capture)))


@pytest.fixture
def good_pcap(tmp_path):
    path = tmp_path / "good.pcap"
    path.write_bytes(sc.small_capture())
    return path


def test_a_bad_pcap_among_good_ones_keeps_everything_readable(tmp_path, good_pcap):
    data = sc.small_capture()
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(data + struct.pack("<IIII", 1_700_000_100, 0, 0xFFFFFFFF, 0xFFFFFFFF) + b"\x00" * 100)
    frames, summary, errors = analyse([good_pcap, bad])
    # The bad file's frames before its last record are all there, as in the good file.
    assert frames_of(frames, bad).num_rows == frames_of(frames, good_pcap).num_rows == 10
    assert errors == [
        {
            "capture": str(bad),
            "category": "oversized_record",
            "offset": len(data),
            "reason": f"pcap record with captured length 4294967295 (limit {CAPTURE_MAX_RECORD_SIZE})",
            "unread_bytes": 116,
            "file": str(bad),
        }
    ]
    assert summary[str(bad)]["errors"] == 1 and summary[str(good_pcap)]["errors"] == 0
    for row in summary.values():
        assert_bytes_add_up(row)
        assert row["accounted"], row
    assert summary["*"]["unread_bytes"] == 116 and summary["*"]["file_bytes"] == 2 * len(data) + 116


def test_a_frame_dump_with_a_bad_size_keeps_the_frames_before_it(tmp_path):
    good = b"".join(sc.request(sc.produce("t", 0, sc.records(1)), 9, c, "dump") for c in range(5))
    dump = tmp_path / "frames.bin"
    dump.write_bytes(good + struct.pack(">i", -1) + b"rest of the file")
    frames, summary, errors = analyse([dump])
    assert frames.num_rows == 5 and frames["correlation_id"].to_pylist() == [0, 1, 2, 3, 4]
    assert [(e["category"], e["offset"], e["unread_bytes"]) for e in errors] == [("bad_frame_size", len(good), 20)]
    assert "invalid frame size -1" in errors[0]["reason"]
    row = summary[str(dump)]
    assert row["frames"] == 5 and row["record_bytes"] == row["frame_bytes"] == len(good)
    assert_bytes_add_up(row)
    assert row["accounted"]


def test_a_frame_dump_cut_short_is_a_truncated_record(tmp_path):
    good = b"".join(sc.request(sc.produce("t", 0, sc.records(1)), 9, c, "dump") for c in range(3))
    dump = tmp_path / "frames.bin"
    dump.write_bytes(good[:-7])
    frames, summary, errors = analyse([dump])
    assert frames.num_rows == 2
    (error,) = errors
    assert error["category"] == "truncated_record" and error["offset"] + error["unread_bytes"] == len(good) - 7
    assert summary[str(dump)]["truncated_bytes"] == error["unread_bytes"]
    assert summary[str(dump)]["accounted"]


@pytest.mark.parametrize("content", [b"This is a text file, not a capture.\n" * 30, bytes(range(256)) * 40])
def test_a_file_that_is_no_capture_says_so(tmp_path, content):
    path = tmp_path / "random.pcap"
    path.write_bytes(content)
    frames, summary, errors = analyse([path])
    assert frames.num_rows == 0
    (error,) = errors
    assert error["category"] == "not_a_capture" and error["offset"] == 0 and error["unread_bytes"] == len(content)
    assert error["reason"].startswith(
        f"neither a pcap or pcapng file nor size-prefixed frames (first bytes 0x{content[:4].hex()}"
    )
    row = summary[str(path)]
    assert row["unread_bytes"] == len(content) and row["accounted"]


def test_an_oversized_pcapng_block_in_mid_file_is_not_a_silent_end(tmp_path):
    writer = PcapngWriter()
    interface = writer.add_interface()
    pcap = sc.small_capture()
    # Re-wrap the small capture's packets as pcapng records, with a hostile block in the middle.
    packets, pos = [], 24
    while pos < len(pcap):
        seconds, micros, caplen, _ = struct.unpack_from("<IIII", pcap, pos)
        packets.append((seconds * 10**9 + micros * 1000, pcap[pos + 16 : pos + 16 + caplen]))
        pos += 16 + caplen
    for ts, packet in packets[:12]:
        writer.add(interface, ts, packet)
    good = writer.getvalue()
    writer.parts.append(struct.pack("<II", 6, 0xFFFFFFF0) + b"\x00" * 24)
    for ts, packet in packets[12:]:
        writer.add(interface, ts, packet)
    path = tmp_path / "mid.pcapng"
    data = writer.getvalue()
    path.write_bytes(data)
    _, summary, errors = analyse([path])
    assert [(e["category"], e["offset"], e["unread_bytes"]) for e in errors] == [
        ("oversized_record", len(good), len(data) - len(good))
    ]
    assert summary[str(path)]["accounted"]
    assert_bytes_add_up(summary[str(path)])


def test_a_corrupt_record_inside_a_split_file_is_one_row(tmp_path):
    data = bytearray(sc.big_capture(connections=4, exchanges=30))
    # Corrupt the record that starts nearest the middle of the file.
    pos, records = 24, []
    while pos < len(data):
        records.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    bad = min(records, key=lambda p: abs(p - len(data) // 2))
    struct.pack_into("<I", data, bad + 8, 0x7FFFFFFF)
    path = tmp_path / "split.pcap"
    path.write_bytes(bytes(data))
    splits = P.plan_file(str(path), 0, split_bytes=12_000, overlap=8_000)
    assert len(splits) > 3
    _, summary, errors = analyse([path], split_bytes=12_000, overlap=8_000)
    oversized = [e for e in errors if e["category"] == "oversized_record"]
    assert len(oversized) == 1 and oversized[0]["offset"] == bad
    row = summary[str(path)]
    assert row["file_bytes"] == len(data)
    assert_bytes_add_up(row)
    assert row["unread_bytes"] == sum(e["unread_bytes"] for e in errors if e["category"] != "truncated_record")
    assert row["accounted"]


def test_a_truncated_last_record_is_reported(tmp_path):
    data = sc.small_capture()
    path = tmp_path / "cut.pcap"
    path.write_bytes(data[:-5])
    _, summary, errors = analyse([path])
    (error,) = errors
    assert error["category"] == "truncated_record" and error["offset"] + error["unread_bytes"] == len(data) - 5
    assert summary[str(path)]["truncated_bytes"] == error["unread_bytes"] and summary[str(path)]["accounted"]


def test_a_missing_file_is_a_read_failed_row(tmp_path):
    path = tmp_path / "gone.pcap"
    path.write_bytes(sc.small_capture())
    (split,) = P.plan_file(str(path), 0)
    path.unlink()
    parts = pa.Table.from_batches(list(T.process_split(split)), schema=W.PARTS_SCHEMA)
    info = json.loads(parts.filter(pc.equal(parts["kind"], "capture"))["info"][0].as_py())
    assert info["errors"][0]["category"] == "read_failed" and "No such file" in info["errors"][0]["reason"]


def test_fail_fast_names_the_file_offset_and_reason(tmp_path):
    path = tmp_path / "bad.pcap"
    data = sc.small_capture()
    path.write_bytes(data + struct.pack("<IIII", 1, 0, 0xFFFFFFFF, 0))
    (split,) = P.plan_file(str(path), 0)
    with pytest.raises(W.InputError, match=f"{path}: byte offset {len(data)}: pcap record with captured length"):
        list(T.process_split(split, fail_fast=True))


def test_unexplained_loss_is_not_accounted():
    """The summary's rule itself: bytes unread without an error row make `accounted` false."""
    info = {
        "input_bytes": 100,
        "file_bytes": 60,
        "trailing_bytes": 0,
        "unread_bytes": 40,
        "errors": [],
        "format": "pcap",
        "split_count": 1,
    }
    rows = [{"kind": "capture", "capture": "x", "connection_id": None, "info": json.dumps(info)}]
    (row, _total) = A.summary_rows(rows, A.error_rows(rows))
    assert not row["accounted"]
    info["errors"] = [{"category": "oversized_record", "offset": 60, "reason": "r", "unread_bytes": 40}]
    rows[0]["info"] = json.dumps(info)
    assert A.summary_rows(rows, A.error_rows(rows))[0]["accounted"]
    info["file_bytes"] = 50  # ten bytes nowhere
    rows[0]["info"] = json.dumps(info)
    assert not A.summary_rows(rows, A.error_rows(rows))[0]["accounted"]


def test_exit_status_says_complete_incomplete_or_nothing():
    from kproto.analyze.cli_analyze import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK, exit_status

    def result(rows, errors):
        return jobs.Result(out=None, summary=rows + [{"capture": "*"}], facts=None, tables={}, errors=errors)

    error = {"capture": "b", "category": "not_a_capture", "offset": 0, "reason": "r", "unread_bytes": 9}
    good = {"capture": "a", "frames": 10, "errors": 0}
    bad = {"capture": "b", "frames": 0, "errors": 1}
    assert exit_status(result([good], [])) == EXIT_OK
    assert exit_status(result([good, bad], [error])) == EXIT_INCOMPLETE
    assert exit_status(result([bad], [error])) == EXIT_FAILED
    assert exit_status(result([dict(bad, frames=3)], [error])) == EXIT_INCOMPLETE


def test_local_input_bytes_sizes_local_files_only(tmp_path):
    (tmp_path / "a.pcap").write_bytes(b"x" * 10)
    (tmp_path / "b.pcap").write_bytes(b"x" * 5)
    assert inputs.local_input_bytes([str(tmp_path)]) == 15
    assert inputs.local_input_bytes([str(tmp_path / "a.pcap")]) == 10
    assert inputs.local_input_bytes(["hdfs:///captures/"]) is None
    assert inputs.local_input_bytes([str(tmp_path / "missing.pcap")]) is None

"""decode_frames(body="json", records="summary"): record sets as batch-header summaries, the same in both twins."""

from __future__ import annotations

import json
import struct

import pytest

import kproto.arrow.frames as kb
from kproto import api
from kproto import messages as m
from kproto.records import Record, RecordBatch

P = m.ProduceRequest


@pytest.fixture
def loops(impl, monkeypatch):
    monkeypatch.setattr(kb, "_batch", impl.load("batch"))
    return impl


def legacy_message(value: bytes, magic: int = 0, codec: int = 0) -> bytes:
    """One message of a v0 / v1 message set (the CRC is not checked by a summary)."""
    inner = (
        bytes([magic, codec])
        + (struct.pack(">q", 0) if magic == 1 else b"")
        + struct.pack(">i", -1)
        + struct.pack(">i", len(value))
        + value
    )
    return struct.pack(">qi", 0, 4 + len(inner)) + struct.pack(">I", 0) + inner


def produce(*records: bytes | None, version: int = 9) -> bytes:
    body = P(
        acks=1,
        timeout_ms=100,
        topic_data=[
            P.TopicProduceData(
                name="t", partition_data=[P.PartitionProduceData(index=i, records=r) for i, r in enumerate(records)]
            )
        ],
    )
    return api.encode_request(body, version=version, correlation_id=1, client_id="c")


def summaries(frame: bytes) -> list:
    batch = kb.decode_frames(struct.pack(">i", len(frame)) + frame, body="json", records="summary")
    body = json.loads(batch["body"][0].as_py())
    return [p["records"] for p in body["topic_data"][0]["partition_data"]]


def test_v2_batches_counted_and_codecs_named(loops):
    plain = RecordBatch.encode([Record(key=b"k", value=b"v")] * 3, base_offset=0)
    gzipped = RecordBatch.encode([Record(key=b"k", value=b"v")] * 2, base_offset=3, compression="gzip")
    assert summaries(produce(plain, plain + gzipped, None, plain + plain[:20], b"")) == [
        {"batches": 1, "records": 3, "bytes": len(plain), "compression": "none"},
        {"batches": 2, "records": 5, "bytes": len(plain) + len(gzipped), "compression": "mixed"},
        None,
        # A partial last batch (Fetch responses end with one) is left out of the counts.
        {"batches": 1, "records": 3, "bytes": len(plain) + 20, "compression": "none"},
        {"batches": 0, "records": 0, "bytes": 0, "compression": None},
    ]


def test_legacy_message_sets(loops):
    two = legacy_message(b"a") + legacy_message(b"bc", magic=1)
    wrapped = legacy_message(b"compressed bytes", magic=1, codec=2)
    assert summaries(produce(two, wrapped, version=2)) == [
        {"batches": 2, "records": 2, "bytes": len(two), "compression": "none"},
        {"batches": 1, "records": None, "bytes": len(wrapped), "compression": "snappy"},  # count hidden
    ]


def test_base64_stays_the_default(loops):
    plain = RecordBatch.encode([Record(key=b"k", value=b"v")], base_offset=0)
    frame = produce(plain)
    batch = kb.decode_frames(struct.pack(">i", len(frame)) + frame, body="json")
    assert json.loads(batch["body"][0].as_py()) == api.decode_request(frame).body.to_dict()
    with pytest.raises(ValueError, match="records must be"):
        kb.decode_frames(struct.pack(">i", len(frame)) + frame, body="json", records="none")


def test_both_implementations_write_the_same_text():
    from kproto import _impl

    plain = RecordBatch.encode([Record(key=b"k", value=b"v")] * 3, base_offset=0, compression="gzip")
    frame = produce(plain, None, legacy_message(b"x"))
    data = struct.pack(">i", len(frame)) + frame
    bodies = []
    for name in ("c", "py"):
        try:
            loops = _impl.load("batch", name)
        except ImportError:
            pytest.skip("the compiled extension is not built")
        saved, kb._batch = kb._batch, loops
        try:
            bodies.append(json.loads(kb.decode_frames(data, body="json", records="summary")["body"][0].as_py()))
        finally:
            kb._batch = saved
    # The same JSON (key order may differ: C follows the wire, Python the class's fields).
    assert bodies[0] == bodies[1]
    assert bodies[0]["topic_data"][0]["partition_data"][2]["records"]["records"] == 1

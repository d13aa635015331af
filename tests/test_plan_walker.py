"""The C codec's one plan walker (kproto/_c/_codec_walk.pxi): its Build sink hands every
value it makes from the walk to a slot or a list by moving a reference, so a decode,
eager or lazy, valid or failing, must leave no reference behind."""

from __future__ import annotations

import tracemalloc
import uuid

import pytest

import kproto
from kproto import _impl, schema
from kproto.messages import MetadataResponse

needs_extension = pytest.mark.skipif("c" not in _impl.available(), reason="the C extension is not built")


def metadata_body() -> MetadataResponse:
    # Every branch of the walk: structs, struct and int arrays, strings, a null string, a
    # UUID, a bool, tagged fields known to the plan and unknown ones.
    T, P = MetadataResponse.MetadataResponseTopic, MetadataResponse.MetadataResponsePartition
    body = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)],
        cluster_id="c", controller_id=1,
        topics=[T(name=f"t{t}", topic_id=uuid.UUID(int=t + 7), is_internal=bool(t % 2), partitions=[
            P(partition_index=p, leader_id=1, replica_nodes=[1, 2], isr_nodes=[1], offline_replicas=[])
            for p in range(2)]) for t in range(2)])
    body.topics[1]._unknown_tags = {9: b"\x01\x02"}
    return body


def decode_everything(codec, data: bytes, plan) -> int:
    """Decode, read every partition (builds the lazy arrays), and decode cut copies that fail."""
    message = codec.decode_struct(data, plan)
    count = sum(len(p.replica_nodes) for t in message.topics for p in t.partitions)
    for cut in (len(data) // 3, len(data) // 2, len(data) - 2):
        try:   # not pytest.raises: it keeps a little memory for each use
            codec.decode_struct(data[:cut], plan)
        except kproto.DecodeError:
            count += 1
    return count


@needs_extension
def test_decoding_leaves_no_reference_behind():
    codec = _impl.load("codec", "c")
    plan = schema.plan("MetadataResponse", 12)
    data = metadata_body().encode(12)
    assert decode_everything(codec, data, plan) == 8 + 3   # 8 replicas, 3 failed decodes
    tracemalloc.start()
    try:
        for _ in range(200):    # caches and free lists settle first, under tracing too
            decode_everything(codec, data, plan)
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(2000):
            decode_everything(codec, data, plan)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # One object leaked per decode would be 8,000 objects (some 250 KB): a lost reference
    # to a value the walk made (an int, a list, a struct) never freed.
    assert after - before < 16_000


def test_every_implementation_reads_back_what_was_written():
    # Read through the Check sink at decode (lazy arrays) and the Build sink on first read.
    body = metadata_body()
    data = body.encode(12)
    plan = schema.plan("MetadataResponse", 12)
    for name in _impl.available():
        decoded = _impl.load("codec", name).decode_struct(data, plan)
        assert decoded == body, name
        assert decoded.topics[1]._unknown_tags == {9: b"\x01\x02"}, name
        assert decoded.topics[0]._unknown_tags is None, name

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
        cluster_id="c",
        controller_id=1,
        topics=[
            T(
                name=f"t{t}",
                topic_id=uuid.UUID(int=t + 7),
                is_internal=bool(t % 2),
                partitions=[
                    P(partition_index=p, leader_id=1, replica_nodes=[1, 2], isr_nodes=[1], offline_replicas=[])
                    for p in range(2)
                ],
            )
            for t in range(2)
        ],
    )
    body.topics[1]._unknown_tags = {9: b"\x01\x02"}
    return body


def decode_everything(codec, data: bytes, plan) -> int:
    """Decode, read every partition (builds the lazy arrays), and decode cut copies that fail."""
    message = codec.decode_struct(data, plan)
    count = sum(len(p.replica_nodes) for t in message.topics for p in t.partitions)
    for cut in (len(data) // 3, len(data) // 2, len(data) - 2):
        try:  # not pytest.raises: it keeps a little memory for each use
            codec.decode_struct(data[:cut], plan)
        except kproto.DecodeError:
            count += 1
    return count


@needs_extension
def test_decoding_leaves_no_reference_behind():
    codec = _impl.load("codec", "c")
    plan = schema.plan("MetadataResponse", 12)
    data = metadata_body().encode(12)
    assert decode_everything(codec, data, plan) == 8 + 3  # 8 replicas, 3 failed decodes
    tracemalloc.start()
    try:
        for _ in range(200):  # caches and free lists settle first, under tracing too
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


@needs_extension
@pytest.mark.parametrize("name,version", [("MetadataResponse", 12), ("ApiVersionsResponse", 3), ("FetchResponse", 12)])
def test_a_fixed_width_run_cut_anywhere_fails_as_field_by_field(name, version):
    # The validating scan skips consecutive fixed-width fields (a Metadata partition's
    # error code, index, leader and epoch) with one bounds check; cut inside such a run,
    # the error must still be the twin's: same class, field path, offset and message.
    if name == "MetadataResponse":
        body = metadata_body()
    elif name == "ApiVersionsResponse":
        from kproto.messages import ApiVersionsResponse

        body = ApiVersionsResponse(
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=k) for k in range(4)]
        )
    else:
        from kproto.messages import FetchResponse

        body = FetchResponse(
            responses=[
                FetchResponse.FetchableTopicResponse(
                    topic="t",
                    partitions=[
                        FetchResponse.PartitionData(partition_index=p, high_watermark=10**12, records=b"")
                        for p in range(2)
                    ],
                )
            ]
        )
    plan = schema.plan(name, version)
    data = body.encode(version)
    c, py = _impl.load("codec", "c"), _impl.load("codec", "py")
    for cut in range(len(data)):
        errors = []
        for codec in (c, py):
            with pytest.raises(kproto.DecodeError) as info:
                codec.decode_struct(data[:cut], plan)
            errors.append((type(info.value), info.value.path, info.value.offset, str(info.value)))
        assert errors[0] == errors[1], cut


def test_decoded_uuids_are_whole_uuid_objects():
    # The C decoder writes uuid.UUID's slots in place: the object must be a UUID like any other.
    plan = schema.plan("MetadataResponse", 12)
    body = metadata_body()
    body.topics[0].topic_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    data = body.encode(12)
    for name in _impl.available():
        topic_id = _impl.load("codec", name).decode_struct(data, plan).topics[0].topic_id
        assert type(topic_id) is uuid.UUID
        assert topic_id == uuid.UUID("0123456789abcdef0123456789abcdef")
        assert topic_id.int == 0x0123456789ABCDEF0123456789ABCDEF
        assert topic_id.is_safe is uuid.SafeUUID.unknown
        assert hash(topic_id) == hash(uuid.UUID(int=topic_id.int))
        assert str(topic_id) == "01234567-89ab-cdef-0123-456789abcdef"
        import pickle

        assert pickle.loads(pickle.dumps(topic_id)) == topic_id
        with pytest.raises(TypeError):
            topic_id.int = 1  # still immutable


def test_records_made_by_the_decoder_and_by_hand_behave_alike():
    # The codec makes Records without the constructor (no argument parsing per partition):
    # they carry the same default limits as Records(data), and the constructor still works.
    from kproto.messages import ProduceRequest
    from kproto.records import Record, RecordBatch, Records

    batch = bytes(RecordBatch.encode([Record(key=None, value=b"v" * 10)], base_offset=0))
    body = ProduceRequest(
        acks=-1,
        timeout_ms=1,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    plan = schema.plan("ProduceRequest", 9)
    by_hand = Records(batch)
    for name in _impl.available():
        records = _impl.load("codec", name).decode_struct(body.encode(9), plan).topic_data[0].partition_data[0].records
        assert records == by_hand and bytes(records) == batch and len(records) == len(batch)
        for limit in (
            "max_decompressed_size",
            "max_records_per_batch",
            "max_records_per_set",
            "max_decompressed_size_per_set",
            "verify_crc",
        ):
            assert getattr(records, limit) == getattr(by_hand, limit), limit
        assert [r.value for b in records for r in b] == [b"v" * 10]
    limited = Records(batch, max_records_per_batch=7, verify_crc=False)
    assert (limited.max_records_per_batch, limited.verify_crc) == (7, False)
    assert Records() == b"" and len(Records()) == 0

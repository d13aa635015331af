"""Materialising decoded messages: what the C decoder leaves to the cyclic GC, and
that building objects from the lazy arrays changes nothing a user can see."""

from __future__ import annotations

import copy
import gc
import pickle
import sys
import uuid
import weakref

import pytest

import kproto
from kproto import _impl, schema
from kproto.messages import FetchResponse, MetadataResponse

needs_extension = pytest.mark.skipif("c" not in _impl.available(), reason="the C extension is not built")


def metadata_body() -> MetadataResponse:
    T, P = MetadataResponse.MetadataResponseTopic, MetadataResponse.MetadataResponsePartition
    return MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)],
        cluster_id="c",
        controller_id=1,
        topics=[
            T(
                name=f"t{t}",
                topic_id=uuid.UUID(int=t + 7),
                partitions=[
                    P(partition_index=p, leader_id=1, replica_nodes=[1, 2], isr_nodes=[1], offline_replicas=[])
                    for p in range(3)
                ],
            )
            for t in range(4)
        ],
    )


def fetch_body() -> FetchResponse:
    return FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t",
                partitions=[FetchResponse.PartitionData(partition_index=p, records=b"\x00" * 20) for p in range(3)],
            )
        ]
    )


def c_decode(message, version: int, data=None):
    plan = schema.plan(type(message).__name__, version)
    return _impl.load("codec", "c").decode_struct(data if data is not None else message.encode(version), plan)


@needs_extension
def test_decoded_trees_are_left_out_of_the_cyclic_gc():
    decoded = c_decode(metadata_body(), 12)
    topics = decoded.topics
    assert not gc.is_tracked(topics) and not gc.is_tracked(decoded.brokers[0])
    for topic in topics:
        assert not gc.is_tracked(topic) and not gc.is_tracked(topic.topic_id)
        assert not gc.is_tracked(topic.partitions)
        for partition in topic.partitions:
            assert not gc.is_tracked(partition)
            assert not any(
                gc.is_tracked(v) for v in (partition.replica_nodes, partition.isr_nodes, partition.offline_replicas)
            )


@needs_extension
def test_fetch_partitions_with_default_structs_and_record_views_are_untracked():
    decoded = c_decode(fetch_body(), 12)
    partition = decoded.responses[0].partitions[0]
    assert partition.current_leader == FetchResponse.LeaderIdAndEpoch()  # a struct of defaults
    for value in (
        partition,
        partition.current_leader,
        partition.snapshot_id,
        partition.records,
        partition.aborted_transactions,
    ):
        assert not gc.is_tracked(value)


@needs_extension
def test_a_struct_holding_something_tracked_stays_tracked():
    # Records over a bytearray hold the caller's object, which could refer back: tracked,
    # and so is every struct above them.
    decoded = c_decode(fetch_body(), 12, bytearray(fetch_body().encode(12)))
    topic = decoded.responses[0]
    assert gc.is_tracked(topic.partitions[0].records)
    assert gc.is_tracked(topic.partitions[0]) and gc.is_tracked(topic.partitions) and gc.is_tracked(topic)


@needs_extension
def test_assigning_a_struct_array_tracks_the_struct_again_so_cycles_are_collected():
    decoded = c_decode(metadata_body(), 12)
    topic = decoded.topics[0]
    assert not gc.is_tracked(topic)
    partitions = [topic]  # a cycle: topic -> list -> topic
    topic.partitions = partitions
    assert gc.is_tracked(topic)
    del decoded
    gc.collect()
    before = sum(1 for o in gc.get_objects() if type(o) is MetadataResponse.MetadataResponseTopic)
    del topic, partitions
    gc.collect()
    after = sum(1 for o in gc.get_objects() if type(o) is MetadataResponse.MetadataResponseTopic)
    assert after == before - 1


@pytest.mark.parametrize("message,version", [(metadata_body(), 12), (fetch_body(), 12)])
def test_materialised_messages_agree_between_implementations(message, version):
    data = message.encode(version)
    plan = schema.plan(type(message).__name__, version)
    decoded = {name: _impl.load("codec", name).decode_struct(data, plan) for name in _impl.available()}
    for obj in decoded.values():
        assert obj == message
        assert obj.encode(version) == data
    reprs = {repr(obj) for obj in decoded.values()}
    assert len(reprs) == 1
    # Modified after materialising, every implementation encodes the change.
    for obj in decoded.values():
        first = obj.topics[0] if isinstance(obj, MetadataResponse) else obj.responses[0]
        first.partitions[0].partition_index = 99
        again = type(message).decode(obj.encode(version), version)
        assert (again.topics[0] if isinstance(obj, MetadataResponse) else again.responses[0]).partitions[
            0
        ].partition_index == 99


def test_bad_input_in_a_nested_array_still_fails_at_decode():
    data = bytearray(metadata_body().encode(12))
    data[-2] = 0x7F  # the last topic's tagged-field count: more than the bytes left
    plan = schema.plan("MetadataResponse", 12)
    errors = []
    for name in _impl.available():
        with pytest.raises(kproto.DecodeError) as info:
            _impl.load("codec", name).decode_struct(bytes(data), plan)  # at decode, not on first read
        errors.append((type(info.value), str(info.value), info.value.offset))
    assert "topics[3]" in errors[0][1]
    assert all(error == errors[0] for error in errors)


# ------------------------------------------------------------------ allocation and freeing
# The C decoder allocates structs from a free list and frees them with its own
# deallocator (kproto/_c/kp_structs.h); every instance owns a reference to its class,
# so the class's reference count tells whether instances were made and freed right.


class Alive:
    """A value whose weak reference says whether a slot released it."""


@needs_extension
def test_freed_structs_release_their_values_and_their_class():
    P = MetadataResponse.MetadataResponsePartition
    data = metadata_body().encode(12)
    assert c_decode(metadata_body(), 12, data).topics  # the free list and the plans are warm
    gc.collect()  # earlier tests' garbage holds instances too: freed now, not mid-count
    before = sys.getrefcount(P)
    for _ in range(50):
        decoded = c_decode(metadata_body(), 12, data)
        partitions = [p for t in decoded.topics for p in t.partitions]
        assert sys.getrefcount(P) == before + len(partitions)
        value = Alive()
        partitions[0].replica_nodes = value
        ref = weakref.ref(value)
        del decoded, partitions, value
        assert ref() is None
        assert sys.getrefcount(P) == before


@needs_extension
def test_a_subclass_of_a_generated_class_frees_its_own_attributes_and_the_slots():
    B = MetadataResponse.MetadataResponseBroker
    assert c_decode(metadata_body(), 12).brokers  # the class has the C deallocator now
    gc.collect()

    class Broker(B):
        pass  # a __dict__ and a __weakref__ slot of its own, past the generated slots

    before = sys.getrefcount(Broker), sys.getrefcount(B)
    for _ in range(3):
        in_slot, in_dict = Alive(), Alive()
        broker = Broker(node_id=1, host="h", port=1, rack=None)
        broker.host = in_slot
        broker.extra = in_dict
        refs = weakref.ref(in_slot), weakref.ref(in_dict), weakref.ref(broker)
        del in_slot, in_dict, broker
        assert [ref() for ref in refs] == [None, None, None]
    assert (sys.getrefcount(Broker), sys.getrefcount(B)) == before


@needs_extension
def test_absent_struct_fields_are_built_on_first_read():
    L = FetchResponse.LeaderIdAndEpoch
    decoded = c_decode(fetch_body(), 12)
    partitions = decoded.responses[0].partitions
    gc.collect()
    before = sys.getrefcount(L)  # no LeaderIdAndEpoch made by the decode
    leader = partitions[0].current_leader
    assert sys.getrefcount(L) == before + 1
    assert leader == L() and partitions[0].current_leader is leader
    assert partitions[1].snapshot_id == FetchResponse.SnapshotId()


@needs_extension
@pytest.mark.parametrize("version", [12, 11, 13])
def test_unread_absent_structs_encode_as_their_defaults(version):
    data = fetch_body().encode(12)
    decoded = c_decode(fetch_body(), 12, data)
    assert decoded.encode(12) == data  # untouched: the tagged fields stay out
    assert decoded.encode(version) == fetch_body().encode(version)
    assert decoded.responses[0].partitions  # built, the default structs still unread
    assert decoded.encode(version) == fetch_body().encode(version)
    decoded.responses[0].partitions[2].current_leader.leader_id = 4
    expected = fetch_body()
    expected.responses[0].partitions[2].current_leader.leader_id = 4
    assert decoded.encode(12) == expected.encode(12)
    assert decoded == expected


@needs_extension
def test_copies_and_pickles_of_decoded_messages_carry_the_defaults():
    decoded = c_decode(fetch_body(), 12)
    decoded.responses[0].partitions[0].records = b"\x00" * 20  # Records views do not pickle
    decoded.responses[0].partitions[1].records = b"\x00" * 20
    decoded.responses[0].partitions[2].records = b"\x00" * 20
    for other in (copy.deepcopy(decoded), pickle.loads(pickle.dumps(decoded))):
        assert other == fetch_body()
        assert other.responses[0].partitions[0].diverging_epoch == FetchResponse.EpochEndOffset()

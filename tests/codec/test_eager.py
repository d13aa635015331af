"""Decoding with ``lazy=False``: the C decoder builds struct arrays as it reads them, in one
pass, instead of checking them at decode and building them on first read. The objects,
and the errors bad input raises, must be the same either way and in both implementations."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kproto
from kproto import _impl, schema
from kproto.messages import FetchResponse, MetadataRequest, MetadataResponse, ProduceRequest
from tests.strategies import struct_strategy

needs_extension = pytest.mark.skipif("c" not in _impl.available(), reason="the C extension is not built")

CASES = [
    ("MetadataResponse", 12),
    ("MetadataResponse", 1),
    ("FetchResponse", 12),
    ("FetchRequest", 13),
    ("ProduceRequest", 9),
    ("ApiVersionsResponse", 3),
    ("JoinGroupRequest", 9),
    ("DescribeConfigsResponse", 4),
    ("OffsetCommitRequest", 9),
]


def metadata_body() -> MetadataResponse:
    T, P = MetadataResponse.MetadataResponseTopic, MetadataResponse.MetadataResponsePartition
    return MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092, rack="r")],
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


@pytest.mark.parametrize("name,version", CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@settings(max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_eager_and_lazy_decodes_are_equal(name, version, data):
    plan = schema.plan(name, version)
    message = data.draw(struct_strategy(plan))
    body = message.encode(version)
    for impl in _impl.available():
        codec = _impl.load("codec", impl)
        eager = codec.decode_struct(body, plan, lazy=False)
        lazy = codec.decode_struct(body, plan)
        assert eager == lazy == message, impl
        assert codec.encode_struct(eager, plan) == body, impl


def fetch_body() -> FetchResponse:
    return FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t",
                partitions=[
                    FetchResponse.PartitionData(partition_index=p, high_watermark=10**12, records=b"\x00" * 7)
                    for p in range(2)
                ],
            )
        ]
    )


def produce_body() -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        timeout_ms=5,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[ProduceRequest.PartitionProduceData(index=p, records=b"\x01" * 5) for p in range(2)],
            )
        ],
    )


@needs_extension
@pytest.mark.parametrize("name,version", [("MetadataResponse", 12), ("FetchResponse", 12), ("ProduceRequest", 9)])
def test_eager_errors_are_the_lazy_ones_and_the_twins(name, version):
    # Cut anywhere, the one-pass build fails where the scan would: same class, path, offset, message.
    data = {"MetadataResponse": metadata_body, "FetchResponse": fetch_body, "ProduceRequest": produce_body}[
        name
    ]().encode(version)
    plan = schema.plan(name, version)
    c, py = _impl.load("codec", "c"), _impl.load("codec", "py")
    for cut in range(len(data)):
        errors = []
        for decode in (
            lambda b: c.decode_struct(b, plan, lazy=False),
            lambda b: c.decode_struct(b, plan),
            lambda b: py.decode_struct(b, plan),
        ):
            with pytest.raises(kproto.DecodeError) as info:
                decode(data[:cut])
            errors.append((type(info.value), info.value.path, info.value.offset, str(info.value)))
        assert errors[0] == errors[1] == errors[2], cut


@needs_extension
def test_an_eager_decode_is_done_with_the_input():
    # Lazy arrays read the input again on first read; an eager decode never does, so
    # bytes changed afterwards (a reused receive buffer) cannot reach its objects.
    body = metadata_body()
    buffer = bytearray(body.encode(12))
    eager = MetadataResponse.decode(buffer, 12, lazy=False)
    lazy = MetadataResponse.decode(buffer, 12)
    buffer[:] = bytes(len(buffer))
    assert eager == body
    with pytest.raises(kproto.DecodeError):  # the lazy one's topics come from the zeroed bytes
        lazy.topics  # noqa: B018


def test_the_api_passes_lazy_through():
    request = kproto.encode_request(
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="a")]),
        version=12,
        correlation_id=3,
        client_id="me",
    )
    assert kproto.decode_request(request, lazy=False).body == kproto.decode_request(request).body
    response = kproto.encode_response(metadata_body(), version=12, correlation_id=3)
    eager = kproto.decode_response(response, api_key=3, api_version=12, lazy=False)
    assert eager.body == kproto.decode_response(response, api_key=3, api_version=12).body == metadata_body()
    assert MetadataResponse.decode(metadata_body().encode(12), 12, lazy=False) == metadata_body()

"""The public API: requests and responses, special cases of the protocol, errors."""

from __future__ import annotations

import json
import uuid

import pytest

import kproto
from kproto.errors import DecodeError, EncodeError, TruncatedError, UnsupportedRequestError, UnsupportedVersionError
from kproto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)


def test_request_roundtrip_with_header_fields():
    body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")])
    payload = kproto.encode_request(body, version=12, correlation_id=7, client_id="me")
    request = kproto.decode_request(payload)
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (3, 12, 7, "me")
    assert request.header_version == 2 and request.body == body
    framed = kproto.encode_request(body, version=12, correlation_id=7, client_id="me", size_prefixed=True)
    assert framed[4:] == payload and int.from_bytes(framed[:4], "big") == len(payload)
    assert kproto.decode_request(framed, size_prefixed=True).body == body


def test_response_roundtrip_and_header_versions():
    body = MetadataResponse(cluster_id="c", controller_id=2)
    for version, header_version in ((8, 0), (12, 1)):
        payload = kproto.encode_response(body, version=version, correlation_id=99)
        response = kproto.decode_response(payload, 3, version)
        assert response.correlation_id == 99 and response.header_version == header_version
        assert response.body.cluster_id == "c" and response.body.controller_id == 2


def test_unknown_api_key_keeps_the_header():
    payload = bytes.fromhex("03e700010000002a00026964")  # api_key 999
    with pytest.raises(UnsupportedVersionError) as info:
        kproto.decode_request(payload)
    err = info.value
    assert err.api_key == 999 and err.api_version == 1
    assert err.header.correlation_id == 42 and err.header.client_id == "id"
    assert "999" in str(err)


def test_unknown_version_names_api_and_version():
    payload = bytes.fromhex("000300630000002affff00")  # Metadata v99 (header v2)
    with pytest.raises(UnsupportedVersionError) as info:
        kproto.decode_request(payload)
    assert info.value.api_key == 3 and info.value.api_version == 99
    assert "MetadataRequest version 99" in str(info.value)
    with pytest.raises(UnsupportedVersionError) as info:
        kproto.decode_response(bytes.fromhex("0000002a00"), 3, 99)
    assert info.value.header.correlation_id == 42


def test_api_versions_unsupported_version_reads_v0_body():
    # A broker that knows ApiVersions up to v2 answers a v4 request with error 35 and a v0 body.
    broker_answer = ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)]
    )
    payload = kproto.encode_response(broker_answer, version=0, correlation_id=5)
    response = kproto.decode_response(payload, 18, 4)
    assert response.api_version == 0 and response.body.error_code == 35
    assert response.body.api_keys[0].max_version == 2
    # Without the error, the asked version is used.
    ok = kproto.encode_response(ApiVersionsResponse(), version=3, correlation_id=5)
    assert kproto.decode_response(ok, 18, 3).api_version == 3


def _v3_answer_with_error_35() -> ApiVersionsResponse:
    # A KIP-511 broker that refuses the request's software name... or any v3 body with error 35.
    return ApiVersionsResponse(
        error_code=35,
        throttle_time_ms=7,
        finalized_features_epoch=3,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3)],
        supported_features=[ApiVersionsResponse.SupportedFeatureKey(name="f", min_version=1, max_version=2)],
    )


def test_api_versions_error_35_read_at_the_asked_version_when_it_parses():
    # Java's client parses the version it asked first, and falls back to v0 only when that fails.
    payload = kproto.encode_response(_v3_answer_with_error_35(), version=3, correlation_id=5)
    response = kproto.decode_response(payload, 18, 3)
    assert response.api_version == 3
    assert response.body == _v3_answer_with_error_35()
    assert response.body.throttle_time_ms == 7 and response.body.supported_features[0].name == "f"


@pytest.mark.parametrize("asked", [1, 3, 4, 9])
def test_api_versions_v0_fallback_when_the_asked_version_fails(asked):
    # 9: a version kproto has no schema for; the v0 body still reads.
    for keys in (
        [],
        [
            ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2),
            ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=9),
        ],
    ):
        payload = kproto.encode_response(ApiVersionsResponse(error_code=35, api_keys=keys), version=0, correlation_id=5)
        response = kproto.decode_response(payload, 18, asked)
        assert response.api_version == 0 and response.body.api_keys == keys


def test_api_versions_neither_version_reads_reports_the_asked_version():
    payload = kproto.encode_response(_v3_answer_with_error_35(), version=3, correlation_id=5)[:-3]
    with pytest.raises(DecodeError) as info:
        kproto.decode_response(payload, 18, 3)
    assert info.value.api_version == 3


def test_correlation_id_only_response_is_unsupported_request():
    with pytest.raises(UnsupportedRequestError) as info:
        kproto.decode_response(bytes.fromhex("00000007"), 3, 5)
    assert not isinstance(info.value, TruncatedError)
    assert info.value.api_key == 3


def test_body_decode_encode_methods():
    body = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name="t", topic_id=uuid.uuid4())])
    data = body.encode(12)
    assert MetadataResponse.decode(data, 12) == body
    with pytest.raises(UnsupportedVersionError):
        MetadataResponse.decode(data, 42)
    with pytest.raises(EncodeError):
        body.encode(42)


def test_absent_field_non_default_is_an_error_unless_ignorable():
    from kproto.messages import JoinGroupRequest

    # group_instance_id exists from JoinGroup v5 and is not ignorable: it cannot be sent at v4.
    body = JoinGroupRequest(group_id="g", group_instance_id="instance-1")
    with pytest.raises(EncodeError) as info:
        body.encode(4)
    assert info.value.path == "JoinGroupRequest.group_instance_id"
    assert info.value.api_version == 4
    assert JoinGroupRequest(group_id="g").encode(4)  # the default is fine
    # Metadata topic_id (v10+) is ignorable: silently dropped at v9.
    topic = MetadataResponse.MetadataResponseTopic(name="t", topic_id=uuid.uuid4())
    assert MetadataResponse.decode(MetadataResponse(topics=[topic]).encode(9), 9).topics[0].name == "t"
    # ClientSoftwareName is ignorable: dropped below v3.
    request = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    assert request.encode(2) == b""


def test_encode_errors_name_the_path():
    body = MetadataResponse(
        topics=[
            MetadataResponse.MetadataResponseTopic(
                name="t", partitions=[MetadataResponse.MetadataResponsePartition(partition_index=2**31)]
            )
        ]
    )
    with pytest.raises(EncodeError) as info:
        body.encode(12)
    assert info.value.path == "MetadataResponse.topics[0].partitions[0].partition_index"
    with pytest.raises(EncodeError) as info:
        MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name=None)]).encode(8)
    assert "null" in str(info.value)
    with pytest.raises(EncodeError):
        kproto.encode_request(MetadataResponse(), version=1, correlation_id=1)  # a response


def test_nullable_struct_marker():
    # FetchResponse v12+ has nullable? No: use a KIP-893 style nullable struct if present.
    from kproto import schema

    nullable_structs = [
        (name, v)
        for name, info in schema.MESSAGES.items()
        for v in range(info["valid_versions"][0], info["valid_versions"][1] + 1)
        if any(op.kind == schema.STRUCT and op.nullable for op in schema.plan(name, v).fields)
    ]
    assert nullable_structs, "expected at least one nullable struct field (KIP-893)"
    name, version = nullable_structs[0]
    plan = schema.plan(name, version)
    op = next(op for op in plan.fields if op.kind == schema.STRUCT and op.nullable)
    obj = plan.cls(**{op.name: None})
    data = obj.encode(version)
    back = type(obj).decode(data, version)
    assert getattr(back, op.name) is None


def test_to_dict_is_json_friendly():
    body = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t",
                topic_id=uuid.UUID(int=5),
                partitions=[FetchResponse.PartitionData(partition_index=0, records=b"\x01\x02")],
            )
        ]
    )
    d = body.to_dict()
    json.dumps(d)
    assert d["responses"][0]["topic_id"] == str(uuid.UUID(int=5))
    assert d["responses"][0]["partitions"][0]["records"] == "AQI="
    decoded = FetchResponse.decode(body.encode(16), 16)
    assert decoded.to_dict() == FetchResponse.decode(body.encode(16), 16).to_dict()


def test_records_are_zero_copy_views():
    body = ProduceRequest(
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"abc" * 100)]
            )
        ]
    )
    data = bytearray(body.encode(9))
    decoded = ProduceRequest.decode(data, 9)
    records = decoded.topic_data[0].partition_data[0].records
    assert bytes(records) == b"abc" * 100 and records == b"abc" * 100
    assert type(records).__name__ == "Records"  # lazy record-batch view
    view = records.raw
    data[-20] ^= 0xFF  # the view sees the input buffer itself
    assert bytes(view) != b"abc" * 100


def test_constructor_rejects_unknown_fields_and_repr():
    with pytest.raises(TypeError):
        MetadataRequest(topicz=[])
    assert "MetadataRequest(topics=" in repr(MetadataRequest())
    assert MetadataRequest() == MetadataRequest() and MetadataRequest() != MetadataRequest(topics=None)


def test_trailing_bytes_are_an_error():
    payload = kproto.encode_request(MetadataRequest(), version=4, correlation_id=1, client_id=None)
    with pytest.raises(kproto.DecodeError) as info:
        kproto.decode_request(payload + b"\x00")
    assert "left over" in str(info.value)


def test_encoding_survives_lists_mutated_by_index_hooks():
    # An __index__ that empties the list being encoded must not crash the encoder.
    from kproto.messages import MetadataResponse

    partition = MetadataResponse.MetadataResponsePartition(partition_index=0)

    class Sneaky:
        def __index__(self):
            partition.isr_nodes.clear()
            return 1

    partition.isr_nodes = [Sneaky(), 2, 3]
    body = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name="t", partitions=[partition])])
    try:
        body.encode(12)
    except EncodeError as exc:
        assert "changed size" in str(exc) or "int" in str(exc)


def test_decoded_messages_pickle_and_copy_with_unread_arrays():
    import copy
    import pickle

    topic = MetadataResponse.MetadataResponseTopic(
        name="t", partitions=[MetadataResponse.MetadataResponsePartition(partition_index=1, isr_nodes=[1, 2])]
    )
    body = MetadataResponse(topics=[topic])
    data = body.encode(12)
    assert pickle.loads(pickle.dumps(MetadataResponse.decode(data, 12))) == body
    assert copy.deepcopy(MetadataResponse.decode(data, 12)) == body
    assert copy.copy(MetadataResponse.decode(data, 12)) == body
    # Re-encoding an array nobody read copies its bytes; after a change it is re-encoded.
    decoded = MetadataResponse.decode(data, 12)
    assert decoded.encode(12) == data
    decoded.topics[0].partitions[0].isr_nodes.append(3)
    assert MetadataResponse.decode(decoded.encode(12), 12).topics[0].partitions[0].isr_nodes == [1, 2, 3]


def test_lazy_arrays_keep_a_bytearray_alive_and_unresizable():
    topic = MetadataResponse.MetadataResponseTopic(name="t")
    data = bytearray(MetadataResponse(topics=[topic]).encode(12))
    decoded = MetadataResponse.decode(data, 12)
    if kproto.extension_loaded():
        with pytest.raises(BufferError):  # exported while the unread array points into it
            data.extend(b"x")
    assert decoded.topics[0].name == "t"

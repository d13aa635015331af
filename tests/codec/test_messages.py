"""Every API message, every version, request and response: generated property tests.

For each (message, version) hypothesis builds random valid objects and checks:
encode then decode gives an equal object; decode then encode gives the same
bytes; the C and pure-Python codecs write the same bytes and read the same objects.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from kproto import _impl, schema
from kproto.errors import DecodeError
from tests.strategies import struct_strategy
from tests.twin_selection import implementations

EXAMPLES = int(os.environ.get("KPROTO_MESSAGE_EXAMPLES", "6"))

CASES = [
    (name, version)
    for name, info in sorted(schema.MESSAGES.items())
    for version in range(info["valid_versions"][0], info["valid_versions"][1] + 1)
]
API_CASES = [(n, v) for n, v in CASES if schema.spec(n)["type"] in ("request", "response")]


def test_every_api_has_request_and_response_for_every_version():
    assert len(API_CASES) >= 736  # 95 API keys (0-94), 368 versions each way
    for key in schema.api_keys():
        req, resp = schema.spec(schema.request_name(key)), schema.spec(schema.response_name(key))
        assert req["valid_versions"] == resp["valid_versions"], key


def _codecs():
    return [_impl.load("codec", name) for name in implementations()]


@pytest.mark.parametrize("name,version", CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_roundtrip(name, version):
    plan = schema.plan(name, version)
    codecs = _codecs()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(struct_strategy(plan, unknown_tags=True))
    def check(obj):
        outputs = []
        for codec in codecs:
            data = codec.encode_struct(obj, plan)
            back = codec.decode_struct(data, plan)
            assert back == obj
            assert codec.encode_struct(back, plan) == data
            outputs.append((data, back))
        assert len({data for data, _ in outputs}) == 1, "C and pure-Python encoders disagree"
        if len(outputs) == 2:
            assert outputs[0][1] == outputs[1][1]

    check()


# A sample of messages for the every-offset truncation test (each decoder family).
TRUNCATION_CASES = [
    ("MetadataResponse", 12),
    ("MetadataResponse", 0),
    ("FetchResponse", 16),
    ("ProduceRequest", 9),
    ("ApiVersionsResponse", 3),
    ("JoinGroupRequest", 9),
    ("DescribeConfigsResponse", 4),
    ("CreateTopicsRequest", 7),
    ("FetchRequest", 13),
    ("ConsumerGroupHeartbeatResponse", 0),
    ("OffsetCommitRequest", 9),
]


@pytest.mark.parametrize("name,version", TRUNCATION_CASES)
def test_truncation_at_every_offset_names_path_and_offset(name, version):
    from hypothesis import find

    plan = schema.plan(name, version)
    # A sample big enough to have nested structures.
    obj = find(
        struct_strategy(plan),
        lambda o: len(o.encode(version)) > 40,
        settings=settings(max_examples=500, database=None, derandomize=True),
    )
    data = obj.encode(version)
    for codec in _codecs():
        for cut in range(len(data)):
            with pytest.raises(DecodeError) as info:
                codec.decode_struct(data[:cut], plan)
            err = info.value
            assert err.path and err.path.startswith(plan.name), (cut, err)
            assert err.offset is not None and 0 <= err.offset <= cut
            assert err.api_version == version


def test_unknown_tagged_fields_survive_at_every_level():
    # A flexible message with nested structs: put unknown tags on every struct level.
    from kproto.messages import MetadataResponse

    T, P = MetadataResponse.MetadataResponseTopic, MetadataResponse.MetadataResponsePartition
    B = MetadataResponse.MetadataResponseBroker
    obj = MetadataResponse(
        brokers=[B(node_id=1, host="h", port=1, _unknown_tags={7: b"b"})],
        topics=[
            T(
                name="t",
                partitions=[P(partition_index=0, _unknown_tags={0: b"", 99: b"pp"})],
                _unknown_tags={3: b"topic"},
            )
        ],
        _unknown_tags={1000: b"root"},
    )
    plan = schema.plan("MetadataResponse", 12)
    for codec in _codecs():
        data = codec.encode_struct(obj, plan)
        back = codec.decode_struct(data, plan)
        assert back == obj
        assert back.topics[0].partitions[0]._unknown_tags == {0: b"", 99: b"pp"}
        assert codec.encode_struct(back, plan) == data


def _non_canonical_metadata_response():
    """A MetadataResponse v12 body, and the same with two bytes Kafka reads but never writes:
    a bool byte of 2 and an over-long varint (0x81 0x00 for 1), both inside a struct array."""
    from kproto.messages import MetadataResponse

    topic = MetadataResponse.MetadataResponseTopic
    canonical = MetadataResponse(topics=[topic(name="t", is_internal=True)]).encode(12)
    not_internal = MetadataResponse(topics=[topic(name="t", is_internal=False)]).encode(12)
    [bool_at] = [i for i, (a, b) in enumerate(zip(canonical, not_internal)) if a != b]
    assert canonical[bool_at + 1] == 1  # the partitions array follows: compact length 1, empty
    loose = canonical[:bool_at] + b"\x02\x81\x00" + canonical[bool_at + 2 :]
    return canonical, loose


@pytest.mark.parametrize("lazy", [True, False])
def test_non_canonical_input_reencodes_canonically_in_every_implementation(lazy):
    # Found by the Java oracle (tests/codec/test_java_oracle.py): the C decoder's untouched struct
    # arrays were written back as their input bytes, so a bool byte of 2 or an over-long
    # varint stayed while the twin (and Kafka's Java codec) write 1 and the short varint.
    canonical, loose = _non_canonical_metadata_response()
    plan = schema.plan("MetadataResponse", 12)
    for codec in _codecs():
        decoded = codec.decode_struct(loose, plan, lazy=lazy)
        assert decoded.topics[0].is_internal is True
        assert codec.encode_struct(codec.decode_struct(loose, plan, lazy=lazy), plan) == canonical

"""Request headers v0/v1/v2 and response headers v0/v1, on both implementations."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kproto
from kproto import _impl, schema
from kproto.errors import DecodeError


def test_header_version_rules():
    hv = kproto.header_version
    assert hv(3, 8, True) == 1 and hv(3, 9, True) == 2  # Metadata flexible from 9
    assert hv(3, 8, False) == 0 and hv(3, 9, False) == 1
    assert hv(0, 9, True) == 2 and hv(0, 8, True) == 1  # Produce flexible from 9
    assert hv(18, 3, True) == 2 and hv(18, 2, True) == 1  # ApiVersions request: normal rule
    assert hv(18, 3, False) == 0 and hv(18, 4, False) == 0  # ... but its response is always v0
    assert hv(7, 0, True) == 0 and hv(7, 1, True) == 1  # ControlledShutdown v0: header v0
    assert hv(7, 3, True) == 2
    assert hv(999, 0, True) == 1 and hv(999, 0, False) == 0  # unknown API: classic headers


@pytest.mark.parametrize("implementation", _impl.available())
def test_header_version_twins_agree(implementation):
    codec = _impl.load("codec", implementation)
    for key in schema.api_keys():
        lo, hi = schema.spec(schema.request_name(key))["valid_versions"]
        for version in range(lo, hi + 1):
            for is_request in (True, False):
                expected = schema.header_version(key, version, is_request)
                if hasattr(codec, "header_version"):
                    assert codec.header_version(key, version, is_request) == expected


def _encode_header(codec, api_key, api_version, correlation_id, client_id, tags, header_version):
    h = codec.RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
        _unknown_tags=tags,
    )
    return codec.encode_request_header(h, header_version)


def test_v2_client_id_keeps_int16_length(impl):
    codec = impl.load("codec")
    data = _encode_header(codec, 3, 12, 7, "abc", None, 2)
    # api key, version, correlation id, int16 length 3 (not compact), "abc", no tags.
    assert data.hex() == "0003000c00000007000361626300"
    header, version, offset = codec.decode_request_header_info(data)
    assert version == 2 and offset == len(data)
    assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
        3,
        12,
        7,
        "abc",
    )


def test_v0_and_v1_layouts(impl):
    codec = impl.load("codec")
    assert _encode_header(codec, 7, 0, 1, None, None, 0).hex() == "0007000000000001"
    assert _encode_header(codec, 3, 1, 1, None, None, 1).hex() == "0003000100000001ffff"
    header, version, _ = codec.decode_request_header_info(bytes.fromhex("0007000000000001"))
    assert version == 0 and header.client_id is None


def test_response_headers(impl):
    codec = impl.load("codec")
    header, version, offset = codec.decode_response_header(bytes.fromhex("0000002a00"), 3, 12)
    assert (header.correlation_id, version, offset) == (42, 1, 5)
    header, version, offset = codec.decode_response_header(bytes.fromhex("0000002a00"), 18, 3)
    assert (header.correlation_id, version, offset) == (42, 0, 4)  # ApiVersions: v0 always
    header, version, offset = codec.decode_response_header(bytes.fromhex("0000002a020001aa0500"), 3, 12)
    assert header._unknown_tags == {0: b"\xaa", 5: b""}


HEADER_CASES = st.tuples(
    st.sampled_from([(3, 8), (3, 12), (0, 9), (7, 0), (18, 3), (1, 11), (1, 12), (999, 1)]),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | st.text(max_size=30),
    st.none() | st.dictionaries(st.integers(0, 2**20), st.binary(max_size=8), max_size=3),
)


@given(HEADER_CASES)
def test_request_header_roundtrip_every_version(case):
    (api_key, api_version), correlation_id, client_id, tags = case
    version = schema.header_version(api_key, api_version, True)
    if version < 1:
        client_id = None
    if version < 2:
        tags = None
    encoded = set()
    for name in _impl.available():
        codec = _impl.load("codec", name)
        data = _encode_header(codec, api_key, api_version, correlation_id, client_id, tags, version)
        encoded.add(data)
        header, hv, offset = codec.decode_request_header_info(data)
        assert hv == version and offset == len(data)
        assert header.request_api_key == api_key and header.request_api_version == api_version
        assert header.correlation_id == correlation_id and header.client_id == client_id
        assert (header._unknown_tags or None) == (tags or None)
    assert len(encoded) == 1


@given(st.integers(-(2**31), 2**31 - 1), st.sampled_from([(3, 8), (3, 12), (18, 4)]))
def test_response_header_roundtrip(correlation_id, api):
    codec = _impl.load("codec")
    from kproto.messages import ApiVersionsResponse, MetadataResponse

    body = MetadataResponse() if api[0] == 3 else ApiVersionsResponse()
    data = kproto.encode_response(body, version=api[1], correlation_id=correlation_id)
    header, hv, _ = codec.decode_response_header(data, *api)
    assert header.correlation_id == correlation_id and hv == kproto.header_version(*api, False)


@pytest.mark.parametrize("api", [(3, 8), (3, 12), (7, 0)])
def test_every_truncation_of_a_header_raises_decode_error(impl, api):
    codec = impl.load("codec")
    version = schema.header_version(*api, True)
    data = _encode_header(
        codec, api[0], api[1], 99, "client-1" if version else None, {3: b"xy"} if version == 2 else None, version
    )
    for cut in range(len(data)):
        with pytest.raises(DecodeError) as info:  # truncated, or a count above the bytes left
            codec.decode_request_header_info(data[:cut])
        assert 0 <= info.value.offset <= cut
        assert "RequestHeader" in str(info.value)


def test_header_errors_name_the_field(impl):
    codec = impl.load("codec")
    with pytest.raises(DecodeError) as info:
        codec.decode_request_header_info(bytes.fromhex("0003000c00000007000561"))
    assert info.value.path == "RequestHeader.client_id"
    assert info.value.offset == 10


# ------------------------------------------------------------------ kafka-python cross-check
kafka_header = pytest.importorskip("kafka.protocol.api_header")


@given(
    st.integers(0, 2**31 - 1),
    st.none() | st.text(min_size=0, max_size=20),
    st.sampled_from([(3, 8), (3, 12), (0, 9), (1, 11)]),
)
def test_kafka_python_headers_decode_here_and_ours_there(correlation_id, client_id, api):
    import io

    flexible = schema.header_version(api[0], api[1], True) == 2
    theirs = kafka_header.RequestHeader(
        request_api_key=api[0], request_api_version=api[1], correlation_id=correlation_id, client_id=client_id
    )
    data = bytes(theirs.encode(flexible=flexible))
    header = kproto.decode_request_header(data)
    assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
        api[0],
        api[1],
        correlation_id,
        client_id,
    )
    ours = _encode_header(_impl.load("codec"), api[0], api[1], correlation_id, client_id, None, 2 if flexible else 1)
    assert ours == data
    back = kafka_header.RequestHeader.decode(io.BytesIO(ours), flexible=flexible)
    assert back.correlation_id == correlation_id and back.client_id == client_id


def test_header_objects_compare_pickle_and_dict_across_implementations():
    import pickle

    headers = [
        _impl.load("codec", name).RequestHeader(
            request_api_key=3, request_api_version=12, correlation_id=9, client_id="c", _unknown_tags={1: b"x"}
        )
        for name in _impl.available()
    ]
    for h in headers:
        assert h == headers[0] and pickle.loads(pickle.dumps(h)) == h
        assert h.request_api_key == 3 and h.request_api_version == 12
        assert h.to_dict() == {
            "request_api_key": 3,
            "request_api_version": 12,
            "correlation_id": 9,
            "client_id": "c",
            "_unknown_tags": {"1": "eA=="},
        }
        assert "client_id='c'" in repr(h)
    responses = [_impl.load("codec", name).ResponseHeader(correlation_id=4) for name in _impl.available()]
    assert all(r == responses[0] and r.to_dict() == {"correlation_id": 4} for r in responses)
    assert kproto.RequestHeader is _impl.load("codec").RequestHeader


def test_the_c_header_version_tables_answer_as_the_schema_rule():
    """The compiled modules read header versions from _wire's tables, filled from
    kproto.schema.header_version: every key, every version, and beyond the tables' bounds."""
    if "c" not in _impl.available():
        pytest.skip("extension not built")
    from kproto._c import _codec, _wire

    assert _codec.header_version is _wire.header_version
    for key in (-1, *range(0, 300), 32767):
        for version in (-1, 0, 1, 2, 3, 4, 9, 12, 13, 62, 63, 64, 65, 1000, 32767):
            for is_request in (True, False):
                assert _wire.header_version(key, version, is_request) == schema.header_version(
                    key, version, is_request
                ), (key, version, is_request)


def test_each_header_dunder_on_both_implementations(impl):
    """Equality, hash, repr, to_dict, pickling and copying of both header classes: the C
    classes name the shared kproto._headers functions one by one (no common base, for
    their free lists), so each is checked here by itself."""
    import copy
    import pickle

    codec = impl.load("codec")
    request = codec.RequestHeader(
        request_api_key=3, request_api_version=12, correlation_id=9, client_id="c", _unknown_tags={1: b"x"}
    )
    response = codec.ResponseHeader(correlation_id=4, _unknown_tags={2: b"y"})
    assert repr(request) == (
        "RequestHeader(request_api_key=3, request_api_version=12, correlation_id=9, "
        "client_id='c', _unknown_tags={1: b'x'})"
    )
    assert repr(codec.RequestHeader()) == (
        "RequestHeader(request_api_key=0, request_api_version=0, correlation_id=0, client_id=None)"
    )
    assert repr(response) == "ResponseHeader(correlation_id=4, _unknown_tags={2: b'y'})"
    assert repr(codec.ResponseHeader(correlation_id=4)) == "ResponseHeader(correlation_id=4)"
    assert response.to_dict() == {"correlation_id": 4, "_unknown_tags": {"2": "eQ=="}}
    assert codec.RequestHeader(client_id="c").to_dict() == {
        "request_api_key": 0,
        "request_api_version": 0,
        "correlation_id": 0,
        "client_id": "c",
    }
    for header, other in (
        (
            request,
            codec.RequestHeader(
                request_api_key=3, request_api_version=12, correlation_id=9, client_id="d", _unknown_tags={1: b"x"}
            ),
        ),
        (response, codec.ResponseHeader(correlation_id=5, _unknown_tags={2: b"y"})),
    ):
        assert header != other and not header == other
        assert header.__eq__(object()) is NotImplemented and header != 4
        assert (header == request) is (header is request)  # a request never equals a response
        with pytest.raises(TypeError, match="unhashable"):
            hash(header)
        rebuild, (cls, fields) = header.__reduce__()
        assert cls is type(header) and rebuild(cls, fields) == header
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            back = pickle.loads(pickle.dumps(header, protocol))
            assert type(back) is type(header) and back == header and repr(back) == repr(header)
        for clone in (copy.copy(header), copy.deepcopy(header)):
            assert type(clone) is type(header) and clone is not header and clone == header
        assert copy.deepcopy(header)._unknown_tags is not header._unknown_tags
    # No tags and empty tags are the same header.
    assert codec.ResponseHeader(correlation_id=1, _unknown_tags={}) == codec.ResponseHeader(correlation_id=1)
    assert not any(name.endswith("_cython__") for name in dir(request) + dir(response))

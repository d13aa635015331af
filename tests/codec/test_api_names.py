"""API names wherever an API key is taken, and typed access to a decoded body (``body_as``)."""

from __future__ import annotations

import pytest

import kproto
from kproto.messages import MetadataRequest, MetadataResponse


def response_payload() -> bytes:
    return kproto.encode_response(MetadataResponse(topics=[]), version=12, correlation_id=7)


@pytest.mark.parametrize("api", [3, "3", "Metadata", "metadata", "MetadataResponse", "MetadataRequest"])
def test_decode_response_takes_a_name(api):
    response = kproto.decode_response(response_payload(), api_key=api, api_version=12)
    assert response.api_key == 3 and response.correlation_id == 7
    assert kproto.decode_response_header(response_payload(), api, 12).correlation_id == 7
    assert kproto.header_version(api, 12, True) == 2 and kproto.header_version(api, 12, False) == 1


def test_an_unknown_name_is_a_value_error():
    with pytest.raises(ValueError, match="unknown Kafka API 'Nope'"):
        kproto.decode_response(response_payload(), api_key="Nope", api_version=12)
    with pytest.raises(TypeError):
        kproto.api_key_of(True)  # a bool is no key
    assert kproto.api_key_of("ApiVersions") == 18 and kproto.api_key_of(18) == 18


def test_body_as():
    request = kproto.decode_request(
        kproto.encode_request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")]),
            version=12,
            correlation_id=1,
            client_id="me",
        )
    )
    body = request.body_as(MetadataRequest)
    assert body is request.body and body.topics is not None and body.topics[0].name == "orders"
    with pytest.raises(TypeError, match="the body is a MetadataRequest, not a MetadataResponse"):
        request.body_as(MetadataResponse)
    response = kproto.decode_response(response_payload(), "Metadata", 12)
    assert response.body_as(MetadataResponse).topics == []
    with pytest.raises(TypeError):
        response.body_as(MetadataRequest)

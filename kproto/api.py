"""The thin public API: requests and responses in and out of bytes.

A *payload* is a frame without its 4-byte size prefix; pass ``size_prefixed=True``
to read or write whole frames instead.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, TypeVar

from kproto import _impl, schema
from kproto._common.api_keys import response_fallback_version
from kproto.errors import DecodeError, EncodeError, UnsupportedVersionError
from kproto.schema import Message
from kproto.schema._lookup import api_key_of as _key_of_name  # the one name table (schema names, old aliases)

if TYPE_CHECKING:  # checked against the compiled module's stub; the twin has the same names
    from kproto._c import _codec
else:
    _codec = _impl.load("codec")

__all__ = [
    "api_key_of",
    "Request",
    "Response",
    "RequestHeader",
    "ResponseHeader",
    "decode_request",
    "encode_request",
    "decode_response",
    "encode_response",
    "decode_request_header",
    "decode_response_header",
    "header_version",
]

_SIZE = struct.Struct(">i")
M = TypeVar("M", bound=Message)


def api_key_of(api: int | str) -> int:
    """The API key of ``api``: a key (``3``), or a name as the schema spells it, any case, with or
    without ``Request``/``Response`` (``"Metadata"``, ``"MetadataResponse"``). ValueError otherwise.

    Every function taking an API key takes a name too, through this.
    """
    if isinstance(api, int) and not isinstance(api, bool):
        return api
    try:
        return _key_of_name(api)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    except TypeError as exc:
        raise TypeError(f"an API is a key (int) or a name (str), not {type(api).__name__}") from exc


def header_version(api_key: int | str, api_version: int, is_request: bool) -> int:
    """The header version (request 0-2, response 0-1) of an API (key or name) at a version."""
    return schema.header_version(api_key_of(api_key), api_version, is_request)


def _body_as(body: Message, cls: type[M]) -> M:
    if not isinstance(body, cls):
        raise TypeError(f"the body is a {type(body).__name__}, not a {cls.__name__}")
    return body


class Request:
    """A decoded request: header fields, the header itself and the typed body."""

    __slots__ = ("header", "header_version", "body")

    def __init__(self, header: Any, header_version: int, body: Message) -> None:
        self.header = header
        self.header_version = header_version
        self.body = body

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    def body_as(self, cls: type[M]) -> M:
        """The body, typed as ``cls`` (``request.body_as(MetadataRequest).topics``); TypeError if it is not one."""
        return _body_as(self.body, cls)

    def __repr__(self) -> str:
        return (
            f"Request(api_key={self.api_key}, api_version={self.api_version}, "
            f"correlation_id={self.correlation_id}, client_id={self.client_id!r}, body={self.body!r})"
        )


class Response:
    """A decoded response: correlation id, header and typed body."""

    __slots__ = ("header", "header_version", "body", "api_key", "api_version")

    def __init__(self, header: Any, header_version: int, body: Message, api_key: int, api_version: int) -> None:
        self.header = header
        self.header_version = header_version
        self.body = body
        self.api_key = api_key
        self.api_version = api_version  # the version the body was read as

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    def body_as(self, cls: type[M]) -> M:
        """The body, typed as ``cls`` (``response.body_as(MetadataResponse).topics``); TypeError if it is not one."""
        return _body_as(self.body, cls)

    def __repr__(self) -> str:
        return (
            f"Response(api_key={self.api_key}, api_version={self.api_version}, "
            f"correlation_id={self.correlation_id}, body={self.body!r})"
        )


def _payload(data, size_prefixed: bool):
    if not size_prefixed:
        return data
    view = memoryview(data).cast("B")
    if len(view) < 4:
        raise DecodeError(f"truncated: need 4 bytes for a frame size, {len(view)} left", 0)
    (size,) = _SIZE.unpack_from(view, 0)
    if size != len(view) - 4:
        raise DecodeError(f"frame size {size} does not match the {len(view) - 4} bytes that follow", 0)
    return view[4:]


def _prefix(payload: bytes, size_prefixed: bool) -> bytes:
    return _SIZE.pack(len(payload)) + payload if size_prefixed else payload


# Only the request header (RequestHeader v0/v1/v2, picked from the API key and version):
# ``decode_request_header(payload, *, size_prefixed=False)``. It is the codec's own
# function, called directly: header decoding is the hottest path of capture analysis.
decode_request_header = _codec.decode_request_header

#: Header classes of the active implementation (the Cython ones keep C fields).
RequestHeader = _codec.RequestHeader
ResponseHeader = _codec.ResponseHeader


def decode_request(payload, *, size_prefixed: bool = False, lazy: bool = True) -> Request:
    """Decode a request; the header version is chosen from its API key and version.

    Raises UnsupportedVersionError (with ``.header``) for an API or version kproto
    has no schema for, and DecodeError subclasses naming field path and offset.
    ``lazy`` as in :meth:`kproto.schema.Message.decode`.
    """
    header, hv, body = _codec.decode_request(_payload(payload, size_prefixed), lazy=lazy)
    return Request(header, hv, body)


def _message_plan(body: Message, version: int, kind: str) -> schema.StructPlan:
    if not isinstance(body, Message) or type(body)._struct_name != type(body)._message_name:
        raise EncodeError(f"expected a kproto message object, got {type(body).__name__}")
    name = type(body)._message_name
    info = schema.spec(name)
    if info["type"] != kind:
        raise EncodeError(f"{name} is a {info['type']}, not a {kind}")
    try:
        return schema.plan(name, version)
    except KeyError:
        lo, hi = info["valid_versions"]
        raise EncodeError(
            f"{name} has no version {version} (valid {lo}-{hi})", api_key=info["api_key"], api_version=version
        ) from None


def encode_request(
    body: Message,
    *,
    version: int,
    correlation_id: int,
    client_id: str | None = None,
    header_tags: dict[int, bytes] | None = None,
    size_prefixed: bool = False,
) -> bytes:
    """Encode a request body with its header (v0/v1/v2 chosen from the API and version)."""
    plan = _message_plan(body, version, "request")
    return _prefix(_codec.encode_request(body, plan, correlation_id, client_id, header_tags), size_prefixed)


def decode_response(
    payload, api_key: int | str, api_version: int, *, size_prefixed: bool = False, lazy: bool = True
) -> Response:
    """Decode a response to a request of ``api_key`` (a key, or a name: ``"Metadata"``) / ``api_version``.

    ApiVersions responses are read as Java's client reads them (KIP-511): at the
    version asked first; when that fails, as a v0 body, which is what a broker
    that does not know the version asked sends (with UNSUPPORTED_VERSION).
    ``Response.api_version`` is the version the body was read as. When neither
    reads, the error is the one of the version asked.
    A response holding only a correlation id raises UnsupportedRequestError.
    ``lazy`` as in :meth:`kproto.schema.Message.decode`.
    """
    api_key = api_key_of(api_key)
    data = _payload(payload, size_prefixed)
    try:
        return _decode_response_as(data, api_key, api_version, lazy)
    except DecodeError as asked:
        fallback = response_fallback_version(api_key, api_version)  # the generated per-API facts
        if fallback < 0:
            raise
        try:
            return _decode_response_as(data, api_key, fallback, lazy)
        except DecodeError:
            raise asked from None


def _decode_response_as(data, api_key: int, api_version: int, lazy: bool) -> Response:
    try:
        plan = schema.api_plan(api_key, api_version, False)
    except UnsupportedVersionError as exc:
        header, _hv, _off = _codec.decode_response_header(data, api_key, api_version)
        exc.header = header
        raise
    header, hv, body = _codec.decode_response(data, api_key, api_version, plan, lazy=lazy)
    return Response(header, hv, body, api_key, api_version)


def decode_response_header(payload, api_key: int | str, api_version: int, *, size_prefixed: bool = False):
    """The response header alone, of a response to ``api_key`` (a key or a name) / ``api_version``."""
    header, _version, _offset = _codec.decode_response_header(
        _payload(payload, size_prefixed), api_key_of(api_key), api_version
    )
    return header


def encode_response(
    body: Message,
    *,
    version: int,
    correlation_id: int,
    header_tags: dict[int, bytes] | None = None,
    size_prefixed: bool = False,
) -> bytes:
    """Encode a response body with its header (v0/v1; ApiVersions always v0)."""
    plan = _message_plan(body, version, "response")
    return _prefix(_codec.encode_response(body, plan, correlation_id, header_tags), size_prefixed)

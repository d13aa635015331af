"""Types of the compiled ``kproto._c._codec`` (source: ``_codec.pyx``).

Message bodies and headers, read and written by walking the same per-version
plans as the pure twin ``kproto/_py/codec.py``. ``CPlan``, ``DefaultMaker``,
``Source``, ``PendingArray`` and ``LazyField`` are the compiled codec's internal
machinery (a plan compiled to C arrays, a maker of default structs, a held
buffer, a not yet materialized struct array and the slot descriptor that
materializes it): public names, but never handed to users.
"""

from typing import Any, final

from typing_extensions import Buffer

from kproto._headers import header_dict as header_dict
from kproto._headers import header_eq as header_eq
from kproto._headers import header_fields as header_fields
from kproto._headers import header_rebuild as header_rebuild
from kproto._headers import header_repr as header_repr
from kproto.errors import DecodeError as DecodeError
from kproto.errors import EncodeError as EncodeError
from kproto.errors import InvalidLengthError as InvalidLengthError
from kproto.errors import LimitExceededError as LimitExceededError
from kproto.errors import UnsupportedRequestError as UnsupportedRequestError
from kproto.errors import UnsupportedVersionError as UnsupportedVersionError
from kproto.schema import Message, StructPlan

class CPlan:
    @property
    def plan(self) -> StructPlan: ...

class DefaultMaker: ...
class Source: ...

class AbsentStruct:
    """A struct field the input did not carry; its LazyField builds the defaults on first read."""

class PendingArray:
    def __len__(self) -> int: ...

class LazyField:
    def __get__(self, instance: object, owner: type | None = None, /) -> Any: ...
    def __set__(self, instance: object, value: Any, /) -> None: ...
    def __delete__(self, instance: object, /) -> None: ...

@final
class RequestHeader:
    """A request header, v0, v1 or v2 (the version follows from the API key and version)."""

    request_api_key: int
    request_api_version: int
    correlation_id: int
    client_id: str | None
    _unknown_tags: dict[int, bytes] | None
    def __init__(
        self,
        *,
        request_api_key: int = 0,
        request_api_version: int = 0,
        correlation_id: int = 0,
        client_id: str | None = None,
        _unknown_tags: dict[int, bytes] | None = None,
    ) -> None: ...
    @property
    def api_key(self) -> int: ...
    @property
    def api_version(self) -> int: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __eq__(self, other: object, /) -> bool: ...

@final
class ResponseHeader:
    """A response header, v0 or v1: ``correlation_id`` and ``_unknown_tags`` (v1)."""

    correlation_id: int
    _unknown_tags: dict[int, bytes] | None
    def __init__(self, *, correlation_id: int = 0, _unknown_tags: dict[int, bytes] | None = None) -> None: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __eq__(self, other: object, /) -> bool: ...

def header_version(api_key: int, api_version: int, is_request: bool) -> int:
    """Header version of a request (0, 1, 2) or response (0, 1) for an API version."""

def decode_struct(
    buf: Buffer, plan: StructPlan, offset: int = 0, end: int | None = None, *, lazy: bool = True
) -> Message:
    """Decode one message body spanning exactly buf[offset:end]; ``lazy=False`` builds its
    struct arrays now instead of on first read (one pass instead of a scan, then a build)."""

def encode_struct(obj: Message, plan: StructPlan, writer: object = None) -> bytes:
    """Encode a message body; EncodeErrors name the field path."""

def decode_request_header_info(buf: Buffer) -> tuple[RequestHeader, int, int]:
    """Decode just the request header of a payload: (header, header_version, body_offset)."""

def decode_request_header(payload: Buffer, *, size_prefixed: bool = False) -> RequestHeader:
    """The request header of a payload (or of a whole frame with ``size_prefixed=True``)."""

def decode_response_header(buf: Buffer, api_key: int, api_version: int) -> tuple[ResponseHeader, int, int]:
    """(header, header_version, body_offset) of a response payload."""

def decode_request(buf: Buffer, *, lazy: bool = True) -> tuple[RequestHeader, int, Message]:
    """(header, header_version, body) of a request payload (no size prefix)."""

def decode_response(
    buf: Buffer, api_key: int, api_version: int, plan: StructPlan, *, lazy: bool = True
) -> tuple[ResponseHeader, int, Message]:
    """(header, header_version, body) of a response payload, given the request's API and version."""

def encode_request(
    body: Message,
    plan: StructPlan,
    correlation_id: int,
    client_id: str | None,
    header_tags: dict[int, bytes] | None = None,
) -> bytes: ...
def encode_response(
    body: Message, plan: StructPlan, correlation_id: int, header_tags: dict[int, bytes] | None = None
) -> bytes: ...
def encode_request_header(header: RequestHeader, header_version: int) -> bytes: ...

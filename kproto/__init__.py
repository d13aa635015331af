"""kproto: a fast, complete Apache Kafka wire-protocol codec.

>>> import kproto
>>> from kproto.messages import MetadataRequest
>>> frame = kproto.encode_request(MetadataRequest(topics=None), version=12, correlation_id=7,
...                               client_id="me")
>>> kproto.decode_request(frame).body.topics is None
True
"""

from kproto import _deprecation, errors
from kproto._common.api_keys import ApiKey
from kproto._impl import USE_EXTENSION as _USE_EXTENSION
from kproto._version import __version__
from kproto.api import (
    Request,
    RequestHeader,
    Response,
    ResponseHeader,
    api_key_of,
    decode_request,
    decode_request_header,
    decode_response,
    decode_response_header,
    encode_request,
    encode_response,
    header_version,
)
from kproto.errors import (
    CodecUnavailableError,
    DecodeError,
    EncodeError,
    KprotoError,
    UnsupportedRequestError,
    UnsupportedVersionError,
)
from kproto.framing import FrameReader, iter_frames
from kproto.schema import Message

__all__ = [
    "__version__",
    "extension_loaded",
    "errors",
    "ApiKey",
    "Message",
    "Request",
    "Response",
    "RequestHeader",
    "ResponseHeader",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "decode_response_header",
    "encode_request",
    "encode_response",
    "header_version",
    "FrameReader",
    "iter_frames",
    "KprotoError",
    "DecodeError",
    "EncodeError",
    "UnsupportedVersionError",
    "UnsupportedRequestError",
    "CodecUnavailableError",
    "api_key_of",
]


# Old module paths (kproto.batch, kproto.capture, kproto.spark, ...) import their new homes, with a warning.
_deprecation.install_old_paths()


def extension_loaded() -> bool:
    """True when the compiled Cython extension is in use, False for the pure-Python twin."""
    return _USE_EXTENSION

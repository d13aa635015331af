"""The KIP-511 ApiVersions exchange: the ClientSoftwareName / ClientSoftwareVersion
checks, the request helpers, the client side of the handshake without I/O
(:class:`ApiVersionsHandshake`) and its run over a socket.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kproto import messages
from kproto._common.api_keys import CLIENT_SOFTWARE_FIRST_VERSION
from kproto._version import __version__
from kproto.api import decode_request, decode_response, encode_request
from kproto.errors import DecodeError, EncodeError, KprotoError, error_name
from kproto.framing import FrameReader
from kproto.versions._negotiate import as_ranges
from kproto.versions._tables import _API_TABLE, API_VERSIONS_KEY, UNSUPPORTED_VERSION, Ranges

#: ClientSoftwareName / ClientSoftwareVersion (KIP-511): letters, digits, '.' and '-',
#: beginning and ending with a letter or digit (the broker's own check).
CLIENT_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9.\-]*[a-zA-Z0-9])?")


def _software_problem(label: str, value: Any) -> str | None:
    if value is None:
        return f"{label} is missing"
    if not isinstance(value, str):
        return f"{label} must be a string, not {type(value).__name__}"
    if value == "":
        return f"{label} is empty"
    if CLIENT_SOFTWARE_PATTERN.fullmatch(value):
        return None
    bad = sorted({c for c in value if not (c.isascii() and (c.isalnum() or c in ".-"))})
    if bad:
        return f"{label} {value!r} has characters outside [.-a-zA-Z0-9]: {''.join(bad)!r}"
    return f"{label} {value!r} must begin and end with a letter or digit"


def client_software_problems(name: Any, version: Any) -> list[str]:
    """Why a ClientSoftwareName / ClientSoftwareVersion pair breaks KIP-511 (empty: valid)."""
    return [
        p
        for p in (_software_problem("ClientSoftwareName", name), _software_problem("ClientSoftwareVersion", version))
        if p
    ]


def _default_software_version() -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9.\-]", "-", __version__).strip(".-")
    return cleaned or "unknown"


DEFAULT_CLIENT_SOFTWARE_NAME = "kproto"
DEFAULT_CLIENT_SOFTWARE_VERSION = _default_software_version()
_API_VERSIONS_MAX = _API_TABLE[API_VERSIONS_KEY].max_version


class InvalidClientSoftwareError(EncodeError):
    """A ClientSoftwareName / ClientSoftwareVersion that brokers reject with INVALID_REQUEST."""


class ApiVersionsError(KprotoError):
    """The ApiVersions exchange failed: an error code other than UNSUPPORTED_VERSION, or no version left."""

    def __init__(self, reason: str, error_code: int | None = None) -> None:
        self.error_code = error_code
        super().__init__(reason)


def api_versions_request(
    version: int | None = None,
    *,
    client_software_name: str = DEFAULT_CLIENT_SOFTWARE_NAME,
    client_software_version: str = DEFAULT_CLIENT_SOFTWARE_VERSION,
    allow_invalid: bool = False,
):
    """An ApiVersionsRequest body; from v3 on its software fields are checked (KIP-511)
    and invalid ones refused with :class:`InvalidClientSoftwareError` unless ``allow_invalid``."""
    version = _API_VERSIONS_MAX if version is None else version
    if version >= CLIENT_SOFTWARE_FIRST_VERSION and not allow_invalid:
        problems = client_software_problems(client_software_name, client_software_version)
        if problems:
            raise InvalidClientSoftwareError(
                "; ".join(problems) + " (brokers answer INVALID_REQUEST; pass allow_invalid=True to send it anyway)",
                path="ApiVersionsRequest",
                api_key=API_VERSIONS_KEY,
                api_version=version,
            )
    return messages.ApiVersionsRequest(
        client_software_name=client_software_name, client_software_version=client_software_version
    )


def encode_api_versions_request(
    *,
    correlation_id: int,
    version: int | None = None,
    client_id: str | None = "kproto",
    client_software_name: str = DEFAULT_CLIENT_SOFTWARE_NAME,
    client_software_version: str = DEFAULT_CLIENT_SOFTWARE_VERSION,
    allow_invalid: bool = False,
    size_prefixed: bool = False,
) -> bytes:
    """An encoded ApiVersionsRequest (default: kproto's highest version), software fields checked."""
    version = _API_VERSIONS_MAX if version is None else version
    body = api_versions_request(
        version,
        client_software_name=client_software_name,
        client_software_version=client_software_version,
        allow_invalid=allow_invalid,
    )
    return encode_request(
        body, version=version, correlation_id=correlation_id, client_id=client_id, size_prefixed=size_prefixed
    )


def decode_api_versions_request(payload, *, size_prefixed: bool = False):
    """Decode an ApiVersionsRequest; returns ``(request, problems)`` where ``problems``
    lists what breaks KIP-511 in its software fields (always empty below v3)."""
    request = decode_request(payload, size_prefixed=size_prefixed)
    if request.api_key != API_VERSIONS_KEY:
        raise DecodeError(
            f"expected an ApiVersions request, got api_key {request.api_key}",
            0,
            api_key=request.api_key,
            api_version=request.api_version,
        )
    problems: list[str] = []
    body: Any = request.body
    if request.api_version >= CLIENT_SOFTWARE_FIRST_VERSION:
        problems = client_software_problems(body.client_software_name, body.client_software_version)
    return request, problems


def retry_version(response: Any, sent_version: int) -> int:
    """The ApiVersions version to retry with after an UNSUPPORTED_VERSION answer (KIP-511).

    The answer is a v0 body; brokers since 2.4 put their own ApiVersions range in
    its ApiKeys: take that maximum, or 0 when the entry is absent. The result is
    kept below ``sent_version`` so a confused broker cannot make the client loop.
    """
    body = getattr(response, "body", response)
    advertised = [int(e.max_version) for e in (body.api_keys or ()) if int(e.api_key) == API_VERSIONS_KEY]
    version = advertised[0] if advertised else 0
    return max(0, min(version, sent_version - 1, _API_VERSIONS_MAX))


@dataclass
class HandshakeResult:
    """The finished exchange: the broker's answer and the versions tried, in order."""

    response: Any  # the ApiVersionsResponse body
    version: int  # the version of the request that succeeded
    attempts: list[int]  # every version sent, first to last

    @property
    def ranges(self) -> Ranges:
        return as_ranges(self.response)


class ApiVersionsHandshake:
    """The client side of the ApiVersions exchange, without any I/O.

    ::

        shake = ApiVersionsHandshake()
        while not shake.done:
            send(shake.request())             # a size-prefixed frame
            shake.receive(read_one_frame())   # size-prefixed too

    The first request goes out at ``max_version`` (kproto's highest by default)
    with ClientSoftwareName/Version; an UNSUPPORTED_VERSION answer switches to
    :func:`retry_version` and asks again (KIP-511).
    """

    def __init__(
        self,
        *,
        client_id: str | None = "kproto",
        client_software_name: str = DEFAULT_CLIENT_SOFTWARE_NAME,
        client_software_version: str = DEFAULT_CLIENT_SOFTWARE_VERSION,
        max_version: int | None = None,
        allow_invalid: bool = False,
        first_correlation_id: int = 0,
    ) -> None:
        self.version = _API_VERSIONS_MAX if max_version is None else max_version
        if not 0 <= self.version <= _API_VERSIONS_MAX:
            raise ValueError(f"kproto speaks ApiVersions v0-{_API_VERSIONS_MAX}, not v{self.version}")
        self.client_id = client_id
        self.client_software_name = client_software_name
        self.client_software_version = client_software_version
        self.allow_invalid = allow_invalid
        self.attempts: list[int] = []
        self.result: HandshakeResult | None = None
        self._next_correlation_id = first_correlation_id
        self._pending: int | None = None
        # check the software fields up front rather than at the first send
        api_versions_request(
            self.version,
            client_software_name=client_software_name,
            client_software_version=client_software_version,
            allow_invalid=allow_invalid,
        )

    @property
    def done(self) -> bool:
        return self.result is not None

    def request(self) -> bytes:
        """The next request frame (size-prefixed), at :attr:`version`."""
        if self.done:
            raise ApiVersionsError("the handshake is already finished")
        self._pending = self._next_correlation_id
        self._next_correlation_id += 1
        self.attempts.append(self.version)
        return encode_api_versions_request(
            correlation_id=self._pending,
            version=self.version,
            client_id=self.client_id,
            client_software_name=self.client_software_name,
            client_software_version=self.client_software_version,
            allow_invalid=self.allow_invalid,
            size_prefixed=True,
        )

    def receive(self, frame: bytes) -> bool:
        """Read the answer to the last request (a size-prefixed frame); True when done."""
        if self._pending is None:
            raise ApiVersionsError("no request is waiting for an answer")
        response = decode_response(frame, API_VERSIONS_KEY, self.version, size_prefixed=True)
        if response.correlation_id != self._pending:
            raise DecodeError(
                f"correlation id {response.correlation_id} answers no pending request (expected {self._pending})",
                0,
                api_key=API_VERSIONS_KEY,
                api_version=self.version,
            )
        self._pending = None
        body: Any = response.body
        code = body.error_code
        if code == 0:
            self.result = HandshakeResult(response.body, self.version, list(self.attempts))
            return True
        if code != UNSUPPORTED_VERSION:
            raise ApiVersionsError(f"ApiVersions v{self.version} failed: {error_name(code)} ({code})", code)
        if self.version == 0:
            raise ApiVersionsError("the broker refused even ApiVersions v0", code)
        self.version = retry_version(response, self.version)
        return False


def handshake(exchange: Callable[[bytes], bytes], **options: Any) -> HandshakeResult:
    """Run :class:`ApiVersionsHandshake` over ``exchange`` (request frame in, response
    frame out, both size-prefixed); ``options`` go to the handshake."""
    shake = ApiVersionsHandshake(**options)
    while not shake.done:
        shake.receive(exchange(shake.request()))
    assert shake.result is not None
    return shake.result


def socket_exchange(sock: socket.socket, *, max_frame_size: int = 64 * 1024 * 1024) -> Callable[[bytes], bytes]:
    """An ``exchange`` for :func:`handshake` over a connected socket: send one frame,
    return the next whole frame received (size-prefixed)."""
    reader = FrameReader(max_frame_size)
    waiting: list[bytes] = []

    def exchange(frame: bytes) -> bytes:
        sock.sendall(frame)
        while not waiting:
            chunk = sock.recv(65536)
            if not chunk:
                raise DecodeError("the broker closed the connection before answering", reader.offset)
            waiting.extend(bytes(f) for f in reader.feed(chunk))
        payload = waiting.pop(0)
        return len(payload).to_bytes(4, "big") + payload

    return exchange

"""Request and response headers: shared behaviour, and the pure-Python classes.

The Cython codec has its own ``RequestHeader`` / ``ResponseHeader`` (C fields, a
free list: header decoding is the hottest path of capture analysis); these
helpers give both implementations the same equality, repr, dict and pickling.
"""

from __future__ import annotations

import base64
from typing import Any

from kproto._deprecation import warn

REQUEST_FIELDS = ("request_api_key", "request_api_version", "correlation_id", "client_id", "_unknown_tags")
RESPONSE_FIELDS = ("correlation_id", "_unknown_tags")


def _fields_of(header: Any) -> tuple[str, ...]:
    return REQUEST_FIELDS if hasattr(header, "request_api_key") else RESPONSE_FIELDS


def header_fields(header: Any) -> dict[str, Any]:
    return {name: getattr(header, name) for name in _fields_of(header)}


def header_rebuild(cls: type, fields: dict[str, Any]) -> Any:
    return cls(**fields)


# header_reduce and header_dict are the classes' __reduce__ and to_dict themselves (class
# attributes in both implementations), so their parameter is named as a method's.
def header_reduce(self: Any) -> tuple[Any, ...]:
    """Pickling and copying: the class and its fields, rebuilt through the constructor."""
    return (header_rebuild, (type(self), header_fields(self)))


def header_eq(header: Any, other: Any) -> bool:
    """Headers are equal when their fields are, whichever implementation made them."""
    names = _fields_of(header)
    if _fields_of(other) != names or not all(hasattr(other, n) for n in names):
        return NotImplemented
    return all(getattr(header, n) == getattr(other, n) for n in names[:-1]) and (header._unknown_tags or None) == (
        other._unknown_tags or None
    )


def header_repr(header: Any) -> str:
    parts = ", ".join(f"{n}={getattr(header, n)!r}" for n in _fields_of(header) if n != "_unknown_tags")
    if header._unknown_tags:
        parts += f", _unknown_tags={header._unknown_tags!r}"
    return f"{type(header).__name__}({parts})"


def header_dict(self: Any) -> dict[str, Any]:
    out = {n: getattr(self, n) for n in _fields_of(self) if n != "_unknown_tags"}
    if self._unknown_tags:
        out["_unknown_tags"] = {
            str(t): base64.b64encode(bytes(v)).decode("ascii") for t, v in sorted(self._unknown_tags.items())
        }
    return out


class _Header:
    """What both pure-Python header classes share: equality, repr, dict and pickling."""

    __slots__ = ()

    to_dict = header_dict
    __eq__ = header_eq
    __repr__ = header_repr
    __hash__ = None  # type: ignore[assignment]
    __reduce__ = header_reduce


class RequestHeader(_Header):
    """A request header, v0, v1 or v2 (the version follows from the API key and version)."""

    __slots__ = REQUEST_FIELDS

    def __init__(
        self,
        *,
        request_api_key: int = 0,
        request_api_version: int = 0,
        correlation_id: int = 0,
        client_id: str | None = None,
        _unknown_tags: dict[int, bytes] | None = None,
    ) -> None:
        self.request_api_key = request_api_key
        self.request_api_version = request_api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self._unknown_tags = _unknown_tags

    # Kafka names the header fields request_api_key / request_api_version; the short
    # properties go in the release after 1.0 (docs/api.md).
    @property
    def api_key(self) -> int:
        warn("RequestHeader.api_key", "RequestHeader.request_api_key")
        return self.request_api_key

    @property
    def api_version(self) -> int:
        warn("RequestHeader.api_version", "RequestHeader.request_api_version")
        return self.request_api_version


class ResponseHeader(_Header):
    """A response header, v0 or v1: ``correlation_id`` and ``_unknown_tags`` (v1)."""

    __slots__ = RESPONSE_FIELDS

    def __init__(self, *, correlation_id: int = 0, _unknown_tags: dict[int, bytes] | None = None) -> None:
        self.correlation_id = correlation_id
        self._unknown_tags = _unknown_tags

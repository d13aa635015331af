"""Pure-Python twin of kproto/_c/_wire.pxd: the wire rules every reader shares.

A primitive returns its value and the next position, or raises :class:`WireError`
carrying a ``kproto.arrow.frames.Status`` number and the failing byte's offset. The batch
decoder stores the status in a row and goes on; ``Reader`` (buffer.py) turns it into
the codec's exception with the field's path. The header-version rule is
:func:`kproto.schema.header_version`; the header layouts are parsed once, here, by
:func:`request_header` and :func:`response_header`.
"""

from __future__ import annotations

import struct

from kproto import schema
from kproto._common.batch import Status

TRUNCATED = int(Status.TRUNCATED)
BAD_LENGTH = int(Status.BAD_LENGTH)
MALFORMED = int(Status.MALFORMED)
EMPTY_RESPONSE = int(Status.EMPTY_RESPONSE)
NO_REQUEST_INFO = int(Status.NO_REQUEST_INFO)

# Which part of a header a status is about (WIRE_PART_* in _wire.pxd).
PART_FIXED, PART_CLIENT_ID, PART_TAGS = 0, 1, 2

_REQUEST_FIXED = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class WireError(Exception):
    """A wire rule broken: ``status`` (a ``Status`` number) at byte ``offset``; ``value``,
    the length or count refused, where there is one."""

    def __init__(self, status: int, offset: int, value: int | None = None) -> None:
        super().__init__(status, offset)
        self.status = status
        self.offset = offset
        self.value = value


def utf8_valid(data) -> bool:
    """Strict UTF-8, as CPython decodes it (no overlong forms, no surrogates, <= U+10FFFF)."""
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def uvarint(p, pos: int, end: int | None = None) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes and 32 bits at ``pos``: (value, next position)."""
    return _unsigned(p, pos, len(p) if end is None else end, 28, 0xF0)


def uvarlong(p, pos: int, end: int | None = None) -> tuple[int, int]:
    """An unsigned varlong of at most 10 bytes and 64 bits at ``pos``: (value, next position)."""
    return _unsigned(p, pos, len(p) if end is None else end, 63, 0xFE)


def _unsigned(p, pos: int, end: int, last_shift: int, overflow_bits: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise WireError(TRUNCATED, pos)
        b = p[pos]
        if shift == last_shift and b & overflow_bits:
            raise WireError(MALFORMED, pos)
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _prefix(p, pos: int, end: int, compact: bool, wide: bool) -> tuple[int, int]:
    """The value of a length or count prefix: compact N + 1 as N (so 0 is -1, null), else a
    signed int16 / int32; a WireError without a value when the prefix is cut short."""
    if compact:
        u, pos = uvarint(p, pos, end)
        return u - 1, pos
    fmt = _INT32 if wide else _INT16
    if end - pos < fmt.size:
        raise WireError(TRUNCATED, pos)
    return fmt.unpack_from(p, pos)[0], pos + fmt.size


def length(p, pos: int, end: int, compact: bool, wide: bool, nullable: bool) -> tuple[int, int]:
    """A string / bytes length prefix, int16 / int32 (-1 null) or compact (N + 1, 0 null):
    (length, next position), the length proven to fit in the bytes left. A WireError's
    ``value`` is the refused length (BAD_LENGTH, or TRUNCATED at the position after the
    prefix), or None when the prefix itself is cut short or malformed."""
    n, pos = _prefix(p, pos, end, compact, wide)
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise WireError(BAD_LENGTH, pos, n)
    if n > 0x7FFFFFFF:  # a compact length above int32
        raise WireError(BAD_LENGTH, pos, n)
    if end - pos < n:
        raise WireError(TRUNCATED, pos, n)
    return n, pos


def zigzag(u: int) -> int:
    """The signed value of a zigzag varint or varlong: (n << 1) ^ (n >> 31 or 63)."""
    return (u >> 1) ^ -(u & 1)


def _count_fits(count: int, nullable: bool, pos: int, end: int) -> int:
    """-1 is null where nullable; any other negative, or more than the bytes left (an
    element takes at least one), is BAD_LENGTH."""
    if count < 0 and not (count == -1 and nullable) or count > end - pos:
        raise WireError(BAD_LENGTH, pos, count)
    return count


def varint_length(p, pos: int, end: int, nullable: bool) -> tuple[int, int]:
    """A record's key, value or header length, or a record's length or header count: a
    zigzag varint (-1 null where nullable); over the bytes left is BAD_LENGTH (not a
    truncation). A WireError's ``value`` as :func:`length` sets it."""
    u, pos = uvarint(p, pos, end)
    return _count_fits(zigzag(u), nullable, pos, end), pos


def array_count(p, pos: int, end: int, compact: bool, nullable: bool) -> tuple[int, int]:
    """An array's element count, int32 (-1 null) or compact (N + 1, 0 null): (count, next
    position). An element takes at least one byte, so a count above the bytes left is a
    lie (BAD_LENGTH). A WireError's ``value`` as :func:`length` sets it."""
    count, pos = _prefix(p, pos, end, compact, True)
    return _count_fits(count, nullable, pos, end), pos


def tag_count(p, pos: int, end: int) -> tuple[int, int]:
    """A tagged-field section's count (KIP-482): (count, next position). A field takes at
    least two bytes, so a count above the bytes left is a lie (BAD_LENGTH)."""
    count, pos = uvarint(p, pos, end)
    if count > end - pos:
        raise WireError(BAD_LENGTH, pos, count)
    return count, pos


# Which step of a tag entry a WireError is about (WIRE_TAG_* in _wire.pxd).
TAG_ID, TAG_ORDER, TAG_SIZE, TAG_BOUND = 0, 1, 2, 3


class WireTag:
    """One tag entry as tag_entry read it (the WireTag struct of _wire.pxd)."""

    __slots__ = ("tag", "size", "previous", "step")

    def __init__(self) -> None:
        self.tag = self.size = 0
        self.previous = -1  # the tag before (-1 at the first); the new one once in order
        self.step = TAG_ID


def tag_entry(p, pos: int, end: int, t: WireTag) -> int:
    """One tag and its size into ``t``, tags strictly rising and the size within the bytes
    left: the value's first position, or WireError with ``t.step`` saying which step broke."""
    t.step = TAG_ID
    t.tag, pos = uvarint(p, pos, end)
    if t.tag <= t.previous:
        t.step = TAG_ORDER
        raise WireError(MALFORMED, pos)
    t.previous = t.tag
    t.step = TAG_SIZE
    t.size, pos = uvarint(p, pos, end)
    if t.size > end - pos:
        t.step = TAG_BOUND
        raise WireError(TRUNCATED, pos)
    return pos


def skip_tags(p, pos: int, end: int | None = None) -> tuple[int, int]:
    """Skip a tagged-field section: (field count, next position)."""
    end = len(p) if end is None else end
    count, pos = tag_count(p, pos, end)
    t = WireTag()
    for _ in range(count):
        pos = tag_entry(p, pos, end, t) + t.size
    return count, pos


# ------------------------------------------------------------------ headers
class WireHeader:
    """What a header parser read (the WireHeader struct of _wire.pxd); on a WireError,
    the fields read before it and ``part``, the part that broke."""

    __slots__ = (
        "api_key",
        "api_version",
        "correlation_id",
        "version",
        "part",
        "client_id_length",
        "client_id_at",
        "tags_at",
        "tag_count",
        "end",
    )

    def __init__(self) -> None:
        self.api_key = self.api_version = self.correlation_id = self.version = 0
        self.part = PART_FIXED
        self.client_id_length = -1  # -1: null, or no client id field (header v0)
        self.client_id_at = 0  # the client id's first byte (after its length prefix)
        self.tags_at = -1  # the tagged-field section's first byte; -1: none
        self.tag_count = 0
        self.end = 0  # the body's first byte


def _nullable_string(p, pos: int, end: int) -> tuple[int, int]:
    """An int16 length (-1: null) and that many bytes of strict UTF-8: (length, next position)."""
    n, pos = length(p, pos, end, False, False, True)
    if n > 0:
        if not utf8_valid(p[pos : pos + n]):
            raise WireError(MALFORMED, pos)
        pos += n
    return n, pos


def _header_tags(p, pos: int, end: int, h: WireHeader) -> int:
    h.part = PART_TAGS
    h.tags_at = pos
    h.tag_count, pos = skip_tags(p, pos, end)
    return pos


def request_fixed(p, h: WireHeader, pos: int = 0, end: int | None = None) -> int:
    """The request header's first part into ``h``: api key, api version, correlation id
    and the header version; the next offset, or WireError."""
    end = len(p) if end is None else end
    if end - pos < 8:
        raise WireError(TRUNCATED, pos + (0 if end - pos < 2 else (2 if end - pos < 4 else 4)))
    h.api_key, h.api_version, h.correlation_id = _REQUEST_FIXED.unpack_from(p, pos)
    h.version = schema.header_version(h.api_key, h.api_version, True)
    return pos + 8


def request_header(p, h: WireHeader, pos: int = 0, end: int | None = None) -> int:
    """Parse the request header at ``pos`` into ``h``: the body's offset, or WireError."""
    end = len(p) if end is None else end
    pos = request_fixed(p, h, pos, end)
    if h.version >= 1:
        h.part = PART_CLIENT_ID
        length, pos = _nullable_string(p, pos, end)
        h.client_id_length, h.client_id_at = length, pos - max(length, 0)
    if h.version >= 2:
        pos = _header_tags(p, pos, end, h)
    h.end = pos
    return pos


def response_header(p, h: WireHeader, version: int, empty_is_error: bool, pos: int = 0, end: int | None = None) -> int:
    """Parse a response header at ``pos`` into ``h`` (see wire_response_header in _wire.pxd
    for ``version`` and ``empty_is_error``): the body's offset, or WireError."""
    end = len(p) if end is None else end
    if end - pos < 4:
        raise WireError(TRUNCATED, pos)
    h.correlation_id = _INT32.unpack_from(p, pos)[0]
    pos += 4
    if version < 0:
        raise WireError(NO_REQUEST_INFO, pos)
    h.version = version
    if empty_is_error and pos == end:
        raise WireError(EMPTY_RESPONSE, pos)
    if version >= 1:
        pos = _header_tags(p, pos, end, h)
    h.end = pos
    return pos

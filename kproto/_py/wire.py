"""Pure-Python twin of kproto/_c/_wire.pxd: the wire rules every reader shares.

A primitive returns its value and the next position, or raises :class:`WireError`
carrying a ``kproto.batch.Status`` number and the failing byte's offset. The batch
decoder stores the status in a row and goes on; ``Reader`` (buffer.py) turns it into
the codec's exception with the field's path. The header-version rule is
:func:`kproto.schema.header_version`.
"""

from __future__ import annotations

from kproto._common.batch import Status

TRUNCATED = int(Status.TRUNCATED)
BAD_LENGTH = int(Status.BAD_LENGTH)
MALFORMED = int(Status.MALFORMED)


class WireError(Exception):
    """A wire rule broken: ``status`` (a ``Status`` number) at byte ``offset``."""

    def __init__(self, status: int, offset: int) -> None:
        super().__init__(status, offset)
        self.status = status
        self.offset = offset


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


def skip_tags(p, pos: int) -> tuple[int, int]:
    """Skip a tagged-field section (KIP-482): (field count, next position)."""
    count, pos = uvarint(p, pos)
    if count > len(p) - pos:
        raise WireError(BAD_LENGTH, pos)
    previous = -1
    for _ in range(count):
        tag, pos = uvarint(p, pos)
        if tag <= previous:
            raise WireError(MALFORMED, pos)
        previous = tag
        size, pos = uvarint(p, pos)
        if size > len(p) - pos:
            raise WireError(TRUNCATED, pos)
        pos += size
    return count, pos

"""Pure-Python twin of kproto/_c/_buffer.pyx: the same Reader and Writer, the same errors.

Used when the extension is not built or ``KPROTO_NO_EXTENSIONS=1``. Behaviour,
including every error class, offset and message, matches the Cython version.
"""

from __future__ import annotations

import struct
import uuid as _uuid

from kproto._py import wire
from kproto.errors import (
    DecodeError,
    EncodeError,
    InvalidLengthError,
    InvalidVarintError,
    TruncatedError,
)

_UVARINT_ERROR = "unsigned varint longer than 5 bytes or above 32 bits"
_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_UINT64_PAIR = struct.Struct(">QQ")
_FLOAT64 = struct.Struct(">d")
_ZERO_UUID = _uuid.UUID(int=0)

INT8_RANGE = (-(1 << 7), (1 << 7) - 1)
INT16_RANGE = (-(1 << 15), (1 << 15) - 1)
INT32_RANGE = (-(1 << 31), (1 << 31) - 1)
INT64_RANGE = (-(1 << 63), (1 << 63) - 1)
UINT16_RANGE = (0, 0xFFFF)
UINT32_RANGE = (0, 0xFFFFFFFF)


class Reader:
    """Reads Kafka primitives from any contiguous buffer, without copying it."""

    __slots__ = ("source", "data", "pos", "end", "root_name", "api_key", "api_version", "path")

    def __init__(self, source, start: int = 0, end: int | None = None) -> None:
        self.source = source
        view = memoryview(source)
        if not view.contiguous:
            raise BufferError("kproto needs a contiguous buffer")
        self.data = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        self.pos = start
        self.end = len(self.data) if end is None else end
        # Where the decoder is, for error messages: root message name, api, and a
        # list of [field name, element index] frames pushed as it descends.
        self.root_name: str | None = None
        self.api_key = -1
        self.api_version = -1
        self.path: list[list] = []

    # ------------------------------------------------------------ errors
    def format_path(self) -> str | None:
        parts: list[str] = []
        if self.root_name is not None:
            parts.append(self.root_name)
        for name, index in self.path:
            if name is not None:
                if parts:
                    parts.append(".")
                parts.append(name)
            if index >= 0:
                parts.append(f"[{index}]")
        return "".join(parts) or None

    def error(self, exc_type, reason: str):
        return exc_type(
            reason,
            self.pos,
            self.format_path(),
            self.api_key if self.api_key >= 0 else None,
            self.api_version if self.api_version >= 0 else None,
        )

    def truncated(self, need: int):
        return self.error(TruncatedError, f"truncated: need {need} bytes, {self.end - self.pos} left")

    def invalid_length(self, length: int, what: str):
        return self.error(InvalidLengthError, f"invalid {what} {length} with {self.end - self.pos} bytes left")

    # ------------------------------------------------------------ positions
    @property
    def offset(self) -> int:
        return self.pos

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int) -> None:
        if self.end - self.pos < n:
            raise self.truncated(n)

    def take(self, n: int) -> memoryview:
        if self.end - self.pos < n:
            raise self.truncated(n)
        start = self.pos
        self.pos = start + n
        return self.data[start : start + n]

    # ------------------------------------------------------------ fixed width
    def _unpack(self, fmt: struct.Struct):
        pos = self.pos
        if self.end - pos < fmt.size:
            raise self.truncated(fmt.size)
        self.pos = pos + fmt.size
        return fmt.unpack_from(self.data, pos)[0]

    def read_bool(self) -> bool:
        if self.pos >= self.end:
            raise self.truncated(1)
        value = self.data[self.pos] != 0
        self.pos += 1
        return value

    def read_int8(self) -> int:
        if self.pos >= self.end:
            raise self.truncated(1)
        value = self.data[self.pos]
        self.pos += 1
        return value - 256 if value > 127 else value

    def read_int16(self) -> int:
        return self._unpack(_INT16)

    def read_uint16(self) -> int:
        return self._unpack(_UINT16)

    def read_int32(self) -> int:
        return self._unpack(_INT32)

    def read_uint32(self) -> int:
        return self._unpack(_UINT32)

    def read_int64(self) -> int:
        return self._unpack(_INT64)

    def read_float64(self) -> float:
        return self._unpack(_FLOAT64)

    def read_uuid(self) -> _uuid.UUID:
        pos = self.pos
        if self.end - pos < 16:
            raise self.truncated(16)
        hi, lo = _UINT64_PAIR.unpack_from(self.data, pos)
        self.pos = pos + 16
        if hi == 0 and lo == 0:
            return _ZERO_UUID
        return _uuid.UUID(int=(hi << 64) | lo)

    # ------------------------------------------------------------ varints
    def read_unsigned_varint(self) -> int:
        try:
            value, self.pos = wire.uvarint(self.data, self.pos, self.end)
        except wire.WireError as exc:
            raise self._varint_error(exc, _UVARINT_ERROR) from None
        return value

    def read_unsigned_varlong(self) -> int:
        try:
            value, self.pos = wire.uvarlong(self.data, self.pos, self.end)
        except wire.WireError as exc:
            raise self._varint_error(exc, "varlong longer than 10 bytes or above 64 bits") from None
        return value

    def _varint_error(self, exc: wire.WireError, what: str):
        self.pos = exc.offset
        if exc.status == wire.TRUNCATED:
            return self.truncated(1)
        return self.error(InvalidVarintError, f"invalid varint: {what}")

    def read_varint(self) -> int:
        u = self.read_unsigned_varint()
        return wire.zigzag(u)

    def read_varlong(self) -> int:
        u = self.read_unsigned_varlong()
        return wire.zigzag(u)

    # ------------------------------------------------------------ lengths
    def read_length(self, compact: bool, wide: bool, nullable: bool, what: str) -> int:
        """A length prefix (the wire layer's rule): -1 for null, else a length that fits."""
        try:
            n, self.pos = wire.length(self.data, self.pos, self.end, compact, wide, nullable)
        except wire.WireError as exc:
            raise self._length_error(exc, compact, wide, what) from None
        return n

    def _length_error(self, exc: wire.WireError, compact: bool, wide: bool, what: str):
        """The error of a length or count prefix the wire layer refused."""
        if exc.value is None:
            if not compact:  # a fixed-width prefix cut short
                return self.truncated(4 if wide else 2)
            return self._varint_error(exc, _UVARINT_ERROR)
        self.pos = exc.offset
        if exc.status == wire.BAD_LENGTH:
            return self.invalid_length(exc.value, what)
        return self.truncated(exc.value)

    def read_length16(self, nullable: bool, what: str) -> int:
        return self.read_length(False, False, nullable, what)

    def read_length32(self, nullable: bool, what: str) -> int:
        return self.read_length(False, True, nullable, what)

    def read_compact_length(self, nullable: bool, what: str) -> int:
        return self.read_length(True, False, nullable, what)

    def read_varint_length(self, nullable: bool, what: str) -> int:
        """A record field's zigzag-varint length or count (-1: null), within the bytes left."""
        try:
            n, self.pos = wire.varint_length(self.data, self.pos, self.end, nullable)
        except wire.WireError as exc:
            raise self._length_error(exc, True, False, what) from None
        return n

    def read_array_count(self, compact: bool = False, nullable: bool = True):
        """Element count of an array (None for null), checked against the bytes left."""
        try:
            n, self.pos = wire.array_count(self.data, self.pos, self.end, compact, nullable)
        except wire.WireError as exc:
            raise self._length_error(
                exc,
                compact,
                True,
                "array count" if exc.value is None or exc.value < 0 else "array count (more elements than bytes left)",
            ) from None
        return None if n < 0 else n

    # ------------------------------------------------------------ strings and bytes
    def read_str_body(self, n: int) -> str:
        raw = self.data[self.pos : self.pos + n]
        try:
            text = str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(DecodeError, f"invalid UTF-8 in string: {exc.reason}") from None
        self.pos += n
        return text

    def read_bytes_body(self, n: int) -> bytes:
        raw = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return raw

    def read_string_value(self, compact: bool, nullable: bool):
        if compact:
            n = self.read_compact_length(nullable, "string length")
        else:
            n = self.read_length16(nullable, "string length")
        return None if n < 0 else self.read_str_body(n)

    def read_bytes_value(self, compact: bool, nullable: bool):
        if compact:
            n = self.read_compact_length(nullable, "bytes length")
        else:
            n = self.read_length32(nullable, "bytes length")
        return None if n < 0 else self.read_bytes_body(n)

    def read_string(self) -> str:
        return self.read_string_value(False, False)

    def read_nullable_string(self) -> str | None:
        return self.read_string_value(False, True)

    def read_compact_string(self) -> str:
        return self.read_string_value(True, False)

    def read_compact_nullable_string(self) -> str | None:
        return self.read_string_value(True, True)

    def read_bytes(self) -> bytes:
        return self.read_bytes_value(False, False)

    def read_nullable_bytes(self) -> bytes | None:
        return self.read_bytes_value(False, True)

    def read_compact_bytes(self) -> bytes:
        return self.read_bytes_value(True, False)

    def read_compact_nullable_bytes(self) -> bytes | None:
        return self.read_bytes_value(True, True)

    def read_tag_count(self) -> int:
        """A tagged-field section's count (the wire layer's rule, raising)."""
        try:
            count, self.pos = wire.tag_count(self.data, self.pos, self.end)
        except wire.WireError as exc:  # a varint prefix, as a compact length's
            raise self._length_error(exc, True, False, "tagged field count") from None
        return count

    def read_tag_entry(self, t: wire.WireTag) -> None:
        """The next tag and size into ``t``; the reader is left at the value's first byte."""
        try:
            self.pos = wire.tag_entry(self.data, self.pos, self.end, t)
        except wire.WireError as exc:
            self.pos = exc.offset
            if t.step == wire.TAG_ORDER:
                raise self.error(DecodeError, f"tagged field {t.tag} out of order (after {t.previous})") from None
            if t.step == wire.TAG_BOUND:
                raise self.truncated(t.size) from None
            raise self._varint_error(exc, _UVARINT_ERROR) from None

    def read_tagged_fields(self) -> dict[int, bytes]:
        """A tagged-field section as {tag: raw bytes}, tags strictly ascending."""
        fields: dict[int, bytes] = {}
        t = wire.WireTag()
        for _ in range(self.read_tag_count()):
            self.read_tag_entry(t)
            fields[t.tag] = self.read_bytes_body(t.size)
        return fields


def wrap_int64(value: int) -> int:
    """``value`` as a signed 64-bit integer, wrapped around as Java's long (and the
    compiled twin's wrapping_add64 in _buffer.pxd) wraps it."""
    return ((value + (1 << 63)) & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


def check_int(value, bounds: tuple[int, int], type_name: str) -> int:
    """The value as an int within bounds, or an EncodeError that says why not."""
    try:
        as_int = int(value.__index__())
    except (AttributeError, TypeError):
        raise EncodeError(f"expected an int for {type_name}, got {type(value).__name__}") from None
    if as_int < bounds[0] or as_int > bounds[1]:
        raise EncodeError(f"{value!r} does not fit in {type_name}")
    return as_int


class Writer:
    """Writes Kafka primitives into a growing buffer; `getvalue()` returns the bytes."""

    __slots__ = ("buf",)

    def __init__(self, capacity: int = 256) -> None:
        self.buf = bytearray()

    def __len__(self) -> int:
        return len(self.buf)

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def write_raw(self, data) -> None:
        self.buf += data

    def write_bool(self, value) -> None:
        if not isinstance(value, bool):
            raise EncodeError(f"expected bool, got {type(value).__name__}")
        self.buf.append(1 if value else 0)

    def write_int8(self, value) -> None:
        self.buf.append(check_int(value, INT8_RANGE, "int8") & 0xFF)

    def write_int16(self, value) -> None:
        self.buf += _INT16.pack(check_int(value, INT16_RANGE, "int16"))

    def write_int32(self, value) -> None:
        self.buf += _INT32.pack(check_int(value, INT32_RANGE, "int32"))

    def write_int64(self, value) -> None:
        self.buf += _INT64.pack(check_int(value, INT64_RANGE, "int64"))

    def write_uint16(self, value) -> None:
        self.buf += _UINT16.pack(check_int(value, UINT16_RANGE, "uint16"))

    def write_uint32(self, value) -> None:
        self.buf += _UINT32.pack(check_int(value, UINT32_RANGE, "uint32"))

    def write_float64(self, value) -> None:
        try:
            self.buf += _FLOAT64.pack(value)
        except struct.error:
            raise EncodeError(f"expected float, got {type(value).__name__}") from None

    def write_uuid(self, value) -> None:
        if value is None:
            as_int = 0
        elif isinstance(value, _uuid.UUID):
            as_int = value.int
        else:
            raise EncodeError(f"expected uuid.UUID, got {type(value).__name__}")
        self.buf += as_int.to_bytes(16, "big")

    def write_unsigned_varlong(self, value) -> None:
        if not isinstance(value, int) or value < 0 or value > 0xFFFFFFFFFFFFFFFF:
            raise EncodeError(f"{value!r} does not fit in unsigned varlong")
        buf = self.buf
        while value >= 0x80:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    def write_unsigned_varint(self, value) -> None:
        self.write_unsigned_varlong(check_int(value, UINT32_RANGE, "unsigned varint"))

    def write_varint(self, value) -> None:
        v = check_int(value, INT32_RANGE, "varint")
        self.write_unsigned_varlong(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def write_varlong(self, value) -> None:
        v = check_int(value, INT64_RANGE, "varlong")
        self.write_unsigned_varlong(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def write_length(self, n: int, compact: bool, wide: bool) -> None:
        """A length prefix; -1 writes the null marker."""
        if compact:
            if n > 0x7FFFFFFE:
                raise EncodeError(f"length {n} too large for a compact length")
            self.write_unsigned_varlong(n + 1)
        elif wide:
            if n > INT32_RANGE[1]:
                raise EncodeError(f"length {n} too large for an int32 length")
            self.buf += _INT32.pack(n)
        else:
            if n > INT16_RANGE[1]:
                raise EncodeError(f"string of {n} bytes is longer than an int16 length allows (32767)")
            self.buf += _INT16.pack(n)

    def write_string_value(self, value, compact: bool, nullable: bool) -> None:
        if value is None:
            if not nullable:
                raise EncodeError("null string in a non-nullable field")
            self.write_length(-1, compact, False)
            return
        if not isinstance(value, str):
            raise EncodeError(f"expected str, got {type(value).__name__}")
        data = value.encode("utf-8")
        self.write_length(len(data), compact, False)
        self.buf += data

    def write_bytes_value(self, value, compact: bool, nullable: bool) -> None:
        if value is None:
            if not nullable:
                raise EncodeError("null bytes in a non-nullable field")
            self.write_length(-1, compact, True)
            return
        try:
            view = memoryview(value)
        except TypeError:
            raise EncodeError(f"expected bytes-like, got {type(value).__name__}") from None
        self.write_length(view.nbytes, compact, True)
        self.buf += view

    def write_string(self, value) -> None:
        self.write_string_value(value, False, False)

    def write_nullable_string(self, value) -> None:
        self.write_string_value(value, False, True)

    def write_compact_string(self, value) -> None:
        self.write_string_value(value, True, False)

    def write_compact_nullable_string(self, value) -> None:
        self.write_string_value(value, True, True)

    def write_bytes(self, value) -> None:
        self.write_bytes_value(value, False, False)

    def write_nullable_bytes(self, value) -> None:
        self.write_bytes_value(value, False, True)

    def write_compact_bytes(self, value) -> None:
        self.write_bytes_value(value, True, False)

    def write_compact_nullable_bytes(self, value) -> None:
        self.write_bytes_value(value, True, True)

    def write_array_count(self, count, compact: bool = False) -> None:
        """Element count of an array; None writes the null marker."""
        if count is None:
            self.write_length(-1, compact, True)
        else:
            self.write_length(check_int(count, (0, INT32_RANGE[1]), "array count"), compact, True)

    def write_tagged_fields(self, fields) -> None:
        """A tagged-field section from {tag: raw bytes}, written in ascending tag order."""
        tags = sorted(fields or ())
        self.write_unsigned_varlong(len(tags))
        for tag in tags:
            data = bytes(fields[tag])
            self.write_unsigned_varint(tag)
            self.write_unsigned_varlong(len(data))
            self.buf += data

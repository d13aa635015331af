"""Kafka's primitive types, read and written one at a time: the public face of kproto's
byte readers and writers, for hand-written codecs and for fields kproto has no schema for.

    >>> from kproto.buffer import Reader, Writer
    >>> w = Writer()
    >>> w.write_int16(7); w.write_compact_string("hi"); w.write_tagged_fields({})
    >>> r = Reader(w.getvalue())
    >>> r.read_int16(), r.read_compact_string(), r.read_tagged_fields(), r.remaining
    (7, 'hi', {}, 0)

``Reader(buf)`` reads from any contiguous buffer (bytes, bytearray, memoryview,
mmap) without copying it; ``offset`` is where the next read starts and
``remaining`` how many bytes are left. Every ``read_*`` has a ``write_*`` twin on
``Writer(capacity=256)``, whose ``getvalue()`` returns the bytes written:

| methods | Kafka types |
|---|---|
| `bool`, `int8`, `int16`, `int32`, `int64`, `uint16`, `uint32`, `float64` | fixed width, big-endian |
| `uuid` | 16 bytes (`None` writes the zero UUID) |
| `varint`, `varlong`, `unsigned_varint`, `unsigned_varlong` | zig-zag and unsigned base-128 |
| `string`, `nullable_string`, `compact_string`, `compact_nullable_string` | int16 or unsigned-varint+1 length, UTF-8 |
| `bytes`, `nullable_bytes`, `compact_bytes`, `compact_nullable_bytes` | int32 or unsigned-varint+1 length |
| `array_count(compact=False, ...)` | an array's element count (`None`: a null array) |
| `tagged_fields` | a flexible version's tagged-field section, as `{tag: raw bytes}` |

Bad input raises a :class:`kproto.errors.DecodeError` subclass naming the byte
offset (``TruncatedError``, ``InvalidVarintError``, ``InvalidLengthError``); a value
out of its type's range raises :class:`kproto.errors.EncodeError`. The classes are
the active implementation's (compiled, or the pure-Python twin with
``KPROTO_NO_EXTENSIONS=1``): both behave the same. ``kproto._impl.load("buffer")``,
the path documented before, still gives the same classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kproto import _impl
from kproto.errors import DecodeError, EncodeError, InvalidLengthError, InvalidVarintError, TruncatedError

if TYPE_CHECKING:  # the compiled module's stub types both implementations (tools/check_stubs.py)
    from kproto._c._buffer import Reader, Writer
else:
    Reader = _impl.load("buffer").Reader
    Writer = _impl.load("buffer").Writer

__all__ = [
    "Reader",
    "Writer",
    "DecodeError",
    "EncodeError",
    "TruncatedError",
    "InvalidVarintError",
    "InvalidLengthError",
]

"""Size-prefixed Kafka frames: every request and response on the wire is an int32
big-endian length followed by that many bytes (the *payload*).

:class:`FrameReader` takes chunks of any size, as they arrive from a socket or a
file, and yields whole payloads; :func:`iter_frames` walks a complete buffer.
Both refuse sizes above ``max_frame_size`` (default 100 MiB, like the broker's
``socket.request.max.bytes``) before buffering them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from kproto.errors import FrameTooLargeError, InvalidLengthError, TruncatedError
from kproto.limits import DEFAULT_MAX_FRAME_SIZE

_SIZE = struct.Struct(">i")

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "FrameReader", "iter_frames", "frame"]


def _check_size(size: int, offset: int, max_frame_size: int) -> None:
    if size < 0:
        raise InvalidLengthError(f"invalid frame size {size}", offset)
    if size > max_frame_size:
        raise FrameTooLargeError(f"frame of {size} bytes exceeds the maximum of {max_frame_size}", offset)


def _truncated(offset: int, left: int, size: int | None) -> TruncatedError:
    """The error for a stream that ends ``left`` bytes into the frame at ``offset`` (size None: not read yet).

    Both readers raise it, so a truncated frame reads the same whichever reader met it.
    """
    if size is None:
        return TruncatedError(f"truncated: need 4 bytes for a frame size, {left} left", offset)
    return TruncatedError(f"truncated: frame of {size} bytes, {left - 4} left", offset)


def frame(payload: bytes) -> bytes:
    """Prefix a payload with its int32 size."""
    return _SIZE.pack(len(payload)) + bytes(payload)


def iter_frames(buffer, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> Iterator[memoryview]:
    """Yield each payload of a buffer of concatenated size-prefixed frames, without copying.

    Raises TruncatedError if the buffer ends inside a frame (after yielding the
    complete frames before it).
    """
    view = memoryview(buffer).cast("B")
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < 4:
            raise _truncated(pos, end - pos, None)
        (size,) = _SIZE.unpack_from(view, pos)
        _check_size(size, pos, max_frame_size)
        if end - pos - 4 < size:
            raise _truncated(pos, end - pos, size)
        yield view[pos + 4 : pos + 4 + size]
        pos += 4 + size


class FrameReader:
    """Incremental frame splitter: ``feed(chunk)`` returns the payloads completed by it.

    >>> r = FrameReader()
    >>> r.feed(b"\\x00\\x00\\x00\\x02h")
    []
    >>> r.feed(b"i")
    [b'hi']
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._consumed = 0  # bytes of the stream already returned as frames
        self._next_size = -1  # size of the frame being assembled, once known

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buffer)

    @property
    def offset(self) -> int:
        """Stream offset of the first byte not yet returned."""
        return self._consumed

    def feed(self, chunk) -> list[bytes]:
        self._buffer += chunk
        frames: list[bytes] = []
        buf = self._buffer
        pos = 0
        while True:
            if self._next_size < 0:
                if len(buf) - pos < 4:
                    break
                (size,) = _SIZE.unpack_from(buf, pos)
                _check_size(size, self._consumed + pos, self.max_frame_size)
                self._next_size = size
            if len(buf) - pos - 4 < self._next_size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + self._next_size]))
            pos += 4 + self._next_size
            self._next_size = -1
        if pos:
            del buf[:pos]
            self._consumed += pos
        return frames

    def __iter__(self):
        raise TypeError("FrameReader is fed with feed(chunk); iterate over what feed() returns")

    def close(self) -> None:
        """Declare the stream ended: raises TruncatedError if a partial frame is buffered."""
        if self._buffer:
            # feed() reads the size as soon as 4 bytes are buffered, so it is known past that
            size = self._next_size if self._next_size >= 0 else None
            raise _truncated(self._consumed, len(self._buffer), size)

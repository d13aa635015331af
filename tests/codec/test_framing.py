"""Size-prefixed framing: streaming reader and whole-buffer iteration."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kproto import FrameReader, iter_frames
from kproto.errors import FrameTooLargeError, InvalidLengthError, TruncatedError
from kproto.framing import frame


@given(st.lists(st.binary(max_size=300), max_size=8), st.integers(1, 50))
def test_frame_reader_any_chunking(payloads, chunk):
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader()
    out = []
    for i in range(0, len(stream), chunk):
        out += reader.feed(stream[i : i + chunk])
    assert out == payloads
    assert reader.buffered == 0 and reader.offset == len(stream)
    reader.close()


def test_frame_reader_one_byte_at_a_time():
    payloads = [b"", b"a", b"hello" * 100]
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader()
    out = []
    for b in stream:
        out += reader.feed(bytes([b]))
    assert out == payloads


def test_frame_too_large_is_refused_before_buffering():
    reader = FrameReader(max_frame_size=1024)
    with pytest.raises(FrameTooLargeError) as info:
        reader.feed((1025).to_bytes(4, "big"))
    assert info.value.offset == 0
    reader = FrameReader()
    with pytest.raises(FrameTooLargeError):
        reader.feed((100 * 1024 * 1024 + 1).to_bytes(4, "big"))


def test_negative_size_is_invalid():
    with pytest.raises(InvalidLengthError):
        FrameReader().feed(b"\xff\xff\xff\xff")
    with pytest.raises(InvalidLengthError):
        list(iter_frames(b"\x80\x00\x00\x00"))


def test_close_reports_partial_frame():
    reader = FrameReader()
    reader.feed(b"\x00\x00\x00\x05ab")
    with pytest.raises(TruncatedError):
        reader.close()


def test_iter_frames_zero_copy_and_truncation():
    data = frame(b"one") + frame(b"two") + b"\x00\x00\x00\x09par"
    frames = iter_frames(data)
    assert bytes(next(frames)) == b"one"
    second = next(frames)
    assert isinstance(second, memoryview) and bytes(second) == b"two"
    with pytest.raises(TruncatedError) as info:
        next(frames)
    assert info.value.offset == 14
    with pytest.raises(TruncatedError):
        list(iter_frames(b"\x00\x00"))
    assert list(iter_frames(b"")) == []

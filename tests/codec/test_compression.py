"""kproto.compression: how lz4, zstd and xerial snappy streams are walked (skippable
frames, wrong magics, cut streams) and what each error says."""

from __future__ import annotations

import struct

import pytest

from kproto.compression import compress, decompress
from kproto.errors import DecompressionError

pytest.importorskip("cramjam")

DATA = bytes(range(256)) * 40


def skippable(payload: bytes = b"note", magic: int = 0x184D2A53) -> bytes:
    return struct.pack("<II", magic, len(payload)) + payload


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_skippable_frames_are_passed_over(codec):
    frame = bytes(compress(codec, DATA))
    stream = skippable() + frame + skippable(b"", 0x184D2A5F) + frame + skippable(b"x" * 9, 0x184D2A50)
    assert bytes(decompress(codec, stream)) == DATA + DATA
    assert bytes(decompress(codec, skippable())) == b""


@pytest.mark.parametrize(
    "codec, message",
    [
        ("lz4", "lz4 skippable frame truncated at byte {at}"),
        ("zstd", "zstd skippable frame truncated"),
    ],
)
def test_a_cut_skippable_frame(codec, message):
    frame = bytes(compress(codec, DATA))
    with pytest.raises(DecompressionError, match=f"^{message.format(at=len(frame))}$"):
        decompress(codec, frame + skippable()[:6])


@pytest.mark.parametrize("codec, article", [("lz4", "an"), ("zstd", "a")])
def test_a_wrong_magic_and_a_cut_magic(codec, article):
    frame = bytes(compress(codec, DATA))
    at = len(frame) + len(skippable())
    with pytest.raises(DecompressionError, match=f"^not {article} {codec} frame \\(magic 0x12345678\\) at byte {at}$"):
        decompress(codec, frame + skippable() + struct.pack("<I", 0x12345678) + b"\0" * 8)
    with pytest.raises(DecompressionError, match=f"^{codec} frame magic truncated at byte {at}$"):
        decompress(codec, frame + skippable() + b"\x04\x22")


def test_xerial_snappy_block_length_cut():
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    with pytest.raises(DecompressionError, match="^xerial snappy block length truncated at byte 16$"):
        decompress("snappy", header + b"\0\0")

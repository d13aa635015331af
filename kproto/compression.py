"""The compression codecs of Kafka record batches, with a cap on decompressed size.

Kafka compresses the records of a batch (magic 2) or the value of a wrapper
message (magic 0 and 1) with one of four codecs, chosen by the low three bits of
the attributes. The codecs themselves come from maintained libraries: zlib (the
standard library) for gzip and cramjam for snappy, lz4 and zstd. This module only
adds what Kafka layers around them:

* **snappy**: Java producers write the *xerial* framing (a 16-byte header, then
  length-prefixed raw snappy blocks); other clients write one raw snappy block.
  Both are read; :func:`compress` writes xerial by default, like Java.
* **lz4**: the LZ4 frame format. Kafka's magic 0 writer computed the frame
  header checksum over the wrong bytes; such frames are recognised and read, and
  :func:`compress` reproduces that checksum for ``magic=0`` so old readers accept it.
* **a decompressed-size cap** (``max_size``, default 256 MiB per batch): the
  size is bounded from the frame structure *before* decompressing where the
  format allows it, and decompression stops at the cap otherwise, so a
  compression bomb raises :class:`~kproto.errors.DecompressedSizeError` instead
  of exhausting memory.

Errors are :class:`~kproto.errors.DecompressionError` (a ``DecodeError``) for data
the codec rejects, and :class:`~kproto.errors.CodecUnavailableError` (not a
``DecodeError``) when the codec's package, cramjam, is not installed, compressing
or decompressing.
"""

from __future__ import annotations

import functools
import mmap
import struct
import zlib
from types import ModuleType

from kproto.errors import CodecUnavailableError, DecompressedSizeError, DecompressionError

_cramjam: ModuleType | None
try:  # cramjam is the `compression` extra; gzip works without it.
    import cramjam as _cramjam
except ImportError:  # pragma: no cover - exercised only where cramjam is missing
    _cramjam = None

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "codec_id",
    "codec_name",
    "compress",
    "decompress",
    "xxh32",
]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_CODEC_IDS = {name: code for code, name in CODEC_NAMES.items()}

#: Default cap on the decompressed size of one batch (or one wrapper message).
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024


def codec_id(codec: int | str | None) -> int:
    """The attribute code of a codec given by code, name (``"zstd"``) or None (no compression)."""
    if codec is None:
        return NONE
    if isinstance(codec, str):
        try:
            return _CODEC_IDS[codec.lower()]
        except KeyError:
            raise ValueError(f"unknown compression {codec!r} (expected one of {sorted(_CODEC_IDS)})") from None
    if isinstance(codec, int) and codec in CODEC_NAMES:
        return int(codec)
    raise ValueError(f"unknown compression {codec!r} (expected 0-4 or one of {sorted(_CODEC_IDS)})")


def codec_name(code: int) -> str:
    """The name of a compression code (``"unknown(7)"`` for codes Kafka does not define)."""
    return CODEC_NAMES.get(code, f"unknown({code})")


def _need_cramjam(name: str) -> ModuleType:
    if _cramjam is None:  # not a DecompressionError: the data is not known to be bad
        raise CodecUnavailableError(name)
    return _cramjam


# ---------------------------------------------------------------- public entry points
def compress(
    codec: int | str, data, *, level: int | None = None, magic: int = 2, snappy_framing: str = "xerial"
) -> bytes:
    """Compress record data the way Kafka's Java producer does.

    ``magic`` only matters for lz4 (magic 0 gets the old header checksum);
    ``snappy_framing`` is ``"xerial"`` (Java's) or ``"raw"``.
    """
    code = codec_id(codec)
    if code == NONE:
        return bytes(data)
    if code == GZIP:
        packer = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)  # 31: gzip wrapper
        return packer.compress(data) + packer.flush()
    cj = _need_cramjam(CODEC_NAMES[code])
    if code == SNAPPY:
        if snappy_framing == "raw":
            return bytes(cj.snappy.compress_raw(bytes(data)))
        if snappy_framing != "xerial":
            raise ValueError("snappy_framing must be 'xerial' or 'raw'")
        return _xerial_compress(cj, memoryview(data).cast("B"))
    if code == LZ4:
        return _lz4_frame_compress(cj, memoryview(data).cast("B"), broken_header_checksum=magic == 0)
    return bytes(cj.zstd.compress(bytes(data), level=3 if level is None else level))


def decompress(codec: int | str, data, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE):
    """Decompress record data; returns a bytes-like object (bytes or a read-only buffer).

    Raises DecompressedSizeError when the output would exceed ``max_size`` bytes
    and DecompressionError when the data is not valid for the codec.
    """
    code = codec_id(codec) if not isinstance(codec, int) or codec in CODEC_NAMES else codec
    if code == NONE:
        return data
    if code == GZIP:
        return _gzip_decompress(data, max_size)
    if code not in CODEC_NAMES:
        raise DecompressionError(f"unknown compression codec {code}")
    cj = _need_cramjam(CODEC_NAMES[code])
    try:
        if code == SNAPPY:
            return _snappy_decompress(cj, data, max_size)
        if code == LZ4:
            return _lz4_decompress(cj, data, max_size)
        return _zstd_decompress(cj, data, max_size)
    except (DecompressionError, DecompressedSizeError):
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, OSError, ValueError ...
        raise DecompressionError(f"{CODEC_NAMES[code]} data is invalid: {exc}") from None


def _too_big(size_text: str, max_size: int):
    return DecompressedSizeError(
        f"decompressed data {size_text} exceeds the cap of {max_size} bytes (max_decompressed_size)"
    )


def _decompress_capped(decompress_into, data, max_size: int) -> bytes:
    # When the structure does not bound the output below the cap, decompress into a
    # cap-sized anonymous mapping: its pages are only allocated as they are written,
    # and the codec refuses to write past its end.
    with mmap.mmap(-1, max(max_size, 1)) as window:
        try:
            written = decompress_into(data, window)
        except Exception as exc:
            if "whole buffer" in str(exc):
                raise _too_big(f"(more than {max_size} bytes)", max_size) from None
            raise
        return window[:written]


# ---------------------------------------------------------------- gzip
# A member is fed in chunks that double from _GZIP_FIRST_CHUNK up to _GZIP_MAX_CHUNK:
# at a member's end zlib copies the unread rest of its input into unused_data, so
# feeding all the rest each time made many small members quadratic. This way the
# copy is at most about the member's own size (or one chunk), and time is linear.
_GZIP_FIRST_CHUNK = 64
_GZIP_MAX_CHUNK = 1024 * 1024


def _gzip_decompress(data, max_size: int) -> bytes:
    view = memoryview(data).cast("B")
    pieces = []
    produced = 0
    pos = 0
    while True:
        unpacker = zlib.decompressobj(47)  # 32 + 15: gzip or zlib header, detected
        chunk = _GZIP_FIRST_CHUNK
        while not unpacker.eof:
            if pos >= len(view):
                raise DecompressionError("gzip data is truncated")
            fed = view[pos : pos + chunk]
            pos += len(fed)
            chunk = min(chunk * 2, _GZIP_MAX_CHUNK)
            try:
                # max_length one past the cap: reaching it means the output is over the cap
                piece = unpacker.decompress(fed, max_size - produced + 1)
            except zlib.error as exc:
                raise DecompressionError(f"gzip data is invalid: {exc}") from None
            produced += len(piece)
            if produced > max_size:
                raise _too_big(f"(more than {max_size} bytes)", max_size)
            if piece:
                pieces.append(piece)
        pos -= len(unpacker.unused_data)
        # Concatenated gzip members are one stream; trailing zero padding is ignored.
        if pos == len(view) or (view[pos] == 0 and not view[pos:].tobytes().strip(b"\x00")):
            break
    if len(pieces) == 1:
        return pieces[0]
    return b"".join(pieces)


# ---------------------------------------------------------------- snappy
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # what Java's SnappyOutputStream uses
_BE_INT32 = struct.Struct(">i")


def _xerial_compress(cj, view: memoryview) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = cj.snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK]))
        out += _BE_INT32.pack(len(block))
        out += block
    return bytes(out)


# A snappy element yields at most 64 bytes from 3 (a copy with a 2-byte offset), so a
# block cannot expand past 64/3 of its size: a larger announced size is a lie, refused
# before an output buffer of that size is allocated (and zero-filled).
_SNAPPY_MAX_EXPANSION = (64, 3)


def _snappy_announced_size(cj, block: bytes, where: int) -> int:
    """The decompressed size a raw snappy block announces in its preamble, checked against its size."""
    size = cj.snappy.decompress_raw_len(block)
    most = len(block) * _SNAPPY_MAX_EXPANSION[0] // _SNAPPY_MAX_EXPANSION[1]
    if size > most:
        raise DecompressionError(
            f"snappy block at byte {where} announces {size} bytes, more than its {len(block)} bytes can hold"
        )
    return size


def _int32_at(view, pos: int, form: struct.Struct, truncated: str) -> int:
    """The 4-byte integer at ``pos`` of a framed stream (snappy's xerial blocks, lz4's
    frames); DecompressionError(truncated) when fewer bytes are left."""
    if len(view) - pos < 4:
        raise DecompressionError(truncated)
    return form.unpack_from(view, pos)[0]


def _snappy_decompress(cj, data, max_size: int):
    view = memoryview(data).cast("B")
    if bytes(view[:8]) != _XERIAL_MAGIC:
        block = bytes(view)
        size = _snappy_announced_size(cj, block, 0)
        if size > max_size:
            raise _too_big(f"of {size} bytes", max_size)
        return cj.snappy.decompress_raw(block)
    if len(view) < 16:
        raise DecompressionError("xerial snappy header is truncated")
    blocks = []
    total = 0
    pos = 16
    while pos < len(view):
        length = _int32_at(view, pos, _BE_INT32, f"xerial snappy block length truncated at byte {pos}")
        pos += 4
        if length < 0 or length > len(view) - pos:
            raise DecompressionError(f"xerial snappy block of {length} bytes overruns the data at byte {pos}")
        block = bytes(view[pos : pos + length])
        pos += length
        total += _snappy_announced_size(cj, block, pos - length)
        if total > max_size:
            raise _too_big(f"of at least {total} bytes", max_size)
        blocks.append(block)
    out = bytearray(total)
    written = 0
    for block in blocks:
        written += cj.snappy.decompress_raw_into(block, memoryview(out)[written:])
    if written != total:
        raise DecompressionError("xerial snappy blocks decompress to fewer bytes than announced")
    return out


# ---------------------------------------------------------------- lz4
_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_LE_UINT32 = struct.Struct("<I")
_SKIPPABLE_MAGICS = range(0x184D2A50, 0x184D2A60)  # lz4's and zstd's alike


def _next_frame(view, pos: int, frame_magic: int, a_codec: str, *, skippable_at: bool) -> int:
    """Where the next frame of lz4 or zstd (``a_codec``: "an lz4", "a zstd") starts at or
    after ``pos``, skippable frames (their magic, a 4-byte length, that many bytes) passed
    over; ``len(view)`` at the end. ``skippable_at``: the truncated-skippable-frame error
    names its byte (lz4's wording)."""
    codec = a_codec.split()[1]
    while pos < len(view):
        magic = _int32_at(view, pos, _LE_UINT32, f"{codec} frame magic truncated at byte {pos}")
        if magic not in _SKIPPABLE_MAGICS:
            if magic != frame_magic:
                raise DecompressionError(f"not {a_codec} frame (magic {magic:#010x}) at byte {pos}")
            return pos
        if len(view) - pos < 8:
            raise DecompressionError(f"{codec} skippable frame truncated" + (f" at byte {pos}" if skippable_at else ""))
        pos += 8 + _LE_UINT32.unpack_from(view, pos + 4)[0]
    return pos


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of a short input: the checksum of an LZ4 frame header (not used on bulk data)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & mask

    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while pos + 16 <= n:
            for lane in range(4):
                word = _LE_UINT32.unpack_from(data, pos)[0]
                v[lane] = (rotl((v[lane] + word * p2) & mask, 13) * p1) & mask
                pos += 4
        acc = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        acc = (seed + p5) & mask
    acc = (acc + n) & mask
    while pos + 4 <= n:
        acc = (rotl((acc + _LE_UINT32.unpack_from(data, pos)[0] * p3) & mask, 17) * p4) & mask
        pos += 4
    while pos < n:
        acc = (rotl((acc + data[pos] * p5) & mask, 11) * p1) & mask
        pos += 1
    acc ^= acc >> 15
    acc = (acc * p2) & mask
    acc ^= acc >> 13
    acc = (acc * p3) & mask
    acc ^= acc >> 16
    return acc


# Remembered: xxh32 here is pure Python (several µs a call) and a stream of tiny frames
# repeats the same few descriptors, so hashing each made 1 MiB of frames take seconds.
@functools.lru_cache(maxsize=256)
def _lz4_header_checksum(descriptor: bytes) -> int:
    return (xxh32(descriptor) >> 8) & 0xFF


def _lz4_frame_compress(cj, view: memoryview, broken_header_checksum: bool) -> bytes:
    # The frame Java's KafkaLZ4BlockOutputStream writes: independent 64 KiB blocks,
    # no block or content checksums. Blocks are compressed by the lz4 library; a block
    # that does not shrink is stored as is (high bit of its length set).
    flg, bd = 0x60, 0x40
    descriptor = struct.pack("<IBB", _LZ4_MAGIC, flg, bd)
    # Kafka's magic 0 writer hashed the magic number with the descriptor.
    checksum = _lz4_header_checksum(descriptor if broken_header_checksum else descriptor[4:])
    out = bytearray(descriptor)
    out.append(checksum)
    block_size = _LZ4_BLOCK_SIZES[4]
    for start in range(0, len(view), block_size):
        chunk = bytes(view[start : start + block_size])
        packed = cj.lz4.compress_block(chunk, store_size=False)
        if len(packed) >= len(chunk):
            out += _LE_UINT32.pack(len(chunk) | 0x80000000)
            out += chunk
        else:
            out += _LE_UINT32.pack(len(packed))
            out += packed
    out += b"\x00\x00\x00\x00"  # end mark
    return bytes(out)


def _lz4_decompress(cj, data, max_size: int):
    view = memoryview(data).cast("B")
    # The frames as the library gets them: corrected headers patched in, skippable frames
    # left out. They go to it in one call: one call a frame cost microseconds each, so a
    # stream of tiny frames took about a microsecond a byte.
    stream: list[bytes | memoryview] = []
    bound = 0
    pos = _next_frame(view, 0, _LZ4_MAGIC, "an lz4", skippable_at=True)
    while pos < len(view):
        start = pos
        if len(view) - pos < 7:
            raise DecompressionError("lz4 frame header truncated")
        flg, bd = view[pos + 4], view[pos + 5]
        if flg >> 6 != 1:
            raise DecompressionError(f"lz4 frame version {flg >> 6} is not supported")
        block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 7)
        if block_max is None:
            raise DecompressionError(f"lz4 frame block size code {(bd >> 4) & 7} is invalid")
        header_end = pos + 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        if len(view) < header_end + 1:
            raise DecompressionError("lz4 frame header truncated")
        stored = view[header_end]
        patched = None
        if stored != _lz4_header_checksum(bytes(view[pos + 4 : header_end])):
            if stored != _lz4_header_checksum(bytes(view[pos:header_end])):
                raise DecompressionError("lz4 frame header checksum is wrong")
            # Kafka's old (magic 0) writer: accept, and give the library a correct header.
            patched = bytes(view[pos:header_end]) + bytes([_lz4_header_checksum(bytes(view[pos + 4 : header_end]))])
        pos = header_end + 1
        block_checksum = 4 if flg & 0x10 else 0
        while True:
            word = _int32_at(view, pos, _LE_UINT32, "lz4 frame truncated before its end mark")
            pos += 4
            if word == 0:
                break
            length = word & 0x7FFFFFFF
            if length > block_max or length > len(view) - pos:
                raise DecompressionError(f"lz4 block of {length} bytes is invalid at byte {pos - 4}")
            bound += length if word & 0x80000000 else block_max
            pos += length + block_checksum
        pos += 4 if flg & 0x04 else 0
        if pos > len(view):
            raise DecompressionError("lz4 frame truncated in its content checksum")
        if patched is not None:
            stream.append(patched)
            stream.append(view[header_end + 1 : pos])
        else:
            stream.append(view[start:pos])
        pos = _next_frame(view, pos, _LZ4_MAGIC, "an lz4", skippable_at=True)
    if not stream:
        return b""
    frames = b"".join(stream)
    if bound <= max_size:
        out = cj.lz4.decompress(frames)
    else:
        out = _decompress_capped(cj.lz4.decompress_into, frames, max_size)
    produced = len(memoryview(out))
    if produced > max_size:
        raise _too_big(f"of {produced} bytes", max_size)
    return out


# ---------------------------------------------------------------- zstd
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024


def _zstd_bound(view: memoryview) -> int:
    """An upper bound of the decompressed size, from the frame and block headers."""
    bound = 0
    pos = _next_frame(view, 0, _ZSTD_MAGIC, "a zstd", skippable_at=False)
    while pos < len(view):
        if len(view) - pos < 5:
            raise DecompressionError("zstd frame header truncated")
        descriptor = view[pos + 4]
        fcs_flag = descriptor >> 6
        single_segment = descriptor & 0x20
        checksum = descriptor & 0x04
        dict_size = (0, 1, 2, 4)[descriptor & 0x03]
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        pos += 5 + (0 if single_segment else 1) + dict_size + fcs_size
        while True:
            if len(view) - pos < 3:
                raise DecompressionError("zstd block header truncated")
            header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
            pos += 3
            last, kind, size = header & 1, (header >> 1) & 3, header >> 3
            if kind == 0:  # raw
                bound += size
                pos += size
            elif kind == 1:  # RLE: one byte repeated `size` times
                bound += size
                pos += 1
            elif kind == 2:
                bound += _ZSTD_BLOCK_MAX
                pos += size
            else:
                raise DecompressionError("zstd block type 3 is reserved")
            if pos > len(view):
                raise DecompressionError("zstd block overruns the data")
            if last:
                break
        pos += 4 if checksum else 0
        pos = _next_frame(view, pos, _ZSTD_MAGIC, "a zstd", skippable_at=False)
    return bound


def _zstd_decompress(cj, data, max_size: int):
    view = memoryview(data).cast("B")
    bound = _zstd_bound(view)
    if bound <= max_size:
        return cj.zstd.decompress(bytes(view))
    return _decompress_capped(cj.zstd.decompress_into, bytes(view), max_size)

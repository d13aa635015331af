"""Hostile record sets of issue 16, built at any size: the tests use small ones, the
benchmark (benchmarks/bench_hostile_records.py) 1 MiB ones.

Each builder returns a whole record set (bytes a Records can read). The batches are
well formed around the hostile part (valid CRC-32C), so the decoders reach it.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

from kproto import compression
from kproto._py.records import crc32c

ROOT = Path(__file__).resolve().parent.parent
INT64_MAX = (1 << 63) - 1
#: The smallest record: length 6, then attributes, timestamp delta, offset delta,
#: null key, null value and no headers, one byte each.
TINY_RECORD = bytes([12, 0, 0, 0, 1, 1, 0])


def v2_batch(
    payload: bytes,
    record_count: int,
    codec: int = 0,
    *,
    base_offset: int = 0,
    base_timestamp: int = 0,
    last_offset_delta: int = 0,
) -> bytes:
    """A magic 2 batch around ``payload`` (already compressed with ``codec``), CRC filled in."""
    header = bytearray(
        struct.pack(
            ">qiibIhiqqqhii",
            base_offset,
            49 + len(payload),
            -1,
            2,
            0,
            codec,
            last_offset_delta,
            base_timestamp,
            base_timestamp,
            -1,
            -1,
            -1,
            record_count,
        )
    )
    header += payload
    struct.pack_into(">I", header, 17, crc32c(memoryview(header)[21:]))
    return bytes(header)


def tiny_records_zstd(declared: int, held: int | None = None, *, base_offset: int = 0) -> bytes:
    """A zstd batch holding ``held`` 7-byte records and declaring ``declared`` of them."""
    held = declared if held is None else held
    return v2_batch(
        compression.compress("zstd", TINY_RECORD * held), declared, compression.ZSTD, base_offset=base_offset
    )


def one_big_value_zstd(size: int) -> bytes:
    """A valid zstd batch of one record whose value is ``size`` zero bytes (8 KB for 255 MiB)."""
    from kproto._py.records import Record, RecordBatch

    return RecordBatch.encode([Record(value=bytes(size), timestamp=0)], compression="zstd")


def values_zstd(count: int, value_size: int) -> bytes:
    """A zstd batch of ``count`` records, each a ``value_size``-byte zero value and no key."""
    from kproto._py.records import Record, RecordBatch

    return RecordBatch.encode([Record(value=bytes(value_size), timestamp=0)] * count, compression="zstd")


def gzip_empty_members(size: int) -> bytes:
    """A gzip batch of no records whose payload is ``size`` bytes of empty gzip members."""
    member = gzip.compress(b"", mtime=0)
    return v2_batch(member * max(1, size // len(member)), 0, compression.GZIP)


def _lz4_frame(blocks: list[bytes], block_size_code: int = 4) -> bytes:
    flg, bd = 0x60, block_size_code << 4
    descriptor = struct.pack("<IBB", 0x184D2204, flg, bd)
    checksum = (compression.xxh32(descriptor[4:]) >> 8) & 0xFF
    return descriptor + bytes([checksum]) + b"".join(blocks) + b"\x00\x00\x00\x00"


def lz4_one_byte_blocks(size: int) -> bytes:
    """An lz4 batch of tiny records whose frame stores every byte in a block of its own
    (5 bytes a block; 4 MiB blocks declared)."""
    records = max(1, size // (5 * len(TINY_RECORD)))
    data = TINY_RECORD * records
    blocks = [struct.pack("<I", 0x80000001) + data[i : i + 1] for i in range(len(data))]
    return v2_batch(_lz4_frame(blocks, 7), records, compression.LZ4)


def lz4_tiny_frames(size: int, magic0_checksum: bool = False) -> bytes:
    """An lz4 batch of tiny records, each byte in a frame of its own (16 bytes a frame); with
    ``magic0_checksum`` the frame headers carry the checksum Kafka's magic 0 writer computed."""
    records = max(1, size // (16 * len(TINY_RECORD)))
    data = TINY_RECORD * records
    descriptor = struct.pack("<IBB", 0x184D2204, 0x60, 0x40)
    checksum = (compression.xxh32(descriptor if magic0_checksum else descriptor[4:]) >> 8) & 0xFF
    header = descriptor + bytes([checksum])
    frames = b"".join(
        header + struct.pack("<I", 0x80000001) + data[i : i + 1] + b"\x00\x00\x00\x00" for i in range(len(data))
    )
    return v2_batch(frames, records, compression.LZ4)


def lz4_empty_compressed_blocks(size: int) -> bytes:
    """An lz4 batch of no records: ``size`` bytes of compressed blocks that each decode to nothing."""
    empty_block = struct.pack("<I", 1) + b"\x00"  # one token: no literal, no match
    return v2_batch(_lz4_frame([empty_block] * max(1, size // 5), 7), 0, compression.LZ4)


def snappy_xerial_lying_block(claimed: int) -> bytes:
    """A snappy (xerial) batch whose one block announces ``claimed`` bytes in a few bytes of input."""
    preamble = bytearray()
    value = claimed
    while value >= 0x80:
        preamble.append(value & 0x7F | 0x80)
        value >>= 7
    preamble.append(value)
    block = bytes(preamble) + b"\x00abc"  # a 1-byte literal, then junk
    payload = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    return v2_batch(payload, 1, compression.SNAPPY)


def snappy_xerial_tiny_blocks(size: int) -> bytes:
    """A snappy (xerial) batch of tiny records, one record per block."""
    block = compression._cramjam.snappy.compress_raw(TINY_RECORD)
    records = max(1, size // (4 + len(block)))
    payload = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + (struct.pack(">i", len(block)) + block) * records
    return v2_batch(payload, records, compression.SNAPPY)


def overflowing_v2(field: str) -> bytes:
    """A batch whose base timestamp (or base offset) plus a record's delta passes INT64_MAX."""
    # record: length, attributes, timestamp delta 1 (zigzag 2), offset delta 1 (zigzag 2), null key/value
    record = bytes([12, 0, 2, 2, 1, 1, 0])
    if field == "timestamp":
        return v2_batch(record, 1, base_timestamp=INT64_MAX)
    return v2_batch(record, 1, base_offset=INT64_MAX, last_offset_delta=1)


def legacy_message(
    offset: int, value: bytes | None, *, magic: int = 1, attributes: int = 0, bad_crc: bool = False
) -> bytes:
    body = struct.pack(">bbq", magic, attributes, 0) if magic == 1 else struct.pack(">bb", magic, attributes)
    body += struct.pack(">i", -1)  # null key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body) ^ (1 if bad_crc else 0)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def legacy_wrapper_bad_crc_then_zero_length() -> bytes:
    """A gzip magic 1 wrapper: its first inner message has a wrong CRC, its second a zero length."""
    inner = legacy_message(0, b"v", bad_crc=True) + struct.pack(">qi", 1, 0)
    return legacy_message(1, compression.compress("gzip", inner), attributes=compression.GZIP)


def legacy_wrapper_of_messages(count: int) -> bytes:
    """A gzip magic 1 wrapper holding ``count`` small inner messages."""
    inner = b"".join(legacy_message(i, b"v") for i in range(count))
    return legacy_message(count - 1, compression.compress("gzip", inner), attributes=compression.GZIP)

"""The safety limits that keep hostile input from crashing, hanging or exhausting memory.

Every limit has one home module; this one gathers them so they can be read,
documented (docs/hardening.md) and tested in one place. The values here *are*
the ones the decoders use (imported, not copied).

=====================================  ===============  ==========================================  ==========================
limit                                  default          how to change it                            raises
=====================================  ===============  ==========================================  ==========================
struct nesting depth                   64               fixed (a C array size; Kafka's schemas      LimitExceededError
                                                        nest at most :func:`deepest_schema_nesting`)
array / string / bytes / tagged-field  the bytes left   not configurable: a count larger than the   InvalidLengthError
count                                                   bytes that remain is rejected before any
                                                        allocation (each element takes >= 1 byte)
frame size (framing, capture, batch)   100 MiB          ``FrameReader(max_frame_size=)``,           FrameTooLargeError (capture:
                                                        ``iter_frames(.., max_frame_size)``,        not a frame boundary;
                                                        ``read_frame_file(max_frame_size=)``,       kproto.arrow.frames: row status
                                                        ``CaptureReader(max_frame_size=)``,         BAD_LENGTH)
                                                        ``decode_frames(max_frame_size=)``
decompressed size per batch            256 MiB          ``Records(data, max_decompressed_size=)``,  DecompressedSizeError
                                                        ``compression.decompress(max_size=)``
records per batch (or legacy wrapper)  1048576 (2**20)  ``Records(data, max_records_per_batch=)``,  TooManyRecordsError
                                                        ``RecordBatch(..)``, ``LegacyBatch(..)``    (checked before
                                                                                                    decompressing)
records per record set (one Records)   1048576 (2**20)  ``Records(data, max_records_per_set=)``     TooManyRecordsError
                                                        (a batch read on its own: its per-batch     (checked before
                                                        limit)                                      decompressing)
decompressed size per record set       64 MiB           ``Records(data,                             DecompressedSizeError
                                                        max_decompressed_size_per_set=)`` (a batch  (a failed decompression
                                                        read on its own: its per-batch cap)         uses up its allowance)
records per batch, from its bytes      bytes / 7        not configurable: a record takes at least   CorruptRecordError
                                                        7 bytes, so a larger declared count is
                                                        rejected before any record is decoded
capture: out-of-order bytes held       8 MiB per        ``CaptureReader(max_pending_bytes=)``       counted as a gap
                                       direction
capture: connections tracked           65536            ``CaptureReader(max_connections=)``         oldest eighth evicted
capture: ceiling of the byte limits    512 MiB          fixed (Arrow int32 offsets)                 larger values are lowered
pcap / pcapng record                   64 MiB           fixed                                       CorruptCaptureError (the
                                                                                                    rest is unread_bytes)
=====================================  ===============  ==========================================  ==========================
"""

from __future__ import annotations

from kproto.compression import DEFAULT_MAX_DECOMPRESSED_SIZE

__all__ = [
    "MAX_NESTING_DEPTH",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "CAPTURE_MAX_PENDING_BYTES",
    "CAPTURE_MAX_CONNECTIONS",
    "CAPTURE_BYTE_LIMIT_CEILING",
    "CAPTURE_MAX_RECORD_SIZE",
    "DEFAULT_MAX_RECORDS_PER_BATCH",
    "DEFAULT_MAX_RECORDS_PER_SET",
    "DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET",
    "MIN_RECORD_SIZE",
    "deepest_schema_nesting",
    "summary",
]

#: Default cap on one frame's size prefix, for every reader of frames: FrameReader and
#: iter_frames, kproto.arrow.capture (CaptureReader, read_frame_file) and kproto.arrow.frames
#: (decode_frames, pair, partitions, decode_struct_column). 100 MiB is the broker's own
#: default request cap (socket.request.max.bytes). kproto.arrow.frames had 512 MiB, the Arrow
#: int32 ceiling (CAPTURE_BYTE_LIMIT_CEILING): a limit, not a sensible default.
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024

#: Structs nested deeper than this raise LimitExceededError (MAX_PATH_DEPTH in
#: kproto/_c/_buffer.pxd, MAX_DEPTH in kproto/_py/codec.py; the tests check they agree).
MAX_NESTING_DEPTH = 64

#: Default cap on the records of one magic 2 batch (its declared count, checked before
#: the batch is decompressed) or of one legacy compressed wrapper. Each record costs a
#: Python object (about 100 bytes) or a row of Arrow columns, while a compressed batch
#: of 7-byte records can declare tens of millions of them in a few kilobytes.
DEFAULT_MAX_RECORDS_PER_BATCH = 1 << 20

#: Default cap on the records read from one Records (the sum of its batches' declared
#: counts, plus legacy messages as they are read), checked before the batch that would
#: pass it is decompressed. The per-batch limit alone lets a 1 MiB set of 752-byte batches
#: hold 1.46 billion records. C's to_arrow() costs about 200 MiB per 2**20 records (2**21
#: peaked at 530 MiB, over the 512 MiB budget of docs/hardening.md), so the set gets 2**20.
DEFAULT_MAX_RECORDS_PER_SET = 1 << 20

#: Default cap on the bytes decompressed for one Records, all its batches together (it
#: binds before the per-batch cap of 256 MiB). A batch of one 255 MiB value compresses to
#: 8 KB: without it a 1 MiB set made a reader decompress 32 GiB, and one such batch took
#: 624 MiB in C's to_arrow() (payload kept, values copied). With 2**20 records this leaves
#: to_arrow() at about 420 MiB. A batch whose decompression fails is charged all it was
#: allowed, since how much work it caused is not known.
DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET = 64 * 1024 * 1024

#: The smallest magic 2 record: a length varint, then attributes, timestamp delta,
#: offset delta, key length, value length and header count, one byte each.
MIN_RECORD_SIZE = 7

#: Defaults of kproto.arrow.capture.CaptureReader.
CAPTURE_MAX_PENDING_BYTES = 8 * 1024 * 1024
CAPTURE_MAX_CONNECTIONS = 65536
#: max_frame_size, max_pending_bytes and batch_bytes of a capture are capped here.
CAPTURE_BYTE_LIMIT_CEILING = 512 * 1024 * 1024
#: A pcap record or pcapng block larger than this marks the file as corrupt.
CAPTURE_MAX_RECORD_SIZE = 64 * 1024 * 1024


def deepest_schema_nesting() -> int:
    """The deepest struct nesting of any message version kproto knows (a message body is 1)."""
    from kproto import schema

    def depth(plan) -> int:
        children = [op.child for op in plan.fields + plan.tagged if op.child is not None]
        return 1 + max((depth(child) for child in children), default=0)

    deepest = 0
    for name, info in schema.MESSAGES.items():
        if info["type"] not in ("request", "response"):
            continue
        lo, hi = info["valid_versions"]
        for version in range(lo, hi + 1):
            deepest = max(deepest, depth(schema.plan(name, version)))
    return deepest


def summary() -> dict[str, int]:
    """The limits and their defaults, by name."""
    return {
        "max_nesting_depth": MAX_NESTING_DEPTH,
        "max_frame_size": DEFAULT_MAX_FRAME_SIZE,
        "max_decompressed_size": DEFAULT_MAX_DECOMPRESSED_SIZE,
        "capture_max_pending_bytes": CAPTURE_MAX_PENDING_BYTES,
        "capture_max_connections": CAPTURE_MAX_CONNECTIONS,
        "capture_byte_limit_ceiling": CAPTURE_BYTE_LIMIT_CEILING,
        "capture_max_record_size": CAPTURE_MAX_RECORD_SIZE,
        "max_records_per_batch": DEFAULT_MAX_RECORDS_PER_BATCH,
        "max_records_per_set": DEFAULT_MAX_RECORDS_PER_SET,
        "max_decompressed_size_per_set": DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET,
    }

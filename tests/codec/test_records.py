"""Record batches (magic 2) and legacy message sets (magic 0/1), in both implementations.

Peers: kafka-python and aiokafka write batches that must decode here, and
batches written here must decode there.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto import compression
from kproto.errors import (
    CorruptRecordError,
    CrcMismatchError,
    DecodeError,
    DecompressedSizeError,
    DecompressionError,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]


def sample_records(R, count=12, base_timestamp=1_700_000_000_000):
    """Records that exercise null keys/values, empty values, duplicate and null header values."""
    out = []
    for i in range(count):
        headers = ()
        if i % 3 == 1:
            headers = (("trace", b"a"), ("trace", b"b"), ("empty", None))
        out.append(
            R.Record(
                key=None if i % 4 == 0 else f"key-{i}".encode(),
                value=None if i == 5 else (b"" if i == 6 else bytes([i]) * (i * 7)),
                headers=headers,
                timestamp=base_timestamp + i * 3,
            )
        )
    return out


def fields(records):
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records]


# ---------------------------------------------------------------- checksums
def test_crc32c_known_values(impl):
    R = impl.load("records")
    assert R.crc32c(b"123456789") == 0xE3069283
    assert R.crc32c(b"") == 0
    assert R.crc32c(b"6789", R.crc32c(b"12345")) == 0xE3069283  # continuation


def test_crc32c_long_inputs_agree_with_the_table_version():
    from kproto import _impl
    from kproto._py.records_base import _crc32c_pure

    data = bytes((i * 131 + 7) % 256 for i in range(20_011))
    expected = _crc32c_pure(data)
    if "c" in _impl.available():
        C = _impl.load("records", "c")
        # hardware path (3-way split above 4 KiB), the portable path, and unaligned starts
        assert C.crc32c(data) == expected
        assert C._crc32c_portable(data) == expected
        for cut in (1, 3, 4097, 9999):
            assert C.crc32c(data[cut:]) == _crc32c_pure(data[cut:])
            assert C.crc32c(data[cut:], C.crc32c(data[:cut])) == expected


def test_crc32c_folding_path_at_every_boundary():
    """The carry-less-multiplication path (1 KiB and up, where the CPU has VPCLMULQDQ) against
    the table version: lengths around its 256-byte steps and 16-byte tail, unaligned, continued."""
    import random

    from kproto import _impl

    if "c" not in _impl.available():
        pytest.skip("extension not built")
    C = _impl.load("records", "c")
    rng = random.Random(7)
    data = rng.randbytes(70_000)
    lengths = [1023, 1024, 1025, 1279, 1280, 1281, 1295, 1296, 1297, 4096, 65_536, 69_000]
    lengths += [rng.randrange(1024, 69_000) for _ in range(40)]
    for n in lengths:
        start = rng.randrange(0, 64)
        chunk = data[start : start + n]
        init = rng.getrandbits(32)
        assert C.crc32c(chunk) == C._crc32c_portable(chunk), n
        assert C.crc32c(chunk, init) == C._crc32c_portable(chunk, init), n


# ---------------------------------------------------------------- magic 2
@pytest.mark.parametrize("codec", CODECS)
def test_v2_round_trip_is_byte_exact(impl, codec):
    R = impl.load("records")
    records = sample_records(R)
    data = R.RecordBatch.encode(
        records,
        base_offset=1000,
        compression=codec,
        producer_id=77,
        producer_epoch=3,
        base_sequence=11,
        partition_leader_epoch=5,
        is_transactional=True,
    )
    batch = R.RecordBatch(data)
    assert batch.base_offset == 1000 and batch.record_count == 12 and batch.compression_name == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 11)
    assert batch.partition_leader_epoch == 5 and batch.is_transactional and not batch.is_control
    assert batch.last_offset == 1011 and batch.crc_valid
    assert batch.base_timestamp == 1_700_000_000_000 and batch.max_timestamp == 1_700_000_000_033
    decoded = batch.records()
    assert fields(decoded) == [(1000 + i, r.timestamp, r.key, r.value, tuple(r.headers)) for i, r in enumerate(records)]
    assert decoded[1].headers == (("trace", b"a"), ("trace", b"b"), ("empty", None))
    assert R.RecordBatch.encode(decoded, **batch.header_fields()) == data


def test_v2_log_append_time_keeps_record_deltas(impl):
    R = impl.load("records")
    data = R.RecordBatch.encode(sample_records(R, 4), timestamp_type=1, max_timestamp=1_800_000_000_000)
    batch = R.RecordBatch(data)
    assert batch.timestamp_type == 1
    records = batch.records()
    assert {r.timestamp for r in records} == {1_800_000_000_000}
    assert [r.timestamp_delta for r in records] == [0, 3, 6, 9]
    assert R.RecordBatch.encode(records, **batch.header_fields()) == data


def test_v2_accepts_tuples_and_assigns_offsets(impl):
    R = impl.load("records")
    data = R.RecordBatch.encode([(b"k", b"v"), (None, b"w", [("h", b"x")], 5)], base_offset=9, base_timestamp=1)
    records = R.RecordBatch(data).records()
    assert fields(records) == [(9, 1, b"k", b"v", ()), (10, 5, None, b"w", (("h", b"x"),))]


def test_control_batches(impl):
    R = impl.load("records")
    for kind, code in (("commit", R.CONTROL_COMMIT), ("abort", R.CONTROL_ABORT)):
        data = R.encode_control_batch(
            kind, producer_id=4, producer_epoch=2, base_offset=50, timestamp=123, coordinator_epoch=9
        )
        batch = next(iter(R.Records(data)))
        assert batch.is_control and batch.is_transactional
        marker = batch.control_record()
        assert (marker.kind, marker.type, marker.coordinator_epoch, marker.offset) == (kind, code, 9, 50)
    plain = R.RecordBatch(R.RecordBatch.encode([(b"k", b"v")]))
    assert plain.control_record() is None


# ---------------------------------------------------------------- legacy
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_legacy_round_trip_is_byte_exact(impl, magic, codec):
    R = impl.load("records")
    records = [
        R.Record(
            key=None if i == 0 else b"k%d" % i, value=None if i == 2 else b"v" * i, timestamp=1_700_000_000_000 + i
        )
        for i in range(6)
    ]
    data = R.LegacyBatch.encode(records, magic=magic, base_offset=300, compression=codec)
    batches = list(R.Records(data))
    assert all(b.magic == magic for b in batches)
    assert len(batches) == (6 if codec == "none" else 1)
    decoded = [r for b in batches for r in b]
    assert [r.offset for r in decoded] == list(range(300, 306))
    assert [(r.key, r.value) for r in decoded] == [(r.key, r.value) for r in records]
    assert [r.timestamp for r in decoded] == ([r.timestamp for r in records] if magic else [None] * 6)
    if codec == "none":
        again = b"".join(R.LegacyBatch.encode(b.records(), **b.header_fields()) for b in batches)
    else:
        assert batches[0].is_wrapper and batches[0].offset == 305 and batches[0].base_offset == 300
        again = R.LegacyBatch.encode(decoded, **batches[0].header_fields())
    assert again == data


def test_magic0_lz4_uses_the_old_kafka_header_checksum():
    descriptor = compression.compress("lz4", b"abc" * 100, magic=0)[:6]
    stored = compression.compress("lz4", b"abc" * 100, magic=0)[6]
    assert stored == (compression.xxh32(descriptor) >> 8) & 0xFF  # hashed with the magic number
    fixed = compression.compress("lz4", b"abc" * 100, magic=1)[6]
    assert fixed == (compression.xxh32(descriptor[4:]) >> 8) & 0xFF
    assert compression.xxh32(b"") == 0x02CC5D05 and compression.xxh32(b"abc") == 0x32D153FF


def test_legacy_wrapper_log_append_time(impl):
    R = impl.load("records")
    records = [R.Record(value=b"x", timestamp=5), R.Record(value=b"y", timestamp=6)]
    data = R.LegacyBatch.encode(records, magic=1, compression="gzip", timestamp_type=1, timestamp=99)
    assert [r.timestamp for r in R.Records(data).records()] == [99, 99]


# ---------------------------------------------------------------- peers
kafka_default = pytest.importorskip("kafka.record.default_records")
kafka_legacy = pytest.importorskip("kafka.record.legacy_records")
aio_default = pytest.importorskip("aiokafka.record.default_records")
aio_legacy = pytest.importorskip("aiokafka.record.legacy_records")


def _peer_v2(builder_cls, codec_id):
    builder = builder_cls(
        magic=2,
        compression_type=codec_id,
        is_transactional=0,
        producer_id=8,
        producer_epoch=1,
        base_sequence=4,
        batch_size=1 << 30,
    )
    for i in range(20):
        builder.append(
            i,
            timestamp=1_700_000_000_000 + i,
            key=None if i % 5 == 0 else b"k%d" % i,
            value=None if i == 7 else b"value-%d" % i * 5,
            headers=[("h", b"1"), ("h", None)] if i % 2 else [],
        )
    return bytes(builder.build())


@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec_id", [0, 1, 2, 3, 4])
def test_v2_batches_from_peers_decode_here(impl, peer, codec_id):
    R = impl.load("records")
    builder_cls = (
        kafka_default.DefaultRecordBatchBuilder if peer == "kafka-python" else aio_default.DefaultRecordBatchBuilder
    )
    data = _peer_v2(builder_cls, codec_id)
    batch = R.RecordBatch(data)
    records = batch.records()
    assert batch.compression == codec_id and batch.producer_id == 8 and batch.base_sequence == 4
    assert [r.key for r in records] == [None if i % 5 == 0 else b"k%d" % i for i in range(20)]
    assert records[7].value is None and records[3].headers == (("h", b"1"), ("h", None))
    if codec_id == 0:
        assert R.RecordBatch.encode(records, **batch.header_fields()) == data


@pytest.mark.parametrize("codec", CODECS)
def test_v2_batches_from_here_decode_in_peers(impl, codec):
    R = impl.load("records")
    records = sample_records(R)
    data = R.RecordBatch.encode(records, base_offset=40, compression=codec)
    for batch_cls in (kafka_default.DefaultRecordBatch, aio_default.DefaultRecordBatch):
        batch = batch_cls(data)
        assert batch.validate_crc()
        got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]
        assert got == [
            (40 + i, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for i, r in enumerate(records)
        ]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec_id", [0, 1, 2, 3])
def test_legacy_sets_round_trip_with_kafka_python(impl, magic, codec_id):
    R = impl.load("records")
    builder = kafka_legacy.LegacyRecordBatchBuilder(magic, codec_id, 1 << 30)
    for i in range(5):
        builder.append(i, timestamp=1_700_000_000_000 + i if magic else None, key=b"k%d" % i, value=b"v%d" % i)
    theirs = bytes(builder.build())
    decoded = list(R.Records(theirs).records())
    assert [(r.offset, r.key, r.value) for r in decoded] == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]

    fresh = [R.Record(key=r.key, value=r.value, timestamp=r.timestamp) for r in decoded]  # no offsets
    ours = R.LegacyBatch.encode(fresh, magic=magic, base_offset=10, compression=compression.CODEC_NAMES[codec_id])
    pos = 0
    got = []
    while pos < len(ours):  # kafka-python reads one top-level message at a time
        size = 12 + struct.unpack_from(">i", ours, pos + 8)[0]
        message = kafka_legacy.LegacyRecordBatch(ours[pos : pos + size], magic)
        assert message.validate_crc()
        got += [(r.offset, r.key, r.value) for r in message]
        pos += size
    assert got == [(10 + i, b"k%d" % i, b"v%d" % i) for i in range(5)]


@pytest.mark.parametrize("codec_id", [0, 1, 2, 3])
def test_legacy_sets_from_aiokafka(impl, codec_id):
    R = impl.load("records")
    builder = aio_legacy.LegacyRecordBatchBuilder(1, codec_id, 1 << 30)
    for i in range(4):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"v%d" % i)
    records = list(R.Records(bytes(builder.build())).records())
    assert [(r.offset, r.timestamp, r.value) for r in records] == [
        (i, 1_700_000_000_000 + i, b"v%d" % i) for i in range(4)
    ]


def test_optional_record_fields_set_and_clear(impl):
    """offset, timestamp and timestamp_delta: None until set, then the int, None again once cleared."""
    import pickle

    R = impl.load("records")
    record = R.Record(b"k", b"v")
    assert (record.offset, record.timestamp, record.timestamp_delta) == (None, None, None)
    record.offset, record.timestamp, record.timestamp_delta = 2**63 - 1, -(2**63), 0
    assert (record.offset, record.timestamp, record.timestamp_delta) == (2**63 - 1, -(2**63), 0)
    copy = pickle.loads(pickle.dumps(record))
    assert copy == record and copy.timestamp_delta == 0
    record.timestamp = None
    assert (record.offset, record.timestamp, record.timestamp_delta) == (2**63 - 1, None, 0)
    assert record != copy
    record.offset = record.timestamp_delta = None
    assert (record.offset, record.timestamp, record.timestamp_delta) == (None, None, None)
    assert R.Record(b"k", b"v", (), 7, 8) == R.Record(b"k", b"v", timestamp=7, offset=8)


# ---------------------------------------------------------------- errors
def test_crc_mismatch_names_the_base_offset(impl):
    R = impl.load("records")
    data = bytearray(R.RecordBatch.encode([(b"k", b"value")], base_offset=123_456))
    data[-2] ^= 0xFF  # the value's last byte
    batch = next(iter(R.Records(bytes(data))))  # headers still readable
    assert batch.base_offset == 123_456 and not batch.crc_valid
    with pytest.raises(CrcMismatchError) as info:
        batch.records()
    assert info.value.base_offset == 123_456 and "123456" in str(info.value)
    assert info.value.reason.startswith("record batch CRC-32C mismatch: stored 0x")
    assert isinstance(info.value, DecodeError)
    with pytest.raises(CrcMismatchError) as direct:
        batch.verify_crc()
    assert (direct.value.reason, direct.value.offset) == (info.value.reason, info.value.offset)
    with pytest.raises(CrcMismatchError):
        R.Records(bytes(data)).to_arrow()
    # opting out of the check reads the (mutated) value
    assert R.Records(bytes(data), verify_crc=False).to_arrow().num_rows == 1

    legacy = bytearray(R.LegacyBatch.encode([(b"k", b"v")], magic=1, base_offset=77))
    legacy[-1] ^= 1
    with pytest.raises(CrcMismatchError) as info:
        list(R.Records(bytes(legacy)).records())
    assert info.value.base_offset == 77
    assert info.value.reason.startswith("message CRC-32 mismatch: stored 0x")
    legacy_batch = R.LegacyBatch(bytes(legacy))
    assert not legacy_batch.crc_valid
    with pytest.raises(CrcMismatchError) as direct:
        legacy_batch.verify_crc()
    assert direct.value.base_offset == 77 and direct.value.reason == info.value.reason


def test_truncated_tail_is_reported_not_raised(impl):
    R = impl.load("records")
    first = R.RecordBatch.encode([(b"a", b"1")], base_offset=0)
    second = R.RecordBatch.encode([(b"b", b"2")] * 3, base_offset=1, compression="gzip")
    for cut in (1, 11, 12, 30, len(second) - 1):
        records = R.Records(first + second[:cut])
        batches = list(records)
        assert [b.base_offset for b in batches] == [0]
        assert records.truncated_tail and records.complete_size == len(first)
        assert bytes(records.tail) == second[:cut]
        assert [r.value for r in records.records()] == [b"1"]
    whole = R.Records(first + second)
    assert not whole.truncated_tail and len(list(whole.records())) == 4


def test_decompression_bomb_is_capped(impl):
    R = impl.load("records")
    records = [R.Record(value=bytes(200_000))] * 5
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        data = R.RecordBatch.encode(records, compression=codec, base_offset=31)
        with pytest.raises(DecompressedSizeError) as info:
            R.Records(data, max_decompressed_size=500_000).to_arrow()
        assert info.value.base_offset == 31
        assert len(list(R.Records(data, max_decompressed_size=2_000_000).records())) == 5
    legacy = R.LegacyBatch.encode(records, magic=1, compression="gzip")
    with pytest.raises(DecompressedSizeError):
        list(R.Records(legacy, max_decompressed_size=500_000).records())


def test_garbage_compressed_payload_is_a_decompression_error(impl):
    R = impl.load("records")
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        data = bytearray(R.RecordBatch.encode([(b"k", b"v" * 100)], compression=codec, base_offset=6))
        data[61:] = b"\x01" * (len(data) - 61)
        with pytest.raises(DecompressionError) as info:
            R.RecordBatch(bytes(data), verify_crc=False).records()
        assert info.value.base_offset == 6


def test_corrupt_headers_raise_corrupt_record_error(impl):
    R = impl.load("records")
    data = bytearray(R.RecordBatch.encode([(b"k", b"v")]))
    data[16] = 7  # magic
    with pytest.raises(CorruptRecordError):
        list(R.Records(bytes(data)))
    data[16] = 2
    struct.pack_into(">i", data, 8, 3)  # length below a batch header
    with pytest.raises(CorruptRecordError):
        list(R.Records(bytes(data)))


@pytest.fixture(scope="module")
def mixed_buffer():
    from kproto._py import records as P

    parts = [
        P.RecordBatch.encode(sample_records(P, 5), base_offset=0),
        P.RecordBatch.encode(sample_records(P, 4), base_offset=5, compression="lz4"),
        P.LegacyBatch.encode([(b"k", b"v"), (None, b"w")], magic=1, compression="gzip", base_offset=9),
        P.LegacyBatch.encode([(b"k", b"v")], magic=0, base_offset=11),
        P.encode_control_batch("commit", producer_id=1, producer_epoch=0, base_offset=12),
    ]
    return b"".join(parts)


def _consume(R, data):
    records = R.Records(data, verify_crc=False, max_decompressed_size=1 << 20)
    out = []
    for batch in records:
        out.append(fields(batch.records()))
        batch.control_record()
    records.to_arrow()
    return out, records.truncated_tail


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutated_buffers_never_crash(impl, mixed_buffer, data):
    R = impl.load("records")
    buf = bytearray(mixed_buffer)
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    try:
        _consume(R, bytes(buf[:cut]))
    except DecodeError:
        pass


def test_both_implementations_agree_on_mutations(mixed_buffer):
    from kproto import _impl

    if "c" not in _impl.available():
        pytest.skip("extension not built")
    C, P = _impl.load("records", "c"), _impl.load("records", "py")
    for position in range(0, len(mixed_buffer), 3):
        buf = bytearray(mixed_buffer)
        buf[position] ^= 0x5A
        outcome = []
        for R in (C, P):
            try:
                outcome.append(_consume(R, bytes(buf)))
            except DecodeError as exc:
                outcome.append(type(exc))
        assert outcome[0] == outcome[1], position


# ---------------------------------------------------------------- Records container and columns
def test_records_wraps_without_parsing_or_copying(impl):
    R = impl.load("records")
    garbage = bytearray(b"\xff" * 40)
    records = R.Records(garbage)  # O(1): nothing read yet
    assert len(records) == 40 and records == bytes(garbage) and bytes(records) == bytes(garbage)
    garbage[0] = 0
    assert bytes(records)[0] == 0  # a view, not a copy
    assert records.raw.readonly and bytes(records.raw) == bytes(garbage)
    assert R.Records(records) == records and R.Records(b"") == b"" and not R.Records(b"")
    with pytest.raises(CorruptRecordError):
        list(records)
    if impl.name == "c":
        assert memoryview(records).nbytes == 40  # the buffer protocol


def test_to_arrow_matches_record_objects(impl, mixed_buffer):
    R = impl.load("records")
    records = R.Records(mixed_buffer)
    table = records.to_arrow()
    objects = list(records.records())
    assert table.num_rows == len(objects)
    assert table.column("offset").to_pylist() == [r.offset for r in objects]
    assert table.column("timestamp").to_pylist() == [r.timestamp for r in objects]
    assert table.column("key").to_pylist() == [r.key for r in objects]
    assert table.column("value").to_pylist() == [r.value for r in objects]
    assert table.column("header_count").to_pylist() == [len(r.headers) for r in objects]
    assert table.column("headers").to_pylist() == [[{"key": k, "value": v} for k, v in r.headers] for r in objects]
    assert table.column("magic").to_pylist() == [2] * 9 + [1, 1, 0, 2]
    assert table.column("is_control").to_pylist()[-1] is True
    assert table.schema.equals(R.record_schema(True))
    arrays = records.to_numpy()
    assert arrays["offset"].tolist() == [r.offset for r in objects]
    assert arrays["timestamp"][11] == -1 and arrays["key_length"].tolist()[0] == -1
    heads = records.batch_table()
    assert heads.column("base_offset").to_pylist() == [0, 5, None, 11, 12]
    assert heads.column("record_count").to_pylist() == [5, 4, None, None, 1]


def test_columns_past_the_first_span_allocations(impl):
    """Record and header spans grow past their first 256 records and 64 headers (C) and
    every record and header still lands in its own row."""
    R = impl.load("records")
    records = [R.Record(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i), ("g", None)]) for i in range(700)]
    data = R.RecordBatch.encode(records[:300], base_offset=0) + R.RecordBatch.encode(records[300:], base_offset=300)
    table = R.Records(data).to_arrow()
    assert table.column("offset").to_pylist() == list(range(700))
    assert table.column("value").to_pylist() == [r.value for r in records]
    assert table.column("headers").to_pylist() == [
        [{"key": "h", "value": b"%d" % i}, {"key": "g", "value": None}] for i in range(700)
    ]


def test_implementations_build_identical_tables(mixed_buffer):
    from kproto import _impl

    if "c" not in _impl.available():
        pytest.skip("extension not built")
    tables = [_impl.load("records", name).Records(mixed_buffer).to_arrow() for name in ("c", "py")]
    assert tables[0].equals(tables[1])


def test_header_key_must_be_utf8(impl):
    R = impl.load("records")
    data = R.RecordBatch.encode([R.Record(value=b"v", headers=[(b"\xff\xfe", b"x")])])
    with pytest.raises(CorruptRecordError):
        R.RecordBatch(data).records()
    with pytest.raises(CorruptRecordError):
        R.Records(data).to_arrow()


def test_compression_module_errors():
    with pytest.raises(ValueError):
        compression.codec_id("brotli")
    with pytest.raises(DecompressionError):
        compression.decompress("gzip", b"not gzip")
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = gz.compress(bytes(10_000_000)) + gz.flush()
    with pytest.raises(DecompressedSizeError):
        compression.decompress("gzip", bomb, max_size=1_000_000)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_zero_copy_columns_match_copied_ones(impl, compression):
    import pyarrow as pa

    records_mod = impl.load("records")
    values = [None, b"", b"short", b"exactly12byt", b"thirteen byte", b"v" * 5000]
    data = records_mod.RecordBatch.encode(
        [records_mod.Record(key=None if i % 2 else b"key-%d" % i * 3, value=v) for i, v in enumerate(values)],
        base_offset=7,
        compression=compression,
    )
    data += records_mod.RecordBatch.encode(
        [records_mod.Record(key=b"k" * 40, value=b"second batch value")], base_offset=100
    )
    copied = records_mod.Records(data).to_arrow(batch_columns=False)
    viewed = records_mod.Records(data).to_arrow(batch_columns=False, zero_copy=True)
    assert viewed.schema.field("value").type == pa.binary_view()
    assert viewed.column("value").to_pylist() == copied.column("value").to_pylist()
    assert viewed.column("key").to_pylist() == copied.column("key").to_pylist()
    assert viewed.column("offset").to_pylist() == copied.column("offset").to_pylist()
    viewed.validate(full=True)


@pytest.mark.parametrize("magic", [0, 1])
def test_zero_copy_columns_of_legacy_message_sets(impl, magic):
    """Legacy messages are decoded to objects first: their columns are copied, and still binary_view."""
    import pyarrow as pa

    records_mod = impl.load("records")
    legacy = records_mod.LegacyBatch.encode(
        [records_mod.Record(key=b"k%d" % i, value=b"legacy value %d" % i) for i in range(3)], magic=magic
    )
    v2 = records_mod.RecordBatch.encode([records_mod.Record(value=b"a v2 value after them")], base_offset=3)
    for data in (legacy, legacy + v2):
        copied = records_mod.Records(data).to_arrow(batch_columns=False)
        viewed = records_mod.Records(data).to_arrow(batch_columns=False, zero_copy=True)
        assert viewed.schema.field("key").type == viewed.schema.field("value").type == pa.binary_view()
        assert viewed.column("value").to_pylist() == copied.column("value").to_pylist()
        assert viewed.column("key").to_pylist() == copied.column("key").to_pylist()
        viewed.validate(full=True)


# ---------------------------------------------------------------- int64 arithmetic and error parity
INT64_MIN = -(1 << 63)


@pytest.mark.parametrize("field", ["timestamp", "offset"])
def test_int64_sums_wrap_like_java(impl, field):
    from tests import hostile_records as hostile

    R = impl.load("records")
    data = hostile.overflowing_v2(field)
    [record] = R.RecordBatch(data).records()
    table = R.Records(data).to_arrow()
    if field == "timestamp":  # INT64_MAX + 1 wraps to INT64_MIN, as Java's long does
        assert record.timestamp == INT64_MIN and table.column("timestamp").to_pylist() == [INT64_MIN]
    else:
        assert record.offset == INT64_MIN and table.column("offset").to_pylist() == [INT64_MIN]
        batch = R.RecordBatch(data)
        assert batch.last_offset == INT64_MIN and batch.next_offset == INT64_MIN + 1


def test_legacy_next_offset_and_wrapper_shift_wrap_like_java(impl):
    from tests import hostile_records as hostile

    R = impl.load("records")
    top = hostile.legacy_message(hostile.INT64_MAX, b"v")
    assert R.LegacyBatch(top).next_offset == INT64_MIN
    # the wrapper puts its last record at INT64_MAX, the inner one at 1: offsets shift by INT64_MAX - 1,
    # and the inner 5 passes INT64_MAX
    inner = hostile.legacy_message(5, b"a") + hostile.legacy_message(1, b"b")
    wrapper = hostile.legacy_message(
        hostile.INT64_MAX, compression.compress("gzip", inner), attributes=compression.GZIP
    )
    assert [r.offset for r in R.LegacyBatch(wrapper).records()] == [INT64_MIN + 3, hostile.INT64_MAX]
    assert R.Records(wrapper).to_arrow().column("offset").to_pylist() == [INT64_MIN + 3, hostile.INT64_MAX]


def error_of(function):
    try:
        function()
    except DecodeError as exc:
        return (type(exc).__name__, exc.reason, exc.offset, exc.path)
    raise AssertionError("no DecodeError")


def test_a_wrapper_reports_its_first_bad_inner_message_first(impl):
    from tests import hostile_records as hostile

    R = impl.load("records")
    data = hostile.legacy_wrapper_bad_crc_then_zero_length()
    expected = (
        "CrcMismatchError",
        "message CRC-32 mismatch: stored 0xb461472f, computed 0xb461472e [batch base offset 0]",
        0,
        None,
    )
    assert error_of(lambda: R.LegacyBatch(data).records()) == expected
    assert error_of(lambda: R.Records(data).to_arrow()) == expected
    # without CRC checks the zero length is next; every layer reports it the same way
    assert error_of(lambda: R.Records(data, verify_crc=False).to_arrow()) == (
        "CorruptRecordError",
        "inner message is corrupt: batch length 0 is too small [batch base offset 1]",
        0,
        None,
    )

"""The safety limits of kproto.limits (docs/hardening.md): each one holds, in both implementations,
raises the documented error, and can be changed where the documentation says it can."""

from __future__ import annotations

import json
import struct
import tracemalloc

import pytest

from kproto import _impl, compression, framing, limits
from kproto.errors import (
    CorruptRecordError,
    DecodeError,
    DecompressedSizeError,
    DecompressionError,
    EncodeError,
    FrameTooLargeError,
    InvalidLengthError,
    LimitExceededError,
    TooManyRecordsError,
    TruncatedError,
)

MiB = 1024 * 1024


def request_header(api_key: int, version: int, flexible: bool) -> bytes:
    header = struct.pack(">hhih", api_key, version, 1, 1) + b"x"
    return header + (b"\x00" if flexible else b"")


def peak_allocation(function) -> int:
    """Peak bytes allocated through Python's allocators while ``function`` runs."""
    tracemalloc.start()
    try:
        function()
    except DecodeError:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


# ---------------------------------------------------------------- the table itself
def test_the_limits_are_the_ones_the_decoders_use():
    from kproto import records
    from kproto.arrow import capture

    assert limits.DEFAULT_MAX_FRAME_SIZE == framing.DEFAULT_MAX_FRAME_SIZE == 100 * 1024 * 1024
    assert limits.DEFAULT_MAX_DECOMPRESSED_SIZE == records.DEFAULT_MAX_DECOMPRESSED_SIZE
    assert limits.DEFAULT_MAX_DECOMPRESSED_SIZE == compression.DEFAULT_MAX_DECOMPRESSED_SIZE
    assert limits.DEFAULT_MAX_RECORDS_PER_BATCH == records.DEFAULT_MAX_RECORDS_PER_BATCH
    for name in _impl.available():
        reader = _impl.load("records", name).Records(b"")
        assert reader.max_records_per_batch == limits.DEFAULT_MAX_RECORDS_PER_BATCH
        assert reader.max_records_per_set == limits.DEFAULT_MAX_RECORDS_PER_SET
        assert reader.max_decompressed_size_per_set == limits.DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET
    assert limits.MAX_NESTING_DEPTH == _impl.load("codec", "py").MAX_DEPTH
    reader = capture.CaptureReader(b"", implementation="py")
    assert reader._engine.max_pending_bytes == limits.CAPTURE_MAX_PENDING_BYTES
    assert reader._engine.max_connections == limits.CAPTURE_MAX_CONNECTIONS
    huge = capture.CaptureReader(b"", implementation="py", max_pending_bytes=1 << 40)
    assert huge._engine.max_pending_bytes == limits.CAPTURE_BYTE_LIMIT_CEILING
    assert set(limits.summary()) >= {"max_nesting_depth", "max_frame_size", "max_decompressed_size"}


# ---------------------------------------------------------------- nesting depth
def test_no_kafka_message_comes_near_the_depth_limit():
    # the limit guards the decoder; it must never reject a message Kafka can send
    assert 1 < limits.deepest_schema_nesting() < limits.MAX_NESTING_DEPTH // 4


def test_the_depth_limit_raises_limit_exceeded_naming_the_path(monkeypatch):
    from kproto import schema

    codec = _impl.load("codec", "py")
    plan = schema.plan("ProduceRequest", 9)
    topic_plan = next(op.child for op in plan.fields if op.name == "topic_data")
    partition_plan = next(op.child for op in topic_plan.fields if op.name == "partition_data")
    body = plan.cls(
        acks=1,
        timeout_ms=5,
        topic_data=[topic_plan.cls(name="t", partition_data=[partition_plan.cls(index=0, records=None)])],
    )
    data = codec.encode_struct(body, plan)
    assert codec.decode_struct(data, plan) == body
    monkeypatch.setattr(codec, "MAX_DEPTH", 2)  # ProduceRequest > TopicProduceData > PartitionProduceData
    with pytest.raises(LimitExceededError, match="nested deeper than 2") as info:
        codec.decode_struct(data, plan)
    assert info.value.path == "ProduceRequest.topic_data[0].partition_data[0]"


def nested_plans(levels: int):
    """A chain of ``levels`` plans, each a struct holding the next in one struct field
    (non-nullable, so the innermost, with no fields, makes the whole chain zero bytes long),
    and the matching chain of objects. Kafka's schemas never nest this deep."""
    from kproto import schema
    from kproto.messages import ConsumerGroupHeartbeatResponse as Cls

    plans: list[schema.StructPlan] = [schema.StructPlan("Deep", Cls, 0, False, -1)]
    for _ in range(levels - 1):
        outer = schema.StructPlan("Deep", Cls, 0, False, -1)
        outer.fields = (schema.FieldOp("assignment", schema.STRUCT, 0, False, False, plans[-1], -1, None, False, Cls),)
        plans.append(outer)
    obj = Cls()
    for _ in range(levels - 1):
        obj = Cls(assignment=obj)
    return plans[-1], obj


def test_both_codecs_stop_structs_nested_past_the_depth_limit_alike():
    """The decode walk and the encoder enter a struct through one helper in C (and the
    twin's own check): the same error class, path, offset and message in both."""
    errors = {}
    for name in _impl.available():
        codec = _impl.load("codec", name)
        fits, fits_obj = nested_plans(limits.MAX_NESTING_DEPTH)
        assert codec.encode_struct(fits_obj, fits) == b""
        decoded = codec.decode_struct(b"", fits)
        for _ in range(limits.MAX_NESTING_DEPTH - 1):
            decoded = decoded.assignment
        assert type(decoded) is type(fits_obj)
        deep, deep_obj = nested_plans(limits.MAX_NESTING_DEPTH + 1)
        with pytest.raises(LimitExceededError) as decoding:
            codec.decode_struct(b"", deep)
        with pytest.raises(EncodeError) as encoding:
            codec.encode_struct(deep_obj, deep)
        errors[name] = [
            (type(e.value), str(e.value), e.value.path, getattr(e.value, "offset", None)) for e in (decoding, encoding)
        ]
        path = "Deep" + ".assignment" * limits.MAX_NESTING_DEPTH
        assert decoding.value.path == encoding.value.path == path
        assert str(decoding.value) == f"structs nested deeper than 64 (v0, at {path}, byte offset 0)"
        assert str(encoding.value) == f"structs nested deeper than 64 (v0, at {path})"
    assert all(found == next(iter(errors.values())) for found in errors.values()), errors


# ---------------------------------------------------------------- counts against the bytes left
COUNT_CASES = {
    # a request whose next field claims ~2**31 elements or bytes, with none behind it
    "int32 array count": (request_header(3, 0, False) + struct.pack(">i", 0x7FFFFFFF), InvalidLengthError),
    "compact array count": (request_header(3, 9, True) + bytes([0xF0, 0xFF, 0xFF, 0xFF, 0x07]), InvalidLengthError),
    "negative array count": (request_header(3, 1, False) + struct.pack(">i", -5), InvalidLengthError),
    "tagged field count": (request_header(3, 9, False) + bytes([0xF0, 0xFF, 0xFF, 0xFF, 0x07]), InvalidLengthError),
    "string length": (struct.pack(">hhih", 3, 0, 1, 0x7FFF) + b"ab", TruncatedError),
    "bytes length": (
        request_header(0, 3, False)
        + struct.pack(">hhi", -1, 1, 1000)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", 1)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0x7FFFFFFF),
        TruncatedError,
    ),
}


@pytest.mark.parametrize("case", sorted(COUNT_CASES))
def test_counts_larger_than_the_bytes_left_fail_before_allocating(impl, case):
    data, error = COUNT_CASES[case]
    codec = impl.load("codec")
    with pytest.raises(error):
        codec.decode_request(data)
    assert peak_allocation(lambda: codec.decode_request(data)) < MiB


def test_record_counts_larger_than_the_batch_fail_before_allocating(impl):
    records = impl.load("records")
    batch = bytearray(records.encode_records([(b"k", b"v")], magic=2))
    struct.pack_into(">i", batch, 57, 0x7FFFFFFF)  # the record count
    data = bytes(batch)
    reader = records.Records(data, verify_crc=False)
    with pytest.raises(DecodeError):
        [list(b) for b in reader]
    assert peak_allocation(lambda: [list(b) for b in records.Records(data, verify_crc=False)]) < MiB


# ---------------------------------------------------------------- frame size
def test_frame_reader_refuses_a_frame_above_its_limit_before_buffering_it():
    reader = framing.FrameReader(max_frame_size=1000)
    assert reader.feed(struct.pack(">i", 1000) + b"a" * 1000) == [b"a" * 1000]
    with pytest.raises(FrameTooLargeError) as info:
        reader.feed(struct.pack(">i", 1001))
    assert info.value.offset == 1004
    with pytest.raises(FrameTooLargeError):
        framing.FrameReader().feed(struct.pack(">i", limits.DEFAULT_MAX_FRAME_SIZE + 1))
    with pytest.raises(InvalidLengthError):
        framing.FrameReader().feed(struct.pack(">i", -1))


def test_iter_frames_and_frame_files_take_the_limit_too():
    from kproto.arrow.capture import read_frame_file

    data = struct.pack(">i", 5) + b"hello" + struct.pack(">i", 50) + b"x" * 50
    assert [bytes(f) for f in framing.iter_frames(data, max_frame_size=50)] == [b"hello", b"x" * 50]
    with pytest.raises(FrameTooLargeError):
        list(framing.iter_frames(data, max_frame_size=49))
    with pytest.raises(FrameTooLargeError):
        list(read_frame_file(data, max_frame_size=49))


def test_a_capture_does_not_take_a_size_above_its_limit_as_a_frame(impl):
    from kproto.arrow.capture import read_capture
    from tests.pcapwriter import Conversation, pcap_of, request_frame, response_frame

    conv = Conversation()
    request = request_frame(3, 0, 1, struct.pack(">i", 0) + b"z" * 200)
    packets = (
        conv.handshake()
        + conv.data("client", request, [100])
        + conv.data("server", response_frame(1, b"\x00" * 8), [100])
        + conv.close()
    )
    capture = pcap_of(packets)
    frames, _, _ = read_capture(capture, implementation=impl.name)
    assert frames.num_rows == 2
    frames, connections, _ = read_capture(capture, implementation=impl.name, max_frame_size=100)
    assert frames.num_rows == 1  # only the small response
    assert connections.to_pylist()[0]["request_skipped_bytes"] == len(request)


# ---------------------------------------------------------------- decompressed size
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_compression_bomb_stops_at_the_configured_cap(impl, codec):
    records = impl.load("records")
    bomb = records.encode_records([(None, b"\x00" * (4 * MiB))], magic=2, compression=codec)
    assert len(bomb) < MiB // 4
    with pytest.raises(DecompressedSizeError) as info:
        list(records.Records(bomb, max_decompressed_size=MiB).records())
    assert isinstance(info.value, LimitExceededError)
    assert peak_allocation(lambda: list(records.Records(bomb, max_decompressed_size=MiB).records())) < 3 * MiB
    [record] = records.Records(bomb, max_decompressed_size=8 * MiB).records()
    assert len(record.value) == 4 * MiB
    with pytest.raises(DecompressedSizeError):
        compression.decompress(codec, compression.compress(codec, b"\x00" * (4 * MiB)), max_size=MiB)


# ---------------------------------------------------------------- hostile record sets (issue 16)
# Scaled down so each test takes well under a second; benchmarks/bench_hostile_records.py
# and the slow test at the end run 1 MiB versions.
from tests import hostile_records as hostile  # noqa: E402


def best_seconds(function, repeat: int = 3) -> float:
    import time

    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def growth(make, decode, size: int) -> float:
    """How much longer ``decode`` takes on an input four times larger: about 4 when linear, 16 quadratic."""
    small, large = make(size), make(4 * size)
    decode(small)
    return best_seconds(lambda: decode(large)) / max(best_seconds(lambda: decode(small)), 1e-4)


def consume(records_module, data, **options):
    """Every record of every batch, and the Arrow table (errors propagate)."""
    reader = records_module.Records(data, **options)
    rows = sum(len(batch.records()) for batch in reader)
    assert reader.to_arrow().num_rows == rows
    return rows


@pytest.mark.slow  # a timing ratio: run by hand (-m slow), never in the normal suite
def test_many_empty_gzip_members_take_linear_time():
    payload = lambda size: hostile.gzip_empty_members(size)[61:]  # noqa: E731  (the batch header off)
    assert compression.decompress("gzip", payload(1000)) == b""
    assert growth(payload, lambda data: compression.decompress("gzip", data), 128 * 1024) < 8


def test_many_empty_gzip_members_feed_zlib_each_byte_a_bounded_number_of_times(monkeypatch):
    # The quadratic version handed zlib the whole rest of the input for every member.
    fed = []
    real = compression.zlib.decompressobj

    class Counting:
        def __init__(self, *args):
            self.inner = real(*args)

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def decompress(self, data, *args):
            fed.append(len(data))
            return self.inner.decompress(data, *args)

    monkeypatch.setattr(compression.zlib, "decompressobj", Counting)
    for size in (16 * 1024, 64 * 1024):
        fed.clear()
        payload = hostile.gzip_empty_members(size)[61:]
        assert compression.decompress("gzip", payload) == b""
        assert sum(fed) <= 4 * len(payload), (size, sum(fed), len(payload))


def test_gzip_members_and_zero_padding_still_read_as_one_stream():
    members = (
        compression.compress("gzip", b"ab") + compression.compress("gzip", b"") + compression.compress("gzip", b"cd")
    )
    assert compression.decompress("gzip", members + b"\x00" * 100) == b"abcd"
    with pytest.raises(DecodeError, match="gzip data is invalid"):
        compression.decompress("gzip", members + b"\x00\x01")
    with pytest.raises(DecompressedSizeError):
        compression.decompress("gzip", members, max_size=3)
    assert compression.decompress("gzip", members, max_size=4) == b"abcd"


@pytest.mark.parametrize(
    "make, codec",
    [
        (hostile.lz4_one_byte_blocks, "lz4"),
        (hostile.lz4_empty_compressed_blocks, "lz4"),
        (hostile.lz4_tiny_frames, "lz4"),
        (hostile.snappy_xerial_tiny_blocks, "snappy"),
    ],
)
@pytest.mark.slow  # a timing ratio: run by hand (-m slow); benchmarks/bench_hostile_records.py measures it
def test_tiny_lz4_and_snappy_blocks_take_linear_time(make, codec):
    payload = lambda size: make(size)[61:]  # noqa: E731  (the batch header off)
    assert growth(payload, lambda data: compression.decompress(codec, data), 256 * 1024) < 8


@pytest.mark.parametrize("magic0_checksum", [False, True])
def test_a_stream_of_tiny_lz4_frames_costs_one_library_call(monkeypatch, magic0_checksum):
    # A call (and a pure-Python header checksum) per frame cost about a microsecond a byte.
    payload = hostile.lz4_tiny_frames(16 * 7 * 100, magic0_checksum)[61:]
    lz4 = compression._cramjam.lz4
    calls = []

    class Counting:
        def __getattr__(self, name):
            return getattr(lz4, name)

        def decompress(self, data):
            calls.append(len(data))
            return lz4.decompress(data)

    monkeypatch.setattr(compression._cramjam, "lz4", Counting())
    assert bytes(compression.decompress("lz4", payload)) == hostile.TINY_RECORD * 100
    assert calls == [len(payload)]


@pytest.mark.parametrize("framing", ["xerial", "raw"])
def test_a_snappy_block_cannot_announce_more_than_its_bytes_can_hold(impl, framing):
    records = impl.load("records")
    data = hostile.snappy_xerial_lying_block(255 * MiB)
    if framing == "raw":  # the same block without the xerial framing
        block = data[61 + 20 :]
        data = hostile.v2_batch(block, 1, compression.SNAPPY)
    with pytest.raises(DecompressionError, match="announces 267386880 bytes, more than its 8 bytes"):
        consume(records, data)
    assert peak_allocation(lambda: consume(records, data)) < MiB


def test_the_record_count_limit_is_checked_before_decompressing(impl):
    records = impl.load("records")
    # declares 36 million records (what fits in the 256 MiB cap) but holds ten: the
    # limit, not the later count-against-bytes check, must be what fails
    data = hostile.tiny_records_zstd(36_000_000, held=10)
    for read in (
        lambda: [b.records() for b in records.Records(data)],
        lambda: records.Records(data).to_arrow(),
        lambda: records.RecordBatch(data).records(),
    ):
        with pytest.raises(TooManyRecordsError) as info:
            read()
        assert isinstance(info.value, LimitExceededError) and isinstance(info.value, CorruptRecordError)
        assert info.value.offset == 57 and info.value.base_offset == 0
        assert info.value.reason.startswith(
            f"record batch declares 36000000 records, more than the limit of {limits.DEFAULT_MAX_RECORDS_PER_BATCH}"
        )
    assert peak_allocation(lambda: records.Records(data).to_arrow()) < MiB


def test_the_record_count_limit_is_configurable(impl):
    records = impl.load("records")
    data = hostile.tiny_records_zstd(2000)
    assert consume(records, data) == 2000
    assert consume(records, data, max_records_per_batch=2000) == 2000
    assert len(records.RecordBatch(data, max_records_per_batch=2000).records()) == 2000
    with pytest.raises(TooManyRecordsError, match="more than the limit of 1999"):
        consume(records, data, max_records_per_batch=1999)
    with pytest.raises(TooManyRecordsError):
        records.RecordBatch(data, max_records_per_batch=1999).records()
    assert records.Records(data).max_records_per_batch == limits.DEFAULT_MAX_RECORDS_PER_BATCH


def test_a_legacy_wrapper_holds_at_most_the_record_limit(impl):
    records = impl.load("records")
    data = hostile.legacy_wrapper_of_messages(50)
    assert consume(records, data) == 50
    assert consume(records, data, max_records_per_batch=50) == 50
    for read in (
        lambda: consume(records, data, max_records_per_batch=49),
        lambda: records.LegacyBatch(data, max_records_per_batch=49).records(),
    ):
        with pytest.raises(TooManyRecordsError, match="wrapper message holds more than 49 records") as info:
            read()
        assert info.value.offset == 0 and info.value.base_offset == 49


def batches_of(*batches: bytes) -> tuple[bytes, list[int]]:
    """A record set of these batches, and where each starts."""
    starts, pos = [], 0
    for batch in batches:
        starts.append(pos)
        pos += len(batch)
    return b"".join(batches), starts


def every_reading(records, data, **options):
    """Each way of reading all records of a set, as a function that returns the count."""
    return (
        lambda: sum(len(batch.records()) for batch in records.Records(data, **options)),
        lambda: sum(1 for _ in records.Records(data, **options).records()),
        lambda: records.Records(data, **options).to_arrow().num_rows,
    )


def test_a_record_set_holds_at_most_max_records_per_set(impl):
    records = impl.load("records")
    # the batch that crosses the limit has a payload zstd rejects: the limit must fail first
    garbage = hostile.v2_batch(b"not zstd at all", 10, compression.ZSTD, base_offset=20)
    data, starts = batches_of(
        hostile.v2_batch(hostile.TINY_RECORD * 10, 10), hostile.tiny_records_zstd(10, base_offset=10), garbage
    )
    for read in every_reading(records, data[: starts[2]], max_records_per_set=20):
        assert read() == 20
    for read in every_reading(records, data, max_records_per_set=20):
        with pytest.raises(TooManyRecordsError) as info:
            read()
        assert isinstance(info.value, LimitExceededError) and isinstance(info.value, CorruptRecordError)
        assert info.value.offset == starts[2] and info.value.base_offset == 20
        assert info.value.reason == (
            f"record set holds more than 20 records (max_records_per_set): "
            f"the batch at byte {starts[2]} brings 20 to 30 [batch base offset 20]"
        )
    for read in every_reading(records, data, max_records_per_set=30):
        with pytest.raises(DecompressionError):
            read()


def test_the_record_set_limit_counts_each_batch_once_per_pass(impl):
    records = impl.load("records")
    data = hostile.tiny_records_zstd(10) + hostile.v2_batch(hostile.TINY_RECORD * 5, 5)
    reader = records.Records(data, max_records_per_set=15)
    first, second = list(reader)
    assert [len(first.records()) for _ in range(3)] + [len(second.records())] == [10, 10, 10, 5]
    assert reader.to_arrow().num_rows == reader.to_arrow().num_rows == 15  # each pass counts anew
    with pytest.raises(TooManyRecordsError, match="brings 10 to 15"):
        records.Records(data, max_records_per_set=14).to_arrow()
    # a batch read on its own is limited by its own limit only
    assert len(records.RecordBatch(hostile.tiny_records_zstd(10), max_records_per_batch=10).records()) == 10


def test_legacy_messages_count_toward_the_record_set_limit(impl):
    records = impl.load("records")
    wrapper = hostile.legacy_wrapper_of_messages(50)
    data, starts = batches_of(wrapper, wrapper)
    for read in every_reading(records, data, max_records_per_set=100):
        assert read() == 100
    for read in every_reading(records, data, max_records_per_set=99):
        with pytest.raises(TooManyRecordsError) as info:
            read()
        assert info.value.offset == starts[1] and info.value.base_offset == 49
        assert info.value.reason.startswith(
            f"record set holds more than 99 records (max_records_per_set): "
            f"the batch at byte {starts[1]} brings 99 to 100"
        )
    plain = hostile.legacy_message(7, b"v")
    data, starts = batches_of(plain, plain, plain)
    for read in every_reading(records, data, max_records_per_set=2):
        with pytest.raises(TooManyRecordsError, match=f"the batch at byte {starts[2]} brings 2 to 3"):
            read()


def test_a_record_set_decompresses_at_most_max_decompressed_size_per_set(impl):
    records = impl.load("records")
    batch = hostile.tiny_records_zstd(100)  # 700 bytes decompressed
    data, starts = batches_of(batch, batch, batch)
    for read in every_reading(records, data, max_decompressed_size_per_set=2100):
        assert read() == 300
    for read in every_reading(records, data, max_decompressed_size_per_set=2099):
        with pytest.raises(DecompressedSizeError) as info:
            read()
        assert info.value.offset == starts[2] and info.value.base_offset == 0
        assert info.value.reason == (
            f"record set decompresses to more than 2099 bytes (max_decompressed_size_per_set): 1400 before "
            f"the record batch at byte {starts[2]} [batch base offset 0]"
        )
    wrapper = hostile.legacy_wrapper_of_messages(20)
    data, starts = batches_of(wrapper, wrapper)
    inner = len(compression.decompress("gzip", records.LegacyBatch(wrapper).value))
    assert consume(records, data, max_decompressed_size_per_set=2 * inner) == 40
    with pytest.raises(DecompressedSizeError, match=f"{inner} before the wrapper message at byte {starts[1]}"):
        consume(records, data, max_decompressed_size_per_set=2 * inner - 1)


def test_a_batch_that_fails_to_decompress_is_charged_all_it_was_allowed(impl):
    records = impl.load("records")
    # how much work a failed decompression did is not known: it uses up its allowance
    data, starts = batches_of(hostile.v2_batch(b"not zstd at all", 1, compression.ZSTD), hostile.tiny_records_zstd(100))
    reader = records.Records(data, max_decompressed_size=1000, max_decompressed_size_per_set=1500)
    first, second = list(reader)
    with pytest.raises(DecompressionError, match="in record batch"):
        first.records()
    with pytest.raises(DecompressedSizeError, match=f"1000 before the record batch at byte {starts[1]}"):
        second.records()
    assert len(records.Records(data[starts[1] :], max_decompressed_size_per_set=700).to_arrow()) == 100


@pytest.mark.parametrize("compressed", [False, True])
def test_a_record_count_the_bytes_cannot_hold_fails_before_decoding(impl, compressed):
    records = impl.load("records")
    payload = hostile.TINY_RECORD * 1000
    if compressed:
        data = hostile.v2_batch(compression.compress("zstd", payload), 1001, compression.ZSTD)
    else:
        data = hostile.v2_batch(payload, 1001)
    assert consume(records, hostile.v2_batch(payload, 1000)) == 1000
    with pytest.raises(CorruptRecordError, match="record count 1001 is invalid for 7000 bytes of records"):
        records.RecordBatch(data).records()
    with pytest.raises(CorruptRecordError, match="record count 1001 is invalid for 7000 bytes of records"):
        records.Records(data).to_arrow()


@pytest.mark.slow
def test_1_mib_hostile_record_sets_stay_within_their_budget():
    """The figures of docs/hardening.md: every 1 MiB case of the benchmark, in each implementation."""
    import subprocess
    import sys

    from kproto import _impl

    script = hostile.ROOT / "benchmarks" / "bench_hostile_records.py"
    for impl in _impl.available():
        done = subprocess.run(
            [sys.executable, str(script), "--only", impl, "--json"],
            capture_output=True,
            text=True,
            timeout=1800,
            check=True,
        )
        for line in done.stdout.splitlines():
            result = json.loads(line)
            assert result["seconds"] <= (2 if impl == "c" else 60), result
            if impl == "c":
                assert result["rss_mib"] <= 512, result

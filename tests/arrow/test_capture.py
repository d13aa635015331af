"""kproto.arrow.capture: capture files, link layers, IP, TCP reassembly, frames and accounting.

Every capture here is built by tests/pcapwriter.py, so each test knows exactly
which frames went in; the reader must give those frames back, with timestamps,
directions and per-connection sequence numbers, and account for every byte.
"""

from __future__ import annotations

import io
import struct

import pytest

from kproto import _impl
from kproto.arrow.capture import CaptureReader, read_capture, read_frame_file, request_versions
from kproto.errors import DecodeError, FrameTooLargeError, TruncatedError
from tests.pcapwriter import (
    ACK,
    LINK_ETHERNET,
    LINK_LOOP,
    LINK_NULL,
    LINK_RAW,
    LINK_SLL,
    LINK_SLL2,
    RST,
    Conversation,
    PcapngWriter,
    PcapWriter,
    ipv4,
    ipv6,
    link,
    pcap_of,
    request_frame,
    response_frame,
)


# ---------------------------------------------------------------- helpers
def run(data, impl, **options):
    """(frames as dicts, connection rows, counters) of a capture held in memory."""
    frames, connections, counters = read_capture(data, implementation=impl.name, **options)
    return frames.to_pylist(), connections.to_pylist(), counters


def exchange(count: int = 4, body: int = 30):
    requests = [request_frame(3, 12, 100 + i, bytes([i]) * (body + i)) for i in range(count)]
    responses = [response_frame(100 + i, bytes([0x80 | i]) * (2 * body + i)) for i in range(count)]
    return requests, responses


def conversation_packets(conv: Conversation, requests, responses, sizes=(1000,), handshake=True, close=True):
    packets = conv.handshake() if handshake else []
    for request, response in zip(requests, responses):
        packets += conv.data("client", request, sizes)
        packets += conv.data("server", response, sizes)
    if close:
        packets += conv.close()
    return packets


def payloads(frames, direction):
    return [f["payload"] for f in frames if f["direction"] == direction]


def assert_exchange(frames, requests, responses, connection_id=0):
    mine = [f for f in frames if f["connection_id"] == connection_id]
    assert payloads(mine, 0) == [r[4:] for r in requests]
    assert payloads(mine, 1) == [r[4:] for r in responses]
    for direction in (0, 1):
        assert [f["sequence"] for f in mine if f["direction"] == direction] == list(
            range(len(requests if direction == 0 else responses))
        )
    assert all(f["size"] == len(f["payload"]) for f in mine)


def assert_accounted(connections):
    for row in connections:
        for side in ("request_", "response_"):
            assert row[side + "stream_bytes"] == (
                row[side + "frame_bytes"]
                + row[side + "skipped_bytes"]
                + row[side + "tail_bytes"]
                + row[side + "sasl_bytes"]
                + row[side + "other_bytes"]
            ), row
            assert row[side + "payload_bytes"] == row[side + "stream_bytes"] + row[side + "duplicate_bytes"], row


# ---------------------------------------------------------------- facts
def test_request_versions_cover_known_and_undefined_keys():
    table = request_versions()
    assert table[0] >= 9 and table[18] >= 3  # Produce, ApiVersions
    assert len(table) > 90 and table[90] >= 0  # a key known only from the broker table


# ---------------------------------------------------------------- file formats
@pytest.mark.parametrize("nanos", [False, True])
@pytest.mark.parametrize("big_endian", [False, True])
def test_pcap_byte_orders_and_resolutions(impl, nanos, big_endian):
    requests, responses = exchange()
    packets = conversation_packets(Conversation(), requests, responses)
    data = pcap_of(packets, nanos=nanos, big_endian=big_endian, step_ns=1234)
    frames, connections, counters = run(data, impl)
    assert_exchange(frames, requests, responses)
    assert counters["packets"] == len(packets) and counters["file_bytes"] == len(data)
    first_request = frames[0]
    expected = packets[3].ts_ns if nanos else packets[3].ts_ns // 1000 * 1000
    assert first_request["ts_first_ns"] == expected
    assert connections[0]["closed_by"] == "fin" and connections[0]["handshake_seen"]
    assert_accounted(connections)


@pytest.mark.parametrize("big_endian", [False, True])
def test_pcapng_interface_options_repeated_empty_or_short(impl, big_endian, tmp_path):
    """The last if_tsresol / if_tsoffset long enough to read sets an interface's clock, in
    both engines and in capture-set detection (kproto._common.capture.pcapng_options);
    an empty or short one is passed over; set detection names the interface by its first
    if_name."""
    from kproto.analyze.spark import capture_sets

    writer = PcapngWriter(big_endian=big_endian)
    order = writer.order
    options = (
        writer._option(2, b"eth0")
        + writer._option(9, b"")
        + writer._option(9, bytes([9]))
        + writer._option(14, struct.pack(order + "q", 3))
        + writer._option(14, b"\x07\x00\x00\x00")
        + writer._option(2, b"eth1")
        + writer._option(0, b"")
    )
    writer._block(1, struct.pack(order + "HHI", LINK_ETHERNET, 0, 0) + options)
    writer.interfaces.append((9, 3))  # nanoseconds, 3 s offset: what the writer's units() must use
    requests, responses = exchange(2)
    ts = 1_700_000_000_123_456_789
    first_ts = ts + 1
    for packet in conversation_packets(Conversation(), requests, responses):
        ts += 1
        writer.add(0, ts, packet.data)
    data = writer.getvalue()
    frames, _connections, _counters = run(data, impl)
    assert min(f["ts_first_ns"] for f in frames) == first_ts + 3  # the SYN, then the request's segment
    path = tmp_path / "options.pcapng"
    path.write_bytes(data)
    head = capture_sets.read_head(str(path), len(data), lambda offset, count: data[offset : offset + count])
    assert head.first_ts_ns == first_ts
    assert "'eth0'" in head.layout and "eth1" not in head.layout


@pytest.mark.parametrize("big_endian", [False, True])
def test_pcapng_interfaces_with_their_own_resolution(impl, big_endian):
    requests, responses = exchange(3)
    writer = PcapngWriter(big_endian=big_endian)
    micro = writer.add_interface(LINK_ETHERNET)  # default: microseconds
    nano = writer.add_interface(LINK_SLL, tsresol=9)
    binary = writer.add_interface(LINK_RAW, tsresol=0x80 | 20, tsoffset=5)
    writer.add_statistics()
    first = Conversation()
    second = Conversation(client=("10.0.0.3", 40002), linktype=LINK_SLL)
    third = Conversation(client=("fd00::1", 40003), server=("fd00::2", 9092), linktype=LINK_RAW)
    ts = 1_700_000_000_000_000_000
    plan = [(micro, first), (nano, second), (binary, third)]
    expected_ts = {}
    for iface, conv in plan:
        packets = conversation_packets(conv, requests, responses)
        for index, packet in enumerate(packets):
            ts += 1_000_003
            writer.add(iface, ts, packet.data, comment=b"x" if index == 1 else b"")
            if index == 3:
                expected_ts[iface] = ts
    frames, connections, counters = run(writer.getvalue(), impl)
    for connection_id in range(3):
        assert_exchange(frames, requests, responses, connection_id)
    first_requests = {
        f["connection_id"]: f["ts_first_ns"] for f in frames if f["sequence"] == 0 and f["direction"] == 0
    }
    assert first_requests[0] == expected_ts[micro] // 1000 * 1000
    assert first_requests[1] == expected_ts[nano]
    assert abs(first_requests[2] - expected_ts[binary]) < 1000  # 2^-20 s units
    assert counters["skipped_blocks"] == 1
    assert [c["client_ip"] for c in connections] == ["10.0.0.1", "10.0.0.3", "fd00::1"]


def test_pcapng_new_section_and_simple_packets(impl):
    requests, responses = exchange(2)
    writer = PcapngWriter()
    writer.add_interface(LINK_ETHERNET)
    conv = Conversation()
    for packet in conversation_packets(conv, requests, responses):
        writer.add_simple(packet.data)  # no timestamps: all zero
    writer.section()  # a big-endian section may follow a little-endian one: interfaces restart
    big = PcapngWriter(big_endian=True)
    big.add_interface(LINK_NULL, tsresol=9)
    conv2 = Conversation(client=("10.0.0.5", 40005), linktype=LINK_NULL)
    for packet in conversation_packets(conv2, requests, responses):
        big.add(0, 42, packet.data)
    frames, connections, _ = run(writer.getvalue() + big.getvalue(), impl)
    assert_exchange(frames, requests, responses, 0)
    assert_exchange(frames, requests, responses, 1)
    assert {f["ts_first_ns"] for f in frames if f["connection_id"] == 0} == {0}
    assert {f["ts_first_ns"] for f in frames if f["connection_id"] == 1} == {42}


def test_not_a_capture_raises_decode_error(impl):
    with pytest.raises(DecodeError, match="not a pcap"):
        run(b"hello world, not a capture", impl)


def test_incomplete_last_record_counted_as_trailing(impl):
    requests, responses = exchange(2)
    data = pcap_of(conversation_packets(Conversation(), requests, responses))
    frames, _, counters = run(data[:-10], impl)
    assert counters["trailing_bytes"] > 0
    assert counters["file_bytes"] + counters["trailing_bytes"] == len(data) - 10


# ---------------------------------------------------------------- corrupt files: stop, keep, account
def corrupt_pcap(count: int = 6):
    """A pcap of ``count`` exchanges followed by a record claiming 0xffffffff bytes, then more packets."""
    requests, responses = exchange(count)
    good = pcap_of(conversation_packets(Conversation(), requests, responses))
    bad_record = struct.pack("<IIII", 1_700_000_001, 0, 0xFFFFFFFF, 0xFFFFFFFF)
    return good, good + bad_record + b"\x00" * 5000, requests, responses


def corrupt_pcapng(block_length: int = 0xFFFFFFF0):
    """A pcapng of two exchanges, an enhanced packet block claiming ``block_length``, then hundreds of packets."""
    writer = PcapngWriter()
    interface = writer.add_interface(LINK_ETHERNET)
    requests, responses = exchange(2)
    for index, packet in enumerate(conversation_packets(Conversation(), requests, responses)):
        writer.add(interface, 1_700_000_000_000_000_000 + index * 1000, packet.data)
    good = writer.getvalue()
    bad_block = struct.pack("<II", 6, block_length) + b"\x00" * 28
    tail = PcapngWriter()
    tail.parts = []  # packets of a second connection, in the same section
    tail.interfaces = writer.interfaces
    more_requests, more_responses = exchange(200)
    for index, packet in enumerate(
        conversation_packets(Conversation(client=("10.0.0.3", 40002)), more_requests, more_responses)
    ):
        tail.add(interface, 1_700_000_001_000_000_000 + index * 1000, packet.data)
    return good, good + bad_block + tail.getvalue(), requests, responses


def assert_bytes_accounted(counters):
    assert counters["input_bytes"] == (
        counters["file_bytes"] + counters["trailing_bytes"] + counters["unread_bytes"]
    ), counters


@pytest.mark.parametrize("source", ["buffer", "file", "stream", "chunks"])
def test_oversized_pcap_record_keeps_frames_before_and_accounts_the_rest(impl, source, tmp_path):
    from kproto.arrow.capture import Chunks
    from kproto.errors import CorruptCaptureError

    good, data, requests, responses = corrupt_pcap()
    path = tmp_path / "corrupt.pcap"
    path.write_bytes(data)
    given = {
        "buffer": data,
        "file": str(path),
        "stream": io.BufferedReader(io.BytesIO(data)),
        "chunks": Chunks([data[i : i + 777] for i in range(0, len(data), 777)]),
    }[source]
    reader = CaptureReader(given, on_error="keep", implementation=impl.name)
    frames = reader.read_all().to_pylist()
    assert_exchange(frames, requests, responses)  # every frame before the bad record
    error = reader.error
    assert isinstance(error, CorruptCaptureError) and error.category == "oversized_record"
    assert error.offset == len(good) and "4294967295" in error.reason
    counters = reader.counters
    assert counters["file_bytes"] == len(good) and counters["unread_bytes"] == len(data) - len(good)
    assert_bytes_accounted(counters)
    assert_accounted(reader.connections().to_pylist())


def test_corrupt_record_raises_after_the_frames_before_it(impl):
    from kproto.errors import CorruptCaptureError

    good, data, requests, responses = corrupt_pcap()
    reader = CaptureReader(data, implementation=impl.name, batch_frames=2)
    seen = []
    with pytest.raises(CorruptCaptureError, match=f"captured length 4294967295.*byte offset {len(good)}"):
        for batch in reader:
            seen += batch.to_pylist()
    assert_exchange(seen, requests, responses)
    with pytest.raises(CorruptCaptureError):
        read_capture(data, implementation=impl.name)


def test_oversized_pcapng_block_in_mid_file_is_an_error_not_a_silent_stop(impl, tmp_path):
    good, data, requests, responses = corrupt_pcapng()
    for given in (data, io.BufferedReader(io.BytesIO(data))):
        reader = CaptureReader(given, on_error="keep", implementation=impl.name)
        frames = reader.read_all().to_pylist()
        assert_exchange(frames, requests, responses)
        assert reader.error.category == "oversized_record" and reader.error.offset == len(good)
        counters = reader.counters
        assert counters["unread_bytes"] == len(data) - len(good) and counters["trailing_bytes"] == 0
        assert_bytes_accounted(counters)


def test_pcapng_block_just_above_the_record_limit_is_refused_before_it_is_buffered(impl):
    from kproto.limits import CAPTURE_MAX_RECORD_SIZE

    good, data, _, _ = corrupt_pcapng(block_length=CAPTURE_MAX_RECORD_SIZE + 4)
    engine = _impl.load("capture", impl.name).Engine(request_versions())
    # Fed only the block's first 12 bytes: a reader waiting for the whole block would return 0.
    used = engine.feed(data[: len(good) + 12])
    assert used == len(good) + 12 and engine.error[0] == "oversized_record"
    good, data, _, _ = corrupt_pcapng(block_length=CAPTURE_MAX_RECORD_SIZE)
    engine = _impl.load("capture", impl.name).Engine(request_versions())
    assert engine.feed(data[: len(good) + 12]) == len(good) and engine.error is None  # waits for it


@pytest.mark.parametrize(
    "bad, category",
    [
        (b"hello world, not a capture at all\n" * 40, "not_a_capture"),
        (bytes(range(256)) * 8, "not_a_capture"),
    ],
)
def test_not_a_capture_is_all_unread(impl, bad, category):
    reader = CaptureReader(bad, on_error="keep", implementation=impl.name)
    assert reader.read_all().num_rows == 0
    assert reader.error.category == category and reader.error.offset == 0
    assert reader.counters["unread_bytes"] == len(bad) and reader.counters["file_bytes"] == 0
    assert_bytes_accounted(reader.counters)


@pytest.mark.parametrize(
    "mutation, category",
    [
        (lambda good: good + struct.pack("<II", 0x0A0D0D0A, 28) + b"\x00" * 20, "bad_block"),  # bad byte-order magic
        (lambda good: good + struct.pack("<II", 6, 14) + b"\x00" * 8, "bad_block"),  # length not a multiple of 4
        (lambda good: good + struct.pack("<II", 1, 16) + b"\x00" * 8, "bad_block"),  # short interface block
        (lambda good: good + struct.pack("<II", 6, 24) + b"\x00" * 16, "bad_block"),  # short packet block
    ],
)
def test_bad_pcapng_blocks_stop_with_their_category(impl, mutation, category):
    good, _, requests, responses = corrupt_pcapng()
    data = mutation(good)
    reader = CaptureReader(data, on_error="keep", implementation=impl.name)
    reader.read_all()
    assert reader.error is not None and reader.error.category == category
    assert_bytes_accounted(reader.counters)


def test_corrupt_captures_agree_between_implementations():
    if len(_impl.available()) < 2:
        pytest.skip("needs the compiled extension")
    inputs = [corrupt_pcap()[1], corrupt_pcapng()[1], b"not a capture" * 9]
    for data in inputs:
        outcomes = []
        for name in ("c", "py"):
            reader = CaptureReader(data, on_error="keep", implementation=name)
            table = reader.read_all()
            outcomes.append(
                (table.to_pylist(), reader.counters, reader._engine.error, reader.connections().to_pylist())
            )
        assert outcomes[0] == outcomes[1]


def test_streaming_and_mmap_give_the_same_batches(impl, tmp_path):
    requests, responses = exchange(20)
    data = pcap_of(conversation_packets(Conversation(), requests, responses, sizes=(7, 50)))
    path = tmp_path / "c.pcap"
    path.write_bytes(data)

    class Pipe(io.RawIOBase):  # no fileno: forces the streaming path, short reads
        def __init__(self):
            self.pos = 0

        def readable(self):
            return True

        def read(self, n=-1):
            chunk = data[self.pos : self.pos + 333]
            self.pos += len(chunk)
            return chunk

    mapped = CaptureReader(str(path), implementation=impl.name, batch_frames=7)
    batches = list(mapped)
    assert max(b.num_rows for b in batches) <= 7 and len(batches) >= 6
    streamed = CaptureReader(Pipe(), implementation=impl.name, batch_frames=5).read_all()
    whole = CaptureReader(data, implementation=impl.name).read_all()
    columns = ["connection_id", "direction", "sequence", "ts_first_ns", "ts_last_ns", "size", "payload"]
    table = mapped.read_all.__self__  # the same reader cannot be read twice
    with pytest.raises(RuntimeError):
        list(table)
    import pyarrow as pa

    mapped_table = pa.Table.from_batches(batches)
    assert mapped_table.select(columns).equals(whole.select(columns))
    assert streamed.select(columns).equals(whole.select(columns))
    assert set(mapped_table.column("capture").to_pylist()) == {str(path)}
    assert mapped.counters["file_bytes"] == len(data)


@pytest.mark.parametrize("cuts", [(24,), (24, 100, 101, 400), (1, 2, 3, 50, 2000, 2001), (7, 13, 31, 97, 211)])
def test_chunks_read_like_one_buffer(impl, cuts):
    """Pieces cut anywhere (inside the file header, records, packets) read like the whole buffer."""
    import pyarrow as pa

    from kproto.arrow.capture import Chunks

    requests, responses = exchange(20)
    data = pcap_of(conversation_packets(Conversation(), requests, responses, sizes=(7, 50)))
    bounds = [0, *[c for c in cuts if c < len(data)], len(data)]
    pieces = [memoryview(data)[a:b] for a, b in zip(bounds, bounds[1:])]
    pulled = []

    def pieces_in_order():
        for piece in pieces:
            pulled.append(len(piece))
            yield piece

    reader = CaptureReader(Chunks(pieces_in_order()), implementation=impl.name, batch_frames=6)
    chunked = pa.Table.from_batches(list(reader))
    whole = CaptureReader(data, implementation=impl.name).read_all()
    columns = ["connection_id", "direction", "sequence", "ts_first_ns", "ts_last_ns", "size", "payload"]
    assert chunked.select(columns).equals(whole.select(columns))
    assert pulled == [len(p) for p in pieces]
    assert reader.counters["file_bytes"] == len(data)


# ---------------------------------------------------------------- link layers and IP
LINKS = [
    pytest.param(dict(linktype=LINK_ETHERNET), id="ethernet"),
    pytest.param(dict(linktype=LINK_ETHERNET, vlans=(7,)), id="802.1q"),
    pytest.param(dict(linktype=LINK_ETHERNET, vlans=(7, 42)), id="qinq"),
    pytest.param(dict(linktype=LINK_SLL), id="sll"),
    pytest.param(dict(linktype=LINK_SLL2), id="sll2"),
    pytest.param(dict(linktype=LINK_NULL), id="null"),
    pytest.param(dict(linktype=LINK_LOOP), id="loop"),
    pytest.param(dict(linktype=LINK_RAW), id="raw4"),
    pytest.param(dict(linktype=LINK_RAW, client=("2001:db8::1", 50000), server=("2001:db8::2", 9092)), id="raw6"),
    pytest.param(dict(linktype=LINK_ETHERNET, ipv4_options=b"\x94\x04\x00\x00\x01\x01\x01\x00"), id="ipv4-options"),
    pytest.param(
        dict(
            linktype=LINK_ETHERNET,
            client=("2001:db8::1", 50000),
            server=("2001:db8::2", 9092),
            ipv6_extensions=[
                (0, b"\x01\x04\x00\x00\x00\x00"),
                (60, b""),
                (43, b"\x00\x00"),
                (51, b"\x00" * 10),
                (44, b"\x00\x00\x00\x00\x00\x01"),
            ],
        ),
        id="ipv6-extensions",
    ),
]


@pytest.mark.parametrize("conversation", LINKS)
def test_link_layers(impl, conversation):
    requests, responses = exchange()
    linktype = conversation["linktype"]
    packets = conversation_packets(Conversation(**conversation), requests, responses, sizes=(13, 100))
    frames, connections, counters = run(pcap_of(packets, linktype=linktype), impl)
    assert_exchange(frames, requests, responses)
    assert counters["malformed"] == counters["non_tcp"] == counters["unsupported_link"] == 0
    assert_accounted(connections)


def test_big_endian_null_link(impl):
    requests, responses = exchange(2)
    conv = Conversation(linktype=LINK_NULL)
    packets = conversation_packets(conv, requests, responses)
    writer = PcapWriter(LINK_NULL)
    for packet in packets:
        body = packet.data[4:]
        writer.add(1000, link(LINK_NULL, body, big_endian_null=True))
    frames, _, _ = run(writer.getvalue(), impl)
    assert_exchange(frames, requests, responses)


def test_ethernet_padding_and_other_traffic_are_accounted(impl):
    requests, responses = exchange(2)
    conv = Conversation()
    packets = conversation_packets(conv, requests, responses)
    writer = PcapWriter(LINK_ETHERNET)
    for packet in packets:
        ip_packet = packet.data[14:]
        writer.add(5000, link(LINK_ETHERNET, ip_packet, pad_to=60))  # tiny ACKs get padding
    writer.add(6000, link(LINK_ETHERNET, ipv4("10.0.0.1", "10.0.0.9", b"\x00" * 8 + b"dns", protocol=17)))
    writer.add(6000, link(LINK_ETHERNET, ipv4("10.0.0.1", "10.0.0.9", b"frag", flags_fragment=0x2000)))
    writer.add(
        6000, link(LINK_ETHERNET, ipv6("fd00::1", "fd00::2", b"frag", extensions=[(44, b"\x00\x08\x00\x00\x00\x07")]))
    )
    writer.add(6000, b"\xff" * 12 + b"\x08\x06" + b"\x00" * 28)  # ARP
    writer.add(6000, b"\x00" * 10)  # too short for Ethernet
    writer.add(6000, link(LINK_ETHERNET, ipv4("10.0.0.1", "10.0.0.9", b"\x00" * 12)))  # TCP header cut
    frames, _, counters = run(writer.getvalue(), impl)
    assert_exchange(frames, requests, responses)
    assert counters["non_tcp"] == 1
    assert counters["ip_fragments"] == 2
    assert counters["unsupported_link"] == 1
    assert counters["malformed"] == 2
    assert counters["packets"] == len(packets) + 6
    assert counters["tcp_packets"] == len(packets)


def test_unsupported_link_type_counted(impl):
    writer = PcapWriter(linktype=147)
    writer.add(0, b"\x00" * 64)
    _, _, counters = run(writer.getvalue(), impl)
    assert counters["unsupported_link"] == 1 and counters["packets"] == 1


@pytest.mark.parametrize("port", [9092, 19092])
def test_snap_length_keeps_every_frame_start_and_counts_what_it_cut(impl, port):
    # on a port not known as a broker's, the cut frames themselves confirm the connection is Kafka
    requests, responses = exchange(3, body=200)
    packets = conversation_packets(Conversation(server=("10.0.0.2", port)), requests, responses, sizes=(150,))
    writer = PcapWriter(LINK_ETHERNET, snaplen=120)
    for packet in packets:
        writer.add(0, packet.data)
    frames, connections, _ = run(writer.getvalue(), impl)
    row = connections[0]
    assert row["request_truncated_packets"] > 0
    assert row["request_snapped_bytes"] > 0 and row["request_gap_bytes"] == 0 == row["request_gaps"]
    # every frame's start was captured: each is a row with the bytes that were
    for direction, sent in ((0, requests), (1, responses)):
        got = [f for f in frames if f["direction"] == direction]
        assert [f["size"] for f in got] == [len(r) - 4 for r in sent]
        assert all(r[4:].startswith(f["payload"]) and f["payload"] for f, r in zip(got, sent))
    assert row["kind"] == "kafka"
    assert_accounted(connections)


# ---------------------------------------------------------------- TCP reassembly
def test_out_of_order_and_duplicated_segments(impl):
    requests, responses = exchange(6)
    conv = Conversation()
    packets = conv.handshake()
    data = conv.data("client", b"".join(requests), (17,))
    packets += data[::-1] + data[3:9]  # reversed, then some again
    packets += conv.data("server", b"".join(responses), (23,))
    packets += conv.close()
    frames, connections, _ = run(pcap_of(packets), impl)
    assert_exchange(frames, requests, responses)
    row = connections[0]
    assert row["request_retransmitted_segments"] == 6
    assert row["request_duplicate_bytes"] == sum(len(p.payload) for p in data[3:9])
    assert row["request_conflicting_segments"] == 0
    assert_accounted(connections)


def test_overlapping_retransmission_first_copy_wins(impl):
    requests, responses = exchange(3)
    stream = b"".join(requests)
    conv = Conversation()
    packets = conv.handshake()
    base = conv.client_next
    # Bytes 20..60 arrive first (out of order), then a bigger segment with different
    # bytes over the same range, then the start: the first copy wins.
    packets.append(conv.packet("client", ACK, stream[20:60], seq=base + 20))
    forged = stream[10:30] + b"\xee" * 30 + stream[60:80]
    packets.append(conv.packet("client", ACK, forged, seq=base + 10))
    packets.append(conv.packet("client", ACK, stream[:10], seq=base))
    packets.append(conv.packet("client", ACK, stream[80:], seq=base + 80))
    conv.client_next = (base + len(stream)) & 0xFFFFFFFF
    packets += conv.data("server", b"".join(responses), (1000,))
    frames, connections, _ = run(pcap_of(packets), impl)
    assert_exchange(frames, requests, responses)
    row = connections[0]
    assert row["request_conflicting_segments"] == 1
    assert row["request_duplicate_bytes"] == 40
    assert_accounted(connections)


def test_sequence_wrap_around(impl):
    requests, responses = exchange(8)
    conv = Conversation(client_isn=0xFFFFFFFF - 100, server_isn=0xFFFFFFF0)
    packets = conversation_packets(conv, requests, responses, sizes=(37,))
    # swap two segments across the wrap so reordering and wrap-around meet
    packets[5], packets[6] = packets[6], packets[5]
    frames, connections, _ = run(pcap_of(packets), impl)
    assert_exchange(frames, requests, responses)
    assert_accounted(connections)


def test_dropped_segment_gap_resumes_at_next_frame(impl):
    requests, responses = exchange(6, body=100)
    conv = Conversation()
    packets = conv.handshake()
    client_data = conv.data("client", b"".join(requests), (60,))
    lost = client_data[4]  # inside the second or third request
    packets += [p for p in client_data if p is not lost]
    packets += conv.data("server", b"".join(responses), (1000,))
    packets += conv.close()
    frames, connections, _ = run(pcap_of(packets), impl)
    row = connections[0]
    got = [f["payload"] for f in frames if f["direction"] == 0 and len(f["payload"]) == f["size"]]
    sent = [r[4:] for r in requests]
    stream_offset = (lost.seq - conv.client_isn - 1) & 0xFFFFFFFF
    hit = [
        i
        for i, r in enumerate(requests)
        if sum(map(len, requests[:i])) < stream_offset + len(lost.payload)
        and stream_offset < sum(map(len, requests[: i + 1]))
    ]
    assert got == [s for i, s in enumerate(sent) if i not in hit]
    # the frame the gap cut, its start captured: a row with the bytes before the gap
    first_hit_start = sum(map(len, requests[: hit[0]]))
    cut = [f for f in frames if f["direction"] == 0 and len(f["payload"]) < f["size"]]
    assert [(f["size"], f["payload"]) for f in cut] == [
        (len(sent[hit[0]]), sent[hit[0]][: stream_offset - first_hit_start - 4])
    ]
    assert [f["sequence"] for f in frames if f["direction"] == 0] == list(range(len(got) + 1))
    assert row["request_gaps"] == 1 and row["request_gap_bytes"] == len(lost.payload)
    assert row["request_skipped_bytes"] == (
        sum(len(requests[i]) for i in hit) - len(lost.payload) - (stream_offset - first_hit_start)
    )
    assert payloads(frames, 1) == [r[4:] for r in responses]
    assert_accounted(connections)


def test_gap_declared_when_pending_bytes_exceed_the_cap(impl):
    requests, responses = exchange(40, body=100)
    conv = Conversation()
    packets = conv.handshake()
    client_data = conv.data("client", b"".join(requests), (100,))
    packets += client_data[:3] + client_data[4:]
    frames_small, connections, _ = run(pcap_of(packets), impl, max_pending_bytes=500)
    row = connections[0]
    assert row["request_gaps"] == 1 and row["request_gap_bytes"] == 100
    assert len(payloads(frames_small, 0)) >= 37
    assert_accounted(connections)


def test_capture_starting_mid_connection(impl):
    requests, responses = exchange(6, body=50)
    conv = Conversation()
    packets = conversation_packets(conv, requests, responses, sizes=(45,), handshake=False)
    # Start the capture inside the first request and inside the first response.
    client = [p for p in packets if p.sender == "client" and p.payload]
    server = [p for p in packets if p.sender == "server" and p.payload]
    cut = packets[packets.index(client[0]) + 1 :]
    cut.remove(server[0])
    frames, connections, _ = run(pcap_of(cut), impl)
    row = connections[0]
    assert payloads(frames, 0) == [r[4:] for r in requests[1:]]
    assert payloads(frames, 1) == [r[4:] for r in responses[1:]]
    assert row["request_skipped_bytes"] == len(requests[0]) - 45
    assert row["response_skipped_bytes"] == len(responses[0]) - 45
    assert not row["handshake_seen"] and row["direction_source"] == "port"
    assert_accounted(connections)


def test_rst_closes_and_counts_the_tail(impl):
    requests, responses = exchange(2)
    conv = Conversation()
    packets = conv.handshake()
    packets += conv.data("client", requests[0] + requests[1][:10], (1000,))
    packets.append(conv.packet("server", RST | ACK))
    frames, connections, _ = run(pcap_of(packets), impl)
    row = connections[0]
    assert payloads(frames, 0) == [requests[0][4:]]
    assert row["closed_by"] == "rst" and row["request_tail_bytes"] == 10
    assert_accounted(connections)


def test_a_capture_that_holds_only_a_connections_end_says_how_it_ended(impl):
    """A capture (or a range of one) that began after a connection's last byte: its FINs open
    it (no bytes, closed by "fin"); what comes after a connection ended (the last ACK, a RST
    after the FINs, a FIN sent again) opens nothing and is counted as before."""
    requests, responses = exchange(1)
    conv = Conversation()
    packets = conversation_packets(conv, requests, responses)
    late = packets[-3:]  # the FINs and the last ACK
    frames, connections, counters = run(pcap_of(late + [conv.packet("client", RST | ACK)] + late[:1]), impl)
    (row,) = connections
    assert (row["closed_by"], row["handshake_seen"], row["request_packets"], len(frames)) == ("fin", False, 0, 0)
    assert counters["tcp_without_connection"] == 3
    frames, connections, counters = run(pcap_of(packets + [conv.packet("client", RST | ACK)] + late[:1]), impl)
    assert [c["closed_by"] for c in connections] == ["fin"] and counters["tcp_without_connection"] == 3
    frames, connections, counters = run(pcap_of([conv.packet("server", RST | ACK)]), impl)
    assert [c["closed_by"] for c in connections] == ["rst"] and counters["tcp_without_connection"] == 0


def test_port_reuse_starts_a_new_connection(impl):
    requests, responses = exchange(2)
    first = Conversation()
    second = Conversation(client_isn=777777, server_isn=888888)
    packets = conversation_packets(first, requests, responses, close=False)
    packets += conversation_packets(second, requests, responses)
    frames, connections, counters = run(pcap_of(packets), impl)
    assert counters["connections"] == 2
    assert [c["closed_by"] for c in connections] == ["reused", "fin"]
    assert_exchange(frames, requests, responses, 0)
    assert_exchange(frames, requests, responses, 1)


def test_many_connections_stay_within_max_connections(impl):
    requests, responses = exchange(2, body=10)
    convs = [Conversation(client=("10.1.%d.%d" % (i // 250, i % 250 + 1), 30000 + i)) for i in range(40)]
    packets = []
    for conv in convs:
        packets += conv.handshake()
    for conv in convs:  # interleave: every connection sends before any closes
        packets += conv.data("client", requests[0], (1000,)) + conv.data("server", responses[0], (1000,))
    for conv in convs:
        packets += conv.data("client", requests[1], (1000,)) + conv.data("server", responses[1], (1000,))
    reader = CaptureReader(pcap_of(packets), implementation=impl.name, max_connections=8)
    frames = reader.read_all().to_pylist()
    counters = reader.counters
    assert counters["evicted_connections"] > 0
    connections = reader.connections().to_pylist()
    assert len(connections) == counters["connections"]
    assert sum(c["request_frames"] + c["response_frames"] for c in connections) == len(frames)
    assert_accounted(connections)
    # evicted connections come back as new, mid-stream ones; no frame is invented
    sent = {r[4:] for r in requests} | {r[4:] for r in responses}
    assert {f["payload"] for f in frames} <= sent


# ---------------------------------------------------------------- direction
def test_direction_from_syn_when_ports_are_unknown(impl):
    requests, responses = exchange(3)
    conv = Conversation(server=("10.0.0.2", 19092))
    frames, connections, _ = run(pcap_of(conversation_packets(conv, requests, responses)), impl)
    assert_exchange(frames, requests, responses)
    assert connections[0]["direction_source"] == "syn"


def test_direction_inferred_from_correlation_ids(impl):
    requests, responses = exchange(5)
    conv = Conversation(client=("10.0.0.1", 1234), server=("10.0.0.2", 19092))  # client port is lower
    packets = conversation_packets(conv, requests, responses, handshake=False, sizes=(40,))
    frames, connections, _ = run(pcap_of(packets), impl)
    assert connections[0]["direction_source"] == "correlation"
    # the first request was not seen to start: it is scanned for like any mid-stream start
    assert payloads(frames, 0) == [r[4:] for r in requests]
    assert payloads(frames, 1) == [r[4:] for r in responses]
    assert connections[0]["client_port"] == 1234


def test_broker_ports_option(impl):
    requests, responses = exchange(2)
    conv = Conversation(client=("10.0.0.1", 1111), server=("10.0.0.2", 2222))
    packets = conversation_packets(conv, requests, responses, handshake=False)
    frames, connections, _ = run(pcap_of(packets), impl, broker_ports=[2222])
    assert connections[0]["direction_source"] == "port"
    assert_exchange(frames, requests, responses)


# ---------------------------------------------------------------- frame files
def test_frame_file_reader(impl, tmp_path):
    requests, _ = exchange(50)
    path = tmp_path / "frames.bin"
    path.write_bytes(b"".join(requests))
    batches = list(read_frame_file(str(path), batch_frames=16, implementation=impl.name))
    assert [b.num_rows for b in batches] == [16, 16, 16, 2]
    rows = [row for b in batches for row in b.to_pylist()]
    assert [r["payload"] for r in rows] == [r[4:] for r in requests]
    assert [r["offset"] for r in rows[:2]] == [0, len(requests[0])]  # where each size prefix starts
    with pytest.raises(TruncatedError):
        list(read_frame_file(b"".join(requests)[:-3], implementation=impl.name))
    with pytest.raises(FrameTooLargeError):
        list(read_frame_file(requests[0] + struct.pack(">i", -5), implementation=impl.name))
    assert list(read_frame_file(b"", implementation=impl.name)) == []


# ---------------------------------------------------------------- the two implementations agree
@pytest.mark.skipif(
    "c" not in _impl.available(),
    reason="only one implementation is available here (no build, or KPROTO_NO_EXTENSIONS=1)",
)
def test_c_and_python_agree_on_a_messy_capture():
    requests, responses = exchange(30, body=70)
    packets = []
    for i in range(5):
        conv = Conversation(client=("10.0.0.%d" % (i + 1), 40000 + i), server=("10.0.0.100", 9092 if i % 2 else 19092))
        ps = conversation_packets(conv, requests, responses, sizes=(33, 70, 5), handshake=i != 3)
        ps = ps[:20] + ps[20:40][::-1] + ps[45:] + ps[30:35]  # reorder, drop, duplicate
        packets += ps
    data = pcap_of(packets)
    results = [read_capture(data, implementation=name, max_pending_bytes=700) for name in ("c", "py")]
    (frames_c, conns_c, counters_c), (frames_py, conns_py, counters_py) = results
    assert frames_c.equals(frames_py)
    assert conns_c.equals(conns_py)
    assert counters_c == counters_py
    assert frames_c.num_rows > 100

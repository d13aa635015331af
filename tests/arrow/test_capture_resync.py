"""Resynchronisation on captures that start mid-connection or lose segments (issue 35):
a boundary is taken only when confirmed, never inside record data; a gap keeps the
end of the frame it cut. Small cases of tools/stream_sweep.py's classes."""

from __future__ import annotations

import random
import struct

import pytest

from kproto import _impl
from kproto.arrow.capture import read_capture
from tests.pcapwriter import Conversation, PcapWriter, pcap_of, request_frame, response_frame


def record_like(corrs: list[int], length: int, seed: int) -> bytes:
    """Bytes like a Fetch response's records: among them "headers" with a plausible size
    (1.3 MB, as in the issue) and the correlation id of a request answered earlier."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < length:
        if rng.random() < 0.3:
            out += struct.pack(">ii", 1_300_000 + rng.randrange(1000), rng.choice(corrs))
        else:
            out += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 24)))
    return bytes(out[:length])


def fetch_exchange(count: int = 8):
    requests = [request_frame(1, 4, 7 + i, b"\x00" * 40, client_id=b"consumer-1") for i in range(count)]
    # the records hold the ids of requests already answered (not of the one outstanding)
    responses = [response_frame(7 + i, record_like(list(range(6, 7 + i)), 3000 + 97 * i, i)) for i in range(count)]
    return requests, responses


def packets_of(conv: Conversation, requests, responses, size: int):
    packets = []
    for request, response in zip(requests, responses):
        packets += conv.data("client", request, (size,))
        packets += conv.data("server", response, (size,))
    return packets + conv.close()


def fully_captured(frames, kept):
    """The frames whose every byte is in the kept packets (by stream offset)."""
    pos, out = 0, []
    for frame in frames:
        if pos >= kept:
            out.append(frame[4:])
        pos += len(frame)
    return out


@pytest.mark.parametrize("size", [1448, 1000])
def test_every_start_point_recovers_every_fully_captured_frame_and_no_garbage(impl, size):
    requests, responses = fetch_exchange()
    conv = Conversation()
    packets = packets_of(conv, requests, responses, size)
    data = [i for i, p in enumerate(packets) if p.payload]
    for start in data:
        cut = packets[start:]
        first = {}
        for p in cut:
            if p.payload and p.sender not in first:
                base = conv.client_isn if p.sender == "client" else conv.server_isn
                first[p.sender] = (p.seq - base - 1) & 0xFFFFFFFF
        frames, connections, _ = read_capture(pcap_of(cut), implementation=impl.name)
        rows = frames.to_pylist()
        got_requests = [r["payload"] for r in rows if r["direction"] == 0]
        got_responses = [r["payload"] for r in rows if r["direction"] == 1]
        assert got_requests == fully_captured(requests, first.get("client", 1 << 40)), start
        assert got_responses == fully_captured(responses, first.get("server", 1 << 40)), start
        row = connections.to_pylist()[0]
        for side in ("request_", "response_"):
            assert row[side + "stream_bytes"] == (
                row[side + "frame_bytes"] + row[side + "skipped_bytes"] + row[side + "tail_bytes"]
            )


def test_frames_after_two_gaps_in_one_frame_are_read(impl):
    """The known end of a frame cut by a gap survives a second gap inside the same frame."""
    requests, responses = fetch_exchange(5)
    conv = Conversation()
    packets = conv.handshake() + packets_of(conv, requests, responses, 500)
    server = [p for p in packets if p.sender == "server" and p.payload]
    # the second response spans several segments: lose two of its middle ones
    pos, second = 0, []
    for p in server:
        if len(responses[0]) + 500 <= pos < len(responses[0]) + len(responses[1]) - 500:
            second.append(p)
        pos += len(p.payload)
    lost = {id(second[0]), id(second[2])}
    frames, connections, _ = read_capture(pcap_of([p for p in packets if id(p) not in lost]), implementation=impl.name)
    rows = frames.to_pylist()
    whole = [r["payload"] for r in rows if r["direction"] == 1 and len(r["payload"]) == r["size"]]
    assert whole == [r[4:] for i, r in enumerate(responses) if i != 1]
    [cut] = [r for r in rows if r["direction"] == 1 and len(r["payload"]) < r["size"]]
    assert cut["size"] == len(responses[1]) - 4 and responses[1][4:].startswith(cut["payload"])
    assert cut["sequence"] == 1
    assert [r["payload"] for r in rows if r["direction"] == 0] == [r[4:] for r in requests]
    row = connections.to_pylist()[0]
    assert row["response_gaps"] == 2
    assert row["response_gap_bytes"] == sum(len(p.payload) for p in server if id(p) in lost)


@pytest.mark.skipif(
    "c" not in _impl.available(),
    reason="only one implementation is available here (no build, or KPROTO_NO_EXTENSIONS=1)",
)
def test_c_and_python_agree_on_resync_with_loss():
    requests, responses = fetch_exchange(10)
    for seed in range(6):
        conv = Conversation()
        packets = conv.handshake() + packets_of(conv, requests, responses, 700)
        rng = random.Random(seed)
        start = rng.randrange(len(packets) // 2) if seed % 2 else 0
        kept = [p for p in packets[start:] if not p.payload or rng.random() > 0.08]
        data = pcap_of(kept)
        (frames_c, conns_c, counters_c), (frames_py, conns_py, counters_py) = (
            read_capture(data, implementation=name) for name in ("c", "py")
        )
        assert frames_c.equals(frames_py)
        assert conns_c.equals(conns_py)
        assert counters_c == counters_py


def test_a_frame_between_two_holes_is_read(impl):
    """A frame whose start follows a hole that swallowed the previous frame's start, and
    whose end is where the next hole begins: its own header and its exact end confirm it."""
    requests, responses = fetch_exchange(5)
    conv = Conversation()
    packets = conv.handshake()
    lost = []
    for i, (request, response) in enumerate(zip(requests, responses)):
        packets += conv.data("client", request, (1448,))
        segments = conv.data("server", response, (700,))
        if i in (1, 3):
            lost.append(segments[0])  # the response's first segment, with its size and id
        packets += segments
    packets += conv.close()
    frames, connections, _ = read_capture(pcap_of([p for p in packets if p not in lost]), implementation=impl.name)
    got = [r["payload"] for r in frames.to_pylist() if r["direction"] == 1]
    assert got == [responses[i][4:] for i in (0, 2, 4)]
    row = connections.to_pylist()[0]
    assert row["response_gaps"] == 2 and row["response_frames"] == 3


@pytest.mark.skipif(
    "c" not in _impl.available(),
    reason="only one implementation is available here (no build, or KPROTO_NO_EXTENSIONS=1)",
)
def test_c_and_python_agree_when_the_outstanding_ids_wrap():
    """More requests than the ids remembered (256), some never answered, some answered out
    of order, a capture starting mid-connection and holes: the evidence both engines
    keep (which ids are outstanding) stays the same."""
    rng = random.Random(7)
    conv = Conversation()
    packets = []
    waiting = []
    for i in range(700):
        packets += conv.data("client", request_frame(1, 4, i, b"\x00" * 30, client_id=b"c"), (1448,))
        if i % 3:
            waiting.append(i)
        if len(waiting) > 2 and rng.random() < 0.6:
            corr = waiting.pop(rng.randrange(2))
            packets += conv.data("server", response_frame(corr, record_like([corr - 1, corr], 200, corr)), (90,))
    packets += conv.close()
    kept = [p for p in packets[40:] if not p.payload or rng.random() > 0.03]
    data = pcap_of(kept)
    (frames_c, conns_c, counters_c), (frames_py, conns_py, counters_py) = (
        read_capture(data, implementation=name) for name in ("c", "py")
    )
    assert frames_c.equals(frames_py)
    assert conns_c.equals(conns_py)
    assert frames_c.num_rows > 600


def weak_chain_capture(first_id: int):
    """A capture that starts on a whole response the capture holds no request for, then loses
    the broker's next segment: only the end of the data before the hole proves that first frame
    (a weak chain). Then two captured requests (ids 8 and 9) and their answers.
    (pcap, requests, the first frame, the answers after the hole)."""
    conv = Conversation()
    first = response_frame(first_id, b"\x00" * 60)
    lost = response_frame(7, b"\x00" * 30)
    requests = [request_frame(3, 1, corr, b"\xff\xff\xff\xff") for corr in (8, 9)]
    answers = [response_frame(corr, b"\x00" * 40) for corr in (8, 9)]
    packets = conv.data("server", first, (1448,))
    conv.data("server", lost, (1448,))  # the broker's next segment: lost (its packets are left out)
    for request, answer in zip(requests, answers):
        packets += conv.data("client", request, (1448,)) + conv.data("server", answer, (1448,))
    return pcap_of(packets + conv.close()), requests, first, answers


@pytest.mark.parametrize("first_id", [7, 6, 0x723D6679])
def test_a_weak_chain_is_decided_by_the_next_answer(impl, first_id):
    """Raw SASL tokens are framed like Kafka frames (an int32 size, then bytes), so a late start
    can begin on one; when a hole follows, the end of the data is the chain's only evidence. Its
    frames are held until the next response: a higher id than that answer's (a token read as
    "r=fy" in SCRAM) is no frame, its bytes skipped and no sequence number taken; a lower or
    equal one (an answer to a request sent before the capture) is a frame as before."""
    data, requests, first, answers = weak_chain_capture(first_id)
    frames, connections, _ = read_capture(data, implementation=impl.name, broker_ports=(9092,))
    responses = [(r["sequence"], r["payload"]) for r in frames.to_pylist() if r["direction"] == 1]
    kept = [first] if first_id <= 8 else []
    assert responses == list(enumerate(frame[4:] for frame in kept + answers))
    row = connections.to_pylist()[0]
    assert row["response_frames"] == len(kept) + 2
    assert row["response_skipped_bytes"] == (0 if kept else len(first))
    assert row["response_gaps"] == 1
    assert row["response_stream_bytes"] == row["response_frame_bytes"] + row["response_skipped_bytes"]


def plain_records(segment: int = 200):
    """The plain Kafka connection of tests/protocol_captures.py (ApiVersions, Metadata, Produce),
    200-byte segments: (pcap header, records, request frames, response frames). Records: 0-2 the
    TCP handshake, 3 the ApiVersions request, 4-5 its response (380 bytes), 6-9 the Metadata and
    Produce exchanges, then the FINs."""
    from tests.capture_pieces import pcap_records
    from tests.protocol_captures import host_capture

    data, requests, responses, _ = host_capture(with_others=False, segment=segment)
    header, records = pcap_records(data)
    return header, records, requests, responses


def read_records(impl, header, records, **options):
    frames, connections, _ = read_capture(header + b"".join(records), implementation=impl.name, **options)
    return frames.to_pylist(), connections.to_pylist()[0]


def test_a_hole_at_a_response_start_answers_the_oldest_request(impl):
    """From the SYN, the ApiVersions response's first segment lost: the response that hole starts
    answers the oldest request (a broker answers in order), so the zeros of its entries, where
    the request's id 0 reads as a header, prove nothing: the Metadata and Produce answers after
    it are frames, and nothing else is."""
    header, records, requests, responses = plain_records()
    frames, row = read_records(impl, header, records[:4] + records[5:], broker_ports=(9092,))
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses[1:]]
    assert row["response_gaps"] == 1 and row["response_gap_bytes"] == 200
    assert row["response_stream_bytes"] == row["response_frame_bytes"] + row["response_skipped_bytes"]


def test_a_late_start_takes_the_chain_that_answers_later_requests(impl):
    """The capture starts at the first request (no handshake) and the ApiVersions response's first
    segment is lost: a header in its entries answers id 0 and its size happens to reach the end
    of the data; inside it, the Metadata and Produce answers answer later captured requests. At
    the end of the data the chain answering later requests wins: they are frames, the false
    header is skipped."""
    header, records, requests, responses = plain_records()
    frames, row = read_records(impl, header, records[3:4] + records[5:], broker_ports=(9092,))
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses[1:]]
    assert [f["payload"] for f in frames if f["direction"] == 0] == [r[4:] for r in requests]


def test_bytes_lost_before_a_fin_are_a_gap(impl):
    """The Produce response's segment is lost and the broker's FIN comes after it: the FIN says
    where the stream ended, so the bytes before it count as a gap (they were counted nowhere)."""
    header, records, requests, responses = plain_records()
    lost = [i for i, record in enumerate(records) if len(record) > 100][-1]  # the last data record
    frames, row = read_records(impl, header, records[:lost] + records[lost + 1 :], broker_ports=(9092,))
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses[:2]]
    assert row["response_gaps"] == 1 and row["response_gap_bytes"] == len(responses[2])
    assert row["closed_by"] == "fin"


def test_a_capture_starting_at_the_syn_ack_knows_both_streams(impl):
    """The client's SYN is not in the file, its SYN-ACK is: the SYN-ACK's acknowledgement number
    says where the client's stream starts, and its sender is the broker, with no port given."""
    header, records, requests, responses = plain_records()
    frames, row = read_records(impl, header, records[1:], broker_ports=())
    assert [f["payload"] for f in frames if f["direction"] == 0] == [r[4:] for r in requests]
    assert [f["payload"] for f in frames if f["direction"] == 1] == [r[4:] for r in responses]
    assert (row["client_port"], row["server_port"], row["direction_source"]) == (40001, 9092, "syn")
    assert row["request_skipped_bytes"] == row["response_skipped_bytes"] == 0


def test_frames_chained_to_a_frame_a_hole_cut_are_read(impl):
    """A late start at a response whose request is not in the file (nothing proves it alone), then
    the last segment of the next response lost: that response is cut exactly at its end, proved
    by the header after the hole, and the frame before it, whose size lands exactly on it, is
    proved with it (it was skipped)."""
    requests, responses = fetch_exchange(6)
    conv = Conversation()
    packets, lost = [], None
    for i, (request, response) in enumerate(zip(requests, responses)):
        packets += conv.data("client", request, (700,))
        segments = conv.data("server", response, (700,))
        if i == 3:
            lost = segments[-1]
        packets += segments
    packets += conv.close()
    start = packets.index(next(p for p in packets if p.payload == responses[2][:700]))
    frames, connections, _ = read_capture(
        pcap_of([p for p in packets[start:] if p is not lost]), implementation=impl.name, broker_ports=(9092,)
    )
    got = [(r["payload"], r["size"]) for r in frames.to_pylist() if r["direction"] == 1]
    assert got[0] == (responses[2][4:], len(responses[2]) - 4)
    assert got[1][1] == len(responses[3]) - 4 and responses[3][4:].startswith(got[1][0])  # cut
    assert [payload for payload, _ in got[2:]] == [r[4:] for r in responses[4:]]
    row = connections.to_pylist()[0]
    assert row["response_skipped_bytes"] == 0 and row["response_gaps"] == 1


def test_an_answer_held_after_a_hole_confirms_a_request_on_an_unknown_port(impl):
    """No broker port: a request header proves a boundary only once the other side holds what may
    answer it. A late start, the first answer lost and a request segment lost: the other answers
    wait behind the broker's hole (out of order) until the end, and there they are that evidence,
    so the requests captured whole are read."""
    conv = Conversation()
    requests = [request_frame(0, 7, 20 + i, bytes(range(256)) * 12) for i in range(6)]
    responses = [response_frame(20 + i, b"\x00\x02" + b"\x00" * 50) for i in range(6)]
    packets, lost = [], []
    for i, (request, response) in enumerate(zip(requests, responses)):
        segments = conv.data("client", request, (1000,))
        if i == 3:
            lost.append(segments[1])
        packets += segments
        answer = conv.data("server", response, (1000,))
        if i == 1:
            lost += answer
        packets += answer
    packets += conv.close()
    start = 1  # inside the first request
    frames, connections, _ = read_capture(
        pcap_of([p for p in packets[start:] if p not in lost]), implementation=impl.name, broker_ports=()
    )
    whole = [r["payload"] for r in frames.to_pylist() if r["direction"] == 0 and len(r["payload"]) == r["size"]]
    assert whole == [r[4:] for i, r in enumerate(requests) if i not in (0, 3)]
    row = connections.to_pylist()[0]
    assert (row["kind"], row["client_port"]) == ("kafka", 40001)


@pytest.mark.parametrize("snaplen", [96, 128, 256])
def test_a_late_start_with_a_short_snap_length_reads_every_request_header(impl, snaplen):
    """A producer's requests span several packets and the snap length cuts each one: a capture that
    starts in the middle of a request finds the next one's whole header, whose frame runs past
    the cut and past the next packets' cuts; the header at its announced end proves it. Every
    request header the file holds comes out (a row each, its body not captured)."""
    conv = Conversation()
    requests = [request_frame(0, 7, 30 + i, bytes(range(256)) * 15, client_id=b"producer-1") for i in range(6)]
    responses = [response_frame(30 + i, b"\x00" * 40) for i in range(6)]
    packets = []
    for request, response in zip(requests, responses):
        packets += conv.data("client", request, (1448,)) + conv.data("server", response, (1448,))
    packets += conv.close()
    start = 1  # the first request's second packet
    writer = PcapWriter(snaplen=snaplen)
    for index, packet in enumerate(packets[start:]):
        writer.add(1_700_000_000_000_000_000 + index * 1000, packet.data)
    frames, connections, _ = read_capture(writer.getvalue(), implementation=impl.name, broker_ports=(9092,))
    got = [r for r in frames.to_pylist() if r["direction"] == 0]
    assert [struct.unpack_from(">i", r["payload"], 4)[0] for r in got] == [31, 32, 33, 34, 35]
    assert all(r["size"] == len(requests[1]) - 4 and len(r["payload"]) < r["size"] for r in got)


def test_a_frame_waiting_past_a_hole_does_not_hold_up_the_frames_inside_it(impl):
    """A late start on a whole request header whose size (60,000) runs past the hole after it: kept
    aside until reading reaches that end. The requests after the hole, confirmed by the headers
    after them, disprove it; before, it held the search up and the next hole took them."""
    conv = Conversation()
    fake = request_frame(3, 1, 5, b"\xff\xff\xff\xff")
    fake = struct.pack(">i", 60_000) + fake[4:] + bytes(300)
    requests = [request_frame(3, 1, 6 + i, b"\xff\xff\xff\xff") for i in range(5)]
    packets = conv.data("client", fake, (1448,))
    lost = conv.data("client", bytes(500), (1448,))  # lost
    for request in requests[:2]:
        packets += conv.data("client", request, (1448,))
    lost += conv.data("client", bytes(300), (1448,))  # lost
    for request in requests[2:]:
        packets += conv.data("client", request, (1448,))
    packets += conv.close()
    frames, _, _ = read_capture(pcap_of(packets), implementation=impl.name, broker_ports=(9092,))
    got = [r["payload"] for r in frames.to_pylist() if r["direction"] == 0]
    assert requests[0][4:] in got and requests[1][4:] in got
    assert fake[4:] not in got

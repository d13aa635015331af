"""Property tests of TCP reassembly: whatever happens to the segments on the way,
the frames that come out are the frames that went in.

A scenario is a client / broker exchange cut into random segment sizes; the
packets are then reordered, duplicated, re-sent as overlapping ranges and (in
the lossy property) dropped. Both implementations must agree exactly.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from kproto import _impl
from kproto.arrow.capture import read_capture
from tests.pcapwriter import ACK, Conversation, PcapngWriter, pcap_of, request_frame, response_frame

REQUEST_KEYS = [(0, 9), (1, 12), (3, 12), (18, 3), (19, 7), (32, 4)]


@st.composite
def scenarios(draw, lossy: bool):
    count = draw(st.integers(1, 8))
    requests, responses = [], []
    for i in range(count):
        api_key, version = draw(st.sampled_from(REQUEST_KEYS))
        corr = 1000 + i
        requests.append(request_frame(api_key, version, corr, draw(st.binary(max_size=300))))
        responses.append(response_frame(corr, draw(st.binary(max_size=300))))
    conv = Conversation(client_isn=draw(st.integers(0, 2**32 - 1)), server_isn=draw(st.integers(0, 2**32 - 1)))
    sizes = draw(st.lists(st.integers(1, 150), min_size=1, max_size=4))
    packets = conv.handshake()
    data = []
    streams = {"client": b"".join(requests), "server": b"".join(responses)}
    starts = {"client": conv.client_next, "server": conv.server_next}
    for request, response in zip(requests, responses):
        data += conv.data("client", request, sizes)
        data += conv.data("server", response, sizes)
    operations = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["swap", "duplicate", "resend"] + (["drop"] if lossy else [])),
                st.integers(0, 10**6),
                st.integers(0, 10**6),
            ),
            max_size=12,
        )
    )
    for kind, x, y in operations:
        if not data:
            break
        i = x % len(data)
        if kind == "swap":  # reorder within a window of 8 packets
            j = min(len(data) - 1, i + y % 8)
            data[i], data[j] = data[j], data[i]
        elif kind == "duplicate":
            data.insert(y % (len(data) + 1), dataclasses.replace(data[i]))  # its own timestamp
        elif kind == "resend":  # an overlapping retransmission of a stream range
            sender = "client" if y % 2 else "server"
            stream = streams[sender]
            a = x % len(stream)
            b = min(len(stream), a + 1 + y % 400)
            seq = (starts[sender] + a) & 0xFFFFFFFF
            data.insert(y % (len(data) + 1), conv.packet(sender, ACK, stream[a:b], seq=seq))
        else:
            del data[i]
    packets += data + conv.close()
    return requests, responses, packets, starts, streams


def first_arrival_ts(packets, sender, start, length):
    """Capture timestamp of the first packet carrying each stream byte (None: never carried)."""
    ts = [None] * length
    for packet in packets:
        if packet.sender != sender or not packet.payload:
            continue
        offset = (packet.seq - start) & 0xFFFFFFFF
        for k in range(offset, min(length, offset + len(packet.payload))):
            if ts[k] is None:
                ts[k] = packet.ts_ns
    return ts


def read_both(data):
    results = {}
    for name in _impl.available():
        frames, connections, counters = read_capture(data, implementation=name)
        results[name] = (frames, connections, counters)
    first = next(iter(results.values()))
    for other in results.values():  # the compiled engine and its twin agree exactly
        assert other[0].equals(first[0]) and other[1].equals(first[1]) and other[2] == first[2]
    return first[0].to_pylist(), first[1].to_pylist(), first[2]


def check_accounting(row, sender_prefix):
    assert row[sender_prefix + "stream_bytes"] == (
        row[sender_prefix + "frame_bytes"]
        + row[sender_prefix + "skipped_bytes"]
        + row[sender_prefix + "tail_bytes"]
        + row[sender_prefix + "sasl_bytes"]
        + row[sender_prefix + "other_bytes"]
    )
    assert row[sender_prefix + "payload_bytes"] == (
        row[sender_prefix + "stream_bytes"] + row[sender_prefix + "duplicate_bytes"]
    )


@given(scenarios(lossy=False))
def test_reordered_duplicated_and_resent_segments_give_back_every_frame(scenario):
    requests, responses, packets, starts, streams = scenario
    frames, connections, counters = read_both(pcap_of(packets))
    assert counters["packets"] == len(packets)
    [row] = connections
    for direction, sender, sent in ((0, "client", requests), (1, "server", responses)):
        mine = [f for f in frames if f["direction"] == direction]
        assert [f["payload"] for f in mine] == [s[4:] for s in sent]
        assert [f["sequence"] for f in mine] == list(range(len(sent)))
        ts = first_arrival_ts(packets, sender, starts[sender], len(streams[sender]))
        offset = 0
        for frame, raw in zip(mine, sent):
            assert frame["ts_first_ns"] == ts[offset]
            assert frame["ts_last_ns"] == ts[offset + len(raw) - 1]
            offset += len(raw)
        prefix = "request_" if direction == 0 else "response_"
        check_accounting(row, prefix)
        assert row[prefix + "gap_bytes"] == row[prefix + "skipped_bytes"] == row[prefix + "tail_bytes"] == 0
        assert row[prefix + "conflicting_segments"] == 0


def is_subsequence(part, whole):
    iterator = iter(whole)
    return all(any(item == candidate for candidate in iterator) for item in part)


@given(scenarios(lossy=True))
def test_dropped_segments_lose_only_the_frames_they_touch(scenario):
    requests, responses, packets, starts, streams = scenario
    frames, connections, _ = read_both(pcap_of(packets))
    [row] = connections
    for direction, sender, sent in ((0, "client", requests), (1, "server", responses)):
        got = [f["payload"] for f in frames if f["direction"] == direction and len(f["payload"]) == f["size"]]
        assert is_subsequence(got, [s[4:] for s in sent])
        # a frame a gap cut comes with the bytes captured before the gap
        for f in frames:
            if f["direction"] == direction and len(f["payload"]) < f["size"]:
                assert any(len(s) - 4 == f["size"] and s[4:].startswith(f["payload"]) for s in sent)
        ts = first_arrival_ts(packets, sender, starts[sender], len(streams[sender]))
        prefix = "request_" if direction == 0 else "response_"
        check_accounting(row, prefix)
        # every byte entered the stream or was counted lost: the FIN (always kept) says where it ends
        assert row[prefix + "stream_bytes"] + row[prefix + "gap_bytes"] == len(ts)
        assert row[prefix + "gap_bytes"] == sum(1 for t in ts if t is None)
        # frames wholly before the first missing byte all came through
        first_missing = ts.index(None) if None in ts else len(ts)
        offset, intact = 0, 0
        for raw in sent:
            if offset + len(raw) > first_missing:
                break
            offset += len(raw)
            intact += 1
        assert got[:intact] == [s[4:] for s in sent[:intact]]


@given(
    scenarios(lossy=True),
    st.lists(st.tuples(st.integers(24, 10**6), st.integers(0, 255)), min_size=1, max_size=8),
    st.integers(0, 10**6),
    st.booleans(),
)
def test_corrupted_captures_fail_cleanly_and_alike(scenario, flips, cut, pcapng):
    """Flipped bytes and a cut anywhere: a DecodeError or a result, never a crash, and the same from both."""
    from kproto.errors import DecodeError

    packets = scenario[2]
    if pcapng:
        writer = PcapngWriter(big_endian=cut % 2 == 1)
        writer.add_interface(tsresol=9)
        writer.add_interface(tsresol=0x80 | 30)
        for index, packet in enumerate(packets):
            writer.add(index % 2, 10**18 + index, packet.data)
        data = bytearray(writer.getvalue())
    else:
        data = bytearray(pcap_of(packets))
    for position, value in flips:
        data[position % len(data)] = value
    data = bytes(data[: max(24, len(data) - cut % 200)])
    outcomes = []
    for name in _impl.available():
        try:
            frames, connections, counters = read_capture(data, implementation=name, max_frame_size=1 << 16)
            outcomes.append((frames.to_pylist(), connections.to_pylist(), counters))
            assert counters["packets"] == sum(
                counters[k] for k in ("unsupported_link", "non_tcp", "ip_fragments", "malformed", "tcp_packets")
            )
        except DecodeError as exc:
            outcomes.append(str(exc))
    assert all(outcome == outcomes[0] for outcome in outcomes)

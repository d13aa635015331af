"""The state of one TCP connection and of each of its directions (part of the capture
engine, kproto/_py/capture.py; compiled: kproto/_c/_capture_connections.pxi)."""

from __future__ import annotations

import struct
from collections import deque

from kproto._common.capture import HALF_COUNTERS, KIND_UNKNOWN
from kproto._py.capture_kinds import _answered_already, _handshake_answer

_BE16 = struct.Struct(">H")
_BE32S = struct.Struct(">i")
_UNPROVED_FRAMES = 8  # responses held unproved after a SaslHandshake response (_unproved_hold)


class _Half:
    """One direction of one TCP connection."""

    def __init__(self, side: int) -> None:
        self.side = side
        self.started = False
        self.isn = -1  # initial sequence number, when the SYN was seen
        self.next_seq = 0  # sequence number of the next expected byte
        self.next_pos = 0  # its stream offset
        self.buf = bytearray()  # assembled bytes not yet cut into frames
        self.buf_pos = 0  # stream offset of buf[0]
        self.chunks: deque = deque()  # (stream end offset, ts) of the segments in buf
        self.pending: list = []  # out-of-order [start, bytes, ts], sorted, non-overlapping
        self.pending_bytes = 0
        self.synced = False  # True when buf[0] is a frame boundary
        self.scan_from = 0  # while not synced: offsets before it were examined
        self.candidates: list = []  # while not synced: offsets of plausible headers not yet decided
        self.boundary = -1  # a frame boundary known ahead (the end of a frame a gap cut), or -1
        # while not synced: a strong candidate a hole cut exactly at its end, waiting for the header
        # after the hole to prove it (Framer._cut_frame_proved): (end, the frames it proves: those
        # chained to it, then itself, each (size, captured payload, first ts, last ts, stream offset))
        self.cut_frame = None
        # Marks (mark_open_connections): the stream offset of the last mark, and the frames, frame
        # bytes and skipped bytes counted since then about bytes before it (_common's EARLY_COUNTERS): a reader
        # that started cold decides them late, a reader of the whole file before the mark.
        self.mark_pos = 0
        self.early = [0, 0, 0]
        self.fin_pos = -1
        self.sequence = 0
        self.request_corrs: deque = deque()  # correlation ids of frames that read as requests
        self.request_ends: deque = deque()  # and when each one's last byte was captured (ts)
        self.whole_requests = 0  # how many of them were read from the SYN with no byte lost before them
        self.counters = dict.fromkeys(HALF_COUNTERS, 0)
        # kinds (capture_kinds.py)
        self.sniffed = False  # the first bytes were looked at for another protocol
        self.hello_corr = -1  # correlation id of the last ApiVersions / SaslHandshake request
        self.run = 0  # request headers in a row with rising correlation ids
        self.run_corr = -1
        self.sasl = False  # raw SASL tokens come next
        self.sasl_corr = -1  # a SaslHandshake v0 request waiting for its response
        # raw tokens a late start's chain proved (a SaslHandshake v0 response then tokens, its
        # request not captured; Framer._answers): the stream offsets of the first and of the frame after them
        self.tokens_from = -1
        self.tokens_to = -1
        # responses after a whole successful SaslHandshake response whose request was not
        # captured: held unproved (_unproved_hold) after the handshake's id
        self.unproved_corr = -1
        self.unproved: list = []
        # a successful SaslHandshake response cut before its v0 request was read, with frames cut
        # after it (its id; -1: none): they may be raw tokens, held as after one whose request
        # was not captured (_handshake_hold)
        self.handshake_first = -1
        self.held_not_frames = 0  # held responses found no frames (tokens, a weak chain's): no sequence number
        # responses the search took only because their chain ends where the bytes before a hole
        # end (Framer._confirm: no link answers a captured request): the end of that chain (a
        # stream offset), and its frames once cut, [sequence, stream offset, chain end, frame once held],
        # held until the next response decides them (_weak_hold)
        self.weak_end = -1
        self.weak: list = []

    def append(self, data, ts: int) -> None:
        """In-order bytes: onto the end of the stream."""
        self.buf += data
        self.next_pos += len(data)
        self.next_seq = (self.next_seq + len(data)) & 0xFFFFFFFF
        self.counters["stream_bytes"] += len(data)
        self.chunks.append((self.next_pos, ts))

    def count_skipped(self, count: int, at: int) -> None:
        """``count`` bytes from stream offset ``at`` on are skipped (negative: no longer skipped)."""
        self.counters["skipped_bytes"] += count
        before_mark = max(0, min(at + abs(count), self.mark_pos) - at)
        self.early[2] += before_mark if count > 0 else -before_mark

    def count_frame(self, frame_bytes: int, at: int) -> None:
        """A frame of ``frame_bytes`` captured bytes (with its size prefix) from stream offset ``at`` on
        (one of a weak chain is noted for _weak_hold)."""
        self.counters["frames"] += 1
        self.counters["frame_bytes"] += frame_bytes
        if at + frame_bytes <= self.mark_pos:
            self.early[0] += 1
            self.early[1] += frame_bytes
        if at < self.weak_end:  # a weak chain's frame: noted for _weak_hold
            self.weak.append([self.sequence, at, self.weak_end, None])

    def whole_from_syn(self) -> bool:
        """Read whole from its SYN so far: no gap, no byte skipped, no resync, no packet the snap length cut."""
        c = self.counters
        return self.isn >= 0 and not (c["gaps"] or c["skipped_bytes"] or c["resyncs"] or c["truncated_packets"])

    def captured_at(self, at: int) -> int:
        """When the byte at stream offset ``at`` (held in buf) was captured."""
        return next((ts for end, ts in self.chunks if end > at), self.chunks[-1][1])

    def drop(self, count: int) -> None:
        """The first ``count`` bytes are framed, skipped or lost: forget them."""
        del self.buf[:count]
        self.buf_pos += count
        while self.chunks and self.chunks[0][0] <= self.buf_pos:
            self.chunks.popleft()


class _Connection:
    def __init__(self, conn_id: int, key, endpoints, ts: int) -> None:
        self.id = conn_id
        self.key = key
        self.endpoints = endpoints  # ((ip bytes, port) of side 0, of side 1)
        self.halves = (_Half(0), _Half(1))
        self.client_side = -1  # which side sends requests; -1 until known
        self.direction_source = -1
        self.handshake_seen = False
        self.first_ts = ts
        self.last_ts = ts
        self.undecided: list = []  # frames waiting for the direction or the kind
        self.held_bytes = 0  # their payload bytes
        self.request_like = [0, 0]
        self.kind = KIND_UNKNOWN  # capture_kinds.py
        self.matched = 0  # request/response pairs counted (capture_kinds._pair_counts)
        self.pair_corr = -1  # the last counted pair's correlation id
        self.pair_response = -1  # and its response's sequence number
        self.told = False  # its endpoints were reported (take_endpoints), with its first frame


# ---------------------------------------------------------------- requests seen, answers in order
# What the framer asks of the request side when it decides whether a chain of headers answers
# captured requests (kproto/_c/_capture_connections.pxi holds the compiled ones).


def _requested(other: _Half, corr: int, half: _Half, at: int) -> bool:
    """Did the other direction send a request with this correlation id, not answered yet
    (a frame cut there, or the one it is receiving: its start confirmed, or a whole request
    header a hole cut, waiting for its end: ``cut_frame``), its last byte (so far) captured no
    later than the byte at stream offset ``at`` of ``half``? Kafka cannot answer a request
    before it was sent: bytes on the wire before it are no answer."""
    ends = [end for held, end in zip(other.request_corrs, other.request_ends) if held == corr]
    buf = other.buf
    if other.synced and len(buf) >= 12 and _BE32S.unpack_from(buf, 8)[0] == corr:
        ends.append(other.chunks[-1][1])
    for _, payload, _, last_ts, _ in other.cut_frame[1] if other.cut_frame is not None else ():
        if len(payload) >= 8 and _BE32S.unpack_from(payload, 4)[0] == corr:
            ends.append(last_ts)
    return bool(ends) and min(ends) <= half.captured_at(at)


def _answer_seen(conn: _Connection, half: _Half, corr: int, max_size: int) -> bool:
    """The direction unknown: does the other side hold what may answer a request with this
    correlation id (a frame cut and held, or in its bytes not framed yet, in order or held
    after a hole, a plausible header with that id whose frame ends where those bytes do or at
    another plausible size)? Both directions must agree before a request header proves a boundary."""
    if _answered_already(conn, half.side, corr, 0) >= 0:
        return True
    other = conn.halves[1 - half.side]
    return _answer_in(other.buf, corr, max_size) or any(
        _answer_in(held, corr, max_size) for _, held, _ in other.pending
    )


def _answer_in(data, corr: int, max_size: int) -> bool:
    """Does a plausible header with this correlation id start in ``data`` (see _answer_seen)?"""
    wanted = _BE32S.pack(corr)
    at = data.find(wanted, 4)
    while at >= 0:
        after = at + _BE32S.unpack_from(data, at - 4)[0]
        if at + 4 <= after <= at + max_size and (
            after == len(data) or (after + 4 <= len(data) and 4 <= _BE32S.unpack_from(data, after)[0] <= max_size)
        ):
            return True
        at = data.find(wanted, at + 1)
    return False


def _all_requests_seen(requests: _Half) -> int:
    """Which requests this request direction holds: 2 every one sent so far (read whole from
    its SYN: no gap, no byte skipped or cut by the snap length, nothing held beyond a hole),
    1 every one since its first confirmed frame (a late start, no gap or resync since),
    0 neither."""
    c = requests.counters
    if not requests.synced or requests.pending or c["gaps"] or c["truncated_packets"]:
        return 0
    if requests.isn >= 0 and c["skipped_bytes"] == 0:
        return 2
    return 1 if requests.isn < 0 and c["resyncs"] <= 1 and requests.sequence else 0


def _request_after(requests: _Half, half: _Half, at: int) -> bool:
    """Was a request captured whole after the byte at stream offset ``at`` of ``half``? Then a
    hole before it in the request direction is known (a gap, or bytes held beyond it); before
    that, the last requests' segments may be lost unseen."""
    return bool(requests.request_ends) and requests.request_ends[-1] >= half.captured_at(at)


def _answered(requests: _Half, corr: int) -> None:
    """A response with this correlation id was read: its request is no longer outstanding
    (its slot is blanked, as the compiled ring does), so record bytes that happen to
    hold an old correlation id are no evidence of a boundary."""
    for index, held in enumerate(requests.request_corrs):
        if held == corr:
            requests.request_corrs[index] = -1
            return


def _hole_answers(conn: _Connection, half: _Half) -> None:
    """A hole in a response direction read whole from its SYN starts inside a response whose
    correlation id was not captured (buf holds fewer than its first 8 bytes): a broker answers
    in order, so it answers the oldest request still outstanding, when every request sent is in
    hand up to it (``whole_requests``) and no response read is still held. That request is answered:
    bytes after the hole that hold its id (an ApiVersions response holds zeros) prove nothing."""
    other = conn.halves[1 - half.side]
    if (
        conn.client_side != other.side
        or not half.whole_from_syn()
        or not half.synced
        or len(half.buf) >= 8
        or half.sasl
        or half.tokens_to >= 0
        or half.unproved
        or half.weak
        or any(side == half.side for side, _ in conn.undecided)
    ):
        return
    index = next((i for i, corr in enumerate(other.request_corrs) if corr >= 0), -1)
    if 0 <= index and conn.request_like[other.side] - len(other.request_corrs) + index < other.whole_requests:
        other.request_corrs[index] = -1


def _chained_to(framer, conn: _Connection, half: _Half, i: int, hops: int) -> list:
    """The whole frames in buf that chain to the strong candidate at offset i a hole cut
    (Framer._cut_candidate): from the first offset whose plausible headers, each at the size the
    one before announced (at most ``hops``; responses' ids never falling), land exactly on i. Once the header
    after the hole proves that frame, it proves them too. (size, payload, first ts, last ts, stream
    offset) of each."""
    buf, base = half.buf, half.buf_pos
    for start in range(i - 7):
        links, at = [], start
        while at < i and len(links) < hops and framer._header_ok(conn, half, buf, at) == 1:
            links.append(at)
            at += 4 + _BE32S.unpack_from(buf, at)[0]
        answers = conn.client_side not in (-1, half.side)  # a response chain's ids never fall
        if at == i and links and (not answers or _in_order([_BE32S.unpack_from(buf, k + 4)[0] for k in links + [i]])):
            return [
                (
                    size,
                    bytes(buf[link + 4 : link + 4 + size]),
                    half.captured_at(base + link),
                    half.captured_at(base + link + 3 + size),
                    base + link,
                )
                for link in links
                for size in (_BE32S.unpack_from(buf, link)[0],)
            ]
    return []


def _in_order(corrs: list) -> bool:
    """Do these correlation ids (-1: a link too short to hold one) never fall, each at least the one before?"""
    before = 0
    for corr in corrs:
        if corr < before:
            return False
        before = corr
    return True


def _unproved_hold(framer, conn: _Connection, half: _Half, frame) -> bool:
    """A response about to be emitted: True when it is held instead, as a weak chain's frame
    (_weak_hold) or after a SaslHandshake response (_handshake_hold)."""
    return _weak_hold(framer, conn, half, frame) or _handshake_hold(framer, conn, half, frame)


def _handshake_hold(framer, conn: _Connection, half: _Half, frame) -> bool:
    """A response about to be emitted: True when it is held unproved instead. After a whole
    successful SaslHandshake response whose request was not captured (or was read only after
    the frames that follow it: ``handshake_first``), the broker's next frames may be raw SASL
    tokens (v0) or SaslAuthenticate answers (v1, alike): they are held until a response
    answers a captured request (_unproved_settle)."""
    payload = frame[4]
    other = conn.halves[1 - half.side]
    corr = _BE32S.unpack_from(payload, 0)[0] if len(payload) >= 4 else -1
    if half.unproved_corr >= 0:
        half.unproved.append(frame)
        if 0 <= corr and corr in other.request_corrs:
            _unproved_settle(framer, conn, half, len(half.unproved) - 1)
        elif len(half.unproved) > _UNPROVED_FRAMES:  # too many held: emitted as before
            _unproved_settle(framer, conn, half, -1)
        return True
    if (
        not half.sasl
        and corr >= 0
        and len(payload) == frame[3] >= 6
        and (corr not in other.request_corrs or corr == half.handshake_first)
        and _BE16.unpack_from(payload, 4)[0] == 0
        and _handshake_answer(_BE32S.pack(frame[3]) + payload, 0, corr)
    ):
        half.unproved_corr = corr
    return False


def _weak_hold(framer, conn: _Connection, half: _Half, frame) -> bool:
    """A response about to be emitted: True when it is a frame of a weak chain (``half.weak``), held.
    The next response decides them (_weak_settle): a broker answers in order and clients number
    upwards, so those with a higher id than it are no frames (their bytes count as skipped), and
    the others go on as if never held. Behind responses held unproved after a SaslHandshake
    response, they join those instead."""
    weak = half.weak
    if not weak:
        return False
    entry = next((e for e in weak if e[0] == frame[0]), None)
    chain = entry[2] if entry is not None else -1
    if weak[0][2] != chain:
        _weak_settle(framer, conn, half, _BE32S.unpack_from(frame[4], 0)[0] if len(frame[4]) >= 4 else -1, chain)
    if entry is None or half.unproved_corr >= 0:
        return False
    entry[3] = frame
    return True


def _weak_settle(framer, conn: _Connection, half: _Half, corr: int, keep: int = -1) -> None:
    """The held frames of the weak chains before the one ending at ``keep``, decided by the id of
    the response after them (-1: none), and by the requests captured after them: a client sends
    a request with a higher id than those it sent before, so a response's id is no higher."""
    other = conn.halves[1 - half.side]
    for _, at, chain, held in half.weak:
        if chain == keep or held is None:
            continue
        held_corr = _BE32S.unpack_from(held[4], 0)[0]
        if 0 <= corr < held_corr or any(
            0 <= sent < held_corr and end > held[2] for sent, end in zip(other.request_corrs, other.request_ends)
        ):
            _weak_disproved(half, held, at)
        elif not _handshake_hold(framer, conn, half, held):
            framer._emit_out(conn, half.side, held)
    half.weak = [entry for entry in half.weak if entry[2] == keep]


def _weak_disproved(half: _Half, frame, at: int) -> None:
    """A weak chain's frame from stream offset ``at`` is no frame: its bytes count as skipped, and it
    takes no sequence number."""
    captured = 4 + len(frame[4])
    c = half.counters
    c["frames"] -= 1
    c["frame_bytes"] -= captured
    if at + captured <= half.mark_pos:
        half.early[0] -= 1
        half.early[1] -= captured
    half.count_skipped(captured, at)
    half.held_not_frames += 1


def _unproved_settle(framer, conn: _Connection, half: _Half, proof: int) -> None:
    """The held responses up to ``proof`` (the index of one answering a captured request;
    -1: every one, too many held) are decided: those whose ids rise from the handshake's
    to the proof's are emitted, the others are raw tokens; the ones after it stay held
    (-1: none)."""
    held = half.unproved
    last = held[proof] if proof >= 0 else None
    top = _BE32S.unpack_from(last[4], 0)[0] if last is not None else 1 << 31
    before = half.unproved_corr
    for frame in held[: proof + 1] if proof >= 0 else held:
        corr = _BE32S.unpack_from(frame[4], 0)[0] if len(frame[4]) >= 4 else -1
        if frame is last or before < corr < top:
            before = corr
            framer._emit_out(conn, half.side, frame)
        else:
            _unproved_token(half, frame)
    half.unproved_corr = -1
    half.unproved = held[proof + 1 :] if proof >= 0 else []


def _unproved_token(half: _Half, frame) -> None:
    """A held response never proved: counted as a raw SASL token, not a frame."""
    c = half.counters
    c["frames"] -= 1
    c["frame_bytes"] -= 4 + len(frame[4])
    c["sasl_tokens"] += 1
    c["sasl_bytes"] += 4 + len(frame[4])
    half.held_not_frames += 1


def _unproved_end(framer, conn: _Connection) -> None:
    """The connection ended (its requests all read): the held responses up to the last one
    answering a captured request are decided by it, the rest are raw tokens."""
    for half in conn.halves:
        _weak_settle(framer, conn, half, -1)  # no response after them: the requests after them decide
        other = conn.halves[1 - half.side]
        for index in range(len(half.unproved) - 1, -1, -1):
            corr = _BE32S.unpack_from(half.unproved[index][4], 0)[0] if len(half.unproved[index][4]) >= 4 else -1
            if corr >= 0 and corr in other.request_corrs:
                _unproved_settle(framer, conn, half, index)
                break
        for frame in half.unproved:
            _unproved_token(half, frame)
        half.unproved = []
        half.unproved_corr = -1

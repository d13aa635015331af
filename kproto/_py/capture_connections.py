"""The state of one TCP connection and of each of its directions (part of the capture
engine, kproto/_py/capture.py; compiled: kproto/_c/_capture_connections.pxi)."""

from __future__ import annotations

from collections import deque

from kproto._common.capture import HALF_COUNTERS, KIND_UNKNOWN


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
        # after the hole to prove it (Framer._cut_frame_proved): (end, size, captured payload, first ts, last ts)
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
        """A frame of ``frame_bytes`` captured bytes (with its size prefix) from stream offset ``at`` on."""
        self.counters["frames"] += 1
        self.counters["frame_bytes"] += frame_bytes
        if at + frame_bytes <= self.mark_pos:
            self.early[0] += 1
            self.early[1] += frame_bytes

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

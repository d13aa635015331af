"""Kafka frames out of a direction's byte stream (part of the capture engine,
kproto/_py/capture.py; compiled: kproto/_c/_capture_framer.pxi).

A frame is an int32 size and that many bytes. Where a stream's start was not captured
or a gap swallowed a frame's start, the framer searches for the next frame boundary
(resync): plausible headers are candidates, and one is taken only when confirmed
(``_confirm``), so record bytes that look like a header are never read as frames.
It also decides which side of a connection is the client (a correlation id the other
side sent, else which side sends request-like frames, else the higher port), and holds
the output batch.
"""

from __future__ import annotations

import struct

from kproto._common.capture import DIRECTION_REQUEST, DIRECTION_RESPONSE, KIND_KAFKA
from kproto._py import wire
from kproto._py.capture_batch import _FrameBatch
from kproto._py.capture_connections import (
    _all_requests_seen,
    _answer_seen,
    _answered,
    _chained_to,
    _Connection,
    _Half,
    _in_order,
    _request_after,
    _requested,
    _unproved_hold,
)
from kproto._py.capture_kinds import (
    _handshake_answer,
    _kind_before,
    _kind_frame,
    _kind_held,
    _sasl_handshake,
    _sasl_token,
)

_BE16 = struct.Struct(">H")
_BE32S = struct.Struct(">i")
_MAX_CORRS = 256
_MAX_UNDECIDED_FRAMES = 64
_MAX_CANDIDATES = 64
_CHAIN_CONFIRMS = 4
_RESPONSE_CHAIN_CONFIRMS = 16


class Framer:
    """Frames out of each direction's stream into the output batch: the engine's last stage
    (kproto/_common/capture_engine.py)."""

    _needed = 0  # where the last undecided _confirm waits for bytes (offset in its data)
    _tokens = None  # raw SASL tokens the last confirmed chain holds: (first, the frame after them), offsets in its data
    # the last confirmed chain: proved by the end of the data (not by a header after a strong one,
    # or its length), its links, and the id of its response answering a captured request (-1: none;
    # a response chain the end proves with none is weak: _weak_hold)
    _end_proved = False
    _links = 0
    _strong_corr = -1

    def __init__(self, settings) -> None:
        self.request_versions = settings.request_versions
        self.max_frame_size = settings.max_frame_size
        self.held_limit = settings.held_limit  # capture_kinds.py
        self.opened: list = []  # connections whose first frame was just emitted (take_endpoints)
        self.batch = _FrameBatch(settings.batch_frames, settings.batch_bytes)  # the frames found since take_batch

    def batch_ready(self) -> bool:
        """True when ``feed`` stopped because a batch is full."""
        return self.batch.ready()

    def take_batch(self):
        """Frames found since the last call, or None (capture_batch.py)."""
        return self.batch.take()

    # ------------------------------------------------------------------ frames
    def _request_ok(self, data, p: int, size: int) -> bool:
        """Does the frame payload at ``data[p:]`` (``size`` bytes long) start with a request header?"""
        # The wire layer reads the fixed part; the client id's bytes may not have arrived
        # yet, so only its length is checked.
        h = wire.WireHeader()
        try:
            wire.request_fixed(data, h, p, p + min(len(data) - p, size))
        except wire.WireError:
            return False
        if (
            not 0 <= h.api_key < len(self.request_versions)
            or not 0 <= h.api_version <= self.request_versions[h.api_key]
        ):
            return False
        if h.correlation_id < 0:
            return False
        if h.version == 0:  # no client id field
            return True
        if size < 10 or len(data) - p < 10:
            return False
        client_id = _BE16.unpack_from(data, p + 8)[0]
        if client_id >= 0x8000:
            return client_id == 0xFFFF  # null
        return client_id <= size - 10

    def _header_ok(self, conn: _Connection, half: _Half, data, i: int) -> int:
        """1 when a plausible frame header starts at i, 0 when not, -1 when more bytes are needed."""
        avail = len(data) - i
        if avail < 8:
            return -1
        size = _BE32S.unpack_from(data, i)[0]
        if size < 4 or size > self.max_frame_size:
            return 0
        if avail < min(14, 4 + size):
            return -1
        role = self._role(conn, half)
        if role != DIRECTION_RESPONSE and self._request_ok(data, i + 4, size):
            return 1
        corr = _BE32S.unpack_from(data, i + 4)[0]
        if role != DIRECTION_REQUEST and corr >= 0:
            other = conn.halves[1 - half.side]
            # every request is in hand: a response header answers one of them, or it is none
            if (
                role == DIRECTION_RESPONSE
                and _all_requests_seen(other) == 2
                and _request_after(other, half, half.buf_pos + i)
                and not _requested(other, corr, half, half.buf_pos + i)
            ):
                return 0
            return 1
        return 0

    @staticmethod
    def _role(conn: _Connection, half: _Half) -> int:
        if conn.client_side < 0:
            return -1
        return DIRECTION_REQUEST if conn.client_side == half.side else DIRECTION_RESPONSE

    def _strong(self, conn: _Connection, half: _Half, data, i: int) -> int:
        """1 when the plausible header at i is evidence of a boundary on its own: a whole
        request header (key and version known, header version, client id in UTF-8, tags),
        or a response to a request the other direction sent; 0 when not, -1 when the
        request header's bytes have not all arrived."""
        role = self._role(conn, half)
        if role != DIRECTION_REQUEST and _requested(
            conn.halves[1 - half.side], _BE32S.unpack_from(data, i + 4)[0], half, half.buf_pos + i
        ):
            return 1
        if role == DIRECTION_RESPONSE:
            return 0
        whole = self._whole_request_header(data, i)
        if (
            role < 0
            and whole > 0
            and not _answer_seen(conn, half, _BE32S.unpack_from(data, i + 8)[0], self.max_frame_size)
        ):
            return 0  # the direction unknown: a request header is evidence once the other side answers it
        return whole

    def _whole_request_header(self, data, i: int) -> int:
        """1 when the frame at i starts with a whole valid request header (key and
        version known, header version, client id in UTF-8, tags), 0 when not, -1 when
        its bytes have not all arrived."""
        size = _BE32S.unpack_from(data, i)[0]
        if not self._request_ok(data, i + 4, size):
            return 0
        end = i + 4 + size
        try:
            wire.request_header(data, wire.WireHeader(), i + 4, min(len(data), end))
        except wire.WireError as exc:
            return -1 if exc.status == wire.TRUNCATED and len(data) < end else 0
        return 1

    def _confirm(self, conn: _Connection, half: _Half, data, i: int, final: bool) -> int:
        """Is the plausible header at i a frame boundary? 1 yes, 0 no, -1 more bytes needed.

        Follows the chain of plausible headers, each at the size the one before
        announced: yes when a header of it is strong evidence and the header after
        it is plausible (or it is a frame of a SaslHandshake v0 exchange, proved by
        the other one: ``_sasl_handshake``), or the chain is _CHAIN_CONFIRMS headers long
        (_RESPONSE_CHAIN_CONFIRMS for responses), or (at the end) it ends exactly
        where the data does; no when a link is not plausible. A chain of responses
        must also read as a broker's answers (``_answers``): after a whole SaslHandshake
        response its links may be raw tokens (an int32 size, 0 too, and opaque bytes).
        """
        # a response header is only a size and an id: its chain must be longer
        # The direction unknown: the chain must read as requests (each link a request header)
        # or as a broker's answers, and be as long as a response chain.
        role = self._role(conn, half)
        response = role != DIRECTION_REQUEST
        requests = role < 0  # every link so far a request header
        hops = _RESPONSE_CHAIN_CONFIRMS if role == DIRECTION_RESPONSE else _CHAIN_CONFIRMS
        links = []  # response direction: the offsets of the chain's links
        handshake = -1  # the index in links of a whole successful SaslHandshake response
        plausible = 1  # what the link at i is plausible as: 1 a header, 2 only a raw token
        self._tokens = None
        self._end_proved, self._strong_corr = False, -1
        for self._links in range(1, hops + 1):
            strong = self._strong(conn, half, data, i) if plausible == 1 else 0
            if strong > 0 and role == DIRECTION_RESPONSE:
                self._strong_corr = _BE32S.unpack_from(data, i + 4)[0]
            if strong > 0 and _sasl_handshake(conn, half, data, i):
                return 1  # raw SASL tokens, not a header, follow it
            if response:
                links.append(i)
                requests = requests and plausible == 1 and self._request_ok(data, i + 4, _BE32S.unpack_from(data, i)[0])
                if (
                    handshake < 0
                    and plausible == 1
                    and _handshake_answer(data, i, _BE32S.unpack_from(data, i + 4)[0])
                    and _BE16.unpack_from(data, i + 8)[0] == 0
                ):
                    handshake = len(links) - 1
            after = i + 4 + _BE32S.unpack_from(data, i)[0]
            following = self._link_ok(conn, half, data, after, handshake >= 0) if after <= len(data) else -1
            if following < 0 or strong < 0:
                if final:
                    if after != len(data):
                        return 0
                    self._end_proved = True
                    return self._chain(conn, half, data, final, links, handshake, False, requests)
                self._needed = after
                return -1
            if not following:
                return 0
            if strong > 0:  # (the header after it must answer a later request too, where it can)
                return self._chain(
                    conn, half, data, final, links, handshake, True, requests, after if following == 1 else -1
                )
            i = after
            plausible = following
        return self._chain(conn, half, data, final, links, handshake, False, requests)

    def _link_ok(self, conn: _Connection, half: _Half, data, i: int, tokens: bool) -> int:
        """What the chain's link at i is plausible as: 1 a header (``_header_ok``), 2 only a raw
        SASL token (where ``tokens`` may come: an int32 size from 0 to max_frame_size), 0
        neither, -1 more bytes needed."""
        ok = self._header_ok(conn, half, data, i)
        if tokens and ok <= 0 and len(data) - i >= 4:
            size = _BE32S.unpack_from(data, i)[0]
            if 0 <= size < 4 or (ok == 0 and size <= self.max_frame_size):
                return 2
        return ok

    def _chain(
        self,
        conn: _Connection,
        half: _Half,
        data,
        final: bool,
        links: list,
        handshake: int,
        proved: bool,
        requests: bool,
        following: int = -1,
    ) -> int:
        """``_answers``, and where the requests are in hand (``_all_requests_seen``: all of them,
        or all since the request side's first confirmed frame), the chain's answers (its raw SASL
        tokens left out; then the header at ``following``, if not -1) answer requests still
        outstanding, each a later one than the one before (a broker answers each request once,
        in order); with only those since the first frame, from the first link that answers one
        on (the links before may answer requests sent before the capture began). A link that
        answers none waits (-1) until a request is captured after it (its own may be in a
        hole not known yet); at the end it is taken as it is, unless the request side ended
        with a FIN."""
        if not self._answers(data, links, handshake, proved, requests):
            return 0
        other = conn.halves[1 - half.side]
        seen = _all_requests_seen(other)
        if requests or self._role(conn, half) != DIRECTION_RESPONSE or not seen:
            return 1
        answers = links if self._tokens is None else links[: handshake + 1] + links[-1:]
        if following >= 0 and len(data) - following >= 8:
            answers = answers + [following]
        outstanding, at, wait, last = list(other.request_corrs), 0, False, -1
        for link in answers:
            if _BE32S.unpack_from(data, link)[0] < 4:
                continue
            corr = _BE32S.unpack_from(data, link + 4)[0]
            if seen == 1 and last < 0 and outstanding.count(corr) > 1:
                continue  # after a late start, an id reused: it may answer a request before the capture
            found = at
            while found < len(outstanding) and outstanding[found] != corr:
                found += 1
            if found < len(outstanding):
                at, last = found + 1, corr
            elif last >= 0 or seen == 2:
                # (at the end, after the request side's FIN and no gap, none is in a hole)
                if _request_after(other, half, half.buf_pos + link) or (final and 0 <= other.fin_pos <= other.next_pos):
                    return 0
                wait = not final
        if wait:
            self._needed = len(data)
            return -1
        return 1

    def _answers(self, data, links: list, handshake: int, proved: bool, requests: bool) -> int:
        """Does the response chain whose links start at ``links`` (empty: not a response
        chain) read as a broker's answers? 1 yes, 0 no. A broker answers a connection's
        requests in order, and clients number them upwards (or reuse one number), so the
        links' correlation ids never fall: raw tokens that chain into a real response read
        as no answers. After a whole successful SaslHandshake response (the link
        ``handshake``), the links up to a response to a request the other direction sent
        (``proved``: the chain's last link) may instead all be the raw tokens of a
        SaslHandshake v0 whose request was not captured: then the ids up to the handshake's
        and the last link's are in order, and ``self._tokens`` says where the tokens lie
        (offsets in data: the first token, the frame after them). ``requests``: the direction
        unknown, every link reads as a request header (a chain of requests, no answers)."""
        if requests:
            return 1
        corrs = [_BE32S.unpack_from(data, at + 4)[0] if _BE32S.unpack_from(data, at)[0] >= 4 else -1 for at in links]
        if _in_order(corrs):
            return 1
        if 0 <= handshake < len(links) - 1 and proved and _in_order(corrs[: handshake + 1] + corrs[-1:]):
            self._tokens = (links[handshake + 1], links[-1])
            return 1
        return 0

    def _inside_strong(self, conn: _Connection, half: _Half, waiting: list, position: int) -> bool:
        """Is ``position`` inside the frame a waiting strong candidate announces? Then it
        cannot win before that candidate is decided: a real frame's payload must not be
        read as frames because the frame's own end has not arrived yet."""
        buf, base = half.buf, half.buf_pos
        return any(
            c < position < c + 4 + _BE32S.unpack_from(buf, c - base)[0] and self._strong(conn, half, buf, c - base) == 1
            for c, _ in waiting
        )

    def _scan(self, conn: _Connection, half: _Half, final: bool) -> bool:
        """Drop bytes until buf starts at a confirmed frame boundary; False if more bytes are needed.

        A known boundary (the end of a frame a gap cut) is taken as it is. Otherwise
        every plausible header is a candidate, kept (up to _MAX_CANDIDATES; the one
        waiting for the farthest byte goes first) until the bytes that decide it
        arrive, so a false one with a huge size holds up nothing: the first candidate
        confirmed wins, unless it lies inside the frame a strong candidate still
        waiting announces. The bytes before the winner are skipped.
        """
        buf = half.buf
        base = half.buf_pos
        if half.boundary >= 0:
            skip = min(half.boundary - base, len(buf))
            if skip:
                half.count_skipped(skip, base)
                half.drop(skip)
            if half.boundary > half.buf_pos:
                return False
            half.boundary = -1
            half.candidates = []
            half.synced = True
            return True
        # a frame a hole cut, still waiting for its end, does not hold the search up: a boundary
        # the search confirms inside it first disproves it
        if half.cut_frame is not None and self._cut_frame_proved(conn, half, final) > 0:
            return True
        found = -1
        waiting = []  # candidates still open, and the stream offset their decision waits for
        for candidate in half.candidates:
            decided = self._confirm(conn, half, buf, candidate - base, final)
            if decided > 0 and not self._inside_strong(conn, half, waiting, candidate):
                found = candidate
                break
            if decided:
                waiting.append((candidate, base + self._needed if decided < 0 else candidate))
        if found < 0:
            i = min(max(0, half.scan_from - base), len(buf))
            while i < len(buf):
                ok = self._header_ok(conn, half, buf, i)
                if ok < 0:
                    if final:
                        i = len(buf)
                    break
                if ok:
                    decided = self._confirm(conn, half, buf, i, final)
                    if decided > 0 and not self._inside_strong(conn, half, waiting, base + i):
                        found = base + i
                        break
                    if decided:
                        waiting.append((base + i, base + self._needed if decided < 0 else base + i))
                        if len(waiting) > _MAX_CANDIDATES:
                            # the one waiting for the farthest byte is the likeliest false
                            waiting.remove(max(waiting, key=lambda entry: (entry[1], entry[0])))
                i += 1
            half.scan_from = base + i
        response = self._role(conn, half) == DIRECTION_RESPONSE
        if found >= 0 and final and response:
            found = self._strongest_inside(conn, half, found, final)
        if found >= 0:
            half.candidates = []
            half.cut_frame = None
            keep_from = found
            if self._tokens is not None:  # the winner's chain holds raw SASL tokens: _cut skips them
                half.tokens_from, half.tokens_to = (base + at for at in self._tokens)
            # a weak winner: only the end proves its chain, and no link answers a captured request
            half.weak_end = base + len(buf) if response and self._end_proved and self._strong_corr < 0 else -1
        else:
            half.candidates = [candidate for candidate, _ in waiting]
            keep_from = waiting[0][0] if waiting else half.scan_from
        if keep_from > base:
            half.count_skipped(keep_from - base, base)
            half.drop(keep_from - base)
        if found >= 0:
            half.synced = True
        return found >= 0

    def _strongest_inside(self, conn: _Connection, half: _Half, found: int, final: bool) -> int:
        """At the end of the data (or a hole), a response chain that only that end proves yields to the first
        candidate inside its frame whose chain answers a later captured request than its own (or,
        neither answering one, is longer): a false header in an ApiVersions response's entries,
        whose size happens to reach the end, must not swallow the answers after it. The winner,
        _confirm's state its own."""
        buf, base = half.buf, half.buf_pos
        while self._end_proved:
            at, corr, links = found - base, self._strong_corr, self._links
            end = at + 4 + _BE32S.unpack_from(buf, at)[0]
            better = -1
            for i in range(at + 1, end - 7):
                if (
                    self._header_ok(conn, half, buf, i) == 1
                    and self._confirm(conn, half, buf, i, final) > 0
                    and (self._strong_corr > corr or self._strong_corr == corr < 0 and self._links > links)
                ):
                    better = i
                    break
            self._confirm(conn, half, buf, at if better < 0 else better, final)  # the winner's state
            if better < 0:
                break
            found = base + better
        return found

    def _cut(self, conn: _Connection, half: _Half, final: bool) -> None:
        """Cut complete frames off the front of buf."""
        while True:
            if conn.kind != KIND_KAFKA and _kind_before(conn, half, final):
                return
            if not half.synced and not self._scan(conn, half, final):
                return
            buf = half.buf
            if len(buf) < 4:
                return
            size = _BE32S.unpack_from(buf, 0)[0]
            if half.tokens_to >= 0 and half.buf_pos >= half.tokens_from:
                # raw SASL tokens a late start's chain proved (_confirm, _answers) end at tokens_to
                half.sasl = half.buf_pos < half.tokens_to
                if not half.sasl:
                    half.tokens_to = -1
            if half.sasl and 0 <= size <= self.max_frame_size:
                token = _sasl_token(self, conn, half, size, final)
                if token < 0:
                    return
                if token:
                    continue
            if size < 4 or size > self.max_frame_size:
                half.synced = False
                half.counters["resyncs"] += 1
                half.scan_from = half.buf_pos + 1
                continue
            if len(buf) < 4 + size:
                return
            self._frame(conn, half, size, size)

    def _frame(self, conn: _Connection, half: _Half, size: int, captured: int) -> None:
        """Emit the frame at the front of buf (its size prefix and ``captured`` bytes of
        its payload: fewer than ``size`` when a gap or the snap length cut it) and drop
        it from buf. A cut frame says what it can about its connection's kind too."""
        buf = half.buf
        first_ts = last_ts = None
        frame_end = half.buf_pos + 4 + captured
        for chunk_end, ts in half.chunks:
            if first_ts is None and chunk_end > half.buf_pos:
                first_ts = ts
            if chunk_end >= frame_end:
                last_ts = ts
                break
        self._frame_out(conn, half, size, bytes(buf[4 : 4 + captured]), first_ts, last_ts, 4 + captured, half.buf_pos)

    def _frame_out(
        self, conn: _Connection, half: _Half, size: int, payload: bytes, first_ts, last_ts, held: int, at: int
    ) -> bool:
        """Count and emit (or hold until the connection is known) a frame: its size and captured
        ``payload``, from stream offset ``at``; ``held``: its bytes at the front of buf, dropped once
        it is counted (0: a cut frame kept aside, _cut_frame_proved). False when it showed another protocol."""
        request_like = self._request_ok(payload, 0, size)
        _kind_frame(conn, half, payload, size, request_like, last_ts if last_ts is not None else 0)
        if conn.kind > KIND_KAFKA:
            return False  # this frame showed another protocol: its bytes went with the rest
        half.drop(held)
        half.count_frame(4 + len(payload), at)
        frame = (half.sequence, first_ts, last_ts, size, payload)
        half.sequence += 1
        if request_like:
            if half.whole_requests == conn.request_like[half.side] and half.whole_from_syn():
                half.whole_requests += 1
            half.request_corrs.append(_BE32S.unpack_from(payload, 4)[0])
            half.request_ends.append(last_ts if last_ts is not None else 0)
            if len(half.request_corrs) > _MAX_CORRS:
                half.request_corrs.popleft()
                half.request_ends.popleft()
            conn.request_like[half.side] += 1
        if conn.client_side < 0 or conn.kind != KIND_KAFKA or conn.undecided:
            self._infer(conn, half, frame)
        else:
            if conn.client_side != half.side and _unproved_hold(self, conn, half, frame):
                return True
            self._emit_out(conn, half.side, frame)
        return True

    def _cut_candidate(self, conn: _Connection, half: _Half, hole_end: int):
        """A strong candidate in buf whose frame runs at least to the end of the hole after buf (a snap
        length cut the rest of its packet, a gap the rest of its frame), kept aside for _cut_frame_proved
        until reading reaches its end, past any holes: (its end, frames), or None (also when buf is a
        boundary, raw SASL tokens, another protocol)."""
        if half.synced or half.boundary >= 0 or half.sasl or conn.kind > KIND_KAFKA:
            return None
        buf, base = half.buf, half.buf_pos
        for i in range(len(buf) - 7):
            size = _BE32S.unpack_from(buf, i)[0]
            if (
                size >= hole_end - base - i - 4
                and self._header_ok(conn, half, buf, i) == 1
                and self._strong(conn, half, buf, i) == 1
            ):
                cut = (size, bytes(buf[i + 4 :]), half.captured_at(base + i), half.chunks[-1][1], base + i)
                return base + i + 4 + size, _chained_to(self, conn, half, i, _RESPONSE_CHAIN_CONFIRMS) + [cut]
        return None

    def _cut_frame_proved(self, conn: _Connection, half: _Half, final: bool) -> int:
        """Is the frame a hole cut (``half.cut_frame``, its bytes counted as skipped meanwhile) proved
        by a plausible header at its end, as _confirm proves a strong candidate by the header after
        it (at the end: the data ends there)? 1 yes (emitted after the frames chained to it; buf
        starts at its end: the bytes before, past a hole, are its own, skipped), 0 no (their bytes
        stay skipped), -1 more bytes needed (at a hole, _gap keeps it if it ends after the hole)."""
        end, frames = half.cut_frame
        inside = end - half.buf_pos
        if inside > len(half.buf):
            return -1  # reading has not reached its end
        ok = self._header_ok(conn, half, half.buf, inside) if inside >= 0 else 0
        if ok < 0 and final:
            ok = 0 if len(half.buf) > inside else 1
        if ok < 0:
            return -1
        half.cut_frame = None
        if ok and inside:
            half.count_skipped(inside, half.buf_pos)
            half.drop(inside)
        for size, payload, first_ts, last_ts, at in frames if ok else ():  # those chained to it, then itself
            half.count_skipped(-(4 + len(payload)), at)
            if not self._frame_out(conn, half, size, payload, first_ts, last_ts, 0, at):
                half.counters["other_bytes"] += 4 + len(payload)  # _not_kafka moved the rest
                break
        if ok:
            half.candidates = []
            half.synced = True
        return ok

    def _infer(self, conn: _Connection, half: _Half, frame) -> None:
        """Hold a frame until the connection's direction and kind are known."""
        conn.undecided.append((half.side, frame))
        conn.held_bytes += len(frame[4])
        other = conn.halves[1 - half.side]
        if conn.client_side < 0:
            if len(frame[4]) >= 4 and _BE32S.unpack_from(frame[4], 0)[0] in other.request_corrs:
                conn.client_side, conn.direction_source = 1 - half.side, 2  # a correlation
            elif len(conn.undecided) >= _MAX_UNDECIDED_FRAMES:
                self._guess(conn)
        _kind_held(conn, self.held_limit)
        self._release(conn)

    def _guess(self, conn: _Connection) -> None:
        like = conn.request_like
        if like[0] != like[1]:
            side = 0 if like[0] > like[1] else 1
        else:  # clients use the ephemeral (higher) port
            side = 0 if conn.endpoints[0][1] >= conn.endpoints[1][1] else 1
        conn.client_side, conn.direction_source = side, 3

    def _release(self, conn: _Connection) -> None:
        """Emit the held frames once the direction is known and the connection is Kafka."""
        if conn.client_side < 0 or conn.kind != KIND_KAFKA or not conn.undecided:
            return
        for side, frame in conn.undecided:
            self._emit(conn, side, frame)
        conn.undecided = []
        conn.held_bytes = 0

    def _emit(self, conn: _Connection, side: int, frame) -> None:
        if side != conn.client_side and _unproved_hold(self, conn, conn.halves[side], frame):
            return
        self._emit_out(conn, side, frame)

    def _emit_out(self, conn: _Connection, side: int, frame) -> None:
        sequence, first_ts, last_ts, size, payload = frame
        if side != conn.client_side and len(payload) >= 4:  # a response answers its request
            _answered(conn.halves[1 - side], _BE32S.unpack_from(payload, 0)[0])
        if not conn.told:  # its first frame: say who talks (the connection row comes at its close)
            conn.told = True
            self.opened.append(conn)
        direction = DIRECTION_REQUEST if side == conn.client_side else DIRECTION_RESPONSE
        sequence -= conn.halves[side].held_not_frames
        self.batch.add(conn.id, direction, sequence, first_ts, last_ts, size, payload)

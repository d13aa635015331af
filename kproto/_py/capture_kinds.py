"""Which protocol a connection speaks, and SASL's raw tokens (part of the capture engine,
kproto/_py/capture.py; compiled: kproto/_c/_capture_kinds.pxi).

A connection is Kafka only once its frames confirm it; until then its frames are held
(with the frames waiting for the direction). The evidence, in order:

* a signature of another protocol ends the question: TLS from its record layer
  (content type 20-23, version 3.1-3.4, a length: a ClientHello or ServerHello at a
  stream's start, or two records that chain; a stream caught mid-way is looked at again
  with its new bytes while its connection is undecided), HTTP (a method or "HTTP/1." at
  the front), ZooKeeper (its connect request or response at a stream's start, or a
  ping: xid -2). The connection's bytes are then counted as ``other_bytes`` and dropped
  as they come, so its buffers stay bounded.
* Kafka is confirmed by a response whose correlation id is that of an ApiVersions or
  SaslHandshake request; by two responses whose correlation ids the other side sent as
  requests (one on a broker port); by four request headers in a row with rising
  correlation ids (a producer with acks=0, or a capture of one direction). A pair counts
  only as Kafka answers (``_pair_counts``): its request's id is the only one of its value
  among the requests seen, and higher than the last counted pair's, whose response came
  before this one's (a broker answers a connection's requests in order). ZooKeeper's
  operation codes, read where a correlation id would be, repeat, and its answers' ids
  run on past them: caught mid-way, its frames would otherwise pair.
* at the end (or when more than ``HELD_FRAMES`` frames or a frame's worth of bytes are
  held), one matched pair is enough; a connection on a broker port needs none (the
  user said it is Kafka; a signature still overrides); any other is "other" ("empty"
  when it carried no bytes).
* a port forced with ``kafka_ports`` is Kafka from its first byte.

SASL (KIP-43): after a SaslHandshake v0 request, the client sends raw tokens (an int32
size, possibly 0, and opaque bytes; no Kafka header) until its next request header; after
the handshake's successful response, the broker answers with raw tokens until a response
to a request sent after them. Tokens are counted (``sasl_tokens``, ``sasl_bytes``), never
framed: they take no sequence number, so requests and responses still pair in order. A
capture that began after the handshake's request: the framer's chain from the handshake's
response through the tokens to a response to a captured request proves the broker's tokens
(``Framer._answers``: the half's ``tokens_from``, ``tokens_to``).
"""

from __future__ import annotations

import struct

from kproto._common.api_keys import SASL_RAW_TOKENS_HANDSHAKE_VERSION, ApiKey
from kproto._common.capture import KIND_EMPTY, KIND_HTTP, KIND_KAFKA, KIND_OTHER, KIND_TLS, KIND_UNKNOWN, KIND_ZOOKEEPER

_BE16 = struct.Struct(">H")
_BE32S = struct.Struct(">i")

API_SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)  # plain ints: compared per frame
API_API_VERSIONS = int(ApiKey.API_VERSIONS)
RUN_TO_CONFIRM = 4  # request headers in a row with rising correlation ids
HELD_FRAMES = 1024  # frames held without a confirmation before deciding as at the end
TLS_MAX_RECORD = 18432  # 2^14 + 2048: the largest record length TLS allows (ciphertext)
TLS_REACH = 5 + TLS_MAX_RECORD  # a record boundary is within this many bytes of any point
ZK_PASSWORD_MAX = 64
SNIFF_BYTES = 8  # every Kafka frame is at least this long
HTTP_STARTS = (
    b"GET ",
    b"POST ",
    b"PUT ",
    b"HEAD ",
    b"DELETE ",
    b"OPTIONS ",
    b"PATCH ",
    b"CONNECT ",
    b"TRACE ",
    b"HTTP/1.",
    b"PRI * HT",
)


def tls_record(data, p: int) -> int:
    """The length of a TLS record whose 5-byte header starts at p, or -1."""
    if len(data) - p < 5:
        return -1
    if not 20 <= data[p] <= 23 or data[p + 1] != 3 or not 1 <= data[p + 2] <= 4:
        return -1
    length = (data[p + 3] << 8) | data[p + 4]
    return length if 0 < length <= TLS_MAX_RECORD else -1


def _zookeeper_connect(data, n: int) -> int:
    """1 when data[:n] starts with a ZooKeeper connect request or response, 0 when not,
    -1 when its frame is not complete yet."""
    size = _BE32S.unpack_from(data, 0)[0]
    # request: protocolVersion, lastZxidSeen (8), timeOut, sessionId (8), passwd; response:
    # protocolVersion, timeOut, sessionId (8), passwd; both maybe a readOnly byte. Offsets
    # below are the payload's (after the size).
    if not 20 <= size <= 28 + ZK_PASSWORD_MAX + 1:
        return 0
    if n < 4 + size:
        return -1
    if _BE32S.unpack_from(data, 4)[0] != 0:
        return 0
    for timeout_at, password_at in ((12, 24), (4, 16)):
        if password_at + 4 > size:
            continue
        password = _BE32S.unpack_from(data, 4 + password_at)[0]
        if (
            _BE32S.unpack_from(data, 4 + timeout_at)[0] > 0
            and 0 <= password <= ZK_PASSWORD_MAX
            and size - password_at - 4 - password in (0, 1)
        ):
            return 1
    return 0


def sniff(data, at_start: bool, final: bool) -> int:
    """The kind a direction's first bytes show: TLS, HTTP or ZooKeeper; 0 for none (the
    frames decide); -1 when more bytes are needed. ``at_start``: data is the stream's
    first byte on (the SYN was seen)."""
    n = len(data)
    if n < SNIFF_BYTES and not final:
        return -1
    for start in HTTP_STARTS:
        if data[: len(start)] == start:
            return KIND_HTTP
    if at_start:
        length = tls_record(data, 0)
        if length >= 0 and data[0] == 22 and n > 5 and data[5] in (1, 2):
            return KIND_TLS  # a ClientHello or ServerHello
        if n >= 4:
            zk = _zookeeper_connect(data, n)
            if zk < 0 and not final:
                return -1
            if zk > 0:
                return KIND_ZOOKEEPER
    # Two TLS records that chain, somewhere in the first record's reach (a stream caught
    # mid-way); wait only while a record header's successor is beyond the bytes.
    pending = False
    for p in range(min(n - 4, TLS_REACH)):
        length = tls_record(data, p)
        if length < 0:
            continue
        if p + 5 + length + 5 <= n:
            if tls_record(data, p + 5 + length) >= 0:
                return KIND_TLS
        else:
            pending = True
    return -1 if pending and not final else 0


def _answered_already(conn, side: int, corr: int, request_end_ts: int) -> int:
    """The sequence number of the first frame the other side sent after this request (its
    first byte captured no earlier than the request's last), held undecided, that is a
    response with this correlation id; -1 when none is. (One sent before the request cannot
    answer it: a protocol whose request ids rise, as ZooKeeper's, would otherwise pair its
    requests with old responses.)"""
    if corr < 0:
        return -1
    for held_side, frame in conn.undecided:
        if (
            held_side != side
            and frame[1] >= request_end_ts
            and len(frame[4]) >= 4
            and _BE32S.unpack_from(frame[4], 0)[0] == corr
        ):
            return frame[0]
    return -1


def _handshake_answer(data, p: int, corr: int) -> bool:
    """Does a whole SaslHandshake response with this correlation id start at data[p]: an
    error code, then its array of mechanism names filling the frame exactly?"""
    if len(data) - p < 14:
        return False
    size = _BE32S.unpack_from(data, p)[0]
    if not 10 <= size <= len(data) - p - 4 or _BE32S.unpack_from(data, p + 4)[0] != corr:
        return False
    q, end = p + 14, p + 4 + size
    for _ in range(_BE32S.unpack_from(data, p + 10)[0]):  # each name takes 2 bytes at least
        if q + 2 > end:
            return False
        q += 2 + _BE16.unpack_from(data, q)[0]
    return q == end


def _handshake_held(conn, side: int, corr: int) -> int:
    """The other side's frames were cut first: does it hold undecided a successful response
    (its error code 0) to the SaslHandshake v0 request with this correlation id? 1 as its last
    frame, so its next bytes are raw tokens; 2 with frames cut after it, which may be raw tokens
    read as frames (``_handshake_hold`` decides them); 0 no."""
    held = [frame[4] for held_side, frame in conn.undecided if held_side != side]
    for index, payload in enumerate(held):
        if len(payload) >= 6 and _BE32S.unpack_from(payload, 0)[0] == corr and _BE16.unpack_from(payload, 4)[0] == 0:
            return 1 if index == len(held) - 1 else 2
    return 0


def _pair_counts(conn, corr: int, response_sequence: int, seen: int) -> bool:
    """Does a request with this correlation id and the response numbered ``response_sequence``
    count as a Kafka pair? Only as a broker answers: the id is the only one of its value
    among the requests seen (``seen``: how many hold it, this one included) and higher than
    the last counted pair's, and the response comes after that pair's. A counted pair is
    remembered."""
    if seen != 1 or corr <= conn.pair_corr or response_sequence <= conn.pair_response:
        return False
    conn.pair_corr = corr
    conn.pair_response = response_sequence
    conn.matched += 1
    return True


# The framer's kind and SASL steps: functions it calls at its few hooks (as the compiled
# engine's _capture_kinds.pxi), so the framer's own logic stays its own.
def _kind_before(conn, half, final: bool) -> bool:
    """Before framing a direction's bytes: True when there is nothing to frame now
    (another protocol's bytes were counted and dropped, or the first bytes must wait)."""
    if conn.kind > KIND_KAFKA:
        c = half.counters
        # (a gap skips what it holds: here that is the other protocol's bytes too)
        c["other_bytes"] += len(half.buf) + c["skipped_bytes"]
        c["skipped_bytes"] = 0
        half.drop(len(half.buf))
        return True
    if half.sniffed:
        return False
    at_start = half.isn >= 0 and half.buf_pos == 0
    kind = sniff(half.buf, at_start, final)
    if kind < 0:
        return True
    if kind == 0:
        # A stream's start is looked at once; a stream caught mid-way again with each
        # new bytes until the connection is known (a TLS record may begin further on).
        half.sniffed = at_start
        return False
    half.sniffed = True
    _not_kafka(conn, kind)
    return True


def _sasl_handshake(conn, half, data, i: int) -> bool:
    """Is the strong header at i (in half's buf) a frame of a SaslHandshake v0 exchange,
    proved by the other one, so raw tokens rather than a header may follow it? A whole
    SaslHandshake v0 request whose response (whole, with its correlation id) the other
    direction holds in bytes captured after the request's last; or the response to
    such a request (the other direction's ``sasl_corr``, sent before it), whole: an id
    alone, in record bytes after a gap, is no evidence."""
    other = conn.halves[1 - half.side]
    size = _BE32S.unpack_from(data, i)[0]
    if conn.client_side != half.side and other.sasl_corr >= 0 and _handshake_answer(data, i, other.sasl_corr):
        return True
    end = i + 4 + size
    if (
        conn.client_side not in (-1, half.side)
        or size < 8
        or end > len(data)
        or _BE16.unpack_from(data, i + 4)[0] != API_SASL_HANDSHAKE
        or _BE16.unpack_from(data, i + 6)[0] != SASL_RAW_TOKENS_HANDSHAKE_VERSION
    ):
        return False
    corr = _BE32S.unpack_from(data, i + 8)[0]
    sent = half.captured_at(half.buf_pos + end - 1)
    wanted, buf = data[i + 8 : i + 12], other.buf
    at = buf.find(wanted, 4)
    while at >= 0:
        if _handshake_answer(buf, at - 4, corr) and other.captured_at(other.buf_pos + at - 4) >= sent:
            return True
        at = buf.find(wanted, at + 1)
    for _, held, ts in other.pending:  # or in the bytes it holds after a hole (not in its buf yet)
        at = held.find(wanted, 4) if ts >= sent else -1
        while at >= 0:
            if _handshake_answer(held, at - 4, corr):
                return True
            at = held.find(wanted, at + 1)
    return False


def _sasl_token(framer, conn, half, size: int, final: bool) -> int:
    """In a SASL exchange, the frame at the front of buf: 1 when it was a raw token
    (counted and dropped), 0 when it is Kafka again, -1 when it is not complete or
    cannot be decided yet."""
    buf = half.buf
    if len(buf) < 4 + size:
        return -1
    other = conn.halves[1 - half.side]
    if conn.client_side in (-1, half.side):  # (unknown: a request header ends the client's tokens)
        if size >= 4 and framer._request_ok(buf, 4, size):
            half.sasl = False
            return 0
    elif half.tokens_to >= 0:
        pass  # a token its chain proved (Framer._answers): the response after them ends them
    elif not other.sasl and size >= 4 and _BE32S.unpack_from(buf, 4)[0] in other.request_corrs:
        half.sasl = False
        return 0
    elif other.sasl and (other.pending or not other.synced) and not final and len(buf) <= framer.held_limit:
        # The client's side is still in its tokens behind a hole: its next request (the
        # one this may answer) is read once the hole is given up on; wait for it.
        return -1
    half.counters["sasl_tokens"] += 1
    half.counters["sasl_bytes"] += 4 + size
    half.drop(4 + size)
    return 1


def _kind_frame(conn, half, payload, size: int, request_like: bool, last_ts: int) -> None:
    """What a frame just cut says about its connection: SASL's start, Kafka or ZooKeeper.
    ``payload`` may be shorter than ``size`` (a gap or the snap length cut the frame):
    only the bytes captured are read; ``last_ts``: when its last byte was captured."""
    other = conn.halves[1 - half.side]
    captured = len(payload)
    corr = _BE32S.unpack_from(payload, 0)[0] if captured >= 4 else -1
    # A response's first bytes can read as a request header: the direction, once known, decides.
    as_request = request_like and conn.client_side in (-1, half.side)
    as_response = conn.client_side != half.side
    request_corr = _BE32S.unpack_from(payload, 4)[0] if as_request else -1
    if as_request:
        api_key, api_version = _BE16.unpack_from(payload, 0)[0], _BE16.unpack_from(payload, 2)[0]
        if api_key in (API_SASL_HANDSHAKE, API_API_VERSIONS):
            half.hello_corr = request_corr
        # (the direction unknown yet: the handshake request says which side is the client)
        if api_key == API_SASL_HANDSHAKE and api_version == SASL_RAW_TOKENS_HANDSHAKE_VERSION and half.sequence < 8:
            half.sasl = True  # raw tokens follow (or nothing, if the broker refuses)
            half.sasl_corr = request_corr
            held = _handshake_held(conn, half.side, request_corr)
            if held:
                half.sasl_corr = -1  # its response came first: the broker's tokens follow it
                other.sasl = held == 1
                other.handshake_first = request_corr if held == 2 else -1
    if as_response and other.sasl_corr >= 0 and corr == other.sasl_corr and captured >= 6:
        other.sasl_corr = -1  # the handshake's response: tokens follow when it succeeded
        if _BE16.unpack_from(payload, 4)[0] == 0:
            half.sasl = True
        else:
            other.sasl = False
    if conn.kind != KIND_UNKNOWN:
        return
    if corr == -2 and ((size == 8 and captured == 8 and _BE32S.unpack_from(payload, 4)[0] == 11) or size == 16):
        _not_kafka(conn, KIND_ZOOKEEPER)  # a ZooKeeper ping or its response
        return
    if as_response and corr >= 0 and _pair_counts(conn, corr, half.sequence, other.request_corrs.count(corr)):
        if corr == other.hello_corr or conn.matched >= 2 or conn.direction_source == 0:
            conn.kind = KIND_KAFKA
            return
    answer = _answered_already(conn, half.side, request_corr, last_ts) if as_request else -1
    if answer >= 0 and _pair_counts(conn, request_corr, answer, half.request_corrs.count(request_corr) + 1):
        # the pair in the other order: its response was confirmed first (a stream caught
        # mid-way, confirmed by a chain or at the end, before this request's own)
        if conn.client_side < 0:
            conn.client_side = half.side
            conn.direction_source = 2
        if conn.matched >= 2 or conn.direction_source == 0:
            conn.kind = KIND_KAFKA
            return
    if as_request:
        half.run = half.run + 1 if half.run and request_corr > half.run_corr else 1
        half.run_corr = request_corr
        if half.run >= RUN_TO_CONFIRM:
            conn.kind = KIND_KAFKA
    else:
        half.run = 0


def _kind_held(conn, held_limit: int) -> None:
    """Too much held without a confirmation: decided as at the end."""
    if conn.kind == KIND_UNKNOWN and (len(conn.undecided) >= HELD_FRAMES or conn.held_bytes > held_limit):
        _kind_end(conn)


def _kind_end(conn) -> None:
    """The connection ended (its tails counted), or held too much: what it is, if
    nothing said so yet. A broker port's connection is Kafka unless a signature said
    otherwise; another port's needs one pair matched."""
    if conn.kind != KIND_UNKNOWN:
        return
    if conn.matched or conn.direction_source == 0:
        conn.kind = KIND_KAFKA
    elif any(half.counters["stream_bytes"] for half in conn.halves):
        _not_kafka(conn, KIND_OTHER)
    else:
        _not_kafka(conn, KIND_EMPTY)


def _not_kafka(conn, kind: int) -> None:
    """The connection is another protocol: every byte it had is ``other_bytes`` (none
    of its frames was emitted: they were held), and so is every later byte."""
    conn.kind = kind
    conn.undecided = []
    conn.held_bytes = 0
    for half in conn.halves:
        c = half.counters
        c["other_bytes"] += c["frame_bytes"] + c["skipped_bytes"] + c["tail_bytes"] + c["sasl_bytes"] + len(half.buf)
        for name in ("frames", "frame_bytes", "skipped_bytes", "tail_bytes", "sasl_tokens", "sasl_bytes"):
            c[name] = 0
        half.drop(len(half.buf))
        half.synced = True  # nothing is searched for any more
        half.cut_frame = None

"""Kafka frames out of a direction's byte stream (part of the capture engine,
kproto/_py/capture.py; compiled: kproto/_c/_capture_framer.pxi).

A frame is an int32 size and that many bytes. Where a stream's start was not captured
or a gap cut a frame, the framer scans for the next plausible frame header (resync).
It also decides which side of a connection is the client (a correlation id the other
side sent, else which side sends request-like frames, else the higher port), and holds
the output batch.
"""

from __future__ import annotations

import struct

import numpy as np

from kproto._common.capture import DIRECTION_REQUEST, DIRECTION_RESPONSE, FRAME_COLUMNS, KIND_KAFKA
from kproto._py import wire
from kproto._py.capture_connections import _Connection, _Half
from kproto._py.capture_kinds import Kinds

_BE16 = struct.Struct(">H")
_BE32S = struct.Struct(">i")
_MAX_CORRS = 256
_MAX_UNDECIDED_FRAMES = 64


class Framer(Kinds):
    """Frames out of each direction's stream into the output batch (settings: Engine)."""

    request_versions: list[int]
    max_frame_size: int
    max_pending_bytes: int
    batch_frames: int
    batch_bytes: int
    out: dict[str, list]
    out_bytes: int

    def _reset_batch(self) -> None:
        self.out = {name: [] for name in FRAME_COLUMNS}
        self.out_bytes = 0

    def batch_ready(self) -> bool:
        """True when ``feed`` stopped because a batch is full."""
        return len(self.out["size"]) >= self.batch_frames or self.out_bytes >= self.batch_bytes

    def take_batch(self):
        """Frames found since the last call, or None: a dict of numpy columns plus
        ``payload_offsets`` (int32, n + 1) and ``payload_data`` (bytes)."""
        out = self.out
        if not out["size"]:
            return None
        payloads = out["payload"]
        offsets = np.zeros(len(payloads) + 1, dtype=np.int32)
        np.cumsum([len(p) for p in payloads], out=offsets[1:])
        batch = {
            "connection_id": np.array(out["connection_id"], dtype=np.int64),
            "direction": np.array(out["direction"], dtype=np.int8),
            "sequence": np.array(out["sequence"], dtype=np.int64),
            "ts_first_ns": np.array(out["ts_first_ns"], dtype=np.int64),
            "ts_last_ns": np.array(out["ts_last_ns"], dtype=np.int64),
            "size": np.array(out["size"], dtype=np.int32),
            "payload_offsets": offsets,
            "payload_data": b"".join(payloads),
        }
        self._reset_batch()
        return batch

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
        if not 0 <= h.api_key < len(self.request_versions) or not 0 <= h.api_version <= self.request_versions[h.api_key]:
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
        role = -1 if conn.client_side < 0 else (DIRECTION_REQUEST if conn.client_side == half.side
                                                 else DIRECTION_RESPONSE)
        if role != DIRECTION_RESPONSE and self._request_ok(data, i + 4, size):
            return 1
        if role != DIRECTION_REQUEST and _BE32S.unpack_from(data, i + 4)[0] >= 0:
            return 1
        return 0

    def _scan(self, conn: _Connection, half: _Half, final: bool) -> bool:
        """Drop bytes until buf starts at a plausible frame boundary; False if more bytes are needed.

        A candidate is confirmed by a correlation id the other direction sent as a
        request, or by the next frame's header, or (at the end) by ending exactly
        where the data does.
        """
        buf = half.buf
        i = min(max(0, half.scan_from - half.buf_pos), len(buf))
        found = False
        other = conn.halves[1 - half.side]
        while i < len(buf):
            ok = self._header_ok(conn, half, buf, i)
            if ok < 0:
                if final:
                    i = len(buf)
                break
            if ok:
                after = i + 4 + _BE32S.unpack_from(buf, i)[0]
                confirmed = _BE32S.unpack_from(buf, i + 4)[0] in other.request_corrs
                if not confirmed:
                    next_ok = self._header_ok(conn, half, buf, after) if after <= len(buf) else -1
                    if next_ok < 0:
                        if not final:
                            break  # wait for the bytes that decide
                        confirmed = after <= len(buf)
                    else:
                        confirmed = next_ok == 1
                if confirmed:
                    found = True
                    break
            i += 1
        half.scan_from = max(half.scan_from, half.buf_pos + i)
        if i:
            half.counters["skipped_bytes"] += i
            half.drop(i)
        if found:
            half.synced = True
        return found

    def _cut(self, conn: _Connection, half: _Half, final: bool) -> None:
        """Cut complete frames off the front of buf."""
        while True:
            if conn.kind != KIND_KAFKA and self._kind_before(conn, half, final):
                return
            if not half.synced and not self._scan(conn, half, final):
                return
            buf = half.buf
            if len(buf) < 4:
                return
            size = _BE32S.unpack_from(buf, 0)[0]
            if half.sasl and 0 <= size <= self.max_frame_size:
                token = self._sasl_token(conn, half, size)
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
            first_ts = last_ts = None
            frame_end = half.buf_pos + 4 + size
            for chunk_end, ts in half.chunks:
                if first_ts is None and chunk_end > half.buf_pos:
                    first_ts = ts
                if chunk_end >= frame_end:
                    last_ts = ts
                    break
            payload = bytes(buf[4: 4 + size])
            request_like = self._request_ok(payload, 0, size)
            self._kind_frame(conn, half, payload, size, request_like)
            if conn.kind > KIND_KAFKA:
                continue    # this frame showed another protocol: its bytes went with the rest
            half.drop(4 + size)
            c = half.counters
            c["frames"] += 1
            c["frame_bytes"] += 4 + size
            frame = (half.sequence, first_ts, last_ts, size, payload)
            half.sequence += 1
            if request_like:
                half.request_corrs.append(_BE32S.unpack_from(payload, 4)[0])
                if len(half.request_corrs) > _MAX_CORRS:
                    half.request_corrs.popleft()
                conn.request_like[half.side] += 1
            if conn.client_side < 0 or conn.kind != KIND_KAFKA or conn.undecided:
                self._infer(conn, half, frame)
            else:
                self._emit(conn, half.side, frame)

    def _infer(self, conn: _Connection, half: _Half, frame) -> None:
        """Hold a frame until the connection's direction and kind are known."""
        conn.undecided.append((half.side, frame))
        conn.held_bytes += len(frame[4])
        other = conn.halves[1 - half.side]
        if conn.client_side < 0:
            if len(frame[4]) >= 4 and _BE32S.unpack_from(frame[4], 0)[0] in other.request_corrs:
                self._decide(conn, 1 - half.side, 2)
            elif len(conn.undecided) >= _MAX_UNDECIDED_FRAMES:
                self._guess(conn)
        self._kind_held(conn)
        self._release(conn)

    def _guess(self, conn: _Connection) -> None:
        like = conn.request_like
        if like[0] != like[1]:
            side = 0 if like[0] > like[1] else 1
        else:  # clients use the ephemeral (higher) port
            side = 0 if conn.endpoints[0][1] >= conn.endpoints[1][1] else 1
        self._decide(conn, side, 3)

    def _decide(self, conn: _Connection, client_side: int, source: int) -> None:
        conn.client_side = client_side
        conn.direction_source = source

    def _release(self, conn: _Connection) -> None:
        """Emit the held frames once the direction is known and the connection is Kafka."""
        if conn.client_side < 0 or conn.kind != KIND_KAFKA or not conn.undecided:
            return
        for side, frame in conn.undecided:
            self._emit(conn, side, frame)
        conn.undecided = []
        conn.held_bytes = 0

    def _emit(self, conn: _Connection, side: int, frame) -> None:
        sequence, first_ts, last_ts, size, payload = frame
        out = self.out
        out["connection_id"].append(conn.id)
        out["direction"].append(DIRECTION_REQUEST if side == conn.client_side else DIRECTION_RESPONSE)
        out["sequence"].append(sequence)
        out["ts_first_ns"].append(first_ts)
        out["ts_last_ns"].append(last_ts)
        out["size"].append(size)
        out["payload"].append(payload)
        self.out_bytes += len(payload)

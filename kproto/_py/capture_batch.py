"""The output batch the Framer copies frames into (part of the capture engine,
kproto/_py/capture.py; compiled: kproto/_c/_capture_batch.pxi)."""

from __future__ import annotations

import numpy as np

from kproto._common.capture import FRAME_COLUMNS


class _FrameBatch:
    """Frames found since the last take: one row each, in lists until ``take``."""

    def __init__(self, batch_frames: int, batch_bytes: int) -> None:
        self.batch_frames = batch_frames  # a batch is ready at either
        self.batch_bytes = batch_bytes
        self._new_output()

    def _new_output(self) -> None:
        self.out: dict[str, list] = {name: [] for name in FRAME_COLUMNS}
        self.out_bytes = 0

    def add(self, connection_id: int, direction: int, sequence: int, first_ts, last_ts, size: int, payload) -> None:
        """A row: the captured ``payload`` of a frame of ``size`` (shorter when a gap cut it)."""
        out = self.out
        out["connection_id"].append(connection_id)
        out["direction"].append(direction)
        out["sequence"].append(sequence)
        out["ts_first_ns"].append(first_ts)
        out["ts_last_ns"].append(last_ts)
        out["size"].append(size)
        out["payload"].append(payload)
        self.out_bytes += len(payload)

    def ready(self) -> bool:
        return len(self.out["size"]) >= self.batch_frames or self.out_bytes >= self.batch_bytes

    def take(self):
        """The rows as a dict of numpy columns plus ``payload_offsets`` (int32, n + 1) and
        ``payload_data`` (bytes), or None; a new batch starts."""
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
        self._new_output()
        return batch

"""Types of the compiled ``kproto._c._capture`` (source: ``_capture.pyx``).

The capture engine behind :mod:`kproto.arrow.capture`: pcap / pcapng bytes in, TCP
reassembled into Kafka frames and per-connection accounting out: three stages
(RecordReader -> Reassembly -> Framer) the shared Engine of kproto._common.capture_engine
wires. The pure twin is ``kproto/_py/capture.py``; the column-name tables are
kproto._common.capture's.
"""

from typing import Any, ClassVar, Final, final

import numpy as np
from typing_extensions import Buffer

from kproto._common.capture import CAPTURE_COUNTERS as CAPTURE_COUNTERS
from kproto._common.capture import CLOSED_BY as CLOSED_BY
from kproto._common.capture import CONNECTION_COLUMNS as CONNECTION_COLUMNS
from kproto._common.capture import DIRECTION_SOURCE as DIRECTION_SOURCE
from kproto._common.capture import FRAME_COLUMNS as FRAME_COLUMNS
from kproto._common.capture import HALF_COUNTERS as HALF_COUNTERS
from kproto._common.capture_engine import Engine as _SharedEngine
from kproto._common.capture_engine import EngineSettings
from kproto.errors import DecodeError as DecodeError

__all__ = [
    "Engine",
    "scan_frames",
    "DIRECTION_REQUEST",
    "DIRECTION_RESPONSE",
    "FRAME_COLUMNS",
    "CONNECTION_COLUMNS",
    "CAPTURE_COUNTERS",
]

DIRECTION_REQUEST: Final = 0
DIRECTION_RESPONSE: Final = 1

@final
class RecordReader:
    """Records and packet layers: the engine's first stage."""

    @property
    def error(self) -> tuple[str, str, int] | None:
        """(category, reason, offset) of the record where reading stopped, or None."""
    def __init__(self, reassembly: Reassembly, framer: Framer) -> None: ...
    def feed(self, data: Buffer) -> int:
        """Read whole records from ``data``; returns the bytes consumed."""

@final
class Reassembly:
    """Segments into streams, connection endings: the engine's second stage."""

    @property
    def max_pending_bytes(self) -> int: ...
    @property
    def max_connections(self) -> int: ...
    def __init__(self, settings: EngineSettings, framer: Framer) -> None: ...
    def capture_counters(self) -> dict[str, int]: ...
    def take_connections(self) -> list[dict[str, Any]]:
        """Rows (dicts keyed by CONNECTION_COLUMNS) of connections closed since the last call."""
    def take_endpoints(self) -> list[dict[str, Any]]:
        """connection_id, client_ip, client_port, server_ip, server_port of the connections
        whose first frame was emitted since the last call."""
    def snap_lengths(self) -> list[int]:
        """The snap lengths of the records whose TCP payload they cut, sorted."""
    def open_connections(self) -> int: ...
    def open_connection_rows(self) -> list[dict[str, Any]]:
        """Rows of the connections still open, their counters as they are now (closed_by None)."""
    def mark_open_connections(self) -> None:
        """A mark: what is counted from now on about bytes read before now is counted early too."""
    def early_counts(self) -> dict[int, dict[str, int]]:
        """connection id -> counters counted since the last mark about bytes before it."""
    def finish(self, remaining: int = 0) -> None:
        """The input ended: flush every connection, in the order they were opened."""

@final
class Framer:
    """Frames out of each direction's stream into the output batch: the engine's last stage."""

    @property
    def max_frame_size(self) -> int: ...
    def __init__(self, settings: EngineSettings) -> None: ...
    def batch_ready(self) -> bool: ...
    def take_batch(self) -> dict[str, Any] | None:
        """Frames found since the last call, or None: numpy columns plus payload_offsets and payload_data."""

class Engine(_SharedEngine):
    """Capture bytes in, Kafka frames and accounting out: the shared engine given these stages."""

    RecordReader: ClassVar[type[RecordReader]]
    Reassembly: ClassVar[type[Reassembly]]
    Framer: ClassVar[type[Framer]]

def scan_frames(
    data: Buffer, max_frame_size: int = ..., max_frames: int = ...
) -> tuple[np.ndarray, np.ndarray, int, str | None, bytes]:
    """Split concatenated size-prefixed frames: (starts, sizes, bytes consumed, error or None, payloads)."""

"""The capture engine's shape, written once for both implementations.

An engine is three stages, each an object of its implementation's class of the same
name (kproto/_c/_capture_*.pxi compiled, kproto/_py/capture_*.py the twin):

* ``RecordReader``: pcap / pcapng records, each packet's link / IP / TCP layers; hands
  each TCP segment to the reassembly.
* ``Reassembly``: TCP segments into per-direction byte streams, connection endings and
  their rows; hands each direction's new bytes to the framer.
* ``Framer``: Kafka frames out of the streams (resync, which side is the client, which
  protocol a connection speaks), the output batch.

Each stage holds the stage it hands on to (a typed attribute in C, so the call is the
C method call it would be within one class). ``Engine`` builds them from its settings
and answers for them; ``CaptureEngine`` is the contract kproto.arrow.capture relies on,
and the ``*Stage`` protocols what the engine asks of each stage: both implementations
satisfy them (tests/arrow/test_capture_engine_shape.py). What is not per-byte work lives here
too: the settings' caps and the reasons reading stops.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

from kproto._common.capture import EARLY_COUNTERS

#: Cap of max_frame_size, max_pending_bytes and batch_bytes: a batch stops filling under
#: batch_bytes, then one packet can finish at most a frame plus the out-of-order bytes it
#: releases, so one batch's payloads always fit Arrow's int32 offsets.
SETTING_LIMIT = 512 * 1024 * 1024

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
DEFAULT_MAX_PENDING_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 65536
DEFAULT_BATCH_FRAMES = 65536
DEFAULT_BATCH_BYTES = 64 * 1024 * 1024


class EngineSettings(NamedTuple):
    """An engine's settings, as its stages read them (``Engine``'s arguments, capped)."""

    request_versions: tuple[int, ...]
    broker_ports: frozenset[int]  # the kafka ports included
    kafka_ports: frozenset[int]
    max_frame_size: int
    max_pending_bytes: int
    max_connections: int
    batch_frames: int
    batch_bytes: int

    @property
    def held_limit(self) -> int:
        """Held bytes of a connection not yet known to be Kafka (capture_kinds)."""
        return self.max_frame_size + self.max_pending_bytes


def engine_settings(
    request_versions: Iterable[int],
    broker_ports: Iterable[int],
    kafka_ports: Iterable[int],
    max_frame_size: int,
    max_pending_bytes: int,
    max_connections: int,
    batch_frames: int,
    batch_bytes: int,
) -> EngineSettings:
    kafka = frozenset(int(p) for p in kafka_ports)
    return EngineSettings(
        request_versions=tuple(int(v) for v in request_versions),
        broker_ports=frozenset(int(p) for p in broker_ports) | kafka,
        kafka_ports=kafka,
        max_frame_size=min(int(max_frame_size), SETTING_LIMIT),
        max_pending_bytes=min(int(max_pending_bytes), SETTING_LIMIT),
        max_connections=max(1, int(max_connections)),
        batch_frames=max(1, int(batch_frames)),
        batch_bytes=min(max(1, int(batch_bytes)), SETTING_LIMIT),
    )


# ---------------------------------------------------------------------- the contract
@runtime_checkable
class FramerStage(Protocol):
    """What the engine asks of a Framer (besides the calls the reassembly makes into it)."""

    max_frame_size: int

    def batch_ready(self) -> bool: ...
    def take_batch(self) -> dict[str, Any] | None: ...


@runtime_checkable
class ReassemblyStage(Protocol):
    """What the engine asks of a Reassembly."""

    max_pending_bytes: int
    max_connections: int

    def take_connections(self) -> list[dict[str, Any]]: ...
    def take_endpoints(self) -> list[dict[str, Any]]: ...
    def snap_lengths(self) -> list[int]: ...
    def capture_counters(self) -> dict[str, int]: ...
    def open_connections(self) -> int: ...
    def open_connection_rows(self) -> list[dict[str, Any]]: ...
    def mark_open_connections(self) -> None: ...
    def early_counts(self) -> dict[int, dict[str, int]]: ...
    def finish(self, remaining: int = 0) -> None: ...


@runtime_checkable
class RecordReaderStage(Protocol):
    """What the engine asks of a RecordReader."""

    error: tuple[str, str, int] | None

    def feed(self, data: Any) -> int: ...


@runtime_checkable
class CaptureEngine(RecordReaderStage, ReassemblyStage, FramerStage, Protocol):
    """A capture engine, as kproto.arrow.capture uses it (both implementations' ``Engine``):
    what it asks of its stages, answered by the engine."""


# ---------------------------------------------------------------------- the engine
class Engine:
    """Capture bytes in, Kafka frames and accounting out.

    Args:
        request_versions: highest plausible request version per api_key (index),
            -1 for keys that do not exist; used to validate frame boundaries.
        broker_ports: TCP ports of brokers; the other end of such a connection
            sends the requests.
        kafka_ports: TCP ports whose connections are Kafka without their frames
            confirming it (capture_kinds); they are broker ports too.
        max_frame_size: larger size prefixes are not frame boundaries.
        max_pending_bytes: out-of-order bytes held per direction before the
            missing ones are declared lost.
        max_connections: open connections kept; beyond it the least recently
            active eighth is closed (counted as evicted).
        batch_frames, batch_bytes: ``feed`` stops once this many frames or
            payload bytes are ready, so output stays bounded.

    Each implementation names its stage classes (``RecordReader``, ``Reassembly``,
    ``Framer``) on its subclass; the stages do the work, the engine only wires them.
    """

    RecordReader: ClassVar[Any]
    Reassembly: ClassVar[Any]
    Framer: ClassVar[Any]

    def __init__(
        self,
        request_versions: Iterable[int],
        broker_ports: Iterable[int] = (9092,),
        kafka_ports: Iterable[int] = (),
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        batch_frames: int = DEFAULT_BATCH_FRAMES,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        settings = engine_settings(
            request_versions,
            broker_ports,
            kafka_ports,
            max_frame_size,
            max_pending_bytes,
            max_connections,
            batch_frames,
            batch_bytes,
        )
        self.framer = self.Framer(settings)
        self.reassembly = self.Reassembly(settings, self.framer)
        self.reader = self.RecordReader(self.reassembly, self.framer)
        self.max_frame_size = settings.max_frame_size
        self.max_pending_bytes = settings.max_pending_bytes
        self.max_connections = settings.max_connections

    @property
    def error(self) -> tuple[str, str, int] | None:
        """(category, reason, offset) of the record where reading stopped, or None; the
        categories are kproto.arrow.capture.ERROR_CATEGORIES' first three."""
        return self.reader.error

    def feed(self, data: Any) -> int:
        """Read whole records from ``data`` (the file's bytes from where the last call
        stopped); returns how many bytes were consumed. Stops early when a batch is full;
        call again with the rest. After an error (see ``error``) every byte is consumed and
        counted as unread."""
        return self.reader.feed(data)

    def finish(self, remaining: int = 0) -> None:
        """The input ended (``remaining`` unconsumed bytes were an incomplete record):
        flush every connection, in the order they were opened."""
        self.reassembly.finish(remaining)

    def batch_ready(self) -> bool:
        """True when ``feed`` stopped because a batch is full."""
        return self.framer.batch_ready()

    def take_batch(self) -> dict[str, Any] | None:
        """Frames found since the last call, or None: a dict of numpy columns plus
        ``payload_offsets`` (int32, n + 1) and ``payload_data``."""
        return self.framer.take_batch()

    def take_connections(self) -> list[dict[str, Any]]:
        """Rows (dicts keyed by CONNECTION_COLUMNS) of connections closed since the last call."""
        return self.reassembly.take_connections()

    def take_endpoints(self) -> list[dict[str, Any]]:
        """Who talks on the connections whose first frame was emitted since the last call:
        dicts of ``connection_id``, ``client_ip``, ``client_port``, ``server_ip``,
        ``server_port`` (as in their connection rows, which come only at their close)."""
        return self.reassembly.take_endpoints()

    def snap_lengths(self) -> list[int]:
        """The snap lengths (from the pcap header, or the pcapng interfaces) of the
        records whose TCP payload they cut, sorted: what "bodies not captured" was cut at."""
        return self.reassembly.snap_lengths()

    def capture_counters(self) -> dict[str, int]:
        return self.reassembly.capture_counters()

    def open_connections(self) -> int:
        return self.reassembly.open_connections()

    def open_connection_rows(self) -> list[dict[str, Any]]:
        """Rows of the connections still open, their counters as they are now (closed_by None)."""
        return self.reassembly.open_connection_rows()

    def mark_open_connections(self) -> None:
        """A mark (a range's start): what is counted from now on about bytes read before now
        is counted early too (``early_counts``), so that a range can leave it to the range before."""
        self.reassembly.mark_open_connections()

    def early_counts(self) -> dict[int, dict[str, int]]:
        """connection id -> the counters (as ``request_``/``response_`` columns of its row)
        counted since the last mark about bytes before it, as they are now."""
        return self.reassembly.early_counts()


# ---------------------------------------------------------------------- not per-byte work
def early_row(request_early, response_early) -> dict[str, int]:
    """A connection's early counts (EARLY_COUNTERS' order, per side of its row) as row
    columns; empty when there are none."""
    if not (any(request_early) or any(response_early)):
        return {}
    row = {"request_" + name: value for name, value in zip(EARLY_COUNTERS, request_early)}
    row.update({"response_" + name: value for name, value in zip(EARLY_COUNTERS, response_early)})
    return row


# Why reading stops at a record (RecordReader.error's reason; its category is the first word).
BAD_BYTE_ORDER = "pcapng section header with a bad byte-order magic"
SHORT_INTERFACE_BLOCK = "short pcapng interface block"
SHORT_PACKET_BLOCK = "short pcapng packet block"


def not_a_capture(magic: int) -> str:
    return f"not a pcap or pcapng file (magic 0x{magic:08x})"


def oversized_pcap_record(caplen: int, limit: int) -> str:
    return f"pcap record with captured length {caplen} (limit {limit})"


def oversized_pcapng_block(length: int, limit: int) -> str:
    return f"pcapng block of length {length} (limit {limit})"


def bad_pcapng_block_length(length: int) -> str:
    return f"pcapng block of length {length}"


def invalid_frame_size(size: int, limit: int) -> str:
    """Why scan_frames stopped at a size prefix."""
    return f"invalid frame size {size} (maximum {limit})"

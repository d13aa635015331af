"""Pure-Python twin of kproto/_c/_capture.pyx: capture files to Kafka frames.

The engine reads pcap / pcapng bytes as they come (``feed``), takes every packet
apart (link layer, IPv4 / IPv6, TCP), reassembles each TCP connection per
direction and cuts the byte streams into Kafka frames (int32 size + payload).
It is deliberately written as the readable reference; the Cython module does
exactly the same, packet for packet and counter for counter, only faster.

Public surface (identical in both implementations):

* ``Engine``: the capture state machine; see its docstring.
* ``scan_frames``: splits a buffer of concatenated size-prefixed frames.
* ``DIRECTION_REQUEST`` (0), ``DIRECTION_RESPONSE`` (1).
* ``FRAME_COLUMNS``, ``CONNECTION_COLUMNS``, ``CAPTURE_COUNTERS``: output names.

Reassembly rules (the contract the tests check):

* Stream positions are 64-bit offsets from the first byte of the stream; TCP
  sequence numbers are unwrapped against the next expected one, so wrap-around
  is invisible.
* The first copy of a byte wins. Later copies count as duplicate bytes; a later
  copy that differs from a still-held first copy counts as a conflict.
* Segments ahead of the next expected byte wait (out of order) until the hole
  fills. When more than ``max_pending_bytes`` wait, or the stream ends, the hole
  is declared a gap: its bytes are counted lost; the frame it cut, if its start
  was confirmed, is emitted with the bytes captured before the hole (payload
  shorter than size) and its end is a known boundary where reading resumes (kept
  across further gaps); else reading resumes at the next confirmed boundary. The
  bytes a snap length cut off a packet are such a hole at once (``snapped_bytes``).
* A stream whose start was not captured (no SYN) is searched for the first
  confirmed frame boundary (capture_framer.Framer._confirm: never a merely
  plausible one); the bytes before it are counted skipped.
* Per direction, after the end: ``stream_bytes == frame_bytes + skipped_bytes +
  tail_bytes + sasl_bytes + other_bytes`` (tail = an incomplete frame left at the
  end; sasl = raw SASL tokens; other = a connection that is not Kafka).
* A connection gives frames only once it is confirmed Kafka (capture_kinds.py);
  the others are counted by kind.

The engine is four modules, one responsibility each, every class extending the one
below it (as in the compiled engine's .pxi files):

* ``capture_reader.RecordReader``: pcap / pcapng records, each packet's link / IP /
  TCP layers; ``scan_frames`` for frame dumps.
* ``capture_reassembly.Reassembly``: TCP segments into per-direction streams.
* ``capture_framer.Framer``: Kafka frames out of the streams, the output batch.
* ``capture_kinds.Kinds``: which protocol a connection speaks, SASL's raw tokens.
* ``capture_connections``: the per-connection and per-direction state.

``Engine`` is the reader with its settings.
"""

from __future__ import annotations

from kproto._common.capture import (
    CAPTURE_COUNTERS,
    CONNECTION_COLUMNS,
    DIRECTION_REQUEST,
    DIRECTION_RESPONSE,
    FRAME_COLUMNS,
)
from kproto._py.capture_reader import RecordReader, scan_frames

__all__ = [
    "Engine",
    "scan_frames",
    "DIRECTION_REQUEST",
    "DIRECTION_RESPONSE",
    "FRAME_COLUMNS",
    "CONNECTION_COLUMNS",
    "CAPTURE_COUNTERS",
]

_LIMIT = 512 * 1024 * 1024  # cap of max_frame_size, max_pending_bytes and batch_bytes


class Engine(RecordReader):
    """Capture bytes in, Kafka frames and accounting out.

    Args:
        request_versions: highest plausible request version per api_key (index),
            -1 for keys that do not exist; used to validate frame boundaries.
        broker_ports: TCP ports of brokers; the other end of such a connection
            sends the requests.
        kafka_ports: TCP ports whose connections are Kafka without their frames
            confirming it (capture_kinds.py); they are broker ports too.
        max_frame_size: larger size prefixes are not frame boundaries.
        max_pending_bytes: out-of-order bytes held per direction before the
            missing ones are declared lost.
        max_connections: open connections kept; beyond it the least recently
            active eighth is closed (counted as evicted).
        batch_frames, batch_bytes: ``feed`` stops once this many frames or
            payload bytes are ready, so output stays bounded.
    """

    def __init__(self, request_versions, broker_ports=(9092,), kafka_ports=(), max_frame_size: int = 100 * 1024 * 1024,
                 max_pending_bytes: int = 8 * 1024 * 1024, max_connections: int = 65536,
                 batch_frames: int = 65536, batch_bytes: int = 64 * 1024 * 1024) -> None:
        self.request_versions = [int(v) for v in request_versions]
        self.kafka_ports = frozenset(int(p) for p in kafka_ports)
        self.broker_ports = frozenset(int(p) for p in broker_ports) | self.kafka_ports
        # Capped so one batch's payloads always fit Arrow's int32 offsets: a batch
        # stops filling under batch_bytes, then one packet can finish at most a
        # frame plus the out-of-order bytes it releases.
        self.max_frame_size = min(int(max_frame_size), _LIMIT)
        self.max_pending_bytes = min(int(max_pending_bytes), _LIMIT)
        self.held_limit = self.max_frame_size + self.max_pending_bytes   # capture_kinds.py
        self.max_connections = max(1, int(max_connections))
        self.batch_frames = max(1, int(batch_frames))
        self.batch_bytes = min(max(1, int(batch_bytes)), _LIMIT)
        self.counters = dict.fromkeys(CAPTURE_COUNTERS, 0)
        self.format = None   # "pcap" / "pcapng" once the header is read
        self.order = "<"
        self.linktype = 0
        self.pcap_nanos = False
        self.interfaces = []  # pcapng: (linktype, ts converter, snap length)
        self.snaplen = 0      # the snap length of the record being read (its interface's)
        self.cut_snaplens = set()   # the snap lengths of the records that cut a TCP segment
        self.connections = {}
        self.ended = {}       # keys of connections closed by their FINs or a RST (Reassembly._segment)
        self.next_conn_id = 0
        self.finished = False
        # (category, reason, file offset) once a record cannot be framed: nothing
        # after it can be trusted, so the rest is counted as unread_bytes. The
        # categories are kproto.arrow.capture.ERROR_CATEGORIES' first three.
        self.error = None
        self._reset_batch()
        self._closed = []
        self.early = {}       # connection id -> counts since the last mark about bytes before it (early_counts)
        self._opened = []     # connections whose first frame was just emitted (take_endpoints)

    def capture_counters(self) -> dict:
        return dict(self.counters)

    def snap_lengths(self) -> list:
        """The snap lengths (from the pcap header, or the pcapng interfaces) of the
        records whose TCP payload they cut, sorted: what "bodies not captured" was cut at."""
        return sorted(self.cut_snaplens)


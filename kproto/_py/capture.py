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

The engine is three stages, objects of classes with the same names and shape as the
compiled engine's (kproto/_common/capture_engine.py builds them and states the contract
both satisfy), each holding the stage it hands on to:

* ``capture_reader.RecordReader``: pcap / pcapng records, each packet's link / IP /
  TCP layers; ``scan_frames`` for frame dumps.
* ``capture_reassembly.Reassembly``: TCP segments into per-direction streams,
  connection endings.
* ``capture_framer.Framer``: Kafka frames out of the streams, the output batch.

Beside them: ``capture_kinds``, the functions the framer calls to tell which protocol a
connection speaks and to count SASL's raw tokens; ``capture_connections``, the
per-connection and per-direction state.

``Engine`` is the shared engine given these classes.
"""

from __future__ import annotations

from kproto._common import capture_engine as _engine
from kproto._common.capture import (
    CAPTURE_COUNTERS,
    CONNECTION_COLUMNS,
    DIRECTION_REQUEST,
    DIRECTION_RESPONSE,
    FRAME_COLUMNS,
)
from kproto._py.capture_framer import Framer
from kproto._py.capture_reader import RecordReader, scan_frames
from kproto._py.capture_reassembly import Reassembly

__all__ = [
    "Engine",
    "scan_frames",
    "DIRECTION_REQUEST",
    "DIRECTION_RESPONSE",
    "FRAME_COLUMNS",
    "CONNECTION_COLUMNS",
    "CAPTURE_COUNTERS",
]


class Engine(_engine.Engine):
    __doc__ = _engine.Engine.__doc__
    RecordReader = RecordReader
    Reassembly = Reassembly
    Framer = Framer

"""The batch decoder's row statuses: one definition for both implementations and kproto.arrow.frames.

The C loops keep the same numbers as compile-time constants (``ST_*`` in
kproto/_c/_batch.pyx), checked against these when the module is imported.
"""

from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """Why a frame (row) did not decode; ``OK`` when it did.

    The ``error_offset`` column says where, in bytes from the start of the
    frame's payload (after the 4-byte size prefix; -4 is the prefix itself).
    """

    OK = 0
    #: The frame, or a field inside it, needs more bytes than there are (including
    #: a last frame cut short by the end of the buffer).
    TRUNCATED = 1
    #: A size prefix that is negative or above ``max_frame_size`` (framing stops
    #: there), a negative length or a count larger than the bytes left, or a body
    #: that does not end where its frame does.
    BAD_LENGTH = 2
    #: An API key kproto has no schema for (the header is still read, as v1).
    UNKNOWN_API = 3
    #: A version outside the API's valid versions.
    UNSUPPORTED_VERSION = 4
    #: A response holding only a correlation id: what a broker sends back for a
    #: request it does not support.
    EMPTY_RESPONSE = 5
    #: Invalid varint, tagged fields out of order, bad nullable-struct marker,
    #: invalid UTF-8 in a string.
    MALFORMED = 6
    #: A response without its request's api_key / api_version: only the
    #: correlation id can be read.
    NO_REQUEST_INFO = 7
    #: A null entry in an Arrow input array.
    NULL_FRAME = 8
    #: Structs nested deeper than 64 levels.
    LIMIT_EXCEEDED = 9
    #: A capture's frame whose bytes were not all captured (the snap length cut its
    #: packets, or a gap cut it): its payload is shorter than its size; the header
    #: columns are read from the bytes that were. Set by the capture readers' users
    #: (``kproto.arrow.capture.not_captured``), never by the decoder itself.
    NOT_CAPTURED = 10


class PairStatus(enum.IntEnum):
    """How a row of :func:`pair` came about."""

    #: A request and its response.
    PAIRED = 0
    #: A request that gets no response by design: Produce with acks=0.
    NO_RESPONSE_EXPECTED = 1
    #: A request whose response was not captured (or has not come yet).
    UNPAIRED_REQUEST = 2
    #: A response whose request was not captured.
    UNPAIRED_RESPONSE = 3

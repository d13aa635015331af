"""Captures: the output shapes, file-format constants and the engine's shape both capture
engines share.

The Cython engine (kproto/_c/_capture.pyx) and the pure twin (kproto/_py/capture.py)
import these; kproto.arrow.capture builds its Arrow schemas from them. The engine itself
(``Engine``, kproto/_common/capture_engine.py) is written once: each implementation gives
it its three stages, classes of the same names (``RecordReader``, ``Reassembly``,
``Framer``), and ``CaptureEngine`` is the contract kproto.arrow.capture relies on.
"""

from __future__ import annotations

import struct

DIRECTION_REQUEST = 0
DIRECTION_RESPONSE = 1

FRAME_COLUMNS = ("connection_id", "direction", "sequence", "ts_first_ns", "ts_last_ns", "size", "payload")

# Per connection; the per-direction counters come twice, prefixed "request_" and "response_".
HALF_COUNTERS = (
    "packets",  # TCP segments carrying payload in this direction
    "payload_bytes",  # captured TCP payload bytes, copies included
    "duplicate_bytes",  # bytes already received (retransmissions, overlaps)
    "retransmitted_segments",
    "conflicting_segments",  # a duplicate whose bytes differ from the held first copy
    "stream_bytes",  # unique bytes that entered the stream
    "frames",
    "frame_bytes",  # 4-byte size prefixes included
    "skipped_bytes",  # discarded to find a frame boundary (mid-stream start, after a gap)
    "resyncs",  # times a boundary had to be searched for
    "gaps",
    "gap_bytes",  # bytes never captured
    "tail_bytes",  # incomplete frame at the end
    "truncated_packets",  # payload cut by the capture's snap length
    "snapped_bytes",  # bytes a snap length cut off those packets (never captured; not in gap_bytes)
    "sasl_tokens",  # raw SASL tokens after a SaslHandshake v0 (not frames: no Kafka header)
    "sasl_bytes",  # their bytes, 4-byte size prefixes included
    "other_bytes",  # bytes of a connection that is not Kafka (its kind says which protocol)
)
CONNECTION_COLUMNS = (
    (
        "connection_id",
        "client_ip",
        "client_port",
        "server_ip",
        "server_port",
        "first_ts_ns",
        "last_ts_ns",
        "handshake_seen",
        "closed_by",
        "direction_source",
        "kind",
    )
    + tuple("request_" + name for name in HALF_COUNTERS)
    + tuple("response_" + name for name in HALF_COUNTERS)
)

CAPTURE_COUNTERS = (
    "file_bytes",  # bytes of capture file consumed
    "packets",  # packet records read
    "unsupported_link",  # link types or ethertypes that carry no IP
    "non_tcp",  # IP packets of another protocol
    "ip_fragments",  # IPv4 / IPv6 fragments: counted, not reassembled
    "malformed",  # headers that do not fit or do not parse
    "tcp_packets",
    "tcp_payload_bytes",
    "tcp_without_connection",  # payload-less segments opening none (a stray ACK; after a FIN/RST close)
    "connections",
    "evicted_connections",  # closed early to respect max_connections
    "skipped_blocks",  # pcapng blocks that carry no packets (statistics, name resolution, ...)
    "trailing_bytes",  # an incomplete record at the end of the file
    "unread_bytes",  # not read: from a record that cannot be framed (``Engine.error``) to the end
)

#: The counters a half counts early too (since a mark, about bytes before it; ``early_counts``),
#: in the order both engines keep them.
EARLY_COUNTERS = ("frames", "frame_bytes", "skipped_bytes")

# Why a connection stopped being tracked.
CLOSED_BY = ("end", "fin", "rst", "evicted", "reused")
# How the request direction was known.
DIRECTION_SOURCE = ("port", "syn", "correlation", "guess")
# The protocol a connection speaks (kproto/_py/capture_kinds.py says how each is told).
# Only "kafka" connections give frames; the others are counted in other_bytes.
KINDS = ("kafka", "tls", "zookeeper", "http", "other", "empty")
KIND_UNKNOWN = -1  # not decided yet: the connection's frames are held
KIND_KAFKA = 0
KIND_TLS = 1
KIND_ZOOKEEPER = 2
KIND_HTTP = 3
KIND_OTHER = 4
KIND_EMPTY = 5

# File magics: pcap (microsecond or nanosecond timestamps), pcapng section header and byte order.
PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_BOM = 0x1A2B3C4D

# The same magics as a file's first four bytes: pcap's byte order and timestamp unit,
# and pcapng's section header (a palindrome, so one value in either order).
PCAP_FILE_MAGICS = {
    PCAP_MAGIC_US.to_bytes(4, "little"): ("<", False),
    PCAP_MAGIC_US.to_bytes(4, "big"): (">", False),
    PCAP_MAGIC_NS.to_bytes(4, "little"): ("<", True),
    PCAP_MAGIC_NS.to_bytes(4, "big"): (">", True),
}
PCAPNG_FILE_MAGIC = PCAPNG_SHB.to_bytes(4, "big")

# Link types (tcpdump.org/linktypes.html) the engines take apart.
LINK_NULL = 0
LINK_ETHERNET = 1
LINK_RAW = 101
LINK_LOOP = 108
LINK_SLL = 113
LINK_IPV4 = 228
LINK_IPV6 = 229
LINK_SLL2 = 276
LINK_RAW_DLT = 12  # raw IP as written by hosts that store the DLT number
LINK_RAW_DLT_OPENBSD = 14  # the same on OpenBSD
RAW_LINKS = (LINK_RAW, LINK_RAW_DLT, LINK_RAW_DLT_OPENBSD)
# Link headers that carry an ethertype: (link type, header length, the ethertype's offset).
ETHERTYPE_LINKS = ((LINK_ETHERNET, 14, 12), (LINK_SLL, 16, 14), (LINK_SLL2, 20, 0))
# Ethertypes of 802.1Q / QinQ tags, each 4 bytes between an Ethernet header and its ethertype.
VLAN_ETHERTYPES = (0x8100, 0x88A8, 0x9100)


# pcapng interface description options the readers use.
PCAPNG_IF_NAME = 2
PCAPNG_IF_TSRESOL = 9
PCAPNG_IF_TSOFFSET = 14


def pcapng_options(data, order: str, start: int = 0) -> list[tuple[int, bytes]]:
    """(code, value) of each option of a pcapng block body, from ``start`` to the
    end-of-options option or the end of ``data``; a value the data cuts short is kept
    cut."""
    options = []
    pos = start
    while len(data) - pos >= 4:
        code, length = struct.unpack_from(order + "HH", data, pos)
        if code == 0:
            break
        options.append((code, bytes(data[pos + 4 : pos + 4 + length])))
        pos += 4 + ((length + 3) & ~3)
    return options


def pcapng_interface_time(options: list[tuple[int, bytes]], order: str) -> tuple[int, int]:
    """(if_tsresol byte, if_tsoffset seconds) of an interface from its options: the last of
    each long enough to read counts (default: microseconds, no offset). Both engines read
    an interface's options here; the C engine keeps its own converter for the packets."""
    resolution, offset = 6, 0
    for code, value in options:
        if code == PCAPNG_IF_TSRESOL and len(value) >= 1:
            resolution = value[0]
        elif code == PCAPNG_IF_TSOFFSET and len(value) >= 8:
            offset = struct.unpack_from(order + "q", value, 0)[0]
    return resolution, offset


def pcapng_interface_clock(options: list[tuple[int, bytes]], order: str):
    """(units -> ns) of an interface from its options (pcapng_interface_time)."""
    return pcapng_ts_converter(*pcapng_interface_time(options, order))


def pcapng_ts_converter(resolution_byte: int, offset_seconds: int):
    """(units -> ns) for a pcapng if_tsresol value, plus the if_tsoffset (the C engine: _capture_reader.pxi)."""
    exponent = resolution_byte & 0x7F
    offset_ns = offset_seconds * 1_000_000_000
    if resolution_byte & 0x80:
        return lambda units: ((units * 1_000_000_000) >> exponent) + offset_ns
    if exponent <= 9:
        factor = 10 ** (9 - exponent)
        return lambda units: units * factor + offset_ns
    divisor = 10 ** (exponent - 9)
    return lambda units: units // divisor + offset_ns

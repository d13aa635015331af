"""A small capture writer for the tests: pcap and pcapng files built from scratch.

It knows just enough of each layer to build the cases the capture reader must
handle: Ethernet with VLAN tags, Linux cooked SLL / SLL2, BSD loopback, raw IP,
IPv4 with options and fragments, IPv6 with extension headers, TCP with any
flags, sequence numbers and payload. ``Conversation`` turns Kafka frames into
TCP segments of a client / broker connection.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field

LINK_NULL, LINK_ETHERNET, LINK_RAW, LINK_LOOP, LINK_SLL, LINK_SLL2 = 0, 1, 101, 108, 113, 276
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


# ---------------------------------------------------------------- layers
def tcp(sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes = b"", options: bytes = b"") -> bytes:
    options += b"\x01" * (-len(options) % 4)  # NOP padding
    doff = (20 + len(options)) // 4
    header = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, doff << 4, flags, 65535, 0, 0)
    return header + options + payload


def ipv4(
    src: str,
    dst: str,
    payload: bytes,
    protocol: int = 6,
    options: bytes = b"",
    ident: int = 1,
    flags_fragment: int = 0x4000,
    total_length: int | None = None,
) -> bytes:
    options += b"\x00" * (-len(options) % 4)
    ihl = (20 + len(options)) // 4
    total = 20 + len(options) + len(payload) if total_length is None else total_length
    header = struct.pack(
        ">BBHHHBBH4s4s",
        0x40 | ihl,
        0,
        total,
        ident,
        flags_fragment,
        64,
        protocol,
        0,
        ipaddress.IPv4Address(src).packed,
        ipaddress.IPv4Address(dst).packed,
    )
    return header + options + payload


def ipv6(src: str, dst: str, payload: bytes, next_header: int = 6, extensions: list[tuple[int, bytes]] = ()) -> bytes:
    """``extensions``: (header type, body) pairs; bodies are padded to the header's unit."""
    chain = b""
    types = [t for t, _ in extensions] + [next_header]
    for index, (kind, body) in enumerate(extensions):
        following = types[index + 1]
        if kind == 44:  # fragment header: fixed 8 bytes, body = 6 bytes (offset/flags + id)
            chain += bytes([following, 0]) + body[:6].ljust(6, b"\x00")
        elif kind == 51:  # AH: length in 4-byte units minus 2
            body = body + b"\x00" * (-(len(body) + 2) % 4)
            chain += bytes([following, (len(body) + 2) // 4 - 2]) + body
        else:
            body = body + b"\x00" * (-(len(body) + 2) % 8)
            chain += bytes([following, (len(body) + 2) // 8 - 1]) + body
    first = types[0]
    header = struct.pack(
        ">IHBB16s16s",
        0x60000000,
        len(chain) + len(payload),
        first,
        64,
        ipaddress.IPv6Address(src).packed,
        ipaddress.IPv6Address(dst).packed,
    )
    return header + chain + payload


def link(
    linktype: int, ip_packet: bytes, vlans: tuple[int, ...] = (), big_endian_null: bool = False, pad_to: int = 0
) -> bytes:
    """Wrap an IP packet in a link-layer header (``pad_to``: Ethernet minimum-size padding)."""
    version = ip_packet[0] >> 4
    ethertype = 0x0800 if version == 4 else 0x86DD
    if linktype == LINK_ETHERNET:
        tags = b""
        tpids = [0x88A8] + [0x8100] * (len(vlans) - 1) if len(vlans) > 1 else [0x8100] * len(vlans)
        for tpid, vid in zip(tpids, vlans):
            tags += struct.pack(">HH", tpid, vid)
        frame = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + tags + struct.pack(">H", ethertype)
        frame += ip_packet
        return frame + b"\x00" * max(0, pad_to - len(frame))
    if linktype == LINK_SLL:
        return struct.pack(">HHH8sH", 0, 772, 6, b"\x00" * 8, ethertype) + ip_packet
    if linktype == LINK_SLL2:
        return struct.pack(">HHIHBB8s", ethertype, 0, 1, 772, 0, 6, b"\x00" * 8) + ip_packet
    if linktype == LINK_NULL:
        family = 2 if version == 4 else 30
        return struct.pack(">I" if big_endian_null else "<I", family) + ip_packet
    if linktype == LINK_LOOP:
        return struct.pack(">I", 2 if version == 4 else 24) + ip_packet
    if linktype == LINK_RAW:
        return ip_packet
    raise ValueError(f"link type {linktype} not supported by the writer")


# ---------------------------------------------------------------- files
class PcapWriter:
    """Classic pcap: either byte order, micro- or nanosecond timestamps."""

    def __init__(
        self, linktype: int = LINK_ETHERNET, nanos: bool = False, big_endian: bool = False, snaplen: int = 262144
    ) -> None:
        self.order = ">" if big_endian else "<"
        self.nanos = nanos
        self.snaplen = snaplen
        magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
        self.parts = [struct.pack(self.order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]

    def add(self, ts_ns: int, data: bytes, linktype: int | None = None) -> None:
        seconds, rest = divmod(ts_ns, 1_000_000_000)
        fraction = rest if self.nanos else rest // 1000
        captured = data[: self.snaplen]
        self.parts.append(struct.pack(self.order + "IIII", seconds, fraction, len(captured), len(data)))
        self.parts.append(captured)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class PcapngWriter:
    """pcapng: sections, interfaces with their own timestamp resolution, enhanced and simple packets."""

    def __init__(self, big_endian: bool = False) -> None:
        self.order = ">" if big_endian else "<"
        self.parts: list[bytes] = []
        self.interfaces: list[tuple[int, int]] = []
        self.section()

    def _block(self, block_type: int, body: bytes) -> None:
        body += b"\x00" * (-len(body) % 4)
        length = 12 + len(body)
        self.parts.append(
            struct.pack(self.order + "II", block_type, length) + body + struct.pack(self.order + "I", length)
        )

    def _option(self, code: int, value: bytes) -> bytes:
        return struct.pack(self.order + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)

    def section(self) -> None:
        """Start a new section (interfaces are numbered afresh)."""
        self.interfaces = []
        self._block(
            0x0A0D0D0A,
            struct.pack(self.order + "IHHq", 0x1A2B3C4D, 1, 0, -1)
            + self._option(3, b"kproto tests")
            + self._option(0, b""),
        )

    def add_interface(
        self, linktype: int = LINK_ETHERNET, tsresol: int | None = None, tsoffset: int = 0, snaplen: int = 0
    ) -> int:
        """``tsresol``: the if_tsresol byte (6 = microseconds, 9 = nanoseconds, 0x80 | n = 2^-n)."""
        options = b""
        if tsresol is not None:
            options += self._option(9, bytes([tsresol]))
        if tsoffset:
            options += self._option(14, struct.pack(self.order + "q", tsoffset))
        if options:
            options += self._option(0, b"")
        self._block(1, struct.pack(self.order + "HHI", linktype, 0, snaplen) + options)
        self.interfaces.append((tsresol if tsresol is not None else 6, tsoffset))
        return len(self.interfaces) - 1

    def units(self, interface: int, ts_ns: int) -> int:
        resolution, offset = self.interfaces[interface]
        ts_ns -= offset * 1_000_000_000
        if resolution & 0x80:
            return (ts_ns << (resolution & 0x7F)) // 1_000_000_000
        return ts_ns * 10**resolution // 1_000_000_000

    def add(self, interface: int, ts_ns: int, data: bytes, comment: bytes = b"") -> None:
        units = self.units(interface, ts_ns)
        body = struct.pack(self.order + "IIIII", interface, units >> 32, units & 0xFFFFFFFF, len(data), len(data))
        body += data + b"\x00" * (-len(data) % 4)
        if comment:
            body += self._option(1, comment) + self._option(0, b"")
        self._block(6, body)

    def add_simple(self, data: bytes) -> None:
        self._block(3, struct.pack(self.order + "I", len(data)) + data)

    def add_statistics(self, interface: int = 0) -> None:
        self._block(5, struct.pack(self.order + "III", interface, 0, 0))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


# ---------------------------------------------------------------- Kafka over TCP
def request_frame(
    api_key: int, version: int, correlation_id: int, body: bytes, client_id: bytes | None = b"kproto-test"
) -> bytes:
    """A size-prefixed request with header v1 (client id as int16-length string)."""
    header = struct.pack(">hhi", api_key, version, correlation_id)
    header += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def response_frame(correlation_id: int, body: bytes) -> bytes:
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


@dataclass
class Packet:
    ts_ns: int
    data: bytes  # the link-layer frame
    sender: str = ""  # "client" or "server", for the tests' bookkeeping
    seq: int = 0
    payload: bytes = b""


@dataclass
class Conversation:
    """One TCP connection between a client and a broker, as packets."""

    client: tuple[str, int] = ("10.0.0.1", 40001)
    server: tuple[str, int] = ("10.0.0.2", 9092)
    client_isn: int = 1000
    server_isn: int = 50000
    linktype: int = LINK_ETHERNET
    vlans: tuple[int, ...] = ()
    ipv4_options: bytes = b""
    ipv6_extensions: list = field(default_factory=list)
    client_next: int = 0
    server_next: int = 0

    def __post_init__(self) -> None:
        self.client_next = (self.client_isn + 1) & 0xFFFFFFFF
        self.server_next = (self.server_isn + 1) & 0xFFFFFFFF

    def packet(self, sender: str, flags: int, payload: bytes = b"", seq: int | None = None, ts_ns: int = 0) -> Packet:
        if sender == "client":
            (src, sport), (dst, dport) = self.client, self.server
            seq = self.client_next if seq is None else seq
            ack = self.server_next
        else:
            (src, sport), (dst, dport) = self.server, self.client
            seq = self.server_next if seq is None else seq
            ack = self.client_next
        segment = tcp(sport, dport, seq, ack, flags, payload)
        if ":" in src:
            ip_packet = ipv6(src, dst, segment, extensions=self.ipv6_extensions)
        else:
            ip_packet = ipv4(src, dst, segment, options=self.ipv4_options)
        return Packet(ts_ns, link(self.linktype, ip_packet, self.vlans), sender, seq, payload)

    def handshake(self) -> list[Packet]:
        return [
            self.packet("client", SYN, seq=self.client_isn),
            self.packet("server", SYN | ACK, seq=self.server_isn),
            self.packet("client", ACK),
        ]

    def data(self, sender: str, stream: bytes, segment_sizes) -> list[Packet]:
        """Cut ``stream`` into segments (sizes cycle through ``segment_sizes``) and advance the sender."""
        packets = []
        sizes = list(segment_sizes)
        pos = 0
        index = 0
        while pos < len(stream):
            size = max(1, sizes[index % len(sizes)])
            index += 1
            chunk = stream[pos : pos + size]
            packets.append(self.packet(sender, ACK | PSH, chunk))
            pos += len(chunk)
            if sender == "client":
                self.client_next = (self.client_next + len(chunk)) & 0xFFFFFFFF
            else:
                self.server_next = (self.server_next + len(chunk)) & 0xFFFFFFFF
        return packets

    def close(self) -> list[Packet]:
        packets = [self.packet("client", FIN | ACK)]
        self.client_next = (self.client_next + 1) & 0xFFFFFFFF
        packets.append(self.packet("server", FIN | ACK))
        self.server_next = (self.server_next + 1) & 0xFFFFFFFF
        packets.append(self.packet("client", ACK))
        return packets


def pcap_of(
    packets: list[Packet],
    linktype: int = LINK_ETHERNET,
    start_ns: int = 1_700_000_000_000_000_000,
    step_ns: int = 1000,
    **options,
) -> bytes:
    """A pcap with the packets in order, timestamps start + i * step (written into each Packet)."""
    writer = PcapWriter(linktype, **options)
    for index, packet in enumerate(packets):
        packet.ts_ns = start_ns + index * step_ns
        writer.add(packet.ts_ns, packet.data)
    return writer.getvalue()

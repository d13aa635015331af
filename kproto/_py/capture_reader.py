"""Capture files as records (part of the capture engine, kproto/_py/capture.py;
compiled: kproto/_c/_capture_reader.pxi).

A pcap or pcapng file is read record by record as its bytes come; each packet's link,
IP and TCP layers are taken apart and its segment goes to the reassembly stage.
``scan_frames`` reads the other input, a dump of concatenated size-prefixed frames.
"""

from __future__ import annotations

import struct

import numpy as np

from kproto._common import capture_engine as _engine
from kproto._common.capture import (
    ETHERTYPE_LINKS,
    LINK_ETHERNET,
    LINK_IPV4,
    LINK_IPV6,
    LINK_LOOP,
    LINK_NULL,
    PCAP_MAGIC_NS,
    PCAP_MAGIC_US,
    PCAPNG_BOM,
    PCAPNG_SHB,
    RAW_LINKS,
    VLAN_ETHERTYPES,
    pcapng_interface_clock,
    pcapng_options,
)
from kproto._py.capture_framer import _BE16, _BE32S, Framer
from kproto._py.capture_reassembly import Reassembly
from kproto.limits import CAPTURE_MAX_RECORD_SIZE

_BE32 = struct.Struct(">I")
_ETHERTYPE_LINKS = {link: (header, ethertype_at) for link, header, ethertype_at in ETHERTYPE_LINKS}


def _wrap64(value: int) -> int:
    """Clamp to int64 the way the C engine's arithmetic does (two's complement)."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


class RecordReader:
    """Records and packet layers: the engine's first stage (kproto/_common/capture_engine.py)."""

    def __init__(self, reassembly: Reassembly, framer: Framer) -> None:
        self.reassembly = reassembly  # where each TCP segment goes
        self.framer = framer  # asked whether the batch is full
        self.counters = reassembly.counters  # the capture counters (the reassembly's)
        self.format: str | None = None  # "pcap" / "pcapng" once the header is read
        self.order = "<"
        self.linktype = 0
        self.pcap_nanos = False
        self.interfaces: list = []  # pcapng: (linktype, ts converter, snap length)
        # (category, reason, file offset) once a record cannot be framed: nothing
        # after it can be trusted, so the rest is counted as unread_bytes. The
        # categories are kproto.arrow.capture.ERROR_CATEGORIES' first three.
        self.error: tuple[str, str, int] | None = None

    # ------------------------------------------------------------------ file formats
    def feed(self, data) -> int:
        """Read whole records from ``data`` (the file's bytes from where the last
        call stopped); returns how many bytes were consumed. Stops early when a
        batch is full; call again with the rest. After an error (see ``error``)
        every byte is consumed and counted as unread."""
        view = memoryview(data).cast("B")
        pos = 0
        if self.error is None and self.format is None:
            if len(view) < 4:
                return 0
            magic_le = struct.unpack_from("<I", view, 0)[0]
            magic_be = struct.unpack_from(">I", view, 0)[0]
            if magic_le == PCAPNG_SHB:
                self.format = "pcapng"
            elif magic_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS) or magic_be in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
                if len(view) < 24:
                    return 0
                self.order = "<" if magic_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS) else ">"
                self.pcap_nanos = struct.unpack_from(self.order + "I", view, 0)[0] == PCAP_MAGIC_NS
                self.linktype = struct.unpack_from(self.order + "I", view, 20)[0] & 0xFFFF
                self.reassembly.snaplen = struct.unpack_from(self.order + "I", view, 16)[0]
                self.format = "pcap"
                pos = 24
            else:
                self._stop("not_a_capture", _engine.not_a_capture(magic_be), 0)
        if self.error is None:
            if self.format == "pcap":
                pos = self._feed_pcap(view, pos)
            else:
                pos = self._feed_pcapng(view, pos)
            self.counters["file_bytes"] += pos
        if self.error is not None:
            self.counters["unread_bytes"] += len(view) - pos
            pos = len(view)
        return pos

    def _stop(self, category: str, reason: str, pos: int) -> None:
        """The record at ``pos`` of this feed cannot be framed: stop reading there."""
        self.error = (category, reason, self.counters["file_bytes"] + pos)

    def _feed_pcap(self, view, pos: int) -> int:
        header = struct.Struct(self.order + "IIII")
        end = len(view)
        scale = 1 if self.pcap_nanos else 1000
        while end - pos >= 16 and not self.framer.batch_ready():
            seconds, fraction, caplen, origlen = header.unpack_from(view, pos)
            if caplen > CAPTURE_MAX_RECORD_SIZE:  # no link layer has packets this big: the file is corrupt
                self._stop("oversized_record", _engine.oversized_pcap_record(caplen, CAPTURE_MAX_RECORD_SIZE), pos)
                break
            if end - pos - 16 < caplen:
                break
            ts = seconds * 1_000_000_000 + fraction * scale
            self._packet(self.linktype, view[pos + 16 : pos + 16 + caplen], origlen, ts)
            pos += 16 + caplen
        return pos

    def _feed_pcapng(self, view, pos: int) -> int:
        end = len(view)
        while end - pos >= 12 and not self.framer.batch_ready():
            block_type = struct.unpack_from(self.order + "I", view, pos)[0]
            if block_type == PCAPNG_SHB:
                bom_le = struct.unpack_from("<I", view, pos + 8)[0]
                if bom_le == PCAPNG_BOM:
                    self.order = "<"
                elif struct.unpack_from(">I", view, pos + 8)[0] == PCAPNG_BOM:
                    self.order = ">"
                else:
                    self._stop("bad_block", _engine.BAD_BYTE_ORDER, pos)
                    break
                self.interfaces = []
            length = struct.unpack_from(self.order + "I", view, pos + 4)[0]
            if length < 12 or length % 4:
                self._stop("bad_block", _engine.bad_pcapng_block_length(length), pos)
                break
            if length > CAPTURE_MAX_RECORD_SIZE:
                self._stop("oversized_record", _engine.oversized_pcapng_block(length, CAPTURE_MAX_RECORD_SIZE), pos)
                break
            if end - pos < length:
                break
            if not self._block(block_type, view[pos + 8 : pos + length - 4], pos):
                break
            pos += length
        return pos

    def _block(self, block_type: int, body, pos: int) -> bool:
        """Read one pcapng block; False when it cannot be read (reading stops)."""
        order = self.order
        if block_type == 1:  # interface description
            if len(body) < 8:
                self._stop("bad_block", _engine.SHORT_INTERFACE_BLOCK, pos)
                return False
            linktype, _reserved, snaplen = struct.unpack_from(order + "HHI", body, 0)
            self.interfaces.append((linktype, pcapng_interface_clock(pcapng_options(body, order, 8), order), snaplen))
        elif block_type == 6 or block_type == 2:  # enhanced packet / obsolete packet
            if len(body) < 20:
                self._stop("bad_block", _engine.SHORT_PACKET_BLOCK, pos)
                return False
            if block_type == 6:
                iface, high, low, caplen, origlen = struct.unpack_from(order + "IIIII", body, 0)
            else:
                iface, _drops, high, low, caplen, origlen = struct.unpack_from(order + "HHIIII", body, 0)
            if iface >= len(self.interfaces) or caplen > len(body) - 20:
                self.counters["packets"] += 1
                self.counters["malformed"] += 1
                return True
            linktype, convert, self.reassembly.snaplen = self.interfaces[iface]
            self._packet(linktype, body[20 : 20 + caplen], origlen, _wrap64(convert((high << 32) | low)))
        elif block_type == 3:  # simple packet: no timestamp, interface 0
            if len(body) < 4 or not self.interfaces:
                self.counters["packets"] += 1
                self.counters["malformed"] += 1
                return True
            origlen = struct.unpack_from(order + "I", body, 0)[0]
            caplen = min(origlen, len(body) - 4)
            self.reassembly.snaplen = self.interfaces[0][2]
            self._packet(self.interfaces[0][0], body[4 : 4 + caplen], origlen, 0)
        elif block_type != PCAPNG_SHB:
            self.counters["skipped_blocks"] += 1
        return True

    # ------------------------------------------------------------------ packet layers
    def _packet(self, linktype: int, pkt, origlen: int, ts: int) -> None:
        counters = self.counters
        counters["packets"] += 1
        n = len(pkt)
        # Link layer -> (ethertype-ish family, offset of the IP header)
        header = _ETHERTYPE_LINKS.get(linktype)
        if header is not None:
            off, ethertype_at = header
            if n < off:
                counters["malformed"] += 1
                return
            ethertype = _BE16.unpack_from(pkt, ethertype_at)[0]
            while linktype == LINK_ETHERNET and ethertype in VLAN_ETHERTYPES:
                if n - off < 4:
                    counters["malformed"] += 1
                    return
                ethertype = _BE16.unpack_from(pkt, off + 2)[0]
                off += 4
        elif linktype == LINK_NULL or linktype == LINK_LOOP:
            if n < 4:
                counters["malformed"] += 1
                return
            family = struct.unpack_from("<I" if linktype == LINK_NULL else ">I", pkt, 0)[0]
            if linktype == LINK_NULL and family > 0xFFFF:  # written by a big-endian host
                family = _BE32.unpack_from(pkt, 0)[0]
            ethertype = 0x0800 if family == 2 else 0x86DD if family in (10, 24, 28, 30) else 0
            off = 4
        elif linktype in RAW_LINKS:
            ethertype = 0x0800 if n and pkt[0] >> 4 == 4 else 0x86DD if n and pkt[0] >> 4 == 6 else 0
            off = 0
        elif linktype == LINK_IPV4:
            ethertype, off = 0x0800, 0
        elif linktype == LINK_IPV6:
            ethertype, off = 0x86DD, 0
        else:
            counters["unsupported_link"] += 1
            return
        # Network layer -> addresses, offset and end of the TCP segment
        if ethertype == 0x0800:
            if n - off < 20 or pkt[off] >> 4 != 4:
                counters["malformed"] += 1
                return
            ihl = (pkt[off] & 0x0F) * 4
            total = _BE16.unpack_from(pkt, off + 2)[0]
            if total == 0:  # segmentation offload: the length was never filled in
                total = max(origlen, n) - off
            if ihl < 20 or total < ihl or n - off < ihl:
                counters["malformed"] += 1
                return
            if _BE16.unpack_from(pkt, off + 6)[0] & 0x3FFF:  # more-fragments flag or an offset
                counters["ip_fragments"] += 1
                return
            if pkt[off + 9] != 6:
                counters["non_tcp"] += 1
                return
            src = bytes(pkt[off + 12 : off + 16])
            dst = bytes(pkt[off + 16 : off + 20])
            ip_end = off + total  # beyond the captured bytes when the snap length cut the packet
            tcp = off + ihl
        elif ethertype == 0x86DD:
            if n - off < 40 or pkt[off] >> 4 != 6:
                counters["malformed"] += 1
                return
            payload_len = _BE16.unpack_from(pkt, off + 4)[0]
            next_header = pkt[off + 6]
            src = bytes(pkt[off + 8 : off + 24])
            dst = bytes(pkt[off + 24 : off + 40])
            tcp = off + 40
            ip_end = tcp + payload_len if payload_len else max(origlen, n)  # 0: jumbogram
            while next_header != 6:
                if next_header in (0, 43, 60, 51):  # hop-by-hop, routing, destination options, AH
                    if n - tcp < 2:
                        counters["malformed"] += 1
                        return
                    ext_len = (pkt[tcp + 1] + 2) * 4 if next_header == 51 else (pkt[tcp + 1] + 1) * 8
                    next_header = pkt[tcp]
                    tcp += ext_len
                elif next_header == 44:  # fragment header: only an atomic fragment carries a whole segment
                    if n - tcp < 8:
                        counters["malformed"] += 1
                        return
                    if _BE16.unpack_from(pkt, tcp + 2)[0] & 0xFFF9:
                        counters["ip_fragments"] += 1
                        return
                    next_header = pkt[tcp]
                    tcp += 8
                else:
                    counters["non_tcp"] += 1
                    return
        else:
            counters["unsupported_link"] += 1
            return
        # Transport layer
        if n - tcp < 20 or tcp > ip_end:
            counters["malformed"] += 1
            return
        doff = (pkt[tcp + 12] >> 4) * 4
        if doff < 20 or n - tcp < doff or tcp + doff > ip_end:
            counters["malformed"] += 1
            return
        sport, dport = struct.unpack_from(">HH", pkt, tcp)
        seq = _BE32.unpack_from(pkt, tcp + 4)[0]
        flags = pkt[tcp + 13]
        data_start = tcp + doff
        wire_len = ip_end - data_start  # payload length on the wire
        captured = pkt[data_start : min(n, ip_end)]
        counters["tcp_packets"] += 1
        counters["tcp_payload_bytes"] += len(captured)
        self.reassembly._segment(
            src, sport, dst, dport, seq, _BE32.unpack_from(pkt, tcp + 8)[0], flags, captured, wire_len, ts
        )


def scan_frames(data, max_frame_size: int = 100 * 1024 * 1024, max_frames: int = 1 << 62):
    """Split concatenated size-prefixed frames.

    Returns (starts, sizes, consumed, error, payloads): numpy int64 offsets of
    each payload and int32 sizes, the bytes consumed (whole frames only), None or
    the text of why reading stopped at a size prefix (negative, or above
    ``max_frame_size``), and the payloads concatenated.
    """
    view = memoryview(data).cast("B")
    starts: list[int] = []
    sizes: list[int] = []
    payloads: list[memoryview] = []
    pos, end = 0, len(view)
    error: str | None = None
    while end - pos >= 4 and len(sizes) < max_frames:
        size = _BE32S.unpack_from(view, pos)[0]
        if size < 0 or size > max_frame_size:
            error = _engine.invalid_frame_size(size, max_frame_size)
            break
        if end - pos - 4 < size:
            break
        starts.append(pos + 4)
        sizes.append(size)
        payloads.append(view[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return (np.array(starts, dtype=np.int64), np.array(sizes, dtype=np.int32), pos, error, b"".join(payloads))

"""Capture sets: the consecutive files of one rotated capture, analysed as one capture.

``tcpdump -C`` / ``-G`` and dumpcap ring buffers write one capture as many files, so
a TCP connection (and a Kafka frame) continues from one file into the next. The files
of a set are read as one stream, in order of their first timestamps, so that those
connections and frames are reassembled rather than counted as gaps and tails.

:func:`read_head` looks at one file (its header, first timestamp and whether it ends
on a record boundary); :func:`detect_sets` is a plain function of those heads (no
I/O, no Spark): automatic detection by rotation naming, sets named explicitly by
globs, or none. Nothing here imports pyspark.
"""

from __future__ import annotations

import fnmatch
import os
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlparse

from kproto._common.capture import (
    PCAP_FILE_MAGICS,
    PCAPNG_BOM,
    PCAPNG_FILE_MAGIC,
    PCAPNG_IF_NAME,
    pcapng_interface_clock,
    pcapng_options,
)
from kproto.limits import CAPTURE_MAX_RECORD_SIZE

PCAP_HEADER_SIZE = 24
PCAP_RECORD_HEADER = 16
_MAX_RECORD = 256 * 1024  # a plausible captured packet, when records are looked for mid-file
HEAD_BYTES = 64 * 1024  # enough for a pcapng section header, its interfaces and a first packet
TAIL_BYTES = 1024 * 1024  # where a large pcap's last record boundary is looked for
_TAIL_CHAIN = 8  # plausible records ending exactly at the end of the file


@dataclass(frozen=True)
class FileHead:
    """What set detection needs to know of one capture file."""

    path: str
    size: int
    format: str  # pcap, pcapng, frames (frame dumps and unreadable files are never in a set)
    layout: str = ""  # what must match for files to be pieces of one capture (byte order,
    # timestamp unit, link types, snaplens, interface names)
    first_ts_ns: int | None = None  # the first packet's timestamp; None without a packet in the head
    last_ts_ns: int | None = None  # the last packet's timestamp, when the end of the file was found
    ends_on_record: bool = True  # the file's last record is complete (a file cut mid-record ends its set)


@dataclass
class CaptureSet:
    """Files read as one capture, in capture order; ``name`` is the ``capture`` column's value."""

    name: str
    files: list[FileHead] = field(default_factory=list)


class CaptureSetError(ValueError):
    """A set named explicitly whose files cannot be pieces of one capture (a usage error)."""


# ---------------------------------------------------------------- reading heads
def read_head(path: str, size: int, read) -> FileHead:
    """The head of one file; ``read(offset, count)`` gives its bytes (fewer at the end of the file)."""
    head = read(0, HEAD_BYTES)
    if head[:4] in PCAP_FILE_MAGICS and len(head) >= PCAP_HEADER_SIZE:
        return _pcap_head(path, size, head, read)
    if head[:4] == PCAPNG_FILE_MAGIC and len(head) >= 12:
        return _pcapng_head(path, size, head, read)
    return FileHead(path, size, "frames")


def _pcap_head(path: str, size: int, head: bytes, read) -> FileHead:
    order, nanos = PCAP_FILE_MAGICS[head[:4]]
    snaplen, linktype = struct.unpack_from(order + "II", head, 16)
    first = pcap_record(head, PCAP_HEADER_SIZE, order, nanos, snaplen)
    last = _pcap_last_record(size, order, nanos, snaplen, first[0] if first else None, read)
    last_ts = pcap_record_ts(read(last, 8), 0, order, nanos) if last is not None and last >= 0 else None
    first_ts = None
    if len(head) >= PCAP_HEADER_SIZE + PCAP_RECORD_HEADER:
        first_ts = pcap_record_ts(head, PCAP_HEADER_SIZE, order, nanos)
    return FileHead(
        path,
        size,
        "pcap",
        repr(("pcap", order, nanos, linktype & 0xFFFF, snaplen)),
        first_ts,
        last_ts,
        last is not None,
    )


def pcap_record(data: bytes, pos: int, order: str, nanos: bool, snaplen: int) -> tuple[int, int] | None:
    """(timestamp ns, record length) of a plausible pcap record header at ``pos``, else None."""
    if pos + PCAP_RECORD_HEADER > len(data):
        return None
    _seconds, fraction, captured, original = struct.unpack_from(order + "IIII", data, pos)
    if fraction >= (1_000_000_000 if nanos else 1_000_000):
        return None
    if captured > original or captured > max(snaplen, 65535) or captured > _MAX_RECORD or captured < 14:
        return None
    return pcap_record_ts(data, pos, order, nanos), PCAP_RECORD_HEADER + captured


def pcap_record_ts(data: bytes, pos: int, order: str, nanos: bool) -> int:
    """The timestamp (ns) of the pcap record header at ``pos``: seconds, then micro- or nanoseconds."""
    seconds, fraction = struct.unpack_from(order + "II", data, pos)
    return seconds * 1_000_000_000 + fraction * (1 if nanos else 1000)


def plausible_window(first_ts_ns: int) -> tuple[int, int]:
    """Timestamps a record of a capture that began at ``first_ts_ns`` may have: from a day before to a year after."""
    return first_ts_ns - 86400 * 10**9, first_ts_ns + 86400 * 10**9 * 365


def _pcap_last_record(size: int, order: str, nanos: bool, snaplen: int, first_ts: int | None, read) -> int | None:
    """Where the last record of a pcap starts (-1: no record) when its records end exactly at its end, else None.

    A small file is walked from its header (every record the reader would take); in a
    large one, the first chain of plausible records (:func:`pcap_record`, timestamps near
    the first record's) in its last megabyte is followed: the records either end at the
    end of the file or they do not.
    """
    base = PCAP_HEADER_SIZE if size <= TAIL_BYTES + PCAP_HEADER_SIZE else size - TAIL_BYTES
    data = read(base, size - base)
    if base == PCAP_HEADER_SIZE:
        pos, last = 0, -1
        while pos + PCAP_RECORD_HEADER <= len(data):
            captured = struct.unpack_from(order + "I", data, pos + 8)[0]
            if captured > CAPTURE_MAX_RECORD_SIZE:
                return None
            pos, last = pos + PCAP_RECORD_HEADER + captured, pos
        return (base + last if last >= 0 else -1) if pos == len(data) else None
    if first_ts is None:
        return None
    low, high = plausible_window(first_ts)
    for start in range(0, max(0, len(data) - PCAP_RECORD_HEADER)):
        pos, last, chain = start, -1, 0
        while (record := pcap_record(data, pos, order, nanos, snaplen)) is not None and low <= record[0] <= high:
            pos, last, chain = pos + record[1], pos, chain + 1
        if chain >= _TAIL_CHAIN or pos == len(data) and chain:
            return base + last if pos == len(data) else None
    return None


def _pcapng_head(path: str, size: int, head: bytes, read) -> FileHead:
    order = "<" if struct.unpack_from("<I", head, 8)[0] == PCAPNG_BOM else ">"
    interfaces: list[tuple] = []
    converters = []
    first = None
    pos = 0
    while pos + 12 <= len(head) and first is None:
        block_type, length = struct.unpack_from(order + "II", head, pos)
        if length < 12 or pos + length > len(head):
            break
        body = head[pos + 8 : pos + length - 4]
        if block_type == 1 and len(body) >= 8:
            linktype, _reserved, snaplen = struct.unpack_from(order + "HHI", body, 0)
            options = pcapng_options(body, order, 8)
            name = next((value for code, value in options if code == PCAPNG_IF_NAME), b"")
            interfaces.append((linktype, snaplen, name.rstrip(b"\0").decode("utf-8", "replace")))
            converters.append(pcapng_interface_clock(options, order))
        elif block_type == 6 and len(body) >= 20:
            interface, high, low = struct.unpack_from(order + "III", body, 0)
            if interface < len(converters):
                first = converters[interface]((high << 32) | low)
        pos += length
    complete, last_packet = _pcapng_tail(size, order, read)
    last_ts = None
    if last_packet is not None:
        interface, high, low = struct.unpack_from(order + "III", last_packet, 0)
        last_ts = converters[interface]((high << 32) | low) if interface < len(converters) else None
    return FileHead(path, size, "pcapng", repr(("pcapng", order, tuple(interfaces))), first, last_ts, complete)


def _pcapng_tail(size: int, order: str, read) -> tuple[bool, bytes | None]:
    """(the last block is complete, the start of the last packet block's body or None).

    Blocks repeat their length at their end, so the chain is walked back from the end
    of the file: to its start, or for a few blocks (more to reach a packet block).
    """
    end, chain, last_packet = size, 0, None
    while end > 0 and (chain < _TAIL_CHAIN or last_packet is None and chain < 8 * _TAIL_CHAIN):
        trailer = read(end - 4, 4)
        length = struct.unpack(order + "I", trailer)[0] if len(trailer) == 4 else 0
        leading = read(end - length, 20) if 12 <= length <= end and length % 4 == 0 else b""
        if len(leading) < 8 or struct.unpack_from(order + "I", leading, 4)[0] != length:
            return False, None
        if last_packet is None and struct.unpack_from(order + "I", leading, 0)[0] == 6 and len(leading) == 20:
            last_packet = leading[8:20]
        end -= length
        chain += 1
    return True, last_packet


# ---------------------------------------------------------------- rotation names
_DUMPCAP_RING = re.compile(r"^(?P<prefix>.*)_(?P<index>\d{5,})_(?P<time>\d{14})(?P<ext>(\.[^.]+)*)$")
# A strftime date and time in a name (tcpdump -G): 2026-11-25_09:30:00, 20261125093000, 20261125-0930, ...
_DATE_TIME = re.compile(
    r"(?<!\d)\d{4}[-_.]?\d{2}[-_.]?\d{2}(?:[T_.-]?\d{2}(?:[:.-]?\d{2}){1,2})?(?!\d)"
    r"|(?<!\d)\d{10}(?!\d)"
)
# tcpdump -C: the file name given to -w, then the same name with 1, 2, ... appended.
_SIZE_ROTATION = re.compile(r"^(?P<base>.*?\D)(?P<index>\d*)$")


def rotation_key(name: str) -> tuple[str, int]:
    """(the name with its rotation parts replaced by ``*``, the rotation index) of a file's base name.

    dumpcap ring buffers: ``prefix_00001_20261125093000.pcapng``; tcpdump -G: a
    strftime date in the name; tcpdump -C: ``name.pcap``, ``name.pcap1``, ... Files
    whose keys are equal may be pieces of one capture; a name without rotation parts
    is its own key.
    """
    ring = _DUMPCAP_RING.match(name)
    if ring:
        return f"{ring['prefix']}_*_*{ring['ext']}", int(ring["index"])
    masked = _DATE_TIME.sub("*", name)
    sized = _SIZE_ROTATION.match(masked)
    if sized is None:
        return masked, 0
    return sized["base"] + "*", int(sized["index"] or 0)


# ---------------------------------------------------------------- detecting sets
def detect_sets(
    heads: Sequence[FileHead], *, automatic: bool = True, named: Sequence[tuple[str, str]] = ()
) -> list[CaptureSet]:
    """Every file in exactly one set, the sets sorted by name; a file alone is a set named by its path.

    ``named``: (name, glob) pairs: the files a glob matches (the whole path, or the
    base name for a glob without ``/``) form that set, whatever their names; files
    that cannot be pieces of one capture raise :class:`CaptureSetError`.
    ``automatic``: the other files are grouped by :func:`rotation_key` (same
    directory and key), then by :attr:`FileHead.layout`; else each is alone.
    A set is ordered by first timestamp (then rotation index, then name), and a
    file whose last record is incomplete ends its set (the next file starts another).
    """
    sets: list[CaptureSet] = []
    taken: set[str] = set()
    for name, pattern in named:
        files = [h for h in heads if h.path not in taken and _matches(h.path, pattern)]
        if not files:
            raise CaptureSetError(f"capture set {name}: no input file matches {pattern}")
        layouts = {h.layout for h in files}
        if len(layouts) > 1 or files[0].format == "frames":
            raise CaptureSetError(
                f"capture set {name}: {', '.join(h.path for h in files)} are not pieces of "
                "one pcap or pcapng capture (format, byte order, link types or snaplen differ)"
            )
        taken.update(h.path for h in files)
        sets.extend(_cut_at_incomplete_files(name, _ordered(files), named=True))
    groups: dict[tuple, list[FileHead]] = {}
    for h in heads:
        if h.path in taken:
            continue
        directory, base = os.path.split(h.path)
        if automatic and h.format != "frames":
            groups.setdefault((directory, rotation_key(base)[0], h.layout), []).append(h)
        else:
            groups[(h.path,)] = [h]
    for key, files in groups.items():
        for chain in _chains(_ordered(files)):
            if len(chain) == 1:
                sets.append(CaptureSet(chain[0].path, chain))
            else:
                sets.extend(_cut_at_incomplete_files(os.path.join(key[0], key[1]), chain))
    names = [s.name for s in sets]
    for s in sets:
        if names.count(s.name) > 1:  # two captures rotated under one name pattern: name each by its first file
            s.name = f"{s.name} from {os.path.basename(s.files[0].path)}"
    return sorted(sets, key=lambda s: s.name)


def _chains(files: list[FileHead]) -> list[list[FileHead]]:
    """Files (in capture order) as chains of files that follow each other in time.

    Pieces of one capture never overlap in time; files that do (two brokers rotating
    under one name pattern) are in different chains: each file continues the chain
    that ended last at or before its first timestamp, else starts one.
    """
    chains: list[list[FileHead]] = []
    for head in files:
        candidates = [
            c
            for c in chains
            if head.first_ts_ns is None or c[-1].last_ts_ns is None or c[-1].last_ts_ns <= head.first_ts_ns
        ]
        if candidates:
            max(candidates, key=lambda c: c[-1].last_ts_ns or 0).append(head)
        else:
            chains.append([head])
    return chains


def _matches(path: str, pattern: str) -> bool:
    """A glob with ``/`` matches the whole path (of a URI: with or without its scheme and host), else the base name."""
    if "/" not in pattern:
        return fnmatch.fnmatchcase(os.path.basename(path), pattern)
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(urlparse(path).path, pattern)


def _ordered(files: list[FileHead]) -> list[FileHead]:
    def order(h: FileHead) -> tuple:
        return (h.first_ts_ns is None, h.first_ts_ns or 0, rotation_key(os.path.basename(h.path))[1], h.path)

    return sorted(files, key=order)


def _cut_at_incomplete_files(name: str, files: list[FileHead], named: bool = False) -> list[CaptureSet]:
    """The files as one set, or several when a file but the last ends mid-record (its bytes
    would run into the next file's records): the pieces after the first are named ``name#2``, ...
    A detected piece of one file is named by its path; a named one keeps its name."""
    pieces = [CaptureSet(name)]
    for index, head in enumerate(files):
        pieces[-1].files.append(head)
        if not head.ends_on_record and index < len(files) - 1:
            pieces.append(CaptureSet(f"{name}#{len(pieces) + 1}"))
    return [p if len(p.files) > 1 or named else CaptureSet(p.files[0].path, p.files) for p in pieces]

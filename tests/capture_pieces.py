"""Cutting a capture into the files a rotating capture would have written (tests of capture sets)."""

from __future__ import annotations

import struct
from pathlib import Path

PCAP_HEADER = 24


def pcap_records(data: bytes) -> tuple[bytes, list[bytes]]:
    """(the file header, every record with its 16-byte header) of a little- or big-endian pcap."""
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    records, pos = [], PCAP_HEADER
    while pos + 16 <= len(data):
        captured = struct.unpack_from(order + "I", data, pos + 8)[0]
        records.append(data[pos : pos + 16 + captured])
        pos += 16 + captured
    return data[:PCAP_HEADER], records


def cut_pcap(data: bytes, pieces: int) -> list[bytes]:
    """The capture as ``pieces`` pcap files of about as many records each (cut at record boundaries
    only: wherever that falls in a connection or a Kafka frame)."""
    header, records = pcap_records(data)
    cuts = [round(i * len(records) / pieces) for i in range(pieces + 1)]
    return [header + b"".join(records[a:b]) for a, b in zip(cuts, cuts[1:])]


def cut_pcap_as_pcapng(data: bytes, pieces: int, *, statistics: bool = True) -> list[bytes]:
    """The same cut as :func:`cut_pcap`, each piece a pcapng file (a section, an interface, its packets
    and, as dumpcap writes at the end of a file, an interface statistics block)."""
    from tests.pcapwriter import PcapngWriter

    out = []
    for piece in cut_pcap(data, pieces):
        header, records = pcap_records(piece)
        order = "<" if header[:4] == b"\xd4\xc3\xb2\xa1" else ">"
        writer = PcapngWriter()
        interface = writer.add_interface(struct.unpack_from(order + "I", header, 20)[0], tsresol=6)
        for record in records:
            seconds, micros = struct.unpack_from(order + "II", record, 0)
            writer.add(interface, seconds * 1_000_000_000 + micros * 1000, record[16:])
        if statistics:
            writer.add_statistics(interface)
        out.append(writer.getvalue())
    return out


def write_pieces(directory: Path, names: list[str], pieces: list[bytes]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, piece in zip(names, pieces):
        (directory / name).write_bytes(piece)
        paths.append(directory / name)
    return paths


def dumpcap_names(prefix: str, count: int, extension: str = ".pcap") -> list[str]:
    """dumpcap ring-buffer names: prefix_00001_20261125093000.pcap, ..."""
    return [f"{prefix}_{i + 1:05d}_202611250930{i % 60:02d}{extension}" for i in range(count)]


def tcpdump_size_names(name: str, count: int) -> list[str]:
    """tcpdump -C names: name, name1, name2, ..."""
    return [name] + [f"{name}{i}" for i in range(1, count)]


#: Columns that name the input (a file or a set of files) or count its files and their headers:
#: the only ones allowed to differ between a capture set and the unsplit capture.
NAMING_COLUMNS = ("capture", "file", "files", "file_bytes", "record_bytes")


def table_rows(table, drop=NAMING_COLUMNS) -> list[str]:
    """A table's rows as sorted JSON texts, without the ``drop`` columns (comparable across runs)."""
    import json

    keep = [name for name in table.column_names if name not in drop]
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in table.select(keep).to_pylist())


def input_errors(errors) -> list[dict]:
    """The rows of an ``errors`` table that are input problems (not a connection's ``stream_loss``),
    with the columns input problems have."""
    return [
        {k: v for k, v in row.items() if k not in ("connection_id", "direction", "lost_bytes")}
        for row in errors.to_pylist()
        if row["category"] != "stream_loss"
    ]


def analysed(splits, **options) -> dict:
    """Every table ``kproto analyze`` writes, for ``splits``, computed without Spark (as the driver combines them);
    ``options``: task.process_split's."""
    import pyarrow as pa

    from kproto.analyze.spark import accounting as A
    from kproto.analyze.spark import combine, task, worker
    from kproto.analyze.spark.stream_losses import stream_loss_rows

    sink = worker.Sink()
    parts = pa.Table.from_batches(
        [b for s in splits for b in task.process_split(s, sink=sink, **options)], schema=worker.PARTS_SCHEMA
    )
    accounting = [
        r
        for r in parts.select(["kind", "capture", "connection_id", "info"]).to_pylist()
        if r["kind"] in ("capture", "counts", "connection")
    ]
    errors = A.error_rows(accounting)
    tables = combine.combine(parts)
    tables.update(
        frames=sink.table("frames"),
        exchanges=sink.table("exchanges"),
        errors=pa.Table.from_pylist(errors + stream_loss_rows(accounting), schema=A.ERRORS_SCHEMA),
        summary=pa.Table.from_pylist(A.summary_rows(accounting, errors), schema=A.SUMMARY_SCHEMA),
    )
    return tables

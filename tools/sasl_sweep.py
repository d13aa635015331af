"""The SASL captures of tests/protocol_captures.py from every start record (issue 35):
frames with an OK status (every byte captured) that are not real Kafka frames ("garbage"),
the real frames recovered, and directions not accounted for, in three sweeps:

* unknown port: no broker port is given, so the engine infers each connection's direction;
* loss: the broker's port is known, and each single data segment after the start is dropped;
* loss pairs: the same with every two data segments dropped.

A plain Kafka connection (ApiVersions, Metadata, Produce: no SASL) is read the same ways.

Segments are 200 bytes, so the ApiVersions response spans two: losing its first leaves the
entries' zeros, where the ApiVersions request's id 0 reads as a header.

Usage: PYTHONPATH=. python tools/sasl_sweep.py [--impl c|py] [--verbose]
"""

from __future__ import annotations

import argparse
import itertools
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kproto.arrow.capture import read_capture  # noqa: E402
from tests.capture_pieces import pcap_records  # noqa: E402
from tests.protocol_captures import host_capture, sasl_capture  # noqa: E402

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "GSSAPI")
ETHERNET = 14


def has_payload(record: bytes) -> bool:
    """Does this Ethernet/IPv4 record carry TCP payload?"""
    ip = 16 + ETHERNET
    ip_header = (record[ip] & 0x0F) * 4
    total = struct.unpack_from(">H", record, ip + 2)[0]
    return total > ip_header + (record[ip + ip_header + 12] >> 4) * 4


def score(data: bytes, truth: tuple, impl: str, broker_ports) -> tuple[int, int, int]:
    """(garbage frames, real frames, directions not accounted for) of one capture: whole frames
    whose payload is (not) a real frame of their direction; a direction is accounted for when
    its stream bytes are all in frames, skipped, tail, SASL or other bytes, its frame counter is
    the frames emitted, and their sequence numbers run 0, 1, 2, ... (none taken twice)."""
    capture = read_capture(data, implementation=impl, broker_ports=broker_ports)
    frames = capture.frames.to_pylist()
    garbage = real = 0
    for frame in frames:
        if len(frame["payload"]) != frame["size"]:
            continue
        if frame["payload"] in truth[frame["direction"]]:
            real += 1
        else:
            garbage += 1
    unaccounted = 0
    for row in capture.connections.to_pylist():
        for direction, side in enumerate(("request_", "response_")):
            parts = ("frame_bytes", "skipped_bytes", "tail_bytes", "sasl_bytes", "other_bytes")
            sequences = sorted(
                f["sequence"]
                for f in frames
                if f["connection_id"] == row["connection_id"] and f["direction"] == direction
            )
            if (
                row[side + "stream_bytes"] != sum(row[side + part] for part in parts)
                or row[side + "frames"] != len(sequences)
                or sequences != list(range(len(sequences)))
            ):
                unaccounted += 1
    return garbage, real, unaccounted


def captures(kind: str):
    """(name, pcap, request frames, response frames) of the captures a sweep reads."""
    for mechanism in MECHANISMS:
        for version in (0, 1):
            yield (f"{mechanism}-v{version}",) + sasl_capture(mechanism, version, segment=200)[:3]
    yield ("plain",) + host_capture(with_others=False, segment=200)[:3]


def cases(kind: str):
    """(name, pcap, truth) of every case of a sweep: truth is (request payloads, response payloads)."""
    for capture, data, requests, responses in captures(kind):
        truth = ({f[4:] for f in requests}, {f[4:] for f in responses})
        header, records = pcap_records(data)
        for start in range(len(records)):
            kept = records[start:]
            if kind == "unknown-port":
                yield f"{capture}@{start}", header + b"".join(kept), truth
                continue
            data_records = [i for i, record in enumerate(kept) if has_payload(record)]
            for lost in itertools.combinations(data_records, 2 if kind == "loss-pairs" else 1):
                yield (
                    f"{capture}@{start}-{'-'.join(map(str, lost))}",
                    header + b"".join(record for i, record in enumerate(kept) if i not in lost),
                    truth,
                )


def sweep(kind: str, impl: str | None = None) -> dict:
    """{"cases", "garbage", "real", "unaccounted", "garbage_cases": names, "unaccounted_cases": names} of one sweep."""
    ports = () if kind == "unknown-port" else (9092,)
    figures = {"cases": 0, "garbage": 0, "real": 0, "unaccounted": 0, "garbage_cases": [], "unaccounted_cases": []}
    for name, data, truth in cases(kind):
        garbage, real, unaccounted = score(data, truth, impl, ports)
        figures["cases"] += 1
        figures["garbage"] += garbage
        figures["real"] += real
        figures["unaccounted"] += unaccounted
        if garbage:
            figures["garbage_cases"].append(name)
        if unaccounted:
            figures["unaccounted_cases"].append(name)
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default=None, help="c or py (default: the compiled one if built)")
    parser.add_argument("--verbose", action="store_true", help="name the cases with garbage")
    args = parser.parse_args(argv)
    for kind in ("unknown-port", "loss", "loss-pairs"):
        figures = sweep(kind, args.impl)
        print(
            f"{kind}: {figures['cases']} cases, {figures['real']} real frames, {figures['garbage']} garbage frames, "
            f"{figures['unaccounted']} directions not accounted for"
        )
        if args.verbose:
            print("  garbage: " + " ".join(figures["garbage_cases"]))
            print("  not accounted for: " + " ".join(figures["unaccounted_cases"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Seed corpora for the fuzz targets, generated from valid encodings.

Mutating valid inputs reaches deep into a decoder quickly: a seed already gets
past the size prefixes, headers and checksums, so a flipped byte lands in the
body. Seeds are made here on demand (nothing is checked in), deterministically:

* messages: every request and response version kproto knows, with a sample
  value in every field (one-element arrays, short strings, a record batch in
  ``records`` fields, an unknown tagged field where the version is flexible),
  plus the all-defaults body;
* records: magic 0, 1 and 2 with every codec, a control batch, several batches
  in a row and a cut-short tail;
* captures: pcap and pcapng conversations over every link type kproto reads,
  IPv4 and IPv6, segmented and mid-stream;
* framing: runs of size-prefixed frames.

``python -m tests.fuzz.corpus DIR`` writes them to ``DIR/<target>/`` (the
layout atheris / libFuzzer take as corpus directories).
"""

from __future__ import annotations

import hashlib
import struct
import sys
import uuid
from functools import lru_cache
from pathlib import Path

from kproto import _impl, schema
from kproto.schema import (
    ARRAY,
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    STRUCT,
    UINT16,
    UINT32,
    UUID,
)
from tests.fuzz import targets

_codec = _impl.load("codec", "py")
_records = _impl.load("records", "py")

_SCALAR_SAMPLES = {
    BOOL: True,
    INT8: 1,
    INT16: 2,
    INT32: 3,
    INT64: 4,
    UINT16: 5,
    UINT32: 6,
    FLOAT64: 1.5,
    UUID: uuid.UUID(int=0x0123456789ABCDEF),
    STRING: "kproto",
    BYTES: b"\x01\x02",
}
_UNKNOWN_TAG = 9999  # far above every tag Kafka defines


@lru_cache(maxsize=1)
def _small_batch() -> bytes:
    return _records.encode_records([(b"k", b"v", [("h", b"1")])], magic=2, base_offset=7)


def _sample(op, kind: int, depth: int):
    if kind == ARRAY:
        return [_sample(op, op.elem_kind, depth)]
    if kind == STRUCT:
        return sample_struct(op.child, depth + 1)
    if kind == RECORDS:
        return _small_batch()
    return _SCALAR_SAMPLES[kind]


def sample_struct(plan, depth: int = 0):
    """A value of the plan's class with a non-default value in every field of that version."""
    fields = {op.name: _sample(op, op.kind, depth) for op in plan.fields + plan.tagged}
    if plan.flexible and _UNKNOWN_TAG not in plan.tag_map:
        fields["_unknown_tags"] = {_UNKNOWN_TAG: b"?"}
    return plan.cls(**fields)


def _versions(kind: str):
    for api_key in schema.api_keys():
        name = schema.request_name(api_key) if kind == "request" else schema.response_name(api_key)
        if name is None:
            continue
        lo, hi = schema.spec(name)["valid_versions"]
        for version in range(lo, hi + 1):
            yield api_key, version, schema.plan(name, version)


@lru_cache(maxsize=1)
def request_seeds() -> tuple[bytes, ...]:
    seeds = []
    for _api_key, _version, plan in _versions("request"):
        for body in (sample_struct(plan), plan.cls()):
            try:
                seeds.append(_codec.encode_request(body, plan, 42, "fuzz"))
            except Exception:  # a default that a version cannot carry: the other body still seeds it
                continue
    return tuple(seeds)


@lru_cache(maxsize=1)
def response_seeds() -> tuple[bytes, ...]:
    seeds = []
    for api_key, version, plan in _versions("response"):
        selector = targets.response_selector(api_key, version)
        for body in (sample_struct(plan), plan.cls()):
            try:
                seeds.append(selector + _codec.encode_response(body, plan, 42))
            except Exception:
                continue
    return tuple(seeds)


def header_seeds() -> tuple[bytes, ...]:
    # a header followed by its body is a valid header input too; keep them short
    return tuple(seed[:64] for seed in request_seeds())


@lru_cache(maxsize=1)
def record_seeds() -> tuple[bytes, ...]:
    rows = [(b"key-1", b"value-1", [("trace", b"abc")]), (None, b"v" * 40, []), (b"k", None, [("x", None)])]
    legacy_rows = [(key, value) for key, value, _headers in rows]  # magic 0/1 have no headers
    encodings = []
    for magic in (0, 1, 2):
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            if magic < 2 and codec == "zstd":
                continue  # zstd came with magic 2
            encodings.append(
                _records.encode_records(
                    rows if magic == 2 else legacy_rows, magic=magic, compression=codec, base_offset=100
                )
            )
    encodings.append(_records.encode_control_batch("commit", producer_id=5, producer_epoch=1, base_offset=9))
    encodings.append(_records.encode_records(rows, magic=2, compression="zstd", producer_id=9, is_transactional=True))
    # encodings: magic 0 (4 codecs), magic 1 (4), magic 2 (5), control, transactional zstd
    two = encodings[8] + encodings[12]
    encodings += [two, two[:-7], encodings[0] + encodings[4] + encodings[10]]
    seeds = []
    for data in encodings:
        seeds.append(targets.records_options(verify_crc=False, small_cap=False) + data)
        seeds.append(targets.records_options(verify_crc=False, small_cap=True) + data)
    seeds += [targets.records_options(verify_crc=True, small_cap=False) + data for data in encodings[8:14]]
    seeds += [targets.records_options(verify_crc=True, small_cap=False, zero_copy=True) + data for data in encodings]
    # sets of several batches (and wrappers of several messages) reach the per-set limits
    seeds += [
        targets.records_options(verify_crc=True, small_cap=False, small_set_limits=True) + data
        for data in encodings[:4] + encodings[-3:] + [encodings[10] + encodings[12]]
    ]
    return tuple(seeds)


@lru_cache(maxsize=1)
def capture_seeds() -> tuple[bytes, ...]:
    from tests.pcapwriter import (
        LINK_ETHERNET,
        LINK_NULL,
        LINK_RAW,
        LINK_SLL,
        LINK_SLL2,
        Conversation,
        PcapngWriter,
        pcap_of,
        request_frame,
        response_frame,
    )

    requests = [request_frame(3, 12, 1, b"\x00\x00"), request_frame(18, 3, 2, b"\x00\x00\x00")]
    responses = [response_frame(1, b"\x00" * 12), response_frame(2, b"\x00\x01\x02")]

    def conversation(sizes=(7, 13), **kwargs):
        conv = Conversation(**kwargs)
        packets = conv.handshake()
        for request, response in zip(requests, responses):
            packets += conv.data("client", request, sizes)
            packets += conv.data("server", response, sizes)
        return packets + conv.close()

    files = []
    for linktype in (LINK_ETHERNET, LINK_NULL, LINK_RAW, LINK_SLL, LINK_SLL2):
        files.append(pcap_of(conversation(linktype=linktype), linktype=linktype))
        _TCP_SEEDS.append(targets.tcp_packets(linktype, [p.data for p in conversation(linktype=linktype)]))
        _TCP_SEEDS.append(
            targets.tcp_packets(linktype, [p.data for p in conversation(linktype=linktype)[3:]], small=True)
        )
    files.append(pcap_of(conversation(vlans=(5,)), nanos=True, big_endian=True))
    files.append(pcap_of(conversation(client=("fd00::1", 40000), server=("fd00::2", 9092))))
    files.append(pcap_of(conversation()[3:]))  # no handshake: a mid-stream start
    packets = conversation(sizes=(1000,))
    packets[3], packets[4] = packets[4], packets[3]  # out of order
    files.append(pcap_of(packets + packets[3:5]))  # and resent
    _TCP_SEEDS.append(targets.tcp_packets(LINK_ETHERNET, [p.data for p in packets + packets[3:5]]))
    ipv6 = conversation(client=("fd00::1", 40000), server=("fd00::2", 9092))
    _TCP_SEEDS.append(targets.tcp_packets(LINK_ETHERNET, [p.data for p in ipv6]))
    writer = PcapngWriter()
    writer.section()
    writer.add_interface(LINK_ETHERNET, tsresol=9)
    for index, packet in enumerate(conversation()):
        writer.add(0, 1_700_000_000_000_000_000 + index * 1000, packet.data)
    writer.add_statistics(0)
    files.append(writer.getvalue())
    seeds = []
    for data in files:
        seeds.append(targets.capture_options(small=False) + data)
        seeds.append(targets.capture_options(small=True) + data)
    return tuple(seeds)


_TCP_SEEDS: list[bytes] = []  # filled by capture_seeds, from the same conversations


def tcp_seeds() -> tuple[bytes, ...]:
    capture_seeds()
    return tuple(_TCP_SEEDS)


def framing_seeds() -> tuple[bytes, ...]:
    frames = b"".join(struct.pack(">i", len(p)) + p for p in (b"", b"a", b"hello", b"x" * 40))
    return tuple(bytes([chunk, cap]) + frames for chunk in (0, 3, 15) for cap in (0, 2))


@lru_cache(maxsize=1)
def batch_seeds() -> tuple[bytes, ...]:
    def framed(payloads) -> bytes:
        return b"".join(struct.pack(">i", len(p)) + p for p in payloads)

    seeds = []
    requests = request_seeds()
    for start in range(0, len(requests), 24):  # a few requests of different APIs per buffer
        group = requests[start : start + 24 : 3]
        seeds.append(targets.batch_options() + framed(group))
        seeds.append(targets.batch_options(json_body=False, ids_as_dictionary=True) + framed(group))
        seeds.append(targets.batch_options(arrow_input=True, api_version=len(group[0]) - 1) + b"".join(group[:1]))
    by_api: dict = {}
    for seed in response_seeds():  # responses of one API and version per buffer
        api_key, lo, _hi = targets.RESPONSE_APIS[seed[0]]
        by_api.setdefault((api_key, lo + seed[1]), []).append(seed[2:])
    for (api_key, version), payloads in sorted(by_api.items())[::3]:
        seeds.append(targets.batch_options(responses=True, api_key=api_key, api_version=version) + framed(payloads))
        if api_key in (0, 1):  # Produce / Fetch carry record sets: also as summaries
            seeds.append(
                targets.batch_options(responses=True, api_key=api_key, api_version=version, records_summary=True)
                + framed(payloads)
            )
            seeds.append(
                targets.batch_options(
                    responses=True, api_key=api_key, api_version=version, json_body=False, partitions=True
                )
                + framed(payloads)
            )
    for start in range(0, len(requests), 24):
        group = [r for r in requests[start : start + 24] if r[:2] == b"\x00\x00"]  # Produce requests
        if group:
            seeds.append(targets.batch_options(records_summary=True) + framed(group))
            seeds.append(targets.batch_options(json_body=False, partitions=True) + framed(group))
    return tuple(seeds)


SEEDS = {
    "request_header": header_seeds,
    "request": request_seeds,
    "response": response_seeds,
    "records": record_seeds,
    "capture": capture_seeds,
    "tcp": tcp_seeds,
    "framing": framing_seeds,
    "batch": batch_seeds,
}


def seeds(target: str) -> tuple[bytes, ...]:
    """The seed inputs of one target (see targets.TARGETS)."""
    return SEEDS[target]()


def write(directory: Path, names=None) -> dict[str, int]:
    """Write each target's seeds to ``directory/<target>/<sha1>``; returns counts per target."""
    counts = {}
    for name in names or SEEDS:
        folder = directory / name
        folder.mkdir(parents=True, exist_ok=True)
        for data in seeds(name):
            (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)
        counts[name] = len(seeds(name))
    return counts


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.fuzz.corpus DIR")
    for name, count in write(Path(sys.argv[1])).items():
        print(f"{name}: {count} seeds")

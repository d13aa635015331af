"""Headers, primitives and whole messages: kproto (C and pure Python) against kio 0.6.5
and kafka-python 3.0.12, measured in the same process.

Cases (issue figures in brackets):
* request header v2 decode / encode through the Python API       [decode >= 3x kio]
  (kproto decodes arrays of structs lazily: validated at decode, objects built on first
  read; the *_decode_and_walk case reads every partition, the fair eager comparison)
* primitive round trips (varint, compact string), C vs pure Python
* MetadataResponse v12, 100 topics x 10 partitions                [decode >= 10x kio, encode >= 20x kafka-python]
* ApiVersionsResponse v3, ProduceRequest v9 (10 x 10 x 1 KiB records),
  FetchResponse v12 (10 x 10 x 4 KiB records)                     [decode and encode >= 5x the faster peer]
* MetadataResponse v12 decoded and encoded again with nothing read (a pass-through)
* decode and read everything (issue 18): MetadataResponse v12 reading every partition
  [>= 3x kio], Fetch v12 / Produce v9 reading every record set's bytes [>= 3x kio], and
  the whole Metadata message materialised against the same objects built by hand

Run:  .venv/bin/python -m pytest benchmarks/bench_codec.py --benchmark-only
      .venv/bin/python benchmarks/bench_codec.py        (a table of times and ratios)
      .venv/bin/python benchmarks/bench_codec.py --rounds 9 metadata_v12_decode_and_walk
          (medians over rounds, each round timing every peer in turn; groups by name)
"""

from __future__ import annotations

import gc
import io
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

import kproto
from kproto import _impl, schema
from kproto.messages import (
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)

kio_serial = pytest.importorskip("kio.serial")
kafka_header = pytest.importorskip("kafka.protocol.api_header")

from kio.schema.api_versions.v3.response import ApiVersionsResponse as KioApiVersionsResponse  # noqa: E402
from kio.schema.fetch.v12.response import FetchResponse as KioFetchResponse  # noqa: E402
from kio.schema.metadata.v12.response import MetadataResponse as KioMetadataResponse  # noqa: E402
from kio.schema.produce.v9.request import ProduceRequest as KioProduceRequest  # noqa: E402
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeader  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _timing, under pytest too
from _timing import Spread  # noqa: E402

CODECS = {name: _impl.load("codec", name) for name in _impl.available()}


# ------------------------------------------------------------------ sample messages
def record_set(values: int, value_size: int) -> bytes:
    """A real magic-2 batch of ``values`` records (kproto's own writer)."""
    from kproto.records import Record, RecordBatch

    payload = os.urandom(value_size)
    return bytes(RecordBatch.encode([Record(key=None, value=payload) for _ in range(values)], base_offset=0))


def metadata_response() -> MetadataResponse:
    T, P = MetadataResponse.MetadataResponseTopic, MetadataResponse.MetadataResponsePartition
    B = MetadataResponse.MetadataResponseBroker
    return MetadataResponse(
        brokers=[B(node_id=i, host=f"broker-{i}.kafka.internal", port=9092, rack=f"rack-{i}") for i in range(3)],
        cluster_id="Xf3k9cluster",
        controller_id=1,
        topics=[
            T(
                name=f"topic-{t:03d}",
                topic_id=uuid.UUID(int=t + 1),
                partitions=[
                    P(partition_index=p, leader_id=p % 3, leader_epoch=5, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2])
                    for p in range(10)
                ],
            )
            for t in range(100)
        ],
    )


def api_versions_response() -> ApiVersionsResponse:
    return ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=9) for k in schema.api_keys()]
    )


def produce_request() -> ProduceRequest:
    records = record_set(1, 1024)
    return ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=f"topic-{t}",
                partition_data=[ProduceRequest.PartitionProduceData(index=p, records=records) for p in range(10)],
            )
            for t in range(10)
        ],
    )


def fetch_response() -> FetchResponse:
    records = record_set(1, 4096)
    return FetchResponse(
        session_id=1,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic=f"topic-{t}",
                partitions=[
                    FetchResponse.PartitionData(
                        partition_index=p, high_watermark=1000, last_stable_offset=1000, records=records
                    )
                    for p in range(10)
                ],
            )
            for t in range(10)
        ],
    )


MESSAGES = {
    "metadata_v12": (metadata_response(), 12, KioMetadataResponse, "MetadataResponse"),
    "api_versions_v3": (api_versions_response(), 3, KioApiVersionsResponse, "ApiVersionsResponse"),
    "produce_v9": (produce_request(), 9, KioProduceRequest, "ProduceRequest"),
    "fetch_v12": (fetch_response(), 12, KioFetchResponse, "FetchResponse"),
}
BODIES = {key: obj.encode(version) for key, (obj, version, _k, _n) in MESSAGES.items()}


def kafka_python_class(name: str):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in sys.path:  # run as a script, only benchmarks/ is on the path
        sys.path.insert(0, root)
    from tests.codec.test_kafka_python_crosscheck import THEIRS  # noqa: PLC0415

    return THEIRS[name]


# ------------------------------------------------------------------ header cases
HEADER_PAYLOAD = kproto.encode_request(
    MetadataRequest(topics=None), version=12, correlation_id=123456, client_id="producer-1"
)
KIO_HEADER_READER = kio_serial.entity_reader(KioRequestHeader)
KIO_HEADER_WRITER = kio_serial.entity_writer(KioRequestHeader)


def header_cases():
    cases = {}
    for name, codec in CODECS.items():
        cases[f"kproto_{name}"] = (lambda decode: lambda: decode(HEADER_PAYLOAD))(codec.decode_request_header)
    cases["kio"] = lambda: KIO_HEADER_READER(HEADER_PAYLOAD, 0)
    kp = kafka_header.RequestHeader
    cases["kafka_python"] = lambda: kp.decode(io.BytesIO(HEADER_PAYLOAD), flexible=True)
    return cases


def header_encode_cases():
    header = kproto.decode_request_header(HEADER_PAYLOAD)
    cases = {
        f"kproto_{name}": (lambda c: lambda: c.encode_request_header(header, 2))(codec)
        for name, codec in CODECS.items()
    }
    kio_header, _size = KIO_HEADER_READER(HEADER_PAYLOAD, 0)

    def kio_encode():
        out = io.BytesIO()
        KIO_HEADER_WRITER(out, kio_header)
        return out.getvalue()

    cases["kio"] = kio_encode
    theirs = kafka_header.RequestHeader(
        request_api_key=3, request_api_version=12, correlation_id=123456, client_id="producer-1"
    )
    cases["kafka_python"] = lambda: theirs.encode(flexible=True)
    return cases


def decode_cases(key: str):
    obj, version, kio_class, name = MESSAGES[key]
    body = BODIES[key]
    plan = schema.plan(name, version)
    cases = {f"kproto_{impl}": (lambda c: lambda: c.decode_struct(body, plan))(codec) for impl, codec in CODECS.items()}
    reader = kio_serial.entity_reader(kio_class)
    cases["kio"] = lambda: reader(body, 0)
    theirs = kafka_python_class(name)
    cases["kafka_python"] = lambda: theirs.decode(body, version=version)
    return cases


def walk_metadata(body) -> int:
    """Touch every partition's replica list: forces kproto's lazy arrays to materialize."""
    total = 0
    for topic in body.topics:
        for partition in topic.partitions:
            total += len(partition.isr_nodes)
    return total


def decode_and_walk_cases():
    """Metadata v12 decoded *and* every partition read: the fair comparison with eager decoders."""
    body = BODIES["metadata_v12"]
    plan = schema.plan("MetadataResponse", 12)
    cases = {
        f"kproto_{impl}": (lambda c: lambda: walk_metadata(c.decode_struct(body, plan)))(codec)
        for impl, codec in CODECS.items()
    }
    if "c" in CODECS:  # what a reader of every field asks for: one pass, no lazy arrays
        cases["kproto_c_eager"] = lambda: walk_metadata(CODECS["c"].decode_struct(body, plan, lazy=False))
    reader = kio_serial.entity_reader(KioMetadataResponse)
    cases["kio"] = lambda: walk_metadata(reader(body, 0)[0])
    theirs = kafka_python_class("MetadataResponse")
    cases["kafka_python"] = lambda: walk_metadata(theirs.decode(body, version=12))
    return cases


def read_record_sets(topics, partitions_of, buffer_of) -> int:
    """Take a buffer over every partition's record set and count its bytes."""
    total = 0
    for topic in topics:
        for partition in partitions_of(topic):
            total += buffer_of(partition.records).nbytes
    return total


def kproto_records_buffer(records):
    return records.raw  # a read-only memoryview over the decoded bytes, in both implementations


RECORD_WALKS = {
    "fetch_v12": lambda body, buffer_of: read_record_sets(body.responses, lambda t: t.partitions, buffer_of),
    "produce_v9": lambda body, buffer_of: read_record_sets(body.topic_data, lambda t: t.partition_data, buffer_of),
}


def decode_and_read_records_cases(key: str):
    """Fetch / Produce decoded and every record set's bytes taken: what a consumer or broker does."""
    _obj, version, kio_class, name = MESSAGES[key]
    body = BODIES[key]
    plan = schema.plan(name, version)
    walk = RECORD_WALKS[key]
    cases = {
        f"kproto_{impl}": (lambda c: lambda: walk(c.decode_struct(body, plan), kproto_records_buffer))(codec)
        for impl, codec in CODECS.items()
    }
    if "c" in CODECS:
        cases["kproto_c_eager"] = lambda: walk(CODECS["c"].decode_struct(body, plan, lazy=False), kproto_records_buffer)
    reader = kio_serial.entity_reader(kio_class)
    cases["kio"] = lambda: walk(reader(body, 0)[0], memoryview)
    return cases


def materialise(obj):
    """Read every field of the message: reading an outer struct array builds everything under it."""
    for name in obj._field_names:
        getattr(obj, name)
    return obj


def hand_built_metadata(names, uuids, hosts, racks):
    """The objects of metadata_response(), made directly: __new__ and slot writes, no __init__.

    The fastest way Python code has to build them; values that decoding has to make
    (strings, UUIDs) are made once outside, so this is a floor for the objects alone.
    """
    T, P = MetadataResponse.MetadataResponseTopic, MetadataResponse.MetadataResponsePartition
    B = MetadataResponse.MetadataResponseBroker
    new = object.__new__
    brokers = []
    for i in range(3):
        b = new(B)
        b.node_id = i
        b.host = hosts[i]
        b.port = 9092
        b.rack = racks[i]
        b._unknown_tags = None
        brokers.append(b)
    topics = []
    for t in range(100):
        partitions = []
        for p in range(10):
            part = new(P)
            part.error_code = 0
            part.partition_index = p
            part.leader_id = p % 3
            part.leader_epoch = 5
            part.replica_nodes = [0, 1, 2]
            part.isr_nodes = [0, 1, 2]
            part.offline_replicas = []
            part._unknown_tags = None
            partitions.append(part)
        topic = new(T)
        topic.error_code = 0
        topic.name = names[t]
        topic.topic_id = uuids[t]
        topic.is_internal = False
        topic.partitions = partitions
        topic.topic_authorized_operations = -2147483648
        topic._unknown_tags = None
        topics.append(topic)
    m = new(MetadataResponse)
    m.throttle_time_ms = 0
    m.brokers = brokers
    m.cluster_id = "Xf3k9cluster"
    m.controller_id = 1
    m.topics = topics
    m.cluster_authorized_operations = -2147483648
    m.error_code = 0
    m._unknown_tags = None
    return m


def materialise_cases():
    """The whole Metadata v12 message as objects: kproto decoding and materialising it, the
    same objects built by hand, and kio's decode (eager, its own objects)."""
    body = BODIES["metadata_v12"]
    plan = schema.plan("MetadataResponse", 12)
    decoded = CODECS["c" if "c" in CODECS else "py"].decode_struct(body, plan)
    names = [t.name for t in decoded.topics]
    uuids = [t.topic_id for t in decoded.topics]
    hosts = [b.host for b in decoded.brokers]
    racks = [b.rack for b in decoded.brokers]
    built = hand_built_metadata(names, uuids, hosts, racks)
    if built != decoded or built.encode(12) != body:
        raise AssertionError("the hand-built peer does not build the decoded message")
    cases = {
        f"kproto_{impl}": (lambda c: lambda: materialise(c.decode_struct(body, plan)))(codec)
        for impl, codec in CODECS.items()
    }
    cases["hand_built"] = lambda: hand_built_metadata(names, uuids, hosts, racks)
    reader = kio_serial.entity_reader(KioMetadataResponse)
    cases["kio"] = lambda: reader(body, 0)
    return cases


def reencode_cases():
    """Metadata v12 decoded and encoded again, nothing read in between (a pass-through):
    kproto builds the lazy arrays to write them, as its twin and the peers do."""
    body = BODIES["metadata_v12"]
    plan = schema.plan("MetadataResponse", 12)
    cases = {
        f"kproto_{impl}": (lambda c: lambda: c.encode_struct(c.decode_struct(body, plan), plan))(codec)
        for impl, codec in CODECS.items()
    }
    reader, writer = kio_serial.entity_reader(KioMetadataResponse), kio_serial.entity_writer(KioMetadataResponse)

    def kio_reencode():
        out = io.BytesIO()
        writer(out, reader(body, 0)[0])
        return out.getvalue()

    cases["kio"] = kio_reencode
    theirs = kafka_python_class("MetadataResponse")

    def kafka_python_reencode():
        decoded = theirs.decode(body, version=12)
        decoded._header = None
        return decoded.encode(version=12)

    cases["kafka_python"] = kafka_python_reencode
    return cases


def encode_cases(key: str):
    obj, version, kio_class, name = MESSAGES[key]
    body = BODIES[key]
    plan = schema.plan(name, version)
    cases = {f"kproto_{impl}": (lambda c: lambda: c.encode_struct(obj, plan))(codec) for impl, codec in CODECS.items()}
    kio_obj, _size = kio_serial.entity_reader(kio_class)(body, 0)
    writer = kio_serial.entity_writer(kio_class)

    def kio_encode():
        out = io.BytesIO()
        writer(out, kio_obj)
        return out.getvalue()

    cases["kio"] = kio_encode
    theirs = kafka_python_class(name).decode(body, version=version)
    theirs._header = None
    cases["kafka_python"] = lambda: theirs.encode(version=version)
    return cases


def primitive_cases():
    cases = {}
    for name in CODECS:
        buffer = _impl.load("buffer", name)

        def roundtrip(buffer=buffer):
            w = buffer.Writer()
            for v in (0, 1, -1, 300, -70000, 2**31 - 1):
                w.write_varint(v)
            w.write_compact_string("topic-name")
            w.write_int64(123456789)
            r = buffer.Reader(w.getvalue())
            for _ in range(6):
                r.read_varint()
            r.read_compact_string()
            return r.read_int64()

        cases[f"kproto_{name}"] = roundtrip
    return cases


GROUPS = {
    "header_decode": header_cases,
    "header_encode": header_encode_cases,
    "primitives": primitive_cases,
    **{f"{key}_decode": (lambda k: lambda: decode_cases(k))(key) for key in MESSAGES},
    "metadata_v12_decode_and_walk": decode_and_walk_cases,
    "metadata_v12_materialise": materialise_cases,
    "metadata_v12_reencode": reencode_cases,
    **{
        f"{key}_decode_and_read_records": (lambda k: lambda: decode_and_read_records_cases(k))(key)
        for key in RECORD_WALKS
    },
    **{f"{key}_encode": (lambda k: lambda: encode_cases(k))(key) for key in MESSAGES},
}


def _params():
    for group, make in GROUPS.items():
        for case in make():
            yield pytest.param(group, case, id=f"{group}-{case}")


@pytest.mark.parametrize("group,case", list(_params()))
def test_codec(benchmark, group, case):
    benchmark.group = group
    benchmark(GROUPS[group]()[case])


# ------------------------------------------------------------------ standalone table
# Times are CPU time (time.process_time, see _timing.py): on a machine shared with other
# jobs, waiting for a core is noise that a wall clock adds.
def calls_per_batch(fn, target: float = 0.05) -> int:
    """How many calls make a timed batch of about ``target`` seconds."""
    fn()
    n = 1
    while True:
        start = time.process_time()
        for _ in range(n):
            fn()
        if time.process_time() - start > target:
            return n
        n *= 2


def time_batch(fn, n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n


def measure_group(cases: dict, rounds: int, batches: int = 3) -> dict[str, list[float]]:
    """Per-call seconds of every case, ``rounds`` times; each round times the peers one after
    another (best of a few batches), so load on the machine hits all of them alike."""
    sizes = {case: calls_per_batch(fn) for case, fn in cases.items()}
    times: dict[str, list[float]] = {case: [] for case in cases}
    for _ in range(rounds):
        for case, fn in cases.items():
            times[case].append(min(time_batch(fn, sizes[case]) for _ in range(batches)))
    return times


def spread(values: list[float]) -> str:
    q1, q3 = Spread(tuple(values)).iqr
    return f"{q1 * 1e6:.1f}-{q3 * 1e6:.1f}"


def main(argv: list[str]) -> None:
    import argparse
    import statistics

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per case (default 5)")
    parser.add_argument("groups", nargs="*", help=f"groups to run (default all): {', '.join(GROUPS)}")
    args = parser.parse_args(argv)
    unknown = set(args.groups) - set(GROUPS)
    if unknown:
        parser.error(f"unknown group(s): {', '.join(sorted(unknown))}")
    gc.collect()
    print(
        f"{args.rounds} rounds; time = median [IQR] of CPU time per call in us; 'vs kio' = median of the "
        "per-round ratios kio / case [their IQR]"
    )
    print(f"{'case':50} {'median':>10} {'IQR':>17} {'vs kio':>8} {'kio ratio IQR':>18} {'vs kafka-python':>16}")
    for group in args.groups or GROUPS:
        times = measure_group(GROUPS[group](), args.rounds)
        medians = {case: statistics.median(ts) for case, ts in times.items()}
        for case, ts in times.items():
            t = medians[case]
            kio = medians.get("kio")
            kp = medians.get("kafka_python")
            per_round = Spread(tuple(k / c for k, c in zip(times["kio"], ts))) if kio else None
            q1, q3 = per_round.iqr if per_round else (0.0, 0.0)
            rounds_text = f"{q1:.2f}-{q3:.2f}x" if per_round else "-"
            print(
                f"{group + ' ' + case:50} {t * 1e6:10.1f} {spread(ts):>17} "
                f"{(per_round.median if per_round else float('nan')):7.2f}x {rounds_text:>18} "
                f"{(kp / t if kp else float('nan')):15.2f}x"
            )
        print()


if __name__ == "__main__":
    main(sys.argv[1:])

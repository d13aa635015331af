"""Where decoding and reading a whole message spends its time, phase by phase (issue 18).

For MetadataResponse v12 (100 topics x 10 partitions): the decode, the first read of the
outer arrays (kproto builds every object then; kio has built them already), the
benchmark's reading loop over every partition, and freeing the message. For Fetch v12
and Produce v9: the same reading loop over objects already built (take every record
set's bytes), the floor any decoder pays in bench_codec's *_decode_and_read_records
cases, next to the whole decode-and-read.

Each phase is the median of ``--runs`` single calls in CPU time of the thread (see
_timing.py), kproto's C extension beside kio 0.6.5 in the same process.

Run:  .venv/bin/python benchmarks/codec_phases.py [--runs 300]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_codec as bench  # noqa: E402
from kio.schema.metadata.v12.response import MetadataResponse as KioMetadataResponse  # noqa: E402

from kproto import _impl, schema  # noqa: E402

kio_serial = bench.kio_serial


def median_us(values: list[float]) -> float:
    return statistics.median(values) * 1e6


def metadata_phases(decode, runs: int) -> dict[str, float]:
    """Median CPU time of each phase of decoding, building, reading and freeing."""
    phases: dict[str, list[float]] = {"decode": [], "first read of topics": [], "reading loop": [], "free": []}
    clock = time.thread_time
    for _ in range(runs):
        start = clock()
        message = decode()
        decoded = clock()
        for topic in message.topics:
            topic.partitions  # noqa: B018  kproto builds the objects here
        built = clock()
        bench.walk_metadata(message)
        read = clock()
        del message, topic
        freed = clock()
        for name, value in zip(phases, (decoded - start, built - decoded, read - built, freed - read)):
            phases[name].append(value)
    return {name: median_us(values) for name, values in phases.items()}


def median_call_us(fn, runs: int) -> float:
    values = []
    for _ in range(runs):
        start = time.thread_time()
        fn()
        values.append(time.thread_time() - start)
    return median_us(values)


def record_set_figures(codec, key: str, plan, runs: int) -> tuple[float, ...]:
    """The reading loop over built objects, kproto and kio, then decode-and-read whole."""
    body = bench.BODIES[key]
    walk = bench.RECORD_WALKS[key]
    reader = kio_serial.entity_reader(bench.MESSAGES[key][2])
    built_ours = codec.decode_struct(body, plan)
    walk(built_ours, bench.kproto_records_buffer)  # every object built
    built_theirs = reader(body, 0)[0]
    return (
        median_call_us(lambda: walk(built_ours, bench.kproto_records_buffer), runs),
        median_call_us(lambda: walk(built_theirs, memoryview), runs),
        median_call_us(lambda: walk(codec.decode_struct(body, plan), bench.kproto_records_buffer), runs),
        median_call_us(lambda: walk(reader(body, 0)[0], memoryview), runs),
    )


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300, help="calls per figure (default 300)")
    args = parser.parse_args(argv)
    codec = _impl.load("codec", "c")

    body = bench.BODIES["metadata_v12"]
    plan = schema.plan("MetadataResponse", 12)
    kio_reader = kio_serial.entity_reader(KioMetadataResponse)
    ours = metadata_phases(lambda: codec.decode_struct(body, plan), args.runs)
    theirs = metadata_phases(lambda: kio_reader(body, 0)[0], args.runs)
    print("MetadataResponse v12 100 x 10, median us per phase (CPU time)")
    print(f"{'phase':24} {'kproto':>9} {'kio':>9}")
    for name in ours:
        print(f"{name:24} {ours[name]:9.1f} {theirs[name]:9.1f}")
    total_ours, total_theirs = sum(ours.values()), sum(theirs.values())
    print(f"{'total':24} {total_ours:9.1f} {total_theirs:9.1f}   ({total_theirs / total_ours:.2f}x kio)")
    print()

    print("reading every record set's bytes, median us (CPU time)")
    print(f"{'message':12} {'loop: kproto':>13} {'loop: kio':>10} {'whole: kproto':>14} {'whole: kio':>11}")
    for key, name, version in (("fetch_v12", "FetchResponse", 12), ("produce_v9", "ProduceRequest", 9)):
        figures = record_set_figures(codec, key, schema.plan(name, version), args.runs)
        print(f"{key:12} {figures[0]:13.1f} {figures[1]:10.1f} {figures[2]:14.1f} {figures[3]:11.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])

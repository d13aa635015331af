"""Pairing requests with responses, the three ways it is used (not part of the test suite).

    .venv/bin/python benchmarks/bench_exchanges.py [--mb 40] [--runs 7] [--work DIR]

On bench_spark's capture (16 interleaved connections of Produce requests of ~1.9 KiB and
their responses), read once into a table of frames, it times (CPU time, median [IQR]):

- ``exchanges.pair(frames)`` and ``exchanges.pair(frames, body="json")``: the batch API;
- ``decode.decode_frames_table(frames)``: the Spark worker's decode and pairing of whole connections;
- ``dump.record_batches`` over the frames in batches of 4,096: the open requests carried between batches.

Before / after a change, run it with PYTHONPATH pointing at each tree, one after the other, and
compare the medians (what kproto/arrow/exchanges.py's introduction did: docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _timing import repeat  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=40)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--work", default="/tmp/kproto-bench-exchanges")
    args = parser.parse_args()
    sys.path.insert(1, str(ROOT))
    from bench_spark import make_capture

    import kproto
    from kproto.analyze import dump
    from kproto.analyze.spark import decode as D
    from kproto.arrow import exchanges
    from kproto.arrow.capture import read_capture

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"bench-{args.mb}mb.pcap"
    if not path.exists():
        make_capture(path, args.mb)
    frames = read_capture(str(path)).frames.combine_chunks()
    batches = frames.to_batches(max_chunksize=4096)
    print(
        f"kproto from {kproto.__file__} (extension: {kproto.extension_loaded()}); "
        f"{frames.num_rows:,} frames, {args.mb} MB"
    )

    def dump_all() -> int:
        return sum(len(found[0]) for found in dump.record_batches(batches))  # type: ignore[arg-type]

    cases = {
        "exchanges.pair": lambda: exchanges.pair(frames),
        "exchanges.pair body=json": lambda: exchanges.pair(frames, body="json"),
        "decode.decode_frames_table": lambda: D.decode_frames_table(frames),
        "dump.record_batches": dump_all,
    }
    for name, run in cases.items():
        spread = repeat(run, args.runs)
        print(f"{name:28s} {spread.show(1000, 1)} ms  ({frames.num_rows / spread.median / 1e6:.2f} M frames/s)")


if __name__ == "__main__":
    main()

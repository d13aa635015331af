"""The capture engine before and after a change, in one process: a saved build of
``kproto/_c/_capture*.so`` (before) against the current one (after), on the captures
benchmarks/bench_capture.py writes, with a plain file read as the peer of both.

Rounds alternate which engine goes first; each prints the best time of every reader.
Both engines must give the same frames, counters and connection rows.

    cp kproto/_c/_capture.cpython-*.so /tmp/before.so     # before the change
    ... change, rebuild ...
    .venv/bin/python benchmarks/bench_capture_ab.py /tmp/before.so [--rounds 7]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import mmap
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_capture  # noqa: E402

from kproto.arrow.capture import request_versions  # noqa: E402

CASES = {  # smaller than bench_capture's: the A/B reads each several times per round
    "64k-segments": (128 << 20, bench_capture.SEGMENT_64K, 256 << 10),
    "200b-segments": (48 << 20, bench_capture.SEGMENT_SMALL, 1000),
}


def load_saved(path: str):
    """A saved build of the extension module, under a name of its own beside the current one."""
    name = "kproto_before._capture"  # the last part names the module's init function
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def read(module, path: Path):
    """(frames, counters, connection rows) of one capture through ``module.Engine``."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        engine = module.Engine(request_versions(), broker_ports=(9092,))
        pos = frames = 0
        while pos < len(view):
            used = engine.feed(view[pos:])
            pos += used
            batch = engine.take_batch()
            if batch is not None:
                frames += len(batch["size"])
            elif used == 0:
                break
        engine.finish(len(view) - pos)
        batch = engine.take_batch()
        frames += len(batch["size"]) if batch is not None else 0
        result = frames, engine.capture_counters(), engine.take_connections()
        view.release()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="a saved _capture extension module (.so / .pyd)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    import kproto._c._capture as after

    before = load_saved(args.before)
    readers = {
        "before": lambda p: read(before, p),
        "after": lambda p: read(after, p),
        "plain read": bench_capture.read_plain,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in CASES.items():
            path = Path(tmp) / f"{name}.pcap"
            size = bench_capture.write_capture(path, *spec)
            assert read(before, path) == read(after, path), "the engines disagree"
            times: dict[str, list[float]] = {label: [] for label in readers}
            for round_index in range(args.rounds):
                order = list(readers) if round_index % 2 == 0 else ["after", "before", "plain read"]
                for label in order:
                    start = time.perf_counter()
                    readers[label](path)
                    times[label].append(time.perf_counter() - start)
            best = {label: min(found) for label, found in times.items()}
            rates = ", ".join(f"{label} {size / 1e6 / t:.0f} MB/s" for label, t in best.items())
            print(
                f"{name} ({size / 1e6:.0f} MB), best of {args.rounds}: {rates}; after/before time "
                f"{best['after'] / best['before']:.3f}; before/plain {best['before'] / best['plain read']:.2f}, "
                f"after/plain {best['after'] / best['plain read']:.2f}"
            )


if __name__ == "__main__":
    main()

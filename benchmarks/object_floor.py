"""How fast any decoder returning kproto's objects could be: the floor of issue 18's read-all figures.

bench_codec's ``*_decode_and_walk`` / ``*_decode_and_read_records`` cases decode a
message, read every partition, and drop it. Whatever the decoder, that costs at least
making the objects, the benchmark's own reading loop, and freeing them. This script
measures that floor directly: ``c_reference/object_floor.c`` (compiled here, like
bench_batch's C loop) copies an already decoded message with the fewest operations C
has -- structs from a free list with their slots written directly, arrays as new lists,
every other value (ints, strings, UUIDs, records) reused, nothing parsed or checked --
and the same reading loop runs over the copy. kio decodes and reads in the same
process, so the figures compare as ratios:

    floor ratio = kio (decode + read + free) / (floor build + loop + floor free)

is the most any decoder of these objects can reach against kio; a target above it
needs other objects, not a faster decoder. ``--immutable`` rows make every array a
tuple (CPython's free list, one allocation) to show what that object model would allow.

kproto's own allocator is given to the message classes here, so kproto's decoder is
not timed in this process (bench_codec and codec_phases time it).

Run:  .venv/bin/python benchmarks/object_floor.py [--runs 300]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_codec as bench  # noqa: E402
from _timing import Spread  # noqa: E402

from kproto import _impl, schema  # noqa: E402
from kproto.schema import Message  # noqa: E402

#: message key -> (the benchmark's reading loop over a decoded message, kio's buffer maker)
LOOPS = {
    "metadata_v12": lambda message: bench.walk_metadata(message),
    "fetch_v12": lambda message: bench.RECORD_WALKS["fetch_v12"](message, bench.kproto_records_buffer),
    "produce_v9": lambda message: bench.RECORD_WALKS["produce_v9"](message, bench.kproto_records_buffer),
}
KIO_LOOPS = {
    "metadata_v12": bench.walk_metadata,
    "fetch_v12": lambda message: bench.RECORD_WALKS["fetch_v12"](message, memoryview),
    "produce_v9": lambda message: bench.RECORD_WALKS["produce_v9"](message, memoryview),
}


def build_floor(workdir: Path):
    """Compile c_reference/object_floor.c against this Python and import it."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("object_floor.py needs a C compiler (cc or gcc)")
    out = workdir / f"object_floor{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run([compiler, "-O3", "-shared", "-fPIC", "-fno-strict-aliasing",
                    f"-I{sysconfig.get_paths()['include']}", f"-I{HERE.parent / 'kproto' / '_c'}",
                    "-o", str(out), str(HERE / "c_reference" / "object_floor.c")], check=True)
    spec = importlib.util.spec_from_file_location("object_floor", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def materialised(codec, key: str):
    """kproto's decode of the benchmark message with every struct array read (the template)."""
    _obj, version, _kio, name = bench.MESSAGES[key]
    message = codec.decode_struct(bench.BODIES[key], schema.plan(name, version))
    LOOPS[key](message)
    return message


def cpu_phases(runs: int, *phases) -> list[Spread]:
    """Each phase's CPU time (thread) per run; a phase takes the previous one's result."""
    clock = time.thread_time
    times: list[list[float]] = [[] for _ in phases]
    for _ in range(runs):
        value = None
        for i, phase in enumerate(phases):
            start = clock()
            value = phase(value)
            times[i].append(clock() - start)
        del value
    return [Spread(tuple(t)) for t in times]


def floor_figures(floor, template, loop, immutable: bool, runs: int) -> dict[str, Spread]:
    holder: list = []

    def build(_):
        holder.append(floor.copy_tree(template, Message, immutable))

    def read(_):
        loop(holder[0])

    def free(_):
        holder.clear()   # the copy's last reference: freeing it is timed here

    built, read_t, freed = cpu_phases(runs, build, read, free)
    return {"build": built, "loop": read_t, "free": freed}


def kio_figure(key: str, runs: int) -> Spread:
    reader = bench.kio_serial.entity_reader(bench.MESSAGES[key][2])
    body, loop = bench.BODIES[key], KIO_LOOPS[key]

    def whole(_):
        loop(reader(body, 0)[0])   # decoded, read, and freed on return

    return cpu_phases(runs, whole)[0]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300, help="runs per figure (default 300)")
    args = parser.parse_args(argv)
    codec = _impl.load("codec", "c")
    with tempfile.TemporaryDirectory() as tmp:
        floor = build_floor(Path(tmp))
        templates = {key: materialised(codec, key) for key in LOOPS}
        for template in templates.values():
            floor.adopt(template, Message)
        print(f"CPU time per call, us: median [IQR] of {args.runs} runs; the ratio is kio's median over the "
              "floor's (build + loop + free)")
        print(f"{'message':14} {'arrays':9} {'build':>18} {'loop':>18} {'free':>18} {'kio':>20} {'floor/kio':>9}")
        for key, template in templates.items():
            kio = kio_figure(key, args.runs)
            for immutable in (False, True):
                figures = floor_figures(floor, template, LOOPS[key], immutable, args.runs)
                total = sum(f.median for f in figures.values())
                row = " ".join(f"{_short(f):>18}" for f in figures.values())
                print(f"{key:14} {'tuples' if immutable else 'lists':9} {row} {_short(kio):>20} "
                      f"{kio.median / total:8.2f}x")


def _short(spread: Spread) -> str:
    q1, q3 = spread.iqr
    return f"{spread.median * 1e6:.1f} [{q1 * 1e6:.1f}-{q3 * 1e6:.1f}]"


if __name__ == "__main__":
    main(sys.argv[1:])

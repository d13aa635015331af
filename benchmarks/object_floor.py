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

    kio / floor = kio (decode + read + free) / floor (copy + read + free)

is what making, reading and freeing these objects costs with nothing parsed: a decoder
also parses and checks, so a target well above it needs other objects, not a faster
decoder. The "tuples" rows make every array a tuple
(CPython's free list, one allocation) to show what that object model would allow; "loop
alone" is the reading loop over objects already made (what no decoder can take off).

kproto's own allocator is given to the message classes here, so kproto's decoder is
not timed in this process (bench_codec and codec_phases time it).

Run:  .venv/bin/python benchmarks/object_floor.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_codec as bench  # noqa: E402
from _timing import Spread  # noqa: E402

from kproto import _impl, schema  # noqa: E402
from kproto.schema import Message  # noqa: E402

#: message key -> bench_codec's reading loop over a decoded message: over kproto's objects (LOOPS)
#: and kio's (KIO_LOOPS), which differ only in how a record set becomes a memoryview
LOOPS = {
    "metadata_v12": bench.walk_metadata,
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
    subprocess.run(
        [
            compiler,
            "-O3",
            "-shared",
            "-fPIC",
            "-fno-strict-aliasing",
            f"-I{sysconfig.get_paths()['include']}",
            f"-I{HERE.parent / 'kproto' / '_c'}",
            "-o",
            str(out),
            str(HERE / "c_reference" / "object_floor.c"),
        ],
        check=True,
    )
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


def check_copy(floor, key: str, template) -> None:
    """The floor must make the decoded message again, object for object, or it measures nothing."""
    copy = floor.copy_tree(template, False)
    _obj, version, _kio, _name = bench.MESSAGES[key]
    if copy is template or copy != template or copy.encode(version) != bench.BODIES[key]:
        raise AssertionError(f"object_floor.c does not copy the decoded {key}")
    if copy.__class__ is not template.__class__ or LOOPS[key](copy) != LOOPS[key](template):
        raise AssertionError(f"object_floor.c's copy of {key} reads differently")


def cycle_cases(floor, key: str, template) -> dict:
    """Each peer's whole cycle, as bench_codec times kproto's: make the objects, read every
    partition, free them on return."""
    loop = LOOPS[key]
    reader = bench.kio_serial.entity_reader(bench.MESSAGES[key][2])
    body, kio_loop = bench.BODIES[key], KIO_LOOPS[key]
    return {
        "floor, lists": lambda: loop(floor.copy_tree(template, False)),
        "floor, tuples": lambda: loop(floor.copy_tree(template, True)),
        "loop alone": lambda: loop(template),
        "kio": lambda: kio_loop(reader(body, 0)[0]),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9, help="timed rounds (default 9)")
    args = parser.parse_args(argv)
    codec = _impl.load("codec", "c")
    with tempfile.TemporaryDirectory() as tmp:
        floor = build_floor(Path(tmp))
        templates = {key: materialised(codec, key) for key in LOOPS}
        for key, template in templates.items():
            floor.adopt(template, Message)
            check_copy(floor, key, template)
        print(
            f"{args.rounds} rounds, as bench_codec: CPU time per call in us, median [IQR]; 'kio / case' is "
            "the median [IQR] of the per-round ratios"
        )
        print(f"{'message':14} {'case':14} {'median':>9} {'IQR':>15} {'kio / case':>11} {'IQR':>13}")
        for key, template in templates.items():
            times = bench.measure_group(cycle_cases(floor, key, template), args.rounds)
            for case, values in times.items():
                ratios = Spread(tuple(k / v for k, v in zip(times["kio"], values)))
                mine = Spread(tuple(values))
                q1, q3 = mine.iqr
                r1, r3 = ratios.iqr
                print(
                    f"{key:14} {case:14} {mine.median * 1e6:9.1f} {q1 * 1e6:7.1f}-{q3 * 1e6:<7.1f} "
                    f"{ratios.median:10.2f}x {r1:6.2f}-{r3:.2f}x"
                )


if __name__ == "__main__":
    main(sys.argv[1:])

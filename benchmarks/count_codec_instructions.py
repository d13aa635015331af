"""Instructions per decode of the C codec, counted by callgrind: a figure that a loaded
machine does not move, for comparing two builds (e.g. before and after a change to the
plan walker) where timings vary more than the change.

Run:  .venv/bin/python benchmarks/count_codec_instructions.py [--tree DIR ...]
      (each --tree is a directory holding a built ``kproto`` package, default this one;
      needs valgrind and the bench extra, for bench_codec's messages)

Each case runs under ``valgrind --tool=callgrind`` twice, N decodes and none; the
difference divided by N is the count per decode (interpreter start-up cancels out).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: case -> (message key in bench_codec.MESSAGES, decodes, read every partition)
CASES = {
    "api_versions_v3_decode": ("api_versions_v3", 2000, False),
    "produce_v9_decode": ("produce_v9", 2000, False),
    "fetch_v12_decode": ("fetch_v12", 2000, False),
    "metadata_v12_decode": ("metadata_v12", 200, False),
    "metadata_v12_decode_and_walk": ("metadata_v12", 20, True),
}

CHILD = """
import sys
from kproto import _impl, schema
name, version, path, n, walk = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
codec = _impl.load("codec", "c")
plan = schema.plan(name, version)
body = open(path, "rb").read()
codec.decode_struct(body, plan)
for _ in range(n):
    message = codec.decode_struct(body, plan)
    if walk:
        for topic in message.topics:
            for partition in topic.partitions:
                partition.replica_nodes
"""


def instructions(tree: Path, args: list[str]) -> int:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", CHILD, *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", type=Path, help="a directory holding a built kproto")
    args = parser.parse_args(argv)
    trees = args.tree or [ROOT]
    sys.argv = [sys.argv[0]]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_codec  # noqa: PLC0415 - needs the bench extra; only for the messages

    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'case':32} " + " ".join(f"{str(t)[-30:]:>32}" for t in trees))
        for case, (key, n, walk) in CASES.items():
            _obj, version, _kio, name = bench_codec.MESSAGES[key]
            path = Path(tmp) / key
            path.write_bytes(bytes(bench_codec.BODIES[key]))
            common = [name, str(version), str(path)]
            counts = []
            for tree in trees:
                idle = instructions(tree, [*common, "0", "0"])
                busy = instructions(tree, [*common, str(n), "1" if walk else "0"])
                counts.append((busy - idle) // n)
            ratios = [f"{c:>20,} ({c / counts[0]:.3f}x)" for c in counts]
            print(f"{case:32} " + " ".join(f"{r:>32}" for r in ratios))


if __name__ == "__main__":
    main(sys.argv[1:])

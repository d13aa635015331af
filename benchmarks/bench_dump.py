"""`kproto dump --format jsonl` against `tshark -T ek -O kafka` (not part of the test suite).

    .venv/bin/python benchmarks/bench_dump.py [--mb 1000] [--tshark-mb 100] [--dir /tmp/kproto-bench-dump]

The captures are bench_spark's (16 interleaved connections of Produce requests of
~1.9 KiB and their responses), with Produce v8: tshark 4.0 (Debian 12) decodes
Produce up to v8, so on v8 it does its full work (on v9 it skips the bodies).

1. Speed: both tools on the same file, output to /dev/null, wall time of a new
   process (best of --runs). tshark takes about a minute per 100 MB here, so it
   runs on a --tshark-mb capture; kproto runs on that one and on the --mb one.
2. Agreement: on a small capture, both must see the same Kafka frames: the
   same count, and the same (direction, API key, version, correlation id) of each.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_spark import make_capture  # noqa: E402

KPROTO = [sys.executable, "-m", "kproto.analyze.cli", "dump", "--format", "jsonl"]
TSHARK = ["tshark", "-T", "ek", "-O", "kafka", "-d", "tcp.port==9092,kafka", "-r"]


def ensure_tshark() -> None:
    if shutil.which("tshark"):
        return
    print("tshark not found: installing it with apt-get (Debian's wireshark CLI)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "tshark"], check=True, env=env)


def timed(argv: list[str], runs: int) -> float:
    """Best wall time of ``runs`` runs of ``argv``, stdout to /dev/null."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            subprocess.run(argv, stdout=sink, stderr=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - start)
    return best


def capture(directory: Path, megabytes: int) -> Path:
    path = directory / f"produce-v8-{megabytes}mb.pcap"
    if not path.exists():
        make_capture(path, megabytes, produce_version=8)
    return path


def kproto_frames(path: Path) -> collections.Counter:
    out = subprocess.run(KPROTO + [str(path)], capture_output=True, check=True).stdout
    seen: collections.Counter = collections.Counter()
    for line in out.splitlines():
        r = json.loads(line)
        h = r["header"]
        seen[(r["direction"], h["api_key"], h["api_version"], h["correlation_id"])] += 1
    return seen


def tshark_frames(path: Path) -> collections.Counter:
    """Kafka PDUs as tshark sees them (a packet may carry several: fields list them in order)."""
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(path),
            "-Y",
            "kafka",
            "-d",
            "tcp.port==9092,kafka",
            "-T",
            "fields",
            "-e",
            "tcp.dstport",
            "-e",
            "kafka.correlation_id",
            "-e",
            "kafka.api_key",
            "-e",
            "kafka.api_version",
            "-e",
            "kafka.response.version",
            "-E",
            "occurrence=a",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    seen: collections.Counter = collections.Counter()
    for line in out.splitlines():
        port, corr, keys, request_versions, response_versions = (line.split("\t") + [""] * 5)[:5]
        request = port == "9092"
        versions = request_versions if request else response_versions
        for c, k, v in zip(corr.split(","), keys.split(","), versions.split(",")):
            seen[("request" if request else "response", int(k), int(v), int(c))] += 1
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000, help="the big capture kproto reads (MB)")
    parser.add_argument("--tshark-mb", type=int, default=100, help="the capture both read (MB)")
    parser.add_argument("--check-mb", type=int, default=5, help="the capture the agreement check reads (MB)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--dir", default="/tmp/kproto-bench-dump", help="where the captures are kept")
    args = parser.parse_args()
    ensure_tshark()
    directory = Path(args.dir)
    directory.mkdir(parents=True, exist_ok=True)

    check = capture(directory, args.check_mb)
    ours, theirs = kproto_frames(check), tshark_frames(check)
    same = ours == theirs
    print(
        f"agreement on {check.stat().st_size / 1e6:.0f} MB ({sum(ours.values()):,} kproto frames, "
        f"{sum(theirs.values()):,} tshark PDUs): {'same frames' if same else 'DIFFERENT'}"
    )
    if not same:
        print("  only kproto:", list((ours - theirs).items())[:5])
        print("  only tshark:", list((theirs - ours).items())[:5])

    small = capture(directory, args.tshark_mb)
    big = capture(directory, args.mb)
    small_mb, big_mb = small.stat().st_size / 1e6, big.stat().st_size / 1e6
    tshark_s = timed(TSHARK + [str(small)], args.runs)
    kproto_small_s = timed(KPROTO + [str(small)], args.runs)
    kproto_big_s = timed(KPROTO + [str(big)], args.runs)
    print(f"tshark -T ek -O kafka, {small_mb:.0f} MB:   {tshark_s:8.2f} s  {small_mb / tshark_s:8.1f} MB/s")
    print(
        f"kproto dump --format jsonl, {small_mb:.0f} MB: {kproto_small_s:8.2f} s  "
        f"{small_mb / kproto_small_s:8.1f} MB/s   ratio (same file): {tshark_s / kproto_small_s:.1f}x"
    )
    print(
        f"kproto dump --format jsonl, {big_mb:.0f} MB: {kproto_big_s:8.2f} s  "
        f"{big_mb / kproto_big_s:8.1f} MB/s   ratio of rates to tshark's: "
        f"{(big_mb / kproto_big_s) / (small_mb / tshark_s):.1f}x"
    )


if __name__ == "__main__":
    main()

"""Time and peak RSS of the hostile record sets of issue 16, in each implementation.

Each case (tests/hostile_records.py) is built once, written to a temporary file and
read by a fresh interpreter per (case, implementation, reader), so the peak RSS
(``VmHWM``, which an exec resets, unlike ``ru_maxrss``) is that reader's alone (plus the interpreter, numpy and pyarrow).
Readers: ``objects`` asks every batch for its records (an error ends that batch
only, as a consumer skipping bad batches would), ``arrow`` is ``Records.to_arrow()``.

Run:  nice -n 19 .venv/bin/python benchmarks/bench_hostile_records.py [--size 1048576]
      [--timeout 120] [--only c|py] [--cases NAME,NAME] [--json]

Per batch, the cost is bounded by the decompressed-size cap and the record limit;
per record set, by the set's record and decompressed-size limits: ``--whole-set``
adds 1 MiB sets of batches that each use as much of the per-batch limits as they
allow (docs/hardening.md has the figures). Each
child runs under an address-space limit (``--memory-limit``, 3 GiB), so a case
that would take more fails with MemoryError instead of the machine's memory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kproto import limits  # noqa: E402
from tests import hostile_records as hostile  # noqa: E402

MiB = 1024 * 1024


def whole_set_cases(size: int) -> dict[str, bytes]:
    """Record sets of ``size`` bytes made of batches that each cost as much as the limits allow."""
    at_limit = hostile.tiny_records_zstd(limits.DEFAULT_MAX_RECORDS_PER_BATCH)
    lying = hostile.tiny_records_zstd(limits.DEFAULT_MAX_RECORDS_PER_BATCH, 36_000_000)
    lying_one = hostile.tiny_records_zstd(1, 36_000_000)
    big_value = hostile.one_big_value_zstd(255 * MiB)
    return {
        "whole set: zstd batches at the record limit": at_limit * (size // len(at_limit)),
        "whole set: zstd batches declaring the limit, holding 36M": lying * (size // len(lying)),
        "whole set: zstd batches declaring 1 record, holding 36M": lying_one * (size // len(lying_one)),
        "whole set: zstd batches of one 255 MiB value": big_value * (size // len(big_value)),
        # 2 x 2^19 records of 57-59 bytes (59 MiB): about as much as both per-set limits allow, valid
        "whole set: about the most both set limits allow (2^20 records of 50-byte values)": hostile.values_zstd(
            limits.DEFAULT_MAX_RECORDS_PER_SET // 2, 50
        )
        * 2,
    }


def cases(size: int) -> dict[str, bytes]:
    """Record sets of about ``size`` bytes, one per class of hostile input."""
    bomb = hostile.tiny_records_zstd(36_000_000)  # the 22 KB batch
    at_limit = hostile.tiny_records_zstd(limits.DEFAULT_MAX_RECORDS_PER_BATCH)
    return {
        "baseline: a valid batch of 10 records": hostile.tiny_records_zstd(10),
        "zstd 36M tiny records (one 23 KB batch)": bomb,
        "zstd 36M tiny records, batches to size": bomb * max(1, size // len(bomb)),
        "zstd declares 1M, holds 36M": hostile.tiny_records_zstd(1 << 20, 36_000_000),
        "zstd as many tiny records as the limit allows (one batch)": at_limit,
        "zstd one record of a 255 MiB value (one batch)": hostile.one_big_value_zstd(255 * MiB),
        "gzip empty members": hostile.gzip_empty_members(size),
        "lz4 1-byte stored blocks": hostile.lz4_one_byte_blocks(size),
        "lz4 empty compressed blocks": hostile.lz4_empty_compressed_blocks(size),
        "lz4 one frame a byte": hostile.lz4_tiny_frames(size),
        "lz4 one frame a byte, magic 0 header checksums": hostile.lz4_tiny_frames(size, magic0_checksum=True),
        "snappy xerial block claiming 255 MiB": hostile.snappy_xerial_lying_block(255 * MiB),
        "snappy xerial one record a block": hostile.snappy_xerial_tiny_blocks(size),
    }


CHILD = r"""
import json, resource, sys, time
from kproto import _impl
from kproto.errors import DecodeError
impl, reader, path, memory_limit = sys.argv[1:5]
resource.setrlimit(resource.RLIMIT_AS, (int(memory_limit), int(memory_limit)))
R = _impl.load("records", impl)
data = open(path, "rb").read()
errors = []
start = time.perf_counter()
if reader == "objects":
    rows = 0
    for batch in R.Records(data):
        try:
            rows += len(batch.records())
        except DecodeError as exc:
            errors.append(type(exc).__name__)
else:
    try:
        rows = R.Records(data).to_arrow().num_rows
    except DecodeError as exc:
        rows = 0
        errors.append(type(exc).__name__)
seconds = time.perf_counter() - start
peak_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "rss_mib": peak_kib / 1024,
                  "rows": rows, "errors": sorted(set(errors)), "error_count": len(errors)}))
"""


def measure(impl: str, reader: str, path: str, timeout: float, memory_limit: int = 3072 * MiB) -> dict:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, impl, reader, path, str(memory_limit)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return {"seconds": float("inf"), "rss_mib": float("nan"), "failed": f"> {timeout:.0f} s (stopped)"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"seconds": float("inf"), "rss_mib": float("nan"), "failed": f"exit {done.returncode}: {last[:80]}"}
    return json.loads(done.stdout)


def describe(result: dict) -> str:
    if "failed" in result:
        return result["failed"]
    errors = ",".join(result["errors"]) or "-"
    return (
        f"{result['seconds']:.2f} s, {result['rss_mib']:.0f} MiB, {result['rows']} rows, "
        f"errors {errors} x{result['error_count']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=MiB)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--only", choices=["c", "py"])
    parser.add_argument("--cases", help="comma-separated substrings of case names")
    parser.add_argument("--readers", default="objects,arrow")
    parser.add_argument("--json", action="store_true", help="one JSON object a line")
    parser.add_argument("--whole-set", action="store_true", help="also the whole-set cases (slow)")
    parser.add_argument("--memory-limit", type=int, default=3072, help="MiB of address space per child")
    args = parser.parse_args()
    from kproto import _impl

    impls = [args.only] if args.only else _impl.available()
    wanted = args.cases.split(",") if args.cases else None
    with tempfile.TemporaryDirectory() as tmp:
        selected = cases(args.size)
        if args.whole_set:
            selected.update(whole_set_cases(args.size))
        for name, data in selected.items():
            if wanted and not any(part in name for part in wanted):
                continue
            path = Path(tmp) / "input.bin"
            path.write_bytes(data)
            for impl in impls:
                for reader in args.readers.split(","):
                    result = measure(impl, reader, str(path), args.timeout, args.memory_limit * MiB)
                    if args.json:
                        result.update(case=name, size=len(data), impl=impl, reader=reader)
                        print(json.dumps(result), flush=True)
                    else:
                        print(f"{name} [{len(data)} B] {impl} {reader}: {describe(result)}", flush=True)


if __name__ == "__main__":
    main()

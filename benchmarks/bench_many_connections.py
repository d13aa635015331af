"""``kproto analyze`` with default settings on many short connections: wall time, peak memory, exactness.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_many_connections.py [--connections 100000] [--work DIR]
                                                                      [-- extra kproto analyze arguments]

Writes the capture with tools/many_connections.py (kept in ``--work`` for the next run), runs
``python -m kproto.analyze.cli analyze CAPTURE --out DIR --quiet`` as a child process, samples the resident
memory of its whole process tree (the Python driver, the JVM, the Python workers and their
daemon) every 0.2 s from /proc, and prints the exit status, the wall time, the peak of the tree's
summed RSS and of each process, then checks the connections table against the generator's truth
(every connection present once, its frames, frame bytes, packets and stream bytes in each
direction) and the summary's totals. Exits 1 when the run failed, a count is wrong or the
peak reached ``--max-gib`` (8). tests/analyze/test_many_connections.py runs it (marked slow).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.append(str(ROOT))

import many_connections as MC  # noqa: E402


def tree_rss(root: int) -> dict[int, tuple[str, int]]:
    """pid -> (command name, RSS bytes) of ``root`` and every process under it (Linux /proc)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
        names[int(entry)] = name
    found: dict[int, tuple[str, int]] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as handle:
                rss = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
        found[pid] = (names.get(pid, "?"), rss)
        stack.extend(children.get(pid, ()))
    return found


def run(command: list[str], env: dict[str, str]) -> tuple[int, float, int, dict[str, int], str]:
    """(exit status, wall seconds, peak summed RSS, peak RSS per command name, stderr's last lines)."""
    import tempfile

    started = time.monotonic()
    # Output to a file, not a pipe: a pipe nobody reads while the child runs fills and stops it.
    with tempfile.TemporaryFile("w+") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT, text=True)
        peak, per_name = 0, {}
        while process.poll() is None:
            found = tree_rss(process.pid)
            peak = max(peak, sum(rss for _, rss in found.values()))
            for name, rss in found.values():
                per_name[name] = max(per_name.get(name, 0), rss)
            time.sleep(0.2)
        wall = time.monotonic() - started
        output.seek(0)
        text = output.read()
    return process.returncode, wall, peak, per_name, text[-3000:]


def check(out: Path, connections: int) -> list[str]:
    """What differs from the truth (nothing: an empty list)."""
    import pyarrow.parquet as pq

    truth = MC.truth(connections)
    rows = pq.read_table(out / "connections").to_pylist()
    problems = []
    if len(rows) != connections:
        problems.append(f"{len(rows):,} connection rows, {connections:,} expected")
    wrong = 0
    for row in rows:
        expected = truth.get((row["client_ip"], row["client_port"]))
        if expected is None or any(row[name] != value for name, value in expected.items()):
            wrong += 1
    if wrong:
        problems.append(f"{wrong:,} connections with counts that differ from the truth")
    total = [r for r in pq.read_table(out / "summary").to_pylist() if r["capture"] == "*"][0]
    if (total["connections"], total["frames"], total["accounted"]) != (connections, 6 * connections, True):
        problems.append(
            f"summary: {total['connections']:,} connections, {total['frames']:,} frames, accounted {total['accounted']}"
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=100_000)
    parser.add_argument("--work", default=str(ROOT / ".build" / "bench_many_connections"))
    parser.add_argument(
        "--max-gib",
        type=float,
        default=8.0,
        help="fail when the process tree's peak RSS reaches this many GiB (issue 35: 8)",
    )
    parser.add_argument("extra", nargs="*", help="more kproto analyze arguments (after --)")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    capture = work / f"connections-{args.connections}.pcap"
    if not capture.exists():
        started = time.monotonic()
        size = MC.write(capture, args.connections)
        print(f"wrote {capture}: {size:,} bytes in {time.monotonic() - started:.0f} s")
    out = work / "out"
    command = [
        sys.executable,
        "-m",
        "kproto.analyze.cli",
        "analyze",
        str(capture),
        "--out",
        str(out),
        "--quiet",
        *args.extra,
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    status, wall, peak, per_name, tail = run(command, env)
    print(f"$ {' '.join(command)}")
    print(tail.strip())
    print(f"exit status {status}, wall {wall:.1f} s, peak RSS of the process tree {peak / 2**30:.2f} GiB")
    print(
        "peak RSS per process name: "
        + ", ".join(f"{name} {rss / 2**20:.0f} MiB" for name, rss in sorted(per_name.items(), key=lambda i: -i[1]))
    )
    if status != 0:
        return 1
    problems = check(out, args.connections)
    if peak >= args.max_gib * 2**30:
        problems.append(f"peak RSS {peak / 2**30:.2f} GiB, over {args.max_gib} GiB")
    print("connections table and summary: " + ("exact" if not problems else "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""How soon ``kproto analyze DIR --follow`` adds a new file, end to end through the command.

Starts the real command (its own Spark JVM) on a directory holding one capture, then
writes ``--files`` more captures like a rotating writer (each written in pieces over
about a second, then left alone), one every ``--every`` seconds. For each file it reads
the checkpoint's ``taken_at`` / ``committed_at`` and reports the delay after the file's
last write, in seconds and in trigger intervals. Then it sends SIGTERM, times the exit,
runs ``--once`` on the same directory and checks that nothing was counted twice.

    .venv/bin/python benchmarks/bench_follow.py --trigger 2 --settle 1 --files 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import spark_captures as sc  # noqa: E402


def write_like_a_writer(path: Path, data: bytes, pieces: int = 4, pause: float = 0.25) -> float:
    """Write ``data`` in ``pieces`` over about a second; the file's last mtime."""
    step = -(-len(data) // pieces)
    with open(path, "wb") as stream:
        for start in range(0, len(data), step):
            stream.write(data[start : start + step])
            stream.flush()
            time.sleep(pause)
    return os.stat(path).st_mtime


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"bench_follow: timed out waiting for {what}")


def state(out: Path) -> dict:
    try:
        return json.loads((out / "_follow" / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trigger", type=float, default=2.0)
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--every", type=float, default=7.0, help="seconds between new files")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    data, out = work / "caps", work / "out"
    data.mkdir()
    capture = sc.big_capture(connections=3, exchanges=20)  # 120 frames
    (data / "capture-000.pcap").write_bytes(capture)
    command = [
        sys.executable,
        "-m",
        "kproto.analyze.cli",
        "analyze",
        str(data),
        "--out",
        str(out),
        "--quiet",
        "--trigger",
        str(args.trigger),
        "--settle",
        str(args.settle),
    ]
    started = time.monotonic()
    follower = subprocess.Popen(
        command + ["--follow"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(lambda: state(out).get("next_batch") == 1, 300, "the first batch")
    first_batch_s = time.monotonic() - started
    delays = []
    for index in range(1, args.files + 1):
        path = data / f"capture-{index:03d}.pcap"
        last_write = write_like_a_writer(path, capture)
        entry = wait_for(lambda p=str(path): state(out).get("files", {}).get(p), 120, path.name)
        delays.append(
            {
                "file": path.name,
                "taken_after_s": round(entry["taken_at"] - last_write, 2),
                "committed_after_s": round(entry["committed_at"] - last_write, 2),
            }
        )
        time.sleep(max(0.0, args.every - (time.time() - last_write)))
    stop_sent = time.monotonic()
    follower.send_signal(signal.SIGTERM)
    stdout, stderr = follower.communicate(timeout=120)
    exit_s = time.monotonic() - stop_sent
    report_written = (out / "report.json").exists()
    again = subprocess.run(command + ["--once"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    result = {
        "trigger_s": args.trigger,
        "settle_s": args.settle,
        "first_batch_after_start_s": round(first_batch_s, 1),
        "new_files": delays,
        "committed_after_max_triggers": round(max(d["committed_after_s"] for d in delays) / args.trigger, 2),
        "sigterm_to_exit_s": round(exit_s, 2),
        "exit_status": follower.returncode,
        "restart_batches": state(out).get("next_batch"),
        "expected_batches": args.files + 1,
        "restart_stdout": again.stdout.strip().splitlines()[0] if again.stdout.strip() else again.stderr[-300:],
        "report_written": report_written,
        "stdout": stdout.strip().splitlines()[0] if stdout.strip() else stderr[-300:],
    }
    print(json.dumps(result, indent=1))
    expected = f"{120 * (args.files + 1):,} frames"
    ok = (
        follower.returncode == 0
        and report_written
        and result["restart_batches"] == args.files + 1
        and result["stdout"].startswith(expected)
        and result["restart_stdout"].startswith(expected)
    )
    if ok:
        shutil.rmtree(work)
    print("bench_follow:", "ok" if ok else f"FAILED (kept {work})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

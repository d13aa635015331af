"""Run the fuzz targets: a short budget from the test suite, a long one by hand.

    python -m tests.fuzz.run all --seconds 60            # every target, 60 s each
    python -m tests.fuzz.run records --runs 1000000       # one target, a fixed count
    python -m tests.fuzz.run messages --seconds 600       # a family (see targets.FAMILIES)
    python -m tests.fuzz.run capture --engine atheris --seconds 600
    python -m tests.fuzz.run request --replay crash-file  # re-run saved inputs, with tracebacks

Engines:

* ``builtin`` (default): mutates the seed corpus (corpus.py) with mutate.py,
  keeping inputs that raise an error reason not seen before; reproducible from
  ``--seed``.
* ``atheris``: libFuzzer driven by the coverage of the pure-Python twin (the
  kproto package is instrumented at import), so inputs that reach new branches
  of the reference decoder are kept and fed to both implementations.
  ``pip install 'kproto[fuzz]'``.

Every input goes to each available implementation (targets.py). A *failure* is
an exception other than DecodeError, the implementations disagreeing, or an
input taking longer than ``--slow`` seconds (1 s: the issue's definition of a
hang); an input stuck for ``--hang`` seconds aborts the process with a traceback
and leaves the input in ``<crash dir>/<target>-<pid>.current``. Failing inputs are
written to the crash directory (default ``/tmp/kproto-fuzz-crashes``; copy the ones worth keeping to tests/fuzz/regressions/). The process
exits non-zero when anything failed. Run under the sanitizer build with
scripts/sanitize.sh.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import mmap
import os
import random
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz import corpus, targets
from tests.fuzz.mutate import MAX_SIZE, mutate

DEFAULT_CRASH_DIR = Path("/tmp/kproto-fuzz-crashes")
_POOL_LIMIT = 4000
_SEEN_LIMIT = 100_000  # error signatures remembered (memory stays flat on long runs)
_DIGITS = re.compile(r"-?\d+")


@dataclass
class Failure:
    kind: str  # "exception", "slow"
    message: str
    data: bytes
    saved_as: Path | None = None


@dataclass
class Stats:
    target: str
    executions: int = 0
    seconds: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    slowest: float = 0.0
    outcomes: dict = field(default_factory=dict)  # "ok" / error class -> count
    pool: int = 0
    rss_after_warmup: int = 0
    rss_end: int = 0

    @property
    def rate(self) -> float:
        return self.executions / self.seconds if self.seconds else 0.0

    def line(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items(), key=lambda kv: -kv[1])[:4])
        return (
            f"{self.target:15s} {self.executions:>10,d} runs {self.seconds:8.1f} s {self.rate:9,.0f}/s  "
            f"slowest {self.slowest * 1000:7.1f} ms  rss {self.rss_after_warmup >> 20}->{self.rss_end >> 20} MiB  "
            f"pool {self.pool}  failures {len(self.failures)}  [{kinds}]"
        )


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _CurrentInput:
    """The input being run, kept in a mapped file so a hang that kills the process leaves it behind."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        with open(path, "wb") as handle:
            handle.truncate(MAX_SIZE + 8)
        self._file = open(path, "r+b")  # noqa: SIM115 - closed in close()
        self._map = mmap.mmap(self._file.fileno(), MAX_SIZE + 8)

    def set(self, data: bytes) -> None:
        self._map[:8] = len(data).to_bytes(8, "little")
        self._map[8 : 8 + len(data)] = data

    def close(self) -> None:
        self._map.close()
        self._file.close()
        self.path.unlink(missing_ok=True)


def read_current(path: Path) -> bytes:
    raw = path.read_bytes()
    return raw[8 : 8 + int.from_bytes(raw[:8], "little")]


def _save(crash_dir: Path | None, target: str, data: bytes) -> Path | None:
    if crash_dir is None:
        return None
    crash_dir.mkdir(parents=True, exist_ok=True)
    path = crash_dir / f"{target}-{hashlib.sha1(data).hexdigest()[:16]}.bin"
    path.write_bytes(data)
    return path


def run_one(target: str, data: bytes):
    """Run one input; returns the target's outcome or raises what it raised."""
    return targets.TARGETS[target](data)


def fuzz(
    target: str,
    *,
    runs: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    crash_dir: Path | None = DEFAULT_CRASH_DIR,
    slow: float = 1.0,
    hang: float = 30.0,
    max_failures: int = 20,
    progress: bool = False,
) -> Stats:
    """Mutation-fuzz one target for ``runs`` inputs or ``seconds`` (whichever comes first).

    The seeds themselves run first. Deterministic for a given seed and run count
    (the time budget only decides where it stops).
    """
    function = targets.TARGETS[target]
    rng = random.Random(f"{target}:{seed}")
    seeds = list(corpus.seeds(target))
    pool = list(seeds)
    seen: set[str] = set()
    stats = Stats(target)
    # one file per process: two runs of the same target must not share (or truncate) the mapping
    current = _CurrentInput(crash_dir / f"{target}-{os.getpid()}.current") if crash_dir is not None else None
    started = time.perf_counter()
    deadline = started + seconds if seconds is not None else None
    warmup = min(2000, max(1, (runs or 10**9) // 10))
    next_report = started + 10
    armed_until = 0.0
    try:
        while True:
            n = stats.executions
            if runs is not None and n >= runs:
                break
            if deadline is not None and (n & 63) == 0 and time.perf_counter() >= deadline:
                break
            data = seeds[n] if n < len(seeds) else mutate(rng, rng.choice(pool), pool)
            t0 = time.perf_counter()
            if current is not None:
                current.set(data)
                # re-armed once a second, not per input (arming costs ~30 us, more than many
                # inputs take): an input stuck for hang to hang + 1 s fires it
                if t0 >= armed_until:
                    faulthandler.dump_traceback_later(hang + 1.0, exit=True)
                    armed_until = t0 + 1.0
            del targets.reasons[:]
            try:
                outcome = function(data)
                key = targets.error_class(outcome) if outcome[0] == "error" else outcome[0]
            except Exception as exc:  # FuzzFailure, or a bug in the target itself
                key = "FAILURE"
                message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                stats.failures.append(Failure("exception", message, data, _save(crash_dir, target, data)))
            elapsed = time.perf_counter() - t0
            stats.outcomes[key] = stats.outcomes.get(key, 0) + 1
            stats.executions = n + 1
            if elapsed > stats.slowest:
                stats.slowest = elapsed
            if elapsed > slow:
                # time again before calling it a hang: the machine is shared
                t0 = time.perf_counter()
                try:
                    function(data)
                except Exception:
                    pass
                again = time.perf_counter() - t0
                if again > slow:
                    stats.failures.append(
                        Failure(
                            "slow", f"{min(elapsed, again):.2f} s for one input", data, _save(crash_dir, target, data)
                        )
                    )
            fresh = False
            for reason in targets.reasons:
                signature = _DIGITS.sub("N", reason)[:160]
                if signature not in seen and len(seen) < _SEEN_LIMIT:
                    seen.add(signature)
                    fresh = True
            if fresh and n >= len(seeds):
                if len(pool) < _POOL_LIMIT:
                    pool.append(data)
                else:
                    pool[rng.randrange(len(seeds), _POOL_LIMIT)] = data
            if stats.executions == warmup:
                stats.rss_after_warmup = _rss()
            if len(stats.failures) >= max_failures:
                break
            if progress and (n & 1023) == 0 and time.perf_counter() >= next_report:
                next_report += 10
                stats.seconds = time.perf_counter() - started
                stats.pool = len(pool)
                stats.rss_end = _rss()
                print("  ..." + stats.line(), flush=True)
    finally:
        if current is not None:
            faulthandler.cancel_dump_traceback_later()
            current.close()
    stats.seconds = time.perf_counter() - started
    stats.pool = len(pool)
    stats.rss_end = _rss()
    if not stats.rss_after_warmup:
        stats.rss_after_warmup = stats.rss_end
    return stats


def leak_check(target: str, *, inputs: int = 2000, rounds: int = 10, seed: int = 0) -> list[int]:
    """RSS (bytes) after each round of running the same mutated inputs again.

    Decoding the same inputs again allocates the same objects, which are freed
    again: the resident size must level off after the first rounds. Steady growth
    is a leak (a missing Py_DECREF or free in the extension, or a cache without bound).
    """
    import gc

    function = targets.TARGETS[target]
    rng = random.Random(f"leak:{target}:{seed}")
    seeds = list(corpus.seeds(target))
    batch = seeds + [mutate(rng, rng.choice(seeds), seeds) for _ in range(inputs)]
    sizes = []
    for _ in range(rounds):
        for data in batch:
            try:
                function(data)
            except Exception:
                pass  # failures are the fuzz run's business
        del targets.reasons[:]
        gc.collect()
        sizes.append(_rss())
    return sizes


# ---------------------------------------------------------------- atheris
def fuzz_atheris(
    target: str, seconds: float, crash_dir: Path, work_dir: Path, slow: float, only: str | None = None
) -> Stats:
    """Run atheris in a child process (libFuzzer exits when done) and read its figures."""
    corpus_dir = work_dir / target
    corpus.write(work_dir, [target])
    crash_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        str(corpus_dir),
        f"-max_total_time={int(seconds)}",
        f"-timeout={max(1, int(slow))}",
        "-rss_limit_mb=4096",
        f"-max_len={MAX_SIZE}",
        f"-artifact_prefix={crash_dir}/{target}-",
        "-print_final_stats=1",
    ]
    command = [sys.executable, "-m", "tests.fuzz.atheris_main", target] + argv
    started = time.perf_counter()
    env = dict(os.environ, KPROTO_FUZZ_ONLY=only or "")
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    stats = Stats(target, seconds=time.perf_counter() - started)
    log = result.stdout + result.stderr
    done = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    if done:
        stats.executions = int(done[-1])
    peak = re.findall(r"stat::peak_rss_mb:\s*(\d+)", log)
    if peak:
        stats.rss_end = int(peak[-1]) << 20
    stats.pool = len(list(corpus_dir.iterdir()))
    if result.returncode != 0:
        tail = "\n".join(log.strip().splitlines()[-30:])
        stats.failures.append(Failure("exception", f"atheris exited with {result.returncode}:\n{tail}", b""))
    return stats


# ---------------------------------------------------------------- command line
def _expand(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        if name == "all":
            out += list(targets.TARGETS)
        elif name in targets.FAMILIES:
            out += list(targets.FAMILIES[name])
        elif name in targets.TARGETS:
            out.append(name)
        else:
            raise SystemExit(
                f"unknown target {name!r}: targets {sorted(targets.TARGETS)}, "
                f"families {sorted(targets.FAMILIES)}, or all"
            )
    return list(dict.fromkeys(out))


def _replay(target: str, paths: list[str]) -> int:
    status = 0
    for path in paths:
        data = read_current(Path(path)) if path.endswith(".current") else Path(path).read_bytes()
        t0 = time.perf_counter()
        try:
            outcome = run_one(target, data)
            print(
                f"{path}: {outcome[0]} {outcome[1] if outcome[0] == 'error' else ''} "
                f"({(time.perf_counter() - t0) * 1000:.1f} ms)"
            )
        except Exception:
            status = 1
            print(f"{path}: FAILED")
            traceback.print_exc()
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.split("\n")[0])
    parser.add_argument("targets", nargs="+", help="targets, families, or all")
    parser.add_argument("--seconds", type=float, help="time budget per target")
    parser.add_argument("--runs", type=int, help="executions per target")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", choices=("builtin", "atheris"), default="builtin")
    parser.add_argument("--crash-dir", type=Path, default=DEFAULT_CRASH_DIR)
    parser.add_argument(
        "--work-dir", type=Path, default=Path("/tmp/kproto-fuzz-corpus"), help="atheris corpus directories"
    )
    parser.add_argument("--slow", type=float, default=1.0, help="seconds per input counted as a hang")
    parser.add_argument("--replay", nargs="+", metavar="FILE", help="run these inputs and show what happens")
    parser.add_argument(
        "--only", choices=("c", "py"), help="run one implementation only (no differential check; for long crash hunts)"
    )
    parser.add_argument(
        "--leak-check",
        action="store_true",
        help="run the same mutated inputs in rounds and report the resident size per round",
    )
    args = parser.parse_args(argv)
    names = _expand(args.targets)
    if args.only:
        targets.select((args.only,))
    if args.replay:
        return _replay(names[0], args.replay)
    if args.runs is None and args.seconds is None:
        args.seconds = 30.0
    from kproto import _impl

    print(
        f"implementations: {', '.join(targets.IMPLEMENTATIONS)}; extension in use: {_impl.USE_EXTENSION}; "
        f"engine {args.engine}",
        flush=True,
    )
    failed = False
    if args.leak_check:
        for name in names:
            sizes = leak_check(name, seed=args.seed)
            growth = sizes[-1] - sizes[2]
            verdict = "ok" if growth <= 1 << 20 else "GROWING"
            failed = failed or verdict != "ok"
            print(
                f"{name:15s} rss per round (MiB): {' '.join(f'{s / 2**20:.1f}' for s in sizes)}  "
                f"growth after round 3: {growth >> 10} KiB  {verdict}",
                flush=True,
            )
        return 1 if failed else 0
    for name in names:
        if args.engine == "atheris":
            stats = fuzz_atheris(name, args.seconds or 60, args.crash_dir, args.work_dir, args.slow, args.only)
        else:
            stats = fuzz(
                name,
                runs=args.runs,
                seconds=args.seconds,
                seed=args.seed,
                crash_dir=args.crash_dir,
                slow=args.slow,
                progress=True,
            )
        print(stats.line(), flush=True)
        for failure in stats.failures[:5]:
            failed = True
            print(
                f"  FAILURE ({failure.kind}) saved as {failure.saved_as}:\n    "
                + failure.message.replace("\n", "\n    "),
                flush=True,
            )
        failed = failed or bool(stats.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

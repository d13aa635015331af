"""Record client fingerprints: real client libraries, release by release, against kproto's fake brokers.

    .venv/bin/python tools/record_fingerprints.py --evaluate   # tests/fingerprint_evaluation.py

The fingerprint table itself is built from tools/record_clients.py's recording against real
brokers (kproto/analyze/client_recordings.py); this tool records the evaluation set of clients outside
it (releases and fake brokers the table does not have), which tests/analyze/test_fingerprint.py scores.

Each library release gets its own virtual environment under
``~/.cache/kproto/fingerprints/<library>-<release>`` (kept and reused; wheels
only, as a release without a wheel for this Python would need a compiler and
its C dependencies; a release without a wheel for this Python is built from its source,
but for confluent-kafka, see WHEELS_ONLY). A release that cannot be installed or imported is written
to the output as such, with the reason. Each release then runs
tools/fingerprint_driver.py (connect, metadata, produce, consume, join a group,
produce under the default client.id) against a fresh fake broker of each
broker release in ``BROKERS``; kafka-python and aiokafka also run once pinned
to ``api_version=(0, 10, 1)``. The brokers' recording goes through the
pipeline's own worker and combine steps (kproto.analyze.spark.worker / combine), so
the features are exactly those the ``clients`` table has.

``--evaluate`` records again with other client ids, topics and message counts,
under the broker releases in ``EVALUATION_BROKERS``, and writes each client's
features with the truth (library, release, broker) for the test suite to
classify (tests/analyze/test_fingerprint.py).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as _dt
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

from kproto._common.cache import cache_root  # noqa: E402  (the checkout's kproto, put on the path above)


def _kproto_version() -> str:
    namespace: dict = {}
    exec((ROOT / "kproto" / "_version.py").read_text(), namespace)
    return namespace["__version__"]


# Under kproto's one cache directory (kproto/_common/cache.py); KPROTO_FINGERPRINT_CACHE moves only this.
CACHE = Path(os.environ.get("KPROTO_FINGERPRINT_CACHE") or cache_root() / "fingerprints")
DRIVER = ROOT / "tools" / "fingerprint_driver.py"
# The first and last release of each minor line we cover, oldest first.
RELEASES = {
    "kafka-python": (
        "1.4.4",
        "1.4.7",
        "2.0.0",
        "2.0.2",
        "2.0.6",
        "2.1.0",
        "2.1.6",
        "2.2.0",
        "2.2.21",
        "2.3.0",
        "3.0.0",
        "3.0.12",
    ),
    "aiokafka": ("0.7.0", "0.7.2", "0.8.0", "0.8.1", "0.9.0", "0.10.0", "0.11.0", "0.12.0", "0.13.0", "0.14.0"),
    "confluent-kafka": (
        "1.4.2",
        "1.5.0",
        "1.6.0",
        "1.7.0",
        "1.8.2",
        "1.9.2",
        "2.0.2",
        "2.2.0",
        "2.4.0",
        "2.6.1",
        "2.8.0",
        "2.10.1",
        "2.12.2",
        "2.14.2",
        "2.16.1",
    ),
    "kproto": (_kproto_version(),),  # this tree, as it announces itself
}
IMPORT_NAMES = {"kafka-python": "kafka", "aiokafka": "aiokafka", "confluent-kafka": "confluent_kafka"}
# Dependencies a release needs at the version of its time (aiokafka 0.8 imports kafka-python 2.0's modules).
EXTRA_REQUIREMENTS = {
    ("aiokafka", release): ("kafka-python==2.0.2",) for release in ("0.7.0", "0.7.2", "0.8.0", "0.8.1")
}
# Built from source, confluent-kafka would link the system's librdkafka: the wire would be that
# librdkafka's, not the release's. Only its wheels (which bundle their own librdkafka) are recorded.
WHEELS_ONLY = ("confluent-kafka",)
# Releases this Python cannot run, with the Python they need (major.minor): confluent-kafka 1.x has
# wheels for cp37 (to 1.5) or cp39 (1.6 to 1.9) at most. That Python is taken from pyenv; without it
# the release is not recorded.
OLD_PYTHONS = {
    **{("confluent-kafka", release): "3.7" for release in ("1.4.2", "1.5.0")},
    **{("confluent-kafka", release): "3.9" for release in ("1.6.0", "1.7.0", "1.8.2", "1.9.2")},
}
# Releases left out of the recordings, and why.
UNRECORDABLE = {
    "kafka-python 1.4.0": "does not import on Python 3.7+ (`async` is a keyword); recorded on Python 3.6 (as 1.4.3), "
    "its producers and assign-only consumers send what aiokafka 0.7 sends (the same pairs, "
    "order and one ApiVersions request per connection), so their clients would be named aiokafka",
    "confluent-kafka 1.0.0": "librdkafka 1.0 (before KIP-511, which came with 1.4) sends ApiVersions v0 with 4 bytes "
    "after its header; the fake broker answers INVALID_REQUEST and the client stops there",
}
PYENV_VERSIONS = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
PINNABLE = ("kafka-python", "aiokafka")
BROKERS = ("4.0", "3.9", "2.3")
EVALUATION_BROKERS = ("4.0", "2.3", "2.8")
RUN_SECONDS = 120
OPENING = 3  # the first requests of each client kept in the table, in order


# ---------------------------------------------------------------- environments
def environment(library: str, release: str) -> tuple[Path | None, str | None]:
    """(the Python of the release's environment, None) or (None, why it cannot be had)."""
    if library == "kproto":
        return Path(sys.executable), None
    base, problem = interpreter(library, release)
    if base is None:
        return None, problem
    version = OLD_PYTHONS.get((library, release))
    home = CACHE / (f"{library}-{release}" + (f"-py{version}" if version else ""))
    python = home / "bin" / "python"
    marker = home / ".installed"
    failed = home / ".failed"
    if marker.exists():
        return python, None
    if failed.exists():
        return None, failed.read_text()
    if version is None:
        # A venv without pip of its own (ensurepip is the slow part); this Python's pip installs into it.
        subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(home)], check=True)
        pip = [sys.executable, "-m", "pip", "--python", str(python)]
    else:
        # This pip does not run under an old Python: the venv gets that Python's own pip.
        subprocess.run([str(base), "-m", "venv", "--clear", str(home)], check=True)
        pip = [str(python), "-m", "pip"]
    python_name = f"Python {version or '%d.%d' % sys.version_info[:2]}"
    install = subprocess.run(
        [
            *pip,
            "install",
            "-q",
            "--only-binary",
            ":all:",
            f"{library}=={release}",
            *EXTRA_REQUIREMENTS.get((library, release), ()),
        ],
        capture_output=True,
        text=True,
    )
    if install.returncode != 0 and library not in WHEELS_ONLY:
        # No wheel for this Python: the release's own source, when it builds (dependencies still as wheels).
        install = subprocess.run(
            [
                *pip,
                "install",
                "-q",
                "--prefer-binary",
                f"{library}=={release}",
                *EXTRA_REQUIREMENTS.get((library, release), ()),
            ],
            capture_output=True,
            text=True,
        )
    problem = None
    if install.returncode != 0:
        lines = [line for line in install.stderr.splitlines() if "ERROR" in line]
        problem = f"no installable wheel for {python_name}: " + (lines[0] if lines else install.stderr[-200:])
    else:
        check = subprocess.run([str(python), "-c", f"import {IMPORT_NAMES[library]}"], capture_output=True, text=True)
        if check.returncode != 0:
            problem = f"installs but does not import on {python_name}: " + check.stderr.strip().splitlines()[-1]
    if problem:
        failed.write_text(problem)
        return None, problem
    marker.write_text(release)
    return python, None


def interpreter(library: str, release: str) -> tuple[Path | None, str | None]:
    """(the Python to make the release's environment with, None) or (None, why there is none here)."""
    version = OLD_PYTHONS.get((library, release))
    if version is None:
        return Path(sys.executable), None
    # The newest patch release of that major.minor pyenv has (3.7.16 beats 3.7.9).
    found = sorted(
        PYENV_VERSIONS.glob(f"{version}.*/bin/python"),
        key=lambda p: tuple(int(part) for part in p.parent.parent.name.split(".") if part.isdigit()),
    )
    if not found:
        return None, f"needs Python {version} (no wheel or no import on newer ones), not found in {PYENV_VERSIONS}"
    return found[-1], None


# ---------------------------------------------------------------- one run
def record_run(
    python: Path, library: str, broker_release: str, prefix: str, topic: str, messages: int, pinned: bool
) -> tuple[list[dict], str]:
    """The clients of one scripted run against one fresh fake broker, and the driver's output."""
    from fake_broker import FakeBroker, TrafficLog

    log = TrafficLog()
    broker = FakeBroker(log, release=broker_release, logical_port=9092).start()
    command = [str(python), str(DRIVER), library, broker.bootstrap, prefix, topic, str(messages)]
    if pinned:
        command.append("--pinned")
    environment_vars = dict(os.environ, PYTHONPATH=str(ROOT) if library == "kproto" else "")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_SECONDS, env=environment_vars)
        output = done.stdout + done.stderr[-500:]
    except subprocess.TimeoutExpired:
        output = "TIMEOUT"
    time.sleep(0.2)
    broker.stop()
    return clients_of(log.pcap()), output


def clients_of(pcap: bytes) -> list[dict]:
    """Each client of a recording with the features the pipeline's clients table has."""
    import pyarrow as pa

    from kproto.analyze.spark import combine as C
    from kproto.analyze.spark import planning as P
    from kproto.analyze.spark import task as T
    from kproto.analyze.spark import worker as W

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "run.pcap"
        path.write_bytes(pcap)
        parts = pa.Table.from_batches(
            [b for split in P.plan_file(str(path), 0) for b in T.process_split(split, broker_ports=(9092,))],
            schema=W.PARTS_SCHEMA,
        )
    from kproto.analyze import fingerprint as FP

    clients = C.combine(parts, fingerprint=False)["clients"].to_pylist()
    return [
        {
            "client_id": c["client_id"],
            "api_order": FP.api_pairs(c["api_order"]),
            "software": [c["client_software_name"], c["client_software_version"]]
            if c["client_software_name"]
            else None,
            "handshakes": c["api_versions_per_connection"],
        }
        for c in clients
    ]


# ---------------------------------------------------------------- the two recordings
def plan(evaluate: bool) -> list[tuple[str, str, str, bool]]:
    """(library, release, broker release, pinned) of every run."""
    runs = []
    for library, releases in RELEASES.items():
        for release in releases:
            for broker in EVALUATION_BROKERS if evaluate else BROKERS:
                runs.append((library, release, broker, False))
            if library in PINNABLE and not evaluate:
                runs.append((library, release, "3.9", True))
    return runs


def run_all(evaluate: bool, workers: int) -> tuple[list[dict], dict[str, str]]:
    """Every run's clients (with the run's truth), and the releases that could not be had, with why."""
    unavailable: dict[str, str] = dict(UNRECORDABLE)
    pythons: dict[tuple[str, str], Path] = {}
    for library, releases in RELEASES.items():
        for release in releases:
            python, problem = environment(library, release)
            if python is None:
                unavailable[f"{library} {release}"] = problem or "unknown"
                print(f"  {library} {release}: NOT RECORDED ({problem})", flush=True)
            else:
                pythons[(library, release)] = python

    def one(index: int, run: tuple[str, str, str, bool]) -> dict:
        library, release, broker, pinned = run
        # Other ids, topics and counts for the evaluation than for the table.
        prefix = f"eval{index}-{library[:3]}" if evaluate else f"fp-{library}"
        topic = f"evaluation-{index % 5}" if evaluate else "fingerprints"
        messages = 3 + index % 17 if evaluate else 10
        clients, output = record_run(pythons[(library, release)], library, broker, prefix, topic, messages, pinned)
        label = f"{library} {release} / broker {broker}{' pinned' if pinned else ''}"
        print(f"  {label}: {len(clients)} client(s)\n{output}", flush=True)
        return {
            "library": library,
            "release": release,
            "broker": broker,
            "pinned": pinned,
            "prefix": prefix,
            "clients": clients,
        }

    runs = [r for r in plan(evaluate) if (r[0], r[1]) in pythons]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, range(len(runs)), runs))
    return results, unavailable


# ---------------------------------------------------------------- writing the facts
HEADER = '''"""{what}

Recorded by tools/record_fingerprints.py{flag} on {stamp}: facts, do not edit; run the script again.
{more}"""

# ruff: noqa: E501
'''


def _pairs(pairs) -> str:
    return "(" + "".join(f"({a}, {v}), " for a, v in pairs) + ")"


def evaluation_module(results: list[dict], unavailable: dict[str, str], stamp: str) -> str:
    """tests/fingerprint_evaluation.py: each client's features and the truth."""
    lines = [
        HEADER.format(
            what="Client fingerprints, evaluation set: clients of known library release, "
            "recorded apart from the table.",
            flag=" --evaluate",
            stamp=stamp,
            more="Each client: (library, release, broker release, client.id, (API, version) "
            "pairs in order of first use,\nKIP-511 (name, version) or None, the most "
            "ApiVersions requests on one connection).\n",
        ),
        f"BROKERS = {EVALUATION_BROKERS!r}",
        f"NOT_RECORDED = {dict(sorted(unavailable.items()))!r}",
        "CLIENTS = (",
    ]
    for r in results:
        for c in r["clients"]:
            software = tuple(c["software"]) if c["software"] else None
            lines.append(
                f"    ({r['library']!r}, {r['release']!r}, {r['broker']!r}, {c['client_id']!r}, "
                f"{_pairs(c['api_order'])}, {software!r}, {c['handshakes']!r}),"
            )
    lines.append(")")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluate", action="store_true", help="record the evaluation set instead of the table")
    parser.add_argument("--workers", type=int, default=3, help="runs at once (they mostly wait)")
    args = parser.parse_args(argv)
    if not args.evaluate:
        parser.error(
            "the fingerprint table is built from kproto/analyze/client_recordings.py (tools/record_clients.py); "
            "this tool records the evaluation set: --evaluate"
        )
    logging.basicConfig(level=logging.CRITICAL)
    started = time.monotonic()
    results, unavailable = run_all(args.evaluate, args.workers)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    out = ROOT / "tests" / "fingerprint_evaluation.py"
    out.write_text(evaluation_module(results, unavailable, stamp))
    print(f"wrote {out} ({len(results)} runs, {time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Real traffic, byte-exact (issue 36, deliver 4): kproto and Java clients against real brokers.

    python tools/real_traffic.py                     # every release of scripts/install-kafka.sh
    python tools/real_traffic.py 4.4 3.9 --keep out  # some releases; keep the captures in out/

Per release: start a broker (tools/kafka_broker.py), capture its two client listeners
with one tcpdump on the loopback interface, run the kproto session
(tools/traffic_session.py) and a Java client session (tools/traffic/KafkaClientSession.java,
compiled with javac against the release's own kafka-clients jar, into the cache outside the
tree), stop the capture, then read it back with kproto.arrow.capture, pair requests with
responses (kproto.arrow.exchanges.pair) and check every frame: it decodes, and it encodes back to
the same bytes; every record batch in it is read (CRC-32C checked, decompressed) and
written back, compared byte for byte (when the compressor differs from the one that
wrote it, the uncompressed records are compared). The check runs on both
implementations: this process's, and the other one in a child process.

Prints a table per release: APIs exercised, frames captured, frames byte-exact, broker
error codes, and every finding (a closed connection, no answer, or a parse-level error
code answered to a kproto request; a frame that does not decode or re-encode exactly).
Exit status 1 when there is a finding.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(__file__).resolve().parent
JAVA_SOURCE = TOOLS / "traffic" / "KafkaClientSession.java"
JAVA_MAIN = "KafkaClientSession"
PROBE_TIMEOUT = 30.0  # seconds for tcpdump to show a probe in its file
JAVA_TIMEOUT = 240.0
for path in (str(ROOT), str(TOOLS)):
    if path not in sys.path:
        sys.path.insert(0, path)

import java_build  # noqa: E402  (tools/ is no package)
import kafka_broker  # noqa: E402
import traffic_session  # noqa: E402

import kproto  # noqa: E402
from kproto import schema  # noqa: E402
from kproto.errors import KprotoError  # noqa: E402
from kproto.records import RecordBatch, Records  # noqa: E402


class TrafficError(RuntimeError):
    """A tool is missing or failed (tcpdump, javac, the Java session): no result to give."""


# ---------------------------------------------------------------- capture
class Tcpdump:
    """One tcpdump on ``lo`` for some TCP ports, into ``path``.

    tcpdump says it listens before it really captures, and writes with a delay: UDP
    probes to a port of our own mark both ends (the first probe seen means it
    captures; the last one seen after the traffic means every packet before is in the file).
    """

    def __init__(self, path: Path, ports: list[int]) -> None:
        self.path = path
        self.receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.receiver.bind(("127.0.0.1", 0))
        self.sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.marker = b"kproto-traffic-probe-" + uuid.uuid4().hex.encode()
        tool = shutil.which("tcpdump")
        if tool is None:
            raise TrafficError("tcpdump is not installed: run scripts/install-capture-tools.sh")
        ports_filter = " or ".join(f"tcp port {p}" for p in ports)
        self.command = [
            tool,
            "-i",
            "lo",
            "--immediate-mode",
            "-U",
            "-B",
            "16384",
            "-n",
            "-s",
            "0",
            "-w",
            str(path),
            f"({ports_filter}) or udp port {self.receiver.getsockname()[1]}",
        ]
        self.report = path.with_suffix(".tcpdump.txt")
        self.process: subprocess.Popen | None = None

    def _probe_until_seen(self, label: bytes) -> None:
        assert self.process is not None
        payload = self.marker + b"-" + label
        deadline = time.monotonic() + PROBE_TIMEOUT
        while time.monotonic() < deadline and self.process.poll() is None:
            self.sender.sendto(payload, self.receiver.getsockname())
            try:
                if payload in self.path.read_bytes():
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise TrafficError(
            f"tcpdump showed no probe in {PROBE_TIMEOUT:.0f} s: "
            f"{self.report.read_text(errors='replace').strip() or 'no output'}"
        )

    def __enter__(self) -> Tcpdump:
        with open(self.report, "w") as report:
            self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=report)
        try:
            self._probe_until_seen(b"start")
        except BaseException:
            self._stop()
            raise
        return self

    def _stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.sender.close()
        self.receiver.close()

    def __exit__(self, kind, *_rest) -> None:
        try:
            if kind is None:
                self._probe_until_seen(b"end")
        finally:
            self._stop()
        dropped = re.search(r"(\d+) packets? dropped by kernel", self.report.read_text(errors="replace"))
        if kind is None and dropped and int(dropped.group(1)):
            raise TrafficError(f"tcpdump lost packets: {dropped.group(0)}")


# ---------------------------------------------------------------- the byte-exact check
@dataclass
class CaptureCheck:
    """What one implementation made of one capture."""

    implementation: str
    frames: int = 0
    exact: int = 0
    batches: int = 0  # record batches read back
    batches_exact: int = 0  # written back byte for byte, header and (compressed) payload
    control_batches: int = 0  # transaction markers among them
    batches_records_exact: int = 0  # the compressor differs; the uncompressed records are exact
    records_exact_codecs: dict[str, int] = field(default_factory=dict)  # those batches, by codec
    unanswered: list[str] = field(default_factory=list)  # requests the capture holds no answer to
    failures: list[str] = field(default_factory=list)
    frames_by_client: dict[str, int] = field(default_factory=dict)
    apis_by_client: dict[str, list[int]] = field(default_factory=dict)


def _first_difference(a: bytes, b: bytes) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at byte {at} ({len(a)} bytes read, {len(b)} written)"


def _records_fields(value: Any):
    if isinstance(value, Records):
        yield value
    elif isinstance(value, schema.Message):
        for name in value._field_names:
            yield from _records_fields(getattr(value, name))
    elif isinstance(value, list):
        for item in value:
            yield from _records_fields(item)


def _check_records(body: Any, where: str, check: CaptureCheck) -> None:
    for records in _records_fields(body):
        for batch in records:
            check.batches += 1
            if not isinstance(batch, RecordBatch):
                check.failures.append(f"{where}: a magic {batch.magic} message set (the session writes magic 2)")
                continue
            original = bytes(batch.raw)
            check.control_batches += batch.is_control
            fields = batch.header_fields()
            items = batch.records()
            if RecordBatch.encode(items, **fields) == original:
                check.batches_exact += 1
                continue
            if not fields["compression"]:
                check.failures.append(
                    f"{where}: record batch at offset {batch.base_offset} written back differs: "
                    f"{_first_difference(original, RecordBatch.encode(items, **fields))}"
                )
                continue
            plain = RecordBatch(RecordBatch.encode(items, **{**fields, "compression": None}))
            if bytes(plain.payload()) == bytes(batch.payload()):
                check.batches_records_exact += 1
                codec = batch.compression_name
                check.records_exact_codecs[codec] = check.records_exact_codecs.get(codec, 0) + 1
            else:
                check.failures.append(
                    f"{where}: the records of the {batch.compression_name} batch at offset "
                    f"{batch.base_offset} written back differ"
                )


def _check_request(payload: bytes, where: str, check: CaptureCheck) -> tuple[bool, Any]:
    try:
        request = kproto.decode_request(payload, lazy=False)
        again = kproto.encode_request(
            request.body,
            version=request.api_version,
            correlation_id=request.correlation_id,
            client_id=request.client_id,
            header_tags=request.header._unknown_tags,
        )
    except KprotoError as error:
        check.failures.append(f"{where}: request does not decode / encode: {error}")
        return False, None
    if again != payload:
        check.failures.append(f"{where}: request written back differs: {_first_difference(payload, again)}")
        return False, request
    _check_records(request.body, where, check)
    return True, request


def _check_response(payload: bytes, api_key: int, api_version: int, where: str, check: CaptureCheck) -> bool:
    try:
        response = kproto.decode_response(payload, api_key, api_version, lazy=False)
        again = kproto.encode_response(
            response.body,
            version=response.api_version,
            correlation_id=response.correlation_id,
            header_tags=response.header._unknown_tags,
        )
    except KprotoError as error:
        check.failures.append(f"{where}: response does not decode / encode: {error}")
        return False
    if again != payload:
        check.failures.append(f"{where}: response written back differs: {_first_difference(payload, again)}")
        return False
    _check_records(response.body, where, check)
    return True


def check_capture(path: str | Path, ports: list[int]) -> CaptureCheck:
    """Every frame of the capture, through this process's implementation of kproto."""
    from kproto.arrow.capture import read_capture
    from kproto.arrow.exchanges import pair

    check = CaptureCheck("c" if kproto.extension_loaded() else "py")
    frames, _connections, counters = read_capture(str(path), broker_ports=ports)
    for problem in ("gap_bytes", "truncated_packets"):
        if counters.get(problem):
            check.failures.append(f"the capture lost bytes: {problem}={counters[problem]}")
    payloads = frames["payload"].to_pylist()
    check.frames = len(payloads)
    clients: Counter = Counter()
    apis: dict[str, set[int]] = {}
    for row in pair(frames).to_pylist():
        request_row, response_row = row["request_row"], row["response_row"]
        where = f"connection {row['connection_id']} correlation {row['correlation_id']}"
        if request_row is None:
            check.failures.append(f"{where}: a response without its request")
            continue
        ok, request = _check_request(payloads[request_row], where, check)
        client = (request.client_id if request is not None else None) or "(none)"
        clients[client] += 1 + (response_row is not None)
        check.exact += ok
        if request is None:
            continue
        apis.setdefault(client, set()).add(request.api_key)
        where = f"{where} ({schema.request_name(request.api_key)} v{request.api_version})"
        if response_row is None:
            check.unanswered.append(f"{client}: {where}")
        if response_row is not None:
            check.exact += _check_response(payloads[response_row], request.api_key, request.api_version, where, check)
    check.frames_by_client = dict(sorted(clients.items()))
    check.apis_by_client = {client: sorted(keys) for client, keys in sorted(apis.items())}
    return check


def check_capture_twin(path: Path, ports: list[int]) -> CaptureCheck:
    """The same check in a child process running the other implementation."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if kproto.extension_loaded():
        env["KPROTO_NO_EXTENSIONS"] = "1"
    else:
        env.pop("KPROTO_NO_EXTENSIONS", None)
    done = subprocess.run(
        [sys.executable, __file__, "check", str(path), "--ports", ",".join(map(str, ports))],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode not in (0, 1) or not done.stdout.strip():
        raise TrafficError(f"the twin's check failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return CaptureCheck(**json.loads(done.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------- the Java client
def compile_java(release: str) -> Path:
    """KafkaClientSession compiled against ``release``'s kafka-clients, cached outside the tree
    under a digest of the source (compiled again when it changes)."""
    from kproto._common.cache import cache_root

    try:
        return java_build.compiled(
            JAVA_SOURCE, kafka_broker.classpath(release), cache_root() / "traffic-java" / release, JAVA_MAIN
        )
    except (java_build.JavaUnavailable, java_build.JavaBuildError) as exc:
        raise TrafficError(f"the Java client session against Kafka {release}: {exc}") from None


def java_session(broker: Any) -> str:
    """Run the Java client session against ``broker``; its output, or TrafficError."""
    classes = compile_java(broker.release)
    suffix = uuid.uuid4().hex[:8]
    args = [broker.bootstrap, f"java-traffic-{suffix}", f"java-group-{suffix}"]
    if kafka_broker.release_key(broker.release) >= (4, 0, 0):
        args.append("consumer-protocol")
    command = [
        kafka_broker.java(),
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-cp",
        os.pathsep.join([str(classes), kafka_broker.classpath(broker.release)]),
        JAVA_MAIN,
        *args,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=JAVA_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise TrafficError(f"the Java client session did not end within {JAVA_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        raise TrafficError(
            f"the Java client session failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout


# ---------------------------------------------------------------- one release
@dataclass
class ReleaseResult:
    release: str
    session: traffic_session.SessionLog
    checks: list[CaptureCheck]
    java_output: str = ""
    capture: str = ""

    def findings(self) -> list[str]:
        found = [f"kproto session: {f}" for f in self.session.findings()]
        for check in self.checks:
            found += [f"[{check.implementation}] {f}" for f in check.failures]
            if check.exact != check.frames:
                found.append(
                    f"[{check.implementation}] {check.frames - check.exact} of {check.frames} frames not byte-exact"
                )
        return found


def run_release(broker: Any, workdir: Path, *, java: bool = True, twin: bool = True) -> ReleaseResult:
    """Capture a kproto session (and a Java one) against a running broker; check the capture."""
    ports = [broker.plaintext_port, broker.sasl_port]
    path = workdir / f"kafka-{broker.release}.pcap"
    java_output = ""
    with Tcpdump(path, ports):
        log = traffic_session.Session(broker).run()
        if java:
            java_output = java_session(broker)
    checks = [check_capture(path, ports)]
    if twin:
        checks.append(check_capture_twin(path, ports))
    return ReleaseResult(broker.release, log, checks, java_output, str(path))


def table(results: list[ReleaseResult]) -> str:
    """The per-release summary, as Markdown."""
    lines = [
        "| release | kproto APIs sent | Java client APIs | frames | byte-exact (c / py) | record batches "
        "exact (+ records only) | kproto findings | broker error codes (kproto's requests) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        by_impl = {c.implementation: c for c in result.checks}
        first = result.checks[0]
        java_apis = sorted(
            {k for client, keys in first.apis_by_client.items() if client.startswith("java-") for k in keys}
        )
        exact = " / ".join(f"{by_impl[i].exact}" if i in by_impl else "-" for i in ("c", "py"))
        errors = ", ".join(f"{name} {n}" for name, n in sorted(result.session.error_counts().items()))
        lines.append(
            f"| {result.release} | {len(result.session.apis())} | {len(java_apis)} | {first.frames} | "
            f"{exact} | {first.batches_exact}/{first.batches} (+{first.batches_records_exact}) | "
            f"{len(result.findings())} | {errors or '-'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["check"]:  # the twin's child process: real_traffic.py check CAPTURE --ports A,B
        return _check_main(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", help="releases or lines (default: all of scripts/install-kafka.sh)")
    parser.add_argument("--keep", type=Path, help="keep the captures (and a JSON summary) in this directory")
    parser.add_argument("--no-java", action="store_true", help="the kproto session only")
    parser.add_argument("--no-twin", action="store_true", help="check with this process's implementation only")
    args = parser.parse_args(argv)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="kproto-traffic-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for release in args.releases or kafka_broker.releases():
            try:
                with kafka_broker.start(release) as broker:
                    result = run_release(broker, workdir, java=not args.no_java, twin=not args.no_twin)
            except (TrafficError, kafka_broker.BrokerError) as error:
                print(f"{release}: no result: {error}", file=sys.stderr)
                return 2
            results.append(result)
            for finding in result.findings():
                print(f"{result.release}: {finding}")
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(results))
    if args.keep is not None:
        summary = [
            {
                "release": r.release,
                "findings": r.findings(),
                "checks": [asdict(c) for c in r.checks],
                "errors": dict(r.session.error_counts()),
                "notes": r.session.notes,
                "apis": sorted(r.session.apis()),
            }
            for r in results
        ]
        (workdir / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return 1 if any(r.findings() for r in results) else 0


def _check_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("check")
    parser.add_argument("capture")
    parser.add_argument("--ports", required=True)
    args = parser.parse_args(argv)
    check = check_capture(args.capture, [int(p) for p in args.ports.split(",")])
    print(json.dumps(asdict(check)))
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())

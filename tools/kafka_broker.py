"""Real Apache Kafka brokers on 127.0.0.1, for the tests and the command line (issue 36).

    python tools/kafka_broker.py start 4.4.0     # prints the bootstrap addresses; Ctrl-C stops it
    python tools/kafka_broker.py releases        # the releases the project checks, and whether cached

One node in KRaft mode, broker and controller combined, formatted with Kafka's own
StorageTool and started as ``java -cp <libs>/* kafka.Kafka server.properties``: the
jars scripts/install-kafka.sh puts in the cache are all we have (no shell scripts of
the distribution). 3.9 and 4.x take the same configuration and StorageTool command here:
3.9 would default to ZooKeeper mode, which ``process.roles`` turns off, and the static
``controller.quorum.voters`` quorum needs no ``--standalone`` (KIP-853, 3.9+) at format time;
4.x has no ZooKeeper mode and still accepts a static quorum. Three listeners on free ports of 127.0.0.1: PLAINTEXT, SASL_PLAINTEXT
(mechanism PLAIN, user :data:`SASL_USER`) and the controller's. Logs go to files in the
broker's temporary directory (slf4j-simple at WARN, plus a quiet log4j2 configuration
for the releases whose dependencies carry log4j-core); the directory is removed when
the broker stops.

The broker is ready when it answers ApiVersions (kproto's own handshake,
:func:`kproto.versions.handshake`); every wait is bounded, and a broker that dies or
never answers fails with the tail of its logs. Stopping is SIGTERM, a bounded wait,
then SIGKILL. On Linux the JVM also gets SIGTERM when the Python process that started it
dies (PR_SET_PDEATHSIG), so no broker outlives a killed test run.

In tests: the ``kafka_broker`` fixture of tests/conftest.py (a :class:`BrokerPool`:
one release alive at a time, each started once per session).
"""

from __future__ import annotations

import argparse
import atexit
import base64
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import java_build  # a sibling in tools/, which is on sys.path wherever this runs

from kproto._common.cache import cache_root  # the one cache rule (kproto is importable wherever this runs)

ROOT = Path(__file__).resolve().parent.parent
INSTALL_SCRIPT = ROOT / "scripts" / "install-kafka.sh"
SASL_USER = "kproto"
SASL_PASSWORD = "kproto-secret"
SASL_MECHANISM = "PLAIN"
SLF4J_SIMPLE = "slf4j-simple-1.7.36"  # fetched by scripts/install-kafka.sh
NODE_ID = 1
FORMAT_TIMEOUT = 180.0  # seconds; a cold JVM on a busy 2-core machine is slow
READY_TIMEOUT = 240.0
STOP_TIMEOUT = 30.0
JVM_OPTIONS = (
    "-Xms96m",
    "-Xmx384m",
    # a small heap on a shared 2-core machine: one GC thread, the C1 compiler only
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:CICompilerCount=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
)


class BrokerError(RuntimeError):
    """A broker could not be had: no Java, no cached release, or it died or never answered."""


# ---------------------------------------------------------------- the releases and their jars
def releases() -> tuple[str, ...]:
    """The releases the project checks: KAFKA_RELEASES of scripts/install-kafka.sh (one list, one place)."""
    text = INSTALL_SCRIPT.read_text(encoding="utf-8")
    match = re.search(r"^KAFKA_RELEASES=\(([^)]*)\)", text, re.MULTILINE)
    if match is None:
        raise BrokerError(f"no KAFKA_RELEASES=(...) line in {INSTALL_SCRIPT}")
    return tuple(match.group(1).split())


def release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def resolve(release: str) -> str:
    """``"4.4"`` -> ``"4.4.0"``: a release of :func:`releases`, given whole or as its line;
    any other release given whole that scripts/install-kafka.sh has put in the cache (``4.0.0``)."""
    known = releases()
    if release in known or (release.count(".") == 2 and (kafka_cache() / release / ".broker-ok").is_file()):
        return release
    matches = [r for r in known if r.startswith(release + ".")]
    if matches:
        return max(matches, key=release_key)  # the newest patch of the line
    raise BrokerError(f"no release {release!r} among {', '.join(known)} (scripts/install-kafka.sh KAFKA_RELEASES)")


def kafka_cache() -> Path:
    """Where scripts/install-kafka.sh puts the releases: kafka/ under kproto's cache directory."""
    return cache_root() / "kafka"


def classpath(release: str) -> str:
    """The broker's classpath: the release's libs/ then the logging backend; BrokerError if not cached."""
    cache = kafka_cache()
    libs = cache / release / "libs"
    logging = cache / SLF4J_SIMPLE
    missing = [
        p for p, marker in ((libs, cache / release / ".broker-ok"), (logging, logging / ".ok")) if not marker.is_file()
    ]
    if missing:
        raise BrokerError(
            f"Kafka {release} is not in the cache ({', '.join(map(str, missing))} missing): "
            f"run scripts/install-kafka.sh {release}"
        )
    return os.pathsep.join((str(libs / "*"), str(logging / "*")))


def java() -> str:
    """The java executable (java_build.jdk_tool: $JAVA_HOME/bin, else PATH); BrokerError naming the fix."""
    try:
        return java_build.jdk_tool("java")
    except java_build.JavaUnavailable:
        raise BrokerError("java is not on PATH (nor in $JAVA_HOME): Kafka brokers need a Java 17+ runtime") from None


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports nobody listens on now (held together so they differ)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


# ---------------------------------------------------------------- configuration
def server_properties(data_dir: Path, plaintext: int, sasl: int, controller: int) -> str:
    """One KRaft node, broker and controller, with the three listeners; valid for 3.9 and 4.x.

    The controller quorum is static (controller.quorum.voters), which both lines accept
    and StorageTool formats without --standalone. Settings a release does not know
    (the share coordinator's, before 4.1) only draw a warning in its log.
    """
    jaas = (
        f"org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{SASL_USER}" password="{SASL_PASSWORD}" user_{SASL_USER}="{SASL_PASSWORD}";'
    )
    lines = {
        "process.roles": "broker,controller",
        "node.id": NODE_ID,
        "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl},"
        f"CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "sasl.enabled.mechanisms": SASL_MECHANISM,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": SASL_MECHANISM,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "log.dirs": data_dir,
        "num.partitions": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        # few threads: the machine has two cores, shared
        "num.network.threads": 2,
        "num.io.threads": 2,
        "background.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "log.cleaner.threads": 1,
        "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024,
    }
    return "".join(f"{key}={value}\n" for key, value in lines.items())


def log4j2_properties(log_file: Path) -> str:
    """Quiet, to a file: for the releases whose classpath carries log4j-core (4.1+)."""
    return (
        f"status = warn\nappender.file.type = File\nappender.file.name = file\n"
        f"appender.file.fileName = {log_file}\nappender.file.layout.type = PatternLayout\n"
        f"appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} %p %c %m%n\n"
        f"rootLogger.level = warn\nrootLogger.appenderRef.file.ref = file\n"
    )


def jvm_command(release: str, workdir: Path, main: str, *args: str) -> list[str]:
    logging = (
        f"-Dorg.slf4j.simpleLogger.logFile={workdir / 'server.log'}",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info",  # "Kafka Server started"
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
        f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
    )
    return [java(), *JVM_OPTIONS, *logging, "-cp", classpath(release), main, *args]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux), so no broker is orphaned."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def new_cluster_id() -> str:
    """A Kafka Uuid in its base64 form (what ``kafka-storage random-uuid`` prints); like Kafka's
    Uuid.randomUuid never one beginning with '-', which StorageTool's parser would take for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# ---------------------------------------------------------------- one broker
def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Broker:
    """A running single-node broker; :meth:`stop` ends it and removes its directory."""

    release: str
    workdir: Path
    plaintext_port: int
    sasl_port: int
    controller_port: int
    process: subprocess.Popen | None = None
    api_versions: object | None = None  # the kproto.versions.HandshakeResult of the readiness check
    started_in: float = 0.0  # seconds from launch to the first ApiVersions answer
    keep_workdir: bool = False
    _stopped: bool = field(default=False, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.plaintext_port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def address(self, listener: str = "PLAINTEXT") -> tuple[str, int]:
        port = {"PLAINTEXT": self.plaintext_port, "SASL_PLAINTEXT": self.sasl_port}[listener.upper()]
        return ("127.0.0.1", port)

    def connect(self, listener: str = "PLAINTEXT", timeout: float = 10.0) -> socket.socket:
        return socket.create_connection(self.address(listener), timeout=timeout)

    def logs(self, lines: int = 40) -> str:
        """The tail of each log file, for failure messages."""
        parts = []
        for name in ("stdout.log", "server.log", "log4j2.log"):
            text = tail(self.workdir / name, lines)
            if text:
                parts.append(f"--- {name} (last {lines} lines)\n{text}")
        return "\n".join(parts) or "(the broker wrote no log)"

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL; removes the directory. Returns the exit code."""
        if self._stopped:
            return self.process.returncode if self.process else None
        self._stopped = True
        _LIVE.discard(self)
        code = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(10)
            code = self.process.returncode
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return code

    def __hash__(self) -> int:
        return id(self)

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


_LIVE: set[Broker] = set()


@atexit.register
def _stop_all() -> None:
    for broker in list(_LIVE):
        broker.stop(timeout=10)


def format_storage(broker: Broker, properties: Path, timeout: float = FORMAT_TIMEOUT) -> None:
    command = jvm_command(
        broker.release,
        broker.workdir,
        "kafka.tools.StorageTool",
        "format",
        "-t",
        new_cluster_id(),
        "-c",
        str(properties),
    )
    try:
        done = subprocess.run(
            command,
            cwd=broker.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
    except subprocess.TimeoutExpired:
        raise BrokerError(f"Kafka {broker.release}: StorageTool format took over {timeout:.0f} s") from None
    if done.returncode != 0:
        raise BrokerError(
            f"Kafka {broker.release}: StorageTool format failed ({done.returncode}):\n"
            f"{(done.stdout + done.stderr)[-3000:]}\n{broker.logs()}"
        )


def answers_api_versions(broker: Broker, timeout: float = 5.0):
    """The broker's ApiVersions answer (kproto's handshake) or None when it does not answer yet."""
    from kproto.errors import KprotoError
    from kproto.versions import handshake, socket_exchange

    try:
        with broker.connect(timeout=timeout) as sock:
            return handshake(socket_exchange(sock), client_id="kproto-broker-check")
    except (OSError, KprotoError):
        return None


def wait_ready(broker: Broker, timeout: float = READY_TIMEOUT) -> None:
    """Until the broker answers ApiVersions; BrokerError with its logs if it exits or the time runs out."""
    assert broker.process is not None
    launched = time.monotonic()
    deadline = launched + timeout
    while True:
        code = broker.process.poll()
        if code is not None:
            raise BrokerError(f"Kafka {broker.release} exited with {code} before answering:\n{broker.logs()}")
        result = answers_api_versions(broker)
        if result is not None:
            broker.api_versions = result
            broker.started_in = time.monotonic() - launched
            return
        if time.monotonic() > deadline:
            raise BrokerError(
                f"Kafka {broker.release} did not answer ApiVersions within {timeout:.0f} s:\n{broker.logs()}"
            )
        time.sleep(0.5)


def start(
    release: str, *, workdir: Path | None = None, keep_workdir: bool = False, ready_timeout: float = READY_TIMEOUT
) -> Broker:
    """Format and start a broker of ``release`` (e.g. ``"4.4.0"`` or ``"4.4"``); returns when it answers.

    A port taken by someone else between :func:`free_ports` and the broker's bind is the
    one failure tried again, once, on new ports.
    """
    release = resolve(release)
    classpath(release)  # fail before making anything when the release is not cached
    java()
    try:
        return _start_once(release, workdir, keep_workdir, ready_timeout)
    except BrokerError as error:
        if "Address already in use" not in str(error):
            raise
        return _start_once(release, workdir, keep_workdir, ready_timeout)


def _start_once(release: str, workdir: Path | None, keep_workdir: bool, ready_timeout: float) -> Broker:
    base = Path(tempfile.mkdtemp(prefix=f"kproto-kafka-{release}-", dir=workdir))
    broker = Broker(release, base, *free_ports(3), keep_workdir=keep_workdir)
    _LIVE.add(broker)
    try:
        properties = base / "server.properties"
        properties.write_text(
            server_properties(base / "data", broker.plaintext_port, broker.sasl_port, broker.controller_port),
            encoding="utf-8",
        )
        (base / "log4j2.properties").write_text(log4j2_properties(base / "log4j2.log"), encoding="utf-8")
        format_storage(broker, properties)
        with open(base / "stdout.log", "wb") as out:
            broker.process = subprocess.Popen(
                jvm_command(release, base, "kafka.Kafka", str(properties)),
                cwd=base,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        wait_ready(broker, ready_timeout)
    except BaseException:  # KeyboardInterrupt too: never leave a half-started broker behind
        broker.stop(timeout=10)
        raise
    return broker


class BrokerPool:
    """One broker alive at a time: :meth:`get` stops the one running when another release is asked for.

    Tests ordered by release (tests/conftest.py sorts them) start each release once.
    """

    def __init__(self, starter: Callable[[str], Broker] = start) -> None:
        self.starter = starter
        self.current: Broker | None = None
        self.started: list[str] = []

    def get(self, release: str) -> Broker:
        release = resolve(release)
        if self.current is not None and self.current.release == release:
            if self.current.process is not None and self.current.process.poll() is None:
                return self.current
            raise BrokerError(f"Kafka {release} died during the tests:\n{self.current.logs()}")
        self.close()
        self.current = self.starter(release)
        self.started.append(release)
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None


# ---------------------------------------------------------------- the command line
def _cmd_start(args: argparse.Namespace) -> int:
    broker = start(args.release, keep_workdir=args.keep)
    stop_requested = []
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.append(True))
    try:
        print(f"Kafka {broker.release} ready in {broker.started_in:.1f} s (pid {broker.process.pid})")
        print(f"PLAINTEXT       {broker.bootstrap}")
        print(f"SASL_PLAINTEXT  {broker.sasl_bootstrap}  (PLAIN, user {SASL_USER}, password {SASL_PASSWORD})")
        print(f"directory       {broker.workdir}" + ("" if args.keep else "  (removed on stop)"))
        print("Ctrl-C stops it.", flush=True)
        while not stop_requested and broker.process.poll() is None:
            time.sleep(0.5)
        if broker.process.poll() is not None:
            print(f"the broker exited with {broker.process.returncode}:\n{broker.logs()}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        pass
    finally:
        code = broker.stop()
        print(f"stopped (exit code {code})")
    return 0


def _cmd_releases(_args: argparse.Namespace) -> int:
    for release in releases():
        try:
            classpath(release)
            state = "cached"
        except BrokerError:
            state = "not cached (scripts/install-kafka.sh)"
        print(f"{release:8} {state}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\nIn tests:")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    start_cmd = commands.add_parser("start", help="start one broker, print its addresses, stop it on Ctrl-C")
    start_cmd.add_argument("release", help=f"one of {', '.join(releases())} (or its line, e.g. 4.4)")
    start_cmd.add_argument("--keep", action="store_true", help="keep the broker's directory (logs, data)")
    start_cmd.set_defaults(run=_cmd_start)
    list_cmd = commands.add_parser("releases", help="the releases the project checks, and whether they are cached")
    list_cmd.set_defaults(run=_cmd_releases)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except BrokerError as error:
        print(f"kafka_broker: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # during the start: start() has stopped the broker already
        print("kafka_broker: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

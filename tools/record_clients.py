"""Record real client libraries against real Kafka brokers: their wire facts and whether they work (issue 37).

    scripts/install-clients.sh                      # the clients, into the cache (once)
    .venv/bin/python tools/record_clients.py        # every installed client x every broker in BROKERS
    .venv/bin/python tools/record_clients.py --brokers 4.0.2 --only kafkajs   # a part, for a look (no file)
    scripts/install-clients.sh --held-out && .venv/bin/python tools/record_clients.py --held-out
                                                    # the held-out evaluation set (below)

Every client release scripts/install-clients.sh installed (the cache's ``.ok`` directories;
its ``.failed`` ones are listed with their reason) runs its driver from tools/clients/
(produce, consume in a group and commit, an admin call, produce under the default client.id),
once as it comes and once more with its library's version pin where it has one (``PINS``),
against a real single-node broker of each release in ``BROKERS`` (tools/kafka_broker.py,
one broker alive at a time; a share consumer only against those that serve share groups, ``serves``). Each run is captured with tcpdump on the loopback interface
into the cache (``clients/captures/``, never the tree) and passed through the pipeline's
own steps: kproto.arrow.capture's reader for the frames and the connections, the worker and
combine steps for the ``clients`` table rows (exactly what the report's fingerprint sees).

Written to kproto/analyze/client_recordings.py: per run, the driver's step outcomes and the tail
of the client's own output (its error log), the broker's answer (requests it never answered,
connections it closed, ApiVersions error codes), and per client the client.id, the KIP-511
name and version, the ApiVersions requests per connection and the (API, version) pairs in
order of first use. The KIP-896 truth table (docs/analyze.md) is read from those runs.

``--held-out`` records the evaluation set instead: the releases scripts/install-clients.sh
--held-out put apart (clients/heldout/: other releases of the same libraries, none in the table),
under client.ids unlike the table's (``held_out_prefix``), a few pins at settings the table never
used (``HELD_OUT_PINS``), and software outside the table (``OUTSIDE``: clients written on kproto),
into tests/client_heldout_recordings.py. It lives with the tests, not in the package: nothing
at run time reads it, and no classifier may be built from it. ``--held-out --docs`` writes its
confusion table and version-range accuracy (``heldout_markdown``) into docs/analyze.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import signal
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

from kproto._common.cache import cache_root  # noqa: E402  (the checkout's kproto, put on the path above)

CACHE = cache_root() / "clients"
CAPTURES = CACHE / "captures"
HELD_OUT = CACHE / "heldout"  # scripts/install-clients.sh --held-out
HELD_OUT_OUT = ROOT / "tests" / "client_heldout_recordings.py"
HELD_OUT_BROKERS = ("4.4.0", "3.9.2")
DRIVERS = ROOT / "tools" / "clients"
BROKERS = ("3.9.2", "4.0.2", "4.4.0")
RUN_SECONDS = 120  # one driver run: four steps of at most ~20 s each, and the JVM's start
MESSAGES = 5
STEPS = ("producer", "group", "admin", "default-id-producer")  # every driver's, in this order
OUTPUT_TAIL = 400  # characters of the client's own output (not its STEP lines) kept per run
# Each library's version setting as old deployments set it (the "pin"), passed to its driver.
PINS = {
    "kafka-python": "0.10.1",  # api_version=(0, 10, 1)
    "aiokafka": "0.10.1",  # api_version="0.10.1"
    "confluent-kafka": "0.10.0",  # api.version.request=false, broker.version.fallback=0.10.0
    "kcat": "0.10.0",  # the same librdkafka settings, as -X options
    "sarama": "0.10.2.0",  # Config.Version (consumer groups need 0.10.2 at least)
    "franz-go": "0.10.1",  # kgo.MaxVersions(kversion.V0_10_1())
}


# Held-out pins: the library's version setting at a value the table's recording never used.
HELD_OUT_PINS = {
    ("kafka-python", "2.2.15"): "1.0.0",
    ("confluent-kafka", "2.3.0"): "0.11.0",
    ("sarama", "v1.38.1 (Shopify)"): "1.1.0",
}
# Share consumers (KIP-932, tools/clients/java/ShareDriver.java): a broker serves share groups by default from
# 4.2 (the share.version feature set when its storage is formatted); 4.1 only with the feature enabled by hand
# (its 4.1.2 answers "The cluster does not support the share group protocol"), 4.0 with an early-access
# protocol. A share consumer is recorded against the brokers that serve share groups.
SHARE_CONSUMER = " (share consumer)"
SHARE_GROUPS_SINCE = "4.2.0"


def serves(broker: str, release: str) -> bool:
    """Whether a broker release serves what a client release needs (share groups for a share consumer)."""
    return not release.endswith(SHARE_CONSUMER) or _key(broker) >= _key(SHARE_GROUPS_SINCE)


# Software outside the table (tools/clients/outside_driver.py): the fingerprint must name it unknown.
OUTSIDE = {
    "kproto": "kproto's own handshake (KIP-511 name kproto), negotiated versions",
    "kproto-codec": "a client written on kproto's codec: ApiVersions v0, versions chosen by hand, "
    "a null client.id on its default-id step",
}


@dataclass(frozen=True)
class Client:
    library: str
    release: str
    command: tuple[str, ...]  # the driver, before BOOTSTRAP PREFIX TOPIC COUNT [PIN]
    env: tuple[tuple[str, str], ...] = ()

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", f"{self.library}-{self.release}".lower()).strip("-")


# ---------------------------------------------------------------- the installed clients
GO_LIBRARIES = {
    "twmb_franz-go": "franz-go",
    "IBM_sarama": "sarama",
    "Shopify_sarama": "sarama",
    "segmentio_kafka-go": "kafka-go",
}


def installed(cache: Path = CACHE) -> tuple[list[Client], dict[str, str]]:
    """The clients scripts/install-clients.sh made ready in ``cache`` (HELD_OUT for --held-out), and
    those it could not, with why."""
    clients: list[Client] = []
    failed: dict[str, str] = {}

    def each(folder: str):
        for path in sorted((cache / folder).glob("*")) if (cache / folder).is_dir() else ():
            if (path / ".failed").exists():
                failed[f"{folder}/{path.name}"] = (path / ".failed").read_text().strip()
            elif (path / ".ok").exists():
                yield path

    def java(path: Path, main: str, heap: str = "256m") -> tuple[str, ...]:
        return (
            "java",
            f"-Xmx{heap}",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{path / 'classes'}:{path / 'lib'}/*",
            main,
        )

    for path in each("java"):
        clients.append(Client("kafka-clients", path.name, java(path, "ClientDriver")))
    for path in each("streams"):  # Kafka Streams applications: the Java client under Streams' own ids
        clients.append(Client("kafka-clients", f"{path.name} (Kafka Streams)", java(path, "StreamsDriver", "384m")))
    for path in each("share"):  # a share consumer (KIP-932): the Java client's KafkaShareConsumer
        clients.append(Client("kafka-clients", f"{path.name}{SHARE_CONSUMER}", java(path, "ShareDriver")))
    for path in each("python"):
        library, _, release = path.name.rpartition("-")
        clients.append(
            Client(library, release, (str(path / "bin" / "python"), str(DRIVERS / "python_driver.py"), library))
        )
    for path in each("go"):
        module, _, release = path.name.rpartition("-")
        label = release if not module.startswith("Shopify") else f"{release} (Shopify)"
        clients.append(Client(GO_LIBRARIES[module], label, (str(path / "driver"),)))
    for path in each("node"):
        clients.append(
            Client(
                "kafkajs",
                path.name.rpartition("-")[2],
                ("node", str(DRIVERS / "node" / "driver.js")),
                (("NODE_PATH", str(path / "node_modules")),),
            )
        )
    kcat = cache / "kcat"
    if (kcat / ".failed").exists():
        failed["kcat"] = (kcat / ".failed").read_text().strip()
    elif (kcat / ".ok").exists():
        # ".ok" holds "1.7.1 librdkafka-2.0.2": kcat's release and the librdkafka it links
        clients.append(Client("kcat", (kcat / ".ok").read_text().strip() or "?", (sys.executable, __file__, "--kcat")))
    return clients, failed


# ---------------------------------------------------------------- kcat's run (a shell tool, no driver file)
def kcat_run(bootstrap: str, prefix: str, topic: str, count: int, pin: str) -> int:
    """kcat through the same steps: produce, consume in a group (kcat's -G commits), metadata, default-id produce."""
    options = ["-X", "api.version.request=false", "-X", f"broker.version.fallback={pin}"] if pin else []
    records = "".join(f'{{"n":{i}}}\n' for i in range(count)).encode()
    steps = [
        ("producer", ["-P", "-t", topic, "-X", f"client.id={prefix}-producer"], records),
        (
            "group",
            [
                "-G",
                f"{prefix}-readers",
                "-X",
                f"client.id={prefix}-group",
                "-X",
                "auto.offset.reset=earliest",
                "-c",
                str(count),
                "-e",
                topic,
            ],
            None,
        ),
        ("admin", ["-L", "-X", f"client.id={prefix}-admin"], None),
        ("default-id-producer", ["-P", "-t", topic], records),
    ]
    failed = 0
    for label, args, stdin in steps:
        started = time.monotonic()
        try:
            done = subprocess.run(
                ["kcat", "-b", bootstrap, "-m", "10", *options, *args], input=stdin, capture_output=True, timeout=20
            )
            text = done.stderr.decode(errors="replace").strip()
            consumed = done.stdout.count(b"\n") if label == "group" else count
            ok = done.returncode == 0 and consumed >= count
            if text:
                print(text[-300:], file=sys.stderr)
            why = f"exit {done.returncode}, {consumed} of {count} records"
        except subprocess.TimeoutExpired:
            ok, why = False, "timed out"
        failed += not ok
        print(f"STEP {label} " + (f"ok {time.monotonic() - started:.1f}s" if ok else f"FAILED {why}"), flush=True)
    return failed


# ---------------------------------------------------------------- one run
def create_topic(broker, topic: str) -> None:
    """The run's topic, made before the capture starts (some clients do not create topics)."""
    import kproto
    from kproto import messages as M
    from kproto import versions as kv

    with broker.connect() as sock:
        exchange = kv.socket_exchange(sock)
        result = kv.handshake(exchange)
        version = kv.negotiate(None, result.response)[19]
        request = M.CreateTopicsRequest(
            topics=[M.CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=1, replication_factor=1)],
            timeout_ms=10000,
        )
        exchange(
            kproto.encode_request(
                request, version=version, correlation_id=7, client_id="kproto-recorder", size_prefixed=True
            )
        )


def held_out_prefix(client: Client, pin: str | None) -> str:
    """A held-out run's client.id prefix: an application's name, not the table's ``kp-<library>-<release>``
    (an id that names the library would hand the fingerprint the answer)."""
    return f"orders-{zlib.crc32((client.slug + (pin or '')).encode()) % 100000:05d}"


def outside_clients() -> list[Client]:
    """The programs of ``OUTSIDE``, run by the checkout's Python (they import the checkout's kproto)."""
    from kproto import __version__

    driver = str(DRIVERS / "outside_driver.py")
    return [Client(name, __version__, (sys.executable, driver, name.replace("kproto-", ""))) for name in OUTSIDE]


def capture_run(broker, client: Client, pin: str | None, pcap: Path, prefix: str | None = None) -> tuple[str, float]:
    """Run the client's driver under tcpdump; (its output, seconds)."""
    prefix = prefix or f"kp-{client.slug}{'-pin' if pin else ''}"
    topic = f"rec-{client.slug}{'-pin' if pin else ''}"
    create_topic(broker, topic)
    pcap.parent.mkdir(parents=True, exist_ok=True)
    # --immediate-mode: packets reach tcpdump as they come, not when a ring block times out, so a
    # run shorter than that timeout is not lost when tcpdump is stopped.
    dump = subprocess.Popen(
        [
            "tcpdump",
            "-i",
            "lo",
            "--immediate-mode",
            "-U",
            "-s",
            "0",
            "-w",
            str(pcap),
            f"tcp port {broker.plaintext_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert dump.stderr is not None
    dump.stderr.readline()  # "listening on lo ...": the capture runs
    command = [*client.command, broker.bootstrap, prefix, topic, str(MESSAGES), *([pin] if pin else [])]
    env = dict(os.environ, **dict(client.env), PYTHONPATH="")
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_SECONDS, env=env, errors="replace")
        output = done.stdout + done.stderr
    except subprocess.TimeoutExpired as timeout:
        output = (
            (timeout.stdout or b"").decode(errors="replace")
            if isinstance(timeout.stdout, bytes)
            else (timeout.stdout or "")
        ) + f"\nRUN TIMED OUT after {RUN_SECONDS}s"
    seconds = time.monotonic() - started
    time.sleep(1.0)
    dump.send_signal(signal.SIGINT)
    try:
        dump.wait(10)
    except subprocess.TimeoutExpired:
        dump.kill()
        dump.wait()
    return output, seconds


def wire_facts(pcap: Path, port: int) -> dict:
    """What the capture shows: per client (the pipeline's clients rows), and the broker's side."""
    import pyarrow as pa

    from kproto.analyze import fingerprint as FP
    from kproto.analyze.spark import combine as C
    from kproto.analyze.spark import planning as P
    from kproto.analyze.spark import task as T
    from kproto.analyze.spark import worker as W
    from kproto.arrow.capture import CaptureReader

    parts = pa.Table.from_batches(
        [b for split in P.plan_file(str(pcap), 0) for b in T.process_split(split, broker_ports=(port,))],
        schema=W.PARTS_SCHEMA,
    )
    clients = [
        {
            "client_id": c["client_id"],
            "order": [tuple(p) for p in FP.api_pairs(c["api_order"])],
            "software": (c["client_software_name"], c["client_software_version"])
            if c["client_software_name"]
            else None,
            "handshakes": c["api_versions_per_connection"],
        }
        for c in C.combine(parts, fingerprint=False)["clients"].to_pylist()
    ]
    # The broker's side, from the frames: requests per connection in order, paired with responses by
    # correlation id (a frame the capture lost must not shift the pairing).
    requests: dict[int, list[tuple[tuple[int, int], int]]] = {}  # ((API, version), correlation id)
    responses: dict[int, dict[int, bytes]] = {}  # correlation id -> response
    reader = CaptureReader(str(pcap), broker_ports=[port])
    for batch in reader:
        for conn, direction, payload in zip(
            *(batch.column(n).to_pylist() for n in ("connection_id", "direction", "payload"))
        ):
            if direction == 0 and len(payload) >= 8:
                pair = (int.from_bytes(payload[0:2], "big", signed=True), int.from_bytes(payload[2:4], "big"))
                requests.setdefault(conn, []).append((pair, int.from_bytes(payload[4:8], "big", signed=True)))
            elif direction == 1 and len(payload) >= 4:
                responses.setdefault(conn, {})[int.from_bytes(payload[0:4], "big", signed=True)] = payload
    # ApiVersions responses keep header v0 (KIP-511): the error code follows the correlation id.
    api_versions_errors = {
        int.from_bytes(responses[conn][cid][4:6], "big", signed=True)
        for conn, sent in requests.items()
        for pair, cid in sent
        if pair[0] == 18 and len(responses.get(conn, {}).get(cid, b"")) >= 6
    }
    # A connection the broker closed first (its FIN or RST before the client's) with a request left
    # unanswered: the broker refused it. (A client closing with a fetch in flight is not that.) The
    # refused request is the first unanswered one, of an (API, version) answered nowhere in the run:
    # the broker closes as soon as it reads a refused request, so a served one read just before it,
    # and those pipelined behind, lose their answers in the close too.
    by_broker = closed_by_broker(pcap, port)
    ports = {row["connection_id"]: row["client_port"] for row in reader.connections().to_pylist()}
    first_unanswered = {
        conn: next((pair for pair, cid in sent if cid not in responses.get(conn, {})), None)
        for conn, sent in requests.items()
        if ports.get(conn) in by_broker
    }
    cut = {conn for conn, pair in first_unanswered.items() if pair is not None}
    served = {pair for conn, sent in requests.items() for pair, cid in sent if cid in responses.get(conn, {})}
    unanswered = sorted({first_unanswered[conn] for conn in cut} - served)
    return {
        "clients": clients,
        "unanswered": unanswered,
        "closed_unanswered": len(cut),
        "api_versions_errors": sorted(api_versions_errors - {0}),
    }


def tcp_packets(pcap: Path):
    """(source port, destination port, TCP flags) of each IPv4 TCP packet of a classic pcap as tcpdump
    writes it on the loopback (Ethernet link type): what the pipeline's rows do not keep."""
    import struct

    data = pcap.read_bytes()
    order = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    offset = 24
    while offset + 16 <= len(data):
        captured = struct.unpack_from(order + "I", data, offset + 8)[0]
        packet = data[offset + 16 : offset + 16 + captured]
        offset += 16 + captured
        if len(packet) < 14 + 20 or packet[12:14] != b"\x08\x00":
            continue
        ip = packet[14:]
        header = (ip[0] & 0x0F) * 4
        if ip[9] == 6 and len(ip) >= header + 14:
            yield (*struct.unpack_from(">HH", ip, header), ip[header + 13])


def closed_by_broker(pcap: Path, port: int) -> set[int]:
    """Client ports of the TCP connections whose first FIN or RST came from the broker's side
    (the pipeline's connection rows say a connection closed, not which side closed it)."""
    first_close: dict[int, bool] = {}
    for source, destination, flags in tcp_packets(pcap):
        if flags & 0x05:  # FIN or RST
            first_close.setdefault(destination if source == port else source, source == port)
    return {client for client, broker_first in first_close.items() if broker_first}


def broker_port(pcap: Path) -> int:
    """The port in every packet of a recording (tcpdump's filter was that port)."""
    common: set[int] | None = None
    for source, destination, _flags in tcp_packets(pcap):
        common = {source, destination} if common is None else common & {source, destination}
    if not common or len(common) != 1:
        raise SystemExit(f"{pcap}: no single broker port ({common}); record it again")
    return common.pop()


def summarise(output: str) -> tuple[dict[str, str], str]:
    """The driver's step outcomes, and the tail of the rest of its output (the library's own log)."""
    steps: dict[str, str] = {}
    rest = []
    for line in output.splitlines():
        match = re.match(r"STEP (\S+) (ok|FAILED)\s*(.*)", line)
        if match:
            steps[match.group(1)] = "ok" if match.group(2) == "ok" else "FAILED " + match.group(3)[:200]
        elif line.strip():
            rest.append(line.strip())
    # The library's own complaints, where it made any, before the rest (interpreter noise at exit).
    complaints = [line for line in rest if re.search(r"error|exception|fail|refused|closed|disconnect", line, re.I)]
    rest = complaints or rest
    for step in STEPS:  # a driver that died or timed out before a step
        steps.setdefault(
            step, "FAILED the driver stopped before this step" + (" (timed out)" if "RUN TIMED OUT" in output else "")
        )
    return steps, " | ".join(rest)[-OUTPUT_TAIL:]


def planned(held_out: bool, only: list[str] | None) -> tuple[list[tuple[Client, str | None]], dict[str, str]]:
    """The (client, pin) runs for one broker, and the clients that could not be installed."""
    if held_out:
        clients, failed = installed(HELD_OUT)
        plan = [(c, None) for c in clients + outside_clients()]
        plan += [(c, HELD_OUT_PINS[c.library, c.release]) for c in clients if (c.library, c.release) in HELD_OUT_PINS]
    else:
        clients, failed = installed()
        plan = [(c, pin) for c in clients for pin in ((None, PINS[c.library]) if c.library in PINS else (None,))]
    if only:
        plan = [(c, pin) for c, pin in plan if c.library in only or c.slug in only]
    return plan, failed


def record(
    releases: tuple[str, ...], only: list[str] | None, save=lambda runs, failed: None, held_out: bool = False
) -> tuple[list[dict], dict[str, str]]:
    """Every run; ``save`` is called after each broker with the runs so far (a cut recording keeps them)."""
    import kafka_broker

    runs: list[dict] = []
    failed: dict[str, str] = {}
    captures = HELD_OUT / "captures" if held_out else CAPTURES
    for release in releases:
        plan, failed = planned(held_out, only)  # again for each broker: installs may still be under way
        print(f"broker {release}: starting", flush=True)
        broker = kafka_broker.start(release)
        try:
            for client, pin in ((c, p) for c, p in plan if serves(release, c.release)):
                pcap = captures / release / f"{client.slug}{'-pinned' if pin else ''}.pcap"
                prefix = held_out_prefix(client, pin) if held_out else None
                output, seconds = capture_run(broker, client, pin, pcap, prefix)
                pcap.with_suffix(".log").write_text(output)  # the whole output, beside the capture
                steps, log = summarise(output)
                facts = wire_facts(pcap, broker.plaintext_port)
                run = {
                    "library": client.library,
                    "release": client.release,
                    "pin": pin,
                    "broker": release,
                    "works": bool(steps) and all(v == "ok" for v in steps.values()),
                    "steps": steps,
                    "log": log,
                    **facts,
                }
                runs.append(run)
                print(
                    f"  {client.library} {client.release}{' pin ' + pin if pin else ''}: "
                    f"{'works' if run['works'] else 'FAILS'} ({seconds:.0f}s) {steps} "
                    f"unanswered={facts['unanswered']} av_errors={facts['api_versions_errors']}",
                    flush=True,
                )
        finally:
            broker.stop()
        save(runs, failed)
    return runs, failed


# ---------------------------------------------------------------- the data file
HEADER = '''"""Real client libraries against real Kafka brokers: what they sent and whether they worked (issue 37).

Recorded by tools/record_clients.py on {stamp}: facts, do not edit; run the script again
(after scripts/install-clients.sh). Each run: one client release, as it comes (pin None) or
with its library's version setting (``PINS`` of the recorder), against one real broker
release, through produce, a group consume and commit, an admin call and a default-id produce.

RUNS: (library, release, pin, broker, works, steps {{step: "ok" | "FAILED why"}}, the tail of
the client's own log, the (API, version) requests the broker closed a connection on (the first
request it left unanswered on a connection it closed first), connections that ended with requests unanswered, ApiVersions error codes answered, clients).
Each client: (client.id, (API, version) pairs in order of first use, KIP-511 (name, version)
or None, the most ApiVersions requests on one connection).
"""

# ruff: noqa: E501
'''


HELD_OUT_HEADER = '''"""Held-out clients: real client releases the fingerprint table never saw, against real brokers (issue 37).

Recorded by tools/record_clients.py --held-out on {stamp}: facts, do not edit; run the script again
(after scripts/install-clients.sh --held-out). The evaluation set of tests/analyze/test_fingerprint_heldout.py:
other releases of the table's libraries (none in kproto/analyze/client_recordings.py), client.ids unlike the
table's, pins at settings the table never used (``PINS``: (library, release) -> pin), and software
outside the table (``OUTSIDE``), through the table's scripted run. Never build a table from it.

RUNS as in kproto/analyze/client_recordings.py: (library, release, pin, broker, works, steps, the tail of the
client's own log, requests the broker closed a connection on, connections that ended with requests
unanswered, ApiVersions error codes answered, clients); each client (client.id, (API, version)
pairs in order of first use, KIP-511 (name, version) or None, the most ApiVersions requests on one
connection).
"""

# ruff: noqa: E501
'''


def as_row(r: dict) -> tuple:
    """One run as the data file keeps it (the RUNS tuple)."""
    clients = tuple((c["client_id"], tuple(c["order"]), c["software"], c["handshakes"]) for c in r["clients"])
    return (
        r["library"],
        r["release"],
        r["pin"],
        r["broker"],
        r["works"],
        r["steps"],
        r["log"],
        tuple(r["unanswered"]),
        r["closed_unanswered"],
        tuple(r["api_versions_errors"]),
        clients,
    )


def merged(kept: list[tuple], new: list[tuple]) -> list[tuple]:
    """The runs of an earlier recording that ``new`` does not run again, and ``new``; in a stable order."""
    from kproto.analyze.fingerprint import release_key

    redone = {row[:4] for row in new}
    rows = [row for row in kept if row[:4] not in redone] + new
    return sorted(rows, key=lambda r: (release_key(r[3]), r[0], release_key(r[1]), r[1], r[2] or ""))


def data_module(rows: list[tuple], failed: dict[str, str], stamp: str, held_out: bool = False) -> str:
    head = (
        [
            HELD_OUT_HEADER.format(stamp=stamp),
            f"BROKERS = {tuple(sorted({r[3] for r in rows}, key=_key))!r}",
            f"PINS = {HELD_OUT_PINS!r}",
            f"OUTSIDE = {OUTSIDE!r}",
        ]
        if held_out
        else [
            HEADER.format(stamp=stamp),
            f"BROKERS = {tuple(sorted({r[3] for r in rows}, key=_key))!r}",
            f"PINS = {PINS!r}",
        ]
    )
    lines = [*head, f"NOT_RECORDED = {dict(sorted(failed.items()))!r}", "RUNS = ("]
    for library, release, pin, broker, works, steps, log, unanswered, cut, errors, clients in rows:
        lines.append(f"    ({library!r}, {release!r}, {pin!r}, {broker!r}, {works!r},")
        lines.append(f"     {steps!r},")
        lines.append(f"     {log!r},")
        lines.append(f"     {unanswered!r}, {cut!r}, {errors!r},")
        lines.append(f"     {clients!r}),")
    lines.append(")")
    return "\n".join(lines) + "\n"


def _key(release: str) -> tuple[int, ...]:
    from kproto.analyze.fingerprint import release_key

    return release_key(release)


# ---------------------------------------------------------------- the tables read from the recording
def _api(pair) -> str:
    from kproto import versions as kv

    return f"{kv.api_name(pair[0])} v{pair[1]}"


def broker_answer(run) -> str:
    """What the broker did that the client did not expect: unanswered requests, ApiVersions errors."""
    _lib, _rel, _pin, _broker, works, _steps, _log, unanswered, cut, av_errors, _clients = run
    parts = []
    if unanswered:
        parts.append(f"closed {cut} connection(s) on " + ", ".join(_api(p) for p in unanswered) + " without an answer")
    if av_errors:
        parts.append("ApiVersions error " + ", ".join(map(str, av_errors)))
    return "; ".join(parts) or ("answered every request" if works else "answered every request (see the client)")


def client_symptom(run) -> str:
    """The first failing step and what the client said, or "works"."""
    steps = run[5]
    failing = [(step, outcome[len("FAILED ") :]) for step, outcome in steps.items() if outcome != "ok"]
    if not failing:
        return "works"
    step, why = failing[0]
    more = f" (+{len(failing) - 1} more step(s))" if len(failing) > 1 else ""
    return f"{step}: {why[:140]}{more}".replace("|", "/")


def truth_rows(runs) -> list[tuple]:
    """(library, release, pin, {broker: the steps that failed, () when it worked}, the first failing 4.x
    broker's answer, the client's symptom there)."""
    from kproto.analyze.fingerprint import release_key

    table: dict[tuple, dict] = {}
    for run in runs:
        library, release, pin, broker = run[:4]
        table.setdefault((library, release, pin), {})[broker] = run
    rows = []
    for (library, release, pin), by_broker in sorted(
        table.items(), key=lambda item: (item[0][0], release_key(item[0][1]), item[0][2] or "")
    ):
        failing_4x = [
            by_broker[b] for b in sorted(by_broker, key=release_key) if b.startswith("4") and not by_broker[b][4]
        ]
        shown = failing_4x[0] if failing_4x else None
        failed = {b: tuple(step for step, outcome in r[5].items() if outcome != "ok") for b, r in by_broker.items()}
        rows.append(
            (
                library,
                release,
                pin,
                failed,
                broker_answer(shown) if shown else "",
                client_symptom(shown) if shown else "",
            )
        )
    return rows


def truth_markdown(runs, brokers=BROKERS) -> str:
    """The KIP-896 truth table as Markdown: one row per client release and pin."""
    lines = [
        "| client | release | pin | " + " | ".join(brokers) + " | the 4.x broker | the client |",
        "|---" * (5 + len(brokers)) + "|",
    ]
    for library, release, pin, failed, answer, symptom in truth_rows(runs):
        cells = [
            (
                "works"
                if not failed[b]
                else "**fails**: " + ("every step" if len(failed[b]) == len(STEPS) else ", ".join(failed[b]))
            )
            if b in failed
            else "-"
            for b in brokers
        ]
        lines.append(f"| {library} | {release} | {pin or ''} | " + " | ".join(cells) + f" | {answer} | {symptom} |")
    return "\n".join(lines) + "\n"


# The name a library gives itself in KIP-511, where the fingerprint table knows it by that name
# (kcat is librdkafka's command-line front end: naming it librdkafka is right).
SELF_NAMES = {"kafka-clients": "apache-kafka-java", "franz-go": "kgo", "kcat": "librdkafka"}


def fingerprint_rows(runs) -> list[tuple]:
    """Every recorded client as (library, release, broker, client_id, pairs, software, handshakes) for
    kproto.analyze.fingerprint_scoring.evaluate; the library as it names itself (``SELF_NAMES``), a pinned run's
    broker column carrying its pin."""
    return [
        (SELF_NAMES.get(library, library), release, broker if pin is None else f"{broker} pin {pin}", *client)
        for library, release, pin, broker, *_rest, clients in runs
        for client in clients
    ]


def confusion_text(runs) -> str:
    """The current fingerprint on the recording: as the clients table names them (KIP-511 first) and by
    the wire alone, with the wrong verdicts that claim high confidence."""
    from kproto.analyze import fingerprint as FP
    from kproto.analyze import fingerprint_scoring as scoring

    rows = fingerprint_rows(runs)
    parts = []
    for title, kip511 in (
        ("As the `clients` table names them (a KIP-511 name first):", True),
        ("By the fingerprint alone (KIP-511 names ignored):", False),
    ):
        result = scoring.evaluate(rows, kip511=kip511)
        sure = sorted({(w[0], w[4]) for w in result["wrong"] if w[4] != w[0] and w[6] == FP.HIGH})
        parts.append(
            f"{title}\n\n{scoring.confusion_markdown(result)}\nWrong library with `high` confidence: "
            + (", ".join(f"{true} named {named}" for true, named in sure) or "none")
            + ".\n"
        )
    return "\n".join(parts)


# ---------------------------------------------------------------- the held-out evaluation
UNKNOWN = "unknown"
HELD_OUT_DOC_BEGIN = "<!-- held-out evaluation: tools/record_clients.py --held-out --docs -->"
HELD_OUT_DOC_END = "<!-- end of the held-out evaluation -->"


def names_of(library: str) -> set[str]:
    """The names a library goes by: its own, the KIP-511 one (``SELF_NAMES``), and the KIP-511 names its
    clients sent in the table's recording (confluent-kafka's ``confluent-kafka-python``)."""
    from kproto.analyze import client_recordings as R

    return {library, SELF_NAMES.get(library, library)} | {
        software[0] for run in R.RUNS if run[0] == library for _id, _order, software, _n in run[10] if software
    }


def _number(text: str) -> tuple[int, ...] | None:
    """The first dotted release number in ``text`` ("v1.45.0", "2.11.1-rdkafka-2.11.1"); None when it has none."""
    match = re.search(r"\d+(?:\.\d+)+|\d+", text)
    return tuple(int(p) for p in match.group(0).split(".")) if match else None


def judge(client: tuple, kip511: bool) -> dict:
    """The fingerprint's verdict on one recorded client, through kproto.analyze.fingerprint.classify_row (what the
    ``clients`` table shows); ``kip511`` False: its KIP-511 name and version withheld (the wire alone)."""
    from kproto import versions as kv
    from kproto.analyze import fingerprint as FP

    client_id, order, software, handshakes = client
    labels = [f"{kv.api_name(key)} v{version}" for key, version in order]  # the api_order column's labels
    name, version = software if kip511 and software else (None, None)
    row = FP.classify_row(client_id, labels, name, version, handshakes)
    named = row["likely_software"]
    return {
        "named": UNKNOWN if named is None or named.lower() == UNKNOWN else named,
        "versions": row["likely_versions"],
        "confidence": row["fingerprint_confidence"],
    }


def heldout_score(runs, kip511: bool = True, outside=OUTSIDE) -> dict:
    """Every held-out client judged: the figures of issue 37 over the table's libraries, and the verdicts
    on the software outside the table (``outside``), which must be ``unknown`` (or its own name, or with
    ``kip511`` the KIP-511 name it gave itself: that is no misnaming). A version range is right by
    kproto.analyze.fingerprint.release_in_versions, the rule kproto.analyze.fingerprint_scoring.evaluate applies too."""
    from kproto.analyze import fingerprint as FP

    confusion: dict[str, dict[str, int]] = {}
    per_library: dict[str, list[int]] = {}  # library -> [clients, right library, right range]
    wrong_high, outside_named = [], []
    for library, release, pin, broker, *_rest, clients in runs:
        for client in clients:
            verdict = judge(client, kip511)
            row = confusion.setdefault(library, {})
            row[verdict["named"]] = row.get(verdict["named"], 0) + 1
            if library in outside:
                own = {library} | ({client[2][0]} if kip511 and client[2] else set())  # its own name is no misnaming
                if verdict["named"] not in {UNKNOWN} | own:
                    outside_named.append((library, broker, client[0], verdict["named"], verdict["confidence"]))
                continue
            right = verdict["named"] in names_of(library)
            counts = per_library.setdefault(library, [0, 0, 0])
            counts[0] += 1
            counts[1] += right
            counts[2] += right and FP.release_in_versions(verdict["versions"], release)
            if not right and verdict["named"] != UNKNOWN and verdict["confidence"] == "high":
                wrong_high.append((library, release, pin, broker, client[0], verdict["named"], verdict["versions"]))
    total = [sum(c[i] for c in per_library.values()) for i in range(3)]
    return {
        "clients": total[0],
        "right_library": total[1],
        "right_range": total[2],
        "per_library": per_library,
        "confusion": confusion,
        "wrong_high": wrong_high,
        "outside_named": outside_named,
    }


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / max(whole, 1):.1f} %"


def heldout_markdown(runs, outside=OUTSIDE) -> str:
    """The held-out evaluation for docs/analyze.md: per view (KIP-511 first, the wire alone) the confusion
    table (true library per row, named per column, ``unknown`` last) and the figures; then the version-range
    accuracy per library in both views."""
    scores = {kip511: heldout_score(runs, kip511, outside) for kip511 in (True, False)}
    parts = []
    for kip511, title in (
        (True, "As the `clients` table names them (a KIP-511 name first):"),
        (False, "By the fingerprint alone (KIP-511 names withheld):"),
    ):
        score = scores[kip511]
        named = sorted({n for row in score["confusion"].values() for n in row} - {UNKNOWN}) + [UNKNOWN]
        lines = [title, "", "| true \\ named | " + " | ".join(named) + " |", "|---" * (len(named) + 1) + "|"]
        for library in sorted(score["confusion"]):
            label = f"{library} (outside the table)" if library in outside else library
            lines.append(f"| {label} | " + " | ".join(str(score["confusion"][library].get(n, 0)) for n in named) + " |")
        total = score["clients"]
        lines += [
            "",
            f"Right library: {score['right_library']} of {total} ({_percent(score['right_library'], total)}); "
            f"right version range: {score['right_range']} of {total} ({_percent(score['right_range'], total)}). "
            "Wrong library with `high` confidence: "
            + (", ".join(sorted({f"{w[0]} {w[1]} named {w[5]}" for w in score["wrong_high"]})) or "none")
            + ". Software outside the table not named `unknown`: "
            + (", ".join(sorted({f"{o[0]} named {o[3]} ({o[4]})" for o in score["outside_named"]})) or "none")
            + ".",
        ]
        parts.append("\n".join(lines) + "\n")
    releases: dict[str, set[str]] = {}
    for library, release, pin, *_ in runs:
        if library not in outside:
            releases.setdefault(library, set()).add(release + (f" (pin {pin})" if pin else ""))
    lines = [
        "Version-range accuracy per library (right range / clients; a range is right when the true release "
        "lies within what `likely_versions` says: after its `after` release and before its `before` one, "
        "both exclusive; a KIP-511 version when it is the true release):",
        "",
        "| library | held-out releases | clients | right library (KIP-511 first) | right range (KIP-511 first) "
        "| right library (wire alone) | right range (wire alone) |",
        "|---" * 7 + "|",
    ]
    for library in sorted(releases):
        first, alone = scores[True]["per_library"][library], scores[False]["per_library"][library]
        lines.append(
            f"| {library} | {', '.join(sorted(releases[library], key=lambda r: (_number(r) or (), r)))} "
            f"| {first[0]} | {first[1]} | {first[2]} | {alone[1]} | {alone[2]} |"
        )
    parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def write_heldout_docs(runs, doc: Path = ROOT / "docs" / "analyze.md") -> None:
    """Replace the held-out section of docs/analyze.md (between its two markers) with ``heldout_markdown``."""
    text = doc.read_text(encoding="utf-8")
    start, end = text.index(HELD_OUT_DOC_BEGIN) + len(HELD_OUT_DOC_BEGIN), text.index(HELD_OUT_DOC_END)
    doc.write_text(text[:start] + "\n\n" + heldout_markdown(runs) + "\n" + text[end:], encoding="utf-8")
    print(f"wrote the held-out evaluation into {doc}")


def refresh(out: Path, held_out: bool = False) -> int:
    """The recording's wire facts read again from its cached captures; steps and logs kept."""
    import runpy

    namespace = runpy.run_path(str(out))
    captures = HELD_OUT / "captures" if held_out else CAPTURES
    rows = []
    for row in namespace["RUNS"]:
        library, release, pin, broker = row[:4]
        slug = Client(library, release, ()).slug
        pcap = captures / broker / f"{slug}{'-pinned' if pin else ''}.pcap"
        facts = wire_facts(pcap, broker_port(pcap))
        rows.append(
            as_row(
                {
                    "library": library,
                    "release": release,
                    "pin": pin,
                    "broker": broker,
                    "works": row[4],
                    "steps": row[5],
                    "log": row[6],
                    **facts,
                }
            )
        )
    stamp = re.search(r"on (\d{4}-\d{2}-\d{2})", out.read_text()).group(1)
    out.write_text(data_module(rows, namespace["NOT_RECORDED"], stamp, held_out))
    print(f"wrote {out} ({len(rows)} runs, wire facts from {captures})")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--kcat"]:
        bootstrap, prefix, topic, count, *pin = argv[1:]
        return 1 if kcat_run(bootstrap, prefix, topic, int(count), pin[0] if pin else "") else 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--brokers",
        nargs="+",
        help=f"broker releases (default: {' '.join(BROKERS)}; with --held-out {' '.join(HELD_OUT_BROKERS)})",
    )
    parser.add_argument("--only", nargs="+", help="libraries or client slugs; prints, writes no file but with --append")
    parser.add_argument(
        "--append",
        action="store_true",
        help="keep the runs of the existing file that this recording does not run again",
    )
    parser.add_argument(
        "--refresh",
        action="store_true",
        help="read the wire facts again from the cached captures (after a change to wire_facts)",
    )
    parser.add_argument(
        "--tables",
        action="store_true",
        help="print the truth table and the current fingerprint's confusion from the recording",
    )
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="the held-out evaluation set (scripts/install-clients.sh --held-out) into "
        "tests/client_heldout_recordings.py; with --tables / --docs, its evaluation",
    )
    parser.add_argument(
        "--docs",
        action="store_true",
        help="with --held-out: write the evaluation of the committed recording into docs/analyze.md",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="the data file (default: kproto/analyze/client_recordings.py; with "
        "--held-out tests/client_heldout_recordings.py)",
    )
    args = parser.parse_args(argv)
    args.brokers = args.brokers or (HELD_OUT_BROKERS if args.held_out else BROKERS)
    args.out = args.out or (HELD_OUT_OUT if args.held_out else ROOT / "kproto" / "client_recordings.py")
    started = time.monotonic()
    if args.refresh:
        return refresh(args.out, args.held_out)
    if args.held_out and (args.tables or args.docs):
        import runpy

        runs = runpy.run_path(str(args.out))["RUNS"]
        if args.docs:
            write_heldout_docs(runs)
        else:
            print(heldout_markdown(runs))
        return 0
    if args.tables:
        from kproto.analyze import client_recordings as R

        print(truth_markdown(R.RUNS))
        print(confusion_text(R.RUNS))
        return 0
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")

    kept: list[tuple] = []
    if args.append and args.out.exists():
        import runpy

        kept = list(runpy.run_path(str(args.out))["RUNS"])

    def save(runs: list[dict], failed: dict[str, str]) -> None:
        if not args.only or args.append:
            args.out.write_text(data_module(merged(kept, [as_row(r) for r in runs]), failed, stamp, args.held_out))

    runs, failed = record(tuple(args.brokers), args.only, save, args.held_out)
    if args.only and not args.append:
        return 0
    print(f"wrote {args.out} ({len(runs)} runs, {time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Record real client libraries against real Kafka brokers: their wire facts and whether they work (issue 37).

    scripts/install-clients.sh                      # the clients, into the cache (once)
    .venv/bin/python tools/record_clients.py        # every installed client x every broker in BROKERS
    .venv/bin/python tools/record_clients.py --brokers 4.0.2 --only kafkajs   # a part, for a look (no file)

Every client release scripts/install-clients.sh installed (the cache's ``.ok`` directories;
its ``.failed`` ones are listed with their reason) runs its driver from tools/clients/
(produce, consume in a group and commit, an admin call, produce under the default client.id),
once as it comes and once more with its library's version pin where it has one (``PINS``),
against a real single-node broker of each release in ``BROKERS`` (tools/kafka_broker.py,
one broker alive at a time). Each run is captured with tcpdump on the loopback interface
into the cache (``clients/captures/``, never the tree) and passed through the pipeline's
own steps: kproto.capture's reader for the frames and the connections, the worker and
combine steps for the ``clients`` table rows (exactly what the report's fingerprint sees).

Written to kproto/client_recordings.py: per run, the driver's step outcomes and the tail
of the client's own output (its error log), the broker's answer (requests it never answered,
connections it closed, ApiVersions error codes), and per client the client.id, the KIP-511
name and version, the ApiVersions requests per connection and the (API, version) pairs in
order of first use. The KIP-896 truth table (docs/analyze.md) is read from those runs.
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

CACHE = Path(os.environ.get("KPROTO_CACHE_DIR", Path.home() / ".cache" / "kproto")) / "clients"
CAPTURES = CACHE / "captures"
DRIVERS = ROOT / "tools" / "clients"
BROKERS = ("3.9.2", "4.0.2", "4.4.0")
RUN_SECONDS = 120       # one driver run: four steps of at most ~20 s each, and the JVM's start
MESSAGES = 5
OUTPUT_TAIL = 400       # characters of the client's own output (not its STEP lines) kept per run
# Each library's version setting as old deployments set it (the "pin"), passed to its driver.
PINS = {
    "kafka-python": "0.10.1",      # api_version=(0, 10, 1)
    "aiokafka": "0.10.1",          # api_version="0.10.1"
    "confluent-kafka": "0.10.0",   # api.version.request=false, broker.version.fallback=0.10.0
    "kcat": "0.10.0",              # the same librdkafka settings, as -X options
    "sarama": "0.10.2.0",          # Config.Version (consumer groups need 0.10.2 at least)
    "franz-go": "0.10.1",          # kgo.MaxVersions(kversion.V0_10_1())
}


@dataclass(frozen=True)
class Client:
    library: str
    release: str
    command: tuple[str, ...]        # the driver, before BOOTSTRAP PREFIX TOPIC COUNT [PIN]
    env: tuple[tuple[str, str], ...] = ()

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", f"{self.library}-{self.release}".lower()).strip("-")


# ---------------------------------------------------------------- the installed clients
GO_LIBRARIES = {"twmb_franz-go": "franz-go", "IBM_sarama": "sarama", "Shopify_sarama": "sarama",
                "segmentio_kafka-go": "kafka-go"}


def installed() -> tuple[list[Client], dict[str, str]]:
    """The clients scripts/install-clients.sh made ready, and those it could not, with why."""
    clients: list[Client] = []
    failed: dict[str, str] = {}

    def each(folder: str):
        for path in sorted((CACHE / folder).glob("*")) if (CACHE / folder).is_dir() else ():
            if (path / ".failed").exists():
                failed[f"{folder}/{path.name}"] = (path / ".failed").read_text().strip()
            elif (path / ".ok").exists():
                yield path

    for path in each("java"):
        clients.append(Client("kafka-clients", path.name, (
            "java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp", f"{path / 'classes'}:{path / 'lib'}/*", "ClientDriver")))
    for path in each("python"):
        library, _, release = path.name.rpartition("-")
        clients.append(Client(library, release, (str(path / "bin" / "python"),
                                                 str(DRIVERS / "python_driver.py"), library)))
    for path in each("go"):
        module, _, release = path.name.rpartition("-")
        label = release if not module.startswith("Shopify") else f"{release} (Shopify)"
        clients.append(Client(GO_LIBRARIES[module], label, (str(path / "driver"),)))
    for path in each("node"):
        clients.append(Client("kafkajs", path.name.rpartition("-")[2],
                              ("node", str(DRIVERS / "node" / "driver.js")),
                              (("NODE_PATH", str(path / "node_modules")),)))
    kcat = CACHE / "kcat"
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
        ("group", ["-G", f"{prefix}-readers", "-X", f"client.id={prefix}-group", "-X", "auto.offset.reset=earliest",
                   "-c", str(count), "-e", topic], None),
        ("admin", ["-L", "-X", f"client.id={prefix}-admin"], None),
        ("default-id-producer", ["-P", "-t", topic], records),
    ]
    failed = 0
    for label, args, stdin in steps:
        started = time.monotonic()
        try:
            done = subprocess.run(["kcat", "-b", bootstrap, "-m", "10", *options, *args], input=stdin,
                                  capture_output=True, timeout=20)
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
        request = M.CreateTopicsRequest(topics=[M.CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1)], timeout_ms=10000)
        exchange(kproto.encode_request(request, version=version, correlation_id=7, client_id="kproto-recorder",
                                       size_prefixed=True))


def capture_run(broker, client: Client, pin: str | None, pcap: Path) -> tuple[str, float]:
    """Run the client's driver under tcpdump; (its output, seconds)."""
    prefix = f"kp-{client.slug}{'-pin' if pin else ''}"
    topic = f"rec-{client.slug}{'-pin' if pin else ''}"
    create_topic(broker, topic)
    pcap.parent.mkdir(parents=True, exist_ok=True)
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", str(pcap),
                             f"tcp port {broker.plaintext_port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert dump.stderr is not None
    dump.stderr.readline()        # "listening on lo ...": the capture runs
    command = [*client.command, broker.bootstrap, prefix, topic, str(MESSAGES), *([pin] if pin else [])]
    env = dict(os.environ, **dict(client.env), PYTHONPATH="")
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_SECONDS, env=env,
                              errors="replace")
        output = done.stdout + done.stderr
    except subprocess.TimeoutExpired as timeout:
        output = ((timeout.stdout or b"").decode(errors="replace") if isinstance(timeout.stdout, bytes)
                  else (timeout.stdout or "")) + f"\nRUN TIMED OUT after {RUN_SECONDS}s"
    seconds = time.monotonic() - started
    time.sleep(0.5)
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

    from kproto import fingerprint as FP
    from kproto.capture import CaptureReader
    from kproto.spark import combine as C
    from kproto.spark import planning as P
    from kproto.spark import worker as W

    parts = pa.Table.from_batches(
        [b for split in P.plan_file(str(pcap), 0) for b in W.process_split(split, broker_ports=(port,))],
        schema=W.PARTS_SCHEMA)
    clients = [{"client_id": c["client_id"], "order": [tuple(p) for p in FP.api_pairs(c["api_order"])],
                "software": (c["client_software_name"], c["client_software_version"])
                if c["client_software_name"] else None,
                "handshakes": c["api_versions_per_connection"]}
               for c in C.combine(parts, fingerprint=False)["clients"].to_pylist()]
    # The broker's side, from the frames: requests in order per connection, responses pair up in order.
    requests: dict[int, list[tuple[int, int]]] = {}
    answered: dict[int, int] = {}
    api_versions_errors: set[int] = set()
    reader = CaptureReader(str(pcap), broker_ports=[port])
    pending_api_versions: dict[int, list[int]] = {}
    for batch in reader:
        for conn, direction, sequence, payload in zip(*(batch.column(n).to_pylist() for n in
                                                        ("connection_id", "direction", "sequence", "payload"))):
            if direction == 0 and len(payload) >= 4:
                pair = (int.from_bytes(payload[0:2], "big", signed=True), int.from_bytes(payload[2:4], "big"))
                requests.setdefault(conn, []).append(pair)
                if pair[0] == 18:
                    pending_api_versions.setdefault(conn, []).append(sequence)
            elif direction == 1:
                answered[conn] = answered.get(conn, 0) + 1
                # ApiVersions responses keep header v0 (KIP-511): the error code follows the correlation id.
                if sequence in pending_api_versions.get(conn, ()) and len(payload) >= 6:
                    api_versions_errors.add(int.from_bytes(payload[4:6], "big", signed=True))
    # A connection that ended with requests still unanswered: the broker closed it on them (the clients
    # here all wait for their answers; the capture cannot tell which side sent the FIN first).
    ended = {row["connection_id"] for row in reader.connections().to_pylist() if row["closed_by"]}
    cut = {conn for conn, sent in requests.items() if conn in ended and len(sent) > answered.get(conn, 0)}
    unanswered = sorted({pair for conn in cut for pair in requests[conn][answered.get(conn, 0):]})
    return {"clients": clients, "unanswered": unanswered, "closed_unanswered": len(cut),
            "api_versions_errors": sorted(api_versions_errors - {0})}


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
    if "RUN TIMED OUT" in output:
        steps.setdefault("run", "FAILED the driver did not finish in time")
    return steps, " | ".join(rest)[-OUTPUT_TAIL:]


def record(releases: tuple[str, ...], only: list[str] | None,
           save=lambda runs, failed: None) -> tuple[list[dict], dict[str, str]]:
    """Every run; ``save`` is called after each broker with the runs so far (a cut recording keeps them)."""
    import kafka_broker

    clients, failed = installed()
    if only:
        clients = [c for c in clients if c.library in only or c.slug in only]
    runs = []
    for release in releases:
        print(f"broker {release}: starting", flush=True)
        broker = kafka_broker.start(release)
        try:
            for client in clients:
                for pin in (None, PINS.get(client.library)) if client.library in PINS else (None,):
                    pcap = CAPTURES / release / f"{client.slug}{'-pinned' if pin else ''}.pcap"
                    output, seconds = capture_run(broker, client, pin, pcap)
                    steps, log = summarise(output)
                    facts = wire_facts(pcap, broker.plaintext_port)
                    run = {"library": client.library, "release": client.release, "pin": pin, "broker": release,
                           "works": bool(steps) and all(v == "ok" for v in steps.values()), "steps": steps,
                           "log": log, "prefix": f"kp-{client.slug}", **facts}
                    runs.append(run)
                    print(f"  {client.library} {client.release}{' pin ' + pin if pin else ''}: "
                          f"{'works' if run['works'] else 'FAILS'} ({seconds:.0f}s) {steps} "
                          f"unanswered={facts['unanswered']} av_errors={facts['api_versions_errors']}", flush=True)
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
the client's own log, (API, version) requests the broker never answered before closing the
connection, connections that ended with requests unanswered, ApiVersions error codes answered, clients).
Each client: (client.id, (API, version) pairs in order of first use, KIP-511 (name, version)
or None, the most ApiVersions requests on one connection).
"""

# ruff: noqa: E501
'''


def data_module(runs: list[dict], failed: dict[str, str], stamp: str) -> str:
    lines = [HEADER.format(stamp=stamp), f"BROKERS = {BROKERS!r}", f"PINS = {PINS!r}",
             f"NOT_RECORDED = {dict(sorted(failed.items()))!r}", "RUNS = ("]
    for r in runs:
        clients = tuple((c["client_id"], tuple(c["order"]), c["software"], c["handshakes"]) for c in r["clients"])
        lines.append(f"    ({r['library']!r}, {r['release']!r}, {r['pin']!r}, {r['broker']!r}, {r['works']!r},")
        lines.append(f"     {r['steps']!r},")
        lines.append(f"     {r['log']!r},")
        lines.append(f"     {tuple(r['unanswered'])!r}, {r['closed_unanswered']!r}, {tuple(r['api_versions_errors'])!r},")
        lines.append(f"     {clients!r}),")
    lines.append(")")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--kcat"]:
        bootstrap, prefix, topic, count, *pin = argv[1:]
        return 1 if kcat_run(bootstrap, prefix, topic, int(count), pin[0] if pin else "") else 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", nargs="+", default=BROKERS, help="broker releases (default: %(default)s)")
    parser.add_argument("--only", nargs="+", help="libraries or client slugs; prints, writes no file")
    parser.add_argument("--out", type=Path, default=ROOT / "kproto" / "client_recordings.py")
    args = parser.parse_args(argv)
    started = time.monotonic()
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")

    def save(runs: list[dict], failed: dict[str, str]) -> None:
        if not args.only:
            args.out.write_text(data_module(runs, failed, stamp))

    runs, failed = record(tuple(args.brokers), args.only, save)
    if args.only:
        return 0
    print(f"wrote {args.out} ({len(runs)} runs, {time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

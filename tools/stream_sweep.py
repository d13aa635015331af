"""Measure the stream layer on the captures operators really take (issue 35).

    PYTHONPATH=. .venv/bin/python tools/stream_sweep.py [--traffic FILE] [--impl c|py] [--no-tshark]
                                                        [--quick] [--json OUT] [--unknown-port]
                                                        [--only-starts]

Real client traffic (kafka-python producers, plain and gzip, a kafka-python
consumer fetching the records back, their metadata connections) is recorded once
by the fake broker (tools/fake_broker.py) and kept with the truth of every frame
(``--traffic``, default in the cache directory). From it the sweep builds captures
and reads each with kproto (what ``kproto dump`` sees: frames plus their status):

* start: a capture that starts at every packet of a consumer, a producer and a
  metadata connection (no SYN), for two segment sizes, so starts fall at every
  kind of offset: inside headers, inside record data;
* loss: the whole traffic with 0.1%, 1% and 5% of its data segments dropped
  (several seeds);
* snaplen: the whole traffic with packets cut at 96, 128 and 256 bytes;
* late start + loss: 40 random start packets of each of those connections, with 3% of the
  data segments after the start dropped;
* late start + snaplen: 40 random start packets of each, packets cut at 128 bytes.

Per class it counts the fully captured frames (every byte in the capture) and how
many of them kproto recovers byte for byte, the garbage frames it emits (not a
frame put on the wire) and how many of those have status OK; for snaplen, the
frames whose header was captured and the headers recovered. With tshark on PATH
(scripts/install-capture-tools.sh, or apt-get install tshark) the same files are
given to tshark and its recovered frames are counted the same way.

``--unknown-port`` reads the captures without broker ports (as ``kproto dump`` reads Kafka
on a port other than 9092): every connection must then prove Kafka by its frames.
``--only-starts`` runs the start sweep alone.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: the kproto measured is the one it names
sys.path.insert(0, str(ROOT / "tools"))

from kproto._common.cache import cache_root  # noqa: E402  (the one cache rule)
from tests.pcapwriter import Conversation, PcapWriter  # noqa: E402

CACHE = cache_root() / "stream_sweep"
BROKER = ("127.0.0.1", 9092)


# ---------------------------------------------------------------- traffic
def make_traffic(path: Path) -> None:
    """Record real clients against the fake broker; write connections and frames (JSON)."""
    import logging

    from fake_broker import FakeBroker, TrafficLog
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    logging.basicConfig(level=logging.CRITICAL)
    log = TrafficLog()
    broker = FakeBroker(log, release="3.9", logical_port=9092).start()

    def value(name: str, i: int) -> bytes:
        return (
            f'{{"source":"{name}","n":{i},"amount":{i * 7 % 1000},"note":"'
            + "".join(chr(97 + (i * j) % 26) for j in range(40 + i * 13 % 300))
            + '"}'
        ).encode()

    # Producers and consumers live side by side, round after round, so the consumers'
    # connections carry many Fetch responses with record batches (plain and gzip).
    streams = []
    for topic, name, config in (("orders", "orders", {}), ("payments", "payments", {"compression_type": "gzip"})):
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap, client_id=f"{name}-producer", linger_ms=5, batch_size=4096, **config
        )
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            client_id=f"{name}-consumer",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=20,
        )
        consumer.assign([TopicPartition(topic, 0)])
        streams.append((topic, name, producer, consumer))
    sent = 0
    for _round in range(12):
        for topic, name, producer, _consumer in streams:
            for i in range(sent, sent + 30):
                producer.send(topic, value=value(name, i), key=f"key-{i % 17}".encode())
            producer.flush(10)
        sent += 30
        for *_, consumer in streams:
            seen = 0
            deadline = time.monotonic() + 3
            while seen < 30 and time.monotonic() < deadline:
                seen += sum(len(batch) for batch in consumer.poll(100).values())
    for *_, producer, consumer in streams:
        producer.close(5)
        consumer.close()
    time.sleep(0.3)
    broker.stop()
    data = {
        "connections": [
            {"id": c.conn_id, "client": list(c.client), "opened": c.opened_ns, "closed": c.closed_ns}
            for c in log.connections
        ],
        "events": [[ts, conn, sender, base64.b64encode(frame).decode()] for ts, conn, sender, frame in log.events],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


class Traffic:
    """Connections and their frames in the order they were sent."""

    def __init__(self, path: Path) -> None:
        if path.suffix in (".pcap", ".pcapng"):
            self._from_capture(path)
            return
        data = json.loads(path.read_text())
        self.clients = {c["id"]: tuple(c["client"]) for c in data["connections"]}
        self.events = [(ts, conn, sender, base64.b64decode(frame)) for ts, conn, sender, frame in data["events"]]
        self.events.sort(key=lambda e: e[0])

    def _from_capture(self, path: Path) -> None:
        """The truth from a clean capture (every handshake and segment in it, as
        samples/sample.pcap): its frames as kproto reads them."""
        from kproto.arrow.capture import read_capture

        frames, connections, _ = read_capture(str(path))
        self.clients = {row["connection_id"]: (row["client_ip"], row["client_port"]) for row in connections.to_pylist()}
        self.events = [
            (ts, conn, "client" if direction == 0 else "server", struct.pack(">i", size) + payload)
            for ts, conn, direction, size, payload in zip(
                frames["ts_first_ns"].to_pylist(),
                frames["connection_id"].to_pylist(),
                frames["direction"].to_pylist(),
                frames["size"].to_pylist(),
                frames["payload"].to_pylist(),
            )
        ]
        self.events.sort(key=lambda e: e[0])

    def frames_of(self, conn: int) -> list[tuple[str, bytes]]:
        return [(sender, frame) for _, c, sender, frame in self.events if c == conn]

    def pick(self) -> dict[str, int]:
        """A plain consumer, a compressed consumer, a producer and a metadata connection."""
        by_conn: dict[int, Counter] = defaultdict(Counter)
        bytes_of: Counter = Counter()
        for _, conn, sender, frame in self.events:
            if sender == "client":
                by_conn[conn][struct.unpack_from(">h", frame, 4)[0]] += 1
            bytes_of[conn] += len(frame)
        fetchers = sorted((c for c in by_conn if by_conn[c][1]), key=lambda c: -bytes_of[c])
        producers = sorted((c for c in by_conn if by_conn[c][0]), key=lambda c: -bytes_of[c])
        metadata = sorted(
            (c for c in by_conn if by_conn[c][3] and not by_conn[c][0] and not by_conn[c][1]),
            key=lambda c: -by_conn[c][3],
        )
        picked = {
            "consumer": fetchers[0],
            "consumer-gzip": fetchers[1] if len(fetchers) > 1 else fetchers[0],
            "producer": producers[0],
            "metadata": metadata[0],
        }
        return picked


# ---------------------------------------------------------------- captures
class Wire:
    """The packets of some connections with the truth of each frame's bytes."""

    def __init__(self) -> None:
        self.packets: list[tuple[int, int, str, int, bytes, bytes]] = []  # ts, conn, sender, stream pos, payload, frame
        # truth per (conn, sender): list of (stream start, frame bytes)
        self.frames: dict[tuple[int, str], list[tuple[int, bytes]]] = defaultdict(list)
        self.conversations: dict[int, Conversation] = {}

    @classmethod
    def build(cls, traffic: Traffic, conns, segment: int, handshake: bool) -> Wire:
        wire = cls()
        pos: dict[tuple[int, str], int] = defaultdict(int)
        step = 0
        for conn in conns:
            client = traffic.clients[conn]
            conv = Conversation(
                client=(client[0], client[1]),
                server=BROKER,
                client_isn=1000 + 7919 * conn,
                server_isn=500000 + 104729 * conn,
            )
            wire.conversations[conn] = conv
            if handshake:
                for p in conv.handshake():
                    wire.packets.append((step, conn, "", -1, b"", p.data))
                    step += 1
        for _, conn, sender, frame in traffic.events:
            if conn not in wire.conversations:
                continue
            key = (conn, sender)
            wire.frames[key].append((pos[key], frame))
            for p in wire.conversations[conn].data(sender, frame, [segment]):
                wire.packets.append((step, conn, sender, pos[key], p.payload, p.data))
                pos[key] += len(p.payload)
                step += 1
        for conn, conv in wire.conversations.items():
            for p in conv.close():
                wire.packets.append((step, conn, "", -1, b"", p.data))
                step += 1
        return wire

    def pcap(self, keep, snaplen: int = 262144) -> bytes:
        writer = PcapWriter(snaplen=snaplen)
        for i, packet in enumerate(self.packets):
            if keep(i, packet):
                writer.add(1_700_000_000_000_000_000 + packet[0] * 1000, packet[5])
        return writer.getvalue()


def captured_ranges(wire: Wire, keep, payload_limit=None) -> dict[tuple[int, str], list[tuple[int, int]]]:
    """Per (conn, sender): the stream byte ranges the capture holds."""
    ranges: dict = defaultdict(list)
    for i, packet in enumerate(wire.packets):
        _, conn, sender, pos, payload, _ = packet
        if pos < 0 or not keep(i, packet):
            continue
        n = len(payload) if payload_limit is None else max(0, min(len(payload), payload_limit))
        if n:
            ranges[(conn, sender)].append((pos, pos + n))
    return ranges


def covered(ranges, start: int, end: int) -> bool:
    cursor = start
    for lo, hi in ranges:  # sorted by lo
        if lo > cursor:
            break
        cursor = max(cursor, hi)
        if cursor >= end:
            return True
    return cursor >= end


def request_header_len(frame: bytes) -> int:
    """Bytes of a request frame up to the end of its client id (size prefix included)."""
    if len(frame) < 14:
        return len(frame)
    n = struct.unpack_from(">h", frame, 12)[0]
    return 14 + max(0, n)


# ---------------------------------------------------------------- reading
def kproto_rows(path: str, impl: str, broker_ports=(BROKER[1],)):
    """(client port, direction, payload, status, api key, version, corr, client id, size) per frame,
    as ``kproto dump`` decodes them (responses paired with their requests). ``broker_ports=()``:
    the broker's port is not known, so its connections must confirm Kafka by their frames."""
    import kproto.analyze.dump as kd
    from kproto.arrow.capture import CaptureReader

    reader = CaptureReader(path, on_error="keep", implementation=impl, broker_ports=broker_ports)
    rows = []
    for frames, decoded, client_id in kd.record_batches(reader, records="summary"):
        for i in range(frames.num_rows):
            rows.append(
                [
                    frames["connection_id"][i].as_py(),
                    frames["direction"][i].as_py(),
                    frames["payload"][i].as_py(),
                    kd.STATUS_NAMES[decoded["status"][i].as_py()],
                    decoded["api_key"][i].as_py(),
                    decoded["api_version"][i].as_py(),
                    decoded["correlation_id"][i].as_py(),
                    client_id[i],
                    frames["size"][i].as_py(),
                ]
            )
    table = reader.connections()
    ports = {
        cid: (cport if sport == BROKER[1] else -1)
        for cid, cport, sport in zip(
            table["connection_id"].to_pylist(), table["client_port"].to_pylist(), table["server_port"].to_pylist()
        )
    }
    for row in rows:
        row[0] = ports.get(row[0], -1)
    return rows


def tshark_rows(path: str):
    """(client port, direction, length, correlation id) of each Kafka PDU tshark decodes."""
    out = subprocess.run(
        [
            "tshark",
            "-r",
            path,
            "-o",
            "tcp.check_checksum:FALSE",
            "-d",
            "tcp.port==9092,kafka",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.dstport",
            "-e",
            "kafka.len",
            "-e",
            "kafka.correlation_id",
            "-Y",
            "kafka",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    rows = []
    for line in out.splitlines():
        src, dst, lens, corrs = (line.split("|") + [""] * 4)[:4]
        direction = 0 if dst == "9092" else 1
        port = int(src) if direction == 0 else int(dst)
        lens = [int(x) for x in lens.split(",") if x]
        corrs = [int(x) for x in corrs.split(",") if x]
        for length, corr in zip(lens, corrs):
            rows.append((port, direction, length, corr))
    return rows


# ---------------------------------------------------------------- scoring
class Score(Counter):
    def add_case(
        self, wire: Wire, keep, path: str, impl: str, use_tshark: bool, snaplen_payload=None, broker_ports=(BROKER[1],)
    ) -> None:
        ranges = {k: sorted(v) for k, v in captured_ranges(wire, keep, snaplen_payload).items()}
        ports = {conn: wire.conversations[conn].client[1] for conn in wire.conversations}
        full: dict[tuple[int, int], Counter] = defaultdict(Counter)  # (port, direction) -> payloads
        headers: dict[tuple[int, int], Counter] = defaultdict(Counter)  # -> (corr, key, version)
        for (conn, sender), frames in wire.frames.items():
            direction = 0 if sender == "client" else 1
            held = ranges.get((conn, sender), [])
            for start, frame in frames:
                if covered(held, start, start + len(frame)):
                    full[(ports[conn], direction)][frame[4:]] += 1
                    self["frames fully captured"] += 1
                if direction == 0 and covered(held, start, start + request_header_len(frame)):
                    key, version, corr = struct.unpack_from(">hhi", frame, 4)
                    headers[(ports[conn], 0)][(corr, key, version)] += 1
                    self["request headers captured"] += 1
        rows = kproto_rows(path, impl, broker_ports)
        matched_full = {k: Counter(v) for k, v in full.items()}
        matched_head = {k: Counter(v) for k, v in headers.items()}
        truth_all = defaultdict(set)
        for (conn, sender), frames in wire.frames.items():
            for _, frame in frames:
                truth_all[(ports[conn], 0 if sender == "client" else 1)].add(frame[4:])
        for port, direction, payload, status, key, version, corr, _client, size in rows:
            k = (port, direction)
            if matched_full.get(k, Counter())[payload] > 0:
                matched_full[k][payload] -= 1
                self["fully captured recovered"] += 1
            elif payload in truth_all[k]:
                self["frames recovered again"] += 1
            elif not any(p.startswith(payload) and len(p) == size for p in truth_all[k]):
                self["garbage frames"] += 1
                if status == "OK":
                    self["garbage frames with status OK"] += 1
            if direction == 0 and matched_head.get(k, Counter())[(corr, key, version)] > 0:
                matched_head[k][(corr, key, version)] -= 1
                self["request headers recovered"] += 1
        if use_tshark:
            seen_full = {
                k: Counter((len(p) + 0, struct.unpack_from(">i", p, 4 if k[1] == 0 else 0)[0]) for p in v.elements())
                for k, v in full.items()
            }
            seen_head = {k: Counter(c for c, _, _ in v.elements()) for k, v in headers.items()}
            for port, direction, length, corr in tshark_rows(path):
                k = (port, direction)
                if seen_full.get(k, Counter())[(length, corr)] > 0:
                    seen_full[k][(length, corr)] -= 1
                    self["tshark fully captured recovered"] += 1
                if direction == 0 and seen_head.get(k, Counter())[corr] > 0:
                    seen_head[k][corr] -= 1
                    self["tshark request headers"] += 1
        self["cases"] += 1
        lost = self["frames fully captured"] - self["fully captured recovered"]
        self["cases losing fully captured frames"] = self.get("cases losing fully captured frames", 0) + (
            lost > self.get("_lost_before", 0)
        )
        self["_lost_before"] = lost


def run(args) -> dict:
    traffic_path = args.traffic
    if not traffic_path.exists():
        print(f"recording client traffic into {traffic_path} ...", file=sys.stderr)
        make_traffic(traffic_path)
    traffic = Traffic(traffic_path)
    picked = traffic.pick()
    use_tshark = not args.no_tshark and shutil.which("tshark") is not None
    if not args.no_tshark and not use_tshark:
        print("tshark not found: its columns are left out", file=sys.stderr)
    results: dict[str, Score] = {}
    tmp = tempfile.mkdtemp(prefix="stream_sweep_")
    path = os.path.join(tmp, "case.pcap")

    # --unknown-port: the broker's port is not given (as `kproto dump` on a port other than 9092)
    broker_ports = () if args.unknown_port else (BROKER[1],)

    def case(name: str, wire: Wire, keep, snaplen: int = 262144, tshark: bool = use_tshark) -> None:
        with open(path, "wb") as handle:
            handle.write(wire.pcap(keep, snaplen))
        limit = None if snaplen >= 262144 else snaplen - 54  # Ethernet + IPv4 + TCP headers
        results.setdefault(name, Score()).add_case(wire, keep, path, args.impl, tshark, limit, broker_ports)

    # start: every packet of each picked connection, two segment sizes
    for label, conn in picked.items():
        for segment in (1448, 1000):
            wire = Wire.build(traffic, [conn], segment, handshake=False)
            data_packets = [i for i, p in enumerate(wire.packets) if p[3] >= 0]
            starts = data_packets[:: args.stride]
            for start in starts:
                case(f"start {label}", wire, lambda i, p, s=start: i >= s, tshark=use_tshark and not args.quick)
    if args.only_starts:
        shutil.rmtree(tmp, ignore_errors=True)
        return {name: {k: v for k, v in score.items() if not k.startswith("_")} for name, score in results.items()}
    # loss and snaplen: the whole traffic
    all_conns = sorted(traffic.clients)
    wire = Wire.build(traffic, all_conns, 1448, handshake=True)
    for rate in (0.001, 0.01, 0.05):
        for seed in range(args.seeds):
            rng = random.Random(seed * 1000 + int(rate * 1000))
            dropped = {i for i, p in enumerate(wire.packets) if p[3] >= 0 and rng.random() < rate}
            case(f"loss {rate:.1%}", wire, lambda i, p, d=dropped: i not in d)
    for snaplen in (96, 128, 256):
        case(f"snaplen {snaplen}", wire, lambda i, p: True, snaplen=snaplen)

    def late_starts(segment: int, seed: int):
        """40 random start packets of each picked connection: (label, wire, its data packets, start, rng)."""
        for label, conn in picked.items():
            wire = Wire.build(traffic, [conn], segment, handshake=False)
            data_packets = [i for i, p in enumerate(wire.packets) if p[3] >= 0]
            rng = random.Random(seed)
            for _ in range(40):
                yield label, wire, data_packets, rng.choice(data_packets), rng

    # both at once: 3% of the data segments after the start lost (long-lived connections, a lossy host)
    for label, wire, data_packets, start, rng in late_starts(1000, 5):
        dropped = {i for i in data_packets if i > start and rng.random() < 0.03}
        case(f"late start + 3% loss {label}", wire, lambda i, p, s=start, d=dropped: i >= s and i not in d)
    # a late start with a short snap length: packets cut at 128 bytes
    for label, wire, _, start, _ in late_starts(1448, 7):
        case(f"late start + snaplen 128 {label}", wire, lambda i, p, s=start: i >= s, snaplen=128)
    shutil.rmtree(tmp, ignore_errors=True)
    return {name: {k: v for k, v in score.items() if not k.startswith("_")} for name, score in results.items()}


COLUMNS = (
    "cases",
    "frames fully captured",
    "fully captured recovered",
    "cases losing fully captured frames",
    "garbage frames",
    "garbage frames with status OK",
    "tshark fully captured recovered",
    "request headers captured",
    "request headers recovered",
    "tshark request headers",
)


def table(results: dict) -> str:
    lines = ["| class | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, score in results.items():
        lines.append(f"| {name} | " + " | ".join(str(score.get(c, 0)) for c in COLUMNS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--traffic",
        type=Path,
        default=CACHE / "traffic.json",
        help="recorded traffic (made on first use), or a clean capture such as samples/sample.pcap",
    )
    parser.add_argument("--impl", choices=("c", "py"), default="c")
    parser.add_argument("--no-tshark", action="store_true")
    parser.add_argument("--quick", action="store_true", help="no tshark on the start sweep")
    parser.add_argument("--stride", type=int, default=1, help="every n-th start packet")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--unknown-port",
        action="store_true",
        help="read without broker ports: every connection must confirm Kafka by its frames",
    )
    parser.add_argument("--only-starts", action="store_true", help="the start sweep alone")
    args = parser.parse_args(argv)
    results = run(args)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

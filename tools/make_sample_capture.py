"""Make samples/sample.pcap: real Kafka client libraries talking to kproto's fake brokers.

    .venv/bin/python tools/make_sample_capture.py [--out samples/sample.pcap] [--tcpdump]

Two fake brokers run on 127.0.0.1 (tools/fake_broker.py): one advertises what
Kafka 3.9 does, the other what Kafka 2.3 does (ApiVersions v0-2 only, so clients
that start at ApiVersions v3 go through the KIP-511 fallback). Then, one after
the other:

* confluent-kafka (librdkafka) producers to both brokers, and a consumer;
* kafka-python producers: one negotiating versions, one pinned to
  ``api_version=(0, 10, 1)`` sending Produce v2 and Metadata v1 - versions Kafka
  4.x removed - with acks=0; a consumer, and one pinned to 0.10.1 (Fetch v3);
* aiokafka, a producer and a consumer;
* kproto itself, announcing an invalid ClientSoftwareName (refused with
  INVALID_REQUEST) and then a valid one.

The brokers record every frame with its timestamp and connection; the recording
is written as a pcap with each broker shown on its logical address
(127.0.0.1:9092 for 3.9, 127.0.0.1:9093 for 2.3). ``--tcpdump`` writes what
tcpdump captured on the loopback instead (it needs tcpdump and the right to
capture; the real ports then show).

Needs: kafka-python, aiokafka, confluent-kafka (``pip install kafka-python aiokafka
confluent-kafka``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fake_broker import FakeBroker, TrafficLog  # noqa: E402


def _messages(prefix: str, count: int) -> list[bytes]:
    # Values of a few hundred bytes, compressible like real JSON events.
    return [
        (f'{{"source":"{prefix}","n":{i},"amount":{i * 7 % 1000},"note":"' + "x" * (50 + i * 13 % 400) + '"}').encode()
        for i in range(count)
    ]


# ---------------------------------------------------------------- the clients
def confluent_producer(bootstrap: str, topic: str, name: str, **config) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": name, "linger.ms": 5, **config})
    for value in _messages(name, 40):
        producer.produce(topic, value=value, key=b"k")
    producer.flush(10)


def confluent_consumer(bootstrap: str, topic: str, name: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": name,
            "group.id": "sample-readers",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen, deadline = 0, time.monotonic() + 3
    while seen < 40 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            seen += 1
    consumer.close()


def kafka_python_producer(bootstrap: str, topic: str, name: str, **config) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=name, linger_ms=5, **config)
    for value in _messages(name, 30):
        producer.send(topic, value=value, key=b"k")
    producer.flush(10)
    producer.close(5)


def kafka_python_consumer(bootstrap: str, topic: str, name: str, **config) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=name,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
        **config,
    )
    consumer.assign([TopicPartition(topic, 0)])
    deadline = time.monotonic() + 3
    seen = 0
    while seen < 30 and time.monotonic() < deadline:
        seen += sum(len(batch) for batch in consumer.poll(200).values())
    consumer.close()


def aiokafka_clients(bootstrap: str, topic: str, name: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=name, compression_type="gzip")
        await producer.start()
        try:
            for value in _messages(name, 25):
                await producer.send(topic, value=value)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id=name + "-consumer",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.getmany(timeout_ms=500)
        finally:
            await consumer.stop()

    asyncio.run(main())


def kproto_client(port: int) -> None:
    """kproto's own handshake: first an invalid ClientSoftwareName (the broker refuses it), then a valid one."""
    import kproto
    from kproto import versions as kv

    for correlation_id, software in enumerate((("kproto sample", "1.0 beta"), ("kproto-sample", "1.0.0"))):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            frame = kv.encode_api_versions_request(
                correlation_id=correlation_id,
                version=3,
                client_id="kproto-sample",
                client_software_name=software[0],
                client_software_version=software[1],
                allow_invalid=True,
                size_prefixed=True,
            )
            kv.socket_exchange(sock)(frame)
            metadata = kproto.messages.MetadataRequest(topics=None)
            request = kproto.encode_request(
                metadata, version=12, correlation_id=correlation_id + 10, client_id="kproto-sample", size_prefixed=True
            )
            kv.socket_exchange(sock)(request)


# ---------------------------------------------------------------- the run
def run_clients(modern: FakeBroker, old: FakeBroker) -> None:
    steps = [
        (
            "confluent-kafka producer -> 3.9",
            lambda: confluent_producer(modern.bootstrap, "orders", "checkout-service", **{"compression.type": "lz4"}),
        ),
        (
            "confluent-kafka producer -> 2.3 (KIP-511 fallback)",
            lambda: confluent_producer(old.bootstrap, "payments", "billing-legacy", **{"compression.type": "snappy"}),
        ),
        (
            "kafka-python producer -> 3.9",
            lambda: kafka_python_producer(modern.bootstrap, "payments", "payments-api", compression_type="gzip"),
        ),
        (
            "kafka-python producer pinned to 0.10.1 (Produce v2, acks=0)",
            lambda: kafka_python_producer(
                modern.bootstrap, "audit-log", "legacy-auditor", api_version=(0, 10, 1), acks=0
            ),
        ),
        ("aiokafka producer + consumer -> 3.9", lambda: aiokafka_clients(modern.bootstrap, "orders", "inventory-sync")),
        ("kafka-python consumer -> 3.9", lambda: kafka_python_consumer(modern.bootstrap, "payments", "reporting")),
        (
            "kafka-python consumer pinned to 0.10.1 (Fetch v3)",
            lambda: kafka_python_consumer(
                modern.bootstrap, "audit-log", "legacy-auditor-reader", api_version=(0, 10, 1)
            ),
        ),
        ("confluent-kafka consumer -> 3.9", lambda: confluent_consumer(modern.bootstrap, "orders", "fraud-detector")),
        ("kproto handshake with an invalid software name -> 3.9", lambda: kproto_client(modern.port)),
    ]
    for label, step in steps:
        started = time.monotonic()
        try:
            step()
            print(f"  {label}: {time.monotonic() - started:.1f}s")
        except Exception as exc:  # one client failing must not lose the others' traffic
            print(f"  {label}: FAILED ({type(exc).__name__}: {exc})")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("samples/sample.pcap"))
    parser.add_argument(
        "--tcpdump", action="store_true", help="capture with tcpdump on the loopback instead of the brokers' recording"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)  # the clients complain loudly about the fake brokers

    log = TrafficLog()
    modern = FakeBroker(log, release="3.9", logical_port=9092).start()
    old = FakeBroker(log, release="2.3", logical_port=9093).start()
    capture = None
    if args.tcpdump:
        import subprocess

        args.out.parent.mkdir(parents=True, exist_ok=True)
        capture = subprocess.Popen(
            [
                "tcpdump",
                "-i",
                "lo",
                "-s",
                "0",
                "--immediate-mode",
                "-U",
                "-w",
                str(args.out),
                f"tcp port {modern.port} or tcp port {old.port}",
            ],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)
    print(f"fake brokers: 3.9 on {modern.bootstrap}, 2.3 on {old.bootstrap}")
    run_clients(modern, old)
    time.sleep(0.3)
    modern.stop()
    old.stop()
    if capture is not None:
        capture.terminate()
        capture.wait(10)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_bytes(log.pcap())
    size = args.out.stat().st_size
    print(f"wrote {args.out}: {size} bytes, {len(log.connections)} connections, {len(log.events)} frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One scripted run of one Kafka client library, for tools/record_fingerprints.py.

    python fingerprint_driver.py LIBRARY BOOTSTRAP PREFIX TOPIC MESSAGES [--pinned]

Runs in the library's own virtual environment (it imports nothing from kproto
but for LIBRARY=kproto): connect and read metadata, produce MESSAGES messages,
consume them from an assigned partition, join a group (where the library has
groups), and produce once more under the library's default client.id. Each
step has its own client.id (PREFIX-producer, PREFIX-consumer, PREFIX-group) so
the recording tells the steps apart; every step is bounded in time, and one
step failing does not stop the next (the fake broker is not a real one).
``--pinned`` pins the library to ``api_version=(0, 10, 1)`` where it has such
an option (kafka-python, aiokafka), the way old deployments did.

It runs on Python 3.6 and later (old releases need old Pythons), so no newer syntax.
"""

import asyncio
import logging
import socket
import sys
import time

STEP_SECONDS = 3.0
GROUP_SECONDS = 7.0  # past the default 3 s heartbeat interval, so every group run heartbeats
PINNED = (0, 10, 1)


def _values(prefix: str, count: int) -> list:
    return [f'{{"from":"{prefix}","n":{i}}}'.encode() for i in range(count)]


# ---------------------------------------------------------------- kafka-python
def kafka_python(bootstrap: str, prefix: str, topic: str, count: int, pinned: bool) -> list:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    pin = {"api_version": PINNED} if pinned else {}

    def produce(**ids) -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **ids, **pin)
        for value in _values(prefix, count):
            producer.send(topic, value=value, key=b"k")
        producer.flush(STEP_SECONDS)
        producer.close(STEP_SECONDS)

    def consume() -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id=prefix + "-consumer",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
            **pin,
        )
        consumer.assign([TopicPartition(topic, 0)])
        deadline, seen = time.monotonic() + STEP_SECONDS, 0
        while seen < count and time.monotonic() < deadline:
            seen += sum(len(batch) for batch in consumer.poll(200).values())
        consumer.close()

    def group() -> None:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            client_id=prefix + "-group",
            group_id=prefix + "-readers",
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
            session_timeout_ms=10000,
            **pin,
        )
        deadline = time.monotonic() + GROUP_SECONDS
        while time.monotonic() < deadline:
            consumer.poll(200)
        consumer.close(autocommit=False)

    return [
        ("producer", lambda: produce(client_id=prefix + "-producer")),
        ("consumer", consume),
        ("group", group),
        ("default-id producer", produce),
    ]


# ---------------------------------------------------------------- aiokafka
def aiokafka(bootstrap: str, prefix: str, topic: str, count: int, pinned: bool) -> list:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    pin = {"api_version": ".".join(map(str, PINNED))} if pinned else {}

    async def produce(**ids) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **ids, **pin)
        await producer.start()
        try:
            for value in _values(prefix, count):
                await producer.send(topic, value=value, key=b"k")
            await producer.flush()
        finally:
            await producer.stop()

    async def consume(**options) -> None:
        consumer = AIOKafkaConsumer(
            *([topic] if "group_id" in options else []),
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
            **options,
            **pin,
        )
        await consumer.start()
        try:
            if "group_id" not in options:
                consumer.assign([TopicPartition(topic, 0)])
            deadline = time.monotonic() + (GROUP_SECONDS if "group_id" in options else STEP_SECONDS)
            while time.monotonic() < deadline:
                await consumer.getmany(timeout_ms=200)
        finally:
            await consumer.stop()

    def run(coroutine) -> None:
        asyncio.run(asyncio.wait_for(coroutine, GROUP_SECONDS * 2))

    return [
        ("producer", lambda: run(produce(client_id=prefix + "-producer"))),
        ("consumer", lambda: run(consume(client_id=prefix + "-consumer", enable_auto_commit=False))),
        ("group", lambda: run(consume(client_id=prefix + "-group", group_id=prefix + "-readers"))),
        ("default-id producer", lambda: run(produce())),
    ]


# ---------------------------------------------------------------- confluent-kafka
def confluent_kafka(bootstrap: str, prefix: str, topic: str, count: int, pinned: bool) -> list:
    from confluent_kafka import Consumer, Producer, TopicPartition

    def produce(**ids) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **ids})
        for value in _values(prefix, count):
            producer.produce(topic, value=value, key=b"k")
        producer.flush(STEP_SECONDS)

    def consume(client_id: str, subscribe: bool) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "group.id": prefix + "-readers",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 50,
            }
        )
        if subscribe:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + (GROUP_SECONDS if subscribe else STEP_SECONDS)
        while time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.close()

    return [
        ("producer", lambda: produce(**{"client.id": prefix + "-producer"})),
        ("consumer", lambda: consume(prefix + "-consumer", False)),
        ("group", lambda: consume(prefix + "-group", True)),
        ("default-id producer", produce),
    ]


# ---------------------------------------------------------------- kproto
def kproto_client(bootstrap: str, prefix: str, topic: str, count: int, pinned: bool) -> list:
    """kproto's own handshake (ApiVersions, KIP-511 name) and a Metadata request at the negotiated version."""
    import kproto
    from kproto import versions as kv

    host, port = bootstrap.rsplit(":", 1)

    def metadata(**ids) -> None:
        client_id = ids.get("client_id", "kproto")
        with socket.create_connection((host, int(port)), timeout=STEP_SECONDS) as sock:
            exchange = kv.socket_exchange(sock)
            result = kv.handshake(exchange, **ids)
            version = kv.negotiate(None, result.response)[3]
            request = kproto.messages.MetadataRequest(
                topics=[kproto.messages.MetadataRequest.MetadataRequestTopic(name=topic)]
            )
            exchange(
                kproto.encode_request(
                    request, version=version, correlation_id=100, client_id=client_id, size_prefixed=True
                )
            )

    return [("metadata", lambda: metadata(client_id=prefix + "-producer")), ("default-id metadata", metadata)]


LIBRARIES = {
    "kafka-python": kafka_python,
    "aiokafka": aiokafka,
    "confluent-kafka": confluent_kafka,
    "kproto": kproto_client,
}


def main(argv: list) -> int:
    library, bootstrap, prefix, topic, count = argv[:5]
    pinned = "--pinned" in argv[5:]
    logging.basicConfig(level=logging.CRITICAL)  # the libraries complain loudly about the fake broker
    failed = 0
    for label, step in LIBRARIES[library](bootstrap, prefix, topic, int(count), pinned):
        started = time.monotonic()
        try:
            step()
            print(f"    {label}: {time.monotonic() - started:.1f}s", flush=True)
        except Exception as exc:  # one step failing must not lose the others' traffic
            failed += 1
            print(f"    {label}: FAILED ({type(exc).__name__}: {exc})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

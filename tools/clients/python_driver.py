"""One scripted run of a Python Kafka client against a real broker, for tools/record_clients.py.

    python python_driver.py LIBRARY BOOTSTRAP PREFIX TOPIC COUNT [PIN]

Runs in the library release's own virtual environment (it imports nothing from kproto).
Steps, each bounded and printed as ``STEP <label> ok|FAILED <why>`` (one failing does not stop
the next): produce COUNT records, consume them in a group and commit, an admin call where the
library has one, produce once more under the default client.id. PIN is the old-deployment
version setting: kafka-python / aiokafka ``api_version``, librdkafka's
``api.version.request=false`` with ``broker.version.fallback``.

It runs on Python 3.7 and later (old releases need old Pythons), so no newer syntax.
"""

import asyncio
import sys
import time

STEP_SECONDS = 15.0


def _values(count):
    return [('{"n":%d}' % i).encode() for i in range(count)]


def kafka_python(bootstrap, prefix, topic, count, pin):
    from kafka import KafkaConsumer, KafkaProducer

    options = {"api_version": tuple(int(p) for p in pin.split("."))} if pin else {}

    def produce(**ids):
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=10000, max_block_ms=10000, **ids, **options
        )
        try:
            futures = [producer.send(topic, value=v, key=b"k") for v in _values(count)]
            producer.flush(STEP_SECONDS)
            for future in futures:
                future.get(STEP_SECONDS)
        finally:
            producer.close(STEP_SECONDS)

    def group():
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            client_id=prefix + "-group",
            group_id=prefix + "-readers",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
            **options,
        )
        try:
            deadline, seen = time.monotonic() + STEP_SECONDS, 0
            while seen < count and time.monotonic() < deadline:
                seen += sum(len(batch) for batch in consumer.poll(200).values())
            if seen < count:
                raise RuntimeError("consumed %d of %d records" % (seen, count))
            consumer.commit()
        finally:
            consumer.close(autocommit=False)

    def admin():
        from kafka.admin import KafkaAdminClient, NewTopic

        client = KafkaAdminClient(
            bootstrap_servers=bootstrap, client_id=prefix + "-admin", request_timeout_ms=10000, **options
        )
        try:
            if hasattr(client, "list_topics"):  # not in kafka-python 1.4
                client.list_topics()
            client.create_topics([NewTopic(prefix + "-created", 1, 1)])
        finally:
            client.close()

    return [
        ("producer", lambda: produce(client_id=prefix + "-producer")),
        ("group", group),
        ("admin", admin),
        ("default-id-producer", produce),
    ]


def aiokafka(bootstrap, prefix, topic, count, pin):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    options = {"api_version": pin} if pin else {}

    async def produce(**ids):
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10000, **ids, **options)
        await producer.start()
        try:
            for value in _values(count):
                await producer.send_and_wait(topic, value=value, key=b"k")
        finally:
            await producer.stop()

    async def group():
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            client_id=prefix + "-group",
            group_id=prefix + "-readers",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
            **options,
        )
        await consumer.start()
        try:
            deadline, seen = time.monotonic() + STEP_SECONDS, 0
            while seen < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                seen += sum(len(batch) for batch in batches.values())
            if seen < count:
                raise RuntimeError("consumed %d of %d records" % (seen, count))
            await consumer.commit()
        finally:
            await consumer.stop()

    async def admin():
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        client = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=prefix + "-admin", **options)
        await client.start()
        try:
            await client.list_topics()
            await client.create_topics([NewTopic(prefix + "-created", 1, 1)])
        finally:
            await client.close()

    def run(make):
        loop = asyncio.new_event_loop()  # asyncio.run is not there on every Python the releases need
        try:
            loop.run_until_complete(asyncio.wait_for(make(), STEP_SECONDS + 5))
        finally:
            loop.close()

    return [
        ("producer", lambda: run(lambda: produce(client_id=prefix + "-producer"))),
        ("group", lambda: run(group)),
        ("admin", lambda: run(admin)),
        ("default-id-producer", lambda: run(produce)),
    ]


def confluent_kafka(bootstrap, prefix, topic, count, pin):
    from confluent_kafka import Consumer, KafkaException, Producer

    options = {"api.version.request": False, "broker.version.fallback": pin} if pin else {}

    def produce(**ids):
        failures = []
        producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 15000, **ids, **options}
        )
        for value in _values(count):
            producer.produce(
                topic, value=value, key=b"k", on_delivery=lambda error, _message: error and failures.append(error)
            )
        left = producer.flush(STEP_SECONDS)
        if failures or left:
            raise RuntimeError("%d undelivered: %s" % (left + len(failures), failures[:1]))

    def group():
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": prefix + "-group",
                "group.id": prefix + "-readers",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 50,
                **options,
            }
        )
        try:
            consumer.subscribe([topic])
            deadline, seen, last = time.monotonic() + STEP_SECONDS, 0, None
            while seen < count and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error():
                    raise KafkaException(message.error())
                seen, last = seen + 1, message
            if last is None or seen < count:
                raise RuntimeError("consumed %d of %d records" % (seen, count))
            consumer.commit(message=last, asynchronous=False)
        finally:
            consumer.close()

    def admin():
        from confluent_kafka.admin import AdminClient, NewTopic

        client = AdminClient({"bootstrap.servers": bootstrap, "client.id": prefix + "-admin", **options})
        client.list_topics(timeout=STEP_SECONDS)
        for future in client.create_topics(
            [NewTopic(prefix + "-created", 1, 1)], request_timeout=STEP_SECONDS
        ).values():
            future.result(STEP_SECONDS)

    return [
        ("producer", lambda: produce(**{"client.id": prefix + "-producer"})),
        ("group", group),
        ("admin", admin),
        ("default-id-producer", produce),
    ]


LIBRARIES = {"kafka-python": kafka_python, "aiokafka": aiokafka, "confluent-kafka": confluent_kafka}


def main(argv):
    library, bootstrap, prefix, topic, count = argv[:5]
    pin = argv[5] if len(argv) > 5 else ""
    failed = 0
    for label, body in LIBRARIES[library](bootstrap, prefix, topic, int(count), pin):
        started = time.monotonic()
        try:
            body()
            print("STEP %s ok %.1fs" % (label, time.monotonic() - started), flush=True)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # one step failing must not lose the others' traffic (asyncio's
            # CancelledError, from a step's timeout, is a BaseException)
            failed += 1
            print("STEP %s FAILED %s: %s" % (label, type(exc).__name__, str(exc).replace("\n", " ")), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

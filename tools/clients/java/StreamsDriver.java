// One scripted run of a Kafka Streams application, for tools/record_clients.py (software built on
// Apache Kafka's Java client: its consumer, producer and admin client, under the client.ids Streams gives them).
//
//   java -cp CLASSES:LIB/* StreamsDriver BOOTSTRAP PREFIX TOPIC COUNT
//
// Compiled with ClientDriver.java (its steps are reused). Steps, printed as ClientDriver prints them:
// producer (the input records, ClientDriver's producer), admin (ClientDriver's: list topics, describe
// the cluster, create PREFIX-created, the application's output topic), group (a Streams application,
// application.id PREFIX-readers and client.id PREFIX-group, copying TOPIC to PREFIX-created until
// COUNT records went through), default-id-producer (a second application with no client.id: Streams
// names its clients after the application.id, a UUID and the stream thread).

import java.nio.file.Files;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;

public class StreamsDriver {
    static void application(String bootstrap, String applicationId, String clientId, String topic, String out,
                            int count) throws Exception {
        Properties p = ClientDriver.common(bootstrap, clientId);
        p.put("application.id", applicationId);
        p.put("state.dir", Files.createTempDirectory("kproto-streams").toString());
        p.put("default.key.serde", "org.apache.kafka.common.serialization.Serdes$ByteArraySerde");
        p.put("default.value.serde", "org.apache.kafka.common.serialization.Serdes$ByteArraySerde");
        p.put("auto.offset.reset", "earliest");
        p.put("commit.interval.ms", "100");
        AtomicInteger seen = new AtomicInteger();
        StreamsBuilder builder = new StreamsBuilder();
        builder.<byte[], byte[]>stream(topic).peek((key, value) -> seen.incrementAndGet()).to(out);
        KafkaStreams app = new KafkaStreams(builder.build(), p);
        try {
            app.start();
            long deadline = System.currentTimeMillis() + 3 * ClientDriver.STEP_MS;   // a rebalance first
            while (seen.get() < count && System.currentTimeMillis() < deadline) Thread.sleep(100);
            if (seen.get() < count) throw new IllegalStateException("processed " + seen.get() + " of " + count + " records");
            Thread.sleep(500);   // a commit interval or more: the offsets committed, the output written
        } finally {
            app.close(Duration.ofSeconds(10));
        }
    }

    public static void main(String[] args) {
        String bootstrap = args[0], prefix = args[1], topic = args[2], out = prefix + "-created";
        int count = Integer.parseInt(args[3]);
        int failed = 0;
        failed += ClientDriver.step("producer", () -> ClientDriver.produce(bootstrap, prefix + "-producer", topic, count));
        failed += ClientDriver.step("admin", () -> ClientDriver.admin(bootstrap, prefix));
        failed += ClientDriver.step("group", () -> application(bootstrap, prefix + "-readers", prefix + "-group",
                                                                topic, out, count));
        failed += ClientDriver.step("default-id-producer", () -> application(bootstrap, prefix + "-app", null,
                                                                              topic, out, count));
        System.out.flush();
        Runtime.getRuntime().halt(failed > 0 ? 1 : 0);   // no lingering stream threads
    }
}

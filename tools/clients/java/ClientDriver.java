// One scripted run of Apache Kafka's Java client, for tools/record_clients.py.
//
//   java -cp CLASSES:LIB/* ClientDriver BOOTSTRAP PREFIX TOPIC COUNT
//
// Steps (each bounded, each printed as "STEP <label> ok|FAILED <why>", one failing does not
// stop the next): produce COUNT records, consume them in a group and commit, an admin call
// (list topics, describe the cluster, create a topic), produce once more under the default client.id.
// Written against the API every release from 2.0 to 4.x has (poll(Duration), AdminClient.create);
// scripts/install-clients.sh swaps in poll(long) and close(long, TimeUnit) for the releases before 2.0.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

public class ClientDriver {
    static final long STEP_MS = 15000;

    interface Step { void run() throws Exception; }

    static int step(String label, Step body) {
        long started = System.nanoTime();
        try {
            body.run();
            System.out.printf("STEP %s ok %.1fs%n", label, (System.nanoTime() - started) / 1e9);
            return 0;
        } catch (Throwable error) {   // one step failing must not lose the others' traffic
            Throwable cause = error.getCause() != null ? error.getCause() : error;
            System.out.printf("STEP %s FAILED %s: %s%n", label, cause.getClass().getName(),
                              String.valueOf(cause.getMessage()).replace('\n', ' '));
            return 1;
        }
    }

    static Properties common(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        if (clientId != null) p.put("client.id", clientId);
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "10000");
        return p;
    }

    static void produce(String bootstrap, String clientId, String topic, int count) throws Exception {
        Properties p = common(bootstrap, clientId);
        p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("linger.ms", "5");
        p.put("max.block.ms", "10000");
        p.put("delivery.timeout.ms", "15000");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                byte[] value = ("{\"n\":" + i + "}").getBytes("UTF-8");
                sent.add(producer.send(new ProducerRecord<>(topic, "k".getBytes("UTF-8"), value)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) f.get(STEP_MS, TimeUnit.MILLISECONDS);
        }
    }

    static void group(String bootstrap, String prefix, String topic, int count) throws Exception {
        Properties p = common(bootstrap, prefix + "-group");
        p.put("request.timeout.ms", "15000");   // before 2.0 it must exceed session.timeout.ms (10 s)
        p.put("group.id", prefix + "-readers");
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("fetch.max.wait.ms", "50");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        try {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + STEP_MS;
            int seen = 0;
            while (seen < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                seen += records.count();
            }
            if (seen < count) throw new IllegalStateException("consumed " + seen + " of " + count + " records");
            consumer.commitSync();
        } finally {
            consumer.close(Duration.ofSeconds(5));
        }
    }

    static void admin(String bootstrap, String prefix) throws Exception {
        try (AdminClient admin = AdminClient.create(common(bootstrap, prefix + "-admin"))) {
            admin.listTopics().names().get(STEP_MS, TimeUnit.MILLISECONDS);
            admin.describeCluster().nodes().get(STEP_MS, TimeUnit.MILLISECONDS);
            admin.createTopics(Collections.singletonList(new NewTopic(prefix + "-created", 1, (short) 1)))
                 .all().get(STEP_MS, TimeUnit.MILLISECONDS);
        }
    }

    public static void main(String[] args) {
        String bootstrap = args[0], prefix = args[1], topic = args[2];
        int count = Integer.parseInt(args[3]);
        int failed = 0;
        failed += step("producer", () -> produce(bootstrap, prefix + "-producer", topic, count));
        failed += step("group", () -> group(bootstrap, prefix, topic, count));
        failed += step("admin", () -> admin(bootstrap, prefix));
        failed += step("default-id-producer", () -> produce(bootstrap, null, topic, count));
        System.out.flush();
        Runtime.getRuntime().halt(failed > 0 ? 1 : 0);   // no lingering client threads
    }
}

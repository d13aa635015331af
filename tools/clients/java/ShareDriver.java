// One scripted run of a share consumer (KIP-932, queues for Kafka), for tools/record_clients.py: Apache
// Kafka's Java client 4.1+ (KafkaShareConsumer) against a broker that serves share groups (4.2+ by default).
//
//   java -cp CLASSES:LIB/* ShareDriver BOOTSTRAP PREFIX TOPIC COUNT
//
// Compiled with ClientDriver.java (its steps are reused). Steps, printed as ClientDriver prints them:
// producer (ClientDriver's), group (share group PREFIX-readers, client.id PREFIX-group: its start offset set
// to the earliest by the admin client, as an operator does, then COUNT records fetched and acknowledged),
// admin (ClientDriver's), default-id-producer (a second share group, PREFIX-app, with no client.id: the Java
// client names a share consumer as it names a consumer).

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;

public class ShareDriver {
    // A share group starts at the latest offset unless its group config says otherwise.
    static void fromEarliest(String bootstrap, String prefix, String... groups) throws Exception {
        Map<ConfigResource, Collection<AlterConfigOp>> ops = new java.util.HashMap<>();
        for (String group : groups) {
            ops.put(new ConfigResource(ConfigResource.Type.GROUP, group), Collections.singletonList(
                new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)));
        }
        try (AdminClient admin = AdminClient.create(ClientDriver.common(bootstrap, prefix + "-admin"))) {
            admin.incrementalAlterConfigs(ops).all().get(ClientDriver.STEP_MS, TimeUnit.MILLISECONDS);
        }
    }

    static void share(String bootstrap, String groupId, String clientId, String topic, int count) throws Exception {
        java.util.Properties p = ClientDriver.common(bootstrap, clientId);
        p.put("group.id", groupId);
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p);
        try {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 2 * ClientDriver.STEP_MS;   // the group's first assignment
            int seen = 0;
            while (seen < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                seen += records.count();
            }
            if (seen < count) throw new IllegalStateException("fetched " + seen + " of " + count + " records");
            List<String> failures = new ArrayList<>();       // the records acknowledged (implicit mode: accepted)
            consumer.commitSync().forEach((partition, error) -> error.ifPresent(e -> failures.add(partition + ": " + e)));
            if (!failures.isEmpty()) throw new IllegalStateException("acknowledgement failed: " + failures);
        } finally {
            consumer.close(Duration.ofSeconds(5));
        }
    }

    public static void main(String[] args) {
        String bootstrap = args[0], prefix = args[1], topic = args[2];
        int count = Integer.parseInt(args[3]);
        int failed = 0;
        failed += ClientDriver.step("producer", () -> ClientDriver.produce(bootstrap, prefix + "-producer", topic, count));
        failed += ClientDriver.step("group", () -> {
            fromEarliest(bootstrap, prefix, prefix + "-readers", prefix + "-app");
            share(bootstrap, prefix + "-readers", prefix + "-group", topic, count);
        });
        failed += ClientDriver.step("admin", () -> ClientDriver.admin(bootstrap, prefix));
        failed += ClientDriver.step("default-id-producer", () -> share(bootstrap, prefix + "-app", null, topic, count));
        System.out.flush();
        Runtime.getRuntime().halt(failed > 0 ? 1 : 0);   // no lingering client threads
    }
}

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A Java client session against one broker (issue 36, deliver 4): the release's own
 * kafka-clients admin client, producer (one per compression codec, and a transactional one
 * that commits a transaction and aborts another) and consumers in a group (reading
 * uncommitted, so they see the aborted records too), so that tools/real_traffic.py can check every frame they exchange with the
 * broker decodes and re-encodes byte-exact in kproto.
 *
 * Arguments: BOOTSTRAP TOPIC GROUP [consumer-protocol]. The last one adds a consumer of the
 * KIP-848 protocol (group.protocol=consumer, brokers 4.0+). Prints one line per step; exits 1
 * when a step fails.
 */
public final class KafkaClientSession {
    private static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    private static final int RECORDS_PER_CODEC = 6;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        boolean consumerProtocol = args.length > 3 && args[3].equals("consumer-protocol");

        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(withId(common, "java-admin"))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            System.out.println("cluster " + admin.describeCluster().clusterId().get());
            System.out.println("topics " + admin.listTopics().names().get().size());
            admin.describeTopics(List.of(topic)).allTopicNames().get();
            admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, topic))).all().get();
        }

        int produced = 0;
        for (String codec : CODECS) {
            Properties config = withId(common, "java-producer-" + codec);
            config.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            config.put(ProducerConfig.ACKS_CONFIG, "all");
            try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
                for (int i = 0; i < RECORDS_PER_CODEC; i++) {
                    byte[] key = i == 1 ? null : bytes("key-" + i);
                    byte[] value = i == 2 ? null : bytes(codec + "-value-" + i + "-".repeat(i * 20));
                    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, null, key, value);
                    record.headers().add("trace", bytes("t" + i)).add("empty", new byte[0]).add("null", null);
                    producer.send(record);
                    produced++;
                }
                producer.flush();
            }
        }
        produced += transactions(common, topic, group);
        System.out.println("produced " + produced);

        consume(common, topic, group, "classic", produced);
        if (consumerProtocol) {
            consume(common, topic, group + "-kip848", "consumer", produced);
        }

        try (Admin admin = Admin.create(withId(common, "java-admin-after"))) {
            TopicPartition partition = new TopicPartition(topic, 0);
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            admin.describeConsumerGroups(List.of(group)).all().get();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            latest.put(partition, OffsetSpec.latest());
            System.out.println("latest " + admin.listOffsets(latest).all().get().get(partition).offset());
            admin.deleteTopics(List.of(topic)).all().get();
        }
        System.out.println("done");
    }

    /** A transactional producer: one transaction committed (with the group's offsets), one aborted. */
    private static int transactions(Properties common, String topic, String group) {
        Properties config = withId(common, "java-producer-txn");
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "java-txn-" + topic);
        config.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        int sent = 0;
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.initTransactions();
            for (boolean commit : new boolean[] {true, false}) {
                producer.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    producer.send(new ProducerRecord<>(topic, bytes("txn-" + commit + "-" + i), bytes("in a transaction")));
                    sent++;
                }
                if (commit) {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    offsets.put(new TopicPartition(topic, 0), new OffsetAndMetadata(0));
                    producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(group + "-txn"));
                    producer.commitTransaction();
                } else {
                    producer.flush();   // on the broker before the abort, or they would never be sent
                    producer.abortTransaction();
                }
            }
        }
        System.out.println("transactions " + sent);
        return sent;
    }

    private static void consume(Properties common, String topic, String group, String protocol, int expected) {
        Properties config = withId(common, "java-consumer-" + protocol);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (!protocol.equals("classic")) {
            config.put("group.protocol", protocol);
        }
        List<ConsumerRecord<byte[], byte[]>> seen = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen.size() < expected && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(seen::add);
            }
            consumer.commitSync();
        }
        if (seen.size() < expected) {
            System.out.println("FAILED consumer " + protocol + ": " + seen.size() + " of " + expected + " records");
            System.exit(1);
        }
        System.out.println("consumed " + protocol + " " + seen.size());
    }

    private static Properties withId(Properties common, String clientId) {
        Properties config = new Properties();
        config.putAll(common);
        config.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        return config;
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}

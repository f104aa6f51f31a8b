package example;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The orders consumer, in Java: poll, process, {@code commitSync} of the processed offsets, close on SIGTERM.
 *
 * <p>Configured from the environment only (the names kafka-chaos gives a {@code command:} member:
 * {@code KAFKA_BOOTSTRAP_SERVERS}, {@code KAFKA_GROUP_ID}, {@code KAFKA_TOPIC}, {@code KAFKA_CLIENT_ID},
 * {@code KAFKA_SESSION_TIMEOUT_MS}, {@code KAFKA_MAX_POLL_INTERVAL_MS}, {@code KAFKA_PARTITION_ASSIGNMENT_STRATEGY},
 * {@code KAFKA_GROUP_INSTANCE_ID}). When {@code KAFKA_CHAOS_INTERCEPTOR_JAR} is set (the jar is then on the
 * classpath) the kafka-chaos {@code RecordingConsumerInterceptor} is enabled with {@code interceptor.classes}
 * (KIP-42): it records what {@code poll} returned and the commits the coordinator accepted to
 * {@code $KAFKA_CHAOS_EVENTS}. Without it the consumer runs the same, unobserved.
 *
 * <p>SIGTERM runs the shutdown hook, which wakes the poll loop ({@code KafkaConsumer.wakeup}) and waits for
 * it to close the consumer (leaving the group at once) before the JVM exits.
 */
public final class OrdersConsumer {
    static final String INTERCEPTOR = "io.kafkachaos.interceptor.RecordingConsumerInterceptor";

    private OrdersConsumer() {
    }

    public static void main(String[] args) throws InterruptedException {
        Map<String, String> env = System.getenv();
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config(env));
        AtomicBoolean stopping = new AtomicBoolean(false);
        Thread loop = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            consumer.wakeup();
            try {
                loop.join(20_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            consumer.subscribe(List.of(required(env, "KAFKA_TOPIC")), new Listener());
            while (!stopping.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                Map<TopicPartition, OffsetAndMetadata> done = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    process(record);
                    done.put(new TopicPartition(record.topic(), record.partition()),
                             new OffsetAndMetadata(record.offset() + 1));  // next offset to read
                }
                if (!done.isEmpty()) {
                    try {
                        consumer.commitSync(done);
                    } catch (CommitFailedException | RebalanceInProgressException | TimeoutException e) {
                        // refused or unanswered: the next owner reads these records again (at-least-once)
                        System.err.println("orders: commit not made: " + e);
                    }
                }
            }
        } catch (WakeupException e) {
            if (!stopping.get()) {
                throw e;
            }
        } finally {
            consumer.close(Duration.ofSeconds(10));
        }
    }

    /** Stands for the real work: a few milliseconds per order. */
    static void process(ConsumerRecord<byte[], byte[]> record) throws InterruptedException {
        Thread.sleep(2);
    }

    static Properties config(Map<String, String> env) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, required(env, "KAFKA_BOOTSTRAP_SERVERS"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, required(env, "KAFKA_GROUP_ID"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, env.getOrDefault("KAFKA_CLIENT_ID", "orders"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, env.getOrDefault("KAFKA_MAX_POLL_INTERVAL_MS", "300000"));
        if ("consumer".equals(env.getOrDefault("KAFKA_GROUP_PROTOCOL", "classic"))) {
            throw new IllegalStateException("KAFKA_GROUP_PROTOCOL=consumer (KIP-848) needs kafka-clients 3.7+: "
                                            + "raise kafka.version in pom.xml");
        }
        int session = Integer.parseInt(env.getOrDefault("KAFKA_SESSION_TIMEOUT_MS", "10000"));
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Integer.toString(session));
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(Math.max(100, session / 3)));
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
              assignor(env.getOrDefault("KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "range")));
        String instance = env.get("KAFKA_GROUP_INSTANCE_ID");
        if (instance != null && !instance.isEmpty()) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);  // KIP-345
        }
        String jar = env.get("KAFKA_CHAOS_INTERCEPTOR_JAR");
        if (jar != null && !jar.isEmpty()) {
            p.put(ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG, INTERCEPTOR);
        }
        return p;
    }

    /** The assignor class for kafka-chaos's assignor names (kafka-clients 2.8 takes class names). */
    static String assignor(String name) {
        switch (name) {
            case "range": return "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin": return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky": return "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky": return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default: throw new IllegalArgumentException("KAFKA_PARTITION_ASSIGNMENT_STRATEGY=" + name + " is unknown");
        }
    }

    static String required(Map<String, String> env, String name) {
        String value = env.get(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalStateException(name + " is not set: this consumer is configured from the environment");
        }
        return value;
    }

    /** Every batch is committed right after it is processed, so a revocation finds nothing to commit. */
    static final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            System.err.println("orders: revoked " + partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            System.err.println("orders: assigned " + partitions);
        }
    }
}

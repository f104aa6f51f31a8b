package io.kafkachaos.interceptor;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;

/**
 * Records what a Java consumer returned from {@code poll} and what it committed, one JSON line per
 * event, for kafka-chaos ({@code chaos.workload.interceptor} translates the lines into the run's
 * history). Enabled with {@code interceptor.classes=io.kafkachaos.interceptor.RecordingConsumerInterceptor}
 * and the jar on the application's classpath; it changes nothing the consumer does.
 *
 * <p>The file is {@value #PATH_CONFIG} from the consumer config, else the environment variable
 * {@value #PATH_ENV}; neither is a {@link ConfigException}, so the consumer fails to construct
 * (an interceptor that cannot record must not let the application run unobserved). Each line is
 * one {@code write} on an {@code O_APPEND} descriptor (FileOutputStream in append mode), so several
 * consumers, even several processes, may share a file and a killed JVM leaves at most a torn last line.
 *
 * <p>Lines (all carry {@code v}, {@code event}, {@code stream} = pid-instance, {@code n} = the line's
 * number in its stream from 1, so a lost line is seen, {@code wall_ms} = {@link System#currentTimeMillis()},
 * {@code nano} = {@link System#nanoTime()}, {@code client_id}, {@code group_id}, {@code group_instance_id}):
 * <ul>
 * <li>{@code start} ({@link #configure}): {@code auto_commit} (enable.auto.commit as the client will
 *     apply it), {@code kafka_clients} (the version of the client the jar loaded into), {@code pid};
 * <li>{@code consumed} ({@link #onConsume}): {@code partitions}: [{topic, partition, offsets}] of the
 *     records poll is about to return to the application. Kafka calls onConsume only for a non-empty
 *     batch, just before poll returns it ({@code KafkaConsumer.poll}, 2.8–3.x; {@code AsyncKafkaConsumer.poll}, 4.x);
 * <li>{@code commit} ({@link #onCommit}): {@code offsets}: [{topic, partition, offset}], offsets being
 *     the next offsets to read (Kafka's convention). Kafka calls onCommit only after the coordinator
 *     <em>accepted</em> a commit (sync, async and auto commits: {@code ConsumerCoordinator.commitOffsetsSync}
 *     and {@code doCommitOffsetsAsync}'s onSuccess, 2.8–3.x; {@code CommitRequestManager} through
 *     {@code OffsetCommitCallbackInvoker}, 4.x): a failed commit is not seen at all, and the moment is
 *     after the answer arrived (4.x: possibly later, when the application thread runs the invocation);
 * <li>{@code close} ({@link #close}): the consumer is closing.
 * </ul>
 *
 * <p>What is <em>not</em> recorded: the member id and the generation (KIP-848: member epoch). The
 * interceptor API passes neither (onConsume gets the records, onCommit the offsets) and holds no
 * reference to the consumer whose {@code groupMetadata()} would tell them; the translator records
 * them as unknown (null). Whether a commit was an auto-commit or the application's is not told
 * either; {@code auto_commit} says whether auto-commits were on.
 *
 * <p>Clocks: {@code nano} is {@link System#nanoTime()}, which HotSpot on Linux reads from
 * {@code clock_gettime(CLOCK_MONOTONIC)} ({@code os::javaTimeNanos}, src/hotspot/os/posix/os_posix.cpp,
 * JDK 17+; os_linux.cpp before) — the clock of kafka-chaos's history. The translator checks it against
 * the start line's {@code wall_ms} and falls back to mapping {@code wall_ms} when they disagree.
 *
 * <p>Thread-safe: onCommit may run on the heartbeat thread (2.8–3.x async commits completed there).
 */
public class RecordingConsumerInterceptor<K, V> implements ConsumerInterceptor<K, V> {

    /** The consumer config naming the events file. */
    public static final String PATH_CONFIG = "kafka.chaos.events.path";
    /** The environment variable naming the events file when the config does not. */
    public static final String PATH_ENV = "KAFKA_CHAOS_EVENTS";
    /** The version of the line format; the translator refuses any other. */
    public static final int FORMAT = 1;

    private static final AtomicInteger INSTANCES = new AtomicInteger();

    private final Object lock = new Object();
    private FileOutputStream out;
    private String stream;
    private long n;
    private String clientId;
    private String groupId;
    private String groupInstanceId;

    @Override
    public void configure(Map<String, ?> configs) {
        Object configured = configs.get(PATH_CONFIG);
        String path = configured != null ? configured.toString() : System.getenv(PATH_ENV);
        if (path == null || path.isEmpty()) {
            throw new ConfigException(PATH_CONFIG, configured,
                    "kafka-chaos interceptor: set " + PATH_CONFIG + " in the consumer config or the environment variable "
                    + PATH_ENV + " to the events file");
        }
        clientId = string(configs.get(ConsumerConfig.CLIENT_ID_CONFIG));
        groupId = string(configs.get(ConsumerConfig.GROUP_ID_CONFIG));
        groupInstanceId = string(configs.get(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG));
        long pid = ProcessHandle.current().pid();
        stream = pid + "-" + INSTANCES.incrementAndGet();
        try {
            File file = new File(path);
            File parent = file.getAbsoluteFile().getParentFile();
            if (parent != null) {
                parent.mkdirs();
            }
            out = new FileOutputStream(file, true);
            endTornLine(file);
        } catch (IOException e) {
            throw new ConfigException(PATH_CONFIG, path, "kafka-chaos interceptor: cannot open the events file: " + e);
        }
        synchronized (lock) {
            StringBuilder b = begin("start");
            b.append(",\"auto_commit\":").append(autoCommit(configs.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG)));
            b.append(",\"kafka_clients\":");
            quote(b, clientsVersion());
            b.append(",\"pid\":").append(pid);
            write(b);
        }
    }

    /**
     * A process killed while writing may leave a torn last line; its replacement's lines must not be glued
     * to it, so the torn line is ended (one write: it stays one malformed line, which the translator skips).
     */
    private void endTornLine(File file) throws IOException {
        try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(file, "r")) {
            long length = f.length();
            if (length == 0) {
                return;
            }
            f.seek(length - 1);
            if (f.read() == '\n') {
                return;
            }
        }
        out.write(new byte[] {'\n'});
    }

    /**
     * The kafka-clients version the consumer runs: its jar's {@code kafka/kafka-version.properties}, the file
     * Kafka's own AppInfoParser reads (that class moved to {@code common.utils.internals} in 4.x, so it is not
     * called); null when the resource is absent.
     */
    private static String clientsVersion() {
        try (InputStream in = ConsumerInterceptor.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in == null) {
                return null;
            }
            Properties props = new Properties();
            props.load(in);
            return props.getProperty("version");
        } catch (IOException e) {
            return null;
        }
    }

    /** enable.auto.commit as the client applies it: the value given, else Kafka's default (true with a group id). */
    private boolean autoCommit(Object value) {
        if (value == null) {
            return groupId != null;
        }
        return Boolean.parseBoolean(value.toString().trim());
    }

    @Override
    public ConsumerRecords<K, V> onConsume(ConsumerRecords<K, V> records) {
        synchronized (lock) {
            StringBuilder b = begin("consumed");
            b.append(",\"partitions\":[");
            List<TopicPartition> parts = new ArrayList<>(records.partitions());
            parts.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
            boolean first = true;
            for (TopicPartition tp : parts) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                b.append("{\"topic\":");
                quote(b, tp.topic());
                b.append(",\"partition\":").append(tp.partition()).append(",\"offsets\":[");
                boolean firstOffset = true;
                for (ConsumerRecord<K, V> r : records.records(tp)) {
                    if (!firstOffset) {
                        b.append(',');
                    }
                    firstOffset = false;
                    b.append(r.offset());
                }
                b.append("]}");
            }
            b.append(']');
            write(b);
        }
        return records;
    }

    @Override
    public void onCommit(Map<TopicPartition, OffsetAndMetadata> offsets) {
        synchronized (lock) {
            StringBuilder b = begin("commit");
            b.append(",\"offsets\":[");
            List<TopicPartition> parts = new ArrayList<>(offsets.keySet());
            parts.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
            boolean first = true;
            for (TopicPartition tp : parts) {
                OffsetAndMetadata om = offsets.get(tp);
                if (om == null) {
                    continue;
                }
                if (!first) {
                    b.append(',');
                }
                first = false;
                b.append("{\"topic\":");
                quote(b, tp.topic());
                b.append(",\"partition\":").append(tp.partition()).append(",\"offset\":").append(om.offset()).append('}');
            }
            b.append(']');
            write(b);
        }
    }

    @Override
    public void close() {
        synchronized (lock) {
            if (out == null) {
                return;
            }
            write(begin("close"));
            try {
                out.close();
            } catch (IOException e) {
                // the close line was written (one write); nothing left to lose
            }
            out = null;
        }
    }

    /** The common fields; the caller holds the lock (so a stream's line numbers and times follow file order). */
    private StringBuilder begin(String event) {
        long wallMs = System.currentTimeMillis();
        long nano = System.nanoTime();
        StringBuilder b = new StringBuilder(256);
        b.append("{\"v\":").append(FORMAT).append(",\"event\":\"").append(event).append("\",\"stream\":");
        quote(b, stream);
        b.append(",\"n\":").append(++n).append(",\"wall_ms\":").append(wallMs).append(",\"nano\":").append(nano);
        b.append(",\"client_id\":");
        quote(b, clientId);
        b.append(",\"group_id\":");
        quote(b, groupId);
        b.append(",\"group_instance_id\":");
        quote(b, groupInstanceId);
        return b;
    }

    /** One line, one write (O_APPEND): never interleaved with another writer's line. */
    private void write(StringBuilder b) {
        if (out == null) {
            return;  // closed: the consumer is gone
        }
        b.append("}\n");
        try {
            out.write(b.toString().getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            // Kafka logs what an interceptor throws (ConsumerInterceptors) and goes on; the line number
            // gap tells the translator that evidence is missing
            throw new UncheckedIOException("kafka-chaos interceptor: cannot write the events file", e);
        }
    }

    private static String string(Object value) {
        if (value == null) {
            return null;
        }
        String s = value.toString();
        return s.isEmpty() ? null : s;
    }

    /** A JSON string (RFC 8259: quote, backslash and control characters escaped), or null. */
    private static void quote(StringBuilder b, String s) {
        if (s == null) {
            b.append("null");
            return;
        }
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        b.append('"');
    }
}

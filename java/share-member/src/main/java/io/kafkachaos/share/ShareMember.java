package io.kafkachaos.share;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * kafka-chaos's share-group member over Kafka's own {@link KafkaShareConsumer} (KIP-932), the same loop as the
 * Python member (chaos/workload/share_member.py), printing one JSON line per thing it did on stdout, stamped with
 * {@link System#nanoTime()} (CLOCK_MONOTONIC on Linux, the history's clock; the translator checks it):
 *
 * <ol>
 *   <li>{@code poll} returns records the share-partition leaders acquired for this member: one {@code acquired}
 *       line per (partition, delivery count), with {@link ConsumerRecord#deliveryCount()} and the acquisition lock
 *       timeout the broker gave ({@link KafkaShareConsumer#acquisitionLockTimeoutMs()}, KIP-1222);</li>
 *   <li>the records are processed one by one ({@code kafka.chaos.processing.delay.ms}), one {@code processed} line
 *       each, while the lock leaves time: a record is begun only if it can end within 80 % of the lock counted from
 *       the poll's return ({@code kafka.chaos.lock.ms}, else the broker's timeout);</li>
 *   <li>the processed ones are acknowledged ACCEPT, the rest RELEASE; {@code ack_sent} is printed before
 *       {@code commitSync} sends them, {@code ack_answer} with each partition's answer after.</li>
 * </ol>
 *
 * <p>With {@code kafka.chaos.renew=true} every record acquired is acknowledged RENEW as soon as {@code poll} returns
 * it (KIP-1222, explicit mode): the leader restarts its acquisition lock and it stays this member's. Kafka's client
 * hands a renewed record back from a later {@code poll} with the same delivery count (its
 * {@code ShareConsumerRenewTest}); the member prints no {@code acquired} line for it (the acquisition goes on),
 * processes it within 80 % of the lock counted from when the renewal was sent, accepts it, and renews again what it
 * could not begin in time, at most {@link #MAX_RENEWALS} times in a row, then releases it; a refused renewal ends
 * the member's claim on it ({@link #renewThenProcess} says why new records are not processed at once).
 *
 * <p>SIGTERM runs the shutdown hook: it stops the loop (the record under way ends unprocessed, the rest of the
 * poll is released), wakes the consumer up, waits for the loop to close it and prints {@code shutdown_complete}.
 *
 * <p>Usage: {@code ShareMember CONFIG.properties} — the consumer's properties plus {@code kafka.chaos.topic},
 * {@code kafka.chaos.processing.delay.ms} and {@code kafka.chaos.lock.ms}, which are not passed to the consumer.
 */
public final class ShareMember {
    static final String PREFIX = "kafka.chaos.";
    static final double LOCK_BUDGET = 0.8;
    static final Duration POLL = Duration.ofMillis(500);
    static final Duration COMMIT_TIMEOUT = Duration.ofSeconds(30);
    /** Renewals of one record in a row before the member releases it (a record that never fits is not kept). */
    static final int MAX_RENEWALS = 3;

    private final KafkaShareConsumer<byte[], byte[]> consumer;
    private final long delayNanos;
    private final long lockMs;
    private final PrintStream out;
    private final boolean renew;
    /** The records renewed and not yet handed back, by {@link #key}: when the renewal was sent, how many in a row. */
    private final Map<String, long[]> renewed = new HashMap<>();
    private volatile boolean running = true;

    ShareMember(KafkaShareConsumer<byte[], byte[]> consumer, long delayNanos, long lockMs, boolean renew,
                PrintStream out) {
        this.consumer = consumer;
        this.delayNanos = delayNanos;
        this.lockMs = lockMs;
        this.renew = renew;
        this.out = out;
    }

    /** A record's identity in one acquisition: topic, partition, offset and delivery count. */
    static String key(ConsumerRecord<byte[], byte[]> r) {
        return r.topic() + "\u0000" + r.partition() + "\u0000" + r.offset() + "\u0000"
                + r.deliveryCount().map(String::valueOf).orElse("");
    }

    public static void main(String[] args) throws IOException {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        String topic = (String) props.remove(PREFIX + "topic");
        long delayNanos = Math.round(Double.parseDouble((String) props.remove(PREFIX + "processing.delay.ms")) * 1e6);
        long lockMs = Long.parseLong((String) props.remove(PREFIX + "lock.ms"));
        boolean renew = Boolean.parseBoolean((String) props.remove(PREFIX + "renew"));
        props.put("share.acknowledgement.mode", "explicit");
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true,
                StandardCharsets.UTF_8);
        out.println("{\"e\":\"start\",\"nano\":" + System.nanoTime() + ",\"wall_ms\":" + System.currentTimeMillis()
                + "}");
        KafkaShareConsumer<byte[], byte[]> consumer =
                new KafkaShareConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        ShareMember member = new ShareMember(consumer, delayNanos, lockMs, renew, out);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            member.running = false;
            consumer.wakeup();
            try {
                done.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "share-member-shutdown"));
        try {
            consumer.subscribe(List.of(topic));
            member.run();
        } catch (WakeupException e) {
            // the shutdown hook's wakeup: the loop ends
        } catch (RuntimeException e) {
            out.println("{\"e\":\"error\",\"message\":" + str(e.getClass().getSimpleName() + ": " + e.getMessage())
                    + "}");
        } finally {
            try {
                consumer.close();
                out.println("{\"e\":\"shutdown_complete\",\"nano\":" + System.nanoTime() + "}");
            } catch (RuntimeException e) {
                out.println("{\"e\":\"error\",\"message\":" + str("close: " + e) + "}");
            }
            done.countDown();
        }
    }

    void run() {
        while (running) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL);
            if (records.isEmpty()) {
                continue;
            }
            long got = System.nanoTime();
            List<ConsumerRecord<byte[], byte[]>> all = new ArrayList<>();
            records.forEach(all::add);
            Optional<Integer> brokerLock = consumer.acquisitionLockTimeoutMs();
            long lock = lockMs > 0 ? lockMs : brokerLock.map(Integer::longValue).orElse(0L);
            long budget = Math.round(lock * LOCK_BUDGET * 1e6);
            // a renewed record handed back keeps its acquisition: its lock restarted when the renewal was applied
            List<ConsumerRecord<byte[], byte[]>> acquired = new ArrayList<>();
            long[] deadlines = new long[all.size()];
            int[] streak = new int[all.size()];
            for (int i = 0; i < all.size(); i++) {
                long[] back = renewed.remove(key(all.get(i)));
                long from = back == null ? got : back[0];
                deadlines[i] = lock > 0 ? from + budget : Long.MAX_VALUE;
                streak[i] = back == null ? 0 : (int) back[1];
                if (back == null) {
                    acquired.add(all.get(i));
                }
            }
            printAcquired(acquired, got, brokerLock);
            if (renew) {
                renewThenProcess(all, deadlines, streak);
                continue;
            }
            int processed = process(all, deadlines);
            AcknowledgeType[] types = new AcknowledgeType[all.size()];
            for (int i = 0; i < all.size(); i++) {
                types[i] = i < processed ? AcknowledgeType.ACCEPT : AcknowledgeType.RELEASE;
            }
            commit(all, types, streak);
        }
    }

    /**
     * The renewing loop's poll: every record newly acquired is renewed at once and processed only when the client
     * hands it back; the records handed back are processed while the renewed lock leaves time (counted from the
     * renewal's sending), accepted, and the rest renewed again (or released after {@link #MAX_RENEWALS}). Why not
     * process the new ones now: the client fetches ahead of {@code poll}, so their lock may have begun up to a whole
     * poll's processing earlier, and nothing says when; a renewal's start is known.
     */
    private void renewThenProcess(List<ConsumerRecord<byte[], byte[]>> all, long[] deadlines, int[] streak) {
        List<ConsumerRecord<byte[], byte[]>> back = new ArrayList<>();
        long[] backDeadlines = new long[all.size()];
        int[] backStreak = new int[all.size()];
        AcknowledgeType[] types = new AcknowledgeType[all.size()];
        for (int i = 0; i < all.size(); i++) {
            if (streak[i] == 0) {
                types[i] = running ? AcknowledgeType.RENEW : AcknowledgeType.RELEASE;
            } else {
                backDeadlines[back.size()] = deadlines[i];
                backStreak[back.size()] = streak[i];
                back.add(all.get(i));
            }
        }
        commit(all, types, streak);
        int processed = process(back, backDeadlines);
        AcknowledgeType[] backTypes = new AcknowledgeType[back.size()];
        for (int i = 0; i < back.size(); i++) {
            backTypes[i] = i < processed ? AcknowledgeType.ACCEPT
                    : running && backStreak[i] < MAX_RENEWALS ? AcknowledgeType.RENEW : AcknowledgeType.RELEASE;
        }
        commit(back, backTypes, backStreak);
    }

    private void printAcquired(List<ConsumerRecord<byte[], byte[]>> all, long got, Optional<Integer> lock) {
        Map<String, List<Long>> groups = new LinkedHashMap<>();
        Map<String, ConsumerRecord<byte[], byte[]>> first = new LinkedHashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : all) {
            String key = r.topic() + "\u0000" + r.partition() + "\u0000" + r.deliveryCount().map(String::valueOf).orElse("");
            groups.computeIfAbsent(key, k -> new ArrayList<>()).add(r.offset());
            first.putIfAbsent(key, r);
        }
        for (Map.Entry<String, List<Long>> g : groups.entrySet()) {
            ConsumerRecord<byte[], byte[]> r = first.get(g.getKey());
            out.println("{\"e\":\"acquired\",\"nano\":" + got + ",\"topic\":" + str(r.topic()) + ",\"partition\":"
                    + r.partition() + ",\"offsets\":" + g.getValue() + ",\"dc\":"
                    + r.deliveryCount().map(String::valueOf).orElse("null") + ",\"lock_ms\":"
                    + lock.map(String::valueOf).orElse("null") + "}");
        }
    }

    /** Process a prefix of {@code all}, each record begun only if it can end by its deadline; its length. */
    private int process(List<ConsumerRecord<byte[], byte[]>> all, long[] deadlines) {
        int n = 0;
        for (ConsumerRecord<byte[], byte[]> r : all) {
            long started = System.nanoTime();
            if (!running || started + delayNanos > deadlines[n]) {
                break;
            }
            if (delayNanos > 0 && !sleepUntil(started + delayNanos)) {
                break;
            }
            out.println("{\"e\":\"processed\",\"nano\":" + System.nanoTime() + ",\"started\":" + started
                    + ",\"topic\":" + str(r.topic()) + ",\"partition\":" + r.partition() + ",\"offset\":" + r.offset()
                    + ",\"dc\":" + r.deliveryCount().map(String::valueOf).orElse("null") + "}");
            n++;
        }
        return n;
    }

    private boolean sleepUntil(long end) {
        long left;
        while ((left = end - System.nanoTime()) > 0) {
            if (!running) {
                return false;
            }
            try {
                TimeUnit.NANOSECONDS.sleep(Math.min(left, 100_000_000L));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    /**
     * Acknowledge each record of {@code all} whose type is set ({@code types[i]}; null: not now) and commit them
     * synchronously, printing {@code ack_sent} and {@code ack_answer}; nothing when no type is set.
     */
    private void commit(List<ConsumerRecord<byte[], byte[]>> all, AcknowledgeType[] types, int[] streak) {
        Map<String, List<Long>> sent = new LinkedHashMap<>();
        Map<String, Integer> renewing = new LinkedHashMap<>();  // key -> renewals in a row, this one counted
        for (int i = 0; i < all.size(); i++) {
            ConsumerRecord<byte[], byte[]> r = all.get(i);
            AcknowledgeType type = types[i];
            if (type == null) {
                continue;
            }
            if (type == AcknowledgeType.RENEW) {
                renewing.put(key(r), streak[i] + 1);
            }
            consumer.acknowledge(r, type);
            sent.computeIfAbsent(str(r.topic()) + "," + r.partition() + ",\"" + type.name().toLowerCase() + "\"",
                    k -> new ArrayList<>()).add(r.offset());
        }
        StringBuilder acks = new StringBuilder();
        for (Map.Entry<String, List<Long>> s : sent.entrySet()) {
            String[] parts = s.getKey().split(",", 3);
            acks.append(acks.length() == 0 ? "" : ",").append('[').append(parts[0]).append(',').append(parts[1])
                    .append(',').append(s.getValue()).append(',').append(parts[2]).append(']');
        }
        if (sent.isEmpty()) {
            return;
        }
        long sentNano = System.nanoTime();
        out.println("{\"e\":\"ack_sent\",\"nano\":" + sentNano + ",\"acks\":[" + acks + "]}");
        renewing.forEach((k, n) -> renewed.put(k, new long[] {sentNano, n}));
        Map<TopicIdPartition, Optional<KafkaException>> result;
        try {
            result = consumer.commitSync(COMMIT_TIMEOUT);
        } catch (WakeupException e) {
            out.println("{\"e\":\"ack_answer\",\"nano\":" + System.nanoTime() + ",\"answers\":[],\"failed\":"
                    + str("woken up before the answer") + "}");
            throw e;
        } catch (KafkaException e) {
            out.println("{\"e\":\"ack_answer\",\"nano\":" + System.nanoTime() + ",\"answers\":[],\"failed\":"
                    + str(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
            return;  // a renewal without its answer may still have been applied: its record may come back
        }
        long answered = System.nanoTime();
        StringBuilder answers = new StringBuilder();
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> a : result.entrySet()) {
            answers.append(answers.length() == 0 ? "" : ",").append('[').append(str(a.getKey().topic())).append(',')
                    .append(a.getKey().partition()).append(',');
            if (a.getValue().isEmpty()) {
                answers.append("null,null]");
            } else {
                // refused: this commit's renewals on the partition are not kept (a record given out again comes back
                // with a higher delivery count, so under another key)
                String prefix = a.getKey().topic() + "\u0000" + a.getKey().partition() + "\u0000";
                renewing.keySet().stream().filter(k -> k.startsWith(prefix)).forEach(renewed::remove);
                Errors error = Errors.forException(a.getValue().get());
                answers.append(str(error.name())).append(',').append(error.code()).append(']');
            }
        }
        out.println("{\"e\":\"ack_answer\",\"nano\":" + answered + ",\"answers\":[" + answers + "],\"failed\":null}");
    }

    /** A JSON string literal. */
    static String str(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}

package io.samsa.compat;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * Kafka Streams' word count with exactly-once processing ({@code exactly_once_v2}): lines
 * of the input topic split into words, regrouped by word (a repartition topic Streams
 * creates) and counted in a persistent RocksDB store (backed by a changelog topic Streams
 * creates); each new count goes to the output topic, the word as key, the count as a long.
 *
 * <p>Usage: {@code WordCount BOOTSTRAP APPLICATION-ID INPUT OUTPUT STATE-DIR REPLICATION}.
 * Runs until its standard input closes, then closes Streams and exits 0. It prints
 * {@code STATE <state>} on each state change and {@code THREAD-FAILED <reason>} when a
 * stream thread dies of an exception (it is then replaced, as an operator would configure).
 */
public final class WordCount {
    private WordCount() {}

    public static void main(String[] args) throws IOException {
        if (args.length != 6) {
            System.err.println(
                    "usage: WordCount BOOTSTRAP APPLICATION-ID INPUT OUTPUT STATE-DIR REPLICATION");
            System.exit(2);
        }
        String bootstrap = args[0];
        String input = args[2];
        String output = args[3];
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, args[5]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        // Restarted after a kill -9, the new member replaces the dead one at once rather than
        // waiting for its session to expire (the default is 45 s).
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "10000");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), "1000");
        // A transaction the killed instance left open is aborted when the restarted one
        // initialises its producer (same transactional id), not after this timeout.
        props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), "30000");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long>as(Stores.persistentKeyValueStore("counts"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> out.println("STATE " + now));
        streams.setUncaughtExceptionHandler(failure -> {
            out.println("THREAD-FAILED " + Checks.describe(failure));
            return StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        while (System.in.read() != -1) {
            // Runs until the test closes standard input.
        }
        boolean closed = streams.close(Duration.ofSeconds(60));
        out.println(closed ? "CLOSED" : "CLOSE-TIMED-OUT");
        System.exit(closed ? 0 : 1);
    }
}

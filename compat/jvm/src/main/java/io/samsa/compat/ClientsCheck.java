package io.samsa.compat;

import static io.samsa.compat.Checks.check;
import static io.samsa.compat.Checks.checkEqual;
import static io.samsa.compat.Checks.waitUntil;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client (producer, consumer, Admin) against one broker: every check in one
 * JVM, one line of output each ({@link Checks}).
 *
 * <p>Usage: {@code ClientsCheck BOOTSTRAP PREFIX [CHECK-NAME-PREFIX...]}. Every topic,
 * group and transactional id starts with PREFIX, so runs never meet on one broker.
 */
public final class ClientsCheck {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);
    private static final long WAIT_S = 30;
    /** Records the idempotent producer writes to the data topic, which the groups read. */
    private static final int COUNT = 300;
    private static final int DATA_PARTITIONS = 3;

    private final String bootstrap;
    private final String prefix;
    private final Admin admin;
    private final String dataTopic;
    /** What the idempotent producer wrote, by partition, in offset order. */
    private final Map<Integer, List<Sent>> sent = new TreeMap<>();
    private String groupForOffsets;

    /** One record as produced: its index (key-i, value-i, header index=i) and its offset. */
    private record Sent(int index, long offset) {}

    private ClientsCheck(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        this.dataTopic = prefix + "-data";
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        this.admin = Admin.create(props);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ClientsCheck BOOTSTRAP PREFIX [CHECK-NAME-PREFIX...]");
            System.exit(2);
        }
        ClientsCheck run = new ClientsCheck(args[0], args[1]);
        Checks checks = new Checks();
        checks.add("producer.idempotent", run::idempotentProducer);
        checks.add("consumer.group-range", () -> run.consumerGroup("range"));
        checks.add("consumer.group-cooperative-sticky", () -> run.consumerGroup("cooperative-sticky"));
        checks.add("consumer.static-membership", run::staticMembership);
        checks.add("consumer.group-protocol-consumer", run::consumerProtocolGroup);
        checks.add("transactions.commit-abort-read-committed", run::commitAndAbort);
        checks.add("transactions.fenced-zombie", run::fencedZombie);
        checks.add("transactions.send-offsets", run::sendOffsetsToTransaction);
        checks.add("admin.create-topics", run::createTopics);
        checks.add("admin.describe-topics", run::describeTopics);
        checks.add("admin.describe-topics-by-id", run::describeTopicsById);
        checks.add("admin.create-partitions", run::createPartitions);
        checks.add("admin.incremental-alter-configs", run::incrementalAlterConfigs);
        checks.add("admin.describe-configs-broker", run::describeBrokerConfigs);
        checks.add("admin.list-offsets", run::listOffsets);
        checks.add("admin.delete-records", run::deleteRecords);
        checks.add("admin.describe-cluster", run::describeCluster);
        checks.add("admin.describe-producers", run::describeProducers);
        checks.add("admin.consumer-groups", run::consumerGroups);
        checks.add("admin.consumer-group-offsets", run::consumerGroupOffsets);
        checks.add("admin.describe-log-dirs", run::describeLogDirs);
        checks.add("admin.describe-transactions", run::describeTransactions);
        checks.add("admin.elect-leaders", run::electLeaders);
        checks.add("admin.list-partition-reassignments", run::listPartitionReassignments);
        checks.add("admin.describe-acls-without-authorizer", run::describeAcls);
        checks.add("admin.describe-client-quotas", run::describeClientQuotas);
        checks.add("admin.describe-user-scram-credentials", run::describeUserScramCredentials);
        checks.add("admin.describe-features", run::describeFeatures);
        checks.add("admin.delete-topics", run::deleteTopics);
        try {
            checks.runAll(Arrays.asList(args).subList(2, args.length));
        } finally {
            run.admin.close(Duration.ofSeconds(5));
        }
    }

    // --- clients --------------------------------------------------------------------

    private Properties producerProps() {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        return props;
    }

    private KafkaProducer<String, String> transactionalProducer(String transactionalId) {
        Properties props = producerProps();
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        return new KafkaProducer<>(props);
    }

    private KafkaConsumer<String, String> consumer(String groupId, Map<String, String> extra) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        if (groupId != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        props.putAll(extra);
        return new KafkaConsumer<>(props);
    }

    /** Creates a topic a check works on (admin.create-topics checks CreateTopics itself). */
    private void createTopic(String topic, int partitions) throws Exception {
        get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all());
    }

    /** Every record of {@code partition} up to its end offset under {@code isolation}. */
    private List<ConsumerRecord<String, String>> readAll(TopicPartition partition, String isolation)
            throws Exception {
        try (KafkaConsumer<String, String> reader = consumer(null,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            reader.assign(List.of(partition));
            reader.seekToBeginning(List.of(partition));
            long end = reader.endOffsets(List.of(partition)).get(partition);
            List<ConsumerRecord<String, String>> records = new ArrayList<>();
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (reader.position(partition) < end) {
                check(System.nanoTime() < deadline, partition + ": position "
                        + reader.position(partition) + " never reached end offset " + end);
                reader.poll(Duration.ofMillis(200)).forEach(records::add);
            }
            return records;
        }
    }

    private static String header(ConsumerRecord<?, ?> record, String key) {
        Header header = record.headers().lastHeader(key);
        return header == null ? null : new String(header.value(), StandardCharsets.UTF_8);
    }

    private static <T> T get(Future<T> future) throws Exception {
        return future.get(WAIT_S, TimeUnit.SECONDS);
    }

    private static Throwable failureOf(Future<?> future) throws Exception {
        try {
            future.get(WAIT_S, TimeUnit.SECONDS);
        } catch (ExecutionException failure) {
            return failure.getCause();
        }
        return null;
    }

    // --- producer and consumers -----------------------------------------------------

    /** An idempotent producer (acks=all) writes COUNT keyed records with headers. */
    private void idempotentProducer() throws Exception {
        createTopic(dataTopic, DATA_PARTITIONS);
        Properties props = producerProps();
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "2048"); // several batches a partition
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < COUNT; i++) {
                ProducerRecord<String, String> record =
                        new ProducerRecord<>(dataTopic, "key-" + i, "value-" + i);
                record.headers().add("index", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                record.headers().add("source", "java".getBytes(StandardCharsets.UTF_8));
                acks.add(producer.send(record));
            }
            producer.flush();
            for (int i = 0; i < COUNT; i++) {
                RecordMetadata metadata = get(acks.get(i));
                sent.computeIfAbsent(metadata.partition(), p -> new ArrayList<>())
                        .add(new Sent(i, metadata.offset()));
            }
        }
        for (Map.Entry<Integer, List<Sent>> entry : sent.entrySet()) {
            List<Sent> records = entry.getValue();
            records.sort((a, b) -> Long.compare(a.offset(), b.offset()));
            for (int j = 0; j < records.size(); j++) {
                checkEqual((long) j, records.get(j).offset(), "offset in partition " + entry.getKey());
            }
            List<ConsumerRecord<String, String>> read =
                    readAll(new TopicPartition(dataTopic, entry.getKey()), "read_uncommitted");
            checkEqual(records.size(), read.size(), "records read from partition " + entry.getKey());
            for (int j = 0; j < read.size(); j++) {
                checkRecord(read.get(j), records.get(j).index());
            }
        }
        checkEqual(DATA_PARTITIONS, sent.size(), "partitions the keys went to");
    }

    private static void checkRecord(ConsumerRecord<String, String> record, int index) {
        String where = record.topic() + "-" + record.partition() + "@" + record.offset();
        checkEqual("key-" + index, record.key(), where + " key");
        checkEqual("value-" + index, record.value(), where + " value");
        checkEqual(Integer.toString(index), header(record, "index"), where + " header index");
        checkEqual("java", header(record, "source"), where + " header source");
    }

    /** Two members of one group with {@code assignor} read the data topic and commit. */
    /** The members subscribe to the data topic and poll until together they have read up to
     * {@code ends}; each then commits what it read. */
    private void readAndCommit(List<KafkaConsumer<String, String>> members,
            Map<TopicPartition, Long> ends,
            Map<TopicPartition, Map<Long, ConsumerRecord<String, String>>> received) {
        for (KafkaConsumer<String, String> member : members) {
            member.subscribe(List.of(dataTopic));
        }
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (!groupDone(members, ends, received)) {
            check(System.nanoTime() < deadline, "the group did not settle and read all "
                    + COUNT + " records; assignments " + members.get(0).assignment() + " / "
                    + members.get(1).assignment() + ", received " + count(received));
            for (KafkaConsumer<String, String> member : members) {
                for (ConsumerRecord<String, String> record : member.poll(Duration.ofMillis(100))) {
                    received.computeIfAbsent(
                            new TopicPartition(record.topic(), record.partition()),
                            p -> new HashMap<>()).put(record.offset(), record);
                }
            }
        }
        for (KafkaConsumer<String, String> member : members) {
            member.commitSync(Duration.ofSeconds(WAIT_S));
        }
    }

    private void consumerGroup(String assignor) throws Exception {
        check(!sent.isEmpty(), "nothing to read: producer.idempotent failed");
        String group = prefix + "-group-" + assignor;
        String strategy = assignor.equals("range")
                ? RangeAssignor.class.getName() : CooperativeStickyAssignor.class.getName();
        Map<String, String> extra = Map.of(
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, strategy,
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
        Map<TopicPartition, Long> ends = new HashMap<>();
        sent.forEach((p, records) -> ends.put(new TopicPartition(dataTopic, p), (long) records.size()));
        Map<TopicPartition, Map<Long, ConsumerRecord<String, String>>> received = new HashMap<>();
        try (KafkaConsumer<String, String> first = consumer(group, extra);
                KafkaConsumer<String, String> second = consumer(group, extra)) {
            List<KafkaConsumer<String, String>> members = List.of(first, second);
            readAndCommit(members, ends, received);
            for (Map.Entry<TopicPartition, Map<Long, ConsumerRecord<String, String>>> entry
                    : received.entrySet()) {
                List<Sent> records = sent.get(entry.getKey().partition());
                for (Sent record : records) {
                    checkRecord(entry.getValue().get(record.offset()), record.index());
                }
            }
            Set<Set<Integer>> assignments = new HashSet<>();
            for (KafkaConsumer<String, String> member : members) {
                assignments.add(member.assignment().stream().map(TopicPartition::partition)
                        .collect(Collectors.toCollection(TreeSet::new)));
            }
            if (assignor.equals("range")) {
                checkEqual(Set.of(Set.of(0, 1), Set.of(2)), assignments, "range's assignment");
            }
            ConsumerGroupDescription description =
                    get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
            checkEqual(assignor, description.partitionAssignor(), "the group's assignor");
            checkEqual(GroupState.STABLE, description.groupState(), "the group's state");
            checkEqual(2, description.members().size(), "members");
        }
        Map<TopicPartition, OffsetAndMetadata> committed =
                get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        Map<TopicPartition, Long> committedOffsets = new HashMap<>();
        committed.forEach((p, o) -> committedOffsets.put(p, o.offset()));
        checkEqual(ends, committedOffsets, "committed offsets");
    }

    /** Two members of the KIP-848 protocol (group.protocol=consumer) share the topic's
     * partitions, read every record, commit; the group is described as a consumer group. */
    private void consumerProtocolGroup() throws Exception {
        check(!sent.isEmpty(), "nothing to read: producer.idempotent failed");
        String group = prefix + "-group-consumer-protocol";
        Map<String, String> extra = Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer",
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
        Map<TopicPartition, Long> ends = new HashMap<>();
        sent.forEach((p, records) -> ends.put(new TopicPartition(dataTopic, p), (long) records.size()));
        Map<TopicPartition, Map<Long, ConsumerRecord<String, String>>> received = new HashMap<>();
        try (KafkaConsumer<String, String> first = consumerProtocolMember(group, extra);
                KafkaConsumer<String, String> second = consumerProtocolMember(group, extra)) {
            List<KafkaConsumer<String, String>> members = List.of(first, second);
            readAndCommit(members, ends, received);
            ConsumerGroupDescription description =
                    get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
            checkEqual(org.apache.kafka.common.GroupType.CONSUMER, description.type(),
                    "the group's type");
            checkEqual(2, description.members().size(), "members");
        }
        Map<TopicPartition, OffsetAndMetadata> committed =
                get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        Map<TopicPartition, Long> committedOffsets = new HashMap<>();
        committed.forEach((p, o) -> committedOffsets.put(p, o.offset()));
        checkEqual(ends, committedOffsets, "committed offsets");
    }

    /** A member of the consumer protocol: the session and heartbeat are the broker's, so
     * the classic protocol's settings {@link #consumer} sets would be refused. */
    private KafkaConsumer<String, String> consumerProtocolMember(String group,
            Map<String, String> extra) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.putAll(extra);
        return new KafkaConsumer<>(props);
    }

    /** A static member (group.instance.id) closed and started again keeps its partitions. */
    private void staticMembership() throws Exception {
        check(!sent.isEmpty(), "nothing to read: producer.idempotent failed");
        String group = prefix + "-static";
        Map<String, String> extra = Map.of(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "static-1",
                ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "30000");
        Set<TopicPartition> first = assignedOnce(group, extra);
        checkEqual(DATA_PARTITIONS, first.size(), "partitions of the only member");
        ConsumerGroupDescription described =
                get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
        checkEqual(1, described.members().size(), "members while the static member is away");
        checkEqual(Optional.of("static-1"), described.members().iterator().next().groupInstanceId(),
                "the member's group.instance.id");
        checkEqual(first, assignedOnce(group, extra), "partitions after the restart");
    }

    /** Joins {@code group}, waits for an assignment and closes (a static member stays). */
    private Set<TopicPartition> assignedOnce(String group, Map<String, String> extra)
            throws Exception {
        try (KafkaConsumer<String, String> member = consumer(group, extra)) {
            member.subscribe(List.of(dataTopic));
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (member.assignment().isEmpty()) {
                check(System.nanoTime() < deadline, "no assignment for the static member");
                member.poll(Duration.ofMillis(100));
            }
            return Set.copyOf(member.assignment());
        }
    }

    private static int count(Map<TopicPartition, Map<Long, ConsumerRecord<String, String>>> received) {
        return received.values().stream().mapToInt(Map::size).sum();
    }

    /** Both members hold part of the topic, all of it between them, and are at its end. */
    private static boolean groupDone(List<KafkaConsumer<String, String>> members,
            Map<TopicPartition, Long> ends,
            Map<TopicPartition, Map<Long, ConsumerRecord<String, String>>> received) {
        Set<TopicPartition> union = new HashSet<>();
        int total = 0;
        for (KafkaConsumer<String, String> member : members) {
            Set<TopicPartition> assigned = member.assignment();
            if (assigned.isEmpty()) {
                return false;
            }
            union.addAll(assigned);
            total += assigned.size();
            for (TopicPartition partition : assigned) {
                if (member.position(partition, Duration.ofSeconds(WAIT_S)) < ends.get(partition)) {
                    return false;
                }
            }
        }
        return union.equals(ends.keySet()) && total == ends.size()
                && count(received) == ends.values().stream().mapToLong(Long::longValue).sum();
    }

    // --- transactions ---------------------------------------------------------------

    private static List<String> values(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).collect(Collectors.toList());
    }

    private static List<String> numbered(String stem, int from, int to) {
        List<String> names = new ArrayList<>();
        for (int i = from; i < to; i++) {
            names.add(stem + "-" + i);
        }
        return names;
    }

    /** One transaction committed, one aborted, one committed: read_committed sees two. */
    private void commitAndAbort() throws Exception {
        String topic = prefix + "-txn";
        TopicPartition partition = new TopicPartition(topic, 0);
        createTopic(topic, 1);
        try (KafkaProducer<String, String> producer = transactionalProducer(prefix + "-txn-id")) {
            producer.initTransactions();
            producer.beginTransaction();
            for (String value : numbered("committed", 0, 5)) {
                producer.send(new ProducerRecord<>(topic, value));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            for (String value : numbered("aborted", 0, 5)) {
                producer.send(new ProducerRecord<>(topic, value));
            }
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            for (String value : numbered("committed", 5, 8)) {
                producer.send(new ProducerRecord<>(topic, value));
            }
            producer.commitTransaction();
        }
        List<String> all = new ArrayList<>(numbered("committed", 0, 5));
        all.addAll(numbered("aborted", 0, 5));
        all.addAll(numbered("committed", 5, 8));
        checkEqual(numbered("committed", 0, 8), values(readAll(partition, "read_committed")),
                "values read_committed");
        checkEqual(all, values(readAll(partition, "read_uncommitted")), "values read_uncommitted");
        // 13 records and a commit or abort marker after each of the three transactions.
        ListOffsetsResultInfo latest = get(admin.listOffsets(Map.of(partition, OffsetSpec.latest()),
                new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(partition));
        checkEqual(16L, latest.offset(), "the last stable offset");
    }

    /** A second producer with the same transactional id fences the first. */
    private void fencedZombie() throws Exception {
        String topic = prefix + "-zombie";
        TopicPartition partition = new TopicPartition(topic, 0);
        createTopic(topic, 1);
        String transactionalId = prefix + "-zombie-id";
        try (KafkaProducer<String, String> zombie = transactionalProducer(transactionalId)) {
            zombie.initTransactions();
            zombie.beginTransaction();
            get(zombie.send(new ProducerRecord<>(topic, "from-zombie")));
            try (KafkaProducer<String, String> successor = transactionalProducer(transactionalId)) {
                successor.initTransactions(); // aborts the zombie's open transaction
                Exception refused = null;
                try {
                    zombie.send(new ProducerRecord<>(topic, "zombie-again"));
                    zombie.commitTransaction();
                } catch (Exception failure) {
                    refused = failure;
                }
                check(refused != null, "the fenced producer committed");
                boolean fenced = false;
                for (Throwable t = refused; t != null; t = t.getCause()) {
                    fenced |= t instanceof ProducerFencedException
                            || t instanceof InvalidProducerEpochException;
                }
                check(fenced, "the zombie's commit failed but not as fenced: "
                        + Checks.describe(refused));
                successor.beginTransaction();
                successor.send(new ProducerRecord<>(topic, "from-successor"));
                successor.commitTransaction();
            }
        }
        checkEqual(List.of("from-successor"), values(readAll(partition, "read_committed")),
                "values read_committed");
    }

    /** Consumed offsets committed in a transaction become the group's committed offsets. */
    private void sendOffsetsToTransaction() throws Exception {
        String topic = prefix + "-txn-out";
        String group = prefix + "-txn-group";
        createTopic(topic, 1);
        TopicPartition source = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> producer = transactionalProducer(prefix + "-offsets-id")) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "copied"));
            producer.sendOffsetsToTransaction(Map.of(source, new OffsetAndMetadata(5, "txn-meta")),
                    new ConsumerGroupMetadata(group));
            producer.commitTransaction();
        }
        Map<TopicPartition, OffsetAndMetadata> committed =
                get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        checkEqual(Map.of(source, new OffsetAndMetadata(5, "txn-meta")),
                withoutLeaderEpoch(committed), "the group's committed offsets");
    }

    private static Map<TopicPartition, OffsetAndMetadata> withoutLeaderEpoch(
            Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<TopicPartition, OffsetAndMetadata> plain = new HashMap<>();
        offsets.forEach((p, o) -> plain.put(p, new OffsetAndMetadata(o.offset(), o.metadata())));
        return plain;
    }

    // --- Admin ----------------------------------------------------------------------

    private void createTopics() throws Exception {
        String topic = prefix + "-created";
        NewTopic newTopic = new NewTopic(topic, 3, (short) 1)
                .configs(Map.of("retention.ms", "86400000"));
        CreateTopicsResult created = admin.createTopics(List.of(newTopic));
        get(created.all());
        checkEqual(3, get(created.numPartitions(topic)), "numPartitions");
        checkEqual(1, get(created.replicationFactor(topic)), "replicationFactor");
        Uuid topicId = get(created.topicId(topic));
        check(topicId != null && !topicId.equals(Uuid.ZERO_UUID), "a topic id: " + topicId);
        ConfigEntry retention = get(created.config(topic)).get("retention.ms");
        checkEqual("86400000", retention == null ? null : retention.value(),
                "retention.ms in the create response");
        check(get(admin.listTopics().names()).contains(topic), "listTopics has " + topic);

        Throwable again = failureOf(admin.createTopics(List.of(newTopic)).all());
        check(again instanceof TopicExistsException,
                "creating it again: " + (again == null ? "succeeded" : Checks.describe(again)));

        String validated = prefix + "-validate-only";
        get(admin.createTopics(List.of(new NewTopic(validated, 2, (short) 1)),
                new CreateTopicsOptions().validateOnly(true)).all());
        check(!get(admin.listTopics().names()).contains(validated),
                "validateOnly created the topic");
    }

    private void describeTopics() throws Exception {
        String topic = prefix + "-described";
        createTopic(topic, 3);
        int nodeId = get(admin.describeCluster().nodes()).iterator().next().id();
        TopicDescription byName =
                get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
        checkEqual(topic, byName.name(), "name");
        check(!byName.isInternal(), "an internal topic");
        checkEqual(3, byName.partitions().size(), "partitions");
        for (TopicPartitionInfo info : byName.partitions()) {
            check(info.leader() != null && info.leader().id() == nodeId,
                    "partition " + info.partition() + " leader " + info.leader());
            checkEqual(List.of(nodeId), ids(info.replicas()), "replicas");
            checkEqual(List.of(nodeId), ids(info.isr()), "isr");
        }
        Uuid topicId = byName.topicId();
        check(topicId != null && !topicId.equals(Uuid.ZERO_UUID), "a topic id: " + topicId);

        Throwable missing = failureOf(admin.describeTopics(List.of(prefix + "-missing"))
                .allTopicNames());
        check(missing instanceof UnknownTopicOrPartitionException,
                "describing a missing topic: " + (missing == null ? "succeeded" : Checks.describe(missing)));
    }

    private void describeTopicsById() throws Exception {
        String topic = prefix + "-described-by-id";
        createTopic(topic, 2);
        Uuid topicId = get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic).topicId();
        TopicDescription byId = get(admin.describeTopics(TopicCollection.ofTopicIds(List.of(topicId)))
                .allTopicIds()).get(topicId);
        checkEqual(topic, byId.name(), "the name described by id");
        checkEqual(2, byId.partitions().size(), "partitions described by id");
    }

    private static List<Integer> ids(Collection<Node> nodes) {
        return nodes.stream().map(Node::id).collect(Collectors.toList());
    }

    private void createPartitions() throws Exception {
        String topic = prefix + "-grown";
        createTopic(topic, 2);
        get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all());
        waitUntil(() -> partitionCount(topic) == 5, Duration.ofSeconds(WAIT_S),
                "describeTopics shows 5 partitions");
        Throwable shrink = failureOf(admin.createPartitions(
                Map.of(topic, NewPartitions.increaseTo(4))).all());
        check(shrink instanceof InvalidPartitionsException,
                "shrinking to 4: " + (shrink == null ? "succeeded" : Checks.describe(shrink)));
        // The new partitions take writes.
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            RecordMetadata written = get(producer.send(new ProducerRecord<>(topic, 4, "k", "v")));
            checkEqual(0L, written.offset(), "offset in the new partition 4");
        }
    }

    private int partitionCount(String topic) {
        try {
            return get(admin.describeTopics(List.of(topic)).allTopicNames())
                    .get(topic).partitions().size();
        } catch (Exception failure) {
            return -1;
        }
    }

    private void incrementalAlterConfigs() throws Exception {
        String topic = prefix + "-configured";
        createTopic(topic, 1);
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        get(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"),
                        AlterConfigOp.OpType.SET)))).all());
        get(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("max.message.bytes", ""),
                        AlterConfigOp.OpType.DELETE)))).all());
        Config config = get(admin.describeConfigs(List.of(resource)).all()).get(resource);
        ConfigEntry retention = config.get("retention.ms");
        check(retention != null, "describeConfigs has retention.ms");
        checkEqual("3600000", retention.value(), "retention.ms");
        checkEqual(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(),
                "retention.ms's source");
        ConfigEntry maxMessageBytes = config.get("max.message.bytes");
        check(maxMessageBytes != null, "describeConfigs has max.message.bytes");
        checkEqual("1048588", maxMessageBytes.value(), "max.message.bytes after its DELETE");
        checkEqual(ConfigEntry.ConfigSource.DEFAULT_CONFIG, maxMessageBytes.source(),
                "max.message.bytes's source after its DELETE");

        Throwable invalid = failureOf(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET))))
                .all());
        check(invalid instanceof InvalidConfigurationException,
                "retention.ms=soon: " + (invalid == null ? "accepted" : Checks.describe(invalid)));
    }

    private void describeBrokerConfigs() throws Exception {
        Node node = get(admin.describeCluster().nodes()).iterator().next();
        ConfigResource resource = new ConfigResource(ConfigResource.Type.BROKER, node.idString());
        Config config = get(admin.describeConfigs(List.of(resource)).all()).get(resource);
        ConfigEntry partitions = config.get("num.partitions");
        check(partitions != null, "the broker's configs have num.partitions");
        checkEqual("1", partitions.value(), "num.partitions");
    }

    private void listOffsets() throws Exception {
        String topic = prefix + "-offsets";
        TopicPartition partition = new TopicPartition(topic, 0);
        createTopic(topic, 1);
        long base = System.currentTimeMillis() - 60_000;
        long[] timestamps = {base, base + 5_000, base + 1_000};
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            for (int i = 0; i < timestamps.length; i++) {
                // One batch each, so the largest timestamp is not the last batch's.
                get(producer.send(new ProducerRecord<>(topic, 0, timestamps[i], "k" + i, "v" + i)));
            }
        }
        checkEqual(0L, listOffset(partition, OffsetSpec.earliest()).offset(), "earliest");
        checkEqual(3L, listOffset(partition, OffsetSpec.latest()).offset(), "latest");
        ListOffsetsResultInfo max = listOffset(partition, OffsetSpec.maxTimestamp());
        checkEqual(List.of(1L, base + 5_000), List.of(max.offset(), max.timestamp()),
                "max-timestamp's offset and timestamp");
        ListOffsetsResultInfo byTime = listOffset(partition, OffsetSpec.forTimestamp(base + 500));
        checkEqual(List.of(1L, base + 5_000), List.of(byTime.offset(), byTime.timestamp()),
                "the first offset at or after base+500 ms, and its timestamp");
        ListOffsetsResultInfo after = listOffset(partition, OffsetSpec.forTimestamp(base + 10_000));
        checkEqual(-1L, after.offset(), "the offset for a timestamp after every record's");
    }

    private ListOffsetsResultInfo listOffset(TopicPartition partition, OffsetSpec spec)
            throws Exception {
        return get(admin.listOffsets(Map.of(partition, spec)).partitionResult(partition));
    }

    private void deleteRecords() throws Exception {
        String topic = prefix + "-trimmed";
        TopicPartition partition = new TopicPartition(topic, 0);
        createTopic(topic, 1);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
            }
            producer.flush();
        }
        long low = get(admin.deleteRecords(Map.of(partition, RecordsToDelete.beforeOffset(3)))
                .lowWatermarks().get(partition)).lowWatermark();
        checkEqual(3L, low, "the low watermark");
        checkEqual(3L, listOffset(partition, OffsetSpec.earliest()).offset(), "earliest");
        List<ConsumerRecord<String, String>> left = readAll(partition, "read_uncommitted");
        checkEqual(List.of("v3", "v4"), values(left), "what is left");
        checkEqual(3L, left.get(0).offset(), "the first offset left");
    }

    private void describeCluster() throws Exception {
        DescribeClusterResult cluster = admin.describeCluster();
        String clusterId = get(cluster.clusterId());
        check(clusterId != null && !clusterId.isEmpty(), "a cluster id: " + clusterId);
        Collection<Node> nodes = get(cluster.nodes());
        checkEqual(1, nodes.size(), "nodes");
        Node node = nodes.iterator().next();
        checkEqual(bootstrap, node.host() + ":" + node.port(), "the node's address");
        Node controller = get(cluster.controller());
        check(controller != null && controller.id() == node.id(), "the controller: " + controller);
    }

    private void describeProducers() throws Exception {
        check(!sent.isEmpty(), "nothing written: producer.idempotent failed");
        TopicPartition partition = new TopicPartition(dataTopic, 0);
        PartitionProducerState state = get(admin.describeProducers(List.of(partition))
                .partitionResult(partition));
        List<ProducerState> producers = state.activeProducers();
        checkEqual(1, producers.size(), "active producers of " + partition);
        ProducerState producer = producers.get(0);
        check(producer.producerId() >= 0, "a producer id: " + producer.producerId());
        checkEqual(sent.get(0).size() - 1, producer.lastSequence(), "the last sequence");
    }

    @SuppressWarnings("deprecation") // listConsumerGroups: still served, as Kafka 4 keeps it
    private void consumerGroups() throws Exception {
        String topic = prefix + "-grouped";
        String group = prefix + "-admin-group";
        createTopic(topic, 2);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, "k" + i, "v" + i));
            }
            producer.flush();
        }
        Set<TopicPartition> partitions =
                Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        try (KafkaConsumer<String, String> member = consumer(group, Map.of())) {
            member.subscribe(List.of(topic));
            int[] received = {0};
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (received[0] < 10) {
                check(System.nanoTime() < deadline, "read " + received[0] + " of 10 records");
                received[0] += member.poll(Duration.ofMillis(200)).count();
            }
            member.commitSync(Duration.ofSeconds(WAIT_S));
            Collection<ConsumerGroupListing> listed = get(admin.listConsumerGroups().all());
            check(listed.stream().anyMatch(g -> g.groupId().equals(group)),
                    "listConsumerGroups has " + group);
            ConsumerGroupDescription description =
                    get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
            checkEqual(GroupState.STABLE, description.groupState(), "the group's state");
            checkEqual(1, description.members().size(), "members");
            MemberDescription described = description.members().iterator().next();
            checkEqual(partitions, described.assignment().topicPartitions(), "the member's assignment");
            check(description.coordinator() != null && description.coordinator().id() >= 0,
                    "a coordinator: " + description.coordinator());
            checkEqual("range", description.partitionAssignor(), "the default assignor's name");
        }
        Map<TopicPartition, OffsetAndMetadata> committed =
                get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        Map<TopicPartition, Long> offsets = new HashMap<>();
        committed.forEach((p, o) -> offsets.put(p, o.offset()));
        checkEqual(Map.of(new TopicPartition(topic, 0), 5L, new TopicPartition(topic, 1), 5L),
                offsets, "committed offsets");
        ConsumerGroupDescription empty =
                get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
        checkEqual(GroupState.EMPTY, empty.groupState(), "the state once the member left");
        checkEqual(0, empty.members().size(), "members once the member left");
        groupForOffsets = group;
    }

    @SuppressWarnings("deprecation")
    private void consumerGroupOffsets() throws Exception {
        check(groupForOffsets != null, "no group: admin.consumer-groups failed");
        String group = groupForOffsets;
        String topic = prefix + "-grouped";
        TopicPartition first = new TopicPartition(topic, 0);
        TopicPartition second = new TopicPartition(topic, 1);
        get(admin.alterConsumerGroupOffsets(group, Map.of(first, new OffsetAndMetadata(1))).all());
        get(admin.deleteConsumerGroupOffsets(group, Set.of(second)).all());
        Map<TopicPartition, OffsetAndMetadata> committed =
                get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        Map<TopicPartition, Long> offsets = new HashMap<>();
        committed.forEach((p, o) -> {
            if (o != null) {
                offsets.put(p, o.offset());
            }
        });
        checkEqual(Map.of(first, 1L), offsets, "offsets after the alter and the delete");
        get(admin.deleteConsumerGroups(List.of(group)).all());
        check(get(admin.listConsumerGroups().all()).stream().noneMatch(g -> g.groupId().equals(group)),
                "the deleted group is still listed");
    }

    private void describeLogDirs() throws Exception {
        check(!sent.isEmpty(), "nothing written: producer.idempotent failed");
        Node node = get(admin.describeCluster().nodes()).iterator().next();
        Map<String, LogDirDescription> dirs = get(admin.describeLogDirs(List.of(node.id()))
                .allDescriptions()).get(node.id());
        checkEqual(1, dirs == null ? 0 : dirs.size(), "log dirs of broker " + node.id());
        LogDirDescription dir = dirs.values().iterator().next();
        check(dir.error() == null, "the log dir's error: " + dir.error());
        for (int p = 0; p < DATA_PARTITIONS; p++) {
            ReplicaInfo replica = dir.replicaInfos().get(new TopicPartition(dataTopic, p));
            check(replica != null && replica.size() > 0, dataTopic + "-" + p + ": " + replica);
            checkEqual(0L, replica.offsetLag(), "the offset lag of " + dataTopic + "-" + p);
        }
        check(dir.totalBytes().isPresent() && dir.usableBytes().isPresent(),
                "the log dir's total and usable bytes: " + dir);
    }

    /** The transactions of transactions.commit-abort-read-committed, as Admin lists them. */
    private void describeTransactions() throws Exception {
        String transactionalId = prefix + "-txn-id";
        Collection<TransactionListing> listed = get(admin.listTransactions().all());
        TransactionListing listing = listed.stream()
                .filter(t -> t.transactionalId().equals(transactionalId)).findFirst().orElse(null);
        check(listing != null, "listTransactions has " + transactionalId + ": " + listed);
        checkEqual(TransactionState.COMPLETE_COMMIT, listing.state(), "its listed state");
        TransactionDescription description =
                get(admin.describeTransactions(List.of(transactionalId)).description(transactionalId));
        checkEqual(TransactionState.COMPLETE_COMMIT, description.state(), "its described state");
        checkEqual(listing.producerId(), description.producerId(), "its producer id");
        checkEqual(30_000L, description.transactionTimeoutMs(), "its transaction timeout");
        checkEqual(Set.of(), description.topicPartitions(), "partitions of a completed transaction");
    }

    private void electLeaders() throws Exception {
        check(!sent.isEmpty(), "no topic: producer.idempotent failed");
        TopicPartition partition = new TopicPartition(dataTopic, 0);
        Map<TopicPartition, Optional<Throwable>> outcome = get(admin.electLeaders(
                ElectionType.PREFERRED, Set.of(partition)).partitions());
        Optional<Throwable> failure = outcome.get(partition);
        check(failure != null && failure.isPresent()
                && failure.get() instanceof ElectionNotNeededException,
                "electing the leader that is already preferred: " + outcome);
    }

    private void listPartitionReassignments() throws Exception {
        Map<TopicPartition, PartitionReassignment> ongoing =
                get(admin.listPartitionReassignments().reassignments());
        checkEqual(Map.of(), ongoing, "ongoing reassignments");
    }

    private void describeAcls() throws Exception {
        Throwable failure = failureOf(admin.describeAcls(AclBindingFilter.ANY).values());
        check(failure instanceof SecurityDisabledException, "describeAcls on a broker without "
                + "an authorizer: " + (failure == null ? "succeeded" : Checks.describe(failure)));
    }

    private void describeClientQuotas() throws Exception {
        Map<ClientQuotaEntity, Map<String, Double>> quotas =
                get(admin.describeClientQuotas(ClientQuotaFilter.all()).entities());
        checkEqual(Map.of(), quotas, "client quotas");
    }

    private void describeUserScramCredentials() throws Exception {
        Map<String, UserScramCredentialsDescription> users =
                get(admin.describeUserScramCredentials().all());
        checkEqual(Map.of(), users, "SCRAM users");
    }

    private void describeFeatures() throws Exception {
        FeatureMetadata features = get(admin.describeFeatures().featureMetadata());
        check(features != null, "no feature metadata");
    }

    private void deleteTopics() throws Exception {
        String topic = prefix + "-deleted";
        createTopic(topic, 2);
        get(admin.deleteTopics(List.of(topic)).all());
        waitUntil(() -> {
            try {
                return !get(admin.listTopics().names()).contains(topic);
            } catch (Exception failure) {
                return false;
            }
        }, Duration.ofSeconds(WAIT_S), "listTopics no longer has " + topic);
        Throwable missing = failureOf(admin.describeTopics(List.of(topic)).allTopicNames());
        check(missing instanceof UnknownTopicOrPartitionException,
                "describing the deleted topic: "
                        + (missing == null ? "succeeded" : Checks.describe(missing)));
        Throwable again = failureOf(admin.deleteTopics(List.of(topic)).all());
        check(again instanceof UnknownTopicOrPartitionException,
                "deleting it again: " + (again == null ? "succeeded" : Checks.describe(again)));
    }
}

// samsa's test program on KafkaJS: `node check.js <bootstrap> <step> <name>` runs one step
// against a broker and prints one JSON object (tests/compat/test_kafkajs.py reads it).
"use strict";
const { Kafka, logLevel, CompressionTypes, ConfigResourceTypes } = require("kafkajs");

const [bootstrap, step, name] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: "samsa-kafkajs-check",
  brokers: [bootstrap],
  logLevel: logLevel.ERROR,
  retry: { retries: 8 },
});
const COUNT = 60;

function record(i) {
  return { key: `key-${i}`, value: `value-${i}-${"x".repeat(i)}`, headers: { n: String(i) } };
}

// Reads `count` records of `topic` in group `groupId`; resolves to them in arrival order.
async function consume(topic, groupId, count) {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    consumer
      .run({
        eachMessage: async ({ partition, message }) => {
          seen.push({
            partition,
            offset: Number(message.offset),
            key: message.key && message.key.toString(),
            value: message.value.toString(),
            header: message.headers.n ? message.headers.n.toString() : null,
          });
          if (seen.length >= count) resolve();
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  return seen;
}

const steps = {
  // An idempotent producer writes gzip batches to 3 partitions; a group reads them back.
  async "produce-consume"() {
    const admin = kafka.admin();
    await admin.connect();
    const created = await admin.createTopics({
      topics: [{ topic: name, numPartitions: 3, replicationFactor: 1 }],
      waitForLeaders: true,
    });
    await admin.disconnect();
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const sent = [];
    for (let i = 0; i < COUNT; i += 20) {
      const messages = [];
      for (let j = i; j < i + 20; j++) messages.push(record(j));
      const meta = await producer.send({
        topic: name,
        acks: -1,
        compression: CompressionTypes.GZIP,
        messages,
      });
      for (const m of meta) sent.push({ partition: m.partition, error: m.errorCode });
    }
    await producer.disconnect();
    const seen = await consume(name, `${name}-group`, COUNT);
    return { created, sent, seen };
  },

  // Committed and aborted transactions with offsets sent to a group; read_committed reads.
  async transactions() {
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: name, numPartitions: 1 }], waitForLeaders: true });
    const producer = kafka.producer({
      transactionalId: `${name}-txn`,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    for (const [label, end] of [["committed-1", "commit"], ["aborted", "abort"], ["committed-2", "commit"]]) {
      const txn = await producer.transaction();
      await txn.send({
        topic: name,
        messages: [0, 1, 2].map((i) => ({ key: label, value: `${label}-${i}` })),
      });
      await txn.sendOffsets({
        consumerGroupId: `${name}-offsets`,
        topics: [{ topic: name, partitions: [{ partition: 0, offset: label === "aborted" ? "99" : "7" }] }],
      });
      await (end === "commit" ? txn.commit() : txn.abort());
    }
    await producer.disconnect();
    const seen = await consume(name, `${name}-reader`, 6);
    const offsets = await admin.fetchOffsets({ groupId: `${name}-offsets`, topics: [name] });
    const ends = await admin.fetchTopicOffsets(name);
    await admin.disconnect();
    return { values: seen.map((r) => r.value), offsets, high: ends.map((p) => p.high) };
  },

  // Two members of one group split six partitions between them, then read each record of
  // their own partitions once.
  async "group-split"() {
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: name, numPartitions: 6 }], waitForLeaders: true });
    const groupId = `${name}-group`;
    const members = [0, 1].map(() => kafka.consumer({ groupId, maxWaitTimeInMs: 200 }));
    const seen = [];
    const assigned = [[], []];
    let allSeen;
    const everything = new Promise((resolve) => (allSeen = resolve));
    for (const [index, consumer] of members.entries()) {
      await consumer.connect();
      await consumer.subscribe({ topic: name, fromBeginning: true });
      consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
        assigned[index] = [...(payload.memberAssignment[name] || [])].sort();
      });
      await consumer.run({
        eachMessage: async ({ partition, message }) => {
          seen.push({ member: index, partition, key: message.key.toString() });
          if (seen.length >= COUNT) allSeen();
        },
      });
    }
    // Produce once the group has settled with both members holding partitions.
    for (let i = 0; ; i++) {
      const held = assigned[0].length + assigned[1].length;
      if (held === 6 && assigned[0].length > 0 && assigned[1].length > 0) break;
      if (i === 600) throw new Error(`the group never split: ${JSON.stringify(assigned)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const producer = kafka.producer();
    await producer.connect();
    const messages = [];
    for (let i = 0; i < COUNT; i++) messages.push({ ...record(i), partition: i % 6 });
    await producer.send({ topic: name, messages });
    await producer.disconnect();
    await everything;
    const described = await admin.describeGroups([groupId]);
    for (const consumer of members) await consumer.disconnect();
    await admin.disconnect();
    return {
      seen,
      assigned,
      state: described.groups[0].state,
      protocol: described.groups[0].protocol,
      members: described.groups[0].members.length,
    };
  },

  // Admin calls: metadata, partitions, configs, offsets, deletion.
  async admin() {
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: name, numPartitions: 2 }], waitForLeaders: true });
    await admin.createPartitions({ topicPartitions: [{ topic: name, count: 4 }] });
    const metadata = await admin.fetchTopicMetadata({ topics: [name] });
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name, configEntries: [{ name: "retention.ms", value: "123456" }] }],
    });
    const configs = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name, configNames: ["retention.ms"] }],
    });
    const listed = (await admin.listTopics()).includes(name);
    await admin.deleteTopics({ topics: [name] });
    const afterDelete = (await admin.listTopics()).includes(name);
    await admin.disconnect();
    return {
      partitions: metadata.topics[0].partitions.map((p) => p.partitionId).sort(),
      retention: configs.resources[0].configEntries.map((e) => [e.configName, e.configValue]),
      listed,
      afterDelete,
    };
  },
};

steps[step]()
  .then((result) => {
    process.stdout.write(JSON.stringify(result) + "\n");
    process.exit(0);
  })
  .catch((error) => {
    process.stderr.write(`${step} failed: ${error.stack || error}\n`);
    process.exit(1);
  });

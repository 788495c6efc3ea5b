// Command sarama-check drives a samsa broker with Sarama (Debian's golang-github-shopify-sarama-dev,
// 1.22) and prints one JSON object a line for tests/compat/test_sarama.py to assert on.
//
// Sarama's default configuration (Version V0_8_2_0) is used unless -version names another;
// only what Sarama requires for the API used is set (Producer.Return.Successes for a
// SyncProducer, Consumer.Offsets.Initial = OffsetOldest for the group to read from the start).
// -step selects what to do, with topic and group named -prefix:
//
//   - round-trip: produce -count records compressed with -codec with a SyncProducer and read
//     them back with a partition consumer from the oldest offset;
//   - offset-manager: commit offset 7 through an OffsetManager, read it back with another;
//   - offset-commit-v0: commit offset 11 with an OffsetCommit v0 request, read it back with
//     OffsetFetch v0;
//   - consumer-group (V0_10_2_0 on): produce, join a group, consume, commit on leaving;
//   - consume: read -count records of -topic partition 0 from the oldest offset, one line each.
//
// Record i of a topic has key "key-<i>" and value bytes 0..(i%256)-1 followed by "value-<i>",
// the layout the Python side writes and expects too. A round trip ends with one more record,
// key "key-big", whose value (bigValue) is larger than an lz4 frame block (64 KiB).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/Shopify/sarama"
)

var (
	brokers = flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	version = flag.String("version", "", "sarama Config.Version (empty: Sarama's default)")
	step    = flag.String("step", "", "round-trip | offset-manager | offset-commit-v0 | consumer-group | consume")
	codec   = flag.String("codec", "none", "producer compression: none, gzip, snappy or lz4 (round-trip)")
	prefix  = flag.String("prefix", "sarama", "topic and group name prefix")
	topic   = flag.String("topic", "", "topic to read (consume)")
	count   = flag.Int("count", 20, "records per topic")
	debug   = flag.Bool("debug", false, "Sarama's debug log on stderr")
	timeout = flag.Duration("timeout", 30*time.Second, "how long to wait for records")
)

func emit(fields map[string]interface{}) {
	line, err := json.Marshal(fields)
	if err != nil {
		log.Fatalf("cannot encode %v: %v", fields, err)
	}
	fmt.Println(string(line))
}

func errText(err error) interface{} {
	if err == nil {
		return nil
	}
	return err.Error()
}

func recordKey(i int) []byte { return []byte(fmt.Sprintf("key-%d", i)) }

func recordValue(i int) []byte {
	value := make([]byte, 0, i%256+16)
	for b := 0; b < i%256; b++ {
		value = append(value, byte(b))
	}
	return append(value, fmt.Sprintf("value-%d", i)...)
}

const bigSize = 150000

func bigValue() []byte {
	value := make([]byte, bigSize)
	for j := range value {
		value[j] = byte((j/7*31 + j) % 251)
	}
	return value
}

func config() *sarama.Config {
	cfg := sarama.NewConfig()
	if *version != "" {
		v, err := sarama.ParseKafkaVersion(*version)
		if err != nil {
			log.Fatal(err)
		}
		cfg.Version = v
	}
	return cfg
}

func addrs() []string { return strings.Split(*brokers, ",") }

var codecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4,
}

// consumeAll reads n records of topic/partition from the oldest offset.
func consumeAll(client sarama.Client, topic string, partition int32, n int) ([]*sarama.ConsumerMessage, error) {
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, partition, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var got []*sarama.ConsumerMessage
	deadline := time.After(*timeout)
	for len(got) < n {
		select {
		case msg := <-pc.Messages():
			got = append(got, msg)
		case cerr := <-pc.Errors():
			return got, cerr
		case <-deadline:
			return got, fmt.Errorf("%d of %d records after %v", len(got), n, *timeout)
		}
	}
	return got, nil
}

// roundTrip produces count records (and the big one) compressed with the named codec and reads
// them back. Sarama itself refuses a codec its Version does not allow (lz4 before V0_10_0_0).
func roundTrip(name string) {
	cfg := config()
	cfg.Producer.Return.Successes = true // a SyncProducer requires it
	topicName := *prefix
	report := map[string]interface{}{"step": "round-trip", "codec": name, "topic": topicName,
		"version": cfg.Version.String()}
	defer emit(report)
	codec, known := codecs[name]
	if !known {
		report["error"] = "unknown codec " + name
		return
	}
	cfg.Producer.Compression = codec
	client, err := sarama.NewClient(addrs(), cfg)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	defer client.Close()
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	msgs := make([]*sarama.ProducerMessage, *count+1)
	for i := range msgs {
		key, value := recordKey(i), recordValue(i)
		if i == *count {
			key, value = []byte("key-big"), bigValue()
		}
		msgs[i] = &sarama.ProducerMessage{
			Topic: topicName, Key: sarama.ByteEncoder(key),
			Value: sarama.ByteEncoder(value), Timestamp: base.Add(time.Duration(i) * time.Millisecond),
		}
	}
	err = producer.SendMessages(msgs)
	producer.Close()
	if err != nil {
		report["error"] = errText(err)
		return
	}
	var produced []int64
	for _, m := range msgs {
		if m.Partition != 0 {
			report["error"] = fmt.Sprintf("record went to partition %d", m.Partition)
			return
		}
		produced = append(produced, m.Offset)
	}
	report["produced_offsets"] = produced
	got, err := consumeAll(client, topicName, 0, len(msgs))
	var offsets, timestamps []int64
	mismatches := []int{}
	for i, m := range got {
		offsets = append(offsets, m.Offset)
		timestamps = append(timestamps, m.Timestamp.UnixNano()/int64(time.Millisecond))
		if string(m.Key) != string(msgs[i].Key.(sarama.ByteEncoder)) ||
			string(m.Value) != string(msgs[i].Value.(sarama.ByteEncoder)) {
			mismatches = append(mismatches, i)
		}
	}
	report["consumed_offsets"] = offsets
	report["mismatches"] = mismatches
	report["base_timestamp"] = base.UnixNano() / int64(time.Millisecond)
	report["timestamps"] = timestamps
	report["error"] = errText(err)
}

// offsetManager commits offset 7 through Sarama's OffsetManager and reads it back with another.
func offsetManager() {
	cfg := config()
	topicName, group := *prefix, *prefix
	report := map[string]interface{}{"step": "offset-manager", "topic": topicName, "group": group,
		"version": cfg.Version.String()}
	defer emit(report)
	client, err := sarama.NewClient(addrs(), cfg)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	defer client.Close()
	read := func() (int64, string, error) {
		om, err := sarama.NewOffsetManagerFromClient(group, client)
		if err != nil {
			return 0, "", err
		}
		defer om.Close()
		pom, err := om.ManagePartition(topicName, 0)
		if err != nil {
			return 0, "", err
		}
		defer pom.AsyncClose() // om.Close releases it: Close would wait for the next commit tick
		offset, metadata := pom.NextOffset()
		return offset, metadata, nil
	}
	if _, err := client.Partitions(topicName); err != nil { // creates the topic
		report["error"] = errText(err)
		return
	}
	before, _, err := read()
	if err != nil {
		report["error"] = errText(err)
		return
	}
	report["before"] = before
	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	pom, err := om.ManagePartition(topicName, 0)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	pom.MarkOffset(7, "sarama-meta")
	pom.AsyncClose()
	om.Close() // flushes the commit
	after, metadata, err := read()
	report["after"], report["metadata"], report["error"] = after, metadata, errText(err)
}

// offsetCommitV0 commits with an OffsetCommit v0 request and reads it back with OffsetFetch v0.
func offsetCommitV0() {
	cfg := config()
	topicName, group := *prefix, *prefix
	report := map[string]interface{}{"step": "offset-commit-v0", "topic": topicName, "group": group,
		"version": cfg.Version.String()}
	defer emit(report)
	client, err := sarama.NewClient(addrs(), cfg)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	defer client.Close()
	if _, err := client.Partitions(topicName); err != nil {
		report["error"] = errText(err)
		return
	}
	coordinator, err := client.Coordinator(group)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	commit := &sarama.OffsetCommitRequest{Version: 0, ConsumerGroup: group}
	commit.AddBlock(topicName, 0, 11, 0, "v0-meta")
	committed, err := coordinator.CommitOffset(commit)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	report["commit_error_code"] = int16(committed.Errors[topicName][0])
	fetch := &sarama.OffsetFetchRequest{Version: 0, ConsumerGroup: group}
	fetch.AddPartition(topicName, 0)
	fetched, err := coordinator.FetchOffset(fetch)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	block := fetched.GetBlock(topicName, 0)
	if block == nil {
		report["error"] = "no block for the partition in the OffsetFetch response"
		return
	}
	report["offset"], report["metadata"] = block.Offset, block.Metadata
	report["fetch_error_code"] = int16(block.Err)
	report["error"] = nil
}

type groupHandler struct {
	received chan *sarama.ConsumerMessage
	claims   chan map[string][]int32
}

func (h *groupHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.claims <- s.Claims()
	return nil
}

func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		s.MarkMessage(msg, "")
		h.received <- msg
	}
	return nil
}

// consumerGroup produces count records, joins a group subscribed to the topic, consumes them,
// commits on leaving, and reads the committed offset back through an OffsetManager.
func consumerGroup() {
	cfg := config()
	topicName, group := *prefix, *prefix
	report := map[string]interface{}{"step": "consumer-group", "topic": topicName, "group": group,
		"version": cfg.Version.String()}
	defer emit(report)
	pcfg := config()
	pcfg.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer(addrs(), pcfg)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	for i := 0; i < *count; i++ {
		_, _, err = producer.SendMessage(&sarama.ProducerMessage{
			Topic: topicName, Key: sarama.ByteEncoder(recordKey(i)), Value: sarama.ByteEncoder(recordValue(i)),
		})
		if err != nil {
			producer.Close()
			report["error"] = errText(err)
			return
		}
	}
	producer.Close()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cg, err := sarama.NewConsumerGroup(addrs(), group, cfg)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	handler := &groupHandler{
		received: make(chan *sarama.ConsumerMessage, *count),
		claims:   make(chan map[string][]int32, 4),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cg.Consume(ctx, []string{topicName}, handler) }()
	mismatches, received := []int{}, 0
	deadline := time.After(*timeout)
wait:
	for received < *count {
		select {
		case msg := <-handler.received:
			if string(msg.Value) != string(recordValue(int(msg.Offset))) {
				mismatches = append(mismatches, int(msg.Offset))
			}
			received++
		case claims := <-handler.claims:
			report["claims"] = claims
		case err = <-done:
			break wait
		case <-deadline:
			err = fmt.Errorf("%d of %d records after %v", received, *count, *timeout)
			break wait
		}
	}
	cancel()
	if err == nil {
		err = <-done
	}
	if cerr := cg.Close(); err == nil {
		err = cerr
	}
	report["received"], report["mismatches"] = received, mismatches
	if err != nil {
		report["error"] = errText(err)
		return
	}
	client, err := sarama.NewClient(addrs(), config())
	if err != nil {
		report["error"] = errText(err)
		return
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	defer om.Close()
	pom, err := om.ManagePartition(topicName, 0)
	if err != nil {
		report["error"] = errText(err)
		return
	}
	defer pom.AsyncClose()
	report["committed"], _ = pom.NextOffset()
	report["error"] = nil
}

func consume() {
	client, err := sarama.NewClient(addrs(), config())
	if err != nil {
		emit(map[string]interface{}{"error": errText(err)})
		return
	}
	defer client.Close()
	got, err := consumeAll(client, *topic, 0, *count)
	for _, m := range got {
		headers := [][2]string{}
		for _, h := range m.Headers {
			headers = append(headers, [2]string{string(h.Key), string(h.Value)})
		}
		emit(map[string]interface{}{
			"offset": m.Offset, "key": m.Key, "value": m.Value, // []byte: base64 in JSON
			"timestamp": m.Timestamp.UnixNano() / int64(time.Millisecond), "headers": headers,
		})
	}
	emit(map[string]interface{}{"records": len(got), "error": errText(err)})
}

func main() {
	flag.Parse()
	if *debug {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
	switch *step {
	case "round-trip":
		roundTrip(*codec)
	case "offset-manager":
		offsetManager()
	case "offset-commit-v0":
		offsetCommitV0()
	case "consumer-group":
		consumerGroup()
	case "consume":
		consume()
	default:
		log.Fatalf("unknown -step %q", *step)
	}
}

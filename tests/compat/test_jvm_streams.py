"""Kafka Streams (kafka-streams 4.x) against samsa: an exactly-once word count.

``compat/jvm/src/main/java/io/samsa/compat/WordCount.java`` counts the words of an input
topic with ``processing.guarantee=exactly_once_v2``: the words are regrouped through a
repartition topic and counted in a persistent (RocksDB) store backed by a changelog topic,
both created by Streams; every new count goes to the output topic. The tests produce the
lines, read the output ``read_committed`` and check that each word's last count is exactly
its number of occurrences, and that no count was ever emitted twice or went down (what a
record processed twice, or a state restored behind its output, would show).

One short run shares the compat suite's broker; the slow ones kill the application with
SIGKILL mid-stream and restart it, and run it on three brokers with one killed.
"""

from __future__ import annotations

import itertools
import random
import struct
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from tests.compat.jvm_process import JavaProcess

from samsa.testing import BrokerProcess, LocalCluster, start_cluster
from samsa.testing.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

PROGRAM = "io.samsa.compat.WordCount"
QUIET = {"log_level": 3}
PARTITIONS = 3
WAIT_S = 120
WORDS = [f"w{i:03d}" for i in range(60)]


def sentences(count: int, seed: int) -> list[str]:
    """``count`` lines of three to eight words, some repeated, with punctuation between."""
    chosen = random.Random(seed)
    return [", ".join(chosen.choices(WORDS, k=chosen.randint(3, 8))) + "." for _ in range(count)]


def words_in(lines: list[str]) -> Counter[str]:
    return Counter(word for line in lines for word in line.rstrip(".").split(", "))


class WordCountRun:
    """One word-count application: its topics, its state directory, its JVM."""

    def __init__(self, bootstrap: str, tmp_path: Path, replication: int = 1) -> None:
        self.bootstrap = bootstrap
        self.app = f"wc-{uuid.uuid4().hex[:8]}"
        self.input, self.output = f"{self.app}-lines", f"{self.app}-counts"
        self.replication = replication
        self.produced: list[str] = []
        topics = [NewTopic(t, PARTITIONS, replication) for t in (self.input, self.output)]
        admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        for future in admin.create_topics(topics).values():
            future.result(WAIT_S)
        self.process = JavaProcess(
            tmp_path / f"{self.app}.log", PROGRAM, bootstrap, self.app, self.input,
            self.output, str(tmp_path / f"{self.app}-state"), str(replication),
        )  # fmt: skip
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, **QUIET}
        )
        self.counts: dict[str, list[int]] = {}
        """Every count read for each word, in order."""
        self.reader = self._consumer()

    def _consumer(self) -> Consumer:
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"{self.app}-check",
             "isolation.level": "read_committed", "enable.auto.commit": False, **QUIET}
        )  # fmt: skip
        consumer.assign([ConfluentPartition(self.output, p, 0) for p in range(PARTITIONS)])
        return consumer

    def start(self) -> None:
        self.process.start().wait_for("STATE RUNNING", timeout=WAIT_S)

    def produce(self, lines: list[str]) -> None:
        for line in lines:
            self.producer.produce(self.input, line.encode())
            self.producer.poll(0)
        assert self.producer.flush(WAIT_S) == 0
        self.produced += lines

    def read(
        self, consumer: Consumer | None = None, into: dict[str, list[int]] | None = None
    ) -> None:
        """Add what the output topic has committed since the last read to ``counts``."""
        for message in (consumer or self.reader).consume(10_000, 0.5):
            assert message.error() is None, message.error()
            (count,) = struct.unpack(">q", message.value())
            (self.counts if into is None else into).setdefault(message.key().decode(), []).append(
                count
            )

    def latest(self) -> dict[str, int]:
        return {word: counts[-1] for word, counts in self.counts.items()}

    def wait_for_counts(self, what: str) -> None:
        """Until the output's last counts are those of every line produced so far."""
        expected = dict(words_in(self.produced))

        def caught_up() -> bool:
            failed = [line for line in self.process.lines if line.startswith("THREAD-FAILED")]
            assert not failed and self.process.running, self.process.details()
            self.read()
            return self.latest() == expected

        wait_until(
            caught_up, f"{what}: the word counts of {len(self.produced)} lines", timeout=WAIT_S
        )

    def check_exact(self) -> None:
        """Read the whole output again once the application is closed: each word's counts
        rise strictly and end at its number of occurrences in the input."""
        consumer = self._consumer()
        counts: dict[str, list[int]] = {}
        try:
            ends = [
                consumer.get_watermark_offsets(ConfluentPartition(self.output, p), timeout=WAIT_S)[
                    1
                ]
                for p in range(PARTITIONS)
            ]

            def at_end() -> bool:
                self.read(consumer, counts)
                positions = consumer.position(
                    [ConfluentPartition(self.output, p) for p in range(PARTITIONS)]
                )
                return all(p.offset >= end for p, end in zip(positions, ends, strict=True))

            wait_until(at_end, "the output read to its end", timeout=WAIT_S)
        finally:
            consumer.close()
        assert {word: c[-1] for word, c in counts.items()} == dict(words_in(self.produced))
        for word, seen in counts.items():
            assert all(a < b for a, b in itertools.pairwise(seen)), (word, seen)

    def close(self) -> None:
        self.process.close()
        self.reader.close()


@pytest.fixture
def word_count(jvm_broker: BrokerProcess, tmp_path: Path) -> Iterator[WordCountRun]:
    run = WordCountRun(jvm_broker.bootstrap, tmp_path)
    try:
        yield run
    finally:
        run.close()


def test_word_count_exactly_once_with_a_persistent_store(
    word_count: WordCountRun, jvm_broker: BrokerProcess
) -> None:
    word_count.start()
    word_count.produce(sentences(300, seed=1))
    word_count.wait_for_counts("first lines")
    word_count.produce(sentences(100, seed=2))
    word_count.wait_for_counts("more lines")
    assert word_count.process.stop() == 0, word_count.process.details()
    assert word_count.process.printed("CLOSED")
    word_count.check_exact()
    # Streams created its internal topics on samsa, as it does on Kafka: the changelog
    # compacted, the repartition topic deleting (Streams purges what it has read).
    admin = AdminClient({"bootstrap.servers": jvm_broker.bootstrap, **QUIET})
    listed = admin.list_topics(timeout=WAIT_S)
    policies = {"-counts-changelog": "compact", "-words-repartition": "delete"}
    for suffix, policy in policies.items():
        topic = word_count.app + suffix
        assert len(listed.topics[topic].partitions) == PARTITIONS, listed.topics[topic]
        (described,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
        assert described.result(WAIT_S)["cleanup.policy"].value == policy, topic


@contextmanager
def feeding(run: WordCountRun) -> Iterator[None]:
    """Lines produced on a thread, 20 at a time, all the while: a kill is mid-stream."""
    stop = threading.Event()

    def feed() -> None:
        for batch in itertools.count():
            if stop.wait(0.05):
                return
            run.produce(sentences(20, seed=1000 + batch))

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        yield
    finally:
        stop.set()
        feeder.join()


def counts_grow(run: WordCountRun) -> Callable[[], bool]:
    """A condition: the output gained counts since it was made."""
    before = sum(len(counts) for counts in run.counts.values())

    def grown() -> bool:
        run.read()
        return sum(len(counts) for counts in run.counts.values()) > before

    return grown


@pytest.mark.slow
def test_word_count_killed_mid_stream_and_restarted(word_count: WordCountRun) -> None:
    word_count.produce(sentences(2000, seed=3))
    with feeding(word_count):
        for _ in range(3):
            word_count.start()
            # Input flowing, counts committed: SIGKILL with a transaction open or about to be.
            wait_until(counts_grow(word_count), "new counts committed", timeout=WAIT_S)
            word_count.process.kill()
        word_count.start()
        wait_until(counts_grow(word_count), "new counts after three kills", timeout=WAIT_S)
    word_count.wait_for_counts("after three kills")
    assert word_count.process.stop() == 0, word_count.process.details()
    word_count.check_exact()


@pytest.mark.slow
def test_word_count_on_three_brokers_with_one_killed(tmp_path: Path) -> None:
    cluster: LocalCluster = start_cluster(tmp_path / "cluster", 3)
    run = WordCountRun(cluster.bootstrap, tmp_path, replication=3)
    try:
        run.start()
        run.produce(sentences(500, seed=4))
        run.wait_for_counts("three brokers")
        with feeding(run):
            wait_until(counts_grow(run), "new counts committed", timeout=WAIT_S)
            victim = cluster.leader_of(run.input, 0)
            cluster.kill(victim)
            wait_until(
                counts_grow(run), f"new counts after broker {victim} was killed", timeout=WAIT_S
            )
            wait_until(counts_grow(run), "more counts", timeout=WAIT_S)
        run.wait_for_counts(f"broker {victim} killed")
        assert run.process.stop() == 0, run.process.details()
        run.check_exact()
    finally:
        run.close()
        cluster.close()

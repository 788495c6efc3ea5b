# Two set-up commands: `make run` and `make test`. Both create .venv and install
# what they need on a fresh Debian machine with Python 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
KCAT   := $(VENV)/.kcat
SPARK  := $(VENV)/.spark
ZK     := $(VENV)/.zookeeper
CHROMIUM := $(VENV)/.chromium
SARAMA := $(VENV)/.sarama
KAFKAJS := $(VENV)/.kafkajs
RDKAFKA_DEV := $(VENV)/.librdkafka-dev
JVM := $(VENV)/.jvm

.PHONY: run cluster faults console test test-slow lint bench bench-kafka pipeline clean jvm kafka

# setup.py builds samsa's optional C helper (src/samsa/records/_native.c) when a C
# compiler and Python's headers are there; the tests run it and its Python fallback,
# so they are installed here (gcc, python3-dev) when missing.
$(STAMP): pyproject.toml constraints.txt setup.py src/samsa/records/_native.c
	@$(PYTHON) -m venv --help >/dev/null 2>&1 && $(PYTHON) -c 'import ensurepip' 2>/dev/null \
	  || { echo "python venv support missing: installing python3-venv"; \
	       apt-get update -qq && apt-get install -y -qq python3-venv; }
	@command -v gcc >/dev/null 2>&1 && $(PYTHON) -c 'import os, sysconfig, sys; \
	  sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
	  || { echo "installing gcc and Python's headers (Debian packages) for samsa's C helper"; \
	       SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	       $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq gcc python3-dev; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,console,registry]'
	touch $(STAMP)

# kcat (Debian package) is one of the real clients the integration tests drive.
$(KCAT): $(STAMP)
	@command -v kcat >/dev/null 2>&1 || { echo "installing kcat (Debian package)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq kcat; }
	touch $(KCAT)

# A replicated cluster is coordinated by a real ZooKeeper (Debian's package, with
# a Java runtime); the cluster tests start their own on a free loopback port.
$(ZK): $(STAMP)
	@test -f /usr/share/java/zookeeper.jar && command -v java >/dev/null 2>&1 || { \
	  echo "installing ZooKeeper (Debian package)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq zookeeper; }
	touch $(ZK)

# The web console's browser tests drive Debian's chromium through chromium-driver
# (Selenium is pointed at /usr/bin/chromedriver: it downloads nothing).
$(CHROMIUM): $(STAMP)
	@test -x /usr/bin/chromium && test -x /usr/bin/chromedriver || { \
	  echo "installing chromium and chromium-driver (Debian packages)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver; }
	touch $(CHROMIUM)

# Sarama 1.22, the Go client (Debian's golang-github-shopify-sarama-dev: its sources and its
# dependencies' under /usr/share/gocode), and Go to build the test program with, offline.
$(SARAMA): $(STAMP)
	@command -v go >/dev/null 2>&1 && test -d /usr/share/gocode/src/github.com/Shopify/sarama || { \
	  echo "installing Go and Sarama (Debian packages)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq golang-go golang-github-shopify-sarama-dev; }
	touch $(SARAMA)

# KafkaJS 2.2, the Node.js client: Debian's nodejs and npm, then the version pinned by
# tests/compat/kafkajs/package-lock.json from the npm registry.
$(KAFKAJS): $(STAMP) tests/compat/kafkajs/package-lock.json
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	  echo "installing Node.js and npm (Debian packages)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq nodejs npm; }
	cd tests/compat/kafkajs && npm ci --no-audit --no-fund --loglevel=error
	touch $(KAFKAJS)

# bench/loadgen.py builds its C load generator on librdkafka's headers (Debian's
# librdkafka-dev) with gcc; only the benchmarks need it.
$(RDKAFKA_DEV): $(STAMP)
	@test -f /usr/include/librdkafka/rdkafka.h && command -v gcc >/dev/null 2>&1 || { \
	  echo "installing librdkafka-dev and gcc (Debian packages)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq librdkafka-dev gcc make; }
	touch $(RDKAFKA_DEV)

# Kafka's Java clients, tools, Streams, Connect and broker (compat/jvm/pom.xml) into Maven's
# local cache with the plugins a build needs (later builds work offline, `mvn -o`), and the
# JVM compatibility tests' programs compiled; target/classpath.txt is what they run with.
# A JDK and Maven are Debian's openjdk-17-jdk-headless and maven when missing.
$(JVM): $(STAMP) compat/jvm/pom.xml $(shell find compat/jvm/src -type f)
	@command -v javac >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || { \
	  echo "installing a JDK and Maven (Debian packages)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jdk-headless maven; }
	mvn -q -B -f compat/jvm/pom.xml dependency:go-offline package dependency:build-classpath \
	  -Dmdep.outputFile=target/classpath.txt
	touch compat/jvm/target/classpath.txt $(JVM)

jvm: $(JVM)

# samsa.spark: the spark extra (pyspark builds from an sdist, about a minute) and a
# Java 17+ runtime for Spark's JVM (Debian's openjdk-17-jre-headless when missing).
$(SPARK): $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,console,registry,spark]'
	@java -version 2>&1 | grep -qE 'version "(1[7-9]|[2-9][0-9])' || { \
	  echo "installing a Java 17 runtime for Spark (Debian package)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jre-headless; }
	touch $(SPARK)

# Prometheus metrics at http://127.0.0.1:9644/metrics (docs/metrics.md), the schema
# registry at http://127.0.0.1:8081 (README, "Schema registry").
run: $(STAMP)
	$(BIN)/samsa serve --override listeners=PLAINTEXT://127.0.0.1:9092 --override log.dirs=./data \
	  --override metrics.listeners=http://127.0.0.1:9644 \
	  --override schema.registry.listeners=http://127.0.0.1:8081

# The web console for the broker of `make run`, on http://127.0.0.1:8080.
console: $(STAMP)
	$(BIN)/samsa console --bootstrap-server 127.0.0.1:9092 --port 8080

# ZooKeeper and three brokers on 127.0.0.1:9092-9094, data in ./data-cluster/broker-N (apart
# from `make run`'s ./data: one broker's data dir must never hold another's); Ctrl-C stops all.
cluster: $(STAMP) $(ZK)
	$(BIN)/python -m samsa.testing.run_cluster --brokers 3 --port 9092 --data ./data-cluster

# Apache Kafka 4.3.1 (KRaft, from compat/jvm's jars) on 127.0.0.1:9192, data in ./data-kafka
# (emptied at each start), for comparing samsa with it by hand; Ctrl-C stops it.
KAFKA_NODES ?= 1
kafka: $(STAMP) $(JVM)
	$(BIN)/python -m samsa.testing.kafka --port 9192 --nodes $(KAFKA_NODES) --data ./data-kafka

# A fault-injection run: workloads on three brokers while a nemesis kills, pauses,
# restarts and cuts them off (docs/fault-injection.md); prints the checker's table.
FAULT_SECONDS ?= 600
FAULT_EVERY   ?= 10
faults: $(STAMP) $(ZK)
	$(BIN)/python -m samsa.testing.fault_run --seconds $(FAULT_SECONDS) --every $(FAULT_EVERY)

lint: $(SPARK)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy --strict src

# Two test processes (pytest-xdist): most tests wait on brokers, ZooKeeper and Spark
# rather than compute, so two share this project's 2-core machines well.
TEST_WORKERS ?= 2
test: lint $(KCAT) $(ZK) $(CHROMIUM) $(SARAMA) $(KAFKAJS) $(JVM)
	$(BIN)/pytest -m "not slow" -q -n $(TEST_WORKERS)

# Long schedules: repeated failovers, the nemesis, Spark clusters, Kafka's command-line
# tools (a JVM per run), three-node Kafka, whole-cluster data loss.
test-slow: $(SPARK) $(KCAT) $(ZK) $(CHROMIUM) $(SARAMA) $(KAFKAJS) $(RDKAFKA_DEV) $(JVM)
	$(BIN)/pytest -m slow -q

bench: $(STAMP) $(RDKAFKA_DEV)
	$(BIN)/python bench/storage_bench.py && $(BIN)/python bench/txn_bench.py && $(BIN)/python bench/group_bench.py && $(BIN)/python bench/client_bench.py
	$(BIN)/python bench/limits.py && $(BIN)/python bench/loadgen.py

# samsa beside Apache Kafka 4.3.1 (one KRaft node from make jvm's jars) in one run, the
# same C load generator against each (bench/kafka_side_by_side.py, about 5 minutes).
bench-kafka: $(STAMP) $(JVM) $(RDKAFKA_DEV)
	$(BIN)/python bench/kafka_side_by_side.py

# The click-events pipeline: a broker, a generator and a Spark Structured Streaming job.
pipeline: $(SPARK)
	$(BIN)/python -m examples.pipeline

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis

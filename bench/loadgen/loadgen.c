/*
 * loadgen: a librdkafka load generator for samsa's benchmarks (bench/loadgen.py).
 *
 * One Python process producing through confluent-kafka tops out near 1.3 M records/s,
 * so a broker measured with it is measured against its client. This program forks
 * N worker processes, each with its own librdkafka handle and its own connections,
 * starts them together once every one has connected, and prints one JSON object:
 * records and bytes moved, wall time, the workers' CPU (all their threads), and,
 * with --broker-pid, the broker's CPU over the same window (from /proc/<pid>/stat).
 *
 *   loadgen produce -b 127.0.0.1:9092 -t t -P 2 -s 1024 -a all -n 1000000
 *   loadgen consume -b 127.0.0.1:9092 -t t -P 2
 *
 * produce: N records (split over the workers) or for a duration, optionally at a fixed
 *   total rate; record values are one fixed payload of --size bytes, no key; record i of
 *   worker w goes to partition (i + w) % partitions. The window runs from the start
 *   signal to the last delivery report (rd_kafka_flush), so it counts acknowledged
 *   records only. Every delivery report is counted and the time from produce() to it
 *   is kept in a log-linear histogram (latency percentiles).
 * consume: worker w reads the partitions p with p % N == w from the beginning up to
 *   their high watermarks as seen before the start (assign, no group), or until
 *   --duration. The window runs from assign() to the last record.
 *
 * Workers write their results into a shared anonymous mapping; the parent samples the
 * broker's CPU as soon as all have finished measuring, before they tear down.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 64
#define MAX_PROPS 64
#define HIST_SUB 32 /* sub-buckets per power of two: <= 3% relative error */
#define HIST_BUCKETS 2048

struct options {
    int produce;
    const char *bootstrap;
    const char *topic;
    int workers;
    long size;
    const char *acks;
    const char *linger_ms;
    const char *batch_bytes;
    int partitions; /* 0: from metadata */
    long long records; /* produce: total to send; 0: use duration */
    double duration_s; /* 0: no limit (consume) */
    double rate; /* produce: total records/s; 0: as fast as possible */
    int broker_pid;
    int raw; /* produce: pre-encoded Produce requests, no librdkafka */
    int in_flight; /* raw: requests sent before waiting for a response */
    int nprops;
    char *props[MAX_PROPS]; /* "key=value", applied last */
};

struct result { /* one per worker, in shared memory */
    long long records;
    long long bytes;
    long long errors;
    long long expected; /* consume: records up to the high watermarks */
    double start_s; /* CLOCK_MONOTONIC */
    double end_s;
    double cpu_user_s;
    double cpu_sys_s;
    int partitions;
    int failed; /* set up failed before the start */
    char first_error[256];
    uint64_t histogram[HIST_BUCKETS]; /* produce: microseconds, produce() to report */
};

static struct options opt = {
    .workers = 1, .size = 100, .acks = "1", .linger_ms = "10", .batch_bytes = "1000000",
    .in_flight = 8,
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("loadgen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

/* -- latency histogram ------------------------------------------------------------------ */
static int hist_index(uint64_t v) {
    if (v < 2 * HIST_SUB)
        return (int)v;
    int shift = (63 - __builtin_clzll(v)) - 5; /* v >> shift is in [32, 64) */
    int idx = (shift + 1) * HIST_SUB + (int)(v >> shift) - HIST_SUB;
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

static uint64_t hist_upper(int idx) { /* the largest value a bucket holds */
    if (idx < 2 * HIST_SUB)
        return (uint64_t)idx;
    int shift = idx / HIST_SUB - 1;
    uint64_t m = (uint64_t)(idx % HIST_SUB + HIST_SUB);
    return ((m + 1) << shift) - 1;
}

static double hist_quantile(const uint64_t *h, uint64_t count, double q) {
    uint64_t rank = (uint64_t)(q * (double)count);
    if (rank >= count)
        rank = count - 1;
    uint64_t seen = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        seen += h[i];
        if (seen > rank)
            return (double)hist_upper(i) / 1000.0; /* ms */
    }
    return 0.0;
}

/* -- CPU time --------------------------------------------------------------------------- */
static void own_cpu(double *user, double *sys) { /* this process, all its threads */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int pid_cpu(int pid, double *user, double *sys) { /* utime + stime, all threads */
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut, st;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    long tck = sysconf(_SC_CLK_TCK);
    *user = (double)ut / (double)tck;
    *sys = (double)st / (double)tck;
    return 0;
}

static double machine_busy_s(void) { /* every CPU, every process: all but idle and iowait */
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0.0;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                     &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got != 8)
        return 0.0;
    unsigned long long busy = 0;
    for (int i = 0; i < 8; i++)
        busy += v[i];
    busy -= v[3] + v[4];
    return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

/* -- librdkafka set-up ------------------------------------------------------------------ */
static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK)
        die("%s=%s: %s", key, value, err);
}

static void apply_props(rd_kafka_conf_t *conf) {
    for (int i = 0; i < opt.nprops; i++) {
        char *eq = strchr(opt.props[i], '=');
        if (!eq)
            die("-X %s: expected key=value", opt.props[i]);
        *eq = 0;
        set(conf, opt.props[i], eq + 1);
        *eq = '=';
    }
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    (void)rk;
    fprintf(stderr, "loadgen[%d] %d %s: %s\n", (int)getpid(), level, fac, buf);
}

static void note_error(struct result *r, const char *what) {
    if (r->errors++ == 0)
        snprintf(r->first_error, sizeof r->first_error, "%s", what);
}

static int topic_partitions(rd_kafka_t *rk, rd_kafka_topic_t *rkt, struct result *r) {
    const struct rd_kafka_metadata *md;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
    if (err) {
        note_error(r, rd_kafka_err2str(err));
        return -1;
    }
    int n = -1;
    if (md->topic_cnt == 1 && !md->topics[0].err)
        n = md->topics[0].partition_cnt;
    else
        note_error(r, md->topic_cnt ? rd_kafka_err2str(md->topics[0].err) : "no such topic");
    rd_kafka_metadata_destroy(md);
    return n;
}

/* -- produce ---------------------------------------------------------------------------- */
static struct result *dr_result;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) {
        note_error(dr_result, rd_kafka_err2str(m->err));
        return;
    }
    dr_result->records++;
    dr_result->bytes += (long long)m->len;
    uint64_t sent = (uint64_t)(uintptr_t)m->_private, now = now_us();
    dr_result->histogram[hist_index(now > sent ? now - sent : 0)]++;
}

static void produce_worker(int w, struct result *r, int ready_fd, int go_fd) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", opt.bootstrap);
    set(conf, "acks", opt.acks);
    set(conf, "linger.ms", opt.linger_ms);
    set(conf, "batch.size", opt.batch_bytes);
    set(conf, "batch.num.messages", "1000000"); /* so the byte size closes a batch */
    set(conf, "compression.type", "none");
    set(conf, "enable.idempotence", "false");
    set(conf, "queue.buffering.max.messages", "2000000");
    set(conf, "queue.buffering.max.kbytes", "1048576");
    apply_props(conf);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    dr_result = r;
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        die("rd_kafka_new: %s", err);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, opt.topic, NULL);
    int partitions = opt.partitions ? opt.partitions : topic_partitions(rk, rkt, r);
    if (opt.partitions) /* connect before the start all the same */
        topic_partitions(rk, rkt, r);
    r->partitions = partitions;
    r->failed = partitions <= 0 || r->errors;

    long long quota = 0;
    if (opt.records) {
        quota = opt.records / opt.workers + (w < opt.records % opt.workers);
    }
    double per_worker_rate = opt.rate / opt.workers;
    char *payload = malloc((size_t)opt.size + 1);
    for (long i = 0; i < opt.size; i++)
        payload[i] = (char)('a' + (i * 7 + w) % 26);

    char c = 'r';
    if (write(ready_fd, &c, 1) != 1)
        die("write: %s", strerror(errno));
    (void)!read(go_fd, &c, 1); /* EOF: every worker has connected */
    if (r->failed)
        _exit(1);

    own_cpu(&r->cpu_user_s, &r->cpu_sys_s);
    r->start_s = now_s();
    double deadline = opt.duration_s > 0 ? r->start_s + opt.duration_s : 0;
    long long sent = 0;
    while (!opt.records || sent < quota) {
        if (deadline && (sent & 255) == 0 && now_s() >= deadline)
            break;
        if (per_worker_rate > 0) { /* record i leaves at start + i / rate */
            double due = r->start_s + (double)sent / per_worker_rate;
            double wait;
            while ((wait = due - now_s()) > 0) {
                rd_kafka_poll(rk, 0);
                struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
        int32_t partition = (int32_t)((sent + w) % partitions);
        void *stamp = (void *)(uintptr_t)now_us();
        while (rd_kafka_produce(rkt, partition, 0, payload, (size_t)opt.size, NULL, 0, stamp) ==
               -1) {
            rd_kafka_resp_err_t e = rd_kafka_last_error();
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                note_error(r, rd_kafka_err2str(e));
                goto flush;
            }
            rd_kafka_poll(rk, 1);
        }
        sent++;
        if ((sent & 1023) == 0)
            rd_kafka_poll(rk, 0);
    }
flush:
    if (rd_kafka_flush(rk, 120000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        note_error(r, "flush timed out after 120 s");
    r->end_s = now_s();
    double u, s;
    own_cpu(&u, &s);
    r->cpu_user_s = u - r->cpu_user_s;
    r->cpu_sys_s = s - r->cpu_sys_s;
    r->expected = sent;
    if (r->records != sent)
        note_error(r, "fewer delivery reports than records sent");
    free(payload);
}

/* -- produce, raw ----------------------------------------------------------------------- */
/*
 * The cheapest client there can be: one Produce v3 request per partition, each carrying
 * one record batch (magic 2, no compression, about --batch-bytes), encoded once and sent
 * again and again on one TCP connection per worker, --in-flight requests at a time. The
 * broker assigns offsets, so the same bytes append as new records every time; its work
 * per request is what it is for any client's batch. Talks to the bootstrap broker only,
 * which must lead every partition (a single-node broker). acks 1 or all.
 */
struct buffer {
    unsigned char *data;
    size_t len, cap;
};

static void put(struct buffer *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->data = realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void put8(struct buffer *b, uint8_t v) { put(b, &v, 1); }
static void put16(struct buffer *b, int16_t v) { uint16_t x = htons((uint16_t)v); put(b, &x, 2); }
static void put32(struct buffer *b, int32_t v) { uint32_t x = htonl((uint32_t)v); put(b, &x, 4); }
static void put64(struct buffer *b, int64_t v) {
    put32(b, (int32_t)((uint64_t)v >> 32));
    put32(b, (int32_t)(uint32_t)v);
}
static void put_varint(struct buffer *b, int64_t v) { /* zigzag */
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        put8(b, (uint8_t)(z | 0x80));
        z >>= 7;
    }
    put8(b, (uint8_t)z);
}
static void put_string(struct buffer *b, const char *s) {
    put16(b, (int16_t)strlen(s));
    put(b, s, strlen(s));
}
static void set32(unsigned char *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return ntohl(v); }

static uint32_t crc32c(const unsigned char *p, size_t n) {
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* One record batch of `count` records of `size` bytes; returns its bytes. */
static struct buffer record_batch(int count, const char *value, long size) {
    struct buffer b = {0};
    int64_t now_ms = (int64_t)time(NULL) * 1000;
    put64(&b, 0); /* base offset: the broker assigns it */
    put32(&b, 0); /* batch length, below */
    put32(&b, -1); /* partition leader epoch */
    put8(&b, 2); /* magic */
    put32(&b, 0); /* CRC, below */
    put16(&b, 0); /* attributes: no compression, create time */
    put32(&b, count - 1); /* last offset delta */
    put64(&b, now_ms);
    put64(&b, now_ms);
    put64(&b, -1); /* producer id: not idempotent */
    put16(&b, -1);
    put32(&b, -1);
    put32(&b, count);
    struct buffer r = {0};
    for (int i = 0; i < count; i++) {
        r.len = 0;
        put8(&r, 0); /* attributes */
        put_varint(&r, 0); /* timestamp delta */
        put_varint(&r, i); /* offset delta */
        put_varint(&r, -1); /* no key */
        put_varint(&r, size);
        put(&r, value, (size_t)size);
        put_varint(&r, 0); /* no headers */
        put_varint(&b, (int64_t)r.len);
        put(&b, r.data, r.len);
    }
    free(r.data);
    set32(b.data + 8, (uint32_t)(b.len - 12));
    set32(b.data + 17, crc32c(b.data + 21, b.len - 21));
    return b;
}

static int16_t acks_value(void) {
    if (!strcmp(opt.acks, "all") || !strcmp(opt.acks, "-1"))
        return -1;
    int a = atoi(opt.acks);
    if (a != 1)
        die("--raw takes acks 1 or all");
    return (int16_t)a;
}

static int connect_bootstrap(void) {
    char host[256];
    snprintf(host, sizeof host, "%s", opt.bootstrap);
    char *comma = strchr(host, ',');
    if (comma)
        *comma = 0;
    char *colon = strrchr(host, ':');
    if (!colon)
        die("--bootstrap: expected HOST:PORT");
    *colon = 0;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai))
        die("cannot resolve %s", opt.bootstrap);
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen))
        die("connect %s: %s", opt.bootstrap, strerror(errno));
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, unsigned char *p, size_t n) {
    while (n) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads one Produce v3 response; returns its error code (or -1 on a broken connection). */
static int read_produce_response(int fd, struct buffer *in, int32_t expected_correlation) {
    unsigned char head[4];
    if (read_all(fd, head, 4))
        return -1;
    size_t n = get32(head);
    if (n > in->cap) {
        in->cap = n;
        in->data = realloc(in->data, n);
    }
    if (n < 8 || read_all(fd, in->data, n) || (int32_t)get32(in->data) != expected_correlation)
        return -1;
    /* correlation id, [topic: name, [partition, error_code, base_offset, log_append_time]] */
    const unsigned char *p = in->data + 4;
    if (get32(p) != 1)
        return -1;
    size_t name_len = (size_t)((p[4] << 8) | p[5]);
    p += 6 + name_len;
    if ((size_t)(p - in->data) + 4 + 4 + 2 > n || get32(p) != 1)
        return -1;
    return (int16_t)((p[8] << 8) | p[9]);
}

static void produce_raw_worker(int w, struct result *r, int ready_fd, int go_fd) {
    /* Metadata through librdkafka: the partition count, and a check the topic exists. */
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", opt.bootstrap);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        die("rd_kafka_new: %s", err);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, opt.topic, NULL);
    int partitions = opt.partitions ? opt.partitions : topic_partitions(rk, rkt, r);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    r->partitions = partitions;
    r->failed = partitions <= 0 || r->errors;
    int16_t acks = acks_value();

    /* Records per batch: as many as fit in --batch-bytes (librdkafka's batch.size). */
    long record_bytes = opt.size + 12;
    int per_batch = (int)((atol(opt.batch_bytes) - 61) / record_bytes);
    if (per_batch < 1)
        per_batch = 1;
    char *value = malloc((size_t)opt.size + 1);
    for (long i = 0; i < opt.size; i++)
        value[i] = (char)('a' + (i * 7 + w) % 26);
    struct buffer batch = record_batch(per_batch, value, opt.size);
    struct buffer *requests = calloc((size_t)(partitions > 0 ? partitions : 1), sizeof *requests);
    for (int p = 0; p < partitions; p++) { /* size, header v1, Produce v3 body */
        struct buffer *q = &requests[p];
        put32(q, 0);
        put16(q, 0); /* Produce */
        put16(q, 3);
        put32(q, 0); /* correlation id, set per send */
        put_string(q, "samsa-loadgen");
        put16(q, -1); /* no transactional id */
        put16(q, acks);
        put32(q, 30000);
        put32(q, 1);
        put_string(q, opt.topic);
        put32(q, 1);
        put32(q, p);
        put32(q, (int32_t)batch.len);
        put(q, batch.data, batch.len);
        set32(q->data, (uint32_t)(q->len - 4));
    }
    long long quota_records = opt.records / opt.workers + (w < opt.records % opt.workers);
    long long quota = opt.records ? (quota_records + per_batch - 1) / per_batch : 0;
    int fd = r->failed ? -1 : connect_bootstrap();
    struct buffer in = {0};

    char c = 'r';
    if (write(ready_fd, &c, 1) != 1)
        die("write: %s", strerror(errno));
    (void)!read(go_fd, &c, 1);
    if (r->failed)
        _exit(1);

    own_cpu(&r->cpu_user_s, &r->cpu_sys_s);
    r->start_s = now_s();
    double deadline = opt.duration_s > 0 ? r->start_s + opt.duration_s : 0;
    long long sent = 0, acked = 0;
    uint64_t *stamps = calloc((size_t)opt.in_flight, sizeof *stamps);
    for (;;) {
        int more = (!opt.records || sent < quota) && !(deadline && now_s() >= deadline);
        if (more && sent - acked < opt.in_flight) {
            struct buffer *q = &requests[(sent + w) % partitions];
            set32(q->data + 8, (uint32_t)sent); /* correlation id */
            stamps[sent % opt.in_flight] = now_us();
            if (write_all(fd, q->data, q->len)) {
                note_error(r, "connection closed while sending");
                break;
            }
            sent++;
            continue;
        }
        if (acked == sent)
            break;
        int code = read_produce_response(fd, &in, (int32_t)acked);
        if (code < 0) {
            note_error(r, "connection closed or bad Produce response");
            break;
        }
        if (code) {
            char what[64];
            snprintf(what, sizeof what, "Produce error code %d", code);
            note_error(r, what);
        } else {
            r->records += per_batch;
            r->bytes += (long long)per_batch * opt.size;
            uint64_t t = now_us(), t0 = stamps[acked % opt.in_flight];
            r->histogram[hist_index(t > t0 ? t - t0 : 0)] += (uint64_t)per_batch;
        }
        acked++;
    }
    r->end_s = now_s();
    double u, s;
    own_cpu(&u, &s);
    r->cpu_user_s = u - r->cpu_user_s;
    r->cpu_sys_s = s - r->cpu_sys_s;
    r->expected = sent * per_batch;
    close(fd);
}

/* -- consume ---------------------------------------------------------------------------- */
static void consume_worker(int w, struct result *r, int ready_fd, int go_fd) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", opt.bootstrap);
    set(conf, "group.id", "samsa-loadgen"); /* assign() only: nothing is committed */
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.auto.offset.store", "false");
    set(conf, "enable.partition.eof", "false");
    set(conf, "fetch.min.bytes", "1");
    set(conf, "fetch.wait.max.ms", "100");
    set(conf, "fetch.max.bytes", "52428800");
    set(conf, "max.partition.fetch.bytes", "4194304");
    set(conf, "queued.min.messages", "1000000");
    set(conf, "queued.max.messages.kbytes", "262144");
    set(conf, "check.crcs", "false");
    apply_props(conf);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk)
        die("rd_kafka_new: %s", err);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, opt.topic, NULL);
    int partitions = opt.partitions ? opt.partitions : topic_partitions(rk, rkt, r);
    r->partitions = partitions;
    rd_kafka_topic_partition_list_t *mine =
        rd_kafka_topic_partition_list_new(partitions > 0 ? partitions : 1);
    for (int p = w; p < partitions; p += opt.workers) {
        int64_t low, high;
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(rk, opt.topic, p, &low, &high, 10000);
        if (e) {
            note_error(r, rd_kafka_err2str(e));
            break;
        }
        r->expected += high - low;
        rd_kafka_topic_partition_list_add(mine, opt.topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    r->failed = partitions <= 0 || r->errors;
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(rk);
    enum { BATCH = 10000 };
    rd_kafka_message_t **batch = malloc(sizeof *batch * BATCH);

    char c = 'r';
    if (write(ready_fd, &c, 1) != 1)
        die("write: %s", strerror(errno));
    (void)!read(go_fd, &c, 1);
    if (r->failed)
        _exit(1);

    own_cpu(&r->cpu_user_s, &r->cpu_sys_s);
    r->start_s = now_s();
    double deadline = opt.duration_s > 0 ? r->start_s + opt.duration_s : 0;
    double last_progress = r->start_s;
    if (mine->cnt)
        rd_kafka_assign(rk, mine);
    while (r->records < r->expected) {
        double t = now_s();
        if (deadline && t >= deadline)
            break;
        if (t - last_progress > 120) {
            note_error(r, "no record for 120 s");
            break;
        }
        long long left = r->expected - r->records; /* the call waits for all it asks for */
        ssize_t n = rd_kafka_consume_batch_queue(queue, 100, batch,
                                                 left < BATCH ? (size_t)left : BATCH);
        if (n < 0) {
            note_error(r, rd_kafka_err2str(rd_kafka_last_error()));
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (batch[i]->err)
                note_error(r, rd_kafka_err2str(batch[i]->err));
            else {
                r->records++;
                r->bytes += (long long)batch[i]->len;
            }
            rd_kafka_message_destroy(batch[i]);
        }
        if (n > 0)
            last_progress = t;
    }
    r->end_s = now_s();
    double u, s;
    own_cpu(&u, &s);
    r->cpu_user_s = u - r->cpu_user_s;
    r->cpu_sys_s = s - r->cpu_sys_s;
    if (!deadline && r->records != r->expected)
        note_error(r, "fewer records than the high watermarks");
    free(batch);
}

/* -- parent ----------------------------------------------------------------------------- */
static void usage(void) {
    fputs("usage: loadgen produce|consume -b HOST:PORT -t TOPIC [options]\n"
          "  -P, --processes N    worker processes (default 1)\n"
          "  -s, --size BYTES     record value size, produce (default 100)\n"
          "  -a, --acks 0|1|all   produce (default 1)\n"
          "  -l, --linger-ms MS   produce (default 10)\n"
          "  -B, --batch-bytes N  produce batch.size (default 1000000)\n"
          "  -p, --partitions N   partitions to use (default: the topic's)\n"
          "  -n, --records N      produce: records in total\n"
          "  -d, --duration S     stop after S seconds\n"
          "  -r, --rate R         produce: records/s in total (default: as fast as possible)\n"
          "  -X key=value         a librdkafka property (repeatable, applied last)\n"
          "  -R, --raw            produce: replay pre-encoded Produce v3 requests (no librdkafka)\n"
          "  -I, --in-flight N    raw: requests in flight per worker (default 8)\n"
          "  --broker-pid PID     report that process's CPU over the measured window\n",
          stderr);
    exit(2);
}

static void parse(int argc, char **argv) {
    static const struct option longs[] = {
        {"bootstrap", required_argument, 0, 'b'}, {"topic", required_argument, 0, 't'},
        {"processes", required_argument, 0, 'P'}, {"size", required_argument, 0, 's'},
        {"acks", required_argument, 0, 'a'},      {"linger-ms", required_argument, 0, 'l'},
        {"batch-bytes", required_argument, 0, 'B'}, {"partitions", required_argument, 0, 'p'},
        {"records", required_argument, 0, 'n'},   {"duration", required_argument, 0, 'd'},
        {"rate", required_argument, 0, 'r'},      {"broker-pid", required_argument, 0, 'K'},
        {"raw", no_argument, 0, 'R'},             {"in-flight", required_argument, 0, 'I'},
        {0, 0, 0, 0}};
    if (argc < 2)
        usage();
    if (!strcmp(argv[1], "produce"))
        opt.produce = 1;
    else if (strcmp(argv[1], "consume"))
        usage();
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "b:t:P:s:a:l:B:p:n:d:r:X:RI:", longs, NULL)) != -1) {
        switch (c) {
        case 'b': opt.bootstrap = optarg; break;
        case 't': opt.topic = optarg; break;
        case 'P': opt.workers = atoi(optarg); break;
        case 's': opt.size = atol(optarg); break;
        case 'a': opt.acks = optarg; break;
        case 'l': opt.linger_ms = optarg; break;
        case 'B': opt.batch_bytes = optarg; break;
        case 'p': opt.partitions = atoi(optarg); break;
        case 'n': opt.records = atoll(optarg); break;
        case 'd': opt.duration_s = atof(optarg); break;
        case 'r': opt.rate = atof(optarg); break;
        case 'K': opt.broker_pid = atoi(optarg); break;
        case 'R': opt.raw = 1; break;
        case 'I': opt.in_flight = atoi(optarg); break;
        case 'X':
            if (opt.nprops == MAX_PROPS)
                die("too many -X");
            opt.props[opt.nprops++] = optarg;
            break;
        default: usage();
        }
    }
    if (!opt.bootstrap || !opt.topic || optind != argc)
        usage();
    if (opt.workers < 1 || opt.workers > MAX_WORKERS)
        die("--processes must be 1..%d", MAX_WORKERS);
    if (opt.size < 0 || opt.partitions < 0 || opt.records < 0 || opt.rate < 0)
        die("negative argument");
    if (opt.in_flight < 1)
        die("--in-flight must be at least 1");
    if (opt.raw && (!opt.produce || opt.rate > 0))
        die("--raw is for produce, without --rate");
    if (opt.produce && !opt.records && opt.duration_s <= 0)
        die("produce needs --records or --duration");
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

int main(int argc, char **argv) {
    parse(argc, argv);
    struct result *results = mmap(NULL, sizeof *results * (size_t)opt.workers,
                                  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (results == MAP_FAILED)
        die("mmap: %s", strerror(errno));
    memset(results, 0, sizeof *results * (size_t)opt.workers);
    int ready[2], go[2], done[2];
    if (pipe(ready) || pipe(go) || pipe(done))
        die("pipe: %s", strerror(errno));
    pid_t pids[MAX_WORKERS];
    for (int w = 0; w < opt.workers; w++) {
        pids[w] = fork();
        if (pids[w] < 0)
            die("fork: %s", strerror(errno));
        if (pids[w] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(ready[0]);
            close(go[1]);
            close(done[0]);
            if (opt.produce && opt.raw)
                produce_raw_worker(w, &results[w], ready[1], go[0]);
            else if (opt.produce)
                produce_worker(w, &results[w], ready[1], go[0]);
            else
                consume_worker(w, &results[w], ready[1], go[0]);
            char c = 'd';
            if (write(done[1], &c, 1) != 1)
                _exit(1);
            _exit(0); /* no rd_kafka_destroy: the measurement is over, exit is enough */
        }
    }
    close(ready[1]);
    close(go[0]);
    close(done[1]);
    char c;
    for (int w = 0; w < opt.workers; w++)
        if (read(ready[0], &c, 1) != 1)
            die("a worker exited before it connected");
    for (int w = 0; w < opt.workers; w++)
        if (results[w].failed)
            die("worker %d could not set up: %s", w, results[w].first_error);

    double b_user0 = 0, b_sys0 = 0, b_user1 = 0, b_sys1 = 0;
    int have_broker = opt.broker_pid && !pid_cpu(opt.broker_pid, &b_user0, &b_sys0);
    double busy0 = machine_busy_s();
    close(go[1]); /* start */
    int finished = 0;
    while (finished < opt.workers && read(done[0], &c, 1) == 1)
        finished++;
    if (have_broker && pid_cpu(opt.broker_pid, &b_user1, &b_sys1))
        have_broker = 0;
    double busy1 = machine_busy_s();
    int status_all = 0;
    for (int w = 0; w < opt.workers; w++) {
        int status;
        waitpid(pids[w], &status, 0);
        status_all |= !WIFEXITED(status) || WEXITSTATUS(status);
    }
    if (finished < opt.workers)
        die("%d of %d workers finished", finished, opt.workers);

    long long records = 0, bytes = 0, errors = 0, expected = 0;
    double start = 0, end = 0, cpu_user = 0, cpu_sys = 0;
    static uint64_t hist[HIST_BUCKETS];
    const char *first_error = "";
    for (int w = 0; w < opt.workers; w++) {
        struct result *r = &results[w];
        records += r->records;
        bytes += r->bytes;
        errors += r->errors;
        expected += r->expected;
        cpu_user += r->cpu_user_s;
        cpu_sys += r->cpu_sys_s;
        if (!w || r->start_s < start)
            start = r->start_s;
        if (!w || r->end_s > end)
            end = r->end_s;
        if (r->errors && !*first_error)
            first_error = r->first_error;
        for (int i = 0; i < HIST_BUCKETS; i++)
            hist[i] += r->histogram[i];
    }
    double seconds = end - start;
    printf("{\"mode\": \"%s\", \"topic\": ", opt.produce ? "produce" : "consume");
    json_string(opt.topic);
    printf(", \"processes\": %d, \"partitions\": %d", opt.workers, results[0].partitions);
    if (opt.produce) {
        printf(", \"record_size\": %ld, \"acks\": ", opt.size);
        json_string(opt.acks);
        printf(", \"linger_ms\": %s, \"batch_bytes\": %s, \"rate\": %.0f, \"raw\": %s",
               opt.linger_ms, opt.batch_bytes, opt.rate, opt.raw ? "true" : "false");
        if (opt.raw)
            printf(", \"in_flight\": %d", opt.in_flight);
    }
    printf(", \"records\": %lld, \"expected\": %lld, \"bytes\": %lld, \"errors\": %lld", records,
           expected, bytes, errors);
    printf(", \"first_error\": ");
    json_string(first_error);
    printf(", \"seconds\": %.6f, \"records_per_s\": %.1f, \"mb_per_s\": %.3f", seconds,
           seconds > 0 ? (double)records / seconds : 0.0,
           seconds > 0 ? (double)bytes / seconds / 1e6 : 0.0);
    printf(", \"generator_cpu\": {\"user_s\": %.3f, \"sys_s\": %.3f}", cpu_user, cpu_sys);
    if (have_broker)
        printf(", \"broker_cpu\": {\"pid\": %d, \"user_s\": %.3f, \"sys_s\": %.3f}",
               opt.broker_pid, b_user1 - b_user0, b_sys1 - b_sys0);
    else
        printf(", \"broker_cpu\": null");
    printf(", \"machine_busy_s\": %.3f", busy1 - busy0);
    if (opt.produce && records > 0)
        printf(", \"latency_ms\": {\"p50\": %.3f, \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f}",
               hist_quantile(hist, (uint64_t)records, 0.5),
               hist_quantile(hist, (uint64_t)records, 0.99),
               hist_quantile(hist, (uint64_t)records, 0.999),
               hist_quantile(hist, (uint64_t)records, 1.0));
    printf(", \"per_process\": [");
    for (int w = 0; w < opt.workers; w++) {
        struct result *r = &results[w];
        printf("%s{\"records\": %lld, \"bytes\": %lld, \"errors\": %lld, \"seconds\": %.6f, "
               "\"cpu_user_s\": %.3f, \"cpu_sys_s\": %.3f}",
               w ? ", " : "", r->records, r->bytes, r->errors, r->end_s - r->start_s,
               r->cpu_user_s, r->cpu_sys_s);
    }
    printf("]}\n");
    fflush(stdout);
    return errors || status_all || (!opt.duration_s && records != expected) ? 1 : 0;
}

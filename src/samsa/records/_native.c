/* samsa.records._native: the per-record loops of RecordBatch v2 that Python cannot
 * do column by column, in C.
 *
 * Optional: setup.py builds it when a C compiler and Python's headers are there,
 * and every caller falls back to its numpy/Python path when it is not
 * (samsa.spark.columns). Nothing here keeps state, allocates Python objects per
 * record, or holds the GIL while it walks the bytes.
 *
 * scan_records(records, count, fields) -> int
 *     Walks ``count`` records (Kafka's Record v2: length, attributes,
 *     timestampDelta, offsetDelta, keyLength, key, valueLength, value,
 *     headerCount, headers) laid end to end in ``records`` (any bytes-like
 *     object), and writes nine int64 columns of ``count`` values each into the
 *     writable buffer ``fields`` (column after column): each record's start and
 *     end, timestamp delta, offset delta, key start and length, value start and
 *     length (-1: null), and a flag set when the record has headers or bytes
 *     after its header count (those are left to the record decoder). Returns
 *     how many records are flagged. Raises ValueError, with the same words as
 *     the Python path, when the records do not fit their lengths.
 *
 * scan_headers(records, header_at, record_end, counts, spans) -> int
 *     The headers of the records whose header count is at ``header_at`` (int64) and
 *     which end at ``record_end``: each record's header count into ``counts``, and,
 *     when ``spans`` (writable int64) has room for 4 columns of the total, each
 *     header's key start and length and value start and length (-1: null) column
 *     after column. Returns how many headers there are (call once with an empty
 *     ``spans`` to learn it), or -1 when a record is not plain — a null or
 *     oversized key, a length past the record, bytes after the last header, more
 *     headers than spans has room for — for the record decoder to judge.
 *
 * encode_records(order, offset_deltas, key_starts, key_sizes, key_data,
 *                value_starts, value_sizes, value_data, starts) -> bytes
 *     The records of rows ``order`` (int64 row numbers), back to back, each with
 *     timestamp delta 0, the offset delta of its place in ``offset_deltas``, the
 *     key ``key_data[key_starts[row]:][:key_sizes[row]]`` (size -1: null) and the
 *     value likewise, and no headers; ``starts`` (n + 1 int64, written) gets where
 *     each record starts and the total. The bytes Producer.send builds for them.
 *
 * encode_records_with_headers(order, offset_deltas, key_starts, key_sizes, key_data,
 *                             value_starts, value_sizes, value_data, header_first,
 *                             header_count, header_key_starts, header_key_sizes,
 *                             header_key_data, header_value_starts,
 *                             header_value_sizes, header_value_data, starts) -> bytes
 *     The same, each row with the headers header_first[row] .. + header_count[row]
 *     of the header columns (keys never null, values -1: null).
 *
 * murmur2_partitions(key_starts, key_sizes, key_data, num_partitions, partitions)
 *     Kafka's default partitioner, toPositive(murmur2(key)) % num_partitions, for
 *     every key (size -1: null, partition -1), written to the int64 buffer
 *     ``partitions``.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_VARINT_BYTES 5
#define MAX_VARLONG_BYTES 10
#define FIELDS 9
#define SMALLEST_RECORD 6

enum scan_error {
    SCAN_OK,
    SCAN_ENDS_EARLY,
    SCAN_LENGTH,
    SCAN_VARINT,
    SCAN_KEY,
    SCAN_VALUE,
};

/* A zig-zag varint of at most max_bytes bytes at *pos, all of them before limit. */
static int
read_varint(const uint8_t *data, Py_ssize_t limit, Py_ssize_t *pos, int max_bytes,
            int64_t *value)
{
    uint64_t unsigned_value = 0;
    Py_ssize_t at = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (at >= limit)
            return -1;
        uint8_t byte = data[at++];
        unsigned_value |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *value = (int64_t)(unsigned_value >> 1) ^ -(int64_t)(unsigned_value & 1);
            *pos = at;
            return 0;
        }
    }
    return -1;
}

static PyObject *
scan_records(PyObject *module, PyObject *args)
{
    Py_buffer records, fields;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*nw*", &records, &count, &fields))
        return NULL;
    if (count < 0 || fields.len / (Py_ssize_t)sizeof(int64_t) / FIELDS < count) {
        PyBuffer_Release(&records);
        PyBuffer_Release(&fields);
        PyErr_SetString(PyExc_ValueError, "fields holds fewer than 9 int64 columns of count");
        return NULL;
    }
    const uint8_t *data = (const uint8_t *)records.buf;
    const Py_ssize_t size = records.len;
    int64_t *out = (int64_t *)fields.buf;
    int64_t *start = out, *end = out + count, *timestamp_delta = out + 2 * count,
            *offset_delta = out + 3 * count, *key_start = out + 4 * count,
            *key_length = out + 5 * count, *value_start = out + 6 * count,
            *value_length = out + 7 * count, *flagged = out + 8 * count;
    enum scan_error error = SCAN_OK;
    int64_t bad_length = 0;
    Py_ssize_t bad_body = 0, unusual = 0, pos = 0;

    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, header_count;
        start[i] = pos;
        if (read_varint(data, size, &pos, MAX_VARINT_BYTES, &length) < 0) {
            error = SCAN_ENDS_EARLY;
            break;
        }
        if (length < SMALLEST_RECORD || length > size - pos) {
            error = SCAN_LENGTH;
            bad_length = length;
            bad_body = pos;
            break;
        }
        const Py_ssize_t record_end = pos + (Py_ssize_t)length;
        Py_ssize_t at = pos + 1; /* past the attributes byte */
        if (read_varint(data, record_end, &at, MAX_VARLONG_BYTES, &timestamp_delta[i]) < 0
            || read_varint(data, record_end, &at, MAX_VARINT_BYTES, &offset_delta[i]) < 0
            || read_varint(data, record_end, &at, MAX_VARINT_BYTES, &key_length[i]) < 0) {
            error = SCAN_VARINT;
            break;
        }
        key_start[i] = at;
        if (key_length[i] < -1 || (key_length[i] > 0 && key_length[i] > record_end - at)) {
            error = SCAN_KEY;
            break;
        }
        if (key_length[i] > 0)
            at += (Py_ssize_t)key_length[i];
        if (read_varint(data, record_end, &at, MAX_VARINT_BYTES, &value_length[i]) < 0) {
            error = SCAN_VARINT;
            break;
        }
        value_start[i] = at;
        if (value_length[i] < -1
            || (value_length[i] > 0 && value_length[i] > record_end - at)) {
            error = SCAN_VALUE;
            break;
        }
        if (value_length[i] > 0)
            at += (Py_ssize_t)value_length[i];
        if (read_varint(data, record_end, &at, MAX_VARINT_BYTES, &header_count) < 0) {
            error = SCAN_VARINT;
            break;
        }
        flagged[i] = header_count != 0 || at != record_end;
        unusual += flagged[i];
        end[i] = record_end;
        pos = record_end;
    }
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&records);
    PyBuffer_Release(&fields);
    switch (error) {
    case SCAN_OK:
        return PyLong_FromSsize_t(unusual);
    case SCAN_ENDS_EARLY:
        PyErr_Format(PyExc_ValueError,
                     "batch declares %zd records but its records section ends early", count);
        return NULL;
    case SCAN_LENGTH:
        PyErr_Format(PyExc_ValueError,
                     "record length %lld does not fit in the %zd bytes that follow",
                     (long long)bad_length, size - bad_body);
        return NULL;
    case SCAN_VARINT:
        PyErr_SetString(PyExc_ValueError,
                        "a record's varint runs past the end of the record");
        return NULL;
    case SCAN_KEY:
        PyErr_SetString(PyExc_ValueError,
                        "a record's key length does not fit in the record");
        return NULL;
    case SCAN_VALUE:
        PyErr_SetString(PyExc_ValueError,
                        "a record's value length does not fit in the record");
        return NULL;
    }
    return NULL;
}

static PyObject *
scan_headers(PyObject *module, PyObject *args)
{
    Py_buffer records, header_at, record_end, counts, spans;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &records, &header_at, &record_end, &counts,
                          &spans))
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t n = header_at.len / (Py_ssize_t)sizeof(int64_t);
    if (record_end.len != header_at.len || counts.len < header_at.len) {
        PyErr_SetString(PyExc_ValueError, "scan_headers: columns of unequal lengths");
        goto done;
    }
    const uint8_t *data = records.buf;
    const int64_t *at_of = header_at.buf, *end_of = record_end.buf;
    int64_t *count_of = counts.buf, *out = spans.buf;
    const Py_ssize_t capacity = spans.len / (Py_ssize_t)sizeof(int64_t) / 4;
    const int filling = capacity > 0;
    int64_t total = 0;
    int simple = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && simple; i++) {
        Py_ssize_t at = (Py_ssize_t)at_of[i];
        const Py_ssize_t end = (Py_ssize_t)end_of[i];
        int64_t count, key_length, value_length;
        if (at < 0 || end > records.len || at > end
            || read_varint(data, end, &at, MAX_VARINT_BYTES, &count) < 0 || count < 0
            || count > (end - at) / 2) {
            simple = 0;
            break;
        }
        for (int64_t h = 0; h < count; h++) {
            if (read_varint(data, end, &at, MAX_VARINT_BYTES, &key_length) < 0
                || key_length < 0 || key_length > end - at) {
                simple = 0;
                break;
            }
            const Py_ssize_t key_start = at;
            at += (Py_ssize_t)key_length;
            if (read_varint(data, end, &at, MAX_VARINT_BYTES, &value_length) < 0
                || value_length < -1 || (value_length > 0 && value_length > end - at)) {
                simple = 0;
                break;
            }
            if (filling) {
                if (total >= capacity) {
                    simple = 0;
                    break;
                }
                out[total] = key_start;
                out[capacity + total] = key_length;
                out[2 * capacity + total] = at;
                out[3 * capacity + total] = value_length;
            }
            if (value_length > 0)
                at += (Py_ssize_t)value_length;
            total++;
        }
        if (at != end)
            simple = 0;
        count_of[i] = count;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(simple ? (long long)total : -1LL);
done:
    PyBuffer_Release(&records);
    PyBuffer_Release(&header_at);
    PyBuffer_Release(&record_end);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&spans);
    return result;
}

static inline uint64_t
zigzag(int64_t value)
{
    return ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
}

static inline Py_ssize_t
varint_size(int64_t value)
{
    uint64_t u = zigzag(value);
    Py_ssize_t size = 1;
    while (u >= 0x80) {
        u >>= 7;
        size++;
    }
    return size;
}

static inline uint8_t *
put_varint(uint8_t *out, int64_t value)
{
    uint64_t u = zigzag(value);
    while (u >= 0x80) {
        *out++ = (uint8_t)(u & 0x7F) | 0x80;
        u >>= 7;
    }
    *out++ = (uint8_t)u;
    return out;
}

/* The header columns of the rows (NULL: no row has headers): row r's headers are
 * entries header_first[r] .. + header_count[r], each a key (never null) and a value
 * (size -1: null) in their data buffers. */
struct header_columns {
    const int64_t *first, *count, *key_at, *key_size, *value_at, *value_size;
    const uint8_t *keys, *values;
};

/* The bytes of row r's header section: the count, then each header. */
static inline int64_t
headers_size(const struct header_columns *h, int64_t row)
{
    if (h == NULL)
        return 1;
    int64_t size = varint_size(h->count[row]);
    for (int64_t e = h->first[row]; e < h->first[row] + h->count[row]; e++)
        size += varint_size(h->key_size[e]) + h->key_size[e] + varint_size(h->value_size[e])
                + (h->value_size[e] > 0 ? h->value_size[e] : 0);
    return size;
}

static inline uint8_t *
put_headers(uint8_t *out, const struct header_columns *h, int64_t row)
{
    if (h == NULL) {
        *out++ = 0;
        return out;
    }
    out = put_varint(out, h->count[row]);
    for (int64_t e = h->first[row]; e < h->first[row] + h->count[row]; e++) {
        out = put_varint(out, h->key_size[e]);
        memcpy(out, h->keys + h->key_at[e], (size_t)h->key_size[e]);
        out += h->key_size[e];
        out = put_varint(out, h->value_size[e]);
        if (h->value_size[e] > 0) {
            memcpy(out, h->values + h->value_at[e], (size_t)h->value_size[e]);
            out += h->value_size[e];
        }
    }
    return out;
}

/* The body of one record, timestamp delta 0: attributes, timestampDelta, offsetDelta,
 * keyLength, key, valueLength, value, then the header section of headers_bytes. */
static inline int64_t
body_size(int64_t offset_delta, int64_t key_size, int64_t value_size, int64_t headers_bytes)
{
    return 2 + varint_size(offset_delta) + varint_size(key_size) + (key_size > 0 ? key_size : 0)
           + varint_size(value_size) + (value_size > 0 ? value_size : 0) + headers_bytes;
}

static inline int
outside(int64_t at, int64_t size, Py_ssize_t length)
{
    return size < -1 || (size > 0 && (at < 0 || at > length - size));
}

/* Whether the header columns hold every header of every row, within their buffers. */
static int
headers_fit(const struct header_columns *h, Py_ssize_t rows, Py_ssize_t entries,
            Py_ssize_t key_bytes, Py_ssize_t value_bytes)
{
    for (Py_ssize_t r = 0; r < rows; r++)
        if (h->first[r] < 0 || h->count[r] < 0 || h->first[r] > entries - h->count[r])
            return 0;
    for (Py_ssize_t e = 0; e < entries; e++)
        if (h->key_size[e] < 0 || outside(h->key_at[e], h->key_size[e], key_bytes)
            || outside(h->value_at[e], h->value_size[e], value_bytes))
            return 0;
    return 1;
}

#define N_ENCODE_BUFFERS 17

static PyObject *
encode(PyObject *args, int with_headers)
{
    /* order, deltas, key_starts, key_sizes, key_data, value_starts, value_sizes,
     * value_data, [header_first, header_count, header_key_starts, header_key_sizes,
     * header_key_data, header_value_starts, header_value_sizes, header_value_data,]
     * starts */
    Py_buffer b[N_ENCODE_BUFFERS];
    int taken = 0;
    PyObject *result = NULL;
    const Py_ssize_t expected = with_headers ? 17 : 9;
    if (PyTuple_GET_SIZE(args) != expected) {
        PyErr_Format(PyExc_TypeError, "expected %zd buffers", expected);
        return NULL;
    }
    for (; taken < expected; taken++) {
        int flags = taken == expected - 1 ? PyBUF_WRITABLE : PyBUF_SIMPLE;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(args, taken), &b[taken], flags) < 0)
            goto done;
    }
    const Py_ssize_t n = b[0].len / (Py_ssize_t)sizeof(int64_t);
    const Py_ssize_t rows = b[3].len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *row_of = b[0].buf, *delta = b[1].buf, *key_at = b[2].buf,
                  *key_size = b[3].buf, *value_at = b[5].buf, *value_size = b[6].buf;
    const uint8_t *keys = b[4].buf, *values = b[7].buf;
    Py_buffer *starts = &b[expected - 1];
    int64_t *record_start = starts->buf;
    struct header_columns columns, *h = NULL;
    if (b[1].len < n * (Py_ssize_t)sizeof(int64_t)
        || starts->len < (n + 1) * (Py_ssize_t)sizeof(int64_t) || b[2].len != b[3].len
        || b[5].len != b[3].len || b[6].len != b[3].len) {
        PyErr_SetString(PyExc_ValueError, "encode_records: columns of unequal lengths");
        goto done;
    }
    if (with_headers) {
        const Py_ssize_t entries = b[11].len / (Py_ssize_t)sizeof(int64_t);
        columns = (struct header_columns){b[8].buf, b[9].buf, b[10].buf, b[11].buf,
                                          b[13].buf, b[14].buf, b[12].buf, b[15].buf};
        if (b[8].len != b[3].len || b[9].len != b[3].len || b[10].len != b[11].len
            || b[13].len != b[11].len || b[14].len != b[11].len
            || !headers_fit(&columns, rows, entries, b[12].len, b[15].len)) {
            PyErr_SetString(PyExc_ValueError, "encode_records: headers outside their columns");
            goto done;
        }
        h = &columns;
    }
    int64_t total = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        const int64_t row = row_of[r];
        if (row < 0 || row >= rows || outside(key_at[row], key_size[row], b[4].len)
            || outside(value_at[row], value_size[row], b[7].len)) {
            PyErr_Format(PyExc_ValueError, "encode_records: row %lld is outside its columns",
                         (long long)row);
            goto done;
        }
        const int64_t body =
            body_size(delta[r], key_size[row], value_size[row], headers_size(h, row));
        record_start[r] = total;
        total += varint_size(body) + body;
    }
    record_start[n] = total;
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (result == NULL)
        goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        const int64_t row = row_of[r], ks = key_size[row], vs = value_size[row];
        out = put_varint(out, body_size(delta[r], ks, vs, headers_size(h, row)));
        *out++ = 0; /* attributes */
        *out++ = 0; /* timestamp delta: every row of a call shares its timestamp */
        out = put_varint(out, delta[r]);
        out = put_varint(out, ks);
        if (ks > 0) {
            memcpy(out, keys + key_at[row], (size_t)ks);
            out += ks;
        }
        out = put_varint(out, vs);
        if (vs > 0) {
            memcpy(out, values + value_at[row], (size_t)vs);
            out += vs;
        }
        out = put_headers(out, h, row);
    }
    Py_END_ALLOW_THREADS
done:
    for (int i = 0; i < taken; i++)
        PyBuffer_Release(&b[i]);
    return result;
}

static PyObject *
encode_records(PyObject *module, PyObject *args)
{
    return encode(args, 0);
}

static PyObject *
encode_records_with_headers(PyObject *module, PyObject *args)
{
    return encode(args, 1);
}

/* Kafka's murmur2 (the Java client's Utils.murmur2: seed 0x9747b28c, little-endian
 * words, the tail in the same switch order). */
static uint32_t
murmur2(const uint8_t *data, int64_t length)
{
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cU ^ (uint32_t)length;
    int64_t words = length / 4;
    for (int64_t i = 0; i < words; i++) {
        const uint8_t *at = data + 4 * i;
        uint32_t k = (uint32_t)at[0] | ((uint32_t)at[1] << 8) | ((uint32_t)at[2] << 16)
                     | ((uint32_t)at[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *tail = data + 4 * words;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static PyObject *
murmur2_partitions(PyObject *module, PyObject *args)
{
    Py_buffer key_starts, key_sizes, key_data, partitions;
    long long num_partitions;
    if (!PyArg_ParseTuple(args, "y*y*y*Lw*", &key_starts, &key_sizes, &key_data,
                          &num_partitions, &partitions))
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t n = key_sizes.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *key_at = key_starts.buf, *key_size = key_sizes.buf;
    int64_t *out = partitions.buf;
    if (num_partitions <= 0 || key_starts.len != key_sizes.len
        || partitions.len < n * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "murmur2_partitions: bad columns or partition count");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (key_size[i] > 0
            && (key_at[i] < 0 || key_at[i] > key_data.len - key_size[i])) {
            PyErr_Format(PyExc_ValueError, "murmur2_partitions: key %zd is outside its data", i);
            goto done;
        }
    }
    const uint8_t *data = key_data.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (key_size[i] < 0) {
            out[i] = -1;
            continue;
        }
        uint32_t h = murmur2(data + (key_size[i] > 0 ? key_at[i] : 0), key_size[i]);
        out[i] = (int64_t)((h & 0x7fffffffU) % (uint64_t)num_partitions);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&key_starts);
    PyBuffer_Release(&key_sizes);
    PyBuffer_Release(&key_data);
    PyBuffer_Release(&partitions);
    return result;
}

static PyMethodDef native_methods[] = {
    {"scan_records", scan_records, METH_VARARGS,
     "scan_records(records, count, fields) -> int: the records' fields as nine int64 "
     "columns; returns how many records have headers or trailing bytes."},
    {"scan_headers", scan_headers, METH_VARARGS,
     "scan_headers(records, header_at, record_end, counts, spans) -> int: the headers of "
     "records as spans, or -1 when any is not plain (left to the record decoder)."},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(order, offset_deltas, key_starts, key_sizes, key_data, value_starts, "
     "value_sizes, value_data, starts) -> bytes: records without headers, back to back."},
    {"encode_records_with_headers", encode_records_with_headers, METH_VARARGS,
     "encode_records_with_headers(order, offset_deltas, key_starts, key_sizes, key_data, "
     "value_starts, value_sizes, value_data, header_first, header_count, header_key_starts, "
     "header_key_sizes, header_key_data, header_value_starts, header_value_sizes, "
     "header_value_data, starts) -> bytes: the same, each row with its headers."},
    {"murmur2_partitions", murmur2_partitions, METH_VARARGS,
     "murmur2_partitions(key_starts, key_sizes, key_data, num_partitions, partitions): "
     "Kafka's default partition of every key (-1 for a null key), written to partitions."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "samsa.records._native",
    "RecordBatch v2 loops in C (optional; callers fall back to Python).", -1,
    native_methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModule_Create(&native_module);
}

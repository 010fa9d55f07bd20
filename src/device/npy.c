/* NumPy .npy reader and writer (format 1.0). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

static const char *descr_of(hn_dtype t)
{
    switch (t) {
    case HN_I32: return "<i4";
    case HN_I64: return "<i8";
    default: return "<f4";
    }
}

hn_status_t hn_npy_encode(const hn_tensor *t, hn_strbuf *out)
{
    char header[256];
    int64_t n = hn_tensor_numel(t);
    int is_int = t->dtype == HN_I32 || t->dtype == HN_I64;
    size_t k, total, es = is_int ? (size_t)hn_dtype_size(t->dtype) : 4;
    k = (size_t)snprintf(header, sizeof(header), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                         descr_of(t->dtype));
    for (int i = 0; i < t->ndim; i++)
        k += (size_t)snprintf(header + k, sizeof(header) - k, "%lld,%s", (long long)t->shape[i],
                              i + 1 < t->ndim ? " " : "");
    k += (size_t)snprintf(header + k, sizeof(header) - k, "), }");
    total = (10 + k + 1 + 63) / 64 * 64; /* magic+len+header+newline, 64-aligned */
    while (10 + k + 1 < total)
        header[k++] = ' ';
    header[k++] = '\n';
    hn_sb_appendn(out, "\x93NUMPY\x01\x00", 8);
    hn_sb_appendn(out, (const char[]){(char)(k & 0xff), (char)(k >> 8)}, 2);
    hn_sb_appendn(out, header, k);
    if (is_int) { /* as they are: through a double, a large i64 would round */
        hn_sb_appendn(out, t->data, (size_t)n * es);
    } else {
        for (int64_t i = 0; i < n; i++) {
            float v = (float)hn_load(t->dtype, t->data, i);
            hn_sb_appendn(out, (const char *)&v, sizeof(v));
        }
    }
    return out->failed ? HN_ERR_NOMEM : HN_OK;
}

hn_status_t hn_npy_write(const char *path, const hn_tensor *t, hn_strbuf *err)
{
    hn_strbuf bytes;
    hn_status_t st;
    FILE *f;
    int ok;
    hn_sb_init(&bytes);
    if ((st = hn_npy_encode(t, &bytes)) != HN_OK) {
        hn_sb_free(&bytes);
        return st;
    }
    f = fopen(path, "wb");
    ok = f != NULL && fwrite(bytes.data, 1, bytes.len, f) == bytes.len;
    ok = (f != NULL && fclose(f) == 0) && ok;
    if (!ok)
        hn_sb_printf(err, "%s: error: cannot write: %s\n", path, strerror(errno));
    hn_sb_free(&bytes);
    return ok ? HN_OK : HN_ERR_IO;
}

/* The header's text, NUL-terminated, is at most this long (numpy writes
 * well under 1 KiB); the magic and its length come before it. */
#define NPY_MAX_HEADER 4096
#define NPY_PREFIX 10

static hn_status_t bad(hn_strbuf *err, const char *path, const char *what)
{
    hn_sb_printf(err, "%s: error: %s\n", path, what);
    return HN_ERR_IO;
}

/* "(64, 8)" */
static void shape_text(const int64_t *shape, int ndim, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, ndim == 1 ? ",)" : ")");
}

/* The value of 'descr' ('<f4', ...) and of 'shape' from the header text. */
typedef struct npy_header {
    int kind; /* 'f' or 'i' */
    size_t es;
    int ndim;
    int64_t shape[HN_TENSOR_MAX_DIMS];
} npy_header;

static hn_status_t parse_header(const char *header, const char *path, npy_header *h, hn_strbuf *err)
{
    const char *p;
    if (strstr(header, "'fortran_order': False") == NULL)
        return bad(err, path, "only C-order arrays are supported");
    p = strstr(header, "'descr': '");
    if (p == NULL || (p[10] != '<' && p[10] != '|') || (p[11] != 'f' && p[11] != 'i') ||
        (p[12] != '2' && p[12] != '4' && p[12] != '8') || (p[11] == 'i' && p[12] == '2') || p[13] != '\'')
        return bad(err, path, "dtype must be little-endian f2, f4, f8, i4 or i8");
    h->kind = p[11];
    h->es = (size_t)(p[12] - '0');
    if ((p = strstr(header, "'shape': (")) == NULL)
        return bad(err, path, "no shape in the header");
    p += 10;
    h->ndim = 0;
    while (*p != ')') {
        char *end;
        long long v;
        errno = 0;
        v = strtoll(p, &end, 10);
        if (end == p || errno == ERANGE || v < 0 || h->ndim == HN_TENSOR_MAX_DIMS)
            return bad(err, path, "the shape in the header is not a tuple of up to 8 sizes");
        h->shape[h->ndim++] = v;
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return HN_OK;
}

/* One element of the file's data, at any alignment, into t's element i;
 * 0 when an integer tensor cannot hold it. */
static int convert(const npy_header *h, const unsigned char *src, const hn_tensor *t, int64_t i)
{
    int is_int = t->dtype == HN_I32 || t->dtype == HN_I64;
    double d = 0;
    int64_t v = 0;
    if (h->kind == 'i' && h->es == 4) {
        int32_t x;
        memcpy(&x, src, 4);
        v = x;
        d = x;
    } else if (h->kind == 'i') {
        memcpy(&v, src, 8);
        d = (double)v;
    } else if (h->es == 2) {
        uint16_t x;
        memcpy(&x, src, 2);
        d = hn_f16_to_f32(x);
    } else if (h->es == 4) {
        float x;
        memcpy(&x, src, 4);
        d = x;
    } else {
        memcpy(&d, src, 8);
    }
    if (!is_int) {
        hn_store(t->dtype, t->data, i, d);
        return 1;
    }
    if (h->kind == 'f') { /* truncated towards zero, as numpy casts */
        if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
            return 0;
        v = (int64_t)d;
    }
    if (t->dtype == HN_I32) {
        if (v < INT32_MIN || v > INT32_MAX)
            return 0;
        ((int32_t *)t->data)[i] = (int32_t)v;
    } else {
        ((int64_t *)t->data)[i] = v;
    }
    return 1;
}

hn_status_t hn_npy_decode(const void *data, size_t size, const char *path, const hn_tensor *t, hn_strbuf *err)
{
    const unsigned char *b = data;
    char header[NPY_MAX_HEADER], want[160], have[160];
    size_t hlen, body;
    int64_t n = hn_tensor_numel(t);
    npy_header h = {0, 0, 0, {0}};
    hn_status_t st;
    if (size < NPY_PREFIX || memcmp(b, "\x93NUMPY", 6) != 0 || b[6] != 1)
        return bad(err, path, "not a .npy file of format 1.0");
    hlen = (size_t)b[8] | ((size_t)b[9] << 8);
    if (hlen >= sizeof(header)) {
        hn_sb_printf(err, "%s: error: a header of %zu bytes: this reader takes up to %d\n", path, hlen,
                     NPY_MAX_HEADER - 1);
        return HN_ERR_IO;
    }
    if (size - NPY_PREFIX < hlen) {
        hn_sb_printf(err, "%s: error: truncated header: %zu bytes, the file has %zu after the magic\n", path, hlen,
                     size - NPY_PREFIX);
        return HN_ERR_IO;
    }
    memcpy(header, b + NPY_PREFIX, hlen);
    header[hlen] = '\0';
    if (strlen(header) != hlen)
        return bad(err, path, "a NUL byte in the header");
    if ((st = parse_header(header, path, &h, err)) != HN_OK)
        return st;
    shape_text(t->shape, t->ndim, want, sizeof(want));
    shape_text(h.shape, h.ndim, have, sizeof(have));
    if (h.ndim != t->ndim || memcmp(h.shape, t->shape, (size_t)h.ndim * sizeof(int64_t)) != 0) {
        hn_sb_printf(err, "%s: error: shape %s, expected %s\n", path, have, want);
        return HN_ERR_IO;
    }
    body = size - NPY_PREFIX - hlen;
    /* n * es fits: n elements of t's dtype were allocated, es <= 8 */
    if ((uint64_t)body != (uint64_t)n * h.es) {
        hn_sb_printf(err, "%s: error: %s: shape %s of '<%c%zu' takes %llu bytes after the %zu-byte header, "
                          "the file has %zu\n",
                     path, body < (uint64_t)n * h.es ? "truncated data" : "bytes after the data", have, h.kind, h.es,
                     (unsigned long long)((uint64_t)n * h.es), NPY_PREFIX + hlen, body);
        return HN_ERR_IO;
    }
    for (int64_t i = 0; i < n; i++)
        if (!convert(&h, b + NPY_PREFIX + hlen + (size_t)i * h.es, t, i)) {
            hn_sb_printf(err, "%s: error: element %lld does not fit in %s\n", path, (long long)i,
                         hn_dtype_name(t->dtype));
            return HN_ERR_IO;
        }
    return HN_OK;
}

hn_status_t hn_npy_read(const char *path, const hn_tensor *t, hn_strbuf *err)
{
    char what[200], shape[160];
    int64_t n = hn_tensor_numel(t);
    char *data = NULL;
    size_t len = 0;
    hn_strbuf why;
    hn_status_t st;
    shape_text(t->shape, t->ndim, shape, sizeof(shape));
    snprintf(what, sizeof(what), "a .npy file of shape %s", shape);
    hn_sb_init(&why);
    /* at most the largest header and 8 bytes (f8, i8) an element: the
     * size is checked before anything is read */
    st = n < 0 || (uint64_t)n > (UINT64_MAX - NPY_PREFIX - NPY_MAX_HEADER) / 8
             ? HN_ERR_INVALID
             : hn_file_read(path, what, (uint64_t)n * 8 + NPY_PREFIX + NPY_MAX_HEADER, &data, &len, &why);
    if (st != HN_OK) {
        hn_sb_printf(err, "%s: error: %s\n", path, why.data != NULL ? why.data : "cannot read");
        hn_sb_free(&why);
        return st;
    }
    hn_sb_free(&why);
    st = hn_npy_decode(data, len, path, t, err);
    hn_free(data);
    return st;
}

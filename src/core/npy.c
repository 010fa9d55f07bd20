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

hn_status_t hn_npy_write(const char *path, const hn_tensor *t, hn_strbuf *err)
{
    char header[256];
    int64_t n = hn_tensor_numel(t);
    hn_dtype out_t = (t->dtype == HN_I32 || t->dtype == HN_I64) ? t->dtype : HN_F32;
    size_t k, total;
    FILE *f;
    char *buf;
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
    buf = hn_malloc((size_t)n * (size_t)hn_dtype_size(out_t) + 1);
    if (buf == NULL)
        return HN_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++)
        hn_store(out_t, buf, i, hn_load(t->dtype, t->data, i));
    f = fopen(path, "wb");
    if (f == NULL) {
        hn_sb_printf(err, "%s: error: cannot write: %s\n", path, strerror(errno));
        hn_free(buf);
        return HN_ERR_IO;
    }
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc((int)(k & 0xff), f);
    fputc((int)(k >> 8), f);
    fwrite(header, 1, k, f);
    fwrite(buf, (size_t)hn_dtype_size(out_t), (size_t)n, f);
    hn_free(buf);
    if (fclose(f) != 0) {
        hn_sb_printf(err, "%s: error: cannot write: %s\n", path, strerror(errno));
        return HN_ERR_IO;
    }
    return HN_OK;
}

static hn_status_t bad(hn_strbuf *err, const char *path, const char *what)
{
    hn_sb_printf(err, "%s: error: %s\n", path, what);
    return HN_ERR_IO;
}

hn_status_t hn_npy_read(const char *path, const hn_tensor *t, hn_strbuf *err)
{
    unsigned char magic[10];
    char header[4096], *p;
    size_t hlen, es;
    int64_t shape[HN_TENSOR_MAX_DIMS], n = hn_tensor_numel(t);
    int ndim = 0, kind;
    char *buf;
    FILE *f = fopen(path, "rb");
    hn_status_t st = HN_OK;
    if (f == NULL) {
        hn_sb_printf(err, "%s: error: cannot read: %s\n", path, strerror(errno));
        return HN_ERR_IO;
    }
    if (fread(magic, 1, 10, f) != 10 || memcmp(magic, "\x93NUMPY", 6) != 0 || magic[6] != 1) {
        fclose(f);
        return bad(err, path, "not a .npy file of format 1.0");
    }
    hlen = (size_t)magic[8] | ((size_t)magic[9] << 8);
    if (hlen >= sizeof(header) || fread(header, 1, hlen, f) != hlen) {
        fclose(f);
        return bad(err, path, "truncated header");
    }
    header[hlen] = '\0';
    if (strstr(header, "'fortran_order': False") == NULL) {
        fclose(f);
        return bad(err, path, "only C-order arrays are supported");
    }
    p = strstr(header, "'descr': '");
    if (p == NULL || (p[10] != '<' && p[10] != '|') || (p[11] != 'f' && p[11] != 'i') ||
        (p[12] != '2' && p[12] != '4' && p[12] != '8') || (p[11] == 'i' && p[12] == '2')) {
        fclose(f);
        return bad(err, path, "dtype must be little-endian f2, f4, f8, i4 or i8");
    }
    kind = p[11];
    es = (size_t)(p[12] - '0');
    p = strstr(header, "'shape': (");
    if (p == NULL) {
        fclose(f);
        return bad(err, path, "no shape in the header");
    }
    p += 10;
    while (*p && *p != ')' && ndim < HN_TENSOR_MAX_DIMS) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p)
            break;
        shape[ndim++] = v;
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    if (ndim != t->ndim) {
        fclose(f);
        hn_sb_printf(err, "%s: error: has %d dimensions, expected %d\n", path, ndim, t->ndim);
        return HN_ERR_IO;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] != t->shape[i]) {
            fclose(f);
            hn_sb_printf(err, "%s: error: dimension %d is %lld, expected %lld\n", path, i,
                         (long long)shape[i], (long long)t->shape[i]);
            return HN_ERR_IO;
        }
    buf = hn_malloc((size_t)n * es + 1);
    if (buf == NULL) {
        fclose(f);
        return HN_ERR_NOMEM;
    }
    if (fread(buf, es, (size_t)n, f) != (size_t)n) {
        st = bad(err, path, "truncated data");
    } else {
        hn_dtype from = kind == 'i' ? (es == 4 ? HN_I32 : HN_I64) : (es == 2 ? HN_F16 : HN_F32);
        for (int64_t i = 0; i < n; i++) {
            double v = kind == 'f' && es == 8 ? ((double *)buf)[i] : hn_load(from, buf, i);
            hn_store(t->dtype, t->data, i, v);
        }
    }
    hn_free(buf);
    fclose(f);
    return st;
}

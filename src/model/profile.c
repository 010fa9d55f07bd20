/* The machine profile as a file: JSON written by `hirnode tune` and read
 * back strictly (every value checked, every error naming the field), the
 * default file per GPU model and count, the built-in defaults, and the
 * process-wide lookup of the profile a runtime uses (docs/SCHEDULER.md
 * "The machine profile"). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/json.h"
#include "../base/settings.h"
#include "profile.h"

static const char *const dtype_keys[HN_COST_NDTYPES] = {"bf16", "f16", "f32"};
static const hn_dtype dtypes[HN_COST_NDTYPES] = {HN_BF16, HN_F16, HN_F32};
static const char *const engine_names[HN_ENGINE_COUNT] = {"nccl", "p2p put", "p2p get", "ll"};
static const char *const traffic_keys[HN_TRAFFIC_COUNT] = {"copy_engines", "nccl", "ll", "sm"};
static const char *const class_keys[2] = {"gather", "reduce"};
static const char *const via_keys[2] = {"nccl", "copy_engines"};
static const char *const op_names[] = {"ag_matmul", "matmul_rs", "matmul_ar"};
static const hn_coll_kind curve_kinds[] = {HN_COLL_ALLGATHER, HN_COLL_REDUCE_SCATTER, HN_COLL_ALLREDUCE};

/* ---- writing ---- */

/* The shortest text that reads back as exactly v (null for what JSON
 * cannot say). */
static void put_num(hn_strbuf *sb, double v)
{
    char buf[40];
    if (!isfinite(v)) {
        hn_sb_append(sb, "null");
        return;
    }
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof(buf), "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    hn_sb_append(sb, buf);
}

static void put_key_str(hn_strbuf *sb, const char *key, const char *v, int comma)
{
    hn_sb_printf(sb, "\"%s\": ", key);
    hn_json_put_string(sb, v);
    if (comma)
        hn_sb_append(sb, ", ");
}

static void write_curve(hn_strbuf *sb, const hn_cost_curve *c)
{
    hn_sb_append(sb, "    {\"kind\": ");
    hn_json_put_string(sb, hn_coll_name(c->kind));
    hn_sb_printf(sb, ", \"engine\": \"%s\", \"ranks\": %d,%s\n     \"bytes\": [", engine_names[c->engine], c->n,
                 c->graph ? " \"graph\": true," : "");
    for (int i = 0; i < c->npoints; i++) {
        hn_sb_append(sb, i ? ", " : "");
        put_num(sb, c->bytes[i]);
    }
    hn_sb_append(sb, "],\n     \"us\": [");
    for (int i = 0; i < c->npoints; i++) {
        hn_sb_append(sb, i ? ", " : "");
        put_num(sb, c->us[i]);
    }
    hn_sb_append(sb, "]}");
}

static void write_pipe(hn_strbuf *sb, const hn_cost_point *q)
{
    hn_sb_printf(sb, "    {\"op\": \"%s\", \"M\": %lld, \"K\": %lld, \"N\": %lld, \"ranks\": %d, \"gemm_tflops\": ",
                 op_names[q->kind <= HN_PIPE_MM_AR ? q->kind : 0], (long long)q->M, (long long)q->K,
                 (long long)q->N, q->world);
    put_num(sb, q->gemm_tflops);
    hn_sb_printf(sb, ", \"strategy\": \"%s\", \"via\": \"%s\", \"chunks\": %d, \"ratio\": ",
                 hn_strategy_name(q->strategy), q->p2p ? (q->get ? "p2p get" : "p2p put") : "nccl", q->chunks);
    put_num(sb, q->ratio);
    hn_sb_printf(sb, ", \"reference\": %s}", q->reference ? "true" : "false");
}

void hn_profile_write(const hn_cost_profile *p, hn_strbuf *sb)
{
    const hn_cost_coeffs *c = &p->coef;
    hn_sb_printf(sb, "{\n  \"format\": \"hirnode-profile\",\n  \"version\": %d,\n  \"machine\": {", HN_PROFILE_VERSION);
    put_key_str(sb, "model", p->model, 0);
    hn_sb_printf(sb, ", \"count\": %d, ", p->count);
    put_key_str(sb, "backend", p->backend, 1);
    put_key_str(sb, "driver", p->driver, 1);
    put_key_str(sb, "cuda", p->cuda, 1);
    put_key_str(sb, "nccl", p->nccl, 1);
    put_key_str(sb, "date", p->date, 1);
    put_key_str(sb, "hirnode", p->hirnode, 0);
    hn_sb_append(sb, "},\n  \"gemm\": {");
    for (int d = 0; d < HN_COST_NDTYPES; d++) {
        hn_sb_printf(sb, "%s\"%s\": {\"tflops_at_1t\": ", d ? ", " : "", dtype_keys[d]);
        put_num(sb, p->gemm_tflops_at_1t[d]);
        hn_sb_append(sb, ", \"gamma\": ");
        put_num(sb, p->gemm_gamma[d]);
        hn_sb_append(sb, "}");
    }
    hn_sb_append(sb, ",\n    \"measured\": [");
    for (int i = 0; i < p->ngemm; i++) {
        const hn_cost_gemm_point *g = &p->gemm[i];
        hn_sb_printf(sb, "%s\n      {\"dtype\": \"%s\", \"M\": %lld, \"K\": %lld, \"N\": %lld, \"tflops\": ",
                     i ? "," : "", hn_dtype_name(g->dtype), (long long)g->M, (long long)g->K, (long long)g->N);
        put_num(sb, g->tflops);
        hn_sb_append(sb, "}");
    }
    hn_sb_append(sb, "]},\n  \"model\": {\"seq_overhead_us\": ");
    put_num(sb, c->seq_overhead_s * 1e6);
    for (int k = 0; k < 2; k++) {
        hn_sb_printf(sb, ", \"%s\": {", k ? "tau_us" : "kappa");
        for (int g = 0; g < 2; g++) {
            hn_sb_printf(sb, "%s\"%s\": {", g ? ", " : "", class_keys[g]);
            for (int e = 0; e < 2; e++) {
                hn_sb_printf(sb, "%s\"%s\": ", e ? ", " : "", via_keys[e]);
                put_num(sb, k ? c->tau_s[g][e] * 1e6 : c->kappa[g][e]);
            }
            hn_sb_append(sb, "}");
        }
        hn_sb_append(sb, "}");
    }
    hn_sb_append(sb, ",\n    \"chunk_us\": ");
    put_num(sb, c->chunk_s * 1e6);
    hn_sb_append(sb, ", \"stream_us\": ");
    put_num(sb, c->stream_s * 1e6);
    hn_sb_append(sb, ", \"hbm_gbps\": ");
    put_num(sb, p->hbm_bytes_per_s / 1e9);
    hn_sb_append(sb, "},\n  \"interference\": {");
    for (int k = 0; k < HN_TRAFFIC_COUNT; k++) {
        hn_sb_printf(sb, "%s\"%s\": ", k ? ", " : "", traffic_keys[k]);
        put_num(sb, p->interference[k] >= 0 ? p->interference[k] : NAN);
    }
    hn_sb_append(sb, "},\n  \"shapes\": [");
    for (int i = 0; i < p->nshapes; i++)
        hn_sb_printf(sb, "%s[%lld, %lld, %lld]", i ? ", " : "", (long long)p->shapes[i][0], (long long)p->shapes[i][1],
                     (long long)p->shapes[i][2]);
    hn_sb_append(sb, "],\n  \"collectives\": [");
    for (int i = 0; i < p->ncurves; i++) {
        hn_sb_append(sb, i ? ",\n" : "\n");
        write_curve(sb, &p->curves[i]);
    }
    hn_sb_append(sb, "],\n  \"pipelines\": [");
    for (int i = 0; i < p->npipes; i++) {
        hn_sb_append(sb, i ? ",\n" : "\n");
        write_pipe(sb, &p->pipes[i]);
    }
    hn_sb_append(sb, "],\n  \"splits\": [");
    for (int i = 0; i < p->nsplits; i++) {
        const hn_cost_split_point *q = &p->splits[i];
        hn_sb_printf(sb, "%s\n    {\"M\": %lld, \"K\": %lld, \"N\": %lld, \"chunks\": %d, \"streams\": %d, \"ratio\": ",
                     i ? "," : "", (long long)q->M, (long long)q->K, (long long)q->N, q->chunks, q->streams);
        put_num(sb, q->ratio);
        hn_sb_append(sb, "}");
    }
    hn_sb_append(sb, "]\n}\n");
}

/* ---- reading ---- */

typedef struct reader {
    hn_strbuf *why;
    int failed;
} reader;

static int bad(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(reader *r, const char *fmt, ...)
{
    va_list ap;
    if (r->failed++)
        return 0;
    va_start(ap, fmt);
    hn_sb_vprintf(r->why, fmt, ap);
    va_end(ap);
    return 0;
}

static const hn_json *member(reader *r, const hn_json *o, const char *path, const char *key, hn_json_type type,
                             int needed)
{
    static const char *const kinds[] = {"null", "false", "true", "a number", "a string", "an array", "an object"};
    const hn_json *v = hn_json_get(o, key);
    if (v == NULL) {
        if (needed)
            bad(r, "%s%s%s: missing", path, *path ? "." : "", key);
        return NULL;
    }
    if (v->type != type && !(type == HN_JSON_TRUE && v->type == HN_JSON_FALSE)) {
        bad(r, "%s%s%s: expected %s, not %s", path, *path ? "." : "", key, type == HN_JSON_TRUE ? "true or false" : kinds[type],
            kinds[v->type]);
        return NULL;
    }
    return v;
}

/* A number at key in [lo, hi]; `integer`: a whole one. */
static int num(reader *r, const hn_json *o, const char *path, const char *key, double lo, double hi, int integer,
               double *out)
{
    const hn_json *v = member(r, o, path, key, HN_JSON_NUMBER, 1);
    if (v == NULL)
        return 0;
    if (!(v->num >= lo && v->num <= hi) || (integer && v->num != floor(v->num)))
        return bad(r, "%s%s%s: expected %s from %g to %g, not %.17g", path, *path ? "." : "", key,
                   integer ? "an integer" : "a number", lo, hi, v->num);
    *out = v->num;
    return 1;
}

static int str(reader *r, const hn_json *o, const char *path, const char *key, char *buf, size_t n)
{
    const hn_json *v = member(r, o, path, key, HN_JSON_STRING, 1);
    if (v == NULL)
        return 0;
    if (v->len >= n || strlen(v->str) != v->len)
        return bad(r, "%s.%s: expected a string of at most %zu bytes without NUL", path, key, n - 1);
    memcpy(buf, v->str, v->len + 1);
    return 1;
}

/* The index of s in names[0..n), or -1. */
static int name_index(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int read_machine(reader *r, const hn_json *root, hn_cost_profile *p)
{
    const hn_json *m = member(r, root, "", "machine", HN_JSON_OBJECT, 1);
    double count;
    if (m == NULL)
        return 0;
    if (!str(r, m, "machine", "model", p->model, sizeof(p->model)) ||
        !num(r, m, "machine", "count", 1, 256, 1, &count) ||
        !str(r, m, "machine", "backend", p->backend, sizeof(p->backend)) ||
        !str(r, m, "machine", "driver", p->driver, sizeof(p->driver)) ||
        !str(r, m, "machine", "cuda", p->cuda, sizeof(p->cuda)) ||
        !str(r, m, "machine", "nccl", p->nccl, sizeof(p->nccl)) ||
        !str(r, m, "machine", "date", p->date, sizeof(p->date)) ||
        !str(r, m, "machine", "hirnode", p->hirnode, sizeof(p->hirnode)))
        return 0;
    p->count = (int)count;
    if (!hn_device_name_known(p->backend)) {
        const char *const *names = hn_device_known_names();
        hn_strbuf list;
        int ok;
        hn_sb_init(&list);
        for (int i = 0; names[i] != NULL; i++)
            hn_sb_printf(&list, "%s\"%s\"", i == 0 ? "" : names[i + 1] == NULL ? " or " : ", ", names[i]);
        ok = bad(r, "machine.backend: expected %s, not \"%s\"", list.data != NULL ? list.data : "a backend",
                 p->backend);
        hn_sb_free(&list);
        return ok;
    }
    return 1;
}

static int read_gemm(reader *r, const hn_json *root, hn_cost_profile *p)
{
    const hn_json *g = member(r, root, "", "gemm", HN_JSON_OBJECT, 1), *meas;
    char path[64];
    if (g == NULL)
        return 0;
    for (int d = 0; d < HN_COST_NDTYPES; d++) {
        const hn_json *e = member(r, g, "gemm", dtype_keys[d], HN_JSON_OBJECT, 1);
        snprintf(path, sizeof(path), "gemm.%s", dtype_keys[d]);
        if (e == NULL || !num(r, e, path, "tflops_at_1t", 1e-300, 1e300, 0, &p->gemm_tflops_at_1t[d]) ||
            !num(r, e, path, "gamma", -HN_COST_MAX_GAMMA, HN_COST_MAX_GAMMA, 0, &p->gemm_gamma[d]))
            return 0;
    }
    if ((meas = member(r, g, "gemm", "measured", HN_JSON_ARRAY, 0)) == NULL)
        return !r->failed;
    if (meas->n > HN_COST_MAX_PIPES)
        return bad(r, "gemm.measured: %d shapes, at most %d", meas->n, HN_COST_MAX_PIPES);
    for (int i = 0; i < meas->n; i++) {
        const hn_json *e = &meas->items[i];
        hn_cost_gemm_point *q = &p->gemm[i];
        char dt[8];
        double v[3];
        int d;
        snprintf(path, sizeof(path), "gemm.measured[%d]", i);
        if (e->type != HN_JSON_OBJECT)
            return bad(r, "%s: expected an object", path);
        if (!str(r, e, path, "dtype", dt, sizeof(dt)) || !num(r, e, path, "M", 1, 1 << 20, 1, &v[0]) ||
            !num(r, e, path, "K", 1, 1 << 20, 1, &v[1]) || !num(r, e, path, "N", 1, 1 << 20, 1, &v[2]) ||
            !num(r, e, path, "tflops", 1e-30, 1e30, 0, &q->tflops))
            return 0;
        if ((d = name_index(dt, dtype_keys, HN_COST_NDTYPES)) < 0)
            return bad(r, "%s.dtype: expected bf16, f16 or f32, not \"%s\"", path, dt);
        q->dtype = dtypes[d];
        q->M = (int64_t)v[0];
        q->K = (int64_t)v[1];
        q->N = (int64_t)v[2];
    }
    p->ngemm = meas->n;
    return 1;
}

static int read_model(reader *r, const hn_json *root, hn_cost_profile *p)
{
    const hn_json *m = member(r, root, "", "model", HN_JSON_OBJECT, 1);
    hn_cost_coeffs *c = &p->coef;
    double us, gbps;
    if (m == NULL || !num(r, m, "model", "seq_overhead_us", 0, HN_COST_MAX_SECONDS * 1e6, 0, &us))
        return 0;
    c->seq_overhead_s = us * 1e-6;
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "tau_us" : "kappa";
        const hn_json *t = member(r, m, "model", name, HN_JSON_OBJECT, 1);
        if (t == NULL)
            return 0;
        for (int g = 0; g < 2; g++) {
            char path[64];
            const hn_json *cl = member(r, t, k ? "model.tau_us" : "model.kappa", class_keys[g], HN_JSON_OBJECT, 1);
            snprintf(path, sizeof(path), "model.%s.%s", name, class_keys[g]);
            for (int e = 0; e < 2 && cl != NULL; e++) {
                double v;
                if (!num(r, cl, path, via_keys[e], 0, k ? HN_COST_MAX_SECONDS * 1e6 : HN_COST_MAX_KAPPA, 0, &v))
                    return 0;
                if (k)
                    c->tau_s[g][e] = v * 1e-6;
                else
                    c->kappa[g][e] = v;
            }
            if (cl == NULL)
                return 0;
        }
    }
    if (!num(r, m, "model", "chunk_us", 0, HN_COST_MAX_SECONDS * 1e6, 0, &us))
        return 0;
    c->chunk_s = us * 1e-6;
    if (!num(r, m, "model", "stream_us", 0, HN_COST_MAX_SECONDS * 1e6, 0, &us))
        return 0;
    c->stream_s = us * 1e-6;
    if (!num(r, m, "model", "hbm_gbps", 1e-30, 1e30, 0, &gbps))
        return 0;
    p->hbm_bytes_per_s = gbps * 1e9;
    return 1;
}

/* An array of numbers at key, at most HN_COST_MAX_POINTS, each in [lo, hi]. */
static int num_array(reader *r, const hn_json *o, const char *path, const char *key, double lo, double hi,
                     double *out, int *n)
{
    const hn_json *a = member(r, o, path, key, HN_JSON_ARRAY, 1);
    if (a == NULL)
        return 0;
    if (a->n < 1 || a->n > HN_COST_MAX_POINTS)
        return bad(r, "%s.%s: expected 1 to %d numbers, not %d", path, key, HN_COST_MAX_POINTS, a->n);
    for (int i = 0; i < a->n; i++) {
        if (a->items[i].type != HN_JSON_NUMBER || !(a->items[i].num >= lo && a->items[i].num <= hi))
            return bad(r, "%s.%s[%d]: expected a number from %g to %g", path, key, i, lo, hi);
        out[i] = a->items[i].num;
    }
    *n = a->n;
    return 1;
}

static int read_curves(reader *r, const hn_json *root, hn_cost_profile *p)
{
    const hn_json *a = member(r, root, "", "collectives", HN_JSON_ARRAY, 1);
    if (a == NULL)
        return 0;
    if (a->n > HN_COST_MAX_CURVES)
        return bad(r, "collectives: %d curves, at most %d", a->n, HN_COST_MAX_CURVES);
    for (int i = 0; i < a->n; i++) {
        const hn_json *e = &a->items[i];
        hn_cost_curve *c = &p->curves[i];
        char path[48], kind[24], engine[16];
        double ranks;
        int k, nu;
        snprintf(path, sizeof(path), "collectives[%d]", i);
        if (e->type != HN_JSON_OBJECT)
            return bad(r, "%s: expected an object", path);
        if (!str(r, e, path, "kind", kind, sizeof(kind)) || !str(r, e, path, "engine", engine, sizeof(engine)) ||
            !num(r, e, path, "ranks", 2, 256, 1, &ranks) ||
            !num_array(r, e, path, "bytes", 1, 1e15, c->bytes, &c->npoints) ||
            !num_array(r, e, path, "us", 1e-30, 1e30, c->us, &nu))
            return 0;
        for (k = 0; k < HN_ARRAY_LEN(curve_kinds) && strcmp(kind, hn_coll_name(curve_kinds[k])) != 0; k++)
            ;
        if (k == HN_ARRAY_LEN(curve_kinds))
            return bad(r, "%s.kind: expected allgather, reduce_scatter or allreduce, not \"%s\"", path, kind);
        c->kind = curve_kinds[k];
        if ((k = name_index(engine, engine_names, HN_ENGINE_COUNT)) < 0)
            return bad(r, "%s.engine: expected nccl, p2p put, p2p get or ll, not \"%s\"", path, engine);
        c->engine = (hn_cost_engine)k;
        c->n = (int)ranks;
        /* optional: calls captured in a graph (`via auto` reads these in a capture) */
        if (hn_json_get(e, "graph") != NULL) {
            const hn_json *g = member(r, e, path, "graph", HN_JSON_TRUE, 1);
            if (g == NULL)
                return 0;
            c->graph = g->type == HN_JSON_TRUE;
        } else {
            c->graph = 0;
        }
        if (nu != c->npoints)
            return bad(r, "%s: %d sizes but %d times", path, c->npoints, nu);
        for (int j = 1; j < c->npoints; j++)
            if (!(c->bytes[j] > c->bytes[j - 1]))
                return bad(r, "%s.bytes: not increasing at %d", path, j);
        for (int j = 0; j < i; j++)
            if (p->curves[j].kind == c->kind && p->curves[j].engine == c->engine && p->curves[j].n == c->n &&
                p->curves[j].graph == c->graph)
                return bad(r, "%s: a second curve of %s via %s on %d ranks%s", path, kind, engine, c->n,
                           c->graph ? " in graphs" : "");
    }
    p->ncurves = a->n;
    return 1;
}

static int read_extras(reader *r, const hn_json *root, hn_cost_profile *p)
{
    const hn_json *itf = member(r, root, "", "interference", HN_JSON_OBJECT, 0);
    const hn_json *sh = member(r, root, "", "shapes", HN_JSON_ARRAY, 0);
    for (int k = 0; k < HN_TRAFFIC_COUNT; k++) {
        const hn_json *v = itf != NULL ? hn_json_get(itf, traffic_keys[k]) : NULL;
        p->interference[k] = -1;
        if (v == NULL || v->type == HN_JSON_NULL)
            continue;
        if (!num(r, itf, "interference", traffic_keys[k], 0, 100, 0, &p->interference[k]))
            return 0;
    }
    if (sh != NULL) {
        if (sh->n > HN_COST_MAX_SHAPES)
            return bad(r, "shapes: %d shapes, at most %d", sh->n, HN_COST_MAX_SHAPES);
        for (int i = 0; i < sh->n; i++) {
            const hn_json *s = &sh->items[i];
            if (s->type != HN_JSON_ARRAY || s->n != 3)
                return bad(r, "shapes[%d]: expected [M, K, N]", i);
            for (int d = 0; d < 3; d++) {
                double v = s->items[d].num;
                if (s->items[d].type != HN_JSON_NUMBER || !(v >= 1 && v <= (1 << 20)) || v != floor(v))
                    return bad(r, "shapes[%d][%d]: expected an integer from 1 to 1048576", i, d);
                p->shapes[i][d] = (int64_t)v;
            }
        }
        p->nshapes = sh->n;
    }
    return !r->failed;
}

/* Optional: the GEMM in chunks on streams, by shape. */
static int read_splits(reader *r, const hn_json *root, hn_cost_profile *p)
{
    const hn_json *a = member(r, root, "", "splits", HN_JSON_ARRAY, 0);
    if (a == NULL)
        return !r->failed;
    if (a->n > HN_COST_MAX_SPLITS)
        return bad(r, "splits: %d, at most %d", a->n, HN_COST_MAX_SPLITS);
    for (int i = 0; i < a->n; i++) {
        const hn_json *e = &a->items[i];
        hn_cost_split_point *q = &p->splits[i];
        char path[32];
        double v[5];
        snprintf(path, sizeof(path), "splits[%d]", i);
        if (e->type != HN_JSON_OBJECT)
            return bad(r, "%s: expected an object", path);
        if (!num(r, e, path, "M", 1, 1 << 20, 1, &v[0]) || !num(r, e, path, "K", 1, 1 << 20, 1, &v[1]) ||
            !num(r, e, path, "N", 1, 1 << 20, 1, &v[2]) || !num(r, e, path, "chunks", 1, 4096, 1, &v[3]) ||
            !num(r, e, path, "streams", 1, HN_MAX_STREAMS, 1, &v[4]) ||
            !num(r, e, path, "ratio", 1e-3, HN_COST_MAX_SPLIT_RATIO, 0, &q->ratio))
            return 0;
        q->M = (int64_t)v[0];
        q->K = (int64_t)v[1];
        q->N = (int64_t)v[2];
        q->chunks = (int)v[3];
        q->streams = (int)v[4];
    }
    p->nsplits = a->n;
    return 1;
}

static int read_pipes(reader *r, const hn_json *root, hn_cost_profile *p)
{
    const hn_json *a = member(r, root, "", "pipelines", HN_JSON_ARRAY, 0);
    if (a == NULL)
        return !r->failed;
    if (a->n > HN_COST_MAX_PIPES)
        return bad(r, "pipelines: %d, at most %d", a->n, HN_COST_MAX_PIPES);
    for (int i = 0; i < a->n; i++) {
        const hn_json *e = &a->items[i], *ref;
        hn_cost_point *q = &p->pipes[i];
        char path[48], op[16], strategy[16], via[16];
        double v[5];
        int k;
        snprintf(path, sizeof(path), "pipelines[%d]", i);
        if (e->type != HN_JSON_OBJECT)
            return bad(r, "%s: expected an object", path);
        if (!str(r, e, path, "op", op, sizeof(op)) || !num(r, e, path, "M", 1, 1 << 20, 1, &v[0]) ||
            !num(r, e, path, "K", 1, 1 << 20, 1, &v[1]) || !num(r, e, path, "N", 1, 1 << 20, 1, &v[2]) ||
            !num(r, e, path, "ranks", 1, 256, 1, &v[3]) ||
            !num(r, e, path, "gemm_tflops", 1e-30, 1e30, 0, &q->gemm_tflops) ||
            !str(r, e, path, "strategy", strategy, sizeof(strategy)) || !str(r, e, path, "via", via, sizeof(via)) ||
            !num(r, e, path, "chunks", 1, 1 << 20, 1, &v[4]) || !num(r, e, path, "ratio", 1e-30, 1e30, 0, &q->ratio))
            return 0;
        if ((k = name_index(op, op_names, HN_ARRAY_LEN(op_names))) < 0)
            return bad(r, "%s.op: expected ag_matmul, matmul_rs or matmul_ar, not \"%s\"", path, op);
        q->kind = (hn_pipe_kind)k;
        for (k = 1; k < HN_STRAT_COUNT && strcmp(strategy, hn_strategy_name((hn_strategy)k)) != 0; k++)
            ;
        if (k == HN_STRAT_COUNT)
            return bad(r, "%s.strategy: expected sequential, ring, collective or broadcast, not \"%s\"", path,
                       strategy);
        q->strategy = (hn_strategy)k;
        if ((k = name_index(via, engine_names, 3)) < 0)
            return bad(r, "%s.via: expected nccl, p2p put or p2p get, not \"%s\"", path, via);
        q->p2p = k > 0;
        q->get = k == 2;
        q->M = (int64_t)v[0];
        q->K = (int64_t)v[1];
        q->N = (int64_t)v[2];
        q->world = (int)v[3];
        q->chunks = (int)v[4];
        if ((ref = member(r, e, path, "reference", HN_JSON_TRUE, 0)) != NULL)
            q->reference = ref->type == HN_JSON_TRUE;
        else if (r->failed)
            return 0;
    }
    p->npipes = a->n;
    return 1;
}

hn_status_t hn_profile_parse(const char *text, size_t len, const char *model, int count, hn_cost_profile *out,
                             hn_strbuf *why)
{
    hn_json *root = NULL;
    hn_cost_profile *p;
    reader r = {why, 0};
    double version;
    const hn_json *fmt;
    hn_strbuf jerr;
    hn_status_t st;
    hn_sb_init(&jerr);
    if ((st = hn_json_parse(text, len, &root, &jerr)) != HN_OK) {
        int line = 0, col = 0, at = 0;
        if (jerr.data != NULL && sscanf(jerr.data, "%d:%d: %n", &line, &col, &at) == 2 && at > 0)
            hn_sb_printf(why, "not valid JSON (truncated?): line %d, column %d: %s", line, col, jerr.data + at);
        else
            hn_sb_printf(why, "not valid JSON: %s", jerr.data != NULL ? jerr.data : "out of memory");
        hn_sb_free(&jerr);
        return st == HN_ERR_NOMEM ? st : HN_ERR_PARSE;
    }
    hn_sb_free(&jerr);
    if ((p = hn_calloc(1, sizeof(*p))) == NULL) {
        hn_json_free(root);
        return HN_ERR_NOMEM;
    }
    st = HN_ERR_PARSE;
    if (root->type != HN_JSON_OBJECT) {
        bad(&r, "expected an object");
        goto done;
    }
    if ((fmt = member(&r, root, "", "format", HN_JSON_STRING, 1)) == NULL)
        goto done;
    if (strcmp(fmt->str, "hirnode-profile") != 0) {
        bad(&r, "format: expected \"hirnode-profile\", not \"%s\"", fmt->str);
        goto done;
    }
    if (!num(&r, root, "", "version", 0, 1e9, 1, &version))
        goto done;
    if (version != HN_PROFILE_VERSION) {
        bad(&r, "version %.0f; this hirnode reads version %d (run hirnode tune again)", version, HN_PROFILE_VERSION);
        goto done;
    }
    if (!read_machine(&r, root, p))
        goto done;
    if ((model != NULL && strcmp(model, p->model) != 0) || (count > 0 && count != p->count)) {
        bad(&r, "measured on %s x%d, not on this machine's %s x%d", p->model, p->count, model ? model : p->model,
            count > 0 ? count : p->count);
        st = HN_ERR_INVALID;
        goto done;
    }
    if (!read_gemm(&r, root, p) || !read_model(&r, root, p) || !read_curves(&r, root, p) || !read_extras(&r, root, p) ||
        !read_splits(&r, root, p) || !read_pipes(&r, root, p))
        goto done;
    p->builtin = 0;
    p->source[0] = '\0';
    *out = *p;
    st = HN_OK;
done:
    hn_free(p);
    hn_json_free(root);
    return st;
}

hn_status_t hn_profile_read(const char *path, const char *model, int count, hn_cost_profile *out, hn_strbuf *why)
{
    char *text = NULL;
    size_t len = 0;
    hn_status_t st = hn_file_read(path, "a profile", HN_PROFILE_MAX_BYTES, &text, &len, why);
    if (st != HN_OK)
        return st;
    st = hn_profile_parse(text, len, model, count, out, why);
    hn_free(text);
    if (st == HN_OK)
        snprintf(out->source, sizeof(out->source), "%s", path);
    return st;
}

/* ---- where it is, and which one is in use ---- */

int hn_profile_default_path(const char *model, int count, char *buf, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char name[96];
    size_t k = 0;
    int w;
    for (const char *c = model; *c != '\0' && k + 1 < sizeof(name); c++)
        name[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
                            *c == '_'
                        ? *c
                        : '-';
    name[k] = '\0';
    if (xdg != NULL && *xdg == '/')
        w = snprintf(buf, n, "%s/hirnode/profile-%s-x%d.json", xdg, name, count);
    else if (home != NULL && *home != '\0')
        w = snprintf(buf, n, "%s/.cache/hirnode/profile-%s-x%d.json", home, name, count);
    else
        return 0;
    return w > 0 && (size_t)w < n;
}

void hn_profile_builtin_for(const char *model, int emulated, hn_cost_profile *out)
{
    *out = *hn_cost_builtin();
    if (strstr(model, "H200") != NULL)
        snprintf(out->source, sizeof(out->source), "built-in default for %s (measured on 2 and 4 H200s)", model);
    else if (strstr(model, "H100") != NULL)
        snprintf(out->source, sizeof(out->source),
                 "built-in default for %s (the H200's measurements: the same GH100 compute, less memory bandwidth; "
                 "not measured on an H100)", model);
    else if (emulated)
        snprintf(out->source, sizeof(out->source),
                 "built-in default for %s (the H200's, so that the CPU emulation picks as a GPU machine does)", model);
    else
        snprintf(out->source, sizeof(out->source), "built-in default for %s (none for it: the H200's; run hirnode tune)",
                 model);
}

void hn_profile_device_model(const hn_device_ops *dev, char *model, size_t n, char *cuda, size_t cn)
{
    snprintf(model, n, "%s", dev->name);
    snprintf(cuda, cn, "-");
    if (dev->describe != NULL && dev->device_count() > 0)
        dev->describe(0, model, n, cuda, cn);
}

typedef struct entry {
    const hn_device_ops *dev;
    char model[96], path[4096]; /* path: as long as the setting allows */
    int count;
    hn_cost_profile p;
    struct entry *next;
} entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static entry *cache;

const hn_cost_profile *hn_profile_get(const hn_device_ops *dev, const char *model, int count)
{
    const char *named = hn_setting_get("profile");
    char path[4096] = "";
    entry *e;
    if (named != NULL && *named != '\0')
        snprintf(path, sizeof(path), "%s", named);
    else if (!dev->emulated && (!hn_profile_default_path(model, count, path, sizeof(path)) || access(path, F_OK) != 0))
        path[0] = '\0'; /* no file of its own yet: the built-in default, said nowhere but in hirnode info */
    pthread_mutex_lock(&cache_mu);
    for (e = cache; e != NULL; e = e->next)
        if (e->dev == dev && strcmp(e->model, model) == 0 && e->count == count &&
            strcmp(e->path, path) == 0)
            break;
    if (e == NULL && (e = calloc(1, sizeof(*e))) != NULL) { /* kept for the process's life */
        hn_strbuf why;
        e->dev = dev;
        snprintf(e->model, sizeof(e->model), "%s", model);
        snprintf(e->path, sizeof(e->path), "%s", path);
        e->count = count;
        hn_sb_init(&why);
        if (path[0] == '\0' || hn_profile_read(path, model, count, &e->p, &why) != HN_OK) {
            hn_profile_builtin_for(model, dev->emulated, &e->p);
            if (path[0] != '\0')
                HN_WARN("profile %s: %s; using the %s", path, why.data != NULL ? why.data : "out of memory",
                        e->p.source);
        }
        hn_sb_free(&why);
        e->next = cache;
        cache = e;
    }
    pthread_mutex_unlock(&cache_mu);
    return e != NULL ? &e->p : hn_cost_builtin();
}

const hn_cost_profile *hn_profile_for(const hn_device_ops *dev, int count)
{
    char model[96], cuda[24];
    hn_profile_device_model(dev, model, sizeof(model), cuda, sizeof(cuda));
    return hn_profile_get(dev, model, count);
}

void hn_profile_describe(const hn_cost_profile *p, char *buf, size_t n)
{
    if (p->builtin)
        snprintf(buf, n, "%s", p->source);
    else
        snprintf(buf, n, "%s (measured %s on %s x%d)", p->source, p->date, p->model, p->count);
}

/* Every collective and a send/recv ring through the runtime on the test
 * backend (host or cuda+nccl), at 1..max ranks: small exact integers as
 * data, analytic references, 8 repetitions on the same buffers, outputs
 * poisoned before each run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hirnode/runtime.h"
#include "model/cost.h"
#include "ranks/teams.h"
#include "../test.h"

#define C 1000 /* elements per chunk */

typedef struct coll_case {
    const char *name, *body;
    hn_dtype dtype;
    /* expected Y[p] on rank r of n, repetition k; NAN: not written */
    double (*want)(int r, int n, int p, int k);
    int reps; /* 0: 8 */
} coll_case;

/* X[p] on rank r, repetition k: small integers, exact in bf16 and f32 */
static double xv(int r, int p, int k) { return (double)((r * 37 + p * 11 + k * 5) % 64 - 32); }

static double w_allgather(int r, int n, int p, int k)
{
    (void)r;
    (void)n;
    return xv(p / C, p % C, k);
}

static double w_sum(int r, int n, int p, int k)
{
    double s = 0;
    (void)r;
    for (int j = 0; j < n; j++)
        s += xv(j, p, k);
    return s;
}

static double w_max(int r, int n, int p, int k)
{
    double m = -1e9;
    (void)r;
    for (int j = 0; j < n; j++)
        m = fmax(m, xv(j, p, k));
    return m;
}

static double w_min_root0(int r, int n, int p, int k)
{
    double m = 1e9;
    if (r != 0)
        return NAN;
    for (int j = 0; j < n; j++)
        m = fmin(m, xv(j, p, k));
    return m;
}

static double w_reduce_scatter(int r, int n, int p, int k)
{
    return p < C ? w_sum(r, n, r * C + p, k) : NAN;
}

static double w_broadcast(int r, int n, int p, int k)
{
    (void)r;
    return xv(n - 1, p, k);
}

static double w_gather(int r, int n, int p, int k)
{
    return r == 0 ? w_allgather(r, n, p, k) : NAN;
}

static double w_scatter(int r, int n, int p, int k)
{
    (void)n;
    return p < C ? xv(0, r * C + p, k) : NAN;
}

static double w_all_to_all(int r, int n, int p, int k)
{
    (void)n;
    return xv(p / C, r * C + p % C, k);
}

static double w_ring(int r, int n, int p, int k) { return xv((r + n - 1) % n, p, k); }

static double w_avg(int r, int n, int p, int k) { return w_sum(r, n, p, k) / n; }

static double w_sum_max(int r, int n, int p, int k) { return w_sum(r, n, p, k) + w_max(r, n, p, k); }

/* allgather of every rank's first chunk, then reduce_scatter of the
 * gathered buffer (the same on every rank) into the first chunk of Y:
 * n times rank r's first chunk */
static double w_gather_scatter(int r, int n, int p, int k)
{
    return p < C ? n * xv(r, p, k) : NAN;
}

/* first half from the left neighbour's first half, second half from the
 * right neighbour's second half */
static double w_two_rings(int r, int n, int p, int k)
{
    int half = C * n / 2;
    return p < half ? xv((r + n - 1) % n, p, k) : xv((r + 1) % n, p, k);
}

static const coll_case cases[] = {
    {"allgather", "x = chunk X, 0, world, 0\nallgather Y <- x\n", HN_BF16, w_allgather, 0},
    {"allreduce sum", "allreduce Y <- X op sum\n", HN_BF16, w_sum, 0},
    {"allreduce max, in place", "copy Y <- X\nallreduce Y <- Y op max\n", HN_F32, w_max, 0},
    {"allreduce avg", "allreduce Y <- X op avg\n", HN_F32, w_avg, 0},
    {"reduce_scatter", "y = chunk Y, 0, world, 0\nreduce_scatter y <- X op sum\n", HN_F32, w_reduce_scatter, 0},
    {"broadcast", "broadcast Y <- X root world - 1\n", HN_BF16, w_broadcast, 0},
    {"reduce", "reduce Y <- X op min root 0\n", HN_F32, w_min_root0, 0},
    {"gather", "x = chunk X, 0, world, 0\ngather Y <- x root 0\n", HN_F32, w_gather, 0},
    {"scatter", "y = chunk Y, 0, world, 0\nscatter y <- X root 0\n", HN_F32, w_scatter, 0},
    {"all_to_all", "all_to_all Y <- X\n", HN_BF16, w_all_to_all, 0},
    {"send/recv ring", "group {\n  recv Y from (rank - 1) % world\n  send X to (rank + 1) % world\n}\n", HN_F32,
     w_ring, 32},
    /* the peer-copy rings */
    {"allgather via p2p", "x = chunk X, 0, world, 0\nallgather Y <- x via p2p\n", HN_BF16, w_allgather, 0},
    {"reduce_scatter via p2p", "y = chunk Y, 0, world, 0\nreduce_scatter y <- X op sum via p2p\n", HN_F32,
     w_reduce_scatter, 0},
    {"allreduce sum via p2p", "allreduce Y <- X op sum via p2p\n", HN_BF16, w_sum, 0},
    {"allreduce max via p2p, in place", "copy Y <- X\nallreduce Y <- Y op max via p2p\n", HN_F32, w_max, 0},
    {"allreduce avg via p2p", "allreduce Y <- X op avg via p2p\n", HN_F32, w_avg, 0},
    {"broadcast via p2p", "broadcast Y <- X root world - 1 via p2p\n", HN_BF16, w_broadcast, 0},
    {"send/recv ring via p2p", "group {\n  send X to (rank + 1) % world via p2p\n  recv Y from (rank - 1) % world "
     "via p2p\n}\n", HN_F32, w_ring, 32},
    {"allgather via p2p get", "x = chunk X, 0, world, 0\nallgather Y <- x via p2p get\n", HN_BF16, w_allgather, 0},
    {"broadcast via p2p get", "broadcast Y <- X root world - 1 via p2p get\n", HN_F32, w_broadcast, 0},
    {"reduce_scatter via p2p get", "y = chunk Y, 0, world, 0\nreduce_scatter y <- X op sum via p2p get\n", HN_F32,
     w_reduce_scatter, 0},
    {"allreduce sum via p2p get", "allreduce Y <- X op sum via p2p get\n", HN_BF16, w_sum, 0},
    {"reduce_scatter via p2p, put then get then put", "y = chunk Y, 0, world, 0\nreduce_scatter y <- X op sum via p2p\n"
     "reduce_scatter y <- X op sum via p2p get\nreduce_scatter y <- X op sum via p2p\n", HN_F32, w_reduce_scatter, 0},
    {"send/recv ring via p2p get", "group {\n  recv Y from (rank - 1) % world via p2p get\n  send X to (rank + 1) % "
     "world via p2p get\n}\n", HN_F32, w_ring, 32},
    /* the latency path: by size, one-shot, two-shot, in place, on two
     * streams (its calls on one team ordered by the communicator), back to
     * back with sizes changing, and via auto (small: the latency path) */
    {"allreduce sum via ll", "allreduce Y <- X op sum via ll\n", HN_BF16, w_sum, 0},
    {"allreduce max via ll oneshot, in place", "copy Y <- X\nallreduce Y <- Y op max via ll oneshot\n", HN_F32,
     w_max, 0},
    {"allreduce avg via ll twoshot", "allreduce Y <- X op avg via ll twoshot\n", HN_F32, w_avg, 0},
    {"allreduce max via ll twoshot, in place, f16", "copy Y <- X\nallreduce Y <- Y op max via ll twoshot\n", HN_F16,
     w_max, 0},
    {"allgather via ll", "x = chunk X, 0, world, 0\nallgather Y <- x via ll\n", HN_BF16, w_allgather, 0},
    {"allgather via ll twoshot", "x = chunk X, 0, world, 0\nallgather Y <- x via ll twoshot\n", HN_F32, w_allgather,
     0},
    {"reduce_scatter via ll", "y = chunk Y, 0, world, 0\nreduce_scatter y <- X op sum via ll\n", HN_F32,
     w_reduce_scatter, 0},
    {"reduce_scatter via ll twoshot, f16", "y = chunk Y, 0, world, 0\nreduce_scatter y <- X op sum via ll twoshot\n",
     HN_F16, w_reduce_scatter, 0},
    {"allreduce via auto (the latency path)", "allreduce Y <- X op sum via auto\n", HN_BF16, w_sum, 0},
    {"via ll on two streams and back to back, sizes changing",
     "s0 = current_stream\nZ = alloc f32[1000 * world]\nset_stream stream(1)\nwait_stream s0\n"
     "allreduce Z <- X op sum via ll\nset_stream s0\nallreduce Y <- X op max via ll twoshot\n"
     "for i in 0 .. 3 {\n  x = chunk X, 0, world, i % world\n  allreduce x <- x op max via ll oneshot\n}\n"
     "wait_stream stream(1)\nadd Y <- Y, Z\n", HN_F32, w_sum_max, 0},
    {"allgather then reduce_scatter via ll, back to back",
     "Z = alloc f32[1000 * world]\nx = chunk X, 0, world, 0\nallgather Z <- x via ll oneshot\n"
     "y = chunk Y, 0, world, 0\nreduce_scatter y <- Z op sum via ll\n", HN_F32, w_gather_scatter, 0},
    {"two rings via p2p, receives first", "x = chunk X, 0, 2, 0\nz = chunk X, 0, 2, 1\ny = chunk Y, 0, 2, 0\n"
     "u = chunk Y, 0, 2, 1\ngroup {\n  recv y from (rank - 1) % world via p2p\n  recv u from (rank + 1) % world "
     "via p2p\n  send x to (rank + 1) % world via p2p\n  send z to (rank - 1) % world via p2p\n}\n", HN_F32,
     w_two_rings, 32},
};

static void run_case(const coll_case *c, int n)
{
    char text[1024];
    hn_program *p;
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    void *x[8], *y[8];
    size_t count = (size_t)C * (size_t)n, bytes = count * (size_t)hn_dtype_size(c->dtype);
    char *host = malloc(bytes);
    size_t sz[8] = {bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes};
    hn_binding b[2] = {{"X", x, sz}, {"Y", y, sz}};
    hn_run_args args = {0, NULL, NULL, 2, b};
    snprintf(text, sizeof(text), "input X : %s[%d * world] replicated\noutput Y : %s[%d * world] replicated\n%s",
             hn_dtype_name(c->dtype), C, hn_dtype_name(c->dtype), C, c->body);
    p = hn_test_parse(text, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    cfg.backend = hn_test_backend;
    cfg.host_delay_us = 20;
    CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
    for (int r = 0; r < n; r++) {
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, bytes, &x[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, bytes, &y[r]), HN_OK);
    }
    for (int k = 0; k < (c->reps ? c->reps : 8); k++) {
        int wrong = 0;
        for (int r = 0; r < n; r++) {
            for (size_t i = 0; i < count; i++)
                hn_store(c->dtype, host, (int64_t)i, xv(r, (int)i, k));
            hn_runtime_upload(rt, r, x[r], host, bytes);
            for (size_t i = 0; i < count; i++)
                hn_store(c->dtype, host, (int64_t)i, NAN);
            hn_runtime_upload(rt, r, y[r], host, bytes);
        }
        if (hn_runtime_run(rt, p, &args) != HN_OK) {
            fprintf(stderr, "\n  %s at %d ranks: %s\n", c->name, n, hn_runtime_error(rt));
            CU_FAIL("run failed");
            break;
        }
        for (int r = 0; r < n; r++) {
            hn_runtime_download(rt, r, host, y[r], bytes);
            for (size_t i = 0; i < count && !wrong; i++) {
                double got = hn_load(c->dtype, host, (int64_t)i), want = c->want(r, n, (int)i, k);
                /* exact but for avg, which NCCL computes as sum * (1/n) */
                int ok = isnan(want) ? isnan(got) : fabs(got - want) <= 1e-6 * (fabs(want) + 1);
                if (!ok) {
                    fprintf(stderr, "\n  %s at %d ranks, rank %d, [%zu], repetition %d: %g, want %g\n", c->name,
                            n, r, i, k, got, want);
                    wrong = 1;
                }
            }
        }
        CU_ASSERT_FALSE(wrong);
        if (wrong)
            break;
    }
    for (int r = 0; r < n; r++) {
        hn_runtime_free(rt, r, x[r]);
        hn_runtime_free(rt, r, y[r]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    free(host);
}

static void test_all(void)
{
    for (int n = 1; n <= hn_test_max_ranks(); n++)
        for (int i = 0; i < HN_ARRAY_LEN(cases); i++)
            run_case(&cases[i], n);
}

/* ---- `via auto` by size, one instruction ---- */

/* Occurrences of `needle` in the file at path. */
static int count_in_file(const char *path, const char *needle)
{
    size_t len = 0;
    char *text = hn_test_read_file(path, &len), *at = text;
    int k = 0;
    while (at != NULL && (at = strstr(at, needle)) != NULL) {
        k++;
        at += strlen(needle);
    }
    free(text);
    return k;
}

/* One `allgather ... via auto` whose size changes from call to call in a
 * run (8 MiB gathered, then 32 KiB, in turn): each call goes through the
 * communicator its own size picks (the rings, the latency path), as the
 * trace records it, and every output is right. Resolving once per
 * instruction and size (the evaluator keeps what it resolved for the
 * run) must not carry one size's pick over to the other. */
static void test_auto_by_size(void)
{
    enum { IN = 1 << 20, CALLS = 6, N = 2 };
    const char *text = "param S = 6\ninput X : f32[1048576] replicated\noutput Y : f32[1048576 * world] replicated\n"
                       "for i in 0 .. S {\n  k = 1 + 255 * (i % 2)\n  x = chunk X, 0, k, 0\n  y = chunk Y, 0, k, 0\n"
                       "  allgather y <- x via auto\n}\n";
    hn_program *p = hn_test_parse(text, NULL);
    hn_runtime *rt = hn_test_max_ranks() < N ? NULL : hn_test_runtime(NULL, N, 0, 30, 0);
    char path[] = "/tmp/hn_auto_by_size_XXXXXX", needle[2][64];
    size_t in = (size_t)IN * 4, out = in * N, szx[N] = {in, in}, szy[N] = {out, out};
    void *x[N], *y[N];
    float *host = malloc(out);
    hn_binding b[2] = {{"X", x, szx}, {"Y", y, szy}};
    hn_run_args args = {0, NULL, NULL, 2, b};
    hn_via big = hn_via_resolve(HN_VIA_AUTO, 1, 0, HN_COLL_ALLGATHER, IN, HN_F32, N);
    hn_via small = hn_via_resolve(HN_VIA_AUTO, 1, 0, HN_COLL_ALLGATHER, IN / 256, HN_F32, N);
    int fd = mkstemp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_TRUE_FATAL(fd >= 0 && host != NULL);
    close(fd);
    if (rt == NULL) { /* a team of one: nothing to pick between */
        hn_program_destroy(p);
        free(host);
        unlink(path);
        return;
    }
    CU_ASSERT_NOT_EQUAL(big, small); /* what makes the test mean something */
    for (int r = 0; r < N; r++) {
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, in, &x[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, out, &y[r]), HN_OK);
        for (int i = 0; i < IN; i++)
            host[i] = (float)((r * 37 + i * 11) % 64 - 32);
        hn_runtime_upload(rt, r, x[r], host, in);
        for (int i = 0; i < 2 * IN; i++)
            host[i] = NAN;
        hn_runtime_upload(rt, r, y[r], host, out);
    }
    CU_ASSERT_EQUAL_FATAL(hn_runtime_trace_start(rt, path), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_trace_stop(rt), HN_OK);
    for (int r = 0; r < N; r++) { /* the last call gathered 32 KiB: Y's first 8192 */
        int wrong = 0, len = IN / 256;
        hn_runtime_download(rt, r, host, y[r], out);
        for (int i = 0; i < 2 * IN && !wrong; i++) {
            int j = i < 2 * len ? i / len : i / IN, e = i < 2 * len ? i % len : i % IN;
            wrong = host[i] != (float)((j * 37 + e * 11) % 64 - 32);
        }
        CU_ASSERT_FALSE(wrong);
    }
    /* one record of each call on each rank */
    snprintf(needle[0], sizeof(needle[0]), "\"via\":\"auto\",\"comm\":\"%s\",\"bytes\":%zu",
             hn_runtime_comm(rt, big)->ops->name, out);
    snprintf(needle[1], sizeof(needle[1]), "\"via\":\"auto\",\"comm\":\"%s\",\"bytes\":%zu",
             hn_runtime_comm(rt, small)->ops->name, out / 256);
    CU_ASSERT_EQUAL(count_in_file(path, needle[0]), N * CALLS / 2);
    CU_ASSERT_EQUAL(count_in_file(path, needle[1]), N * CALLS / 2);
    unlink(path);
    for (int r = 0; r < N; r++) {
        hn_runtime_free(rt, r, x[r]);
        hn_runtime_free(rt, r, y[r]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    free(host);
}

/* ---- allreduce + residual + RMSNorm, fused ---- */

typedef struct norm_case {
    const char *via; /* as written after `via`, or "" */
    hn_dtype dtype;
    int rows, hidden;
    int in_place; /* Y over X */
} norm_case;

/* rank r's addend, the residual, the weight: small integers (sums exact in
 * every dtype), the weight in eighths */
static double nx(int r, int i, int k) { return (double)((r * 13 + i * 7 + k * 3) % 17 - 8); }
static double nr(int i, int k) { return (double)((i * 5 + k) % 11 - 5); }
static double nw(int j) { return (double)(j % 9 + 1) / 8; }

/* Two fused steps back to back in one run, the residual updated in place:
 * R = 2 S + R0 exactly (S the sum of the addends), Y the norm of it. */
static void run_norm_case(const norm_case *c, int n)
{
    char text[1024], via[48];
    hn_program *p;
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    void *x[8], *y[8], *r[8], *w[8];
    size_t count = (size_t)c->rows * (size_t)c->hidden, es = (size_t)hn_dtype_size(c->dtype), bytes = count * es;
    double rel = c->dtype == HN_F32 ? 1e-6 : c->dtype == HN_F16 ? 1.0 / 1024 : 1.0 / 128;
    char *host = malloc(bytes);
    size_t nbytes[8], wbytes[8];
    hn_binding b[4] = {{"X", x, nbytes}, {"Y", y, nbytes}, {"R", r, nbytes}, {"W", w, wbytes}};
    hn_run_args args = {0, NULL, NULL, 4, b};
    const char *dt = hn_dtype_name(c->dtype), *src = c->in_place ? "Y" : "X";
    const char *copy = c->in_place ? "copy Y <- X\n" : ""; /* Y takes X's place before each step */
    snprintf(via, sizeof(via), "%s%s", c->via[0] ? " via " : "", c->via);
    snprintf(text, sizeof(text),
             "input X : %s[%d, %d] replicated\ninput W : %s[%d] replicated\noutput Y : %s[%d, %d] replicated\n"
             "output R : %s[%d, %d] replicated\n%sallreduce_rmsnorm Y, R <- %s, R, W eps 1e-5%s\n"
             "%sallreduce_rmsnorm Y, R <- %s, R, W op sum eps 1e-5%s\n",
             dt, c->rows, c->hidden, dt, c->hidden, dt, c->rows, c->hidden, dt, c->rows, c->hidden, copy, src, via,
             copy, src, via);
    p = hn_test_parse(text, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    cfg.backend = hn_test_backend;
    cfg.host_delay_us = 20;
    CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
    for (int q = 0; q < n; q++) {
        nbytes[q] = bytes;
        wbytes[q] = (size_t)c->hidden * es;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, q, bytes, &x[q]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, q, bytes, &y[q]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, q, bytes, &r[q]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, q, (size_t)c->hidden * es, &w[q]), HN_OK);
    }
    for (int k = 0; k < 4; k++) {
        int wrong = 0;
        for (int q = 0; q < n; q++) {
            for (size_t i = 0; i < count; i++)
                hn_store(c->dtype, host, (int64_t)i, nx(q, (int)i, k));
            hn_runtime_upload(rt, q, x[q], host, bytes);
            for (size_t i = 0; i < count; i++)
                hn_store(c->dtype, host, (int64_t)i, nr((int)i, k));
            hn_runtime_upload(rt, q, r[q], host, bytes);
            for (int j = 0; j < c->hidden; j++)
                hn_store(c->dtype, host, j, nw(j));
            hn_runtime_upload(rt, q, w[q], host, (size_t)c->hidden * es);
            for (size_t i = 0; i < count; i++)
                hn_store(c->dtype, host, (int64_t)i, NAN);
            hn_runtime_upload(rt, q, y[q], host, bytes);
        }
        if (hn_runtime_run(rt, p, &args) != HN_OK) {
            fprintf(stderr, "\n  allreduce_rmsnorm%s %s at %d ranks: %s\n", via, hn_dtype_name(c->dtype), n,
                    hn_runtime_error(rt));
            CU_FAIL("run failed");
            break;
        }
        for (int q = 0; q < n && !wrong; q++) {
            char *yh = malloc(bytes);
            hn_runtime_download(rt, q, host, r[q], bytes);
            hn_runtime_download(rt, q, yh, y[q], bytes);
            for (int row = 0; row < c->rows && !wrong; row++) {
                double sumsq = 0, scale;
                for (int j = 0; j < c->hidden; j++) {
                    int i = row * c->hidden + j;
                    double s = 0;
                    for (int t = 0; t < n; t++)
                        s += nx(t, i, k);
                    sumsq += (2 * s + nr(i, k)) * (2 * s + nr(i, k));
                    if (hn_load(c->dtype, host, i) != 2 * s + nr(i, k)) {
                        fprintf(stderr, "\n  allreduce_rmsnorm%s %s at %d ranks, rank %d, R[%d]: %g, want %g\n", via,
                                hn_dtype_name(c->dtype), n, q, i, hn_load(c->dtype, host, i), 2 * s + nr(i, k));
                        wrong = 1;
                        break;
                    }
                }
                scale = 1 / sqrt(sumsq / c->hidden + 1e-5);
                for (int j = 0; j < c->hidden && !wrong; j++) {
                    int i = row * c->hidden + j;
                    double want = hn_load(c->dtype, host, i) * scale * nw(j), got = hn_load(c->dtype, yh, i);
                    if (!(fabs(got - want) <= rel * fabs(want) + 1e-6)) {
                        fprintf(stderr, "\n  allreduce_rmsnorm%s %s at %d ranks, rank %d, Y[%d]: %g, want %g\n", via,
                                hn_dtype_name(c->dtype), n, q, i, got, want);
                        wrong = 1;
                    }
                }
            }
            free(yh);
        }
        CU_ASSERT_FALSE(wrong);
        if (wrong)
            break;
    }
    for (int q = 0; q < n; q++) {
        hn_runtime_free(rt, q, x[q]);
        hn_runtime_free(rt, q, y[q]);
        hn_runtime_free(rt, q, r[q]);
        hn_runtime_free(rt, q, w[q]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    free(host);
}

static void test_norm(void)
{
    /* every communicator (p2p: rows x hidden divisible by 1..8), both
     * latency-path algorithms, one row (two-shot with empty chunks), in place */
    static const norm_case norms[] = {
        {"", HN_BF16, 4, 840, 0},       {"nccl", HN_F32, 3, 280, 1},     {"p2p", HN_BF16, 2, 840, 0},
        {"ll", HN_BF16, 4, 520, 0},     {"ll oneshot", HN_F16, 3, 300, 1}, {"ll twoshot", HN_F32, 5, 96, 0},
        {"ll twoshot", HN_BF16, 1, 4000, 1}, {"auto", HN_BF16, 2, 512, 0},
    };
    for (int n = 1; n <= hn_test_max_ranks(); n++)
        for (int i = 0; i < HN_ARRAY_LEN(norms); i++)
            run_norm_case(&norms[i], n);
}

void hn_suite_collectives(void)
{
    static CU_TestInfo tests[] = {
        {"every collective (nccl or host, and p2p) and rings, 1..max ranks, 8 or 32 repetitions", test_all},
        {"allreduce + residual + RMSNorm through every communicator, 1..max ranks", test_norm},
        {"one allgather via auto whose size changes within a run: each call by its own size", test_auto_by_size},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("runtime/collectives", tests);
}

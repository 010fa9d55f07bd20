/* `hirnode bench collectives`: time per call and busbw of hirnode's
 * collectives through each communicator asked for (the latency path, NCCL,
 * the p2p rings, `auto`) beside raw NCCL measured in the same run, in the
 * table format of nccl-tests; also the fused allreduce + residual +
 * RMSNorm (`--op allreduce_rmsnorm`, beside raw NCCL's plain allreduce).
 * Every side is timed the same way, the slowest rank, the median of `reps`
 * repetitions, each side's repetitions back to back after its own warm-up:
 * by default on the device (a timing marker — on CUDA an event — before and
 * after `iters` back-to-back calls of one run), or with --timing host the
 * host clock around the whole run. With --graph the `iters` calls are
 * captured in one graph (hn_runtime_capture; raw NCCL: a CUDA graph of its
 * own calls) and each repetition is one replay: per call = the replay's
 * time / iters. Inputs are rank + 1 everywhere, so results are exact and
 * checked (#wrong; the norm against its reference). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/runtime/tools.h"
#include "hirnode/runtime.h"

#include "launch.h"
#include "options.h"

#define MAX_VIAS 8

typedef struct bench_opts {
    hn_runtime_config cfg;
    hn_cli_devices devices; /* --devices */
    char vias[MAX_VIAS][32]; /* as written after `via` */
    int nvias;
    const char *ops;
    size_t min, max;
    hn_dtype dtype;
    int iters, warmup, reps;
    int markdown;
    int device_timing;
    int graph;         /* the iters calls captured in one graph, each repetition one replay */
    int hidden;        /* the norm: elements of a row */
    const char *trace; /* record every run into this file (times then include tracing) */
    int soak;          /* replays checked one by one after the timing (allreduce; soak_via) */
} bench_opts;

/* One size of one operation: a collective, or the fused norm (an
 * allreduce of rows x hidden with its residual and weight). */
typedef struct bench_op {
    hn_coll_kind kind;
    int norm;
    size_t chunk;        /* as hn_coll_args.count */
    size_t rows, hidden; /* the norm */
} bench_op;

/* --via "ll,nccl,p2p get" into vias; 0 when empty or too many. */
static int parse_vias(const char *s, void *dest, hn_strbuf *err)
{
    bench_opts *o = dest;
    (void)err; /* the parser says what the option takes */
    o->nvias = 0;
    while (*s != '\0') {
        const char *comma = strchr(s, ',');
        size_t len = comma != NULL ? (size_t)(comma - s) : strlen(s);
        if (len == 0 || len >= sizeof(o->vias[0]) || o->nvias == MAX_VIAS)
            return 0;
        memcpy(o->vias[o->nvias], s, len);
        o->vias[o->nvias++][len] = '\0';
        s += len + (comma != NULL);
    }
    return o->nvias > 0;
}

static double factor(hn_coll_kind k, int n)
{
    return k == HN_COLL_ALLREDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
}

static hn_program *program(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static hn_program *program(const char *fmt, ...)
{
    char text[1024], *diag = NULL;
    hn_program *p = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (hn_program_parse(text, strlen(text), "<bench>", &p, &diag) != HN_OK) {
        fprintf(stderr, "%s", diag ? diag : "bench: bad program\n");
        p = NULL;
    }
    hn_string_free(diag);
    return p;
}

typedef struct result {
    double t;   /* median seconds per call */
    long wrong; /* mismatches, -1: not measured */
} result;

/* The first rank's output here (rank 0's in one process) of one call
 * against the exact result, the same on every rank (all of it up to 64
 * MiB, 1/97 above). */
static long count_wrong(hn_coll_kind kind, hn_dtype dt, const char *host, size_t out, size_t chunk, int n)
{
    size_t step = out * (size_t)hn_dtype_size(dt) > (64u << 20) ? 97 : 1;
    long wrong = 0;
    for (size_t e = 0; e < out; e += step) {
        double want = kind == HN_COLL_ALLGATHER ? (double)(e / chunk + 1) : n * (n + 1) / 2.0;
        wrong += hn_load(dt, host, (int64_t)e) != want;
    }
    return wrong;
}

/* One element of the norm's input X on rank r (iota: r + 1 + e / 64, as
 * stored in the dtype), so that a row's elements differ and a norm of a
 * wrong row sum shows. */
#define NORM_X_STEP (1.0 / 64)
static float norm_x(hn_dtype dt, int r, size_t e)
{
    char cell[8];
    hn_store(dt, cell, 0, r + 1 + (double)e * NORM_X_STEP);
    return (float)hn_load(dt, cell, 0);
}

/* The norm's outputs on rank 0 after `calls` fused steps from R = 0 (W =
 * 1): R, each step the ranks' X summed in fp32 in rank order, R added and
 * rounded to the dtype as stored (the latency path's way; within n + 1
 * units in the last place, as NCCL rounds on the way); Y, every row's
 * norm of R as stored, within the dtype's rounding (the sums of squares
 * go in another order). Rows are checked whole, every 97th of a large
 * tensor. */
static long count_wrong_norm(hn_dtype dt, const char *y, const char *r, size_t count, size_t hidden, int n,
                             int calls)
{
    size_t rows = count / hidden, step = count * (size_t)hn_dtype_size(dt) > (64u << 20) ? 97 : 1;
    double rel = dt == HN_F32 ? 1e-5 : dt == HN_F16 ? 2e-3 : 8e-3;
    double ulps = (n + 1) * (dt == HN_F32 ? 0x1p-23 : dt == HN_F16 ? 0x1p-10 : 0x1p-7);
    char cell[8];
    long wrong = 0;
    for (size_t row = 0; row < rows; row += step) {
        double sumsq = 0, scale;
        for (size_t c = 0; c < hidden; c++) {
            size_t e = row * hidden + c;
            double got = hn_load(dt, r, (int64_t)e);
            float acc = norm_x(dt, 0, e), res = 0; /* X is the same every step */
            for (int q = 1; q < n; q++)
                acc += norm_x(dt, q, e);
            for (int k = 0; k < calls; k++) {
                hn_store(dt, cell, 0, acc + res);
                res = (float)hn_load(dt, cell, 0);
            }
            wrong += !(fabs(got - res) <= ulps * fabs(res));
            sumsq += got * got;
        }
        scale = 1.0 / sqrt(sumsq / (double)hidden + 1e-6);
        for (size_t c = 0; c < hidden; c++) {
            size_t e = row * hidden + c;
            double want = hn_load(dt, r, (int64_t)e) * scale;
            wrong += !(fabs(hn_load(dt, y, (int64_t)e) - want) <= rel * fabs(want));
        }
    }
    return wrong;
}

/* The programs of one operation through `via`: init writes the inputs
 * (rank + 1) and poisons the outputs, main runs ITERS calls. */
static hn_status_t programs(const bench_opts *o, const bench_op *op, const char *via, int n, hn_program **init,
                            hn_program **main)
{
    const char *dt = hn_dtype_name(o->dtype);
    if (op->norm) {
        size_t R = op->rows, H = op->hidden;
        *init = program("output X : %s[%zu, %zu] replicated\noutput Y : %s[%zu, %zu] replicated\n"
                        "output R : %s[%zu, %zu] replicated\noutput W : %s[%zu] replicated\n"
                        "iota X <- rank + 1, %.9g\nfill Y <- -7\nfill R <- 0\nfill W <- 1\n",
                        dt, R, H, dt, R, H, dt, R, H, dt, H, NORM_X_STEP);
        *main = program("param ITERS = 1\ninput X : %s[%zu, %zu] replicated\ninput W : %s[%zu] replicated\n"
                        "output Y : %s[%zu, %zu] replicated\noutput R : %s[%zu, %zu] replicated\n"
                        "for it in 0 .. ITERS {\n  allreduce_rmsnorm Y, R <- X, R, W eps 1e-6 via %s\n}\n",
                        dt, R, H, dt, H, dt, R, H, dt, R, H, via);
    } else {
        size_t in = op->kind == HN_COLL_REDUCE_SCATTER ? op->chunk * (size_t)n : op->chunk;
        size_t out = op->kind == HN_COLL_ALLGATHER ? op->chunk * (size_t)n : op->chunk;
        *init = program("param N = %zu\noutput X : %s[N] replicated\noutput Y : %s[%zu] replicated\n"
                        "fill X <- rank + 1\nfill Y <- -7\n", in, dt, dt, out);
        *main = program("param ITERS = 1\ninput X : %s[%zu] replicated\noutput Y : %s[%zu] replicated\n"
                        "for it in 0 .. ITERS {\n  %s Y <- X%s via %s\n}\n", dt, in, dt, out,
                        hn_coll_name(op->kind), op->kind == HN_COLL_ALLGATHER ? "" : " op sum", via);
    }
    return *init != NULL && *main != NULL ? HN_OK : HN_ERR_INVALID;
}

/* The timing markers of a replay, on every rank's caller stream (run_timing.c) */
static hn_status_t mark_start(hn_rank *r, void *arg)
{
    (void)arg;
    return hn_rank_run_mark(r, 0);
}

static hn_status_t mark_end(hn_rank *r, void *arg)
{
    (void)arg;
    return hn_rank_run_mark(r, 1);
}

static hn_status_t mark_measure(hn_rank *r, void *arg)
{
    (void)arg;
    hn_rank_run_measure(r);
    return HN_OK;
}

/* One replay of g, timed: on the device, markers before and after it on
 * every rank (the slowest rank), else the host clock around the replay and
 * the end of the launches. */
static hn_status_t timed_replay(hn_runtime *rt, hn_graph *g, int device, double *seconds)
{
    double t0;
    hn_status_t st = HN_OK;
    if (device && (st = hn_runtime_exec_all(rt, mark_start, NULL)) != HN_OK)
        return st;
    t0 = hn_now();
    if ((st = hn_runtime_replay(rt, g, NULL)) != HN_OK)
        return st;
    if (device && (st = hn_runtime_exec_all(rt, mark_end, NULL)) != HN_OK)
        return st;
    if ((st = hn_runtime_sync(rt)) != HN_OK)
        return st;
    *seconds = hn_now() - t0;
    if (device) {
        if ((st = hn_runtime_exec_all(rt, mark_measure, NULL)) != HN_OK)
            return st;
        *seconds = hn_runtime_run_seconds(rt);
    }
    if ((st = hn_procs_max(rt, *seconds, seconds)) != HN_OK) /* the slowest process's */
        return st;
    return *seconds < 0 ? HN_ERR_RUNTIME : HN_OK;
}

/* One size of one operation through `via`: warm-up, a verifying run, the
 * timed repetitions (runs of ITERS calls, or replays of them captured in
 * one graph), then a run (or a replay) on poisoned outputs, checked. */
static hn_status_t run_via(hn_runtime *rt, const bench_opts *o, const bench_op *op, const char *via, void **x,
                           void **y, void **r, void **w, result *res)
{
    /* the world's ranks make the program; this process's hold buffers */
    int n = hn_runtime_world(rt), nl = hn_runtime_size(rt), first = hn_runtime_first_rank(rt);
    size_t es = (size_t)hn_dtype_size(o->dtype);
    size_t out = op->norm ? op->rows * op->hidden : op->kind == HN_COLL_ALLGATHER ? op->chunk * (size_t)n : op->chunk;
    hn_program *init = NULL, *main = NULL;
    double *t = calloc((size_t)o->reps, sizeof(double));
    size_t in = op->kind == HN_COLL_REDUCE_SCATTER ? op->chunk * (size_t)n : op->chunk;
    char *host = NULL, *host_r = NULL;
    size_t *nb_of = calloc((size_t)nl * 4, sizeof(size_t)); /* bytes of X, Y, R, W on each rank here */
    hn_binding b[4] = {{"X", x, nb_of}, {"Y", y, nb_of + nl}, {"R", r, nb_of + 2 * nl}, {"W", w, nb_of + 3 * nl}};
    const char *names[] = {"ITERS"};
    int64_t iters[1];
    int nb = op->norm ? 4 : 2, calls = 1;
    hn_run_args args = {1, names, iters, nb, b};
    hn_run_args init_args = {0, NULL, NULL, nb, b};
    hn_graph *g = NULL;
    hn_status_t st = programs(o, op, via, n, &init, &main);
    for (int q = 0; q < nl && nb_of != NULL; q++) {
        nb_of[q] = in * es;
        nb_of[nl + q] = out * es;
        nb_of[2 * nl + q] = op->norm ? out * es : 0;
        nb_of[3 * nl + q] = op->norm ? op->hidden * es : 0;
    }
    res->wrong = -1;
    res->t = NAN;
    if (t == NULL || nb_of == NULL)
        st = HN_ERR_NOMEM;
    if (st == HN_OK)
        st = hn_runtime_run(rt, init, &init_args);
    /* warm-up (ITERS = warmup, and one run verifying the timed ITERS), then
     * the repetitions back to back, as a server would call it */
    iters[0] = o->warmup;
    if (st == HN_OK && o->warmup > 0)
        st = hn_runtime_run(rt, main, &args);
    iters[0] = o->iters;
    if (st == HN_OK)
        st = hn_runtime_run(rt, main, &args);
    if (st == HN_OK && o->graph) {
        /* ITERS calls in one graph; a replay to warm it up, then one per repetition */
        st = hn_runtime_capture(rt, main, &args, NULL, &g);
        if (st == HN_OK && (st = hn_runtime_replay(rt, g, NULL)) == HN_OK)
            st = hn_runtime_sync(rt);
        for (int k = 0; k < o->reps && st == HN_OK; k++)
            if ((st = timed_replay(rt, g, o->device_timing, &t[k])) == HN_OK)
                t[k] /= o->iters;
        calls = o->iters;
    } else {
        if (st == HN_OK && o->device_timing)
            hn_runtime_time_runs(rt, 1);
        for (int k = 0; k < o->reps && st == HN_OK; k++) {
            double t0 = hn_now();
            st = hn_runtime_run(rt, main, &args);
            t[k] = o->device_timing ? hn_runtime_run_seconds(rt) : hn_now() - t0;
            if (st == HN_OK) /* the slowest rank's, across processes too */
                st = hn_procs_max(rt, t[k], &t[k]);
            t[k] /= o->iters;
            if (st == HN_OK && t[k] < 0) {
                fprintf(stderr, "bench: the run's timing markers were not reached\n");
                st = HN_ERR_RUNTIME;
            }
        }
        hn_runtime_time_runs(rt, 0);
        iters[0] = 1;
    }
    if (st == HN_OK) {
        res->t = hn_median(t, o->reps);
        st = hn_runtime_run(rt, init, &init_args);
        if (st == HN_OK)
            st = g != NULL ? hn_runtime_replay(rt, g, NULL) : hn_runtime_run(rt, main, &args);
        if (st == HN_OK)
            st = hn_runtime_sync(rt);
        host = malloc(out * es + 1);
        host_r = malloc(out * es + 1);
        if (st == HN_OK && host != NULL && host_r != NULL &&
            (st = hn_runtime_download(rt, first, host, y[0], out * es)) == HN_OK &&
            (!op->norm || (st = hn_runtime_download(rt, first, host_r, r[0], out * es)) == HN_OK))
            res->wrong = op->norm ? count_wrong_norm(o->dtype, host, host_r, out, op->hidden, n, calls)
                                  : count_wrong(op->kind, o->dtype, host, out, op->chunk, n);
    }
    if (st != HN_OK)
        fprintf(stderr, "bench: %s via %s: %s\n", op->norm ? "allreduce_rmsnorm" : hn_coll_name(op->kind), via,
                init && main ? hn_runtime_error(rt) : "bad program");
    hn_runtime_graph_destroy(rt, g);
    free(host);
    free(host_r);
    free(t);
    free(nb_of);
    hn_runtime_forget(rt, main);
    hn_program_destroy(init);
    hn_program_destroy(main);
    return st;
}

/* A small random integer for element e of call row i of global rank r in
 * draw d: exact in every dtype, and so are the sums of up to 256 ranks. */
static float soak_value(uint64_t d, int r, size_t e)
{
    uint64_t x = (d + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)r << 40) ^ e;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (float)((int)(x % 17) - 8);
}

#define SOAK_DRAW 100 /* replays between fresh inputs */

/* --soak R: R replays of one graph of ITERS calls `allreduce Y[i] <- X[i]
 * via ...`, every call its own row of X and Y; the graph poisons Y first
 * (fill), and after every replay every row of every rank here is compared
 * with the sums computed here, bit for bit; X (random small integers,
 * different on every rank, row and element) is drawn anew every SOAK_DRAW
 * replays. Mismatches into *wrong, calls per rank into *calls. */
static hn_status_t soak_via(hn_runtime *rt, const bench_opts *o, const bench_op *op, const char *via, long *wrong,
                            long *calls)
{
    const int n = hn_runtime_world(rt), nl = hn_runtime_size(rt), first = hn_runtime_first_rank(rt);
    const size_t es = (size_t)hn_dtype_size(o->dtype), N = op->chunk, rows = (size_t)o->iters, bytes = rows * N * es;
    const char *dt = hn_dtype_name(o->dtype);
    hn_program *p = program("param ITERS = %d\ninput X : %s[ITERS, %zu] replicated\noutput Y : %s[ITERS, %zu] "
                            "replicated\nfill Y <- -7\nfor it in 0 .. ITERS {\n  allreduce Y[it] <- X[it] op sum via "
                            "%s\n}\n",
                            o->iters, dt, N, dt, N, via);
    void **x = calloc((size_t)nl, sizeof(void *)), **y = calloc((size_t)nl, sizeof(void *));
    size_t *nb = calloc((size_t)nl, sizeof(size_t));
    char *host = malloc(bytes + 1), *want = malloc(bytes + 1), *got = malloc(bytes + 1);
    float *sum = malloc(rows * N * sizeof(float) + 1);
    hn_binding b[2] = {{"X", x, nb}, {"Y", y, nb}};
    hn_run_args args = {0, NULL, NULL, 2, b};
    hn_graph *g = NULL;
    hn_status_t st = p != NULL ? HN_OK : HN_ERR_INVALID;
    *wrong = 0;
    *calls = 0;
    if (x == NULL || y == NULL || nb == NULL || host == NULL || want == NULL || got == NULL || sum == NULL)
        st = HN_ERR_NOMEM;
    for (int q = 0; q < nl && st == HN_OK; q++) {
        nb[q] = bytes;
        if ((st = hn_runtime_alloc(rt, first + q, bytes, &x[q])) == HN_OK)
            st = hn_runtime_alloc(rt, first + q, bytes, &y[q]);
    }
    if (st == HN_OK)
        st = hn_runtime_capture(rt, p, &args, NULL, &g);
    for (int k = 0; k < o->soak && st == HN_OK; k++) {
        if (k % SOAK_DRAW == 0) { /* fresh inputs, every rank's drawn here for the sums */
            for (size_t e = 0; e < rows * N; e++)
                sum[e] = 0;
            for (int r = 0; r < n && st == HN_OK; r++) {
                for (size_t e = 0; e < rows * N; e++) {
                    const float v = soak_value((uint64_t)k, r, e);
                    sum[e] += v;
                    hn_store(o->dtype, host, (int64_t)e, v);
                }
                if (r >= first && r < first + nl)
                    st = hn_runtime_upload(rt, r, x[r - first], host, bytes);
            }
            for (size_t e = 0; e < rows * N; e++)
                hn_store(o->dtype, want, (int64_t)e, sum[e]);
        }
        if (st == HN_OK && (st = hn_runtime_replay(rt, g, NULL)) == HN_OK)
            st = hn_runtime_sync(rt);
        for (int q = 0; q < nl && st == HN_OK; q++)
            if ((st = hn_runtime_download(rt, first + q, got, y[q], bytes)) == HN_OK && memcmp(got, want, bytes) != 0)
                for (size_t e = 0; e < rows * N; e++)
                    *wrong += memcmp(got + e * es, want + e * es, es) != 0;
        if (st == HN_OK)
            *calls += (long)rows;
    }
    if (st != HN_OK)
        fprintf(stderr, "bench: soak via %s: %s\n", via, p != NULL ? hn_runtime_error(rt) : "bad program");
    hn_runtime_graph_destroy(rt, g);
    for (int q = 0; q < nl; q++) {
        if (x != NULL)
            hn_runtime_free(rt, first + q, x[q]);
        if (y != NULL)
            hn_runtime_free(rt, first + q, y[q]);
    }
    hn_runtime_forget(rt, p);
    hn_program_destroy(p);
    free(x);
    free(y);
    free(nb);
    free(host);
    free(want);
    free(got);
    free(sum);
    return st;
}

/* Raw NCCL on its own communicators, the same size, timed the same way. */
static void run_raw(const bench_opts *o, int n, hn_coll_kind kind, size_t chunk, result *res)
{
    res->t = NAN;
    res->wrong = -1;
#ifdef HN_HAVE_CUDA
    {
        hn_bench_case c = {kind, chunk, o->dtype, o->warmup, o->iters, o->reps, o->device_timing, o->graph};
        double *t = calloc((size_t)o->reps, sizeof(double));
        hn_nccl_raw *h = NULL;
        int ok = t != NULL && hn_nccl_raw_open(n, &c, &h) == HN_OK;
        if (ok && o->warmup > 0)
            ok = hn_nccl_raw_rep(h, o->warmup, &t[0]) == HN_OK;
        if (ok && o->graph) /* the iters calls captured in one CUDA graph, then replays of it */
            ok = hn_nccl_raw_capture(h, o->iters) == HN_OK && hn_nccl_raw_rep(h, o->iters, &t[0]) == HN_OK;
        for (int k = 0; k < o->reps && ok; k++)
            ok = hn_nccl_raw_rep(h, o->iters, &t[k]) == HN_OK;
        if (ok)
            res->t = hn_median(t, o->reps);
        hn_nccl_raw_close(h, ok ? &res->wrong : NULL);
        free(t);
    }
#else
    (void)o;
    (void)n;
    (void)kind;
    (void)chunk;
#endif
}

/* What `via auto` picks for this collective (eagerly, or in a graph; the
 * fused norm takes the latency path's algorithm of its own), as text. */
static void auto_pick(const hn_runtime *rt, int graph, const bench_op *op, hn_dtype dt, int n, char *buf, size_t len)
{
    /* across nodes the team of all ranks spans them: NCCL (src/ranks/teams.c) */
    hn_via v = rt->nodes > 1 ? HN_VIA_NCCL : hn_via_resolve_prof(rt->profile, HN_VIA_AUTO, 0, graph, op->kind, op->chunk, dt, n);
    hn_coll_algo a = op->norm ? hn_via_ll_norm_algo(op->chunk * (size_t)hn_dtype_size(dt), n)
                              : hn_via_ll_algo(graph, op->kind, op->chunk, dt, n);
    snprintf(buf, len, "%s%s", hn_via_name(v), v == HN_VIA_LL ? (a == HN_ALGO_TWOSHOT ? "/2shot" : "/1shot") : "");
}

static void cell(int width, const char *text)
{
    int cols = 0;
    for (const char *c = text; *c; c++)
        cols += ((unsigned char)*c & 0xC0) != 0x80;
    printf(" %*s%s", cols < width ? width - cols : 0, "", text);
}

static void print_header(const bench_opts *o, int raw)
{
    if (o->nvias == 1) { /* the layout of earlier versions */
        if (o->markdown) {
            printf("| bytes | hirnode (µs) | algbw (GB/s) | busbw (GB/s) | #wrong | nccl (µs) | algbw (GB/s) | "
                   "busbw (GB/s) | #wrong | busbw ratio |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        } else {
            static const char *const heads[] = {"hirnode (µs)", "algbw (GB/s)", "busbw (GB/s)", "#wrong",
                                                "nccl (µs)", "algbw (GB/s)", "busbw (GB/s)", "#wrong", "ratio"};
            static const int widths[] = {12, 12, 12, 7, 12, 12, 12, 7, 7};
            printf("%12s", "bytes");
            for (int i = 0; i < HN_ARRAY_LEN(heads); i++)
                cell(widths[i], heads[i]);
            printf("\n");
        }
        return;
    }
    if (o->markdown) {
        printf("| bytes |");
        for (int v = 0; v < o->nvias; v++)
            printf(" %s (µs) | busbw (GB/s) | #wrong |", o->vias[v]);
        if (raw)
            printf(" raw NCCL (µs) | busbw (GB/s) | #wrong |");
        for (int v = 0; raw && v < o->nvias; v++)
            printf(" %s × NCCL |", o->vias[v]);
        printf(" auto picks |\n|---:|");
        for (int v = 0; v < o->nvias * 3 + (raw ? 3 + o->nvias : 0); v++)
            printf("---:|");
        printf("---|\n");
        return;
    }
    printf("%12s", "bytes");
    for (int v = 0; v < o->nvias; v++) {
        char name[48];
        snprintf(name, sizeof(name), "%s", o->vias[v]);
        for (char *c = name; *c; c++)
            if (*c == ' ')
                *c = '-';
        snprintf(name + strlen(name), sizeof(name) - strlen(name), " (µs)");
        cell(14, name);
        cell(12, "busbw (GB/s)");
        cell(6, "#wrong");
    }
    if (raw) {
        cell(14, "raw-nccl (µs)");
        cell(12, "busbw (GB/s)");
        cell(6, "#wrong");
    }
    for (int v = 0; raw && v < o->nvias; v++) {
        char name[48];
        snprintf(name, sizeof(name), "x%s", o->vias[v]);
        for (char *c = name; *c; c++)
            if (*c == ' ')
                *c = '-';
        printf(" %10s", name);
    }
    printf(" %10s\n", "auto");
}

static void print_row(const bench_opts *o, hn_coll_kind kind, int n, size_t total, const result *res,
                      const result *rawres, int raw, const char *pick)
{
    if (o->nvias == 1) {
        double a_hn = total / res[0].t / 1e9, b_hn = a_hn * factor(kind, n);
        double a_raw = total / rawres->t / 1e9, b_raw = a_raw * factor(kind, n);
        printf(o->markdown ? "| %zu | %.2f | %.1f | %.1f | %ld | %.2f | %.1f | %.1f | %ld | %.3f |\n"
                           : "%12zu %12.2f %12.1f %12.1f %7ld %12.2f %12.1f %12.1f %7ld %7.3f\n",
               total, res[0].t * 1e6, a_hn, b_hn, res[0].wrong, rawres->t * 1e6, a_raw, b_raw, rawres->wrong,
               n > 1 ? b_hn / b_raw : a_hn / a_raw);
        return;
    }
    printf(o->markdown ? "| %zu |" : "%12zu", total);
    for (int v = 0; v < o->nvias; v++)
        printf(o->markdown ? " %.2f | %.1f | %ld |" : " %14.2f %12.1f %6ld", res[v].t * 1e6,
               total / res[v].t / 1e9 * factor(kind, n), res[v].wrong);
    if (raw)
        printf(o->markdown ? " %.2f | %.1f | %ld |" : " %14.2f %12.1f %6ld", rawres->t * 1e6,
               total / rawres->t / 1e9 * factor(kind, n), rawres->wrong);
    for (int v = 0; raw && v < o->nvias; v++)
        printf(o->markdown ? " %.2f |" : " %10.2f", rawres->t / res[v].t);
    printf(o->markdown ? " %s |\n" : " %10s\n", pick);
}

/* Defaults that were not given: GPU-sized, or host-sized on the host
 * backend (a CPU moves about 1 GB/s where a GPU moves hundreds). */
static void collectives_defaults(bench_opts *o, int host)
{
    if (o->max == 0)
        o->max = host ? 256u << 10 : 16u << 20;
    if (o->iters == 0)
        o->iters = host ? 10 : 50;
    if (o->warmup < 0)
        o->warmup = host ? 2 : 5;
    if (o->reps == 0)
        o->reps = host ? 3 : 5;
}

/* The operations of --op, in the order they are measured. */
static const char *const op_names[] = {"allreduce", "allgather", "reduce_scatter", "allreduce_rmsnorm"};

/* One size of operation `which` (op_names), in bytes (allreduce and the
 * norm: the buffer; allgather: the output; reduce_scatter: the input);
 * 0 when the size holds no element per rank. */
static int op_at(const bench_opts *o, int which, size_t bytes, int n, bench_op *op)
{
    static const hn_coll_kind kinds[] = {HN_COLL_ALLREDUCE, HN_COLL_ALLGATHER, HN_COLL_REDUCE_SCATTER,
                                         HN_COLL_ALLREDUCE};
    size_t es = (size_t)hn_dtype_size(o->dtype);
    memset(op, 0, sizeof(*op));
    op->kind = kinds[which];
    op->norm = which == 3;
    op->chunk = op->kind == HN_COLL_ALLREDUCE ? bytes / es : bytes / es / (size_t)n;
    if (op->norm) { /* rows of `hidden` elements, or one row of all of them */
        op->hidden = HN_MIN((size_t)o->hidden, bytes / es);
        op->rows = op->hidden > 0 ? bytes / es / op->hidden : 0;
        op->chunk = op->rows * op->hidden;
    }
    return op->chunk > 0;
}

static int bench_collectives(bench_opts *o, const hn_command *c)
{
    hn_runtime *rt = NULL;
    char *why = NULL;
    hn_status_t st = hn_runtime_create_ex(&o->cfg, &rt, &why);
    int n, nl, first, raw, rc = 0;
    if (st != HN_OK) {
        fprintf(stderr, "bench: cannot start %d rank%s: %s\n", o->cfg.ndev, o->cfg.ndev == 1 ? "" : "s", why != NULL ? why : hn_status_string(st));
        hn_string_free(why);
        return st == HN_ERR_INVALID ? 2 : 1;
    }
    collectives_defaults(o, rt->dev->emulated);
    if (o->min > o->max) {
        hn_runtime_destroy(rt);
        return hn_cli_usage_error(c, "--min %zu is more than --max %zu", o->min, o->max);
    }
    n = hn_runtime_world(rt);
    nl = hn_runtime_size(rt);
    first = hn_runtime_first_rank(rt);
    if (o->trace != NULL && o->graph) {
        hn_runtime_destroy(rt);
        return hn_cli_usage_error(c, "--trace records runs, not graphs: without --graph");
    }
    if (o->soak > 0 && strcmp(o->ops, "allreduce") != 0) {
        hn_runtime_destroy(rt);
        return hn_cli_usage_error(c, "--soak checks allreduce: with --op allreduce");
    }
    if (o->trace != NULL && hn_runtime_trace_start(rt, o->trace) != HN_OK) {
        fprintf(stderr, "bench: %s\n", hn_runtime_error(rt));
        hn_runtime_destroy(rt);
        return 2;
    }
#ifdef HN_HAVE_CUDA
    raw = rt->dev->kind == HN_DEVICE_KIND_CUDA; /* raw NCCL runs on CUDA devices */
#else
    raw = 0;
#endif
    if (nl < n) { /* raw NCCL runs every rank in this process */
        fprintf(stderr, "bench collectives: raw NCCL not measured: the ranks are processes\n");
        raw = 0;
    }
    for (int r = 0; raw && r < o->devices.n; r++)
        if (o->devices.ord[r] != r) { /* raw NCCL runs rank r on device r */
            fprintf(stderr, "bench collectives: raw NCCL not measured: --devices maps rank %d to device %d\n", r,
                    o->devices.ord[r]);
            raw = 0;
        }
    for (int which = 0; which < HN_ARRAY_LEN(op_names) && rc == 0; which++) {
        const char *name = op_names[which];
        if (strcmp(o->ops, "all") == 0 ? which == 3 : strcmp(o->ops, name) != 0) /* all: the collectives */
            continue;
        printf("# %s, %d rank%s, %s, %s backend via", name, n, n == 1 ? "" : "s", hn_dtype_name(o->dtype), hn_runtime_backend(rt));
        for (int v = 0; v < o->nvias; v++)
            printf("%s %s", v ? "," : "", o->vias[v]);
        if (o->graph)
            printf("%s; %d calls captured in one graph (raw NCCL: a CUDA graph of its calls), %d replays after "
                   "one warm-up replay; %s; per call = replay / %d\n",
                   raw ? (which == 3 ? " and raw NCCL's plain allreduce" : " and raw NCCL") : "", o->iters, o->reps,
                   o->device_timing ? "device time (timing markers around each replay)"
                                    : "host time (around each replay and its end)",
                   o->iters);
        else
            printf("%s; %d iterations x %d repetitions after %d warm-up; %s\n",
                   raw ? (which == 3 ? " and raw NCCL's plain allreduce" : " and raw NCCL") : "", o->iters, o->reps,
                   o->warmup,
                   o->device_timing ? "device time (timing markers around the iterations of one run)"
                                    : "host time (around whole runs)");
        if (which == 3)
            printf("# allreduce + residual + RMSNorm: rows of %d elements (fewer: one row), eps 1e-6\n", o->hidden);
        if (o->trace != NULL)
            printf("# traced into %s: the hirnode times include tracing\n", o->trace);
        for (int v = 0; v < o->nvias; v++)
            if (strncmp(o->vias[v], "p2p", 3) == 0) {
                printf("# p2p: sync %s, pieces %s (allgather %s) of >= %s KiB, lanes %s%s\n",
                       hn_setting_get("p2p_sync"), hn_setting_get("p2p_pieces"), hn_setting_get("p2p_ag_pieces"),
                       hn_setting_get("p2p_piece_kib"), hn_setting_get("p2p_lanes"),
                       o->graph ? "; inside a graph the rings push (\"p2p get\" too)" : "");
                break;
            }
        print_header(o, raw);
        for (size_t bytes = o->min; bytes <= o->max && rc == 0; bytes *= 2) {
            size_t es = (size_t)hn_dtype_size(o->dtype), in, out, total;
            result res[MAX_VIAS], rawres;
            bench_op op;
            void **x = calloc((size_t)nl, sizeof(void *)), **y = calloc((size_t)nl, sizeof(void *));
            void **r = calloc((size_t)nl, sizeof(void *)), **w = calloc((size_t)nl, sizeof(void *));
            char pick[32];
            if (!op_at(o, which, bytes, n, &op) || x == NULL || y == NULL || r == NULL || w == NULL) {
                free(x);
                free(y);
                free(r);
                free(w);
                continue;
            }
            in = op.kind == HN_COLL_REDUCE_SCATTER ? op.chunk * (size_t)n : op.chunk;
            out = op.kind == HN_COLL_ALLGATHER ? op.chunk * (size_t)n : op.chunk;
            total = (op.kind == HN_COLL_ALLREDUCE ? op.chunk : op.chunk * (size_t)n) * es;
            st = HN_OK;
            for (int q = 0; q < nl && st == HN_OK; q++)
                if ((st = hn_runtime_alloc(rt, first + q, in * es, &x[q])) == HN_OK &&
                    (st = hn_runtime_alloc(rt, first + q, out * es, &y[q])) == HN_OK && op.norm &&
                    (st = hn_runtime_alloc(rt, first + q, out * es, &r[q])) == HN_OK)
                    st = hn_runtime_alloc(rt, first + q, op.hidden * es, &w[q]);
            if (st == HN_OK) { /* progress on stderr, the table on stdout */
                fprintf(stderr, "bench collectives: %s, %zu bytes:", which == 3 ? "allreduce_rmsnorm" : hn_coll_name(op.kind),
                        total);
                for (int v = 0; v < o->nvias; v++)
                    fprintf(stderr, "%s %s", v ? "," : "", o->vias[v]);
                fprintf(stderr, "%s\n", raw ? ", raw NCCL" : "");
            }
            for (int v = 0; v < o->nvias && st == HN_OK; v++)
                st = run_via(rt, o, &op, o->vias[v], x, y, r, w, &res[v]);
            for (int v = 0; v < o->nvias && st == HN_OK && o->soak > 0; v++) {
                long wrong = 0, calls = 0;
                double t0 = hn_now();
                st = soak_via(rt, o, &op, o->vias[v], &wrong, &calls);
                printf("soak: allreduce of %zu bytes via %s on %d ranks: %ld calls in %d replays of %d, every "
                       "output checked: %ld wrong (%.1f s)\n",
                       total, o->vias[v], n, calls, o->soak, o->iters, wrong, hn_now() - t0);
                if (wrong != 0)
                    rc = 1;
            }
            for (int q = 0; q < nl; q++) {
                hn_runtime_free(rt, first + q, x[q]);
                hn_runtime_free(rt, first + q, y[q]);
                hn_runtime_free(rt, first + q, r[q]);
                hn_runtime_free(rt, first + q, w[q]);
            }
            free(x);
            free(y);
            free(r);
            free(w);
            if (st != HN_OK) {
                rc = 1;
                break;
            }
            rawres.t = NAN;
            rawres.wrong = -1;
            if (raw) /* the norm beside NCCL's plain allreduce of its buffer */
                run_raw(o, n, op.kind, op.chunk, &rawres);
            auto_pick(rt, o->graph, &op, o->dtype, n, pick, sizeof(pick));
            print_row(o, op.kind, n, total, res, &rawres, raw, pick);
            fflush(stdout);
            for (int v = 0; v < o->nvias; v++)
                if (res[v].wrong != 0)
                    rc = 1;
            if (raw && rawres.wrong != 0)
                rc = 1;
        }
    }
    if (o->trace != NULL && hn_runtime_trace_stop(rt) != HN_OK) {
        fprintf(stderr, "bench: cannot write the trace to %s\n", o->trace);
        rc = 1;
    }
    hn_runtime_destroy(rt);
    return rc;
}

int hn_cli_bench(int argc, char **argv);
int hn_cli_bench_overlap(int argc, char **argv); /* bench_overlap.c */
int hn_cli_bench_issue(int argc, char **argv);   /* bench_issue.c */

static const char bench_usage[] =
    "usage: hirnode bench collectives|overlap|issue [options]\n"
    "  collectives  busbw of collectives through each communicator beside raw NCCL\n"
    "  overlap      pipelined GEMMs: every strategy and auto\n"
    "  issue        the cost of issuing one instruction beside a plain launch loop\n"
    "hirnode bench COMMAND --help lists its options.\n";

/* Ranks when neither --gpus nor --procs says: every device of the backend
 * (auto: the GPUs when there are at least two), else 2 on an emulated
 * backend, so that the collectives move data (one rank moves none: busbw
 * 0). */
static int default_ranks(const hn_runtime_config *cfg, const hn_cli_devices *devices)
{
    hn_runtime_config two = *cfg;
    const hn_device_ops *d;
    hn_strbuf why;
    if (devices->n > 0)
        return devices->n; /* a rank for each ordinal named */
    two.ndev = 2;
    two.rank = 0;
    two.devices = NULL;
    hn_sb_init(&why);
    d = hn_runtime_pick_backend(&two, &why); /* as the runtime picks for 2 ranks */
    hn_sb_free(&why);
    if (d == NULL) /* a backend named with fewer devices: all it has (the runtime says if none) */
        d = hn_device_find(cfg->backend);
    if (d == NULL || d->emulated)
        return 2;
    return HN_MAX(HN_MIN(d->device_count(), 256), 1);
}

static int bench_collectives_cli(int argc, char **argv)
{
    bench_opts o;
    hn_cli_procs procs = {0};
    const char *ops = "all", *timing = "device", *dtype = "bf16";
    const hn_option table[] = {
        HN_INT("--gpus", "N", &o.cfg.ndev, 1, 256,
               "ranks, one per device (default: every GPU of the backend;\n2 on the host backend)"),
        HN_PROCS_OPTIONS(&procs),
        HN_CHOICE("--backend", "auto|cuda|host", &o.cfg.backend, "the devices (default: $HIRNODE_BACKEND, else auto)"),
        HN_CALL("--devices", "LIST", hn_cli_take_devices, &o.devices,
                "the device ordinal of each rank, e.g. 0,0: two ranks on GPU 0\n(the latency path and p2p; "
                "not NCCL, nor raw NCCL)"),
        HN_CALL("--via", "LIST", parse_vias, &o,
                "communicators, comma-separated, each as written after `via`\n"
                "(default ll,nccl,p2p,auto; e.g. \"ll oneshot,ll twoshot,p2p get\");\n"
                "raw NCCL is measured beside them on CUDA"),
        HN_CHOICE("--op", "all|allreduce|allgather|reduce_scatter|allreduce_rmsnorm", &ops,
                  "the collectives (default all: the first three), or allreduce + residual + RMSNorm"),
        HN_INT("--hidden", "H", &o.hidden, 1, 1 << 30, "allreduce_rmsnorm: elements of a row (default 4096)"),
        HN_SIZE("--min", "BYTES", &o.min, 1, (int64_t)1 << 40,
                "the smallest size (default 8K); sizes double up to --max"),
        HN_SIZE("--max", "BYTES", &o.max, 1, (int64_t)1 << 40,
                "the largest size (default 16M; 256K on the host backend)"),
        HN_CHOICE("--dtype", "bf16|f16|f32", &dtype, "element type (default bf16)"),
        HN_INT("--iters", "K", &o.iters, 1, 1000000, "calls per timed run (default 50; 10 on the host backend)"),
        HN_INT("--warmup", "W", &o.warmup, 0, 1000000, "calls before timing (default 5; 2 on the host backend)"),
        HN_INT("--reps", "R", &o.reps, 1, 100000,
               "timed runs, the median is printed (default 5; 3 on the host backend)"),
        HN_FLAG("--markdown", &o.markdown, "the table in Markdown"),
        HN_CHOICE("--timing", "device|host", &timing,
                  "device (default): markers around the ITERS calls of a run\n"
                  "(CUDA events); host: the host clock around whole runs"),
        HN_FLAG("--graph", &o.graph,
                "the K calls captured in one graph and replayed, per call = replay / K\n"
                "(raw NCCL captured the same way); without it, runs of K calls"),
        HN_TEXT("--trace", "FILE", &o.trace, "every run recorded: hirnode trace summary FILE"),
        HN_INT("--soak", "R", &o.soak, 1, 100000000,
               "allreduce: then R replays of a graph of K calls, each its own row,\n"
               "every output of every replay checked (inputs drawn anew every 100)"),
    };
    int nargs = 0, rc;
    hn_command c = {"hirnode bench collectives", "", table, HN_ARRAY_LEN(table), NULL, 0, &nargs, NULL};
    memset(&o, 0, sizeof(o));
    hn_runtime_config_default(&o.cfg);
    parse_vias("ll,nccl,p2p,auto", &o, NULL);
    o.min = 8 << 10;
    o.hidden = 4096;
    o.warmup = -1; /* 0 .. 0 of max, iters, reps and -1 of warmup: not given */
    o.cfg.ndev = 0; /* and of --gpus */
    if ((rc = hn_cli_parse(&c, argc, argv, 3)) >= 0 || (rc = hn_cli_check_settings(&c)) >= 0 ||
        (rc = hn_cli_procs_setup(c.name, &procs, &o.cfg, &o.devices, default_ranks(&o.cfg, &o.devices))) >= 0)
        return rc;
    if (procs.launcher)
        return hn_cli_launch(c.name, &procs, o.cfg.timeout_s, argv);
    if (!hn_cli_use_devices(c.name, &o.devices, &o.cfg))
        return HN_EXIT_USAGE;
    o.ops = ops;
    o.device_timing = strcmp(timing, "device") == 0;
    o.dtype = (hn_dtype)hn_dtype_parse(dtype, (int)strlen(dtype));
    return bench_collectives(&o, &c);
}

int hn_cli_bench(int argc, char **argv)
{
    const char *sub = argc >= 3 ? argv[2] : "";
    if (strcmp(sub, "overlap") == 0)
        return hn_cli_bench_overlap(argc, argv);
    if (strcmp(sub, "issue") == 0)
        return hn_cli_bench_issue(argc, argv);
    if (strcmp(sub, "collectives") == 0)
        return bench_collectives_cli(argc, argv);
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        fputs(bench_usage, stdout);
        return HN_EXIT_OK;
    }
    if (*sub == '\0')
        fprintf(stderr, "hirnode bench: which benchmark?\n%s", bench_usage);
    else
        fprintf(stderr, "hirnode bench: unknown benchmark '%s'\n%s", sub, bench_usage);
    return HN_EXIT_USAGE;
}

/* `hirnode tune`: measures on this machine what the cost model reads
 * (docs/SCHEDULER.md "The machine profile") — GEMM rates by shape and
 * dtype, what cutting a GEMM in chunks and spreading them over streams
 * costs, local copies, how much a GEMM slows beside copy engines, NCCL's
 * kernels, the latency path and SM reductions, the collectives' curves by
 * communicator and size, and hirnode's own pipelines — then fits the
 * model's coefficients to them. Every measurement is a hirnode program
 * run through the public API, timed as `hirnode bench overlap` times
 * (the host clock around whole runs, the median of repetitions). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../sched/lower.h"
#include "../model/profile.h"
#include "../ranks/runtime_int.h"
#include "tune.h"

#define MIB (1024.0 * 1024.0)
#define MAX_GEMM 12

/* How big and how often, by the machine's size. */
typedef struct sizing {
    int64_t shapes[3][3]; /* the pipelines' */
    int nshapes;
    int64_t gemm[MAX_GEMM][3]; /* the GEMM rates' */
    int ngemm;
    double f32_max_flop; /* f32 only up to this (it runs ~15 times slower) */
    int chunks[3], nchunks;
    double copy_bytes;
    double coll_lo, coll_hi, ll_lo, ll_hi, step; /* bytes, each size `step` times the last */
    int warmup, reps, iters;
    int pipe_reps; /* rounds of the pipelines (step 6): their differences are a few per cent */
    double heat_s; /* the GPUs warmed up before the GEMMs are timed (0: not) */
} sizing;

static const sizing sizings[] = {
    [HN_TUNE_GPU] = {{{32768, 16384, 8192}, {16384, 8192, 8192}, {4096, 8192, 8192}},
                     3,
                     {{16, 8192, 8192}, {256, 8192, 8192}, {1024, 8192, 8192}, {4096, 8192, 8192}, {8192, 8192, 8192},
                      {16384, 8192, 8192}, {32768, 8192, 8192}, {1024, 16384, 8192}, {4096, 16384, 8192},
                      {8192, 16384, 8192}, {16384, 16384, 8192}, {32768, 16384, 8192}},
                     12,
                     2.5e12,
                     {2, 4, 8},
                     3,
                     256 * MIB,
                     MIB,
                     1024 * MIB,
                     8192,
                     16 * MIB,
                     2,
                     2,
                     7,
                     5,
                     15,
                     2.0},
    [HN_TUNE_HOST] = {{{256, 128, 64}, {128, 128, 128}},
                      2,
                      {{32, 128, 128}, {64, 128, 128}, {128, 128, 128}, {256, 128, 64}, {128, 64, 64}},
                      5,
                      1e18,
                      {2, 4},
                      2,
                      MIB,
                      16384,
                      MIB,
                      4096,
                      65536,
                      4,
                      1,
                      3,
                      2,
                      3,
                      0},
    [HN_TUNE_TINY] = {{{32, 16, 16}}, 1, {{16, 16, 16}, {32, 16, 16}}, 2, 1e18, {2}, 1, 65536, 4096, 16384, 4096,
                      4096, 4, 0, 1, 1, 1, 0.001},
};

typedef struct tuner {
    const hn_tune_opts *o;
    const sizing *z;
    int64_t shapes[HN_COST_MAX_SHAPES][3];
    int nshapes;
    hn_runtime *rt;
    int n;
    int counting, step, nsteps;
    hn_cost_profile *p;
    hn_strbuf *err;
    hn_status_t st;
} tuner;

/* The next step: 1 to measure it (its progress said), 0 when only counting
 * or after an error. */
static int begin(tuner *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int begin(tuner *t, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    t->step++;
    if (t->counting || t->st != HN_OK)
        return 0;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (t->o->progress != NULL)
        t->o->progress(t->o->progress_ctx, t->step, t->nsteps, what);
    return 1;
}

static hn_status_t failed(tuner *t, hn_status_t st, const char *what)
{
    const char *e = hn_runtime_error(t->rt);
    if (t->st == HN_OK) {
        t->st = st;
        hn_sb_printf(t->err, "%s: %s", what, e != NULL && *e ? e : hn_status_string(st));
    }
    return st;
}

static hn_program *program(tuner *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static hn_program *program(tuner *t, const char *fmt, ...)
{
    char text[2048], *diag = NULL;
    hn_program *p = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (hn_program_parse(text, strlen(text), "<tune>", &p, &diag) != HN_OK) {
        if (t->st == HN_OK) {
            t->st = HN_ERR_RUNTIME;
            hn_sb_printf(t->err, "internal: a measuring program does not parse: %s", diag ? diag : "");
        }
        p = NULL;
    }
    hn_string_free(diag);
    return p;
}

hn_status_t hn_tune_time(hn_runtime *rt, const hn_program *p, const hn_run_args *args, int warmup, int reps,
                         double *median_s)
{
    double *v = hn_calloc((size_t)HN_MAX(reps, 1), sizeof(double));
    hn_status_t st = v != NULL ? HN_OK : HN_ERR_NOMEM;
    for (int w = 0; w < warmup && st == HN_OK; w++)
        st = hn_runtime_run(rt, p, args);
    for (int k = 0; k < reps && st == HN_OK; k++) {
        double t0 = hn_now();
        st = hn_runtime_run(rt, p, args);
        v[k] = hn_now() - t0;
    }
    if (st == HN_OK)
        *median_s = hn_median(v, HN_MAX(reps, 1));
    hn_free(v);
    return st;
}

hn_status_t hn_tune_time_rounds(hn_runtime *rt, hn_program *const *progs, int n, const hn_run_args *args, int warmup,
                                int reps, double *median_s)
{
    double *v = hn_calloc((size_t)HN_MAX(n, 1) * (size_t)HN_MAX(reps, 1), sizeof(double));
    hn_status_t st = v != NULL ? HN_OK : HN_ERR_NOMEM;
    reps = HN_MAX(reps, 1);
    warmup = HN_MAX(warmup, 0);
    for (int k = -warmup; k < reps && st == HN_OK; k++)
        for (int i = 0; i < n && st == HN_OK; i++) {
            int j = (k & 1) ? n - 1 - i : i;
            double t0;
            if (progs[j] == NULL)
                continue;
            t0 = hn_now();
            st = hn_runtime_run(rt, progs[j], args);
            if (k >= 0)
                v[(size_t)j * (size_t)reps + (size_t)k] = hn_now() - t0;
        }
    for (int j = 0; j < n && st == HN_OK; j++)
        median_s[j] = progs[j] != NULL ? hn_median(v + (size_t)j * (size_t)reps, reps) : NAN;
    hn_free(v);
    return st;
}

hn_status_t hn_tune_time_graph(hn_runtime *rt, const hn_program *p, const hn_run_args *args, int warmup, int reps,
                               double *median_s)
{
    double *v = hn_calloc((size_t)HN_MAX(reps, 1), sizeof(double));
    hn_graph *g = NULL;
    hn_status_t st = v != NULL ? hn_runtime_capture(rt, p, args, NULL, &g) : HN_ERR_NOMEM;
    for (int w = 0; w < HN_MAX(warmup, 1) && st == HN_OK; w++) /* the first replay sets up what it holds */
        if ((st = hn_runtime_replay(rt, g, NULL)) == HN_OK)
            st = hn_runtime_sync(rt);
    for (int k = 0; k < reps && st == HN_OK; k++) {
        double t0 = hn_now();
        if ((st = hn_runtime_replay(rt, g, NULL)) == HN_OK)
            st = hn_runtime_sync(rt);
        v[k] = hn_now() - t0;
    }
    if (st == HN_OK)
        *median_s = hn_median(v, HN_MAX(reps, 1));
    if (g != NULL)
        hn_runtime_graph_destroy(rt, g);
    hn_free(v);
    return st;
}

/* Device buffers of every rank, named for bindings. */
typedef struct bufs {
    const char *names[6];
    void **ptr[6];
    size_t *bytes[6]; /* [rank]: what each buffer holds, for the bindings */
    int k;
} bufs;

static void bufs_free(tuner *t, bufs *b)
{
    for (int i = 0; i < b->k; i++) {
        for (int r = 0; b->ptr[i] != NULL && r < t->n; r++)
            if (b->ptr[i][r] != NULL)
                hn_runtime_free(t->rt, r, b->ptr[i][r]);
        hn_free(b->ptr[i]);
        hn_free(b->bytes[i]);
    }
    b->k = 0;
}

/* A binding of each of b's buffers, by name. */
static void bind_all(const bufs *b, hn_binding *bind)
{
    for (int i = 0; i < b->k; i++)
        bind[i] = (hn_binding){b->names[i], b->ptr[i], b->bytes[i]};
}

/* One buffer more on every rank: `bytes`, filled with random values of
 * dtype dt (`elems` of them). */
static int bufs_add(tuner *t, bufs *b, const char *name, hn_dtype dt, double elems)
{
    size_t bytes = (size_t)elems * (size_t)hn_dtype_size(dt);
    hn_program *init;
    hn_binding bind[1];
    hn_run_args args = {0, NULL, NULL, 1, bind};
    hn_status_t st;
    void **v = hn_calloc((size_t)t->n, sizeof(void *));
    size_t *nb = hn_calloc((size_t)t->n, sizeof(size_t));
    if (v == NULL || nb == NULL) {
        hn_free(v);
        hn_free(nb);
        return failed(t, HN_ERR_NOMEM, "buffers"), 0;
    }
    b->names[b->k] = name;
    b->bytes[b->k] = nb;
    b->ptr[b->k++] = v;
    for (int r = 0; r < t->n; r++)
        nb[r] = bytes;
    for (int r = 0; r < t->n; r++)
        if ((st = hn_runtime_alloc(t->rt, r, bytes, &v[r])) != HN_OK)
            return failed(t, st, "buffers"), 0;
    if ((init = program(t, "output %s : %s[%.0f] replicated\nrandom %s <- %d + rank\n", name, hn_dtype_name(dt), elems,
                        name, 11 + b->k)) == NULL)
        return 0;
    bind[0] = (hn_binding){name, v, nb};
    st = hn_runtime_run(t->rt, init, &args);
    hn_runtime_forget(t->rt, init);
    hn_program_destroy(init);
    return st == HN_OK || (failed(t, st, "buffers"), 0);
}

/* Seconds per ITERS of p with the parameters given (ITERS first). */
/* The median seconds per call of `text` (vals[0]: calls per run): of
 * whole runs, or (graph) of replays of the runs captured once. */
static double timed_as(tuner *t, const bufs *b, const char *text, const char *const *names, const int64_t *vals,
                       int nv, int graph)
{
    hn_program *p = t->st == HN_OK ? program(t, "%s", text) : NULL;
    hn_binding bind[6];
    hn_run_args args = {nv, names, vals, b->k, bind};
    double s = NAN;
    hn_status_t st;
    if (p == NULL)
        return NAN;
    bind_all(b, bind);
    if ((st = graph ? hn_tune_time_graph(t->rt, p, &args, t->z->warmup, t->z->reps, &s)
                    : hn_tune_time(t->rt, p, &args, t->z->warmup, t->z->reps, &s)) != HN_OK)
        failed(t, st, graph ? "a measuring replay" : "a measuring run");
    else
        s /= (double)vals[0];
    hn_runtime_forget(t->rt, p);
    hn_program_destroy(p);
    return s;
}

static double timed(tuner *t, const bufs *b, const char *text, const char *const *names, const int64_t *vals, int nv)
{
    return timed_as(t, b, text, names, vals, nv, 0);
}

/* The median seconds per call (vals[0] calls per run) of each of n
 * programs, their runs in rounds of `reps` (hn_tune_time_rounds); the
 * programs are forgotten and destroyed. */
static void timed_rounds(tuner *t, const bufs *b, hn_program **progs, int n, const char *const *names,
                         const int64_t *vals, int nv, int reps, double *secs)
{
    hn_binding bind[6];
    hn_run_args args = {nv, names, vals, b->k, bind};
    hn_status_t st;
    bind_all(b, bind);
    if ((st = hn_tune_time_rounds(t->rt, progs, n, &args, t->z->warmup, reps, secs)) != HN_OK)
        failed(t, st, "a pipeline's measuring run");
    for (int j = 0; j < n; j++) {
        if (st != HN_OK || t->st != HN_OK)
            secs[j] = NAN;
        else
            secs[j] /= (double)vals[0];
        hn_runtime_forget(t->rt, progs[j]);
        hn_program_destroy(progs[j]);
    }
}

static double flop(const int64_t *s) { return 2.0 * (double)s[0] * (double)s[1] * (double)s[2]; }

/* The operands of the GEMM s (M, K, N) on every rank: A, B, C of dtype dt. */
static int gemm_bufs(tuner *t, bufs *b, hn_dtype dt, const int64_t *s)
{
    return bufs_add(t, b, "A", dt, (double)s[0] * s[1]) && bufs_add(t, b, "B", dt, (double)s[1] * s[2]) &&
           bufs_add(t, b, "C", dt, (double)s[0] * s[2]);
}

/* The program of ITERS GEMMs s (M, K, N) in dtype dt, C <- A B. */
static hn_program *gemm_program(tuner *t, hn_dtype dt, const int64_t *s)
{
    const char *n = hn_dtype_name(dt);
    return program(t,
                   "param ITERS = 1\ninput A : %s[%lld, %lld] replicated\ninput B : %s[%lld, %lld] replicated\n"
                   "output C : %s[%lld, %lld] replicated\nfor it in 0 .. ITERS {\n  matmul C <- A, B\n}\n",
                   n, (long long)s[0], (long long)s[1], n, (long long)s[1], (long long)s[2], n, (long long)s[0],
                   (long long)s[2]);
}

/* ---- GEMM rates, chunks and streams, copies ---- */

/* The largest pipeline shape's GEMM back to back for the sizing's
 * heat_s: a GPU multiplying for a while holds lower clocks than a cold
 * one, and pipelines and servers run warm, so rates are taken warm. */
static void heat(tuner *t)
{
    const int64_t *s = t->shapes[t->nshapes - 1];
    const char *names[1] = {"ITERS"};
    int64_t iters[1] = {1};
    hn_binding bind[6];
    hn_run_args args = {1, names, iters, 0, bind};
    hn_program *p;
    bufs b = {0};
    double one;
    if (!(t->z->heat_s > 0) || !begin(t, "the GPUs warmed up for %g s", t->z->heat_s))
        return;
    if (gemm_bufs(t, &b, HN_BF16, s) && (p = gemm_program(t, HN_BF16, s)) != NULL) {
        hn_status_t st;
        bind_all(&b, bind);
        args.nbindings = b.k;
        if ((st = hn_tune_time(t->rt, p, &args, 1, 1, &one)) == HN_OK && one > 0) {
            iters[0] = (int64_t)fmin(fmax(ceil(t->z->heat_s / one), 1), 1e6);
            st = hn_runtime_run(t->rt, p, &args);
        }
        if (st != HN_OK)
            failed(t, st, "warming the GPUs up");
        hn_runtime_forget(t->rt, p);
        hn_program_destroy(p);
    }
    bufs_free(t, &b);
}

/* The GEMM rates by shape and dtype, the shapes of a dtype timed in
 * rounds (every shape in the same state of the GPU's clocks). */
static void gemm_rates(tuner *t)
{
    static const hn_dtype dts[] = {HN_BF16, HN_F16, HN_F32};
    const char *names[1] = {"ITERS"};
    int64_t iters[1] = {t->z->iters};
    for (int d = 0; d < 3; d++) {
        double most[3] = {0, 0, 0}, secs[MAX_GEMM];
        hn_program *progs[MAX_GEMM];
        int of[MAX_GEMM], n = 0;
        bufs b = {0};
        for (int i = 0; i < t->z->ngemm; i++) /* room for the largest of each operand */
            if (dts[d] != HN_F32 || flop(t->z->gemm[i]) <= t->z->f32_max_flop) {
                const int64_t *s = t->z->gemm[i];
                most[0] = fmax(most[0], (double)s[0] * s[1]);
                most[1] = fmax(most[1], (double)s[1] * s[2]);
                most[2] = fmax(most[2], (double)s[0] * s[2]);
                of[n++] = i;
            }
        if (n == 0 || !begin(t, "GEMM rates in %s, %d shapes in rounds", hn_dtype_name(dts[d]), n))
            continue;
        if (!(bufs_add(t, &b, "A", dts[d], most[0]) && bufs_add(t, &b, "B", dts[d], most[1]) &&
              bufs_add(t, &b, "C", dts[d], most[2]))) {
            bufs_free(t, &b);
            return;
        }
        for (int j = 0; j < n; j++)
            progs[j] = gemm_program(t, dts[d], t->z->gemm[of[j]]);
        timed_rounds(t, &b, progs, n, names, iters, 1, t->z->reps, secs);
        for (int j = 0; j < n && t->st == HN_OK; j++) {
            const int64_t *s = t->z->gemm[of[j]];
            if (t->p->ngemm < HN_COST_MAX_PIPES && secs[j] > 0)
                t->p->gemm[t->p->ngemm++] = (hn_cost_gemm_point){dts[d], s[0], s[1], s[2], flop(s) / secs[j] / 1e12};
        }
        bufs_free(t, &b);
    }
}

/* Each pipeline shape's GEMM whole, then in c row chunks on 1 and on 2
 * streams, the programs of a shape timed in rounds: the splits (time over
 * the whole GEMM's, by shape: what the model multiplies a pipeline's GEMM
 * by), and from the middle shape what one chunk more and one stream more
 * cost where a profile has no splits. */
static void chunks_and_streams(tuner *t)
{
    enum { MAX_PROGS = 1 + 2 * 3 };
    const char *names[1] = {"ITERS"};
    int64_t iters[1] = {t->z->iters};
    double chunk = 0, stream = 0;
    int nc = 0, ns = 0;
    for (int si = 0; si < t->nshapes; si++) {
        const int64_t *s = t->shapes[si];
        hn_program *progs[MAX_PROGS];
        int c_of[MAX_PROGS], s_of[MAX_PROGS], n = 0;
        double secs[MAX_PROGS];
        bufs b = {0};
        if (!t->counting && t->st == HN_OK)
            (void)gemm_bufs(t, &b, HN_BF16, s);
        for (int i = -1; i < t->z->nchunks && n < MAX_PROGS; i++) {
            int c = i < 0 ? 1 : t->z->chunks[i];
            if (s[0] % c != 0)
                continue;
            for (int S = 1; S <= (c > 1 ? 2 : 1) && n < MAX_PROGS; S++) {
                hn_program *p;
                if (t->counting || t->st != HN_OK)
                    continue;
                p = program(t,
                            "param ITERS = 1\ninput A : bf16[%lld, %lld] replicated\ninput B : bf16[%lld, %lld] "
                            "replicated\noutput C : bf16[%lld, %lld] replicated\nAv = view A as [%d, %lld, %lld]\n"
                            "Cv = view C as [%d, %lld, %lld]\ncaller = current_stream\n"
                            "for w in 0 .. %d {\n  set_stream stream(w)\n  wait_stream caller\n}\n"
                            "for it in 0 .. ITERS {\n  for j in 0 .. %d {\n    set_stream stream(j %% %d)\n"
                            "    matmul Cv[j] <- Av[j], B\n  }\n}\nset_stream caller\n"
                            "for w in 0 .. %d {\n  wait_stream stream(w)\n}\n",
                            (long long)s[0], (long long)s[1], (long long)s[1], (long long)s[2], (long long)s[0],
                            (long long)s[2], c, (long long)(s[0] / c), (long long)s[1], c, (long long)(s[0] / c),
                            (long long)s[2], S, c, S, S);
                if (p == NULL)
                    break;
                progs[n] = p;
                c_of[n] = c;
                s_of[n++] = S;
            }
        }
        if (begin(t, "GEMM %lldx%lldx%lld whole and in chunks on 1 and 2 streams, in rounds", (long long)s[0],
                  (long long)s[1], (long long)s[2]) &&
            n > 0) {
            timed_rounds(t, &b, progs, n, names, iters, 1, t->z->pipe_reps, secs);
        } else {
            for (int j = 0; j < n; j++)
                hn_program_destroy(progs[j]);
            n = 0;
        }
        for (int j = 1; j < n && t->st == HN_OK && c_of[0] == 1 && secs[0] > 0; j++) {
            if (t->p->nsplits < HN_COST_MAX_SPLITS && secs[j] > 0)
                t->p->splits[t->p->nsplits++] = (hn_cost_split_point){
                    s[0], s[1], s[2], c_of[j], s_of[j], fmin(secs[j] / secs[0], HN_COST_MAX_SPLIT_RATIO)};
            if (si != t->nshapes / 2)
                continue;
            if (s_of[j] == 1) {
                chunk += (secs[j] - secs[0]) / (c_of[j] - 1);
                nc++;
            } else if (s_of[j - 1] == 1 && c_of[j - 1] == c_of[j]) {
                stream += secs[j] - secs[j - 1];
                ns++;
            }
        }
        bufs_free(t, &b);
    }
    t->p->coef.chunk_s = nc > 0 ? fmin(fmax(chunk / nc, 0), HN_COST_MAX_SECONDS) : 0;
    t->p->coef.stream_s = ns > 0 ? fmin(fmax(stream / ns, 0), HN_COST_MAX_SECONDS) : 0;
}

static void copies(tuner *t)
{
    bufs b = {0};
    double elems = t->z->copy_bytes / 2, sec;
    char text[256], size[32];
    const char *names[1] = {"ITERS"};
    int64_t iters[1] = {t->z->iters};
    hn_size_text((uint64_t)t->z->copy_bytes, size, sizeof(size));
    if (!begin(t, "local copies of %s", size))
        return;
    if (!bufs_add(t, &b, "X", HN_BF16, elems) || !bufs_add(t, &b, "Y", HN_BF16, elems)) {
        bufs_free(t, &b);
        return;
    }
    snprintf(text, sizeof(text), "param ITERS = 1\ninput X : bf16[%.0f] replicated\noutput Y : bf16[%.0f] replicated\n"
             "for it in 0 .. ITERS {\n  copy Y <- X\n}\n", elems, elems);
    sec = timed(t, &b, text, names, iters, 1);
    if (t->st == HN_OK && sec > 0)
        t->p->hbm_bytes_per_s = t->z->copy_bytes / sec;
    bufs_free(t, &b);
}

/* ---- a GEMM beside other traffic ---- */

/* The traffic of kind k on stream 1, X and Y (small: L) of `elems`. */
static const char *traffic_text(int k)
{
    switch (k) {
    case HN_TRAFFIC_CE:
        return "group {\n      send X to (rank + 1) % world via p2p\n      recv Y from (rank - 1) % world via p2p\n    }";
    case HN_TRAFFIC_NCCL: return "allreduce Y <- Y op max via nccl"; /* in place, no growth */
    case HN_TRAFFIC_LL: return "allreduce L <- L op max via ll";
    default: return "add Y <- Y, X";
    }
}

static void interference(tuner *t)
{
    static const char *const names[4] = {"ITERS", "G", "T"};
    const int64_t *s = t->shapes[t->nshapes - 1];
    double elems = t->z->copy_bytes / 8, small = t->z->ll_hi / 2;
    bufs b = {0};
    int made = 0;
    for (int k = 0; k < HN_TRAFFIC_COUNT; k++) {
        char text[2048];
        int64_t v[3] = {t->z->iters, 1, 0};
        double tg, t1, tc, both;
        t->p->interference[k] = -1;
        if (k != HN_TRAFFIC_SM && (t->n < 2 || (k == HN_TRAFFIC_LL && t->n > 8)))
            continue; /* nothing to communicate on one device */
        if (!begin(t, "a GEMM beside %s", k == HN_TRAFFIC_CE     ? "copy engines"
                                          : k == HN_TRAFFIC_NCCL ? "NCCL"
                                          : k == HN_TRAFFIC_LL   ? "the latency path"
                                                                 : "SM reductions"))
            continue;
        if (!made && !(made = bufs_add(t, &b, "A", HN_BF16, (double)s[0] * s[1]) &&
                              bufs_add(t, &b, "B", HN_BF16, (double)s[1] * s[2]) &&
                              bufs_add(t, &b, "C", HN_BF16, (double)s[0] * s[2]) && bufs_add(t, &b, "X", HN_BF16, elems) &&
                              bufs_add(t, &b, "Y", HN_BF16, elems) && bufs_add(t, &b, "L", HN_BF16, small)))
            break;
        snprintf(text, sizeof(text),
                 "param ITERS = 1\nparam G = 1\nparam T = 1\ninput A : bf16[%lld, %lld] replicated\n"
                 "input B : bf16[%lld, %lld] replicated\noutput C : bf16[%lld, %lld] replicated\n"
                 "output X : bf16[%.0f] replicated\noutput Y : bf16[%.0f] replicated\noutput L : bf16[%.0f] replicated\n"
                 "caller = current_stream\nfor w in 0 .. 2 {\n  set_stream stream(w)\n  wait_stream caller\n}\n"
                 "for it in 0 .. ITERS {\n  set_stream stream(0)\n  for g in 0 .. G {\n    matmul C <- A, B\n  }\n"
                 "  set_stream stream(1)\n  for x in 0 .. T {\n    %s\n  }\n}\nset_stream caller\n"
                 "for w in 0 .. 2 {\n  wait_stream stream(w)\n}\n",
                 (long long)s[0], (long long)s[1], (long long)s[1], (long long)s[2], (long long)s[0], (long long)s[2],
                 elems, elems, small, traffic_text(k));
        /* the GEMM alone, one piece of traffic alone; then as many GEMMs
         * and pieces as make the traffic about half the GEMMs' time */
        tg = timed(t, &b, text, names, v, 3);
        v[1] = 0;
        v[2] = 1;
        t1 = timed(t, &b, text, names, v, 3);
        if (t->st != HN_OK || !(tg > 0) || !(t1 > 0))
            break;
        v[1] = HN_MAX(1, (int64_t)ceil(2 * t1 / tg));
        v[2] = HN_MAX(1, (int64_t)floor(0.5 * v[1] * tg / t1));
        tg = timed(t, &b, text, names, (int64_t[]){v[0], v[1], 0}, 3);
        tc = timed(t, &b, text, names, (int64_t[]){v[0], 0, v[2]}, 3);
        both = timed(t, &b, text, names, v, 3);
        if (t->st == HN_OK && tc > 0 && tc <= 1.2 * tg)
            t->p->interference[k] = fmin(fmax((both - tg) / tc, 0), 100);
    }
    bufs_free(t, &b);
}

/* ---- collectives ---- */

/* Each collective's curve through each communicator, eagerly, then (but
 * the p2p rings' get) captured in graphs: `via auto` reads a mode's own
 * (docs/SCHEDULER.md), the model's pipelines the eager ones. Calls per
 * run: the sizing's eagerly, GRAPH_CALLS per replay. */
#define GRAPH_CALLS 20
static void curves(tuner *t)
{
    static const hn_coll_kind kinds[] = {HN_COLL_ALLGATHER, HN_COLL_REDUCE_SCATTER, HN_COLL_ALLREDUCE};
    static const char *const vias[HN_ENGINE_COUNT] = {"nccl", "p2p", "p2p get", "ll"};
    double most = fmax(t->z->coll_hi, t->z->ll_hi);
    bufs b = {0};
    if (t->n < 2)
        return;
    if (!t->counting && t->st == HN_OK)
        (void)(bufs_add(t, &b, "X", HN_BF16, most / 2) && bufs_add(t, &b, "Y", HN_BF16, most / 2));
    for (int graph = 0; graph < 2; graph++)
        for (int ki = 0; ki < 3; ki++)
            for (int e = 0; e < HN_ENGINE_COUNT; e++) {
                hn_cost_curve *c =
                    t->counting || t->p->ncurves == HN_COST_MAX_CURVES ? NULL : &t->p->curves[t->p->ncurves];
                double lo = e == HN_ENGINE_LL ? t->z->ll_lo : t->z->coll_lo;
                double hi = e == HN_ENGINE_LL ? t->z->ll_hi : t->z->coll_hi;
                if (e == HN_ENGINE_LL && (t->n > 8 || hn_comm_ll_refuses(kinds[ki], HN_BF16, t->n) != NULL))
                    continue;
                if (graph && e == HN_ENGINE_CE_GET)
                    continue;
                if (c != NULL)
                    *c = (hn_cost_curve){kinds[ki], (hn_cost_engine)e, t->n, 0, {0}, {0}, graph};
                for (double bytes = lo; bytes <= hi * 1.0001; bytes *= t->z->step) {
                    double total = bytes / 2, in, out, sec;
                    char text[512];
                    const char *names[1] = {"ITERS"};
                    int64_t iters[1] = {graph ? GRAPH_CALLS : t->z->iters};
                    char size[32];
                    hn_size_text((uint64_t)bytes, size, sizeof(size));
                    if (!begin(t, "%s via %s, %s%s", hn_coll_name(kinds[ki]), vias[e], size, graph ? ", in graphs" : ""))
                        continue;
                    total = floor(total / t->n) * t->n; /* elements of the whole, divisible by the ranks */
                    in = kinds[ki] == HN_COLL_ALLGATHER ? total / t->n : total;
                    out = kinds[ki] == HN_COLL_REDUCE_SCATTER ? total / t->n : total;
                    snprintf(text, sizeof(text),
                             "param ITERS = 1\ninput X : bf16[%.0f] replicated\noutput Y : bf16[%.0f] replicated\n"
                             "for it in 0 .. ITERS {\n  %s Y <- X%s via %s\n}\n",
                             in, out, hn_coll_name(kinds[ki]), kinds[ki] == HN_COLL_ALLGATHER ? "" : " op sum",
                             vias[e]);
                    sec = timed_as(t, &b, text, names, iters, 1, graph);
                    if (t->st == HN_OK && c != NULL && c->npoints < HN_COST_MAX_POINTS && sec > 0) {
                        c->bytes[c->npoints] = total * 2;
                        c->us[c->npoints++] = sec * 1e6;
                    }
                }
                if (c != NULL && c->npoints > 0)
                    t->p->ncurves++;
            }
    bufs_free(t, &b);
}

/* ---- hirnode's pipelines ---- */

typedef struct variant {
    const char *options; /* NULL: the GEMM alone */
    hn_strategy strategy;
    int p2p, get, chunks;
} variant;

static const variant variants[] = {
    {NULL, HN_STRAT_SEQUENTIAL, 0, 0, 1},
    {"strategy=sequential, via=nccl", HN_STRAT_SEQUENTIAL, 0, 0, 1},
    {"strategy=ring, via=p2p, protocol=put", HN_STRAT_RING, 1, 0, 0},
    {"strategy=ring, via=p2p, protocol=get", HN_STRAT_RING, 1, 1, 0},
    {"strategy=collective, via=nccl, chunks=4", HN_STRAT_COLLECTIVE, 0, 0, 4},
    {"strategy=collective, via=p2p, chunks=4", HN_STRAT_COLLECTIVE, 1, 0, 4},
};

static void pipelines(tuner *t)
{
    static const char *const ops[] = {"matmul C <- allgather(A), B", "reduce_scatter C <- matmul(A, B)",
                                      "allreduce C <- matmul(A, B)"};
    /* the GEMM alone and each op's pipelines: every program of a shape stays
     * prepared through its rounds (a runtime remembers HN_VERIFIED_CONFIGS) */
    enum { MAX_RUNS = 1 + 3 * (HN_ARRAY_LEN(variants) - 1) };
    _Static_assert(MAX_RUNS <= HN_VERIFIED_CONFIGS, "a shape's programs must all stay prepared");
    const char *names[1] = {"ITERS"};
    int64_t iters[1] = {t->z->iters};
    if (t->n < 2)
        return;
    for (int si = 0; si < t->nshapes; si++) {
        const int64_t *s = t->shapes[si];
        bufs b = {0};
        hn_program *progs[MAX_RUNS];
        int op_of[MAX_RUNS], v_of[MAX_RUNS], n = 0;
        double secs[MAX_RUNS], alone;
        if (s[0] % t->n != 0)
            continue; /* rows that do not split over the ranks: no pipeline takes them */
        if (!t->counting && t->st == HN_OK)
            (void)gemm_bufs(t, &b, HN_BF16, s);
        /* every program of the shape first (the GEMM alone the first),
         * then their runs in rounds */
        for (int op = 0; op < 3 && t->st == HN_OK; op++) {
            for (int v = 0; v < HN_ARRAY_LEN(variants); v++) {
                const variant *x = &variants[v];
                long long a0 = op == 0 && x->options != NULL ? s[0] / t->n : s[0];
                long long c0 = op == 1 && x->options != NULL ? s[0] / t->n : s[0];
                char text[1024];
                hn_program *p;
                hn_program *lp = NULL;
                hn_strbuf diag;
                if ((x->options == NULL && op > 0) || (op == 2 && x->get))
                    continue; /* the GEMM alone once per shape; no allreduce by ring with get */
                if (!begin(t, "%s %lldx%lldx%lld: %s", op == 0 ? "ag_matmul" : op == 1 ? "matmul_rs" : "matmul_ar",
                           (long long)s[0], (long long)s[1], (long long)s[2], x->options ? x->options : "the GEMM alone"))
                    continue;
                snprintf(text, sizeof(text),
                         "param ITERS = 1\ninput A : bf16[%lld, %lld] replicated\ninput B : bf16[%lld, %lld] replicated\n"
                         "output C : bf16[%lld, %lld] replicated\nfor it in 0 .. ITERS {\n  %s%s%s%s\n}\n",
                         a0, (long long)s[1], (long long)s[1], (long long)s[2], c0, (long long)s[2],
                         x->options ? ops[op] : "matmul C <- A, B", x->options ? " pipelined(" : "",
                         x->options ? x->options : "", x->options ? ")" : "");
                /* a variant the shape cannot take (chunks that do not divide) is left out */
                if ((p = program(t, "%s", text)) == NULL)
                    break;
                hn_sb_init(&diag);
                if (x->options != NULL &&
                    hn_sched_lower(p, t->n, 1, t->rt->cfg.nstreams, iters, t->rt->profile, &lp, &diag, NULL) != HN_OK) {
                    hn_sb_free(&diag);
                    hn_program_destroy(p);
                    continue;
                }
                hn_sb_free(&diag);
                hn_program_destroy(lp);
                progs[n] = p;
                op_of[n] = op;
                v_of[n++] = v;
            }
        }
        if (begin(t, "%lldx%lldx%lld: the %d programs timed in rounds", (long long)s[0], (long long)s[1],
                  (long long)s[2], n) &&
            n > 0) {
            timed_rounds(t, &b, progs, n, names, iters, 1, t->z->pipe_reps, secs);
        } else { /* counting, or after a failure */
            for (int j = 0; j < n; j++)
                hn_program_destroy(progs[j]);
            n = 0;
        }
        alone = n > 0 && variants[v_of[0]].options == NULL ? secs[0] : NAN;
        for (int j = 0; j < n && t->st == HN_OK; j++) {
            const variant *x = &variants[v_of[j]];
            if (x->options != NULL && t->p->npipes < HN_COST_MAX_PIPES && secs[j] > 0 && alone > 0)
                t->p->pipes[t->p->npipes++] = (hn_cost_point){
                    (hn_pipe_kind)op_of[j], s[0], s[1], s[2], t->n, flop(s) / alone / 1e12, x->strategy, x->p2p,
                    x->strategy == HN_STRAT_RING ? t->n : x->chunks, alone / secs[j], x->get, 0};
        }
        bufs_free(t, &b);
    }
}

/* ---- the whole ---- */

static void machine(tuner *t)
{
    hn_cost_profile *p = t->p;
    time_t now = time(NULL);
    struct tm tm;
    FILE *f;
    hn_profile_device_model(t->rt->dev, p->model, sizeof(p->model), p->cuda, sizeof(p->cuda));
    snprintf(p->backend, sizeof(p->backend), "%s", hn_runtime_backend(t->rt));
    p->count = t->n;
    snprintf(p->driver, sizeof(p->driver), "-");
    snprintf(p->nccl, sizeof(p->nccl), "-");
    snprintf(p->hirnode, sizeof(p->hirnode), "%s", hn_version());
    if (gmtime_r(&now, &tm) != NULL)
        strftime(p->date, sizeof(p->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (t->rt->dev->kind != HN_DEVICE_KIND_CUDA) /* the NVIDIA driver's and NCCL's versions */
        return;
#ifdef HN_HAVE_CUDA
    hn_nccl_version(p->nccl, sizeof(p->nccl));
#endif
    /* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build ...", or
     * "... UNIX Open Kernel Module for x86_64  580.159.04 ...": the first word after
     * "Kernel Module" that starts with a digit and holds a dot */
    if ((f = fopen("/proc/driver/nvidia/version", "r")) != NULL) {
        char line[256], *at;
        if (fgets(line, sizeof(line), f) != NULL && (at = strstr(line, "Kernel Module")) != NULL)
            for (at += strlen("Kernel Module"); *at != '\0' && *at != '\n'; at += strcspn(at, " \t\n")) {
                size_t len;
                at += strspn(at, " \t");
                len = strcspn(at, " \t\n");
                if (len > 0 && *at >= '0' && *at <= '9' && memchr(at, '.', len) != NULL) {
                    snprintf(p->driver, sizeof(p->driver), "%.*s", (int)len, at);
                    break;
                }
            }
        fclose(f);
    }
}

/* The model's coefficients from what was measured; what was not, the
 * built-in default's. */
void hn_tune_fit(hn_cost_profile *p)
{
    static const hn_dtype dts[] = {HN_BF16, HN_F16, HN_F32};
    const hn_cost_profile *def = hn_cost_builtin();
    hn_cost_coeffs c;
    for (int d = 0; d < HN_COST_NDTYPES; d++)
        if (!hn_cost_fit_gemm(p->gemm, p->ngemm, dts[d], &p->gemm_tflops_at_1t[d], &p->gemm_gamma[d])) {
            p->gemm_tflops_at_1t[d] = def->gemm_tflops_at_1t[d];
            p->gemm_gamma[d] = def->gemm_gamma[d];
        }
    c = def->coef;
    if (p->npipes > 0) {
        hn_cost_fit(p, p->pipes, p->npipes, &def->coef, &c);
    } else { /* one device: nothing communicates, the default's terms stay */
        c.chunk_s = p->coef.chunk_s;
        c.stream_s = p->coef.stream_s;
    }
    p->coef = c;
    if (!(p->hbm_bytes_per_s > 0))
        p->hbm_bytes_per_s = def->hbm_bytes_per_s;
}

static void fit(tuner *t)
{
    if (begin(t, "the model's fit"))
        hn_tune_fit(t->p);
}

static void phases(tuner *t)
{
    heat(t);
    gemm_rates(t);
    chunks_and_streams(t);
    copies(t);
    interference(t);
    curves(t);
    pipelines(t);
    fit(t);
}

hn_status_t hn_tune(const hn_tune_opts *o, hn_cost_profile *out, hn_strbuf *err)
{
    tuner t;
    hn_status_t st;
    memset(&t, 0, sizeof(t));
    t.o = o;
    t.err = err;
    if ((t.p = hn_calloc(1, sizeof(*t.p))) == NULL)
        return HN_ERR_NOMEM;
    {
        char *why = NULL; /* said once, in err: not logged as well */
        if ((st = hn_runtime_create_ex(&o->cfg, &t.rt, &why)) != HN_OK) {
            hn_sb_printf(err, "cannot start %d rank%s: %s", o->cfg.ndev, o->cfg.ndev == 1 ? "" : "s",
                         why != NULL ? why : hn_status_string(st));
            hn_string_free(why);
            hn_free(t.p);
            return st;
        }
    }
    t.n = hn_runtime_size(t.rt);
    t.z = &sizings[o->size != HN_TUNE_AUTO ? o->size
                   : t.rt->dev->emulated ? HN_TUNE_HOST
                                         : HN_TUNE_GPU];
    t.nshapes = o->nshapes > 0 ? HN_MIN(o->nshapes, HN_COST_MAX_SHAPES) : t.z->nshapes;
    memcpy(t.shapes, o->nshapes > 0 ? (const void *)o->shapes : (const void *)t.z->shapes,
           sizeof(t.shapes[0]) * (size_t)t.nshapes);
    t.p->nshapes = t.nshapes;
    memcpy(t.p->shapes, t.shapes, sizeof(t.shapes[0]) * (size_t)t.nshapes);
    /* count the steps, then take them */
    t.counting = 1;
    phases(&t);
    t.nsteps = t.step;
    t.counting = 0;
    t.step = 0;
    machine(&t);
    phases(&t);
    hn_runtime_destroy(t.rt);
    if (t.st == HN_OK) {
        t.p->builtin = 0;
        t.p->source[0] = '\0';
        *out = *t.p;
    }
    hn_free(t.p);
    return t.st;
}

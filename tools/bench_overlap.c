/* `hirnode bench overlap`: pipelined tensor-parallel GEMMs. For each op,
 * shape and dtype, in one runtime: the GEMM alone, the sequential NCCL
 * collective + GEMM (the baseline), every strategy and `auto`, each the
 * median of >= 20 timed runs of ITERS statements (host clock around the
 * whole run, the slowest rank; the variants' runs interleaved in
 * rounds, so every variant's program stays prepared, its buffers held,
 * through a table: device memory holds them all at once); per-GPU TFLOP/s
 * = 2 M N K / time, with M the global rows and K x N the local weight; the
 * model's time of each and its error; every output compared with the
 * baseline's, after a variant's first run and again after the timed
 * rounds (with graphs = 1 a replay); the model's pick beside the fastest
 * measured. Progress on stderr, the table on
 * stdout. Runs on the host backend too (small shapes), so CI exercises
 * it. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/runtime/tools.h"
#include "hirnode/runtime.h"

#include "launch.h"
#include "options.h"

int hn_cli_bench_overlap(int argc, char **argv);

typedef enum { OP_AG_MATMUL, OP_MATMUL_RS, OP_MATMUL_AR } bench_op;
static const char *op_names[] = {"ag_matmul", "matmul_rs", "matmul_ar"};

typedef struct shape3 {
    long long M, K, N;
} shape3;

typedef struct overlap_opts {
    hn_runtime_config cfg;
    bench_op op;
    int all_ops;    /* --op all: the three, one after another */
    int tuner;      /* --shapes tuner: the profile's */
    shape3 shapes[HN_COST_MAX_SHAPES];
    int nshapes;
    hn_dtype dtypes[4];
    int ndtypes;
    int iters, warmup, reps;
    int chunks, streams; /* 0: the model picks */
    int markdown;
} overlap_opts;

/* One variant: a strategy and communicator (NULL strategy: the GEMM alone). */
typedef struct variant {
    const char *name;
    const char *strategy, *via, *protocol;
    int chunked; /* takes --chunks */
} variant;

static const variant variants[] = {
    {"gemm alone", NULL, NULL, NULL, 0},
    {"sequential nccl", "sequential", "nccl", NULL, 0},
    {"sequential p2p", "sequential", "p2p", NULL, 0},
    {"ring p2p put", "ring", "p2p", "put", 0},
    {"ring p2p get", "ring", "p2p", "get", 0},
    {"collective nccl", "collective", "nccl", NULL, 1},
    {"collective p2p", "collective", "p2p", NULL, 1},
    {"broadcast nccl", "broadcast", "nccl", NULL, 1},
    {"broadcast p2p", "broadcast", "p2p", NULL, 1},
    {"auto", "auto", NULL, NULL, 0},
};
#define BASELINE 1
#define AUTO_ROW (HN_ARRAY_LEN(variants) - 1)

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench overlap: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* The statement of a variant (empty for the GEMM alone). */
static void statement(const overlap_opts *o, const variant *v, char *buf, size_t n)
{
    static const char *forms[] = {"matmul C <- allgather(A), B", "reduce_scatter C <- matmul(A, B)",
                                  "allreduce C <- matmul(A, B)"};
    size_t k;
    if (v->strategy == NULL) {
        snprintf(buf, n, "matmul C <- A, B");
        return;
    }
    k = (size_t)snprintf(buf, n, "%s pipelined(strategy=%s", forms[o->op], v->strategy);
    if (v->via != NULL && k < n)
        k += (size_t)snprintf(buf + k, n - k, ", via=%s", v->via);
    if (v->protocol != NULL && k < n)
        k += (size_t)snprintf(buf + k, n - k, ", protocol=%s", v->protocol);
    if (v->chunked && o->chunks > 0 && k < n)
        k += (size_t)snprintf(buf + k, n - k, ", chunks=%d", o->chunks);
    if (o->streams > 0 && strcmp(v->strategy, "sequential") != 0 && k < n)
        k += (size_t)snprintf(buf + k, n - k, ", streams=%d", o->streams);
    if (k < n)
        snprintf(buf + k, n - k, ")");
}

/* Per-rank shapes: A, B, C (the GEMM alone multiplies all M rows). */
static void shapes_of(const overlap_opts *o, const shape3 *s, int n, int gemm_alone, long long a[2],
                      long long b[2], long long c[2])
{
    a[0] = o->op == OP_AG_MATMUL && !gemm_alone ? s->M / n : s->M;
    a[1] = s->K;
    b[0] = s->K;
    b[1] = s->N;
    c[0] = o->op == OP_MATMUL_RS && !gemm_alone ? s->M / n : s->M;
    c[1] = s->N;
}

static hn_program *parse(const char *text)
{
    hn_program *p = NULL;
    char *diag = NULL;
    if (hn_program_parse(text, strlen(text), "<bench overlap>", &p, &diag) != HN_OK) {
        fprintf(stderr, "%s", diag ? diag : "bench overlap: bad program\n");
        p = NULL;
    }
    hn_string_free(diag);
    return p;
}

typedef struct measured {
    hn_program *prog; /* kept for the timed rounds, where it ran */
    double seconds; /* median per statement */
    double max_rel; /* largest error against the baseline */
    char plan[256];
    double model_s;
    double overlap; /* of a traced run: share of communication hidden under compute; < 0: none */
    int ran;
} measured;

/* One more run, traced, read back: the overlap figure (docs/TRACING.md) of
 * this strategy, all ranks together. Its time is not counted. */
static double overlap_of(hn_runtime *rt, const hn_program *p, const hn_run_args *args)
{
    char path[] = "/tmp/hirnode-overlap-XXXXXX", mine[64];
    int fd = mkstemp(path);
    hn_trace_data t;
    hn_overlap ov = {0, 0};
    hn_strbuf err;
    double figure = -1;
    if (fd < 0)
        return -1;
    close(fd);
    hn_sb_init(&err);
    /* across processes each writes its own file, PATH.rankR past rank 0 */
    snprintf(mine, sizeof(mine), hn_runtime_first_rank(rt) > 0 ? "%s.rank%d" : "%s", path, hn_runtime_first_rank(rt));
    if (hn_runtime_trace_start(rt, path) == HN_OK) {
        hn_status_t st = hn_runtime_run(rt, p, args);
        if (hn_runtime_trace_stop(rt) == HN_OK && st == HN_OK && hn_trace_load_file(mine, &t, &err) == HN_OK) {
            if (hn_trace_overlap(t.spans, t.nspans, -1, t.nruns - 1, &ov) == HN_OK && ov.comm > 0)
                figure = hn_overlap_figure(&ov);
            hn_trace_data_free(&t);
        }
    }
    hn_sb_free(&err);
    remove(path);
    remove(mine);
    return figure;
}

/* Largest |x - y| / max |y| over one rank's output. */
static double rel_err(const void *x, const void *y, hn_dtype dt, long long n)
{
    double maxd = 0, maxy = 0;
    for (long long i = 0; i < n; i++) {
        double a = hn_load(dt, x, i), b = hn_load(dt, y, i);
        if (isnan(a) || isnan(b))
            return INFINITY;
        maxd = fmax(maxd, fabs(a - b));
        maxy = fmax(maxy, fabs(b));
    }
    return maxy > 0 ? maxd / maxy : maxd;
}

static double tolerance(hn_dtype t) { return t == HN_F32 ? 1e-4 : t == HN_F16 ? 4e-3 : 3e-2; }

static hn_status_t poison(hn_runtime *rt, hn_dtype dt, const long long c[2], void **out, const size_t *out_bytes)
{
    char text[256];
    hn_program *p;
    hn_binding bind[1] = {{"C", out, out_bytes}};
    hn_run_args args = {0, NULL, NULL, 1, bind};
    hn_status_t st;
    snprintf(text, sizeof(text), "output C : %s[%lld, %lld] replicated\nfill C <- -12345.0\n", hn_dtype_name(dt),
             c[0], c[1]);
    if ((p = parse(text)) == NULL)
        return HN_ERR_INVALID;
    st = hn_runtime_run(rt, p, &args);
    hn_runtime_forget(rt, p);
    hn_program_destroy(p);
    return st;
}

/* What every run of a table binds: A, B and C, and ITERS. */
typedef struct table_args {
    hn_binding bind[3];
    const char *pname[1];
    int64_t pval[1];
    hn_run_args args;
} table_args;

static const hn_run_args *table_args_of(table_args *t, const overlap_opts *o, void **bufs[3],
                                        size_t *const sizes[3])
{
    static const char *const names[3] = {"A", "B", "C"};
    for (int k = 0; k < 3; k++)
        t->bind[k] = (hn_binding){names[k], bufs[k], sizes[k]};
    t->pname[0] = "ITERS";
    t->pval[0] = o->iters;
    t->args = (hn_run_args){1, t->pname, t->pval, 3, t->bind};
    return &t->args;
}

/* One run of variant vi's program p with its output poisoned before, the
 * output of every rank then compared with the baseline's (the baseline's
 * own first run records it) into res->max_rel. */
static hn_status_t checked_run(hn_runtime *rt, const overlap_opts *o, const shape3 *s, hn_dtype dt, int vi,
                               hn_program *p, void **bufs[3], size_t *const sizes[3], void **baseline_out,
                               measured *res)
{
    int n = hn_runtime_world(rt), nl = hn_runtime_size(rt), first = hn_runtime_first_rank(rt);
    int gemm_alone = variants[vi].strategy == NULL;
    long long a[2], b[2], c[2];
    table_args ta;
    const hn_run_args *args = table_args_of(&ta, o, bufs, sizes);
    size_t cbytes;
    char *host = NULL;
    hn_status_t st;
    shapes_of(o, s, n, gemm_alone, a, b, c);
    cbytes = (size_t)(c[0] * c[1]) * (size_t)hn_dtype_size(dt);
    st = poison(rt, dt, c, bufs[2], sizes[2]); /* so that an output not written shows */
    if (st == HN_OK)
        st = hn_runtime_run(rt, p, args);
    if (st != HN_OK)
        fprintf(stderr, "bench overlap: %s: %s\n", variants[vi].name, hn_runtime_error(rt));
    if (st == HN_OK && !gemm_alone && (host = malloc(cbytes + 1)) != NULL) {
        for (int r = 0; r < nl && st == HN_OK; r++) {
            if ((st = hn_runtime_download(rt, first + r, host, bufs[2][r], cbytes)) != HN_OK)
                break;
            if (vi == BASELINE && baseline_out[r] == NULL) {
                if ((baseline_out[r] = malloc(cbytes + 1)) == NULL) {
                    st = HN_ERR_NOMEM;
                    break;
                }
                memcpy(baseline_out[r], host, cbytes);
            } else if (baseline_out[r] != NULL) {
                res->max_rel = fmax(res->max_rel, rel_err(host, baseline_out[r], dt, c[0] * c[1]));
            }
        }
    }
    free(host);
    return st;
}

/* Readies one variant: its program and plan, one run whose output is
 * checked against the baseline's; the program stays in res->prog for the
 * timed rounds (timed_rounds), after which its output is checked again
 * and a traced run gives its overlap figure (after_rounds). */
static hn_status_t run_variant(hn_runtime *rt, const overlap_opts *o, const shape3 *s, hn_dtype dt, int vi,
                               void **bufs[3], size_t *const sizes[3], void **baseline_out, measured *res)
{
    /* the world's ranks shape the program */
    int n = hn_runtime_world(rt);
    int gemm_alone = variants[vi].strategy == NULL;
    long long a[2], b[2], c[2];
    char stmt[512], text[2048];
    const char *dn = hn_dtype_name(dt);
    hn_program *p;
    hn_status_t st = HN_OK;
    memset(res, 0, sizeof(*res));
    res->overlap = -1; /* until a traced run after the rounds */
    shapes_of(o, s, n, gemm_alone, a, b, c);
    statement(o, &variants[vi], stmt, sizeof(stmt));
    snprintf(text, sizeof(text),
             "param ITERS = 1\ninput A : %s[%lld, %lld] replicated\ninput B : %s[%lld, %lld] replicated\n"
             "output C : %s[%lld, %lld] replicated\nfor it in 0 .. ITERS {\n  %s\n}\n",
             dn, a[0], a[1], dn, b[0], b[1], dn, c[0], c[1], stmt);
    if ((p = parse(text)) == NULL) {
        return HN_ERR_INVALID;
    }
    /* the plan the scheduler takes here, and what the model expects of it */
    if (!gemm_alone) {
        hn_program *lp = NULL;
        hn_strbuf diag, notes;
        int64_t params[1] = {o->iters};
        hn_sb_init(&diag);
        hn_sb_init(&notes);
        st = hn_sched_lower(p, n, rt->nodes, rt->cfg.nstreams, params, rt->profile, &lp, &diag, &notes);
        if (st != HN_OK) {
            /* not for this shape (chunks that do not divide, ...): say why */
            char *colon = diag.data ? strstr(diag.data, "): ") : NULL;
            snprintf(res->plan, sizeof(res->plan), "skipped: %s", colon ? colon + 3 : "cannot lower");
            res->plan[strcspn(res->plan, "\n")] = '\0';
            st = HN_OK;
        } else {
            char *plan = notes.data ? strstr(notes.data, ": strategy=") : NULL;
            char *model = plan ? strstr(plan, " (the model: ") : NULL;
            if (model != NULL) {
                res->model_s = atof(model + 13) * 1e-3;
                *model = '\0';
            }
            snprintf(res->plan, sizeof(res->plan), "%s", plan ? plan + 2 : "");
            res->ran = 1;
        }
        hn_sb_free(&diag);
        hn_sb_free(&notes);
        hn_program_destroy(lp);
    } else {
        snprintf(res->plan, sizeof(res->plan), "%lld x %lld x %lld per GPU", s->M, s->K, s->N);
        res->model_s = hn_cost_gemm_seconds(rt->profile, 2.0 * s->M * s->N * s->K, dt);
        res->ran = 1;
    }
    if (!res->ran) {
        hn_program_destroy(p);
        return HN_OK;
    }
    progress("%s %lldx%lldx%lld %s: %s (%s)", op_names[o->op], s->M, s->K, s->N, dn, variants[vi].name, res->plan);
    st = checked_run(rt, o, s, dt, vi, p, bufs, sizes, baseline_out, res);
    if (st == HN_OK) {
        res->prog = p;
        return st;
    }
    hn_runtime_forget(rt, p);
    hn_program_destroy(p);
    return st;
}

/* The timed runs of every variant that ran, in rounds of one run of each
 * (hn_tune_time_rounds: the machine's drift over the minutes a table
 * takes reaches every variant alike); each variant's median per
 * statement, the slowest process's. */
static hn_status_t timed_rounds(hn_runtime *rt, const overlap_opts *o, void **bufs[3], size_t *const sizes[3],
                                measured *res, int nres)
{
    table_args ta;
    const hn_run_args *args = table_args_of(&ta, o, bufs, sizes);
    hn_program *progs[HN_ARRAY_LEN(variants)];
    double secs[HN_ARRAY_LEN(variants)];
    hn_status_t st;
    for (int v = 0; v < nres; v++)
        progs[v] = res[v].prog;
    if ((st = hn_tune_time_rounds(rt, progs, nres, args, o->warmup, o->reps, secs)) != HN_OK)
        fprintf(stderr, "bench overlap: a timed run: %s\n", hn_runtime_error(rt));
    for (int v = 0; v < nres && st == HN_OK; v++)
        if (res[v].prog != NULL && (st = hn_procs_max(rt, secs[v], &res[v].seconds)) == HN_OK)
            res[v].seconds /= o->iters;
    return st;
}

/* After the rounds, each variant's output checked once more (with the
 * setting graphs = 1 this run replays the graph the rounds captured, which
 * the first, eager, run did not) and one traced run for its overlap
 * figure (traced runs are eager). */
static hn_status_t after_rounds(hn_runtime *rt, const overlap_opts *o, const shape3 *s, hn_dtype dt, void **bufs[3],
                                size_t *const sizes[3], void **baseline_out, measured *res, int nres)
{
    table_args ta;
    const hn_run_args *args = table_args_of(&ta, o, bufs, sizes);
    hn_status_t st = HN_OK;
    for (int v = 0; v < nres && st == HN_OK; v++)
        if (res[v].prog != NULL && variants[v].strategy != NULL &&
            (st = checked_run(rt, o, s, dt, v, res[v].prog, bufs, sizes, baseline_out, &res[v])) == HN_OK)
            res[v].overlap = overlap_of(rt, res[v].prog, args);
    return st;
}

/* Inputs: random per rank (B too where it is sharded), the output poisoned. */
static hn_status_t init_buffers(hn_runtime *rt, const overlap_opts *o, const shape3 *s, hn_dtype dt,
                                void **bufs[3], size_t *const sizes[3])
{
    int n = hn_runtime_world(rt), nl = hn_runtime_size(rt), first = hn_runtime_first_rank(rt);
    long long a[2], b[2], c[2];
    char text[1024];
    const char *dn = hn_dtype_name(dt);
    hn_program *p;
    hn_binding bind[3] = {{"A", bufs[0], sizes[0]}, {"B", bufs[1], sizes[1]}, {"C", bufs[2], sizes[2]}};
    hn_run_args args = {0, NULL, NULL, 3, bind};
    hn_status_t st;
    /* room for the GEMM alone's A (all M rows) and the largest C */
    shapes_of(o, s, n, 1, a, b, c);
    snprintf(text, sizeof(text),
             "output A : %s[%lld, %lld] replicated\noutput B : %s[%lld, %lld] replicated\n"
             "output C : %s[%lld, %lld] replicated\nrandom A <- 100 + rank\nrandom B <- %s\n",
             dn, a[0], a[1], dn, b[0], b[1], dn, c[0], c[1], o->op == OP_AG_MATMUL ? "7" : "200 + rank");
    if ((p = parse(text)) == NULL)
        return HN_ERR_INVALID;
    for (int k = 0; k < 3; k++)
        for (int r = 0; r < nl; r++) {
            long long *sh = k == 0 ? a : k == 1 ? b : c;
            size_t bytes = (size_t)(sh[0] * sh[1]) * (size_t)hn_dtype_size(dt);
            sizes[k][r] = bytes;
            if ((st = hn_runtime_alloc(rt, first + r, bytes, &bufs[k][r])) != HN_OK) {
                hn_program_destroy(p);
                return st;
            }
        }
    st = hn_runtime_run(rt, p, &args);
    hn_runtime_forget(rt, p);
    hn_program_destroy(p);
    return st;
}

static int bench_shape(hn_runtime *rt, const overlap_opts *o, const shape3 *s, hn_dtype dt)
{
    int n = hn_runtime_world(rt), nl = hn_runtime_size(rt), first = hn_runtime_first_rank(rt), rc = 0;
    void **bufs[3], **baseline = calloc((size_t)nl, sizeof(void *));
    size_t *sizes[3];
    measured res[HN_ARRAY_LEN(variants)] = {0};
    double flops = 2.0 * s->M * s->N * s->K, worst = 0;
    int best = -1;
    const char *dn = hn_dtype_name(dt);
    hn_status_t st = HN_OK;
    for (int k = 0; k < 3; k++) {
        bufs[k] = calloc((size_t)nl, sizeof(void *));
        sizes[k] = calloc((size_t)nl, sizeof(size_t));
    }
    if (baseline == NULL || bufs[0] == NULL || bufs[1] == NULL || bufs[2] == NULL || sizes[0] == NULL ||
        sizes[1] == NULL || sizes[2] == NULL) {
        st = HN_ERR_NOMEM;
        goto done;
    }
    if (s->M % n != 0 || s->M <= 0 || s->K <= 0 || s->N <= 0) {
        fprintf(stderr, "bench overlap: M = %lld does not split over %d GPUs\n", s->M, n);
        rc = 2;
        goto done;
    }
    if ((st = init_buffers(rt, o, s, dt, bufs, sizes)) != HN_OK) {
        fprintf(stderr, "bench overlap: cannot make the inputs: %s\n", hn_runtime_error(rt));
        goto done;
    }
    for (int v = 0; v < HN_ARRAY_LEN(variants) && st == HN_OK; v++) {
        if (o->op != OP_AG_MATMUL && variants[v].strategy != NULL && strcmp(variants[v].strategy, "broadcast") == 0) {
            res[v].ran = 0;
            res[v].plan[0] = '\0';
            continue;
        }
        if (o->op == OP_MATMUL_AR && variants[v].protocol != NULL && strcmp(variants[v].protocol, "get") == 0) {
            res[v].ran = 0;
            res[v].plan[0] = '\0';
            continue;
        }
        st = run_variant(rt, o, s, dt, v, bufs, sizes, baseline, &res[v]);
    }
    if (st == HN_OK) {
        progress("%s %lldx%lldx%lld %s: %d rounds of one run of each", op_names[o->op], s->M, s->K, s->N, dn,
                 o->reps);
        st = timed_rounds(rt, o, bufs, sizes, res, HN_ARRAY_LEN(variants));
        if (st == HN_OK)
            st = after_rounds(rt, o, s, dt, bufs, sizes, baseline, res, HN_ARRAY_LEN(variants));
    }
    if (st != HN_OK) {
        rc = 1;
        goto done;
    }
    printf(o->markdown ? "\n### %s, M=%lld K=%lld N=%lld, %s, %d GPUs (%s backend)\n\n"
                       : "\n# %s, M=%lld K=%lld N=%lld, %s, %d GPUs (%s backend)\n",
           op_names[o->op], s->M, s->K, s->N, dn, n, hn_runtime_backend(rt));
    printf(o->markdown ? "| variant | plan | ms | TFLOP/s per GPU | vs GEMM alone | model ms | model err | max rel err "
                         "| overlap |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
                       : "%-16s %-62s %10s %9s %8s %9s %9s %11s %8s\n",
           "variant", "plan", "ms", "TFLOP/s", "vs GEMM", "model ms", "model err", "max rel err", "overlap");
    for (int v = 0; v < HN_ARRAY_LEN(variants); v++) {
        const measured *m = &res[v];
        char err[32], ov[16];
        if (m->plan[0] == '\0')
            continue;
        if (!m->ran) {
            printf(o->markdown ? "| %s | %s | | | | | | | |\n" : "%-16s %s\n", variants[v].name, m->plan);
            continue;
        }
        if (variants[v].strategy != NULL && (best < 0 || m->seconds < res[best].seconds))
            best = v;
        worst = fmax(worst, fabs(m->model_s / m->seconds - 1));
        if (m->overlap >= 0)
            snprintf(ov, sizeof(ov), "%.1f%%", m->overlap * 100);
        else
            snprintf(ov, sizeof(ov), "-");
        if (variants[v].strategy == NULL || v == BASELINE)
            snprintf(err, sizeof(err), "-");
        else
            snprintf(err, sizeof(err), "%.2g%s", m->max_rel, m->max_rel <= tolerance(dt) ? "" : " WRONG");
        if (v > BASELINE && m->max_rel > tolerance(dt))
            rc = 1;
        printf(o->markdown ? "| %s | %s | %.3f | %.4g | %.3f | %.3f | %+.1f%% | %s | %s |\n"
                           : "%-16s %-62s %10.3f %9.4g %8.3f %9.3f %8.1f%% %11s %8s\n",
               variants[v].name, m->plan, m->seconds * 1e3, flops / m->seconds / 1e12, res[0].seconds / m->seconds,
               m->model_s * 1e3, (m->model_s / m->seconds - 1) * 100, err, ov);
    }
    /* the model's pick (auto's plan) beside the fastest measured */
    if (res[AUTO_ROW].ran && best >= 0)
        printf(o->markdown ? "\nThe model's pick: %s (model %.3f ms, measured %.3f ms); the fastest measured: %s, %s "
                             "(%.3f ms); auto / fastest: %.3f; the model's largest error here: %.1f%%.\n"
                           : "pick: %s (model %.3f ms, measured %.3f ms); fastest: %s, %s (%.3f ms); auto / fastest "
                             "%.3f; largest model error %.1f%%\n",
               res[AUTO_ROW].plan, res[AUTO_ROW].model_s * 1e3, res[AUTO_ROW].seconds * 1e3, variants[best].name, res[best].plan,
               res[best].seconds * 1e3, res[best].seconds / res[AUTO_ROW].seconds, worst * 100);
    fflush(stdout);
done:
    for (int v = 0; v < HN_ARRAY_LEN(variants); v++)
        if (res[v].prog != NULL) {
            hn_runtime_forget(rt, res[v].prog);
            hn_program_destroy(res[v].prog);
        }
    for (int k = 0; k < 3; k++) {
        for (int r = 0; bufs[k] != NULL && r < nl; r++)
            hn_runtime_free(rt, first + r, bufs[k][r]);
        free(bufs[k]);
        free(sizes[k]);
    }
    for (int r = 0; baseline != NULL && r < nl; r++)
        free(baseline[r]);
    free(baseline);
    if (st != HN_OK && rc == 0)
        rc = 1;
    return rc;
}

/* --shapes "MxKxN,MxKxN" (each size from 1 to 2^20), or "tuner": the
 * shapes the machine profile in use was measured at */
static int parse_shapes(const char *s, void *dest, hn_strbuf *err)
{
    overlap_opts *o = dest;
    int64_t v[HN_COST_MAX_SHAPES][3];
    o->nshapes = 0;
    if ((o->tuner = strcmp(s, "tuner") == 0))
        return 1;
    if (!hn_cli_shapes(s, "--shapes", v, HN_ARRAY_LEN(o->shapes), &o->nshapes, err))
        return 0;
    for (int i = 0; i < o->nshapes; i++)
        o->shapes[i] = (shape3){v[i][0], v[i][1], v[i][2]};
    return 1;
}

/* --dtype "bf16,f16,f32" */
static int parse_dtypes(const char *s, void *dest, hn_strbuf *err)
{
    overlap_opts *o = dest;
    (void)err; /* the parser says what the option takes */
    o->ndtypes = 0;
    while (*s && o->ndtypes < HN_ARRAY_LEN(o->dtypes)) {
        size_t len = strcspn(s, ",");
        int d = hn_dtype_parse(s, (int)len);
        if (d < 0 || (d != HN_BF16 && d != HN_F16 && d != HN_F32))
            return 0;
        o->dtypes[o->ndtypes++] = (hn_dtype)d;
        s += len;
        if (*s == ',')
            s++;
    }
    return o->ndtypes > 0 && *s == '\0';
}

/* Shapes for GPUs (seconds each there), and for the host backend, where a
 * CPU multiplies at about a GFLOP/s: the same table in a few seconds. */
static const char gpu_shapes[] = "32768x16384x8192,16384x8192x8192,4096x8192x8192";
static const char host_shapes[] = "256x128x64,128x128x128";

static const char overlap_more[] =
    "M: global rows; K x N: the local weight (per-GPU TFLOP/s = 2 M N K / time).\n"
    "Progress on stderr, the table on stdout.\n";

int hn_cli_bench_overlap(int argc, char **argv)
{
    overlap_opts o;
    hn_runtime *rt = NULL;
    const char *op = NULL;
    int rc = 0, shapes_given;
    hn_status_t st;
    char *why = NULL;
    hn_cli_procs procs = {0};
    const hn_option table[] = {
        HN_CHOICE("--op", "ag_matmul|matmul_rs|matmul_ar|all", &op, "the pipelined statement (needed; all: the three)"),
        HN_INT("--gpus", "N", &o.cfg.ndev, 1, 256, "ranks, one per device (default 2)"),
        HN_PROCS_OPTIONS(&procs),
        HN_CHOICE("--backend", "auto|cuda|host", &o.cfg.backend, "the devices (default: $HIRNODE_BACKEND, else auto)"),
        HN_CALL("--shapes", "MxKxN[,MxKxN...]", parse_shapes, &o,
                "default 32768x16384x8192,16384x8192x8192,4096x8192x8192;\n"
                "256x128x64,128x128x128 on the host backend; --shapes tuner: the\n"
                "shapes the machine profile in use was measured at"),
        HN_CALL("--dtype", "bf16[,f16,f32]", parse_dtypes, &o, "element types (default bf16)"),
        HN_INT("--iters", "I", &o.iters, 1, 1000000, "statements per run (default 5)"),
        HN_INT("--warmup", "W", &o.warmup, 0, 1000000, "runs before timing (default 3)"),
        HN_INT("--reps", "R", &o.reps, 20, 100000, "timed runs, the median is printed (default and least 20)"),
        HN_INT("--chunks", "C", &o.chunks, 1, 1 << 20,
               "chunks of the collective and broadcast strategies (else the model picks)"),
        HN_INT("--streams", "S", &o.streams, 1, HN_MAX_STREAMS, "streams of the strategies (else the model picks)"),
        HN_FLAG("--markdown", &o.markdown, "the tables in Markdown"),
    };
    int nargs = 0;
    hn_command c = {"hirnode bench overlap", "", table, HN_ARRAY_LEN(table), NULL, 0, &nargs, overlap_more};
    memset(&o, 0, sizeof(o));
    hn_runtime_config_default(&o.cfg);
    o.cfg.ndev = 0; /* --gpus not given: 2 (hn_cli_procs_setup) */
    o.dtypes[0] = HN_BF16;
    o.ndtypes = 1;
    o.iters = 5;
    o.warmup = 3;
    o.reps = 20;
    if ((rc = hn_cli_parse(&c, argc, argv, 3)) >= 0 || (rc = hn_cli_check_settings(&c)) >= 0 ||
        (rc = hn_cli_procs_setup(c.name, &procs, &o.cfg, NULL, 2)) >= 0)
        return rc;
    if (op == NULL)
        return hn_cli_usage_error(&c, "which --op? (ag_matmul, matmul_rs, matmul_ar or all)");
    if (procs.launcher)
        return hn_cli_launch(c.name, &procs, o.cfg.timeout_s, argv);
    o.all_ops = strcmp(op, "all") == 0;
    for (int k = 0; k < 3; k++)
        if (strcmp(op, op_names[k]) == 0)
            o.op = (bench_op)k;
    shapes_given = o.nshapes > 0 || o.tuner;
    if ((st = hn_runtime_create_ex(&o.cfg, &rt, &why)) != HN_OK) {
        fprintf(stderr, "bench overlap: cannot start %d rank%s: %s\n", o.cfg.ndev, o.cfg.ndev == 1 ? "" : "s", why != NULL ? why : hn_status_string(st));
        hn_string_free(why);
        return st == HN_ERR_INVALID ? 2 : 1;
    }
    if (!shapes_given)
        parse_shapes(rt->dev->emulated ? host_shapes : gpu_shapes, &o, NULL);
    if (o.tuner) {
        const hn_cost_profile *pr = rt->profile;
        for (int k = 0; k < pr->nshapes && k < HN_ARRAY_LEN(o.shapes); k++)
            o.shapes[k] = (shape3){pr->shapes[k][0], pr->shapes[k][1], pr->shapes[k][2]};
        o.nshapes = HN_MIN(pr->nshapes, HN_ARRAY_LEN(o.shapes));
    }
    {
        char what[700];
        hn_profile_describe(rt->profile, what, sizeof(what));
        printf("# hirnode bench overlap --op %s: %d GPUs, %s backend, nstreams %d; median of %d runs of %d "
               "statements after %d warm-up runs, the variants' runs interleaved in rounds; outputs against the "
               "sequential NCCL baseline's; the model's profile: %s\n",
               op, hn_runtime_world(rt), hn_runtime_backend(rt), o.cfg.nstreams, o.reps, o.iters, o.warmup, what);
    }
    if (o.nshapes == 0) {
        fprintf(stderr, "bench overlap: --shapes tuner: the profile in use lists no shapes\n");
        rc = 2;
    }
    fflush(stdout);
    for (int k = 0; k < (o.all_ops ? 3 : 1); k++) {
        overlap_opts one = o;
        if (o.all_ops)
            one.op = (bench_op)k;
        for (int d = 0; d < o.ndtypes; d++)
            for (int s = 0; s < o.nshapes; s++) {
                int r;
                progress("%s %lldx%lldx%lld %s: the inputs", op_names[one.op], o.shapes[s].M, o.shapes[s].K,
                         o.shapes[s].N, hn_dtype_name(o.dtypes[d]));
                r = bench_shape(rt, &one, &o.shapes[s], o.dtypes[d]);
                rc = r > rc ? r : rc;
            }
    }
    hn_runtime_destroy(rt);
    return rc;
}

/* `hirnode bench collectives`: busbw of hirnode's collectives beside raw
 * NCCL measured in the same run, in the table format of nccl-tests. Both
 * are timed the same way: host clock around a loop of `iters` calls and
 * the completion of every rank's streams, the slowest rank, the median of
 * `reps` repetitions, each side's repetitions back to back after its own
 * warm-up. Inputs are rank + 1 everywhere, so results are exact and
 * checked (#wrong). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/comm/comm.h"
#include "../src/sched/sched.h"
#include "hirnode/runtime.h"

typedef struct bench_opts {
    hn_runtime_config cfg;
    const char *via;
    const char *ops;
    size_t min, max;
    hn_dtype dtype;
    int iters, warmup, reps;
    int markdown;
    const char *trace; /* record every run into this file (times then include tracing) */
} bench_opts;

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v = s ? strtod(s, &end) : -1;
    if (s == NULL || end == s || v <= 0)
        return 0;
    switch (*end) {
    case 'K': case 'k': v *= 1024; end++; break;
    case 'M': case 'm': v *= 1024 * 1024; end++; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || !(v < 9.2e18)) /* a size_t, and no NaN */
        return 0;
    *out = (size_t)v;
    return 1;
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
    double t_hn, t_raw; /* median seconds per call */
    long w_hn, w_raw;   /* mismatches, -1: not measured */
} result;

/* One size of one collective: the runtime, then (on CUDA) raw NCCL. */
static hn_status_t run_one(hn_runtime *rt, const bench_opts *o, hn_coll_kind kind, size_t chunk, int raw,
                           result *res)
{
    int n = hn_runtime_size(rt);
    const char *dt = hn_dtype_name(o->dtype);
    size_t in = kind == HN_COLL_REDUCE_SCATTER ? chunk * (size_t)n : chunk;
    size_t out = kind == HN_COLL_ALLGATHER ? chunk * (size_t)n : chunk;
    size_t es = (size_t)hn_dtype_size(o->dtype);
    hn_program *init = program("param N = %zu\noutput X : %s[N] replicated\noutput Y : %s[%zu] replicated\n"
                               "fill X <- rank + 1\nfill Y <- -7\n", in, dt, dt, out);
    hn_program *main = program("param ITERS = 1\ninput X : %s[%zu] replicated\noutput Y : %s[%zu] replicated\n"
                               "for it in 0 .. ITERS {\n  %s Y <- X%s via %s\n}\n",
                               dt, in, dt, out, hn_coll_name(kind), kind == HN_COLL_ALLGATHER ? "" : " op sum",
                               o->via);
    void **x = calloc((size_t)n, sizeof(void *)), **y = calloc((size_t)n, sizeof(void *));
    double *t_hn = calloc((size_t)o->reps, sizeof(double)), *t_raw = calloc((size_t)o->reps, sizeof(double));
    char *host = NULL;
    hn_binding b[2] = {{"X", x}, {"Y", y}};
    const char *names[] = {"ITERS"};
    int64_t iters[1];
    hn_run_args args = {1, names, iters, 2, b};
    hn_run_args init_args = {0, NULL, NULL, 2, b};
#ifdef HN_HAVE_CUDA
    hn_bench_case c = {kind, chunk, o->dtype, o->warmup, o->iters, o->reps};
    hn_nccl_raw *h = NULL;
#endif
    hn_status_t st = init && main && x && y && t_hn && t_raw ? HN_OK : HN_ERR_NOMEM;
    res->w_hn = res->w_raw = -1;
    res->t_raw = NAN;
    for (int r = 0; r < n && st == HN_OK; r++)
        if ((st = hn_runtime_alloc(rt, r, in * es, &x[r])) == HN_OK)
            st = hn_runtime_alloc(rt, r, out * es, &y[r]);
    if (st == HN_OK)
        st = hn_runtime_run(rt, init, &init_args);
    /* the runtime: warm-up (ITERS = warmup, and one run verifying the timed
     * ITERS), then its repetitions back to back, as a server would call it */
    iters[0] = o->warmup;
    if (st == HN_OK)
        st = hn_runtime_run(rt, main, &args);
    iters[0] = o->iters;
    if (st == HN_OK)
        st = hn_runtime_run(rt, main, &args);
    for (int k = 0; k < o->reps && st == HN_OK; k++) {
        double t0 = hn_now();
        st = hn_runtime_run(rt, main, &args);
        t_hn[k] = (hn_now() - t0) / o->iters;
    }
#ifdef HN_HAVE_CUDA
    /* then raw NCCL the same way, on communicators of its own */
    if (st == HN_OK && raw && hn_nccl_raw_open(n, &c, &h) != HN_OK)
        h = NULL;
    if (h != NULL && hn_nccl_raw_rep(h, o->warmup, &t_raw[0]) != HN_OK) {
        hn_nccl_raw_close(h, NULL);
        h = NULL;
    }
    for (int k = 0; k < o->reps && h != NULL; k++)
        if (hn_nccl_raw_rep(h, o->iters, &t_raw[k]) != HN_OK) {
            hn_nccl_raw_close(h, NULL);
            h = NULL;
        }
#endif
    if (st == HN_OK) {
        res->t_hn = hn_median(t_hn, o->reps);
        /* poison, one call, check rank 0: all of it up to 64 MiB, 1/97 above */
        iters[0] = 1;
        st = hn_runtime_run(rt, init, &init_args);
        if (st == HN_OK)
            st = hn_runtime_run(rt, main, &args);
        host = malloc(out * es + 1);
        if (st == HN_OK && host != NULL && (st = hn_runtime_download(rt, 0, host, y[0], out * es)) == HN_OK) {
            size_t step = out * es > (64u << 20) ? 97 : 1;
            res->w_hn = 0;
            for (size_t e = 0; e < out; e += step) {
                double want = kind == HN_COLL_ALLGATHER ? (double)(e / chunk + 1) : n * (n + 1) / 2.0;
                res->w_hn += hn_load(o->dtype, host, (int64_t)e) != want;
            }
        }
    }
#ifdef HN_HAVE_CUDA
    if (h != NULL) {
        res->t_raw = hn_median(t_raw, o->reps);
        hn_nccl_raw_close(h, &res->w_raw);
    }
#else
    (void)raw;
#endif
    if (st != HN_OK)
        fprintf(stderr, "bench: %s\n", hn_runtime_error(rt));
    for (int r = 0; r < n; r++) {
        hn_runtime_free(rt, r, x[r]);
        hn_runtime_free(rt, r, y[r]);
    }
    free(host);
    free(x);
    free(y);
    free(t_hn);
    free(t_raw);
    hn_program_destroy(init);
    hn_program_destroy(main);
    return st;
}

static int bench_collectives(const bench_opts *o)
{
    static const hn_coll_kind kinds[] = {HN_COLL_ALLREDUCE, HN_COLL_ALLGATHER, HN_COLL_REDUCE_SCATTER};
    hn_runtime *rt = NULL;
    hn_status_t st = hn_runtime_create(&o->cfg, &rt);
    int n, raw, rc = 0;
    if (st != HN_OK) {
        fprintf(stderr, "bench: cannot start %d ranks: %s\n", o->cfg.ndev, hn_status_string(st));
        return st == HN_ERR_INVALID ? 2 : 1;
    }
    n = hn_runtime_size(rt);
    if (o->trace != NULL && hn_runtime_trace_start(rt, o->trace) != HN_OK) {
        fprintf(stderr, "bench: cannot write a trace to %s\n", o->trace);
        hn_runtime_destroy(rt);
        return 2;
    }
#ifdef HN_HAVE_CUDA
    raw = strcmp(hn_runtime_backend(rt), "cuda") == 0;
#else
    raw = 0;
#endif
    for (int ki = 0; ki < 3; ki++) {
        hn_coll_kind kind = kinds[ki];
        if (strcmp(o->ops, "all") != 0 && strcmp(o->ops, hn_coll_name(kind)) != 0)
            continue;
        printf("# %s, %d ranks, %s, %s backend via %s; %d iterations x %d repetitions after %d warm-up\n",
               hn_coll_name(kind), n, hn_dtype_name(o->dtype), hn_runtime_backend(rt), o->via, o->iters, o->reps,
               o->warmup);
        if (o->trace != NULL)
            printf("# traced into %s: the hirnode times include tracing\n", o->trace);
        if (strncmp(o->via, "p2p", 3) == 0)
            printf("# p2p: sync %s, pieces %s (allgather %s) of >= %s KiB, lanes %s\n", hn_setting_get("p2p_sync"),
                   hn_setting_get("p2p_pieces"), hn_setting_get("p2p_ag_pieces"), hn_setting_get("p2p_piece_kib"),
                   hn_setting_get("p2p_lanes"));
        if (o->markdown)
            printf("| bytes | hirnode µs | algbw GB/s | busbw GB/s | #wrong | nccl µs | algbw | busbw | #wrong | "
                   "busbw ratio |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        else
            printf("%12s %12s %9s %9s %7s %12s %9s %9s %7s %7s\n", "bytes", "hirnode(us)", "algbw", "busbw",
                   "#wrong", "nccl(us)", "algbw", "busbw", "#wrong", "ratio");
        for (size_t bytes = o->min; bytes <= o->max; bytes *= 2) {
            size_t es = (size_t)hn_dtype_size(o->dtype);
            size_t chunk = kind == HN_COLL_ALLREDUCE ? bytes / es : bytes / es / (size_t)n;
            size_t total = (kind == HN_COLL_ALLREDUCE ? chunk : chunk * (size_t)n) * es;
            result res;
            if (chunk == 0)
                continue;
            if (run_one(rt, o, kind, chunk, raw, &res) != HN_OK) {
                rc = 1;
                break;
            }
            {
                double a_hn = total / res.t_hn / 1e9, b_hn = a_hn * factor(kind, n);
                double a_raw = total / res.t_raw / 1e9, b_raw = a_raw * factor(kind, n);
                printf(o->markdown ? "| %zu | %.1f | %.1f | %.1f | %ld | %.1f | %.1f | %.1f | %ld | %.3f |\n"
                                   : "%12zu %12.1f %9.1f %9.1f %7ld %12.1f %9.1f %9.1f %7ld %7.3f\n",
                       total, res.t_hn * 1e6, a_hn, b_hn, res.w_hn, res.t_raw * 1e6, a_raw, b_raw, res.w_raw,
                       n > 1 ? b_hn / b_raw : a_hn / a_raw);
                fflush(stdout);
                if (res.w_hn != 0 || (raw && res.w_raw != 0))
                    rc = 1;
            }
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

int hn_cli_bench(int argc, char **argv)
{
    bench_opts o;
    memset(&o, 0, sizeof(o));
    hn_runtime_config_default(&o.cfg);
    o.via = "nccl"; /* not `default`, which on CUDA now picks by size (via auto) */
    o.ops = "all";
    o.min = 1 << 20;
    o.max = 1u << 30;
    o.dtype = HN_BF16;
    o.iters = 20;
    o.warmup = 5;
    o.reps = 5;
    if (argc >= 3 && strcmp(argv[2], "overlap") == 0)
        return hn_cli_bench_overlap(argc, argv);
    if (argc >= 3 && strcmp(argv[2], "issue") == 0)
        return hn_cli_bench_issue(argc, argv);
    if (argc < 3 || strcmp(argv[2], "collectives") != 0) {
        fprintf(stderr, "usage: hirnode bench overlap --help\n"
                        "       hirnode bench issue --help\n"
                        "       hirnode bench collectives [--gpus N] [--backend B] [--via nccl|p2p|\"p2p get\"]\n"
                        "         [--op all|allreduce|allgather|reduce_scatter] [--min 1M] [--max 1G]\n"
                        "         [--dtype bf16|f32|f16] [--iters K] [--warmup W] [--reps R] [--markdown]\n"
                        "         [--trace FILE]   (every run recorded: hirnode trace summary FILE)\n");
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (strcmp(a, "--markdown") == 0) {
            o.markdown = 1;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "bench: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--gpus") == 0) ok = (o.cfg.ndev = atoi(v)) > 0;
        else if (strcmp(a, "--backend") == 0) o.cfg.backend = v;
        else if (strcmp(a, "--via") == 0) o.via = v;
        else if (strcmp(a, "--op") == 0) o.ops = v;
        else if (strcmp(a, "--min") == 0) ok = parse_size(v, &o.min);
        else if (strcmp(a, "--max") == 0) ok = parse_size(v, &o.max);
        else if (strcmp(a, "--dtype") == 0) ok = (int)(o.dtype = (hn_dtype)hn_dtype_parse(v, (int)strlen(v))) >= 0;
        else if (strcmp(a, "--iters") == 0) ok = (o.iters = atoi(v)) > 0;
        else if (strcmp(a, "--warmup") == 0) ok = (o.warmup = atoi(v)) >= 0;
        else if (strcmp(a, "--reps") == 0) ok = (o.reps = atoi(v)) > 0;
        else if (strcmp(a, "--trace") == 0) o.trace = v;
        else ok = 0;
        if (!ok) {
            fprintf(stderr, "bench: bad option %s %s\n", a, v);
            return 2;
        }
    }
    return bench_collectives(&o);
}

/* `hirnode bench collectives`: time per call and busbw of hirnode's
 * collectives through each communicator asked for (the latency path, NCCL,
 * the p2p rings, `auto`) beside raw NCCL measured in the same run, in the
 * table format of nccl-tests. Every side is timed the same way, the
 * slowest rank, the median of `reps` repetitions, each side's repetitions
 * back to back after its own warm-up: by default on the device (a timing
 * marker — on CUDA an event — before and after `iters` back-to-back calls
 * of one run), or with --timing host the host clock around the whole run.
 * Inputs are rank + 1 everywhere, so results are exact and checked
 * (#wrong). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/sched/tools.h"
#include "hirnode/runtime.h"

#include "options.h"

#define MAX_VIAS 8

typedef struct bench_opts {
    hn_runtime_config cfg;
    char vias[MAX_VIAS][32]; /* as written after `via` */
    int nvias;
    const char *ops;
    size_t min, max;
    hn_dtype dtype;
    int iters, warmup, reps;
    int markdown;
    int device_timing;
    const char *trace; /* record every run into this file (times then include tracing) */
} bench_opts;

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

/* Rank 0's output of one call against the exact result (all of it up to
 * 64 MiB, 1/97 above). */
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

/* One size of one collective through `via`: warm-up, a verifying run,
 * the timed repetitions, then one call on poisoned outputs, checked. */
static hn_status_t run_via(hn_runtime *rt, const bench_opts *o, hn_coll_kind kind, size_t chunk, const char *via,
                           void **x, void **y, result *res)
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
                               dt, in, dt, out, hn_coll_name(kind), kind == HN_COLL_ALLGATHER ? "" : " op sum", via);
    double *t = calloc((size_t)o->reps, sizeof(double));
    char *host = NULL;
    size_t *xb = calloc((size_t)n, sizeof(size_t)), *yb = calloc((size_t)n, sizeof(size_t));
    hn_binding b[2] = {{"X", x, xb}, {"Y", y, yb}};
    const char *names[] = {"ITERS"};
    int64_t iters[1];
    hn_run_args args = {1, names, iters, 2, b};
    hn_run_args init_args = {0, NULL, NULL, 2, b};
    hn_status_t st = init && main && t && xb && yb ? HN_OK : HN_ERR_INVALID;
    for (int r = 0; r < n && st == HN_OK; r++) {
        xb[r] = in * es;
        yb[r] = out * es;
    }
    res->wrong = -1;
    res->t = NAN;
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
    if (st == HN_OK && o->device_timing)
        hn_runtime_time_runs(rt, 1);
    for (int k = 0; k < o->reps && st == HN_OK; k++) {
        double t0 = hn_now();
        st = hn_runtime_run(rt, main, &args);
        t[k] = (o->device_timing ? hn_runtime_run_seconds(rt) : hn_now() - t0) / o->iters;
        if (st == HN_OK && t[k] < 0) {
            fprintf(stderr, "bench: the run's timing markers were not reached\n");
            st = HN_ERR_RUNTIME;
        }
    }
    hn_runtime_time_runs(rt, 0);
    if (st == HN_OK) {
        res->t = hn_median(t, o->reps);
        iters[0] = 1;
        st = hn_runtime_run(rt, init, &init_args);
        if (st == HN_OK)
            st = hn_runtime_run(rt, main, &args);
        host = malloc(out * es + 1);
        if (st == HN_OK && host != NULL && (st = hn_runtime_download(rt, 0, host, y[0], out * es)) == HN_OK)
            res->wrong = count_wrong(kind, o->dtype, host, out, chunk, n);
    }
    if (st != HN_OK)
        fprintf(stderr, "bench: %s via %s: %s\n", hn_coll_name(kind), via,
                init && main ? hn_runtime_error(rt) : "bad program");
    free(host);
    free(t);
    free(xb);
    free(yb);
    hn_program_destroy(init);
    hn_program_destroy(main);
    return st;
}

/* Raw NCCL on its own communicators, the same size, timed the same way. */
static void run_raw(const bench_opts *o, int n, hn_coll_kind kind, size_t chunk, result *res)
{
    res->t = NAN;
    res->wrong = -1;
#ifdef HN_HAVE_CUDA
    {
        hn_bench_case c = {kind, chunk, o->dtype, o->warmup, o->iters, o->reps, o->device_timing};
        double *t = calloc((size_t)o->reps, sizeof(double));
        hn_nccl_raw *h = NULL;
        int ok = t != NULL && hn_nccl_raw_open(n, &c, &h) == HN_OK;
        if (ok && o->warmup > 0)
            ok = hn_nccl_raw_rep(h, o->warmup, &t[0]) == HN_OK;
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

/* What `via auto` picks for this collective, as text. */
static void auto_pick(hn_coll_kind kind, size_t chunk, hn_dtype dt, int n, char *buf, size_t len)
{
    hn_backend_kind v = hn_via_resolve(HN_VIA_AUTO, 0, kind, chunk, dt, n);
    snprintf(buf, len, "%s%s", hn_backend_name(v),
             v == HN_VIA_LL ? (hn_via_ll_algo(kind, chunk, dt, n) == HN_LL_TWOSHOT ? "/2shot" : "/1shot") : "");
}

static void print_header(const bench_opts *o, int raw)
{
    if (o->nvias == 1) { /* the layout of earlier versions */
        if (o->markdown)
            printf("| bytes | hirnode µs | algbw GB/s | busbw GB/s | #wrong | nccl µs | algbw | busbw | #wrong | "
                   "busbw ratio |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        else
            printf("%12s %12s %9s %9s %7s %12s %9s %9s %7s %7s\n", "bytes", "hirnode(us)", "algbw", "busbw",
                   "#wrong", "nccl(us)", "algbw", "busbw", "#wrong", "ratio");
        return;
    }
    if (o->markdown) {
        printf("| bytes |");
        for (int v = 0; v < o->nvias; v++)
            printf(" %s µs | busbw | #wrong |", o->vias[v]);
        if (raw)
            printf(" raw NCCL µs | busbw | #wrong |");
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
        snprintf(name, sizeof(name), "%s(us)", o->vias[v]);
        for (char *c = name; *c; c++)
            if (*c == ' ')
                *c = '-';
        printf(" %14s %8s %6s", name, "busbw", "#wrong");
    }
    if (raw)
        printf(" %14s %8s %6s", "raw-nccl(us)", "busbw", "#wrong");
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
        printf(o->markdown ? "| %zu | %.1f | %.1f | %.1f | %ld | %.1f | %.1f | %.1f | %ld | %.3f |\n"
                           : "%12zu %12.1f %9.1f %9.1f %7ld %12.1f %9.1f %9.1f %7ld %7.3f\n",
               total, res[0].t * 1e6, a_hn, b_hn, res[0].wrong, rawres->t * 1e6, a_raw, b_raw, rawres->wrong,
               n > 1 ? b_hn / b_raw : a_hn / a_raw);
        return;
    }
    printf(o->markdown ? "| %zu |" : "%12zu", total);
    for (int v = 0; v < o->nvias; v++)
        printf(o->markdown ? " %.2f | %.1f | %ld |" : " %14.2f %8.1f %6ld", res[v].t * 1e6,
               total / res[v].t / 1e9 * factor(kind, n), res[v].wrong);
    if (raw)
        printf(o->markdown ? " %.2f | %.1f | %ld |" : " %14.2f %8.1f %6ld", rawres->t * 1e6,
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

static int bench_collectives(bench_opts *o, const hn_command *c)
{
    static const hn_coll_kind kinds[] = {HN_COLL_ALLREDUCE, HN_COLL_ALLGATHER, HN_COLL_REDUCE_SCATTER};
    hn_runtime *rt = NULL;
    char *why = NULL;
    hn_status_t st = hn_runtime_create_ex(&o->cfg, &rt, &why);
    int n, raw, rc = 0;
    if (st != HN_OK) {
        fprintf(stderr, "bench: cannot start %d ranks: %s\n", o->cfg.ndev, why != NULL ? why : hn_status_string(st));
        hn_string_free(why);
        return st == HN_ERR_INVALID ? 2 : 1;
    }
    collectives_defaults(o, strcmp(hn_runtime_backend(rt), "host") == 0);
    if (o->min > o->max) {
        hn_runtime_destroy(rt);
        return hn_cli_usage_error(c, "--min %zu is more than --max %zu", o->min, o->max);
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
    for (int ki = 0; ki < 3 && rc == 0; ki++) {
        hn_coll_kind kind = kinds[ki];
        if (strcmp(o->ops, "all") != 0 && strcmp(o->ops, hn_coll_name(kind)) != 0)
            continue;
        printf("# %s, %d ranks, %s, %s backend via", hn_coll_name(kind), n, hn_dtype_name(o->dtype),
               hn_runtime_backend(rt));
        for (int v = 0; v < o->nvias; v++)
            printf("%s %s", v ? "," : "", o->vias[v]);
        printf("%s; %d iterations x %d repetitions after %d warm-up; %s\n", raw ? " and raw NCCL" : "", o->iters,
               o->reps, o->warmup,
               o->device_timing ? "device time (timing markers around the iterations of one run)"
                                : "host time (around whole runs)");
        if (o->trace != NULL)
            printf("# traced into %s: the hirnode times include tracing\n", o->trace);
        for (int v = 0; v < o->nvias; v++)
            if (strncmp(o->vias[v], "p2p", 3) == 0) {
                printf("# p2p: sync %s, pieces %s (allgather %s) of >= %s KiB, lanes %s\n",
                       hn_setting_get("p2p_sync"), hn_setting_get("p2p_pieces"), hn_setting_get("p2p_ag_pieces"),
                       hn_setting_get("p2p_piece_kib"), hn_setting_get("p2p_lanes"));
                break;
            }
        print_header(o, raw);
        for (size_t bytes = o->min; bytes <= o->max && rc == 0; bytes *= 2) {
            size_t es = (size_t)hn_dtype_size(o->dtype);
            size_t chunk = kind == HN_COLL_ALLREDUCE ? bytes / es : bytes / es / (size_t)n;
            size_t total = (kind == HN_COLL_ALLREDUCE ? chunk : chunk * (size_t)n) * es;
            size_t in = kind == HN_COLL_REDUCE_SCATTER ? chunk * (size_t)n : chunk;
            size_t out = kind == HN_COLL_ALLGATHER ? chunk * (size_t)n : chunk;
            result res[MAX_VIAS], rawres;
            void **x = calloc((size_t)n, sizeof(void *)), **y = calloc((size_t)n, sizeof(void *));
            char pick[32];
            if (chunk == 0 || x == NULL || y == NULL) {
                free(x);
                free(y);
                continue;
            }
            st = HN_OK;
            for (int r = 0; r < n && st == HN_OK; r++)
                if ((st = hn_runtime_alloc(rt, r, in * es, &x[r])) == HN_OK)
                    st = hn_runtime_alloc(rt, r, out * es, &y[r]);
            for (int v = 0; v < o->nvias && st == HN_OK; v++)
                st = run_via(rt, o, kind, chunk, o->vias[v], x, y, &res[v]);
            for (int r = 0; r < n; r++) {
                hn_runtime_free(rt, r, x[r]);
                hn_runtime_free(rt, r, y[r]);
            }
            free(x);
            free(y);
            if (st != HN_OK) {
                rc = 1;
                break;
            }
            rawres.t = NAN;
            rawres.wrong = -1;
            if (raw)
                run_raw(o, n, kind, chunk, &rawres);
            auto_pick(kind, chunk, o->dtype, n, pick, sizeof(pick));
            print_row(o, kind, n, total, res, &rawres, raw, pick);
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

static int bench_collectives_cli(int argc, char **argv)
{
    bench_opts o;
    const char *ops = "all", *timing = "device", *dtype = "bf16";
    const hn_option table[] = {
        HN_INT("--gpus", "N", &o.cfg.ndev, 1, 256, "ranks, one per device (default 1)"),
        HN_CHOICE("--backend", "auto|cuda|host", &o.cfg.backend, "the devices (default: $HIRNODE_BACKEND, else auto)"),
        HN_CALL("--via", "LIST", parse_vias, &o,
                "communicators, comma-separated, each as written after `via`\n"
                "(default ll,nccl,p2p,auto; e.g. \"ll oneshot,ll twoshot,p2p get\");\n"
                "raw NCCL is measured beside them on CUDA"),
        HN_CHOICE("--op", "all|allreduce|allgather|reduce_scatter", &ops, "the collectives (default all)"),
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
        HN_TEXT("--trace", "FILE", &o.trace, "every run recorded: hirnode trace summary FILE"),
    };
    int nargs = 0, rc;
    hn_command c = {"hirnode bench collectives", "", table, HN_ARRAY_LEN(table), NULL, 0, &nargs, NULL};
    memset(&o, 0, sizeof(o));
    hn_runtime_config_default(&o.cfg);
    parse_vias("ll,nccl,p2p,auto", &o, NULL);
    o.min = 8 << 10;
    o.warmup = -1; /* 0 .. 0 of max, iters, reps and -1 of warmup: not given */
    if ((rc = hn_cli_parse(&c, argc, argv, 3)) >= 0 || (rc = hn_cli_check_settings(&c)) >= 0)
        return rc;
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

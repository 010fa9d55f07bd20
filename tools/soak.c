/* `hirnode soak`: memory that stays flat while a server runs. The serving
 * step of examples/embed/serve.c (a tensor-parallel MLP: AllGather + linear,
 * then linear + ReduceScatter, both pipelined) is launched N times
 * (hn_runtime_launch), then captured and replayed N times
 * (hn_runtime_replay); after a warm-up of each, host RSS (/proc/self/statm)
 * and the device memory in use on every rank (hn_runtime_mem_info: total
 * minus free, summed) are sampled at even steps. A phase fails when either
 * grew from its first sample to its last by more than --max-growth percent
 * or by more than --per-op bytes per operation, and grew in both halves of
 * the samples (a step once is no trend); the command then exits 1.
 * The step's result is checked against a reference computed here at the
 * end. At most --window operations are in flight: a sync after each window
 * (a server's requests do not pile up without bound; on the host backend
 * nothing else bounds the queue of stream work, whose depth would move RSS
 * by a MiB either way), 0: only at the samples. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/runtime/tools.h"
#include "hirnode/runtime.h"

#include "options.h"

int hn_cli_soak(int argc, char **argv);

/* the step of examples/embed/serve.c */
static const char step_text[] = "param M = 64, D = 32, F = 64\n"
                                "input  X  : f32[M / world, D]  shard(axis 0)\n"
                                "input  W1 : f32[F / world, D]  shard(axis 0)\n"
                                "input  b1 : f32[F / world]     shard(axis 0)\n"
                                "input  W2 : f32[D, F / world]  shard(axis 1)\n"
                                "input  b2 : f32[D]             replicated\n"
                                "output Y  : f32[M / world, D]  shard(axis 0)\n"
                                "H = alloc f32[M, F / world]\n"
                                "linear H <- allgather(X), W1, b1 pipelined()\n"
                                "reduce_scatter Y <- linear(H, W2, b2) pipelined()\n";
enum { M = 64, D = 32, F = 64, NIO = 6 };

typedef struct soak_opts {
    hn_runtime_config cfg;
    int64_t launches, replays, warmup, window, leak;
    int samples, series;
    double max_growth, per_op;
} soak_opts;

/* A state of memory: host RSS and the device memory in use, bytes. */
typedef struct sample {
    double rss, dev;
} sample;

typedef struct step {
    hn_runtime *rt;
    hn_program *p;
    int n;
    void *ptr[NIO][256];
    size_t bytes[NIO][256];
    void *streams[256];
    hn_binding bind[NIO];
    hn_run_args args;
    hn_graph *graph;
} step;

static double rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return NAN;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? NAN : (double)resident * (double)sysconf(_SC_PAGESIZE);
}

/* after the work in flight (mem_info waits for it) */
static hn_status_t take_sample(step *s, sample *out)
{
    out->dev = 0;
    for (int r = 0; r < s->n; r++) {
        size_t free_b, total_b;
        hn_status_t st = hn_runtime_mem_info(s->rt, r, &free_b, &total_b);
        if (st != HN_OK)
            return st;
        out->dev += (double)(total_b - free_b);
    }
    out->rss = rss_bytes();
    return HN_OK;
}

/* element (i, j) of input k's global tensor: small multiples of 1/4, exact */
static float value(int k, int i, int j) { return (float)(((i * 7 + j * 3 + k) % 9) - 4) / 4.0f; }

/* the global shapes of the inputs (rows, cols; a vector: one row) and their shard axes */
static const int rows_of[NIO] = {M, F, 1, D, 1, M}, cols_of[NIO] = {D, D, F, F, D, D};
static const int axis_of[NIO] = {0, 0, 1, 1, -1, 0};
static const char *const names_of[NIO] = {"X", "W1", "b1", "W2", "b2", "Y"};

/* buffers of every rank, each input's shard uploaded */
static hn_status_t step_make(step *s)
{
    hn_status_t st = HN_OK;
    float *h = malloc(sizeof(float) * M * F);
    if (h == NULL)
        return HN_ERR_NOMEM;
    for (int k = 0; k < NIO && st == HN_OK; k++) {
        int rows = rows_of[k], cols = cols_of[k];
        if (axis_of[k] == 0)
            rows /= s->n;
        else if (axis_of[k] == 1)
            cols /= s->n;
        for (int r = 0; r < s->n && st == HN_OK; r++) {
            s->bytes[k][r] = sizeof(float) * (size_t)rows * (size_t)cols;
            if ((st = hn_runtime_alloc(s->rt, r, s->bytes[k][r], &s->ptr[k][r])) != HN_OK)
                break;
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < cols; j++)
                    h[i * cols + j] = value(k, axis_of[k] == 0 ? r * rows + i : i, axis_of[k] == 1 ? r * cols + j : j);
            st = hn_runtime_upload(s->rt, r, s->ptr[k][r], h, s->bytes[k][r]);
        }
        s->bind[k] = (hn_binding){names_of[k], s->ptr[k], s->bytes[k]};
    }
    for (int r = 0; r < s->n && st == HN_OK; r++)
        st = hn_runtime_stream_create(s->rt, r, &s->streams[r]);
    s->args = (hn_run_args){0, NULL, NULL, NIO, s->bind};
    free(h);
    return st;
}

/* Y against the step computed here (worst relative error) */
static double step_error(step *s)
{
    static float x[M][D], w1[F][D], b1[F], w2[D][F], b2[D], hid[M][F], y[M][D];
    double worst = 0;
    int rows = M / s->n;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < D; j++)
            x[i][j] = value(0, i, j);
    for (int f = 0; f < F; f++) {
        b1[f] = value(2, 0, f);
        for (int j = 0; j < D; j++)
            w1[f][j] = value(1, f, j);
    }
    for (int j = 0; j < D; j++) {
        b2[j] = value(4, 0, j);
        for (int f = 0; f < F; f++)
            w2[j][f] = value(3, j, f);
    }
    for (int i = 0; i < M; i++)
        for (int f = 0; f < F; f++) {
            double a = b1[f];
            for (int j = 0; j < D; j++)
                a += (double)x[i][j] * w1[f][j];
            hid[i][f] = (float)a;
        }
    for (int r = 0; r < s->n; r++)
        if (hn_runtime_download(s->rt, r, y[r * rows], s->ptr[5][r], s->bytes[5][r]) != HN_OK)
            return INFINITY;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < D; j++) {
            double a = b2[j];
            for (int f = 0; f < F; f++)
                a += (double)hid[i][f] * w2[j][f];
            double rel = isfinite(y[i][j]) ? fabs(y[i][j] - a) / fmax(1.0, fabs(a)) : INFINITY;
            worst = rel > worst ? rel : worst;
        }
    return worst;
}

/* --leak: bytes kept (and touched) per operation, a leak planted to show
 * that the check finds one */
typedef struct leaked {
    struct leaked *next;
} leaked;
static leaked *kept;

static hn_status_t one_op(step *s, const soak_opts *o, int replay)
{
    if (o->leak > 0) {
        leaked *l = malloc((size_t)o->leak + sizeof(leaked));
        if (l != NULL) {
            memset(l, 1, (size_t)o->leak + sizeof(leaked));
            l->next = kept;
            kept = l;
        }
    }
    return replay ? hn_runtime_replay(s->rt, s->graph, s->streams) : hn_runtime_launch(s->rt, s->p, &s->args, s->streams);
}

static void say_bytes(double b, char *buf, size_t n)
{
    double a = fabs(b);
    snprintf(buf, n, "%s%.*f %s", b < 0 ? "-" : "", a < 1024 ? 0 : 2,
             a >= 1048576 ? a / 1048576 : a >= 1024 ? a / 1024 : a, a >= 1048576 ? "MiB" : a >= 1024 ? "KiB" : "B");
}

/* One phase: warm-up, then ops operations sampled at o->samples even steps
 * (the first sample a step after the warm-up: what settles in the first
 * operations after a sync is not a trend); 1 when memory stayed flat from
 * the first sample to the last, 0 when it grew, -1 on an error. */
static int phase(step *s, const soak_opts *o, int replay, int64_t ops)
{
    const char *what = replay ? "replays" : "launches";
    sample first = {NAN, NAN}, mid = {NAN, NAN}, last = {NAN, NAN}, now;
    int nsampled = 0;
    int64_t every = ops / o->samples > 0 ? ops / o->samples : 1, done = 0, measured;
    double t0, secs, grew[2], limit[2];
    int once[2] = {0, 0};
    hn_status_t st = HN_OK;
    int flat = 1;
    char a[32], b[32], c[32];
    for (int64_t i = 0; i < o->warmup && st == HN_OK; i++)
        if ((st = one_op(s, o, replay)) == HN_OK && o->window > 0 && (i + 1) % o->window == 0)
            st = hn_runtime_sync(s->rt);
    t0 = hn_now();
    while (done < ops && st == HN_OK) {
        if ((st = one_op(s, o, replay)) != HN_OK)
            break;
        done++;
        if (o->window > 0 && done % o->window == 0 && (st = hn_runtime_sync(s->rt)) != HN_OK)
            break;
        if (done % every == 0 || done == ops) {
            if ((st = take_sample(s, &now)) != HN_OK)
                break;
            if (o->series)
                printf("  %s %lld: host RSS %.0f B, device memory %.0f B\n", what, (long long)done, now.rss, now.dev);
            if (isnan(first.rss))
                first = now;
            if (++nsampled == (o->samples + 1) / 2)
                mid = now;
            last = now;
        }
    }
    if (st == HN_OK)
        st = hn_runtime_sync(s->rt);
    secs = hn_now() - t0;
    if (st != HN_OK) {
        fprintf(stderr, "hirnode soak: %s: %s\n%s\n", what, hn_status_string(st), hn_runtime_error(s->rt));
        return -1;
    }
    measured = ops - (every < ops ? every : ops); /* operations between the first sample and the last */
    if (measured < 1)
        measured = 1;
    grew[0] = last.rss - first.rss;
    grew[1] = last.dev - first.dev;
    for (int m = 0; m < 2; m++) {
        double base = m == 0 ? first.rss : first.dev;
        double h1 = m == 0 ? mid.rss - first.rss : mid.dev - first.dev, h2 = m == 0 ? last.rss - mid.rss : last.dev - mid.dev;
        limit[m] = fmin(base * o->max_growth / 100, o->per_op * (double)measured);
        /* A leak grows all along; a step once (a thread's malloc arena
         * first touched on a loaded machine, a cache filled) is no trend:
         * past the limit, memory must also have grown in both halves. */
        if (!(grew[m] <= limit[m]) && !(isfinite(h1) && isfinite(h2) && (h1 <= limit[m] / 4 || h2 <= limit[m] / 4)))
            flat = 0;
        else if (!(grew[m] <= limit[m]))
            once[m] = 1;
    }
    printf("%-8s %lld in %.1f s (%.0f/s)\n", what, (long long)ops, secs, (double)ops / secs);
    say_bytes(first.rss, a, sizeof(a));
    say_bytes(last.rss, b, sizeof(b));
    say_bytes(grew[0], c, sizeof(c));
    printf("  host RSS       %10s -> %10s  (%s, %+.3f B per op)%s\n", a, b, c, grew[0] / (double)measured,
           grew[0] <= limit[0] ? "" : once[0] ? "  (a step in one half, not a trend)" : "  GREW");
    say_bytes(first.dev, a, sizeof(a));
    say_bytes(last.dev, b, sizeof(b));
    say_bytes(grew[1], c, sizeof(c));
    printf("  device memory  %10s -> %10s  (%s, %+.3f B per op)%s\n", a, b, c, grew[1] / (double)measured,
           grew[1] <= limit[1] ? "" : once[1] ? "  (a step in one half, not a trend)" : "  GREW");
    return flat;
}

static int soak(const soak_opts *o)
{
    step s;
    char *diag = NULL;
    hn_status_t st;
    int rc = HN_EXIT_FAIL, flat[2] = {1, 1};
    double err;
    memset(&s, 0, sizeof(s));
    s.n = o->cfg.ndev;
    if (M % s.n != 0 || F % s.n != 0) {
        fprintf(stderr, "hirnode soak: --gpus %d: the step's M = %d and F = %d must divide by it\n", s.n, M, F);
        return HN_EXIT_USAGE;
    }
    if (hn_program_parse(step_text, strlen(step_text), "step.hir", &s.p, &diag) != HN_OK) {
        fprintf(stderr, "%s", diag != NULL ? diag : "hirnode soak: the step does not parse\n");
        hn_string_free(diag);
        return HN_EXIT_FAIL;
    }
    if ((st = hn_runtime_create_ex(&o->cfg, &s.rt, &diag)) != HN_OK) {
        fprintf(stderr, "hirnode soak: cannot start %d rank%s: %s\n", s.n, s.n == 1 ? "" : "s", diag != NULL ? diag : hn_status_string(st));
        hn_string_free(diag);
        hn_program_destroy(s.p);
        return st == HN_ERR_INVALID ? HN_EXIT_USAGE : HN_EXIT_FAIL;
    }
    printf("soak: the MLP step of examples/embed/serve.c on %d rank%s (%s backend): %lld launches, then %lld "
           "replays; a sync every %lld, %d samples after %lld of warm-up; at most %g %% or %g B per op\n",
           s.n, s.n == 1 ? "" : "s", hn_runtime_backend(s.rt), (long long)o->launches, (long long)o->replays, (long long)o->window,
           o->samples, (long long)o->warmup, o->max_growth, o->per_op);
    if ((st = step_make(&s)) != HN_OK) {
        fprintf(stderr, "hirnode soak: buffers: %s %s\n", hn_status_string(st), hn_runtime_error(s.rt));
        goto done;
    }
    if (o->launches > 0 && (flat[0] = phase(&s, o, 0, o->launches)) < 0)
        goto done;
    if (o->replays > 0) {
        if ((st = hn_runtime_capture(s.rt, s.p, &s.args, s.streams, &s.graph)) != HN_OK) {
            fprintf(stderr, "hirnode soak: capture: %s\n%s\n", hn_status_string(st), hn_runtime_error(s.rt));
            goto done;
        }
        if ((flat[1] = phase(&s, o, 1, o->replays)) < 0)
            goto done;
    }
    err = step_error(&s);
    printf("check: %s (worst relative error %.3g)\n", err <= 1e-5 ? "ok" : "MISMATCH", err);
    printf("soak: %s\n", flat[0] && flat[1] ? "flat" : "memory GREW");
    rc = flat[0] && flat[1] && err <= 1e-5 ? HN_EXIT_OK : HN_EXIT_FAIL;
done:
    if (s.graph != NULL)
        hn_runtime_graph_destroy(s.rt, s.graph);
    for (int k = 0; k < NIO; k++)
        for (int r = 0; r < s.n; r++)
            hn_runtime_free(s.rt, r, s.ptr[k][r]);
    for (int r = 0; r < s.n; r++)
        if (s.streams[r] != NULL)
            hn_runtime_stream_destroy(s.rt, r, s.streams[r]);
    hn_runtime_forget(s.rt, s.p);
    hn_runtime_destroy(s.rt);
    hn_program_destroy(s.p);
    while (kept != NULL) {
        leaked *l = kept;
        kept = l->next;
        free(l);
    }
    return rc;
}

int hn_cli_soak(int argc, char **argv)
{
    soak_opts o;
    int nargs = 0, rc;
    const hn_option table[] = {
        HN_INT("--gpus", "N", &o.cfg.ndev, 1, 64, "ranks, one per device (default 2; 64 must divide by it)"),
        HN_CHOICE("--backend", "auto|cuda|host", &o.cfg.backend, "the devices (default: $HIRNODE_BACKEND, else auto)"),
        HN_INT64("--launches", "N", &o.launches, 0, INT64_MAX / 2, "eager launches after the warm-up (default 100000)"),
        HN_INT64("--replays", "N", &o.replays, 0, INT64_MAX / 2, "replays of the captured step after the warm-up "
                                                                   "(default: as many as launches)"),
        HN_INT64("--warmup", "N", &o.warmup, 0, INT64_MAX / 2, "operations of each kind before the first sample "
                                                                 "(default 5000)"),
        HN_INT64("--window", "N", &o.window, 0, INT64_MAX / 2, "a sync after every N operations (default 64; 0: "
                                                                 "only at the samples)"),
        HN_INT("--samples", "K", &o.samples, 2, 100000, "samples of each phase (default 20)"),
        HN_DOUBLE("--max-growth", "PCT", &o.max_growth, 0, 100, "growth allowed from the first sample to the last, "
                                                                "percent (default 1)"),
        HN_FLAG("--series", &o.series, "print every sample"),
        HN_INT64("--leak", "BYTES", &o.leak, 0, 1 << 20, "keep BYTES of host memory per operation: a planted leak,\n"
                                                          "to see the check find one"),
        HN_DOUBLE("--per-op", "BYTES", &o.per_op, 0, 1e9, "... and at most this many bytes per operation (default "
                                                          "64)"),
    };
    hn_command c = {"hirnode soak", "", table, HN_ARRAY_LEN(table), NULL, 0, &nargs,
                    "Exit 1 when host RSS or device memory grew past a limit in either phase,\n"
                    "or the step's result is wrong. docs/RELIABILITY.md has the figures."};
    memset(&o, 0, sizeof(o));
    hn_runtime_config_default(&o.cfg);
    o.cfg.ndev = 2;
    o.launches = 100000;
    o.replays = -1;
    o.warmup = 5000;
    o.window = 64;
    o.samples = 20;
    o.max_growth = 1;
    o.per_op = 64;
    if ((rc = hn_cli_parse(&c, argc, argv, 2)) >= 0)
        return rc;
    if (o.replays < 0)
        o.replays = o.launches;
    return soak(&o);
}

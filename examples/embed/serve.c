/* A serving loop that embeds libhirnode: one tensor-parallel MLP step
 * (AllGather + linear, then linear + ReduceScatter, each a pipelined
 * statement), parsed once, run step after step on the server's own
 * streams and buffers with no host sync between steps, its result checked
 * against a reference computed here, and the steps per second printed.
 * Build against the installed library:
 *   cc serve.c $(pkg-config --cflags --libs hirnode) -lm -o serve
 *   ./serve [STEPS [RANKS]]     (HIRNODE_BACKEND=host|cuda; default: auto)
 * The step is captured once (hn_runtime_capture: a CUDA graph per rank on
 * the cuda backend) and replayed STEPS times (hn_runtime_replay: one graph
 * launch per rank from this thread); for comparison, as many eager launches
 * (hn_runtime_launch) first. Prints steps per second of both and the host
 * time of one replay call (every rank), measured apart in short rounds
 * (back to back for long, a call also waits for room in the launch queue). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hirnode/runtime.h>

#define M 64 /* tokens */
#define D 32 /* model width */
#define F 64 /* hidden width */
#define MAX_RANKS 8

static const char *step_text =
    "param M = 64, D = 32, F = 64\n"
    "input  X  : f32[M / world, D]  shard(axis 0)\n"
    "input  W1 : f32[F / world, D]  shard(axis 0)\n"
    "input  b1 : f32[F / world]     shard(axis 0)\n"
    "input  W2 : f32[D, F / world]  shard(axis 1)\n"
    "input  b2 : f32[D]             replicated\n"
    "output Y  : f32[M / world, D]  shard(axis 0)\n"
    "H = alloc f32[M, F / world]\n"
    "linear H <- allgather(X), W1, b1 pipelined()\n"
    "reduce_scatter Y <- linear(H, W2, b2) pipelined()\n";

/* small multiples of 1/4: every product and sum here is exact in f32 */
static float value(int i, int j, int salt) { return (float)(((i * 7 + j * 3 + salt) % 9) - 4) / 4.0f; }

#define HOST_SAMPLES 200
#define ROUND 8

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, hn_status_t st, hn_runtime *rt)
{
    fprintf(stderr, "serve: %s: %s\n%s\n", what, hn_status_string(st), rt ? hn_runtime_error(rt) : "");
    return 1;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10000, n = argc > 2 ? atoi(argv[2]) : 2;
    static float x[M][D], w1[F][D], b1[F], w2[D][F], b2[D], h[M][F], ref[M][D], y[M][D];
    hn_program *p = NULL;
    hn_runtime *rt = NULL;
    hn_runtime_config cfg;
    char *diag = NULL;
    void *bx[MAX_RANKS], *bw1[MAX_RANKS], *bb1[MAX_RANKS], *bw2[MAX_RANKS], *bb2[MAX_RANKS], *by[MAX_RANKS];
    /* the bytes behind each pointer: the runtime checks them on every rank */
    size_t sx[MAX_RANKS], sw1[MAX_RANKS], sb1[MAX_RANKS], sw2[MAX_RANKS], sb2[MAX_RANKS], sy[MAX_RANKS];
    void *streams[MAX_RANKS];
    hn_status_t st;
    hn_graph *graph = NULL;
    double t0, t1, eager_rate, worst = 0;
    static double host_us[HOST_SAMPLES];
    if (steps < 1 || n < 1 || n > MAX_RANKS || F % n != 0 || M % n != 0) {
        fprintf(stderr, "usage: serve [STEPS [RANKS (1-8, dividing %d)]]\n", M);
        return 2;
    }
    /* the step, parsed once */
    if ((st = hn_program_parse(step_text, strlen(step_text), "step.hir", &p, &diag)) != HN_OK) {
        fprintf(stderr, "%s", diag ? diag : "parse error\n");
        hn_string_free(diag);
        return 2;
    }
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    if ((st = hn_runtime_create_ex(&cfg, &rt, &diag)) != HN_OK) {
        fprintf(stderr, "serve: cannot start the runtime: %s\n", diag ? diag : hn_status_string(st));
        hn_string_free(diag);
        hn_program_destroy(p);
        return 1;
    }
    /* the model, and its reference output, on the host */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < D; j++)
            x[i][j] = value(i, j, 1);
    for (int f = 0; f < F; f++) {
        b1[f] = value(f, 0, 2);
        for (int j = 0; j < D; j++)
            w1[f][j] = value(f, j, 3);
    }
    for (int j = 0; j < D; j++) {
        b2[j] = value(j, 1, 4);
        for (int f = 0; f < F; f++)
            w2[j][f] = value(j, f, 5);
    }
    for (int i = 0; i < M; i++)
        for (int f = 0; f < F; f++) {
            double a = b1[f];
            for (int j = 0; j < D; j++)
                a += (double)x[i][j] * w1[f][j];
            h[i][f] = (float)a;
        }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < D; j++) {
            double a = b2[j];
            for (int f = 0; f < F; f++)
                a += (double)h[i][f] * w2[j][f];
            ref[i][j] = (float)a;
        }
    /* the server's own buffers and streams, shards uploaded once */
    for (int r = 0; r < n; r++) {
        int rows = M / n, hid = F / n;
        float w2s[D * F];
        sx[r] = sy[r] = sizeof(float) * rows * D;
        sw1[r] = sw2[r] = sizeof(float) * hid * D;
        sb1[r] = sizeof(float) * hid;
        sb2[r] = sizeof(float) * D;
        if ((st = hn_runtime_stream_create(rt, r, &streams[r])) != HN_OK ||
            (st = hn_runtime_alloc(rt, r, sx[r], &bx[r])) != HN_OK ||
            (st = hn_runtime_alloc(rt, r, sw1[r], &bw1[r])) != HN_OK ||
            (st = hn_runtime_alloc(rt, r, sb1[r], &bb1[r])) != HN_OK ||
            (st = hn_runtime_alloc(rt, r, sw2[r], &bw2[r])) != HN_OK ||
            (st = hn_runtime_alloc(rt, r, sb2[r], &bb2[r])) != HN_OK ||
            (st = hn_runtime_alloc(rt, r, sy[r], &by[r])) != HN_OK)
            return fail("buffers", st, rt);
        for (int j = 0; j < D; j++)
            for (int f = 0; f < hid; f++)
                w2s[j * hid + f] = w2[j][r * hid + f];
        if ((st = hn_runtime_upload(rt, r, bx[r], x[r * rows], sizeof(float) * rows * D)) != HN_OK ||
            (st = hn_runtime_upload(rt, r, bw1[r], w1[r * hid], sizeof(float) * hid * D)) != HN_OK ||
            (st = hn_runtime_upload(rt, r, bb1[r], &b1[r * hid], sizeof(float) * hid)) != HN_OK ||
            (st = hn_runtime_upload(rt, r, bw2[r], w2s, sizeof(float) * D * hid)) != HN_OK ||
            (st = hn_runtime_upload(rt, r, bb2[r], b2, sizeof(float) * D)) != HN_OK)
            return fail("upload", st, rt);
    }
    {
        hn_binding b[6] = {{"X", bx, sx},    {"W1", bw1, sw1}, {"b1", bb1, sb1},
                           {"W2", bw2, sw2}, {"b2", bb2, sb2}, {"Y", by, sy}};
        hn_run_args args = {0, NULL, NULL, 6, b};
        /* the first launch verifies, lowers and prepares the step */
        if ((st = hn_runtime_launch(rt, p, &args, streams)) != HN_OK || (st = hn_runtime_sync(rt)) != HN_OK)
            return fail("first step", st, rt);
        t0 = now();
        for (int s = 0; s < steps; s++)
            if ((st = hn_runtime_launch(rt, p, &args, streams)) != HN_OK)
                return fail("step", st, rt);
        if ((st = hn_runtime_sync(rt)) != HN_OK)
            return fail("sync", st, rt);
        eager_rate = steps / (now() - t0);
        /* Y poisoned: what the check reads below is the replays' */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < D; j++)
                y[i][j] = NAN;
        for (int r = 0; r < n; r++)
            if ((st = hn_runtime_upload(rt, r, by[r], y[r * (M / n)], sizeof(float) * (M / n) * D)) != HN_OK)
                return fail("poison", st, rt);
        /* captured once, replayed every step */
        if ((st = hn_runtime_capture(rt, p, &args, streams, &graph)) != HN_OK)
            return fail("capture", st, rt);
        t0 = now();
        for (int s = 0; s < steps; s++)
            if ((st = hn_runtime_replay(rt, graph, streams)) != HN_OK)
                return fail("replay", st, rt);
        if ((st = hn_runtime_sync(rt)) != HN_OK)
            return fail("sync", st, rt);
        t1 = now();
        /* the host time of one replay call while the launch queue has
         * room (back to back for long, a call waits for room): rounds of
         * ROUND replays, a sync between rounds */
        for (int s = 0; s < HOST_SAMPLES; s++) {
            double a = now();
            if ((st = hn_runtime_replay(rt, graph, streams)) != HN_OK)
                return fail("replay", st, rt);
            host_us[s] = (now() - a) * 1e6;
            if ((s + 1) % ROUND == 0 && (st = hn_runtime_sync(rt)) != HN_OK)
                return fail("sync", st, rt);
        }
        if ((st = hn_runtime_sync(rt)) != HN_OK)
            return fail("sync", st, rt);
        qsort(host_us, HOST_SAMPLES, sizeof(double), cmp_double);
    }
    printf("serve: %d steps of a tensor-parallel MLP on %d ranks (%s backend): %.0f steps/s replayed "
           "(%.0f eager); one replay call: %.2f us of host time (median of %d)\n", steps, n,
           hn_runtime_backend(rt), steps / (t1 - t0), eager_rate, host_us[HOST_SAMPLES / 2], HOST_SAMPLES);
    for (int r = 0; r < n; r++)
        if ((st = hn_runtime_download(rt, r, y[r * (M / n)], by[r], sizeof(float) * (M / n) * D)) != HN_OK)
            return fail("download", st, rt);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < D; j++)
            worst = fmax(worst, fabs((double)y[i][j] - ref[i][j]) / fmax(1.0, fabs(ref[i][j])));
    printf("check: %s (worst relative error %.3g)\n", worst <= 1e-5 ? "ok" : "MISMATCH", worst);
    for (int r = 0; r < n; r++) {
        hn_runtime_free(rt, r, bx[r]);
        hn_runtime_free(rt, r, bw1[r]);
        hn_runtime_free(rt, r, bb1[r]);
        hn_runtime_free(rt, r, bw2[r]);
        hn_runtime_free(rt, r, bb2[r]);
        hn_runtime_free(rt, r, by[r]);
        hn_runtime_stream_destroy(rt, r, streams[r]);
    }
    hn_runtime_graph_destroy(rt, graph);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    return worst <= 1e-5 ? 0 : 1;
}

/* Tests of src/runtime/graph.c through the public API: a captured program
 * replays what eager launches compute, bit for bit; replays back to back
 * under random stream delays, mixed with eager launches and with another
 * graph of the same program; what makes a graph unusable; the setting
 * graphs = 1. On the host backend the capture is the backend's record of
 * the issued work; on CUDA, stream capture into CUDA graphs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hirnode/runtime.h"
#include "exec/fault_inject.h"
#include "runtime/graph.h"
#include "ranks/runtime_int.h"
#include "../test.h"


static int nranks(void) { return hn_test_max_ranks() < 4 ? hn_test_max_ranks() : 4; }

/* Every kind of communication a replay must get right: the p2p rings
 * (staged reductions, put and get allgathers, send/recv), the default
 * communicator, a second stream, a matmul; Y accumulates, so replays that
 * overlapped or missed one another would show. */
static const char *step_text =
    "param N = 256\n"
    "input  X : f32[N] replicated\n"
    "input  W : f32[16, 16] replicated\n"
    "output Y : f32[N] replicated\n"
    "output G : f32[N * world] replicated\n"
    "T = alloc f32[N]\n"
    "U = alloc f32[N]\n"
    "R = alloc f32[N / world]\n"
    "M = alloc f32[N / 16, 16]\n"
    "copy T <- X\n"
    "s0 = current_stream\n"
    "set_stream stream(1)\n"
    "wait_stream s0\n"
    "allreduce T <- T op sum via p2p\n"
    "reduce_scatter R <- T op sum via p2p\n"
    "allgather T <- R via p2p get\n"
    "allgather G <- T via p2p\n"
    "set_stream s0\n"
    "wait_stream stream(1)\n"
    "group {\n"
    "  send T to (rank + 1) % world via p2p\n"
    "  recv U from (rank - 1) % world via p2p\n"
    "}\n"
    "add T <- T, U\n"
    "allreduce T <- T op max\n"
    "Tv = view T as [N / 16, 16]\n"
    "matmul M <- Tv, W\n"
    "Mv = view M as [N]\n"
    "scale Mv <- Mv, 0.001\n"
    "add Y <- Y, Mv\n";

typedef struct bufs {
    int n;
    void *x[8], *w[8], *y[8], *g[8];
    size_t xs[8], ws[8], ys[8], gs[8]; /* their bytes */
} bufs;

static void bufs_make(hn_runtime *rt, bufs *b, int n, uint64_t seed)
{
    float x[256], w[256];
    b->n = n;
    for (int r = 0; r < n; r++) {
        uint64_t s = seed * 977 + (uint64_t)r, sw = seed;
        for (int i = 0; i < 256; i++) {
            x[i] = (float)(hn_splitmix64(&s) % 2001) / 1000.0f - 1.0f;
            w[i] = (float)(hn_splitmix64(&sw) % 2001) / 1000.0f - 1.0f; /* replicated: one W */
        }
        b->xs[r] = b->ys[r] = sizeof(x);
        b->ws[r] = sizeof(w);
        b->gs[r] = sizeof(x) * (size_t)n;
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, b->xs[r], &b->x[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, b->ws[r], &b->w[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, b->ys[r], &b->y[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, b->gs[r], &b->g[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, b->x[r], x, sizeof(x)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, b->w[r], w, sizeof(w)), HN_OK);
    }
}

/* Y starts at a value of its own (not zero: an untouched output shows) */
static void bufs_reset(hn_runtime *rt, bufs *b)
{
    float y[256];
    for (int i = 0; i < 256; i++)
        y[i] = 0.25f * (float)(i % 5);
    for (int r = 0; r < b->n; r++)
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, b->y[r], y, sizeof(y)), HN_OK);
}

static void bufs_free(hn_runtime *rt, bufs *b)
{
    for (int r = 0; r < b->n; r++) {
        hn_runtime_free(rt, r, b->x[r]);
        hn_runtime_free(rt, r, b->w[r]);
        hn_runtime_free(rt, r, b->y[r]);
        hn_runtime_free(rt, r, b->g[r]);
    }
}

static hn_run_args args_of(bufs *b, hn_binding *bind)
{
    hn_run_args a = {0, NULL, NULL, 4, bind};
    bind[0] = (hn_binding){"X", b->x, b->xs};
    bind[1] = (hn_binding){"W", b->w, b->ws};
    bind[2] = (hn_binding){"Y", b->y, b->ys};
    bind[3] = (hn_binding){"G", b->g, b->gs};
    return a;
}

/* rank 0's Y and G, for comparisons */
static void outputs(hn_runtime *rt, bufs *b, float *y, float *g)
{
    for (int r = 0; r < b->n; r++) {
        float yr[256];
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, yr, b->y[r], sizeof(yr)), HN_OK);
        if (r == 0)
            memcpy(y, yr, sizeof(yr));
        else
            CU_ASSERT_EQUAL(memcmp(y, yr, sizeof(yr)), 0); /* every rank agrees */
    }
    CU_ASSERT_EQUAL(hn_runtime_download(rt, 0, g, b->g[0], sizeof(float) * 256 * (size_t)b->n), HN_OK);
}

/* K eager launches, then K replays of the same configuration from the same
 * start: Y and G bit for bit the same. */
static void test_replay_matches_eager(void)
{
    enum { K = 5 };
    hn_program *p = hn_test_parse(step_text, NULL);
    int n = nranks();
    hn_runtime *rt = hn_test_runtime(NULL, n, 20, 30, 0);
    hn_binding bind[4];
    bufs b;
    hn_run_args a;
    hn_graph *gr = NULL;
    float *ye = hn_calloc(256, sizeof(float)), *yg = hn_calloc(256, sizeof(float));
    float *ge = hn_calloc(256 * (size_t)n, sizeof(float)), *gg = hn_calloc(256 * (size_t)n, sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    bufs_make(rt, &b, n, 7);
    a = args_of(&b, bind);
    bufs_reset(rt, &b);
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b, ye, ge);

    bufs_reset(rt, &b);
    {
        float nan[256];
        for (int i = 0; i < 256; i++)
            nan[i] = NAN;
        for (int r = 0; r < n; r++) /* G: poisoned; a replay must write all of it */
            for (int q = 0; q < n; q++)
                hn_runtime_upload(rt, r, (float *)b.g[r] + 256 * q, nan, sizeof(nan));
    }
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a, NULL, &gr), HN_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gr);
    outputs(rt, &b, yg, gg); /* a capture runs nothing */
    CU_ASSERT_EQUAL(yg[1], 0.25f);
    CU_ASSERT(isnan(gg[0]));
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL(rt->inflight, K);
    if (hn_runtime_sync(rt) != HN_OK) {
        fprintf(stderr, "replays failed: %s\n", hn_runtime_error(rt));
        CU_FAIL("replays failed");
    }
    outputs(rt, &b, yg, gg);
    CU_ASSERT_EQUAL(memcmp(ye, yg, 256 * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(ge, gg, 256 * sizeof(float) * (size_t)n), 0);
    CU_ASSERT(ye[3] != 0.25f * 3 && isfinite(ye[3]));

    /* new contents of the same buffers: replays read them */
    bufs_reset(rt, &b);
    for (int k = 0; k < 2; k++)
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b, yg, gg);
    bufs_reset(rt, &b);
    for (int k = 0; k < 2; k++)
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b, ye, ge);
    CU_ASSERT_EQUAL(memcmp(ye, yg, 256 * sizeof(float)), 0);
    /* a replay waits for the eager launches in flight and a launch for the
     * replays: the two are never in flight together (a replay's start
     * waits for no peer) */
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_OK);
    CU_ASSERT_EQUAL(rt->inflight, 2);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL(rt->inflight, 1);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL(rt->inflight, 2);
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_OK);
    CU_ASSERT_EQUAL(rt->inflight, 1);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);

    hn_runtime_graph_destroy(rt, gr);
    bufs_free(rt, &b);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    hn_free(ye);
    hn_free(yg);
    hn_free(ge);
    hn_free(gg);
}

/* Replays of two graphs (two batch sizes: other parameters, other
 * buffers) and eager launches, in turn on two caller streams, back to back
 * with no host sync and random delays before every piece of stream work:
 * each configuration's Y is what as many eager launches give. On each path
 * a replay can take to its ranks (the setting replay). */
static void back_to_back(int path)
{
    enum { ROUNDS = 6 };
    hn_program *p = hn_test_parse(step_text, NULL);
    int n = nranks();
    hn_runtime *rt = hn_test_runtime(NULL, n, 50, 30, 0);
    hn_binding bind[2][4];
    bufs b[2];
    hn_run_args a[2];
    hn_graph *gr[2] = {NULL, NULL};
    void *streams[2][8];
    const char *names[] = {"N"};
    int64_t sizes[2] = {256, 128};
    float y[2][256], g[256 * 8], want[2][256];
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_EQUAL(rt->replay, HN_REPLAY_BELLS); /* the default */
    rt->replay = path;
    for (int r = 0; r < n; r++)
        for (int s = 0; s < 2; s++)
            CU_ASSERT_EQUAL_FATAL(hn_runtime_stream_create(rt, r, &streams[s][r]), HN_OK);
    for (int c = 0; c < 2; c++) {
        bufs_make(rt, &b[c], n, 11 + (uint64_t)c);
        a[c] = args_of(&b[c], bind[c]);
        a[c].nparams = 1;
        a[c].param_names = names;
        a[c].param_values = &sizes[c];
    }
    /* what 3 * ROUNDS eager launches of each give */
    for (int c = 0; c < 2; c++) {
        bufs_reset(rt, &b[c]);
        for (int k = 0; k < 3 * ROUNDS; k++)
            CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a[c], NULL), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
        outputs(rt, &b[c], want[c], g);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a[c], streams[c], &gr[c]), HN_OK);
        bufs_reset(rt, &b[c]);
    }
    for (int k = 0; k < ROUNDS; k++)
        for (int c = 0; c < 2; c++) {
            CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr[c], streams[(k + c) % 2]), HN_OK);
            CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a[c], streams[k % 2]), HN_OK);
            CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr[c], NULL), HN_OK);
        }
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    for (int c = 0; c < 2; c++) {
        outputs(rt, &b[c], y[c], g);
        CU_ASSERT_EQUAL(memcmp(y[c], want[c], sizeof(y[c])), 0);
    }
    for (int c = 0; c < 2; c++) {
        hn_runtime_graph_destroy(rt, gr[c]);
        bufs_free(rt, &b[c]);
    }
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

static void test_back_to_back(void) { back_to_back(HN_REPLAY_BELLS); }
static void test_back_to_back_jobs(void) { back_to_back(HN_REPLAY_JOBS); }
static void test_back_to_back_caller(void) { back_to_back(HN_REPLAY_CALLER); }

/* Doorbells when the rank threads sleep (no spin: every ring wakes its
 * thread through the slow path) and between eager runs, which take the
 * job handoff: replays and runs in turn, each checked; then a setting
 * that names no path is refused. */
static void test_bells_wake_sleepers(void)
{
    hn_program *p = hn_test_parse(step_text, NULL);
    int n = nranks();
    hn_runtime *rt, *eager;
    hn_runtime_config cfg;
    hn_binding bind[2][4];
    bufs b[2];
    hn_run_args a[2];
    hn_graph *gr = NULL;
    float y[2][256], g[256 * 8];
    char *said;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    setenv("HIRNODE_SPIN_US", "0", 1);
    rt = hn_test_runtime(NULL, n, 20, 30, 0);
    unsetenv("HIRNODE_SPIN_US");
    eager = hn_test_runtime(NULL, n, 0, 30, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(eager);
    CU_ASSERT_EQUAL(rt->spin_us, 0);
    bufs_make(rt, &b[0], n, 9);
    bufs_make(eager, &b[1], n, 9);
    a[0] = args_of(&b[0], bind[0]);
    a[1] = args_of(&b[1], bind[1]);
    bufs_reset(rt, &b[0]);
    bufs_reset(eager, &b[1]);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a[0], NULL, &gr), HN_OK);
    for (int k = 0; k < 8; k++) {
        struct timespec nap = {0, 2000000}; /* the rank threads fall asleep */
        nanosleep(&nap, NULL);
        CU_ASSERT_EQUAL(k % 3 == 2 ? hn_runtime_run(rt, p, &a[0]) : hn_runtime_replay(rt, gr, NULL), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_launch(eager, p, &a[1], NULL), HN_OK);
    }
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(eager), HN_OK);
    outputs(rt, &b[0], y[0], g);
    outputs(eager, &b[1], y[1], g);
    CU_ASSERT_EQUAL(memcmp(y[0], y[1], sizeof(y[0])), 0);
    hn_runtime_graph_destroy(rt, gr);
    bufs_free(rt, &b[0]);
    bufs_free(eager, &b[1]);
    hn_runtime_destroy(rt);
    hn_runtime_destroy(eager);
    hn_program_destroy(p);
    setenv("HIRNODE_REPLAY", "threads", 1);
    hn_runtime_config_default(&cfg);
    cfg.backend = hn_test_backend;
    rt = NULL;
    hn_test_capture_begin();
    CU_ASSERT_EQUAL(hn_runtime_create(&cfg, &rt), HN_ERR_INVALID);
    said = hn_test_capture_end();
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "HIRNODE_REPLAY: expected bells, jobs or caller, not 'threads'"));
    free(said);
    CU_ASSERT_PTR_NULL(rt);
    unsetenv("HIRNODE_REPLAY");
}

/* What ends a graph: hn_runtime_forget of its program, a failed run, its
 * buffers given back when device memory runs out; a capture is refused
 * with injected faults. */
static void test_unusable(void)
{
    hn_program *p = hn_test_parse(step_text, NULL);
    int n = nranks();
    hn_runtime *rt = hn_test_runtime(NULL, n, 0, 30, 0);
    hn_binding bind[4];
    bufs b;
    hn_run_args a;
    hn_graph *gr = NULL, *g2 = NULL;
    hn_strbuf err;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    hn_sb_init(&err);
    bufs_make(rt, &b, n, 3);
    a = args_of(&b, bind);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a, NULL, &gr), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    hn_runtime_forget(rt, p);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "hn_runtime_forget"));
    hn_runtime_graph_destroy(rt, gr);

    /* a failed run: every graph is unusable afterwards (line 24: the add) */
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a, NULL, &g2), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, "0:24:async", &err), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_capture(rt, p, &a, NULL, &gr), HN_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(gr);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "injected faults"));
    CU_ASSERT_NOT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, NULL, &err), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, g2, NULL), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "capture again"));
    hn_runtime_graph_destroy(rt, g2);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK); /* the runtime works on */
    CU_ASSERT_EQUAL(hn_runtime_capture(rt, p, &a, NULL, &gr), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    {
        /* an allocation the device cannot hold: every program's cached
         * buffers are given back first, so no graph may replay on them */
        size_t free_b = 0, total_b = 0;
        void *big = NULL;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_mem_info(rt, 0, &free_b, &total_b), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, 0, total_b + 1, &big), HN_ERR_NOMEM);
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "device memory ran out"));
        hn_runtime_graph_destroy(rt, gr);
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK); /* prepared anew */
        CU_ASSERT_EQUAL(hn_runtime_capture(rt, p, &a, NULL, &gr), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    }
    /* gr is left for hn_runtime_destroy */
    bufs_free(rt, &b);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    hn_sb_free(&err);
}

/* A graph of a small p2p allreduce, then a program whose reductions grow
 * the teams' staging and slots, run eagerly between its replays: the
 * graph still replays into the buffers it was captured with (kept while a
 * graph of the team lives), right every time, and so is the larger
 * program; with the graph gone, growing again frees the outgrown ones at
 * once, and the larger program is still right. */
static void test_staging_grows(void)
{
    const char *small = "param N = 256\n"
                        "input  X : f32[N] replicated\n"
                        "output Y : f32[N] replicated\n"
                        "allreduce Y <- X op sum via p2p\n"
                        "allreduce Y <- Y op sum via p2p\n";
    const char *large = "param N = 131072\n"
                        "input  X : f32[N] replicated\n"
                        "output Y : f32[N] replicated\n"
                        "allreduce Y <- X op sum via p2p\n";
    hn_program *ps = hn_test_parse(small, NULL), *pl = hn_test_parse(large, NULL);
    int n = nranks();
    hn_runtime *rt = hn_test_runtime(NULL, n, 10, 30, 0);
    enum { S = 256, L = 131072 };
    static float x[L], y[L];
    void *xs[8], *ys[8], *xl[8], *yl[8];
    size_t bs[8], bl[8];
    hn_binding bind_s[2], bind_l[2];
    hn_run_args as = {0, NULL, NULL, 2, bind_s}, al = {0, NULL, NULL, 2, bind_l};
    hn_graph *g = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(ps);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    for (int r = 0; r < n; r++) {
        bs[r] = S * sizeof(float);
        bl[r] = L * sizeof(float);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, bs[r], &xs[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, bs[r], &ys[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, bl[r], &xl[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, bl[r], &yl[r]), HN_OK);
    }
    bind_s[0] = (hn_binding){"X", xs, bs};
    bind_s[1] = (hn_binding){"Y", ys, bs};
    bind_l[0] = (hn_binding){"X", xl, bl};
    bind_l[1] = (hn_binding){"Y", yl, bl};
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, ps, &as, NULL, &g), HN_OK);
    for (int k = 0; k < 4; k++) {
        int wrong = 0;
        /* rank r's X holds r + k + i % 7: the small graph gives n x the sum over ranks */
        for (int r = 0; r < n; r++) {
            for (int i = 0; i < L; i++)
                x[i] = (float)(r + k + i % 7);
            CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, xs[r], x, bs[r]), HN_OK);
            CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, xl[r], x, bl[r]), HN_OK);
        }
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_run(rt, pl, &al), HN_OK); /* grows the staging the first time */
        for (int r = 0; r < n && !wrong; r++) {
            CU_ASSERT_EQUAL(hn_runtime_download(rt, r, y, ys[r], bs[r]), HN_OK);
            for (int i = 0; i < S && !wrong; i++) {
                float want = (float)n * (float)(n * (n - 1) / 2 + n * (k + i % 7));
                wrong = y[i] != want;
                if (wrong)
                    fprintf(stderr, "\n  staging grows: round %d rank %d small Y[%d] %g want %g\n", k, r, i, y[i], want);
            }
            CU_ASSERT_EQUAL(hn_runtime_download(rt, r, y, yl[r], bl[r]), HN_OK);
            for (int i = 0; i < L && !wrong; i++) {
                float want = (float)(n * (n - 1) / 2 + n * (k + i % 7));
                wrong = y[i] != want;
                if (wrong)
                    fprintf(stderr, "\n  staging grows: round %d rank %d large Y[%d] %g want %g\n", k, r, i, y[i], want);
            }
        }
        CU_ASSERT_FALSE(wrong);
    }
    hn_runtime_graph_destroy(rt, g);
    {
        /* eagerly, a 1 MiB allreduce (twice the staging) and a small
         * one on the buffers' first halves */
        hn_program *p2 = hn_test_parse("param N = 262144\n"
                                       "input  X : f32[N / 4] replicated\n"
                                       "output Y : f32[N / 4] replicated\n"
                                       "T = alloc f32[N]\n"
                                       "allreduce T <- T op sum via p2p\n"
                                       "allreduce Y <- X op sum via p2p\n",
                                       NULL);
        int wrong = 0;
        CU_ASSERT_PTR_NOT_NULL_FATAL(p2);
        for (int r = 0; r < n; r++)
            bl[r] = L / 2 * sizeof(float);
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p2, &al), HN_OK);
        if (hn_runtime_error(rt)[0] != '\0')
            fprintf(stderr, "\n  staging grows, larger again: %s\n", hn_runtime_error(rt));
        for (int r = 0; r < n && !wrong; r++) {
            CU_ASSERT_EQUAL(hn_runtime_download(rt, r, y, yl[r], bl[r]), HN_OK);
            for (int i = 0; i < L / 2 && !wrong; i++)
                wrong = y[i] != (float)(n * (n - 1) / 2 + n * (3 + i % 7));
        }
        CU_ASSERT_FALSE(wrong);
        hn_runtime_forget(rt, p2);
        hn_program_destroy(p2);
    }
    for (int r = 0; r < n; r++) {
        hn_runtime_free(rt, r, xs[r]);
        hn_runtime_free(rt, r, ys[r]);
        hn_runtime_free(rt, r, xl[r]);
        hn_runtime_free(rt, r, yl[r]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(ps);
    hn_program_destroy(pl);
}

/* A program that cannot be captured: the capture fails naming the
 * instruction, the runtime works on; graphs = 1 runs it eagerly. */
static void test_cannot_capture(void)
{
    const char *text = "output Y : i64[8] replicated\nset_stream stream(1)\niota Y <- rank, 1\nhost_sync\n";
    hn_program *p = hn_test_parse(text, NULL);
    int n = hn_test_max_ranks() < 2 ? 1 : 2;
    hn_runtime *rt = hn_test_runtime(NULL, n, 0, 30, 1);
    void *y[2];
    int64_t host[8];
    size_t sz[2] = {sizeof(host), sizeof(host)};
    hn_binding b = {"Y", y, sz};
    hn_run_args a = {0, NULL, NULL, 1, &b};
    hn_graph *g = NULL;
    char *said;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    for (int r = 0; r < n; r++)
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, sizeof(host), &y[r]), HN_OK);
    hn_test_capture_begin(); /* the failed captures are logged: checked, not shown */
    CU_ASSERT_EQUAL(hn_runtime_capture(rt, p, &a, NULL, &g), HN_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(g);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "t.hir:4:1: error: rank"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "host_sync cannot be captured"));
    for (int k = 0; k < 4; k++) /* the second would be captured: it fails, and runs eagerly */
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK);
    said = hn_test_capture_end();
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "capture: a stream of the capture was not joined back into its origin"));
    /* (at HIRNODE_LOG=debug the level is followed by the file and line) */
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "hirnode warn"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "graphs: the configuration could not be captured"));
    if (strstr(said, "not joined back") == NULL || strstr(said, "could not be captured") == NULL)
        fprintf(stderr, "cannot_capture: the log said:\n%s\n", said);
    free(said);
    CU_ASSERT_PTR_NULL(rt->graphs);
    for (int r = 0; r < n; r++) {
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, host, y[r], sizeof(host)), HN_OK);
        CU_ASSERT_EQUAL(host[7], r + 7);
        hn_runtime_free(rt, r, y[r]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* graphs = 1: the second run of a configuration is captured, later ones
 * replay it; the results are those of eager runs. */
static void test_automatic(void)
{
    hn_program *p = hn_test_parse(step_text, NULL);
    int n = nranks();
    hn_runtime *rt = hn_test_runtime(NULL, n, 0, 30, 1), *eager = hn_test_runtime(NULL, n, 0, 30, 0);
    hn_binding bind[2][4];
    bufs b[2];
    hn_run_args a[2];
    float y[2][256], g[256 * 8];
    int graphs = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(eager);
    bufs_make(rt, &b[0], n, 5);
    bufs_make(eager, &b[1], n, 5);
    for (int c = 0; c < 2; c++) {
        hn_runtime *x = c == 0 ? rt : eager;
        a[c] = args_of(&b[c], bind[c]);
        bufs_reset(x, &b[c]);
        for (int k = 0; k < 6; k++) {
            CU_ASSERT_EQUAL(k % 2 ? hn_runtime_run(x, p, &a[c]) : hn_runtime_launch(x, p, &a[c], NULL), HN_OK);
            if (c == 0 && k == 0)
                CU_ASSERT_PTR_NULL(rt->graphs); /* seen once: eager */
        }
        /* launches that replay stay in flight together (no wait between them) */
        for (int k = 0; k < 3; k++)
            CU_ASSERT_EQUAL(hn_runtime_launch(x, p, &a[c], NULL), HN_OK);
        CU_ASSERT_EQUAL(x->inflight, 3);
        CU_ASSERT_EQUAL(hn_runtime_sync(x), HN_OK);
        outputs(x, &b[c], y[c], g);
    }
    for (hn_graph *gr = rt->graphs; gr != NULL; gr = gr->next)
        graphs += gr->automatic && gr->valid;
    CU_ASSERT_EQUAL(graphs, 1);
    CU_ASSERT_EQUAL(memcmp(y[0], y[1], sizeof(y[0])), 0);
    bufs_free(rt, &b[0]);
    bufs_free(eager, &b[1]);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_runtime_destroy(eager);
    hn_program_destroy(p);
}

/* Rebinding: a graph captured on buffers A and rebound to buffers B (the
 * p2p rings, send/recv, the default communicator, two streams, a matmul)
 * replays bit for bit what a fresh capture on B replays, on B only; rebound
 * back to A, what eager launches on A compute. On the caller's streams. */
static void test_rebind_matches_fresh_capture(void)
{
    enum { K = 3 };
    hn_program *p = hn_test_parse(step_text, NULL);
    int n = nranks();
    hn_runtime *rt = hn_test_runtime(NULL, n, 30, 30, 0);
    hn_binding bind[2][4];
    bufs b[2];
    hn_run_args a[2];
    hn_graph *gr = NULL, *fresh = NULL;
    void *streams[8];
    float *y = hn_calloc(256, sizeof(float)), *yf = hn_calloc(256, sizeof(float));
    float *g = hn_calloc(256 * (size_t)n, sizeof(float)), *gf = hn_calloc(256 * (size_t)n, sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    for (int r = 0; r < n; r++)
        CU_ASSERT_EQUAL_FATAL(hn_runtime_stream_create(rt, r, &streams[r]), HN_OK);
    for (int c = 0; c < 2; c++) {
        bufs_make(rt, &b[c], n, 21 + (uint64_t)c);
        a[c] = args_of(&b[c], bind[c]);
        bufs_reset(rt, &b[c]);
    }
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a[0], streams, &gr), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, streams), HN_OK);
    /* rebound while a replay may still run: it finishes first */
    CU_ASSERT_EQUAL_FATAL(hn_runtime_graph_rebind(rt, gr, &a[1]), HN_OK);
    CU_ASSERT_EQUAL(rt->inflight, 0);
    bufs_reset(rt, &b[0]);
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, k % 2 ? NULL : streams), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b[1], y, g);
    {
        float y0[256], g0[256 * 8];
        outputs(rt, &b[0], y0, g0); /* A: not touched since the rebind */
        CU_ASSERT_EQUAL(y0[1], 0.25f);
        CU_ASSERT_EQUAL(y0[9], 0.25f * 4);
    }
    /* a fresh capture on B, from the same start */
    bufs_reset(rt, &b[1]);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a[1], NULL, &fresh), HN_OK);
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, fresh, NULL), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b[1], yf, gf);
    CU_ASSERT_EQUAL(memcmp(y, yf, 256 * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(g, gf, 256 * sizeof(float) * (size_t)n), 0);
    CU_ASSERT(y[3] != 0.25f * 3 && isfinite(y[3]));
    /* back to A: what eager launches on A give */
    bufs_reset(rt, &b[0]);
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, gr, &a[0]), HN_OK);
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, streams), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b[0], y, g);
    bufs_reset(rt, &b[0]);
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a[0], streams), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b[0], yf, gf);
    CU_ASSERT_EQUAL(memcmp(y, yf, 256 * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(g, gf, 256 * sizeof(float) * (size_t)n), 0);
    hn_runtime_graph_destroy(rt, gr);
    hn_runtime_graph_destroy(rt, fresh);
    for (int c = 0; c < 2; c++)
        bufs_free(rt, &b[c]);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    hn_free(y);
    hn_free(yf);
    hn_free(g);
    hn_free(gf);
}

/* step_text with every collective via p2p: the work a rebind can move in
 * place on the host backend (the host communicator's work is opaque) */
static char *p2p_step_text(void)
{
    const char *from = "allreduce T <- T op max\n", *at = strstr(step_text, from);
    const char *to = "allreduce T <- T op max via p2p\n";
    size_t head = (size_t)(at - step_text);
    char *text = hn_calloc(strlen(step_text) + 16, 1);
    memcpy(text, step_text, head);
    strcat(text, to);
    strcat(text, at + strlen(from));
    return text;
}

/* Eager launches on b from its start: Y and G (rank 0's). */
static void eager_outputs(hn_runtime *rt, const hn_program *p, bufs *b, hn_binding *bind, int k, float *y, float *g)
{
    hn_run_args a = args_of(b, bind);
    bufs_reset(rt, b);
    for (int i = 0; i < k; i++)
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, b, y, g);
}

/* Rebinds in place: the first rebind captures again and learns where the
 * graph holds its buffers; later ones move those pointers with no capture
 * (new buffers, and back), each replaying bit for bit what eager launches
 * on those buffers compute. A buffer at another alignment (mod 256), or
 * two bindings made one, is captured again, and right. */
static void test_rebind_in_place(void)
{
    enum { K = 3, SETS = 4 };
    char *text = p2p_step_text();
    hn_program *p = hn_test_parse(text, NULL);
    int n = nranks();
    hn_runtime *rt = hn_test_runtime(NULL, n, 30, 30, 0);
    hn_binding bind[SETS][4], eb[4];
    bufs b[SETS], shifted;
    hn_run_args a[SETS];
    hn_graph *gr = NULL;
    void *wide[8];
    float *y = hn_calloc(256, sizeof(float)), *ye = hn_calloc(256, sizeof(float));
    float *g = hn_calloc(256 * (size_t)n, sizeof(float)), *ge = hn_calloc(256 * (size_t)n, sizeof(float));
    /* set c is rebound at steps where order[step] == c: learn on 1, then in place */
    const int order[] = {1, 2, 0, 3, 2}, in_place[] = {0, 1, 1, 1, 1};
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    for (int c = 0; c < SETS; c++) {
        bufs_make(rt, &b[c], n, 41 + (uint64_t)c);
        a[c] = args_of(&b[c], bind[c]);
    }
    bufs_reset(rt, &b[0]);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a[0], NULL, &gr), HN_OK);
    CU_ASSERT_FALSE(hn_runtime_graph_in_place(gr));
    for (int step = 0; step < (int)(sizeof(order) / sizeof(order[0])); step++) {
        int c = order[step];
        bufs_reset(rt, &b[c]);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_graph_rebind(rt, gr, &a[c]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_graph_in_place(gr), in_place[step]);
        for (int k = 0; k < K; k++)
            CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
        outputs(rt, &b[c], y, g);
        eager_outputs(rt, p, &b[c], eb, K, ye, ge);
        CU_ASSERT_EQUAL(memcmp(y, ye, 256 * sizeof(float)), 0);
        CU_ASSERT_EQUAL(memcmp(g, ge, 256 * sizeof(float) * (size_t)n), 0);
        CU_ASSERT(isfinite(y[3]) && y[3] != 0.25f * 3);
    }
    /* X 4 bytes into a buffer of its own: another alignment, captured again */
    shifted = b[1];
    for (int r = 0; r < n; r++) {
        float x[256];
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, x, b[1].x[r], sizeof(x)), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, sizeof(x) + 4, &wide[r]), HN_OK);
        shifted.x[r] = (char *)wide[r] + 4;
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, shifted.x[r], x, sizeof(x)), HN_OK);
    }
    a[1] = args_of(&shifted, bind[1]);
    bufs_reset(rt, &shifted);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_graph_rebind(rt, gr, &a[1]), HN_OK);
    CU_ASSERT_FALSE(hn_runtime_graph_in_place(gr));
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &shifted, y, g);
    eager_outputs(rt, p, &b[1], eb, K, ye, ge); /* the same values at the usual place */
    CU_ASSERT_EQUAL(memcmp(y, ye, 256 * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(g, ge, 256 * sizeof(float) * (size_t)n), 0);
    /* and from there to another set at that alignment: in place again */
    bufs_reset(rt, &b[2]);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_graph_rebind(rt, gr, &a[2]), HN_OK);
    CU_ASSERT_FALSE(hn_runtime_graph_in_place(gr)); /* X moves back by 4 bytes mod 256 */
    bufs_reset(rt, &b[3]);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_graph_rebind(rt, gr, &a[3]), HN_OK);
    CU_ASSERT_TRUE(hn_runtime_graph_in_place(gr));
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b[3], y, g);
    eager_outputs(rt, p, &b[3], eb, K, ye, ge);
    CU_ASSERT_EQUAL(memcmp(y, ye, 256 * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(g, ge, 256 * sizeof(float) * (size_t)n), 0);
    hn_runtime_graph_destroy(rt, gr);
    for (int r = 0; r < n; r++)
        hn_runtime_free(rt, r, wide[r]);
    for (int c = 0; c < SETS; c++)
        bufs_free(rt, &b[c]);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    hn_free(text);
    hn_free(y);
    hn_free(ye);
    hn_free(g);
    hn_free(ge);
}

/* One buffer per rank, 256 floats, from the runtime, holding seed's values. */
static void one_buffer(hn_runtime *rt, int n, void **p, uint64_t seed)
{
    for (int r = 0; r < n; r++) {
        float x[256];
        uint64_t s = seed * 131 + (uint64_t)r;
        for (int i = 0; i < 256; i++)
            x[i] = (float)(hn_splitmix64(&s) % 2001) / 1000.0f - 1.0f;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, sizeof(x), &p[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, p[r], x, sizeof(x)), HN_OK);
    }
}

/* Rebinds of an allreduce in place (X and Y one buffer) and apart: a move
 * that keeps X and Y one buffer goes in place; one that parts them, or
 * joins them again, is captured again (and that capture, of one buffer
 * again, moves in place after); every replay gives the sum of what X held.
 * On the host backend only: there the parted program's capture has the
 * same structure as the joined one's; on CUDA it need not (work picked for
 * aliased buffers), and updating the graph with it is then refused, as
 * documented. */
static void test_rebind_aliasing(void)
{
    const char *text = "param N = 256\n"
                       "input  X : f32[N] replicated\n"
                       "output Y : f32[N] replicated\n"
                       "allreduce Y <- X op sum via p2p\n";
    enum { SETS = 6 };
    /* each step: the buffers of X and Y (one when equal), and whether in place */
    const int xs[] = {1, 2, 3, 5, 0}, ys[] = {1, 2, 4, 5, 0}, in_place[] = {0, 1, 0, 0, 1};
    hn_program *p = hn_test_parse(text, NULL);
    int n = nranks();
    hn_runtime *rt = hn_test_runtime(NULL, n, 0, 30, 0);
    void *buf[SETS][8];
    size_t bytes[8];
    hn_binding bind[2];
    hn_run_args a = {0, NULL, NULL, 2, bind};
    hn_graph *g = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    if (strcmp(hn_test_backend, "host") != 0) {
        hn_runtime_destroy(rt);
        hn_program_destroy(p);
        return;
    }
    for (int r = 0; r < n; r++)
        bytes[r] = 256 * sizeof(float);
    for (int k = 0; k < SETS; k++)
        one_buffer(rt, n, buf[k], 61 + (uint64_t)k);
    bind[0] = (hn_binding){"X", buf[0], bytes};
    bind[1] = (hn_binding){"Y", buf[0], bytes};
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a, NULL, &g), HN_OK);
    for (int step = 0; step < (int)(sizeof(xs) / sizeof(xs[0])); step++) {
        float want[256], got[256];
        /* the expected sum, from X's values before the replay changes them */
        memset(want, 0, sizeof(want));
        for (int r = 0; r < n; r++) {
            float x[256];
            CU_ASSERT_EQUAL(hn_runtime_download(rt, r, x, buf[xs[step]][r], sizeof(x)), HN_OK);
            for (int i = 0; i < 256; i++)
                want[i] += x[i];
        }
        bind[0].data = buf[xs[step]];
        bind[1].data = buf[ys[step]];
        CU_ASSERT_EQUAL_FATAL(hn_runtime_graph_rebind(rt, g, &a), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_graph_in_place(g), in_place[step]);
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
        for (int r = 0; r < n; r++) {
            CU_ASSERT_EQUAL(hn_runtime_download(rt, r, got, buf[ys[step]][r], sizeof(got)), HN_OK);
            for (int i = 0; i < 256; i++)
                CU_ASSERT_DOUBLE_EQUAL(got[i], want[i], 1e-4);
        }
    }
    /* a rebind that fails (Y one element short) says so, and is not in place */
    bytes[0] -= sizeof(float);
    bind[0].data = buf[0];
    bind[1].data = buf[0];
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, g, &a), HN_ERR_INVALID);
    CU_ASSERT_FALSE(hn_runtime_graph_in_place(g));
    hn_runtime_graph_destroy(rt, g);
    for (int k = 0; k < SETS; k++)
        for (int r = 0; r < n; r++)
            hn_runtime_free(rt, r, buf[k][r]);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* A backend that cannot update graphs in place (hn_device_host without the
 * hook) */
static hn_device_ops no_update;

/* What a rebind refuses: a binding that does not fit (the graph unchanged),
 * other parameters, an unusable graph, tracing and injected faults, a
 * backend without the update; what it checks in every case first. */
static void test_rebind_refusals(void)
{
    hn_program *p = hn_test_parse(step_text, NULL);
    int n = nranks();
    hn_runtime *rt = hn_test_runtime(NULL, n, 0, 30, 0);
    hn_binding bind[2][4];
    bufs b[2];
    hn_run_args a[2];
    hn_graph *gr = NULL;
    hn_strbuf err;
    const char *names[] = {"N"};
    int64_t other[1] = {128};
    float y[256], want[256], g[256 * 8];
    char text[160];
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    hn_sb_init(&err);
    for (int c = 0; c < 2; c++) {
        bufs_make(rt, &b[c], n, 31 + (uint64_t)c);
        a[c] = args_of(&b[c], bind[c]);
        bufs_reset(rt, &b[c]);
    }
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a[0], NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b[0], want, g);
    bufs_reset(rt, &b[0]);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a[0], NULL, &gr), HN_OK);
    /* G one element short on the last rank: refused, named; g replays on A */
    b[1].gs[n - 1] -= 4;
    snprintf(text, sizeof(text), "binding 'G' on rank %d: %d bytes needed (f32[%d]), %d given", n - 1, 1024 * n,
             256 * n, 1024 * n - 4);
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, gr, &a[1]), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), text));
    b[1].gs[n - 1] += 4;
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b[0], y, g);
    CU_ASSERT_EQUAL(memcmp(y, want, sizeof(y)), 0);
    /* other parameters */
    a[1].nparams = 1;
    a[1].param_names = names;
    a[1].param_values = other;
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, gr, &a[1]), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "a rebind keeps the configuration of the capture: parameter N "
                                                        "is 128, the graph was captured with 256"));
    a[1].nparams = 0;
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, gr, NULL), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(NULL, gr, &a[1]), HN_ERR_INVALID);
    /* tracing, faults: refused, the graph unchanged */
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, "0:24:async", &err), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, gr, &a[1]), HN_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "injected faults"));
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, NULL, &err), HN_OK);
    CU_ASSERT_TRUE(gr->valid);
    /* a backend that cannot update a graph in place: unsupported, the graph unchanged */
    no_update = *rt->dev;
    no_update.capture_update = NULL;
    {
        const hn_device_ops *keep = rt->dev;
        rt->dev = &no_update;
        CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, gr, &a[1]), HN_ERR_UNSUPPORTED);
        CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "cannot update a graph in place"));
        rt->dev = keep;
    }
    bufs_reset(rt, &b[0]);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b[0], y, g);
    CU_ASSERT_EQUAL(memcmp(y, want, sizeof(y)), 0);
    /* an unusable graph is not rebound */
    hn_runtime_forget(rt, p);
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, gr, &a[1]), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "capture again"));
    hn_runtime_graph_destroy(rt, gr);
    for (int c = 0; c < 2; c++)
        bufs_free(rt, &b[c]);
    hn_sb_free(&err);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* p2p in graphs: the flags are never reset (their values are relative to
 * the graph's epoch), so a capture that begins with a reduction with get —
 * whose first wait is for nothing before the capture — replays back to
 * back as often as eager launches run; a capture that takes more values
 * than an epoch spans is refused by name. */
static void test_p2p_epochs(void)
{
    const char *text = "param N = 64\ninput X : f32[N] replicated\noutput Y : f32[N] replicated\n"
                       "T = alloc f32[N]\nR = alloc f32[N / world]\n"
                       "reduce_scatter R <- X op sum via p2p get\nallgather T <- R via p2p\n"
                       "allreduce T <- T op max via p2p get\nadd Y <- Y, T\n";
    hn_program *p = hn_test_parse(text, NULL), *big = NULL;
    int n = nranks() < 2 ? 1 : 2;
    hn_runtime *rt = hn_test_runtime(NULL, n, 20, 30, 0);
    void *x[8], *y[8];
    float host[64], want[64], got[64];
    size_t bytes[8];
    hn_binding bind[2] = {{"X", x, bytes}, {"Y", y, bytes}};
    hn_run_args a = {0, NULL, NULL, 2, bind};
    hn_graph *gr = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    for (int r = 0; r < n; r++) {
        bytes[r] = sizeof(host);
        for (int i = 0; i < 64; i++)
            host[i] = (float)((r * 7 + i * 3) % 13) - 6.0f;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, sizeof(host), &x[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, sizeof(host), &y[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, x[r], host, sizeof(host)), HN_OK);
        memset(host, 0, sizeof(host));
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, y[r], host, sizeof(host)), HN_OK);
    }
    for (int k = 0; k < 12; k++)
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_download(rt, 0, want, y[0], sizeof(want)), HN_OK);
    CU_ASSERT(want[5] != 0);
    memset(host, 0, sizeof(host));
    for (int r = 0; r < n; r++)
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, y[r], host, sizeof(host)), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a, NULL, &gr), HN_OK);
    for (int k = 0; k < 12; k++)
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, gr, NULL), HN_OK);
    if (hn_runtime_sync(rt) != HN_OK)
        fprintf(stderr, "\n  replays: %s\n", hn_runtime_error(rt));
    for (int r = 0; r < n; r++) {
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, got, y[r], sizeof(got)), HN_OK);
        CU_ASSERT_EQUAL(memcmp(got, want, sizeof(got)), 0);
    }
    hn_runtime_graph_destroy(rt, gr);
    gr = NULL;
    if (n > 1) {
        /* 65536 allgathers take generations 1 .. 65536: one too many */
        big = hn_test_parse("input X : f32[64] replicated\noutput Y : f32[64] replicated\n"
                            "T = alloc f32[2]\nfor i in 0 .. 65536 {\n  allgather T <- X[i % 64] via p2p\n}\n", NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(big);
        CU_ASSERT_EQUAL(hn_runtime_capture(rt, big, &a, NULL, &gr), HN_ERR_UNSUPPORTED);
        CU_ASSERT_PTR_NULL(gr);
        CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "a captured graph takes at most 65535 ring steps"));
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK); /* the runtime works on */
        hn_runtime_forget(rt, big);
        hn_program_destroy(big);
    }
    for (int r = 0; r < n; r++) {
        hn_runtime_free(rt, r, x[r]);
        hn_runtime_free(rt, r, y[r]);
    }
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* the graphs of launches inside captures of the caller's the runtime keeps */
static int foreign_graphs(const hn_runtime *rt)
{
    int k = 0;
    for (const hn_graph *g = rt->graphs; g != NULL; g = g->next)
        k += g->hold != NULL;
    return k;
}

/* A launch inside a capture of the caller's, with the peer copies ordered
 * by flags (as across processes): on the host backend the caller's stream
 * is the backend's stream, and a capture begun on it with capture_begin
 * stands in for torch.cuda.graph. Each replay of the caller's graphs
 * computes what an eager launch computes, bit for bit, again and again
 * (the flags are relative to an epoch each replay raises); eager launches
 * after them are right; the state the launch made goes once the caller's
 * graphs go. */
static void test_foreign_capture(void)
{
    enum { K = 6 };
    hn_program *p = hn_test_parse(step_text, NULL);
    int n = nranks();
    hn_runtime *rt;
    hn_binding bind[4];
    bufs b;
    hn_run_args a;
    void *streams[8];
    hn_dgraph *dg[2][8];
    float want[256], y[256];
    float *ge = hn_calloc(256 * (size_t)n, sizeof(float)), *gg = hn_calloc(256 * (size_t)n, sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* on CUDA: torch.cuda.graph in a process per GPU (tools/gpu-check.sh) */
    if (strcmp(hn_test_backend, "host") != 0 || n < 2) {
        hn_program_destroy(p);
        hn_free(ge);
        hn_free(gg);
        return;
    }
    setenv("HIRNODE_P2P_SYNC", "flags", 1);
    rt = hn_test_runtime(NULL, n, 20, 30, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    bufs_make(rt, &b, n, 5);
    a = args_of(&b, bind);
    for (int r = 0; r < n; r++)
        CU_ASSERT_EQUAL_FATAL(hn_runtime_stream_create(rt, r, &streams[r]), HN_OK);
    bufs_reset(rt, &b);
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, streams), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b, want, ge);
    CU_ASSERT(want[3] != 0.25f * 3 && isfinite(want[3]));

    /* two captures of the caller's, each holding one launch */
    for (int c = 0; c < 2; c++) {
        for (int r = 0; r < n; r++)
            CU_ASSERT_EQUAL_FATAL(rt->dev->capture_begin((hn_dstream *)streams[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, streams), HN_OK);
        for (int r = 0; r < n; r++)
            CU_ASSERT_EQUAL_FATAL(rt->dev->capture_end((hn_dstream *)streams[r], &dg[c][r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
        CU_ASSERT_EQUAL(foreign_graphs(rt), c + 1);
    }
    for (int c = 0; c < 2; c++) {
        bufs_reset(rt, &b);
        for (int r = 0; r < n; r++) /* G poisoned: every replay writes all of it */
            for (int q = 0; q < n; q++) {
                float nan[256];
                for (int i = 0; i < 256; i++)
                    nan[i] = NAN;
                hn_runtime_upload(rt, r, (float *)b.g[r] + 256 * q, nan, sizeof(nan));
            }
        outputs(rt, &b, y, gg); /* the captures ran nothing */
        CU_ASSERT_EQUAL(y[1], 0.25f);
        for (int k = 0; k < K; k++)
            for (int r = 0; r < n; r++)
                CU_ASSERT_EQUAL(rt->dev->graph_launch(dg[c][r], (hn_dstream *)streams[r]), HN_OK);
        for (int r = 0; r < n; r++)
            CU_ASSERT_EQUAL(rt->dev->stream_sync((hn_dstream *)streams[r]), HN_OK);
        outputs(rt, &b, y, gg);
        CU_ASSERT_EQUAL(memcmp(y, want, sizeof(y)), 0);
        CU_ASSERT_EQUAL(memcmp(gg, ge, 256 * sizeof(float) * (size_t)n), 0);
    }
    /* the caller's first graphs go: what their launch made goes at the next sync */
    for (int r = 0; r < n; r++)
        rt->dev->graph_destroy(dg[0][r]);
    CU_ASSERT_EQUAL(foreign_graphs(rt), 2);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_EQUAL(foreign_graphs(rt), 1);
    /* eager launches after the replays, and the second graphs' replays after them */
    bufs_reset(rt, &b);
    for (int k = 0; k < K; k++)
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, streams), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    outputs(rt, &b, y, gg);
    CU_ASSERT_EQUAL(memcmp(y, want, sizeof(y)), 0);
    bufs_reset(rt, &b);
    for (int k = 0; k < K; k++)
        for (int r = 0; r < n; r++)
            CU_ASSERT_EQUAL(rt->dev->graph_launch(dg[1][r], (hn_dstream *)streams[r]), HN_OK);
    for (int r = 0; r < n; r++)
        CU_ASSERT_EQUAL(rt->dev->stream_sync((hn_dstream *)streams[r]), HN_OK);
    outputs(rt, &b, y, gg);
    CU_ASSERT_EQUAL(memcmp(y, want, sizeof(y)), 0);
    /* the caller's second graphs go with no sync after: the runtime's end frees what they held */
    for (int r = 0; r < n; r++)
        rt->dev->graph_destroy(dg[1][r]);
    bufs_free(rt, &b);
    hn_runtime_forget(rt, p);
    for (int r = 0; r < n; r++)
        hn_runtime_stream_destroy(rt, r, streams[r]);
    hn_runtime_destroy(rt);
    unsetenv("HIRNODE_P2P_SYNC");
    hn_program_destroy(p);
    hn_free(ge);
    hn_free(gg);
}

void hn_suite_graph(void)
{
    static CU_TestInfo tests[] = {
        {"a replay computes what eager launches compute, bit for bit", test_replay_matches_eager},
        {"replays of two graphs and eager launches, back to back, random delays (rank threads rung)",
         test_back_to_back},
        {"... with replays through jobs of the rank threads", test_back_to_back_jobs},
        {"... with replays from the caller's thread", test_back_to_back_caller},
        {"doorbells wake sleeping rank threads; eager runs between replays; a bad setting", test_bells_wake_sleepers},
        {"forget, failures and memory pressure make graphs unusable; no capture while faults are planned",
         test_unusable},
        {"graphs = 1 captures a repeated configuration and replays it", test_automatic},
        {"a program that cannot be captured: a named error, then eager runs", test_cannot_capture},
        {"a graph replays right after another program grew the p2p staging and slots", test_staging_grows},
        {"a rebound graph replays what a fresh capture on the new buffers replays, bit for bit",
         test_rebind_matches_fresh_capture},
        {"rebinds after the first move the graph's pointers in place; another alignment captures again",
         test_rebind_in_place},
        {"rebinds of an allreduce in place and apart: in place while X and Y stay one buffer", test_rebind_aliasing},
        {"a rebind refuses bindings that do not fit, other parameters, unusable graphs, backends without it",
         test_rebind_refusals},
        {"p2p in graphs: epoch-relative flags, no reset; too long a capture refused", test_p2p_epochs},
        {"a launch inside a capture of the caller's, the devices ordered by flags: every replay right, its state "
         "freed with the caller's graphs", test_foreign_capture},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("runtime/graph", tests);
}

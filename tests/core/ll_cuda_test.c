/* Tests of src/core/ll_cuda.cu on one GPU: the latency path's kernel with
 * a team of 2, 3, 4 and 8 members that all live on device 0 (each member
 * its own signal region, registered buffer and stream), so that the
 * kernel's phases, moves, vector paths, reductions and generations run on
 * real hardware where only one GPU is lent: every kind, both algorithms,
 * f32/bf16/f16, every reduction, in place and not, one member's calls
 * back to back on its stream with sizes changing, outputs exact against a
 * reference in integers. Then a member that never comes: the others spin
 * until the host raises their abort words, and leave. (Across GPUs the
 * runtime suites run `via ll` on CUDA: sched/collectives, sched/cost.)
 * Registered only when a GPU is present. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/ll.h"
#include "test.h"

#ifdef HN_HAVE_CUDA
#define MAXM 8
#define NCALLS 18

static const hn_device_ops *G = &hn_device_cuda;
static void *GCTX;

static int setup(void)
{
    hn_device_config cfg = {1, 0, 1, NULL, 0};
    return G->init(&cfg, &GCTX) != HN_OK || G->thread_init(GCTX, 0) != HN_OK;
}

static int teardown(void)
{
    G->thread_fini(GCTX, 0);
    G->fini(GCTX);
    return 0;
}

typedef struct team {
    int n;
    hn_ll_signal *sig[MAXM];
    char *stage[MAXM];
    size_t half;
    hn_dstream *s[MAXM];
} team;

static void team_make(team *t, int n, size_t half)
{
    hn_ll_signal zero;
    memset(t, 0, sizeof(*t));
    memset(&zero, 0, sizeof(zero));
    t->n = n;
    t->half = half;
    for (int m = 0; m < n; m++) {
        CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, sizeof(hn_ll_signal), (void **)&t->sig[m]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(G->copy_to_device(GCTX, 0, t->sig[m], &zero, sizeof(zero)), HN_OK);
        CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, 2 * half, (void **)&t->stage[m]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(G->stream_create(GCTX, 0, &t->s[m]), HN_OK);
    }
}

static void team_free(team *t)
{
    for (int m = 0; m < t->n; m++) {
        G->stream_sync(t->s[m]);
        G->stream_destroy(t->s[m]);
        G->mem_free(GCTX, 0, t->sig[m]);
        G->mem_free(GCTX, 0, t->stage[m]);
    }
}

static hn_ll_args args_of(const team *t, int me, int kind, int algo, hn_dtype dt, int redop, size_t count,
                          const void *send, void *recv)
{
    hn_ll_args a;
    size_t es = (size_t)hn_dtype_size(dt);
    memset(&a, 0, sizeof(a));
    a.kind = kind;
    a.algo = algo;
    a.n = t->n;
    a.me = me;
    a.blocks = hn_ll_blocks(kind, algo, count, es, t->n);
    a.dtype = (int)dt;
    a.redop = redop;
    a.count = count;
    a.send = send;
    a.recv = recv;
    a.half = t->half;
    for (int p = 0; p < t->n; p++) {
        a.sig[p] = t->sig[p];
        a.stage[p] = t->stage[p];
        a.ranks[p] = p;
    }
    return a;
}

static float xv(int c, int m, size_t i, int redop)
{
    unsigned h = (unsigned)(c * 131 + m * 31 + (int)(i % 1009) * 7 + (int)(i / 1009) * 3);
    if (redop == 1) /* prod: +-1, +-2 */
        return (float)((h % 4 < 2 ? 1 : 2) * (h % 3 == 0 ? -1 : 1));
    return (float)((int)(h % 17) - 8);
}

static float want(int kind, int redop, int ci, int n, int me, size_t count, size_t i)
{
    size_t j = kind == HN_LL_REDUCE_SCATTER ? (size_t)me * count + i : i;
    float acc;
    if (kind == HN_LL_ALLGATHER)
        return xv(ci, (int)(i / count), i % count, redop);
    acc = xv(ci, 0, j, redop);
    for (int p = 1; p < n; p++) {
        float x = xv(ci, p, j, redop);
        acc = redop == 1 ? acc * x : redop == 2 ? fmaxf(acc, x) : redop == 3 ? fminf(acc, x) : acc + x;
    }
    return redop == 4 ? acc / (float)n : acc;
}

typedef struct call {
    int kind, algo, redop, inplace;
    hn_dtype dt;
    size_t count;
    char *in[MAXM], *out[MAXM], *base[MAXM][2];
} call;

static void one_device(int n)
{
    static const size_t counts[] = {1, 61, 1000, 4099, 16384};
    static const hn_dtype dts[] = {HN_F32, HN_BF16, HN_F16};
    team t;
    call c[NCALLS];
    int nc = 0, wrong = 0;
    team_make(&t, n, (size_t)MAXM * 16384 * 4);
    for (int algo = 1; algo <= 2; algo++)
        for (int kind = 0; kind < 3; kind++)
            for (int d = 0; d < 3; d++) {
                call *x = &c[nc];
                memset(x, 0, sizeof(*x));
                x->kind = kind;
                x->algo = algo;
                x->dt = dts[d];
                x->redop = (nc * 3 + n) % 5;
                x->count = counts[(nc * 7 + n) % 5];
                x->inplace = (nc + n) % 3 == 0;
                nc++;
            }
    /* buffers: inputs written, outputs poisoned */
    for (int ci = 0; ci < nc; ci++) {
        call *x = &c[ci];
        size_t es = (size_t)hn_dtype_size(x->dt);
        size_t ni = x->kind == HN_LL_REDUCE_SCATTER ? x->count * n : x->count;
        size_t no = x->kind == HN_LL_ALLGATHER ? x->count * n : x->count, big = ni > no ? ni : no;
        char *host = malloc(big * es);
        for (int m = 0; m < n; m++) {
            for (size_t i = 0; i < big; i++)
                hn_store(x->dt, host, (int64_t)i, NAN);
            CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, big * es, (void **)&x->base[m][0]), HN_OK);
            if (x->inplace) {
                x->in[m] = x->out[m] = x->base[m][0];
                if (x->kind == HN_LL_ALLGATHER)
                    x->in[m] += (size_t)m * x->count * es;
                else if (x->kind == HN_LL_REDUCE_SCATTER)
                    x->out[m] += (size_t)m * x->count * es;
            } else {
                CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, big * es, (void **)&x->base[m][1]), HN_OK);
                x->in[m] = x->base[m][0];
                x->out[m] = x->base[m][1];
                CU_ASSERT_EQUAL(G->copy_to_device(GCTX, 0, x->out[m], host, no * es), HN_OK);
            }
            for (size_t i = 0; i < ni; i++)
                hn_store(x->dt, host, (int64_t)i, xv(ci, m, i, x->redop));
            if (x->inplace && x->kind != HN_LL_REDUCE_SCATTER) {
                /* the rest of an in-place allgather's output stays poisoned */
                char *all = malloc(big * es);
                for (size_t i = 0; i < big; i++)
                    hn_store(x->dt, all, (int64_t)i, NAN);
                memcpy(all + (x->in[m] - x->base[m][0]), host, ni * es);
                CU_ASSERT_EQUAL(G->copy_to_device(GCTX, 0, x->base[m][0], all, big * es), HN_OK);
                free(all);
            } else {
                CU_ASSERT_EQUAL(G->copy_to_device(GCTX, 0, x->in[m], host, ni * es), HN_OK);
            }
        }
        free(host);
    }
    /* every member's calls back to back on its own stream */
    for (int ci = 0; ci < nc; ci++)
        for (int m = 0; m < n; m++) {
            hn_ll_args a = args_of(&t, m, c[ci].kind, c[ci].algo, c[ci].dt, c[ci].redop, c[ci].count, c[ci].in[m],
                                   c[ci].out[m]);
            CU_ASSERT_EQUAL(hn_compute_cuda.ll(t.s[m], &a, NULL), HN_OK);
        }
    for (int m = 0; m < n; m++)
        CU_ASSERT_EQUAL(G->stream_sync(t.s[m]), HN_OK);
    for (int ci = 0; ci < nc && !wrong; ci++) {
        call *x = &c[ci];
        size_t es = (size_t)hn_dtype_size(x->dt);
        size_t no = x->kind == HN_LL_ALLGATHER ? x->count * n : x->count;
        char *host = malloc(no * es);
        for (int m = 0; m < n && !wrong; m++) {
            CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, host, x->out[m], no * es), HN_OK);
            for (size_t i = 0; i < no; i++) {
                char tmp[8];
                float got = (float)hn_load(x->dt, host, (int64_t)i);
                hn_store(x->dt, tmp, 0, want(x->kind, x->redop, ci, n, m, x->count, i));
                if (!(got == (float)hn_load(x->dt, tmp, 0))) {
                    fprintf(stderr, "\n  %d members on one GPU: call %d (kind %d, algo %d, %s, op %d, count %zu%s), "
                            "member %d [%zu]: %g, want %g\n", n, ci, x->kind, x->algo, hn_dtype_name(x->dt),
                            x->redop, x->count, x->inplace ? ", in place" : "", m, i, got,
                            hn_load(x->dt, tmp, 0));
                    wrong = 1;
                    break;
                }
            }
        }
        free(host);
    }
    CU_ASSERT_FALSE(wrong);
    {
        /* the generation is on the device: every member counted every call */
        hn_ll_signal s0;
        CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, &s0, t.sig[n - 1], sizeof(s0)), HN_OK);
        CU_ASSERT_EQUAL(s0.gen, (uint32_t)nc);
        CU_ASSERT_EQUAL(s0.done, 0);
    }
    for (int ci = 0; ci < nc; ci++)
        for (int m = 0; m < n; m++)
            for (int k = 0; k < 2; k++)
                G->mem_free(GCTX, 0, c[ci].base[m][k]);
    team_free(&t);
}

static void test_one_device(void)
{
    static const int ns[] = {2, 3, 4, 8};
    for (int i = 0; i < 4; i++)
        one_device(ns[i]);
}

/* Member 2 of 3 never comes: the others spin (a kernel cannot time out)
 * until the host raises their abort words, then leave. */
static void test_abort_words(void)
{
    team t;
    char *buf[3];
    const uint32_t one = 1;
    double t0;
    team_make(&t, 3, 4096);
    for (int m = 0; m < 2; m++) {
        hn_ll_args a;
        CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, 1024 * 4, (void **)&buf[m]), HN_OK);
        a = args_of(&t, m, HN_LL_ALLREDUCE, HN_LL_ONESHOT, HN_F32, 0, 1024, buf[m], buf[m]);
        CU_ASSERT_EQUAL(hn_compute_cuda.ll(t.s[m], &a, NULL), HN_OK);
    }
    t0 = hn_now();
    while (hn_now() - t0 < 0.2) /* they are waiting */
        ;
    for (int m = 0; m < 3; m++)
        CU_ASSERT_EQUAL(G->copy_to_device(GCTX, 0, &t.sig[m]->abort, &one, sizeof(one)), HN_OK);
    for (int m = 0; m < 2; m++) {
        CU_ASSERT_EQUAL(G->stream_sync(t.s[m]), HN_OK);
        G->mem_free(GCTX, 0, buf[m]);
    }
    team_free(&t);
}
#endif

void hn_suite_ll_cuda(void)
{
#ifdef HN_HAVE_CUDA
    static CU_TestInfo tests[] = {
        {"the kernel with 2, 3, 4, 8 members on one GPU: every kind, algorithm, dtype, back to back",
         test_one_device},
        {"an absent member: the others leave once their abort words are raised", test_abort_words},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"core/ll_cuda", setup, teardown, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    if (hn_device_cuda.device_count() > 0)
        CU_register_suites(suites);
#endif
}

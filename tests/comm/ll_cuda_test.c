/* Tests of the latency path's kernel, src/comm/ll/ll_cuda.cu, as the
 * communicator picks it for its device's kind (hn_ll_kernel_for), without
 * the communicator: a team of 2, 3, 4,
 * 5 and 8 members that all live on device 0 (each its own signal region,
 * registered buffer and stream), so that the kernel's phases, wire
 * formats, vector and tail paths, the short path and the general way
 * (members of one call on either: buffers off alignment), reductions,
 * the fused norm and the
 * generations run on real hardware where only one GPU is lent. Every kind
 * x algorithm x dtype, every reduction, in place and not, random inputs
 * (allgather of any bits, reductions with inputs that look like the
 * sentinel and negative zeros), poisoned outputs, each member's calls back
 * to back on its stream with sizes, grids (different on every member) and
 * programmatic dependent launch changing from call to call; then every
 * output against a reference, every member's results the same bits, every
 * member's generation counted on the device and its slots cleared (all
 * ones) again. Then a member that never comes: the others spin until the
 * host raises their abort words, and leave.
 * The same tests run as suite comm/ll_host on the CPU backend's emulation
 * (src/comm/ll/ll_host.c), always: the GPU suite comm/ll_cuda is registered
 * only when a GPU is present. Progress on one GPU: the members' kernels
 * wait for each other, so they must be resident together; a member's grid
 * is at most 4 blocks here (one 512-thread block fits an SM), so 8 members,
 * each with its next kernel launched early beside it, take at most 64 SMs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "comm/ll/ll.h"
#include "ll_ref.h"
#include "../test.h"

#define MAXM 8
#define MAXC 40
#define MOST_BLOCKS 4

static const hn_device_ops *G;
static hn_ll_kernel K;
static void *GCTX;
static hn_test_faults F;

static int setup_with(const hn_device_ops *dev)
{
    hn_device_setup ds = {1, 0, 1, NULL, 0, NULL, 0, NULL, 0};
    G = dev;
    if ((K = hn_ll_kernel_for(dev)) == NULL)
        return 1;
    hn_test_faults_init(&F, 60);
    ds.sink = &F.sink;
    return G->init(&ds, &GCTX) != HN_OK || G->thread_init(GCTX, 0) != HN_OK;
}

static int teardown(void)
{
    G->thread_fini(GCTX, 0);
    G->fini(GCTX);
    hn_test_faults_fini(&F);
    return 0;
}

static int setup_host(void) { return setup_with(&hn_device_host); }

#ifdef HN_HAVE_CUDA
static int setup_cuda(void) { return setup_with(&hn_device_cuda); }
#endif

typedef struct team {
    int n;
    hn_ll_signal *sig[MAXM];
    char *slots[MAXM];
    size_t slot;
    hn_dstream *s[MAXM];
} team;

/* A host buffer of `bytes` bytes, every one `v`. */
static char *bytes_of(size_t bytes, int v)
{
    char *p = malloc(bytes);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    memset(p, v, bytes);
    return p;
}

static void team_make(team *t, int n, size_t slot)
{
    hn_ll_signal zero;
    char *ones = bytes_of(HN_LL_SLOTS * slot, HN_LL_CLEAR);
    memset(t, 0, sizeof(*t));
    memset(&zero, 0, sizeof(zero));
    t->n = n;
    t->slot = slot;
    for (int m = 0; m < n; m++) {
        CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, sizeof(hn_ll_signal), (void **)&t->sig[m]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(G->copy_to_device(GCTX, 0, t->sig[m], &zero, sizeof(zero)), HN_OK);
        CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, HN_LL_SLOTS * slot, (void **)&t->slots[m]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(G->copy_to_device(GCTX, 0, t->slots[m], ones, HN_LL_SLOTS * slot), HN_OK);
        CU_ASSERT_EQUAL_FATAL(G->stream_create(GCTX, 0, &t->s[m]), HN_OK);
    }
    free(ones);
}

static void team_free(team *t)
{
    for (int m = 0; m < t->n; m++) {
        G->stream_sync(t->s[m]);
        G->stream_destroy(t->s[m]);
        G->mem_free(GCTX, 0, t->sig[m]);
        G->mem_free(GCTX, 0, t->slots[m]);
    }
}

/* One call of every member: its shape, and per member the device buffers
 * and the host copies of what went in. */
typedef struct kcall {
    int kind, inplace, mode; /* mode: hn_llt_fill's raw (1), sentinels and -0 (2) */
    int skew;                /* odd members' buffers off the 16-byte alignment (dev_buf) */
    hn_coll_algo algo;
    hn_redop redop;
    hn_dtype dt;
    size_t count, hidden;
    char *in[MAXM], *out[MAXM], *res[MAXM], *rout[MAXM], *w[MAXM];
    char *base[MAXM][5]; /* what was allocated: in (out in place), out, residual, y, weight */
    char *hin[MAXM], *hres, *hw;
} kcall;

static size_t ni_of(const kcall *x, int n) { return x->kind == HN_LL_REDUCE_SCATTER ? x->count * n : x->count; }
static size_t no_of(const kcall *x, int n) { return x->kind == HN_LL_ALLGATHER ? x->count * n : x->count; }

static hn_ll_args args_of(const team *t, const kcall *x, int m, int blocks, int pdl)
{
    hn_ll_args a;
    memset(&a, 0, sizeof(a));
    a.kind = x->kind;
    a.algo = x->algo;
    a.n = t->n;
    a.me = m;
    a.blocks = blocks;
    a.pdl = pdl;
    a.dtype = (int)x->dt;
    a.redop = x->redop;
    a.count = x->count;
    a.hidden = x->hidden;
    a.eps = 1e-5f;
    a.send = x->in[m];
    a.recv = x->out[m];
    a.residual = x->res[m];
    a.residual_out = x->rout[m];
    a.weight = x->w[m];
    a.slot = t->slot;
    for (int p = 0; p < t->n; p++) {
        a.sig[p] = t->sig[p];
        a.slots[p] = t->slots[p];
        a.ranks[p] = p;
    }
    return a;
}

/* Sentinels and negative zeros among the small integers: every 11th
 * element all ones (a NaN), every 13th -0. */
static void sprinkle(hn_dtype dt, char *host, size_t n)
{
    size_t es = (size_t)hn_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        if (i % 11 == 5)
            memset(host + i * es, 0xff, es);
        else if (i % 13 == 6)
            hn_store(dt, host, (int64_t)i, -0.0);
}

/* A device buffer of member m; with skew, odd members' buffers start an
 * element past a 16-byte boundary: they take the kernel's general way
 * while the even ones take its short path, in one call. */
static char *dev_buf(kcall *x, int m, int k, size_t bytes)
{
    size_t skew = x->skew && m % 2 ? (size_t)hn_dtype_size(x->dt) : 0;
    CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, bytes + skew + 1, (void **)&x->base[m][k]), HN_OK);
    return x->base[m][k] + skew;
}

/* n elements of dt at device buffer p, poisoned: NaN (floats), 0x5b bytes. */
static void poison(hn_dtype dt, char *p, size_t n)
{
    size_t es = (size_t)hn_dtype_size(dt);
    char *host = bytes_of(n * es, 0x5b);
    for (size_t i = 0; i < n && hn_dtype_is_float(dt); i++)
        hn_store(dt, host, (int64_t)i, NAN);
    CU_ASSERT_EQUAL(G->copy_to_device(GCTX, 0, p, host, n * es), HN_OK);
    free(host);
}

/* Buffers of every member: inputs random, outputs poisoned. */
static void prepare(kcall *x, int n, uint64_t *seed)
{
    size_t es = (size_t)hn_dtype_size(x->dt), ni = ni_of(x, n), no = no_of(x, n), big = ni > no ? ni : no;
    if (x->kind == HN_LL_ALLREDUCE_NORM) {
        x->hres = malloc(x->count * es);
        x->hw = malloc(x->hidden * es);
        hn_llt_fill(x->dt, 0, 0, x->hres, x->count, seed); /* replicated: one copy */
        for (size_t j = 0; j < x->hidden; j++)
            hn_store(x->dt, x->hw, (int64_t)j, 0.25 + (double)(hn_splitmix64(seed) % 16) / 8);
    }
    for (int m = 0; m < n; m++) {
        char *buf;
        x->hin[m] = malloc(ni * es);
        hn_llt_fill(x->dt, x->redop, x->mode == 1, x->hin[m], ni, seed);
        if (x->mode == 2)
            sprinkle(x->dt, x->hin[m], ni);
        buf = dev_buf(x, m, 0, big * es);
        poison(x->dt, buf, big);
        if (x->inplace) {
            x->in[m] = x->out[m] = buf;
            if (x->kind == HN_LL_ALLGATHER)
                x->in[m] = buf + (size_t)m * x->count * es;
            else if (x->kind == HN_LL_REDUCE_SCATTER)
                x->out[m] = buf + (size_t)m * x->count * es;
        } else {
            x->in[m] = buf;
            x->out[m] = dev_buf(x, m, 1, no * es);
            poison(x->dt, x->out[m], no);
        }
        CU_ASSERT_EQUAL(G->copy_to_device(GCTX, 0, x->in[m], x->hin[m], ni * es), HN_OK);
        if (x->kind != HN_LL_ALLREDUCE_NORM)
            continue;
        x->res[m] = dev_buf(x, m, 2, x->count * es);
        CU_ASSERT_EQUAL(G->copy_to_device(GCTX, 0, x->res[m], x->hres, x->count * es), HN_OK);
        x->rout[m] = x->res[m];
        if (!x->inplace) {
            x->rout[m] = dev_buf(x, m, 3, x->count * es);
            poison(x->dt, x->rout[m], x->count);
        }
        x->w[m] = dev_buf(x, m, 4, x->hidden * es);
        CU_ASSERT_EQUAL(G->copy_to_device(GCTX, 0, x->w[m], x->hw, x->hidden * es), HN_OK);
    }
}

static void release(kcall *x, int n)
{
    for (int m = 0; m < n; m++) {
        for (int k = 0; k < 5; k++)
            if (x->base[m][k] != NULL)
                G->mem_free(GCTX, 0, x->base[m][k]);
        free(x->hin[m]);
    }
    free(x->hres);
    free(x->hw);
}

/* Member m's results of call x against the reference; 0 if right. */
static int check_member(const kcall *x, int n, int m, const char *what)
{
    size_t es = (size_t)hn_dtype_size(x->dt), no = no_of(x, n);
    char *got = malloc(no * es), *y = NULL;
    const void *in[MAXM];
    double scale = 0; /* the norm's factor of the row, from y as stored */
    int bad = 0;
    for (int p = 0; p < n; p++)
        in[p] = x->hin[p];
    CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, got, x->out[m], no * es), HN_OK);
    if (x->kind == HN_LL_ALLREDUCE_NORM) {
        y = malloc(x->count * es);
        CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, y, x->rout[m], x->count * es), HN_OK);
    }
    for (size_t i = 0; i < no && !bad; i++) {
        double want;
        int ok;
        if (x->kind == HN_LL_ALLREDUCE_NORM && i % x->hidden == 0)
            scale = hn_llt_norm_scale(x->dt, y + i * es, x->hidden, 1e-5f);
        if (x->kind == HN_LL_ALLGATHER) {
            ok = memcmp(got + i * es, x->hin[i / x->count] + i % x->count * es, es) == 0;
            want = hn_load(x->dt, x->hin[i / x->count], (int64_t)(i % x->count));
        } else if (x->kind != HN_LL_ALLREDUCE_NORM) {
            want = hn_llt_reduce(x->dt, x->redop, in, n, x->kind == HN_LL_REDUCE_SCATTER ? m * x->count : 0, NULL, i);
            ok = hn_llt_same(x->dt, got, i, want, 0);
        } else {
            want = hn_llt_reduce(x->dt, x->redop, in, n, 0, x->hres, i);
            ok = hn_llt_same(x->dt, y, i, want, 0);
            if (ok) {
                want = hn_load(x->dt, y, (int64_t)i) * hn_load(x->dt, x->hw, (int64_t)(i % x->hidden)) * scale;
                ok = hn_llt_same(x->dt, got, i, want, 1);
            }
        }
        if (!ok) {
            fprintf(stderr, "\n  %s: kind %d, algo %d, %s, op %d, count %zu (rows of %zu)%s, member %d of %d [%zu]: "
                    "%g, want %g\n", what, x->kind, (int)x->algo, hn_dtype_name(x->dt), x->redop, x->count, x->hidden,
                    x->inplace ? ", in place" : "", m, n, i, hn_load(x->dt, got, (int64_t)i), want);
            bad = 1;
        }
    }
    free(got);
    free(y);
    return bad;
}

/* Member m's result buffer (and y) equal member 0's byte for byte. */
static int same_as_first(const kcall *x, int n, int m)
{
    size_t bytes = no_of(x, n) * (size_t)hn_dtype_size(x->dt);
    char *a = malloc(bytes), *b = malloc(bytes);
    int same;
    CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, a, x->out[0], bytes), HN_OK);
    CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, b, x->out[m], bytes), HN_OK);
    same = memcmp(a, b, bytes) == 0;
    if (same && x->kind == HN_LL_ALLREDUCE_NORM) {
        CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, a, x->rout[0], bytes), HN_OK);
        CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, b, x->rout[m], bytes), HN_OK);
        same = memcmp(a, b, bytes) == 0;
    }
    free(a);
    free(b);
    return same;
}

static const size_t counts[] = {1, 3, 8, 61, 1000, 4099, 16384, 30001};
static const size_t shapes[][2] = {{1, 7}, {3, 61}, {5, 1000}, {2, 1003}, {17, 64}, {4, 4096}}; /* rows, hidden */
static const hn_dtype dts[] = {HN_F32, HN_BF16, HN_F16};

/* The calls of a team of n: every kind x algorithm x dtype, reductions
 * and sizes cycling, allgathers of raw bits, sentinels among the inputs. */
static int make_calls(kcall *c, int n)
{
    int nc = 0;
    for (int kind = 0; kind < 4; kind++)
        for (hn_coll_algo algo = HN_ALGO_ONESHOT; algo <= HN_ALGO_TWOSHOT; algo++)
            for (int d = 0; d < 3; d++) {
                kcall *x = &c[nc];
                memset(x, 0, sizeof(*x));
                x->kind = kind;
                x->algo = algo;
                x->dt = dts[d];
                x->redop = (hn_redop)((nc * 3 + n) % HN_RED_COUNT);
                x->inplace = (nc + n) % 3 == 0;
                x->skew = (nc + n) % 4 == 1;
                if (kind == HN_LL_ALLREDUCE_NORM) {
                    const size_t *sh = shapes[(nc + n) % HN_ARRAY_LEN(shapes)];
                    x->hidden = sh[1];
                    x->count = sh[0] * sh[1];
                } else {
                    x->count = counts[(nc * 7 + n) % HN_ARRAY_LEN(counts)];
                }
                nc++;
            }
    for (int k = 0; k < 3; k++) { /* allgathers of any bits; sums with sentinels and -0 */
        kcall *x = &c[nc++];
        memset(x, 0, sizeof(*x));
        x->kind = k < 2 ? HN_LL_ALLGATHER : HN_LL_ALLREDUCE;
        x->algo = k % 2 ? HN_ALGO_TWOSHOT : HN_ALGO_ONESHOT;
        x->dt = k == 0 ? HN_I64 : k == 1 ? HN_I32 : HN_BF16;
        x->mode = k < 2 ? 1 : 2;
        x->count = k == 0 ? 1001 : k == 1 ? 3 : 4099;
        x->inplace = k == 1;
    }
    {
        kcall *x = &c[nc++]; /* the same two-shot, f32 */
        *x = c[nc - 2];
        x->dt = HN_F32;
        x->algo = HN_ALGO_TWOSHOT;
    }
    for (int k = 0; k < 6; k++) { /* one row per member, one-shot (a decode step's): rows of 256 to 2048 units,
                                     1, 2 and 4 a thread of the short path's norm */
        kcall *x = &c[nc++];
        memset(x, 0, sizeof(*x));
        x->kind = HN_LL_ALLREDUCE_NORM;
        x->algo = HN_ALGO_ONESHOT;
        x->dt = k == 2 ? HN_F32 : HN_BF16;
        x->redop = HN_RED_SUM;
        x->hidden = k == 0 ? 2048 : k == 4 ? 8192 : k == 5 ? 16384 : 4096;
        x->count = x->hidden;
        x->inplace = k == 3;
        x->skew = k == 2;
    }
    return nc;
}

/* After the calls: every output right, every member's result the same
 * bits; the generation (`gens` calls) on the device, every block finished,
 * every slot all ones again (each lane read whole and cleared). Frees the
 * calls and the team. */
static void finish(team *t, kcall *c, int nc, uint32_t gens, const char *what)
{
    int n = t->n, wrong = 0;
    char *ones;
    for (int m = 0; m < n; m++)
        CU_ASSERT_EQUAL(G->stream_sync(t->s[m]), HN_OK);
    CU_ASSERT_EQUAL(F.first, HN_OK);
    if (F.first != HN_OK)
        fprintf(stderr, "\n  %s: %s\n", what, F.err);
    for (int ci = 0; ci < nc && !wrong; ci++)
        for (int m = 0; m < n && !wrong; m++) {
            wrong = check_member(&c[ci], n, m, what);
            if (!wrong && c[ci].kind != HN_LL_ALLGATHER && c[ci].kind != HN_LL_REDUCE_SCATTER &&
                !same_as_first(&c[ci], n, m)) {
                fprintf(stderr, "\n  %s: call %d: member %d's result differs from member 0's\n", what, ci, m);
                wrong = 1;
            }
        }
    CU_ASSERT_FALSE(wrong);
    ones = bytes_of(HN_LL_SLOTS * t->slot, HN_LL_CLEAR);
    for (int m = 0; m < n; m++) {
        hn_ll_signal s;
        char *got = malloc(HN_LL_SLOTS * t->slot);
        CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, &s, t->sig[m], sizeof(s)), HN_OK);
        for (int b = 0; b < HN_LL_MAX_BLOCKS; b++) /* every block's word, whichever grids ran */
            CU_ASSERT_EQUAL(s.gen[b], gens);
        CU_ASSERT_EQUAL(s.running, gens);
        CU_ASSERT_EQUAL(G->copy_to_host(GCTX, 0, got, t->slots[m], HN_LL_SLOTS * t->slot), HN_OK);
        CU_ASSERT_EQUAL(memcmp(got, ones, HN_LL_SLOTS * t->slot), 0);
        free(got);
    }
    free(ones);
    for (int ci = 0; ci < nc; ci++)
        release(&c[ci], n);
    team_free(t);
}

/* A team whose slots hold the largest of the calls. */
static void team_for(team *t, int n, kcall *c, int nc)
{
    size_t slot = 0;
    for (int ci = 0; ci < nc; ci++) {
        hn_ll_args a = args_of(&(team){.n = n}, &c[ci], 0, 0, 0);
        hn_ll_plan P;
        hn_ll_plan_make(&a, HN_LL_SEG_BYTES, &P);
        slot = HN_MAX(slot, hn_ll_need(&P, n));
    }
    team_make(t, n, slot);
}

static void one_device(int n, uint64_t seed)
{
    kcall c[MAXC];
    team t;
    int nc = make_calls(c, n);
    char what[64];
    snprintf(what, sizeof(what), "%d members on one %s", n, G == &hn_device_host ? "emulated device" : "GPU");
    team_for(&t, n, c, nc);
    for (int ci = 0; ci < nc; ci++)
        prepare(&c[ci], n, &seed);
    /* every member's calls back to back on its own stream; grids and PDL
     * changing, and different on every member */
    for (int ci = 0; ci < nc; ci++)
        for (int m = 0; m < n; m++) {
            hn_ll_args a = args_of(&t, &c[ci], m, 1 + (m + ci) % MOST_BLOCKS, ci % 2);
            hn_origin o = {&F.sink, m, ci, NULL, NULL};
            CU_ASSERT_EQUAL(K(t.s[m], &a, &o), HN_OK);
        }
    finish(&t, c, nc, (uint32_t)nc, what);
}

static void test_one_device(void)
{
    static const int ns[] = {1, 2, 3, 4, 5, 8};
    for (int i = 0; i < HN_ARRAY_LEN(ns); i++)
        one_device(ns[i], 0x5eed + (uint64_t)ns[i]);
}

#ifdef HN_HAVE_CUDA
/* A team of one: every kind alone, no peer to wait for (so that a tool
 * that runs kernels one at a time, as compute-sanitizer's racecheck may,
 * can run it). */
static void test_alone(void) { one_device(1, 0xa1); }
#endif

/* Each member's calls captured in a graph of its own (programmatic
 * dependent launch inside), the graphs replayed back to back with no host
 * sync: the generations go on on the devices, the results are the same. */
static void test_graphs(void)
{
    static const int ns[] = {2, 4};
    for (int i = 0; i < HN_ARRAY_LEN(ns); i++) {
        int n = ns[i], nc = 0, reps = 3;
        kcall c[MAXC], all[MAXC];
        hn_dgraph *g[MAXM];
        team t;
        uint64_t seed = 77;
        char what[64];
        int total = make_calls(all, n);
        for (int ci = 0; ci < total; ci++) /* out of place: a replay must find its inputs again */
            if (!all[ci].inplace && nc < 12)
                c[nc++] = all[ci];
        snprintf(what, sizeof(what), "%d members, graphs replayed %d times", n, reps);
        team_for(&t, n, c, nc);
        for (int ci = 0; ci < nc; ci++)
            prepare(&c[ci], n, &seed);
        for (int m = 0; m < n; m++) {
            CU_ASSERT_EQUAL_FATAL(G->capture_begin(t.s[m]), HN_OK);
            for (int ci = 0; ci < nc; ci++) {
                hn_ll_args a = args_of(&t, &c[ci], m, 1 + (m + ci) % MOST_BLOCKS, (ci + 1) % 3 != 0);
                hn_origin o = {&F.sink, m, ci, NULL, NULL};
                CU_ASSERT_EQUAL(K(t.s[m], &a, &o), HN_OK);
            }
            CU_ASSERT_EQUAL_FATAL(G->capture_end(t.s[m], &g[m]), HN_OK);
        }
        for (int r = 0; r < reps; r++)
            for (int m = 0; m < n; m++)
                CU_ASSERT_EQUAL(G->graph_launch(g[m], t.s[m]), HN_OK);
        for (int m = 0; m < n; m++)
            CU_ASSERT_EQUAL(G->stream_sync(t.s[m]), HN_OK);
        for (int m = 0; m < n; m++)
            G->graph_destroy(g[m]);
        finish(&t, c, nc, (uint32_t)(nc * reps), what);
    }
}

/* Member 2 of 3 never comes: the others spin (a kernel cannot time out)
 * until the host raises their abort words, then leave, reporting nothing. */
static void test_abort_words(void)
{
    static const int kinds[] = {HN_LL_ALLREDUCE, HN_LL_ALLGATHER, HN_LL_ALLREDUCE_NORM};
    team t;
    kcall x[3];
    const uint32_t one = 1;
    uint64_t seed = 9;
    double t0;
    team_make(&t, 3, 64 * 1024);
    for (int k = 0; k < 3; k++) { /* queued behind one another */
        memset(&x[k], 0, sizeof(x[k]));
        x[k].kind = kinds[k];
        x[k].algo = k % 2 ? HN_ALGO_TWOSHOT : HN_ALGO_ONESHOT;
        x[k].dt = HN_F32;
        x[k].hidden = 64;
        x[k].count = 1024;
        prepare(&x[k], 3, &seed);
        for (int m = 0; m < 2; m++) {
            hn_ll_args a = args_of(&t, &x[k], m, 2, 1);
            hn_origin o = {&F.sink, m, k, NULL, NULL};
            CU_ASSERT_EQUAL(K(t.s[m], &a, &o), HN_OK);
        }
    }
    t0 = hn_now();
    while (hn_now() - t0 < 0.2) /* they are waiting */
        ;
    for (int m = 0; m < 3; m++)
        CU_ASSERT_EQUAL(G->copy_to_device(GCTX, 0, &t.sig[m]->abort, &one, sizeof(one)), HN_OK);
    for (int m = 0; m < 2; m++)
        CU_ASSERT_EQUAL(G->stream_sync(t.s[m]), HN_OK);
    CU_ASSERT_EQUAL(F.first, HN_OK);
    for (int k = 0; k < 3; k++)
        release(&x[k], 3);
    team_free(&t);
}

void hn_suite_ll_cuda(void)
{
    static CU_TestInfo tests[] = {
        {"1, 2, 3, 4, 5, 8 members on one device: every kind, algorithm, dtype, back to back", test_one_device},
        {"each member's calls captured in a graph, replayed back to back", test_graphs},
        {"an absent member: the others leave once their abort words are raised", test_abort_words},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo host[] = {{"comm/ll_host", setup_host, teardown, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    CU_register_suites(host);
#ifdef HN_HAVE_CUDA
    {
        static CU_TestInfo alone[] = {
            {"a team of one: every kind, algorithm, dtype, back to back", test_alone},
            CU_TEST_INFO_NULL,
        };
        CU_SuiteInfo cuda[] = {{"comm/ll_cuda", setup_cuda, teardown, NULL, NULL, tests},
                               {"comm/ll_cuda_alone", setup_cuda, teardown, NULL, NULL, alone},
                               CU_SUITE_INFO_NULL};
        if (hn_device_cuda.device_count() > 0)
            CU_register_suites(cuda);
    }
#endif
}

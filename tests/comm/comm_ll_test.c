/* Tests of src/comm/comm_ll.c (and the protocol it hands the compute
 * backends, src/core/ll.h, run here by the CPU emulation src/core/ll_host.c)
 * through the device, compute and comm tables, one issuing thread per
 * rank: every collective at 1..8 ranks, one-shot, two-shot and the
 * communicator's choice, f32/bf16/f16, every reduction, in place and out
 * of place, sizes from one element to many blocks; each rank issues its
 * whole sequence back to back with no host sync (sizes, kinds, dtypes and
 * streams changing from call to call, random stream delays), several teams
 * at once (overlapping, members in another order than their ranks); then
 * every output is checked exactly against a reference (integers in floats).
 * A rank that never comes times out by name; an abort releases waiting
 * members. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "core/ll.h"
#include "test.h"

#define MAXR 8
#define MAXT 4     /* teams of a world */
#define MAXCALLS 40
#define NSTREAMS 2
#define GARBAGE ((size_t)1 << 20)

static const hn_device_ops *D = &hn_device_host;

typedef struct call {
    int team;
    hn_coll_kind kind;
    int algo; /* 0: the communicator's choice */
    hn_dtype dt;
    int redop;
    size_t count;
} call;

typedef struct world {
    void *ctx;
    hn_comm_world *w;
    hn_test_faults faults;
    int n, nteams;
    int tn[MAXT], tranks[MAXT][MAXR];
    hn_comm_team *team[MAXT];
    hn_dstream *s[MAXR][NSTREAMS];
    int ncalls;
    call calls[MAXCALLS];
    /* per rank and call: its buffers (input, output; equal in place) */
    char *in[MAXR][MAXCALLS], *out[MAXR][MAXCALLS];
    char *base[MAXR][MAXCALLS][2]; /* what was allocated (one in place) */
    int inplace[MAXR][MAXCALLS], stream[MAXR][MAXCALLS];
    /* after the call, the rank's stream overwrites its input (as a
     * program reusing the buffer would): no peer may still read it */
    int scribble[MAXR][MAXCALLS];
    char *garbage[MAXR];
    hn_status_t st[MAXR];
    int absent;
} world;

static int member_of(const world *h, int t, int r)
{
    for (int i = 0; i < h->tn[t]; i++)
        if (h->tranks[t][i] == r)
            return i;
    return -1;
}

static void start(world *h, int n, double timeout, double delay_us)
{
    hn_device_config dc = {n, delay_us, 7, NULL, 0};
    hn_comm_config cc;
    memset(h, 0, sizeof(*h));
    h->n = n;
    h->absent = -1;
    hn_test_faults_init(&h->faults, timeout);
    dc.sink = &h->faults.sink;
    CU_ASSERT_EQUAL_FATAL(D->init(&dc, &h->ctx), HN_OK);
    memset(&cc, 0, sizeof(cc));
    cc.nranks = n;
    cc.dev = D;
    cc.dev_ctx = h->ctx;
    cc.compute = &hn_compute_host;
    cc.sink = &h->faults.sink;
    CU_ASSERT_EQUAL_FATAL(hn_comm_ll.init(&cc, &h->w), HN_OK);
    for (int r = 0; r < n; r++) {
        for (int k = 0; k < NSTREAMS; k++)
            CU_ASSERT_EQUAL_FATAL(D->stream_create(h->ctx, r, &h->s[r][k]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, GARBAGE, (void **)&h->garbage[r]), HN_OK);
        memset(h->garbage[r], 0x5b, GARBAGE);
    }
}

/* A team of the given ranks (member i is ranks[i]), joined and reserved
 * for chunks of `bytes`, as the runtime does between runs. */
static void add_team(world *h, const int *ranks, int n, size_t bytes)
{
    int t = h->nteams++;
    h->tn[t] = n;
    memcpy(h->tranks[t], ranks, (size_t)n * sizeof(int));
    CU_ASSERT_EQUAL_FATAL(hn_comm_ll.team_create(h->w, ranks, n, &h->team[t]), HN_OK);
    for (int i = 0; i < n; i++) {
        hn_origin o = {&h->faults.sink, ranks[i], 0, NULL, NULL};
        CU_ASSERT_EQUAL_FATAL(hn_comm_ll.team_join(h->team[t], i, &o), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_comm_ll.team_reserve(h->team[t], i, bytes, &o), HN_OK);
    }
}

static void stop(world *h)
{
    for (int r = 0; r < h->n; r++)
        for (int k = 0; k < NSTREAMS; k++)
            D->stream_sync(h->s[r][k]);
    for (int t = 0; t < h->nteams; t++)
        hn_comm_ll.team_destroy(h->team[t]);
    hn_comm_ll.fini(h->w);
    for (int r = 0; r < h->n; r++) {
        for (int k = 0; k < NSTREAMS; k++)
            D->stream_destroy(h->s[r][k]);
        D->mem_free(h->ctx, r, h->garbage[r]);
        for (int c = 0; c < h->ncalls; c++)
            for (int k = 0; k < 2; k++)
                D->mem_free(h->ctx, r, h->base[r][c][k]);
    }
    D->fini(h->ctx);
    hn_test_faults_fini(&h->faults);
}

/* Input element i of team member m in call c: small integers, so that
 * every sum, product, max and min is exact in bf16 too. */
static float xv(int c, int m, size_t i, int redop)
{
    unsigned h = (unsigned)(c * 131 + m * 31 + (int)(i % 1009) * 7 + (int)(i / 1009) * 3);
    if (redop == HN_REDUCE_PROD) /* products of +-1, +-2: powers of two */
        return (float)((h % 4 < 2 ? 1 : 2) * (h % 3 == 0 ? -1 : 1));
    return (float)((int)(h % 17) - 8);
}

static size_t in_elems(const call *c, int n) { return c->kind == HN_COLL_REDUCE_SCATTER ? c->count * n : c->count; }
static size_t out_elems(const call *c, int n) { return c->kind == HN_COLL_ALLGATHER ? c->count * n : c->count; }

static float load_dt(hn_dtype dt, const char *p, size_t i) { return (float)hn_load(dt, p, (int64_t)i); }

/* The reference of output element i on member me. */
static float want(const call *c, int ci, int n, int me, size_t i)
{
    float acc;
    size_t j;
    if (c->kind == HN_COLL_ALLGATHER)
        return xv(ci, (int)(i / c->count), i % c->count, c->redop);
    j = c->kind == HN_COLL_REDUCE_SCATTER ? (size_t)me * c->count + i : i;
    acc = xv(ci, 0, j, c->redop);
    for (int p = 1; p < n; p++) {
        float x = xv(ci, p, j, c->redop);
        acc = c->redop == HN_REDUCE_PROD ? acc * x : c->redop == HN_REDUCE_MAX ? fmaxf(acc, x)
              : c->redop == HN_REDUCE_MIN ? fminf(acc, x) : acc + x;
    }
    return c->redop == HN_REDUCE_AVG ? acc / (float)n : acc;
}

/* Buffers of every call on every rank that takes part: inputs written,
 * outputs poisoned (NaN), in place or not as the rank likes. */
static void prepare(world *h, uint64_t seed)
{
    for (int ci = 0; ci < h->ncalls; ci++) {
        const call *c = &h->calls[ci];
        int n = h->tn[c->team];
        size_t es = (size_t)hn_dtype_size(c->dt);
        for (int r = 0; r < h->n; r++) {
            int me = member_of(h, c->team, r);
            size_t ni = in_elems(c, n), no = out_elems(c, n);
            char *in, *out;
            if (me < 0)
                continue;
            h->inplace[r][ci] = (int)(hn_splitmix64(&seed) % 3 == 0);
            h->stream[r][ci] = (int)(hn_splitmix64(&seed) % NSTREAMS);
            h->scribble[r][ci] = (int)(hn_splitmix64(&seed) % 2);
            if (h->inplace[r][ci]) {
                /* allgather: the input is the member's chunk of the output;
                 * reduce_scatter: the output is its chunk of the input */
                size_t big = ni > no ? ni : no;
                CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, big * es + 1, (void **)&in), HN_OK);
                out = in;
                h->base[r][ci][0] = in;
                for (size_t i = 0; i < big; i++)
                    hn_store(c->dt, out, (int64_t)i, NAN);
                if (c->kind == HN_COLL_ALLGATHER)
                    in = out + (size_t)me * c->count * es;
                else if (c->kind == HN_COLL_REDUCE_SCATTER)
                    out = in + (size_t)me * c->count * es;
            } else {
                CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, ni * es + 1, (void **)&in), HN_OK);
                CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, no * es + 1, (void **)&out), HN_OK);
                h->base[r][ci][0] = in;
                h->base[r][ci][1] = out;
                for (size_t i = 0; i < no; i++)
                    hn_store(c->dt, out, (int64_t)i, NAN);
            }
            for (size_t i = 0; i < ni; i++)
                hn_store(c->dt, in, (int64_t)i, xv(ci, me, i, c->redop));
            h->in[r][ci] = in;
            h->out[r][ci] = out;
        }
    }
}

typedef struct issuer {
    world *h;
    int rank;
} issuer;

/* One rank's whole sequence, back to back: no sync between calls. */
static void *issue_main(void *arg)
{
    issuer *is = arg;
    world *h = is->h;
    int r = is->rank;
    for (int ci = 0; ci < h->ncalls && h->st[r] == HN_OK; ci++) {
        const call *c = &h->calls[ci];
        int me = member_of(h, c->team, r);
        hn_origin o = {&h->faults.sink, r, ci, NULL, NULL};
        hn_coll_args a;
        if (me < 0)
            continue;
        memset(&a, 0, sizeof(a));
        a.kind = c->kind;
        a.send = h->in[r][ci];
        a.recv = h->out[r][ci];
        a.count = c->count;
        a.dtype = c->dt;
        a.redop = c->redop;
        a.get = c->algo;
        h->st[r] = hn_comm_ll.collective(h->team[c->team], me, &a, h->s[r][h->stream[r][ci]], &o);
        if (h->st[r] == HN_OK && h->scribble[r][ci] && !h->inplace[r][ci])
            h->st[r] = D->memcpy_async(h->in[r][ci], h->garbage[r],
                                       in_elems(c, h->tn[c->team]) * (size_t)hn_dtype_size(c->dt),
                                       h->s[r][h->stream[r][ci]], &o);
    }
    return NULL;
}

static void issue_all(world *h)
{
    pthread_t th[MAXR];
    issuer is[MAXR];
    for (int r = 0; r < h->n; r++) {
        is[r] = (issuer){h, r};
        if (r != h->absent)
            pthread_create(&th[r], NULL, issue_main, &is[r]);
    }
    for (int r = 0; r < h->n; r++)
        if (r != h->absent)
            pthread_join(th[r], NULL);
    for (int r = 0; r < h->n; r++)
        for (int k = 0; k < NSTREAMS; k++)
            D->stream_sync(h->s[r][k]);
}

static const char *algo_name(int a) { return a == 1 ? "one-shot" : a == 2 ? "two-shot" : "auto"; }

/* Every output of every call on every rank, exactly; 0 if all are right. */
static int check(world *h, const char *what)
{
    int wrong = 0;
    for (int ci = 0; ci < h->ncalls && !wrong; ci++) {
        const call *c = &h->calls[ci];
        int n = h->tn[c->team];
        for (int r = 0; r < h->n && !wrong; r++) {
            int me = member_of(h, c->team, r);
            size_t no = out_elems(c, n);
            if (me < 0)
                continue;
            for (size_t i = 0; i < no; i++) {
                float got = load_dt(c->dt, h->out[r][ci], i), w = want(c, ci, n, me, i);
                /* the reference rounded as the output's dtype stores it */
                char tmp[8];
                hn_store(c->dt, tmp, 0, w);
                w = load_dt(c->dt, tmp, 0);
                if (!(got == w)) {
                    fprintf(stderr, "\n  %s: call %d (%s %s %s op %d, team %d of %d, count %zu%s), rank %d "
                            "[%zu]: %g, want %g\n", what, ci, hn_coll_name(c->kind), algo_name(c->algo),
                            hn_dtype_name(c->dt), c->redop, c->team, n, c->count,
                            h->inplace[r][ci] ? ", in place" : "", r, i, got, w);
                    wrong = 1;
                    break;
                }
            }
        }
    }
    return wrong;
}

static const size_t counts[] = {1, 3, 8, 61, 1000, 4099, 9000, 30001};
static const hn_dtype dts[] = {HN_F32, HN_BF16, HN_F16};

/* A random call on team t: kind, algorithm, dtype, reduction, size. */
static call random_call(uint64_t *seed, int t, size_t most)
{
    call c;
    c.team = t;
    c.kind = (hn_coll_kind[]){HN_COLL_ALLREDUCE, HN_COLL_ALLGATHER, HN_COLL_REDUCE_SCATTER}[hn_splitmix64(seed) % 3];
    c.algo = (int)(hn_splitmix64(seed) % 3);
    c.dt = dts[hn_splitmix64(seed) % 3];
    c.redop = (int)(hn_splitmix64(seed) % 5);
    do
        c.count = counts[hn_splitmix64(seed) % HN_ARRAY_LEN(counts)];
    while (c.count > most);
    return c;
}

/* n ranks, one team of all: every kind x algorithm x dtype once in order,
 * then random calls; everything back to back. */
static void one_team(int n, uint64_t seed)
{
    world h;
    int ranks[MAXR];
    char what[64];
    start(&h, n, 60, 30);
    for (int r = 0; r < n; r++)
        ranks[r] = r;
    add_team(&h, ranks, n, 30001 * 4);
    for (int k = 0; k < 3; k++)
        for (int algo = 0; algo < 3; algo++)
            for (int d = 0; d < 3; d++) {
                call *c = &h.calls[h.ncalls++];
                c->team = 0;
                c->kind = (hn_coll_kind[]){HN_COLL_ALLREDUCE, HN_COLL_ALLGATHER, HN_COLL_REDUCE_SCATTER}[k];
                c->algo = algo;
                c->dt = dts[d];
                c->redop = (k * 3 + algo + d) % 5;
                c->count = counts[(k + algo * 3 + d * 5) % HN_ARRAY_LEN(counts)];
            }
    while (h.ncalls < 36)
        h.calls[h.ncalls++] = random_call(&seed, 0, n > 4 ? 9000 : 30001);
    prepare(&h, seed);
    issue_all(&h);
    CU_ASSERT_EQUAL(h.faults.first, HN_OK);
    if (h.faults.first != HN_OK)
        fprintf(stderr, "\n  %d ranks: %s\n", n, h.faults.err);
    for (int r = 0; r < n; r++)
        CU_ASSERT_EQUAL(h.st[r], HN_OK);
    snprintf(what, sizeof(what), "%d ranks, one team", n);
    CU_ASSERT_FALSE(check(&h, what));
    stop(&h);
}

static void test_one_team(void)
{
    for (int n = 1; n <= MAXR; n++)
        one_team(n, 0x1234u + (uint64_t)n);
}

/* Several teams at once on 8 (or 6) ranks: all, evens, odds, and four
 * members in reverse order; calls of the teams interleaved, each rank on
 * two streams. */
static void several(int n, uint64_t seed)
{
    world h;
    int all[MAXR], evens[MAXR], odds[MAXR], rev[4] = {n - 1, n - 2, n - 3, n - 4}, ne = 0, no = 0;
    char what[64];
    start(&h, n, 60, 30);
    for (int r = 0; r < n; r++) {
        all[r] = r;
        if (r % 2)
            odds[no++] = r;
        else
            evens[ne++] = r;
    }
    add_team(&h, all, n, 9000 * 4);
    add_team(&h, evens, ne, 9000 * 4);
    add_team(&h, odds, no, 9000 * 4);
    add_team(&h, rev, 4, 9000 * 4);
    while (h.ncalls < MAXCALLS) {
        int t = (int)(hn_splitmix64(&seed) % 4);
        h.calls[h.ncalls++] = random_call(&seed, t, 9000);
    }
    prepare(&h, seed);
    issue_all(&h);
    CU_ASSERT_EQUAL(h.faults.first, HN_OK);
    if (h.faults.first != HN_OK)
        fprintf(stderr, "\n  %d ranks, several teams: %s\n", n, h.faults.err);
    snprintf(what, sizeof(what), "%d ranks, several teams", n);
    CU_ASSERT_FALSE(check(&h, what));
    stop(&h);
}

static void test_several_teams(void)
{
    several(8, 99);
    several(6, 7);
}

/* The same world again and again: generations go on, sizes change. */
static void test_repeated(void)
{
    world h;
    int ranks[3] = {0, 1, 2};
    uint64_t seed = 5;
    start(&h, 3, 60, 0);
    add_team(&h, ranks, 3, 4099 * 4);
    for (int rep = 0; rep < 6; rep++) {
        char what[64];
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < h.ncalls; c++)
                for (int k = 0; k < 2; k++) {
                    D->mem_free(h.ctx, r, h.base[r][c][k]);
                    h.base[r][c][k] = NULL;
                }
        h.ncalls = 0;
        while (h.ncalls < 12)
            h.calls[h.ncalls++] = random_call(&seed, 0, 4099);
        prepare(&h, seed);
        issue_all(&h);
        CU_ASSERT_EQUAL(h.faults.first, HN_OK);
        snprintf(what, sizeof(what), "repetition %d", rep);
        CU_ASSERT_FALSE(check(&h, what));
    }
    stop(&h);
}

/* What the communicator refuses, by name: a registered buffer too small
 * for one-shot (two-shot needs none for allgather), a dtype it cannot
 * reduce, another collective, send/recv. */
static void test_refusals(void)
{
    world h;
    int ranks[2] = {0, 1};
    hn_origin o;
    hn_coll_args a;
    float buf[80];
    start(&h, 2, 60, 0);
    add_team(&h, ranks, 2, 16);
    o = (hn_origin){&h.faults.sink, 0, 0, NULL, NULL};
    memset(&a, 0, sizeof(a));
    a.kind = HN_COLL_ALLREDUCE;
    a.send = a.recv = buf;
    a.count = 80; /* 320 bytes; 2 x 16 reserved, rounded up to 256 */
    a.dtype = HN_F32;
    a.get = HN_LL_ONESHOT;
    CU_ASSERT_EQUAL(hn_comm_ll.collective(h.team[0], 0, &a, h.s[0][0], &o), HN_ERR_RUNTIME);
    if (strstr(h.faults.err, "256 bytes of registered buffer reserved, 320 needed") == NULL)
        fprintf(stderr, "\n  %s\n", h.faults.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(h.faults.err, "256 bytes of registered buffer reserved, 320 needed"));
    a.dtype = HN_I32;
    CU_ASSERT_EQUAL(hn_comm_ll.collective(h.team[0], 0, &a, h.s[0][0], &o), HN_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(hn_comm_ll_refuses(HN_COLL_ALLREDUCE, HN_I32, 2));
    CU_ASSERT_PTR_NULL(hn_comm_ll_refuses(HN_COLL_ALLGATHER, HN_I32, 2));
    CU_ASSERT_PTR_NOT_NULL(hn_comm_ll_refuses(HN_COLL_BROADCAST, HN_F32, 2));
    CU_ASSERT_PTR_NOT_NULL(hn_comm_ll_refuses(HN_COLL_ALLREDUCE, HN_F32, 9));
    CU_ASSERT_EQUAL(hn_comm_ll.p2p(h.w, 0, NULL, 0, h.s[0][0], &o), HN_ERR_UNSUPPORTED);
    stop(&h);
}

/* Rank 2 never comes: the others time out naming it (and only it: the
 * deadline counts from the last progress, so a slow present rank is not
 * taken for the absent one), within a bounded time. */
static void absent(int algo)
{
    world h;
    int ranks[4] = {0, 1, 2, 3};
    double t0 = hn_now();
    start(&h, 4, 2.0, 0);
    add_team(&h, ranks, 4, 1000 * 4);
    h.calls[0] = (call){0, HN_COLL_ALLREDUCE, algo, HN_F32, HN_REDUCE_SUM, 1000};
    h.calls[1] = (call){0, HN_COLL_ALLGATHER, algo, HN_BF16, HN_REDUCE_SUM, 100};
    h.ncalls = 2;
    h.absent = 2;
    prepare(&h, 3);
    issue_all(&h);
    CU_ASSERT(hn_now() - t0 < 30);
    CU_ASSERT_EQUAL(h.faults.first, HN_ERR_TIMEOUT);
    if (strstr(h.faults.err, "rank 2 never arrived") == NULL)
        fprintf(stderr, "\n  absent rank 2 (%s): first error '%s'\n", algo_name(algo), h.faults.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(h.faults.err, "rank 2 never arrived"));
    hn_comm_ll.abort(h.w);
    stop(&h);
}

static void test_absent_rank(void)
{
    absent(HN_LL_ONESHOT);
    absent(HN_LL_TWOSHOT);
}

/* Another rank failed (the abort flag), or the communicator was aborted
 * (the members' abort words, as after a GPU failure): waiting members
 * leave at once, without a timeout of their own. */
static void aborted(int words)
{
    world h;
    int ranks[3] = {0, 1, 2};
    start(&h, 3, 600, 0);
    add_team(&h, ranks, 3, 64 * 4);
    h.calls[0] = (call){0, HN_COLL_ALLREDUCE, 0, HN_F32, HN_REDUCE_SUM, 64};
    h.ncalls = 1;
    h.absent = 1;
    prepare(&h, 3);
    {
        pthread_t th[3];
        issuer is[3] = {{&h, 0}, {&h, 1}, {&h, 2}};
        pthread_create(&th[0], NULL, issue_main, &is[0]);
        pthread_create(&th[2], NULL, issue_main, &is[2]);
        pthread_join(th[0], NULL);
        pthread_join(th[2], NULL);
    }
    if (words)
        hn_comm_ll.abort(h.w);
    else
        h.faults.sink.report(h.faults.sink.ctx, 1, 0, HN_ERR_RUNTIME, "injected");
    for (int r = 0; r < 3; r++) /* returns: nobody waits any more */
        D->stream_sync(h.s[r][h.stream[r][0]]);
    CU_ASSERT_EQUAL(h.faults.first, words ? HN_OK : HN_ERR_RUNTIME);
    stop(&h);
}

static void test_abort(void)
{
    aborted(0);
    aborted(1);
}

/* The protocol's pure parts: slices and chunks cover their range once, in
 * whole vectors; the registered buffer a call needs; the phases. */
static void test_protocol_tables(void)
{
    int ph[HN_LL_MAX_PHASES];
    for (size_t len = 0; len < 3000; len += 37)
        for (int blocks = 1; blocks <= HN_LL_MAX_BLOCKS; blocks *= 3)
            for (size_t es = 2; es <= 4; es += 2) {
                size_t at = 0, lo, hi;
                for (int b = 0; b < blocks; b++) {
                    hn_ll_slice(len, es, b, blocks, &lo, &hi);
                    CU_ASSERT_EQUAL(lo, at);
                    CU_ASSERT(hi >= lo);
                    CU_ASSERT(lo * es % HN_LL_VEC == 0 || lo == len);
                    at = hi;
                }
                CU_ASSERT_EQUAL(at, len);
                for (int n = 1; n <= 8; n++) {
                    at = 0;
                    for (int p = 0; p < n; p++) {
                        hn_ll_chunk(len, n, es, p, &lo, &hi);
                        CU_ASSERT_EQUAL(lo, at);
                        CU_ASSERT(lo * es % HN_LL_VEC == 0 || lo == len);
                        at = hi;
                    }
                    CU_ASSERT_EQUAL(at, len);
                }
            }
    CU_ASSERT_EQUAL(hn_ll_stage_need(HN_LL_REDUCE_SCATTER, HN_LL_ONESHOT, 100, 2, 4), 800);
    CU_ASSERT_EQUAL(hn_ll_stage_need(HN_LL_ALLGATHER, HN_LL_TWOSHOT, 100, 2, 4), 0);
    CU_ASSERT_EQUAL(hn_ll_stage_need(HN_LL_ALLREDUCE, HN_LL_TWOSHOT, 100, 4, 4), 112); /* chunks of 28 */
    CU_ASSERT_EQUAL(hn_ll_blocks(HN_LL_ALLREDUCE, HN_LL_ONESHOT, 16384, 2, 2), 4);
    CU_ASSERT_EQUAL(hn_ll_blocks(HN_LL_ALLREDUCE, HN_LL_ONESHOT, 1 << 24, 2, 2), HN_LL_MAX_BLOCKS);
    CU_ASSERT_EQUAL(hn_ll_phases(HN_LL_ALLREDUCE, HN_LL_ONESHOT, ph), 4);
    CU_ASSERT_EQUAL(ph[1], HN_LL_SIGNAL_A);
    CU_ASSERT_EQUAL(hn_ll_phases(HN_LL_ALLREDUCE, HN_LL_TWOSHOT, ph), 7);
    CU_ASSERT_EQUAL(ph[6], HN_LL_GATHER_CHUNKS);
    CU_ASSERT_EQUAL(hn_ll_phases(HN_LL_ALLGATHER, HN_LL_TWOSHOT, ph), 6);
    CU_ASSERT_EQUAL(ph[5], HN_LL_WAIT_B);
    CU_ASSERT_TRUE(hn_ll_reached(1, 0xffffffffu)); /* wrap-safe */
    CU_ASSERT_FALSE(hn_ll_reached(0xffffffffu, 1));
}

void hn_suite_comm_ll(void)
{
    static CU_TestInfo tests[] = {
        {"slices, chunks, registered buffers, phases", test_protocol_tables},
        {"every collective, algorithm, dtype and reduction, in place or not, back to back, 1..8 ranks",
         test_one_team},
        {"several teams at once, interleaved on two streams per rank", test_several_teams},
        {"repeated sequences on one team: generations go on, sizes change", test_repeated},
        {"what the latency path refuses", test_refusals},
        {"an absent rank times out with its name", test_absent_rank},
        {"an abort releases waiting members", test_abort},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("comm/comm_ll", tests);
}

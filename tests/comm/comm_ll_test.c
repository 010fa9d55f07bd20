/* Tests of src/comm/ll/comm_ll.c (and the protocol it hands its kernels,
 * src/comm/ll/ll.h, run here by the CPU emulation src/comm/ll/ll_host.c)
 * through the device, compute and comm tables, one issuing thread per
 * rank: every collective and the fused allreduce + residual + RMSNorm at
 * 1..8 ranks, one-shot, two-shot and the communicator's choice,
 * f32/bf16/f16, every reduction, in place and out of place, sizes from one
 * element to many segments; each rank issues its whole sequence back to
 * back with no host sync (sizes, kinds, dtypes and streams changing from
 * call to call, random stream delays), several teams at once (overlapping,
 * members in another order than their ranks); random inputs, poisoned
 * outputs, then every output against a reference (reductions exact, the
 * norm in double) and the same bits on every member. The protocol's pure
 * parts: every byte pushed into a lane is read by its receiver, every
 * output element written once, whatever segments the members cut. A rank
 * that never comes times out by name; an abort releases waiting members.
 * Members join and reserve on their own threads, at once (they exchange
 * their addresses). Split: the ranks divided between two communicator
 * instances over one world, as two processes would hold them, each
 * allowed device ops on its own ranks only — every call still right, and
 * an abort touches only its own members. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/ll/ll.h"
#include "world/world.h"
#include "ll_ref.h"
#include "../test.h"

#define MAXR 8
#define MAXT 4 /* teams of a world */
#define MAXCALLS 200
#define NSTREAMS 2
#define GARBAGE ((size_t)1 << 20)
#define EPS 1e-5f

static const hn_device_ops *D = &hn_device_host;

typedef struct call {
    int team;
    hn_coll_kind kind; /* the norm: an allreduce with norm = 1 */
    int norm;
    hn_coll_algo algo; /* auto: the communicator's choice */
    hn_dtype dt;
    hn_redop redop;
    size_t count;  /* as hn_coll_args; the norm: rows * hidden */
    size_t hidden; /* the norm */
} call;

/* One rank's buffers of one call: input, output (equal in place), the
 * norm's residual, y and weight; what was allocated; the input's copy. */
typedef struct bufs {
    char *in, *out, *res, *rout, *w;
    char *base[5];
    char *hin;
    int inplace, stream, scribble;
} bufs;

/* What one "process" of a split world may touch: device ops on ranks
 * [first, first + n) only (others are counted in *bad and refused). */
typedef struct part {
    void *ctx;
    int first, n;
    int *bad;
} part;

typedef struct world {
    void *ctx;
    hn_comm_world *w;
    /* split > 0: ranks split.. n-1 go through w2 (and its teams), ranks
     * 0..split-1 through w; both on xw, the device ops wrapped in ops[] */
    int split;
    hn_comm_world *w2;
    hn_comm_team *team2[MAXT];
    hn_world *xw;
    hn_device_ops ops[2];
    part parts[2];
    int bad; /* device ops for a rank of the other part */
    hn_test_faults faults;
    int n, nteams;
    int tn[MAXT], tranks[MAXT][MAXR];
    hn_comm_team *team[MAXT];
    hn_dstream *s[MAXR][NSTREAMS];
    int ncalls;
    call calls[MAXCALLS];
    char *hres[MAXCALLS], *hw[MAXCALLS]; /* the norm's residual (replicated) and weight */
    bufs b[MAXR][MAXCALLS];
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

static int outside(const part *p, int dev)
{
    if (dev >= p->first && dev < p->first + p->n)
        return 0;
    __atomic_add_fetch(p->bad, 1, __ATOMIC_RELAXED);
    return 1;
}

static hn_status_t part_mem_alloc(void *ctx, int dev, size_t bytes, void **ptr)
{
    part *p = ctx;
    return outside(p, dev) ? HN_ERR_INVALID : D->mem_alloc(p->ctx, dev, bytes, ptr);
}

static void part_mem_free(void *ctx, int dev, void *ptr)
{
    part *p = ctx;
    if (!outside(p, dev))
        D->mem_free(p->ctx, dev, ptr);
}

static hn_status_t part_copy_to_device(void *ctx, int dev, void *dst, const void *src, size_t n)
{
    part *p = ctx;
    return outside(p, dev) ? HN_ERR_INVALID : D->copy_to_device(p->ctx, dev, dst, src, n);
}

static hn_status_t part_copy_to_host(void *ctx, int dev, void *dst, const void *src, size_t n)
{
    part *p = ctx;
    return outside(p, dev) ? HN_ERR_INVALID : D->copy_to_host(p->ctx, dev, dst, src, n);
}

static hn_status_t part_event_create(void *ctx, int dev, hn_devent **e)
{
    part *p = ctx;
    return outside(p, dev) ? HN_ERR_INVALID : D->event_create(p->ctx, dev, e);
}

static hn_status_t part_stream_create(void *ctx, int dev, hn_dstream **s)
{
    part *p = ctx;
    return outside(p, dev) ? HN_ERR_INVALID : D->stream_create(p->ctx, dev, s);
}

/* n ranks; split > 0: two communicator instances, ranks 0..split-1 and
 * split..n-1, over one world (as two processes), each with device ops
 * for its own ranks only. */
static world *start_split(int n, double timeout, double delay_us, int split)
{
    hn_device_setup dc = {n, delay_us, 7, NULL, 0, NULL, 0, NULL, 0};
    hn_comm_setup cc;
    world *h = calloc(1, sizeof(*h));
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    h->n = n;
    h->absent = -1;
    h->split = split;
    hn_test_faults_init(&h->faults, timeout);
    dc.sink = &h->faults.sink;
    CU_ASSERT_EQUAL_FATAL(D->init(&dc, &h->ctx), HN_OK);
    memset(&cc, 0, sizeof(cc));
    cc.nranks = n;
    cc.dev = D;
    cc.dev_ctx = h->ctx;
    cc.compute = &hn_compute_host;
    cc.sink = &h->faults.sink;
    if (split > 0) {
        CU_ASSERT_EQUAL_FATAL(hn_world_create_local(n, timeout, 0, &h->xw), HN_OK);
        cc.world = h->xw;
        for (int k = 0; k < 2; k++) {
            h->parts[k] = (part){h->ctx, k == 0 ? 0 : split, k == 0 ? split : n - split, &h->bad};
            h->ops[k] = *D;
            h->ops[k].mem_alloc = part_mem_alloc;
            h->ops[k].mem_free = part_mem_free;
            h->ops[k].copy_to_device = part_copy_to_device;
            h->ops[k].copy_to_host = part_copy_to_host;
            h->ops[k].event_create = part_event_create;
            h->ops[k].stream_create = part_stream_create;
        }
        cc.dev = &h->ops[1];
        cc.dev_ctx = &h->parts[1];
        CU_ASSERT_EQUAL_FATAL(hn_comm_ll.init(&cc, &h->w2), HN_OK);
        cc.dev = &h->ops[0];
        cc.dev_ctx = &h->parts[0];
    }
    CU_ASSERT_EQUAL_FATAL(hn_comm_ll.init(&cc, &h->w), HN_OK);
    for (int r = 0; r < n; r++) {
        for (int k = 0; k < NSTREAMS; k++)
            CU_ASSERT_EQUAL_FATAL(D->stream_create(h->ctx, r, &h->s[r][k]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, GARBAGE, (void **)&h->garbage[r]), HN_OK);
        memset(h->garbage[r], 0x5b, GARBAGE);
    }
    return h;
}

static world *start(int n, double timeout, double delay_us) { return start_split(n, timeout, delay_us, 0); }

/* Team t as rank r's process holds it. */
static hn_comm_team *team_of(const world *h, int t, int r)
{
    return h->split > 0 && r >= h->split ? h->team2[t] : h->team[t];
}

/* The chunk bytes a team reserves for call c (what the runtime computes). */
static size_t reserve_of(const call *c, int n)
{
    size_t es = (size_t)hn_dtype_size(c->dt);
    if (c->norm)
        return hn_comm_ll_norm_reserve(c->count / c->hidden, c->hidden, c->dt, n);
    return (c->kind == HN_COLL_ALLREDUCE ? (c->count + (size_t)n - 1) / (size_t)n : c->count) * es;
}

typedef struct joiner {
    world *h;
    int t, me;
    size_t bytes;
    hn_status_t st;
} joiner;

static void *join_main(void *arg)
{
    joiner *j = arg;
    int r = j->h->tranks[j->t][j->me];
    hn_origin o = {&j->h->faults.sink, r, 0, NULL, NULL};
    j->st = hn_comm_ll.team_join(team_of(j->h, j->t, r), j->me, &o);
    if (j->st == HN_OK)
        j->st = hn_comm_ll.team_reserve(team_of(j->h, j->t, r), j->me, j->bytes, &o);
    return NULL;
}

/* A team of the given ranks (member i is ranks[i]), joined and reserved
 * for chunks of `bytes` and every call already listed on it, as the
 * runtime does between runs: created in every communicator instance,
 * joined by each member on its own thread, at once. */
static void add_team(world *h, const int *ranks, int n, size_t bytes)
{
    int t = h->nteams++;
    pthread_t th[MAXR];
    joiner j[MAXR];
    h->tn[t] = n;
    memcpy(h->tranks[t], ranks, (size_t)n * sizeof(int));
    for (int c = 0; c < h->ncalls; c++)
        if (h->calls[c].team == t)
            bytes = HN_MAX(bytes, reserve_of(&h->calls[c], n));
    CU_ASSERT_EQUAL_FATAL(hn_comm_ll.team_create(h->w, ranks, n, &h->team[t]), HN_OK);
    if (h->split > 0)
        CU_ASSERT_EQUAL_FATAL(hn_comm_ll.team_create(h->w2, ranks, n, &h->team2[t]), HN_OK);
    for (int i = 0; i < n; i++) {
        j[i] = (joiner){h, t, i, bytes, HN_ERR_RUNTIME};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, join_main, &j[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        if (j[i].st != HN_OK)
            fprintf(stderr, "\n  rank %d joins team %d: %s: %s", ranks[i], t, hn_status_string(j[i].st),
                    h->faults.err);
        CU_ASSERT_EQUAL_FATAL(j[i].st, HN_OK);
    }
}

static void free_calls(world *h)
{
    for (int c = 0; c < h->ncalls; c++) {
        for (int r = 0; r < h->n; r++) {
            bufs *b = &h->b[r][c];
            for (int k = 0; k < 5; k++)
                D->mem_free(h->ctx, r, b->base[k]);
            free(b->hin);
            memset(b, 0, sizeof(*b));
        }
        free(h->hres[c]);
        free(h->hw[c]);
        h->hres[c] = h->hw[c] = NULL;
    }
    h->ncalls = 0;
}

static void stop(world *h)
{
    for (int r = 0; r < h->n; r++)
        for (int k = 0; k < NSTREAMS; k++)
            D->stream_sync(h->s[r][k]);
    for (int t = 0; t < h->nteams; t++) {
        hn_comm_ll.team_destroy(h->team[t]);
        if (h->split > 0)
            hn_comm_ll.team_destroy(h->team2[t]);
    }
    hn_comm_ll.fini(h->w);
    if (h->split > 0)
        hn_comm_ll.fini(h->w2);
    hn_world_destroy(h->xw);
    free_calls(h);
    for (int r = 0; r < h->n; r++) {
        for (int k = 0; k < NSTREAMS; k++)
            D->stream_destroy(h->s[r][k]);
        D->mem_free(h->ctx, r, h->garbage[r]);
    }
    D->fini(h->ctx);
    hn_test_faults_fini(&h->faults);
    free(h);
}

static size_t in_elems(const call *c, int n) { return c->kind == HN_COLL_REDUCE_SCATTER ? c->count * n : c->count; }
static size_t out_elems(const call *c, int n) { return c->kind == HN_COLL_ALLGATHER ? c->count * n : c->count; }

static char *alloc(world *h, int r, bufs *b, int k, size_t bytes)
{
    CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, bytes + 1, (void **)&b->base[k]), HN_OK);
    return b->base[k];
}

static void poison(hn_dtype dt, char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hn_store(dt, p, (int64_t)i, NAN);
}

/* Buffers of every call on every rank that takes part: inputs random,
 * outputs poisoned (NaN), in place or not as the rank likes. */
static void prepare(world *h, uint64_t seed)
{
    for (int ci = 0; ci < h->ncalls; ci++) {
        const call *c = &h->calls[ci];
        int n = h->tn[c->team];
        size_t es = (size_t)hn_dtype_size(c->dt), ni = in_elems(c, n), no = out_elems(c, n);
        if (c->norm) {
            h->hres[ci] = malloc(c->count * es);
            h->hw[ci] = malloc(c->hidden * es);
            hn_llt_fill(c->dt, 0, 0, h->hres[ci], c->count, &seed);
            for (size_t j = 0; j < c->hidden; j++)
                hn_store(c->dt, h->hw[ci], (int64_t)j, 0.5 + (double)(hn_splitmix64(&seed) % 8) / 4);
        }
        for (int r = 0; r < h->n; r++) {
            int me = member_of(h, c->team, r);
            bufs *b = &h->b[r][ci];
            if (me < 0)
                continue;
            b->inplace = (int)(hn_splitmix64(&seed) % 3 == 0);
            b->stream = (int)(hn_splitmix64(&seed) % NSTREAMS);
            b->scribble = (int)(hn_splitmix64(&seed) % 2);
            b->hin = malloc(ni * es);
            hn_llt_fill(c->dt, c->redop, 0, b->hin, ni, &seed);
            if (b->inplace) {
                /* allgather: the input is the member's chunk of the output;
                 * reduce_scatter: the output is its chunk of the input */
                size_t big = ni > no ? ni : no;
                b->in = b->out = alloc(h, r, b, 0, big * es);
                poison(c->dt, b->out, big);
                if (c->kind == HN_COLL_ALLGATHER)
                    b->in = b->out + (size_t)me * c->count * es;
                else if (c->kind == HN_COLL_REDUCE_SCATTER)
                    b->out = b->in + (size_t)me * c->count * es;
            } else {
                b->in = alloc(h, r, b, 0, ni * es);
                b->out = alloc(h, r, b, 1, no * es);
                poison(c->dt, b->out, no);
            }
            memcpy(b->in, b->hin, ni * es);
            if (!c->norm)
                continue;
            b->res = alloc(h, r, b, 2, c->count * es);
            memcpy(b->res, h->hres[ci], c->count * es);
            b->rout = b->res;
            if (!b->inplace) {
                b->rout = alloc(h, r, b, 3, c->count * es);
                poison(c->dt, b->rout, c->count);
            }
            b->w = alloc(h, r, b, 4, c->hidden * es);
            memcpy(b->w, h->hw[ci], c->hidden * es);
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
        const bufs *b = &h->b[r][ci];
        int me = member_of(h, c->team, r);
        hn_origin o = {&h->faults.sink, r, ci, NULL, NULL};
        hn_dstream *s = h->s[r][b->stream];
        if (me < 0)
            continue;
        if (c->norm) {
            hn_norm_args a = {b->in, b->out, b->res, b->rout, b->w, c->count / c->hidden, c->hidden,
                              c->dt, EPS, c->redop, c->algo};
            h->st[r] = hn_comm_ll_allreduce_norm(team_of(h, c->team, r), me, &a, s, &o);
        } else {
            hn_coll_args a;
            memset(&a, 0, sizeof(a));
            a.kind = c->kind;
            a.send = b->in;
            a.recv = b->out;
            a.count = c->count;
            a.dtype = c->dt;
            a.redop = c->redop;
            a.algo = c->algo;
            h->st[r] = hn_comm_ll.collective(team_of(h, c->team, r), me, &a, s, &o);
        }
        /* afterwards the rank's stream overwrites its input (as a program
         * reusing the buffer would) */
        if (h->st[r] == HN_OK && b->scribble && !b->inplace)
            h->st[r] = D->memcpy_async(b->in, h->garbage[r],
                                       in_elems(c, h->tn[c->team]) * (size_t)hn_dtype_size(c->dt), s, &o);
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

static const char *algo_name(hn_coll_algo a)
{
    return a == HN_ALGO_ONESHOT ? "one-shot" : a == HN_ALGO_TWOSHOT ? "two-shot" : "auto";
}

/* Output element i of call ci on member me; 1 if it is right. scale:
 * the norm's factor of i's row (from y as the member stored it). */
static int right(const world *h, int ci, int me, const bufs *b, size_t i, double scale, double *want)
{
    const call *c = &h->calls[ci];
    int n = h->tn[c->team];
    size_t es = (size_t)hn_dtype_size(c->dt);
    const void *in[MAXR];
    for (int p = 0; p < n; p++)
        in[p] = h->b[h->tranks[c->team][p]][ci].hin;
    if (c->kind == HN_COLL_ALLGATHER) {
        *want = hn_load(c->dt, in[i / c->count], (int64_t)(i % c->count));
        return memcmp(b->out + i * es, (const char *)in[i / c->count] + i % c->count * es, es) == 0;
    }
    if (!c->norm) {
        *want = hn_llt_reduce(c->dt, c->redop, in, n, c->kind == HN_COLL_REDUCE_SCATTER ? me * c->count : 0, NULL, i);
        return hn_llt_same(c->dt, b->out, i, *want, 0);
    }
    *want = hn_llt_reduce(c->dt, c->redop, in, n, 0, h->hres[ci], i);
    if (!hn_llt_same(c->dt, b->rout, i, *want, 0))
        return 0;
    *want = hn_load(c->dt, b->rout, (int64_t)i) * hn_load(c->dt, h->hw[ci], (int64_t)(i % c->hidden)) * scale;
    return hn_llt_same(c->dt, b->out, i, *want, 1);
}

/* Every output of every call on every rank, and the same bits on every
 * member of an allreduce (and norm); 0 if all are right. */
static int check(world *h, const char *what)
{
    for (int ci = 0; ci < h->ncalls; ci++) {
        const call *c = &h->calls[ci];
        int n = h->tn[c->team], first = h->tranks[c->team][0];
        size_t es = (size_t)hn_dtype_size(c->dt), no = out_elems(c, n);
        for (int r = 0; r < h->n; r++) {
            int me = member_of(h, c->team, r);
            const bufs *b = &h->b[r][ci];
            double w, scale = 0;
            if (me < 0)
                continue;
            for (size_t i = 0; i < no; i++) {
                if (c->norm && i % c->hidden == 0)
                    scale = hn_llt_norm_scale(c->dt, b->rout + i * es, c->hidden, EPS);
                if (!right(h, ci, me, b, i, scale, &w)) {
                    fprintf(stderr, "\n  %s: call %d (%s%s %s %s op %d, team %d of %d, count %zu%s), rank %d [%zu]: "
                            "%g (y %g), want %g\n", what, ci, hn_coll_name(c->kind), c->norm ? " + rmsnorm" : "",
                            algo_name(c->algo), hn_dtype_name(c->dt), c->redop, c->team, n, c->count,
                            b->inplace ? ", in place" : "", r, i, hn_load(c->dt, b->out, (int64_t)i),
                            c->norm ? hn_load(c->dt, b->rout, (int64_t)i) : 0.0, w);
                    return 1;
                }
            }
            if (c->kind == HN_COLL_ALLREDUCE &&
                (memcmp(b->out, h->b[first][ci].out, no * es) != 0 ||
                 (c->norm && memcmp(b->rout, h->b[first][ci].rout, no * es) != 0))) {
                fprintf(stderr, "\n  %s: call %d: rank %d's result differs from rank %d's\n", what, ci, r, first);
                return 1;
            }
        }
    }
    return 0;
}

static const size_t counts[] = {1, 3, 8, 61, 1000, 4099, 9000, 30001};
static const size_t shapes[][2] = {{1, 7}, {3, 61}, {5, 1000}, {2, 1003}, {9, 64}, {2, 4096}}; /* rows, hidden */
static const hn_dtype dts[] = {HN_F32, HN_BF16, HN_F16};
/* the algorithms a call may name, by index */
static const hn_coll_algo algos[] = {HN_ALGO_AUTO, HN_ALGO_ONESHOT, HN_ALGO_TWOSHOT};
static const hn_coll_kind kinds[] = {HN_COLL_ALLREDUCE, HN_COLL_ALLGATHER, HN_COLL_REDUCE_SCATTER, HN_COLL_ALLREDUCE};

/* Call number k of kind index kind (3: the norm) of size index z. */
static call make_call(int t, int kind, hn_coll_algo algo, hn_dtype dt, hn_redop redop, int z)
{
    call c;
    memset(&c, 0, sizeof(c));
    c.team = t;
    c.kind = kinds[kind];
    c.norm = kind == 3;
    c.algo = algo;
    c.dt = dt;
    c.redop = redop;
    if (c.norm) {
        c.hidden = shapes[z % HN_ARRAY_LEN(shapes)][1];
        c.count = shapes[z % HN_ARRAY_LEN(shapes)][0] * c.hidden;
    } else {
        c.count = counts[z % HN_ARRAY_LEN(counts)];
    }
    return c;
}

/* A random call on team t of at most `most` elements. */
static call random_call(uint64_t *seed, int t, size_t most)
{
    call c;
    do
        c = make_call(t, (int)(hn_splitmix64(seed) % 4), algos[hn_splitmix64(seed) % 3], dts[hn_splitmix64(seed) % 3],
                      (hn_redop)(hn_splitmix64(seed) % HN_RED_COUNT), (int)(hn_splitmix64(seed) % 8));
    while (c.count > most);
    return c;
}

/* n ranks, one team of all: every kind x algorithm x dtype x reduction
 * once (sizes cycling), then random calls; everything back to back. */
static void one_team(int n, uint64_t seed)
{
    world *h = start(n, 60, 30);
    int ranks[MAXR];
    char what[64];
    for (int r = 0; r < n; r++)
        ranks[r] = r;
    for (int k = 0; k < 4; k++)
        for (int algo = 0; algo < 3; algo++)
            for (int d = 0; d < 3; d++)
                for (hn_redop op = HN_RED_SUM; op < HN_RED_COUNT; op++) {
                    int z = h->ncalls * 5 + n;
                    h->calls[h->ncalls++] = make_call(0, k, algos[algo], dts[d], op, k == 3 ? z : z % 6);
                }
    while (h->ncalls < 190)
        h->calls[h->ncalls++] = random_call(&seed, 0, n > 4 ? 9000 : 30001);
    add_team(h, ranks, n, 0);
    prepare(h, seed);
    issue_all(h);
    CU_ASSERT_EQUAL(h->faults.first, HN_OK);
    if (h->faults.first != HN_OK)
        fprintf(stderr, "\n  %d ranks: %s\n", n, h->faults.err);
    for (int r = 0; r < n; r++)
        CU_ASSERT_EQUAL(h->st[r], HN_OK);
    snprintf(what, sizeof(what), "%d ranks, one team", n);
    CU_ASSERT_FALSE(check(h, what));
    stop(h);
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
    world *h = start(n, 60, 30);
    int all[MAXR], evens[MAXR], odds[MAXR], rev[4] = {n - 1, n - 2, n - 3, n - 4}, ne = 0, no = 0;
    char what[64];
    for (int r = 0; r < n; r++) {
        all[r] = r;
        if (r % 2)
            odds[no++] = r;
        else
            evens[ne++] = r;
    }
    while (h->ncalls < 60) {
        int t = (int)(hn_splitmix64(&seed) % 4);
        h->calls[h->ncalls++] = random_call(&seed, t, 9000);
    }
    add_team(h, all, n, 9000 * 4);
    add_team(h, evens, ne, 9000 * 4);
    add_team(h, odds, no, 9000 * 4);
    add_team(h, rev, 4, 9000 * 4);
    prepare(h, seed);
    issue_all(h);
    CU_ASSERT_EQUAL(h->faults.first, HN_OK);
    if (h->faults.first != HN_OK)
        fprintf(stderr, "\n  %d ranks, several teams: %s\n", n, h->faults.err);
    snprintf(what, sizeof(what), "%d ranks, several teams", n);
    CU_ASSERT_FALSE(check(h, what));
    stop(h);
}

static void test_several_teams(void)
{
    several(8, 99);
    several(6, 7);
}

/* The same world again and again: generations go on, sizes change. */
static void test_repeated(void)
{
    world *h = start(3, 60, 0);
    int ranks[3] = {0, 1, 2};
    uint64_t seed = 5;
    add_team(h, ranks, 3, 4099 * 4);
    for (int rep = 0; rep < 6; rep++) {
        char what[64];
        free_calls(h);
        while (h->ncalls < 12) {
            call c = random_call(&seed, 0, 4099);
            if (reserve_of(&c, 3) <= 4099 * 4)
                h->calls[h->ncalls++] = c;
        }
        prepare(h, seed);
        issue_all(h);
        CU_ASSERT_EQUAL(h->faults.first, HN_OK);
        snprintf(what, sizeof(what), "repetition %d", rep);
        CU_ASSERT_FALSE(check(h, what));
    }
    stop(h);
}

/* What the communicator refuses, by name: a registered buffer too small
 * for the call, a dtype it cannot reduce, another collective, send/recv,
 * the norm's bad arguments. */
static void test_refusals(void)
{
    world *h = start(2, 60, 0);
    int ranks[2] = {0, 1};
    hn_origin o;
    hn_coll_args a;
    hn_norm_args na;
    float buf[80], y[80], w[8];
    add_team(h, ranks, 2, 16);
    o = (hn_origin){&h->faults.sink, 0, 0, NULL, NULL};
    memset(&a, 0, sizeof(a));
    a.kind = HN_COLL_ALLREDUCE;
    a.send = a.recv = buf;
    a.count = 80; /* 320 bytes: 2 lanes of 320; slots of 2 x 128 (the reserve), rounded up to 256 */
    a.dtype = HN_F32;
    a.algo = HN_ALGO_ONESHOT;
    CU_ASSERT_EQUAL(hn_comm_ll.collective(h->team[0], 0, &a, h->s[0][0], &o), HN_ERR_RUNTIME);
    if (strstr(h->faults.err, "256 bytes of registered buffer reserved, 640 needed") == NULL)
        fprintf(stderr, "\n  %s\n", h->faults.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(h->faults.err, "256 bytes of registered buffer reserved, 640 needed"));
    a.dtype = HN_I32;
    CU_ASSERT_EQUAL(hn_comm_ll.collective(h->team[0], 0, &a, h->s[0][0], &o), HN_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(hn_comm_ll_refuses(HN_COLL_ALLREDUCE, HN_I32, 2));
    CU_ASSERT_PTR_NULL(hn_comm_ll_refuses(HN_COLL_ALLGATHER, HN_I32, 2));
    CU_ASSERT_PTR_NOT_NULL(hn_comm_ll_refuses(HN_COLL_BROADCAST, HN_F32, 2));
    CU_ASSERT_PTR_NOT_NULL(hn_comm_ll_refuses(HN_COLL_ALLREDUCE, HN_F32, 9));
    CU_ASSERT_EQUAL(hn_comm_ll.p2p(h->w, 0, NULL, 0, h->s[0][0], &o), HN_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(hn_comm_ll_norm_refuses(HN_I32, 2));
    CU_ASSERT_PTR_NOT_NULL(hn_comm_ll_norm_refuses(HN_BF16, 9));
    CU_ASSERT_PTR_NULL(hn_comm_ll_norm_refuses(HN_BF16, 8));
    na = (hn_norm_args){buf, y, buf, y, w, 10, 8, HN_F32, EPS, HN_RED_SUM, HN_ALGO_ONESHOT};
    h->faults.first = HN_OK; /* the sink keeps the first error: this one next */
    CU_ASSERT_EQUAL(hn_comm_ll_allreduce_norm(h->team[0], 0, &na, h->s[0][0], &o), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(h->faults.err, "one buffer"));
    na.residual_out = buf;
    na.hidden = 0;
    CU_ASSERT_EQUAL(hn_comm_ll_allreduce_norm(h->team[0], 0, &na, h->s[0][0], &o), HN_ERR_INVALID);
    na.hidden = 8;
    na.rows = SIZE_MAX / 4;
    CU_ASSERT_EQUAL(hn_comm_ll_allreduce_norm(h->team[0], 0, &na, h->s[0][0], &o), HN_ERR_INVALID);
    na.rows = 10; /* 80 elements: more than 16 bytes reserve */
    CU_ASSERT_EQUAL(hn_comm_ll_allreduce_norm(h->team[0], 0, &na, h->s[0][0], &o), HN_ERR_RUNTIME);
    na.dtype = HN_I64;
    CU_ASSERT_EQUAL(hn_comm_ll_allreduce_norm(h->team[0], 0, &na, h->s[0][0], &o), HN_ERR_UNSUPPORTED);
    stop(h);
}

/* Rank 2 never comes: the others time out naming it (and only it: the
 * deadline counts from the last progress, so a slow present rank is not
 * taken for the absent one), within a bounded time. */
static void absent(int kind, hn_coll_algo algo)
{
    world *h = start(4, 2.0, 0);
    int ranks[4] = {0, 1, 2, 3};
    double t0 = hn_now();
    h->calls[0] = make_call(0, kind, algo, HN_F32, HN_RED_SUM, 4);
    h->calls[1] = make_call(0, 1, algo, HN_BF16, HN_RED_SUM, 3);
    h->ncalls = 2;
    h->absent = 2;
    add_team(h, ranks, 4, 1000 * 4);
    prepare(h, 3);
    issue_all(h);
    CU_ASSERT(hn_now() - t0 < 30);
    CU_ASSERT_EQUAL(h->faults.first, HN_ERR_TIMEOUT);
    if (strstr(h->faults.err, "rank 2 never arrived") == NULL)
        fprintf(stderr, "\n  absent rank 2 (kind %d, %s): first error '%s'\n", kind, algo_name(algo), h->faults.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(h->faults.err, "rank 2 never arrived"));
    hn_comm_ll.abort(h->w);
    stop(h);
}

static void test_absent_rank(void)
{
    absent(0, HN_ALGO_ONESHOT);
    absent(0, HN_ALGO_TWOSHOT);
    absent(1, HN_ALGO_ONESHOT);
    absent(2, HN_ALGO_ONESHOT);
    absent(3, HN_ALGO_TWOSHOT);
}

/* Another rank failed (the abort flag), or the communicator was aborted
 * (the members' abort words, as after a GPU failure): waiting members
 * leave at once, without a timeout of their own. */
static void aborted(int words)
{
    world *h = start(3, 600, 0);
    int ranks[3] = {0, 1, 2};
    h->calls[0] = make_call(0, 0, 0, HN_F32, HN_RED_SUM, 3);
    h->ncalls = 1;
    h->absent = 1;
    add_team(h, ranks, 3, 64 * 4);
    prepare(h, 3);
    {
        pthread_t th[3];
        issuer is[3] = {{h, 0}, {h, 1}, {h, 2}};
        pthread_create(&th[0], NULL, issue_main, &is[0]);
        pthread_create(&th[2], NULL, issue_main, &is[2]);
        pthread_join(th[0], NULL);
        pthread_join(th[2], NULL);
    }
    if (words)
        hn_comm_ll.abort(h->w);
    else
        h->faults.sink.report(h->faults.sink.ctx, 1, 0, HN_ERR_RUNTIME, "injected");
    for (int r = 0; r < 3; r++) /* returns: nobody waits any more */
        D->stream_sync(h->s[r][h->b[r][0].stream]);
    CU_ASSERT_EQUAL(h->faults.first, words ? HN_OK : HN_ERR_RUNTIME);
    stop(h);
}

static void test_abort(void)
{
    aborted(0);
    aborted(1);
}

/* The ranks split between two communicator instances over one world, as
 * two processes hold them: each instance knows only what its own members
 * did and was told in the exchanges, and may touch only its own ranks'
 * devices (a member that read a peer's struct would find it empty here).
 * Teams across the split (members in another order than their ranks) and
 * one wholly inside a part; every call right; an abort of one instance
 * releases its own waiting members and touches no rank of the other. */
static void test_split(void)
{
    {
        world *h = start_split(5, 60, 30, 2);
        int all[5] = {0, 1, 2, 3, 4}, mixed[3] = {4, 1, 3}, inside[3] = {2, 3, 4};
        uint64_t seed = 0x5eed;
        while (h->ncalls < 60) {
            int t = (int)(hn_splitmix64(&seed) % 3);
            h->calls[h->ncalls++] = random_call(&seed, t, 9000);
        }
        add_team(h, all, 5, 0);
        add_team(h, mixed, 3, 0);
        add_team(h, inside, 3, 0);
        prepare(h, seed);
        issue_all(h);
        CU_ASSERT_EQUAL(h->faults.first, HN_OK);
        if (h->faults.first != HN_OK)
            fprintf(stderr, "\n  split 2 + 3: %s\n", h->faults.err);
        for (int r = 0; r < h->n; r++)
            CU_ASSERT_EQUAL(h->st[r], HN_OK);
        CU_ASSERT_FALSE(check(h, "split 2 + 3"));
        CU_ASSERT_EQUAL(h->bad, 0);
        stop(h);
    }
    {
        world *h = start_split(4, 600, 0, 2);
        int ranks[4] = {0, 1, 2, 3};
        pthread_t th[2];
        issuer is[2];
        h->calls[0] = make_call(0, 0, 0, HN_F32, HN_RED_SUM, 3);
        h->ncalls = 1;
        add_team(h, ranks, 4, 64 * 4);
        prepare(h, 3);
        for (int r = 0; r < 2; r++) { /* the other part never issues: ranks 0 and 1 wait */
            is[r] = (issuer){h, r};
            pthread_create(&th[r], NULL, issue_main, &is[r]);
        }
        for (int r = 0; r < 2; r++)
            pthread_join(th[r], NULL);
        hn_comm_ll.abort(h->w);
        for (int r = 0; r < 2; r++) /* returns: its own members wait no more */
            D->stream_sync(h->s[r][h->b[r][0].stream]);
        CU_ASSERT_EQUAL(h->faults.first, HN_OK);
        CU_ASSERT_EQUAL(h->bad, 0);
        stop(h);
    }
}

/* Where each access unit of `elems` elements lands on the wire, as a
 * member cutting segments of seg_bytes sees it: unit widths written into
 * map (one entry per wire byte: the width of the unit covering it). */
static void map_units(const hn_ll_args *a, size_t seg_bytes, int ph, int me_as, const char *arena,
                      unsigned char *map, size_t *data_seen, int *bad)
{
    hn_ll_plan P;
    hn_ll_args x = *a;
    uint32_t g = 1;
    x.me = me_as;
    hn_ll_plan_make(&x, seg_bytes, &P);
    for (size_t k = 0; k < P.nseg; k++) {
        hn_ll_move mv;
        for (int j = 0; hn_ll_move_at(&x, &P, g, ph, k, j, &mv); j++)
            for (size_t u = 0; u < hn_ll_units(P.fmt, P.es, mv.elems); u++) {
                hn_ll_unit U;
                hn_ll_unit_at(P.fmt, P.es, mv.elems, u, &U);
                for (int i = 0; i < mv.nto; i++) /* pushed: every byte once */
                    for (int b = 0; b < U.width; b++) {
                        size_t at = (size_t)(mv.to[i] - arena) + U.wire + (size_t)b;
                        *bad += map[at] != 0;
                        map[at] = (unsigned char)U.width;
                    }
                for (int i = 0; i < (ph == HN_LL_PUSH ? 0 : mv.nfrom); i++) /* read: as pushed, then cleared */
                    for (int b = 0; b < U.width && mv.from[i] != NULL; b++) {
                        size_t at = (size_t)(mv.from[i] - arena) + U.wire + (size_t)b;
                        *bad += map[at] != U.width;
                        map[at] = 0;
                    }
                if (mv.out != NULL && data_seen != NULL)
                    *data_seen += (size_t)U.bytes;
            }
    }
}

/* The protocol's pure parts. Lanes: for every kind, algorithm, team size
 * and count, with each member cutting its own segments, every byte pushed
 * into a lane is pushed once at one width and read whole at that width by
 * its receiver (what lets a call go without a barrier, ll.h point 3), and
 * the outputs get every byte; the slot a reserve buys holds every call;
 * the wire formats; the generations. */
static void test_protocol(void)
{
    static const size_t cnts[] = {1, 2, 3, 7, 8, 9, 61, 256, 1000, 4099};
    static const int segs[] = {512, 1024, 2048, 8192};
    int ph[HN_LL_MAX_PHASES];
    for (int kind = 0; kind < 4; kind++)
        for (hn_coll_algo algo = HN_ALGO_ONESHOT; algo <= HN_ALGO_TWOSHOT; algo++)
            for (int n = 1; n <= MAXR; n++)
                for (int ci = 0; ci < HN_ARRAY_LEN(cnts); ci++)
                    for (int dt = 0; dt < 2; dt++) {
                        hn_ll_args a;
                        hn_ll_plan P;
                        unsigned char *map;
                        char *arena, *data;
                        size_t slot, seen = 0, bytes;
                        int bad = 0;
                        memset(&a, 0, sizeof(a));
                        a.kind = kind;
                        a.algo = algo;
                        a.n = n;
                        a.dtype = dt ? HN_BF16 : HN_F32;
                        a.hidden = cnts[ci] % 13 + 1;
                        a.count = kind == HN_LL_ALLREDUCE_NORM ? a.hidden * cnts[ci] : cnts[ci];
                        hn_ll_plan_make(&a, HN_LL_SEG_BYTES, &P);
                        a.slot = slot = hn_ll_need(&P, n);
                        /* the reserve's slot holds it */
                        bytes = kind == HN_LL_ALLREDUCE_NORM
                                    ? hn_comm_ll_norm_reserve(cnts[ci], a.hidden, a.dtype, n)
                                    : (kind == HN_LL_ALLREDUCE ? (a.count + (size_t)n - 1) / (size_t)n : a.count) *
                                          P.es;
                        CU_ASSERT(hn_ll_slot_bytes(n, bytes) >= slot);
                        /* the members' slots (never touched) and a buffer for
                         * inputs and outputs (addresses only) */
                        map = calloc(2 * slot * (size_t)n + 1, 1);
                        arena = malloc(2 * slot * (size_t)n + 1);
                        data = malloc((size_t)n * a.count * P.es + 1);
                        a.send = a.residual = a.weight = data;
                        a.recv = a.residual_out = data;
                        for (int p = 0; p < n; p++)
                            a.slots[p] = arena + (size_t)p * 2 * slot;
                        for (int me = 0; me < n; me++) /* pushes, each member its own cut */
                            map_units(&a, (size_t)segs[(me + ci) % 4], HN_LL_PUSH, me, arena, map, NULL, &bad);
                        for (int k = 1; k < hn_ll_phases(&a, ph); k++) /* two-shot pushes in REDUCE */
                            for (int me = 0; me < n; me++)
                                map_units(&a, (size_t)segs[(me + 3 * ci) % 4], ph[k], me, arena, map,
                                          me == 0 ? &seen : NULL, &bad);
                        CU_ASSERT_EQUAL(bad, 0); /* pushed once, read at the width it was pushed */
                        for (size_t i = 0; i < 2 * slot * (size_t)n; i++)
                            if (map[i] != 0) {
                                fprintf(stderr, "\n  kind %d %s n %d count %zu: wire byte %zu pushed, never read\n",
                                        kind, algo_name(algo), n, a.count, i);
                                CU_FAIL("a lane byte was not read");
                                break;
                            }
                        free(map);
                        free(arena);
                        free(data);
                        /* member 0's outputs: the whole output but its own
                         * allgather chunk (copied in PUSH) */
                        CU_ASSERT_EQUAL(seen, (kind == HN_LL_ALLGATHER ? (size_t)(n - 1) : 1) * a.count * P.es);
                    }
    /* formats */
    {
        int wrong = 0; /* every pair of halves: sent, it has arrived; unchanged unless all ones */
        for (uint32_t h = 0; h < 0x10000u; h++) {
            uint32_t w = h | (0xffffu - h) << 16;
            wrong += !hn_ll_arrived(hn_ll_fix(w, 2), 2) || (hn_ll_arrived(w, 2) && hn_ll_fix(w, 2) != w);
            wrong += hn_ll_arrived(h | 0xffff0000u, 2) || hn_ll_fix(h | 0xffff0000u, 2) >> 16 != 0x7fffu;
        }
        CU_ASSERT_EQUAL(wrong, 0);
    }
    CU_ASSERT_FALSE(hn_ll_arrived(0xffffffffu, 4));
    CU_ASSERT_FALSE(hn_ll_arrived(0x1234ffffu, 2));
    CU_ASSERT_TRUE(hn_ll_arrived(0x80008000u, 2)); /* -0 passes */
    CU_ASSERT_EQUAL(hn_ll_fix(0xffffffffu, 4), 0x7fffffffu);
    CU_ASSERT_TRUE(hn_ll_packet_arrived(hn_ll_pack(0xffffffffu, 7), 7));
    CU_ASSERT_FALSE(hn_ll_packet_arrived(~0ull, 7));
    CU_ASSERT_FALSE(hn_ll_packet_arrived(hn_ll_pack(1, 5), 7));
    /* generations: never 0 or all ones, parity alternating across the wrap */
    {
        uint32_t g = HN_LL_GEN_LAST - 3;
        for (int i = 0; i < 8; i++) {
            uint32_t next = hn_ll_next_gen(g);
            CU_ASSERT(next != 0 && next != ~0u);
            CU_ASSERT_NOT_EQUAL(next & 1u, g & 1u);
            g = next;
        }
        CU_ASSERT_EQUAL(hn_ll_next_gen(0), 1);
    }
    /* grids: a block per segment, within the cap */
    {
        hn_ll_args a;
        hn_ll_plan P;
        memset(&a, 0, sizeof(a));
        a.kind = HN_LL_ALLREDUCE;
        a.algo = HN_ALGO_ONESHOT;
        a.n = 2;
        a.dtype = HN_BF16;
        a.count = 8192; /* 16 KiB: two segments */
        hn_ll_plan_make(&a, HN_LL_SEG_BYTES, &P);
        CU_ASSERT_EQUAL(hn_ll_grid(&P, hn_ll_cap(132)), 2);
        a.count = (size_t)1 << 24;
        hn_ll_plan_make(&a, HN_LL_SEG_BYTES, &P);
        CU_ASSERT_EQUAL(hn_ll_grid(&P, hn_ll_cap(132)), HN_LL_MAX_BLOCKS);
        CU_ASSERT_EQUAL(hn_ll_grid(&P, 3), 3);
        CU_ASSERT_EQUAL(hn_ll_phases(&a, ph), 2);
        a.algo = HN_ALGO_TWOSHOT;
        CU_ASSERT_EQUAL(hn_ll_phases(&a, ph), 3);
        CU_ASSERT_EQUAL(ph[2], HN_LL_GATHER);
    }
}

/* The kernel of each device kind, picked from the device table's kind
 * (never its name); none for a kind this build has no kernel of. */
static void test_kernels(void)
{
    hn_device_ops other = hn_device_host;
    CU_ASSERT_PTR_EQUAL(hn_ll_kernel_for(&hn_device_host), hn_ll_host);
    other.name = "renamed"; /* the name plays no part */
    CU_ASSERT_PTR_EQUAL(hn_ll_kernel_for(&other), hn_ll_host);
#ifdef HN_HAVE_CUDA
    CU_ASSERT_PTR_EQUAL(hn_ll_kernel_for(&hn_device_cuda), hn_ll_cuda);
    other.kind = HN_DEVICE_KIND_CUDA;
    CU_ASSERT_PTR_EQUAL(hn_ll_kernel_for(&other), hn_ll_cuda);
#endif
    other.kind = (hn_device_kind)0;
    CU_ASSERT_PTR_NULL(hn_ll_kernel_for(&other));
    other.kind = (hn_device_kind)99;
    CU_ASSERT_PTR_NULL(hn_ll_kernel_for(&other));
    CU_ASSERT_PTR_NULL(hn_ll_kernel_for(NULL));
    for (int i = 0; hn_device_backends()[i] != NULL; i++)
        CU_ASSERT_PTR_NOT_NULL(hn_ll_kernel_for(hn_device_backends()[i])); /* every backend built has one */
}

void hn_suite_comm_ll(void)
{
    static CU_TestInfo tests[] = {
        {"the protocol: lanes read whole, reserves, formats, generations, grids", test_protocol},
        {"the kernel of each device kind, by the table's kind", test_kernels},
        {"every kind, algorithm, dtype and reduction, in place or not, back to back, 1..8 ranks", test_one_team},
        {"several teams at once, interleaved on two streams per rank", test_several_teams},
        {"repeated sequences on one team: generations go on, sizes change", test_repeated},
        {"what the latency path refuses", test_refusals},
        {"an absent rank times out with its name", test_absent_rank},
        {"an abort releases waiting members", test_abort},
        {"ranks split between two instances over one world: exchanged addresses, own ranks only", test_split},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("comm/comm_ll", tests);
}

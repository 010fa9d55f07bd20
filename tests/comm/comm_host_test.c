/* Tests of src/comm/host/comm_host.c: every collective on 1..8 ranks against
 * analytic references, 8 repetitions on the same buffers; teams of a 2-d
 * mesh; a send/recv ring; diverging ranks and absent ranks end in an
 * error, not a hang. Then the same communicator with every rank on a
 * communicator of its own over one world, as ranks in processes of their
 * own have it (only the world's shared regions in common): random data,
 * every collective and groups of sends at 2..4 ranks, slots and posts
 * reused past their tables, a divergence, an absent rank, a recovery.
 * The file under test is compiled in (its structs are reached to point
 * every rank's communicator at the shared regions of the first, as the
 * same sequence of allocations does in processes), renamed so that it
 * does not clash with the library's copy. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define hn_comm_host hn_comm_host_under_test
#define hn_reduce_into hn_reduce_into_under_test
#include "comm/host/comm_host.c"

#include "../test.h"

#define MAXR 8
#define C 6 /* elements per chunk */

static const hn_device_ops *D = &hn_device_host;
static const hn_comm_ops *M = &hn_comm_host;

typedef struct harness {
    void *ctx;
    hn_comm_world *w;
    hn_test_faults faults;
    hn_dstream *s[MAXR];
    float *send[MAXR], *recv[MAXR];
    int n;
} harness;

static void start(harness *h, int n, double timeout)
{
    hn_device_setup dc = {n, 0, 3, &h->faults.sink, 0, NULL, 0, NULL, 0};
    hn_comm_setup cc;
    memset(h, 0, sizeof(*h));
    h->n = n;
    hn_test_faults_init(&h->faults, timeout);
    dc.sink = &h->faults.sink;
    dc.host_delay_us = 30; /* shake out ordering bugs */
    CU_ASSERT_EQUAL_FATAL(D->init(&dc, &h->ctx), HN_OK);
    cc = (hn_comm_setup){.nranks = n, .dev = D, .dev_ctx = h->ctx, .sink = &h->faults.sink};
    CU_ASSERT_EQUAL_FATAL(M->init(&cc, &h->w), HN_OK);
    for (int r = 0; r < n; r++) {
        CU_ASSERT_EQUAL_FATAL(D->stream_create(h->ctx, r, &h->s[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, MAXR * C * sizeof(float), (void **)&h->send[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, MAXR * C * sizeof(float), (void **)&h->recv[r]), HN_OK);
    }
}

static void sync_all(harness *h)
{
    for (int r = 0; r < h->n; r++)
        D->stream_sync(h->s[r]);
}

static void stop(harness *h)
{
    sync_all(h);
    for (int r = 0; r < h->n; r++) {
        D->stream_destroy(h->s[r]);
        D->mem_free(h->ctx, r, h->send[r]);
        D->mem_free(h->ctx, r, h->recv[r]);
    }
    M->fini(h->w);
    D->fini(h->ctx);
    hn_test_faults_fini(&h->faults);
}

/* input value of rank r, position p, repetition k */
static float in_val(int r, int p, int k) { return (float)(r * 100 + p) + 0.25f * (float)k; }

static double reduce_ref(hn_redop redop, int n, int p, int k, int off)
{
    double acc = in_val(0, p + off, k);
    for (int r = 1; r < n; r++) {
        double v = in_val(r, p + off, k);
        acc = redop == HN_RED_PROD ? acc * v : redop == HN_RED_MAX ? fmax(acc, v)
            : redop == HN_RED_MIN ? fmin(acc, v) : acc + v;
        acc = (float)acc;
    }
    return redop == HN_RED_AVG ? (float)acc / (float)n : acc;
}

/* Runs one kind of collective on team = all n ranks; checks every rank. */
static void run_collective(int n, hn_coll_kind kind, hn_redop redop, int root)
{
    harness h;
    hn_comm_team *team;
    int ranks[MAXR];
    start(&h, n, 30);
    for (int r = 0; r < n; r++)
        ranks[r] = r;
    CU_ASSERT_EQUAL_FATAL(M->team_create(h.w, ranks, n, &team), HN_OK);
    for (int k = 0; k < 8; k++) { /* 8 repetitions on the same buffers */
        for (int r = 0; r < n; r++) {
            for (int p = 0; p < MAXR * C; p++) {
                h.send[r][p] = in_val(r, p, k);
                h.recv[r][p] = NAN; /* poison */
            }
        }
        for (int r = 0; r < n; r++) {
            hn_coll_args a = {kind, h.send[r], h.recv[r], C, HN_F32, redop, root, 0};
            hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
            CU_ASSERT_EQUAL(M->collective(team, r, &a, h.s[r], &o), HN_OK);
        }
        sync_all(&h);
        CU_ASSERT_EQUAL(h.faults.first, HN_OK);
        for (int r = 0; r < n; r++)
            for (int p = 0; p < MAXR * C; p++) {
                float got = h.recv[r][p];
                double want = NAN;
                int j = p / C, i = p % C;
                switch (kind) {
                case HN_COLL_ALLGATHER:
                    if (p < n * C)
                        want = in_val(j, i, k);
                    break;
                case HN_COLL_GATHER:
                    if (p < n * C && r == root)
                        want = in_val(j, i, k);
                    break;
                case HN_COLL_ALLREDUCE:
                    if (p < C)
                        want = reduce_ref(redop, n, p, k, 0);
                    break;
                case HN_COLL_REDUCE:
                    if (p < C && r == root)
                        want = reduce_ref(redop, n, p, k, 0);
                    break;
                case HN_COLL_REDUCE_SCATTER:
                    if (p < C)
                        want = reduce_ref(redop, n, p, k, r * C);
                    break;
                case HN_COLL_BROADCAST:
                    if (p < C)
                        want = in_val(root, p, k);
                    break;
                case HN_COLL_SCATTER:
                    if (p < C)
                        want = in_val(root, r * C + p, k);
                    break;
                case HN_COLL_ALL_TO_ALL:
                    if (p < n * C)
                        want = in_val(j, r * C + i, k);
                    break;
                default: break;
                }
                if (isnan(want)) {
                    CU_ASSERT_TRUE(isnan(got)); /* nothing written beyond */
                } else if (got != (float)want) {
                    fprintf(stderr, "\n  %s n=%d redop=%d rank %d [%d]: %g want %g\n",
                            hn_coll_name(kind), n, redop, r, p, got, want);
                    CU_FAIL("wrong value");
                    r = n;
                    break;
                }
            }
    }
    M->team_destroy(team);
    stop(&h);
}

static void test_every_collective(void)
{
    for (int n = 1; n <= MAXR; n++) {
        run_collective(n, HN_COLL_ALLGATHER, 0, 0);
        run_collective(n, HN_COLL_REDUCE_SCATTER, HN_RED_SUM, 0);
        run_collective(n, HN_COLL_BROADCAST, HN_RED_SUM, n - 1);
        run_collective(n, HN_COLL_REDUCE, HN_RED_MAX, n / 2);
        run_collective(n, HN_COLL_GATHER, HN_RED_SUM, n - 1);
        run_collective(n, HN_COLL_SCATTER, HN_RED_SUM, n / 2);
        run_collective(n, HN_COLL_ALL_TO_ALL, HN_RED_SUM, 0);
        for (hn_redop op = HN_RED_SUM; op <= HN_RED_AVG; op++)
            run_collective(n, HN_COLL_ALLREDUCE, op, 0);
    }
}

/* Rows and columns of a 2x4 mesh: disjoint teams at once, in one order. */
static void test_mesh(void)
{
    harness h;
    hn_comm_team *rows[2], *cols[4];
    int n = 8;
    start(&h, n, 30);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(M->team_create(h.w, (int[]){4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3}, 4, &rows[i]), HN_OK);
    for (int j = 0; j < 4; j++)
        CU_ASSERT_EQUAL_FATAL(M->team_create(h.w, (int[]){j, j + 4}, 2, &cols[j]), HN_OK);
    for (int k = 0; k < 8; k++) {
        for (int r = 0; r < n; r++)
            for (int p = 0; p < MAXR * C; p++) {
                h.send[r][p] = in_val(r, p, k);
                h.recv[r][p] = NAN;
            }
        for (int r = 0; r < n; r++) {
            hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
            hn_coll_args ar = {HN_COLL_ALLREDUCE, h.send[r], h.recv[r], C, HN_F32, HN_RED_SUM, 0, 0};
            /* then the columns allgather into the upper half of recv */
            hn_coll_args ag = {HN_COLL_ALLGATHER, h.send[r], h.recv[r] + 4 * C, C, HN_F32, 0, 0, 0};
            M->collective(rows[r / 4], r % 4, &ar, h.s[r], &o);
            M->collective(cols[r % 4], r / 4, &ag, h.s[r], &o);
        }
        sync_all(&h);
        CU_ASSERT_EQUAL(h.faults.first, HN_OK);
        for (int r = 0; r < n; r++)
            for (int i = 0; i < C; i++) {
                double sum = 0;
                for (int m = 0; m < 4; m++)
                    sum += in_val(r / 4 * 4 + m, i, k);
                CU_ASSERT_EQUAL(h.recv[r][i], (float)sum);
                CU_ASSERT_EQUAL(h.recv[r][4 * C + i], in_val(r % 4, i, k));
                CU_ASSERT_EQUAL(h.recv[r][5 * C + i], in_val(r % 4 + 4, i, k));
            }
    }
    for (int i = 0; i < 2; i++)
        M->team_destroy(rows[i]);
    for (int j = 0; j < 4; j++)
        M->team_destroy(cols[j]);
    stop(&h);
}

/* 32 rounds of a ring: send right and receive from the left, posted in
 * either order, as one group. */
static void test_ring(void)
{
    for (int n = 1; n <= MAXR; n++) {
        harness h;
        start(&h, n, 30);
        for (int k = 0; k < 32; k++) {
            for (int r = 0; r < n; r++)
                for (int p = 0; p < C; p++) {
                    h.send[r][p] = in_val(r, p, k);
                    h.recv[r][p] = NAN;
                }
            for (int r = 0; r < n; r++) {
                hn_p2p_op send = {1, (r + 1) % n, h.send[r], C * sizeof(float), 0};
                hn_p2p_op recv = {0, (r + n - 1) % n, h.recv[r], C * sizeof(float), 0};
                hn_p2p_op ops[2] = {r % 2 ? send : recv, r % 2 ? recv : send};
                hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
                CU_ASSERT_EQUAL(M->p2p(h.w, r, ops, 2, h.s[r], &o), HN_OK);
            }
            sync_all(&h);
            CU_ASSERT_EQUAL(h.faults.first, HN_OK);
            for (int r = 0; r < n; r++)
                for (int p = 0; p < C; p++)
                    CU_ASSERT_EQUAL(h.recv[r][p], in_val((r + n - 1) % n, p, k));
        }
        stop(&h);
    }
}

static void test_diverging_ranks(void)
{
    harness h;
    hn_comm_team *team;
    start(&h, 2, 30);
    CU_ASSERT_EQUAL_FATAL(M->team_create(h.w, (int[]){0, 1}, 2, &team), HN_OK);
    for (int r = 0; r < 2; r++) {
        hn_coll_args a = {r == 0 ? HN_COLL_ALLREDUCE : HN_COLL_BROADCAST, h.send[r], h.recv[r], C, HN_F32, 0, 0, 0};
        hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
        M->collective(team, r, &a, h.s[r], &o);
    }
    sync_all(&h); /* returns: no hang */
    CU_ASSERT_EQUAL(h.faults.first, HN_ERR_MISMATCH);
    CU_ASSERT_PTR_NOT_NULL(strstr(h.faults.err, "ranks diverge on team [0, 1], communication #0"));
    M->team_destroy(team);
    stop(&h);
}

static void test_absent_rank_times_out(void)
{
    harness h;
    hn_comm_team *team;
    double t0 = hn_now();
    start(&h, 3, 0.3);
    CU_ASSERT_EQUAL_FATAL(M->team_create(h.w, (int[]){0, 1, 2}, 3, &team), HN_OK);
    for (int r = 0; r < 2; r++) { /* rank 2 never comes */
        hn_coll_args a = {HN_COLL_ALLGATHER, h.send[r], h.recv[r], C, HN_F32, 0, 0, 0};
        hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
        M->collective(team, r, &a, h.s[r], &o);
    }
    sync_all(&h);
    CU_ASSERT(hn_now() - t0 < 5);
    CU_ASSERT_EQUAL(h.faults.first, HN_ERR_TIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(h.faults.err, "rank(s) 2 never arrived"));
    M->reset(h.w);
    M->team_destroy(team);
    stop(&h);
}

/* ---- every rank on a communicator of its own ---- */

#define PB (MAXR * C * 64) /* floats of each rank's send and recv buffers */

typedef struct procs {
    void *ctx; /* every rank's device memory (the same addresses everywhere) */
    hn_world *world;
    hn_comm_world *c[MAXR]; /* rank r's own, as in a process of its own */
    hn_test_faults faults;
    hn_dstream *s[MAXR];
    float *send[MAXR], *recv[MAXR];
    int n;
    uint64_t rng;
} procs;

static void procs_start(procs *p, int n, double timeout, uint64_t seed)
{
    hn_device_setup dc = {n, 30, seed, NULL, 0, NULL, 0, NULL, 0}; /* random stream delays */
    memset(p, 0, sizeof(*p));
    p->n = n;
    p->rng = seed;
    hn_test_faults_init(&p->faults, timeout);
    dc.sink = &p->faults.sink;
    CU_ASSERT_EQUAL_FATAL(D->init(&dc, &p->ctx), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(n, timeout, (size_t)64 << 20, &p->world), HN_OK);
    for (int r = 0; r < n; r++) {
        hn_comm_setup cc = {.nranks = n, .dev = D, .dev_ctx = p->ctx, .sink = &p->faults.sink, .world = p->world};
        CU_ASSERT_EQUAL_FATAL(M->init(&cc, &p->c[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->stream_create(p->ctx, r, &p->s[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(p->ctx, r, PB * sizeof(float), (void **)&p->send[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(p->ctx, r, PB * sizeof(float), (void **)&p->recv[r]), HN_OK);
        if (r > 0) { /* the first's posts: where processes would find theirs */
            CU_ASSERT_PTR_NOT_EQUAL(p->c[r]->posts, p->c[0]->posts);
            hn_world_shared_free(p->world, p->c[r]->posts);
            p->c[r]->posts = p->c[0]->posts;
        }
    }
}

static void procs_sync(procs *p)
{
    for (int r = 0; r < p->n; r++)
        D->stream_sync(p->s[r]);
}

static void procs_stop(procs *p)
{
    procs_sync(p);
    for (int r = p->n - 1; r >= 0; r--) {
        if (r > 0)
            p->c[r]->posts = NULL; /* the first's, freed with it */
        M->fini(p->c[r]);
        D->stream_destroy(p->s[r]);
        D->mem_free(p->ctx, r, p->send[r]);
        D->mem_free(p->ctx, r, p->recv[r]);
    }
    hn_world_destroy(p->world);
    D->fini(p->ctx);
    hn_test_faults_fini(&p->faults);
}

/* A team made by every rank's communicator (team_create runs everywhere),
 * t[r] rank r's; all on the first's slots. */
static void procs_team(procs *p, const int *ranks, int n, hn_comm_team **t)
{
    for (int r = 0; r < p->n; r++) {
        CU_ASSERT_EQUAL_FATAL(M->team_create(p->c[r], ranks, n, &t[r]), HN_OK);
        if (r > 0) {
            hn_world_shared_free(p->world, t[r]->slots);
            t[r]->slots = t[0]->slots;
        }
    }
}

static void procs_team_destroy(procs *p, hn_comm_team **t)
{
    for (int r = p->n - 1; r >= 0; r--) {
        if (r > 0)
            t[r]->slots = NULL;
        M->team_destroy(t[r]);
    }
}

/* A random float of few significant bits, never zero. */
static float rand_val(uint64_t *rng)
{
    int v = (int)(hn_splitmix64(rng) % 2000) - 1000;
    return (float)(v >= 0 ? v + 1 : v) / 64.0f;
}

static void fill(procs *p)
{
    for (int r = 0; r < p->n; r++)
        for (int i = 0; i < PB; i++) {
            p->send[r][i] = rand_val(&p->rng);
            p->recv[r][i] = NAN; /* poison */
        }
}

/* Rank r's expected recv (want[MAXR * C], NaN where nothing is written)
 * of a collective over ranks 0..n-1 with chunk c from in[j] (rank j's
 * send): reductions in team order, fp32 after every step. */
static void expect(const hn_coll_args *a, int n, int r, float *const *in, float *want)
{
    size_t c = a->count;
    for (int i = 0; i < MAXR * C; i++)
        want[i] = NAN;
    switch (a->kind) {
    case HN_COLL_GATHER:
        if (r != a->root)
            break;
        /* fall through */
    case HN_COLL_ALLGATHER:
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < c; i++)
                want[(size_t)j * c + i] = in[j][i];
        break;
    case HN_COLL_BROADCAST:
        for (size_t i = 0; i < c; i++)
            want[i] = in[a->root][i];
        break;
    case HN_COLL_SCATTER:
        for (size_t i = 0; i < c; i++)
            want[i] = in[a->root][(size_t)r * c + i];
        break;
    case HN_COLL_ALL_TO_ALL:
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < c; i++)
                want[(size_t)j * c + i] = in[j][(size_t)r * c + i];
        break;
    case HN_COLL_REDUCE:
        if (r != a->root)
            break;
        /* fall through */
    case HN_COLL_ALLREDUCE:
    case HN_COLL_REDUCE_SCATTER: {
        size_t off = a->kind == HN_COLL_REDUCE_SCATTER ? (size_t)r * c : 0;
        for (size_t i = 0; i < c; i++) {
            double acc = in[0][off + i];
            for (int j = 1; j < n; j++) {
                double v = in[j][off + i];
                acc = a->redop == HN_RED_PROD ? acc * v : a->redop == HN_RED_MAX ? fmax(acc, v)
                    : a->redop == HN_RED_MIN ? fmin(acc, v) : acc + v;
                acc = (float)acc;
            }
            want[i] = a->redop == HN_RED_AVG ? (float)acc / (float)n : (float)acc;
        }
        break;
    }
    default: break;
    }
}

/* Every rank's recv against the reference; 0 when one differs (reported). */
static int check_recv(procs *p, const hn_coll_args *a, const char *what)
{
    float want[MAXR * C];
    for (int r = 0; r < p->n; r++) {
        expect(a, p->n, r, p->send, want);
        for (int i = 0; i < MAXR * C; i++)
            if (isnan(want[i]) ? !isnan(p->recv[r][i]) : p->recv[r][i] != want[i]) {
                fprintf(stderr, "\n  %s: %s n=%d redop=%d root=%d rank %d [%d]: %g want %g\n", what,
                        hn_coll_name(a->kind), p->n, a->redop, a->root, r, i, p->recv[r][i], want[i]);
                CU_FAIL("wrong value");
                return 0;
            }
    }
    return 1;
}

/* Issues the same collective on every rank, each through its own. */
static void issue_all(procs *p, hn_comm_team **t, hn_coll_args a, size_t at)
{
    for (int r = 0; r < p->n; r++) {
        hn_origin o = {&p->faults.sink, r, 0, NULL, NULL};
        a.send = p->send[r] + at;
        a.recv = p->recv[r] + at;
        CU_ASSERT_EQUAL(M->collective(t[r], r, &a, p->s[r], &o), HN_OK);
    }
}

/* Every collective (every reduction of allreduce) on 2, 3 and 4 ranks,
 * random data and roots, 3 repetitions each. */
static void test_procs_every_collective(void)
{
    for (int n = 2; n <= 4; n++) {
        procs p;
        hn_comm_team *t[MAXR];
        int ranks[MAXR];
        procs_start(&p, n, 30, 0x5eed0000u + (uint64_t)n);
        for (int r = 0; r < n; r++)
            ranks[r] = r;
        procs_team(&p, ranks, n, t);
        for (int kind = 0; kind < HN_COLL_COUNT; kind++)
            for (hn_redop op = HN_RED_SUM; op <= HN_RED_AVG; op++) {
                int reduces = kind == HN_COLL_ALLREDUCE || kind == HN_COLL_REDUCE || kind == HN_COLL_REDUCE_SCATTER;
                if (op > HN_RED_SUM && !reduces)
                    break;
                for (int k = 0; k < 3; k++) {
                    hn_coll_args a = {(hn_coll_kind)kind, NULL, NULL, C, HN_F32, op,
                                      (int)(hn_splitmix64(&p.rng) % (uint64_t)n), 0};
                    fill(&p);
                    issue_all(&p, t, a, 0);
                    procs_sync(&p);
                    CU_ASSERT_EQUAL(p.faults.first, HN_OK);
                    if (!check_recv(&p, &a, "every collective"))
                        k = 3;
                }
            }
        procs_team_destroy(&p, t);
        procs_stop(&p);
    }
}

/* Groups of sends and receives on 2, 3 and 4 ranks: 12 rounds of random
 * messages between random pairs (a rank to itself too), each rank's group
 * in a random order that keeps each pair's messages in sequence, some
 * rounds with more messages of one pair than its ring holds. */
static void test_procs_sendrecv(void)
{
    enum { MSGS = 3 * POSTS + 8 };
    for (int n = 2; n <= 4; n++) {
        procs p;
        procs_start(&p, n, 30, 0xabcd00u + (uint64_t)n);
        for (int round = 0; round < 12; round++) {
            int src[MSGS], dst[MSGS], nmsg = 0;
            size_t at[MSGS], len[MSGS], used = 0;
            int flood = round % 3 == 2; /* one pair past its ring, both ways */
            fill(&p);
            while (nmsg < MSGS) {
                size_t l = 1 + hn_splitmix64(&p.rng) % (2 * C);
                if (used + l > PB)
                    break;
                src[nmsg] = flood ? nmsg % 2 : (int)(hn_splitmix64(&p.rng) % (uint64_t)n);
                dst[nmsg] = flood ? 1 - nmsg % 2 : (int)(hn_splitmix64(&p.rng) % (uint64_t)n);
                at[nmsg] = used;
                len[nmsg] = l;
                used += l;
                nmsg++;
                if (!flood && nmsg == 6 + round % 5)
                    break;
            }
            for (int r = 0; r < n; r++) {
                hn_p2p_op ops[2 * MSGS];
                uint64_t order[2 * MSGS];
                int nops = 0;
                hn_origin o = {&p.faults.sink, r, 0, NULL, NULL};
                for (int m = 0; m < nmsg; m++) {
                    if (src[m] == r) {
                        ops[nops] = (hn_p2p_op){1, dst[m], p.send[r] + at[m], len[m] * sizeof(float), 0};
                        order[nops++] = hn_splitmix64(&p.rng);
                    }
                    if (dst[m] == r) {
                        ops[nops] = (hn_p2p_op){0, src[m], p.recv[r] + at[m], len[m] * sizeof(float), 0};
                        order[nops++] = hn_splitmix64(&p.rng);
                    }
                }
                /* a random order, then each pair's ops put back in message
                 * order (the order of their addresses) on both sides */
                for (int i = 0; i < nops; i++)
                    for (int k = i + 1; k < nops; k++)
                        if (order[k] < order[i]) {
                            hn_p2p_op to = ops[i];
                            uint64_t tk = order[i];
                            ops[i] = ops[k];
                            ops[k] = to;
                            order[i] = order[k];
                            order[k] = tk;
                        }
                for (int i = 0; i < nops; i++)
                    for (int k = i + 1; k < nops; k++)
                        if (ops[k].is_send == ops[i].is_send && ops[k].peer == ops[i].peer &&
                            (char *)ops[k].buf < (char *)ops[i].buf) {
                            void *b = ops[i].buf;
                            size_t l = ops[i].bytes;
                            ops[i].buf = ops[k].buf;
                            ops[i].bytes = ops[k].bytes;
                            ops[k].buf = b;
                            ops[k].bytes = l;
                        }
                if (nops > 0)
                    CU_ASSERT_EQUAL(M->p2p(p.c[r], r, ops, nops, p.s[r], &o), HN_OK);
            }
            procs_sync(&p);
            CU_ASSERT_EQUAL(p.faults.first, HN_OK);
            for (int m = 0; m < nmsg; m++)
                if (memcmp(p.recv[dst[m]] + at[m], p.send[src[m]] + at[m], len[m] * sizeof(float)) != 0) {
                    fprintf(stderr, "\n  send/recv n=%d round %d: message %d (%d -> %d) wrong\n", n, round, m,
                            src[m], dst[m]);
                    CU_FAIL("wrong message");
                    break;
                }
            for (size_t i = used; i < PB; i++) /* nothing written past the messages */
                for (int r = 0; r < n; r++)
                    if (!isnan(p.recv[r][i])) {
                        CU_FAIL("written past the messages");
                        i = PB;
                        break;
                    }
        }
        procs_stop(&p);
    }
}

/* 3 * RDV_SLOTS + 5 allreduces of the team of all and as many allgathers
 * of a team of two, issued back to back with one sync at the end (every
 * slot taken over several times while others still fill), then as many
 * rounds of a send/recv ring past the posts of each pair. */
static void test_procs_reuse(void)
{
    enum { K = 3 * RDV_SLOTS + 5 };
    procs p;
    hn_comm_team *all[MAXR], *pair[MAXR];
    int n = 3;
    procs_start(&p, n, 30, 0x7e05eu);
    procs_team(&p, (int[]){0, 1, 2}, 3, all);
    procs_team(&p, (int[]){2, 0}, 2, pair);
    fill(&p);
    for (int k = 0; k < K; k++) {
        hn_coll_args ar = {HN_COLL_ALLREDUCE, NULL, NULL, C, HN_F32, HN_RED_SUM, 0, 0};
        issue_all(&p, all, ar, (size_t)k * 4 * C);
        for (int r = 0; r < n; r += 2) { /* ranks 2 and 0: members 0 and 1 */
            hn_origin o = {&p.faults.sink, r, 0, NULL, NULL};
            hn_coll_args ag = {HN_COLL_ALLGATHER, p.send[r] + (size_t)k * 4 * C + C,
                               p.recv[r] + (size_t)k * 4 * C + C, C, HN_F32, 0, 0, 0};
            CU_ASSERT_EQUAL(M->collective(pair[r], r == 2 ? 0 : 1, &ag, p.s[r], &o), HN_OK);
        }
    }
    procs_sync(&p);
    CU_ASSERT_EQUAL(p.faults.first, HN_OK);
    for (int k = 0; k < K; k++)
        for (int r = 0; r < n; r++)
            for (int i = 0; i < C; i++) {
                size_t b = (size_t)k * 4 * C;
                float sum = (float)((double)(float)((double)p.send[0][b + i] + p.send[1][b + i]) + p.send[2][b + i]);
                CU_ASSERT_EQUAL(p.recv[r][b + i], sum);
                if (r != 1) {
                    CU_ASSERT_EQUAL(p.recv[r][b + C + i], p.send[2][b + C + i]);
                    CU_ASSERT_EQUAL(p.recv[r][b + 2 * C + i], p.send[0][b + C + i]);
                } else {
                    CU_ASSERT_TRUE(isnan(p.recv[r][b + C + i]));
                }
            }
    /* the ring, 4 * POSTS rounds back to back */
    fill(&p);
    for (int k = 0; k < 4 * POSTS; k++)
        for (int r = 0; r < n; r++) {
            hn_p2p_op ops[2] = {{1, (r + 1) % n, p.send[r] + k * C, C * sizeof(float), 0},
                                {0, (r + n - 1) % n, p.recv[r] + k * C, C * sizeof(float), 0}};
            hn_origin o = {&p.faults.sink, r, 0, NULL, NULL};
            CU_ASSERT_EQUAL(M->p2p(p.c[r], r, ops, 2, p.s[r], &o), HN_OK);
        }
    procs_sync(&p);
    CU_ASSERT_EQUAL(p.faults.first, HN_OK);
    for (int r = 0; r < n; r++)
        CU_ASSERT_EQUAL(memcmp(p.recv[r], p.send[(r + n - 1) % n], 4 * POSTS * C * sizeof(float)), 0);
    procs_team_destroy(&p, pair);
    procs_team_destroy(&p, all);
    procs_stop(&p);
}

/* Rank 2 issues another count: the divergence names it, nobody hangs;
 * after the abort and the resets, the team works again. */
static void test_procs_mismatch_then_recover(void)
{
    procs p;
    hn_comm_team *t[MAXR];
    hn_coll_args a = {HN_COLL_ALLREDUCE, NULL, NULL, C, HN_F32, HN_RED_SUM, 0, 0};
    int n = 3;
    procs_start(&p, n, 30, 0xd1ffu);
    procs_team(&p, (int[]){0, 1, 2}, 3, t);
    fill(&p);
    for (int r = 0; r < n; r++) {
        hn_origin o = {&p.faults.sink, r, 0, NULL, NULL};
        hn_coll_args b = a;
        b.count = r == 2 ? C + 1 : C;
        b.send = p.send[r];
        b.recv = p.recv[r];
        M->collective(t[r], r, &b, p.s[r], &o);
    }
    procs_sync(&p); /* returns: no hang */
    CU_ASSERT_EQUAL(p.faults.first, HN_ERR_MISMATCH);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.faults.err, "ranks diverge on team [0, 1, 2], communication #0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(p.faults.err, "rank 2 issues allreduce of 7 x f32"));
    /* what the runtime does after a failure: abort, reset, reset the shared */
    for (int r = 0; r < n; r++)
        M->abort(p.c[r]);
    for (int r = 0; r < n; r++)
        M->reset(p.c[r]);
    for (int r = 0; r < n; r++)
        M->reset_shared(p.c[r]);
    p.faults.first = HN_OK;
    p.faults.err[0] = '\0';
    __atomic_store_n(&p.faults.abort, 0, __ATOMIC_RELEASE);
    for (int k = 0; k < RDV_SLOTS + 2; k++) {
        fill(&p);
        issue_all(&p, t, a, 0);
        procs_sync(&p);
        CU_ASSERT_EQUAL(p.faults.first, HN_OK);
        if (!check_recv(&p, &a, "after recovery"))
            break;
    }
    procs_team_destroy(&p, t);
    procs_stop(&p);
}

/* Rank 2 never comes to an allgather of 4, rank 3 never sends: each wait
 * ends at the deadline naming the absent rank. */
static void test_procs_absent(void)
{
    for (int part = 0; part < 2; part++) {
        procs p;
        hn_comm_team *t[MAXR];
        double t0;
        procs_start(&p, 4, 0.4, 0xab5e17u);
        procs_team(&p, (int[]){0, 1, 2, 3}, 4, t);
        fill(&p);
        t0 = hn_now();
        if (part == 0) {
            for (int r = 0; r < 4; r++) {
                hn_coll_args a = {HN_COLL_ALLGATHER, p.send[r], p.recv[r], C, HN_F32, 0, 0, 0};
                hn_origin o = {&p.faults.sink, r, 0, NULL, NULL};
                if (r != 2)
                    M->collective(t[r], r, &a, p.s[r], &o);
            }
        } else {
            hn_p2p_op recv = {0, 3, p.recv[0], C * sizeof(float), 0};
            hn_origin o = {&p.faults.sink, 0, 0, NULL, NULL};
            M->p2p(p.c[0], 0, &recv, 1, p.s[0], &o);
        }
        procs_sync(&p);
        CU_ASSERT(hn_now() - t0 < 10);
        CU_ASSERT_EQUAL(p.faults.first, HN_ERR_TIMEOUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(p.faults.err, part == 0 ? "rank(s) 2 never arrived" : "rank 3 never sent"));
        for (int i = 0; i < C; i++) /* nothing written */
            CU_ASSERT_TRUE(isnan(p.recv[0][i]));
        procs_team_destroy(&p, t);
        procs_stop(&p);
    }
}

void hn_suite_comm_host(void)
{
    static CU_TestInfo tests[] = {
        {"every collective on 1..8 ranks, 8 repetitions", test_every_collective},
        {"rows and columns of a 2-d mesh", test_mesh},
        {"send/recv ring, 32 repetitions", test_ring},
        {"diverging ranks are an error, not a hang", test_diverging_ranks},
        {"an absent rank times out with its name", test_absent_rank_times_out},
        {"own communicators: every collective at 2..4 ranks, random data", test_procs_every_collective},
        {"own communicators: random groups of sends, past a pair's posts", test_procs_sendrecv},
        {"own communicators: slots and posts reused past their tables", test_procs_reuse},
        {"own communicators: a divergence, then a recovery", test_procs_mismatch_then_recover},
        {"own communicators: an absent rank named at the deadline", test_procs_absent},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("comm/comm_host", tests);
}

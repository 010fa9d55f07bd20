/* Tests of src/comm/p2p/comm_p2p.c through the device, compute and comm tables
 * on the CPU backend, one issuing thread per rank (the rings hand buffer
 * addresses over when operations are issued; members join a team on
 * their own threads, since they exchange their addresses): allgather put and get,
 * reduce-scatter in pieces and with get (and both in turn on one team), 8
 * repetitions on the same buffers with random
 * stream delays, each with device flags and with events; a rank that never
 * comes ends in a timeout naming it; a peer's posted buffer reached where
 * hn_comm_setup.peer_addr says (registered memory across processes);
 * allreduce by the small path and by the rings in turn. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "../test.h"

#define MAXR 8
#define CNT 1003 /* elements per chunk: odd, so pieces are uneven */

static const hn_device_ops *D = &hn_device_host;
/* elements of each rank's send and recv, and the chunk bytes its members
 * reserve (allreduce_both takes more) */
static size_t g_elems = MAXR * CNT, g_reserve = CNT * sizeof(float);
/* most bytes of a small allreduce (0: the rings always) */
static size_t g_small = 0;

typedef struct world {
    void *ctx;
    float *mirror[MAXR]; /* test_peer_addr: where a peer's recv buffer is reached instead */
    int wrong_rank;      /* ... and the translations asked for an address not of the rank named (atomic) */
    int asked;           /* ... and how many there were (atomic) */
    hn_comm_world *w;
    hn_comm_team *team;
    hn_test_faults faults;
    int n;
    hn_dstream *s[MAXR];
    float *send[MAXR], *recv[MAXR];
} world;

typedef struct joiner {
    struct world *h;
    int rank;
    hn_status_t st;
} joiner;

static void *join_main(void *arg);

/* hn_comm_setup.peer_addr of test_peer_addr: rank r's recv buffer is
 * reached at its mirror (as a registered allocation is where another
 * process mapped it); the rank named must own the address. */
static void *mirror_addr(void *ctx, int rank, void *p)
{
    world *h = ctx;
    __atomic_add_fetch(&h->asked, 1, __ATOMIC_RELAXED);
    if (rank < 0 || rank >= h->n ||
        !(((char *)p >= (char *)h->recv[rank] && (char *)p < (char *)(h->recv[rank] + MAXR * CNT)) ||
          ((char *)p >= (char *)h->send[rank] && (char *)p < (char *)(h->send[rank] + MAXR * CNT)))) {
        __atomic_store_n(&h->wrong_rank, 1, __ATOMIC_RELAXED);
        return p;
    }
    if ((char *)p >= (char *)h->recv[rank] && (char *)p < (char *)(h->recv[rank] + MAXR * CNT))
        return h->mirror[rank] + ((float *)p - h->recv[rank]);
    return p;
}

/* pieces: most pieces per ring step (allgather too), of >= 512 B */
static void start_ex(world *h, int n, double timeout, int events, int pieces, int lanes, int mirrored);
static void start(world *h, int n, double timeout, int events, int pieces, int lanes)
{
    start_ex(h, n, timeout, events, pieces, lanes, 0);
}

static void start_ex(world *h, int n, double timeout, int events, int pieces, int lanes, int mirrored)
{
    hn_device_setup dc = {n, 30, 5, NULL, 0, NULL, 0, NULL, 0};
    hn_comm_setup cc;
    int ranks[MAXR];
    memset(h, 0, sizeof(*h));
    h->n = n;
    hn_test_faults_init(&h->faults, timeout);
    dc.sink = &h->faults.sink;
    CU_ASSERT_EQUAL_FATAL(D->init(&dc, &h->ctx), HN_OK);
    cc = (hn_comm_setup){.nranks = n, .dev = D, .dev_ctx = h->ctx, .compute = &hn_compute_host, .sink = &h->faults.sink,
                          .p2p_events = events, .p2p_pieces = pieces, .p2p_ag_pieces = pieces,
                          .p2p_lanes = lanes, .p2p_piece_min = 512, .p2p_small_max = g_small};
    if (mirrored) {
        cc.peer_addr = mirror_addr;
        cc.peer_ctx = h;
    }
    CU_ASSERT_EQUAL_FATAL(hn_comm_p2p.init(&cc, &h->w), HN_OK);
    for (int r = 0; r < n; r++) {
        ranks[r] = r;
        CU_ASSERT_EQUAL_FATAL(D->stream_create(h->ctx, r, &h->s[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, g_elems * sizeof(float), (void **)&h->send[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, g_elems * sizeof(float), (void **)&h->recv[r]), HN_OK);
        if (mirrored)
            CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, MAXR * CNT * sizeof(float), (void **)&h->mirror[r]),
                                  HN_OK);
    }
    CU_ASSERT_EQUAL_FATAL(hn_comm_p2p.team_create(h->w, ranks, n, &h->team), HN_OK);
    /* members join and reserve on their own threads, at once (they exchange addresses) */
    {
        pthread_t th[MAXR];
        joiner j[MAXR];
        for (int r = 0; r < n; r++) {
            j[r] = (joiner){h, r, HN_ERR_RUNTIME};
            CU_ASSERT_EQUAL_FATAL(pthread_create(&th[r], NULL, join_main, &j[r]), 0);
        }
        for (int r = 0; r < n; r++) {
            pthread_join(th[r], NULL);
            if (j[r].st != HN_OK)
                fprintf(stderr, "\n  rank %d joins: %s: %s", r, hn_status_string(j[r].st), h->faults.err);
            CU_ASSERT_EQUAL_FATAL(j[r].st, HN_OK);
        }
    }
}

static void *join_main(void *arg)
{
    joiner *j = arg;
    hn_origin o = {&j->h->faults.sink, j->rank, 0, NULL, NULL};
    j->st = hn_comm_p2p.team_join(j->h->team, j->rank, &o);
    if (j->st == HN_OK)
        j->st = hn_comm_p2p.team_reserve(j->h->team, j->rank, g_reserve, &o);
    return NULL;
}

static void stop(world *h)
{
    for (int r = 0; r < h->n; r++)
        D->stream_sync(h->s[r]);
    hn_comm_p2p.team_destroy(h->team);
    hn_comm_p2p.fini(h->w);
    for (int r = 0; r < h->n; r++) {
        D->stream_destroy(h->s[r]);
        D->mem_free(h->ctx, r, h->send[r]);
        D->mem_free(h->ctx, r, h->recv[r]);
        if (h->mirror[r] != NULL)
            D->mem_free(h->ctx, r, h->mirror[r]);
    }
    D->fini(h->ctx);
    hn_test_faults_fini(&h->faults);
}

typedef struct issue {
    world *h;
    int rank;
    hn_coll_args a;
    hn_status_t st;
} issue;

static void *issue_main(void *arg)
{
    issue *is = arg;
    hn_origin o = {&is->h->faults.sink, is->rank, 0, NULL, NULL};
    is->st = hn_comm_p2p.collective(is->h->team, is->rank, &is->a, is->h->s[is->rank], &o);
    return NULL;
}

/* every rank issues on its own thread (all of them, or all but `absent`) */
static void issue_all(world *h, hn_coll_kind kind, size_t cnt, int get, int absent)
{
    pthread_t th[MAXR];
    issue is[MAXR];
    for (int r = 0; r < h->n; r++) {
        is[r] = (issue){h, r, {kind, h->send[r], h->recv[r], cnt, HN_F32, HN_RED_SUM, 0, get ? HN_ALGO_PULL : HN_ALGO_PUSH}, HN_OK};
        if (r != absent)
            pthread_create(&th[r], NULL, issue_main, &is[r]);
    }
    for (int r = 0; r < h->n; r++)
        if (r != absent)
            pthread_join(th[r], NULL);
    for (int r = 0; r < h->n; r++)
        D->stream_sync(h->s[r]);
}

static float xv(int r, int p, int k) { return (float)((r * 31 + p * 7 + k * 3) % 50 - 25); }

static void run(int n, hn_coll_kind kind, int get, int events, int pieces, int lanes)
{
    world h;
    start(&h, n, 30, events, pieces, lanes);
    for (int k = 0; k < 8; k++) {
        int wrong = 0, cnt = CNT >> (k % 4); /* steps in 7, 3, 1 pieces: the count changes between runs */
        for (int r = 0; r < n; r++)
            for (int p = 0; p < MAXR * CNT; p++) {
                h.send[r][p] = xv(r, p, k);
                h.recv[r][p] = NAN;
            }
        issue_all(&h, kind, cnt, get >= 0 ? get : (0x96 >> k) & 1, -1); /* -1: put, get, get, put, get, ... */
        CU_ASSERT_EQUAL(h.faults.first, HN_OK);
        for (int r = 0; r < n && !wrong; r++)
            for (int p = 0; p <= (kind == HN_COLL_ALLGATHER ? n : 1) * cnt && p < MAXR * CNT && !wrong; p++) {
                float want = 0;
                if (p == (kind == HN_COLL_ALLGATHER ? n : 1) * cnt) {
                    want = NAN; /* past the end: untouched */
                } else if (kind == HN_COLL_ALLGATHER) {
                    want = xv(p / cnt, p % cnt, k);
                } else {
                    for (int q = 0; q < n; q++)
                        want += xv(q, r * cnt + p, k);
                }
                if (!(h.recv[r][p] == want || (isnan(want) && isnan(h.recv[r][p])))) {
                    fprintf(stderr, "\n  %s%s%s pieces %d lanes %d n=%d count %d rank %d [%d] rep %d: %g want %g\n",
                            hn_coll_name(kind), get ? " get" : "", events ? " events" : "", pieces, lanes, n, cnt, r, p, k,
                            h.recv[r][p], want);
                    wrong = 1;
                }
            }
        CU_ASSERT_FALSE(wrong);
    }
    stop(&h);
}

/* (pieces, lanes): whole steps on the caller's stream, pieces on one lane,
 * uneven pieces over two and over three lanes */
static const int shapes[][2] = {{1, 1}, {4, 1}, {4, 2}, {7, 3}};
/* with 7 pieces of >= 512 B, the 4 counts of run() go in 7, 3, 1 and 1 */

static void test_allgather(void)
{
    for (int n = 1; n <= MAXR; n++)
        for (int events = 0; events <= 1; events++) {
            for (int k = 0; k < 4; k++) {
                run(n, HN_COLL_ALLGATHER, 0, events, shapes[k][0], shapes[k][1]);
                if (k == 0)
                    run(n, HN_COLL_ALLGATHER, 1, events, 0, 0);
            }
        }
}

static void test_reduce_scatter(void)
{
    for (int n = 1; n <= MAXR; n++)
        for (int events = 0; events <= 1; events++) {
            for (int k = 0; k < 4; k++)
                run(n, HN_COLL_REDUCE_SCATTER, 0, events, shapes[k][0], shapes[k][1]);
            run(n, HN_COLL_REDUCE_SCATTER, 1, events, 4, 2); /* get */
            run(n, HN_COLL_REDUCE_SCATTER, -1, events, 4, 2); /* put and get in turn */
        }
}

/* Allreduce, both ways on one team in turn: the small path (an input of
 * at most the slots' room: every member's input pushed into every peer's
 * slot, two slots in turn) and the rings (a larger one); in place or not,
 * sum and avg, 2 to 4 ranks, flags and events, 12 calls on the same
 * buffers. Every member's result is the team-order reduction, the same
 * bits everywhere; the element past the end untouched. */
static void allreduce_both(int n, int events, int in_place)
{
    world h;
    /* chunks of 256 KiB / n + 4 KiB reserved: the slots hold 256 KiB (their
     * most), the rings a little more */
    const size_t small = (size_t)n * 500, ring = (size_t)n * ((65536 / (size_t)n) + 256);
    g_elems = ring + 64;
    g_reserve = (256 << 10) / (size_t)n + 4096;
    g_small = 256 << 10;
    start(&h, n, 30, events, 4, 2);
    g_elems = MAXR * CNT;
    g_reserve = CNT * sizeof(float);
    g_small = 0;
    for (int k = 0; k < 12; k++) {
        const size_t cnt = (0x5b3 >> k) & 1 ? small : ring; /* small, small, ring, ... */
        const hn_redop op = k % 3 == 2 ? HN_RED_AVG : HN_RED_SUM;
        float *out[MAXR];
        int wrong = 0;
        for (int r = 0; r < n; r++) {
            out[r] = in_place ? h.send[r] : h.recv[r];
            for (size_t p = 0; p < ring + 64; p++) {
                h.send[r][p] = xv(r, (int)p, k) / 7.0f + (float)r / 3.0f;
                if (!in_place)
                    h.recv[r][p] = NAN;
            }
            if (in_place)
                h.send[r][cnt] = NAN;
        }
        {
            pthread_t th[MAXR];
            issue is[MAXR];
            for (int r = 0; r < n; r++) {
                is[r] = (issue){&h, r, {HN_COLL_ALLREDUCE, h.send[r], out[r], cnt, HN_F32, op, 0, HN_ALGO_PUSH}, HN_OK};
                pthread_create(&th[r], NULL, issue_main, &is[r]);
            }
            for (int r = 0; r < n; r++)
                pthread_join(th[r], NULL);
            for (int r = 0; r < n; r++) {
                D->stream_sync(h.s[r]);
                CU_ASSERT_EQUAL(is[r].st, HN_OK);
            }
        }
        CU_ASSERT_EQUAL(h.faults.first, HN_OK);
        for (size_t p = 0; p <= cnt && !wrong; p++) {
            float want = 0;
            for (int q = 0; q < n; q++)
                want += xv(q, (int)p, k) / 7.0f + (float)q / 3.0f;
            if (op == HN_RED_AVG)
                want *= (float)(1.0 / n);
            for (int r = 0; r < n && !wrong; r++) {
                int same = p == cnt ? isnan(out[r][p]) : cnt == small ? out[r][p] == want : fabsf(out[r][p] - want) <= 1e-4f * (1 + fabsf(want));
                if (!same || (p < cnt && memcmp(&out[r][p], &out[0][p], sizeof(float)) != 0)) {
                    fprintf(stderr, "\n  allreduce %s%s%s n=%d count %zu rank %d [%zu] call %d: %.9g (rank 0 %.9g) want %.9g\n",
                            cnt == small ? "small" : "rings", events ? " events" : "", in_place ? " in place" : "", n,
                            cnt, r, p, k, out[r][p], out[0][p], want);
                    wrong = 1;
                }
            }
        }
        CU_ASSERT_FALSE(wrong);
    }
    stop(&h);
}

static void test_allreduce_small(void)
{
    for (int n = 2; n <= 4; n++)
        for (int events = 0; events <= 1; events++)
            for (int in_place = 0; in_place <= 1; in_place++)
                allreduce_both(n, events, in_place);
}

/* A peer's posted buffer is reached where hn_comm_setup.peer_addr says,
 * asked with the poster's rank: an allgather put over 2 ranks lands each
 * rank's chunk in the other's mirror, not in its recv buffer. */
static void test_peer_addr(void)
{
    for (int events = 0; events <= 1; events++) {
        world h;
        int wrong = 0;
        start_ex(&h, 2, 30, events, 0, 0, 1);
        for (int r = 0; r < 2; r++)
            for (int p = 0; p < MAXR * CNT; p++) {
                h.send[r][p] = xv(r, p, 0);
                h.recv[r][p] = h.mirror[r][p] = NAN;
            }
        issue_all(&h, HN_COLL_ALLGATHER, CNT, 0, -1);
        CU_ASSERT_EQUAL(h.faults.first, HN_OK);
        CU_ASSERT(__atomic_load_n(&h.asked, __ATOMIC_RELAXED) > 0);
        CU_ASSERT_EQUAL(__atomic_load_n(&h.wrong_rank, __ATOMIC_RELAXED), 0);
        for (int r = 0; r < 2 && !wrong; r++)
            for (int p = 0; p < 2 * CNT && !wrong; p++) {
                int own = p / CNT == r;
                float got = own ? h.recv[r][p] : h.mirror[r][p], other = own ? h.mirror[r][p] : h.recv[r][p];
                if (got != xv(p / CNT, p % CNT, 0) || !isnan(other)) {
                    fprintf(stderr, "\n  peer_addr (%s) rank %d [%d]: %g (the other buffer %g), want %g\n",
                            events ? "events" : "flags", r, p, got, other, xv(p / CNT, p % CNT, 0));
                    wrong = 1;
                }
            }
        CU_ASSERT_FALSE(wrong);
        stop(&h);
    }
}

/* Rank 2 never comes: to an allgather ring (its mailboxes name the rank),
 * and to a small allreduce (with events the host's spin names it; with
 * flags the device's wait times out, as a ring reduction's does). */
static void absent_rank(int events, int small)
{
    world h;
    double t0 = hn_now();
    /* 2 s: on 2 loaded cores under TSan a present rank's step can take a
     * good part of a second, and must not be taken for the absent one */
    g_small = small ? 256 << 10 : 0;
    start(&h, 4, 2.0, events, 0, 0);
    g_small = 0;
    issue_all(&h, small ? HN_COLL_ALLREDUCE : HN_COLL_ALLGATHER, small ? 1000 : CNT, 0, 2); /* rank 2 never comes */
    CU_ASSERT(hn_now() - t0 < 15);
    CU_ASSERT_EQUAL(h.faults.first, HN_ERR_TIMEOUT);
    if (small && !events) {
        hn_comm_p2p.abort(h.w);
        stop(&h);
        return;
    }
    if (strstr(h.faults.err, "rank 2 never reached its side of it") == NULL)
        fprintf(stderr, "\n  absent rank 2 (%s): first error '%s'\n", events ? "events" : "flags", h.faults.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(h.faults.err, "rank 2 never reached its side of it"));
    /* devices still waiting on flags are released, then the team can go */
    hn_comm_p2p.abort(h.w);
    stop(&h);
}

static void test_absent_rank(void)
{
    for (int small = 0; small <= 1; small++) {
        absent_rank(0, small);
        absent_rank(1, small);
    }
}

void hn_suite_comm_p2p(void)
{
    static CU_TestInfo tests[] = {
        {"allgather rings, put (whole, in pieces over lanes) and get, flags and events, 1..8 ranks", test_allgather},
        {"reduce-scatter rings: put in pieces over lanes, get, both in turn; flags and events; 1..8 ranks",
         test_reduce_scatter},
        {"allreduce: the small path and the rings in turn, in place or not, sum and avg, the same bits on every "
         "member; flags and events; 2..4 ranks", test_allreduce_small},
        {"an absent rank times out (named, but for a small allreduce's device flags)", test_absent_rank},
        {"a peer's buffer is reached where peer_addr says, asked with the poster's rank", test_peer_addr},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("comm/comm_p2p", tests);
}

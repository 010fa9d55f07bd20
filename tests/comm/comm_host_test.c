/* Tests of src/comm/comm_host.c: every collective on 1..8 ranks against
 * analytic references, 8 repetitions on the same buffers; teams of a 2-d
 * mesh; a send/recv ring; diverging ranks and absent ranks end in an
 * error, not a hang. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "test.h"

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
    hn_device_config dc = {n, 0, 3, &h->faults.sink, 0, NULL, 0, NULL, 0};
    hn_comm_config cc;
    memset(h, 0, sizeof(*h));
    h->n = n;
    hn_test_faults_init(&h->faults, timeout);
    dc.sink = &h->faults.sink;
    dc.host_delay_us = 30; /* shake out ordering bugs */
    CU_ASSERT_EQUAL_FATAL(D->init(&dc, &h->ctx), HN_OK);
    cc = (hn_comm_config){.nranks = n, .dev = D, .dev_ctx = h->ctx, .sink = &h->faults.sink};
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

static double reduce_ref(int redop, int n, int p, int k, int off)
{
    double acc = in_val(0, p + off, k);
    for (int r = 1; r < n; r++) {
        double v = in_val(r, p + off, k);
        acc = redop == HN_REDUCE_PROD ? acc * v : redop == HN_REDUCE_MAX ? fmax(acc, v)
            : redop == HN_REDUCE_MIN ? fmin(acc, v) : acc + v;
        acc = (float)acc;
    }
    return redop == HN_REDUCE_AVG ? (float)acc / (float)n : acc;
}

/* Runs one kind of collective on team = all n ranks; checks every rank. */
static void run_collective(int n, hn_coll_kind kind, int redop, int root)
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
        run_collective(n, HN_COLL_REDUCE_SCATTER, HN_REDUCE_SUM, 0);
        run_collective(n, HN_COLL_BROADCAST, 0, n - 1);
        run_collective(n, HN_COLL_REDUCE, HN_REDUCE_MAX, n / 2);
        run_collective(n, HN_COLL_GATHER, 0, n - 1);
        run_collective(n, HN_COLL_SCATTER, 0, n / 2);
        run_collective(n, HN_COLL_ALL_TO_ALL, 0, 0);
        for (int op = HN_REDUCE_SUM; op <= HN_REDUCE_AVG; op++)
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
            hn_coll_args ar = {HN_COLL_ALLREDUCE, h.send[r], h.recv[r], C, HN_F32, HN_REDUCE_SUM, 0, 0};
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

void hn_suite_comm_host(void)
{
    static CU_TestInfo tests[] = {
        {"every collective on 1..8 ranks, 8 repetitions", test_every_collective},
        {"rows and columns of a 2-d mesh", test_mesh},
        {"send/recv ring, 32 repetitions", test_ring},
        {"diverging ranks are an error, not a hang", test_diverging_ranks},
        {"an absent rank times out with its name", test_absent_rank_times_out},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("comm/comm_host", tests);
}

/* Tests of src/comm/net/comm_net.c, the host backend's collectives
 * between nodes over the world's link: a world of 1..6 ranks whose every
 * rank is a node of its own (threads of this process, one link over
 * loopback). Every collective on fresh random data, compared bit for bit
 * with the host communicator on one node (the same inputs, the same
 * reduction order); teams of a 2-d mesh; a send/recv ring; diverging
 * ranks end in a named mismatch and an absent one in a named timeout,
 * not a hang; after a failure and a reset the parts it left on the link
 * are never taken by the next run. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "world/net.h"
#include "world/world.h"
#include "../test.h"

#define MAXR 6
#define C 37 /* elements per chunk: not a round number */

static const hn_device_ops *D = &hn_device_host;

typedef struct harness {
    void *ctx;
    hn_world *world;
    hn_net_server *server;
    hn_net *net;
    hn_comm_world *w, *ref; /* net, and the host communicator on one node */
    hn_test_faults faults;
    hn_dstream *s[MAXR];
    float *send[MAXR], *recv[MAXR], *want[MAXR];
    int n;
} harness;

static void start(harness *h, int n, double timeout)
{
    hn_device_setup dc = {n, 0, 3, NULL, 0, NULL, 0, NULL, 0};
    hn_comm_setup cc;
    hn_strbuf why;
    int port = 0;
    memset(h, 0, sizeof(*h));
    hn_sb_init(&why);
    h->n = n;
    hn_test_faults_init(&h->faults, timeout);
    dc.sink = &h->faults.sink;
    dc.host_delay_us = 30; /* shake out ordering bugs */
    CU_ASSERT_EQUAL_FATAL(D->init(&dc, &h->ctx), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(n, timeout, 0, &h->world), HN_OK);
    h->server = hn_net_serve("127.0.0.1", 0, n, 5.0, &port, &why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h->server);
    h->net = hn_net_connect("127.0.0.1", port, 0, 0, 5.0, NULL, 5.0, &why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h->net);
    hn_world_set_net(h->world, h->net, 1); /* every rank a node */
    cc = (hn_comm_setup){.nranks = n, .dev = D, .dev_ctx = h->ctx, .sink = &h->faults.sink, .world = h->world};
    CU_ASSERT_EQUAL_FATAL(hn_comm_net.init(&cc, &h->w), HN_OK);
    cc.world = NULL; /* the reference: one node, a world of its own */
    CU_ASSERT_EQUAL_FATAL(hn_comm_host.init(&cc, &h->ref), HN_OK);
    for (int r = 0; r < n; r++) {
        CU_ASSERT_EQUAL_FATAL(D->stream_create(h->ctx, r, &h->s[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, MAXR * C * sizeof(float), (void **)&h->send[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, MAXR * C * sizeof(float), (void **)&h->recv[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(D->mem_alloc(h->ctx, r, MAXR * C * sizeof(float), (void **)&h->want[r]), HN_OK);
    }
    hn_sb_free(&why);
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
        D->mem_free(h->ctx, r, h->want[r]);
    }
    hn_comm_net.fini(h->w);
    hn_comm_host.fini(h->ref);
    hn_world_set_net(h->world, NULL, 0);
    hn_net_close(h->net);
    hn_net_server_close(h->server, 5.0);
    hn_world_destroy(h->world);
    D->fini(h->ctx);
    hn_test_faults_fini(&h->faults);
}

static float poison(void) { return NAN; }

static void run_collective(int n, hn_coll_kind kind, hn_redop redop, int root)
{
    harness h;
    hn_comm_team *team, *ref;
    int ranks[MAXR];
    start(&h, n, 30);
    for (int r = 0; r < n; r++)
        ranks[r] = r;
    CU_ASSERT_EQUAL_FATAL(hn_comm_net.team_create(h.w, ranks, n, &team), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_comm_host.team_create(h.ref, ranks, n, &ref), HN_OK);
    for (int k = 0; k < 4; k++) { /* fresh data each time, the same buffers */
        for (int r = 0; r < n; r++)
            for (int p = 0; p < MAXR * C; p++) {
                h.send[r][p] = (float)(rand() % 20001 - 10000) / 997.0f;
                h.recv[r][p] = h.want[r][p] = poison();
            }
        for (int r = 0; r < n; r++) {
            hn_coll_args a = {kind, h.send[r], h.recv[r], C, HN_F32, redop, root, 0};
            hn_coll_args b = {kind, h.send[r], h.want[r], C, HN_F32, redop, root, 0};
            hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
            CU_ASSERT_EQUAL(hn_comm_net.collective(team, r, &a, h.s[r], &o), HN_OK);
            CU_ASSERT_EQUAL(hn_comm_host.collective(ref, r, &b, h.s[r], &o), HN_OK);
        }
        sync_all(&h);
        CU_ASSERT_EQUAL(h.faults.first, HN_OK);
        for (int r = 0; r < n; r++)
            if (memcmp(h.recv[r], h.want[r], MAXR * C * sizeof(float)) != 0) { /* bit for bit, poison included */
                fprintf(stderr, "\n  %s n=%d redop=%d root=%d rank %d differs from one node's\n", hn_coll_name(kind),
                        n, redop, root, r);
                CU_FAIL("net and host differ");
                break;
            }
    }
    hn_comm_net.team_destroy(team);
    hn_comm_host.team_destroy(ref);
    stop(&h);
}

static void test_every_collective(void)
{
    srand(7);
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

/* Rows and columns of a 2x3 mesh: disjoint teams at once. */
static void test_mesh(void)
{
    harness h;
    hn_comm_team *rows[2], *cols[3];
    int n = 6;
    start(&h, n, 30);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(hn_comm_net.team_create(h.w, (int[]){3 * i, 3 * i + 1, 3 * i + 2}, 3, &rows[i]), HN_OK);
    for (int j = 0; j < 3; j++)
        CU_ASSERT_EQUAL_FATAL(hn_comm_net.team_create(h.w, (int[]){j, j + 3}, 2, &cols[j]), HN_OK);
    for (int k = 0; k < 4; k++) {
        for (int r = 0; r < n; r++)
            for (int p = 0; p < MAXR * C; p++) {
                h.send[r][p] = (float)(rand() % 1000);
                h.recv[r][p] = poison();
            }
        for (int r = 0; r < n; r++) {
            hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
            hn_coll_args ar = {HN_COLL_ALLREDUCE, h.send[r], h.recv[r], C, HN_F32, HN_RED_SUM, 0, 0};
            hn_coll_args ag = {HN_COLL_ALLGATHER, h.send[r], h.recv[r] + 3 * C, C, HN_F32, 0, 0, 0};
            hn_comm_net.collective(rows[r / 3], r % 3, &ar, h.s[r], &o);
            hn_comm_net.collective(cols[r % 3], r / 3, &ag, h.s[r], &o);
        }
        sync_all(&h);
        CU_ASSERT_EQUAL(h.faults.first, HN_OK);
        for (int r = 0; r < n; r++)
            for (int i = 0; i < C; i++) {
                float sum = 0; /* integers: exact in any order */
                for (int m = 0; m < 3; m++)
                    sum += h.send[r / 3 * 3 + m][i];
                CU_ASSERT_EQUAL(h.recv[r][i], sum);
                CU_ASSERT_EQUAL(h.recv[r][3 * C + i], h.send[r % 3][i]);
                CU_ASSERT_EQUAL(h.recv[r][4 * C + i], h.send[r % 3 + 3][i]);
            }
    }
    for (int i = 0; i < 2; i++)
        hn_comm_net.team_destroy(rows[i]);
    for (int j = 0; j < 3; j++)
        hn_comm_net.team_destroy(cols[j]);
    stop(&h);
}

/* Rounds of a ring: send right, receive from the left, in either order. */
static void test_ring(void)
{
    for (int n = 1; n <= MAXR; n++) {
        harness h;
        start(&h, n, 30);
        for (int k = 0; k < 16; k++) {
            for (int r = 0; r < n; r++)
                for (int p = 0; p < C; p++) {
                    h.send[r][p] = (float)(r * 1000 + p + k);
                    h.recv[r][p] = poison();
                }
            for (int r = 0; r < n; r++) {
                hn_p2p_op send = {1, (r + 1) % n, h.send[r], C * sizeof(float), 0};
                hn_p2p_op recv = {0, (r + n - 1) % n, h.recv[r], C * sizeof(float), 0};
                hn_p2p_op ops[2] = {r % 2 ? send : recv, r % 2 ? recv : send};
                hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
                CU_ASSERT_EQUAL(hn_comm_net.p2p(h.w, r, ops, 2, h.s[r], &o), HN_OK);
            }
            sync_all(&h);
            CU_ASSERT_EQUAL(h.faults.first, HN_OK);
            for (int r = 0; r < n; r++)
                for (int p = 0; p < C; p++)
                    CU_ASSERT_EQUAL(h.recv[r][p], (float)(((r + n - 1) % n) * 1000 + p + k));
        }
        stop(&h);
    }
}

static void test_failures(void)
{
    harness h;
    hn_comm_team *team;
    double t0;
    start(&h, 3, 0.5);
    CU_ASSERT_EQUAL_FATAL(hn_comm_net.team_create(h.w, (int[]){0, 1, 2}, 3, &team), HN_OK);
    /* rank 1 calls another collective: a mismatch, named */
    for (int r = 0; r < 3; r++) {
        hn_coll_args a = {r == 1 ? HN_COLL_ALLGATHER : HN_COLL_ALLREDUCE, h.send[r], h.recv[r], C, HN_F32, 0, 0, 0};
        hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
        hn_comm_net.collective(team, r, &a, h.s[r], &o);
    }
    sync_all(&h);
    CU_ASSERT_EQUAL(h.faults.first, HN_ERR_MISMATCH);
    CU_ASSERT_PTR_NOT_NULL(strstr(h.faults.err, "called another collective"));
    hn_comm_net.abort(h.w);
    hn_comm_net.reset(h.w);
    hn_test_faults_fini(&h.faults);
    hn_test_faults_init(&h.faults, 0.5);
    /* rank 2 never comes: a timeout naming it, within the deadline */
    t0 = hn_now();
    for (int r = 0; r < 2; r++) {
        hn_coll_args a = {HN_COLL_ALLGATHER, h.send[r], h.recv[r], C, HN_F32, 0, 0, 0};
        hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
        hn_comm_net.collective(team, r, &a, h.s[r], &o);
    }
    sync_all(&h);
    CU_ASSERT(hn_now() - t0 < 5);
    CU_ASSERT_EQUAL(h.faults.first, HN_ERR_TIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(h.faults.err, "rank 2 (node 2) sent nothing over the network"));
    hn_comm_net.abort(h.w);
    hn_comm_net.reset(h.w);
    hn_test_faults_fini(&h.faults);
    hn_test_faults_init(&h.faults, 5);
    /* after the reset every rank comes: the parts the failures left are not taken */
    for (int r = 0; r < 3; r++)
        for (int p = 0; p < MAXR * C; p++) {
            h.send[r][p] = (float)(r + 1);
            h.recv[r][p] = poison();
        }
    for (int r = 0; r < 3; r++) {
        hn_coll_args a = {HN_COLL_ALLREDUCE, h.send[r], h.recv[r], C, HN_F32, HN_RED_SUM, 0, 0};
        hn_origin o = {&h.faults.sink, r, 0, NULL, NULL};
        hn_comm_net.collective(team, r, &a, h.s[r], &o);
    }
    sync_all(&h);
    CU_ASSERT_EQUAL(h.faults.first, HN_OK);
    for (int r = 0; r < 3; r++)
        for (int p = 0; p < C; p++)
            CU_ASSERT_EQUAL(h.recv[r][p], 6.0f);
    hn_comm_net.team_destroy(team);
    stop(&h);
}

void hn_suite_comm_net(void)
{
    static CU_TestInfo tests[] = {
        {"every collective on 1..6 nodes equals the host communicator's on one node, bit for bit", test_every_collective},
        {"a 2x3 mesh: rows and columns at once", test_mesh},
        {"a send/recv ring on 1..6 nodes", test_ring},
        {"a mismatch and an absent rank named; after a reset the next run is right", test_failures},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("comm/comm_net", tests);
}

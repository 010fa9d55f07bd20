/* Tests of the lowered copies kept by src/runtime/config_cache.c: the
 * runtime lowers a program once per parameter values and reuses it (and
 * its buffers) run after run; a new program at a recycled address is
 * lowered anew; hn_runtime_forget frees what the runtime kept. */
#include <string.h>

#include "hirnode/runtime.h"
#include "runtime/config_cache.h"
#include "ranks/runtime_int.h"
#include "../test.h"

static int blocks_of(const hn_runtime *rt, const hn_program *p)
{
    int n = 0;
    for (int r = 0; r < rt->nlocal; r++)
        for (int i = 0; i < rt->ranks[r].nblocks; i++)
            n += rt->ranks[r].blocks[i].prog == p->uid;
    return n;
}

static void test_cache(void)
{
    const char *text = "param M = 8 * world, K = 16, N = 8\n"
                       "input A : f32[M / world, K] replicated\ninput B : f32[K, N] replicated\n"
                       "output C : f32[M, N] replicated\n"
                       "matmul C <- allgather(A), B pipelined(strategy=collective, chunks=2)\n";
    hn_program *p = hn_test_parse(text, NULL);
    int n = hn_test_max_ranks() >= 2 ? 2 : 1;
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    void *a[2], *b[2], *c[2];
    size_t sz[2] = {4096, 4096};
    hn_binding bind[3] = {{"A", a, sz}, {"B", b, sz}, {"C", c, sz}};
    const char *names[] = {"M"};
    int64_t m[1] = {8 * 2}, params[3];
    hn_run_args args = {1, names, m, 3, bind};
    const hn_program *lp, *again;
    hn_strbuf diag;
    int blocks;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_TRUE(p->has_sched);
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    cfg.backend = hn_test_backend;
    CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
    for (int r = 0; r < n; r++) {
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, 4096, &a[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, 4096, &b[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, 4096, &c[r]), HN_OK);
    }
    m[0] = 8 * n;
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    CU_ASSERT_EQUAL(rt->nlowered, 1);
    params[0] = 8 * n;
    params[1] = 16;
    params[2] = 8;
    lp = hn_runtime_lowered_of(rt, p, params);
    CU_ASSERT_PTR_NOT_EQUAL(lp, p);
    CU_ASSERT_FALSE(lp->has_sched);
    blocks = blocks_of(rt, lp);
    CU_ASSERT_EQUAL(blocks, n); /* the staging buffer, once per rank */
    /* again: the same lowered program, the same buffers */
    for (int k = 0; k < 3; k++)
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    CU_ASSERT_EQUAL(rt->nlowered, 1);
    CU_ASSERT_PTR_EQUAL(hn_runtime_lowered_of(rt, p, params), lp);
    CU_ASSERT_EQUAL(blocks_of(rt, lp), blocks);
    /* other parameter values: lowered for them */
    m[0] = 4 * n;
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    CU_ASSERT_EQUAL(rt->nlowered, 2);
    /* a new program where p was: lowered anew, the old copy dropped */
    hn_sb_init(&diag);
    p->uid += 1000;
    CU_ASSERT_PTR_EQUAL(hn_runtime_lowered_of(rt, p, params), p);
    CU_ASSERT_EQUAL(hn_runtime_lowered(rt, p, params, &again, &diag), HN_OK);
    CU_ASSERT_PTR_NOT_EQUAL(again, p);
    CU_ASSERT_EQUAL(rt->nlowered, 1);
    hn_sb_free(&diag);
    /* forgetting frees it all */
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    hn_runtime_forget(rt, p);
    CU_ASSERT_EQUAL(rt->nlowered, 0);
    for (int r = 0; r < n; r++)
        CU_ASSERT_EQUAL(rt->ranks[r].nblocks, 0);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK); /* and it still runs */
    for (int r = 0; r < n; r++) {
        hn_runtime_free(rt, r, a[r]);
        hn_runtime_free(rt, r, b[r]);
        hn_runtime_free(rt, r, c[r]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

void hn_suite_lowered(void)
{
    static CU_TestInfo tests[] = {
        {"lowered once per parameters, reused, forgotten", test_cache},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("sched/lowered", tests);
}

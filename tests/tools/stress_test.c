/* Back-to-back runs of the AllGather+linear peer-copy ring
 * (examples/ag_matmul_p2p.hir) with random sizes on one runtime, each
 * checked against the reference: HN_STRESS_RUNS runs (100 by default; the
 * GPU validation asks for 1000). A run that hangs, fails or mismatches
 * fails the test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "sched/sched.h"
#include "test.h"

static void test_random_sizes(void)
{
    hn_program *p = NULL;
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    const char *env = getenv("HN_STRESS_RUNS");
    int runs = env != NULL ? atoi(env) : 100, n = hn_test_max_ranks() < 4 ? hn_test_max_ranks() : 4;
    int passed = 0;
    uint64_t rng = 2026;
    double t0 = hn_now();
    CU_ASSERT_EQUAL_FATAL(hn_program_load("examples/ag_matmul_p2p.hir", &p, NULL), HN_OK);
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    cfg.backend = hn_test_backend;
    cfg.timeout_s = 30;
    CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
    for (int k = 0; k < runs; k++) {
        const char *names[] = {"M", "K", "N"};
        /* rows per rank 1..64 (any, also odd), K and N multiples of 8 */
        int64_t values[3] = {(int64_t)(1 + hn_splitmix64(&rng) % 64) * n, (int64_t)(8 * (1 + hn_splitmix64(&rng) % 32)),
                             (int64_t)(8 * (1 + hn_splitmix64(&rng) % 16))};
        hn_check_opts o;
        hn_check_result res;
        hn_strbuf diag;
        hn_status_t st;
        memset(&o, 0, sizeof(o));
        o.iters = 1;
        o.seed = (uint64_t)k + 1;
        o.check = 1;
        o.noverrides = 3;
        o.names = names;
        o.values = values;
        hn_sb_init(&diag);
        st = hn_check_run(rt, p, &o, &res, &diag);
        if (st != HN_OK || !res.passed) {
            fprintf(stderr, "\n  run %d (M=%lld K=%lld N=%lld): %s %s %s\n", k, (long long)values[0],
                    (long long)values[1], (long long)values[2], hn_status_string(st), diag.data ? diag.data : "",
                    hn_runtime_error(rt));
            hn_sb_free(&diag);
            break;
        }
        hn_sb_free(&diag);
        passed++;
    }
    printf("\n  stress: %d of %d runs of the p2p AG+linear ring passed at %d ranks on %s (%.1f s)\n", passed, runs,
           n, hn_test_backend, hn_now() - t0);
    CU_ASSERT_EQUAL(passed, runs);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

void hn_suite_stress(void)
{
    static CU_TestInfo tests[] = {
        {"back-to-back p2p ring runs with random sizes", test_random_sizes},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("tools/stress", tests);
}

/* Every example end to end through the --check driver (src/runtime/check.c,
 * which `hirnode run --check` uses): 1, 2, 4 and 8 ranks, with and without
 * random stream delays. */
#include <stdio.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "runtime/check.h"
#include "../test.h"

static void check_one(const char *path, hn_program *p, void *arg)
{
    double delay = *(const double *)arg;
    for (int n = 1; n <= hn_test_max_ranks(); n *= 2) {
        hn_runtime_config cfg;
        hn_runtime *rt = NULL;
        hn_check_opts o;
        hn_check_result res;
        hn_strbuf diag;
        hn_status_t st;
        hn_runtime_config_default(&cfg);
        cfg.ndev = n;
        cfg.backend = hn_test_backend;
        cfg.host_delay_us = delay;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
        memset(&o, 0, sizeof(o));
        o.iters = 2;
        o.seed = 11 + (uint64_t)n;
        o.check = 1;
        hn_sb_init(&diag);
        st = hn_check_run(rt, p, &o, &res, &diag);
        if (st != HN_OK || !res.passed)
            fprintf(stderr, "\n  %s at %d ranks: %s %s %s (worst rel l2 %g)\n", path, n,
                    hn_status_string(st), diag.data ? diag.data : "", hn_runtime_error(rt),
                    res.worst_rel_l2);
        CU_ASSERT_EQUAL(st, HN_OK);
        CU_ASSERT_TRUE(res.passed);
        CU_ASSERT(res.checked > 0);
        hn_sb_free(&diag);
        hn_runtime_destroy(rt);
    }
}

static void check_all(double delay) { CU_ASSERT(hn_test_each_program("examples", check_one, &delay) >= 10); }

static void test_examples(void) { check_all(0); }
static void test_examples_with_delays(void) { check_all(100); }

void hn_suite_examples(void)
{
    static CU_TestInfo tests[] = {
        {"every example checks at 1, 2, 4, 8 ranks", test_examples},
        {"... with random stream delays", test_examples_with_delays},
        CU_TEST_INFO_NULL,
    };
    /* stream delays exist on the host backend only */
    if (strcmp(hn_test_backend, "host") != 0)
        tests[1] = (CU_TestInfo)CU_TEST_INFO_NULL;
    hn_test_add_suite("tools/examples", tests);
}

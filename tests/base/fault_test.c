/* Tests of src/base/fault.c: the fault plans of HIRNODE_FAULT. */
#include <string.h>

#include "base/fault.h"
#include "../test.h"

static void test_parse(void)
{
    hn_fault_plan plan;
    char err[256];
    CU_ASSERT_EQUAL(hn_fault_parse(NULL, &plan, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(plan.n, 0);
    CU_ASSERT_EQUAL(hn_fault_parse("", &plan, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(plan.n, 0);
    CU_ASSERT_EQUAL(hn_fault_parse("1:17:async", &plan, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(plan.n, 1);
    CU_ASSERT_EQUAL(plan.f[0].rank, 1);
    CU_ASSERT_EQUAL(plan.f[0].line, 17);
    CU_ASSERT_EQUAL(plan.f[0].occurrence, 1);
    CU_ASSERT_EQUAL(plan.f[0].kind, HN_FAULT_ASYNC);
    CU_ASSERT_EQUAL(hn_fault_parse("0:12:3:slow:50,7:4:0:stop,2:9:trap", &plan, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(plan.n, 3);
    CU_ASSERT_EQUAL(plan.f[0].occurrence, 3);
    CU_ASSERT_EQUAL(plan.f[0].kind, HN_FAULT_SLOW);
    CU_ASSERT_DOUBLE_EQUAL(plan.f[0].ms, 50.0, 1e-9);
    CU_ASSERT_EQUAL(plan.f[1].rank, 7);
    CU_ASSERT_EQUAL(plan.f[1].occurrence, 0);
    CU_ASSERT_EQUAL(plan.f[1].kind, HN_FAULT_STOP);
    CU_ASSERT_EQUAL(plan.f[2].kind, HN_FAULT_TRAP);
    for (int k = 0; k < HN_FAULT_KIND_COUNT; k++) {
        char spec[64];
        snprintf(spec, sizeof(spec), "0:1:%s", hn_fault_kind_name((hn_fault_kind)k));
        CU_ASSERT_EQUAL(hn_fault_parse(spec, &plan, err, sizeof(err)), HN_OK);
        CU_ASSERT_EQUAL(plan.f[0].kind, k);
    }
}

static void test_bad_specs(void)
{
    static const char *const bad[] = {
        "1:17",          /* no kind */
        "1:17:melt",     /* no such kind */
        "x:17:issue",    /* rank not a number */
        "-1:17:issue",   /* negative rank */
        "1:0:issue",     /* lines count from 1 */
        "1:17:x:issue",  /* occurrence not a number */
        "1:17:issue:5",  /* only slow takes milliseconds */
        "1:17:slow:-5",  /* negative */
        "1:17:1:slow:5:6",
        "1:17:issue,",   /* an empty fault */
        "1:17:2:3:issue",
    };
    hn_fault_plan plan;
    char err[256];
    for (int i = 0; i < HN_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        CU_ASSERT_EQUAL(hn_fault_parse(bad[i], &plan, err, sizeof(err)), HN_ERR_INVALID);
        CU_ASSERT(strlen(err) > 0);
    }
    {
        char many[1024] = "";
        for (int i = 0; i <= HN_MAX_FAULTS; i++)
            strcat(many, i ? ",0:1:issue" : "0:1:issue");
        CU_ASSERT_EQUAL(hn_fault_parse(many, &plan, err, sizeof(err)), HN_ERR_INVALID);
    }
}

static void test_text_and_ranks(void)
{
    static const char *const specs[] = {"9:99:stop", "0:3:2:slow:50", "1:17:async", "2:8:0:comm", "0:1:slow"};
    hn_fault_plan plan;
    char err[256], text[64];
    /* a fault reads back as written (its defaults left out) */
    for (int i = 0; i < HN_ARRAY_LEN(specs); i++) {
        CU_ASSERT_EQUAL_FATAL(hn_fault_parse(specs[i], &plan, err, sizeof(err)), HN_OK);
        hn_fault_text(&plan.f[0], text, sizeof(text));
        CU_ASSERT_STRING_EQUAL(text, specs[i]);
    }
    CU_ASSERT_EQUAL(hn_fault_parse("0:1:1:issue", &plan, err, sizeof(err)), HN_OK);
    hn_fault_text(&plan.f[0], text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "0:1:issue");
    /* the ranks a runtime has */
    CU_ASSERT_EQUAL(hn_fault_parse("0:3:stop,3:4:issue", &plan, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(hn_fault_plan_check_ranks(&plan, 4, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(hn_fault_plan_check_ranks(&plan, 3, err, sizeof(err)), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err, "fault '3:4:issue': rank 3 does not exist (ranks 0 to 2)");
    CU_ASSERT_EQUAL(hn_fault_plan_check_ranks(&plan, 1, err, sizeof(err)), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err, "fault '3:4:issue': rank 3 does not exist (the only rank is 0)");
    CU_ASSERT_EQUAL(hn_fault_parse("", &plan, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(hn_fault_plan_check_ranks(&plan, 1, err, sizeof(err)), HN_OK);
}

/* kill and sigstop act on a rank's process: refused where one process
 * holds every rank of the world, taken where it holds fewer */
static void test_process_kinds(void)
{
    hn_fault_plan plan;
    char err[256], text[64];
    CU_ASSERT_EQUAL_FATAL(hn_fault_parse("1:6:kill,0:5:2:sigstop", &plan, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(plan.n, 2);
    CU_ASSERT_EQUAL(plan.f[0].kind, HN_FAULT_KILL);
    CU_ASSERT_EQUAL(plan.f[1].kind, HN_FAULT_SIGSTOP);
    CU_ASSERT_EQUAL(plan.f[1].occurrence, 2);
    hn_fault_text(&plan.f[1], text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "0:5:2:sigstop");
    CU_ASSERT(HN_FAULT_KILL >= HN_FAULT_FIRST_PROCESS_KIND && HN_FAULT_SIGSTOP >= HN_FAULT_FIRST_PROCESS_KIND);
    CU_ASSERT(HN_FAULT_OOM < HN_FAULT_FIRST_PROCESS_KIND && HN_FAULT_STOP < HN_FAULT_FIRST_PROCESS_KIND);
    err[0] = '\0';
    CU_ASSERT_EQUAL(hn_fault_plan_check_process(&plan, 4, 4, err, sizeof(err)), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err, "fault '1:6:kill': kill acts on the process of rank 1, and this process holds every "
                                "rank of the world (4): it needs one rank per process (hirnode run --procs N)");
    CU_ASSERT_EQUAL(hn_fault_plan_check_process(&plan, 1, 1, err, sizeof(err)), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_fault_plan_check_process(&plan, 4, 1, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(hn_fault_parse("1:6:sigstop", &plan, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(hn_fault_plan_check_process(&plan, 2, 2, err, sizeof(err)), HN_ERR_INVALID);
    CU_ASSERT(strstr(err, "sigstop acts on the process of rank 1") != NULL);
    /* the thread kinds stay good in one process */
    CU_ASSERT_EQUAL(hn_fault_parse("0:3:stop,1:4:issue,1:4:2:slow:5", &plan, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(hn_fault_plan_check_process(&plan, 2, 2, err, sizeof(err)), HN_OK);
}

void hn_suite_fault(void)
{
    static CU_TestInfo tests[] = {
        {"fault plans parse", test_parse},
        {"bad fault plans are refused with a reason", test_bad_specs},
        {"faults as text; ranks a runtime lacks", test_text_and_ranks},
        {"kill and sigstop need a process of their own", test_process_kinds},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("base/fault", tests);
}

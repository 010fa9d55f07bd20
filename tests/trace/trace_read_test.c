/* Tests of src/trace/trace_read.c: a hand-written trace read into spans,
 * tracks and keys; what it refuses; allocation failures. */
#include <stdio.h>
#include <string.h>

#include "trace/trace.h"
#include "../test.h"

static const char good[] =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"cat\":\"comm\",\"name\":\"allreduce\",\"pid\":1,\"tid\":1,\"ts\":2.500,\"dur\":1.250,"
    "\"args\":{\"run\":0,\"id\":3,\"instr\":4,\"src\":\"p.hir:5:1\",\"text\":\"allreduce Y <- Y op sum\","
    "\"match\":\"c:default:0,1:0\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"fill\",\"pid\":1,\"tid\":1,\"ts\":1.000,\"dur\":0.001,"
    "\"args\":{\"run\":0,\"id\":2,\"instr\":3,\"src\":\"p.hir:4:1\",\"text\":\"fill X <- 2\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"comm\",\"name\":\"group\",\"pid\":0,\"tid\":3,\"ts\":1.000,\"dur\":3.000,"
    "\"args\":{\"run\":1,\"id\":0,\"instr\":6,\"match\":\"m:p2p:0>1:0 m:p2p:1>0:0\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"comm\",\"name\":\"allreduce\",\"pid\":0,\"tid\":1,\"ts\":2.000,\"dur\":1.750,"
    "\"args\":{\"run\":0,\"id\":7,\"instr\":4,\"src\":\"p.hir:5:1\",\"text\":\"allreduce Y <- Y op sum\","
    "\"match\":\"c:default:0,1:0\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"wait\",\"name\":\"wait\",\"pid\":0,\"tid\":3,\"ts\":4.000,\"dur\":0,"
    "\"args\":{\"run\":1,\"id\":1,\"dep\":0,\"instr\":7}},\n"
    "{\"ph\":\"X\",\"cat\":\"run\",\"name\":\"run 0\",\"pid\":0,\"tid\":0,\"ts\":0.5,\"dur\":9,"
    "\"args\":{\"run\":0,\"ok\":true,\"program\":\"p.hir\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"other\",\"name\":\"someone else's\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":1},\n"
    "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"run 0\",\"pid\":0,\"tid\":0,\"ts\":0.5},\n"
    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":3,\"args\":{\"name\":\"stream 1\"}},\n"
    "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{\"name\":\"rank 0\"}}\n"
    "],\"otherData\":{\"hirnode\":\"0.1.0\",\"backend\":\"host\",\"ranks\":2,\"runs\":2}}\n";

static void test_read(void)
{
    hn_trace_data t;
    hn_strbuf err;
    const hn_span *s;
    hn_sb_init(&err);
    CU_ASSERT_EQUAL_FATAL(hn_trace_load(good, strlen(good), &t, &err), HN_OK);
    CU_ASSERT_EQUAL(t.nspans, 6); /* the event of another category is not ours */
    CU_ASSERT_EQUAL(t.nranks, 2);
    CU_ASSERT_EQUAL(t.nruns, 2);
    CU_ASSERT_STRING_EQUAL(t.backend, "host");
    CU_ASSERT_STRING_EQUAL(t.program, "p.hir");
    /* sorted by (rank, track, begin) */
    s = t.spans;
    CU_ASSERT(s[0].rank == 0 && s[0].track == 0 && s[0].kind == HN_SPAN_RUN && s[0].begin == 500 && s[0].end == 9500);
    CU_ASSERT(s[1].rank == 0 && s[1].track == 1 && s[1].id == 7 && s[1].begin == 2000 && s[1].end == 3750);
    CU_ASSERT(s[2].track == 3 && s[2].kind == HN_SPAN_COMM && s[2].run == 1 && s[2].nkeys == 2);
    CU_ASSERT(s[3].track == 3 && s[3].kind == HN_SPAN_WAIT && s[3].dep == 0 && s[3].begin == s[3].end);
    CU_ASSERT(s[4].rank == 1 && s[4].kind == HN_SPAN_COMPUTE && s[4].begin == 1000 && s[4].end == 1001);
    CU_ASSERT_STRING_EQUAL(s[4].name, "fill");
    CU_ASSERT_STRING_EQUAL(s[4].src, "p.hir:4:1");
    CU_ASSERT_STRING_EQUAL(s[4].text, "fill X <- 2");
    CU_ASSERT(s[5].rank == 1 && s[5].id == 3 && s[5].instr == 4 && s[5].nkeys == 1);
    CU_ASSERT_STRING_EQUAL(s[2].text, ""); /* absent: empty */
    /* the two ends of the allreduce share their key; the group has two */
    CU_ASSERT_EQUAL(t.nkey_names, 3);
    CU_ASSERT_EQUAL(t.keys[s[1].key0], t.keys[s[5].key0]);
    CU_ASSERT_STRING_EQUAL(t.key_names[t.keys[s[1].key0]], "c:default:0,1:0");
    CU_ASSERT_STRING_EQUAL(t.key_names[t.keys[s[2].key0 + 1]], "m:p2p:1>0:0");
    /* interned: one string for the same text */
    CU_ASSERT_PTR_EQUAL(s[1].text, s[5].text);
    CU_ASSERT_STRING_EQUAL(hn_trace_track_name(&t, 0, 3), "stream 1");
    CU_ASSERT_STRING_EQUAL(hn_trace_track_name(&t, 1, 1), "?"); /* no name given */
    CU_ASSERT_STRING_EQUAL(hn_trace_track_name(&t, 5, 5), "?");
    hn_trace_data_free(&t);
    hn_sb_free(&err);
}

static void expect_refused(const char *text, const char *why)
{
    hn_trace_data t;
    hn_strbuf err;
    hn_sb_init(&err);
    CU_ASSERT_NOT_EQUAL(hn_trace_load(text, strlen(text), &t, &err), HN_OK);
    CU_ASSERT_EQUAL(t.nspans, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err.data);
    if (strstr(err.data, why) == NULL)
        fprintf(stderr, "\n  expected '%s' in: %s\n", why, err.data);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.data, why));
    hn_sb_free(&err);
}

#define EV(x) "{\"traceEvents\":[" x "],\"otherData\":{\"hirnode\":\"0.1.0\"}}"

static void test_refused(void)
{
    expect_refused("{\"traceEvents\":[]}", "not a hirnode trace");
    expect_refused("[1, 2]", "no traceEvents");
    expect_refused("{\"traceEvents\":[1,]}", "1:19: ");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":-1,\"tid\":0,\"ts\":0,\"dur\":0,"
                      "\"args\":{\"run\":0,\"id\":0}}"), "event 0: pid and tid");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":0,\"tid\":0.5,\"ts\":0,\"dur\":0,"
                      "\"args\":{\"run\":0,\"id\":0}}"), "pid and tid");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":0,\"tid\":0,\"ts\":\"0\",\"dur\":0,"
                      "\"args\":{\"run\":0,\"id\":0}}"), "ts and dur");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":-1,"
                      "\"args\":{\"run\":0,\"id\":0}}"), "dur >= 0");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":0}"),
                   "args.run");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":0,"
                      "\"args\":{\"run\":0}}"), "needs args.id");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"wait\",\"name\":\"w\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":0,"
                      "\"args\":{\"run\":0,\"id\":1,\"dep\":-2}}"), "args.dep");
    expect_refused(EV("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":1}"), "thread_name needs");
    expect_refused(EV("7"), "event 0: an event is an object");
    /* what would overflow a figure, or make the tool loop for ever over
     * ranks or runs, is refused, not cast */
    expect_refused("{\"traceEvents\":[],\"otherData\":{\"hirnode\":\"0.1.0\",\"ranks\":1e300}}",
                   "otherData.ranks must be an integer");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":70000,\"tid\":0,\"ts\":0,"
                      "\"dur\":0,\"args\":{\"run\":0,\"id\":0}}"), "pid and tid");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":0,\"tid\":0,\"ts\":0,"
                      "\"dur\":0,\"args\":{\"run\":2147483647,\"id\":0}}"), "args.run");
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":0,\"tid\":0,\"ts\":9e15,"
                      "\"dur\":9e15,\"args\":{\"run\":0,\"id\":0}}"), "ts and dur");
    /* two spans of one stream at once: no trace hirnode writes, and the
     * critical path through them would run backwards in time */
    expect_refused(EV("{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":0,\"tid\":1,\"ts\":0,"
                      "\"dur\":2,\"args\":{\"run\":0,\"id\":0}},{\"ph\":\"X\",\"cat\":\"comm\",\"name\":\"g\","
                      "\"pid\":0,\"tid\":1,\"ts\":1,\"dur\":2,\"args\":{\"run\":0,\"id\":1}}"),
                   "rank 0, track 1: spans 0 and 1 overlap: a stream runs one thing at a time");
    /* 32768 spans 3e14 ns apart: sums of their lengths could pass 2^63 ns */
    {
        hn_strbuf text;
        hn_sb_init(&text);
        hn_sb_append(&text, "{\"traceEvents\":[");
        for (int i = 0; i < 32768; i++)
            hn_sb_printf(&text, "%s{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"f\",\"pid\":0,\"tid\":%d,\"ts\":%s,"
                                "\"dur\":1e11,\"args\":{\"run\":0,\"id\":%d}}",
                         i ? "," : "", i % 7, i % 2 ? "1e11" : "-1e11", i);
        hn_sb_append(&text, "],\"otherData\":{\"hirnode\":\"0.1.0\"}}");
        CU_ASSERT_PTR_NOT_NULL_FATAL(text.data);
        expect_refused(text.data, "too far apart");
        hn_sb_free(&text);
    }
}

/* Every allocation failing in turn: an error, nothing leaked. */
static void test_allocation_failures(void)
{
    long total, nomem = 0;
    hn_trace_data t;
    hn_alloc_fail_after(1000000000L);
    CU_ASSERT_EQUAL_FATAL(hn_trace_load(good, strlen(good), &t, NULL), HN_OK);
    hn_trace_data_free(&t);
    total = hn_alloc_fail_after(0);
    CU_ASSERT(total > 20);
    for (long n = 1; n <= total; n++) {
        hn_status_t st;
        hn_alloc_fail_after(n);
        st = hn_trace_load(good, strlen(good), &t, NULL);
        hn_alloc_fail_after(0);
        CU_ASSERT(st == HN_OK || st == HN_ERR_NOMEM);
        nomem += st == HN_ERR_NOMEM;
        if (st == HN_OK)
            hn_trace_data_free(&t);
        else
            CU_ASSERT(t.nspans == 0 && t.spans == NULL);
    }
    CU_ASSERT(nomem > 0);
}

void hn_suite_trace_read(void)
{
    static CU_TestInfo tests[] = {
        {"a hand-written trace", test_read},
        {"what is no hirnode trace", test_refused},
        {"allocation failures", test_allocation_failures},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("trace/trace_read", tests);
}

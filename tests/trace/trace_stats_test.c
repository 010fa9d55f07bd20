/* Tests of src/trace/trace_stats.c on hand-made spans, with figures
 * worked out by hand: busy time, the overlap figure, the critical path. */
#include <string.h>

#include "trace/trace.h"
#include "../test.h"

enum { C = HN_SPAN_COMPUTE, M = HN_SPAN_COMM, W = HN_SPAN_WAIT, I = HN_SPAN_ISSUE, R = HN_SPAN_RUN };

static hn_span sp(int rank, int track, int kind, int64_t b, int64_t e, int run, int id)
{
    hn_span s;
    memset(&s, 0, sizeof(s));
    s.rank = rank;
    s.track = track;
    s.kind = (hn_span_kind)kind;
    s.begin = b;
    s.end = e;
    s.run = run;
    s.id = id;
    s.dep = -1;
    s.instr = id;
    s.name = s.text = s.src = "";
    return s;
}

/* rank 0: a communication on track 1 over [0, 100) under compute on
 * tracks 2 and 3 ([10, 30), [20, 50), [90, 120)): hidden [10, 50) and
 * [90, 100) = 50; a wait on track 3 [50, 90) and compute of rank 1 at the
 * same time count for nothing; compute on track 1 itself after it neither.
 * A second communication, on track 2 [60, 80), has nothing beside it in
 * run 0. Counting all runs, compute of run 1 on track 3 [60, 75) hides 15
 * more of each of the two communications.
 * rank 1: communication [0, 10) entirely under compute on track 2. */
static int overlap_case(hn_span *s)
{
    int n = 0;
    s[n++] = sp(0, 1, M, 0, 100, 0, 0);
    s[n++] = sp(0, 2, C, 10, 30, 0, 1);
    s[n++] = sp(0, 3, C, 20, 50, 0, 2);
    s[n++] = sp(0, 3, W, 50, 90, 0, 3);
    s[n++] = sp(0, 3, C, 90, 120, 0, 4);
    s[n++] = sp(0, 1, C, 100, 110, 0, 5);
    s[n++] = sp(0, 2, M, 60, 80, 0, 6);
    s[n++] = sp(0, 3, C, 60, 75, 1, 7);
    s[n++] = sp(0, 0, I, 0, 200, 0, -1); /* host spans are no device work */
    s[n++] = sp(1, 1, M, 0, 10, 0, 0);
    s[n++] = sp(1, 2, C, 0, 60, 0, 1);
    return n;
}

static void test_overlap(void)
{
    hn_span s[16];
    int n = overlap_case(s);
    hn_overlap o;
    CU_ASSERT_EQUAL(hn_trace_overlap(s, n, 0, 0, &o), HN_OK);
    CU_ASSERT_EQUAL(o.comm, 120);
    CU_ASSERT_EQUAL(o.hidden, 50);
    CU_ASSERT_EQUAL(hn_trace_overlap(s, n, 1, 0, &o), HN_OK);
    CU_ASSERT_EQUAL(o.comm, 10);
    CU_ASSERT_EQUAL(o.hidden, 10);
    CU_ASSERT_EQUAL(hn_overlap_figure(&o), 1.0);
    CU_ASSERT_EQUAL(hn_trace_overlap(s, n, -1, 0, &o), HN_OK);
    CU_ASSERT_EQUAL(o.comm, 130);
    CU_ASSERT_EQUAL(o.hidden, 60);
    CU_ASSERT_EQUAL(hn_trace_overlap(s, n, -1, -1, &o), HN_OK);
    CU_ASSERT_EQUAL(o.comm, 130);
    CU_ASSERT_EQUAL(o.hidden, 90);
    CU_ASSERT_EQUAL(hn_trace_overlap(s, n, -1, 1, &o), HN_OK);
    CU_ASSERT_EQUAL(o.comm, 0);
    CU_ASSERT_EQUAL(hn_overlap_figure(&o), 0.0);
    /* the order of the spans does not matter */
    for (int i = 0; i < n / 2; i++) {
        hn_span t = s[i];
        s[i] = s[n - 1 - i];
        s[n - 1 - i] = t;
    }
    CU_ASSERT_EQUAL(hn_trace_overlap(s, n, -1, 0, &o), HN_OK);
    CU_ASSERT_EQUAL(o.hidden, 60);
}

static void test_busy(void)
{
    hn_span s[16];
    int n = overlap_case(s), nb = 0;
    hn_track_busy *b = NULL;
    CU_ASSERT_EQUAL_FATAL(hn_trace_busy(s, n, 0, &b, &nb), HN_OK);
    CU_ASSERT_EQUAL_FATAL(nb, 5);
    /* rank 0 track 1: comm [0, 100) and compute [100, 110) */
    CU_ASSERT(b[0].rank == 0 && b[0].track == 1);
    CU_ASSERT_EQUAL(b[0].busy, 110);
    CU_ASSERT_EQUAL(b[0].compute, 10);
    CU_ASSERT_EQUAL(b[0].comm, 100);
    CU_ASSERT_EQUAL(b[0].nspans, 2);
    /* rank 0 track 2: compute [10, 30), comm [60, 80) */
    CU_ASSERT(b[1].rank == 0 && b[1].track == 2 && b[1].busy == 40 && b[1].comm == 20);
    /* rank 0 track 3: compute [20, 50) and [90, 120), a wait that is no work */
    CU_ASSERT(b[2].track == 3 && b[2].busy == 60 && b[2].wait == 40 && b[2].nspans == 3);
    CU_ASSERT(b[3].rank == 1 && b[3].track == 1 && b[3].busy == 10);
    CU_ASSERT(b[4].rank == 1 && b[4].track == 2 && b[4].busy == 60);
    hn_free(b);
    /* all runs: track 3 also has run 1's [60, 75) */
    CU_ASSERT_EQUAL_FATAL(hn_trace_busy(s, n, -1, &b, &nb), HN_OK);
    CU_ASSERT(nb == 5 && b[2].busy == 75 && b[2].nspans == 4);
    hn_free(b);
}

/* Two ranks, one allreduce between them (key 0):
 *   rank 0, track 1: A [0,10) compute, C0 [10,30) comm, W [30,31) wait for
 *                    X, D [35,50) compute;   track 2: X [5,25) compute
 *   rank 1, track 1: B [0,20) compute, C1 [20,30) comm
 * D ends last; it started at 35, 4 after W ended: idle [31, 35). W was not
 * held by X (X ended at 25, before W began), so back through C0 on its
 * track; C0 began at 10 but rank 1 joined at 20: the communication waited
 * for C1, whose predecessor B ended at 20. The path: B [0,20), C0 [20,30),
 * W [30,31), idle [31,35), D [35,50). */
static void test_critical_path(void)
{
    int keys[2] = {0, 0};
    hn_span s[8];
    hn_path_seg *seg = NULL;
    int n = 0, ns = 0;
    s[n++] = sp(0, 1, C, 0, 10, 0, 0);   /* A */
    s[n++] = sp(0, 1, M, 10, 30, 0, 1);  /* C0 */
    s[n++] = sp(0, 1, W, 30, 31, 0, 2);  /* W */
    s[n++] = sp(0, 1, C, 35, 50, 0, 3);  /* D */
    s[n++] = sp(0, 2, C, 5, 25, 0, 4);   /* X */
    s[n++] = sp(1, 1, C, 0, 20, 0, 0);   /* B */
    s[n++] = sp(1, 1, M, 20, 30, 0, 1);  /* C1 */
    s[n++] = sp(0, 0, R, 0, 60, 0, -1);  /* the run: not on the path */
    s[1].key0 = 0;
    s[1].nkeys = 1;
    s[6].key0 = 1;
    s[6].nkeys = 1;
    s[2].dep = 4;
    CU_ASSERT_EQUAL_FATAL(hn_trace_critical_path(s, n, keys, 0, &seg, &ns), HN_OK);
    CU_ASSERT_EQUAL_FATAL(ns, 5);
    CU_ASSERT(seg[0].span == 5 && seg[0].from == 0 && seg[0].to == 20);
    CU_ASSERT(seg[1].span == 1 && seg[1].from == 20 && seg[1].to == 30);
    CU_ASSERT(seg[2].span == 2 && seg[2].from == 30 && seg[2].to == 31);
    CU_ASSERT(seg[3].span == -1 && seg[3].from == 31 && seg[3].to == 35);
    CU_ASSERT(seg[4].span == 3 && seg[4].from == 35 && seg[4].to == 50);
    hn_free(seg);

    /* X now ends at 44, after W began: W waited for it until 44 (W ends
     * at 45, D runs [45, 50)); the path goes X [5,44), W [44,45), D. */
    s[4].end = 44;
    s[2].end = 45;
    s[3].begin = 45;
    CU_ASSERT_EQUAL_FATAL(hn_trace_critical_path(s, n, keys, 0, &seg, &ns), HN_OK);
    CU_ASSERT_EQUAL_FATAL(ns, 3);
    CU_ASSERT(seg[0].span == 4 && seg[0].from == 5 && seg[0].to == 44);
    CU_ASSERT(seg[1].span == 2 && seg[1].from == 44 && seg[1].to == 45);
    CU_ASSERT(seg[2].span == 3 && seg[2].from == 45 && seg[2].to == 50);
    hn_free(seg);

    /* no device spans in run 3: no path */
    CU_ASSERT_EQUAL(hn_trace_critical_path(s, n, keys, 3, &seg, &ns), HN_OK);
    CU_ASSERT_EQUAL(ns, 0);
    CU_ASSERT_PTR_NULL(seg);
}

/* A communication whose ends name each other in a cycle of clocks that
 * disagree still ends (every span is visited once at most). */
static void test_critical_path_ends(void)
{
    int keys[2] = {0, 0};
    hn_span s[2];
    hn_path_seg *seg = NULL;
    int ns = 0;
    s[0] = sp(0, 1, M, 10, 30, 0, 0);
    s[1] = sp(1, 1, M, 20, 25, 0, 0);
    s[0].nkeys = 1;
    s[1].key0 = 1;
    s[1].nkeys = 1;
    CU_ASSERT_EQUAL_FATAL(hn_trace_critical_path(s, 2, keys, 0, &seg, &ns), HN_OK);
    /* rank 0's ends last; it waited for rank 1 from 10 to 20 */
    CU_ASSERT_EQUAL_FATAL(ns, 1);
    CU_ASSERT(seg[0].span == 0 && seg[0].from == 20 && seg[0].to == 30);
    hn_free(seg);
}

void hn_suite_trace_stats(void)
{
    static CU_TestInfo tests[] = {
        {"the overlap figure of a hand-made trace", test_overlap},
        {"busy time per track", test_busy},
        {"the critical path of a hand-made trace", test_critical_path},
        {"a critical path always ends", test_critical_path_ends},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("trace/trace_stats", tests);
}

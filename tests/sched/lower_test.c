/* Tests of src/sched/lower.c: every pipelined statement and strategy run
 * lowered at 1..8 ranks with random stream delays against its reference;
 * stream-parallel loops at 1..16 streams; golden `--lowered` dumps; the
 * lowered text parses back and passes the same verifier and dry run;
 * misuse found when lowering names the statement; messages about
 * generated code name the statement, not the code; allocation failures. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "runtime/check.h"
#include "sched/lower.h"
#include "ir/params.h"
#include "ranks/run_error.h"
#include "exec/verify_run.h"
#include "../test.h"

/* Operands of each form, with a reference; OPTS is replaced. M divides by
 * world and by every chunk count of the cases below. */
static const char *const forms[] = {
    /* 0: allgather + matmul */
    "param M = 8 * world, K = 16, N = 8\n"
    "input A : f32[M / world, K] shard(axis 0)\ninput B : f32[K, N] replicated\n"
    "output C : f32[M, N] replicated\n"
    "matmul C <- allgather(A), B pipelined(OPTS)\n"
    "reference {\n  matmul C <- A, B\n}\n",
    /* 1: allgather + linear with bias, bf16 */
    "param M = 8 * world, K = 16, N = 8\n"
    "input A : bf16[M / world, K] shard(axis 0)\ninput W : bf16[N, K] replicated\n"
    "input bias : bf16[N] replicated\noutput C : bf16[M, N] replicated\n"
    "linear C <- allgather(A), W, bias pipelined(OPTS)\n"
    "reference {\n  linear C <- A, W, bias\n}\n",
    /* 2: matmul + reduce_scatter */
    "param M = 8 * world, K = 8 * world, N = 8\n"
    "input A : f32[M, K / world] shard(axis 1)\ninput B : f32[K / world, N] shard(axis 0)\n"
    "output C : f32[M / world, N] shard(axis 0)\n"
    "reduce_scatter C <- matmul(A, B) pipelined(OPTS)\n"
    "reference {\n  matmul C <- A, B\n}\n",
    /* 3: linear + reduce_scatter, the bias added once */
    "param M = 8 * world, K = 8 * world, N = 8\n"
    "input A : f32[M, K / world] shard(axis 1)\ninput W : f32[N, K / world] shard(axis 1)\n"
    "input bias : f32[N] replicated\noutput C : f32[M / world, N] shard(axis 0)\n"
    "reduce_scatter C <- linear(A, W, bias) pipelined(OPTS)\n"
    "reference {\n  linear C <- A, W, bias\n}\n",
    /* 4: matmul + allreduce */
    "param M = 8 * world, K = 8 * world, N = 8\n"
    "input A : f32[M, K / world] shard(axis 1)\ninput B : f32[K / world, N] shard(axis 0)\n"
    "output C : f32[M, N] replicated\n"
    "allreduce C <- matmul(A, B) pipelined(OPTS)\n"
    "reference {\n  matmul C <- A, B\n}\n",
    /* 5: linear + allreduce */
    "param M = 8 * world, K = 8 * world, N = 8\n"
    "input A : f32[M, K / world] shard(axis 1)\ninput W : f32[N, K / world] shard(axis 1)\n"
    "input bias : f32[N] replicated\noutput C : f32[M, N] replicated\n"
    "allreduce C <- linear(A, W, bias) pipelined(OPTS)\n"
    "reference {\n  linear C <- A, W, bias\n}\n",
    /* 6: plain allgather */
    "param M = 8 * world, N = 4\n"
    "input X : f32[M / world, N] shard(axis 0)\noutput Y : f32[M, N] replicated\n"
    "allgather Y <- X pipelined(OPTS)\n"
    "reference {\n  copy Y <- X\n}\n",
    /* 7: plain reduce_scatter (max) */
    "param M = 8 * world, N = 4\n"
    "input X : f32[1, M, N] shard(axis 0)\noutput Y : f32[M / world, N] shard(axis 0)\n"
    "reduce_scatter Y <- X op max pipelined(OPTS)\n"
    "reference {\n  Yv = view Y as [M, N]\n  copy Yv <- X[0]\n  for r in 1 .. world {\n"
    "    maximum Yv <- Yv, X[r]\n  }\n}\n",
    /* 8: plain allreduce */
    "param M = 8 * world, N = 4\n"
    "input X : f32[1, M, N] shard(axis 0)\noutput Y : f32[M, N] replicated\n"
    "allreduce Y <- X pipelined(OPTS)\n"
    "reference {\n  sum Y <- X, 0\n}\n",
};

/* Every strategy each form offers, through each communicator and protocol. */
static const struct {
    int form;
    const char *opts;
} cases[] = {
    {0, ""},
    {0, "strategy=sequential, via=nccl"},
    {0, "strategy=sequential, via=p2p"},
    {0, "strategy=ring"},
    {0, "strategy=ring, protocol=get, streams=3"},
    {0, "strategy=ring, via=nccl, streams=1"},
    {0, "strategy=collective, chunks=4, via=nccl"},
    {0, "strategy=collective, chunks=2, via=p2p, streams=3"},
    {0, "strategy=broadcast, via=nccl"},
    {0, "strategy=broadcast, chunks=2 * world, via=p2p, protocol=get"},
    {1, ""},
    {1, "strategy=ring, streams=2"},
    {1, "strategy=collective, chunks=8, via=nccl, streams=2"},
    {1, "strategy=broadcast, via=p2p"},
    {2, ""},
    {2, "strategy=sequential, via=p2p"},
    {2, "strategy=ring, streams=2"},
    {2, "strategy=ring, protocol=get, streams=3"},
    {2, "strategy=ring, via=nccl, streams=1"},
    {2, "strategy=collective, chunks=2, via=nccl"},
    {2, "strategy=collective, chunks=4, via=p2p, streams=3"},
    {3, ""},
    {3, "strategy=sequential, via=nccl"},
    {3, "strategy=ring, streams=2"},
    {3, "strategy=collective, chunks=2, via=p2p"},
    {4, ""},
    {4, "strategy=sequential, via=p2p"},
    {4, "strategy=ring, streams=2"},
    {4, "strategy=collective, chunks=4, via=nccl, streams=3"},
    {4, "strategy=collective, chunks=2, via=p2p"},
    {5, "strategy=sequential, via=nccl"},
    {5, "strategy=ring, protocol=get"},
    {5, "strategy=collective, chunks=2, via=nccl"},
    {6, ""},
    {6, "strategy=collective, chunks=4, via=nccl"},
    {6, "strategy=broadcast, chunks=2 * world, via=p2p"},
    {7, "strategy=collective, chunks=2, via=nccl"},
    {7, "strategy=sequential, via=p2p"},
    {8, "strategy=collective, chunks=4, via=p2p, streams=3"},
    {8, "strategy=sequential, via=nccl"},
};

static char *with_opts(const char *form, const char *opts)
{
    const char *at = strstr(form, "OPTS");
    size_t n = strlen(form) + strlen(opts) + 1;
    char *text = malloc(n);
    snprintf(text, n, "%.*s%s%s", (int)(at - form), form, opts, at + 4);
    return text;
}

/* Runs text through the --check driver; 1 if it ran and matched. */
static int check(const char *text, int n, int nstreams, double delay, uint64_t seed, char **why)
{
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    hn_program *p = hn_test_parse(text, why);
    hn_check_opts o;
    hn_check_result res;
    hn_strbuf diag;
    hn_status_t st;
    int ok;
    if (p == NULL)
        return 0;
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    cfg.nstreams = nstreams;
    cfg.backend = hn_test_backend;
    cfg.host_delay_us = delay;
    cfg.seed = seed;
    if (hn_runtime_create(&cfg, &rt) != HN_OK) {
        hn_program_destroy(p);
        return 0;
    }
    memset(&o, 0, sizeof(o));
    o.iters = 2;
    o.seed = seed;
    o.check = 1;
    hn_sb_init(&diag);
    st = hn_check_run(rt, p, &o, &res, &diag);
    ok = st == HN_OK && res.passed && res.checked > 0;
    if (!ok) {
        hn_sb_printf(&diag, "%s (%s), worst rel l2 %g\n", hn_status_string(st), hn_runtime_error(rt),
                     res.worst_rel_l2);
        *why = hn_sb_take(&diag);
    } else {
        hn_sb_free(&diag);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    return ok;
}

static void test_every_strategy(void)
{
    int maxn = hn_test_max_ranks();
    int delays = strcmp(hn_test_backend, "host") == 0;
    for (int c = 0; c < HN_ARRAY_LEN(cases); c++) {
        char *text = with_opts(forms[cases[c].form], cases[c].opts);
        /* 1..8 ranks: the rings' peers, odd worlds, chunks of one rank */
        for (int n = 1; n <= maxn; n += n < 4 ? 1 : 4) {
            char *why = NULL;
            int ok = check(text, n, 3, delays ? 40 : 0, 1000 + (uint64_t)(c * 16 + n), &why);
            if (!ok)
                fprintf(stderr, "\n  form %d pipelined(%s) at %d ranks: %s", cases[c].form, cases[c].opts, n,
                        why ? why : "");
            CU_ASSERT_TRUE(ok);
            free(why);
        }
        free(text);
    }
}

/* nstreams from 1 (every iteration on stream 0, still not the caller's)
 * to 16, two loops in a row, one counting down, nested control flow,
 * prior work on the caller's stream, and each rank on its own. */
static void test_stream_loops(void)
{
    char *text = hn_test_read_file("examples/stream_loop.hir", NULL);
    static const int streams[] = {1, 2, 3, 16};
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    for (int s = 0; s < HN_ARRAY_LEN(streams); s++)
        for (int n = 1; n <= 2 && n <= hn_test_max_ranks(); n++)
            for (int seed = 1; seed <= 2; seed++) {
                char *why = NULL;
                int ok = check(text, n, streams[s], strcmp(hn_test_backend, "host") == 0 ? 200 : 0,
                               (uint64_t)(seed * 7 + s), &why);
                if (!ok)
                    fprintf(stderr, "\n  stream loops, nstreams %d, %d ranks: %s", streams[s], n, why ? why : "");
                CU_ASSERT_TRUE(ok);
                free(why);
            }
    free(text);
}

/* Lowers p at world n; NULL (diag in *diag) on error. */
static hn_program *lower_at(const hn_program *p, int n, int nstreams, char **diag)
{
    int64_t params[16];
    hn_strbuf sb;
    hn_program *lp = NULL;
    hn_status_t st;
    hn_sb_init(&sb);
    st = hn_params_resolve(p, n, nstreams, 0, NULL, NULL, params, &sb);
    if (st == HN_OK)
        st = hn_sched_lower(p, n, 1, nstreams, params, NULL, &lp, &sb, NULL);
    if (diag != NULL)
        *diag = hn_sb_take(&sb);
    else
        hn_sb_free(&sb);
    return st == HN_OK ? lp : NULL;
}

/* The printed lowered program reads back as the same program and passes
 * the same static verifier and dry run, for the same configuration. */
static int reads_back(const hn_program *lp, int n, int nstreams)
{
    char *text = hn_program_print(lp), *diag = NULL;
    hn_program *q = text ? hn_test_parse(text, &diag) : NULL;
    int64_t params[16];
    hn_strbuf sb;
    int ok = q != NULL && hn_prog_equal(lp, q) && !q->has_sched;
    hn_sb_init(&sb);
    ok = ok && hn_params_resolve(q, n, nstreams, 0, NULL, NULL, params, &sb) == HN_OK &&
         hn_verify_run(q, n, nstreams, params, &sb, NULL) == HN_OK;
    if (!ok)
        fprintf(stderr, "\n  the lowered text does not read back at %d ranks: %s%s\n%s", n, diag ? diag : "",
                sb.data ? sb.data : "", text ? text : "");
    hn_sb_free(&sb);
    hn_string_free(diag);
    hn_string_free(text);
    hn_program_destroy(q);
    return ok;
}

/* one example's lowered text at 1..8 ranks; counts those with something to lower */
static void example_reads_back(const char *path, hn_program *p, void *arg)
{
    for (int n = 1; n <= 8 && p->has_sched; n *= 2) { /* as the examples are sized */
        char *diag = NULL;
        hn_program *lp = lower_at(p, n, 3, &diag);
        if (lp == NULL)
            fprintf(stderr, "\n  %s at %d ranks: %s", path, n, diag ? diag : "");
        CU_ASSERT_PTR_NOT_NULL(lp);
        if (lp != NULL)
            CU_ASSERT_TRUE(reads_back(lp, n, 3));
        hn_string_free(diag);
        hn_program_destroy(lp);
    }
    *(int *)arg += p->has_sched;
}

static void test_reads_back(void)
{
    int count = 0;
    hn_test_each_program("examples", example_reads_back, &count);
    CU_ASSERT(count >= 6);
    for (int c = 0; c < HN_ARRAY_LEN(cases); c++) {
        char *text = with_opts(forms[cases[c].form], cases[c].opts);
        hn_program *p = hn_test_parse(text, NULL), *lp;
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        for (int n = 1; n <= 8; n *= 2) {
            char *diag = NULL;
            lp = lower_at(p, n, 3, &diag);
            if (lp == NULL)
                fprintf(stderr, "\n  form %d pipelined(%s) at %d ranks: %s", cases[c].form, cases[c].opts, n,
                        diag ? diag : "");
            hn_string_free(diag);
            CU_ASSERT_PTR_NOT_NULL(lp);
            if (lp != NULL)
                CU_ASSERT_TRUE(reads_back(lp, n, 3));
            hn_program_destroy(lp);
        }
        hn_program_destroy(p);
        free(text);
    }
}

/* An operand of any length is the statement's own, copied into the code:
 * one whose text ran past 255 characters (an index of 120 terms) once
 * came out cut, and lowering failed with an internal error. */
static void test_long_operands(void)
{
    char idx[1024] = "0", text[2048], *why = NULL;
    hn_program *p, *lp;
    int n = hn_test_max_ranks() >= 2 ? 2 : 1, ok;
    for (int i = 1; i < 120; i++)
        strcat(idx, " + 0");
    snprintf(text, sizeof(text),
             "param M = 8 * world, K = 16, N = 8\n"
             "input A : f32[1, M / world, K] shard(axis 1)\ninput B : f32[K, N] replicated\n"
             "output C : f32[M, N] replicated\n"
             "matmul C <- allgather(A[%s]), B pipelined(strategy=ring)\n"
             "reference {\n  matmul C <- A[0], B\n}\n", idx);
    CU_ASSERT(strlen(idx) > 255);
    p = hn_test_parse(text, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    lp = lower_at(p, n, 3, &why);
    if (lp == NULL)
        fprintf(stderr, "\n  a long operand at %d ranks: %s", n, why ? why : "");
    CU_ASSERT_PTR_NOT_NULL(lp);
    if (lp != NULL)
        CU_ASSERT_TRUE(reads_back(lp, n, 3));
    hn_string_free(why);
    why = NULL;
    ok = check(text, n, 3, 0, 7, &why);
    if (!ok)
        fprintf(stderr, "\n  a long operand at %d ranks: %s", n, why ? why : "");
    CU_ASSERT_TRUE(ok);
    free(why);
    hn_program_destroy(lp);
    hn_program_destroy(p);
}

/* tests/programs/lowered/NAME.hir, first line `# lowered at N ranks: ...`,
 * lowers to NAME.expected, which reads back, verifies and dry-runs. */
static void test_golden(void)
{
    DIR *d = opendir("tests/programs/lowered");
    struct dirent *e;
    int count = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    while ((e = readdir(d)) != NULL) {
        char path[512], *text, *expected, *printed, *diag = NULL;
        hn_program *p = NULL, *lp;
        int n = 0;
        size_t len;
        if ((len = strlen(e->d_name)) < 5 || strcmp(e->d_name + len - 4, ".hir") != 0)
            continue;
        snprintf(path, sizeof(path), "tests/programs/lowered/%s", e->d_name);
        text = hn_test_read_file(path, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        CU_ASSERT_EQUAL(sscanf(text, "# lowered at %d ranks", &n), 1);
        free(text);
        snprintf(path + strlen(path) - 4, 16, ".expected");
        expected = hn_test_read_file(path, NULL);
        snprintf(path + strlen(path) - 9, 16, ".hir");
        CU_ASSERT_PTR_NOT_NULL_FATAL(expected);
        CU_ASSERT_EQUAL_FATAL(hn_program_load(path, &p, &diag), HN_OK);
        hn_string_free(diag);
        diag = NULL;
        lp = lower_at(p, n, 3, &diag);
        CU_ASSERT_PTR_NOT_NULL_FATAL(lp);
        printed = hn_program_print(lp);
        if (strcmp(printed, expected) != 0)
            fprintf(stderr, "\n--- %s at %d ranks, got\n%s--- want\n%s", path, n, printed, expected);
        CU_ASSERT_STRING_EQUAL(printed, expected);
        CU_ASSERT_TRUE(reads_back(lp, n, 3));
        hn_string_free(printed);
        hn_string_free(diag);
        free(expected);
        hn_program_destroy(lp);
        hn_program_destroy(p);
        count++;
    }
    closedir(d);
    CU_ASSERT(count >= 15);
}

/* Lowering `text` at n ranks fails with `want` (position first). */
static void expect_lower_error(const char *text, int n, const char *want)
{
    char *diag = NULL;
    hn_program *p = hn_test_parse(text, &diag), *lp;
    if (p == NULL)
        fprintf(stderr, "\n  does not parse: %s", diag ? diag : "");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hn_string_free(diag);
    diag = NULL;
    lp = lower_at(p, n, 3, &diag);
    CU_ASSERT_PTR_NULL(lp);
    if (diag == NULL || strstr(diag, want) == NULL)
        fprintf(stderr, "\n  want '%s', got:\n%s", want, diag ? diag : "");
    CU_ASSERT_PTR_NOT_NULL(diag ? strstr(diag, want) : NULL);
    /* never the generated code */
    CU_ASSERT_PTR_NULL(diag ? strstr(diag, "gathered") : NULL);
    hn_string_free(diag);
    hn_program_destroy(lp);
    hn_program_destroy(p);
}

static void test_misuse(void)
{
    char *t;
#define CASE(form, opts, n, want)                 \
    do {                                          \
        t = with_opts(forms[form], opts);         \
        expect_lower_error(t, n, want);           \
        free(t);                                  \
    } while (0)
    CASE(0, "strategy=collective, chunks=3", 2, "t.hir:5:1: error: matmul C <- allgather(A), B pipelined(strategy="
         "collective, chunks=3): chunks=3 does not divide the 8 rows of each rank's shard of A");
    CASE(0, "strategy=ring, chunks=3", 2, "t.hir:5:1: error: matmul C <- allgather(A), B pipelined(strategy=ring, "
         "chunks=3): strategy=ring moves one shard per step: chunks=3 must be world (2)");
    CASE(0, "strategy=broadcast, chunks=3", 2, "chunks=3 is not a multiple of world (2)");
    CASE(0, "strategy=broadcast, chunks=48", 2, "chunks=48 makes 24 pieces per rank, which do not divide the 8 rows");
    CASE(0, "strategy=sequential, chunks=2", 2, "strategy=sequential runs in one step: chunks=2 must be 1");
    /* what auto tried, not one strategy the statement never named */
    CASE(0, "chunks=3", 2, "t.hir:5:1: error: matmul C <- allgather(A), B pipelined(chunks=3): strategy=auto finds "
         "no strategy for chunks=3: sequential runs in one step, chunks=3 must be 1; ring moves one shard per step, "
         "chunks=3 must be world (2); collective: chunks=3 does not divide the 8 rows of each rank's shard of A; "
         "broadcast takes chunks from each rank in turn, chunks=3 is not a multiple of world (2); chunks=2 or "
         "chunks=4 would fit\n");
    CASE(0, "streams=17", 2, "streams=17 out of range [1, 16]");
    CASE(0, "chunks=0", 2, "chunks=0 out of range [1, 1048576]");
    CASE(0, "chunks=world / (world - 2)", 2, "t.hir:5:1: error: matmul C <- allgather(A), B pipelined(chunks=world / "
         "(world - 2)): chunks: division by zero");
    CASE(4, "strategy=collective, chunks=24, via=p2p", 3,
         "via=p2p splits each chunk's allreduce in world=3 parts: the 8 elements of a chunk do not divide");
    CASE(8, "strategy=collective, chunks=64, via=p2p", 4, "t.hir:4:1: error: allreduce Y <- X pipelined(strategy="
         "collective, chunks=64, via=p2p): via=p2p splits each chunk's allreduce in world=4 parts: the 2 elements");
    /* shapes that do not fit */
    expect_lower_error("input A : f32[4, 8] replicated\ninput B : f32[4, 2] replicated\noutput C : f32[8, 2] "
                       "replicated\nmatmul C <- allgather(A), B pipelined()\n", 2,
                       "t.hir:4:1: error: matmul C <- allgather(A), B pipelined(): matmul of f32[4, 8] and f32[4, 2]: "
                       "the inner dimensions differ");
    expect_lower_error("input A : f32[4, 8] replicated\ninput B : f32[8, 2] replicated\noutput C : f32[4, 2] "
                       "replicated\nmatmul C <- allgather(A), B pipelined()\n", 2,
                       "allgather(f32[4, 8]) over 2 ranks times f32[8, 2] is [8, 2], not f32[4, 2]");
    expect_lower_error("input A : f32[6, 8] replicated\ninput B : f32[8, 2] replicated\noutput C : f32[2, 2] "
                       "replicated\nreduce_scatter C <- matmul(A, B) pipelined()\n", 4,
                       "the 6 rows of f32[6, 8] do not split into world=4 blocks");
    expect_lower_error("input A : f32[2, 4, 8] replicated\ninput B : f32[8, 2] replicated\noutput C : f32[16, 2] "
                       "replicated\nmatmul C <- allgather(A), B pipelined()\n", 2,
                       "allgather + matmul takes 2-d tensors (view them)");
    expect_lower_error("input A : f32[8, 4] replicated\ninput B : f32[8, 2] replicated\noutput C : f32[8, 2] "
                       "replicated\nAt = transpose A, 0, 1\nmatmul C <- allgather(At), B pipelined()\n", 2,
                       "t.hir:5:1: error: matmul C <- allgather(At), B pipelined(): the operand f32[4, 8] is a "
                       "strided view");
    expect_lower_error("input A : f32[4, 8] replicated\ninput W : f32[2, 8] replicated\ninput b : f32[3] replicated\n"
                       "output C : f32[8, 2] replicated\nlinear C <- allgather(A), W, b pipelined()\n", 2,
                       "linear: bias must be [2]");
    expect_lower_error("input A : f32[8] replicated\noutput G : f32[12] replicated\nallgather G <- A pipelined()\n", 2,
                       "allgather of f32[8] into f32[12] over 2 ranks: the sizes do not fit");
    /* tensors of another shape on one rank */
    expect_lower_error("input B : f32[8, 2] replicated\noutput C : f32[16, 2] replicated\nA = alloc f32[4 + rank * 4, 8]\n"
                       "matmul C <- allgather(A), B pipelined()\n", 2,
                       "t.hir:4:1: error: matmul C <- allgather(A), B pipelined(): its tensors differ between ranks or "
                       "between runs of it (rank 1)");
    /* the source's own errors come first, as the dry run reports them */
    expect_lower_error("input A : f32[4, 8] replicated\ninput B : f32[8, 2] replicated\noutput C : f32[8, 2] "
                       "replicated\nx = select A, 0, 7\nmatmul C <- allgather(A), B pipelined()\n", 2,
                       "t.hir:4:1: error: all ranks: x = select A, 0, 7: index 7 out of range [0, 4) on axis 0");
#undef CASE
}

/* What runs is generated code; what a message names is the statement:
 * its position, and its text where the instruction would be. */
static void test_messages_name_the_statement(void)
{
    const char *text = "param M = 8 * world, K = 16, N = 8\n"
                       "input A : f32[M / world, K] shard(axis 0)\ninput B : f32[K, N] replicated\n"
                       "output C : f32[M, N] replicated\n"
                       "x = 1\n"
                       "  matmul C <- allgather(A), B pipelined(strategy=ring, streams=2)\n";
    const char *stmt = "t.hir:6:3: error: rank 1: matmul C <- allgather(A), B pipelined(strategy=ring, streams=2): ";
    hn_program *p = hn_test_parse(text, NULL), *lp, *lp4;
    int64_t params[3] = {32, 16, 8};
    hn_strbuf sb;
    int generated = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    lp = lower_at(p, 2, 3, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lp);
    /* the runtime's error text of every generated instruction */
    for (int i = 0; i < lp->ninstrs; i++) {
        const hn_instr *in = lp->instrs[i];
        if (in->origin < 0)
            continue;
        generated++;
        CU_ASSERT_EQUAL(in->line, 6);
        CU_ASSERT_EQUAL(in->col, 3);
        hn_sb_init(&sb);
        hn_format_fault(&sb, lp, 1, in->id, "the device failed");
        CU_ASSERT_EQUAL(strncmp(sb.data, stmt, strlen(stmt)), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, ": the device failed"));
        hn_sb_free(&sb);
    }
    CU_ASSERT(generated >= 10);
    for (int i = 0; i < lp->ninstrs; i++) /* x = 1 is the user's */
        if (lp->instrs[i]->op == HN_OP_LET && strcmp(lp->names[lp->instrs[i]->dst], "x") == 0)
            CU_ASSERT_EQUAL(lp->instrs[i]->origin, -1);
    /* the lowered program outside its configuration: the dry run's errors
     * name the statement too */
    hn_sb_init(&sb);
    params[0] = 64;
    CU_ASSERT_EQUAL(hn_verify_run(lp, 4, 3, params, &sb, NULL), HN_ERR_VERIFY);
    CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, "t.hir:6:3: error: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, ": matmul C <- allgather(A), B pipelined(strategy=ring, streams=2): "));
    CU_ASSERT_PTR_NULL(strstr(sb.data, "group {"));
    CU_ASSERT_PTR_NULL(strstr(sb.data, "set_stream"));
    hn_sb_free(&sb);
    /* and what lowering itself rejects, through the runtime */
    lp4 = NULL;
    {
        hn_runtime_config cfg;
        hn_runtime *rt = NULL;
        hn_program *q = hn_test_parse("input A : f32[8 / world, 8] replicated\ninput B : f32[8, 2] replicated\n"
                                      "output C : f32[8, 2] replicated\n\n"
                                      "matmul C <- allgather(A), B pipelined(strategy=collective, chunks=3)\n",
                                      NULL);
        void *bufs[3][2];
        size_t sz[2] = {256, 256};
        hn_binding b[3] = {{"A", bufs[0], sz}, {"B", bufs[1], sz}, {"C", bufs[2], sz}};
        hn_run_args args = {0, NULL, NULL, 3, b};
        CU_ASSERT_PTR_NOT_NULL_FATAL(q);
        hn_runtime_config_default(&cfg);
        cfg.ndev = hn_test_max_ranks() >= 2 ? 2 : 1;
        cfg.backend = hn_test_backend;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
        for (int k = 0; k < 3; k++)
            for (int r = 0; r < cfg.ndev; r++)
                CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, 256, &bufs[k][r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_run(rt, q, &args), HN_ERR_VERIFY);
        CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "t.hir:5:1: error: matmul C <- allgather(A), B "
                                                            "pipelined(strategy=collective, chunks=3): chunks=3"));
        for (int k = 0; k < 3; k++)
            for (int r = 0; r < cfg.ndev; r++)
                hn_runtime_free(rt, r, bufs[k][r]);
        hn_runtime_destroy(rt);
        hn_program_destroy(q);
    }
    hn_program_destroy(lp4);
    hn_program_destroy(lp);
    hn_program_destroy(p);
}

/* Every allocation of a lowering failing in turn: a clean error, nothing
 * leaked (ASan), never a crash. */
static void test_alloc_failures(void)
{
    char *text = with_opts(forms[3], "strategy=ring, streams=2");
    hn_program *p = hn_test_parse(text, NULL), *lp;
    int64_t params[3] = {32, 32, 8};
    long n;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hn_alloc_fail_after(1000000000L); /* count them */
    {
        hn_strbuf sb;
        hn_sb_init(&sb);
        CU_ASSERT_EQUAL(hn_sched_lower(p, 4, 1, 3, params, NULL, &lp, &sb, NULL), HN_OK);
        hn_sb_free(&sb);
        hn_program_destroy(lp);
    }
    n = hn_alloc_fail_after(0);
    CU_ASSERT(n > 10);
    for (long k = 1; k <= n; k += 1 + n / 400) {
        hn_strbuf sb;
        hn_status_t st;
        lp = NULL;
        hn_alloc_fail_after(k);
        hn_sb_init(&sb);
        st = hn_sched_lower(p, 4, 1, 3, params, NULL, &lp, &sb, NULL);
        hn_alloc_fail_after(0);
        CU_ASSERT(st == HN_OK || st == HN_ERR_NOMEM);
        if (st == HN_OK)
            hn_program_destroy(lp);
        hn_sb_free(&sb);
    }
    hn_program_destroy(p);
    free(text);
}

/* Across nodes, an allreduce of every rank: reduce-scatter inside each
 * node, allreduce across via nccl, allgather inside, where asked
 * (HIRNODE_HIER_ALLREDUCE=1) or the model finds it faster; the text reads
 * back and verifies; left alone on one node, for a team, for a via
 * written out, where the count does not split over a node's ranks. */
static void test_hier_allreduce(void)
{
    static const char *const vars[] = {"HIRNODE_HIER_ALLREDUCE"};
    char *saved[1];
    static const char src[] = "param N = 64\n"
                              "input X : f32[1, N] shard(axis 0)\n"
                              "output S : f32[N] replicated\n"
                              "output H : f32[N] replicated\n"
                              "Xl = view X as [N]\n"
                              "allreduce S <- Xl op sum\n"
                              "allreduce H <- Xl op max via nccl\n"
                              "reference {\n  sum S <- X, 0\n  copy H <- X[0]\n"
                              "  for r in 1 .. world {\n    maximum H <- H, X[r]\n  }\n}\n";
    hn_program *p = hn_test_parse(src, NULL), *lp;
    int64_t params[1] = {64};
    char *text;
    hn_strbuf sb;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hn_test_env_save(vars, 1, saved);
    setenv("HIRNODE_HIER_ALLREDUCE", "1", 1);
    hn_sb_init(&sb);
    CU_ASSERT_EQUAL_FATAL(hn_sched_lower(p, 8, 2, 3, params, NULL, &lp, &sb, NULL), HN_OK);
    text = hn_print_program(lp);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "reduce_scatter across <- Xl op sum team range(rank / 4 * 4, 4)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "allreduce across <- across op sum team range(rank % 4, 2, 4) via nccl"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "allgather S <- across team range(rank / 4 * 4, 4)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "allreduce H <- Xl op max via nccl")); /* a via written out stays */
    {
        hn_program *back = hn_test_parse(text, NULL); /* reads back and verifies */
        CU_ASSERT_PTR_NOT_NULL(back);
        hn_program_destroy(back);
    }
    free(text);
    hn_program_destroy(lp);
    /* one node, or never, or a count that does not split over 3 ranks a node: as written */
    for (int k = 0; k < 3; k++) {
        int world = k == 2 ? 6 : 8, nodes = k == 0 ? 1 : 2;
        int64_t n = 64; /* 64 % 3 != 0 at 3 ranks a node */
        if (k == 1)
            setenv("HIRNODE_HIER_ALLREDUCE", "0", 1);
        else
            setenv("HIRNODE_HIER_ALLREDUCE", "1", 1);
        params[0] = n;
        CU_ASSERT_EQUAL_FATAL(hn_sched_lower(p, world, nodes, 3, params, NULL, &lp, &sb, NULL), HN_OK);
        text = hn_print_program(lp);
        CU_ASSERT_PTR_NULL(strstr(text, "reduce_scatter"));
        free(text);
        hn_program_destroy(lp);
    }
    hn_test_env_restore(vars, 1, saved);
    hn_sb_free(&sb);
    hn_program_destroy(p);
}

void hn_suite_lower(void)
{
    static CU_TestInfo tests[] = {
        {"every pipelined statement and strategy, 1..8 ranks, delays", test_every_strategy},
        {"stream-parallel loops at 1..16 streams", test_stream_loops},
        {"golden lowered programs", test_golden},
        {"the lowered text reads back, verifies and dry-runs", test_reads_back},
        {"operands of any length", test_long_operands},
        {"misuse found when lowering names the statement", test_misuse},
        {"messages about generated code name the statement", test_messages_name_the_statement},
        {"allocation failures", test_alloc_failures},
        {"an allreduce of every rank across nodes, hierarchically", test_hier_allreduce},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("sched/lower", tests);
}

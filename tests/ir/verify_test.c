/* Tests of src/ir/verify.c (static) and src/exec/verify_run.c (the dry
 * run of every rank and the matching of communications). */
#include <string.h>
#include <time.h>

#include "ir/verify.h"
#include "hirnode/runtime.h"
#include "ir/params.h"
#include "exec/verify_run.h"
#include "../test.h"

static int count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

static void expect_static(const char *text, int nerrors, const char *fragment)
{
    char *diag = NULL;
    hn_program *p = hn_test_parse(text, &diag);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(count_lines(diag), nerrors);
    if (diag == NULL || strstr(diag, fragment) == NULL || count_lines(diag) != nerrors)
        fprintf(stderr, "\n  want %d errors with '%s', got:\n%s", nerrors, fragment, diag ? diag : "");
    CU_ASSERT_PTR_NOT_NULL(diag ? strstr(diag, fragment) : NULL);
    hn_prog_free(p);
    hn_string_free(diag);
}

static void test_static(void)
{
    expect_static("x = y + 1\n", 1, "t.hir:1:5: error: 'y' is not defined here");
    expect_static("t = alloc f32[2]\nx = t + 1\n", 1, "'t' is a tensor, not a scalar");
    /* every error at once */
    expect_static("a = alloc f32[2]\nb = alloc bf16[2]\ncopy a <- b\nadd a <- a, q\nwait a\n", 3,
                  "copy: f32 and bf16 differ");
    expect_static("param M = 2\nM = 3\n", 1, "cannot assign to 'M'");
    expect_static("input A : f32[2] replicated\nfree A\n", 1, "'A' is not an allocation of this program");
    expect_static("t = alloc f32[2]\nfree t\nfill t <- 1\n", 1, "'t' is not defined here");
    expect_static("for i in 0 .. 2 { x = i }\ny = x\n", 1, "'x' is not defined here");
    expect_static("param P = rank\n", 1, "'rank' is not allowed here");
    expect_static("input A : f32[rank] replicated\n", 1, "'rank' is not allowed here");
    expect_static("input A : f32[2] replicated\nreference { B = alloc f32[2]\nallgather B <- A }\n", 1,
                  "the reference block runs on one device: no allgather");
    expect_static("s = current_stream\nset_stream t\n", 1, "'t' is undefined, not a stream");
    expect_static("t = alloc f32[2]\nt = current_stream\n", 1, "'t' is a tensor; it cannot become a stream");
    expect_static("param M = 1, M = 2\n", 1, "parameter 'M' is declared twice");
    /* the norm and the fused decode step: floats, outputs apart, no communication in the reference */
    expect_static("a = alloc f32[2, 4]\nw = alloc bf16[4]\nallreduce_rmsnorm a, a <- a, a, w\n", 2,
                  "allreduce_rmsnorm: the output and the residual's output are one tensor ('a')");
    expect_static("a = alloc f32[2, 4]\nw = alloc bf16[4]\nallreduce_rmsnorm a, a <- a, a, w\n", 2,
                  "allreduce_rmsnorm: f32 and bf16 differ");
    expect_static("a = alloc i32[2, 4]\nw = alloc i32[4]\nrmsnorm a <- a, w\n", 1,
                  "t.hir:3:1: error: rmsnorm normalizes f32, bf16 and f16, not i32");
    expect_static("a = alloc f32[2, 4]\nw = alloc f32[4]\nallreduce_rmsnorm a, q <- a, a, w eps e\n", 2,
                  "'q' is not defined here");
    expect_static("input A : f32[2, 4] replicated\ninput W : f32[4] replicated\n"
                  "reference { B = alloc f32[2, 4]\nallreduce_rmsnorm B, A <- A, A, W }\n", 1,
                  "the reference block runs on one device: no allreduce_rmsnorm");
    expect_static("a = alloc f32[4]\nbroadcast a <- a via ll\n", 1, "(and allreduce_rmsnorm)");
}

/* A program built through the builder with a collective short of the
 * operands its signature asks for: the static verifier says so (the
 * parser never makes one). */
static void test_builder_operands(void)
{
    hn_program *p = hn_prog_new("b.hir");
    int t = hn_prog_var(p, "t", 1);
    hn_instr *al = hn_instr_new(HN_OP_ALLOC, 1, 1), *nr = hn_instr_new(HN_OP_ALLREDUCE_RMSNORM, 2, 1);
    hn_strbuf diag;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    al->dst = t;
    al->type.dtype = HN_F32;
    CU_ASSERT_EQUAL(hn_type_push_dim(&al->type, hn_ex_int(8)), 0);
    nr->a.var = t;
    nr->b.var = t;
    CU_ASSERT_EQUAL(hn_block_push(&p->body, al), 0);
    CU_ASSERT_EQUAL(hn_block_push(&p->body, nr), 0);
    CU_ASSERT_EQUAL(hn_prog_finish(p), HN_OK);
    hn_sb_init(&diag);
    CU_ASSERT_EQUAL(hn_verify_static(p, &diag), HN_ERR_VERIFY);
    CU_ASSERT_PTR_NOT_NULL(diag.data ? strstr(diag.data, "b.hir:2:1: error: allreduce_rmsnorm takes 3 operands "
                                                         "beyond out <- in, not 0") : NULL);
    hn_sb_free(&diag);
    hn_prog_free(p);
}

/* Misuses of the scheduler's statements the static verifier catches, each
 * at the statement's own position. */
static void test_static_sched(void)
{
    const char *io = "param P = 2\ninput A : f32[4, 4] replicated\ninput B : f32[4, 4] replicated\n"
                     "output C : f32[4, 4] replicated\n";
    char text[1024];
#define WITH_IO(body) (snprintf(text, sizeof(text), "%s%s", io, body), text)
    expect_static(WITH_IO("reduce_scatter C <- matmul(A, B) pipelined(strategy=broadcast)\n"), 1,
                  "t.hir:5:1: error: strategy broadcast does not apply to this reduce_scatter: it offers "
                  "sequential, ring, collective");
    expect_static(WITH_IO("allreduce C <- A pipelined(strategy=ring)\n"), 1,
                  "t.hir:5:1: error: strategy ring does not apply to this allreduce");
    expect_static(WITH_IO("matmul C <- allgather(A), B pipelined(chunks=rank + 1)\n"), 1,
                  "t.hir:5:46: error: 'rank' is not allowed here");
    expect_static(WITH_IO("n = 2\nmatmul C <- allgather(A), B pipelined(streams=n * P)\n"), 1,
                  "t.hir:6:1: error: streams may use parameters, world and nstreams only, not 'n'");
    expect_static(WITH_IO("matmul C <- allgather(A), B pipelined(via=nccl, protocol=get)\n"), 1,
                  "t.hir:5:1: error: protocol=get applies to via=p2p, not via=nccl");
    expect_static(WITH_IO("matmul C <- allgather(A), q pipelined()\n"), 1, "t.hir:5:27: error: 'q' is not defined here");
    expect_static("input A : f32[4] replicated\ninput B : bf16[4, 4] replicated\noutput C : f32[4, 4] replicated\n"
                  "matmul C <- allgather(A), B pipelined()\n", 1, "t.hir:4:1: error: matmul: f32 and bf16 differ");
    expect_static(WITH_IO("reference {\n  matmul C <- allgather(A), B pipelined()\n}\n"), 1,
                  "t.hir:6:3: error: the reference block runs on one device: no matmul");
    expect_static(WITH_IO("for j in 0 .. 2 on streams {\n  matmul C <- allgather(A), B pipelined()\n}\n"), 1,
                  "t.hir:6:3: error: a pipelined statement assigns streams itself: it cannot be inside the "
                  "stream-parallel loop of line 5");
    expect_static("for i in 0 .. 2 on streams {\n  for j in 0 .. 2 on streams {\n  }\n}\n", 1,
                  "t.hir:2:3: error: stream-parallel loops do not nest (this one is inside line 1's)");
    expect_static("for i in 0 .. 2 on streams {\n  set_stream stream(1)\n}\n", 1,
                  "t.hir:2:3: error: the stream-parallel loop of line 1 puts each iteration on its own stream: "
                  "no set_stream inside it");
    expect_static("param S = 2\nfor i in 0 .. 8 step S on streams {\n}\n", 1,
                  "t.hir:2:1: error: the step of a stream-parallel loop is a non-zero integer");
    expect_static("for i in 0 .. 8 step -0 on streams {\n}\n", 1,
                  "t.hir:1:1: error: the step of a stream-parallel loop is a non-zero integer");
    expect_static(WITH_IO("send A to 0 via auto\n"), 1,
                  "t.hir:5:1: error: via auto chooses the communicator of collectives; a send names nccl, p2p or "
                  "default");
    expect_static(WITH_IO("group {\n  recv C from 0 via ll\n}\n"), 1,
                  "t.hir:6:3: error: via ll is the latency path of collectives; a recv names nccl, p2p or default");
    expect_static(WITH_IO("broadcast C <- C via ll oneshot\n"), 1,
                  "t.hir:5:1: error: broadcast via ll: the latency path does allreduce, allgather and "
                  "reduce_scatter");
#undef WITH_IO
}

/* Dry run at `world`; returns the diagnostics (caller frees). */
static char *dry(const char *text, int world, hn_status_t *st)
{
    hn_program *p = hn_test_parse(text, NULL);
    int64_t params[16];
    hn_strbuf diag;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hn_sb_init(&diag);
    *st = hn_params_resolve(p, world, 3, 0, NULL, NULL, params, &diag);
    if (*st == HN_OK)
        *st = hn_verify_run(p, world, 3, params, &diag, NULL);
    hn_prog_free(p);
    return hn_sb_take(&diag);
}

static void expect_dry(const char *text, int world, const char *fragment)
{
    hn_status_t st;
    char *d = dry(text, world, &st);
    CU_ASSERT_EQUAL(st, HN_ERR_VERIFY);
    if (d == NULL || strstr(d, fragment) == NULL)
        fprintf(stderr, "\n  want '%s', got:\n%s", fragment, d ? d : "");
    CU_ASSERT_PTR_NOT_NULL(d ? strstr(d, fragment) : NULL);
    hn_free(d);
}

static void test_dry_run(void)
{
    const char *ag = "input A : f32[4] replicated\nB = alloc f32[8]\nallgather B <- A\n";
    hn_status_t st;
    char *d = dry(ag, 2, &st);
    CU_ASSERT_EQUAL(st, HN_OK);
    hn_free(d);
    /* buffer sizes of a collective against the team size, all ranks merged */
    expect_dry(ag, 4, "t.hir:3:1: error: all ranks: allgather B <- A: allgather of 4 elements over a team "
                      "of 4 needs an output of 16, not 8");
    expect_dry("t = alloc f32[4, 2]\nu = select t, 2, 0\n", 1, "axis 2 out of range for a 2-d tensor");
    expect_dry("t = alloc f32[4, 2]\nu = select t, 0, rank + 3\n", 2,
               "error: rank 1: u = select t, 0, rank + 3: index 4 out of range [0, 4) on axis 0");
    expect_dry("t = alloc f32[4]\nsend t to rank + 1\n", 2, "peer 2 out of range [0, 2)");
    expect_dry("t = alloc f32[4]\nallreduce t <- t team [0, world]\n", 2, "team member 2 out of range [0, 2)");
    expect_dry("t = alloc f32[4]\nallreduce t <- t team [0, 0]\n", 2, "rank 0 appears twice in the team");
    expect_dry("t = alloc f32[4]\nbroadcast t <- t root 5\n", 2, "root 5 out of range for a team of 2");
    expect_dry("x = 1 / (rank - 1)\n", 2, "rank 1: x = 1 / (rank - 1): division by zero");
    expect_dry("t = alloc f32[6]\nu = chunk t, 0, 4, 0\n", 1, "axis 0 of size 6 does not split into 4 chunks");
    expect_dry("t = alloc f32[6]\nu = view t as [4]\n", 1, "view changes the element count");
    expect_dry("t = alloc f32[6, 2]\nu = transpose t, 0, 1\nv = view u as [12]\n", 1,
               "the viewed tensor must be contiguous");
    expect_dry("for i in 0 .. 3 step 0 { }\n", 1, "loop step is zero");
    expect_dry("for i in 0 .. 1000000000 { x = i }\n", 1,
               "a loop of 1000000000 iterations: the dry run plays at most 20000000 instructions");
    expect_dry("for i in 0 .. 100000 { for j in 0 .. 1000 { x = j } }\n", 1, "the dry run gave up after");
    /* so are the communications and allocations a dry run logs: 1 million */
    expect_dry("t = alloc f32[4]\nfor i in 0 .. 300000 { allreduce t <- t }\n", 8,
               "rank 3: allreduce t <- t op sum: the dry run gave up after 1000000 communications and "
               "allocations");
    expect_dry("for i in 0 .. 150000 { t = alloc f32[1] }\n", 8,
               "rank 6: t = alloc f32[1]: the dry run gave up after 1000000 communications");
    /* the budget is for all ranks together: 8 ranks of 3 million each give up */
    expect_dry("for i in 0 .. 3000 { for j in 0 .. 1000 { x = j } }\n", 8,
               "t.hir:1:43: error: rank 6: x = j: the dry run gave up after 20000000 instructions");
    /* trip counts beyond int64 and steps that would step past the end */
    expect_dry("for i in -9223372036854775807 - 1 .. 9223372036854775807 { x = i }\n", 1,
               "a loop of 18446744073709551615 iterations");
    expect_dry("for i in 0 .. 9223372036854775807 step 4611686018427387904 { t = alloc f32[i] }\n", 1,
               "shape of 't': 4611686018427387904 elements of 4 bytes overflows");
    expect_dry("s = stream(16)\n", 1, "stream 16 out of range [0, 16)");
    expect_dry("a = alloc f32[2, 3]\nb = alloc f32[2, 3]\nc = alloc f32[2, 2]\nmatmul c <- a, b\n", 1,
               "matmul: shapes f32[2, 2] = f32[2, 3] x f32[2, 3] do not fit");
    /* the norm and the fused decode step: rows, weight, eps, buffers */
    const char *norm = "y = alloc bf16[2, 8]\nr = alloc bf16[2, 8]\nx = alloc bf16[2, 8]\nw = alloc bf16[8]\n";
    char text[512];
#define NORM(body) (snprintf(text, sizeof(text), "%s%s", norm, body), text)
    expect_dry(NORM("v = alloc bf16[4]\nrmsnorm y <- x, v\n"), 1,
               "rmsnorm normalizes rows (the last axis): a weight bf16[4] does not fit bf16[2, 8]");
    expect_dry(NORM("s = alloc bf16[8]\nrmsnorm s <- x, w\n"), 1, "rmsnorm: bf16[8] does not match bf16[2, 8]");
    expect_dry(NORM("rmsnorm y <- x, w, 0 - 1\n"), 1, "rmsnorm: eps -1 is not a number from 0 to 3e38");
    expect_dry(NORM("allreduce_rmsnorm y, r <- x, r, w eps -1e-6\n"), 2,
               "allreduce_rmsnorm: eps -1e-06 is not a number from 0 to 3e38");
    expect_dry(NORM("allreduce_rmsnorm y, r <- x, r, w eps 1e39\n"), 2, "eps 1e+39 is not a number");
    expect_dry(NORM("s = alloc bf16[16]\nallreduce_rmsnorm y, r <- s, r, w\n"), 2,
               "allreduce_rmsnorm: bf16[2, 8] does not match bf16[16]");
    expect_dry(NORM("u = transpose x, 0, 1\nallreduce_rmsnorm y, r <- u, r, w\n"), 2, "the input must be contiguous");
    expect_dry(NORM("v = alloc bf16[2, 4]\nallreduce_rmsnorm y, r <- x, r, v\n"), 2,
               "a weight bf16[2, 4] does not fit bf16[2, 8]");
    expect_dry(NORM("allreduce_rmsnorm y, r <- x, r, w via ll\n"), 9,
               "allreduce_rmsnorm via ll: the latency path serves teams of at most 8 ranks");
    expect_dry(NORM("allreduce_rmsnorm y, r <- x, r, w via p2p\n"), 3,
               "allreduce_rmsnorm: allreduce via p2p of 16 elements: not divisible by the team size 3");
    expect_dry(NORM("allreduce_rmsnorm y, r <- x, r, w op sum team [0, 2]\n"), 2, "team member 2 out of range");
#undef NORM
}

/* The whole diagnostic of a dry run at world ranks (NULL: it passes). */
static void expect_dry_exactly(const char *text, int world, const char *want)
{
    hn_status_t st;
    char *d = dry(text, world, &st);
    CU_ASSERT_EQUAL(st, want != NULL ? HN_ERR_VERIFY : HN_OK);
    if (want != NULL ? d == NULL || strcmp(d, want) != 0 : d != NULL && *d)
        fprintf(stderr, "\n  at %d ranks want:\n%s  got:\n%s", world, want ? want : "nothing\n", d ? d : "nothing\n");
    CU_ASSERT_STRING_EQUAL(d != NULL ? d : "", want != NULL ? want : "");
    hn_free(d);
}

/* A declared shape whose division leaves a remainder is an error naming
 * both numbers, unless the program says it floors. */
static void test_shapes_divide(void)
{
    const char *ag = "param M = 64, K = 4\ninput A : f32[M / world, K] shard(axis 0)\n"
                     "output C : f32[M, K] replicated\nallgather C <- A\n";
    expect_dry_exactly(ag, 3, "t.hir:2:7: error: shape of 'A': M / world = 64 / 3 does not divide (the program "
                              "floors it to 21): give M a multiple of 3 (63 or 66), or write floor(M / world) if "
                              "flooring is meant\n");
    for (int w = 1; w <= 8; w *= 2)
        expect_dry_exactly(ag, w, NULL);
    /* said so: it floors, and the allgather is what does not fit then */
    expect_dry("param M = 64, K = 4\ninput A : f32[floor(M / world), K] shard(axis 0)\n"
               "output C : f32[M, K] replicated\nallgather C <- A\n",
               3, "t.hir:4:1: error: all ranks: allgather C <- A: allgather of 84 elements over a team of 3 needs an "
                  "output of 252, not 256");
    expect_dry_exactly("param M = 64\ninput A : f32[floor(M / world)] shard(axis 0)\n", 3, NULL);
    /* outputs too; the world on the left; an expression on the left */
    expect_dry_exactly("param R = 2\noutput G : f32[1, world / R] shard(axis 0)\n", 3,
                       "t.hir:2:8: error: shape of 'G': world / R = 3 / 2 does not divide (the program floors it to "
                       "1): run on a multiple of 2 ranks, or write floor(world / R) if flooring is meant\n");
    expect_dry_exactly("param M = 8\ninput A : f32[(M + 1) / world] replicated\n", 2,
                       "t.hir:2:7: error: shape of 'A': (M + 1) / world = 9 / 2 does not divide (the program floors "
                       "it to 4): make M + 1 a multiple of 2, or write floor((M + 1) / world) if flooring is meant\n");
    /* the inner division first; a negative one; one floored beside one not */
    expect_dry("param M = 10\ninput A : f32[M / 2 / world] replicated\n", 2,
               "shape of 'A': M / 2 / world = 5 / 2 does not divide (the program floors it to 2): make M / 2 a "
               "multiple of 2");
    expect_dry("param M = 10\ninput A : f32[floor(M / 3) + M / 3] replicated\n", 1,
               "shape of 'A': M / 3 = 10 / 3 does not divide (the program floors it to 3): give M a multiple of 3 "
               "(9 or 12)");
    expect_dry_exactly("param M = 10\ninput A : f32[floor(M / 3 + M / 4)] replicated\n", 1, NULL);
    expect_dry("param M = -7\ninput A : f32[2 - M / 2] replicated\n", 1,
               "shape of 'A': M / 2 = -7 / 2 does not divide (the program floors it to -4): give M a multiple of 2, "
               "or write floor(M / 2) if flooring is meant");
    /* only what the shape's evaluation reaches: && and || stop early */
    expect_dry_exactly("param M = 64\ninput A : f32[1 + (world == 1 || M / 3 > 0)] replicated\n", 1, NULL);
    expect_dry("param M = 64\ninput A : f32[1 + (world == 1 || M / 3 > 0)] replicated\n", 2,
               "shape of 'A': M / 3 = 64 / 3 does not divide");
    expect_dry_exactly("param M = 64\ninput A : f32[1 + (world > 1 && M / 3 > 0)] replicated\n", 1, NULL);
    /* a division by zero stays that error */
    expect_dry("param M = 0\ninput A : f32[4 / M] replicated\n", 1, "rank 0: shape of 'A': division by zero");
}

/* The body's errors come first and alone: the reference block is dry-run
 * once every rank's body passes. */
static void test_body_before_reference(void)
{
    const char *text = "input A : f32[4] replicated\noutput B : f32[8] replicated\n"
                       "t = alloc f32[4]\nu = select t, 0, rank + 3\n"
                       "reference {\n  copy B <- A\n}\n";
    expect_dry_exactly(text, 2, "t.hir:4:1: error: rank 1: u = select t, 0, rank + 3: index 4 out of range [0, 4) "
                                "on axis 0\n");
    /* a body that passes: the reference block's error */
    expect_dry_exactly(text, 1, "t.hir:6:3: error: rank 0: copy B <- A: copy: f32[8] does not match f32[4]\n");
    /* several ranks' body errors, in rank order, then nothing else */
    expect_dry_exactly("input A : f32[4] replicated\noutput B : f32[8] replicated\n"
                       "t = alloc f32[4]\nu = select t, 0, rank / 2 * 4\nreference {\n  copy B <- A\n}\n",
                       4, "t.hir:4:1: error: ranks 2, 3: u = select t, 0, rank / 2 * 4: index 4 out of range [0, 4) "
                          "on axis 0\n");
}

static void test_matching(void)
{
    /* a collective that only some ranks reach would hang NCCL */
    expect_dry("t = alloc f32[4]\nif rank != 1 {\n  allreduce t <- t\n}\n", 4,
               "t.hir:3:3: error: ranks diverge on team [0, 1, 2, 3]: rank 0 reaches allreduce of 4 x f32 "
               "op sum (t.hir:3:3) as communication #0, but rank 1 has only 0 on this team; it would hang");
    /* ... whichever member of the team reaches it (once found only when the
     * team's first member issued something on the team) */
    expect_dry("t = alloc f32[4]\nif rank == 1 {\n  allreduce t <- t team [0, 1]\n}\n", 2,
               "t.hir:3:3: error: ranks diverge on team [0, 1]: rank 1 reaches allreduce of 4 x f32 op sum "
               "(t.hir:3:3) as communication #0, but rank 0 has only 0 on this team; it would hang");
    expect_dry("t = alloc f32[4]\nif rank != 0 {\n  allreduce t <- t team [0, 1, 2]\n}\n", 4,
               "rank 1 reaches allreduce of 4 x f32 op sum (t.hir:3:3) as communication #0, but rank 0 has only 0");
    /* different collectives at the same point */
    expect_dry("t = alloc f32[4]\nif rank == 0 {\n  allreduce t <- t\n} else {\n  broadcast t <- t\n}\n", 2,
               "communication #0: rank 0 issues allreduce of 4 x f32 op sum (t.hir:3:3), rank 1 issues "
               "broadcast of 4 x f32 root 0 (t.hir:5:3)");
    /* different sizes */
    expect_dry("t = alloc f32[4 + rank]\nallreduce t <- t\n", 2, "rank 1 issues allreduce of 5 x f32");
    /* the fused step is not a plain allreduce, nor one with rows of another length */
    expect_dry("t = alloc f32[2, 4]\nw = alloc f32[4]\nr = alloc f32[2, 4]\nif rank == 0 {\n"
               "  allreduce t <- t\n} else {\n  allreduce_rmsnorm t, r <- t, r, w\n}\n", 2,
               "communication #0: rank 0 issues allreduce of 8 x f32 op sum (t.hir:5:3), rank 1 issues "
               "allreduce_rmsnorm of 8 x f32 (rows of 4) op sum (t.hir:7:3)");
    expect_dry("t = alloc f32[4 / (rank + 1), 8 * (rank + 1)]\nw = alloc f32[8 * (rank + 1)]\n"
               "r = alloc f32[4 / (rank + 1), 8 * (rank + 1)]\nallreduce_rmsnorm t, r <- t, r, w via ll\n", 2,
               "rank 1 issues allreduce_rmsnorm of 32 x f32 (rows of 16) op sum via ll");
    /* a send without its receive */
    expect_dry("t = alloc f32[4]\nif rank == 0 {\n  send t to 1\n}\n", 2,
               "t.hir:3:3: error: rank 0 sends message #0 to rank 1, which never receives it; it would hang");
    expect_dry("t = alloc f32[4]\nu = alloc f32[2]\nif rank == 0 {\n  send t to 1\n} else {\n  recv u from 0\n}\n",
               2, "message #0 from rank 0 to rank 1: send of 4 x f32 (t.hir:4:3) against recv of 2 x f32");
    /* what the p2p communicator does not do is rejected before anything runs */
    expect_dry("t = alloc f32[8]\nreduce t <- t op sum via p2p\n", 2,
               "reduce via p2p: the p2p communicator does allgather, reduce_scatter, allreduce, broadcast and send/recv");
    expect_dry("t = alloc f32[6]\nallreduce t <- t via p2p\n", 4, "not divisible by the team size 4");
    expect_dry("t = alloc i32[6]\nallreduce t <- t via ll\n", 2,
               "allreduce via ll: the latency path reduces f32, bf16 and f16");
    expect_dry("t = alloc f32[6]\nallreduce t <- t via ll\n", 9,
               "allreduce via ll: the latency path serves teams of at most 8 ranks");
    expect_dry("t = alloc f32[4]\ngroup {\n  send t to 0 via p2p\n  recv t from 0 via p2p get\n}\n", 1,
               "a group posts through one communicator and protocol");
    expect_dry("t = alloc f32[4]\nif rank == 0 {\n  send t to 1 via p2p\n} else {\n  recv t from 0 via p2p get\n}\n",
               2, "message #0 from rank 0 to rank 1: send of 4 x f32 via p2p");
    /* sends and receives via p2p in a cycle would hang, whatever the protocol */
    expect_dry("t = alloc f32[4]\nu = alloc f32[4]\nsend t to (rank + 1) % world via p2p\n"
               "recv u from (rank - 1) % world via p2p\n", 3,
               "t.hir:3:1: error: rank 0: send t to (rank + 1) % world via p2p would hang: rank 1 posts its "
               "side only after send t to (rank + 1) % world via p2p, which waits in turn");
    expect_dry("t = alloc f32[4]\nu = alloc f32[4]\nrecv u from (rank - 1) % world via p2p get\n"
               "send t to (rank + 1) % world via p2p get\n", 2, "post them together in one `group`");
    expect_dry("t = alloc f32[4]\nsend t to rank via p2p\nrecv t from rank via p2p\n", 1, "would hang");
    /* ... and through every other communicator: NCCL's buffering is no contract */
    expect_dry("t = alloc f32[4]\nu = alloc f32[4]\nsend t to (rank + 1) % world\nrecv u from (rank - 1) % world\n", 2,
               "t.hir:3:1: error: rank 0: send t to (rank + 1) % world would hang: rank 1 posts its side only after "
               "send t to (rank + 1) % world, which waits in turn (sends and receives in a cycle); post them "
               "together in one `group`");
    expect_dry("t = alloc f32[4]\nu = alloc f32[4]\nsend t to (rank + 1) % world via nccl\n"
               "recv u from (rank - 1) % world via nccl\n", 3, "would hang");
    {
        /* the same exchange grouped, or ordered (even ranks send first) */
        static const char *fine[] = {
            "t = alloc f32[4]\nu = alloc f32[4]\ngroup {\n  send t to (rank + 1) % world via p2p\n"
            "  recv u from (rank - 1) % world via p2p\n}\n",
            "t = alloc f32[4]\nu = alloc f32[4]\nif rank % 2 == 0 {\n  send t to (rank + 1) % world via p2p\n"
            "  recv u from (rank - 1) % world via p2p\n} else {\n  recv u from (rank - 1) % world via p2p\n"
            "  send t to (rank + 1) % world via p2p\n}\n",
            "t = alloc f32[4]\nu = alloc f32[4]\nif rank % 2 == 0 {\n  send t to (rank + 1) % world\n"
            "  recv u from (rank - 1) % world\n} else {\n  recv u from (rank - 1) % world\n"
            "  send t to (rank + 1) % world\n}\n",
            "t = alloc f32[4]\nallreduce t <- t\nif rank == 0 {\n  send t to 1 via p2p\n}\n"
            "if rank == 1 {\n  recv t from 0 via p2p\n}\nallreduce t <- t\n",
        };
        for (int i = 0; i < HN_ARRAY_LEN(fine); i++) {
            hn_status_t st;
            char *d = dry(fine[i], 4, &st);
            if (st != HN_OK)
                fprintf(stderr, "\n  case %d: %s", i, d ? d : "");
            CU_ASSERT_EQUAL(st, HN_OK);
            hn_free(d);
        }
    }
    /* teams wider than any fixed table: 100 ranks */
    {
        hn_status_t st;
        char *d = dry("input A : f32[4] replicated\nB = alloc f32[4 * world]\nallgather B <- A\n"
                      "if rank == 99 {\n  send A to 0\n}\nif rank == 0 {\n  recv A from 99\n}\n",
                      100, &st);
        CU_ASSERT_EQUAL(st, HN_OK);
        hn_free(d);
        d = dry("t = alloc f32[4]\nif rank != 77 {\n  allreduce t <- t\n}\n", 100, &st);
        CU_ASSERT_PTR_NOT_NULL(d ? strstr(d, "but rank 77 has only 0 on this team") : NULL);
        hn_free(d);
    }
    /* disjoint teams of a 2-d mesh verify, each on its own */
    {
        hn_status_t st;
        char *d = dry("t = alloc f32[4]\nallreduce t <- t team range(rank / 2 * 2, 2)\n"
                      "allreduce t <- t team range(rank % 2, 2, 2)\n",
                      4, &st);
        CU_ASSERT_EQUAL(st, HN_OK);
        hn_free(d);
    }
}

/* Logging and matching are linear in the communications: 8 ranks of 30000
 * ring exchanges, then 30000 allreduces each, verify in well under a
 * second. The k-th message and the k-th collective of a team were found by
 * scanning the log (104 s here), and each collective looked for its team
 * among the records before it (5 s more). */
static void test_matching_scale(void)
{
    const char *text = "input A : f32[4] replicated\nB = alloc f32[4]\nfor i in 0 .. 30000 {\n"
                       "  group {\n    send A to (rank + 1) % world via p2p\n"
                       "    recv B from (rank - 1) % world via p2p\n  }\n}\n"
                       "for i in 0 .. 30000 {\n  allreduce B <- A\n}\n";
    struct timespec t0, t1;
    hn_status_t st;
    char *d;
    double s;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    d = dry(text, 8, &st);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (st != HN_OK || s > 20)
        fprintf(stderr, "\n  8 ranks x 90000 communications: %.1f s: %s", s, d ? d : "");
    CU_ASSERT_EQUAL(st, HN_OK);
    CU_ASSERT(s < 20);
    hn_free(d);
}

void hn_suite_verify(void)
{
    static CU_TestInfo tests[] = {
        {"static errors, all at once", test_static},
        {"a collective built short of its operands", test_builder_operands},
        {"misused pipelined statements and stream-parallel loops", test_static_sched},
        {"dry-run errors name rank and instruction", test_dry_run},
        {"shapes whose division leaves a remainder, unless floor() says so", test_shapes_divide},
        {"the body's errors first and alone, then the reference block's", test_body_before_reference},
        {"collectives and messages match across ranks", test_matching},
        {"matching is linear in the communications", test_matching_scale},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("ir/verify", tests);
}

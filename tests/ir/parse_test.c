/* Tests of src/ir/parse.c and lex.c: good and bad inputs, error positions,
 * mutated programs, allocation failures. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "ir/params.h"
#include "exec/verify_run.h"
#include "../test.h"

static void test_good(void)
{
    static const char *good[] = {
        "",
        "# only a comment\n",
        "param M = 4, K = M * 2\nx = K + M\n",
        "input A : f32[4, 2] shard(axis 1)\noutput B : bf16[] replicated\n",
        "t = alloc i64[2, 3]\nfree t\n",
        "s = current_stream; set_stream stream(1); wait_stream s; host_sync\n",
        "for i in 0 .. 10 step 2 { if i == 2 { x = 1 } else if i == 4 { x = 2 } else { x = 3 } }\n",
        "input A : f32[8] replicated\nB = alloc f32[8]\nc = allreduce B <- A op max team range(0, 1) via nccl\nwait c\n",
        "input A : f32[8] replicated\nB = alloc f32[8]\ngroup { send A to 0 via p2p\n recv B from 0 }\nwait\n",
        "t = alloc f32[2, 3]\nfill t <- -1.5e-3\nrandom t <- 7, -2.0, 2\niota t\niota t <- 1, 0.5\n",
        "t = alloc f32[2, 3]\nu = transpose t, 0, 1\nv = view t as [6]\nw = chunk v, 0, 3, 1\n",
        "input A : f32[8] replicated\nreference { B = alloc f32[8]\ncopy B <- A }\n",
        /* the scheduler's statements */
        "for j in 0 .. 4 on streams { x = j }\nfor j in 4 .. 0 step -2 on streams { x = j }\n",
        "input A : f32[2, 4] replicated\ninput B : f32[4, 4] replicated\noutput C : f32[4, 4] replicated\n"
        "matmul C <- allgather(A), B pipelined()\n"
        "matmul C <- allgather(A), B pipelined(strategy=ring, chunks=world, streams=2, via=p2p, protocol=get)\n",
        "input A : f32[4, 4] replicated\ninput W : f32[4, 4] replicated\ninput b : f32[4] replicated\n"
        "output C : f32[2, 4] replicated\noutput D : f32[4, 4] replicated\n"
        "reduce_scatter C <- linear(A, W, b) pipelined(strategy=collective, chunks=auto, streams=auto)\n"
        "allreduce D <- matmul(A, W) pipelined(via=nccl)\n",
        "input A : f32[8] replicated\noutput B : f32[8] replicated\n"
        "allreduce B <- A op max pipelined(chunks=2)\nallgather B <- A pipelined(strategy=broadcast)\n"
        "allreduce B <- A via auto\n",
        /* the latency path, by size or named */
        "input A : f32[8] replicated\noutput B : f32[8] replicated\nallreduce B <- A via ll\n"
        "allreduce B <- A op avg via ll oneshot\nreduce_scatter B <- A team [1, 0] via ll twoshot\n",
        /* the fused decode step, and the norm alone */
        "input X : bf16[2, 8] replicated\ninput W : bf16[8] replicated\noutput Y : bf16[2, 8] replicated\n"
        "output R : bf16[2, 8] replicated\nallreduce_rmsnorm Y, R <- X, R, W eps 1e-6 via ll\n"
        "c = allreduce_rmsnorm Y, R <- Y, R, W op avg team range(0, world) via ll twoshot eps 1e-5\nwait c\n"
        "allreduce_rmsnorm Y[0], R[0] <- X[1], R[0], W via nccl\nallreduce_rmsnorm Y, R <- X, R, W eps 1\n"
        "rmsnorm Y <- X, W\nrmsnorm Y <- Y, W, 1e-5\nreference { rmsnorm Y <- X, W, -0.5 }\n",
    };
    for (int i = 0; i < HN_ARRAY_LEN(good); i++) {
        char *diag = NULL;
        hn_program *p = hn_test_parse(good[i], &diag);
        if (p == NULL)
            fprintf(stderr, "\n  case %d: %s", i, diag ? diag : "(no diagnostic)");
        CU_ASSERT_PTR_NOT_NULL(p);
        hn_prog_free(p);
        hn_string_free(diag);
    }
}

/* Each bad input with the exact start of its diagnostic. */
static void test_bad(void)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"x = 1 +\n", "t.hir:1:8: error: expected an expression but found end of line"},
        {"x = (1 + 2\n", "t.hir:2:1: error: expected ')' but found end of file"},
        {"for i in 0 .. 4 {\n x = i\n", "t.hir:1:17: error: unclosed '{'"},
        {"t = alloc f33[2]\n", "t.hir:1:11: error: expected a dtype (f32, bf16, f16, i32, i64) but found 'f33'"},
        {"alloc f32[2]\n", "t.hir:1:1: error: 'alloc' must be assigned: name = alloc ..."},
        {"x = 3 $ 4\n", "t.hir:1:7: error: unexpected character: '$'"},
        {"world = 3\n", "t.hir:1:1: error: expected an instruction or a name to define but found 'world'"},
        {"floor = 3\n", "t.hir:1:1: error: expected an instruction or a name to define but found 'floor'"},
        {"x = floor(7, 2)\n", "t.hir:1:12: error: expected ')' but found ','"},
        {"x = floor 7\n", "t.hir:1:11: error: expected '(' but found '7'"},
        {"x = floor()\n", "t.hir:1:11: error: expected an expression but found ')'"},
        {"x = 12abc\n", "t.hir:1:5: error: malformed number: '12abc'"},
        {"x = 99999999999999999999\n", "t.hir:1:5: error: number literal out of range"},
        {"x = 1.5\n", "t.hir:1:5: error: a float literal is allowed only as a whole numeric operand"},
        {"input A : f32[2] shard(axis 2)\n", "t.hir:1:29: error: shard axis 2 is out of range for a 1-d tensor"},
        {"group { host_sync }\n", "t.hir:1:9: error: only send and recv may appear in a group"},
        {"input A : f32[2] replicated\nallgather A <- A op sum\n",
         "t.hir:2:18: error: unexpected option 'op' for allgather"},
        {"x = host_sync\n", "t.hir:1:5: error: 'host_sync' defines no value"},
        /* the scheduler's statements */
        {"for i in 0 .. 4 on stream { }\n", "t.hir:1:20: error: expected 'streams' but found 'stream'"},
        {"matmul C <- allgather(A), B pipelined(strategy=fast)\n",
         "t.hir:1:48: error: expected a strategy (auto, sequential, ring, collective, broadcast) but found 'fast'"},
        {"matmul C <- allgather(A), B pipelined(chunk=2)\n",
         "t.hir:1:39: error: unknown option 'chunk' of pipelined (strategy, chunks, streams, via, protocol)"},
        {"matmul C <- allgather(A), B pipelined(chunks=2, chunks=4)\n",
         "t.hir:1:49: error: option 'chunks' given twice"},
        {"matmul C <- allgather(A), B pipelined(via=mpi)\n",
         "t.hir:1:43: error: expected a communicator (default, nccl, p2p, auto) but found 'mpi'"},
        {"matmul C <- allgather(A), B pipelined(protocol=push)\n",
         "t.hir:1:48: error: expected a protocol (auto, put, get) but found 'push'"},
        {"matmul C <- allgather(A), B\n", "t.hir:1:28: error: expected 'pipelined' but found end of line"},
        {"matmul C <- A, B pipelined()\n",
         "t.hir:1:18: error: matmul is pipelined with a nested communication as an operand"},
        {"add C <- allgather(A), B pipelined()\n",
         "t.hir:1:10: error: allgather(...) as an operand of add: no pipelined statement reads it"},
        {"reduce_scatter C <- allgather(A) pipelined()\n",
         "t.hir:1:21: error: allgather(...) as an operand of reduce_scatter"},
        {"reduce_scatter C <- matmul(A, B) op max pipelined()\n",
         "t.hir:1:34: error: a pipelined reduce_scatter sums its partial products: no 'op'"},
        {"c = allgather C <- A pipelined()\n",
         "t.hir:1:1: error: a pipelined statement defines no value"},
        {"allgather C <- A team [0] pipelined()\n",
         "t.hir:1:27: error: a pipelined allgather spans all ranks"},
        {"broadcast C <- A pipelined()\n", "t.hir:1:18: error: broadcast has no pipelined form"},
        {"reduce_scatter C <- linear(A) pipelined()\n", "t.hir:1:29: error: expected ',' but found ')'"},
        {"input A : f32[2] replicated\ninput A : f32[2] replicated\n", "t.hir:2:7: error: 'A' is declared twice"},
        {"x = 1 2\n", "t.hir:1:7: error: expected end of line but found '2'"},
        {"reference { }\nreference { }\n", "t.hir:2:1: error: a second reference block"},
        {"\xff\xfe", "t.hir:1:1: error: unexpected character: '\\xff'"},
        {"allreduce C <- A via ll threeshot\n", "t.hir:1:25: error: unexpected option 'threeshot' for allreduce"},
        /* an unknown word where an instruction stands: the nearest keyword */
        {"input A : f32[4] replicated\noutput B : f32[4] replicated\nallreduc B <- A\n",
         "t.hir:3:1: error: unknown instruction 'allreduc' \u2014 did you mean 'allreduce'?"},
        {"AllGather B <- A\n", "t.hir:1:1: error: unknown instruction 'AllGather' \u2014 did you mean 'allgather'?"},
        {"T = aloc f32[16]\n", "t.hir:1:5: error: unknown instruction 'aloc' \u2014 did you mean 'alloc'?"},
        {"T = cpy f32[16]\n", "t.hir:1:5: error: unknown instruction 'cpy' (docs/SYNTAX.md lists them)"},
        {"parm N = 4\n", "t.hir:1:1: error: unknown instruction 'parm' \u2014 did you mean 'param'?"},
        {"for i in 0 .. 4 {\n  cpy X <- Y\n}\n", "t.hir:2:3: error: unknown instruction 'cpy' \u2014 did you mean 'copy'?"},
        {"for i in 0 .. 4 {\n  parm N = 4\n}\n", "t.hir:2:3: error: unknown instruction 'parm' (docs/SYNTAX.md lists them)"},
        {"frobnicate X <- Y\n", "t.hir:1:1: error: unknown instruction 'frobnicate' (docs/SYNTAX.md lists them)"},
        {"x\n", "t.hir:1:1: error: unknown instruction 'x' (docs/SYNTAX.md lists them)"},
        /* a name already seen is not taken for an instruction */
        {"input A : f32[4] replicated\nA[0] = 1\n", "t.hir:2:2: error: expected '=' but found '['"},
        {"x = 1\nx 2\n", "t.hir:2:3: error: expected '=' but found '2'"},
        /* the fused decode step: its operands and options */
        {"allreduce_rmsnorm Y <- X, R, W\n", "t.hir:1:21: error: expected ',' but found '<-'"},
        {"allreduce_rmsnorm Y, R <- X, R\n", "t.hir:1:31: error: expected ',' but found end of line"},
        {"allreduce_rmsnorm Y, R <- X, R, W, V\n", "t.hir:1:34: error: expected end of line but found ','"},
        {"allreduce_rmsnorm Y, R <- X, R, W eps 1e-6 eps 1e-5\n",
         "t.hir:1:44: error: unexpected option 'eps' for allreduce_rmsnorm"},
        {"allreduce_rmsnorm Y, R <- X, R, W eps\n", "t.hir:1:38: error: expected an expression but found end of line"},
        {"allreduce Y <- X eps 1e-6\n", "t.hir:1:18: error: unexpected option 'eps' for allreduce"},
        {"allreduce_rmsnorm Y, R <- X, R, W root 0\n", "t.hir:1:35: error: unexpected option 'root'"},
        {"allreduce_rmsnorm Y, R <- X, R, W pipelined()\n", "t.hir:1:35: error: allreduce_rmsnorm has no pipelined form"},
        {"allreduce_rmsnorm Y, R <- linear(A, B), R, W\n", "t.hir:1:27: error: linear(...) as an operand of allreduce_rmsnorm"},
        {"rmsnorm Y <- X\n", "t.hir:1:15: error: expected ',' but found end of line"},
        {"rmsnorm Y <- X, W, 1e-6, 2\n", "t.hir:1:24: error: expected end of line but found ','"},
        {"allreduce C <- A pipelined(via=ll)\n",
         "t.hir:1:32: error: expected a communicator (default, nccl, p2p, auto) but found 'll'"},
    };
    for (int i = 0; i < HN_ARRAY_LEN(bad); i++) {
        char *diag = NULL;
        hn_program *p = hn_test_parse(bad[i].text, &diag);
        CU_ASSERT_PTR_NULL(p);
        CU_ASSERT_PTR_NOT_NULL_FATAL(diag);
        if (strncmp(diag, bad[i].want, strlen(bad[i].want)) != 0)
            fprintf(stderr, "\n  case %d: got  %s  want %s\n", i, diag, bad[i].want);
        CU_ASSERT_EQUAL(strncmp(diag, bad[i].want, strlen(bad[i].want)), 0);
        hn_prog_free(p);
        hn_string_free(diag);
    }
}

static void test_deep_nesting(void)
{
    /* a deeply nested expression is an error, not a stack overflow */
    size_t n = 100000;
    char *text = malloc(n * 2 + 16);
    char *diag = NULL;
    strcpy(text, "x = ");
    memset(text + 4, '(', n);
    strcpy(text + 4 + n, "1\n");
    CU_ASSERT_PTR_NULL(hn_test_parse(text, &diag));
    CU_ASSERT_PTR_NOT_NULL(strstr(diag, "nested too deeply"));
    hn_string_free(diag);
    free(text);
}

/* Blocks count their own nesting, apart from expressions': 5000 nested
 * `if`s are blocks nested too deeply, and a condition inside 150 blocks
 * may itself be 150 deep. */
static void test_deep_blocks(void)
{
    hn_strbuf sb;
    char *diag = NULL;
    hn_program *p;
    hn_sb_init(&sb);
    for (int i = 0; i < 5000; i++)
        hn_sb_append(&sb, "if rank == 0 {\n");
    hn_sb_append(&sb, "x = 1\n");
    for (int i = 0; i < 5000; i++)
        hn_sb_append(&sb, "}\n");
    CU_ASSERT_FALSE_FATAL(sb.failed);
    CU_ASSERT_PTR_NULL(hn_test_parse(sb.data, &diag));
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "blocks nested too deeply") : NULL);
    CU_ASSERT_PTR_NULL(diag != NULL ? strstr(diag, "expression") : NULL);
    /* the block past the limit is named: line 201 opens it */
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, ":201:") : NULL);
    hn_string_free(diag);
    hn_sb_free(&sb);
    hn_sb_init(&sb);
    for (int i = 0; i < 150; i++)
        hn_sb_append(&sb, "if rank == 0 {\n");
    hn_sb_append(&sb, "x = ");
    for (int i = 0; i < 150; i++)
        hn_sb_append(&sb, "(");
    hn_sb_append(&sb, "1");
    for (int i = 0; i < 150; i++)
        hn_sb_append(&sb, ")");
    hn_sb_append(&sb, "\n");
    for (int i = 0; i < 150; i++)
        hn_sb_append(&sb, "}\n");
    CU_ASSERT_FALSE_FATAL(sb.failed);
    diag = NULL;
    p = hn_test_parse(sb.data, &diag);
    CU_ASSERT_PTR_NOT_NULL(p);
    if (p == NULL && diag != NULL)
        fputs(diag, stderr);
    hn_prog_free(p);
    hn_string_free(diag);
    hn_sb_free(&sb);
}

/* A parsed program's nodes lie in its pool: a copy of one is the caller's,
 * and a block of pooled items still takes pushes (nothing leaks, nothing
 * is freed twice: valgrind or ASan tell). */
static void test_pooled_nodes(void)
{
    hn_program *p = hn_test_parse("x = 1 + rank\nif x > 0 {\n  y = x * 2\n} else if x < 0 {\n  y = 0\n}\n", NULL);
    hn_instr *c, *in;
    hn_expr *e;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(p->body.n, 2);
    CU_ASSERT(p->body.items[0]->pooled && p->body.items[0]->e[0]->pooled);
    c = hn_instr_clone(p->body.items[1]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT(!c->pooled && !c->e[0]->pooled && !c->body.items[0]->pooled);
    CU_ASSERT_EQUAL(c->orelse.n, 1);
    e = hn_expr_clone(p->body.items[0]->e[0]);
    CU_ASSERT(e != NULL && !e->pooled && hn_expr_equal(e, p->body.items[0]->e[0]));
    hn_expr_free(e);
    /* pushes onto blocks whose items lie in the pool */
    CU_ASSERT_EQUAL(hn_block_push(&p->body, c), 0);
    in = hn_instr_new(HN_OP_HOST_SYNC, 1, 1);
    CU_ASSERT_EQUAL(hn_block_push(&p->body.items[1]->body, in), 0);
    CU_ASSERT_EQUAL(p->body.n, 3);
    CU_ASSERT_EQUAL(p->body.items[1]->body.n, 2);
    CU_ASSERT_EQUAL(hn_prog_finish(p), HN_OK);
    hn_prog_free(p);
    /* a pooled instruction has the parts of its form: a copy has them all */
    p = hn_test_parse("input X : f32[4, 4] replicated\nk = 2\nT = alloc f32[4]\nr = select X, 0, k\n"
                      "free T\nfor i in 0 .. 2 { wait }\n", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(p->body.n, 5);
    CU_ASSERT_EQUAL(p->body.items[0]->pooled, HN_POOL_SHORT);
    CU_ASSERT_EQUAL(p->body.items[1]->pooled, HN_POOL_ALL);
    CU_ASSERT_EQUAL(p->body.items[2]->pooled, HN_POOL_OPERANDS);
    CU_ASSERT_EQUAL(p->body.items[3]->pooled, HN_POOL_OPERANDS);
    CU_ASSERT_EQUAL(p->body.items[4]->pooled, HN_POOL_SHORT);
    CU_ASSERT_FALSE(hn_instr_has_operands(p->body.items[0]) || hn_instr_has_all(p->body.items[2]));
    CU_ASSERT_PTR_NULL(hn_instr_push_arg(p->body.items[0]));
    for (int i = 0; i < p->body.n; i++) {
        hn_instr *k = hn_instr_clone(p->body.items[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(k);
        CU_ASSERT(hn_instr_has_operands(k) && hn_instr_has_all(k));
        CU_ASSERT_EQUAL(k->b.var, -1);
        CU_ASSERT_PTR_NULL(k->team);
        if (i == 0 || i == 4) {
            CU_ASSERT_EQUAL(k->a.var, -1);
            CU_ASSERT_PTR_NULL(k->args);
            CU_ASSERT_PTR_NULL(k->sref_index);
        }
        if (i == 2) {
            CU_ASSERT_EQUAL(k->a.var, p->body.items[2]->a.var);
            CU_ASSERT_EQUAL(k->type.ndim, 0);
        }
        CU_ASSERT_EQUAL(k->body.n, p->body.items[i]->body.n);
        hn_instr_free(k);
    }
    hn_prog_free(p);
    /* numbers, world and nstreams: one node per value, shared by its uses */
    p = hn_test_parse("a = 3 + world\nb = 3 * world - 0 + nstreams\nc = -3 + rank\n", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_EQUAL(p->body.items[0]->e[0]->a, p->body.items[1]->e[0]->a->a->a);
    CU_ASSERT_PTR_EQUAL(p->body.items[0]->e[0]->b, p->body.items[1]->e[0]->a->a->b);
    CU_ASSERT_PTR_EQUAL(p->body.items[0]->e[0]->a, p->body.items[2]->e[0]->a->a);
    CU_ASSERT_EQUAL(p->body.items[0]->e[0]->a->ival, 3);
    CU_ASSERT_EQUAL(p->body.items[0]->e[0]->a->pooled, 2);
    CU_ASSERT_EQUAL(p->body.items[0]->e[0]->a->line, 0); /* positionless */
    CU_ASSERT_EQUAL(p->body.items[2]->e[0]->b->pooled, 2); /* rank too, in statements */
    hn_prog_free(p);
    /* so is a node of shared operands only; one naming a variable is its own */
    p = hn_test_parse("x = 1\na = (rank + 3) % world\nb = (rank + 3) % world\nc = (x + 3) % world\n"
                      "d = (x + 3) % world\n", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_EQUAL(p->body.items[1]->e[0], p->body.items[2]->e[0]);
    CU_ASSERT_EQUAL(p->body.items[1]->e[0]->pooled, 2);
    CU_ASSERT_EQUAL(p->body.items[1]->e[0]->line, 0);
    CU_ASSERT_PTR_NOT_EQUAL(p->body.items[3]->e[0], p->body.items[4]->e[0]);
    CU_ASSERT_EQUAL(p->body.items[3]->e[0]->pooled, 1);
    CU_ASSERT_EQUAL(p->body.items[3]->e[0]->a->a->col, 6); /* x keeps its position */
    CU_ASSERT_PTR_EQUAL(p->body.items[3]->e[0]->b, p->body.items[1]->e[0]->b); /* world */
    hn_prog_free(p);
    /* rank keeps a node and position of its own where it is not allowed */
    p = hn_test_parse("param P = 4\n", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hn_prog_free(p);
    {
        char *diag = NULL;
        CU_ASSERT_PTR_NULL(hn_test_parse("x = rank\nparam P = 2 * rank\n", &diag));
        CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, ":2:15: error: 'rank' is not allowed here") : NULL);
        if (diag != NULL && strstr(diag, ":2:15:") == NULL)
            fputs(diag, stderr);
        hn_string_free(diag);
    }
}

static const char *tokens[] = {"{", "}", "(", ")", "[", "]", ",", "<-", "..", "=", "\n", "0", "-1", "99999",
                               "world", "rank", "allgather", "group", "send", "recv", "for", "if", "else",
                               "alloc", "f32", "1.5", "#", "wait", "stream(", "team", "root", "op sum"};

/* 1000 randomly mutated example programs: parse, verify statically and dry
 * run at several sizes. Nothing may crash, leak or hang. */
static void test_mutations(void)
{
    DIR *d = opendir("examples");
    char *files[64];
    size_t lens[64];
    int nfiles = 0, parsed = 0;
    uint64_t rng = 12345;
    struct dirent *e;
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    while ((e = readdir(d)) != NULL && nfiles < 64) {
        char path[512];
        if (strstr(e->d_name, ".hir") == NULL)
            continue;
        snprintf(path, sizeof(path), "examples/%s", e->d_name);
        files[nfiles] = hn_test_read_file(path, &lens[nfiles]);
        if (files[nfiles] != NULL)
            nfiles++;
    }
    closedir(d);
    CU_ASSERT_FATAL(nfiles >= 10);
    for (int iter = 0; iter < 1000; iter++) {
        int f = iter % nfiles;
        size_t len = lens[f], cap = len + 4096;
        char *buf = malloc(cap);
        int nmut = 1 + (int)(hn_splitmix64(&rng) % 4);
        hn_program *p;
        memcpy(buf, files[f], len);
        for (int m = 0; m < nmut; m++) {
            size_t pos = len ? hn_splitmix64(&rng) % len : 0;
            switch (hn_splitmix64(&rng) % 4) {
            case 0: /* flip a byte */
                if (len)
                    buf[pos] = (char)(hn_splitmix64(&rng) & 0xff);
                break;
            case 1: { /* delete a range */
                size_t n = hn_splitmix64(&rng) % 16;
                if (pos + n > len)
                    n = len - pos;
                memmove(buf + pos, buf + pos + n, len - pos - n);
                len -= n;
                break;
            }
            default: { /* insert a token */
                const char *t = tokens[hn_splitmix64(&rng) % HN_ARRAY_LEN(tokens)];
                size_t n = strlen(t) + 1;
                if (len + n >= cap)
                    break;
                memmove(buf + pos + n, buf + pos, len - pos);
                memcpy(buf + pos, t, n - 1);
                buf[pos + n - 1] = ' ';
                len += n;
                break;
            }
            }
        }
        if (hn_program_parse(buf, len, "mutant.hir", &p, NULL) == HN_OK) {
            hn_strbuf diag;
            parsed++;
            for (int w = 1; w <= 4; w *= 2) {
                int64_t params[64];
                hn_sb_init(&diag);
                if (p->nparams <= 64 && hn_params_resolve(p, w, 3, 0, NULL, NULL, params, &diag) == HN_OK)
                    hn_verify_run(p, w, 3, params, &diag, NULL);
                hn_sb_free(&diag);
            }
            hn_program_destroy(p);
        }
        free(buf);
    }
    /* the mutations must not all be rejected trivially */
    CU_ASSERT(parsed > 50);
    for (int i = 0; i < nfiles; i++)
        free(files[i]);
}

/* Every allocation of parsing a program fails in turn: no crash, no leak. */
static void test_alloc_failures(void)
{
    size_t len;
    char *text = hn_test_read_file("examples/ag_matmul_p2p.hir", &len);
    long n, nomem = 0;
    hn_program *p = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    hn_alloc_fail_after(0);
    CU_ASSERT_EQUAL_FATAL(hn_program_parse(text, len, "x.hir", &p, NULL), HN_OK);
    hn_program_destroy(p);
    hn_alloc_fail_after(1000000000L);
    CU_ASSERT_EQUAL(hn_program_parse(text, len, "x.hir", &p, NULL), HN_OK);
    hn_program_destroy(p);
    n = hn_alloc_fail_after(0);
    CU_ASSERT(n > 20);
    for (long k = 1; k <= n; k++) {
        hn_status_t st;
        char *diag = NULL;
        p = NULL;
        hn_alloc_fail_after(k);
        st = hn_program_parse(text, len, "x.hir", &p, &diag);
        hn_alloc_fail_after(0);
        if (st != HN_ERR_NOMEM && st != HN_OK)
            fprintf(stderr, "\n  allocation %ld: %s: %s", k, hn_status_string(st), diag ? diag : "");
        CU_ASSERT(st == HN_ERR_NOMEM || st == HN_OK);
        nomem += st == HN_ERR_NOMEM;
        hn_program_destroy(p);
        hn_string_free(diag);
    }
    CU_ASSERT(nomem > 0);
    free(text);
}

void hn_suite_parse(void)
{
    static CU_TestInfo tests[] = {
        {"good programs", test_good},
        {"bad programs and error positions", test_bad},
        {"deep nesting", test_deep_nesting},
        {"deep blocks: a limit of their own", test_deep_blocks},
        {"a parsed program's nodes in its pool", test_pooled_nodes},
        {"1000 mutated examples", test_mutations},
        {"allocation failures", test_alloc_failures},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("ir/parse", tests);
}

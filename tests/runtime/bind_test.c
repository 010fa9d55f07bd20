/* Tests of src/runtime/bind.c through the public API: bindings checked on
 * every rank before anything is issued, in runs, launches, captures and
 * rebinds (NULL and short bindings, overrides larger than the buffers,
 * misaligned pointers, pointers into and past blocks of hn_runtime_alloc),
 * each an error naming tensor, rank, bytes needed and given; external
 * memory (plain malloc standing for cudaMalloc or another library's on the
 * host backend) bound, launched, captured and rebound; hn_program_io at
 * several configurations; ranks mapped to device ordinals; the texts of
 * hn_runtime_create_ex. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "ranks/runtime_int.h"
#include "../test.h"

/* Sharded and replicated tensors of three element sizes: Y = 2 A on each
 * rank, Z = world * B (bf16 cast to f32), J = the sum of every rank's I. */
static const char *text = "param N = 8\n"
                          "input  A : f32[N, 4]  shard(axis 0)\n"
                          "input  B : bf16[4]    replicated\n"
                          "input  I : i64[N]     replicated\n"
                          "output Y : f32[N, 4]  shard(axis 0)\n"
                          "output Z : f32[4]     replicated\n"
                          "output J : i64[N]     replicated\n"
                          "copy Y <- A\n"
                          "scale Y <- Y, 2.0\n"
                          "cast Z <- B\n"
                          "allreduce Z <- Z op sum\n"
                          "allreduce J <- I op sum\n";
enum { NIO = 6, SLACK = 64 };
static const char *const names[NIO] = {"A", "B", "I", "Y", "Z", "J"};
static const size_t esize[NIO] = {4, 2, 8, 4, 4, 8};

/* Buffers of every tensor on every rank: from hn_runtime_alloc, or plain
 * host memory standing for an external allocator's (the host backend's
 * device memory is host memory). Each holds what N needs and SLACK more. */
typedef struct tset {
    int n, external;
    int64_t N;
    void *base[NIO][8];
    void *ptr[NIO][8];
    size_t bytes[NIO][8];
    hn_binding bind[NIO];
} tset;

static size_t need(int k, int64_t N) { return (size_t)(k == 1 || k == 4 ? 4 : k == 0 || k == 3 ? N * 4 : N) * esize[k]; }

/* random inputs, poisoned outputs; every pointer and size as made */
static void set_fill(hn_runtime *rt, tset *s, uint64_t seed)
{
    int64_t N = s->N;
    for (int k = 0; k < NIO; k++)
        for (int r = 0; r < s->n; r++) {
            s->ptr[k][r] = s->base[k][r];
            s->bytes[k][r] = need(k, N);
        }
    for (int r = 0; r < s->n; r++) {
        uint64_t x = seed * 7919 + (uint64_t)r, xb = seed; /* B is replicated: the same on every rank */
        float a[64 * 4], y[64 * 4], z[4];
        uint16_t bb[4];
        int64_t i[64], j[64];
        for (int e = 0; e < N * 4; e++) {
            a[e] = (float)(hn_splitmix64(&x) % 2001) / 100.0f - 10.0f;
            y[e] = NAN;
        }
        for (int e = 0; e < 4; e++) {
            bb[e] = hn_f32_to_bf16((float)(hn_splitmix64(&xb) % 64) / 8.0f - 4.0f);
            z[e] = NAN;
        }
        for (int e = 0; e < N; e++) {
            i[e] = (int64_t)(hn_splitmix64(&x) % 100000) - 50000;
            j[e] = INT64_MIN;
        }
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s->ptr[0][r], a, need(0, N)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s->ptr[1][r], bb, need(1, N)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s->ptr[2][r], i, need(2, N)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s->ptr[3][r], y, need(3, N)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s->ptr[4][r], z, need(4, N)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s->ptr[5][r], j, need(5, N)), HN_OK);
    }
}

static void set_make(hn_runtime *rt, tset *s, int n, int64_t N, int external, uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    s->n = n;
    s->N = N;
    s->external = external;
    for (int k = 0; k < NIO; k++) {
        for (int r = 0; r < n; r++) {
            size_t b = (need(k, N) + SLACK + 255) / 256 * 256;
            if (external) {
                CU_ASSERT_PTR_NOT_NULL_FATAL(s->base[k][r] = aligned_alloc(256, b));
            } else {
                CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, need(k, N) + SLACK, &s->base[k][r]), HN_OK);
            }
        }
        s->bind[k] = (hn_binding){names[k], s->ptr[k], s->bytes[k]};
    }
    set_fill(rt, s, seed);
}

static void set_free(hn_runtime *rt, tset *s)
{
    for (int k = 0; k < NIO; k++)
        for (int r = 0; r < s->n; r++) {
            if (s->external)
                free(s->base[k][r]);
            else
                hn_runtime_free(rt, r, s->base[k][r]);
        }
}

/* 1 when the outputs are what the inputs give; 0 when they are wrong; -1
 * when they are all still poisoned (nothing ran) */
static int set_outputs(hn_runtime *rt, const tset *s)
{
    int64_t N = s->N, isum[64] = {0};
    float zsum[4] = {0};
    int right = 1, poisoned = 1;
    for (int r = 0; r < s->n; r++) {
        int64_t i[64];
        uint16_t bb[4];
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, i, s->ptr[2][r], need(2, N)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, bb, s->ptr[1][r], need(1, N)), HN_OK);
        for (int e = 0; e < N; e++)
            isum[e] += i[e];
        for (int e = 0; e < 4; e++)
            zsum[e] += hn_bf16_to_f32(bb[e]);
    }
    for (int r = 0; r < s->n; r++) {
        float a[64 * 4], y[64 * 4], z[4];
        int64_t j[64];
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, a, s->ptr[0][r], need(0, N)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, y, s->ptr[3][r], need(3, N)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, z, s->ptr[4][r], need(4, N)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, j, s->ptr[5][r], need(5, N)), HN_OK);
        for (int e = 0; e < N * 4; e++) {
            poisoned &= isnan(y[e]);
            right &= y[e] == 2.0f * a[e];
        }
        for (int e = 0; e < 4; e++) {
            poisoned &= isnan(z[e]);
            right &= z[e] == zsum[e];
        }
        for (int e = 0; e < N; e++) {
            poisoned &= j[e] == INT64_MIN;
            right &= j[e] == isum[e];
        }
    }
    return poisoned ? -1 : right;
}

static hn_run_args args_of(tset *s, const char **pn, int64_t *pv)
{
    hn_run_args a = {pn != NULL, pn, pv, NIO, s->bind};
    return a;
}

enum { OP_RUN, OP_LAUNCH, OP_CAPTURE, OP_REBIND, NOPS };
static const char *const op_names[NOPS] = {"run", "launch", "capture", "rebind"};

/* One call of kind op with args a (rebind: of graph g) */
static hn_status_t call(hn_runtime *rt, hn_program *p, const hn_run_args *a, int op, hn_graph *g)
{
    hn_graph *made = NULL;
    hn_status_t st;
    switch (op) {
    case OP_RUN: return hn_runtime_run(rt, p, a);
    case OP_LAUNCH:
        if ((st = hn_runtime_launch(rt, p, a, NULL)) == HN_OK)
            st = hn_runtime_sync(rt);
        return st;
    case OP_CAPTURE:
        st = hn_runtime_capture(rt, p, a, NULL, &made);
        if (made != NULL) {
            CU_ASSERT_EQUAL(st, HN_OK);
            hn_runtime_graph_destroy(rt, made);
        }
        return st;
    default: return hn_runtime_graph_rebind(rt, g, a);
    }
}

/* The call is refused with want in the error; nothing ran (the outputs
 * still poisoned); a rebound graph still replays on its buffers (good). */
static void refused(hn_runtime *rt, hn_program *p, tset *bad, int op, hn_graph *g, tset *good, const char *want)
{
    hn_run_args a = args_of(bad, NULL, NULL);
    hn_status_t st = call(rt, p, &a, op, g);
    CU_ASSERT_EQUAL(st, HN_ERR_INVALID);
    if (strstr(hn_runtime_error(rt), want) == NULL) {
        fprintf(stderr, "%s: want '%s' in '%s'\n", op_names[op], want, hn_runtime_error(rt));
        CU_FAIL("the error does not say what was wanted");
    }
    for (int k = 0; k < NIO; k++) /* as made again, to look at them */
        for (int r = 0; r < bad->n; r++) {
            bad->ptr[k][r] = bad->base[k][r];
            bad->bytes[k][r] = need(k, bad->N);
        }
    CU_ASSERT_EQUAL(set_outputs(rt, bad), -1);
    if (op == OP_REBIND) { /* the graph is unchanged */
        CU_ASSERT_EQUAL(set_outputs(rt, good), -1);
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
        CU_ASSERT_EQUAL(set_outputs(rt, good), 1);
        set_fill(rt, good, 99); /* poisoned again for the next one */
    }
}

/* At every rank, for each kind of call: a NULL pointer, a size one element
 * short, a pointer one element's part off its alignment; each tensor
 * (three element sizes) named with the rank and the bytes. */
static void test_bad_bindings_every_rank(void)
{
    hn_program *p = hn_test_parse(text, NULL);
    int max = hn_test_max_ranks() < 3 ? hn_test_max_ranks() : 3;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int n = 1; n <= max; n++) {
        hn_runtime *rt = hn_test_runtime(NULL, n, 10, 20, 0);
        tset good, bad;
        hn_run_args a;
        hn_graph *g = NULL;
        char want[160];
        CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
        set_make(rt, &good, n, 8, 0, 1);
        a = args_of(&good, NULL, NULL);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a, NULL, &g), HN_OK);
        for (int op = 0; op < NOPS; op++)
            for (int k = 0; k < NIO; k += 2) /* A (f32, sharded), I (i64), Z (f32 output) */
                for (int r = 0; r < n; r++) {
                    const char *shape = k == 0 ? "f32[8, 4]" : k == 2 ? "i64[8]" : "f32[4]";
                    size_t nd = need(k, 8);
                    set_make(rt, &bad, n, 8, 0, 2);
                    bad.ptr[k][r] = NULL;
                    snprintf(want, sizeof(want), "binding '%s' on rank %d: %zu bytes needed (%s), a NULL pointer given",
                             names[k], r, nd, shape);
                    refused(rt, p, &bad, op, g, &good, want);
                    bad.bytes[k][r] = nd - esize[k];
                    snprintf(want, sizeof(want), "binding '%s' on rank %d: %zu bytes needed (%s), %zu given", names[k],
                             r, nd, shape, nd - esize[k]);
                    refused(rt, p, &bad, op, g, &good, want);
                    bad.bytes[k][r] = nd + SLACK / 2;
                    bad.ptr[k][r] = (char *)bad.base[k][r] + esize[k] / 2;
                    snprintf(want, sizeof(want), "binding '%s' on rank %d: pointer %p is not aligned to %zu bytes",
                             names[k], r, bad.ptr[k][r], esize[k]);
                    refused(rt, p, &bad, op, g, &good, want);
                    set_free(rt, &bad);
                }
        /* the runtime and the graph work on */
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
        CU_ASSERT_EQUAL(set_outputs(rt, &good), 1);
        set_make(rt, &bad, n, 8, 0, 3);
        a = args_of(&bad, NULL, NULL);
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK);
        CU_ASSERT_EQUAL(set_outputs(rt, &bad), 1);
        hn_runtime_graph_destroy(rt, g);
        set_free(rt, &bad);
        set_free(rt, &good);
        hn_runtime_forget(rt, p);
        hn_runtime_destroy(rt);
    }
    hn_program_destroy(p);
}

/* A binding without pointers, sizes or a name; overrides without names */
static void test_malformed_arguments(void)
{
    hn_program *p = hn_test_parse(text, NULL);
    hn_runtime *rt = hn_test_runtime(NULL, 1, 0, 20, 0);
    tset s;
    hn_run_args a;
    const char *nonames[1] = {NULL};
    int64_t v[1] = {8};
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    set_make(rt, &s, 1, 8, 0, 4);
    a = args_of(&s, NULL, NULL);
    s.bind[2].data = NULL;
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "binding 'I': no pointers (hn_binding.data is NULL)"));
    s.bind[2].data = s.ptr[2];
    s.bind[4].bytes = NULL;
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "binding 'Z': no sizes (hn_binding.bytes is NULL)"));
    s.bind[4].bytes = s.bytes[4];
    s.bind[1].name = NULL;
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "binding 1 has no name"));
    s.bind[1].name = "B";
    a.bindings = NULL;
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "6 bindings, but no array of them"));
    a = args_of(&s, nonames, v);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "parameter override 0 has no name"));
    a.param_names = NULL;
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(set_outputs(rt, &s), -1);
    a = args_of(&s, NULL, NULL);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK);
    CU_ASSERT_EQUAL(set_outputs(rt, &s), 1);
    set_free(rt, &s);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* N = 1000 over buffers made for N = 8: refused, never run (this once
 * ended in `free(): invalid pointer`); a caller claiming more bytes than
 * its block of hn_runtime_alloc holds is refused by the block's end; a
 * pointer inside a block is fine while the tensor fits before its end. */
static void test_overrides_and_blocks(void)
{
    hn_program *p = hn_test_parse(text, NULL);
    int n = hn_test_max_ranks() < 2 ? 1 : 2;
    hn_runtime *rt = hn_test_runtime(NULL, n, 10, 20, 0);
    const char *pn[1] = {"N"};
    int64_t big[1] = {1000}, eight[1] = {8};
    tset s;
    hn_run_args a;
    hn_graph *g = NULL;
    char want[200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    set_make(rt, &s, n, 8, 0, 5);
    a = args_of(&s, pn, big);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "binding 'A' on rank 0: 16000 bytes needed (f32[1000, 4]), 128 given"));
    CU_ASSERT_EQUAL(hn_runtime_capture(rt, p, &a, NULL, &g), HN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(g);
    /* the caller vouches for more than its block holds */
    for (int k = 0; k < NIO; k++)
        for (int r = 0; r < n; r++)
            s.bytes[k][r] = need(k, 1000);
    snprintf(want, sizeof(want), "binding 'A' on rank 0: 16000 bytes needed (f32[1000, 4]), 16000 given, but the "
             "block from hn_runtime_alloc (or the registered allocation) it points into ends %d bytes after it",
             128 + SLACK);
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), want));
    CU_ASSERT_EQUAL(set_outputs(rt, &s), -1);
    /* inside a block: 16 bytes in, the tensor fits; 48 bytes in, it does not */
    a = args_of(&s, pn, eight);
    for (int k = 0; k < NIO; k++)
        for (int r = 0; r < n; r++)
            s.bytes[k][r] = need(k, 8);
    for (int r = 0; r < n; r++) { /* the last rank's Y moved 16 bytes in */
        float y[32];
        for (int e = 0; e < 32; e++)
            y[e] = NAN;
        s.ptr[3][r] = (char *)s.base[3][r] + (r == n - 1 ? 16 : 0);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s.ptr[3][r], y, sizeof(y)), HN_OK);
    }
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK);
    CU_ASSERT_EQUAL(set_outputs(rt, &s), 1);
    s.ptr[3][n - 1] = (char *)s.base[3][n - 1] + 96;
    s.bytes[3][n - 1] = 1 << 20;
    snprintf(want, sizeof(want), "binding 'Y' on rank %d: 128 bytes needed (f32[8, 4]), 1048576 given, but the "
             "block from hn_runtime_alloc (or the registered allocation) it points into ends %d bytes after it",
             n - 1, 128 + SLACK - 96);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), want));
    s.ptr[3][n - 1] = s.base[3][n - 1];
    /* copies past a block's end are refused too; frees of what is no block are ignored */
    {
        char host[256] = {0};
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, 0, (char *)s.base[0][0] + 64, host, 128 + SLACK), HN_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "runs past the end of its block"));
        CU_ASSERT_EQUAL(hn_runtime_download(rt, 0, host, (char *)s.base[0][0] + 64, 128 + SLACK - 64), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, 0, NULL, host, 4), HN_ERR_INVALID);
        char *said;
        hn_test_capture_begin(); /* the ignored frees are warned of: checked, not shown */
        hn_runtime_free(rt, 0, host);                      /* never allocated: ignored */
        hn_runtime_free(rt, 0, (char *)s.base[0][0] + 4); /* inside a block: ignored */
        hn_runtime_free(rt, n + 3, s.base[0][0]);         /* no such rank */
        said = hn_test_capture_end();
        CU_ASSERT_PTR_NOT_NULL(strstr(said, "hirnode warn: hn_runtime_free: "));
        CU_ASSERT_PTR_NOT_NULL(strstr(said, "is no block of hn_runtime_alloc on rank 0 (freed already?): ignored"));
        free(said);
    }
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK);
    set_free(rt, &s);
    {
        char *said;
        hn_test_capture_begin();
        hn_runtime_free(rt, 0, s.base[0][0]); /* freed already: ignored */
        said = hn_test_capture_end();
        CU_ASSERT_PTR_NOT_NULL(strstr(said, "(freed already?): ignored"));
        free(said);
    }
    CU_ASSERT_EQUAL(rt->ranks[0].nuser_blocks, 0);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* Memory the runtime did not allocate (plain malloc here, standing for
 * cudaMalloc, a cudaMallocAsync pool or another library's on a GPU) is
 * bound on the caller's word: run, launched, captured, replayed, rebound
 * to another such set and to the runtime's own, each result checked. */
static void test_external_memory(void)
{
    hn_program *p = hn_test_parse(text, NULL);
    int n = hn_test_max_ranks() < 3 ? hn_test_max_ranks() : 3;
    hn_runtime *rt;
    tset ext[2], own;
    hn_run_args a;
    hn_graph *g = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (strcmp(hn_test_backend, "host") != 0) { /* device memory is not host memory there (bind_cuda) */
        hn_program_destroy(p);
        return;
    }
    rt = hn_test_runtime(NULL, n, 20, 20, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    set_make(rt, &ext[0], n, 8, 1, 6);
    set_make(rt, &ext[1], n, 8, 1, 7);
    set_make(rt, &own, n, 8, 0, 8);
    a = args_of(&ext[0], NULL, NULL);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK);
    CU_ASSERT_EQUAL(set_outputs(rt, &ext[0]), 1);
    a = args_of(&ext[1], NULL, NULL);
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &a, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_EQUAL(set_outputs(rt, &ext[1]), 1);
    set_free(rt, &ext[0]);
    set_make(rt, &ext[0], n, 8, 1, 9);
    a = args_of(&ext[0], NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &a, NULL, &g), HN_OK);
    CU_ASSERT_EQUAL(set_outputs(rt, &ext[0]), -1); /* a capture runs nothing */
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_EQUAL(set_outputs(rt, &ext[0]), 1);
    set_free(rt, &ext[1]);
    set_make(rt, &ext[1], n, 8, 1, 10);
    a = args_of(&ext[1], NULL, NULL);
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, g, &a), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_EQUAL(set_outputs(rt, &ext[1]), 1);
    a = args_of(&own, NULL, NULL);
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, g, &a), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_EQUAL(set_outputs(rt, &own), 1);
    hn_runtime_graph_destroy(rt, g);
    set_free(rt, &ext[0]);
    set_free(rt, &ext[1]);
    set_free(rt, &own);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* hn_program_io: every input then output, per-rank shapes and bytes at
 * several worlds, ranks and overrides; what a binding needs is what a run
 * takes; the errors. */
static void test_io_list(void)
{
    const char *t2 = "param M = 10, K = 3\n"
                     "input  X : f32[floor(M / world), K] shard(axis 0)\n"
                     "input  W : bf16[K, 2 * world + 1] replicated\n"
                     "output Y : i32[floor(M / world)] shard(axis 0)\n"
                     "fill Y <- 1\n";
    hn_program *p = hn_test_parse(t2, NULL), *q = hn_test_parse(text, NULL);
    hn_io_info io[4];
    const char *pn[2] = {"K", "M"};
    int64_t pv[2] = {5, 21};
    hn_run_args over = {2, pn, pv, 0, NULL};
    char *diag = NULL;
    int n = -1;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    CU_ASSERT_EQUAL(hn_program_io(p, 2, 3, NULL, 0, NULL, 0, &n, &diag), HN_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_PTR_NULL(diag);
    for (int world = 1; world <= 4; world++)
        for (int r = 0; r < world; r++) {
            memset(io, 0x5a, sizeof(io));
            CU_ASSERT_EQUAL_FATAL(hn_program_io(p, world, 3, &over, r, io, 4, &n, NULL), HN_OK);
            CU_ASSERT_EQUAL(n, 3);
            CU_ASSERT_STRING_EQUAL(io[0].name, "X");
            CU_ASSERT_EQUAL(io[0].is_output, 0);
            CU_ASSERT_EQUAL(io[0].dtype, HN_DTYPE_F32);
            CU_ASSERT_EQUAL(io[0].ndim, 2);
            CU_ASSERT_EQUAL(io[0].shape[0], 21 / world);
            CU_ASSERT_EQUAL(io[0].shape[1], 5);
            CU_ASSERT_EQUAL(io[0].bytes, (size_t)(21 / world) * 5 * 4);
            CU_ASSERT_EQUAL(io[0].shard_axis, 0);
            CU_ASSERT_STRING_EQUAL(io[1].name, "W");
            CU_ASSERT_EQUAL(io[1].dtype, HN_DTYPE_BF16);
            CU_ASSERT_EQUAL(io[1].shape[1], 2 * world + 1);
            CU_ASSERT_EQUAL(io[1].bytes, (size_t)5 * (size_t)(2 * world + 1) * 2);
            CU_ASSERT_EQUAL(io[1].shard_axis, -1);
            CU_ASSERT_EQUAL(io[2].is_output, 1);
            CU_ASSERT_EQUAL(io[2].dtype, HN_DTYPE_I32);
            CU_ASSERT_EQUAL(io[2].ndim, 1);
            CU_ASSERT_EQUAL(io[2].bytes, (size_t)(21 / world) * 4);
            CU_ASSERT_EQUAL(io[3].ndim, 0x5a5a5a5a); /* past the count: untouched */
        }
    /* cap smaller than the count: what fits, and the count */
    memset(io, 0, sizeof(io));
    CU_ASSERT_EQUAL(hn_program_io(q, 2, 3, NULL, 1, io, 2, &n, NULL), HN_OK);
    CU_ASSERT_EQUAL(n, 6);
    CU_ASSERT_STRING_EQUAL(io[1].name, "B");
    CU_ASSERT_EQUAL(io[1].dtype, HN_DTYPE_BF16);
    CU_ASSERT_PTR_NULL(io[2].name);
    /* errors, with their text */
    CU_ASSERT_EQUAL(hn_program_io(p, 0, 3, NULL, 0, io, 4, &n, &diag), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "no such configuration: world 0") : NULL);
    hn_string_free(diag);
    CU_ASSERT_EQUAL(hn_program_io(p, 2, 3, NULL, 2, io, 4, &n, &diag), HN_ERR_INVALID);
    hn_string_free(diag);
    CU_ASSERT_EQUAL(hn_program_io(p, 2, 17, NULL, 0, io, 4, &n, NULL), HN_ERR_INVALID);
    pn[0] = "Q";
    CU_ASSERT_EQUAL(hn_program_io(p, 2, 3, &over, 0, io, 4, &n, &diag), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "no parameter named 'Q'") : NULL);
    hn_string_free(diag);
    pn[0] = "K";
    pv[0] = -2;
    CU_ASSERT_EQUAL(hn_program_io(p, 2, 3, &over, 0, io, 4, &n, &diag), HN_ERR_VERIFY);
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "shape of 'X': dimension 1 is negative (-2)") : NULL);
    hn_string_free(diag);
    CU_ASSERT_EQUAL(hn_program_io(NULL, 2, 3, NULL, 0, io, 4, &n, NULL), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_program_io(p, 2, 3, NULL, 0, NULL, 4, &n, NULL), HN_ERR_INVALID);
    /* the bytes it says are what a run takes, at a configuration of three ranks */
    if (hn_test_max_ranks() >= 3) {
        hn_runtime *rt = hn_test_runtime(NULL, 3, 0, 20, 0);
        tset s;
        hn_run_args a;
        set_make(rt, &s, 3, 8, 0, 11);
        for (int r = 0; r < 3; r++) {
            hn_io_info all[NIO];
            CU_ASSERT_EQUAL(hn_program_io(q, 3, rt->cfg.nstreams, NULL, r, all, NIO, &n, NULL), HN_OK);
            CU_ASSERT_EQUAL(n, NIO);
            for (int k = 0; k < NIO; k++) {
                CU_ASSERT_STRING_EQUAL(all[k].name, names[k]);
                s.bytes[k][r] = all[k].bytes;
                CU_ASSERT_EQUAL(all[k].bytes, need(k, 8));
            }
        }
        a = args_of(&s, NULL, NULL);
        CU_ASSERT_EQUAL(hn_runtime_run(rt, q, &a), HN_OK);
        CU_ASSERT_EQUAL(set_outputs(rt, &s), 1);
        set_free(rt, &s);
        hn_runtime_forget(rt, q);
        hn_runtime_destroy(rt);
    }
    hn_program_destroy(p);
    hn_program_destroy(q);
}

/* Ranks on device ordinals (two on one device on the host backend), the
 * array copied; hn_runtime_create_ex's texts, without source locations */
static void test_devices_and_create_texts(void)
{
    hn_program *p = hn_test_parse(text, NULL);
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    int devices[3] = {2, 0, 2};
    const hn_device_ops *cuda = hn_device_find("cuda");
    char *diag = NULL, want[160];
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hn_runtime_config_default(&cfg);
    CU_ASSERT_PTR_NULL(cfg.devices);
    cfg.ndev = 3;
    cfg.backend = "host";
    cfg.devices = devices;
    CU_ASSERT_EQUAL_FATAL(hn_runtime_create_ex(&cfg, &rt, &diag), HN_OK);
    CU_ASSERT_PTR_NULL(diag);
    devices[0] = 7; /* copied at create */
    CU_ASSERT_EQUAL(hn_runtime_device(rt, 0), 2);
    CU_ASSERT_EQUAL(hn_runtime_device(rt, 1), 0);
    CU_ASSERT_EQUAL(hn_runtime_device(rt, 2), 2);
    CU_ASSERT_EQUAL(hn_runtime_device(rt, 3), -1);
    CU_ASSERT_EQUAL(hn_runtime_device(rt, -1), -1);
    CU_ASSERT_EQUAL(hn_runtime_device(NULL, 0), -1);
    /* the other questions of a runtime answer NULL as none, without touching it */
    CU_ASSERT_EQUAL(hn_runtime_size(NULL), 0);
    CU_ASSERT_EQUAL(hn_runtime_world(NULL), 0);
    CU_ASSERT_EQUAL(hn_runtime_first_rank(NULL), -1);
    CU_ASSERT_STRING_EQUAL(hn_runtime_backend(NULL), "none");
    CU_ASSERT_EQUAL(hn_runtime_device_kind(NULL), HN_DEVICE_KIND_NONE);
    {
        tset s;
        hn_run_args a;
        set_make(rt, &s, 3, 8, 0, 12);
        a = args_of(&s, NULL, NULL);
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &a), HN_OK); /* the host communicator takes shared devices */
        CU_ASSERT_EQUAL(set_outputs(rt, &s), 1);
        set_free(rt, &s);
        hn_runtime_forget(rt, p);
    }
    hn_runtime_destroy(rt);
    rt = NULL;
    /* the reasons a start is refused */
    devices[0] = 0;
    devices[1] = -1;
    CU_ASSERT_EQUAL(hn_runtime_create_ex(&cfg, &rt, &diag), HN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(rt);
    CU_ASSERT_STRING_EQUAL(diag != NULL ? diag : "", "rank 1: device ordinal -1 out of range [0, 4095]");
    hn_string_free(diag);
    cfg.devices = NULL;
    cfg.backend = "gpu";
    CU_ASSERT_EQUAL(hn_runtime_create_ex(&cfg, &rt, &diag), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "unknown backend 'gpu' (this build has auto, ") : NULL);
    hn_string_free(diag);
    cfg.backend = "host";
    cfg.ndev = 0;
    CU_ASSERT_EQUAL(hn_runtime_create_ex(&cfg, &rt, &diag), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(diag != NULL ? diag : "", "rank count 0 out of range [1, 256]");
    hn_string_free(diag);
    cfg.ndev = 2;
    cfg.nstreams = 17;
    CU_ASSERT_EQUAL(hn_runtime_create_ex(&cfg, &rt, &diag), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(diag != NULL ? diag : "", "stream count 17 out of range [1, 16]");
    hn_string_free(diag);
    cfg.nstreams = 3;
    if (cuda != NULL && cuda->device_count() < 256) {
        int have = cuda->device_count();
        cfg.backend = "cuda";
        cfg.ndev = have + 1;
        snprintf(want, sizeof(want), "backend 'cuda' has %d device%s, %d rank%s asked", have, have == 1 ? "" : "s",
                 have + 1, have + 1 == 1 ? "" : "s");
        CU_ASSERT_EQUAL(hn_runtime_create_ex(&cfg, &rt, &diag), HN_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, want) : NULL);
        hn_string_free(diag);
        devices[0] = have;
        devices[1] = 0;
        cfg.ndev = 2;
        cfg.devices = devices;
        snprintf(want, sizeof(want), "backend 'cuda' has %d device%s, device %d asked", have, have == 1 ? "" : "s",
                 have);
        CU_ASSERT_EQUAL(hn_runtime_create_ex(&cfg, &rt, &diag), HN_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, want) : NULL);
        hn_string_free(diag);
        cfg.devices = NULL;
    }
    CU_ASSERT_EQUAL(hn_runtime_create_ex(NULL, &rt, &diag), HN_ERR_INVALID);
    hn_string_free(diag);
    cfg.backend = "gpu";
    CU_ASSERT_EQUAL(hn_runtime_create_ex(&cfg, &rt, NULL), HN_ERR_INVALID); /* no place for why: fine */
    hn_program_destroy(p);
}

void hn_suite_bind(void)
{
    static CU_TestInfo tests[] = {
        {"NULL, short and misaligned bindings at every rank, in runs, launches, captures, rebinds",
         test_bad_bindings_every_rank},
        {"bindings without pointers, sizes or names; overrides without names", test_malformed_arguments},
        {"an override larger than the buffers; bindings inside and past blocks of hn_runtime_alloc",
         test_overrides_and_blocks},
        {"external memory bound, launched, captured, rebound", test_external_memory},
        {"hn_program_io at several configurations; its errors", test_io_list},
        {"ranks on device ordinals; hn_runtime_create_ex's texts", test_devices_and_create_texts},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("runtime/bind", tests);
}

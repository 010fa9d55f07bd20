/* Tests of src/runtime/tune.c, the machine profile's measurements: the whole
 * of `hirnode tune` at its least size on 1 and 2 ranks of the test backend
 * — every step said once and in order, a complete profile that is written
 * and read back for its machine, refitted to what it holds as tune fitted
 * it, the model running on it and a runtime
 * taking it — the shapes given, a configuration that cannot start, and
 * the timed runs in rounds that it and `bench overlap` share. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/check.h"
#include "model/profile.h"
#include "ranks/runtime_int.h"
#include "runtime/tune.h"
#include "../test.h"

typedef struct steps {
    int calls, last, total, ordered;
    char first[160];
} steps;

static void count_steps(void *ctx, int step, int nsteps, const char *what)
{
    steps *s = ctx;
    if (s->calls++ == 0) {
        s->total = nsteps;
        snprintf(s->first, sizeof(s->first), "%s", what);
    }
    s->ordered &= step == s->last + 1 && nsteps == s->total && what != NULL && *what != '\0';
    s->last = step;
}

/* At its least size on n ranks of the test backend. */
static void tiny_opts(hn_tune_opts *o, int n)
{
    memset(o, 0, sizeof(*o));
    hn_runtime_config_default(&o->cfg);
    o->cfg.ndev = n;
    o->cfg.backend = hn_test_backend;
    o->size = HN_TUNE_TINY;
}

static void tune_at(int n)
{
    hn_tune_opts o;
    hn_cost_profile *p = calloc(1, sizeof(*p)), *q = calloc(1, sizeof(*q));
    hn_strbuf err, text;
    steps s = {0, 0, 0, 1, ""};
    char model[96], cuda[24];
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    tiny_opts(&o, n);
    o.progress = count_steps;
    o.progress_ctx = &s;
    hn_sb_init(&err);
    CU_ASSERT_EQUAL_FATAL(hn_tune(&o, p, &err), HN_OK);
    CU_ASSERT_PTR_NULL(err.data);
    /* every step said once, in order, the last the fit */
    CU_ASSERT_TRUE(s.ordered);
    CU_ASSERT_EQUAL(s.calls, s.total);
    CU_ASSERT(s.total > 5);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.first, "warmed up")); /* the least warm-up, that it runs */
    /* the machine */
    hn_profile_device_model(hn_device_find(hn_test_backend), model, sizeof(model), cuda, sizeof(cuda));
    CU_ASSERT_STRING_EQUAL(p->model, model);
    CU_ASSERT_EQUAL(p->count, n);
    CU_ASSERT_STRING_EQUAL(p->backend, hn_test_backend);
    CU_ASSERT_EQUAL(strlen(p->date), 20); /* 2026-11-24T10:03:19Z */
    CU_ASSERT_FALSE(p->builtin);
    /* what it measured: GEMMs of every dtype, chunks and streams, copies */
    {
        int per[3] = {0, 0, 0};
        for (int i = 0; i < p->ngemm; i++) {
            CU_ASSERT(p->gemm[i].tflops > 0 && isfinite(p->gemm[i].tflops));
            per[hn_cost_dtype_index(p->gemm[i].dtype)]++;
        }
        CU_ASSERT(per[0] >= 2 && per[1] >= 2 && per[2] >= 2);
        for (int d = 0; d < HN_COST_NDTYPES; d++)
            CU_ASSERT(p->gemm_tflops_at_1t[d] > 0 && isfinite(p->gemm_gamma[d]));
    }
    CU_ASSERT(p->coef.chunk_s >= 0 && p->coef.stream_s >= 0 && p->hbm_bytes_per_s > 0);
    /* the shape's GEMM in 2 chunks, on 1 and on 2 streams, over the whole */
    CU_ASSERT_EQUAL(p->nsplits, 2);
    for (int i = 0; i < p->nsplits; i++) {
        const hn_cost_split_point *sp = &p->splits[i];
        CU_ASSERT(sp->M == 32 && sp->K == 16 && sp->N == 16 && sp->chunks == 2 && sp->streams == i + 1);
        CU_ASSERT(sp->ratio > 0 && sp->ratio <= HN_COST_MAX_SPLIT_RATIO);
        CU_ASSERT_EQUAL(hn_cost_split_ratio(p, 32, 16, 16, 2, i + 1), sp->ratio);
    }
    CU_ASSERT(p->interference[HN_TRAFFIC_SM] >= 0 || p->interference[HN_TRAFFIC_SM] == -1);
    CU_ASSERT_EQUAL(p->nshapes, 1);
    CU_ASSERT(p->shapes[0][0] == 32 && p->shapes[0][1] == 16 && p->shapes[0][2] == 16);
    if (n == 1) { /* nothing communicates: the default's terms, no curves, no pipelines */
        CU_ASSERT_EQUAL(p->ncurves, 0);
        CU_ASSERT_EQUAL(p->npipes, 0);
        CU_ASSERT_EQUAL(p->coef.kappa[1][1], hn_cost_model.kappa[1][1]);
        CU_ASSERT_EQUAL(p->interference[HN_TRAFFIC_NCCL], -1);
    } else {
        int kinds[2] = {0, 0};
        /* allgather, reduce_scatter, allreduce through NCCL, p2p put and
         * get, and the latency path, eagerly; in graphs all but p2p get */
        CU_ASSERT_EQUAL(p->ncurves, 12 + 9);
        for (int c = 0; c < p->ncurves; c++) {
            CU_ASSERT_EQUAL(p->curves[c].n, n);
            CU_ASSERT(p->curves[c].npoints >= 1);
            for (int i = 0; i < p->curves[c].npoints; i++)
                CU_ASSERT(p->curves[c].us[i] > 0);
            kinds[p->curves[c].graph != 0] |= 1 << p->curves[c].engine;
            /* the model's pipelines read the eager ones */
            CU_ASSERT_PTR_EQUAL(hn_cost_curve_exact(p, p->curves[c].kind, p->curves[c].engine, n, p->curves[c].graph),
                                &p->curves[c]);
        }
        CU_ASSERT_EQUAL(kinds[0], 15);
        CU_ASSERT_EQUAL(kinds[1], 15 & ~(1 << HN_ENGINE_CE_GET));
        CU_ASSERT_EQUAL(hn_cost_curve_of(p, HN_COLL_ALLREDUCE, HN_ENGINE_NCCL, n)->graph, 0);
        /* every op: sequential, rings (no allreduce ring with get), per chunk */
        CU_ASSERT_EQUAL(p->npipes, 14);
        for (int i = 0; i < p->npipes; i++) {
            CU_ASSERT(p->pipes[i].ratio > 0 && p->pipes[i].gemm_tflops > 0);
            CU_ASSERT_EQUAL(p->pipes[i].world, n);
        }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                CU_ASSERT(p->coef.kappa[i][j] >= 0 && p->coef.tau_s[i][j] >= 0 && isfinite(p->coef.kappa[i][j]));
    }
    /* written and read back, for its own machine only */
    hn_sb_init(&text);
    hn_profile_write(p, &text);
    CU_ASSERT_EQUAL(hn_profile_parse(text.data, text.len, model, n, q, &err), HN_OK);
    CU_ASSERT_EQUAL(q->ncurves, p->ncurves);
    for (int c = 0; c < q->ncurves; c++)
        CU_ASSERT_EQUAL(q->curves[c].graph, p->curves[c].graph);
    CU_ASSERT_EQUAL(q->npipes, p->npipes);
    CU_ASSERT_EQUAL(hn_profile_parse(text.data, text.len, model, n + 1, q, &err), HN_ERR_INVALID);
    hn_sb_free(&err);
    /* refitted from what it holds (--refit), the model is the fit tune made */
    {
        hn_cost_profile *r = malloc(sizeof(*r));
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        *r = *p;
        r->coef.seq_overhead_s = 1;
        r->coef.kappa[0][0] = r->coef.kappa[1][1] = 50;
        r->gemm_tflops_at_1t[0] = r->gemm_gamma[2] = 3;
        hn_tune_fit(r);
        CU_ASSERT_EQUAL(memcmp(&r->coef, &p->coef, sizeof(p->coef)), 0);
        CU_ASSERT_EQUAL(memcmp(r->gemm_tflops_at_1t, p->gemm_tflops_at_1t, sizeof(p->gemm_tflops_at_1t)), 0);
        CU_ASSERT_EQUAL(memcmp(r->gemm_gamma, p->gemm_gamma, sizeof(p->gemm_gamma)), 0);
        free(r);
    }
    /* the model runs on it, and a runtime of its machine takes it */
    {
        hn_pipe_shape sh = {HN_PIPE_MM_AR, 64, 32, 32, HN_BF16, n, p};
        hn_pipe_plan pl;
        char e[256];
        memset(&pl, 0, sizeof(pl));
        pl.via = HN_VIA_AUTO;
        CU_ASSERT_EQUAL(hn_pipe_choose(&sh, HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE, &pl, e, sizeof(e)),
                        HN_OK);
        CU_ASSERT(pl.seconds > 0 && isfinite(pl.seconds));
    }
    {
        char path[] = "/tmp/hn-tune-XXXXXX";
        int fd = mkstemp(path);
        hn_runtime *rt;
        CU_ASSERT_FATAL(fd >= 0);
        CU_ASSERT_EQUAL(write(fd, text.data, text.len), (ssize_t)text.len);
        close(fd);
        setenv("HIRNODE_PROFILE", path, 1);
        rt = hn_test_runtime(NULL, n, 0, 60, 0);
        unsetenv("HIRNODE_PROFILE");
        CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
        CU_ASSERT_FALSE(rt->profile->builtin);
        CU_ASSERT_STRING_EQUAL(rt->profile->source, path);
        CU_ASSERT_EQUAL(rt->profile->npipes, p->npipes);
        {
            /* a pipelined statement lowered by it runs right */
            hn_program *prog = hn_test_parse("param M = 8 * world\ninput A : f32[M, 16] shard(axis 1)\n"
                                             "input B : f32[16, 8] shard(axis 0)\noutput C : f32[M, 8] replicated\n"
                                             "allreduce C <- matmul(A, B) pipelined()\n"
                                             "reference {\n  matmul C <- A, B\n}\n",
                                             NULL);
            hn_check_opts co;
            hn_check_result res;
            hn_strbuf diag;
            CU_ASSERT_PTR_NOT_NULL_FATAL(prog);
            memset(&co, 0, sizeof(co));
            co.iters = 2;
            co.check = 1;
            hn_sb_init(&diag);
            CU_ASSERT_EQUAL(hn_check_run(rt, prog, &co, &res, &diag), HN_OK);
            CU_ASSERT_TRUE(res.passed);
            hn_sb_free(&diag);
            hn_program_destroy(prog);
        }
        hn_runtime_destroy(rt);
        remove(path);
    }
    hn_sb_free(&text);
    free(p);
    free(q);
}

static void test_tune_one(void) { tune_at(1); }

static void test_tune_two(void)
{
    if (hn_test_max_ranks() >= 2)
        tune_at(2);
}

/* The pipelines' shapes given; a shape the ranks do not divide is left
 * out (its variants cannot be lowered), the rest measured. */
static void test_shapes_given(void)
{
    hn_tune_opts o;
    hn_cost_profile *p = calloc(1, sizeof(*p));
    hn_strbuf err;
    int n = hn_test_max_ranks() >= 3 ? 3 : 1;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tiny_opts(&o, n);
    o.nshapes = 2;
    o.shapes[0][0] = 24, o.shapes[0][1] = 8, o.shapes[0][2] = 8;
    o.shapes[1][0] = 16, o.shapes[1][1] = 8, o.shapes[1][2] = 8; /* 16 rows do not split over 3 */
    hn_sb_init(&err);
    if (hn_tune(&o, p, &err) != HN_OK)
        fprintf(stderr, "\n  %s\n", err.data ? err.data : "");
    CU_ASSERT_PTR_NULL_FATAL(err.data);
    CU_ASSERT_EQUAL(p->nshapes, 2);
    CU_ASSERT_EQUAL(p->shapes[1][0], 16);
    for (int i = 0; i < p->npipes; i++)
        CU_ASSERT_EQUAL(p->pipes[i].M, 24);
    if (n == 3)
        CU_ASSERT(p->npipes > 0);
    /* what cannot start says why, and writes nothing */
    o.cfg.ndev = 0;
    memset(p, 0x5a, sizeof(*p));
    p->count = 777;
    CU_ASSERT_EQUAL(hn_tune(&o, p, &err), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.data, "cannot start 0 ranks"));
    CU_ASSERT_EQUAL(p->count, 777);
    hn_sb_free(&err);
    free(p);
}

/* hn_tune_time_rounds: a median for every program, NaN for a NULL entry,
 * and the runs in rounds, every other one reversed: A then B, then B then
 * A (the last run of two rounds is A's; one program after the other would
 * end with B's), and a failing run said. */
static void test_rounds(void)
{
    hn_runtime *rt = hn_test_runtime(NULL, 1, 0, 30, 0);
    hn_program *a = hn_test_parse("output X : f32[4] replicated\nfill X <- 1.0\n", NULL);
    hn_program *b = hn_test_parse("output X : f32[4] replicated\nfill X <- 2.0\n", NULL);
    hn_program *progs[3];
    void *x[1] = {NULL};
    size_t bytes[1] = {4 * sizeof(float)};
    hn_binding bind = {"X", x, bytes};
    hn_run_args args = {0, NULL, NULL, 1, &bind};
    double secs[3];
    float got[4];
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, 0, bytes[0], &x[0]), HN_OK);
    progs[0] = a, progs[1] = NULL, progs[2] = b;
    CU_ASSERT_EQUAL(hn_tune_time_rounds(rt, progs, 3, &args, 1, 2, secs), HN_OK);
    CU_ASSERT(secs[0] > 0 && secs[2] > 0);
    CU_ASSERT(isnan(secs[1]));
    CU_ASSERT_EQUAL(hn_runtime_download(rt, 0, got, x[0], sizeof(got)), HN_OK);
    CU_ASSERT_EQUAL(got[0], 1.0f); /* rounds A B, B A: A's run last */
    CU_ASSERT_EQUAL(hn_tune_time_rounds(rt, progs, 3, &args, 0, 1, secs), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_download(rt, 0, got, x[0], sizeof(got)), HN_OK);
    CU_ASSERT_EQUAL(got[0], 2.0f); /* one round: B's run last */
    /* a run that fails ends the rounds with its error */
    bytes[0] = 2 * sizeof(float); /* too small for X */
    CU_ASSERT_NOT_EQUAL(hn_tune_time_rounds(rt, progs, 3, &args, 0, 2, secs), HN_OK);
    hn_runtime_free(rt, 0, x[0]);
    hn_runtime_destroy(rt);
    hn_program_destroy(a);
    hn_program_destroy(b);
}

void hn_suite_tune(void)
{
    static CU_TestInfo tests[] = {
        {"the whole tune on one rank", test_tune_one},
        {"the whole tune on two ranks", test_tune_two},
        {"the shapes given; what cannot start", test_shapes_given},
        {"timed runs in rounds, every other one reversed", test_rounds},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("runtime/tune", tests);
}

/* Tests of src/model/cost.c: the coefficient table is the fit of the
 * measurement table; the fitted model orders the measured strategies as
 * measured; the chooser keeps fixed choices and rejects impossible ones;
 * `via auto` picks by the measured crossovers, the same on every rank, on
 * the host backend as on CUDA. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "model/cost.h"
#include "runtime/check.h"
#include "exec/verify_run.h"
#include "comm/ll/ll.h"
#include "../test.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-5 * fmax(fabs(a), fabs(b)) + 1e-12; }

/* After new measurements, this prints the table to paste into cost.c. */
static void test_coefficients_are_the_fit(void)
{
    hn_cost_coeffs f;
    const hn_cost_coeffs *m = &hn_cost_model;
    int same;
    hn_cost_fit(NULL, hn_cost_points, hn_cost_npoints, NULL, &f);
    same = close_to(f.gemm_tflops_at_1t, m->gemm_tflops_at_1t) && close_to(f.gemm_gamma, m->gemm_gamma) &&
           close_to(f.seq_overhead_s, m->seq_overhead_s) && f.chunk_s == 0 && f.stream_s == 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            same = same && close_to(f.kappa[i][j], m->kappa[i][j]) && close_to(f.tau_s[i][j], m->tau_s[i][j]);
    if (!same)
        fprintf(stderr, "\n  refit: .gemm_tflops_at_1t = %g, .gemm_gamma = %g, .seq_overhead_s = %g,\n"
                        "  .kappa = {{%g, %g}, {%g, %g}}, .tau_s = {{%g, %g}, {%g, %g}}\n",
                f.gemm_tflops_at_1t, f.gemm_gamma, f.seq_overhead_s, f.kappa[0][0], f.kappa[0][1], f.kappa[1][0],
                f.kappa[1][1], f.tau_s[0][0], f.tau_s[0][1], f.tau_s[1][0], f.tau_s[1][1]);
    CU_ASSERT_TRUE(same);
    /* the built-in default carries that table */
    CU_ASSERT_EQUAL(memcmp(&hn_cost_builtin()->coef, m, sizeof(*m)), 0);
    CU_ASSERT_TRUE(hn_cost_builtin()->builtin);
    /* the fit is a fit: it moves with the data */
    {
        hn_cost_point pts[64];
        memcpy(pts, hn_cost_points, sizeof(pts[0]) * (size_t)hn_cost_npoints);
        for (int i = 0; i < hn_cost_npoints; i++)
            if (pts[i].strategy == HN_STRAT_RING)
                pts[i].ratio *= 0.9; /* slower rings interfere more */
        hn_cost_fit(NULL, pts, hn_cost_npoints, NULL, &f);
        CU_ASSERT(f.kappa[0][1] > m->kappa[0][1] && f.kappa[1][1] > m->kappa[1][1]);
        /* however wild the runs (an emulation on a loaded machine), the
         * coefficients stay within what a profile file may hold */
        for (int i = 0; i < hn_cost_npoints; i++)
            pts[i].ratio = i % 2 ? 1e-7 : 1e-3;
        hn_cost_fit(NULL, pts, hn_cost_npoints, NULL, &f);
        CU_ASSERT(f.seq_overhead_s <= HN_COST_MAX_SECONDS);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                CU_ASSERT(f.kappa[i][j] >= 0 && f.kappa[i][j] <= HN_COST_MAX_KAPPA && f.tau_s[i][j] >= 0 &&
                          f.tau_s[i][j] <= HN_COST_MAX_SECONDS);
        /* measured chunk costs are taken out of what tau must explain */
        {
            hn_cost_profile *pr = malloc(sizeof(*pr));
            hn_cost_coeffs g;
            CU_ASSERT_PTR_NOT_NULL_FATAL(pr);
            *pr = *hn_cost_builtin();
            pr->coef.chunk_s = 2e-6;
            hn_cost_fit(pr, hn_cost_points, hn_cost_npoints, NULL, &g);
            CU_ASSERT_EQUAL(g.chunk_s, 2e-6);
            CU_ASSERT(g.tau_s[0][0] + g.tau_s[0][1] < m->tau_s[0][0] + m->tau_s[0][1]);
            /* a class without points keeps the fallback's terms */
            hn_cost_fit(pr, hn_cost_points, 9, NULL, &g); /* allgather + GEMM only */
            CU_ASSERT_EQUAL(g.kappa[1][1], m->kappa[1][1]);
            CU_ASSERT_EQUAL(g.tau_s[1][0], m->tau_s[1][0]);
            free(pr);
        }
    }
    {
        /* GEMM rates: the power law through points of one dtype */
        hn_cost_gemm_point g[3] = {{HN_F16, 1024, 1024, 1024, 100}, {HN_F16, 4096, 4096, 4096, 400},
                                   {HN_BF16, 64, 64, 64, 1}};
        double f1, gamma;
        CU_ASSERT_TRUE(hn_cost_fit_gemm(g, 3, HN_F16, &f1, &gamma));
        CU_ASSERT(fabs(f1 * pow(2.0 * 4096 * 4096 * 4096 / 1e12, -gamma) - 400) < 1e-6);
        CU_ASSERT(gamma < 0); /* faster with size */
        CU_ASSERT_TRUE(hn_cost_fit_gemm(g, 3, HN_BF16, &f1, &gamma));
        CU_ASSERT_EQUAL(gamma, 0);
        CU_ASSERT_FALSE(hn_cost_fit_gemm(g, 3, HN_F32, &f1, &gamma));
    }
}

static hn_pipe_plan plan_of(hn_strategy s, int chunks, int streams, hn_via via, hn_coll_algo protocol)
{
    hn_pipe_plan pl;
    memset(&pl, 0, sizeof(pl));
    pl.strategy = s;
    pl.chunks = chunks;
    pl.streams = streams;
    pl.via = via;
    pl.protocol = protocol;
    return pl;
}

static hn_pipe_shape shape_of(hn_pipe_kind k, int64_t M, int64_t K, int64_t N, hn_dtype dt, int world,
                              const hn_cost_profile *prof)
{
    hn_pipe_shape sh = {k, M, K, N, dt, world, prof};
    return sh;
}

static double predicted_ratio(const hn_cost_point *p, hn_via via)
{
    hn_pipe_shape sh = shape_of(p->kind, p->M, p->K, p->N, HN_BF16, p->world, NULL);
    hn_pipe_plan pl = plan_of(p->strategy, p->chunks, p->strategy == HN_STRAT_SEQUENTIAL ? 1 : 2, via, HN_ALGO_PUSH);
    double flops = 2.0 * p->M * p->N * p->K;
    return hn_cost_gemm_seconds(NULL, flops, HN_BF16) / hn_pipe_seconds(&sh, &pl);
}

/* Within 0.1 of every measured ratio of the runs it was fitted to, and
 * the strategies of each shape in the measured order. */
static void test_model_follows_the_measurements(void)
{
    for (int i = 0; i < hn_cost_npoints; i++) {
        const hn_cost_point *p = &hn_cost_points[i];
        double r = predicted_ratio(p, p->p2p ? HN_VIA_P2P : HN_VIA_NCCL);
        if (p->world != 2)
            continue;
        if (fabs(r - p->ratio) > 0.1)
            fprintf(stderr, "\n  point %d: predicted %.3f, measured %.3f", i, r, p->ratio);
        CU_ASSERT(fabs(r - p->ratio) <= 0.1);
        for (int j = 0; j < hn_cost_npoints; j++) {
            const hn_cost_point *q = &hn_cost_points[j];
            double rq;
            if (j == i || q->world != 2 || q->kind != p->kind || q->M != p->M || q->ratio >= p->ratio)
                continue;
            rq = predicted_ratio(q, q->p2p ? HN_VIA_P2P : HN_VIA_NCCL);
            if (!(rq < r))
                fprintf(stderr, "\n  %lld x %lld: %s (%.3f) should beat %s (%.3f)", (long long)p->M, (long long)p->K,
                        hn_strategy_name(p->strategy), r, hn_strategy_name(q->strategy), rq);
            CU_ASSERT(rq < r);
        }
    }
    /* the GEMM at a measured shape runs at the rate measured there (the
     * mean of the runs); between them, between their rates */
    {
        double f = 2.0 * 4096 * 8192 * 8192, t = hn_cost_gemm_seconds(NULL, f, HN_BF16);
        double mid = hn_cost_gemm_seconds(NULL, 2 * f, HN_BF16) / (2 * f);
        CU_ASSERT(fabs(f / t / 1e12 - (791 + 788) / 2.0) < 1e-6);
        CU_ASSERT(mid <= 1 / (755.5e12) + 1e-20 && mid >= 1 / (789.5e12) - 1e-20);
        CU_ASSERT(hn_cost_gemm_seconds(NULL, 1e12, HN_F32) > 10 * hn_cost_gemm_seconds(NULL, 1e12, HN_BF16));
    }
}

/* A copy of the built-in default, as a measured profile would be. */
static hn_cost_profile *measured_copy(void)
{
    hn_cost_profile *p = malloc(sizeof(*p));
    if (p != NULL) {
        *p = *hn_cost_builtin();
        p->builtin = 0;
    }
    return p;
}

/* auto picks what ran fastest on 2 H200s for the shapes (the ring
 * everywhere), keeps what the statement fixes, and says why it cannot. */
static void test_choose(void)
{
    static const long long shapes[][3] = {{32768, 16384, 8192}, {16384, 8192, 8192}, {4096, 8192, 8192}};
    int ag = HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE | HN_OPF_BROADCAST;
    int rs = HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE;
    char err[256];
    for (int k = 0; k < 3; k++)
        for (int op = 0; op < 2; op++) {
            hn_pipe_shape sh = shape_of(op ? HN_PIPE_MM_RS : HN_PIPE_AG_MM, shapes[k][0], shapes[k][1], shapes[k][2],
                                        HN_BF16, 2, NULL);
            hn_pipe_plan pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
            CU_ASSERT_EQUAL(hn_pipe_choose(&sh, op ? rs : ag, &pl, err, sizeof(err)), HN_OK);
            CU_ASSERT_EQUAL(pl.strategy, HN_STRAT_RING);
            CU_ASSERT_EQUAL(pl.chunks, 2);
            CU_ASSERT_EQUAL(pl.via, HN_VIA_P2P);
            CU_ASSERT_EQUAL(pl.protocol, HN_ALGO_PUSH); /* get ties with put where nothing measured it */
            CU_ASSERT(pl.streams >= 2);
        }
    for (int op = 0; op < 2; op++) {
        /* a decode-sized GEMM on 4 GPUs: nothing to hide the latency behind */
        hn_pipe_shape sh = shape_of(op ? HN_PIPE_MM_RS : HN_PIPE_AG_MM, 16, 4096, 4096, HN_BF16, 4, NULL);
        hn_pipe_plan pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
        CU_ASSERT_EQUAL(hn_pipe_choose(&sh, op ? rs : ag, &pl, err, sizeof(err)), HN_OK);
        CU_ASSERT_EQUAL(pl.strategy, HN_STRAT_SEQUENTIAL);
        CU_ASSERT_EQUAL(pl.streams, 1);
    }
    {
        /* fixed choices are kept, the free ones chosen */
        hn_pipe_shape sh = shape_of(HN_PIPE_AG_MM, 4096, 8192, 8192, HN_BF16, 4, NULL);
        hn_pipe_plan pl = plan_of(HN_STRAT_COLLECTIVE, 0, 3, HN_VIA_NCCL, HN_ALGO_AUTO);
        CU_ASSERT_EQUAL(hn_pipe_choose(&sh, ag, &pl, err, sizeof(err)), HN_OK);
        CU_ASSERT_EQUAL(pl.strategy, HN_STRAT_COLLECTIVE);
        CU_ASSERT_EQUAL(pl.streams, 3);
        CU_ASSERT_EQUAL(pl.via, HN_VIA_NCCL);
        CU_ASSERT(pl.chunks == 2 || pl.chunks == 4 || pl.chunks == 8);
        pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_PULL);
        CU_ASSERT_EQUAL(hn_pipe_choose(&sh, ag, &pl, err, sizeof(err)), HN_OK);
        CU_ASSERT_EQUAL(pl.via, HN_VIA_P2P); /* get pulls through p2p */
        CU_ASSERT_EQUAL(pl.protocol, HN_ALGO_PULL);
        pl = plan_of(HN_STRAT_RING, 3, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
        CU_ASSERT_EQUAL(hn_pipe_choose(&sh, ag, &pl, err, sizeof(err)), HN_ERR_VERIFY);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "chunks=3 must be world (4)"));
        pl = plan_of(HN_STRAT_BROADCAST, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
        CU_ASSERT_EQUAL(hn_pipe_choose(&sh, HN_OPF_SEQUENTIAL | HN_OPF_RING, &pl, err, sizeof(err)), HN_OK);
        CU_ASSERT_EQUAL(pl.strategy, HN_STRAT_BROADCAST); /* a fixed strategy is the statement's business */
    }
    {
        /* GEMM + allreduce by ring cuts the output in world blocks: rows
         * that do not divide are refused, and auto takes another way */
        hn_pipe_shape sh = shape_of(HN_PIPE_MM_AR, 16, 8, 8, HN_F32, 3, NULL);
        hn_pipe_plan pl = plan_of(HN_STRAT_RING, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
        CU_ASSERT_EQUAL(hn_pipe_choose(&sh, rs, &pl, err, sizeof(err)), HN_ERR_VERIFY);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "the 16 rows of the output do not divide"));
        for (int64_t m = 16; m <= 1 << 14; m *= 4) {
            sh.M = m + 1;
            pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
            CU_ASSERT_EQUAL(hn_pipe_choose(&sh, rs, &pl, err, sizeof(err)), HN_OK);
            CU_ASSERT_NOT_EQUAL(pl.strategy, HN_STRAT_RING);
        }
    }
}

/* GEMM + allreduce by ring: the allgather half through whatever moves the
 * reduced blocks fastest — copy engines for large ones, NCCL for small
 * ones — or what the statement names. */
static void test_allreduce_halves(void)
{
    int offered = HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE;
    char err[256];
    hn_pipe_shape big = shape_of(HN_PIPE_MM_AR, 32768, 16384, 8192, HN_BF16, 2, NULL); /* blocks: 512 MiB */
    hn_pipe_shape small = shape_of(HN_PIPE_MM_AR, 256, 8192, 1024, HN_BF16, 2, NULL);  /* 512 KiB */
    hn_pipe_plan pl = plan_of(HN_STRAT_RING, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO), q;
    double t_nccl, t_p2p;
    CU_ASSERT_EQUAL(hn_pipe_choose(&big, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(pl.via, HN_VIA_P2P);
    CU_ASSERT_EQUAL(pl.ag_via, HN_VIA_P2P);
    CU_ASSERT_EQUAL(pl.ag_protocol, HN_ALGO_PUSH);
    /* the plan's time is the ring's and the allgather's after it */
    q = pl;
    q.ag_via = HN_VIA_NCCL;
    q.ag_protocol = HN_ALGO_AUTO;
    t_p2p = hn_pipe_seconds(&big, &pl);
    t_nccl = hn_pipe_seconds(&big, &q);
    CU_ASSERT(fabs((t_nccl - t_p2p) - (1044.0 - 836.9) * 1e-6) < 1e-9); /* 512 MiB allgathers on 2 H200s */
    pl = plan_of(HN_STRAT_RING, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
    CU_ASSERT_EQUAL(hn_pipe_choose(&small, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(pl.ag_via, HN_VIA_NCCL);
    /* named: kept for both halves */
    pl = plan_of(HN_STRAT_RING, 0, 0, HN_VIA_P2P, HN_ALGO_AUTO);
    CU_ASSERT_EQUAL(hn_pipe_choose(&small, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(pl.ag_via, HN_VIA_P2P);
    /* auto's plan is never slower than the ring with the halves of one communicator */
    pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
    q = plan_of(HN_STRAT_RING, 2, 2, HN_VIA_P2P, HN_ALGO_PUSH);
    CU_ASSERT_EQUAL(hn_pipe_choose(&big, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT(pl.seconds <= hn_pipe_seconds(&big, &q) + 1e-12);
}

/* Small M: the latency path where its time is known and it may be picked
 * (by default, or HIRNODE_AUTO_LL=1, for the built-in curve of its first
 * design; a profile measured on this machine without it), never where not
 * (HIRNODE_AUTO_LL=0). */
static void test_latency_path_at_small_m(void)
{
    int offered = HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE;
    char err[256];
    hn_pipe_shape decode = shape_of(HN_PIPE_MM_AR, 16, 4096, 4096, HN_BF16, 2, NULL); /* 128 KiB */
    hn_pipe_plan pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
    hn_cost_profile *m = measured_copy();
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    setenv("HIRNODE_AUTO_LL", "0", 1);
    CU_ASSERT_EQUAL(hn_pipe_choose(&decode, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(pl.strategy, HN_STRAT_SEQUENTIAL);
    CU_ASSERT_EQUAL(pl.via, HN_VIA_NCCL);
    unsetenv("HIRNODE_AUTO_LL");
    pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
    CU_ASSERT_EQUAL(hn_pipe_choose(&decode, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(pl.strategy, HN_STRAT_SEQUENTIAL);
    CU_ASSERT_EQUAL(pl.via, HN_VIA_LL);
    CU_ASSERT(fabs(pl.seconds - hn_cost_gemm_seconds(NULL, 2.0 * 16 * 4096 * 4096, HN_BF16) - 11.16e-6 -
                   hn_cost_model.seq_overhead_s) < 1e-9);
    /* 4 ranks: no curve of it measured */
    decode.world = 4;
    pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
    CU_ASSERT_EQUAL(hn_pipe_choose(&decode, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_NOT_EQUAL(pl.via, HN_VIA_LL);
    /* integers: the latency path reduces floats only */
    decode.world = 2;
    decode.dtype = HN_I32;
    pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
    CU_ASSERT_EQUAL(hn_pipe_choose(&decode, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_NOT_EQUAL(pl.via, HN_VIA_LL);
    /* a statement that names its communicator keeps it */
    decode.dtype = HN_BF16;
    pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_NCCL, HN_ALGO_AUTO);
    CU_ASSERT_EQUAL(hn_pipe_choose(&decode, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(pl.via, HN_VIA_NCCL);
    unsetenv("HIRNODE_AUTO_LL");
    /* measured on this machine: picked without the switch */
    decode.prof = m;
    pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
    CU_ASSERT_EQUAL(hn_pipe_choose(&decode, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(pl.via, HN_VIA_LL);
    /* large: NCCL or the rings, never the latency path */
    decode.M = 32768;
    pl = plan_of(HN_STRAT_SEQUENTIAL, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
    CU_ASSERT_EQUAL(hn_pipe_choose(&decode, offered, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_NOT_EQUAL(pl.via, HN_VIA_LL);
    free(m);
}

/* The profile is what the model reads: other curves, other picks. */
static void test_profile_drives_the_model(void)
{
    int rs = HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE;
    char err[256];
    hn_cost_profile *m = measured_copy();
    hn_pipe_shape sh = shape_of(HN_PIPE_MM_RS, 4096, 8192, 8192, HN_BF16, 2, NULL);
    hn_pipe_plan pl = plan_of(HN_STRAT_AUTO, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO);
    const hn_cost_curve *put;
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    /* a pull ring measured faster than the push ring: get */
    put = hn_cost_curve_of(m, HN_COLL_REDUCE_SCATTER, HN_ENGINE_CE_PUT, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(put);
    CU_ASSERT_EQUAL(hn_cost_curve_of(m, HN_COLL_REDUCE_SCATTER, HN_ENGINE_CE_GET, 2), put); /* none: put's */
    m->curves[m->ncurves] = *put;
    m->curves[m->ncurves].engine = HN_ENGINE_CE_GET;
    for (int i = 0; i < put->npoints; i++)
        m->curves[m->ncurves].us[i] = put->us[i] / 4;
    m->ncurves++;
    sh.prof = m;
    CU_ASSERT_EQUAL(hn_pipe_choose(&sh, rs, &pl, err, sizeof(err)), HN_OK);
    CU_ASSERT_EQUAL(pl.strategy, HN_STRAT_RING);
    CU_ASSERT_EQUAL(pl.protocol, HN_ALGO_PULL);
    /* the pipelines' GEMM alone ran slower than the rates measured first
     * (a GPU that has run for a while holds lower clocks): 90 % at 4096 x
     * 8192 x 8192, 80 % at 16384 x 8192 x 8192, 95 % at 32768 x 16384 x
     * 8192. The model's GEMM keeps that pace at each shape, log-log
     * between them (8192^3, halfway in log flop: sqrt(0.9 x 0.8)), flat
     * beyond them, for f16 (its rates measured) as for bf16; f32, which no
     * pipeline ran, keeps its rates; without pipelines, the rates as
     * measured */
    {
        hn_cost_profile *w = measured_copy();
        const double at[] = {2.0 * 4096 * 8192 * 8192, 2.0 * 8192 * 8192 * 8192, 2.0 * 16384 * 8192 * 8192,
                             2.0 * 32768 * 16384 * 8192, 2.0 * 1024 * 8192 * 8192, 1e14};
        const double pace[] = {0.9, sqrt(0.9 * 0.8), 0.8, 0.95, 0.9, 0.95};
        double t[6], t16[6], t32;
        int ng;
        CU_ASSERT_PTR_NOT_NULL_FATAL(w);
        ng = w->ngemm;
        for (int i = 0; i < ng && w->ngemm < HN_COST_MAX_PIPES; i++) /* f16 rates measured as tune would */
            if (w->gemm[i].dtype == HN_BF16) {
                w->gemm[w->ngemm] = w->gemm[i];
                w->gemm[w->ngemm++].dtype = HN_F16;
            }
        for (int i = 0; i < 6; i++) {
            t[i] = hn_cost_gemm_seconds(w, at[i], HN_BF16);
            t16[i] = hn_cost_gemm_seconds(w, at[i], HN_F16);
        }
        t32 = hn_cost_gemm_seconds(w, at[0], HN_F32);
        for (int i = 0; i < w->npipes; i++)
            w->pipes[i].gemm_tflops *= w->pipes[i].M == 4096 ? 0.9 : w->pipes[i].M == 16384 ? 0.8 : 0.95;
        for (int i = 0; i < 6; i++) {
            double b = hn_cost_gemm_seconds(w, at[i], HN_BF16), h = hn_cost_gemm_seconds(w, at[i], HN_F16);
            if (fabs(b * pace[i] / t[i] - 1) > 1e-9 || fabs(h * pace[i] / t16[i] - 1) > 1e-9)
                fprintf(stderr, "\n  at %g flop: pace %.6f (bf16), %.6f (f16), expected %.6f", at[i], t[i] / b,
                        t16[i] / h, pace[i]);
            CU_ASSERT(fabs(b * pace[i] / t[i] - 1) < 1e-9);
            CU_ASSERT(fabs(h * pace[i] / t16[i] - 1) < 1e-9);
        }
        CU_ASSERT_EQUAL(hn_cost_gemm_seconds(w, at[0], HN_F32), t32);
        w->npipes = 0;
        CU_ASSERT(fabs(hn_cost_gemm_seconds(w, at[0], HN_BF16) / t[0] - 1) < 1e-9);
        free(w);
    }
    /* a GEMM ten times slower hides more: the same time for the
     * communication, a larger share of it hidden */
    {
        hn_pipe_plan q = plan_of(HN_STRAT_SEQUENTIAL, 1, 1, HN_VIA_NCCL, HN_ALGO_AUTO);
        double before = hn_pipe_seconds(&sh, &q);
        for (int i = 0; i < m->ngemm; i++)
            m->gemm[i].tflops /= 10;
        for (int i = 0; i < m->npipes; i++) /* (the pipelines' GEMM alone too, or it says the rates' pace) */
            m->pipes[i].gemm_tflops /= 10;
        CU_ASSERT(hn_pipe_seconds(&sh, &q) > 5 * before);
    }
    /* curves of other team sizes: the nearest, ties to the larger */
    CU_ASSERT_EQUAL(hn_cost_curve_of(m, HN_COLL_ALLGATHER, HN_ENGINE_NCCL, 3)->n, 4);
    CU_ASSERT_EQUAL(hn_cost_curve_of(m, HN_COLL_ALLGATHER, HN_ENGINE_NCCL, 8)->n, 4);
    CU_ASSERT_PTR_NULL(hn_cost_curve_of(m, HN_COLL_ALLGATHER, HN_ENGINE_LL, 2) == NULL ? NULL : NULL);
    CU_ASSERT(hn_cost_coll_seconds(m, HN_COLL_ALLREDUCE, HN_ENGINE_LL, 4, 1e5) > 0); /* the nearest: 2's */
    m->ncurves = 0; /* a profile without curves: the default's, never the latency path */
    CU_ASSERT(fabs(hn_cost_coll_seconds(m, HN_COLL_ALLGATHER, HN_ENGINE_NCCL, 2, 1024 * 1048576.0) - 1994.7e-6) <
              1e-12);
    CU_ASSERT(hn_cost_coll_seconds(m, HN_COLL_ALLREDUCE, HN_ENGINE_LL, 2, 1e5) < 0);
    /* beyond the last size: in proportion; below the first: flat */
    CU_ASSERT(fabs(hn_cost_coll_seconds(NULL, HN_COLL_ALLGATHER, HN_ENGINE_NCCL, 2, 2048 * 1048576.0) - 2 * 1994.7e-6) <
              1e-12);
    CU_ASSERT(fabs(hn_cost_coll_seconds(NULL, HN_COLL_ALLGATHER, HN_ENGINE_NCCL, 2, 1000) - 11.04e-6) < 1e-12);
    free(m);
}

static void test_via_resolve(void)
{
    /* the measured crossovers, and their growth beyond 4 ranks */
    CU_ASSERT_EQUAL(hn_cost_crossover(HN_COLL_ALLGATHER, 2), (size_t)8 << 20);
    CU_ASSERT_EQUAL(hn_cost_crossover(HN_COLL_REDUCE_SCATTER, 2), (size_t)16 << 20);
    CU_ASSERT_EQUAL(hn_cost_crossover(HN_COLL_ALLREDUCE, 2), (size_t)64 << 20);
    CU_ASSERT_EQUAL(hn_cost_crossover(HN_COLL_ALLGATHER, 3), (size_t)64 << 20);
    CU_ASSERT_EQUAL(hn_cost_crossover(HN_COLL_REDUCE_SCATTER, 4), (size_t)128 << 20);
    CU_ASSERT_EQUAL(hn_cost_crossover(HN_COLL_ALLGATHER, 8), (size_t)512 << 20);
    CU_ASSERT_EQUAL(hn_cost_crossover(HN_COLL_BROADCAST, 2), SIZE_MAX);
    CU_ASSERT_EQUAL(hn_cost_crossover(HN_COLL_ALLGATHER, 1), SIZE_MAX);
    /* teams of 2 to 4, the measured tables (sizes: allreduce buffer,
     * allgather output, reduce_scatter input; allgather's count per
     * member), eagerly (0) and in graphs (1) */
    unsetenv("HIRNODE_AUTO_LL");
    CU_ASSERT_EQUAL(hn_auto_picks_ll(), hn_cost_ll_measured);
    CU_ASSERT_TRUE(hn_cost_ll_measured);
    for (int g = 0; g < 2; g++) {
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLREDUCE, 4096, HN_BF16, 2), HN_VIA_LL);
        CU_ASSERT_EQUAL(hn_via_ll_algo(g, HN_COLL_ALLREDUCE, 4096, HN_BF16, 2), HN_ALGO_ONESHOT);
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLREDUCE, 1 << 20, HN_BF16, 2), HN_VIA_LL);
        CU_ASSERT_EQUAL(hn_via_ll_algo(g, HN_COLL_ALLREDUCE, 1 << 20, HN_BF16, 2), HN_ALGO_TWOSHOT); /* 2 MiB */
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLREDUCE, 16 << 20, HN_BF16, 2), HN_VIA_NCCL);
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLREDUCE, 128 << 20, HN_BF16, 2), HN_VIA_P2P);
        /* a buffer the rings cannot split in n stays on NCCL; 3 ranks take 4's table */
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLREDUCE, (128 << 20) + 1, HN_BF16, 2),
                        HN_VIA_NCCL);
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLREDUCE, 1001, HN_F32, 3), HN_VIA_LL);
        CU_ASSERT_EQUAL(hn_via_ll_algo(g, HN_COLL_ALLREDUCE, 1 << 20, HN_BF16, 4), HN_ALGO_TWOSHOT);
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLREDUCE, 8 << 20, HN_BF16, 4), HN_VIA_NCCL);
        /* the latency path only where it serves the call: floats for reductions */
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLREDUCE, 4096, HN_I32, 2), HN_VIA_NCCL);
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLGATHER, 64 << 10, HN_I32, 2), HN_VIA_LL);
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLGATHER, 4 << 20, HN_BF16, 2), HN_VIA_P2P);
        CU_ASSERT_EQUAL(hn_via_ll_algo(g, HN_COLL_ALLGATHER, 1 << 20, HN_BF16, 2), HN_ALGO_ONESHOT);
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_BROADCAST, 1 << 30, HN_F32, 2), HN_VIA_NCCL);
        CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, g, HN_COLL_ALLREDUCE, 1000, HN_F32, 1), HN_VIA_NCCL);
    }
    /* where eager calls and graphs differ: the rings from 128 MiB eagerly,
     * NCCL in graphs up to 256 MiB (2 ranks); the latency path's
     * reduce_scatter eagerly, NCCL's in graphs */
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, 0, HN_COLL_ALLREDUCE, 64 << 20, HN_BF16, 2), HN_VIA_P2P);
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 64 << 20, HN_BF16, 2), HN_VIA_NCCL);
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, 0, HN_COLL_REDUCE_SCATTER, 4096, HN_BF16, 2), HN_VIA_LL);
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, 1, HN_COLL_REDUCE_SCATTER, 4096, HN_BF16, 2), HN_VIA_NCCL);
    /* default resolves like auto only where the backend says so; any other via is kept */
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_DEFAULT, 0, 0, HN_COLL_ALLREDUCE, 1000, HN_F32, 2), HN_VIA_DEFAULT);
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_DEFAULT, 1, 0, HN_COLL_ALLREDUCE, 1000, HN_F32, 2), HN_VIA_LL);
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_NCCL, 1, 0, HN_COLL_ALLGATHER, 2 << 20, HN_BF16, 2), HN_VIA_NCCL);
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_LL, 0, 0, HN_COLL_ALLREDUCE, 1 << 30, HN_F32, 2), HN_VIA_LL);
    /* the fused norm's own: one-shot below 768 KiB at 2 and 4 ranks (the
     * plain allreduce goes two-shot from 181 KiB in graphs at 4) */
    CU_ASSERT_EQUAL(hn_via_ll_norm_algo(512 << 10, 4), HN_ALGO_ONESHOT);
    CU_ASSERT_EQUAL(hn_via_ll_algo(1, HN_COLL_ALLREDUCE, 256 << 10, HN_BF16, 4), HN_ALGO_TWOSHOT);
    CU_ASSERT_EQUAL(hn_via_ll_norm_algo(768 << 10, 2), HN_ALGO_TWOSHOT);
    /* teams of 5 to 8: the estimates (the latency path below them, the
     * rings from their crossover, grown beyond 4 ranks) */
    CU_ASSERT_EQUAL(hn_cost_ll_crossover(HN_COLL_ALLREDUCE, 8, 0), (size_t)1 << 20);
    CU_ASSERT_EQUAL(hn_cost_ll_crossover(HN_COLL_ALLREDUCE, 8, 1), (size_t)256 << 10);
    CU_ASSERT_EQUAL(hn_cost_ll_crossover(HN_COLL_ALLGATHER, 8, 0), (size_t)128 << 10);
    CU_ASSERT_EQUAL(hn_cost_ll_crossover(HN_COLL_ALLREDUCE, 2, 0), 0);
    CU_ASSERT_EQUAL(hn_cost_ll_crossover(HN_COLL_ALLREDUCE, 9, 0), 0);
    CU_ASSERT_EQUAL(hn_via_ll_algo(0, HN_COLL_ALLREDUCE, 128 << 10, HN_BF16, 8), HN_ALGO_TWOSHOT); /* 256 KiB */
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, 0, HN_COLL_ALLGATHER, 8192, HN_F32, 8), HN_VIA_NCCL); /* 256 KiB */
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, 0, HN_COLL_REDUCE_SCATTER, 2048, HN_F32, 8), HN_VIA_LL);
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, 0, HN_COLL_ALLREDUCE, 1000, HN_F32, 9), HN_VIA_NCCL);
    /* the setting: 1 on, 0 off, auto (the default) as the switch of cost.c says */
    CU_ASSERT_TRUE(hn_auto_ll_on("1", 0));
    CU_ASSERT_TRUE(hn_auto_ll_on("1", 1));
    CU_ASSERT_FALSE(hn_auto_ll_on("0", 1));
    CU_ASSERT_FALSE(hn_auto_ll_on("auto", 0));
    CU_ASSERT_TRUE(hn_auto_ll_on("auto", 1));
    CU_ASSERT_EQUAL(hn_auto_ll_on(NULL, 1), 1);
    /* off: NCCL or the rings only, wherever the tables say the latency path */
    setenv("HIRNODE_AUTO_LL", "0", 1);
    CU_ASSERT_FALSE(hn_auto_picks_ll());
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 16384, HN_BF16, 2), HN_VIA_NCCL);
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_DEFAULT, 1, 0, HN_COLL_ALLGATHER, 1000, HN_F32, 2), HN_VIA_NCCL);
    /* every size, team and kind: the rings only where the buffer splits
     * (allreduce); the latency path never when off, and only for what it serves */
    for (int on = 0; on < 2; on++) {
        static const hn_coll_kind kinds[] = {HN_COLL_ALLREDUCE, HN_COLL_ALLGATHER, HN_COLL_REDUCE_SCATTER};
        setenv("HIRNODE_AUTO_LL", on ? "1" : "0", 1);
        for (int k = 0; k < 3; k++)
            for (int n = 2; n <= 8; n++)
                for (int g = 0; g < 2; g++)
                    for (size_t bytes = 1024; bytes <= ((size_t)1 << 31); bytes *= 2) {
                        size_t count = kinds[k] == HN_COLL_ALLREDUCE ? bytes / 2 + 1 : bytes / 2 / (size_t)n;
                        hn_via v = hn_via_resolve(HN_VIA_AUTO, 0, g, kinds[k], count, HN_BF16, n);
                        CU_ASSERT(v == HN_VIA_NCCL || v == HN_VIA_P2P || v == HN_VIA_LL);
                        CU_ASSERT(!(kinds[k] == HN_COLL_ALLREDUCE && v == HN_VIA_P2P && count % (size_t)n != 0));
                        CU_ASSERT(on || v != HN_VIA_LL);
                        CU_ASSERT(v != HN_VIA_LL || bytes < ((size_t)32 << 20)); /* never a huge slot */
                    }
    }
    unsetenv("HIRNODE_AUTO_LL");
    {
        hn_device_ops picks = hn_device_host; /* a table that says its default picks (as CUDA's does) */
        picks.default_via_auto = 1;
        CU_ASSERT_FALSE(hn_default_via_auto(&hn_device_host));
        CU_ASSERT_TRUE(hn_default_via_auto(&picks));
#ifdef HN_HAVE_CUDA
        CU_ASSERT_TRUE(hn_default_via_auto(&hn_device_cuda));
#endif
        setenv("HIRNODE_DEFAULT_VIA", "nccl", 1);
        CU_ASSERT_FALSE(hn_default_via_auto(&picks));
#ifdef HN_HAVE_CUDA
        CU_ASSERT_FALSE(hn_default_via_auto(&hn_device_cuda));
#endif
        unsetenv("HIRNODE_DEFAULT_VIA");
    }
}

/* The chunk counts a message says would fit ("...; chunks=2 or chunks=4
 * would fit"), into fit; how many. */
static int suggested(const char *err, int *fit)
{
    const char *p = strrchr(err, ';');
    int n = 0;
    if (p == NULL || strstr(p, "would fit") == NULL)
        return 0;
    while ((p = strstr(p, "chunks=")) != NULL && n < 3)
        fit[n++] = atoi(p += 7);
    return n;
}

/* hn_pipe_choose refuses plan for sh with exactly `want`, the plan left alone. */
static void expect_unfit(hn_pipe_shape sh, int offered, hn_pipe_plan pl, const char *want)
{
    hn_pipe_plan before = pl;
    char err[1024];
    CU_ASSERT_EQUAL(hn_pipe_choose(&sh, offered, &pl, err, sizeof(err)), HN_ERR_VERIFY);
    if (strcmp(err, want) != 0)
        fprintf(stderr, "\n  want: %s\n  got:  %s", want, err);
    CU_ASSERT_STRING_EQUAL(err, want);
    CU_ASSERT_EQUAL(memcmp(&pl, &before, sizeof(pl)), 0);
}

/* What an `auto` that finds nothing says: every strategy it tried and
 * why, the chunk counts that would fit (each checked); a fixed strategy
 * with free chunks says which it tried; a reason of no strategy's alone. */
static void test_choose_failures(void)
{
    int ag = HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE | HN_OPF_BROADCAST;
    int rs = HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE;
    hn_pipe_shape ag64 = {HN_PIPE_AG_MM, 64, 128, 64, HN_BF16, 2, NULL};
    char err[1024];
    int fit[3];
    uint64_t rng = 0xc0575;
    expect_unfit(ag64, ag, (hn_pipe_plan){HN_STRAT_AUTO, 3, 0, HN_VIA_AUTO, HN_ALGO_AUTO, 0, HN_VIA_AUTO, HN_ALGO_AUTO},
                 "strategy=auto finds no strategy for chunks=3: sequential runs in one step, chunks=3 must be 1; "
                 "ring moves one shard per step, chunks=3 must be world (2); collective: chunks=3 does not divide "
                 "the 32 rows of each rank's shard of A; broadcast takes chunks from each rank in turn, chunks=3 is "
                 "not a multiple of world (2); chunks=2 or chunks=4 would fit");
    /* only the strategies the statement offers */
    expect_unfit((hn_pipe_shape){HN_PIPE_MM_RS, 40, 64, 16, HN_F32, 4, NULL}, rs,
                 (hn_pipe_plan){HN_STRAT_AUTO, 3, 0, HN_VIA_AUTO, HN_ALGO_AUTO, 0, HN_VIA_AUTO, HN_ALGO_AUTO},
                 "strategy=auto finds no strategy for chunks=3: sequential runs in one step, chunks=3 must be 1; "
                 "ring moves one shard per step, chunks=3 must be world (4); collective: chunks=3 does not divide "
                 "the 10 rows of each rank's block of the output; chunks=2 or chunks=4 would fit");
    /* a fixed strategy, free chunks: what auto tried for it */
    expect_unfit((hn_pipe_shape){HN_PIPE_AG_MM, 14, 128, 64, HN_BF16, 2, NULL}, ag,
                 (hn_pipe_plan){HN_STRAT_COLLECTIVE, 0, 0, HN_VIA_AUTO, HN_ALGO_AUTO, 0, HN_VIA_AUTO, HN_ALGO_AUTO},
                 "strategy=collective with the chunks auto tries (2, 4 and 8): chunks=2 does not divide the 7 rows "
                 "of each rank's shard of A; chunks=1 or chunks=7 would fit");
    /* no strategy's business: said alone */
    expect_unfit(ag64, ag, (hn_pipe_plan){HN_STRAT_AUTO, 0, 0, HN_VIA_NCCL, HN_ALGO_PULL, 0, HN_VIA_AUTO, HN_ALGO_AUTO},
                 "protocol=get pulls through p2p, not via=nccl");
    expect_unfit(ag64, ag, (hn_pipe_plan){HN_STRAT_AUTO, 4, 17, HN_VIA_AUTO, HN_ALGO_AUTO, 0, HN_VIA_AUTO, HN_ALGO_AUTO},
                 "streams=17 out of range [1, 16]");
    /* random shapes and chunks: what is said to fit fits, and nothing
     * between the nearest below and above does */
    for (int t = 0; t < 2000; t++) {
        int world = 1 + (int)(hn_splitmix64(&rng) % 8), kind = (int)(hn_splitmix64(&rng) % 6);
        int64_t M = world * (1 + (int64_t)(hn_splitmix64(&rng) % 40));
        hn_pipe_shape sh = {(hn_pipe_kind)kind, M, kind < 3 ? 64 : 1, kind < 3 ? 32 : 1, HN_BF16, world, NULL};
        int offered = kind == HN_PIPE_AG_MM || kind == HN_PIPE_AG ? ag : rs;
        hn_pipe_plan pl = {HN_STRAT_AUTO, 1 + (int)(hn_splitmix64(&rng) % 24), 0, HN_VIA_AUTO, HN_ALGO_AUTO, 0, HN_VIA_AUTO, HN_ALGO_AUTO};
        int n;
        if (kind == HN_PIPE_AG) /* a plain allgather: no ring */
            offered = HN_OPF_SEQUENTIAL | HN_OPF_COLLECTIVE | HN_OPF_BROADCAST;
        if (hn_pipe_choose(&sh, offered, &pl, err, sizeof(err)) == HN_OK)
            continue;
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "strategy=auto finds no strategy for chunks="));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "sequential runs in one step"));
        n = suggested(err, fit);
        for (int i = 0; i < n; i++) {
            hn_pipe_plan q = {HN_STRAT_AUTO, fit[i], 0, HN_VIA_AUTO, HN_ALGO_AUTO, 0, HN_VIA_AUTO, HN_ALGO_AUTO};
            CU_ASSERT_EQUAL(hn_pipe_choose(&sh, offered, &q, err, sizeof(err)), HN_OK);
        }
        for (int c = n > 0 ? fit[0] + 1 : 1; n == 2 && c < fit[1]; c++) {
            hn_pipe_plan q = {HN_STRAT_AUTO, c, 0, HN_VIA_AUTO, HN_ALGO_AUTO, 0, HN_VIA_AUTO, HN_ALGO_AUTO};
            CU_ASSERT_EQUAL(hn_pipe_choose(&sh, offered, &q, err, sizeof(err)), HN_ERR_VERIFY);
        }
    }
}

/* `via auto` through the dry run (every rank records the same choice)
 * and a run on the test backend: an 8 MiB allgather on 2 ranks goes p2p,
 * a 4 MiB one NCCL (the host communicator here); both exact. */
/* A tuned profile's curves decide `via auto` where they cover the team
 * size and the mode: the fastest of the latency path (within the sizes it
 * was measured at), NCCL and the rings; without an NCCL curve and one
 * other, or for the built-in default, the tables decide. */
static void test_via_auto_from_profile(void)
{
    hn_cost_profile *p = calloc(1, sizeof(*p));
    /* 2 ranks, allreduce, in graphs: the latency path 3 µs up to 64 KiB,
     * NCCL 10 µs flat, the rings 40 µs then faster than NCCL from 64 MiB */
    const hn_cost_curve ll = {HN_COLL_ALLREDUCE, HN_ENGINE_LL, 2, 2, {8192, 65536}, {3, 4}, 1};
    const hn_cost_curve nccl = {HN_COLL_ALLREDUCE, HN_ENGINE_NCCL, 2, 3, {8192, 1 << 20, 64 << 20}, {10, 20, 400}, 1};
    const hn_cost_curve rings = {HN_COLL_ALLREDUCE, HN_ENGINE_CE_PUT, 2, 3, {8192, 1 << 20, 64 << 20}, {40, 50, 300}, 1};
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    unsetenv("HIRNODE_AUTO_LL");
    p->curves[p->ncurves++] = ll;
    p->curves[p->ncurves++] = nccl;
    p->curves[p->ncurves++] = rings;
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 4096, HN_BF16, 2), HN_VIA_LL);
    /* 512 KiB: beyond the latency path's measured sizes (the table would say ll) */
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 256 << 10, HN_BF16, 2), HN_VIA_NCCL);
    CU_ASSERT_EQUAL(hn_via_resolve(HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 256 << 10, HN_BF16, 2), HN_VIA_LL);
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 32 << 20, HN_BF16, 2), HN_VIA_P2P);
    /* ... but not where the rings cannot split the buffer, nor a kept via, nor a dtype ll refuses */
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, (32 << 20) + 1, HN_BF16, 2),
                    HN_VIA_NCCL);
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_P2P, 0, 1, HN_COLL_ALLREDUCE, 4096, HN_BF16, 2), HN_VIA_P2P);
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 4096, HN_I32, 2), HN_VIA_NCCL);
    setenv("HIRNODE_AUTO_LL", "0", 1);
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 4096, HN_BF16, 2), HN_VIA_NCCL);
    unsetenv("HIRNODE_AUTO_LL");
    /* eagerly, other team sizes, other kinds: no curves of theirs, the tables */
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 0, HN_COLL_ALLREDUCE, 32 << 20, HN_BF16, 2),
                    hn_via_resolve(HN_VIA_AUTO, 0, 0, HN_COLL_ALLREDUCE, 32 << 20, HN_BF16, 2));
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 32 << 20, HN_BF16, 4),
                    hn_via_resolve(HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 32 << 20, HN_BF16, 4));
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLGATHER, 32 << 20, HN_BF16, 2),
                    hn_via_resolve(HN_VIA_AUTO, 0, 1, HN_COLL_ALLGATHER, 32 << 20, HN_BF16, 2));
    /* NCCL alone weighs nothing; the built-in default is the tables' */
    p->ncurves = 0;
    p->curves[p->ncurves++] = nccl;
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 256 << 10, HN_BF16, 2), HN_VIA_LL);
    p->curves[p->ncurves++] = rings;
    p->builtin = 1;
    CU_ASSERT_EQUAL(hn_via_resolve_prof(p, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 32 << 20, HN_BF16, 2),
                    hn_via_resolve(HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 32 << 20, HN_BF16, 2));
    CU_ASSERT_EQUAL(hn_via_resolve_prof(NULL, HN_VIA_AUTO, 0, 1, HN_COLL_ALLREDUCE, 4096, HN_BF16, 2), HN_VIA_LL);
    free(p);
}

static void test_via_auto_runs(void)
{
    const char *text = "param N = 1024 * 1024\n"
                       "input X : f32[N] replicated\noutput Y : f32[2 * N] replicated\n"
                       "output Z : f32[N] replicated\n"
                       "Xs = view X as [2, N / 2]\nZs = view Z as [N / 2, 2]\n"
                       "allgather Y <- X via auto\n"
                       "allgather Zs <- Xs[rank] via auto\n"
                       "W = alloc f32[3000]\nallreduce W <- W op sum via auto\n"
                       "allreduce W <- W op sum via ll\nallreduce W <- W op sum via ll twoshot\n";
    hn_program *p = hn_test_parse(text, NULL);
    hn_comm_log logs[2];
    int64_t params[1] = {1024 * 1024};
    hn_strbuf sb;
    char *why = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (hn_test_max_ranks() < 2) {
        hn_program_destroy(p);
        return;
    }
    setenv("HIRNODE_AUTO_LL", "1", 1); /* the latency path's crossovers too */
    memset(logs, 0, sizeof(logs));
    hn_sb_init(&sb);
    CU_ASSERT_EQUAL(hn_verify_run(p, 2, 3, params, &sb, logs), HN_OK);
    if (sb.data != NULL)
        fprintf(stderr, "\n%s", sb.data);
    for (int r = 0; r < 2; r++) {
        CU_ASSERT_EQUAL_FATAL(logs[r].n, 5);
        CU_ASSERT_EQUAL(logs[r].recs[0].via, HN_VIA_P2P);  /* 8 MiB gathered */
        CU_ASSERT_EQUAL(logs[r].recs[1].via, HN_VIA_LL); /* 4 MiB gathered: the latency path (2 ranks) */
        /* 12 KB reduced: the latency path, one-shot as the cost model says */
        CU_ASSERT_EQUAL(logs[r].recs[2].via, HN_VIA_LL);
        CU_ASSERT_EQUAL(logs[r].recs[2].algo, HN_ALGO_ONESHOT);
        CU_ASSERT_EQUAL(logs[r].recs[3].via, HN_VIA_LL);
        CU_ASSERT_EQUAL(logs[r].recs[3].algo, HN_ALGO_ONESHOT);
        CU_ASSERT_EQUAL(logs[r].recs[4].algo, HN_ALGO_TWOSHOT);
    }
    for (int i = 0; i < 2; i++) {
        hn_free(logs[i].recs);
        hn_free(logs[i].teams);
        hn_free(logs[i].allocs);
        hn_free(logs[i].pipes);
    }
    hn_sb_free(&sb);
    hn_program_destroy(p);
    {
        /* the run: the reference gathers rows of the global X */
        hn_runtime_config cfg;
        hn_runtime *rt = NULL;
        hn_check_opts o;
        hn_check_result res;
        hn_program *q = hn_test_parse("param N = 1024 * 1024\ninput X : f32[N] shard(axis 0)\n"
                                      "output Y : f32[2 * N] replicated\nallgather Y <- X via auto\n"
                                      "reference {\n  copy Y <- X\n}\n", NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(q);
        hn_runtime_config_default(&cfg);
        cfg.ndev = 2;
        cfg.backend = hn_test_backend;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
        memset(&o, 0, sizeof(o));
        o.iters = 2;
        o.check = 1;
        hn_sb_init(&sb);
        CU_ASSERT_EQUAL(hn_check_run(rt, q, &o, &res, &sb), HN_OK);
        CU_ASSERT_TRUE(res.passed);
        hn_sb_free(&sb);
        hn_runtime_destroy(rt);
        hn_program_destroy(q);
    }
    unsetenv("HIRNODE_AUTO_LL");
    free(why);
}

/* Across the latency path's two-shot crossover (362 KiB at 4 ranks): an
 * allreduce via ll below it runs one-shot, above it two-shot — the dry run
 * records which, on every rank — and both agree with the reference
 * through the check driver (random inputs), in place and not. */
static void test_ll_crossover_runs(void)
{
    static const int64_t sizes[2] = {40000, 140000}; /* f32: 160 KB and 560 KB */
    const char *text = "param N = 1024\ninput X : f32[1, N] shard(axis 0)\noutput S : f32[N] replicated\n"
                       "output T : f32[N] replicated\nXl = view X as [N]\nallreduce S <- Xl op sum via ll\n"
                       "copy T <- Xl\nallreduce T <- T op max via ll\n"
                       "reference {\n  sum S <- X, 0\n  copy T <- X[0]\n  for r in 1 .. world {\n"
                       "    maximum T <- T, X[r]\n  }\n}\n";
    hn_program *p = hn_test_parse(text, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (hn_test_max_ranks() < 4) {
        hn_program_destroy(p);
        return;
    }
    for (int k = 0; k < 2; k++) {
        hn_comm_log logs[4];
        hn_strbuf sb;
        int64_t params[1] = {sizes[k]};
        const char *names[1] = {"N"};
        hn_runtime_config cfg;
        hn_runtime *rt = NULL;
        hn_check_opts o;
        hn_check_result res;
        memset(logs, 0, sizeof(logs));
        hn_sb_init(&sb);
        CU_ASSERT_EQUAL(hn_verify_run(p, 4, 3, params, &sb, logs), HN_OK);
        for (int r = 0; r < 4; r++) {
            CU_ASSERT_EQUAL_FATAL(logs[r].n, 2);
            for (int i = 0; i < 2; i++) {
                CU_ASSERT_EQUAL(logs[r].recs[i].via, HN_VIA_LL);
                CU_ASSERT_EQUAL(logs[r].recs[i].algo, k == 0 ? HN_ALGO_ONESHOT : HN_ALGO_TWOSHOT);
            }
            hn_free(logs[r].recs);
            hn_free(logs[r].teams);
            hn_free(logs[r].allocs);
            hn_free(logs[r].pipes);
        }
        hn_sb_free(&sb);
        hn_runtime_config_default(&cfg);
        cfg.ndev = 4;
        cfg.backend = hn_test_backend;
        cfg.host_delay_us = 20;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
        memset(&o, 0, sizeof(o));
        o.iters = 2;
        o.check = 1;
        o.noverrides = 1;
        o.names = names;
        o.values = &sizes[k];
        hn_sb_init(&sb);
        CU_ASSERT_EQUAL(hn_check_run(rt, p, &o, &res, &sb), HN_OK);
        if (!res.passed)
            fprintf(stderr, "\n  N = %lld: %s\n", (long long)sizes[k], sb.data ? sb.data : "");
        CU_ASSERT_TRUE(res.passed);
        CU_ASSERT_EQUAL(res.left, 0);
        hn_sb_free(&sb);
        hn_runtime_destroy(rt);
    }
    hn_program_destroy(p);
}

/* Across nodes: the hierarchical allreduce where the network's bytes
 * outweigh the node's two extra collectives (large), one call where the
 * latency does (small); never with one rank a node or one node. */
/* A GEMM in chunks on streams: the profile's splits by shape, and the
 * pipelines' GEMM as the plan runs it where there are (no chunk and
 * stream terms on top). */
static void test_splits(void)
{
    hn_cost_profile *p = malloc(sizeof(*p));
    const double lg = log2(1.5);
    hn_pipe_shape sh = {HN_PIPE_MM_RS, 16384, 8192, 8192, HN_BF16, 2, NULL};
    hn_pipe_plan pl;
    double whole, plain, split;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    *p = *hn_cost_builtin();
    p->builtin = 0;
    p->coef.chunk_s = 5e-6;
    p->coef.stream_s = 7e-6;
    CU_ASSERT_EQUAL(hn_cost_split_ratio(p, 4096, 8192, 8192, 4, 2), 0); /* none measured */
    p->splits[p->nsplits++] = (hn_cost_split_point){4096, 8192, 8192, 2, 1, 1.02};
    p->splits[p->nsplits++] = (hn_cost_split_point){4096, 8192, 8192, 4, 1, 1.05};
    p->splits[p->nsplits++] = (hn_cost_split_point){4096, 8192, 8192, 2, 2, 1.04};
    p->splits[p->nsplits++] = (hn_cost_split_point){4096, 8192, 8192, 4, 2, 1.08};
    p->splits[p->nsplits++] = (hn_cost_split_point){16384, 8192, 8192, 2, 1, 1.01};
    p->splits[p->nsplits++] = (hn_cost_split_point){16384, 8192, 8192, 4, 1, 1.02};
    p->splits[p->nsplits++] = (hn_cost_split_point){16384, 8192, 8192, 2, 2, 1.015};
    p->splits[p->nsplits++] = (hn_cost_split_point){16384, 8192, 8192, 4, 2, 1.03};
    /* at a measured shape: one chunk is the whole; between counts linear in log2; beyond, the nearest */
    CU_ASSERT_EQUAL(hn_cost_split_ratio(p, 4096, 8192, 8192, 1, 1), 1);
    CU_ASSERT_EQUAL(hn_cost_split_ratio(p, 4096, 8192, 8192, 2, 1), 1.02);
    CU_ASSERT_EQUAL(hn_cost_split_ratio(p, 4096, 8192, 8192, 4, 2), 1.08);
    CU_ASSERT_EQUAL(hn_cost_split_ratio(p, 4096, 8192, 8192, 4, 3), 1.08); /* 2 streams and more alike */
    CU_ASSERT(fabs(hn_cost_split_ratio(p, 4096, 8192, 8192, 3, 1) - (1.02 + 0.03 * lg)) < 1e-12);
    CU_ASSERT(fabs(hn_cost_split_ratio(p, 4096, 8192, 8192, 8, 2) - 1.08) < 1e-12);
    CU_ASSERT(fabs(hn_cost_split_ratio(p, 4096, 8192, 8192, 2, 2) - 1.04) < 1e-12);
    /* between shapes by flop (8192 rows: half way in log), beyond them the nearest */
    CU_ASSERT(fabs(hn_cost_split_ratio(p, 8192, 8192, 8192, 4, 2) - (1.08 + 1.03) / 2) < 1e-12);
    CU_ASSERT(fabs(hn_cost_split_ratio(p, 1024, 8192, 8192, 2, 1) - 1.02) < 1e-12);
    CU_ASSERT(fabs(hn_cost_split_ratio(p, 65536, 8192, 8192, 2, 1) - 1.01) < 1e-12);
    /* the model: a plan's GEMM is the whole times its split, compute-bound
     * here, and the chunk and stream costs are not added again */
    sh.prof = p;
    memset(&pl, 0, sizeof(pl));
    pl.strategy = HN_STRAT_COLLECTIVE;
    pl.chunks = 4;
    pl.streams = 2;
    pl.via = HN_VIA_NCCL;
    split = hn_pipe_seconds(&sh, &pl);
    whole = hn_cost_gemm_seconds(p, 2.0 * 16384 * 8192 * 8192, HN_BF16);
    p->nsplits = 0;
    plain = hn_pipe_seconds(&sh, &pl);
    CU_ASSERT(fabs((split - plain) - (whole * 0.03 - 3 * 5e-6 - 7e-6)) < 1e-9);
    /* one rank: a collective copies (the sequential plan: the GEMM and a
     * copy of A), a ring's one step is the GEMM alone; where splitting
     * costs, auto takes the ring */
    p->splits[p->nsplits++] = (hn_cost_split_point){16384, 8192, 8192, 2, 2, 1.02};
    sh.world = 1;
    sh.kind = HN_PIPE_AG_MM;
    CU_ASSERT(fabs(hn_cost_coll_seconds(p, HN_COLL_ALLGATHER, HN_ENGINE_NCCL, 1, 1e9) - 1e9 / p->hbm_bytes_per_s) <
              1e-12);
    memset(&pl, 0, sizeof(pl));
    pl.strategy = HN_STRAT_SEQUENTIAL;
    pl.chunks = pl.streams = 1;
    pl.via = HN_VIA_NCCL;
    CU_ASSERT(fabs(hn_pipe_seconds(&sh, &pl) - (whole + 16384.0 * 8192 * 2 / p->hbm_bytes_per_s)) < 1e-12);
    memset(&pl, 0, sizeof(pl));
    pl.via = HN_VIA_AUTO;
    CU_ASSERT_EQUAL(hn_pipe_choose(&sh, HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE, &pl, NULL, 0), HN_OK);
    CU_ASSERT_EQUAL(pl.strategy, HN_STRAT_RING);
    CU_ASSERT(fabs(pl.seconds - whole) < 1e-12);
    free(p);
}

static void test_hier_allreduce(void)
{
    CU_ASSERT_FALSE(hn_cost_hier_allreduce(NULL, 8192, 2, 4));
    CU_ASSERT_TRUE(hn_cost_hier_allreduce(NULL, 256.0 * (1 << 20), 2, 4));
    CU_ASSERT_TRUE(hn_cost_hier_allreduce(NULL, 256.0 * (1 << 20), 4, 8));
    CU_ASSERT_FALSE(hn_cost_hier_allreduce(NULL, 256.0 * (1 << 20), 4, 1));
    CU_ASSERT_FALSE(hn_cost_hier_allreduce(NULL, 256.0 * (1 << 20), 1, 8));
    /* the crossover grows with nothing but size: once faster, faster for every larger size */
    {
        int was = 0, ok = 1;
        for (double b = 8192; b <= 1e9; b *= 2) {
            int now = hn_cost_hier_allreduce(NULL, b, 2, 4);
            ok &= !(was && !now);
            was = now;
        }
        CU_ASSERT_TRUE(ok);
    }
}

void hn_suite_cost(void)
{
    static CU_TestInfo tests[] = {
        {"the coefficients are the fit of the measurements", test_coefficients_are_the_fit},
        {"the model follows the measurements", test_model_follows_the_measurements},
        {"auto chooses, keeps fixed choices, rejects impossible ones", test_choose},
        {"an auto that finds nothing says what it tried, why, and what fits", test_choose_failures},
        {"GEMM + allreduce: the allgather half by its own communicator", test_allreduce_halves},
        {"small M: the latency path where it is known and allowed", test_latency_path_at_small_m},
        {"the profile drives the model", test_profile_drives_the_model},
        {"via auto: the measured crossovers", test_via_resolve},
        {"via auto: a tuned profile's curves, in their mode and team size", test_via_auto_from_profile},
        {"via auto: the same choice on every rank, runs exact", test_via_auto_runs},
        {"via ll: one-shot below the crossover, two-shot above, both exact", test_ll_crossover_runs},
        {"a GEMM in chunks on streams: the splits by shape, in the pipelines' GEMM", test_splits},
        {"across nodes: the hierarchical allreduce where the network's bytes outweigh", test_hier_allreduce},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("model/cost", tests);
}

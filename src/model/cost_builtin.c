/* The built-in default profile: the collective curves and pipelines
 * measured on 2 and 4 H200s (docs/BENCHMARKS.md, docs/SCHEDULER.md) and
 * the model's coefficients fitted to them — what the model reads where no
 * machine profile was measured. Tables only. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"

#define MIB ((double)(1 << 20))
#define NSIZES 11 /* 1 MiB .. 1 GiB, powers of two */
#define HBM_BYTES_PER_S 3.0e12 /* a local copy on an H200 (datasheet 4.8 TB/s; measured copies ~3) */
#define F32_GEMM_FACTOR 0.068  /* f32 / bf16 dense GEMM rate of an H200 (datasheet: 67 / 989) */

/* µs per call, bf16 sum, raw NCCL and the p2p rings (put, events) in the
 * same runs: 2 GPUs nvidia-h200-x2 2026-11-21 10:47, 4 GPUs
 * nvidia-h200-x4 10:55, from 1 MiB to 1 GiB. Sizes: allgather output,
 * reduce_scatter input, allreduce buffer. */
#define SIZES_1M_1G                                                                                         \
    {MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB, 64 * MIB, 128 * MIB, 256 * MIB, 512 * MIB,         \
     1024 * MIB}
#define CURVE(n, kind, engine, ...) {kind, engine, n, NSIZES, SIZES_1M_1G, {__VA_ARGS__}, 0}
/* The latency path, 2 GPUs, nvidia-h200-x2 2026-11-23 18:43 (its first
 * design, flags as barriers; docs/BENCHMARKS.md): device time of 50 calls
 * issued back to back, so the host's issue rate below 1 MiB. */
#define SIZES_8K_16M                                                                                        \
    {8192, 16384, 32768, 65536, 131072, 262144, 524288, MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB}
#define LL_CURVE(kind, ...) {kind, HN_ENGINE_LL, 2, 12, SIZES_8K_16M, {__VA_ARGS__}, 0}

/* 2 GPUs below 1 MiB: hirnode's NCCL backend and the rings in `hirnode
 * bench collectives` of 2026-11-23 18:43 (nvidia-h200-x2; device time of
 * 50 calls issued back to back: the host's issue rate at these sizes),
 * then the curves above from 1 MiB */
#define SIZES_8K_1G                                                                                         \
    {8192, 16384, 32768, 65536, 131072, 262144, 524288, MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB,   \
     64 * MIB, 128 * MIB, 256 * MIB, 512 * MIB, 1024 * MIB}
#define CURVE2(kind, engine, ...) {kind, engine, 2, 7 + NSIZES, SIZES_8K_1G, {__VA_ARGS__}, 0}

static const hn_cost_curve builtin_curves[] = {
    CURVE2(HN_COLL_ALLGATHER, HN_ENGINE_NCCL, 11.04, 10.68, 11.39, 11.47, 8.16, 12.67, 12.20, /* from 1 MiB: */
           14.4, 19.4, 29.0, 38.2, 56.0, 93.7, 158.7, 290.5, 547.2, 1044.0, 1994.7),
    CURVE2(HN_COLL_ALLGATHER, HN_ENGINE_CE_PUT, 19.32, 20.07, 21.42, 19.22, 15.91, 19.08, 18.74,
           15.9, 23.4, 28.6, 31.6, 46.0, 76.9, 129.5, 230.2, 432.0, 836.9, 1649.7),
    CURVE2(HN_COLL_REDUCE_SCATTER, HN_ENGINE_NCCL, 11.05, 10.61, 9.67, 9.91, 10.76, 11.12, 11.19,
           13.6, 17.9, 25.5, 34.2, 52.8, 94.9, 166.2, 306.6, 582.5, 1072.5, 2007.8),
    CURVE2(HN_COLL_REDUCE_SCATTER, HN_ENGINE_CE_PUT, 18.96, 17.51, 16.29, 16.22, 17.80, 16.65, 18.40,
           13.2, 21.8, 27.6, 32.2, 44.6, 75.9, 124.5, 218.7, 408.9, 785.4, 1528.8),
    CURVE2(HN_COLL_ALLREDUCE, HN_ENGINE_NCCL, 10.92, 10.55, 11.91, 11.37, 12.10, 12.30, 12.33,
           17.2, 29.9, 35.0, 48.8, 80.3, 143.2, 252.3, 467.2, 888.6, 1710.2, 3274.9),
    CURVE2(HN_COLL_ALLREDUCE, HN_ENGINE_CE_PUT, 30.50, 27.16, 35.56, 30.94, 30.71, 32.97, 33.71,
           24.9, 32.9, 44.8, 55.9, 80.9, 149.1, 249.5, 448.5, 840.9, 1616.4, 3179.5),
    CURVE(4, HN_COLL_ALLGATHER, HN_ENGINE_NCCL, 18.2, 22.0, 39.1, 48.8, 67.9, 108.9, 191.1, 347.8, 661.2, 1275.5,
          2477.3),
    CURVE(4, HN_COLL_ALLGATHER, HN_ENGINE_CE_PUT, 40.9, 43.1, 42.1, 54.9, 74.1, 110.4, 181.1, 321.9, 596.9, 1138.6,
          2224.5),
    CURVE(4, HN_COLL_REDUCE_SCATTER, HN_ENGINE_NCCL, 18.2, 21.0, 36.8, 42.4, 60.1, 106.2, 193.1, 353.3, 674.8, 1301.6,
          2502.8),
    CURVE(4, HN_COLL_REDUCE_SCATTER, HN_ENGINE_CE_PUT, 53.3, 50.0, 58.7, 80.0, 98.0, 111.9, 217.5, 338.6, 604.8, 1145.9,
          2222.9),
    CURVE(4, HN_COLL_ALLREDUCE, HN_ENGINE_NCCL, 21.8, 30.3, 43.4, 64.0, 103.2, 174.0, 323.7, 613.6, 1186.5, 2318.2,
          4552.6),
    CURVE(4, HN_COLL_ALLREDUCE, HN_ENGINE_CE_PUT, 108.8, 89.1, 102.2, 122.7, 160.8, 213.8, 367.7, 639.3, 1184.3, 2254.1,
          4389.0),
    LL_CURVE(HN_COLL_ALLREDUCE, 10.65, 10.89, 10.85, 10.98, 11.16, 11.64, 12.42, 14.71, 18.64, 26.90, 44.58, 92.71),
    LL_CURVE(HN_COLL_ALLGATHER, 10.30, 10.48, 10.63, 10.57, 10.66, 10.91, 11.41, 12.12, 14.14, 18.31, 26.25, 46.05),
    LL_CURVE(HN_COLL_REDUCE_SCATTER, 11.37, 11.60, 11.68, 11.69, 11.70, 11.95, 12.39, 13.12, 15.57, 20.20, 29.51,
             59.83),
};

/* Pipelines measured on 2 H200s (nvidia-h200-x2, 2026-11-23,
 * bf16, hand-written hirnode programs, one cuBLASLt workspace per stream),
 * and PyTorch's sequential NCCL + GEMM on 4 H200s (docs/SCHEDULER.md),
 * which only checks the model (not fitted). The per-chunk NCCL pipelines
 * are the best of the chunk counts tried, taken as 4 chunks. */
const hn_cost_point hn_cost_points[] = {
    /* kind, M, K, N, world, GEMM alone TFLOP/s, strategy, p2p, chunks, ratio, get, reference */
    {HN_PIPE_AG_MM, 32768, 16384, 8192, 2, 693, HN_STRAT_SEQUENTIAL, 0, 1, 0.870, 0, 0},
    {HN_PIPE_AG_MM, 32768, 16384, 8192, 2, 693, HN_STRAT_COLLECTIVE, 0, 4, 0.891, 0, 0},
    {HN_PIPE_AG_MM, 32768, 16384, 8192, 2, 693, HN_STRAT_RING, 1, 2, 0.960, 0, 0},
    {HN_PIPE_AG_MM, 16384, 8192, 8192, 2, 737, HN_STRAT_SEQUENTIAL, 0, 1, 0.862, 0, 0},
    {HN_PIPE_AG_MM, 16384, 8192, 8192, 2, 737, HN_STRAT_COLLECTIVE, 0, 4, 0.906, 0, 0},
    {HN_PIPE_AG_MM, 16384, 8192, 8192, 2, 737, HN_STRAT_RING, 1, 2, 1.035, 0, 0},
    {HN_PIPE_AG_MM, 4096, 8192, 8192, 2, 791, HN_STRAT_SEQUENTIAL, 0, 1, 0.792, 0, 0},
    {HN_PIPE_AG_MM, 4096, 8192, 8192, 2, 791, HN_STRAT_COLLECTIVE, 0, 4, 0.735, 0, 0},
    {HN_PIPE_AG_MM, 4096, 8192, 8192, 2, 791, HN_STRAT_RING, 1, 2, 0.965, 0, 0},
    {HN_PIPE_MM_RS, 32768, 16384, 8192, 2, 692, HN_STRAT_SEQUENTIAL, 0, 1, 0.912, 0, 0},
    {HN_PIPE_MM_RS, 32768, 16384, 8192, 2, 692, HN_STRAT_COLLECTIVE, 0, 4, 0.923, 0, 0},
    {HN_PIPE_MM_RS, 32768, 16384, 8192, 2, 692, HN_STRAT_RING, 1, 2, 0.957, 0, 0},
    {HN_PIPE_MM_RS, 16384, 8192, 8192, 2, 774, HN_STRAT_SEQUENTIAL, 0, 1, 0.818, 0, 0},
    {HN_PIPE_MM_RS, 16384, 8192, 8192, 2, 774, HN_STRAT_COLLECTIVE, 0, 4, 0.834, 0, 0},
    {HN_PIPE_MM_RS, 16384, 8192, 8192, 2, 774, HN_STRAT_RING, 1, 2, 0.926, 0, 0},
    {HN_PIPE_MM_RS, 4096, 8192, 8192, 2, 788, HN_STRAT_SEQUENTIAL, 0, 1, 0.796, 0, 0},
    {HN_PIPE_MM_RS, 4096, 8192, 8192, 2, 788, HN_STRAT_COLLECTIVE, 0, 4, 0.823, 0, 0},
    {HN_PIPE_MM_RS, 4096, 8192, 8192, 2, 788, HN_STRAT_RING, 1, 2, 0.926, 0, 0},
    /* 4 GPUs, PyTorch (reference points: GEMM rate fitted, the rest checked) */
    {HN_PIPE_AG_MM, 32768, 16384, 8192, 4, 701, HN_STRAT_SEQUENTIAL, 0, 1, 0.85, 0, 1},
    {HN_PIPE_MM_RS, 32768, 16384, 8192, 4, 701, HN_STRAT_SEQUENTIAL, 0, 1, 0.86, 0, 1},
};
const int hn_cost_npoints = HN_ARRAY_LEN(hn_cost_points);

/* ---- the model's coefficients: hn_cost_fit(hn_cost_points) ----
 * (tests/model/cost_test.c refits them; after new measurements, paste
 * what it prints here) */
const hn_cost_coeffs hn_cost_model = {
    .gemm_tflops_at_1t = 773.035,
    .gemm_gamma = 0.0462726,
    .seq_overhead_s = 1.68969e-05,
    .kappa = {{0.190273, 0.0241763}, {0.462102, 0.412905}},
    .tau_s = {{3.25126e-05, 0}, {0, 0}},
};

/* ---- the built-in default profile ---- */

static hn_cost_profile builtin;
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;

/* The shapes of the measurements (bench overlap --shapes tuner) */
static const int64_t builtin_shapes[][3] = {{32768, 16384, 8192}, {16384, 8192, 8192}, {4096, 8192, 8192}};

static void make_builtin(void)
{
    hn_cost_profile *p = &builtin;
    snprintf(p->model, sizeof(p->model), "NVIDIA H200");
    snprintf(p->backend, sizeof(p->backend), "cuda");
    snprintf(p->driver, sizeof(p->driver), "580.159.04");
    snprintf(p->cuda, sizeof(p->cuda), "13.0");
    snprintf(p->nccl, sizeof(p->nccl), "2.28.3");
    snprintf(p->date, sizeof(p->date), "2026-11-23");
    snprintf(p->source, sizeof(p->source), "built-in default (2 and 4 H200s)");
    p->builtin = 1;
    p->coef = hn_cost_model;
    for (int d = 0; d < HN_COST_NDTYPES; d++) {
        /* bf16 and f16 run at the same tensor-core rate (datasheet); f32
         * at the datasheet's ratio (neither measured) */
        p->gemm_tflops_at_1t[d] = hn_cost_model.gemm_tflops_at_1t * (d == 2 ? F32_GEMM_FACTOR : 1);
        p->gemm_gamma[d] = hn_cost_model.gemm_gamma;
    }
    p->hbm_bytes_per_s = HBM_BYTES_PER_S;
    p->ncurves = HN_ARRAY_LEN(builtin_curves);
    memcpy(p->curves, builtin_curves, sizeof(builtin_curves));
    p->nshapes = HN_ARRAY_LEN(builtin_shapes);
    memcpy(p->shapes, builtin_shapes, sizeof(builtin_shapes));
    /* the GEMM-alone rates of the 2-GPU runs, each shape's mean */
    for (int i = 0; i < hn_cost_npoints; i++) {
        const hn_cost_point *q = &hn_cost_points[i];
        double sum = 0;
        int seen = q->reference, k = 0;
        for (int j = 0; j < p->ngemm; j++)
            seen |= p->gemm[j].M == q->M && p->gemm[j].K == q->K && p->gemm[j].N == q->N;
        if (seen)
            continue;
        for (int j = i; j < hn_cost_npoints; j++)
            if (!hn_cost_points[j].reference && hn_cost_points[j].M == q->M && hn_cost_points[j].K == q->K &&
                hn_cost_points[j].N == q->N) {
                sum += hn_cost_points[j].gemm_tflops;
                k++;
            }
        p->gemm[p->ngemm++] = (hn_cost_gemm_point){HN_BF16, q->M, q->K, q->N, sum / k};
    }
    for (int k = 0; k < HN_TRAFFIC_COUNT; k++)
        p->interference[k] = -1;
    p->npipes = hn_cost_npoints;
    memcpy(p->pipes, hn_cost_points, sizeof(hn_cost_points[0]) * (size_t)hn_cost_npoints);
}

const hn_cost_profile *hn_cost_builtin(void)
{
    pthread_once(&builtin_once, make_builtin);
    return &builtin;
}


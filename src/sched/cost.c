/* The scheduler's cost model (docs/SCHEDULER.md): measured collective
 * curves, the crossovers of `via auto`, and the fitted model of pipelined
 * GEMMs that picks a statement's strategy and parameters. Pure arithmetic
 * on tables: the same answer on every rank and every backend. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../core/ll.h"
#include "config.h"
#include "cost.h"
#include "runtime_int.h" /* HN_MAX_STREAMS */

#define MIB ((double)(1 << 20))
#define NSIZES 11 /* 1 MiB .. 1 GiB, powers of two */
#define HBM_BYTES_PER_S 3.0e12 /* a local copy on an H200 (datasheet 4.8 TB/s; measured copies ~3) */
#define F32_GEMM_FACTOR 0.068  /* f32 / bf16 dense GEMM rate of an H200 (datasheet: 67 / 989) */
#define AUTO_STREAMS 2         /* one stream computes while the other communicates */

/* ---- measurements: docs/BENCHMARKS.md, `hirnode bench collectives` ---- */

/* µs per call, bf16 sum, raw NCCL and the p2p rings (put, events) in the
 * same runs: 2 GPUs nvidia-h200-x2 2026-11-21 10:47, 4 GPUs
 * nvidia-h200-x4 10:55. Sizes: allgather output, reduce_scatter input,
 * allreduce buffer. */
typedef struct coll_curve {
    int n;
    hn_coll_kind kind;
    int p2p;
    double us[NSIZES];
} coll_curve;

static const coll_curve curves[] = {
    {2, HN_COLL_ALLGATHER, 0, {14.4, 19.4, 29.0, 38.2, 56.0, 93.7, 158.7, 290.5, 547.2, 1044.0, 1994.7}},
    {2, HN_COLL_ALLGATHER, 1, {15.9, 23.4, 28.6, 31.6, 46.0, 76.9, 129.5, 230.2, 432.0, 836.9, 1649.7}},
    {2, HN_COLL_REDUCE_SCATTER, 0, {13.6, 17.9, 25.5, 34.2, 52.8, 94.9, 166.2, 306.6, 582.5, 1072.5, 2007.8}},
    {2, HN_COLL_REDUCE_SCATTER, 1, {13.2, 21.8, 27.6, 32.2, 44.6, 75.9, 124.5, 218.7, 408.9, 785.4, 1528.8}},
    {2, HN_COLL_ALLREDUCE, 0, {17.2, 29.9, 35.0, 48.8, 80.3, 143.2, 252.3, 467.2, 888.6, 1710.2, 3274.9}},
    {2, HN_COLL_ALLREDUCE, 1, {24.9, 32.9, 44.8, 55.9, 80.9, 149.1, 249.5, 448.5, 840.9, 1616.4, 3179.5}},
    {4, HN_COLL_ALLGATHER, 0, {18.2, 22.0, 39.1, 48.8, 67.9, 108.9, 191.1, 347.8, 661.2, 1275.5, 2477.3}},
    {4, HN_COLL_ALLGATHER, 1, {40.9, 43.1, 42.1, 54.9, 74.1, 110.4, 181.1, 321.9, 596.9, 1138.6, 2224.5}},
    {4, HN_COLL_REDUCE_SCATTER, 0, {18.2, 21.0, 36.8, 42.4, 60.1, 106.2, 193.1, 353.3, 674.8, 1301.6, 2502.8}},
    {4, HN_COLL_REDUCE_SCATTER, 1, {53.3, 50.0, 58.7, 80.0, 98.0, 111.9, 217.5, 338.6, 604.8, 1145.9, 2222.9}},
    {4, HN_COLL_ALLREDUCE, 0, {21.8, 30.3, 43.4, 64.0, 103.2, 174.0, 323.7, 613.6, 1186.5, 2318.2, 4552.6}},
    {4, HN_COLL_ALLREDUCE, 1, {108.8, 89.1, 102.2, 122.7, 160.8, 213.8, 367.7, 639.3, 1184.3, 2254.1, 4389.0}},
};

/* Where p2p overtakes NCCL (same runs): the smallest size from which p2p
 * is ahead at every larger size measured. */
typedef struct crossover {
    int n;
    hn_coll_kind kind;
    double bytes;
} crossover;

static const crossover crossovers[] = {
    {2, HN_COLL_ALLGATHER, 8 * MIB},       {2, HN_COLL_REDUCE_SCATTER, 16 * MIB},
    {2, HN_COLL_ALLREDUCE, 64 * MIB},      {4, HN_COLL_ALLGATHER, 64 * MIB},
    {4, HN_COLL_REDUCE_SCATTER, 128 * MIB}, {4, HN_COLL_ALLREDUCE, 256 * MIB},
};

/* The latency path (via ll): ESTIMATES, NOT MEASURED YET (the switch
 * hn_cost_ll_measured below says so). Where it beats
 * NCCL and where two-shot beats one-shot, until `hirnode bench
 * collectives` has run on 2 and 4 H200s (docs/BENCHMARKS.md "The latency
 * path" lists the commands); then put the measured crossovers here. The
 * priors (sizes: allreduce buffer, allgather output, reduce_scatter
 * input):
 *  - NCCL here: an allreduce of 1 MiB took 17.2 us on 2 H200s and 21.8 on
 *    4 (curves[] above: flat below, so latency-bound);
 *  - TensorRT-LLM's one-/two-shot kernels as used by SGLang (its pull
 *    request 2904, 2 H100s): 4.5 us at 32 KB, 19.9 at 1 MiB; vLLM's custom
 *    allreduce 8.7 and 26.6 us: about NCCL at 1 MiB, 2-4x below it;
 *  - vLLM picks one-shot on 2 ranks at every size it serves (two-shot moves
 *    as much there and meets twice), up to 512 KiB on 4 and 256 KiB on 8;
 *    TensorRT-LLM's older selector one-shot below 1 M elements on 4 ranks
 *    and 500 K on 8;
 *  - allgather and reduce_scatter: one barrier against NCCL's ring of
 *    kernels; kept small so that `auto` does not pick them where NCCL may
 *    be ahead (the target: never below NCCL). Their two-shot reads
 *    inputs in place at the cost of a second barrier, which only pays
 *    once the staging copy costs more than a barrier: beyond the sizes
 *    served here, so `auto` never picks it.
 * Team sizes: 2; 3 and 4 take 4's; 5 to 8 take 8's. 0: never. */
typedef struct ll_crossover {
    int n;
    hn_coll_kind kind;
    double twoshot_from; /* bytes from which two-shot is picked */
    double nccl_from;    /* bytes from which the latency path is not picked */
} ll_crossover;

#define KIB 1024.0
static const ll_crossover ll_crossovers[] = {
    {2, HN_COLL_ALLREDUCE, 0, 4 * MIB},
    {4, HN_COLL_ALLREDUCE, 512 * KIB, 2 * MIB},
    {8, HN_COLL_ALLREDUCE, 256 * KIB, 1 * MIB},
    {2, HN_COLL_ALLGATHER, 0, 512 * KIB},
    {4, HN_COLL_ALLGATHER, 0, 256 * KIB},
    {8, HN_COLL_ALLGATHER, 0, 128 * KIB},
    {2, HN_COLL_REDUCE_SCATTER, 0, 512 * KIB},
    {4, HN_COLL_REDUCE_SCATTER, 0, 256 * KIB},
    {8, HN_COLL_REDUCE_SCATTER, 0, 128 * KIB},
};
#undef KIB

/* Pipelines measured on 2 H200s (nvidia-h200-x2, 2026-11-23,
 * bf16, hand-written hirnode programs, one cuBLASLt workspace per stream),
 * and PyTorch's sequential NCCL + GEMM on 4 H200s (docs/SCHEDULER.md),
 * which only checks the model (not fitted). The per-chunk NCCL pipelines
 * are the best of the chunk counts tried, taken as 4 chunks. */
const hn_cost_point hn_cost_points[] = {
    /* kind, M, K, N, world, GEMM alone TFLOP/s, strategy, p2p, chunks, ratio */
    {HN_PIPE_AG_MM, 32768, 16384, 8192, 2, 693, HN_STRAT_SEQUENTIAL, 0, 1, 0.870},
    {HN_PIPE_AG_MM, 32768, 16384, 8192, 2, 693, HN_STRAT_COLLECTIVE, 0, 4, 0.891},
    {HN_PIPE_AG_MM, 32768, 16384, 8192, 2, 693, HN_STRAT_RING, 1, 2, 0.960},
    {HN_PIPE_AG_MM, 16384, 8192, 8192, 2, 737, HN_STRAT_SEQUENTIAL, 0, 1, 0.862},
    {HN_PIPE_AG_MM, 16384, 8192, 8192, 2, 737, HN_STRAT_COLLECTIVE, 0, 4, 0.906},
    {HN_PIPE_AG_MM, 16384, 8192, 8192, 2, 737, HN_STRAT_RING, 1, 2, 1.035},
    {HN_PIPE_AG_MM, 4096, 8192, 8192, 2, 791, HN_STRAT_SEQUENTIAL, 0, 1, 0.792},
    {HN_PIPE_AG_MM, 4096, 8192, 8192, 2, 791, HN_STRAT_COLLECTIVE, 0, 4, 0.735},
    {HN_PIPE_AG_MM, 4096, 8192, 8192, 2, 791, HN_STRAT_RING, 1, 2, 0.965},
    {HN_PIPE_MM_RS, 32768, 16384, 8192, 2, 692, HN_STRAT_SEQUENTIAL, 0, 1, 0.912},
    {HN_PIPE_MM_RS, 32768, 16384, 8192, 2, 692, HN_STRAT_COLLECTIVE, 0, 4, 0.923},
    {HN_PIPE_MM_RS, 32768, 16384, 8192, 2, 692, HN_STRAT_RING, 1, 2, 0.957},
    {HN_PIPE_MM_RS, 16384, 8192, 8192, 2, 774, HN_STRAT_SEQUENTIAL, 0, 1, 0.818},
    {HN_PIPE_MM_RS, 16384, 8192, 8192, 2, 774, HN_STRAT_COLLECTIVE, 0, 4, 0.834},
    {HN_PIPE_MM_RS, 16384, 8192, 8192, 2, 774, HN_STRAT_RING, 1, 2, 0.926},
    {HN_PIPE_MM_RS, 4096, 8192, 8192, 2, 788, HN_STRAT_SEQUENTIAL, 0, 1, 0.796},
    {HN_PIPE_MM_RS, 4096, 8192, 8192, 2, 788, HN_STRAT_COLLECTIVE, 0, 4, 0.823},
    {HN_PIPE_MM_RS, 4096, 8192, 8192, 2, 788, HN_STRAT_RING, 1, 2, 0.926},
    /* 4 GPUs, PyTorch (world 4 marks them: GEMM rate fitted, the rest checked) */
    {HN_PIPE_AG_MM, 32768, 16384, 8192, 4, 701, HN_STRAT_SEQUENTIAL, 0, 1, 0.85},
    {HN_PIPE_MM_RS, 32768, 16384, 8192, 4, 701, HN_STRAT_SEQUENTIAL, 0, 1, 0.86},
};
const int hn_cost_npoints = HN_ARRAY_LEN(hn_cost_points);

/* ---- the model's coefficients: hn_cost_fit(hn_cost_points) ----
 * (tests/sched/cost_test.c refits them; after new measurements, paste
 * what it prints here) */
const hn_cost_coeffs hn_cost_model = {
    .gemm_tflops_at_1t = 773.035,
    .gemm_gamma = 0.0462726,
    .seq_overhead_s = 1.68969e-05,
    .kappa = {{0.190273, 0.0288933}, {0.518952, 0.506207}},
    .tau_s = {{3.67368e-05, 7.92476e-06}, {0, 0}},
};

/* ---- collectives ---- */

static int curve_n(int n) { return n <= 2 ? 2 : 4; }

static double curve_seconds(hn_coll_kind kind, int p2p, int n, double bytes)
{
    for (int c = 0; c < HN_ARRAY_LEN(curves); c++) {
        const coll_curve *cv = &curves[c];
        double x, f;
        int i;
        if (cv->n != curve_n(n) || cv->kind != kind || cv->p2p != p2p)
            continue;
        if (bytes <= MIB) /* latency-bound below the smallest size measured */
            return cv->us[0] * 1e-6;
        if (bytes >= MIB * (1 << (NSIZES - 1)))
            return cv->us[NSIZES - 1] * 1e-6 * bytes / (MIB * (1 << (NSIZES - 1)));
        x = log2(bytes / MIB);
        i = (int)x;
        f = x - i;
        return exp(log(cv->us[i]) * (1 - f) + log(cv->us[i + 1]) * f) * 1e-6;
    }
    return 0;
}

double hn_cost_coll_seconds(hn_coll_kind kind, int p2p, int n, double bytes)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    switch (kind) {
    case HN_COLL_REDUCE_SCATTER:
    case HN_COLL_ALLREDUCE: return curve_seconds(kind, p2p, n, bytes);
    case HN_COLL_BROADCAST:
        /* unmeasured: NCCL's ring forwards the buffer once per rank, like an
         * allgather moving as much per rank; p2p's root copies to all */
        return p2p ? curve_seconds(HN_COLL_ALLGATHER, 1, n, bytes * n)
                   : curve_seconds(HN_COLL_ALLGATHER, 0, n, bytes * n / (n - 1));
    default: return curve_seconds(HN_COLL_ALLGATHER, p2p, n, bytes);
    }
}

size_t hn_cost_crossover(hn_coll_kind kind, int n)
{
    double at2 = 0, at4 = 0, b;
    if (n <= 1)
        return SIZE_MAX;
    for (int i = 0; i < HN_ARRAY_LEN(crossovers); i++)
        if (crossovers[i].kind == kind) {
            if (crossovers[i].n == 2)
                at2 = crossovers[i].bytes;
            else
                at4 = crossovers[i].bytes;
        }
    if (at2 <= 0 || at4 <= 0)
        return SIZE_MAX; /* p2p is never picked for it */
    if (n == 2)
        return (size_t)at2;
    /* 3 ranks take the 4-rank crossover; beyond 4 (unmeasured) it grows by
     * the 2 -> 4 factor per doubling */
    b = n <= 4 ? at4 : at4 * pow(at4 / at2, log2(n / 4.0));
    return b >= (double)SIZE_MAX ? SIZE_MAX : (size_t)b;
}

size_t hn_cost_ll_crossover(hn_coll_kind kind, int n, int twoshot)
{
    int row = n <= 2 ? 2 : n <= 4 ? 4 : 8;
    if (n <= 1 || n > HN_LL_MAX_RANKS)
        return 0;
    for (int i = 0; i < HN_ARRAY_LEN(ll_crossovers); i++)
        if (ll_crossovers[i].n == row && ll_crossovers[i].kind == kind) {
            double b = twoshot ? ll_crossovers[i].twoshot_from : ll_crossovers[i].nccl_from;
            return twoshot && b <= 0 ? SIZE_MAX : (size_t)b;
        }
    return 0;
}

/* Bytes of a collective in the crossovers' convention. */
static size_t coll_bytes(hn_coll_kind kind, size_t count, hn_dtype dtype, int n)
{
    size_t es = (size_t)hn_dtype_size(dtype);
    return kind == HN_COLL_ALLREDUCE ? count * es : count * (size_t)n * es;
}

int hn_via_ll_algo(hn_coll_kind kind, size_t count, hn_dtype dtype, int n)
{
    return coll_bytes(kind, count, dtype, n) >= hn_cost_ll_crossover(kind, n, 1) ? HN_LL_TWOSHOT : HN_LL_ONESHOT;
}

/* The one switch behind `via auto`'s latency path: 0 while ll_crossovers[]
 * are the estimates above; 1 once they are measured in graphs on GPUs
 * (docs/BENCHMARKS.md "The latency path" has the commands) — then
 * HIRNODE_AUTO_LL's default, auto, lets `via auto` take the latency path
 * below them, and the setting is needed only to turn it off (0). */
const int hn_cost_ll_measured = 0;

int hn_auto_ll_on(const char *setting, int measured)
{
    if (setting != NULL && strcmp(setting, "1") == 0)
        return 1;
    if (setting != NULL && strcmp(setting, "0") == 0)
        return 0;
    return measured; /* auto */
}

int hn_auto_picks_ll(void) { return hn_auto_ll_on(hn_setting_get("auto_ll"), hn_cost_ll_measured); }

int hn_default_via_auto(const char *device_backend)
{
    const char *via;
    (void)hn_setting_word("default_via", &via, NULL);
    return strcmp(device_backend, "cuda") == 0 && strcmp(via, "auto") == 0;
}

hn_backend_kind hn_via_resolve(hn_backend_kind via, int default_auto, hn_coll_kind kind, size_t count,
                               hn_dtype dtype, int n)
{
    size_t es = (size_t)hn_dtype_size(dtype), bytes;
    if (via != HN_VIA_AUTO && !(via == HN_VIA_DEFAULT && default_auto))
        return via;
    /* small ones: the latency path, where it serves them — by default
     * once its crossovers are measured (hn_cost_ll_measured), until then
     * only where asked for (HIRNODE_AUTO_LL=1); the rings only from their
     * crossover up, never below it */
    if (hn_auto_picks_ll() &&
        (kind == HN_COLL_ALLREDUCE || kind == HN_COLL_ALLGATHER || kind == HN_COLL_REDUCE_SCATTER) &&
        hn_comm_ll_refuses(kind, dtype, n) == NULL && coll_bytes(kind, count, dtype, n) < hn_cost_ll_crossover(kind, n, 0))
        return HN_VIA_LL;
    switch (kind) {
    case HN_COLL_ALLGATHER:
    case HN_COLL_REDUCE_SCATTER: bytes = count * (size_t)n * es; break;
    case HN_COLL_ALLREDUCE:
        if (count % (size_t)n != 0) /* the p2p allreduce splits the buffer in n */
            return HN_VIA_NCCL;
        bytes = count * es;
        break;
    default: return HN_VIA_NCCL; /* no crossover measured */
    }
    return bytes >= hn_cost_crossover(kind, n) ? HN_VIA_P2P : HN_VIA_NCCL;
}

/* ---- GEMMs ---- */

static double gemm_seconds_with(const hn_cost_coeffs *c, double flops, hn_dtype dtype)
{
    double tflops;
    if (flops <= 0)
        return 0;
    tflops = c->gemm_tflops_at_1t * pow(flops / 1e12, -c->gemm_gamma);
    if (dtype == HN_F32)
        tflops *= F32_GEMM_FACTOR;
    return flops / (tflops * 1e12);
}

double hn_cost_gemm_seconds(double flops, hn_dtype dtype)
{
    return gemm_seconds_with(&hn_cost_model, flops, dtype);
}

/* ---- pipelines ---- */

static int is_gather(hn_pipe_kind k) { return k == HN_PIPE_AG_MM || k == HN_PIPE_AG; }
static int has_gemm(hn_pipe_kind k) { return k == HN_PIPE_AG_MM || k == HN_PIPE_MM_RS || k == HN_PIPE_MM_AR; }

static hn_coll_kind coll_of(hn_pipe_kind k)
{
    return is_gather(k) ? HN_COLL_ALLGATHER
                        : (k == HN_PIPE_MM_RS || k == HN_PIPE_RS) ? HN_COLL_REDUCE_SCATTER : HN_COLL_ALLREDUCE;
}

/* Bytes of the whole collective, in the curves' convention. */
static double total_bytes(const hn_pipe_shape *sh)
{
    double es = hn_dtype_size(sh->dtype), n = sh->world;
    switch (sh->kind) {
    case HN_PIPE_AG_MM: return (double)sh->M * (double)sh->K * es;
    case HN_PIPE_MM_RS:
    case HN_PIPE_MM_AR: return (double)sh->M * (double)sh->N * es;
    case HN_PIPE_AG:
    case HN_PIPE_RS: return n * (double)sh->M * es;
    default: return (double)sh->M * es;
    }
}

/* Whether a collective of `bytes` through `via` runs on copy engines. */
static int on_copy_engines(hn_backend_kind via, hn_coll_kind kind, double bytes, int n)
{
    if (via == HN_VIA_P2P)
        return 1;
    if (via != HN_VIA_DEFAULT)
        return 0;
    /* default resolves like auto on CUDA, per instruction */
    return bytes >= (double)hn_cost_crossover(kind, n);
}

/* A two-stage pipeline of `steps` equal steps: communication C in all,
 * GEMM G in all; `first` is the communication exposed before the first
 * GEMM (or after the last), `overlap` whether streams let them overlap. */
static double pipeline(const hn_cost_coeffs *c, int gather, int ce, double G, double C, double first, int steps,
                       int overlap)
{
    double kappa = c->kappa[!gather][ce], tau = c->tau_s[!gather][ce];
    if (!overlap)
        return G + C + steps * tau;
    return first + fmax(G + kappa * C, C - first + G / steps) + steps * tau;
}

static double plan_seconds(const hn_cost_coeffs *c, const hn_pipe_shape *sh, const hn_pipe_plan *pl)
{
    int n = sh->world, steps = HN_MAX(pl->chunks, 1), gather = is_gather(sh->kind);
    int overlap = pl->streams > 1;
    hn_coll_kind ck = coll_of(sh->kind);
    double G = has_gemm(sh->kind) ? gemm_seconds_with(c, 2.0 * sh->M * sh->N * sh->K, sh->dtype) : 0;
    double B = total_bytes(sh), Cs, piece = B / steps;
    int ce;
    switch (pl->strategy) {
    case HN_STRAT_RING: {
        double t;
        ce = on_copy_engines(pl->via, ck == HN_COLL_ALLREDUCE ? HN_COLL_REDUCE_SCATTER : ck, B, n);
        /* a ring moves what the whole collective moves; its first step is
         * local (allgather) or compute only (reduce-scatter) */
        Cs = hn_cost_coll_seconds(ck == HN_COLL_ALLREDUCE ? HN_COLL_REDUCE_SCATTER : ck, ce, n, B);
        t = pipeline(c, gather, ce, G, Cs, 0, n, overlap);
        if (sh->kind == HN_PIPE_MM_AR) /* then an allgather of the result */
            t += hn_cost_coll_seconds(HN_COLL_ALLGATHER, on_copy_engines(pl->via, HN_COLL_ALLGATHER, B, n), n, B);
        return t;
    }
    case HN_STRAT_COLLECTIVE: {
        double copy = 0;
        ce = on_copy_engines(pl->via, ck, piece, n);
        Cs = steps * hn_cost_coll_seconds(ck, ce, n, piece);
        if (sh->kind == HN_PIPE_AG || sh->kind == HN_PIPE_RS) /* through a staging buffer */
            copy = 2 * B / HBM_BYTES_PER_S;
        return pipeline(c, gather, ce, G + copy, Cs, Cs / steps, steps, overlap);
    }
    case HN_STRAT_BROADCAST:
        ce = on_copy_engines(pl->via, HN_COLL_BROADCAST, piece, n);
        Cs = steps * hn_cost_coll_seconds(HN_COLL_BROADCAST, ce, n, piece);
        return pipeline(c, gather, ce, G, Cs, Cs / steps, steps, overlap);
    default: /* sequential */
        ce = on_copy_engines(pl->via, ck, B, n);
        return G + hn_cost_coll_seconds(ck, ce, n, B) + (n > 1 ? c->seq_overhead_s : 0);
    }
}

double hn_pipe_seconds(const hn_pipe_shape *sh, const hn_pipe_plan *plan)
{
    return plan_seconds(&hn_cost_model, sh, plan);
}

/* Rows (or elements) each chunk of the statement splits, and what they are. */
static int64_t split_extent(const hn_pipe_shape *sh, const char **what)
{
    switch (sh->kind) {
    case HN_PIPE_AG_MM: *what = "rows of each rank's shard of A"; return sh->M / sh->world;
    case HN_PIPE_MM_RS: *what = "rows of each rank's block of the output"; return sh->M / sh->world;
    case HN_PIPE_MM_AR: *what = "rows of the output"; return sh->M;
    default: *what = "elements of each rank's chunk"; return sh->M;
    }
}

/* Why a plan does not fit: what its strategy does, when the reason is
 * that (rule: "runs in one step"), and what it needs; `general` when the
 * reason is no strategy's (streams, protocol). */
typedef struct unfit {
    const char *rule;
    int general;
    char need[224];
} unfit;

/* Whether strategy/chunks/via fit the shape; why not into *u. */
static int feasible(const hn_pipe_shape *sh, const hn_pipe_plan *pl, unfit *u)
{
    const char *what;
    int64_t rows = split_extent(sh, &what);
    int n = sh->world, c = pl->chunks;
    u->rule = NULL;
    u->general = 1;
    if (c < 1) {
        snprintf(u->need, sizeof(u->need), "chunks=%d must be positive", c);
        return 0;
    }
    if (pl->streams < 1 || pl->streams > HN_MAX_STREAMS) {
        snprintf(u->need, sizeof(u->need), "streams=%d out of range [1, %d]", pl->streams, HN_MAX_STREAMS);
        return 0;
    }
    if (pl->protocol == HN_PROTO_GET && pl->via != HN_VIA_P2P) {
        snprintf(u->need, sizeof(u->need), "protocol=get pulls through p2p, not via=%s", hn_backend_name(pl->via));
        return 0;
    }
    u->general = 0;
    switch (pl->strategy) {
    case HN_STRAT_SEQUENTIAL:
        if (c != 1) {
            u->rule = "runs in one step";
            snprintf(u->need, sizeof(u->need), "chunks=%d must be 1", c);
            return 0;
        }
        break;
    case HN_STRAT_RING:
        if (c != n) {
            u->rule = "moves one shard per step";
            snprintf(u->need, sizeof(u->need), "chunks=%d must be world (%d)", c, n);
            return 0;
        }
        break;
    case HN_STRAT_COLLECTIVE:
        if (rows % c != 0) {
            snprintf(u->need, sizeof(u->need), "chunks=%d does not divide the %lld %s", c, (long long)rows, what);
            return 0;
        }
        if (pl->via == HN_VIA_P2P && coll_of(sh->kind) == HN_COLL_ALLREDUCE &&
            (rows / c * (has_gemm(sh->kind) ? sh->N : 1)) % n != 0) {
            snprintf(u->need, sizeof(u->need), "via=p2p splits each chunk's allreduce in world=%d parts: the %lld "
                     "elements of a chunk do not divide", n, (long long)(rows / c * (has_gemm(sh->kind) ? sh->N : 1)));
            return 0;
        }
        break;
    case HN_STRAT_BROADCAST:
        if (c % n != 0) {
            u->rule = "takes chunks from each rank in turn";
            snprintf(u->need, sizeof(u->need), "chunks=%d is not a multiple of world (%d)", c, n);
            return 0;
        }
        if (rows % (c / n) != 0) {
            snprintf(u->need, sizeof(u->need), "chunks=%d makes %d pieces per rank, which do not divide the %lld %s",
                     c, c / n, (long long)rows, what);
            return 0;
        }
        break;
    default: break;
    }
    return 1;
}

static const hn_strategy strategy_order[] = {HN_STRAT_SEQUENTIAL, HN_STRAT_RING, HN_STRAT_COLLECTIVE,
                                             HN_STRAT_BROADCAST};

/* Whether strategy s may be tried for the plan: the one fixed, else one
 * the statement offers. */
static int tried(const hn_pipe_plan *plan, int offered, hn_strategy s)
{
    return plan->strategy != HN_STRAT_AUTO ? plan->strategy == s : (offered & HN_OPF_STRATEGY(s)) != 0;
}

/* The chunk counts auto tries for strategy s (the plan's own when fixed). */
static int chunk_candidates(const hn_pipe_plan *plan, hn_strategy s, int n, int *cands)
{
    int k = 0;
    if (plan->chunks > 0)
        cands[k++] = plan->chunks;
    else if (s == HN_STRAT_SEQUENTIAL)
        cands[k++] = 1;
    else if (s == HN_STRAT_RING)
        cands[k++] = n;
    else
        for (; k < 3; k++) /* collective: 2, 4, 8; broadcast: 1, 2, 4 pieces per rank */
            cands[k] = s == HN_STRAT_BROADCAST ? n << k : 2 << k;
    return k;
}

/* The plan p of strategy s, chunks c and via choice v (0: nccl, 1: p2p
 * when via is free) with its other free fields settled; 0 when v does
 * not apply. */
static int candidate(const hn_pipe_plan *plan, hn_strategy s, int c, int v, hn_pipe_plan *p)
{
    *p = *plan;
    p->strategy = s;
    p->chunks = c;
    if (plan->via == HN_VIA_AUTO) {
        /* a ring's sends and receives go through p2p unless told */
        if ((s == HN_STRAT_RING || plan->protocol == HN_PROTO_GET) && v == 0)
            return 0;
        p->via = v ? HN_VIA_P2P : HN_VIA_NCCL;
    } else if (v == 1) {
        return 0;
    }
    if (p->streams <= 0)
        p->streams = HN_MIN(p->chunks, AUTO_STREAMS);
    if (p->protocol == HN_PROTO_AUTO && p->via == HN_VIA_P2P)
        p->protocol = HN_PROTO_PUT;
    return 1;
}

/* Whether some strategy tried fits with chunks=c. */
static int chunks_fit(const hn_pipe_shape *sh, int offered, const hn_pipe_plan *plan, int c)
{
    hn_pipe_plan p;
    unfit u;
    for (int si = 0; si < HN_ARRAY_LEN(strategy_order); si++)
        for (int v = 0; v < 2; v++)
            if (tried(plan, offered, strategy_order[si]) && candidate(plan, strategy_order[si], c, v, &p) &&
                feasible(sh, &p, &u))
                return 1;
    return 0;
}

/* "; chunks=2 or chunks=4 would fit": the fitting chunk counts nearest the
 * plan's (the first few when it left them free). */
static void suggest_chunks(const hn_pipe_shape *sh, int offered, const hn_pipe_plan *plan, hn_strbuf *sb)
{
    int fit[3], k = 0;
    for (int c = 1; c <= 4096 && k < 3; c++)
        if (chunks_fit(sh, offered, plan, c)) {
            if (plan->chunks > 0 && c < plan->chunks)
                fit[0] = c, k = 1; /* the nearest below */
            else
                fit[k++] = c;
            if (plan->chunks > 0 && c > plan->chunks)
                break; /* and the nearest above */
        }
    for (int i = 0; i < k; i++)
        hn_sb_printf(sb, "%schunks=%d", i == 0 ? "; " : i + 1 < k ? ", " : " or ", fit[i]);
    if (k > 0)
        hn_sb_append(sb, " would fit");
}

/* Why no plan fits, into err: a fixed strategy and chunks say what they
 * need; what auto chose from says what it tried and why each failed. */
static void unfit_text(const hn_pipe_shape *sh, int offered, const hn_pipe_plan *plan, const unfit *why,
                       const int *seen, char *err, int errlen)
{
    hn_strbuf sb;
    int first = -1, same = 1;
    hn_sb_init(&sb);
    for (int si = 0; si < HN_ARRAY_LEN(strategy_order); si++)
        if (seen[si]) {
            if (first < 0)
                first = si;
            same &= strcmp(why[si].need, why[first].need) == 0;
        }
    if (first < 0) {
        hn_sb_append(&sb, "no strategy fits these options");
    } else if (why[first].general && same) {
        hn_sb_append(&sb, why[first].need); /* no strategy's business */
    } else if (plan->strategy != HN_STRAT_AUTO && plan->chunks > 0) {
        if (why[first].rule != NULL)
            hn_sb_printf(&sb, "strategy=%s %s: ", hn_strategy_name(plan->strategy), why[first].rule);
        hn_sb_append(&sb, why[first].need);
    } else if (plan->strategy != HN_STRAT_AUTO) {
        int cands[3], k = chunk_candidates(plan, plan->strategy, sh->world, cands);
        hn_sb_printf(&sb, "strategy=%s with the chunks auto tries (", hn_strategy_name(plan->strategy));
        for (int i = 0; i < k; i++)
            hn_sb_printf(&sb, "%s%d", i == 0 ? "" : i + 1 < k ? ", " : " and ", cands[i]);
        hn_sb_printf(&sb, "): %s", why[first].need);
        suggest_chunks(sh, offered, plan, &sb);
    } else {
        /* auto chose among the strategies: each one's reason */
        if (plan->chunks > 0)
            hn_sb_printf(&sb, "strategy=auto finds no strategy for chunks=%d: ", plan->chunks);
        else
            hn_sb_append(&sb, "strategy=auto finds no strategy that fits: ");
        for (int si = 0, k = 0; si < HN_ARRAY_LEN(strategy_order); si++)
            if (seen[si]) {
                hn_sb_printf(&sb, "%s%s", k++ ? "; " : "", hn_strategy_name(strategy_order[si]));
                if (why[si].rule != NULL)
                    hn_sb_printf(&sb, " %s, %s", why[si].rule, why[si].need);
                else
                    hn_sb_printf(&sb, ": %s", why[si].need);
            }
        suggest_chunks(sh, offered, plan, &sb);
    }
    snprintf(err, (size_t)errlen, "%s", sb.data != NULL ? sb.data : "no strategy fits these options");
    hn_sb_free(&sb);
}

hn_status_t hn_pipe_choose(const hn_pipe_shape *sh, int offered, hn_pipe_plan *plan, char *err, int errlen)
{
    hn_pipe_plan best;
    unfit why[HN_ARRAY_LEN(strategy_order)];
    int seen[HN_ARRAY_LEN(strategy_order)] = {0}, found = 0;
    memset(&best, 0, sizeof(best));
    for (int si = 0; si < HN_ARRAY_LEN(strategy_order); si++) {
        hn_strategy s = strategy_order[si];
        int cands[3], ncand;
        if (!tried(plan, offered, s))
            continue;
        ncand = chunk_candidates(plan, s, sh->world, cands);
        for (int ci = 0; ci < ncand; ci++)
            for (int v = 0; v < 2; v++) {
                hn_pipe_plan p;
                unfit u;
                if (!candidate(plan, s, cands[ci], v, &p))
                    continue;
                if (!feasible(sh, &p, &u)) {
                    if (!seen[si]) /* the first reason of each strategy */
                        why[si] = u;
                    seen[si] = 1;
                    continue;
                }
                p.seconds = plan_seconds(&hn_cost_model, sh, &p);
                if (!found || p.seconds < best.seconds) {
                    best = p;
                    found = 1;
                }
            }
    }
    if (!found) {
        unfit_text(sh, offered, plan, why, seen, err, errlen);
        return HN_ERR_VERIFY;
    }
    *plan = best;
    return HN_OK;
}

/* ---- fitting ---- */

/* y ~ a x1 + b x2 by weighted least squares, a, b >= 0 (one clamped to 0
 * and the other refitted when negative). */
static void fit2(const double *x1, const double *x2, const double *y, const double *w, int n, double *a,
                 double *b)
{
    double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0, det;
    for (int i = 0; i < n; i++) {
        s11 += w[i] * x1[i] * x1[i];
        s12 += w[i] * x1[i] * x2[i];
        s22 += w[i] * x2[i] * x2[i];
        s1y += w[i] * x1[i] * y[i];
        s2y += w[i] * x2[i] * y[i];
    }
    det = s11 * s22 - s12 * s12;
    *a = *b = 0;
    if (n == 0)
        return;
    if (fabs(det) > 1e-30) {
        *a = (s1y * s22 - s2y * s12) / det;
        *b = (s11 * s2y - s12 * s1y) / det;
    }
    if (*b < 0 || fabs(det) <= 1e-30) {
        *b = 0;
        *a = s11 > 0 ? s1y / s11 : 0;
    }
    if (*a < 0) {
        *a = 0;
        *b = s22 > 0 ? HN_MAX(s2y / s22, 0) : 0;
    }
}

void hn_cost_fit(const hn_cost_point *pts, int n, hn_cost_coeffs *out)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, seq = 0, wseq = 0;
    int ng = 0;
    memset(out, 0, sizeof(*out));
    /* GEMM rate: ln F = ln F1 - gamma ln(flop / 1e12), each shape once */
    for (int i = 0; i < n; i++) {
        double x = log(2.0 * pts[i].M * pts[i].N * pts[i].K / 1e12), y = log(pts[i].gemm_tflops);
        int dup = 0;
        for (int j = 0; j < i; j++)
            dup |= pts[j].kind == pts[i].kind && pts[j].M == pts[i].M && pts[j].K == pts[i].K &&
                   pts[j].N == pts[i].N && pts[j].world == pts[i].world;
        if (dup)
            continue;
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
        ng++;
    }
    if (ng >= 2 && ng * sxx - sx * sx > 0) {
        double slope = (ng * sxy - sx * sy) / (ng * sxx - sx * sx);
        out->gemm_gamma = -slope;
        out->gemm_tflops_at_1t = exp((sy - slope * sx) / ng);
    } else {
        out->gemm_tflops_at_1t = ng ? exp(sy / ng) : 1;
    }
    /* the rest from the 2-GPU hirnode runs: what a pipeline took beyond the
     * GEMM alone (at the rate measured with it) and its exposed first step */
    for (int gather = 1; gather >= 0; gather--)
        for (int ce = 0; ce < 2; ce++) {
            double x1[64], x2[64], y[64], w[64];
            int m = 0;
            for (int i = 0; i < n && m < 64; i++) {
                const hn_cost_point *p = &pts[i];
                hn_pipe_shape sh = {p->kind, p->M, p->K, p->N, HN_BF16, p->world};
                hn_coll_kind ck = coll_of(p->kind);
                double G = 2.0 * p->M * p->N * p->K / (p->gemm_tflops * 1e12), T = G / p->ratio;
                double B = total_bytes(&sh), C, first = 0;
                if (p->world != 2 || p->strategy == HN_STRAT_SEQUENTIAL || is_gather(p->kind) != gather ||
                    p->p2p != ce)
                    continue;
                if (p->strategy == HN_STRAT_RING) {
                    C = hn_cost_coll_seconds(ck, ce, p->world, B);
                } else {
                    C = p->chunks * hn_cost_coll_seconds(ck, ce, p->world, B / p->chunks);
                    first = C / p->chunks;
                }
                /* compute-bound: T = first + G + kappa C + steps tau; weighed
                 * by 1 / G^2, so that the ratios (what the choice rests on)
                 * fit, not the largest shape's milliseconds */
                x1[m] = C;
                x2[m] = p->chunks;
                w[m] = 1 / (G * G);
                y[m++] = T - G - first;
            }
            fit2(x1, x2, y, w, m, &out->kappa[!gather][ce], &out->tau_s[!gather][ce]);
        }
    for (int i = 0; i < n; i++) {
        const hn_cost_point *p = &pts[i];
        hn_pipe_shape sh = {p->kind, p->M, p->K, p->N, HN_BF16, p->world};
        double G = 2.0 * p->M * p->N * p->K / (p->gemm_tflops * 1e12);
        if (p->world != 2 || p->strategy != HN_STRAT_SEQUENTIAL)
            continue;
        seq += (G / p->ratio - G - hn_cost_coll_seconds(coll_of(p->kind), p->p2p, p->world, total_bytes(&sh))) /
               (G * G);
        wseq += 1 / (G * G);
    }
    out->seq_overhead_s = wseq > 0 ? HN_MAX(seq / wseq, 0) : 0;
}

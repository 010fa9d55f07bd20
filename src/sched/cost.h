/* The scheduler's cost model: measured collective times, the crossovers
 * behind `via auto`, and the fitted model that picks a pipelined
 * statement's strategy, chunks, streams and communicator
 * (docs/SCHEDULER.md has the measurements, the model and its fit). */
#ifndef HN_SCHED_COST_H
#define HN_SCHED_COST_H

#include <stddef.h>
#include <stdint.h>

#include "../comm/comm.h"
#include "../core/ir.h"

/* What a pipelined statement computes, for the model. */
typedef enum hn_pipe_kind {
    HN_PIPE_AG_MM, /* C[M, N] = allgather(A[M/n, K]) @ B[K, N] */
    HN_PIPE_MM_RS, /* C[M/n, N] = reduce_scatter(A[M, K] @ B[K, N]) */
    HN_PIPE_MM_AR, /* C[M, N] = allreduce(A[M, K] @ B[K, N]) */
    HN_PIPE_AG,    /* plain allgather of M elements per rank */
    HN_PIPE_RS,    /* plain reduce_scatter to M elements per rank */
    HN_PIPE_AR,    /* plain allreduce of M elements */
} hn_pipe_kind;

typedef struct hn_pipe_shape {
    hn_pipe_kind kind;
    int64_t M, K, N; /* global rows M, local weight K x N (K = N = 1: no GEMM) */
    hn_dtype dtype;
    int world;
} hn_pipe_shape;

/* A plan: each field fixed by the statement, or left free (AUTO, 0) for
 * hn_pipe_choose to settle. */
typedef struct hn_pipe_plan {
    hn_strategy strategy;
    int chunks;           /* steps of the pipeline (ring: world; sequential: 1) */
    int streams;          /* worker streams, stream(i % streams) */
    hn_backend_kind via;  /* nccl, p2p or default once chosen */
    hn_protocol protocol; /* put or get once chosen (p2p) */
    double seconds;       /* the model's time for the plan */
} hn_pipe_plan;

/* Settles every free field of *plan with the plan the model finds
 * fastest, keeping the fixed ones; HN_ERR_VERIFY with a message into err
 * when the fixed fields cannot work for this shape (chunks that do not
 * divide the rows, a strategy the statement does not offer, ...). */
hn_status_t hn_pipe_choose(const hn_pipe_shape *sh, int offered_strategies, hn_pipe_plan *plan, char *err,
                           int errlen);
/* The model's time of a complete plan, in seconds. */
double hn_pipe_seconds(const hn_pipe_shape *sh, const hn_pipe_plan *plan);

/* The model's pieces, for tests and `hirnode bench overlap`. */
double hn_cost_gemm_seconds(double flops, hn_dtype dtype);
/* Time of one collective of `bytes` (allgather: output, reduce_scatter:
 * input, allreduce: buffer, broadcast: buffer) over n ranks. */
double hn_cost_coll_seconds(hn_coll_kind kind, int p2p, int n, double bytes);
/* The smallest size (bytes, as above) from which `via auto` picks p2p
 * for kind over n ranks; SIZE_MAX: never. */
size_t hn_cost_crossover(hn_coll_kind kind, int n);
/* The latency path's crossovers (estimates until measured): twoshot = 0,
 * the size from which `via auto` no longer picks it (0: never picks it);
 * twoshot = 1, the size from which `via ll` runs two-shot (SIZE_MAX:
 * never). */
size_t hn_cost_ll_crossover(hn_coll_kind kind, int n, int twoshot);

/* ---- fitting (docs/SCHEDULER.md) ---- */

/* One measured pipeline: a shape on 2 or more GPUs, the GEMM alone and
 * the ratio GEMM alone / pipeline of one strategy. */
typedef struct hn_cost_point {
    hn_pipe_kind kind;
    int64_t M, K, N;
    int world;
    double gemm_tflops; /* the GEMM alone, per GPU, same run */
    hn_strategy strategy;
    int p2p;            /* its communication on copy engines (1) or NCCL (0) */
    int chunks;
    double ratio;       /* GEMM alone / pipeline */
} hn_cost_point;

/* The model's coefficients: one table (cost.c) that hn_cost_fit remakes
 * from the measurements. */
typedef struct hn_cost_coeffs {
    double gemm_tflops_at_1t; /* bf16 GEMM rate at 1e12 flop per GPU, TFLOP/s */
    double gemm_gamma;        /* rate ~ flop^-gamma */
    double seq_overhead_s;    /* a sequential collective + GEMM beyond their parts */
    double kappa[2][2];       /* [gather, reduce][nccl, copy engine]: GEMM time lost per second of overlapped communication */
    double tau_s[2][2];       /* same: seconds per pipeline step */
} hn_cost_coeffs;

extern const hn_cost_coeffs hn_cost_model;
extern const hn_cost_point hn_cost_points[];
extern const int hn_cost_npoints;

/* Least squares of the model on the points (non-negative coefficients). */
void hn_cost_fit(const hn_cost_point *pts, int n, hn_cost_coeffs *out);

/* The communicator a collective goes through: `via auto` (and, where
 * default_auto, `via default`) picks the latency path, NCCL or the p2p
 * rings from crossovers by kind, size, dtype and team size; any other via
 * is kept. count as in hn_coll_args. Deterministic: every member picks
 * the same. */
hn_backend_kind hn_via_resolve(hn_backend_kind via, int default_auto, hn_coll_kind kind, size_t count,
                               hn_dtype dtype, int n);
/* The latency path's algorithm for a collective `via ll` names none of:
 * HN_LL_ONESHOT (1) below the crossover, HN_LL_TWOSHOT (2) from it. */
int hn_via_ll_algo(hn_coll_kind kind, size_t count, hn_dtype dtype, int n);
/* 1 once the latency path's crossovers are measured (cost.c): the default
 * of HIRNODE_AUTO_LL follows it. */
extern const int hn_cost_ll_measured;
/* Whether `via auto` may pick the latency path, for a value of
 * HIRNODE_AUTO_LL ("1" yes, "0" no, "auto" or anything else: `measured`). */
int hn_auto_ll_on(const char *setting, int measured);
/* The same for this process's setting and hn_cost_ll_measured. */
int hn_auto_picks_ll(void);
/* Whether collectives without `via` pick like `via auto` on this backend. */
int hn_default_via_auto(const char *device_backend);

#endif

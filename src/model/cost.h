/* The scheduler's cost model: the crossovers behind `via auto`, and the
 * fitted model that picks a pipelined statement's strategy, chunks,
 * streams and communicators from a machine profile — measured collective
 * curves and fitted coefficients, read from a file `hirnode tune` wrote
 * (profile.c) or the built-in default made from the measurements here
 * (docs/SCHEDULER.md has the measurements, the model and its fit). */
#ifndef HN_SCHED_COST_H
#define HN_SCHED_COST_H

#include <stddef.h>
#include <stdint.h>

#include "../comm/comm.h"
#include "../ir/ir.h"

/* What a pipelined statement computes, for the model. */
typedef enum hn_pipe_kind {
    HN_PIPE_AG_MM, /* C[M, N] = allgather(A[M/n, K]) @ B[K, N] */
    HN_PIPE_MM_RS, /* C[M/n, N] = reduce_scatter(A[M, K] @ B[K, N]) */
    HN_PIPE_MM_AR, /* C[M, N] = allreduce(A[M, K] @ B[K, N]) */
    HN_PIPE_AG,    /* plain allgather of M elements per rank */
    HN_PIPE_RS,    /* plain reduce_scatter to M elements per rank */
    HN_PIPE_AR,    /* plain allreduce of M elements */
} hn_pipe_kind;

typedef struct hn_cost_profile hn_cost_profile;

typedef struct hn_pipe_shape {
    hn_pipe_kind kind;
    int64_t M, K, N; /* global rows M, local weight K x N (K = N = 1: no GEMM) */
    hn_dtype dtype;
    int world;
    const hn_cost_profile *prof; /* the machine's profile; NULL: the built-in default */
} hn_pipe_shape;

/* A plan: each field fixed by the statement, or left free (AUTO, 0) for
 * hn_pipe_choose to settle. */
typedef struct hn_pipe_plan {
    hn_strategy strategy;
    int chunks;           /* steps of the pipeline (ring: world; sequential: 1) */
    int streams;          /* worker streams, stream(i % streams) */
    hn_via via;  /* nccl, p2p, ll (sequential only, chosen by the model) or default once chosen */
    hn_coll_algo protocol; /* put or get once chosen (p2p) */
    double seconds;       /* the model's time for the plan */
    /* GEMM + allreduce by ring: the allgather of the reduced blocks, its
     * own communicator (copy engines where they win); AUTO elsewhere */
    hn_via ag_via;
    hn_coll_algo ag_protocol;
} hn_pipe_plan;

/* Settles every free field of *plan with the plan the model finds
 * fastest, keeping the fixed ones; HN_ERR_VERIFY with a message into err
 * when the fixed fields cannot work for this shape (chunks that do not
 * divide the rows, a strategy the statement does not offer, ...). */
hn_status_t hn_pipe_choose(const hn_pipe_shape *sh, int offered_strategies, hn_pipe_plan *plan, char *err,
                           int errlen);
/* The model's time of a complete plan, in seconds. */
double hn_pipe_seconds(const hn_pipe_shape *sh, const hn_pipe_plan *plan);

/* ---- the machine profile: what the model reads (profile.c reads and
 * writes it as a file; docs/SCHEDULER.md "The machine profile") ---- */

/* Who moves a collective's data. */
typedef enum hn_cost_engine {
    HN_ENGINE_NCCL,     /* NCCL's kernels */
    HN_ENGINE_CE_PUT,   /* the p2p rings, senders push (copy engines) */
    HN_ENGINE_CE_GET,   /* the p2p rings, receivers pull */
    HN_ENGINE_LL,       /* the latency path's kernels */
    HN_ENGINE_COUNT
} hn_cost_engine;

#define HN_COST_MAX_POINTS 24
#define HN_COST_MAX_CURVES 64
#define HN_COST_MAX_SHAPES 16
#define HN_COST_MAX_PIPES 96
#define HN_COST_NDTYPES 3 /* bf16, f16, f32 */

/* The time of one collective by size on a team of n: log-log between the
 * points, flat below the first (latency-bound), proportional beyond the
 * last. Sizes as in hn_cost_coll_seconds. */
typedef struct hn_cost_curve {
    hn_coll_kind kind;
    hn_cost_engine engine;
    int n;
    int npoints;
    double bytes[HN_COST_MAX_POINTS]; /* increasing */
    double us[HN_COST_MAX_POINTS];    /* microseconds per call */
    int graph; /* 1: calls captured in a graph and replayed (what `via auto` reads in a capture); the
                  model's pipelines read the eager ones (0) */
} hn_cost_curve;

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
    int get;            /* p2p: receivers pull */
    int reference;      /* another library's run: its GEMM rate is fitted, the rest only checks the model */
} hn_cost_point;

/* The model's coefficients (hn_cost_fit makes them from measured
 * pipelines). */
typedef struct hn_cost_coeffs {
    double gemm_tflops_at_1t; /* bf16 GEMM rate at 1e12 flop per GPU, TFLOP/s */
    double gemm_gamma;        /* rate ~ flop^-gamma */
    double seq_overhead_s;    /* a sequential collective + GEMM beyond their parts */
    double kappa[2][2];       /* [gather, reduce][nccl, copy engine]: GEMM time lost per second of overlapped communication */
    double tau_s[2][2];       /* same: seconds per pipeline step */
    double chunk_s;           /* a GEMM cut in one more chunk (measured; 0 where tau holds it); where
                                 the profile has splits, they say it by shape instead */
    double stream_s;          /* one more stream in a pipeline (likewise) */
} hn_cost_coeffs;

/* What the profile's GEMM rates are fitted from: one shape of one dtype. */
typedef struct hn_cost_gemm_point {
    hn_dtype dtype;
    int64_t M, K, N;
    double tflops; /* per GPU, every GPU multiplying at once */
} hn_cost_gemm_point;

/* A GEMM cut in row chunks run back to back on `streams` streams (chunk
 * j on stream j % streams), as a pipeline runs its GEMM: its time over
 * the whole GEMM's, measured in the same rounds. What chunks cost is the
 * shape's own: the last wave of each chunk is part-empty, and two chunks
 * at once share the SMs. */
typedef struct hn_cost_split_point {
    int64_t M, K, N;
    int chunks, streams;
    double ratio;
} hn_cost_split_point;

#define HN_COST_MAX_SPLITS 48
#define HN_COST_MAX_SPLIT_RATIO 100.0

/* How much a GEMM slows while other traffic runs beside it: GEMM seconds
 * lost per second of that traffic; < 0 where not measured. */
enum { HN_TRAFFIC_CE, HN_TRAFFIC_NCCL, HN_TRAFFIC_LL, HN_TRAFFIC_SM, HN_TRAFFIC_COUNT };

#define HN_PROFILE_VERSION 1

struct hn_cost_profile {
    /* where it was measured */
    char model[96];   /* GPU model ("NVIDIA H200"), or "host" (the CPU emulation) */
    int count;        /* devices it was measured on; 0: any (a built-in default) */
    char backend[16]; /* cuda or host */
    char driver[48], cuda[24], nccl[24], date[32], hirnode[24];
    int builtin;      /* 1: a built-in default, not a file */
    char source[512]; /* the file, or "built-in default for ..." */
    /* the model's inputs */
    double gemm_tflops_at_1t[HN_COST_NDTYPES], gemm_gamma[HN_COST_NDTYPES]; /* bf16, f16, f32 */
    hn_cost_coeffs coef; /* kappa, tau, sigma, chunk and stream costs (its gemm_* is the pipelines' fit) */
    double hbm_bytes_per_s; /* a local copy (staging buffers) */
    int ncurves;
    hn_cost_curve curves[HN_COST_MAX_CURVES];
    /* measurements kept with it: the shapes it was tuned at (bench overlap
     * --shapes tuner), GEMM rates, interference, measured pipelines */
    int nshapes;
    int64_t shapes[HN_COST_MAX_SHAPES][3];
    int ngemm;
    hn_cost_gemm_point gemm[HN_COST_MAX_PIPES];
    double interference[HN_TRAFFIC_COUNT];
    int npipes;
    hn_cost_point pipes[HN_COST_MAX_PIPES];
    int nsplits;
    hn_cost_split_point splits[HN_COST_MAX_SPLITS];
};

/* The built-in default: the measurements of 2 and 4 H200s (cost.c, the
 * model's coefficients fitted to them). */
const hn_cost_profile *hn_cost_builtin(void);
/* Index of a dtype in the profile's GEMM rates (bf16 0, f16 1, f32 2; others as f32). */
int hn_cost_dtype_index(hn_dtype dtype);
/* The curve of (kind, engine) for n ranks: n's own, else the nearest team
 * size measured (ties: the larger); get falls back to put's; NULL: none. */
const hn_cost_curve *hn_cost_curve_of(const hn_cost_profile *p, hn_coll_kind kind, hn_cost_engine engine, int n);
/* The curve measured for exactly (kind, engine, n, graph), or NULL. */
const hn_cost_curve *hn_cost_curve_exact(const hn_cost_profile *p, hn_coll_kind kind, hn_cost_engine engine, int n,
                                         int graph);
/* A curve's seconds per call at `bytes` (as hn_cost_coll_seconds reads it). */
double hn_cost_curve_at(const hn_cost_curve *c, double bytes);

/* The model's pieces, for tests, the tuner and `hirnode bench overlap`
 * (prof NULL: the built-in default). */
double hn_cost_gemm_seconds(const hn_cost_profile *prof, double flops, hn_dtype dtype);
/* The time of the GEMM M x K x N in `chunks` row chunks on `streams`
 * streams over the whole GEMM's, from the profile's splits: of the
 * measured shape nearest by flop (log-log between the two around it),
 * at the chunk count measured (linear in log2 of chunks between two,
 * the nearest beyond them), streams 1 or 2 and more; 1 for one chunk on
 * one stream; 0 where the profile has no split of that stream count. */
double hn_cost_split_ratio(const hn_cost_profile *prof, int64_t M, int64_t K, int64_t N, int chunks, int streams);
/* Time of one collective of `bytes` (allgather: output, reduce_scatter:
 * input, allreduce: buffer, broadcast: buffer) over n ranks; < 0 when the
 * profile has no curve for it (the latency path where not measured); on
 * one rank, a local copy of `bytes`. */
double hn_cost_coll_seconds(const hn_cost_profile *prof, hn_coll_kind kind, hn_cost_engine engine, int n,
                            double bytes);
/* Across nodes, whether an allreduce of `bytes` over nodes x per_node
 * ranks is faster as reduce-scatter inside each node, allreduce of
 * bytes / per_node across the nodes, allgather inside (src/sched/
 * lower_hier.c) than as one NCCL call on the whole team. The node's part
 * from the profile's NCCL curves of per_node ranks; the network's from
 * HN_COST_NET_GBS per GPU and HN_COST_NET_LATENCY_S a call (no profile
 * measures a network yet): the ring's bytes over the network per rank,
 * 2 (W - 1) / W x bytes flat against 2 (N - 1) / N x bytes / per_node. */
#define HN_COST_NET_GBS 25.0          /* a 200 Gb/s NIC per GPU */
#define HN_COST_NET_LATENCY_S 20e-6
int hn_cost_hier_allreduce(const hn_cost_profile *prof, double bytes, int nodes, int per_node);
/* The smallest size (bytes, as above) from which `via auto` picks p2p
 * for kind over n ranks; SIZE_MAX: never. */
size_t hn_cost_crossover(hn_coll_kind kind, int n);
/* The latency path's estimates for teams of 5 to 8 (teams of 2 to 4 go
 * by via_auto.c's measured tables): twoshot = 0, the size from which `via
 * auto` no longer picks it (0: never picks it, and for any other team
 * size); twoshot = 1, the size from which `via ll` runs two-shot
 * (SIZE_MAX: never). */
size_t hn_cost_ll_crossover(hn_coll_kind kind, int n, int twoshot);

/* ---- fitting (docs/SCHEDULER.md) ---- */

/* The built-in default's coefficients: hn_cost_fit(hn_cost_points). */
extern const hn_cost_coeffs hn_cost_model;
extern const hn_cost_point hn_cost_points[];
extern const int hn_cost_npoints;

/* The bounds of the model's coefficients (what a profile file may hold;
 * the fit stays within them): kappa, and tau, sigma, chunk and stream
 * costs in seconds. */
#define HN_COST_MAX_KAPPA 100.0
#define HN_COST_MAX_SECONDS 1.0

/* Least squares of the model on the points (non-negative coefficients),
 * with the collective curves of `curves` (NULL: the built-in's); its
 * chunk_s and stream_s are taken as measured and kept. Kappa and tau of a
 * class without points: `fallback`'s (NULL: the built-in's). */
void hn_cost_fit(const hn_cost_profile *curves, const hn_cost_point *pts, int n, const hn_cost_coeffs *fallback,
                 hn_cost_coeffs *out);
/* rate = F1 (flop / 1e12)^-gamma through points of one dtype (log-log
 * least squares, gamma within +-HN_COST_MAX_GAMMA; one point: gamma 0). 0
 * when there is none. */
#define HN_COST_MAX_GAMMA 4.0
int hn_cost_fit_gemm(const hn_cost_gemm_point *pts, int n, hn_dtype dtype, double *tflops_at_1t, double *gamma);

/* The communicator a collective goes through: `via auto` (and, where
 * default_auto, `via default`) picks the latency path, NCCL or the p2p
 * rings by kind, size, dtype and team size — for teams of 2 to 4 from
 * tables measured eagerly and in graphs (graph: the call is captured);
 * any other via is kept. count as in hn_coll_args. Deterministic: every
 * member picks the same. */
hn_via hn_via_resolve(hn_via via, int default_auto, int graph, hn_coll_kind kind, size_t count, hn_dtype dtype,
                      int n);
/* The same with the machine's profile: where `hirnode tune` measured this
 * team size's curves of the latency path, NCCL and the p2p rings (put) in
 * this mode (eager or graph), the fastest of them at this size (the
 * latency path only within the sizes it was measured at); otherwise, and
 * for the built-in default, hn_via_resolve's tables. */
hn_via hn_via_resolve_prof(const hn_cost_profile *prof, hn_via via, int default_auto, int graph, hn_coll_kind kind,
                           size_t count, hn_dtype dtype, int n);
/* The latency path's algorithm for a collective `via ll` names none of:
 * the measured tables' one-shot or two-shot (two-shot beyond the sizes
 * where auto takes the latency path); allgather, reduce_scatter: one-shot. */
hn_coll_algo hn_via_ll_algo(int graph, hn_coll_kind kind, size_t count, hn_dtype dtype, int n);
/* The same for the fused allreduce + residual + RMSNorm of `bytes` (the
 * allreduce's) over n ranks: one-shot below 768 KiB, where it was ahead
 * of two-shot at every size measured on 2 and 4 GPUs (8-512 KiB, rows of
 * 4096 and 8192), two-shot from there. */
hn_coll_algo hn_via_ll_norm_algo(size_t bytes, int n);
/* 1 once the latency path's crossovers are measured (via_auto.c): the default
 * of HIRNODE_AUTO_LL follows it. */
extern const int hn_cost_ll_measured;
/* Whether `via auto` may pick the latency path, for a value of
 * HIRNODE_AUTO_LL ("1" yes, "0" no, "auto" or anything else: `measured`). */
int hn_auto_ll_on(const char *setting, int measured);
/* The same for this process's setting and hn_cost_ll_measured. */
int hn_auto_picks_ll(void);
/* Whether collectives without `via` pick like `via auto` on this backend
 * (its default_via_auto, unless HIRNODE_DEFAULT_VIA=nccl). */
int hn_default_via_auto(const hn_device_ops *dev);

#endif

/* What `hirnode tune` measures for the machine profile (tune.c): GEMM
 * rates, the cost of chunks and streams, local copies, how much a GEMM
 * slows beside each kind of traffic, the collectives' curves and
 * hirnode's own pipelines, then the model's fit. Uses a runtime of its own
 * through the public API; any thread, one tune at a time per runtime. */
#ifndef HN_SCHED_TUNE_H
#define HN_SCHED_TUNE_H

#include "../model/cost.h"
#include "hirnode/runtime.h"

typedef enum hn_tune_size {
    HN_TUNE_AUTO, /* by the backend: GPU-sized on GPUs, host-sized on the CPU emulation */
    HN_TUNE_GPU,
    HN_TUNE_HOST,
    HN_TUNE_TINY, /* the least that drives every step (tests) */
} hn_tune_size;

typedef struct hn_tune_opts {
    hn_runtime_config cfg; /* the devices: ndev, backend, timeout */
    hn_tune_size size;
    /* the pipelines' shapes (M, K, N; bench overlap --shapes tuner lists
     * them); 0: the size's defaults */
    int nshapes;
    int64_t shapes[HN_COST_MAX_SHAPES][3];
    /* called before each step (1 .. nsteps), on the calling thread */
    void (*progress)(void *ctx, int step, int nsteps, const char *what);
    void *progress_ctx;
} hn_tune_opts;

/* Measures the machine of o->cfg and fits the model: *out is a complete
 * profile (its source empty), what could not be measured (communication
 * on one device) taken from the built-in default for the model. HN_OK, or
 * the error with one line into err. */
hn_status_t hn_tune(const hn_tune_opts *o, hn_cost_profile *out, hn_strbuf *err);

/* The model's fit (hn_tune's last step) on what p holds: the GEMM rates'
 * power laws from its GEMM points, the coefficients from its pipelines
 * (none: the built-in default's, its measured chunk and stream costs
 * kept). `hirnode tune --refit` runs it on a profile file, so that a
 * model changed since the file was written can be fitted to the same
 * measurements without measuring again. */
void hn_tune_fit(hn_cost_profile *p);

/* The median of `reps` runs of p (after `warmup` runs), seconds per run by
 * the host clock around each whole run (every rank joined). */
hn_status_t hn_tune_time(hn_runtime *rt, const hn_program *p, const hn_run_args *args, int warmup, int reps,
                         double *median_s);
/* The median seconds per run of each of n programs (NULL entries
 * skipped), their runs interleaved: `warmup` rounds, then `reps` rounds of
 * one run of each, every other round in the opposite order, so that the
 * machine's drift over the minutes the rounds take (clocks that fall as
 * the GPUs warm) reaches every program alike; by the host clock around
 * each whole run. On an error (a run's) median_s is not written. */
hn_status_t hn_tune_time_rounds(hn_runtime *rt, hn_program *const *progs, int n, const hn_run_args *args, int warmup,
                                int reps, double *median_s);
/* The same of p captured once in a graph: the median of `reps` replays
 * (after `warmup`, at least one), each with its sync. */
hn_status_t hn_tune_time_graph(hn_runtime *rt, const hn_program *p, const hn_run_args *args, int warmup, int reps,
                               double *median_s);

#endif

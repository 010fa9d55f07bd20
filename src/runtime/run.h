/* Runs and launches of a prepared configuration (run.c): what the public
 * hn_runtime_run and hn_runtime_launch do once the call's parameters and
 * bindings are resolved, and what the --check driver calls. From the
 * caller's thread. */
#ifndef HN_SCHED_RUN_H
#define HN_SCHED_RUN_H

#include "../ranks/runtime_int.h"

/* Runs p (prepared for params: hn_runtime_prepare); io_ptrs[k][local rank] for
 * inputs then outputs; poison fills fresh allocations with NaN (and is
 * never replayed from a graph). */
hn_status_t hn_runtime_run_bound(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                 void *const *const *io_ptrs, int poison);
/* A run of p for a caller that resolved its parameters, prepared it
 * (hn_runtime_prepare) and checked its bindings (hn_bind_check) itself, the
 * --check driver: what hn_runtime_run does once its call is resolved. p is
 * prepared again only when its configuration was given up since (device
 * memory ran short: hn_prepare_release), saying why in the error text when
 * that fails. */
hn_status_t hn_runtime_run_prepared(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                    void *const *const *io_ptrs);
/* Launches p (prepared) on the caller's streams (streams[local rank], NULL: the
 * runtime's), after the preamble of the call (hn_runtime_enter). */
hn_status_t hn_runtime_launch_bound(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                    void *const *const *io_ptrs, void *const *streams);
/* Runs the reference block on rank 0 with global tensors (io_ptrs[k]). */
hn_status_t hn_runtime_run_reference(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                     void *const *io_ptrs);

#endif

/* What a runtime keeps per (program, parameter values) (config_cache.c):
 * prepared configurations, lowered copies, graphs, and the one forget
 * that drops any of it. From the caller's thread, between jobs. */
#ifndef HN_SCHED_CONFIG_CACHE_H
#define HN_SCHED_CONFIG_CACHE_H

#include "../ranks/runtime_int.h"

/* 1 when p (as it runs: lowered) was prepared for these parameters, its
 * entry then marked used when `touch`. */
int hn_cache_verified(hn_runtime *rt, const hn_program *p, const int64_t *params, int touch);
/* Marks p prepared for these parameters (the least recently used of the
 * last HN_VERIFIED_CONFIGS goes), with what its bindings need (need: see
 * hn_verified, owned by the cache from here; NULL: not known) and where
 * peers reach its buffers (reach, reach_none, reach_eager: see
 * hn_verified; reach owned by the cache from here). */
void hn_cache_remember(hn_runtime *rt, const hn_program *p, const int64_t *params, size_t *need, int nio,
                       char *reach, int reach_none, int reach_eager);
/* The entry of p (as it runs: lowered) prepared for these parameters, or
 * NULL. */
const hn_verified *hn_cache_config(hn_runtime *rt, const hn_program *p, const int64_t *params);

/* The runtime's lowered copy of p for these parameter values, made (by
 * hn_sched_lower, and kept until forgotten) when needed; p itself when it
 * has nothing to lower. *out NULL with diagnostics when lowering fails. */
hn_status_t hn_runtime_lowered(hn_runtime *rt, const hn_program *p, const int64_t *params,
                               const hn_program **out, hn_strbuf *diag);
/* The lowered copy made before, or p. */
/* Whether p runs lowered here: its pipelined statements and stream loops,
 * and across nodes of several ranks its allreduces of every rank. */
int hn_runtime_lowers(const hn_runtime *rt, const hn_program *p);
const hn_program *hn_runtime_lowered_of(hn_runtime *rt, const hn_program *p, const int64_t *params);

/* The graphs (graph.c makes and frees them): add links one in (an
 * automatic one marked used), remove unlinks it. */
void hn_cache_add_graph(hn_runtime *rt, hn_graph *g);
void hn_cache_remove_graph(hn_runtime *rt, hn_graph *g);
/* The setting graphs = 1, for a configuration (program, parameters,
 * bindings, streams): its automatic graph if it has one (marked used);
 * else NULL, with *again 1 when it came once before (the mark is taken:
 * it is to be captured now), 0 when it is new (marked). */
hn_graph *hn_cache_auto_graph(hn_runtime *rt, const hn_program *p, const int64_t *params, void *const *const *io,
                              void *const *streams, int *again);
/* The least recently used automatic graph when there are as many as are
 * kept, else NULL: what goes before another is captured. */
hn_graph *hn_cache_auto_victim(hn_runtime *rt);
/* After a failure, every graph unusable: abort raises their abort words
 * (device-side waits give up; any thread: the watchdog's too), drop frees
 * their backend graphs once every stream of the runtime is idle. */
void hn_cache_graphs_abort(hn_runtime *rt);
void hn_cache_graphs_drop(hn_runtime *rt);
/* After a failure, before anything that could wait on a device (a graph's
 * or a communicator's destruction frees device memory, which waits for
 * every kernel): every device-side wait released first — the graphs'
 * abort words, every communicator aborted (the latency path's abort
 * words, the rings' flags, ncclCommAbort) —, then every rank's streams
 * drained within a bound, then the graphs dropped. Whether the teams are
 * dead (to be made anew) into *dead. A stream that does not drain (a
 * kernel that never sees an abort word) makes the runtime lost (its text
 * says which ranks), and nothing that would wait on it is done: HN_OK
 * only when every stream drained. */
hn_status_t hn_cache_abort_all(hn_runtime *rt, int *dead);

/* Forgets what is kept for program p (NULL: for every program), or with
 * HN_FORGET_ALL_BUT for every program but p: its prepared configurations
 * (its next run is prepared anew) and its graphs (unusable, `why`); with
 * HN_FORGET_BUFFERS also its cached buffers on every rank (the devices
 * idle: the caller finished the launches in flight); with
 * HN_FORGET_LOWERED (p given) also p's lowered copies, and all of that of
 * theirs. */
enum { HN_FORGET_ALL_BUT = 1, HN_FORGET_BUFFERS = 2, HN_FORGET_LOWERED = 4 };
void hn_cache_forget(hn_runtime *rt, const hn_program *p, unsigned how, const char *why);
/* Frees the prepared configurations and lowered copies (the runtime's
 * end; its graphs are freed before). */
void hn_cache_fini(hn_runtime *rt);

#endif

/* Graphs (graph.c): a program captured for one configuration and replayed
 * with one backend launch per rank; the public hn_runtime_capture,
 * _replay and _graph_destroy are defined there. From the caller's thread. */
#ifndef HN_SCHED_GRAPH_H
#define HN_SCHED_GRAPH_H

#include "../ranks/runtime_int.h"

/* How a replay launches every rank's graph (the setting replay,
 * HIRNODE_REPLAY; graph.c says what each costs). */
typedef enum hn_replay_path { HN_REPLAY_BELLS, HN_REPLAY_JOBS, HN_REPLAY_CALLER } hn_replay_path;
/* "bells", "jobs" or "caller" into *path; HN_ERR_INVALID (logged) else. */
hn_status_t hn_replay_path_parse(const char *text, int *path);

/* Replays g on every rank's stream (streams NULL: the runtime's), like a
 * launch: joined by hn_runtime_finish_launches. */
hn_status_t hn_runtime_replay_streams(hn_runtime *rt, hn_graph *g, void *const *streams);
/* The setting graphs = 1: a run or launch of a configuration seen before
 * is replayed from its graph (captured the second time). HN_OK with *out
 * the graph to replay, or NULL to run eagerly (also when a capture failed:
 * logged, and the configuration prepared again); an error of the launches
 * in flight or of that preparation otherwise. */
hn_status_t hn_runtime_auto_graph(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                  void *const *const *io, void *const *streams, hn_graph **out);
/* HN_ERR_INVALID with the text saying g cannot be replayed, and why. */
hn_status_t hn_graph_refuse(hn_runtime *rt, const hn_graph *g);
/* Captures g's program again with io on every rank (the launches in
 * flight finished) and puts the capture into each rank's backend graph in
 * place (capture_update), under a new id with g's epoch words. m (nm
 * moves, or NULL): how the bindings move, for the backends to learn from.
 * On a failure g is unusable. */
hn_status_t hn_graph_recapture(hn_runtime *rt, hn_graph *g, void *const *const *io, const hn_moved *m, int nm);

/* A launch of lp (prepared: params, io) on the caller's streams while the
 * caller captures them (torch.cuda.graph), where its communication needs
 * a graph's state (the p2p communicator's flags relative to an epoch):
 * issued as a launch, with a graph of its own (id, epoch words, the
 * communicators' banks) in every origin, and ended on each stream as a
 * capture of the runtime's ends (the communicators' end of a replay, the
 * epoch raised). Each replay of the caller's graph then runs as a replay
 * of the runtime's would. The caller's captures keep that graph
 * (native_capture_keep); once they let go, hn_graphs_collect frees it. */
hn_status_t hn_graph_launch_foreign(hn_runtime *rt, const hn_program *lp, uint64_t prog, const int64_t *params,
                                    void *const *const *io, void *const *streams);
/* Frees the graphs of launches inside captures of the caller's that the
 * captures let go (from the caller's thread, between calls). */
void hn_graphs_collect(hn_runtime *rt);
/* Frees every graph, their replays finished first (the runtime's end, on
 * the rank threads, before the teams go). */
void hn_graphs_free(hn_runtime *rt);

#endif

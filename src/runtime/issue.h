/* Issuing a prepared program on every rank (issue.c). From the caller's
 * thread; the rank threads do the work. */
#ifndef HN_SCHED_ISSUE_H
#define HN_SCHED_ISSUE_H

#include "../ranks/runtime_int.h"

/* The preamble of every call that issues work (runs, launches, captures,
 * replays): the launches in flight finish first — all of them (prog 0), or
 * for a launch of program `prog` (its uid; a replay: hn_replay_key of it)
 * only when they are of another program (errors of asynchronous work name
 * the instructions of the program in flight), when a replay follows eager
 * launches of it (an eager launch after replays waits in hn_issue_launch:
 * with graphs = 1 a launch may replay), or when one of them failed (its
 * error is this call's)
 * — then a call with nothing in flight starts with an empty error slot,
 * and a lost device refuses (HN_ERR_DEVICE_LOST, with its text): its
 * health polled when `poll`, else as last polled. */
hn_status_t hn_runtime_enter(hn_runtime *rt, uint64_t prog, int poll);
/* What a replay of a graph of program `prog` passes to hn_runtime_enter:
 * a key of its own, so that eager launches of a program and replays of
 * its graphs are never in flight together — the switch from one to the
 * other waits for what is in flight. A replay starts the communicators
 * afresh on its own flags and ends with a barrier of the ranks, but
 * nothing at its start waits for a peer still in its eager work, which
 * shares the staging and the program's buffers with it. */
static inline uint64_t hn_replay_key(uint64_t prog) { return prog | (1ull << 63); }
/* The launches (and replays) in flight finished: every stream of every
 * rank synchronised, their errors collected (hn_runtime_finish_run). What
 * anything that needs the devices idle (memory, a new configuration, a
 * forget, freeing a graph) calls first. HN_OK when none is in flight. */
hn_status_t hn_runtime_finish_launches(hn_runtime *rt);
/* The same for a call that returns nothing (free, forget, stream and
 * graph destroy): a failure of the launches is kept (rt->pending) for the
 * next sync, query or call that enters, which returns it once. */
void hn_runtime_collect_launches(hn_runtime *rt);
hn_status_t hn_runtime_take_pending(hn_runtime *rt);

/* The start of a run (the error slot emptied, errors naming p's
 * instructions, the communicators reset) and its end: after a failure
 * (st, or the abort flag) every graph is made unusable, the communicators
 * are aborted (and their teams made anew when dead), the devices
 * recovered, and the error kept is returned (HN_ERR_DEVICE_LOST when a
 * device was lost); the communicators are reset. */
void hn_runtime_begin_run(hn_runtime *rt, const hn_program *p);
hn_status_t hn_runtime_finish_run(hn_runtime *rt, hn_status_t st);

/* lp (as it runs: lowered) with these parameters and bindings (io[k][local rank],
 * inputs then outputs): run, every stream synchronised at the end (poison:
 * fresh allocations filled with NaN); the reference block on rank 0 with
 * global tensors (io[k]); launched on the caller's streams (streams[local rank],
 * NULL: the runtime's), joined by hn_runtime_finish_launches (prog: the
 * caller's program's uid); issued into g's capture, left open (job A of a
 * capture; graph.c ends it). */
hn_status_t hn_issue_run(hn_runtime *rt, const hn_program *lp, const int64_t *params, void *const *const *io,
                         int poison);
hn_status_t hn_issue_reference(hn_runtime *rt, const hn_program *lp, const int64_t *params, void *const *io);
hn_status_t hn_issue_launch(hn_runtime *rt, const hn_program *lp, uint64_t prog, const int64_t *params,
                            void *const *const *io, void *const *streams);
/* a launch inside a capture of the caller's, with g's state (graph.c
 * hn_graph_launch_foreign) */
hn_status_t hn_issue_launch_into(hn_runtime *rt, hn_graph *g, uint64_t prog, const int64_t *params,
                                 void *const *const *io, void *const *streams);
hn_status_t hn_issue_capture(hn_runtime *rt, hn_graph *g, void *const *const *io, void *const *streams);

#endif

/* Communicators and their teams (teams.c). From the caller's thread,
 * between runs, unless said otherwise. */
#ifndef HN_SCHED_TEAMS_H
#define HN_SCHED_TEAMS_H

#include "runtime_int.h"

/* The communicator of each `via` (default: the device backend's own, nccl:
 * NCCL where there is CUDA, p2p: the rings, ll: the latency path), one
 * instance per distinct one, set up from the settings. At creation. */
hn_status_t hn_teams_init(hn_runtime *rt);
/* Every team destroyed, then every communicator (the runtime's end). */
void hn_teams_fini(hn_runtime *rt);

/* The communicator of `via`, and its team of these ranks (NULL if none).
 * Any thread: read-only while runs issue. */
const hn_comm_slot *hn_runtime_comm(const hn_runtime *rt, hn_via via);

/* Caller memory registered across processes (hn_runtime.regs, made by
 * src/runtime/register.c): the entry of rank `rank` whose allocation holds
 * p (that rank's own address), or NULL; hn_comm_setup.peer_addr (ctx: the
 * runtime): where this process reaches p — the mapping here inside a
 * registered allocation, else p itself; and the bytes from p to the end
 * of its registered allocation, or SIZE_MAX where none holds it. */
const hn_reg *hn_reg_find(const hn_runtime *rt, int rank, uintptr_t p);
void *hn_reg_peer_addr(void *ctx, int rank, void *p);
size_t hn_reg_room(const hn_runtime *rt, int rank, const void *p);
hn_comm_team *hn_runtime_team(hn_runtime *rt, hn_via via, const int *ranks, int n);

/* When more of these ranks share a GPU than the communicator of `via`
 * takes (hn_comm_ops.ranks_per_device): that limit, with the first rank on
 * the device in *a and the one too many in *b; else 0. */
int hn_teams_shared_device(const hn_runtime *rt, hn_via via, const int *ranks, int n, int *a, int *b);
/* The team of these ranks on the communicator of `via`, created when new
 * (joined later), needing `reserve` bytes of staging on each member. */
hn_status_t hn_teams_need(hn_runtime *rt, hn_via via, const int *ranks, int n, size_t reserve);
/* Every member of every new team joins it on its own thread, all at once;
 * then each warms its communicators up and reserves what is needed. */
hn_status_t hn_teams_join_new(hn_runtime *rt);

/* Aborts every communicator (any thread: the watchdog's too); 1 when one
 * says its teams are dead and must be made anew. */
int hn_teams_abort(hn_runtime *rt);
/* What hn_teams_abort returned, applied: dead teams are made anew at the
 * end of the run; an abort that never returned makes the runtime lost.
 * Returns whether the teams are dead. */
int hn_teams_aborted(hn_runtime *rt, int how);
/* The communicators' state between runs, reset. */
void hn_teams_reset(hn_runtime *rt);
/* Rank `rank`'s stream handle s goes away: the communicators forget it
 * (hn_comm_ops.forget_stream). On the rank's thread. */
void hn_teams_forget_stream(hn_runtime *rt, int rank, const hn_dstream *s);
/* The communicators' state in the world's memory reset (once for the
 * world: by rank 0 in process mode, between barriers). */
void hn_teams_reset_shared(hn_runtime *rt);
/* Destroys every team; how many there were. What was prepared with them
 * (graphs, prepared configurations) is the caller's to forget. */
int hn_teams_destroy(hn_runtime *rt);

/* How `via auto` (or default) that resolved to `resolved` goes for the
 * team ranks[0 .. n-1]: a team across nodes takes NCCL (the latency path
 * and the peer copies stay inside a node); `resolved` otherwise. */
hn_via hn_teams_via(const hn_runtime *rt, hn_via asked, hn_via resolved, const int *ranks, int n);

#endif

/* One rank's resources (rank.c) and its timing markers (run_timing.c).
 * The hn_rank_* calls run on the rank's own thread, inside a job (pool.h),
 * unless said otherwise. */
#ifndef HN_SCHED_RANK_H
#define HN_SCHED_RANK_H

#include "runtime_int.h"

/* Jobs: the rank's device, caller stream and events (init); everything
 * made since, undone, safe on partial state (fini). */
hn_status_t hn_rank_init(hn_rank *r, void *arg);
hn_status_t hn_rank_fini(hn_rank *r, void *arg);

/* Pool streams are made between runs, for what the dry run saw (bit k of
 * `used`: stream k), each with its own cuBLASLt workspace on CUDA: a
 * device allocation, which must not happen while collectives run. */
hn_status_t hn_rank_make_streams(hn_rank *r, unsigned used);
/* Pool stream idx; an internal error (logged) if it was not made. */
hn_status_t hn_rank_stream(hn_rank *r, int idx, hn_dstream **out);
/* Event idx of the pool of communications' events, grown as needed. */
hn_status_t hn_rank_comm_event(hn_rank *r, int idx, hn_devent **out);

/* The cached block of (program, alloc instruction, occurrence in the run),
 * made or grown to `bytes` (between runs: preparations size the cache). */
hn_status_t hn_rank_alloc_cached(hn_rank *r, const hn_program *p, int instr, int occurrence,
                                 size_t bytes, void **out);
/* Frees this rank's cached blocks of program `prog` (all_but = 0), or of
 * every program but `prog` (all_but = 1). Between runs. */
void hn_rank_free_blocks_of(hn_rank *r, uint64_t prog, int all_but);

/* Synchronises every stream of the rank; a failure (a timeout, a device
 * error) is reported to the error slot, named after the last instruction
 * issued. */
hn_status_t hn_rank_sync_all(hn_rank *r);
/* Job: the end of the launches in flight on this rank (every stream
 * synchronised, the caller stream current again, no launch to follow). */
hn_status_t hn_rank_sync_job(hn_rank *r, void *arg);
/* Job, after a failure once every abort word is raised: polls the rank's
 * streams (the caller stream and the pool's) until they are idle or the
 * time *(const double *)arg (hn_now's clock) has passed; HN_ERR_TIMEOUT
 * then (a kernel that never ends: nothing may wait on the device). Reports
 * nothing. */
hn_status_t hn_rank_drain(hn_rank *r, void *arg);

/* A launch's stream on rank r: the embedder's (native; adopted, the handle
 * kept for the next launch on the same stream) or, for NULL, the
 * runtime's caller stream. */
hn_status_t hn_rank_launch_stream(hn_rank *r, void *native, hn_dstream **out);

/* The steps that order a launch, a capture or a replay with its stream s,
 * in this order (rank.c says why): */
enum {
    HN_LAUNCH_FOLLOW = 1, /* s waits for the rank's launch in flight (`previous`: the native
                             stream it was issued on) when that ran on another stream */
    HN_LAUNCH_FORK = 2,   /* every pool stream waits for what s holds */
    HN_LAUNCH_JOIN = 4,   /* s waits for every pool stream */
    HN_LAUNCH_DONE = 8,   /* the launch is marked done on s (what the next one follows) */
};
hn_status_t hn_rank_order_launch(hn_rank *r, hn_dstream *s, unsigned steps, const void *previous);
/* Its first and last steps alone, inline: what a replay takes, around the
 * backend's launch of the rank's graph. */
static inline hn_status_t hn_rank_launch_follow(hn_rank *r, hn_dstream *s, const void *previous)
{
    const hn_device_ops *dev = r->rt->dev;
    if (previous != NULL && previous != dev->stream_native(s)) {
        hn_origin o = {&r->rt->sink, r->rank, -1, NULL, NULL};
        return dev->stream_wait_event(s, r->launch_done, &o);
    }
    return HN_OK;
}

static inline hn_status_t hn_rank_launch_done(hn_rank *r, hn_dstream *s)
{
    const hn_device_ops *dev = r->rt->dev;
    hn_status_t st = dev->event_record(r->launch_done, s);
    /* on an embedder's stream, what a sync waits for (rank.c) */
    if (st == HN_OK && s != r->caller && !dev->stream_capturing(s))
        st = dev->event_record(r->ran_done, s);
    return st;
}

/* Timed runs (run_timing.c), for benchmarks: while on, every run records a
 * timing marker on each rank's caller stream before its body is issued and
 * after, and after the run's sync notes the time between them — the
 * device's time for the body, host gaps included. Between runs only, from
 * the caller's thread. */
void hn_runtime_time_runs(hn_runtime *rt, int on);
/* The slowest rank's body in the last run, seconds; -1 if not timed. */
double hn_runtime_run_seconds(const hn_runtime *rt);
/* The rank's side: a marker before (end 0) or after (end 1) the body;
 * the time between them once synced; the markers freed (rank_fini). */
hn_status_t hn_rank_run_mark(hn_rank *r, int end);
void hn_rank_run_measure(hn_rank *r);
void hn_rank_run_timers_free(hn_rank *r);

#endif

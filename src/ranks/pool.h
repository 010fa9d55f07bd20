/* The rank threads of a runtime and the jobs handed to them (pool.c). A
 * job runs on every rank thread at once; the caller's thread waits for
 * all; a doorbell hands one rank's thread a job of its own. Calls from the
 * caller's thread only, one at a time. */
#ifndef HN_SCHED_POOL_H
#define HN_SCHED_POOL_H

#include "runtime_int.h"

/* Runs fn(r, arg) on every rank thread (the ranks this runtime drives) at once and waits for all; the
 * first error of theirs (a real one before the "aborted" it causes).
 * watched: past the run's deadline (timeout + grace) the watchdog names
 * the ranks still busy and the instruction each is in (hn_runtime_fail),
 * then calls rt->on_deadline, which aborts the communicators. Jobs that
 * cannot wait on another rank (memory, setup of a rank's own device) are
 * not watched: however long they take (a large allocation under a
 * sanitizer), they are no hang. */
hn_status_t hn_pool_exec(hn_runtime *rt, hn_job_fn fn, void *arg, int watched);
/* The same, watched. */
hn_status_t hn_runtime_exec_all(hn_runtime *rt, hn_job_fn fn, void *arg);

/* Doorbells: ring hands fn(r, arg) to the thread of local rank `local`
 * (rt->ranks[local]) alone, without the
 * job handoff's lock or a futex (the thread spins on its bell between jobs,
 * up to the setting spin_us, then sleeps and a ring wakes it); answers
 * waits until every local rank of [from, to) has answered its last ring (past
 * the run's deadline the watchdog names those that have not) and returns
 * the first error of theirs. From the caller's thread, between jobs; fn
 * must not wait for another rank. */
void hn_pool_ring(hn_runtime *rt, int local, hn_job_fn fn, void *arg);
hn_status_t hn_pool_answers(hn_runtime *rt, int from, int to);

/* The job handoff's lock and conditions (init before start, fini after
 * stop); the threads of the local ranks (rt->ranks[0 .. nlocal-1]), *nthreads of them started also on
 * failure; stop tells the started ones to quit and joins them. */
void hn_pool_init(hn_runtime *rt);
hn_status_t hn_pool_start(hn_runtime *rt, int *nthreads);
void hn_pool_stop(hn_runtime *rt, int nthreads);
void hn_pool_fini(hn_runtime *rt);

#endif

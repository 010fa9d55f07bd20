/* The rank threads: one per rank for the runtime's life, each driving its
 * device. A job is handed to all of them at once and joined; idle threads
 * spin a while for the next one, and past a run's deadline a watchdog
 * names the ranks still busy. */
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "pool.h"
#include "run_error.h"

/* job_status of a rank that has not finished its job yet */
#define JOB_BUSY ((hn_status_t)1)

/* Spins (yielding) up to `us` microseconds for *v != old; 1 if it changed.
 * Back-to-back runs then cost no futex wake-ups. */
static int spin_until_changed(const uint64_t *v, uint64_t old, double us)
{
    double end = hn_now() + us * 1e-6;
    do {
        if (__atomic_load_n(v, __ATOMIC_ACQUIRE) != old)
            return 1;
        sched_yield();
    } while (hn_now() < end);
    return 0;
}

static void *rank_main(void *arg)
{
    hn_rank *r = arg;
    hn_runtime *rt = r->rt;
    uint64_t seen = 0;
    for (;;) {
        hn_job_fn fn;
        void *job_arg;
        hn_status_t st;
        spin_until_changed(&rt->job_gen, seen, rt->spin_us);
        pthread_mutex_lock(&rt->mu);
        while (__atomic_load_n(&rt->job_gen, __ATOMIC_ACQUIRE) == seen && !rt->quit)
            pthread_cond_wait(&rt->cv_job, &rt->mu);
        if (rt->quit) {
            pthread_mutex_unlock(&rt->mu);
            break;
        }
        seen = __atomic_load_n(&rt->job_gen, __ATOMIC_ACQUIRE);
        fn = rt->job_fn;
        job_arg = rt->job_arg;
        pthread_mutex_unlock(&rt->mu);

        st = fn(r, job_arg);
        __atomic_store_n(&r->current_instr, -1, __ATOMIC_RELAXED);

        pthread_mutex_lock(&rt->mu);
        rt->job_status[r->rank] = st;
        __atomic_add_fetch(&rt->job_done, 1, __ATOMIC_RELEASE);
        pthread_cond_signal(&rt->cv_done);
        pthread_mutex_unlock(&rt->mu);
    }
    return NULL;
}

/* Past the deadline, a watchdog names the ranks still busy and where; its
 * hook (the layer above) aborts every communicator, which releases a rank
 * stuck in one. */
static void watchdog(hn_runtime *rt)
{
    for (int i = 0; i < rt->n; i++) {
        int busy;
        pthread_mutex_lock(&rt->mu);
        busy = rt->job_status[i] == JOB_BUSY;
        pthread_mutex_unlock(&rt->mu);
        if (busy) {
            char msg[128];
            snprintf(msg, sizeof(msg), "rank %d is still busy after %.0f s: the watchdog aborts the run", i,
                     rt->cfg.timeout_s);
            hn_runtime_fail(rt, i, __atomic_load_n(&rt->ranks[i].current_instr, __ATOMIC_RELAXED),
                            HN_ERR_TIMEOUT, msg);
        }
    }
    if (rt->on_deadline != NULL)
        rt->on_deadline(rt);
}

hn_status_t hn_pool_exec(hn_runtime *rt, hn_job_fn fn, void *arg, int watched)
{
    hn_status_t st = HN_OK;
    double deadline;
    int barked = !watched;
    pthread_mutex_lock(&rt->mu);
    rt->job_fn = fn;
    rt->job_arg = arg;
    __atomic_store_n(&rt->job_done, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < rt->n; i++)
        rt->job_status[i] = JOB_BUSY;
    __atomic_add_fetch(&rt->job_gen, 1, __ATOMIC_ACQ_REL);
    pthread_cond_broadcast(&rt->cv_job);
    pthread_mutex_unlock(&rt->mu);
    deadline = hn_now() + rt->cfg.timeout_s + rt->watchdog_grace_s;
    for (;;) {
        /* the caller's thread is blocked in this call anyway: by default it
         * spins until the run ends, so a long run does not end with a
         * wake-up (on the 4xH200 machine ~180 µs per run) */
        double end = hn_now() + (rt->join_spin ? rt->cfg.timeout_s : rt->spin_us * 1e-6);
        while (__atomic_load_n(&rt->job_done, __ATOMIC_ACQUIRE) < rt->n && hn_now() < end)
            sched_yield();
        pthread_mutex_lock(&rt->mu);
        while (__atomic_load_n(&rt->job_done, __ATOMIC_ACQUIRE) < rt->n) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            if (pthread_cond_timedwait(&rt->cv_done, &rt->mu, &ts) != 0 && hn_now() > deadline)
                break;
        }
        if (__atomic_load_n(&rt->job_done, __ATOMIC_ACQUIRE) == rt->n) {
            pthread_mutex_unlock(&rt->mu);
            break;
        }
        pthread_mutex_unlock(&rt->mu);
        if (!barked) {
            watchdog(rt);
            barked = 1;
        }
        deadline = hn_now() + 3600;
    }
    for (int i = 0; i < rt->n; i++)
        if (rt->job_status[i] != HN_OK && (st == HN_OK || st == HN_ERR_ABORTED))
            st = rt->job_status[i];
    return st;
}

hn_status_t hn_runtime_exec_all(hn_runtime *rt, hn_job_fn fn, void *arg) { return hn_pool_exec(rt, fn, arg, 1); }

void hn_pool_init(hn_runtime *rt)
{
    pthread_mutex_init(&rt->mu, NULL);
    pthread_cond_init(&rt->cv_job, NULL);
    pthread_cond_init(&rt->cv_done, NULL);
}

hn_status_t hn_pool_start(hn_runtime *rt, int *nthreads)
{
    for (*nthreads = 0; *nthreads < rt->n; (*nthreads)++) {
        hn_rank *r = &rt->ranks[*nthreads];
        r->rt = rt;
        r->rank = *nthreads;
        if (pthread_create(&r->thread, NULL, rank_main, r) != 0) {
            HN_ERROR("cannot start the thread of rank %d", *nthreads);
            return HN_ERR_RUNTIME;
        }
    }
    return HN_OK;
}

void hn_pool_stop(hn_runtime *rt, int nthreads)
{
    pthread_mutex_lock(&rt->mu);
    rt->quit = 1;
    pthread_cond_broadcast(&rt->cv_job);
    pthread_mutex_unlock(&rt->mu);
    for (int i = 0; i < nthreads; i++)
        pthread_join(rt->ranks[i].thread, NULL);
}

void hn_pool_fini(hn_runtime *rt)
{
    pthread_mutex_destroy(&rt->mu);
    pthread_cond_destroy(&rt->cv_job);
    pthread_cond_destroy(&rt->cv_done);
}

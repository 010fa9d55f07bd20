/* The rank threads: one per rank for the runtime's life, each driving its
 * device. A job is handed to all of them at once and joined; a doorbell
 * hands one rank a job of its own without the handoff's lock (what a
 * replay's launches take). Idle threads spin a while for the next one, and
 * past a run's deadline a watchdog names the ranks still busy. */
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "pool.h"
#include "run_error.h"

/* job_status of a rank that has not finished its job yet */
#define JOB_BUSY ((hn_status_t)1)
/* spins between two yields (and clock reads) of a waiting thread */
#define SPINS_PER_YIELD 16

/* One round of a busy wait: the CPU told so (no syscall). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spins up to `us` microseconds until the rank has work: a new job
 * (job_gen past `job`) or a ring (its bell past `bell`); 1 if so. A yield
 * every SPINS_PER_YIELD rounds leaves the core to others on a loaded
 * machine; the rounds between cost no syscall, so a ring is seen within a
 * fraction of a microsecond. Back-to-back runs then cost no futex
 * wake-ups. */
static int spin_for_work(hn_rank *r, uint64_t job, uint64_t bell, double us)
{
    hn_runtime *rt = r->rt;
    double end = 0;
    for (unsigned k = 1;; k++) {
        if (__atomic_load_n(&rt->job_gen, __ATOMIC_ACQUIRE) != job ||
            __atomic_load_n(&r->bell, __ATOMIC_ACQUIRE) != bell)
            return 1;
        if (k % SPINS_PER_YIELD != 0) {
            cpu_relax();
            continue;
        }
        if (end == 0)
            end = hn_now() + us * 1e-6;
        else if (hn_now() >= end)
            return 0;
        sched_yield();
    }
}

/* Waits for the rank's next work: spins (spin_for_work), then sleeps on
 * cv_job. A ring wakes a sleeper only when it sees `sleeping` (the ringer
 * stores the bell, then reads `sleeping`; the sleeper stores `sleeping`,
 * then reads the bell; sequentially consistent, so at least one of them
 * sees the other's store). 0 when the runtime quits. */
static int wait_for_work(hn_rank *r, uint64_t job, uint64_t bell)
{
    hn_runtime *rt = r->rt;
    int quit;
    if (spin_for_work(r, job, bell, rt->spin_us))
        return 1;
    pthread_mutex_lock(&rt->mu);
    __atomic_store_n(&r->sleeping, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&rt->job_gen, __ATOMIC_ACQUIRE) == job &&
           __atomic_load_n(&r->bell, __ATOMIC_SEQ_CST) == bell && !rt->quit)
        pthread_cond_wait(&rt->cv_job, &rt->mu);
    __atomic_store_n(&r->sleeping, 0, __ATOMIC_RELAXED);
    quit = rt->quit;
    pthread_mutex_unlock(&rt->mu);
    return !quit;
}

static void *rank_main(void *arg)
{
    hn_rank *r = arg;
    hn_runtime *rt = r->rt;
    uint64_t seen = 0, rung = 0;
    while (wait_for_work(r, seen, rung)) {
        hn_job_fn fn;
        void *job_arg;
        hn_status_t st;
        uint64_t bell = __atomic_load_n(&r->bell, __ATOMIC_ACQUIRE);
        if (bell != rung) { /* a ring: this rank's job alone, answered by its word */
            rung = bell;
            r->bell_status = r->bell_fn(r, r->bell_arg);
            __atomic_store_n(&r->current_instr, -1, __ATOMIC_RELAXED);
            __atomic_store_n(&r->bell_done, rung, __ATOMIC_RELEASE);
            continue;
        }
        pthread_mutex_lock(&rt->mu);
        if (__atomic_load_n(&rt->job_gen, __ATOMIC_ACQUIRE) == seen) { /* woken by a ring after all */
            pthread_mutex_unlock(&rt->mu);
            continue;
        }
        seen = __atomic_load_n(&rt->job_gen, __ATOMIC_ACQUIRE);
        fn = rt->job_fn;
        job_arg = rt->job_arg;
        pthread_mutex_unlock(&rt->mu);

        st = fn(r, job_arg);
        __atomic_store_n(&r->current_instr, -1, __ATOMIC_RELAXED);

        pthread_mutex_lock(&rt->mu);
        rt->job_status[r->local] = st;
        __atomic_add_fetch(&rt->job_done, 1, __ATOMIC_RELEASE);
        pthread_cond_signal(&rt->cv_done);
        pthread_mutex_unlock(&rt->mu);
    }
    return NULL;
}

/* Past the deadline, a watchdog names the ranks still busy (busy[i]) and
 * where; its hook (the layer above) aborts every communicator, which
 * releases a rank stuck in one. */
static void bark(hn_runtime *rt, const int *busy)
{
    for (int i = 0; i < rt->nlocal; i++)
        if (busy[i]) {
            hn_rank *r = &rt->ranks[i];
            char msg[256];
            int instr = __atomic_load_n(&r->current_instr, __ATOMIC_RELAXED);
            uint64_t g = __atomic_load_n(&r->replayed, __ATOMIC_RELAXED);
            int comm = __atomic_load_n(&r->last_comm, __ATOMIC_RELAXED);
            const char *what = "";
            char waits[96];
            if (instr < 0 && g != 0) { /* between instructions: waiting for its device's work */
                snprintf(waits, sizeof(waits), " (it waits for its replay of graph %llu to finish)",
                         (unsigned long long)g);
                what = waits;
            } else if (instr < 0 && comm >= 0) {
                instr = comm;
                what = " (it waits for the work issued up to this communication, its last, to finish)";
            }
            snprintf(msg, sizeof(msg), "rank %d is still busy after %.0f s%s: the watchdog aborts the run", r->rank,
                     rt->cfg.timeout_s, what);
            hn_runtime_fail(rt, r->rank, instr, HN_ERR_TIMEOUT, msg);
        }
    if (rt->on_deadline != NULL)
        rt->on_deadline(rt);
}

/* How long the ranks have to end after the watchdog aborted everything
 * (their waits poll the abort word every few ms) before the runtime says
 * it is lost rather than wait on: the deadline holds at timeout + grace +
 * this. */
#define AFTER_BARK_S 1.0

/* Past the watchdog and its patience, ranks busy[i] still did not end: a
 * thread blocked in a call that nothing can end (a driver call on a device
 * whose work never finishes). The runtime is lost: every later call is
 * refused, and teardown leaves those threads alone. */
static hn_status_t give_up(hn_runtime *rt, const int *busy, const char *in_what)
{
    char text[sizeof(rt->lost_text)];
    size_t k = 0;
    k += (size_t)snprintf(text, sizeof(text), "hirnode: error: ");
    for (int i = 0; i < rt->nlocal && k < sizeof(text); i++)
        if (busy[i])
            k += (size_t)snprintf(text + k, sizeof(text) - k, "rank %d, ", rt->ranks[i].rank);
    if (k < sizeof(text))
        snprintf(text + k, sizeof(text) - k,
                 "still in %s %.0f s past the deadline (%.0f s) after the run was aborted: the runtime is lost "
                 "and refuses further runs (destroy it; restart the process to use the devices again)",
                 in_what, rt->watchdog_grace_s + AFTER_BARK_S, rt->cfg.timeout_s);
    /* the end of the run adds it to what the watchdog named */
    snprintf(rt->lost_text, sizeof(rt->lost_text), "%s", text);
    __atomic_store_n(&rt->stuck, 1, __ATOMIC_RELEASE);
    rt->lost = 1;
    return HN_ERR_DEVICE_LOST;
}

/* Whether a process of the world was lost and the run not yet aborted for it. */
static int lost_news(const hn_runtime *rt, int lost_aborted)
{
    return !lost_aborted && __atomic_load_n(&rt->world_lost, __ATOMIC_ACQUIRE);
}

static void watchdog(hn_runtime *rt)
{
    int busy[256], *b = rt->nlocal <= 256 ? busy : hn_calloc((size_t)rt->nlocal, sizeof(int));
    if (b == NULL)
        return;
    pthread_mutex_lock(&rt->mu);
    for (int i = 0; i < rt->nlocal; i++)
        b[i] = rt->job_status[i] == JOB_BUSY;
    pthread_mutex_unlock(&rt->mu);
    bark(rt, b);
    if (b != busy)
        hn_free(b);
}

void hn_pool_ring(hn_runtime *rt, int local, hn_job_fn fn, void *arg)
{
    hn_rank *r = &rt->ranks[local];
    r->bell_fn = fn;
    r->bell_arg = arg;
    __atomic_store_n(&r->bell, r->bell + 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&r->sleeping, __ATOMIC_SEQ_CST)) { /* the slow path: it went to sleep */
        pthread_mutex_lock(&rt->mu);
        pthread_cond_broadcast(&rt->cv_job);
        pthread_mutex_unlock(&rt->mu);
    }
}

hn_status_t hn_pool_answers(hn_runtime *rt, int from, int to)
{
    double deadline = 0;
    hn_status_t st = HN_OK;
    int barked = 0;
    for (int i = from; i < to; i++) {
        hn_rank *r = &rt->ranks[i];
        for (unsigned k = 1; __atomic_load_n(&r->bell_done, __ATOMIC_ACQUIRE) != r->bell; k++) {
            double now;
            if (k % SPINS_PER_YIELD != 0) {
                cpu_relax();
                continue;
            }
            now = hn_now();
            if (deadline == 0) {
                deadline = now + rt->cfg.timeout_s + rt->watchdog_grace_s;
            } else if (now > deadline) { /* a launch blocked on a device that never got on */
                int busy[256], *b = rt->nlocal <= 256 ? busy : hn_calloc((size_t)rt->nlocal, sizeof(int));
                for (int q = 0; b != NULL && q < rt->nlocal; q++)
                    b[q] = q >= from && q < to && __atomic_load_n(&rt->ranks[q].bell_done, __ATOMIC_ACQUIRE) !=
                                                      rt->ranks[q].bell;
                if (b != NULL && barked) /* aborted, and still no answer: never wait on */
                    st = give_up(rt, b, "a replay's launch");
                else if (b != NULL)
                    bark(rt, b);
                if (b != busy)
                    hn_free(b);
                if (b == NULL || barked)
                    return b == NULL ? HN_ERR_NOMEM : st;
                barked = 1;
                deadline = now + AFTER_BARK_S;
            }
            sched_yield();
        }
    }
    for (int i = from; i < to; i++)
        if (rt->ranks[i].bell_status != HN_OK && (st == HN_OK || st == HN_ERR_ABORTED))
            st = rt->ranks[i].bell_status;
    return st;
}

hn_status_t hn_pool_exec(hn_runtime *rt, hn_job_fn fn, void *arg, int watched)
{
    hn_status_t st = HN_OK;
    double deadline;
    int barked = !watched, lost_aborted = !watched; /* only a run (watched) is aborted for a lost process */
    if (__atomic_load_n(&rt->stuck, __ATOMIC_ACQUIRE)) /* a thread never came back: no job can start */
        return HN_ERR_DEVICE_LOST;
    pthread_mutex_lock(&rt->mu);
    rt->job_fn = fn;
    rt->job_arg = arg;
    __atomic_store_n(&rt->job_done, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < rt->nlocal; i++)
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
        while (__atomic_load_n(&rt->job_done, __ATOMIC_ACQUIRE) < rt->nlocal && hn_now() < end &&
               !lost_news(rt, lost_aborted))
            sched_yield();
        pthread_mutex_lock(&rt->mu);
        while (__atomic_load_n(&rt->job_done, __ATOMIC_ACQUIRE) < rt->nlocal && !lost_news(rt, lost_aborted)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            if (pthread_cond_timedwait(&rt->cv_done, &rt->mu, &ts) != 0 && hn_now() > deadline)
                break;
        }
        if (__atomic_load_n(&rt->job_done, __ATOMIC_ACQUIRE) == rt->nlocal) {
            pthread_mutex_unlock(&rt->mu);
            break;
        }
        pthread_mutex_unlock(&rt->mu);
        if (lost_news(rt, lost_aborted)) {
            /* a process of the world is gone: nothing waiting for it can
             * end well, so everything is aborted now, not at the deadline
             * (NCCL waits on a dead peer until its communicator is) */
            lost_aborted = 1;
            if (rt->on_deadline != NULL)
                rt->on_deadline(rt);
            deadline = hn_now() + rt->cfg.timeout_s + rt->watchdog_grace_s;
            continue;
        }
        if (barked) { /* aborted, and still busy: never wait on */
            int busy[256], *b = rt->nlocal <= 256 ? busy : hn_calloc((size_t)rt->nlocal, sizeof(int));
            if (b == NULL)
                return HN_ERR_NOMEM;
            pthread_mutex_lock(&rt->mu);
            for (int i = 0; i < rt->nlocal; i++)
                b[i] = rt->job_status[i] == JOB_BUSY;
            pthread_mutex_unlock(&rt->mu);
            st = give_up(rt, b, "their job");
            if (b != busy)
                hn_free(b);
            return st;
        }
        watchdog(rt);
        barked = 1;
        /* unwatched jobs wait as long as they take (they wait on no peer) */
        deadline = hn_now() + (watched ? AFTER_BARK_S : 3600);
    }
    for (int i = 0; i < rt->nlocal; i++)
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
    for (*nthreads = 0; *nthreads < rt->nlocal; (*nthreads)++) {
        hn_rank *r = &rt->ranks[*nthreads];
        r->rt = rt;
        r->local = *nthreads;
        r->rank = rt->first + r->local;
        r->last_comm = -1;
        if (pthread_create(&r->thread, NULL, rank_main, r) != 0) {
            HN_ERROR("cannot start the thread of rank %d", r->rank);
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
        if (__atomic_load_n(&rt->stuck, __ATOMIC_ACQUIRE))
            pthread_detach(rt->ranks[i].thread); /* it may never return: left, with what it uses */
        else
            pthread_join(rt->ranks[i].thread, NULL);
}

void hn_pool_fini(hn_runtime *rt)
{
    pthread_mutex_destroy(&rt->mu);
    pthread_cond_destroy(&rt->cv_job);
    pthread_cond_destroy(&rt->cv_done);
}

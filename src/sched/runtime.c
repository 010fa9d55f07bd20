/* The runtime: one long-lived thread per rank, each driving its device;
 * jobs are handed to all rank threads at once and joined. Also the per-rank
 * stream and event pools, the caching allocator and error propagation. */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/parse.h"
#include "sched.h"
#include "trace.h"

/* ---- errors ---- */

void hn_format_fault(hn_strbuf *sb, const hn_program *p, int rank, int instr, const char *msg)
{
    if (p != NULL && instr >= 0 && instr < p->ninstrs) {
        const hn_instr *in = p->instrs[instr];
        hn_sb_printf(sb, "%s:%d:%d: error: rank %d: ", p->filename, in->line, in->col, rank);
        hn_print_instr_short(sb, p, in);
        hn_sb_printf(sb, ": %s", msg);
    } else {
        hn_sb_printf(sb, "%s: error: rank %d: %s", p != NULL ? p->filename : "hirnode", rank, msg);
    }
}

/* The program whose instructions errors name. Under err_mu: work of a
 * launch still in flight may report a failure while the next is issued. */
void hn_runtime_set_err_prog(hn_runtime *rt, const hn_program *p)
{
    pthread_mutex_lock(&rt->err_mu);
    rt->err_prog = p;
    pthread_mutex_unlock(&rt->err_mu);
}

/* The error text of a call that fails before issuing anything, while
 * launches may be in flight (their failures write it too). */
void hn_runtime_set_error_text(hn_runtime *rt, const char *text)
{
    pthread_mutex_lock(&rt->err_mu);
    snprintf(rt->err_text, sizeof(rt->err_text), "%s", text);
    pthread_mutex_unlock(&rt->err_mu);
}

void hn_runtime_fail(hn_runtime *rt, int rank, int instr, hn_status_t st, const char *msg)
{
    pthread_mutex_lock(&rt->err_mu);
    /* the first real failure wins over the "aborted" echoes it causes */
    if (rt->err_status == HN_OK || (rt->err_status == HN_ERR_ABORTED && st != HN_ERR_ABORTED)) {
        hn_strbuf sb;
        hn_sb_init(&sb);
        hn_format_fault(&sb, rt->err_prog, rank, instr, msg);
        snprintf(rt->err_text, sizeof(rt->err_text), "%s", sb.data ? sb.data : msg);
        hn_sb_free(&sb);
        rt->err_status = st;
        HN_DEBUG("%s", rt->err_text);
    }
    pthread_mutex_unlock(&rt->err_mu);
    /* waiters poll this flag; no lock of theirs is taken here */
    __atomic_store_n(&rt->abort_flag, 1, __ATOMIC_RELEASE);
}

static void sink_report(void *ctx, int rank, int instr, hn_status_t st, const char *msg)
{
    hn_runtime_fail(ctx, rank, instr, st, msg);
}

void hn_runtime_clear_error(hn_runtime *rt)
{
    pthread_mutex_lock(&rt->err_mu);
    rt->err_status = HN_OK;
    rt->err_text[0] = '\0';
    pthread_mutex_unlock(&rt->err_mu);
    __atomic_store_n(&rt->abort_flag, 0, __ATOMIC_RELEASE);
}

const char *hn_runtime_error(const hn_runtime *rt) { return rt->err_text; }

/* ---- rank threads ---- */

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
        hn_status_t (*fn)(hn_rank *, void *);
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

/* Past the deadline, a watchdog names the ranks still busy and where, and
 * aborts every communicator, which releases a rank stuck in one. */
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
    hn_runtime_graphs_abort(rt);
    for (int c = 0; c < rt->ncomms; c++)
        if (rt->comms[c].ops->abort(rt->comms[c].world))
            __atomic_store_n(&rt->teams_dead, 1, __ATOMIC_RELEASE);
}

/* watched: past the run's deadline the watchdog barks. Jobs that cannot
 * wait on another rank (memory, setup of a rank's own device) are not
 * watched: however long they take (a large allocation under a sanitizer),
 * they are no hang. */
static hn_status_t exec_all(hn_runtime *rt, hn_status_t (*fn)(hn_rank *r, void *arg), void *arg, int watched)
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

hn_status_t hn_runtime_exec_all(hn_runtime *rt, hn_status_t (*fn)(hn_rank *r, void *arg), void *arg)
{
    return exec_all(rt, fn, arg, 1);
}

/* ---- per-rank pools ---- */

/* Pool streams are made between runs, for what the dry run saw (each
 * with its own cuBLASLt workspace on CUDA: a device allocation, which must
 * not happen while collectives run). */
static hn_status_t rank_make_streams(hn_rank *r, unsigned used)
{
    hn_runtime *rt = r->rt;
    for (int k = 0; k < HN_MAX_STREAMS; k++)
        if ((used >> k & 1u) && r->streams[k] == NULL) {
            hn_status_t st = rt->dev->stream_create(rt->dev_ctx, r->rank, &r->streams[k]);
            if (st != HN_OK)
                return st;
        }
    return HN_OK;
}

hn_status_t hn_rank_stream(hn_rank *r, int idx, hn_dstream **out)
{
    if (idx < 0 || idx >= HN_MAX_STREAMS || r->streams[idx] == NULL) {
        HN_ERROR("rank %d: stream %d was not made before the run (the dry run did not see it)", r->rank, idx);
        return HN_ERR_RUNTIME;
    }
    *out = r->streams[idx];
    return HN_OK;
}

hn_status_t hn_rank_comm_event(hn_rank *r, int idx, hn_devent **out)
{
    hn_runtime *rt = r->rt;
    if (idx >= r->ncomm_events) {
        int n = HN_MAX(idx + 1, r->ncomm_events * 2);
        hn_devent **grown = hn_realloc(r->comm_events, (size_t)n * sizeof(*grown));
        if (grown == NULL)
            return HN_ERR_NOMEM;
        r->comm_events = grown;
        for (int i = r->ncomm_events; i < n; i++) {
            hn_status_t st = rt->dev->event_create(rt->dev_ctx, r->rank, &grown[i]);
            if (st != HN_OK) {
                r->ncomm_events = i;
                return st;
            }
        }
        r->ncomm_events = n;
    }
    *out = r->comm_events[idx];
    return HN_OK;
}

hn_status_t hn_rank_alloc_cached(hn_rank *r, const hn_program *p, int instr, int occurrence,
                                 size_t bytes, void **out)
{
    hn_runtime *rt = r->rt;
    hn_block_cache *b = NULL;
    int is_new = 0;
    for (int i = 0; i < r->nblocks; i++)
        if (r->blocks[i].prog == p->uid && r->blocks[i].instr == instr &&
            r->blocks[i].occurrence == occurrence) {
            b = &r->blocks[i];
            break;
        }
    if (b != NULL && b->bytes >= bytes) {
        *out = b->ptr;
        return HN_OK;
    }
    if (b == NULL) {
        if (hn_grow((void **)&r->blocks, &r->blocks_cap, r->nblocks, sizeof(*r->blocks)) != 0)
            return HN_ERR_NOMEM;
        b = &r->blocks[r->nblocks++];
        memset(b, 0, sizeof(*b));
        b->prog = p->uid;
        b->instr = instr;
        b->occurrence = occurrence;
        is_new = 1;
    } else {
        /* grows only between runs (hn_runtime_prepare sizes the cache) */
        rt->dev->mem_free(rt->dev_ctx, r->rank, b->ptr);
        b->ptr = NULL;
        b->bytes = 0;
    }
    if (rt->dev->mem_alloc(rt->dev_ctx, r->rank, bytes, &b->ptr) != HN_OK) {
        if (is_new)
            r->nblocks--;
        return HN_ERR_NOMEM;
    }
    b->bytes = bytes;
    *out = b->ptr;
    return HN_OK;
}

static void rank_free_blocks(hn_rank *r)
{
    for (int i = 0; i < r->nblocks; i++)
        if (r->blocks[i].ptr != NULL)
            r->rt->dev->mem_free(r->rt->dev_ctx, r->rank, r->blocks[i].ptr);
    hn_free(r->blocks);
    r->blocks = NULL;
    r->nblocks = r->blocks_cap = 0;
}

static hn_status_t rank_init(hn_rank *r, void *arg)
{
    hn_runtime *rt = r->rt;
    hn_status_t st;
    (void)arg;
    if ((st = rt->dev->thread_init(rt->dev_ctx, r->rank)) != HN_OK)
        return st;
    if ((st = rt->dev->stream_create(rt->dev_ctx, r->rank, &r->caller)) != HN_OK)
        return st;
    r->active = r->caller;
    for (int i = 0; i <= HN_MAX_STREAMS; i++)
        if ((st = rt->dev->event_create(rt->dev_ctx, r->rank, &r->stream_event[i])) != HN_OK)
            return st;
    if ((st = rt->dev->event_create(rt->dev_ctx, r->rank, &r->launch_start)) != HN_OK ||
        (st = rt->dev->event_create(rt->dev_ctx, r->rank, &r->launch_done)) != HN_OK)
        return st;
    return HN_OK;
}

static hn_status_t sync_all(hn_rank *r)
{
    hn_runtime *rt = r->rt;
    hn_status_t st = HN_OK, s2;
    if (r->caller != NULL && (s2 = rt->dev->stream_sync(r->caller)) != HN_OK)
        st = s2;
    if (r->adopted != NULL && (s2 = rt->dev->stream_sync(r->adopted)) != HN_OK)
        st = s2;
    for (int i = 0; i < HN_MAX_STREAMS; i++)
        if (r->streams[i] != NULL && (s2 = rt->dev->stream_sync(r->streams[i])) != HN_OK)
            st = s2;
    /* named after the last instruction issued: the fault is in work
     * issued up to there */
    if (st == HN_ERR_TIMEOUT)
        hn_runtime_fail(rt, r->rank, __atomic_load_n(&r->current_instr, __ATOMIC_RELAXED), st,
                        "the run's work issued up to here did not finish before the deadline");
    else if (st != HN_OK && st != HN_ERR_ABORTED)
        hn_runtime_fail(rt, r->rank, __atomic_load_n(&r->current_instr, __ATOMIC_RELAXED), st,
                        "the device failed in work issued up to here (its error is logged above)");
    return st;
}

/* Undoes rank_init and everything created since; safe on partial state. */
static hn_status_t rank_fini(hn_rank *r, void *arg)
{
    hn_runtime *rt = r->rt;
    (void)arg;
    sync_all(r);
    for (int i = 0; i < HN_MAX_STREAMS; i++)
        if (r->streams[i] != NULL) {
            rt->dev->stream_destroy(r->streams[i]);
            r->streams[i] = NULL;
        }
    if (r->adopted != NULL) {
        rt->dev->stream_release(r->adopted);
        r->adopted = NULL;
    }
    for (int i = 0; i < r->nuser_streams; i++)
        rt->dev->stream_destroy(r->user_streams[i]);
    hn_free(r->user_streams);
    r->user_streams = NULL;
    r->nuser_streams = r->user_streams_cap = 0;
    if (r->caller != NULL) {
        rt->dev->stream_destroy(r->caller);
        r->caller = NULL;
    }
    rt->dev->event_destroy(r->launch_start);
    rt->dev->event_destroy(r->launch_done);
    r->launch_start = r->launch_done = NULL;
    for (int i = 0; i <= HN_MAX_STREAMS; i++)
        if (r->stream_event[i] != NULL) {
            rt->dev->event_destroy(r->stream_event[i]);
            r->stream_event[i] = NULL;
        }
    for (int i = 0; i < r->ncomm_events; i++)
        rt->dev->event_destroy(r->comm_events[i]);
    hn_free(r->comm_events);
    r->comm_events = NULL;
    r->ncomm_events = 0;
    hn_rank_run_timers_free(r);
    rank_free_blocks(r);
    rt->dev->thread_fini(rt->dev_ctx, r->rank);
    return HN_OK;
}

/* ---- teams ---- */

static hn_team_entry *find_team(hn_runtime *rt, int comm, const int *ranks, int n)
{
    for (int i = 0; i < rt->nteams; i++)
        if (rt->teams[i].comm == comm && rt->teams[i].n == n &&
            memcmp(rt->teams[i].ranks, ranks, (size_t)n * sizeof(int)) == 0)
            return &rt->teams[i];
    return NULL;
}

const hn_comm_slot *hn_runtime_comm(const hn_runtime *rt, hn_backend_kind via)
{
    return &rt->comms[rt->via_comm[via]];
}

hn_comm_team *hn_runtime_team(hn_runtime *rt, hn_backend_kind via, const int *ranks, int n)
{
    hn_team_entry *e = find_team(rt, rt->via_comm[via], ranks, n);
    return e != NULL ? e->team : NULL;
}

hn_status_t hn_runtime_ensure_team(hn_runtime *rt, hn_backend_kind via, const int *ranks, int n)
{
    int comm = rt->via_comm[via];
    hn_team_entry *e;
    hn_status_t st;
    if (find_team(rt, comm, ranks, n) != NULL)
        return HN_OK;
    if (hn_grow((void **)&rt->teams, &rt->teams_cap, rt->nteams, sizeof(*rt->teams)) != 0)
        return HN_ERR_NOMEM;
    e = &rt->teams[rt->nteams];
    memset(e, 0, sizeof(*e));
    e->ranks = hn_malloc((size_t)n * sizeof(int));
    if (e->ranks == NULL)
        return HN_ERR_NOMEM;
    memcpy(e->ranks, ranks, (size_t)n * sizeof(int));
    e->n = n;
    e->comm = comm;
    if ((st = rt->comms[comm].ops->team_create(rt->comms[comm].world, ranks, n, &e->team)) != HN_OK) {
        hn_free(e->ranks);
        return st;
    }
    rt->nteams++;
    return HN_OK;
}

/* Every member of every team not yet joined joins it on its own thread,
 * all at once; then each warms its communicators up (peers connect lazily)
 * and reserves what the programs' reductions need. */
enum { JOIN, WARM, RESERVE };

static hn_status_t join_on_rank(hn_rank *r, void *arg)
{
    hn_runtime *rt = r->rt;
    hn_status_t st = HN_OK;
    int phase = *(const int *)arg;
    for (int t = 0; t < rt->nteams && st == HN_OK; t++) {
        hn_team_entry *e = &rt->teams[t];
        const hn_comm_ops *ops = rt->comms[e->comm].ops;
        hn_origin o = {&rt->sink, r->rank, -1, NULL, NULL};
        if (phase == RESERVE ? e->reserved >= e->reserve : e->joined)
            continue;
        for (int me = 0; me < e->n && st == HN_OK; me++) {
            if (e->ranks[me] != r->rank)
                continue;
            if (phase == JOIN && ops->team_join != NULL) /* NULL: nothing to do */
                st = ops->team_join(e->team, me, &o);
            else if (phase == WARM && ops->team_warmup != NULL)
                st = ops->team_warmup(e->team, me, r->caller, &o);
            else if (phase == RESERVE && ops->team_reserve != NULL)
                st = ops->team_reserve(e->team, me, e->reserve, &o);
        }
    }
    if (st == HN_OK && phase == WARM)
        st = rt->dev->stream_sync(r->caller);
    return st;
}

static hn_status_t join_new_teams(hn_runtime *rt)
{
    static const int join = JOIN, warm = WARM, reserve = RESERVE;
    hn_status_t st = hn_runtime_exec_all(rt, join_on_rank, (void *)&join);
    if (st == HN_OK)
        st = hn_runtime_exec_all(rt, join_on_rank, (void *)&warm);
    for (int t = 0; t < rt->nteams && st == HN_OK; t++)
        rt->teams[t].joined = 1;
    if (st == HN_OK)
        st = hn_runtime_exec_all(rt, join_on_rank, (void *)&reserve);
    for (int t = 0; t < rt->nteams && st == HN_OK; t++)
        rt->teams[t].reserved = HN_MAX(rt->teams[t].reserved, rt->teams[t].reserve);
    return st;
}

static void destroy_teams(hn_runtime *rt)
{
    if (rt->nteams > 0) /* their flags and barriers go with the teams */
        hn_runtime_graphs_invalidate(rt, 0, 0, "the communicators were made anew after a failure");
    for (int i = 0; i < rt->nteams; i++) {
        rt->comms[rt->teams[i].comm].ops->team_destroy(rt->teams[i].team);
        hn_free(rt->teams[i].ranks);
    }
    rt->nteams = 0;
    hn_runtime_forget_verified(rt, 0); /* the next run creates its teams again */
}

/* ---- create / destroy ---- */

static const hn_device_ops *pick_backend(const hn_runtime_config *cfg, hn_status_t *st)
{
    const char *name = cfg->backend != NULL ? cfg->backend : "auto";
    const hn_device_ops *d;
    if (strcmp(name, "auto") == 0) {
        const hn_device_ops *const *all = hn_device_backends();
        for (int i = 0; all[i] != NULL; i++)
            if (strcmp(all[i]->name, "host") != 0 && all[i]->device_count() >= cfg->ndev)
                return all[i];
        HN_INFO("no GPU backend has %d devices; using the host (CPU emulation) backend", cfg->ndev);
        return &hn_device_host;
    }
    d = hn_device_find(name);
    if (d == NULL) {
        HN_ERROR("unknown backend '%s'", name);
        *st = HN_ERR_INVALID;
        return NULL;
    }
    if (d->device_count() < cfg->ndev) {
        HN_ERROR("backend '%s' has %d devices, %d requested", name, d->device_count(), cfg->ndev);
        *st = HN_ERR_INVALID;
        return NULL;
    }
    return d;
}

/* The communicator of each `via`: default is the device backend's own
 * (host or nccl), nccl is NCCL where there is CUDA (else the CPU
 * emulation), p2p is the peer-copy rings on any backend. */
static hn_status_t init_comms(hn_runtime *rt)
{
    const char *names[HN_VIA_COUNT];
    names[HN_VIA_DEFAULT] = rt->dev->comm;
    names[HN_VIA_NCCL] = hn_comm_find("nccl") != NULL && strcmp(rt->dev->name, "host") != 0 ? "nccl" : rt->dev->comm;
    names[HN_VIA_P2P] = "p2p";
    names[HN_VIA_AUTO] = rt->dev->comm; /* never used: resolved per instruction */
    names[HN_VIA_LL] = "ll";
    if (strcmp(hn_setting_get("p2p_sync"), "flags") != 0 && strcmp(hn_setting_get("p2p_sync"), "events") != 0) {
        HN_ERROR("HIRNODE_P2P_SYNC=%s: expected flags or events", hn_setting_get("p2p_sync"));
        return HN_ERR_INVALID;
    }
    for (int v = 0; v < HN_VIA_COUNT; v++) {
        const hn_comm_ops *ops = hn_comm_find(names[v]);
        int found = -1;
        hn_comm_config ccfg;
        hn_status_t st;
        if (ops == NULL) {
            HN_ERROR("no communicator '%s' for the %s backend", names[v], rt->dev->name);
            return HN_ERR_UNSUPPORTED;
        }
        for (int c = 0; c < rt->ncomms; c++)
            if (rt->comms[c].ops == ops)
                found = c;
        if (found < 0) {
            memset(&ccfg, 0, sizeof(ccfg));
            ccfg.nranks = rt->n;
            ccfg.blocking = atoi(hn_setting_get("nccl_blocking"));
            ccfg.nccl_max_ctas = atoi(hn_setting_get("nccl_max_ctas"));
            ccfg.p2p_events = strcmp(hn_setting_get("p2p_sync"), "events") == 0;
            ccfg.p2p_pieces = atoi(hn_setting_get("p2p_pieces"));
            ccfg.p2p_ag_pieces = atoi(hn_setting_get("p2p_ag_pieces"));
            ccfg.p2p_lanes = atoi(hn_setting_get("p2p_lanes"));
            ccfg.p2p_piece_min = (size_t)strtoull(hn_setting_get("p2p_piece_kib"), NULL, 10) << 10;
            ccfg.dev = rt->dev;
            ccfg.dev_ctx = rt->dev_ctx;
            ccfg.compute = rt->compute;
            ccfg.sink = &rt->sink;
            if ((st = ops->init(&ccfg, &rt->comms[rt->ncomms].world)) != HN_OK)
                return st;
            rt->comms[rt->ncomms].ops = ops;
            found = rt->ncomms++;
        }
        rt->via_comm[v] = found;
    }
    return HN_OK;
}

static void teardown(hn_runtime *rt, int nthreads)
{
    if (rt->trace != NULL) /* written while the rank threads still run */
        (void)hn_runtime_trace_stop(rt);
    if (nthreads == rt->n)
        hn_runtime_graphs_free(rt); /* on the rank threads, before the teams */
    /* communicators go before streams and buffers */
    destroy_teams(rt);
    hn_free(rt->teams);
    for (int c = 0; c < rt->ncomms; c++)
        rt->comms[c].ops->fini(rt->comms[c].world);
    if (nthreads == rt->n)
        hn_runtime_exec_all(rt, rank_fini, NULL);
    pthread_mutex_lock(&rt->mu);
    rt->quit = 1;
    pthread_cond_broadcast(&rt->cv_job);
    pthread_mutex_unlock(&rt->mu);
    for (int i = 0; i < nthreads; i++)
        pthread_join(rt->ranks[i].thread, NULL);
    if (rt->dev_ctx != NULL)
        rt->dev->fini(rt->dev_ctx);
    pthread_mutex_destroy(&rt->mu);
    pthread_cond_destroy(&rt->cv_job);
    pthread_cond_destroy(&rt->cv_done);
    pthread_mutex_destroy(&rt->err_mu);
    for (int i = 0; i < HN_VERIFIED_CONFIGS; i++)
        hn_free(rt->verified[i].params);
    hn_runtime_lowered_free(rt);
    hn_free(rt->job_status);
    hn_free(rt->all_ranks);
    hn_free(rt->ranks);
    hn_free(rt);
}

hn_status_t hn_runtime_create(const hn_runtime_config *cfg_in, hn_runtime **out)
{
    hn_runtime_config cfg;
    hn_runtime *rt;
    hn_device_config dcfg;
    hn_status_t st = HN_OK;
    int nthreads = 0;
    if (cfg_in == NULL || out == NULL)
        return HN_ERR_INVALID;
    cfg = *cfg_in;
    if (cfg.ndev < 1 || cfg.ndev > 256) {
        HN_ERROR("device count %d out of range [1, 256]", cfg.ndev);
        return HN_ERR_INVALID;
    }
    if (cfg.nstreams < 1 || cfg.nstreams > HN_MAX_STREAMS) {
        HN_ERROR("stream count %d out of range [1, %d]", cfg.nstreams, HN_MAX_STREAMS);
        return HN_ERR_INVALID;
    }
    if (cfg.timeout_s <= 0)
        cfg.timeout_s = 60.0;
    if ((rt = hn_calloc(1, sizeof(*rt))) == NULL)
        return HN_ERR_NOMEM;
    rt->cfg = cfg;
    rt->n = cfg.ndev;
    rt->spin_us = atof(hn_setting_get("spin_us"));
    rt->watchdog_grace_s = atof(hn_setting_get("watchdog_grace_s"));
    if (!(rt->watchdog_grace_s >= 0))
        rt->watchdog_grace_s = 5;
    {
        char err[256];
        if (hn_fault_parse(hn_setting_get("fault"), &rt->faults, err, sizeof(err)) != HN_OK) {
            HN_ERROR("HIRNODE_FAULT: %s", err);
            hn_free(rt);
            return HN_ERR_INVALID;
        }
    }
    rt->join_spin = atoi(hn_setting_get("join_spin"));
    rt->auto_graphs = cfg.graphs;
    rt->replay_threads = atoi(hn_setting_get("replay_threads"));
    pthread_mutex_init(&rt->mu, NULL);
    pthread_cond_init(&rt->cv_job, NULL);
    pthread_cond_init(&rt->cv_done, NULL);
    pthread_mutex_init(&rt->err_mu, NULL);
    rt->ranks = hn_calloc((size_t)rt->n, sizeof(*rt->ranks));
    rt->job_status = hn_calloc((size_t)rt->n, sizeof(*rt->job_status));
    rt->all_ranks = hn_calloc((size_t)rt->n, sizeof(int));
    if (rt->ranks == NULL || rt->job_status == NULL || rt->all_ranks == NULL) {
        st = HN_ERR_NOMEM;
        goto undo;
    }
    for (int i = 0; i < rt->n; i++)
        rt->all_ranks[i] = i;
    if ((rt->dev = pick_backend(&cfg, &st)) == NULL)
        goto undo;
    rt->compute = hn_device_compute(rt->dev);
    rt->default_auto = hn_default_via_auto(rt->dev->name);
    rt->sink.report = sink_report;
    rt->sink.ctx = rt;
    rt->sink.abort_flag = &rt->abort_flag;
    rt->sink.timeout_s = cfg.timeout_s;
    memset(&dcfg, 0, sizeof(dcfg));
    dcfg.ndev = rt->n;
    dcfg.host_delay_us = cfg.host_delay_us;
    {
        unsigned long long mib = strtoull(hn_setting_get("host_mem_mib"), NULL, 10);
        dcfg.host_mem_bytes = mib > (SIZE_MAX >> 20) ? SIZE_MAX : (size_t)mib << 20;
    }
    dcfg.seed = cfg.seed;
    dcfg.sink = &rt->sink;
    if ((st = rt->dev->init(&dcfg, &rt->dev_ctx)) != HN_OK)
        goto undo;
    for (nthreads = 0; nthreads < rt->n; nthreads++) {
        rt->ranks[nthreads].rt = rt;
        rt->ranks[nthreads].rank = nthreads;
        if (pthread_create(&rt->ranks[nthreads].thread, NULL, rank_main, &rt->ranks[nthreads]) != 0) {
            HN_ERROR("cannot start the thread of rank %d", nthreads);
            st = HN_ERR_RUNTIME;
            goto undo;
        }
    }
    if ((st = exec_all(rt, rank_init, NULL, 0)) != HN_OK)
        goto undo;
    if ((st = init_comms(rt)) != HN_OK)
        goto undo;
    HN_INFO("runtime: %d ranks on the %s backend", rt->n, rt->dev->name);
    *out = rt;
    return HN_OK;
undo:
    teardown(rt, nthreads);
    return st;
}

void hn_runtime_destroy(hn_runtime *rt)
{
    if (rt != NULL)
        teardown(rt, rt->n);
}

int hn_runtime_size(const hn_runtime *rt) { return rt->n; }
const char *hn_runtime_backend(const hn_runtime *rt) { return rt->dev->name; }

/* ---- device memory on a rank's thread ---- */

typedef struct mem_job {
    int rank, op;
    size_t bytes;
    void *ptr;
    void *dst;
    const void *src;
    size_t free_bytes, total_bytes;
} mem_job;

static hn_status_t mem_on_rank(hn_rank *r, void *arg)
{
    mem_job *j = arg;
    hn_runtime *rt = r->rt;
    if (r->rank != j->rank)
        return HN_OK;
    switch (j->op) {
    case 0: return rt->dev->mem_alloc(rt->dev_ctx, r->rank, j->bytes, &j->ptr);
    case 1: rt->dev->mem_free(rt->dev_ctx, r->rank, j->ptr); return HN_OK;
    case 2: return rt->dev->copy_to_device(rt->dev_ctx, r->rank, j->dst, j->src, j->bytes);
    case 3: return rt->dev->copy_to_host(rt->dev_ctx, r->rank, j->dst, j->src, j->bytes);
    default: return rt->dev->mem_info(rt->dev_ctx, r->rank, &j->free_bytes, &j->total_bytes);
    }
}

static hn_status_t mem_call(hn_runtime *rt, mem_job *j)
{
    hn_status_t st;
    if (rt == NULL || j->rank < 0 || j->rank >= rt->n)
        return HN_ERR_INVALID;
    /* memory calls need the devices idle: launches in flight first */
    if (rt->inflight > 0 && (st = hn_runtime_sync(rt)) != HN_OK)
        return st;
    return exec_all(rt, mem_on_rank, j, 0);
}

hn_status_t hn_runtime_mem_info(hn_runtime *rt, int rank, size_t *free_bytes, size_t *total_bytes)
{
    mem_job j = {rank, 4, 0, NULL, NULL, NULL, 0, 0};
    hn_status_t st = mem_call(rt, &j);
    if (st == HN_OK) {
        *free_bytes = j.free_bytes;
        *total_bytes = j.total_bytes;
    }
    return st;
}

static int release_other_programs(hn_runtime *rt, uint64_t keep);

hn_status_t hn_runtime_alloc(hn_runtime *rt, int rank, size_t bytes, void **ptr)
{
    mem_job j = {rank, 0, bytes, NULL, NULL, NULL, 0, 0};
    hn_status_t st = mem_call(rt, &j);
    /* the programs' cached buffers first give way (uid 0 is no program's) */
    if (st == HN_ERR_NOMEM && release_other_programs(rt, 0) > 0)
        st = mem_call(rt, &j);
    if (st == HN_OK) {
        *ptr = j.ptr;
    } else if (st == HN_ERR_NOMEM) {
        size_t free_b = 0, total_b = 0;
        (void)hn_runtime_mem_info(rt, rank, &free_b, &total_b);
        snprintf(rt->err_text, sizeof(rt->err_text), "cannot allocate %zu bytes on device %d: %zu of %zu bytes free",
                 bytes, rank, free_b, total_b);
    }
    return st;
}

void hn_runtime_free(hn_runtime *rt, int rank, void *ptr)
{
    mem_job j = {rank, 1, 0, ptr, NULL, NULL, 0, 0};
    if (ptr != NULL)
        mem_call(rt, &j);
}

hn_status_t hn_runtime_upload(hn_runtime *rt, int rank, void *dst, const void *src, size_t n)
{
    mem_job j = {rank, 2, n, NULL, dst, src, 0, 0};
    return mem_call(rt, &j);
}

hn_status_t hn_runtime_download(hn_runtime *rt, int rank, void *dst, const void *src, size_t n)
{
    mem_job j = {rank, 3, n, NULL, dst, src, 0, 0};
    return mem_call(rt, &j);
}

/* ---- runs ---- */

typedef struct run_job {
    const hn_program *p;
    const int64_t *params;
    void *const *const *io_ptrs;
    int poison;
    int reference;
    int launch;           /* issue only: no sync at the end (hn_runtime_launch) */
    void *const *streams; /* a launch: the caller's stream of each rank (NULL: the runtime's) */
    hn_graph *capture;    /* a capture (graph.c): issued into it, not run */
} run_job;

static hn_status_t bind_io(hn_exec *x, const run_job *j, int rank)
{
    hn_strbuf err;
    hn_status_t st = HN_OK;
    hn_sb_init(&err);
    for (int k = 0; k < j->p->ninputs + j->p->noutputs && st == HN_OK; k++) {
        const hn_io *io = k < j->p->ninputs ? &j->p->inputs[k] : &j->p->outputs[k - j->p->ninputs];
        hn_value *v = &x->vals[io->var];
        st = hn_io_tensor(j->p, io, j->params, rank, x->world, x->nstreams, j->reference, &v->t, &err);
        if (st != HN_OK)
            break;
        if (j->reference && (v->t.dtype == HN_BF16 || v->t.dtype == HN_F16))
            v->t.dtype = HN_F32;
        v->t.data = j->reference ? ((void *const *)j->io_ptrs)[k] : j->io_ptrs[k][rank];
        v->kind = HN_V_TENSOR;
        v->owned = 0;
    }
    if (st != HN_OK)
        hn_runtime_fail(x->rt, rank, -1, st, err.data ? err.data : "cannot bind inputs");
    hn_sb_free(&err);
    return st;
}

/* A launch's stream on rank r: the embedder's (adopted; the handle is kept
 * for the next launch on the same stream) or the runtime's caller stream. */
hn_status_t hn_rank_launch_stream(hn_rank *r, void *native, hn_dstream **out)
{
    hn_runtime *rt = r->rt;
    hn_status_t st;
    if (native == NULL) {
        *out = r->caller;
        return HN_OK;
    }
    if (r->adopted != NULL && r->adopted_native == native) {
        *out = r->adopted;
        return HN_OK;
    }
    if (r->adopted != NULL) { /* its work is ordered before this launch's (launch_done) */
        rt->dev->stream_release(r->adopted);
        r->adopted = NULL;
    }
    /* matmuls on it borrow the caller stream's workspace: launches of one
     * rank run one after another, and the caller stream runs none of them */
    if ((st = rt->dev->stream_adopt(rt->dev_ctx, r->rank, native, r->caller, &r->adopted)) != HN_OK)
        return st;
    r->adopted_native = native;
    *out = r->adopted;
    return HN_OK;
}

/* A launch is ordered with its stream S by events: S first waits for the
 * previous launch of this rank (when that one ran on another stream), and
 * every pool stream waits for what S holds; at the end S waits for every
 * pool stream, then marks the launch done. So work the caller enqueued on
 * S before is seen, work it enqueues after waits for all of the program's
 * streams, and launches of a rank never overlap (they share cached buffers
 * and the caller stream's workspace). */
static hn_status_t launch_join(hn_rank *r, hn_dstream *s, int at_end, const void *previous)
{
    hn_runtime *rt = r->rt;
    hn_origin o = {&rt->sink, r->rank, -1, NULL, NULL};
    hn_status_t st = HN_OK;
    if (!at_end) {
        if (previous != NULL && previous != rt->dev->stream_native(s))
            st = rt->dev->stream_wait_event(s, r->launch_done, &o);
        if (st == HN_OK)
            st = rt->dev->event_record(r->launch_start, s);
        for (int k = 0; k < HN_MAX_STREAMS && st == HN_OK; k++)
            if (r->streams[k] != NULL)
                st = rt->dev->stream_wait_event(r->streams[k], r->launch_start, &o);
        return st;
    }
    for (int k = 0; k < HN_MAX_STREAMS && st == HN_OK; k++)
        if (r->streams[k] != NULL && (st = rt->dev->event_record(r->stream_event[k + 1], r->streams[k])) == HN_OK)
            st = rt->dev->stream_wait_event(s, r->stream_event[k + 1], &o);
    if (st == HN_OK && !r->capturing) /* a replay marks it (graph.c) */
        st = rt->dev->event_record(r->launch_done, s);
    return st;
}

static hn_status_t run_on_rank(hn_rank *r, void *arg)
{
    run_job *j = arg;
    hn_runtime *rt = r->rt;
    const void *previous = r->follow;
    hn_exec x;
    hn_status_t st, sync_st;
    if (j->reference && r->rank != 0)
        return HN_OK;
    r->active = r->caller;
    if (j->capture != NULL) { /* launches before were synced: no previous stream to follow */
        previous = NULL;
        if ((st = hn_rank_launch_stream(r, j->streams != NULL ? j->streams[r->rank] : NULL, &r->active)) != HN_OK ||
            (st = rt->dev->capture_begin(r->active)) != HN_OK) {
            r->active = r->caller;
            hn_runtime_fail(rt, r->rank, -1, st, "cannot begin a capture on the launch's stream");
            return st;
        }
        r->capturing = 1;
        /* every pool stream enters the capture after what the stream holds */
        if ((st = launch_join(r, r->active, 0, NULL)) != HN_OK) {
            hn_runtime_fail(rt, r->rank, -1, st, "cannot fork the pool streams into the capture");
            return st;
        }
    }
    if (j->launch &&
        ((st = hn_rank_launch_stream(r, j->streams != NULL ? j->streams[r->rank] : NULL, &r->active)) != HN_OK ||
         (st = launch_join(r, r->active, 0, previous)) != HN_OK)) {
        r->active = r->caller;
        hn_runtime_fail(rt, r->rank, -1, st, "cannot issue the launch on the caller's stream");
        return st;
    }
    if ((st = hn_exec_prepare(&x, j->p, r->rank, rt->n, rt->cfg.nstreams, j->params)) != HN_OK) {
        hn_runtime_fail(rt, r->rank, -1, st, "out of memory");
        return st;
    }
    x.rt = rt;
    x.r = r;
    x.graph = j->capture != NULL ? &j->capture->ctx[r->rank] : NULL;
    x.poison = j->poison;
    x.reference = j->reference;
    x.promote = j->reference;
    if (rt->trace != NULL && !j->reference)
        hn_trace_run_begin(rt->trace, r, &x);
    st = bind_io(&x, j, r->rank);
    if (st == HN_OK && rt->time_runs && !j->reference && j->capture == NULL)
        st = hn_rank_run_mark(r, 0);
    if (st == HN_OK)
        st = hn_exec_block(&x, j->reference ? &j->p->reference : &j->p->body);
    if (st == HN_OK && rt->time_runs && !j->reference && j->capture == NULL)
        st = hn_rank_run_mark(r, 1);
    if (j->capture != NULL) { /* the capture stays open: graph.c ends it */
        sync_st = st == HN_OK ? launch_join(r, r->active, 1, NULL) : HN_OK;
        if (sync_st != HN_OK)
            hn_runtime_fail(rt, r->rank, -1, sync_st, "cannot join the captured streams");
        hn_exec_release(&x);
        return st != HN_OK ? st : sync_st;
    }
    if (j->launch) {
        /* issued: the launch returns; hn_runtime_sync joins it */
        sync_st = launch_join(r, r->active, 1, NULL);
        r->follow = rt->dev->stream_native(r->active);
        if (sync_st != HN_OK)
            hn_runtime_fail(rt, r->rank, -1, sync_st, "cannot join the launch's streams");
        if (x.trace != NULL) /* a traced launch is synchronous */
            hn_trace_run_end(&x, st == HN_OK && sync_st == HN_OK && sync_all(r) == HN_OK);
        hn_exec_release(&x);
        return st != HN_OK ? st : sync_st;
    }
    /* the end of a run joins every stream of this rank */
    sync_st = sync_all(r);
    if (st == HN_OK && sync_st == HN_OK && rt->time_runs && !j->reference)
        hn_rank_run_measure(r);
    if (x.trace != NULL)
        hn_trace_run_end(&x, st == HN_OK && sync_st == HN_OK);
    hn_exec_release(&x);
    return st != HN_OK ? st : sync_st;
}

/* HN_ERR_DEVICE_LOST once any device's context is lost: nothing can run on
 * it again in this process, so the runtime refuses every later run. */
hn_status_t hn_runtime_check_devices(hn_runtime *rt)
{
    for (int r = 0; r < rt->n && !rt->lost; r++) {
        char why[320];
        if (rt->dev->health(rt->dev_ctx, r, why, sizeof(why)) != HN_OK) {
            snprintf(rt->lost_text, sizeof(rt->lost_text),
                     "hirnode: error: %s; this runtime refuses further runs (destroy it; restart the process "
                     "to use the device again)", why);
            rt->lost = 1;
        }
    }
    return rt->lost ? HN_ERR_DEVICE_LOST : HN_OK;
}

hn_status_t hn_runtime_finish_run(hn_runtime *rt, hn_status_t st)
{
    if (__atomic_load_n(&rt->abort_flag, __ATOMIC_ACQUIRE) || st != HN_OK) {
        int dead = __atomic_load_n(&rt->teams_dead, __ATOMIC_ACQUIRE);
        if (rt->graphs != NULL) {
            hn_runtime_graphs_abort(rt);
            hn_runtime_graphs_drop(rt);
        }
        for (int c = 0; c < rt->ncomms; c++)
            dead |= rt->comms[c].ops->abort(rt->comms[c].world);
        if (dead)
            destroy_teams(rt);
        __atomic_store_n(&rt->teams_dead, 0, __ATOMIC_RELEASE);
        rt->dev->recover(rt->dev_ctx);
        if (rt->err_status != HN_OK)
            st = rt->err_status;
        else if (st == HN_OK)
            st = HN_ERR_RUNTIME;
        if (hn_runtime_check_devices(rt) != HN_OK) { /* a lost device outlives the run: say so */
            snprintf(rt->err_text + strlen(rt->err_text), sizeof(rt->err_text) - strlen(rt->err_text),
                     "%s%s", rt->err_text[0] ? "\n" : "", rt->lost_text);
            st = HN_ERR_DEVICE_LOST;
        }
    }
    for (int c = 0; c < rt->ncomms; c++)
        rt->comms[c].ops->reset(rt->comms[c].world);
    return st;
}

void hn_runtime_begin_run(hn_runtime *rt, const hn_program *p)
{
    hn_runtime_clear_error(rt);
    hn_runtime_set_err_prog(rt, p);
    for (int c = 0; c < rt->ncomms; c++)
        rt->comms[c].ops->reset(rt->comms[c].world);
}

/* job A of a capture: every rank issues the program into it */
hn_status_t hn_runtime_capture_issue(hn_runtime *rt, hn_graph *g, void *const *const *io, void *const *streams)
{
    run_job j;
    memset(&j, 0, sizeof(j));
    j.p = g->lp;
    j.params = g->params;
    j.io_ptrs = io;
    j.streams = streams;
    j.capture = g;
    return hn_runtime_exec_all(rt, run_on_rank, &j);
}

hn_status_t hn_runtime_run_bound(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                 void *const *const *io_ptrs, int poison)
{
    run_job j = {hn_runtime_lowered_of(rt, p, params), params, io_ptrs, poison, 0, 0, NULL, NULL};
    hn_graph *g;
    hn_status_t st;
    if (rt->inflight > 0 && (st = hn_runtime_sync(rt)) != HN_OK) /* launches first */
        return st;
    /* graphs = 1: a configuration run before is replayed */
    if (rt->auto_graphs && !poison) {
        if ((st = hn_runtime_auto_graph(rt, p, params, io_ptrs, NULL, &g)) != HN_OK)
            return st;
        if (g != NULL) {
            hn_runtime_clear_error(rt);
            if ((st = hn_runtime_replay_streams(rt, g, NULL)) != HN_OK)
                return st;
            return hn_runtime_sync(rt);
        }
    }
    if (hn_runtime_check_devices(rt) != HN_OK) {
        snprintf(rt->err_text, sizeof(rt->err_text), "%s", rt->lost_text);
        return HN_ERR_DEVICE_LOST;
    }
    hn_runtime_begin_run(rt, j.p);
    return hn_runtime_finish_run(rt, hn_runtime_exec_all(rt, run_on_rank, &j));
}

hn_status_t hn_runtime_run_reference(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                     void *const *io_ptrs)
{
    run_job j = {hn_runtime_lowered_of(rt, p, params), params, (void *const *const *)io_ptrs, 0, 1, 0, NULL, NULL};
    hn_status_t st;
    if (rt->inflight > 0 && (st = hn_runtime_sync(rt)) != HN_OK)
        return st;
    if (hn_runtime_check_devices(rt) != HN_OK) {
        snprintf(rt->err_text, sizeof(rt->err_text), "%s", rt->lost_text);
        return HN_ERR_DEVICE_LOST;
    }
    hn_runtime_begin_run(rt, j.p);
    return hn_runtime_finish_run(rt, hn_runtime_exec_all(rt, run_on_rank, &j));
}

typedef struct prealloc_job {
    const hn_program *p;
    hn_comm_log *logs;
} prealloc_job;

static hn_status_t prealloc_on_rank(hn_rank *r, void *arg)
{
    prealloc_job *j = arg;
    const hn_comm_log *l = &j->logs[r->rank];
    hn_status_t made = rank_make_streams(r, l->streams);
    if (made != HN_OK)
        return made;
    for (int i = 0; i < l->nallocs; i++) {
        void *ptr;
        hn_status_t st = hn_rank_alloc_cached(r, j->p, l->allocs[i].instr, l->allocs[i].occurrence,
                                              l->allocs[i].bytes, &ptr);
        if (st != HN_OK) {
            char msg[192];
            size_t free_b = 0, total_b = 0;
            r->rt->dev->mem_info(r->rt->dev_ctx, r->rank, &free_b, &total_b);
            snprintf(msg, sizeof(msg), "cannot allocate %zu bytes on device %d (%s): %zu of %zu bytes free",
                     l->allocs[i].bytes, r->rank, hn_status_string(st), free_b, total_b);
            hn_runtime_fail(r->rt, r->rank, l->allocs[i].instr, st, msg);
            return st;
        }
    }
    return HN_OK;
}

void hn_rank_free_blocks_of(hn_rank *r, uint64_t prog, int all_but)
{
    int k = 0;
    for (int i = 0; i < r->nblocks; i++) {
        if ((r->blocks[i].prog == prog) != all_but) {
            if (r->blocks[i].ptr != NULL)
                r->rt->dev->mem_free(r->rt->dev_ctx, r->rank, r->blocks[i].ptr);
            continue;
        }
        r->blocks[k++] = r->blocks[i];
    }
    r->nblocks = k;
}

static hn_status_t release_on_rank(hn_rank *r, void *arg)
{
    hn_rank_free_blocks_of(r, *(const uint64_t *)arg, 1);
    return HN_OK;
}

/* Device memory held for other programs' buffers, given back when a
 * preparation runs out: launches in flight finish first, and the programs
 * given up are prepared anew at their next run. The number of blocks
 * freed (0: nothing to give back, or a launch failed). */
static int release_other_programs(hn_runtime *rt, uint64_t keep)
{
    int held = 0;
    for (int r = 0; r < rt->n; r++)
        for (int i = 0; i < rt->ranks[r].nblocks; i++)
            held += rt->ranks[r].blocks[i].prog != keep;
    if (held == 0 || (rt->inflight > 0 && hn_runtime_sync(rt) != HN_OK))
        return 0;
    (void)exec_all(rt, release_on_rank, &keep, 0);
    hn_runtime_graphs_invalidate(rt, keep, 1, "its program's buffers were given back when device memory ran out");
    for (int i = 0; i < HN_VERIFIED_CONFIGS; i++)
        if (rt->verified[i].prog != 0 && rt->verified[i].prog != keep)
            hn_runtime_forget_verified(rt, rt->verified[i].prog);
    return held;
}

static struct hn_verified *find_verified(hn_runtime *rt, const hn_program *p, const int64_t *params)
{
    for (int i = 0; i < HN_VERIFIED_CONFIGS; i++) {
        struct hn_verified *v = &rt->verified[i];
        if (v->prog == p->uid && v->nparams == p->nparams &&
            (p->nparams == 0 || memcmp(v->params, params, (size_t)p->nparams * sizeof(int64_t)) == 0))
            return v;
    }
    return NULL;
}

void hn_runtime_forget_verified(hn_runtime *rt, uint64_t prog)
{
    for (int i = 0; i < HN_VERIFIED_CONFIGS; i++)
        if (rt->verified[i].prog != 0 && (prog == 0 || rt->verified[i].prog == prog)) {
            hn_free(rt->verified[i].params);
            memset(&rt->verified[i], 0, sizeof(rt->verified[i]));
        }
}

static void remember_verified(hn_runtime *rt, const hn_program *p, const int64_t *params)
{
    struct hn_verified *v = &rt->verified[0];
    int64_t *copy = hn_malloc((size_t)(p->nparams + 1) * sizeof(int64_t));
    if (copy == NULL)
        return; /* prepared anew next time */
    for (int i = 1; i < HN_VERIFIED_CONFIGS; i++) /* a free entry, else the least recently used */
        if (v->prog != 0 && (rt->verified[i].prog == 0 || rt->verified[i].used < v->used))
            v = &rt->verified[i];
    hn_free(v->params);
    memcpy(copy, params, (size_t)p->nparams * sizeof(int64_t));
    v->prog = p->uid;
    v->params = copy;
    v->nparams = p->nparams;
    v->used = ++rt->verified_clock;
}

int hn_runtime_prepared(hn_runtime *rt, const hn_program *p, const int64_t *params)
{
    const hn_program *lp = hn_runtime_lowered_of(rt, p, params);
    return !(p->has_sched && lp == p) && find_verified(rt, lp, params) != NULL && !rt->lost;
}

hn_status_t hn_runtime_prepare(hn_runtime *rt, const hn_program *p, const int64_t *params,
                               hn_strbuf *diag)
{
    struct hn_verified *v;
    hn_comm_log *logs;
    hn_status_t st;
    prealloc_job pj;
    if (hn_runtime_check_devices(rt) != HN_OK) {
        hn_sb_printf(diag, "%s\n", rt->lost_text);
        return HN_ERR_DEVICE_LOST;
    }
    /* pipelined statements and stream-parallel loops run lowered (lower.c) */
    if ((st = hn_runtime_lowered(rt, p, params, &p, diag)) != HN_OK)
        return st;
    if ((v = find_verified(rt, p, params)) != NULL) {
        v->used = ++rt->verified_clock;
        return HN_OK;
    }
    rt->preparations++;
    logs = hn_calloc((size_t)rt->n, sizeof(*logs));
    if (logs == NULL)
        return HN_ERR_NOMEM;
    hn_runtime_clear_error(rt);
    hn_runtime_set_err_prog(rt, p); /* errors of the preparation name its instructions */
    st = hn_verify_run(p, rt->n, rt->cfg.nstreams, params, diag, logs);
    for (int r = 0; r < rt->n && st == HN_OK; r++)
        for (int i = 0; i < logs[r].n && st == HN_OK; i++) {
            const hn_comm_rec *rec = &logs[r].recs[i];
            const int *ranks = rec->is_p2p ? rt->all_ranks : hn_rec_team(&logs[r], rec);
            int n = rec->is_p2p ? rt->n : rec->nteam;
            /* as the run will resolve `via default` */
            hn_backend_kind via = rec->is_p2p ? (hn_backend_kind)rec->via
                                              : hn_via_resolve((hn_backend_kind)rec->via, rt->default_auto,
                                                               (hn_coll_kind)rec->kind, rec->count, rec->dtype, n);
            /* point-to-point goes through the team of all ranks */
            st = hn_runtime_ensure_team(rt, via, ranks, n);
            /* reductions stage chunks; the latency path stages allgathers too */
            if (st == HN_OK && !rec->is_p2p &&
                (rec->kind == HN_COLL_REDUCE_SCATTER || rec->kind == HN_COLL_ALLREDUCE ||
                 (rec->kind == HN_COLL_ALLGATHER && via == HN_VIA_LL))) {
                hn_team_entry *e = find_team(rt, rt->via_comm[via], ranks, n);
                size_t chunk = rec->kind == HN_COLL_ALLREDUCE ? (rec->count + (size_t)n - 1) / (size_t)n : rec->count;
                e->reserve = HN_MAX(e->reserve, chunk * (size_t)hn_dtype_size(rec->dtype));
            }
        }
    if (st == HN_OK && (st = join_new_teams(rt)) != HN_OK)
        hn_sb_printf(diag, "%s: error: cannot set up the communicators: %s\n", p->filename,
                     rt->err_text[0] ? rt->err_text : hn_status_string(st));
    if (st == HN_OK) {
        pj.p = p;
        pj.logs = logs;
        st = exec_all(rt, prealloc_on_rank, &pj, 0);
        if (st == HN_ERR_NOMEM && release_other_programs(rt, p->uid) > 0) {
            hn_runtime_clear_error(rt);
            hn_runtime_set_err_prog(rt, p);
            st = exec_all(rt, prealloc_on_rank, &pj, 0);
        }
        if (st != HN_OK) {
            /* said once, in diag */
            hn_sb_printf(diag, "%s\n", rt->err_text[0] ? rt->err_text : "error: cannot allocate the program's buffers");
            hn_runtime_clear_error(rt);
        }
    }
    hn_comm_logs_free(logs, rt->n);
    if (st == HN_OK)
        remember_verified(rt, p, params);
    return st;
}

void hn_resolved_free(hn_resolved *rs)
{
    hn_free(rs->params);
    hn_free(rs->io);
}

hn_status_t hn_runtime_resolve(hn_runtime *rt, const hn_program *p, const hn_run_args *args, hn_resolved *rs)
{
    hn_strbuf diag;
    hn_status_t st;
    int nio = p->ninputs + p->noutputs;
    hn_sb_init(&diag);
    rs->params = hn_calloc((size_t)p->nparams + 1, sizeof(int64_t));
    rs->io = hn_calloc((size_t)nio + 1, sizeof(*rs->io));
    if (rs->params == NULL || rs->io == NULL) {
        st = HN_ERR_NOMEM;
        goto done;
    }
    st = hn_params_resolve(p, rt->n, rt->cfg.nstreams, args->nparams, args->param_names,
                           args->param_values, rs->params, &diag);
    for (int k = 0; k < nio && st == HN_OK; k++) {
        const hn_io *x = k < p->ninputs ? &p->inputs[k] : &p->outputs[k - p->ninputs];
        for (int b = 0; b < args->nbindings; b++)
            if (strcmp(args->bindings[b].name, p->names[x->var]) == 0)
                rs->io[k] = (void **)args->bindings[b].data;
        if (rs->io[k] == NULL) {
            hn_sb_printf(&diag, "%s: error: no binding for %s '%s'\n", p->filename,
                         k < p->ninputs ? "input" : "output", p->names[x->var]);
            st = HN_ERR_INVALID;
        }
    }
    /* a configuration not yet prepared allocates: launches in flight first */
    if (st == HN_OK && !hn_runtime_prepared(rt, p, rs->params) && rt->inflight > 0 &&
        (st = hn_runtime_sync(rt)) != HN_OK) {
        hn_resolved_free(rs);
        hn_sb_free(&diag);
        return st; /* the earlier launch's error, in hn_runtime_error */
    }
    if (st == HN_OK)
        st = hn_runtime_prepare(rt, p, rs->params, &diag);
done:
    if (st != HN_OK) {
        hn_runtime_set_error_text(rt, diag.data ? diag.data : hn_status_string(st));
        hn_resolved_free(rs);
    }
    hn_sb_free(&diag);
    return st;
}

hn_status_t hn_runtime_run(hn_runtime *rt, const hn_program *p, const hn_run_args *args)
{
    hn_resolved rs = {NULL, NULL};
    hn_status_t st;
    if (rt == NULL || p == NULL || args == NULL)
        return HN_ERR_INVALID;
    if (rt->inflight > 0 && (st = hn_runtime_sync(rt)) != HN_OK)
        return st;
    hn_runtime_clear_error(rt);
    if ((st = hn_runtime_resolve(rt, p, args, &rs)) != HN_OK)
        return st;
    st = hn_runtime_run_bound(rt, p, rs.params, (void *const *const *)rs.io, 0);
    hn_resolved_free(&rs);
    return st;
}

/* ---- launches on the caller's streams ---- */

hn_status_t hn_runtime_launch(hn_runtime *rt, const hn_program *p, const hn_run_args *args, void *const *streams)
{
    hn_resolved rs = {NULL, NULL};
    run_job j;
    hn_status_t st;
    if (rt == NULL || p == NULL || args == NULL)
        return HN_ERR_INVALID;
    /* an earlier launch failed: collect it (its error is this call's) */
    if (rt->inflight > 0 && __atomic_load_n(&rt->abort_flag, __ATOMIC_ACQUIRE))
        return hn_runtime_sync(rt);
    /* errors of asynchronous work name instructions of the program in
     * flight: another program waits for those launches */
    if (rt->inflight > 0 && rt->inflight_prog != p->uid && (st = hn_runtime_sync(rt)) != HN_OK)
        return st;
    if (rt->inflight == 0)
        hn_runtime_clear_error(rt);
    if ((st = hn_runtime_resolve(rt, p, args, &rs)) != HN_OK)
        return st;
    /* graphs = 1: a configuration launched before is replayed */
    if (rt->auto_graphs) {
        hn_graph *g;
        if ((st = hn_runtime_auto_graph(rt, p, rs.params, (void *const *const *)rs.io, streams, &g)) != HN_OK ||
            g != NULL) {
            hn_resolved_free(&rs);
            return st != HN_OK ? st : hn_runtime_replay_streams(rt, g, streams);
        }
    }
    memset(&j, 0, sizeof(j));
    j.p = hn_runtime_lowered_of(rt, p, rs.params);
    j.params = rs.params;
    j.io_ptrs = (void *const *const *)rs.io;
    j.launch = 1;
    j.streams = streams;
    if (hn_runtime_check_devices(rt) != HN_OK) {
        hn_runtime_set_error_text(rt, rt->lost_text);
        hn_resolved_free(&rs);
        return HN_ERR_DEVICE_LOST;
    }
    hn_runtime_set_err_prog(rt, j.p);
    st = hn_runtime_exec_all(rt, run_on_rank, &j);
    hn_resolved_free(&rs);
    rt->inflight++;
    rt->inflight_prog = p->uid;
    /* a launch that could not be issued, or a traced one, ends here */
    if (st != HN_OK || rt->trace != NULL) {
        hn_status_t sync_st = hn_runtime_sync(rt);
        return st != HN_OK ? (rt->err_status != HN_OK ? rt->err_status : st) : sync_st;
    }
    return HN_OK;
}

static hn_status_t sync_on_rank(hn_rank *r, void *arg)
{
    hn_status_t st;
    (void)arg;
    st = sync_all(r);
    r->active = r->caller;
    r->follow = NULL; /* the next launch need not wait for anything */
    return st;
}

hn_status_t hn_runtime_sync(hn_runtime *rt)
{
    hn_status_t st;
    if (rt == NULL)
        return HN_ERR_INVALID;
    if (rt->inflight == 0)
        return HN_OK;
    st = hn_runtime_finish_run(rt, hn_runtime_exec_all(rt, sync_on_rank, NULL));
    rt->inflight = 0;
    return st;
}

static hn_status_t query_on_rank(hn_rank *r, void *arg)
{
    hn_status_t st = HN_OK;
    int *busy = arg;
    hn_dstream *s[HN_MAX_STREAMS + 2];
    int n = 0;
    s[n++] = r->caller;
    if (r->adopted != NULL)
        s[n++] = r->adopted;
    for (int k = 0; k < HN_MAX_STREAMS; k++)
        if (r->streams[k] != NULL)
            s[n++] = r->streams[k];
    for (int i = 0; i < n && st == HN_OK; i++)
        if ((st = r->rt->dev->stream_query(s[i])) == HN_ERR_BUSY) {
            __atomic_store_n(busy, 1, __ATOMIC_RELAXED);
            st = HN_OK;
        }
    return st;
}

hn_status_t hn_runtime_query(hn_runtime *rt)
{
    int busy = 0;
    hn_status_t st;
    if (rt == NULL)
        return HN_ERR_INVALID;
    if (rt->inflight == 0)
        return HN_OK;
    if (__atomic_load_n(&rt->abort_flag, __ATOMIC_ACQUIRE)) /* failed: collect */
        return hn_runtime_sync(rt);
    st = exec_all(rt, query_on_rank, &busy, 0);
    if (st != HN_OK)
        return hn_runtime_sync(rt);
    return busy ? HN_ERR_BUSY : hn_runtime_sync(rt);
}

/* ---- streams for embedders without their own ---- */

typedef struct stream_job {
    int rank, destroy;
    void *native;
} stream_job;

static hn_status_t stream_on_rank(hn_rank *r, void *arg)
{
    stream_job *j = arg;
    hn_runtime *rt = r->rt;
    hn_dstream *s;
    hn_status_t st;
    if (r->rank != j->rank)
        return HN_OK;
    if (j->destroy) {
        for (int i = 0; i < r->nuser_streams; i++)
            if (rt->dev->stream_native(r->user_streams[i]) == j->native) {
                if (r->adopted != NULL && r->adopted_native == j->native) {
                    rt->dev->stream_release(r->adopted);
                    r->adopted = NULL;
                }
                rt->dev->stream_destroy(r->user_streams[i]);
                r->user_streams[i] = r->user_streams[--r->nuser_streams];
                return HN_OK;
            }
        return HN_ERR_INVALID;
    }
    if (hn_grow((void **)&r->user_streams, &r->user_streams_cap, r->nuser_streams, sizeof(*r->user_streams)) != 0)
        return HN_ERR_NOMEM;
    if ((st = rt->dev->stream_create(rt->dev_ctx, r->rank, &s)) != HN_OK)
        return st;
    r->user_streams[r->nuser_streams++] = s;
    j->native = rt->dev->stream_native(s);
    return HN_OK;
}

hn_status_t hn_runtime_stream_create(hn_runtime *rt, int rank, void **stream)
{
    stream_job j = {rank, 0, NULL};
    hn_status_t st;
    if (rt == NULL || stream == NULL || rank < 0 || rank >= rt->n)
        return HN_ERR_INVALID;
    if ((st = exec_all(rt, stream_on_rank, &j, 0)) == HN_OK)
        *stream = j.native;
    return st;
}

void hn_runtime_stream_destroy(hn_runtime *rt, int rank, void *stream)
{
    stream_job j = {rank, 1, stream};
    if (rt == NULL || stream == NULL || rank < 0 || rank >= rt->n)
        return;
    if (rt->inflight > 0)
        (void)hn_runtime_sync(rt); /* its work first */
    (void)exec_all(rt, stream_on_rank, &j, 0);
}

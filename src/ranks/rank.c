/* One rank's resources, used by its own thread: the caller stream, a pool
 * of streams made between runs, the events that join them and order
 * launches, and the caching allocator (the same alloc returns the same
 * address run after run: peers cache pointers to it). */
#include <sched.h>
#include <string.h>

#include "rank.h"
#include "run_error.h"
#include "teams.h"

hn_status_t hn_rank_make_streams(hn_rank *r, unsigned used)
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

hn_status_t hn_rank_init(hn_rank *r, void *arg)
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
        (st = rt->dev->event_create(rt->dev_ctx, r->rank, &r->launch_done)) != HN_OK ||
        (st = rt->dev->event_create(rt->dev_ctx, r->rank, &r->ran_done)) != HN_OK)
        return st;
    return HN_OK;
}

hn_status_t hn_rank_sync_all(hn_rank *r)
{
    hn_runtime *rt = r->rt;
    hn_status_t st = HN_OK, s2;
    /* the runtime's work on an embedder's stream ends at ran_done (a
     * launch an embedder's capture took runs when the embedder says): the
     * runtime's own stream waits for that, the embedder's stream is never
     * touched again (it may be destroyed since: CUDA allows that with work
     * pending, and a server does it) */
    if (r->adopted != NULL && r->caller != NULL) {
        hn_origin o = {&rt->sink, r->rank, -1, NULL, NULL};
        st = rt->dev->stream_wait_event(r->caller, r->ran_done, &o);
    }
    if (r->caller != NULL && (s2 = rt->dev->stream_sync(r->caller)) != HN_OK)
        st = s2;
    for (int i = 0; i < HN_MAX_STREAMS; i++)
        if (r->streams[i] != NULL && (s2 = rt->dev->stream_sync(r->streams[i])) != HN_OK)
            st = s2;
    /* named after what waits: the graph a replay launched, else the last
     * communication issued (a collective whose peer never came; the
     * device cannot say more), else the last instruction issued */
    uint64_t replayed = __atomic_load_n(&r->replayed, __ATOMIC_RELAXED);
    int comm = __atomic_load_n(&r->last_comm, __ATOMIC_RELAXED);
    if (st == HN_ERR_TIMEOUT && replayed != 0) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "a replay of graph %llu did not finish before the deadline (%.0f s): a communication in it waits "
                 "for a peer's part that never came, or a kernel before it never ended",
                 (unsigned long long)replayed, rt->cfg.timeout_s);
        hn_runtime_fail(rt, r->rank, -1, st, msg);
    } else if (st == HN_ERR_TIMEOUT && comm >= 0) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "the work issued up to here did not finish before the deadline (%.0f s): this communication (the "
                 "rank's last) or one before it waits for a peer that never came, or a kernel before it never ended",
                 rt->cfg.timeout_s);
        hn_runtime_fail(rt, r->rank, comm, st, msg);
    } else if (st == HN_ERR_TIMEOUT)
        hn_runtime_fail(rt, r->rank, __atomic_load_n(&r->current_instr, __ATOMIC_RELAXED), st,
                        "the run's work issued up to here did not finish before the deadline");
    else if (st != HN_OK && st != HN_ERR_ABORTED)
        hn_runtime_fail(rt, r->rank, __atomic_load_n(&r->current_instr, __ATOMIC_RELAXED), st,
                        "the device failed in work issued up to here (its error is logged above)");
    return st;
}

static int idle(hn_runtime *rt, hn_dstream *s) { return s == NULL || rt->dev->stream_query(s) != HN_ERR_BUSY; }

hn_status_t hn_rank_drain(hn_rank *r, void *arg)
{
    hn_runtime *rt = r->rt;
    double until = *(const double *)arg;
    for (;;) {
        int all = idle(rt, r->caller);
        for (int i = 0; i < HN_MAX_STREAMS && all; i++)
            all = idle(rt, r->streams[i]);
        if (all)
            return HN_OK;
        if (hn_now() > until)
            return HN_ERR_TIMEOUT;
        sched_yield();
    }
}

hn_status_t hn_rank_fini(hn_rank *r, void *arg)
{
    hn_runtime *rt = r->rt;
    (void)arg;
    hn_rank_sync_all(r);
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
    rt->dev->event_destroy(r->ran_done);
    r->launch_start = r->launch_done = r->ran_done = NULL;
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

hn_status_t hn_rank_sync_job(hn_rank *r, void *arg)
{
    hn_status_t st;
    (void)arg;
    st = hn_rank_sync_all(r);
    r->active = r->caller;
    r->follow = NULL; /* the next launch need not wait for anything */
    return st;
}

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
        hn_teams_forget_stream(rt, r->rank, r->adopted);
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
 * and the caller stream's workspace). A capture forks and joins the same
 * way; a replay follows and marks done. */
hn_status_t hn_rank_order_launch(hn_rank *r, hn_dstream *s, unsigned steps, const void *previous)
{
    hn_runtime *rt = r->rt;
    hn_origin o = {&rt->sink, r->rank, -1, NULL, NULL};
    hn_status_t st = HN_OK;
    if (steps & HN_LAUNCH_FOLLOW)
        st = hn_rank_launch_follow(r, s, previous);
    if ((steps & HN_LAUNCH_FORK) && st == HN_OK) {
        st = rt->dev->event_record(r->launch_start, s);
        for (int k = 0; k < HN_MAX_STREAMS && st == HN_OK; k++)
            if (r->streams[k] != NULL)
                st = rt->dev->stream_wait_event(r->streams[k], r->launch_start, &o);
    }
    if (steps & HN_LAUNCH_JOIN)
        for (int k = 0; k < HN_MAX_STREAMS && st == HN_OK; k++)
            if (r->streams[k] != NULL &&
                (st = rt->dev->event_record(r->stream_event[k + 1], r->streams[k])) == HN_OK)
                st = rt->dev->stream_wait_event(s, r->stream_event[k + 1], &o);
    if ((steps & HN_LAUNCH_DONE) && st == HN_OK)
        st = hn_rank_launch_done(r, s);
    return st;
}

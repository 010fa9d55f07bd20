/* Issuing a prepared program on every rank: a run (issued, then every
 * stream synchronised), a launch (issued on the caller's streams, joined
 * later), a capture (issued into a backend graph) and the reference run of
 * --check, each a job of the rank threads; the start and end of a run; the
 * end of the launches in flight; and the preamble of every call that
 * issues work. */
#include <stdio.h>
#include <string.h>

#include "config_cache.h"
#include "../exec/eval.h"
#include "issue.h"
#include "../ir/params.h"
#include "../ranks/pool.h"
#include "graph_state.h"
#include "procs.h"
#include "../ranks/rank.h"
#include "../ranks/run_error.h"
#include "../ranks/teams.h"
#include "../trace/trace.h"

typedef struct run_job {
    const hn_program *p; /* as it runs: lowered */
    const int64_t *params;
    void *const *const *io_ptrs; /* [k][local rank]; the reference run: [k], global tensors on rank 0 */
    int poison;
    int reference;
    void *const *streams; /* a launch or capture: the caller's stream of each local rank (NULL: the runtime's) */
    hn_graph *capture;    /* a capture: issued into it */
    hn_graph *into;       /* a launch inside a capture of the caller's: its graph (graph.c) */
} run_job;

static hn_status_t bind_io(hn_exec *x, const run_job *j, int rank, int local)
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
        v->t.data = j->reference ? ((void *const *)j->io_ptrs)[k] : j->io_ptrs[k][local];
        v->kind = HN_V_TENSOR;
        v->owned = 0;
    }
    if (st != HN_OK)
        hn_runtime_fail(x->rt, rank, -1, st, err.data ? err.data : "cannot bind inputs");
    hn_sb_free(&err);
    return st;
}

/* The evaluator's state for the body on rank r (graph: a capture's state
 * of this rank); a traced run starts recording. Nothing to release on
 * failure. */
static hn_status_t body_begin(hn_rank *r, const run_job *j, hn_exec *x, const hn_graph_ctx *graph)
{
    hn_runtime *rt = r->rt;
    hn_status_t st;
    if ((st = hn_exec_prepare(x, j->p, r->rank, rt->world, rt->cfg.nstreams, j->params)) != HN_OK) {
        hn_runtime_fail(rt, r->rank, -1, st, "out of memory");
        return st;
    }
    x->rt = rt;
    x->r = r;
    x->graph = graph;
    if (graph == NULL) { /* issued work, not a capture: a sync names it */
        __atomic_store_n(&r->last_comm, -1, __ATOMIC_RELAXED); /* (the watchdog reads them) */
        __atomic_store_n(&r->replayed, 0, __ATOMIC_RELAXED);
    }
    x->poison = j->poison;
    x->reference = j->reference;
    x->promote = j->reference;
    if (rt->trace != NULL && !j->reference)
        x->trace = hn_trace_run_begin(rt->trace, r, x->p, &x->trace_hook);
    return HN_OK;
}

/* The body issued on r->active, its inputs and outputs bound; a timed run
 * marks its start and end. */
static hn_status_t body_issue(hn_rank *r, const run_job *j, hn_exec *x, int timed)
{
    hn_status_t st = bind_io(x, j, r->rank, r->local);
    if (st == HN_OK && timed)
        st = hn_rank_run_mark(r, 0);
    if (st == HN_OK)
        st = hn_exec_block(x, j->reference ? &j->p->reference : &j->p->body);
    if (st == HN_OK && timed)
        st = hn_rank_run_mark(r, 1);
    return st;
}

static hn_status_t run_rank(hn_rank *r, void *arg)
{
    const run_job *j = arg;
    hn_runtime *rt = r->rt;
    hn_exec x;
    hn_status_t st, sync_st;
    r->active = r->caller;
    if ((st = body_begin(r, j, &x, NULL)) != HN_OK)
        return st;
    st = body_issue(r, j, &x, rt->time_runs);
    /* the end of a run joins every stream of this rank */
    sync_st = hn_rank_sync_all(r);
    if (st == HN_OK && sync_st == HN_OK && rt->time_runs)
        hn_rank_run_measure(r);
    if (x.trace != NULL)
        hn_trace_run_end(x.trace, st == HN_OK && sync_st == HN_OK);
    hn_exec_release(&x);
    return st != HN_OK ? st : sync_st;
}

static hn_status_t reference_rank(hn_rank *r, void *arg)
{
    const run_job *j = arg;
    hn_exec x;
    hn_status_t st, sync_st;
    if (r->rank != r->rt->first) /* the first rank here: rank 0 in one process */
        return HN_OK;
    r->active = r->caller;
    if ((st = body_begin(r, j, &x, NULL)) != HN_OK)
        return st;
    st = body_issue(r, j, &x, 0);
    sync_st = hn_rank_sync_all(r);
    hn_exec_release(&x);
    return st != HN_OK ? st : sync_st;
}

static hn_status_t launch_rank(hn_rank *r, void *arg)
{
    const run_job *j = arg;
    hn_runtime *rt = r->rt;
    const void *previous = r->follow;
    hn_exec x;
    hn_status_t st, sync_st;
    r->active = r->caller;
    if ((st = hn_rank_launch_stream(r, j->streams != NULL ? j->streams[r->local] : NULL, &r->active)) != HN_OK ||
        (st = hn_rank_order_launch(r, r->active, HN_LAUNCH_FOLLOW | HN_LAUNCH_FORK, previous)) != HN_OK) {
        r->active = r->caller;
        hn_runtime_fail(rt, r->rank, -1, st, "cannot issue the launch on the caller's stream");
        return st;
    }
    /* inside the caller's capture: the graph's state kept by it, and made, as for a capture */
    if (j->into != NULL &&
        ((st = hn_graph_hold_keep(r, j->into->hold)) != HN_OK || (st = hn_graph_state_begin(r, j->into)) != HN_OK)) {
        hn_graph_state_end(r, j->into);
        return st;
    }
    if ((st = body_begin(r, j, &x, j->into != NULL ? &j->into->ctx[r->local] : NULL)) != HN_OK) {
        if (j->into != NULL)
            hn_graph_state_end(r, j->into);
        return st;
    }
    st = body_issue(r, j, &x, rt->time_runs);
    /* issued: the launch returns; hn_runtime_sync joins it (inside the
     * caller's capture, every replay ends as the runtime's replays end) */
    if (j->into == NULL) {
        sync_st = hn_rank_order_launch(r, r->active, HN_LAUNCH_JOIN | HN_LAUNCH_DONE, NULL);
    } else {
        sync_st = hn_rank_order_launch(r, r->active, HN_LAUNCH_JOIN, NULL);
        if (st == HN_OK && sync_st == HN_OK)
            st = hn_graph_state_finish(r, j->into);
        if (sync_st == HN_OK)
            sync_st = hn_rank_order_launch(r, r->active, HN_LAUNCH_DONE, NULL);
        hn_graph_state_end(r, j->into);
    }
    r->follow = rt->dev->stream_native(r->active);
    if (sync_st != HN_OK)
        hn_runtime_fail(rt, r->rank, -1, sync_st, "cannot join the launch's streams");
    if (x.trace != NULL) /* a traced launch is synchronous */
        hn_trace_run_end(x.trace, st == HN_OK && sync_st == HN_OK && hn_rank_sync_all(r) == HN_OK);
    hn_exec_release(&x);
    return st != HN_OK ? st : sync_st;
}

/* Job A of a capture (graph.c ends it, job B): the capture begun on the
 * launch's stream, the pool streams forked in, the program issued with the
 * graph's state in every origin, the pool streams joined back. */
static hn_status_t capture_rank(hn_rank *r, void *arg)
{
    const run_job *j = arg;
    hn_runtime *rt = r->rt;
    hn_exec x;
    hn_status_t st, sync_st;
    r->active = r->caller;
    /* launches before were synced: no previous stream to follow */
    if ((st = hn_rank_launch_stream(r, j->streams != NULL ? j->streams[r->local] : NULL, &r->active)) != HN_OK ||
        (st = rt->dev->capture_begin(r->active)) != HN_OK) {
        r->active = r->caller;
        hn_runtime_fail(rt, r->rank, -1, st, "cannot begin a capture on the launch's stream");
        return st;
    }
    r->capturing = 1;
    /* every pool stream enters the capture after what the stream holds */
    if ((st = hn_rank_order_launch(r, r->active, HN_LAUNCH_FORK, NULL)) != HN_OK) {
        hn_runtime_fail(rt, r->rank, -1, st, "cannot fork the pool streams into the capture");
        return st;
    }
    if ((st = body_begin(r, j, &x, &j->capture->ctx[r->local])) != HN_OK)
        return st;
    st = body_issue(r, j, &x, 0);
    /* the capture stays open: graph.c ends it */
    sync_st = st == HN_OK ? hn_rank_order_launch(r, r->active, HN_LAUNCH_JOIN, NULL) : HN_OK;
    if (sync_st != HN_OK)
        hn_runtime_fail(rt, r->rank, -1, sync_st, "cannot join the captured streams");
    hn_exec_release(&x);
    return st != HN_OK ? st : sync_st;
}

/* ---- the start and end of a run ---- */

void hn_runtime_begin_run(hn_runtime *rt, const hn_program *p)
{
    hn_runtime_clear_error(rt);
    hn_runtime_set_err_prog(rt, p);
    hn_teams_reset(rt);
}

hn_status_t hn_runtime_finish_run(hn_runtime *rt, hn_status_t st)
{
    if (hn_procs(rt))
        return hn_procs_finish_run(rt, st);
    if (__atomic_load_n(rt->abort_flag, __ATOMIC_ACQUIRE) || st != HN_OK) {
        int dead = __atomic_load_n(&rt->teams_dead, __ATOMIC_ACQUIRE), aborted = 0;
        /* every device-side wait released and the streams drained before
         * anything waits on a device; if they did not drain, the runtime
         * is lost and the teams stay as they are */
        hn_status_t drained = hn_cache_abort_all(rt, &aborted);
        dead |= aborted;
        if (dead && drained == HN_OK) {
            /* their flags and barriers go with the teams; the next run
             * prepares its configuration, and makes its teams, again */
            hn_teams_destroy(rt);
            hn_cache_forget(rt, NULL, 0, "the communicators were made anew after a failure");
        }
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
    hn_teams_reset(rt);
    return st;
}

hn_status_t hn_runtime_finish_launches(hn_runtime *rt)
{
    hn_status_t st;
    if (rt->inflight == 0)
        return HN_OK;
    st = hn_runtime_finish_run(rt, hn_runtime_exec_all(rt, hn_rank_sync_job, NULL));
    rt->inflight = 0;
    return st;
}

void hn_runtime_collect_launches(hn_runtime *rt)
{
    hn_status_t st = hn_runtime_finish_launches(rt);
    if (st != HN_OK && rt->pending == HN_OK)
        rt->pending = st;
}

hn_status_t hn_runtime_take_pending(hn_runtime *rt)
{
    hn_status_t st = rt->pending;
    rt->pending = HN_OK;
    return st;
}

hn_status_t hn_runtime_enter(hn_runtime *rt, uint64_t prog, int poll)
{
    hn_status_t st;
    if (rt->pending != HN_OK) /* its error text is still the runtime's */
        return hn_runtime_take_pending(rt);
    if (hn_procs(rt) && hn_procs_check_lost(rt) != HN_OK)
        return HN_ERR_PEER_LOST;
    /* a launch may replay its configuration's graph (graphs = 1): replays of
     * its program in flight go on, its eager issue waits for them itself
     * (hn_issue_launch); a replay waits for eager launches of its program */
    if (rt->inflight > 0 &&
        (prog == 0 || (rt->inflight_prog != prog && rt->inflight_prog != hn_replay_key(prog)) ||
         __atomic_load_n(rt->abort_flag, __ATOMIC_ACQUIRE)) &&
        (st = hn_runtime_finish_launches(rt)) != HN_OK)
        return st;
    if (rt->inflight == 0)
        hn_runtime_clear_error(rt);
    if (poll ? hn_runtime_check_devices(rt) != HN_OK : rt->lost) {
        hn_runtime_set_error_text(rt, rt->lost_text);
        return HN_ERR_DEVICE_LOST;
    }
    return HN_OK;
}

/* ---- the jobs ---- */

hn_status_t hn_issue_run(hn_runtime *rt, const hn_program *lp, const int64_t *params, void *const *const *io,
                         int poison)
{
    run_job j = {lp, params, io, poison, 0, NULL, NULL, NULL};
    hn_runtime_begin_run(rt, lp);
    return hn_runtime_finish_run(rt, hn_runtime_exec_all(rt, run_rank, &j));
}

hn_status_t hn_issue_reference(hn_runtime *rt, const hn_program *lp, const int64_t *params, void *const *io)
{
    run_job j = {lp, params, (void *const *const *)io, 0, 1, NULL, NULL, NULL};
    hn_runtime_begin_run(rt, lp);
    return hn_runtime_finish_run(rt, hn_runtime_exec_all(rt, reference_rank, &j));
}

static hn_status_t issue_launch(hn_runtime *rt, const hn_program *lp, uint64_t prog, const int64_t *params,
                                void *const *const *io, void *const *streams, hn_graph *into)
{
    run_job j = {lp, params, io, 0, 0, streams, NULL, into};
    hn_status_t st;
    /* never in flight with replays of the program (hn_replay_key) */
    if (rt->inflight > 0 && rt->inflight_prog == hn_replay_key(prog) && (st = hn_runtime_finish_launches(rt)) != HN_OK)
        return rt->err_status != HN_OK ? rt->err_status : st;
    hn_runtime_set_err_prog(rt, lp);
    st = hn_runtime_exec_all(rt, launch_rank, &j);
    rt->inflight++;
    rt->inflight_prog = prog;
    /* a launch that could not be issued, or a traced one, ends here */
    if (st != HN_OK || rt->trace != NULL) {
        hn_status_t sync_st = hn_runtime_finish_launches(rt);
        return st != HN_OK ? (rt->err_status != HN_OK ? rt->err_status : st) : sync_st;
    }
    return HN_OK;
}

hn_status_t hn_issue_launch(hn_runtime *rt, const hn_program *lp, uint64_t prog, const int64_t *params,
                            void *const *const *io, void *const *streams)
{
    return issue_launch(rt, lp, prog, params, io, streams, NULL);
}

hn_status_t hn_issue_launch_into(hn_runtime *rt, hn_graph *g, uint64_t prog, const int64_t *params,
                                 void *const *const *io, void *const *streams)
{
    return issue_launch(rt, g->lp, prog, params, io, streams, g);
}

hn_status_t hn_issue_capture(hn_runtime *rt, hn_graph *g, void *const *const *io, void *const *streams)
{
    run_job j = {g->lp, g->params, io, 0, 0, streams, g, NULL};
    return hn_runtime_exec_all(rt, capture_rank, &j);
}

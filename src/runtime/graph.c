/* Graphs: a program captured for one configuration and replayed with one
 * backend launch per rank (docs/INTERNALS.md "Graphs"). A capture is a
 * launch whose issue goes into the backend's capture instead of its
 * streams (issue.c, job A), ended here (job B) with what every replay
 * must end with: the communicators' end of a replay (p2p: a barrier of the
 * ranks) and the graph's epoch raised. A replay needs no rank thread: the caller's
 * thread launches every rank's graph. The setting graphs = 1 captures a
 * configuration the second time it runs and replays it afterwards. */
#include <stdio.h>
#include <string.h>

#include "config_cache.h"
#include "../exec/fault_inject.h"
#include "graph.h"
#include "graph_state.h"
#include "issue.h"
#include "../ranks/pool.h"
#include "prepare.h"
#include "../ranks/rank.h"
#include "../ranks/run_error.h"

static hn_status_t begin_on_rank(hn_rank *r, void *arg) { return hn_graph_state_begin(r, arg); }

/* job B: the end of every replay, and the end of the capture (also after
 * a failure, so that the stream leaves capture mode) */
static hn_status_t finish_on_rank(hn_rank *r, void *arg)
{
    hn_graph *g = arg;
    hn_runtime *rt = r->rt;
    hn_status_t st = __atomic_load_n(rt->abort_flag, __ATOMIC_ACQUIRE) ? HN_ERR_ABORTED : HN_OK, end_st;
    if (!r->capturing)
        return st;
    if (st == HN_OK)
        st = hn_graph_state_finish(r, g);
    if (g->updated == NULL) {
        end_st = rt->dev->capture_end(r->active, &g->g[r->local]);
    } else if (st == HN_OK) { /* a rebind: the new capture into the graph replays launch */
        end_st = g->updated[r->local] = rt->dev->capture_update(r->active, g->g[r->local], g->moving, g->nmoving);
        if (end_st == HN_ERR_UNSUPPORTED) /* not a failure of the run: the rebind says so */
            end_st = HN_OK;
    } else { /* a rebind whose capture failed: ended, and what it made dropped */
        hn_dgraph *dropped = NULL;
        g->updated[r->local] = st;
        if ((end_st = rt->dev->capture_end(r->active, &dropped)) == HN_OK)
            rt->dev->graph_destroy(dropped);
    }
    r->capturing = 0;
    r->active = r->caller;
    if (st == HN_OK && end_st != HN_OK) {
        hn_runtime_fail(rt, r->rank, -1, end_st,
                        "the capture could not be made a graph (work that cannot be captured was issued; "
                        "the backend's error is logged above)");
        st = end_st;
    }
    return st;
}

static hn_status_t end_on_rank(hn_rank *r, void *arg)
{
    hn_graph_state_end(r, arg);
    return HN_OK;
}

static hn_status_t free_on_rank(hn_rank *r, void *arg)
{
    hn_graph *g = arg;
    if (g->g[r->local] != NULL)
        r->rt->dev->graph_destroy(g->g[r->local]);
    g->g[r->local] = NULL;
    hn_graph_state_free(r, g);
    return HN_OK;
}

/* Frees g (its replays have finished: the caller saw to it). */
static void graph_free(hn_runtime *rt, hn_graph *g)
{
    hn_cache_remove_graph(rt, g);
    if (g->ctx != NULL && g->g != NULL)
        (void)hn_runtime_exec_all(rt, free_on_rank, g);
    hn_free(g->params);
    hn_free(g->io);
    hn_free(g->bytes);
    hn_free(g->natives);
    hn_free(g->ctx);
    hn_free(g->g);
    if (g->hold != NULL)
        hn_graph_hold_drop(g->hold);
    hn_free(g);
}

/* Captures p (prepared: rs) for these streams. */
static hn_status_t capture(hn_runtime *rt, const hn_program *p, const int64_t *params, void *const *const *io,
                           const size_t *const *bytes, void *const *streams, int automatic, hn_graph **out)
{
    int n = rt->nlocal, nio = p->ninputs + p->noutputs;
    hn_graph *g = hn_calloc(1, sizeof(*g));
    hn_status_t st, st2;
    *out = NULL;
    if (g == NULL)
        return HN_ERR_NOMEM;
    g->rt = rt;
    g->id = ++rt->graph_ids;
    g->prog = p->uid;
    g->lp = hn_runtime_lowered_of(rt, p, params);
    g->lp_uid = g->lp->uid;
    g->nparams = p->nparams;
    g->nio = nio;
    g->automatic = automatic;
    g->params = hn_calloc((size_t)p->nparams + 1, sizeof(int64_t));
    g->io = hn_calloc((size_t)nio * (size_t)n + 1, sizeof(void *));
    g->bytes = hn_calloc((size_t)nio * (size_t)n + 1, sizeof(size_t));
    g->natives = hn_calloc((size_t)n, sizeof(void *));
    g->ctx = hn_calloc((size_t)n, sizeof(hn_graph_ctx));
    g->g = hn_calloc((size_t)n, sizeof(hn_dgraph *));
    if (g->params == NULL || g->io == NULL || g->bytes == NULL || g->natives == NULL || g->ctx == NULL ||
        g->g == NULL) {
        graph_free(rt, g);
        return HN_ERR_NOMEM;
    }
    memcpy(g->params, params, (size_t)p->nparams * sizeof(int64_t));
    for (int k = 0; k < nio; k++)
        for (int r = 0; r < n; r++) {
            g->io[(size_t)k * (size_t)n + (size_t)r] = io[k][r];
            g->bytes[(size_t)k * (size_t)n + (size_t)r] = bytes != NULL ? bytes[k][r] : 0;
        }
    for (int r = 0; r < n; r++)
        g->natives[r] = streams != NULL ? streams[r] : NULL;
    hn_runtime_clear_error(rt);
    hn_runtime_set_err_prog(rt, g->lp);
    if ((st = hn_runtime_exec_all(rt, begin_on_rank, g)) == HN_OK) {
        hn_runtime_begin_run(rt, g->lp);
        st = hn_issue_capture(rt, g, io, streams);
        st2 = hn_runtime_exec_all(rt, finish_on_rank, g); /* every begun capture ends */
        if (st == HN_OK)
            st = st2;
    }
    (void)hn_runtime_exec_all(rt, end_on_rank, g);
    st = hn_runtime_finish_run(rt, st);
    hn_cache_add_graph(rt, g);
    if (st != HN_OK) {
        char keep[sizeof(rt->err_text)];
        snprintf(keep, sizeof(keep), "%s", rt->err_text);
        graph_free(rt, g);
        snprintf(rt->err_text, sizeof(rt->err_text), "%s", keep);
        return st;
    }
    g->valid = 1;
    *out = g;
    return HN_OK;
}

/* Whether every injected fault is a skip: the one kind a capture takes
 * (captured whole; the rank it names then skips its replays, so that its
 * peers' parts of every replay wait for it). */
static int only_skips(const hn_fault_plan *plan)
{
    for (int i = 0; i < plan->n; i++)
        if (plan->f[i].kind != HN_FAULT_SKIP)
            return 0;
    return 1;
}

hn_status_t hn_runtime_capture(hn_runtime *rt, const hn_program *p, const hn_run_args *args, void *const *streams,
                               hn_graph **out)
{
    hn_resolved rs = {0};
    hn_status_t st;
    if (rt == NULL || p == NULL || args == NULL || out == NULL)
        return HN_ERR_INVALID;
    *out = NULL;
    if ((st = hn_runtime_enter(rt, 0, 1)) != HN_OK)
        return st;
    if (rt->trace != NULL || !only_skips(&rt->faults)) {
        snprintf(rt->err_text, sizeof(rt->err_text), "hirnode: error: a graph cannot be captured %s",
                 rt->trace != NULL ? "while tracing" : "with injected faults (HIRNODE_FAULT) other than skip");
        return HN_ERR_UNSUPPORTED;
    }
    if ((st = hn_runtime_resolve(rt, p, args, &rs)) != HN_OK)
        return st;
    st = capture(rt, p, rs.params, (void *const *const *)rs.io, rs.b.bytes, streams, 0, out);
    hn_resolved_free(&rs);
    return st;
}

/* ---- a launch inside a capture of the caller's (torch.cuda.graph) ---- */

void hn_graphs_collect(hn_runtime *rt)
{
    hn_graph *g, *next;
    for (g = rt->graphs; g != NULL; g = next) {
        next = g->next;
        if (g->hold != NULL && !hn_graph_hold_held(g->hold))
            graph_free(rt, g); /* (its work went with the caller's graph) */
    }
}

hn_status_t hn_graph_launch_foreign(hn_runtime *rt, const hn_program *lp, uint64_t prog, const int64_t *params,
                                    void *const *const *io, void *const *streams)
{
    int n = rt->nlocal;
    hn_graph *g;
    hn_graphs_collect(rt);
    if ((g = hn_calloc(1, sizeof(*g))) == NULL)
        return HN_ERR_NOMEM;
    g->rt = rt;
    g->id = ++rt->graph_ids;
    g->prog = prog;
    g->lp = lp;
    g->lp_uid = lp->uid;
    snprintf(g->why, sizeof(g->why), "a launch inside a capture of the caller's: the caller replays it");
    g->ctx = hn_calloc((size_t)n, sizeof(hn_graph_ctx));
    g->g = hn_calloc((size_t)n, sizeof(hn_dgraph *));
    g->hold = hn_graph_hold_new();
    if (g->ctx == NULL || g->g == NULL || g->hold == NULL) {
        hn_free(g->ctx);
        hn_free(g->g);
        hn_free(g->hold);
        hn_free(g);
        return HN_ERR_NOMEM;
    }
    hn_cache_add_graph(rt, g); /* freed once the caller's captures let go (hn_graphs_collect) */
    return hn_issue_launch_into(rt, g, prog, params, io, streams);
}

/* ---- rebinding (rebind.c): the program captured again, into g's backend graphs ---- */

/* Captures g's program again with io on every rank and puts the capture
 * into each rank's backend graph in place: under a new id (sequences keyed
 * by it start afresh, the communicators' state of the old one taken
 * over), with g's epoch words (what was captured reads them relative).
 * m (nm moves, or NULL): how the bindings move, for the backends to learn
 * from (graph.h). */
hn_status_t hn_graph_recapture(hn_runtime *rt, hn_graph *g, void *const *const *io, const hn_moved *m, int nm)
{
    hn_status_t st, st2;
    uint64_t prev = g->id;
    int bad = -1;
    if ((g->updated = hn_calloc((size_t)rt->nlocal, sizeof(hn_status_t))) == NULL) {
        g->valid = 0; /* as any failure of a capture again: the caller may have moved part of it */
        snprintf(g->why, sizeof(g->why), "a rebind ran out of memory");
        return HN_ERR_NOMEM;
    }
    g->id = ++rt->graph_ids;
    g->moving = m;
    g->nmoving = m != NULL ? nm : 0;
    for (int i = 0; i < rt->nlocal; i++)
        g->ctx[i].prev = prev;
    hn_runtime_clear_error(rt);
    hn_runtime_set_err_prog(rt, g->lp);
    if ((st = hn_runtime_exec_all(rt, begin_on_rank, g)) == HN_OK) {
        hn_runtime_begin_run(rt, g->lp);
        st = hn_issue_capture(rt, g, io, NULL); /* a graph launches on any stream */
        st2 = hn_runtime_exec_all(rt, finish_on_rank, g);
        if (st == HN_OK)
            st = st2;
    }
    (void)hn_runtime_exec_all(rt, end_on_rank, g);
    g->moving = NULL;
    g->nmoving = 0;
    for (int i = 0; i < rt->nlocal; i++) {
        g->ctx[i].prev = 0;
        if (bad < 0 && g->updated[i] != HN_OK)
            bad = rt->ranks[i].rank;
    }
    st = hn_runtime_finish_run(rt, st); /* a failure made every graph unusable */
    if (st == HN_OK && bad >= 0) {
        g->valid = 0;
        snprintf(g->why, sizeof(g->why), "a rebind could not update rank %d's graph in place", bad);
        snprintf(rt->err_text, sizeof(rt->err_text),
                 "hirnode: error: the %s backend could not update rank %d's graph in place (the new capture's "
                 "structure differs; the backend's reason is logged): the graph is unusable, capture again",
                 rt->dev->name, bad);
        st = HN_ERR_UNSUPPORTED;
    }
    hn_free(g->updated);
    g->updated = NULL;
    return st;
}

typedef struct replay_job {
    hn_graph *g;
    void *const *streams;
} replay_job;

/* One rank's part of a replay, ordered like a launch (rank.c): after the
 * rank's launch in flight when that runs on another stream; marked done
 * at the end. From the caller's thread or the rank's. */
static hn_status_t replay_on_rank(hn_rank *r, void *arg)
{
    replay_job *j = arg;
    hn_runtime *rt = r->rt;
    const void *previous = r->follow;
    hn_dstream *s;
    hn_status_t st;
    if (rt->faults.n > 0 && hn_faults_skip_replay(rt, r->rank))
        return HN_OK; /* an injected skip: this rank's part never comes */
    st = hn_rank_launch_stream(r, j->streams != NULL ? j->streams[r->local] : NULL, &s);
    if (st == HN_OK)
        st = hn_rank_launch_follow(r, s, previous);
    if (st == HN_OK)
        st = rt->dev->graph_launch(j->g->g[r->local], s);
    if (st == HN_OK)
        st = hn_rank_launch_done(r, s);
    if (st == HN_OK) {
        r->active = s;
        r->follow = rt->dev->stream_native(s);
        __atomic_store_n(&r->replayed, j->g->id, __ATOMIC_RELAXED); /* (the watchdog reads it) */
    } else {
        hn_runtime_fail(rt, r->rank, -1, st, "cannot launch the rank's graph");
    }
    return st;
}

hn_status_t hn_replay_path_parse(const char *text, int *path)
{
    static const char *const names[] = {"bells", "jobs", "caller"};
    for (int i = 0; i < HN_ARRAY_LEN(names); i++)
        if (text != NULL && strcmp(text, names[i]) == 0) {
            *path = i;
            return HN_OK;
        }
    HN_ERROR("HIRNODE_REPLAY=%s: expected bells, jobs or caller", text != NULL ? text : "");
    return HN_ERR_INVALID;
}

/* Every rank's part of a replay, by the path the setting replay names:
 * - bells (the default): the caller rings the doorbells of ranks 1 .. n-1,
 *   whose threads spin for them between jobs (no lock, no syscall when
 *   they are awake), launches rank 0's graph itself meanwhile, then waits
 *   for their answers: the caller pays one launch and a round trip of two
 *   cache lines per rank, the launches of all ranks go at once;
 * - jobs: a job of every rank thread through the handoff (lock, condition
 *   variables, the join);
 * - caller: one rank after another from the caller's thread.
 * The ranks' launch ordering (rank.c) is the same on every path. */
static hn_status_t launch_every_rank(hn_runtime *rt, replay_job *j)
{
    hn_status_t st = HN_OK, mine;
    if (rt->nlocal > 1 && rt->replay == HN_REPLAY_JOBS)
        return hn_runtime_exec_all(rt, replay_on_rank, j);
    if (rt->nlocal > 1 && rt->replay == HN_REPLAY_BELLS) {
        for (int i = 1; i < rt->nlocal; i++)
            hn_pool_ring(rt, i, replay_on_rank, j);
        mine = replay_on_rank(&rt->ranks[0], j);
        st = hn_pool_answers(rt, 1, rt->nlocal);
        return mine != HN_OK ? mine : st;
    }
    for (int i = 0; i < rt->nlocal && st == HN_OK; i++)
        st = replay_on_rank(&rt->ranks[i], j);
    return st;
}

hn_status_t hn_graph_refuse(hn_runtime *rt, const hn_graph *g)
{
    char text[sizeof(g->why) + 96];
    snprintf(text, sizeof(text), "hirnode: error: the graph cannot be replayed: %s; destroy it and capture again",
             g->why);
    hn_runtime_set_error_text(rt, text);
    return HN_ERR_INVALID;
}

hn_status_t hn_runtime_replay_streams(hn_runtime *rt, hn_graph *g, void *const *streams)
{
    hn_status_t st = HN_OK;
    if (!g->valid)
        return hn_graph_refuse(rt, g);
    if ((st = hn_runtime_enter(rt, hn_replay_key(g->prog), 0)) != HN_OK)
        return st;
    if (!g->valid) /* the launches in flight failed */
        return hn_graph_refuse(rt, g);
    hn_runtime_set_err_prog(rt, g->lp);
    {
        replay_job j = {g, streams};
        st = launch_every_rank(rt, &j);
    }
    rt->inflight++;
    rt->inflight_prog = hn_replay_key(g->prog);
    if (st != HN_OK) {
        (void)hn_runtime_finish_launches(rt);
        return rt->err_status != HN_OK ? rt->err_status : st;
    }
    return HN_OK;
}

hn_status_t hn_runtime_replay(hn_runtime *rt, hn_graph *g, void *const *streams)
{
    if (rt == NULL || g == NULL || g->rt != rt)
        return HN_ERR_INVALID;
    return hn_runtime_replay_streams(rt, g, streams);
}

void hn_runtime_graph_destroy(hn_runtime *rt, hn_graph *g)
{
    if (rt == NULL || g == NULL || g->rt != rt)
        return;
    hn_runtime_collect_launches(rt); /* its replays first */
    graph_free(rt, g);
}

void hn_graphs_free(hn_runtime *rt)
{
    if (rt->graphs != NULL)
        hn_runtime_collect_launches(rt); /* their replays first */
    while (rt->graphs != NULL)
        graph_free(rt, rt->graphs);
}

/* ---- the setting graphs = 1 ---- */

hn_status_t hn_runtime_auto_graph(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                  void *const *const *io, void *const *streams, hn_graph **out)
{
    hn_graph *g, *next;
    hn_status_t st;
    int again;
    *out = NULL;
    if (rt->trace != NULL || rt->faults.n > 0 || rt->time_runs || rt->lost)
        return HN_OK;
    for (g = rt->graphs; g != NULL; g = next) { /* unusable automatic graphs go */
        next = g->next;
        if (g->automatic && !g->valid) {
            hn_runtime_collect_launches(rt);
            graph_free(rt, g);
        }
    }
    if ((g = hn_cache_auto_graph(rt, p, params, io, streams, &again)) != NULL || !again) {
        *out = g;
        return HN_OK;
    }
    if ((g = hn_cache_auto_victim(rt)) != NULL) {
        hn_runtime_collect_launches(rt);
        graph_free(rt, g);
    }
    if ((st = hn_runtime_finish_launches(rt)) != HN_OK || (st = hn_runtime_take_pending(rt)) != HN_OK)
        return st;
    if ((st = capture(rt, p, params, io, NULL, streams, 1, &g)) != HN_OK) {
        hn_strbuf diag;
        HN_WARN("graphs: the configuration could not be captured (%s): it runs eagerly", hn_status_string(st));
        hn_runtime_clear_error(rt);
        /* the failure may have made the teams anew: prepared again */
        hn_sb_init(&diag);
        if ((st = hn_runtime_prepare(rt, p, params, &diag)) != HN_OK)
            hn_runtime_set_error_text(rt, diag.data ? diag.data : hn_status_string(st));
        hn_sb_free(&diag);
        return st;
    }
    *out = g;
    return HN_OK;
}

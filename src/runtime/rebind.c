/* Rebinding a captured graph to new buffers (hn_runtime_graph_rebind):
 * in place where every rank's backend graph learned where its work holds
 * the bindings (device.h graph_repoint, src/device/repoint.c), else by
 * capturing the program again (graph.c hn_graph_recapture), which teaches
 * the backends for the next time. docs/INTERNALS.md "Graphs". */
#include <stdio.h>
#include <string.h>

#include "bind.h"
#include "graph.h"
#include "issue.h"
#include "prepare.h"
#include "procs.h"
#include "../ranks/run_error.h"
#include "../ranks/teams.h"

/* The parameters of args are those of g's capture; else why not. */
static hn_status_t same_params(hn_runtime *rt, const hn_graph *g, const int64_t *params)
{
    for (int i = 0; i < g->nparams; i++)
        if (params[i] != g->params[i]) {
            char text[300];
            snprintf(text, sizeof(text),
                     "hirnode: error: a rebind keeps the configuration of the capture: parameter %s is %lld, the "
                     "graph was captured with %lld (capture again for other parameters)",
                     g->lp->names[g->lp->params[i].var], (long long)params[i], (long long)g->params[i]);
            hn_runtime_set_error_text(rt, text);
            return HN_ERR_INVALID;
        }
    return HN_OK;
}

/* In one process: every binding of every rank, [k * nlocal + local], from
 * what g binds now to what rs binds, over the bytes both hold. */
static hn_moved *moves_here(const hn_runtime *rt, const hn_graph *g, const hn_resolved *rs)
{
    int n = rt->nlocal;
    hn_moved *m = hn_calloc((size_t)g->nio * (size_t)n + 1, sizeof(*m));
    for (int k = 0; m != NULL && k < g->nio; k++)
        for (int r = 0; r < n; r++) {
            size_t i = (size_t)k * (size_t)n + (size_t)r;
            m[i].from = (uintptr_t)g->io[i];
            m[i].to = (uintptr_t)rs->io[k][r];
            m[i].bytes = g->io[i] == NULL || rs->io[k][r] == NULL ? 0 : HN_MIN(g->bytes[i], rs->b.bytes[k][r]);
        }
    return m;
}

/* ---- across processes: every process's bindings, where this one reaches them ---- */

/* How the other processes reach a binding of this one: not at all, at
 * the same address (a block of hn_runtime_alloc), or through the
 * registration table (hn_runtime_register). */
enum { REACH_NONE, REACH_SAME, REACH_TABLE };

typedef struct xmove {
    uint64_t from, to, bytes;
    int32_t reach_from, reach_to;
} xmove;

static int32_t reach_of(hn_runtime *rt, const void *p)
{
    uintptr_t base;
    size_t bytes;
    if (p == NULL)
        return REACH_NONE;
    if (hn_bind_block_of(&rt->ranks[0], p, &base, &bytes))
        return REACH_SAME;
    return hn_reg_find(rt, rt->first, (uintptr_t)p) != NULL ? REACH_TABLE : REACH_NONE;
}

/* Where this process reaches rank q's address p (reached as `how`); 0
 * where it does not. */
static uintptr_t here(hn_runtime *rt, int q, uint64_t p, int32_t how)
{
    if (q == rt->first || how == REACH_SAME)
        return (uintptr_t)p;
    if (how == REACH_TABLE && hn_reg_find(rt, q, (uintptr_t)p) != NULL)
        return (uintptr_t)hn_reg_peer_addr(rt, q, (void *)(uintptr_t)p);
    return 0;
}

/* Across processes (one rank each): every rank's bindings, [q * nio + k],
 * as this process reaches them (a peer's binding it cannot reach moves
 * nothing here: no work of this process holds it). An exchange among
 * every process; *m NULL when out of memory here (the exchange taken all
 * the same where possible). */
static hn_status_t moves_everywhere(hn_runtime *rt, const hn_graph *g, const hn_resolved *rs, hn_moved **m)
{
    int nio = g->nio, world = rt->world;
    xmove *mine = hn_calloc((size_t)nio + 1, sizeof(*mine)), *all = hn_calloc((size_t)nio * (size_t)world + 1,
                                                                             sizeof(*all));
    hn_status_t st;
    *m = NULL;
    if (mine == NULL || all == NULL) {
        hn_free(mine);
        hn_free(all);
        return HN_ERR_NOMEM; /* the others learn it at the deadline */
    }
    for (int k = 0; k < nio; k++) {
        mine[k].from = (uintptr_t)g->io[k];
        mine[k].to = (uintptr_t)rs->io[k][0];
        mine[k].bytes = g->io[k] == NULL || rs->io[k][0] == NULL ? 0 : HN_MIN(g->bytes[k], rs->b.bytes[k][0]);
        mine[k].reach_from = reach_of(rt, g->io[k]);
        mine[k].reach_to = reach_of(rt, rs->io[k][0]);
    }
    st = hn_procs_xchg(rt, "hn_runtime_graph_rebind", mine, (size_t)nio * sizeof(*mine), all);
    if (st == HN_OK && (*m = hn_calloc((size_t)nio * (size_t)world + 1, sizeof(hn_moved))) != NULL)
        for (int q = 0; q < world; q++)
            for (int k = 0; k < nio; k++) {
                const xmove *x = &all[(size_t)q * (size_t)nio + (size_t)k];
                hn_moved *to = &(*m)[(size_t)q * (size_t)nio + (size_t)k];
                to->from = here(rt, q, x->from, x->reach_from);
                to->to = here(rt, q, x->to, x->reach_to);
                to->bytes = to->from != 0 && to->to != 0 ? (size_t)x->bytes : 0;
            }
    hn_free(mine);
    hn_free(all);
    return st;
}

/* Whether every process found `mine` (an exchange among them all). */
static hn_status_t everywhere(hn_runtime *rt, const char *what, int mine, int *all_of_them)
{
    int32_t x = mine, small[8], *each = rt->world <= 8 ? small : hn_calloc((size_t)rt->world, sizeof(*each));
    hn_status_t st;
    *all_of_them = 0;
    if (each == NULL)
        return HN_ERR_NOMEM;
    if ((st = hn_procs_xchg(rt, what, &x, sizeof(x), each)) == HN_OK) {
        *all_of_them = 1;
        for (int q = 0; q < rt->world; q++)
            *all_of_them &= each[q] != 0;
    }
    if (each != small)
        hn_free(each);
    return st;
}

/* ---- the rebind ---- */

/* Whether every local rank's graph can move by m (nothing changed). */
static int can_move(hn_runtime *rt, hn_graph *g, const hn_moved *m, int nm)
{
    if (m == NULL || rt->dev->graph_repoint == NULL)
        return 0;
    for (int i = 0; i < rt->nlocal; i++)
        if (rt->dev->graph_repoint(g->g[i], m, nm, 1) != HN_OK)
            return 0;
    return 1;
}

/* Moves every local rank's graph by m (can_move said they can): 1 when
 * all moved; 0 when a backend failed (logged; its graph holds part). */
static int move(hn_runtime *rt, hn_graph *g, const hn_moved *m, int nm)
{
    for (int i = 0; i < rt->nlocal; i++) {
        hn_status_t st = rt->dev->graph_repoint(g->g[i], m, nm, 0);
        if (st != HN_OK) {
            HN_WARN("rank %d: its graph's pointers could not be moved in place (%s): captured again",
                    rt->ranks[i].rank, hn_status_string(st));
            return 0;
        }
    }
    return 1;
}

/* In place where every rank (every process) can, else captured again. */
static hn_status_t rebind(hn_runtime *rt, hn_graph *g, const hn_resolved *rs)
{
    hn_moved *m = NULL;
    hn_status_t st = HN_OK;
    int nm = 0, can, moved = 0;
    if (hn_procs(rt)) {
        st = moves_everywhere(rt, g, rs, &m);
        nm = g->nio * rt->world;
        if (st == HN_OK)
            st = everywhere(rt, "hn_runtime_graph_rebind: in place?", can_move(rt, g, m, nm), &can);
        if (st == HN_OK && can)
            st = everywhere(rt, "hn_runtime_graph_rebind: moved", move(rt, g, m, nm), &moved);
    } else {
        m = moves_here(rt, g, rs);
        nm = g->nio * rt->nlocal;
        can = can_move(rt, g, m, nm);
        moved = can && move(rt, g, m, nm);
    }
    g->in_place = st == HN_OK && moved;
    /* captured again, teaching the backends; where some moved (a backend
     * failed part way), the graphs before are not what m moves from */
    if (st == HN_OK && !moved)
        st = hn_graph_recapture(rt, g, (void *const *const *)rs->io, can ? NULL : m, nm);
    if (st != HN_OK && can && !moved && g->valid) { /* some ranks' graphs hold part of the move */
        g->valid = 0;
        snprintf(g->why, sizeof(g->why), "a rebind failed after moving some of its pointers");
    }
    hn_free(m);
    return st;
}

hn_status_t hn_runtime_graph_rebind(hn_runtime *rt, hn_graph *g, const hn_run_args *args)
{
    hn_resolved rs = {0};
    hn_status_t st;
    int n;
    if (rt == NULL || g == NULL || g->rt != rt || args == NULL)
        return HN_ERR_INVALID;
    if (!g->valid)
        return hn_graph_refuse(rt, g);
    if ((st = hn_runtime_enter(rt, 0, 1)) != HN_OK) /* its replays finish first */
        return st;
    if (!g->valid) /* the launches in flight failed */
        return hn_graph_refuse(rt, g);
    g->in_place = 0;
    if (rt->dev->capture_update == NULL || rt->trace != NULL || rt->faults.n > 0) {
        snprintf(rt->err_text, sizeof(rt->err_text), "hirnode: error: a graph cannot be rebound %s",
                 rt->trace != NULL    ? "while tracing"
                 : rt->faults.n > 0   ? "with injected faults (HIRNODE_FAULT)"
                                      : "on this backend (it cannot update a graph in place): capture again");
        return HN_ERR_UNSUPPORTED;
    }
    /* the bindings checked as for a launch, against the program captured */
    if ((st = hn_runtime_resolve(rt, g->lp, args, &rs)) != HN_OK)
        return st;
    if ((st = same_params(rt, g, rs.params)) == HN_OK && (st = rebind(rt, g, &rs)) == HN_OK) {
        n = rt->nlocal;
        for (int k = 0; k < g->nio; k++)
            for (int r = 0; r < n; r++) {
                g->io[(size_t)k * (size_t)n + (size_t)r] = rs.io[k][r];
                g->bytes[(size_t)k * (size_t)n + (size_t)r] = rs.b.bytes[k][r];
            }
    }
    hn_resolved_free(&rs);
    return st;
}

int hn_runtime_graph_in_place(const hn_graph *g) { return g != NULL && g->in_place; }

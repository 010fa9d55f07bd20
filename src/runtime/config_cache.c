/* Everything a runtime keeps per (program, parameter values): the
 * configurations prepared lately (their dry runs, teams and buffers done),
 * the lowered copy of a program with something to lower, the captured
 * graphs with the configurations seen once (the setting graphs = 1), one
 * clock for least-recently-used replacement, and one forget. */
#include <stdio.h>
#include <string.h>

#include "config_cache.h"
#include "../sched/lower.h"
#include "../ranks/pool.h"
#include "../ranks/rank.h"
#include "../ranks/teams.h"

static int same_params(const int64_t *a, int na, const hn_program *p, const int64_t *params)
{
    return na == p->nparams && (p->nparams == 0 || memcmp(a, params, (size_t)p->nparams * sizeof(int64_t)) == 0);
}

/* ---- prepared configurations ---- */

static hn_verified *find_verified(hn_runtime *rt, const hn_program *p, const int64_t *params)
{
    for (int i = 0; i < HN_VERIFIED_CONFIGS; i++) {
        hn_verified *v = &rt->verified[i];
        if (v->prog == p->uid && same_params(v->params, v->nparams, p, params))
            return v;
    }
    return NULL;
}

int hn_cache_verified(hn_runtime *rt, const hn_program *p, const int64_t *params, int touch)
{
    hn_verified *v = find_verified(rt, p, params);
    if (v != NULL && touch)
        v->used = ++rt->cache_clock;
    return v != NULL;
}

const hn_verified *hn_cache_config(hn_runtime *rt, const hn_program *p, const int64_t *params)
{
    return find_verified(rt, p, params);
}

static void verified_clear(hn_verified *v)
{
    hn_free(v->params);
    hn_free(v->need);
    hn_free(v->reach);
    memset(v, 0, sizeof(*v));
}

void hn_cache_remember(hn_runtime *rt, const hn_program *p, const int64_t *params, size_t *need, int nio,
                       char *reach, int reach_none, int reach_eager)
{
    hn_verified *v = &rt->verified[0];
    int64_t *copy = hn_malloc((size_t)(p->nparams + 1) * sizeof(int64_t));
    if (copy == NULL) {
        hn_free(need);
        hn_free(reach);
        return; /* prepared anew next time */
    }
    for (int i = 1; i < HN_VERIFIED_CONFIGS; i++) /* a free entry, else the least recently used */
        if (v->prog != 0 && (rt->verified[i].prog == 0 || rt->verified[i].used < v->used))
            v = &rt->verified[i];
    verified_clear(v);
    memcpy(copy, params, (size_t)p->nparams * sizeof(int64_t));
    v->prog = p->uid;
    v->params = copy;
    v->nparams = p->nparams;
    v->used = ++rt->cache_clock;
    v->need = need;
    v->nio = nio;
    v->reach = reach;
    v->reach_none = reach_none;
    v->reach_eager = reach_eager;
}

/* ---- lowered copies ---- */

int hn_runtime_lowers(const hn_runtime *rt, const hn_program *p)
{
    return p->has_sched || (rt->nodes > 1 && rt->per_node > 1 && p->has_world_allreduce);
}

const hn_program *hn_runtime_lowered_of(hn_runtime *rt, const hn_program *p, const int64_t *params)
{
    if (!hn_runtime_lowers(rt, p))
        return p;
    for (int i = 0; i < rt->nlowered; i++) {
        const hn_lowered *e = &rt->lowered[i];
        if (e->src == p && e->uid == p->uid && same_params(e->params, e->nparams, p, params))
            return e->prog;
    }
    return p; /* not prepared: its pipelined statements fail to run, saying so */
}

/* Drops lowered copy i and what is kept for it. */
static void drop_lowered(hn_runtime *rt, int i, const char *why)
{
    hn_lowered *e = &rt->lowered[i];
    hn_cache_forget(rt, e->prog, HN_FORGET_BUFFERS, why);
    hn_prog_free(e->prog);
    hn_free(e->params);
    rt->lowered[i] = rt->lowered[--rt->nlowered];
}

hn_status_t hn_runtime_lowered(hn_runtime *rt, const hn_program *p, const int64_t *params,
                               const hn_program **out, hn_strbuf *diag)
{
    hn_lowered *e;
    hn_program *lp = NULL;
    hn_status_t st;
    const hn_program *found = hn_runtime_lowered_of(rt, p, params);
    if (found != p || !hn_runtime_lowers(rt, p)) {
        *out = found;
        return HN_OK;
    }
    /* a program destroyed since left its entries behind: drop them */
    for (int i = rt->nlowered - 1; i >= 0; i--)
        if (rt->lowered[i].src == p && rt->lowered[i].uid != p->uid)
            drop_lowered(rt, i, "its program was destroyed");
    if ((st = hn_sched_lower(p, rt->world, rt->nodes, rt->cfg.nstreams, params, rt->profile, &lp, diag, NULL)) != HN_OK)
        return st;
    if (hn_grow((void **)&rt->lowered, &rt->lowered_cap, rt->nlowered, sizeof(*rt->lowered)) != 0) {
        hn_prog_free(lp);
        return HN_ERR_NOMEM;
    }
    e = &rt->lowered[rt->nlowered];
    e->params = hn_malloc((size_t)(p->nparams + 1) * sizeof(int64_t));
    if (e->params == NULL) {
        hn_prog_free(lp);
        return HN_ERR_NOMEM;
    }
    memcpy(e->params, params, (size_t)p->nparams * sizeof(int64_t));
    e->nparams = p->nparams;
    e->src = p;
    e->uid = p->uid;
    e->prog = lp;
    rt->nlowered++;
    *out = lp;
    return HN_OK;
}

/* ---- graphs ---- */

void hn_cache_add_graph(hn_runtime *rt, hn_graph *g)
{
    g->next = rt->graphs;
    rt->graphs = g;
    if (g->automatic)
        g->used = ++rt->cache_clock;
}

void hn_cache_remove_graph(hn_runtime *rt, hn_graph *g)
{
    hn_graph **l = &rt->graphs;
    while (*l != NULL && *l != g)
        l = &(*l)->next;
    if (*l != NULL)
        *l = g->next;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static int same_config(const hn_graph *g, const hn_program *p, const int64_t *params, void *const *const *io,
                       void *const *streams, int n)
{
    if (g->prog != p->uid || g->nio != p->ninputs + p->noutputs || !same_params(g->params, g->nparams, p, params))
        return 0;
    for (int k = 0; k < g->nio; k++)
        for (int r = 0; r < n; r++)
            if (g->io[(size_t)k * (size_t)n + (size_t)r] != io[k][r])
                return 0;
    for (int r = 0; r < n; r++)
        if (g->natives[r] != (streams != NULL ? streams[r] : NULL))
            return 0;
    return 1;
}

hn_graph *hn_cache_auto_graph(hn_runtime *rt, const hn_program *p, const int64_t *params, void *const *const *io,
                              void *const *streams, int *again)
{
    int n = rt->nlocal, slot = -1;
    uint64_t key = 0;
    *again = 0;
    for (hn_graph *g = rt->graphs; g != NULL; g = g->next)
        if (g->automatic && same_config(g, p, params, io, streams, n)) {
            g->used = ++rt->cache_clock;
            return g;
        }
    /* the second time a configuration comes, it is captured */
    for (int i = 0; i < p->nparams; i++)
        key = mix(key, (uint64_t)params[i]);
    for (int k = 0; k < p->ninputs + p->noutputs; k++)
        for (int r = 0; r < n; r++)
            key = mix(key, (uint64_t)(uintptr_t)io[k][r]);
    for (int r = 0; r < n; r++)
        key = mix(key, (uint64_t)(uintptr_t)(streams != NULL ? streams[r] : NULL));
    for (int i = 0; i < HN_VERIFIED_CONFIGS; i++)
        if (rt->seen[i].prog == p->uid && rt->seen[i].key == key)
            slot = i;
    if (slot < 0) {
        rt->seen[rt->seen_next].prog = p->uid;
        rt->seen[rt->seen_next].key = key;
        rt->seen_next = (rt->seen_next + 1) % HN_VERIFIED_CONFIGS;
        return NULL;
    }
    rt->seen[slot].prog = 0;
    *again = 1;
    return NULL;
}

hn_graph *hn_cache_auto_victim(hn_runtime *rt)
{
    hn_graph *oldest = NULL;
    int nauto = 0;
    for (hn_graph *g = rt->graphs; g != NULL; g = g->next)
        if (g->automatic) {
            nauto++;
            if (oldest == NULL || g->used < oldest->used)
                oldest = g;
        }
    return nauto >= HN_VERIFIED_CONFIGS ? oldest : NULL;
}

static void invalidate(hn_graph *g, const char *why)
{
    if (g->valid) {
        g->valid = 0;
        snprintf(g->why, sizeof(g->why), "%s", why);
    }
}

void hn_cache_graphs_abort(hn_runtime *rt)
{
    static const uint32_t one = 1;
    for (hn_graph *g = rt->graphs; g != NULL; g = g->next) {
        for (int i = 0; i < rt->nlocal; i++)
            if (g->ctx[i].ep != NULL) { /* both abort words (device.h, comm_p2p.c) */
                int r = rt->ranks[i].rank;
                (void)rt->dev->copy_to_device(rt->dev_ctx, r, &g->ctx[i].ep[1], &one, sizeof(one));
                (void)rt->dev->copy_to_device(rt->dev_ctx, r, &g->ctx[i].ep[3], &one, sizeof(one));
            }
        invalidate(g, "a failure stopped a run of the runtime");
    }
}

void hn_cache_graphs_drop(hn_runtime *rt)
{
    for (hn_graph *g = rt->graphs; g != NULL; g = g->next) {
        for (int i = 0; i < rt->nlocal; i++)
            if (g->g[i] != NULL) {
                rt->dev->graph_destroy(g->g[i]);
                g->g[i] = NULL;
            }
        invalidate(g, "a failure stopped a run of the runtime");
    }
}

/* seconds the streams have to drain once every abort word is raised (a
 * kernel leaves within microseconds of seeing its word; the host
 * backend's waits within their 50 ms slices) */
#define DRAIN_S 1.0

hn_status_t hn_cache_abort_all(hn_runtime *rt, int *dead)
{
    double until;
    hn_status_t st;
    if (rt->graphs != NULL)
        hn_cache_graphs_abort(rt);
    *dead = hn_teams_aborted(rt, hn_teams_abort(rt));
    if (rt->lost)
        return HN_ERR_DEVICE_LOST;
    until = hn_now() + DRAIN_S;
    if ((st = hn_pool_exec(rt, hn_rank_drain, &until, 1)) != HN_OK) {
        if (!rt->lost) { /* (the end of the run adds lost_text to the error) */
            snprintf(rt->lost_text, sizeof(rt->lost_text),
                     "hirnode: error: the devices' work did not end within %.0f s after the run was aborted (a "
                     "kernel that never sees its abort word): the runtime is lost and refuses further runs "
                     "(destroy it; restart the process to use the devices again)", DRAIN_S);
            rt->lost = 1;
            __atomic_store_n(&rt->stuck, 1, __ATOMIC_RELEASE); /* nothing of the device freed: it would wait */
        }
        return HN_ERR_DEVICE_LOST;
    }
    if (rt->graphs != NULL)
        hn_cache_graphs_drop(rt);
    return HN_OK;
}

/* ---- forget ---- */

static hn_status_t forget_on_rank(hn_rank *r, void *arg)
{
    const uint64_t *keep = arg; /* [0] the program, [1] all but it */
    hn_rank_free_blocks_of(r, keep[0], (int)keep[1]);
    return HN_OK;
}

void hn_cache_forget(hn_runtime *rt, const hn_program *p, unsigned how, const char *why)
{
    uint64_t prog = p != NULL ? p->uid : 0;
    int all = p == NULL, all_but = (how & HN_FORGET_ALL_BUT) != 0;
    if ((how & HN_FORGET_LOWERED) && p != NULL)
        for (int i = rt->nlowered - 1; i >= 0; i--)
            if (rt->lowered[i].src == p)
                drop_lowered(rt, i, why);
    for (hn_graph *g = rt->graphs; g != NULL; g = g->next)
        if (all || (g->prog == prog || g->lp_uid == prog) != all_but)
            invalidate(g, why);
    if (how & HN_FORGET_BUFFERS) {
        /* all: every block's program is another than uid 0 */
        uint64_t keep[2] = {prog, (uint64_t)(all || all_but)};
        (void)hn_pool_exec(rt, forget_on_rank, keep, 0);
    }
    for (int i = 0; i < HN_VERIFIED_CONFIGS; i++)
        if (rt->verified[i].prog != 0 && (all || (rt->verified[i].prog == prog) != all_but))
            verified_clear(&rt->verified[i]);
}

void hn_cache_fini(hn_runtime *rt)
{
    for (int i = 0; i < HN_VERIFIED_CONFIGS; i++)
        verified_clear(&rt->verified[i]);
    for (int i = 0; i < rt->nlowered; i++) {
        hn_prog_free(rt->lowered[i].prog);
        hn_free(rt->lowered[i].params);
    }
    hn_free(rt->lowered);
    rt->lowered = NULL;
    rt->nlowered = rt->lowered_cap = 0;
}

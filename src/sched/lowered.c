/* The runtime's lowered programs: one per (program, parameter values) that
 * has pipelined statements or stream-parallel loops, made by hn_sched_lower
 * when a run is prepared and kept for the runtime's life, so that repeated
 * runs reuse it (and its cached buffers). */
#include <string.h>

#include "sched.h"

typedef struct hn_lowered {
    const hn_program *src;
    uint64_t uid; /* src's, to tell a new program at a recycled address */
    int64_t *params;
    int nparams;
    hn_program *prog;
} hn_lowered;

static int same_params(const hn_lowered *e, const hn_program *p, const int64_t *params)
{
    return e->nparams == p->nparams &&
           (p->nparams == 0 || memcmp(e->params, params, (size_t)p->nparams * sizeof(int64_t)) == 0);
}

/* Frees the blocks a dropped program's allocations hold on this rank. */
static hn_status_t forget_on_rank(hn_rank *r, void *arg)
{
    hn_rank_free_blocks_of(r, ((const hn_program *)arg)->uid, 0);
    return HN_OK;
}

static void drop(hn_runtime *rt, int i)
{
    hn_lowered *e = &rt->lowered[i];
    hn_runtime_exec_all(rt, forget_on_rank, e->prog);
    hn_runtime_forget_verified(rt, e->prog->uid);
    hn_prog_free(e->prog);
    hn_free(e->params);
    rt->lowered[i] = rt->lowered[--rt->nlowered];
}

const hn_program *hn_runtime_lowered_of(hn_runtime *rt, const hn_program *p, const int64_t *params)
{
    if (!p->has_sched)
        return p;
    for (int i = 0; i < rt->nlowered; i++)
        if (rt->lowered[i].src == p && rt->lowered[i].uid == p->uid && same_params(&rt->lowered[i], p, params))
            return rt->lowered[i].prog;
    return p; /* not prepared: its pipelined statements fail to run, saying so */
}

hn_status_t hn_runtime_lowered(hn_runtime *rt, const hn_program *p, const int64_t *params,
                               const hn_program **out, hn_strbuf *diag)
{
    hn_lowered *e;
    hn_program *lp = NULL;
    hn_status_t st;
    const hn_program *found = hn_runtime_lowered_of(rt, p, params);
    if (found != p || !p->has_sched) {
        *out = found;
        return HN_OK;
    }
    /* a program destroyed since left its entries behind: drop them */
    for (int i = rt->nlowered - 1; i >= 0; i--)
        if (rt->lowered[i].src == p && rt->lowered[i].uid != p->uid)
            drop(rt, i);
    if ((st = hn_sched_lower(p, rt->n, rt->cfg.nstreams, params, &lp, diag, NULL)) != HN_OK)
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

void hn_runtime_lowered_free(hn_runtime *rt)
{
    for (int i = 0; i < rt->nlowered; i++) {
        hn_prog_free(rt->lowered[i].prog);
        hn_free(rt->lowered[i].params);
    }
    hn_free(rt->lowered);
    rt->lowered = NULL;
    rt->nlowered = rt->lowered_cap = 0;
}

void hn_runtime_forget(hn_runtime *rt, const hn_program *p)
{
    if (rt->inflight > 0)
        (void)hn_runtime_sync(rt); /* its work first */
    for (int i = rt->nlowered - 1; i >= 0; i--)
        if (rt->lowered[i].src == p && rt->lowered[i].prog != NULL)
            hn_runtime_graphs_invalidate(rt, rt->lowered[i].prog->uid, 0,
                                         "hn_runtime_forget gave its program's buffers back");
    hn_runtime_graphs_invalidate(rt, p->uid, 0, "hn_runtime_forget gave its program's buffers back");
    for (int i = rt->nlowered - 1; i >= 0; i--)
        if (rt->lowered[i].src == p)
            drop(rt, i);
    hn_runtime_exec_all(rt, forget_on_rank, (void *)p);
    hn_runtime_forget_verified(rt, p->uid);
}

/* A graph's state on each rank: its epoch words (device memory the
 * captured work reads its flag values relative to, raised by every
 * replay) and what its communicators keep for it (graph_begin ..
 * graph_free, comm.h); made before a capture (graph.c) or a launch inside
 * a capture of the caller's (issue.c), so that both issue the same way.
 * And the hold: how long the caller's captures keep a graph of a launch
 * inside them. */
#include "graph_state.h"
#include "../ranks/run_error.h"

hn_status_t hn_graph_state_begin(hn_rank *r, hn_graph *g)
{
    hn_runtime *rt = r->rt;
    hn_graph_ctx *c = &g->ctx[r->local];
    hn_origin o = {&rt->sink, r->rank, -1, NULL, NULL};
    static const uint32_t zero[4];
    hn_status_t st = HN_OK;
    c->id = g->id;
    /* a rebind keeps the epoch words: the values captured are relative */
    if (c->ep == NULL &&
        ((st = rt->dev->mem_alloc(rt->dev_ctx, r->rank, sizeof(zero), (void **)&c->ep)) != HN_OK ||
         (st = rt->dev->copy_to_device(rt->dev_ctx, r->rank, c->ep, zero, sizeof(zero))) != HN_OK)) {
        hn_runtime_fail(rt, r->rank, -1, st, "cannot allocate a graph's epoch");
        return st;
    }
    for (int k = 0; k < rt->ncomms && st == HN_OK; k++)
        if (rt->comms[k].ops->graph_begin != NULL)
            st = rt->comms[k].ops->graph_begin(rt->comms[k].world, r->rank, c, &o);
    return st;
}

hn_status_t hn_graph_state_finish(hn_rank *r, hn_graph *g)
{
    hn_runtime *rt = r->rt;
    hn_graph_ctx *c = &g->ctx[r->local];
    hn_origin o = {&rt->sink, r->rank, -1, NULL, c};
    hn_status_t st = HN_OK;
    for (int k = 0; k < rt->ncomms && st == HN_OK; k++)
        if (rt->comms[k].ops->graph_finish != NULL)
            st = rt->comms[k].ops->graph_finish(rt->comms[k].world, r->rank, c, r->active, &o);
    if (st == HN_OK && (st = rt->dev->stream_add_u32(r->active, c->ep, HN_GRAPH_EPOCH_SPAN, &o)) != HN_OK)
        hn_runtime_fail(rt, r->rank, -1, st, "cannot capture the graph's epoch");
    return st;
}

void hn_graph_state_end(hn_rank *r, hn_graph *g)
{
    hn_runtime *rt = r->rt;
    for (int k = 0; k < rt->ncomms; k++)
        if (rt->comms[k].ops->graph_end != NULL)
            rt->comms[k].ops->graph_end(rt->comms[k].world, r->rank, &g->ctx[r->local]);
}

void hn_graph_state_free(hn_rank *r, hn_graph *g)
{
    hn_runtime *rt = r->rt;
    hn_graph_ctx *c = &g->ctx[r->local];
    for (int k = 0; k < rt->ncomms; k++)
        if (rt->comms[k].ops->graph_free != NULL)
            rt->comms[k].ops->graph_free(rt->comms[k].world, r->rank, c);
    if (c->ep != NULL)
        rt->dev->mem_free(rt->dev_ctx, r->rank, c->ep);
    c->ep = NULL;
}

/* `held`: captures that still hold the graph; `refs`: the runtime's
 * reference and theirs. Atomics: a capture lets go on a thread of the
 * backend's own. */
struct hn_graph_hold {
    int held, refs;
};

hn_graph_hold *hn_graph_hold_new(void)
{
    hn_graph_hold *h = hn_calloc(1, sizeof(*h));
    if (h != NULL)
        h->refs = 1;
    return h;
}

void hn_graph_hold_drop(hn_graph_hold *h)
{
    if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0)
        hn_free(h);
}

int hn_graph_hold_held(const hn_graph_hold *h) { return __atomic_load_n(&h->held, __ATOMIC_ACQUIRE) > 0; }

/* a caller's capture let go (native_capture_keep's release) */
static void hold_release(void *arg)
{
    hn_graph_hold *h = arg;
    __atomic_sub_fetch(&h->held, 1, __ATOMIC_ACQ_REL);
    hn_graph_hold_drop(h);
}

hn_status_t hn_graph_hold_keep(hn_rank *r, hn_graph_hold *h)
{
    hn_runtime *rt = r->rt;
    hn_status_t st;
    __atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&h->held, 1, __ATOMIC_ACQ_REL);
    if ((st = rt->dev->native_capture_keep(rt->dev->stream_native(r->active), hold_release, h)) != HN_OK) {
        __atomic_sub_fetch(&h->held, 1, __ATOMIC_ACQ_REL);
        __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL); /* the runtime's reference stays */
        hn_runtime_fail(rt, r->rank, -1, st, "cannot tie the launch's state to the caller's capture");
    }
    return st;
}

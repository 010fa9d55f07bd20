/* The p2p communicator's ordering and copies: what every algorithm issues.
 * Ranks order each other through one pair of calls, signal (member, index,
 * value) on a stream and wait (own index, value) on a stream, with two
 * mechanisms (`HIRNODE_P2P_SYNC`), and a third inside graph captures:
 *  - events (the default): the writer records an event of its own for that
 *    (member, index) and publishes value and event in host memory; the
 *    waiter's thread spins until the value is there, then makes its stream
 *    wait on the event (cross-device cudaStreamWaitEvent). A host-side
 *    generation handshake keeps an index from being signalled again before
 *    its waiter has issued the wait for the last value: the wait would
 *    otherwise take a later record, which may depend on the waiter (a
 *    deadlock). No device-side wait can hang this way; the host waits
 *    instead.
 *  - flags: the 32-bit flag is device memory of the waiter, written by
 *    cuStreamWriteValue32 and waited on by cuStreamWaitValue32;
 *  - captured (a graph's banks, comm_p2p_banks.c): flags of the graph's own,
 *    their values relative to its epoch, which every replay raises: a
 *    replay's values are all above the last one's, so the flags are never
 *    reset. A wait for a value <= 0 (nothing before the capture's first
 *    operation) is no wait: the capture starts the team afresh.
 * docs/BENCHMARKS.md has the first two measured against each other. Also
 * here: the host spins (mailboxes, events) with their deadline, copies,
 * and the hand-offs between a member's stream and its copy lanes. */
#include <sched.h>

#include "comm_p2p_int.h"

/* Host-side spins: while rank `o->rank` spins for `peer`, it says so, and a
 * spin past the deadline follows the ranks' waits to the one that waits for
 * nobody: that one never came (with events, a rank blocked on an absent
 * rank blocks others in turn; they must not be named). `*start` is 0 until
 * the first round, so a wait that need not spin costs neither a clock read
 * nor a store. */
static hn_status_t spin_once(const hn_comm_world *w, double *start, const hn_origin *o, const char *what, int peer)
{
    if (*start == 0) {
        *start = hn_now();
        if (o->rank >= 0 && o->rank < w->base.nranks)
            __atomic_store_n(&w->waiting_for[o->rank], peer, __ATOMIC_RELAXED);
    }
    if (hn_origin_aborted(o))
        return HN_ERR_ABORTED;
    if (hn_now() - *start > (w->base.sink != NULL ? w->base.sink->timeout_s : 60.0)) {
        int root = peer;
        for (int hops = 0; hops < w->base.nranks; hops++) {
            int r = root >= 0 && root < w->base.nranks ? __atomic_load_n(&w->waiting_for[root], __ATOMIC_RELAXED) : -1;
            if (r < 0 || r == o->rank)
                break;
            root = r;
        }
        if (root != peer)
            hn_origin_fail(o, HN_ERR_TIMEOUT, "p2p %s: rank %d never reached its side of it (rank %d waits for it)",
                           what, root, peer);
        else
            hn_origin_fail(o, HN_ERR_TIMEOUT, "p2p %s: rank %d never reached its side of it", what, peer);
        return HN_ERR_TIMEOUT;
    }
    sched_yield();
    return HN_OK;
}

static void spin_end(const hn_comm_world *w, const hn_origin *o, double start)
{
    if (start != 0 && o->rank >= 0 && o->rank < w->base.nranks)
        __atomic_store_n(&w->waiting_for[o->rank], -1, __ATOMIC_RELAXED);
}

hn_status_t hn_p2p_mbox_take(const hn_comm_world *w, mailbox *mb, uint64_t gen, void **ptr, const hn_origin *o,
                             const char *what, int peer)
{
    double start = 0;
    gen = mbox_gen(o, gen);
    while (__atomic_load_n(&mb->gen, __ATOMIC_ACQUIRE) != gen) {
        hn_status_t st = spin_once(w, &start, o, what, peer);
        if (st != HN_OK)
            return st;
    }
    spin_end(w, o, start);
    /* the peer's own address of its buffer: here, where a registered one lies */
    *ptr = w->base.peer_addr != NULL ? w->base.peer_addr(w->base.peer_ctx, peer, mb->ptr) : mb->ptr;
    return HN_OK;
}

hn_status_t hn_p2p_refuse_foreign_capture(const hn_comm_world *w, hn_dstream *s, const hn_origin *o,
                                         const char *what)
{
    if (w->events || (o != NULL && o->graph != NULL) || w->base.dev->stream_capturing == NULL ||
        !w->base.dev->stream_capturing(s))
        return HN_OK;
    hn_origin_fail(o, HN_ERR_UNSUPPORTED,
                   "%s via p2p on a stream a capture of the caller's takes (torch.cuda.graph), with the devices "
                   "ordered by flags and no graph's state: its device flags would replay with this call's values "
                   "(a launch there takes flags of its own; issue it through hn_runtime_launch)",
                   what);
    return HN_ERR_UNSUPPORTED;
}

static int reached(uint32_t have, uint32_t want) { return (int32_t)(have - want) >= 0; }

/* Which of the issuing member's lanes s is; -1 for the caller's stream. */
static int lane_of(const ctx *c, const hn_dstream *s)
{
    for (int k = 0; k < c->t->lanes; k++)
        if (c->t->m[c->me].side[k] == s)
            return k;
    return -1;
}

void hn_p2p_copy_on(ctx *c, hn_dstream *s, void *dst, const void *src, size_t bytes)
{
    /* a traced run gives each copy on a lane a span on the lane's track */
    int lane = c->o != NULL && c->o->trace != NULL && s != c->s ? lane_of(c, s) : -1;
    if (c->st != HN_OK || bytes == 0 || dst == src)
        return;
    if (lane >= 0)
        hn_origin_lane_mark(c->o, s, lane, bytes, 0);
    if (c->w->graph_kernel_copy && c->o != NULL && c->o->graph != NULL && bytes % 4 == 0 &&
        (uintptr_t)dst % 4 == 0 && (uintptr_t)src % 4 == 0) {
        /* the whole copy as 32-bit words by an SM kernel (exact for any bits) */
        hn_tensor d, t;
        memset(&d, 0, sizeof(d));
        d.dtype = HN_I32;
        d.ndim = 1;
        d.shape[0] = (int64_t)(bytes / 4);
        d.stride[0] = 1;
        t = d;
        d.data = dst;
        t.data = (void *)src;
        c->st = c->w->base.compute->copy(s, &d, &t, c->o);
    } else {
        c->st = c->w->base.dev->memcpy_async(dst, src, bytes, s, c->o);
    }
    if (lane >= 0 && c->st == HN_OK)
        hn_origin_lane_mark(c->o, s, lane, bytes, 1);
}

/* events: record this member's event of (m, i) on s and publish it as
 * value v, once m has issued its wait for the index's last value */
static hn_status_t event_signal(ctx *c, hn_dstream *s, int m, size_t i, uint32_t v)
{
    hn_comm_team *t = c->t;
    evslot *sl = &t->sh[m]->slots[i];
    hn_devent **e = &t->m[c->me].ev[(size_t)m * t->nflags + i];
    double start = 0;
    hn_status_t st;
    if (*e == NULL && (st = c->w->base.dev->event_create(c->w->base.dev_ctx, t->base.ranks[c->me], e)) != HN_OK) {
        hn_origin_fail(c->o, st, "p2p: cannot create an event");
        return st;
    }
    while (__atomic_load_n(&sl->ev, __ATOMIC_ACQUIRE) != NULL &&
           !reached(__atomic_load_n(&sl->seen, __ATOMIC_ACQUIRE), __atomic_load_n(&sl->sig, __ATOMIC_ACQUIRE)))
        if ((st = spin_once(c->w, &start, c->o, "signal", t->base.ranks[m])) != HN_OK)
            return st;
    spin_end(c->w, c->o, start);
    if ((st = c->w->base.dev->event_record(*e, s)) != HN_OK)
        return st;
    __atomic_store_n(&sl->ev, *e, __ATOMIC_RELAXED);
    __atomic_store_n(&sl->sig, v, __ATOMIC_RELEASE);
    return HN_OK;
}

/* events: once value v of own index i is published (by member `from`), s
 * waits for its event */
static hn_status_t event_wait(ctx *c, hn_dstream *s, int from, size_t i, uint32_t v)
{
    hn_comm_team *t = c->t;
    evslot *sl = &t->sh[c->me]->slots[i];
    double start = 0;
    hn_devent *e;
    hn_status_t st;
    while (!reached(__atomic_load_n(&sl->sig, __ATOMIC_ACQUIRE), v))
        if ((st = spin_once(c->w, &start, c->o, "wait", t->base.ranks[from])) != HN_OK)
            return st;
    spin_end(c->w, c->o, start);
    e = __atomic_load_n(&sl->ev, __ATOMIC_ACQUIRE);
    if (e != NULL && (st = c->w->base.dev->stream_wait_event(s, e, c->o)) != HN_OK)
        return st;
    if (!reached(__atomic_load_n(&sl->seen, __ATOMIC_RELAXED), v))
        __atomic_store_n(&sl->seen, v, __ATOMIC_RELEASE);
    return HN_OK;
}

/* captured: member m's flags of the graph, as graph_begin's exchange gave
 * them to this member */
static uint32_t *graph_flags(ctx *c, int m)
{
    gbank *b = bank_of(&c->t->m[c->me], c->o->graph->id);
    uint32_t *f = b != NULL && b->peer_flags != NULL ? b->peer_flags[m] : NULL;
    if (f == NULL && c->st == HN_OK) {
        hn_origin_fail(c->o, HN_ERR_RUNTIME, "p2p: the team was not prepared for this capture");
        c->st = HN_ERR_RUNTIME;
    }
    return f;
}

static int captured(const ctx *c) { return c->o != NULL && c->o->graph != NULL; }

/* Stream s tells member m that index i has reached v (after all prior work of s). */
void hn_p2p_signal_on(ctx *c, hn_dstream *s, int m, size_t i, uint32_t v)
{
    if (c->st != HN_OK)
        return;
    if (captured(c)) {
        uint32_t *f = graph_flags(c, m);
        if (f != NULL)
            c->st = c->w->base.dev->stream_write_flag_rel(s, f + i, v, c->o->graph->ep, c->o);
    } else if (c->t->events)
        c->st = event_signal(c, s, m, i, v);
    else
        c->st = c->w->base.dev->stream_write_flag(s, c->t->view[m].flags + i, v, c->o);
}

/* Later work of s waits until this member's index i has reached v (member
 * `from` signals it). */
void hn_p2p_wait_on(ctx *c, hn_dstream *s, int from, size_t i, uint32_t v)
{
    if (c->st != HN_OK)
        return;
    if (captured(c)) {
        uint32_t *f = graph_flags(c, c->me);
        if (f != NULL && (int32_t)v > 0)
            c->st = c->w->base.dev->stream_wait_flag_rel(s, f + i, v, c->o->graph->ep, c->o);
    } else if (c->t->events)
        c->st = event_wait(c, s, from, i, v);
    else
        c->st = c->w->base.dev->stream_wait_flag(s, c->t->view[c->me].flags + i, v, c->o);
}

/* The member's lanes start after the caller's stream's work so far; every
 * lane takes part in every hand-off, so hand-off h - 1 is done on all of
 * them once end h - 1 is. Returns h. */
uint32_t hn_p2p_lanes_start(ctx *c)
{
    member *M = &c->t->m[c->me];
    uint32_t h = (uint32_t)++M->joins;
    if (captured(c)) { /* the lanes enter the capture by an event */
        gbank *b = bank_of(M, c->o->graph->id);
        if (c->st == HN_OK && b == NULL)
            c->st = HN_ERR_RUNTIME;
        if (c->st == HN_OK) {
            b->lanes_used = 1;
            c->st = c->w->base.dev->event_record(b->fork, c->s);
        }
        for (int k = 0; k < c->t->lanes && c->st == HN_OK; k++)
            c->st = c->w->base.dev->stream_wait_event(M->side[k], b->fork, c->o);
        return h;
    }
    hn_p2p_signal_on(c, c->s, c->me, start_flag(c->t), h);
    for (int k = 0; k < c->t->lanes; k++)
        hn_p2p_wait_on(c, M->side[k], c->me, start_flag(c->t), h);
    return h;
}

/* The caller's stream goes on once every lane's work of hand-off h is done. */
void hn_p2p_lanes_end(ctx *c, uint32_t h)
{
    member *M = &c->t->m[c->me];
    if (captured(c)) { /* ... and leave it by one */
        gbank *b = bank_of(M, c->o->graph->id);
        for (int k = 0; k < c->t->lanes && c->st == HN_OK && b != NULL; k++)
            if ((c->st = c->w->base.dev->event_record(b->join[k], M->side[k])) == HN_OK)
                c->st = c->w->base.dev->stream_wait_event(c->s, b->join[k], c->o);
        return;
    }
    for (int k = 0; k < c->t->lanes; k++) {
        hn_p2p_signal_on(c, M->side[k], c->me, end_flag(c->t, k), h);
        hn_p2p_wait_on(c, c->s, c->me, end_flag(c->t, k), h);
    }
}

/* Stream S goes on once the lanes' work so far is done (S need not be the
 * stream their last hand-off joined). Captured: the join events of the
 * capture's last hand-off (before it, the lanes were idle). */
void hn_p2p_lanes_after(ctx *c, hn_dstream *S)
{
    member *M = &c->t->m[c->me];
    if (captured(c)) {
        gbank *b = bank_of(M, c->o->graph->id);
        for (int k = 0; k < c->t->lanes && c->st == HN_OK && b != NULL && b->lanes_used; k++)
            c->st = c->w->base.dev->stream_wait_event(S, b->join[k], c->o);
        return;
    }
    for (int k = 0; k < c->t->lanes; k++)
        hn_p2p_wait_on(c, S, c->me, end_flag(c->t, k), (uint32_t)M->joins);
}

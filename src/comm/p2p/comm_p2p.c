/* Peer-copy communicator: collectives and send/recv as rings of direct
 * copies between device buffers (copy engines on GPUs: no SMs move data),
 * ordered across devices without a host round trip on the critical path.
 * Written against the device and compute tables only, so the CPU
 * emulation runs exactly these algorithms. Buffer addresses that change
 * per operation (the receivers' with put, the senders' with get) are
 * handed over through host mailboxes when the operation is issued. Put
 * (senders push: HN_ALGO_PUSH) is the default; get (receivers pull:
 * HN_ALGO_PULL) is chosen per instruction (`via p2p get`). An allreduce of
 * at most p2p_small_kib per member pushes every input into slots of the
 * peers' own instead and reduces there: one crossing per call, not a
 * reduce_scatter's and an allgather's.
 *
 * The files, each calling only those below it:
 *   comm_p2p.c            this table: the world, team lifecycle, what the
 *                         rings run (refuses), dispatch, abort and reset
 *   comm_p2p_ring.c       allgather and reduce_scatter rings (allreduce: both,
 *                         or the small allreduce)
 *   comm_p2p_broadcast.c  broadcast, root and members directly
 *   comm_p2p_sendrecv.c   groups of sends and receives
 *   comm_p2p_banks.c      the flags of captured graphs (graph hooks)
 *   comm_p2p_sync.c       signal and wait (events, flags, captured flags),
 *                         copies, copy lanes, host spins
 *   comm_p2p_int.h        the state, the flag layout, the mailboxes */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "comm_p2p_int.h"

#define PIECES_DEFAULT 4 /* a reduction step's chunk is copied and reduced in pieces */
#define PIECES_MAX 64
#define PIECE_MIN_DEFAULT ((size_t)4 << 20) /* no piece smaller, unless the whole step is */
#define OWN_WORLD_SHARED ((size_t)256 << 20)  /* a world of its own: shared regions reserved */
/* what a member's exchanges on a team are about */
enum { XCHG_JOIN = 1, XCHG_RESERVE = 2 };

static void p2p_fini(hn_comm_world *w)
{
    if (w == NULL)
        return;
    while (w->gpairs != NULL) {
        gpairs *gp = w->gpairs;
        w->gpairs = gp->next;
        hn_p2p_pairs_free(w, gp);
    }
    pthread_mutex_destroy(&w->gmu);
    hn_free(w->send_seq);
    hn_free(w->recv_seq);
    hn_world_shared_free(w->base.world, w->pair_mbox);
    hn_world_shared_free(w->base.world, w->waiting_for);
    hn_comm_base_free(&w->base);
}

static hn_status_t p2p_init(const hn_comm_setup *setup, hn_comm_world **out)
{
    size_t n2 = (size_t)setup->nranks * (size_t)setup->nranks;
    hn_comm_world *w;
    hn_status_t st = hn_comm_base_new("p2p", setup, sizeof(*w), OWN_WORLD_SHARED, &w);
    if (st != HN_OK)
        return st;
    pthread_mutex_init(&w->gmu, NULL);
    w->events = setup->p2p_events;
    w->graph_kernel_copy = setup->p2p_graph_kernel_copy;
    w->pieces = setup->p2p_pieces > 0 ? setup->p2p_pieces : PIECES_DEFAULT;
    if (w->pieces > PIECES_MAX)
        w->pieces = PIECES_MAX;
    w->ag_pieces = setup->p2p_ag_pieces < 1 ? 1 : setup->p2p_ag_pieces > w->pieces ? w->pieces : setup->p2p_ag_pieces;
    w->piece_min = setup->p2p_piece_min > 0 ? setup->p2p_piece_min : PIECE_MIN_DEFAULT;
    w->small_max = setup->p2p_small_max;
    w->lanes = setup->p2p_lanes > 0 ? setup->p2p_lanes : 1;
    if (w->lanes > LANES_MAX)
        w->lanes = LANES_MAX;
    w->send_seq = hn_calloc(n2, sizeof(uint64_t));
    w->recv_seq = hn_calloc(n2, sizeof(uint64_t));
    /* what ranks read of each other: in the world's shared regions, the
     * same in every process (the world's first regions: made at init) */
    if (w->send_seq == NULL || w->recv_seq == NULL ||
        hn_world_shared(w->base.world, 0x7032000000000001ull, n2 * SLOTS * sizeof(mailbox), (void **)&w->pair_mbox) !=
            HN_OK ||
        hn_world_shared(w->base.world, 0x7032000000000002ull, (size_t)setup->nranks * sizeof(int),
                        (void **)&w->waiting_for) != HN_OK) {
        p2p_fini(w);
        return HN_ERR_NOMEM;
    }
    for (int r = 0; r < w->base.nranks; r++)
        w->waiting_for[r] = -1;
    *out = w;
    return HN_OK;
}

static void team_free(hn_comm_team *t)
{
    for (int i = 0; t->sh != NULL && i < t->base.n; i++)
        hn_world_shared_free(t->base.w->base.world, t->sh[i]);
    hn_free(t->sh);
    hn_free(t->view);
    hn_comm_team_free(&t->base);
}

static hn_status_t p2p_team_create(hn_comm_world *w, const int *ranks, int n, hn_comm_team **out)
{
    hn_comm_team *t;
    hn_status_t st = hn_comm_team_new(&w->base, ranks, n, sizeof(*t) + (size_t)n * sizeof(member), &t);
    if (st != HN_OK)
        return st;
    t->pieces = w->pieces;
    t->ag_pieces = w->ag_pieces;
    t->lanes = w->lanes;
    t->piece_min = w->piece_min;
    t->events = w->events;
    t->nflags = flags_count(t);
    /* every member's shared part, in the same order in every process */
    t->sh = hn_calloc((size_t)n, sizeof(*t->sh));
    t->view = hn_calloc((size_t)n, sizeof(*t->view));
    if (t->sh == NULL || t->view == NULL) {
        team_free(t);
        return HN_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        size_t bytes = sizeof(member_shared) + (t->events ? t->nflags * sizeof(evslot) : 0);
        st = hn_world_shared(w->base.world, (t->base.id << 16) ^ (uint64_t)i ^ 0x7032700000000000ull, bytes,
                             (void **)&t->sh[i]);
        if (st != HN_OK) {
            HN_ERROR("p2p: no room in the shared regions for a member of a team of %d (%zu bytes)", n, bytes);
            team_free(t);
            return st;
        }
    }
    *out = t;
    return HN_OK;
}

/* Member me's exchange of `kind` on its team (mine: its own status, a
 * failure anywhere failing every member at once): the addresses of its
 * device memory (its view) to every member. Another process's member's
 * becomes its view here (its device memory is at the same address in
 * every process); a member of this process's must be its own view (the
 * member may be past it: its join, then its staging). */
static hn_status_t team_xchg(hn_comm_team *t, int me, int kind, hn_status_t mine, const hn_origin *o)
{
    member_view *all = hn_calloc((size_t)t->base.n, sizeof(*all));
    hn_status_t st;
    if (all == NULL) {
        hn_origin_fail(o, HN_ERR_NOMEM, "p2p: out of host memory");
        return HN_ERR_NOMEM;
    }
    st = hn_comm_team_xchg(&t->base, me, kind, kind == XCHG_JOIN ? "joining" : "staging for", mine, &t->view[me],
                           sizeof(*all), all, o);
    for (int i = 0; i < t->base.n && st == HN_OK; i++) {
        if (!__atomic_load_n(&t->m[i].here, __ATOMIC_ACQUIRE)) {
            if (kind == XCHG_JOIN) {
                t->view[i].flags = all[i].flags;
            } else {
                t->view[i].stage[0] = all[i].stage[0];
                t->view[i].stage[1] = all[i].stage[1];
                t->view[i].stage_bytes = all[i].stage_bytes;
                t->view[i].small[0] = all[i].small[0];
                t->view[i].small[1] = all[i].small[1];
                t->view[i].small_cap = all[i].small_cap;
            }
        } else if (kind == XCHG_JOIN ? all[i].flags != t->view[i].flags
                                     : all[i].stage[0] != t->view[i].stage[0] ||
                                           all[i].stage[1] != t->view[i].stage[1] ||
                                           all[i].small[0] != t->view[i].small[0] ||
                                           all[i].small[1] != t->view[i].small[1]) {
            hn_origin_fail(o, HN_ERR_RUNTIME, "p2p: rank %d's exchanged addresses differ from its own",
                           t->base.ranks[i]);
            st = HN_ERR_RUNTIME;
        }
    }
    hn_free(all);
    return st;
}

/* On the member's thread: its flags, zeroed (flags), or its host slots
 * and its table of events, created when first recorded (events). */
static hn_status_t p2p_team_join(hn_comm_team *t, int me, const hn_origin *o)
{
    const hn_comm_base *b = &t->base.w->base;
    member *m = &t->m[me];
    int rank = t->base.ranks[me];
    size_t bytes = t->nflags * sizeof(uint32_t);
    uint32_t *zeros = NULL;
    hn_status_t st = HN_OK;
    void *p = NULL;
    __atomic_store_n(&m->here, 1, __ATOMIC_RELEASE); /* before its exchanges: members here compare, not adopt */
    if (t->events) { /* its slots are in its shared part, zeroed */
        m->ev = hn_calloc((size_t)t->base.n * t->nflags, sizeof(hn_devent *));
        if (m->ev == NULL)
            st = HN_ERR_NOMEM;
    } else {
        zeros = hn_calloc(t->nflags, sizeof(uint32_t));
        st = zeros != NULL ? HN_OK : HN_ERR_NOMEM;
        if (st == HN_OK)
            st = b->dev->mem_alloc(b->dev_ctx, rank, bytes, &p);
        if (st == HN_OK)
            st = b->dev->copy_to_device(b->dev_ctx, rank, p, zeros, bytes);
    }
    for (int k = 0; k < t->lanes && st == HN_OK; k++)
        st = b->dev->stream_create(b->dev_ctx, rank, &m->side[k]);
    hn_free(zeros);
    if (st != HN_OK) {
        if (p != NULL)
            b->dev->mem_free(b->dev_ctx, rank, p);
        p = NULL;
        hn_origin_fail(o, st, "p2p: cannot allocate the %s of a team of %d", t->events ? "events" : "flags", t->base.n);
    }
    t->view[me].flags = p;
    /* the others learn its flags' address; a failure anywhere fails all */
    return team_xchg(t, me, XCHG_JOIN, st, o);
}

/* Two buffers of `bytes` each into bufs. The old ones are freed, or
 * retired while the member has graph banks: a graph captured with them
 * copies into them on every replay (every member's, through the addresses
 * exchanged then). A failure is said on o unless `what` is NULL (optional
 * buffers: then none is left). */
static hn_status_t realloc_pair(hn_comm_team *t, int me, void **bufs, size_t bytes, const char *what,
                                const hn_origin *o)
{
    const hn_comm_base *b = &t->base.w->base;
    member *m = &t->m[me];
    int rank = t->base.ranks[me];
    hn_status_t st = HN_OK;
    for (int i = 0; i < 2 && st == HN_OK; i++) {
        if (bufs[i] != NULL && m->banks == NULL) {
            b->dev->mem_free(b->dev_ctx, rank, bufs[i]);
        } else if (bufs[i] != NULL) {
            if (hn_grow((void **)&m->retired, &m->retired_cap, m->nretired, sizeof(void *)) != 0) {
                hn_origin_fail(o, HN_ERR_NOMEM, "p2p: out of host memory");
                return HN_ERR_NOMEM;
            }
            m->retired[m->nretired++] = bufs[i];
        }
        bufs[i] = NULL;
        if ((st = b->dev->mem_alloc(b->dev_ctx, rank, bytes, &bufs[i])) != HN_OK && what != NULL)
            hn_origin_fail(o, st, "p2p: cannot allocate %zu bytes of %s", bytes, what);
    }
    if (st != HN_OK && what == NULL)
        for (int i = 0; i < 2; i++) {
            if (bufs[i] != NULL)
                b->dev->mem_free(b->dev_ctx, rank, bufs[i]);
            bufs[i] = NULL;
        }
    return st;
}

/* Every member grows its staging together (the runtime reserves on every
 * member at once, by the same sizes), then tells the others. The small
 * allreduces' slots hold an allreduce's whole input (n chunks of `bytes`)
 * from every member, up to the setting p2p_small_kib each; they are
 * optional: a member that cannot have them has none, and small_fits then
 * sends every member the rings' way. */
static hn_status_t p2p_team_reserve(hn_comm_team *t, int me, size_t bytes, const hn_origin *o)
{
    member_view *v = &t->view[me];
    member *m = &t->m[me];
    size_t n = (size_t)t->base.n, cap = HN_MIN(bytes * n, t->base.w->small_max);
    hn_status_t st = HN_OK;
    cap = (cap + 255) / 256 * 256; /* every sender's region aligned for vector access */
    if (n == 1)
        cap = 0;
    /* what every member decides alike: none skips the exchange another makes */
    if (bytes <= v->stage_bytes && cap <= m->small_asked)
        return HN_OK;
    if (bytes > v->stage_bytes) {
        v->stage_bytes = 0;
        if ((st = realloc_pair(t, me, v->stage, bytes, "staging", o)) == HN_OK)
            v->stage_bytes = bytes;
    }
    if (st == HN_OK && cap > m->small_asked) {
        m->small_asked = cap;
        v->small_cap = 0;
        if (realloc_pair(t, me, v->small, cap * n, NULL, o) == HN_OK)
            v->small_cap = cap;
        else
            HN_WARN("p2p: no room for %zu bytes of small allreduces' slots on rank %d: the rings take them",
                    cap * n, t->base.ranks[me]);
    }
    if ((st = team_xchg(t, me, XCHG_RESERVE, st, o)) != HN_OK) {
        v->stage_bytes = v->small_cap = 0; /* grown again by the next reserve, on every member */
        m->small_asked = 0;
    }
    return st;
}

static void p2p_team_destroy(hn_comm_team *t)
{
    hn_comm_world *w;
    if (t == NULL)
        return;
    w = t->base.w;
    for (int i = 0; i < t->base.n; i++) {
        if (!t->m[i].here) /* another process's: it frees its own */
            continue;
        for (int k = 0; k < t->lanes; k++)
            if (t->m[i].side[k] != NULL) {
                w->base.dev->stream_sync(t->m[i].side[k]);
                w->base.dev->stream_destroy(t->m[i].side[k]);
            }
        while (t->m[i].banks != NULL) {
            gbank *b = t->m[i].banks;
            t->m[i].banks = b->next;
            hn_p2p_bank_free(w, t->base.ranks[i], b);
        }
        if (t->view[i].flags != NULL)
            w->base.dev->mem_free(w->base.dev_ctx, t->base.ranks[i], t->view[i].flags);
        if (t->m[i].ev != NULL)
            for (size_t k = 0; k < (size_t)t->base.n * t->nflags; k++)
                w->base.dev->event_destroy(t->m[i].ev[k]);
        hn_free(t->m[i].ev);
        for (int k = 0; k < 2; k++) {
            if (t->view[i].stage[k] != NULL)
                w->base.dev->mem_free(w->base.dev_ctx, t->base.ranks[i], t->view[i].stage[k]);
            if (t->view[i].small[k] != NULL)
                w->base.dev->mem_free(w->base.dev_ctx, t->base.ranks[i], t->view[i].small[k]);
        }
        retired_free(w, t, i);
        hn_free(t->m[i].retired);
    }
    team_free(t);
}

/* The collectives the rings run: not gather, scatter, reduce, all_to_all;
 * an allreduce's count divides into the members' chunks. */
static const char *p2p_refuses(hn_coll_kind kind, hn_dtype dtype, size_t count, int n, char *why, size_t len)
{
    (void)dtype;
    if (kind != HN_COLL_ALLGATHER && kind != HN_COLL_REDUCE_SCATTER && kind != HN_COLL_ALLREDUCE &&
        kind != HN_COLL_BROADCAST)
        snprintf(why, len, "%s via p2p: the p2p communicator does allgather, reduce_scatter, allreduce, broadcast "
                 "and send/recv", hn_coll_name(kind));
    else if (kind == HN_COLL_ALLREDUCE && count % (size_t)n != 0)
        snprintf(why, len, "allreduce via p2p of %zu elements: not divisible by the team size %d", count, n);
    else
        return NULL;
    return why;
}

/* Whether an allreduce of `bytes` takes the small path: every member's
 * slots hold it (they all reserved the same). */
static int small_fits(const hn_comm_team *t, size_t bytes)
{
    for (int i = 0; i < t->base.n; i++)
        if (t->view[i].small[0] == NULL || bytes > t->view[i].small_cap)
            return 0;
    return t->base.n > 1;
}

static hn_status_t p2p_collective(hn_comm_team *t, int me, const hn_coll_args *a, hn_dstream *s, const hn_origin *o)
{
    ctx c = {t->base.w, t, me, s, o, HN_OK};
    size_t es = (size_t)hn_dtype_size(a->dtype), n = (size_t)t->base.n;
    /* else push (also auto). Inside a capture the rings push: a replayed
     * pull from a peer's buffer was seen to stall on two H200s (the copy
     * never ended, copy engine or SM; docs/GPU-VALIDATION.md), and a push
     * gives the same bits (the same partials added in the same order). */
    int pull = a->algo == HN_ALGO_PULL && (o == NULL || o->graph == NULL);
    char why[160];
    hn_status_t st;
    if (p2p_refuses(a->kind, a->dtype, a->count, t->base.n, why, sizeof(why)) != NULL) {
        hn_origin_fail(o, HN_ERR_UNSUPPORTED, "%s", why);
        return HN_ERR_UNSUPPORTED;
    }
    if ((st = hn_p2p_refuse_foreign_capture(t->base.w, s, o, hn_coll_name(a->kind))) != HN_OK)
        return st;
    switch (a->kind) {
    case HN_COLL_ALLGATHER:
        if (pull)
            hn_p2p_allgather_get(&c, me, a->send, a->recv, a->count * es);
        else
            hn_p2p_allgather_put(&c, me, a->send, a->recv, a->count * es);
        break;
    case HN_COLL_REDUCE_SCATTER:
        if (pull)
            hn_p2p_reduce_scatter_get(&c, me, a->send, a->recv, a->count, a->dtype, a->redop);
        else
            hn_p2p_reduce_scatter_put(&c, me, a->send, a->recv, a->count, a->dtype, a->redop);
        break;
    case HN_COLL_ALLREDUCE: {
        size_t chunk = a->count / n;
        char *out = a->recv;
        if (!pull && small_fits(t, a->count * es)) {
            hn_p2p_allreduce_small(&c, me, a->send, a->recv, a->count, a->dtype, a->redop);
        } else if (pull) {
            hn_p2p_reduce_scatter_get(&c, me, a->send, out + (size_t)me * chunk * es, chunk, a->dtype, a->redop);
            hn_p2p_allgather_get(&c, me, out + (size_t)me * chunk * es, out, chunk * es);
        } else {
            hn_p2p_reduce_scatter_put(&c, me, a->send, out + (size_t)me * chunk * es, chunk, a->dtype, a->redop);
            hn_p2p_allgather_put(&c, me, out + (size_t)me * chunk * es, out, chunk * es);
        }
        break;
    }
    case HN_COLL_BROADCAST:
        if (pull)
            hn_p2p_broadcast_get(&c, me, a->root, a->send, a->recv, a->count * es);
        else
            hn_p2p_broadcast_put(&c, me, a->root, a->send, a->recv, a->count * es);
        break;
    default: /* refused above */
        break;
    }
    if (c.st != HN_OK && c.st != HN_ERR_ABORTED && c.st != HN_ERR_TIMEOUT && c.st != HN_ERR_RUNTIME)
        hn_origin_fail(o, c.st, "p2p %s: %s", hn_coll_name(a->kind), hn_status_string(c.st));
    return c.st;
}

/* After a failure, flag waits on the devices may wait forever: satisfy them
 * all, then the runtime destroys the teams (fresh flags next run). Events
 * leave nothing waiting on a device; their host spins see the abort. */
static int p2p_abort(hn_comm_world *w)
{
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        uint32_t *high = hn_malloc(t->nflags * sizeof(uint32_t));
        if (high == NULL)
            continue;
        for (size_t k = 0; k < t->nflags; k++)
            high[k] = 0x7fffffffu;
        for (int m = 0; m < t->base.n; m++)
            if (t->view[m].flags != NULL && !t->events)
                w->base.dev->copy_to_device(w->base.dev_ctx, t->base.ranks[m], t->view[m].flags, high,
                                       t->nflags * sizeof(uint32_t));
        hn_free(high);
    }
    return 1;
}

/* The issue side's sequences, and what the ranks share (the pair
 * mailboxes, who waits for whom): once for the world. */
static void p2p_reset(hn_comm_world *w)
{
    if (w->base.teams.n == 0) { /* teams were destroyed: sequences start over */
        size_t n2 = (size_t)w->base.nranks * (size_t)w->base.nranks;
        memset(w->send_seq, 0, n2 * sizeof(uint64_t));
        memset(w->recv_seq, 0, n2 * sizeof(uint64_t));
    }
}

static void p2p_reset_shared(hn_comm_world *w)
{
    for (int r = 0; r < w->base.nranks; r++) /* spins a failure cut short */
        w->waiting_for[r] = -1;
    if (w->base.teams.n == 0)
        memset(w->pair_mbox, 0, (size_t)w->base.nranks * (size_t)w->base.nranks * SLOTS * sizeof(mailbox));
}

const hn_comm_ops hn_comm_p2p = {
    .name = "p2p",
    .peers_reach_buffers = 1,
    .init = p2p_init,
    .fini = p2p_fini,
    .team_create = p2p_team_create,
    .team_join = p2p_team_join,
    .team_reserve = p2p_team_reserve,
    .team_destroy = p2p_team_destroy,
    .refuses = p2p_refuses,
    .collective = p2p_collective,
    .p2p = hn_p2p_sendrecv,
    .abort = p2p_abort,
    .reset = p2p_reset,
    .reset_shared = p2p_reset_shared,
    .graph_begin = hn_p2p_graph_begin,
    .graph_finish = hn_p2p_graph_finish,
    .graph_end = hn_p2p_graph_end,
    .graph_free = hn_p2p_graph_free,
};

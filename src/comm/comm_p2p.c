/* Peer-copy communicator: collectives and send/recv as rings of direct
 * copies between device buffers (copy engines on GPUs: no SMs move data),
 * ordered across devices without a host round trip on the critical path.
 * Written against the device and compute tables only, so the CPU
 * emulation runs exactly these algorithms. Buffer addresses that change
 * per operation (the receivers' with put, the senders' with get) are
 * handed over through host mailboxes when the operation is issued. Put
 * (senders push) is the default; get (receivers pull) is chosen per
 * instruction (`via p2p get`).
 *
 * The files, each calling only those below it:
 *   comm_p2p.c            this table: the world, team lifecycle, what the
 *                         rings run (refuses), dispatch, abort and reset
 *   comm_p2p_ring.c       allgather and reduce_scatter rings (allreduce: both)
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

static hn_status_t p2p_init(const hn_comm_config *cfg, hn_comm_world **out)
{
    hn_comm_world *w = hn_calloc(1, sizeof(*w));
    size_t n2 = (size_t)cfg->nranks * (size_t)cfg->nranks;
    if (w == NULL)
        return HN_ERR_NOMEM;
    w->n = cfg->nranks;
    w->dev = cfg->dev;
    w->dev_ctx = cfg->dev_ctx;
    w->compute = cfg->compute;
    w->sink = cfg->sink;
    w->events = cfg->p2p_events;
    w->pieces = cfg->p2p_pieces > 0 ? cfg->p2p_pieces : PIECES_DEFAULT;
    if (w->pieces > PIECES_MAX)
        w->pieces = PIECES_MAX;
    w->ag_pieces = cfg->p2p_ag_pieces < 1 ? 1 : cfg->p2p_ag_pieces > w->pieces ? w->pieces : cfg->p2p_ag_pieces;
    w->piece_min = cfg->p2p_piece_min > 0 ? cfg->p2p_piece_min : PIECE_MIN_DEFAULT;
    w->lanes = cfg->p2p_lanes > 0 ? cfg->p2p_lanes : 1;
    if (w->lanes > LANES_MAX)
        w->lanes = LANES_MAX;
    w->send_seq = hn_calloc(n2, sizeof(uint64_t));
    w->recv_seq = hn_calloc(n2, sizeof(uint64_t));
    w->pair_mbox = hn_calloc(n2 * SLOTS, sizeof(mailbox));
    w->waiting_for = hn_calloc((size_t)cfg->nranks, sizeof(int));
    if (w->send_seq == NULL || w->recv_seq == NULL || w->pair_mbox == NULL || w->waiting_for == NULL) {
        hn_free(w->waiting_for);
        hn_free(w->send_seq);
        hn_free(w->recv_seq);
        hn_free(w->pair_mbox);
        hn_free(w);
        return HN_ERR_NOMEM;
    }
    for (int r = 0; r < w->n; r++)
        w->waiting_for[r] = -1;
    pthread_mutex_init(&w->gmu, NULL);
    *out = w;
    return HN_OK;
}

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
    hn_free(w->pair_mbox);
    hn_free(w->waiting_for);
    hn_team_list_free(&w->teams);
    hn_free(w);
}

static hn_status_t p2p_team_create(hn_comm_world *w, const int *ranks, int n, hn_comm_team **out)
{
    void *m = NULL;
    hn_comm_team *t = hn_team_new(&w->teams, w->n, ranks, n, sizeof(hn_comm_team), sizeof(member),
                                  offsetof(member, rank), &m);
    if (t == NULL)
        return HN_ERR_NOMEM;
    t->m = m;
    t->n = n;
    t->w = w;
    t->pieces = w->pieces;
    t->ag_pieces = w->ag_pieces;
    t->lanes = w->lanes;
    t->piece_min = w->piece_min;
    t->events = w->events;
    t->nflags = pair_flag(t, n, 0, 0);
    *out = t;
    return HN_OK;
}

/* On the member's thread: its flags, zeroed (flags), or its host slots
 * and its table of events, created when first recorded (events). */
static hn_status_t p2p_team_join(hn_comm_team *t, int me, const hn_origin *o)
{
    hn_comm_world *w = t->w;
    member *m = &t->m[me];
    size_t bytes = t->nflags * sizeof(uint32_t);
    uint32_t *zeros = NULL;
    hn_status_t st = HN_OK;
    void *p = NULL;
    if (t->events) {
        m->slots = hn_calloc(t->nflags, sizeof(evslot));
        m->ev = hn_calloc((size_t)t->n * t->nflags, sizeof(hn_devent *));
        if (m->slots == NULL || m->ev == NULL)
            st = HN_ERR_NOMEM;
    } else {
        zeros = hn_calloc(t->nflags, sizeof(uint32_t));
        st = zeros != NULL ? HN_OK : HN_ERR_NOMEM;
        if (st == HN_OK)
            st = w->dev->mem_alloc(w->dev_ctx, m->rank, bytes, &p);
        if (st == HN_OK)
            st = w->dev->copy_to_device(w->dev_ctx, m->rank, p, zeros, bytes);
    }
    for (int k = 0; k < t->lanes && st == HN_OK; k++)
        st = w->dev->stream_create(w->dev_ctx, m->rank, &m->side[k]);
    hn_free(zeros);
    if (st != HN_OK) {
        if (p != NULL)
            w->dev->mem_free(w->dev_ctx, m->rank, p);
        hn_origin_fail(o, st, "p2p: cannot allocate the %s of a team of %d", t->events ? "events" : "flags", t->n);
        return st;
    }
    m->flags = p;
    return HN_OK;
}

static hn_status_t p2p_team_reserve(hn_comm_team *t, int me, size_t bytes, const hn_origin *o)
{
    hn_comm_world *w = t->w;
    member *m = &t->m[me];
    if (bytes <= m->stage_bytes)
        return HN_OK;
    for (int i = 0; i < 2; i++) {
        hn_status_t st;
        if (m->stage[i] != NULL)
            w->dev->mem_free(w->dev_ctx, m->rank, m->stage[i]);
        m->stage[i] = NULL;
        if ((st = w->dev->mem_alloc(w->dev_ctx, m->rank, bytes, &m->stage[i])) != HN_OK) {
            m->stage_bytes = 0;
            hn_origin_fail(o, st, "p2p: cannot allocate %zu bytes of staging", bytes);
            return st;
        }
    }
    m->stage_bytes = bytes;
    return HN_OK;
}

static void p2p_team_destroy(hn_comm_team *t)
{
    hn_comm_world *w;
    if (t == NULL)
        return;
    w = t->w;
    for (int i = 0; i < t->n; i++) {
        for (int k = 0; k < t->lanes; k++)
            if (t->m[i].side[k] != NULL) {
                w->dev->stream_sync(t->m[i].side[k]);
                w->dev->stream_destroy(t->m[i].side[k]);
            }
        while (t->m[i].banks != NULL) {
            gbank *b = t->m[i].banks;
            t->m[i].banks = b->next;
            hn_p2p_bank_free(w, t->m[i].rank, b);
        }
        if (t->m[i].flags != NULL)
            w->dev->mem_free(w->dev_ctx, t->m[i].rank, t->m[i].flags);
        if (t->m[i].ev != NULL)
            for (size_t k = 0; k < (size_t)t->n * t->nflags; k++)
                w->dev->event_destroy(t->m[i].ev[k]);
        hn_free(t->m[i].ev);
        hn_free(t->m[i].slots);
        for (int k = 0; k < 2; k++)
            if (t->m[i].stage[k] != NULL)
                w->dev->mem_free(w->dev_ctx, t->m[i].rank, t->m[i].stage[k]);
    }
    hn_team_free(&w->teams, t, t->m);
}

/* The collectives the rings run: not gather, scatter, reduce, all_to_all;
 * an allreduce's count divides into the members' chunks. */
static const char *p2p_refuses(hn_coll_kind kind, hn_dtype dtype, size_t count, int n, char *why, size_t len)
{
    (void)dtype;
    if (kind != HN_COLL_ALLGATHER && kind != HN_COLL_REDUCE_SCATTER && kind != HN_COLL_ALLREDUCE &&
        kind != HN_COLL_BROADCAST)
        snprintf(why, len, "%s via p2p: the p2p backend does allgather, reduce_scatter, allreduce, broadcast "
                 "and send/recv", hn_coll_name(kind));
    else if (kind == HN_COLL_ALLREDUCE && count % (size_t)n != 0)
        snprintf(why, len, "allreduce via p2p of %zu elements: not divisible by the team size %d", count, n);
    else
        return NULL;
    return why;
}

static hn_status_t p2p_collective(hn_comm_team *t, int me, const hn_coll_args *a, hn_dstream *s, const hn_origin *o)
{
    ctx c = {t->w, t, me, s, o, HN_OK};
    size_t es = (size_t)hn_dtype_size(a->dtype), n = (size_t)t->n;
    char why[160];
    if (p2p_refuses(a->kind, a->dtype, a->count, t->n, why, sizeof(why)) != NULL) {
        hn_origin_fail(o, HN_ERR_UNSUPPORTED, "%s", why);
        return HN_ERR_UNSUPPORTED;
    }
    switch (a->kind) {
    case HN_COLL_ALLGATHER:
        if (a->get)
            hn_p2p_allgather_get(&c, me, a->send, a->recv, a->count * es);
        else
            hn_p2p_allgather_put(&c, me, a->send, a->recv, a->count * es);
        break;
    case HN_COLL_REDUCE_SCATTER:
        if (a->get)
            hn_p2p_reduce_scatter_get(&c, me, a->send, a->recv, a->count, a->dtype, a->redop);
        else
            hn_p2p_reduce_scatter_put(&c, me, a->send, a->recv, a->count, a->dtype, a->redop);
        break;
    case HN_COLL_ALLREDUCE: {
        size_t chunk = a->count / n;
        char *out = a->recv;
        if (a->get) {
            hn_p2p_reduce_scatter_get(&c, me, a->send, out + (size_t)me * chunk * es, chunk, a->dtype, a->redop);
            hn_p2p_allgather_get(&c, me, out + (size_t)me * chunk * es, out, chunk * es);
        } else {
            hn_p2p_reduce_scatter_put(&c, me, a->send, out + (size_t)me * chunk * es, chunk, a->dtype, a->redop);
            hn_p2p_allgather_put(&c, me, out + (size_t)me * chunk * es, out, chunk * es);
        }
        break;
    }
    case HN_COLL_BROADCAST:
        if (a->get)
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
    for (int i = 0; i < w->teams.n; i++) {
        hn_comm_team *t = w->teams.teams[i];
        uint32_t *high = hn_malloc(t->nflags * sizeof(uint32_t));
        if (high == NULL)
            continue;
        for (size_t k = 0; k < t->nflags; k++)
            high[k] = 0x7fffffffu;
        for (int m = 0; m < t->n; m++)
            if (t->m[m].flags != NULL && !t->events)
                w->dev->copy_to_device(w->dev_ctx, t->m[m].rank, t->m[m].flags, high, t->nflags * sizeof(uint32_t));
        hn_free(high);
    }
    return 1;
}

static void p2p_reset(hn_comm_world *w)
{
    for (int r = 0; r < w->n; r++) /* spins a failure cut short */
        w->waiting_for[r] = -1;
    if (w->teams.n == 0) { /* teams were destroyed: sequences start over */
        size_t n2 = (size_t)w->n * (size_t)w->n;
        memset(w->send_seq, 0, n2 * sizeof(uint64_t));
        memset(w->recv_seq, 0, n2 * sizeof(uint64_t));
        memset(w->pair_mbox, 0, n2 * SLOTS * sizeof(mailbox));
    }
}

const hn_comm_ops hn_comm_p2p = {
    .name = "p2p",
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
    .graph_begin = hn_p2p_graph_begin,
    .graph_finish = hn_p2p_graph_finish,
    .graph_end = hn_p2p_graph_end,
    .graph_free = hn_p2p_graph_free,
};

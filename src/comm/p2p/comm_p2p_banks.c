/* The p2p communicator's graph banks (hn_graph_ctx; see gbank): flags of a
 * captured graph's own per team member and pair sequences per rank, made
 * before a capture, freed with the graph; every replay ends with a barrier
 * of the ranks. */
#include <pthread.h>

#include "comm_p2p_int.h"

void hn_p2p_bank_free(hn_comm_world *w, int rank, gbank *b)
{
    hn_free(b->peer_flags);
    if (b->flags != NULL)
        w->dev->mem_free(w->dev_ctx, rank, b->flags);
    w->dev->event_destroy(b->fork);
    for (int k = 0; k < LANES_MAX; k++)
        w->dev->event_destroy(b->join[k]);
    hn_free(b);
}

static gpairs *pairs_of(hn_comm_world *w, int rank, uint64_t id)
{
    gpairs **l, *gp;
    pthread_mutex_lock(&w->gmu);
    l = &w->gpairs;
    while (*l != NULL && !((*l)->id == id && (*l)->rank == rank))
        l = &(*l)->next;
    gp = *l;
    pthread_mutex_unlock(&w->gmu);
    return gp;
}

void hn_p2p_pairs_free(hn_comm_world *w, gpairs *gp)
{
    if (gp->bar != NULL)
        w->dev->mem_free(w->dev_ctx, gp->rank, gp->bar);
    hn_free(gp->send_at);
    hn_free(gp->recv_at);
    hn_free(gp->peer_bar);
    hn_free(gp);
}

/* the ranks of any team, as a bit set: those that take part in the barriers */
static int in_any_team(const hn_comm_world *w, int rank)
{
    for (int i = 0; i < w->teams.n; i++) {
        const hn_comm_team *t = w->teams.teams[i];
        for (int k = 0; k < t->n; k++)
            if (t->m[k].rank == rank)
                return 1;
    }
    return 0;
}

/* A graph captured again (a rebind, g->prev set) takes over what its
 * capture under the previous id made: the pair sequences' barrier words
 * and every team's flags. Their values are relative to the graph's epoch,
 * which it keeps: whatever an earlier replay wrote lies below the epoch
 * the next replay starts from. Nothing is allocated then. */
static void take_over(hn_comm_world *w, int rank, const hn_graph_ctx *g)
{
    gpairs *gp = pairs_of(w, rank, g->prev);
    if (gp != NULL) {
        pthread_mutex_lock(&w->gmu);
        gp->id = g->id;
        pthread_mutex_unlock(&w->gmu);
    }
    for (int i = 0; i < w->teams.n; i++) {
        hn_comm_team *t = w->teams.teams[i];
        for (int k = 0; k < t->n; k++) {
            gbank *b = t->m[k].rank == rank ? bank_of(&t->m[k], g->prev) : NULL;
            if (b != NULL)
                b->id = g->id;
        }
    }
}

/* A graph's own flags on member m (a first capture of it on this team) */
static hn_status_t bank_new(hn_comm_world *w, hn_comm_team *t, member *m, int rank, uint64_t id)
{
    size_t bytes = t->nflags * sizeof(uint32_t);
    hn_status_t st = HN_OK;
    uint32_t *zero_flags;
    gbank *b;
    if ((b = hn_calloc(1, sizeof(*b))) == NULL || (zero_flags = hn_calloc(t->nflags, sizeof(uint32_t))) == NULL) {
        hn_free(b);
        return HN_ERR_NOMEM;
    }
    b->id = id;
    b->next = m->banks;
    m->banks = b;
    if ((b->peer_flags = hn_calloc((size_t)t->n, sizeof(*b->peer_flags))) == NULL)
        st = HN_ERR_NOMEM;
    if (st == HN_OK && (st = w->dev->mem_alloc(w->dev_ctx, rank, bytes, (void **)&b->flags)) == HN_OK)
        st = w->dev->copy_to_device(w->dev_ctx, rank, b->flags, zero_flags, bytes);
    hn_free(zero_flags);
    if (st == HN_OK)
        st = w->dev->event_create(w->dev_ctx, rank, &b->fork);
    for (int k = 0; k < t->lanes && st == HN_OK; k++)
        st = w->dev->event_create(w->dev_ctx, rank, &b->join[k]);
    return st;
}

/* The pair sequences' record of graph `id` on `rank` (a first capture) */
static hn_status_t pairs_new(hn_comm_world *w, int rank, uint64_t id, gpairs **out)
{
    hn_status_t st = HN_OK;
    gpairs *gp;
    uint32_t *zeros = hn_calloc((size_t)w->n, sizeof(uint32_t));
    if (zeros == NULL || (gp = hn_calloc(1, sizeof(*gp))) == NULL) {
        hn_free(zeros);
        return HN_ERR_NOMEM;
    }
    gp->id = id;
    gp->rank = rank;
    pthread_mutex_lock(&w->gmu); /* the ranks' threads add theirs at once */
    gp->next = w->gpairs;
    w->gpairs = gp;
    pthread_mutex_unlock(&w->gmu);
    gp->send_at = hn_calloc((size_t)w->n, sizeof(uint64_t));
    gp->recv_at = hn_calloc((size_t)w->n, sizeof(uint64_t));
    gp->peer_bar = hn_calloc((size_t)w->n, sizeof(uint32_t *));
    if (gp->send_at == NULL || gp->recv_at == NULL || gp->peer_bar == NULL)
        st = HN_ERR_NOMEM;
    if (st == HN_OK &&
        (st = w->dev->mem_alloc(w->dev_ctx, rank, (size_t)w->n * sizeof(uint32_t), (void **)&gp->bar)) == HN_OK)
        st = w->dev->copy_to_device(w->dev_ctx, rank, gp->bar, zeros, (size_t)w->n * sizeof(uint32_t));
    hn_free(zeros);
    *out = gp;
    return st;
}

/* What a rank hands the others at graph_begin: its status and the
 * address of a bank's flags or of its barrier words. */
typedef struct xaddr {
    int32_t status, pad;
    void *p;
} xaddr;

/* An exchange of graph_begin among ranks[0 .. n-1] (me: the caller's
 * index): mine in, everyone's into all; a member's failure is
 * HN_ERR_ABORTED here (that member said why). */
static hn_status_t begin_xchg(hn_comm_world *w, const int *ranks, int n, int me, uint64_t tag, hn_status_t st,
                              void *p, xaddr *all, const hn_origin *o)
{
    xaddr mine = {st, 0, p};
    hn_strbuf why;
    hn_status_t x;
    hn_sb_init(&why);
    if ((x = hn_world_xchg(w->world, ranks, n, me, tag, &mine, sizeof(mine), all, 0, &why)) != HN_OK)
        hn_origin_fail(o, x, "p2p: preparing a capture: %s", why.data != NULL ? why.data : hn_status_string(x));
    hn_sb_free(&why);
    for (int i = 0; i < n && x == HN_OK; i++)
        if (all[i].status != HN_OK)
            x = st != HN_OK ? st : HN_ERR_ABORTED;
    return x;
}

/* Every member's bank flags and every rank's barrier words, exchanged
 * (what captured work writes into on the others); after a failure the
 * exchanges still run, with the failure in them, so no rank waits for
 * one that gave up. */
static hn_status_t begin_exchanges(hn_comm_world *w, int rank, const hn_graph_ctx *g, gpairs *gp, hn_status_t st,
                                   const hn_origin *o)
{
    xaddr *all = hn_calloc((size_t)w->n, sizeof(*all));
    int *ranks = hn_calloc((size_t)w->n, sizeof(int)), n = 0, me = -1;
    if (all == NULL || ranks == NULL) {
        hn_free(all);
        hn_free(ranks);
        return HN_ERR_NOMEM; /* the peers time out naming this rank */
    }
    for (int i = 0; i < w->teams.n; i++) {
        hn_comm_team *t = w->teams.teams[i];
        gbank *b;
        int k = 0;
        while (k < t->n && t->m[k].rank != rank)
            k++;
        if (k == t->n)
            continue;
        for (int j = 0; j < t->n; j++)
            ranks[j] = t->m[j].rank;
        b = bank_of(&t->m[k], g->id);
        st = begin_xchg(w, ranks, t->n, k,
                        ((uint64_t)0x7033 << 48) ^ (t->id << 24) ^ ((uint64_t)3 << 20) ^ ++t->m[k].xchgs,
                        st == HN_OK && b == NULL ? HN_ERR_RUNTIME : st, b != NULL ? b->flags : NULL, all, o);
        for (int j = 0; j < t->n && st == HN_OK; j++)
            b->peer_flags[j] = all[j].p;
    }
    for (int q = 0; q < w->n; q++)
        if (in_any_team(w, q)) {
            if (q == rank)
                me = n;
            ranks[n++] = q;
        }
    if (me >= 0) {
        st = begin_xchg(w, ranks, n, me, ((uint64_t)0x7034 << 48) ^ g->id, st == HN_OK && gp == NULL ? HN_ERR_RUNTIME : st,
                        gp != NULL ? gp->bar : NULL, all, o);
        for (int i = 0; i < n && st == HN_OK; i++)
            gp->peer_bar[ranks[i]] = all[i].p;
    }
    hn_free(all);
    hn_free(ranks);
    return st;
}

hn_status_t hn_p2p_graph_begin(hn_comm_world *w, int rank, const hn_graph_ctx *g, const hn_origin *o)
{
    hn_status_t st = HN_OK;
    gpairs *gp;
    if (g->prev != 0)
        take_over(w, rank, g);
    if ((gp = pairs_of(w, rank, g->id)) == NULL)
        st = pairs_new(w, rank, g->id, &gp);
    /* saved even when something failed: graph_end gives them back */
    for (int q = 0; q < w->n && gp != NULL && gp->send_at != NULL && gp->recv_at != NULL; q++) {
        gp->send_at[q] = w->send_seq[(size_t)rank * (size_t)w->n + (size_t)q];
        gp->recv_at[q] = w->recv_seq[(size_t)q * (size_t)w->n + (size_t)rank];
        w->send_seq[(size_t)rank * (size_t)w->n + (size_t)q] = 0; /* afresh, as the teams */
        w->recv_seq[(size_t)q * (size_t)w->n + (size_t)rank] = 0;
    }
    for (int i = 0; i < w->teams.n && st == HN_OK; i++) {
        hn_comm_team *t = w->teams.teams[i];
        gbank *b;
        member *m = NULL;
        for (int k = 0; k < t->n; k++)
            if (t->m[k].rank == rank)
                m = &t->m[k];
        if (m == NULL)
            continue;
        if (bank_of(m, g->id) == NULL)
            st = bank_new(w, t, m, rank, g->id);
        if ((b = bank_of(m, g->id)) == NULL || st != HN_OK)
            break;
        b->at[0] = m->slot_ops;
        b->at[1] = m->staged;
        b->at[2] = m->joins;
        b->at[3] = m->gstaged;
        b->stage_pieces[0] = m->stage_pieces[0];
        b->stage_pieces[1] = m->stage_pieces[1];
        b->last_get = m->last_get;
        /* the capture starts the team afresh (its devices are idle): no
         * operation before, every sequence at 0, every flag 0 */
        m->slot_ops = m->staged = m->joins = m->gstaged = 0;
        m->stage_pieces[0] = m->stage_pieces[1] = 0;
        m->last_get = 0;
        b->lanes_used = 0; /* a capture again forks them anew */
    }
    if (st != HN_OK)
        hn_origin_fail(o, st, "p2p: cannot prepare the team's flags for a capture");
    return begin_exchanges(w, rank, g, gp, st, o);
}

/* A barrier of every rank in a team, on stream s: value p of the replay
 * (relative to the graph's epoch, which every replay raises). */
static hn_status_t graph_barrier(hn_comm_world *w, int rank, const hn_graph_ctx *g, hn_dstream *s, uint32_t p,
                                 const hn_origin *o)
{
    hn_status_t st = HN_OK;
    gpairs *me = pairs_of(w, rank, g->id);
    for (int q = 0; q < w->n && st == HN_OK; q++) {
        if (q == rank || !in_any_team(w, q))
            continue;
        if (me == NULL || me->peer_bar == NULL || me->peer_bar[q] == NULL)
            return HN_ERR_RUNTIME;
        st = w->dev->stream_write_flag_rel(s, me->peer_bar[q] + rank, p, g->ep, o);
    }
    for (int q = 0; q < w->n && st == HN_OK; q++)
        if (q != rank && in_any_team(w, q))
            st = w->dev->stream_wait_flag_rel(s, me->bar + q, p, g->ep, o);
    return st;
}

/* The largest flag value rank's captured work took: a generation, a ring
 * step (+1), a hand-off or a pair sequence (comm_p2p_int.h's layout). */
static uint64_t values_taken(const hn_comm_world *w, int rank)
{
    uint64_t most = 0;
    for (int i = 0; i < w->teams.n; i++) {
        const hn_comm_team *t = w->teams.teams[i];
        for (int k = 0; k < t->n; k++) {
            const member *m = &t->m[k];
            uint64_t steps = (m->staged > m->gstaged ? m->staged : m->gstaged) * (uint64_t)(t->n - 1) + 1;
            if (m->rank != rank)
                continue;
            most = HN_MAX(most, HN_MAX(HN_MAX(m->slot_ops, m->joins), steps));
        }
    }
    for (int q = 0; q < w->n; q++)
        most = HN_MAX(most, HN_MAX(w->send_seq[(size_t)rank * (size_t)w->n + (size_t)q],
                                   w->recv_seq[(size_t)q * (size_t)w->n + (size_t)rank]));
    return most;
}

/* The end of every replay, captured on the rank's stream after all its
 * work: a barrier of the ranks, so that no rank's next work (the next
 * replay, or eager work after it) writes into staging, buffers or flags
 * a peer still uses in this replay. The flags need no reset: their values
 * are relative to the epoch, which the replay raises next, so the next
 * replay's values are all above this one's — as long as a replay takes
 * fewer values than the epoch's span (checked here). */
hn_status_t hn_p2p_graph_finish(hn_comm_world *w, int rank, const hn_graph_ctx *g, hn_dstream *s,
                                const hn_origin *o)
{
    hn_status_t st;
    uint64_t taken;
    if (!in_any_team(w, rank))
        return HN_OK;
    if ((taken = values_taken(w, rank)) >= HN_GRAPH_EPOCH_SPAN) {
        hn_origin_fail(o, HN_ERR_UNSUPPORTED, "p2p: a captured graph takes at most %u ring steps, hand-offs or "
                       "messages per team member, this one %llu: capture fewer operations", HN_GRAPH_EPOCH_SPAN - 1,
                       (unsigned long long)taken);
        return HN_ERR_UNSUPPORTED;
    }
    st = graph_barrier(w, rank, g, s, 1, o);
    if (st != HN_OK)
        hn_origin_fail(o, st, "p2p: cannot end the captured replay: %s", hn_status_string(st));
    return st;
}

/* After the capture: the eager sequences and state as they were before it */
void hn_p2p_graph_end(hn_comm_world *w, int rank, const hn_graph_ctx *g)
{
    gpairs *gp = pairs_of(w, rank, g->id);
    for (int q = 0; q < w->n && gp != NULL && gp->send_at != NULL && gp->recv_at != NULL; q++) {
        w->send_seq[(size_t)rank * (size_t)w->n + (size_t)q] = gp->send_at[q];
        w->recv_seq[(size_t)q * (size_t)w->n + (size_t)rank] = gp->recv_at[q];
    }
    for (int i = 0; i < w->teams.n; i++) {
        hn_comm_team *t = w->teams.teams[i];
        for (int k = 0; k < t->n; k++) {
            member *m = &t->m[k];
            gbank *b = m->rank == rank ? bank_of(m, g->id) : NULL;
            if (b == NULL)
                continue;
            m->slot_ops = b->at[0];
            m->staged = b->at[1];
            m->joins = b->at[2];
            m->gstaged = b->at[3];
            m->stage_pieces[0] = b->stage_pieces[0];
            m->stage_pieces[1] = b->stage_pieces[1];
            m->last_get = b->last_get;
        }
    }
}

void hn_p2p_graph_free(hn_comm_world *w, int rank, const hn_graph_ctx *g)
{
    gpairs **l, *gp;
    pthread_mutex_lock(&w->gmu);
    for (l = &w->gpairs; *l != NULL && !((*l)->id == g->id && (*l)->rank == rank); l = &(*l)->next)
        ;
    gp = *l;
    if (gp != NULL)
        *l = gp->next;
    pthread_mutex_unlock(&w->gmu);
    if (gp != NULL)
        hn_p2p_pairs_free(w, gp);
    for (int i = 0; i < w->teams.n; i++) {
        hn_comm_team *t = w->teams.teams[i];
        for (int k = 0; k < t->n; k++) {
            gbank **bl = &t->m[k].banks;
            if (t->m[k].rank != rank)
                continue;
            while (*bl != NULL && (*bl)->id != g->id)
                bl = &(*bl)->next;
            if (*bl != NULL) {
                gbank *b = *bl;
                *bl = b->next;
                hn_p2p_bank_free(w, rank, b);
            }
        }
    }
}

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
        w->base.dev->mem_free(w->base.dev_ctx, rank, b->flags);
    w->base.dev->event_destroy(b->fork);
    for (int k = 0; k < LANES_MAX; k++)
        w->base.dev->event_destroy(b->join[k]);
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
        w->base.dev->mem_free(w->base.dev_ctx, gp->rank, gp->bar);
    hn_free(gp->send_at);
    hn_free(gp->recv_at);
    hn_free(gp->peer_bar);
    hn_free(gp);
}

/* the ranks of any team, as a bit set: those that take part in the barriers */
static int in_any_team(const hn_comm_world *w, int rank)
{
    for (int i = 0; i < w->base.teams.n; i++)
        if (hn_comm_team_index(w->base.teams.teams[i], rank) >= 0)
            return 1;
    return 0;
}

/* Whether q takes part in rank's barriers: q is in a team, on rank's node
 * (a world across nodes: no team of the rings spans nodes, and another
 * node's barrier words are not mapped here) */
static int barrier_peer(const hn_comm_world *w, int rank, int q)
{
    return in_any_team(w, q) && hn_world_node_of(w->base.world, q) == hn_world_node_of(w->base.world, rank);
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
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        int k = hn_comm_team_index(&t->base, rank);
        gbank *b = k >= 0 ? bank_of(&t->m[k], g->prev) : NULL;
        if (b != NULL)
            b->id = g->id;
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
    if ((b->peer_flags = hn_calloc((size_t)t->base.n, sizeof(*b->peer_flags))) == NULL)
        st = HN_ERR_NOMEM;
    if (st == HN_OK && (st = w->base.dev->mem_alloc(w->base.dev_ctx, rank, bytes, (void **)&b->flags)) == HN_OK)
        st = w->base.dev->copy_to_device(w->base.dev_ctx, rank, b->flags, zero_flags, bytes);
    hn_free(zero_flags);
    if (st == HN_OK)
        st = w->base.dev->event_create(w->base.dev_ctx, rank, &b->fork);
    for (int k = 0; k < t->lanes && st == HN_OK; k++)
        st = w->base.dev->event_create(w->base.dev_ctx, rank, &b->join[k]);
    return st;
}

/* The pair sequences' record of graph `id` on `rank` (a first capture) */
static hn_status_t pairs_new(hn_comm_world *w, int rank, uint64_t id, gpairs **out)
{
    hn_status_t st = HN_OK;
    gpairs *gp;
    size_t bar_bytes = (size_t)w->base.nranks * sizeof(uint32_t);
    uint32_t *zeros = hn_calloc((size_t)w->base.nranks, sizeof(uint32_t));
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
    gp->send_at = hn_calloc((size_t)w->base.nranks, sizeof(uint64_t));
    gp->recv_at = hn_calloc((size_t)w->base.nranks, sizeof(uint64_t));
    gp->peer_bar = hn_calloc((size_t)w->base.nranks, sizeof(uint32_t *));
    if (gp->send_at == NULL || gp->recv_at == NULL || gp->peer_bar == NULL)
        st = HN_ERR_NOMEM;
    if (st == HN_OK && (st = w->base.dev->mem_alloc(w->base.dev_ctx, rank, bar_bytes, (void **)&gp->bar)) == HN_OK)
        st = w->base.dev->copy_to_device(w->base.dev_ctx, rank, gp->bar, zeros, bar_bytes);
    hn_free(zeros);
    *out = gp;
    return st;
}

/* what a member's exchange on a team at graph_begin is about (after the
 * join's and the reserve's, comm_p2p.c) */
enum { XCHG_GRAPH = 3 };

/* Every member's bank flags and every rank's barrier words, exchanged
 * (what captured work writes into on the others: the address of a
 * bank's flags, of a rank's barrier words); after a failure the
 * exchanges still run, with the failure in them, so no rank waits for
 * one that gave up. */
static hn_status_t begin_exchanges(hn_comm_world *w, int rank, const hn_graph_ctx *g, gpairs *gp, hn_status_t st,
                                   const hn_origin *o)
{
    void **all = hn_calloc((size_t)w->base.nranks, sizeof(*all));
    int *ranks = hn_calloc((size_t)w->base.nranks, sizeof(int)), n = 0, me = -1;
    void *mine;
    if (all == NULL || ranks == NULL) {
        hn_free(all);
        hn_free(ranks);
        return HN_ERR_NOMEM; /* the peers time out naming this rank */
    }
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        int k = hn_comm_team_index(&t->base, rank);
        gbank *b = k >= 0 ? bank_of(&t->m[k], g->id) : NULL;
        if (k < 0)
            continue;
        mine = b != NULL ? b->flags : NULL;
        st = hn_comm_team_xchg(&t->base, k, XCHG_GRAPH, "preparing a capture for",
                               st == HN_OK && b == NULL ? HN_ERR_RUNTIME : st, &mine, sizeof(mine), all, o);
        for (int j = 0; j < t->base.n && st == HN_OK; j++)
            b->peer_flags[j] = all[j];
    }
    for (int q = 0; q < w->base.nranks; q++)
        if (barrier_peer(w, rank, q)) {
            if (q == rank)
                me = n;
            ranks[n++] = q;
        }
    if (me >= 0) {
        mine = gp != NULL ? gp->bar : NULL;
        st = hn_comm_xchg(&w->base, ranks, n, me, ((uint64_t)0x7034 << 48) ^ g->id, "preparing a capture",
                          st == HN_OK && gp == NULL ? HN_ERR_RUNTIME : st, &mine, sizeof(mine), all, o);
        for (int i = 0; i < n && st == HN_OK; i++)
            gp->peer_bar[ranks[i]] = all[i];
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
    for (int q = 0; q < w->base.nranks && gp != NULL && gp->send_at != NULL && gp->recv_at != NULL; q++) {
        gp->send_at[q] = w->send_seq[(size_t)rank * (size_t)w->base.nranks + (size_t)q];
        gp->recv_at[q] = w->recv_seq[(size_t)q * (size_t)w->base.nranks + (size_t)rank];
        w->send_seq[(size_t)rank * (size_t)w->base.nranks + (size_t)q] = 0; /* afresh, as the teams */
        w->recv_seq[(size_t)q * (size_t)w->base.nranks + (size_t)rank] = 0;
    }
    for (int i = 0; i < w->base.teams.n && st == HN_OK; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        int k = hn_comm_team_index(&t->base, rank);
        member *m = k >= 0 ? &t->m[k] : NULL;
        gbank *b;
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
        b->at[4] = m->small_ops;
        b->stage_pieces[0] = m->stage_pieces[0];
        b->stage_pieces[1] = m->stage_pieces[1];
        b->last_get = m->last_get;
        /* the capture starts the team afresh (its devices are idle): no
         * operation before, every sequence at 0, every flag 0 */
        m->slot_ops = m->staged = m->joins = m->gstaged = m->small_ops = 0;
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
    for (int q = 0; q < w->base.nranks && st == HN_OK; q++) {
        if (q == rank || !barrier_peer(w, rank, q))
            continue;
        if (me == NULL || me->peer_bar == NULL || me->peer_bar[q] == NULL)
            return HN_ERR_RUNTIME;
        st = w->base.dev->stream_write_flag_rel(s, me->peer_bar[q] + rank, p, g->ep, o);
    }
    for (int q = 0; q < w->base.nranks && st == HN_OK; q++)
        if (q != rank && barrier_peer(w, rank, q))
            st = w->base.dev->stream_wait_flag_rel(s, me->bar + q, p, g->ep, o);
    return st;
}

/* The largest flag value rank's captured work took: a generation, a ring
 * step (+1), a hand-off or a pair sequence (comm_p2p_int.h's layout). */
static uint64_t values_taken(const hn_comm_world *w, int rank)
{
    uint64_t most = 0;
    for (int i = 0; i < w->base.teams.n; i++) {
        const hn_comm_team *t = w->base.teams.teams[i];
        int k = hn_comm_team_index(&t->base, rank);
        const member *m = k >= 0 ? &t->m[k] : NULL;
        uint64_t steps;
        if (m == NULL)
            continue;
        steps = (m->staged > m->gstaged ? m->staged : m->gstaged) * (uint64_t)(t->base.n - 1) + 1;
        most = HN_MAX(most, HN_MAX(HN_MAX(m->slot_ops, m->joins), HN_MAX(steps, m->small_ops)));
    }
    for (int q = 0; q < w->base.nranks; q++)
        most = HN_MAX(most, HN_MAX(w->send_seq[(size_t)rank * (size_t)w->base.nranks + (size_t)q],
                                   w->recv_seq[(size_t)q * (size_t)w->base.nranks + (size_t)rank]));
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
    for (int q = 0; q < w->base.nranks && gp != NULL && gp->send_at != NULL && gp->recv_at != NULL; q++) {
        w->send_seq[(size_t)rank * (size_t)w->base.nranks + (size_t)q] = gp->send_at[q];
        w->recv_seq[(size_t)q * (size_t)w->base.nranks + (size_t)rank] = gp->recv_at[q];
    }
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        int k = hn_comm_team_index(&t->base, rank);
        member *m = k >= 0 ? &t->m[k] : NULL;
        gbank *b = m != NULL ? bank_of(m, g->id) : NULL;
        if (b == NULL)
            continue;
        m->slot_ops = b->at[0];
        m->staged = b->at[1];
        m->joins = b->at[2];
        m->gstaged = b->at[3];
        m->small_ops = b->at[4];
        m->stage_pieces[0] = b->stage_pieces[0];
        m->stage_pieces[1] = b->stage_pieces[1];
        m->last_get = b->last_get;
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
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        int k = hn_comm_team_index(&t->base, rank);
        gbank **bl = k >= 0 ? &t->m[k].banks : NULL;
        if (bl == NULL)
            continue;
        while (*bl != NULL && (*bl)->id != g->id)
            bl = &(*bl)->next;
        if (*bl != NULL) {
            gbank *b = *bl;
            *bl = b->next;
            hn_p2p_bank_free(w, rank, b);
            if (t->m[k].banks == NULL) /* no graph left that copies into outgrown buffers */
                retired_free(w, t, k);
        }
    }
}

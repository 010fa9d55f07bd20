/* Peer-copy communicator: collectives and send/recv as rings of direct
 * copies between device buffers (copy engines on GPUs: no SMs move data),
 * ordered across devices by 32-bit flags written into the peer's memory and
 * waited on locally with stream memory operations (no host round trip on
 * the critical path). Written against the device and compute tables only,
 * so the CPU emulation runs exactly these ring algorithms.
 *
 * Flags only grow (wrap-safe comparisons), so they are never reset:
 *  - slot operations (allgather, broadcast) take the team's next generation
 *    g and the flag slot g % SLOTS; their flags carry g;
 *  - staged operations (reduce_scatter, allreduce) number their ring steps
 *    globally per team (t); a step's data lands in one of two staging
 *    buffers of the next rank, t % 2, and is acknowledged when consumed;
 *  - send/recv use per-(sender, receiver) sequence numbers and slots.
 * Buffer addresses that change per operation (the receivers' with put, the
 * senders' with get) are handed over through host mailboxes when the
 * operation is issued. Put (senders push) is the default; get (receivers
 * pull) is chosen per instruction (`via p2p get`) for allgather, broadcast
 * and send/recv.
 *
 * Two ways to order devices (`HIRNODE_P2P_SYNC`), behind one pair of
 * calls, signal and wait on (member, index, value):
 *  - flags (default): the 32-bit flag is device memory of the waiter,
 *    written by cuStreamWriteValue32 and waited on by cuStreamWaitValue32;
 *  - events: the writer records an event of its own for that (member,
 *    index) and publishes value and event in host memory; the waiter's
 *    thread spins until the value is there, then makes its stream wait on
 *    the event (cross-device cudaStreamWaitEvent). A host-side generation
 *    handshake keeps an index from being signalled again before its waiter
 *    has issued the wait for the last value: the wait would otherwise take
 *    a later record, which may depend on the waiter (a deadlock). No
 *    device-side wait can hang this way; the host waits instead.
 * docs/BENCHMARKS.md has the two measured against each other. */
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "team_list.h"

#define SLOTS 64
#define PIECES_DEFAULT 4 /* a reduction step's chunk is copied and reduced in pieces */
#define PIECES_MAX 64
#define PIECE_MIN_DEFAULT ((size_t)4 << 20) /* no piece smaller, unless the whole step is */
#define LANES_MAX 4                  /* side streams of a member: its copy lanes */

typedef struct mailbox {
    uint64_t gen; /* atomic; 0: empty */
    void *ptr;
} mailbox;

/* events: one index of a member (the waiter), in host memory */
typedef struct evslot {
    uint32_t sig;  /* atomic: the last value signalled */
    uint32_t seen; /* atomic: the highest value the waiter has issued a wait for */
    hn_devent *ev; /* atomic: the event recorded with sig (the writer's) */
} evslot;

/* A captured graph's own flags on one member (hn_graph_ctx). Captured
 * work runs the eager protocol unchanged, as on a team just made (every
 * sequence from 0, no operation before it: the devices are idle when a
 * capture begins), on flags of the graph's own, zeroed (`pristine`: the
 * zeros they go back to); every replay ends with a barrier of the ranks, a
 * reset of the flags, and a second barrier (p2p_graph_finish), so each
 * replay starts from the state the capture saw, and the values fixed at
 * capture are right at every replay. The capture leaves the eager
 * sequences as it found them (graph_end).
 * Events fork and join the lanes inside the capture (a stream enters a
 * capture only through an event). */
typedef struct gbank {
    uint64_t id;
    uint32_t *flags;    /* [nflags], on this member's device */
    uint32_t *pristine; /* [nflags] zeros: what the flags go back to after each replay */
    hn_devent *fork, *join[LANES_MAX];
    int lanes_used;      /* the capture has forked the lanes */
    uint64_t at[4];      /* slot_ops, staged, joins, gstaged when the capture began */
    int stage_pieces[2], last_get;
    struct gbank *next;
} gbank;

typedef struct member {
    int rank;
    gbank *banks; /* of the graphs captured with this team */
    uint32_t *flags; /* flags: on this member's device */
    evslot *slots;   /* events: [nflags], this member's indices */
    hn_devent **ev;  /* events: [n * nflags], the events this member records, per (waiter, index) */
    void *stage[2];  /* staging of reductions, on this member's device */
    size_t stage_bytes;
    mailbox mbox[SLOTS];
    uint64_t slot_ops; /* issue side: generations taken */
    uint64_t staged;   /* issue side: staged operations taken */
    uint64_t joins;    /* issue side: hand-offs to the side streams taken */
    int stage_pieces[2]; /* issue side: pieces of the last step sent into the next's staging buffer */
    uint64_t gstaged;    /* issue side: reductions with get taken */
    int last_get;        /* issue side: the last reduction on the team was a get */
    hn_dstream *side[LANES_MAX]; /* copy lanes beside the caller's stream */
} member;

struct hn_comm_team {
    hn_comm_world *w;
    int n;
    member *m;
    size_t nflags, piece_min;
    int pieces, ag_pieces, lanes, events;
};

struct hn_comm_world {
    int n;
    const hn_device_ops *dev;
    void *dev_ctx;
    const hn_compute_ops *compute;
    const hn_fault_sink *sink;
    int pieces, ag_pieces, lanes, events;
    size_t piece_min;
    hn_team_list teams; /* the team of all ranks carries the pair flags */
    uint64_t *send_seq, *recv_seq; /* [src * n + dst], issue side */
    mailbox *pair_mbox;            /* [(src * n + dst) * SLOTS + slot] */
    int *waiting_for;              /* [rank]: the rank its thread spins for, or -1 (atomic) */
    struct gpairs *gpairs;         /* per graph and rank: the pair sequences when its capture began */
    pthread_mutex_t gmu;           /* guards the list gpairs */
};

typedef struct gpairs {
    uint64_t id;
    int rank;
    uint64_t *send_at, *recv_at; /* [n]: to / from each peer */
    uint32_t *bar;               /* [n] on the rank's device: each peer's barrier arrivals */
    struct gpairs *next;
} gpairs;

static void pairs_free(hn_comm_world *w, gpairs *gp);

/* index layout of a member of a team of n (P pieces, L lanes): staging
 * arrival and consumption per (buffer, piece), pieces reduced, then the
 * hand-offs between the caller's stream and the lanes, then the slots, then
 * the pairs */
static size_t arr_flag(const hn_comm_team *t, int buf, int j) { return (size_t)(buf * t->pieces + j); }
static size_t cons_flag(const hn_comm_team *t, int buf, int j) { return (size_t)((2 + buf) * t->pieces + j); }
/* piece j reduced: its lane may copy it */
static size_t red_flag(const hn_comm_team *t, int j) { return (size_t)(4 * t->pieces + j); }
/* the lanes may start (inputs are written); lane k is done */
static size_t start_flag(const hn_comm_team *t) { return (size_t)(5 * t->pieces); }
static size_t end_flag(const hn_comm_team *t, int k) { return (size_t)(5 * t->pieces + 1 + k); }
/* reductions with get: a partial ready to pull, a partial pulled (per
 * staging buffer); a member's staging free again after get (for put) */
static size_t gready_flag(const hn_comm_team *t, int b) { return (size_t)(5 * t->pieces + 1 + LANES_MAX + b); }
static size_t gpulled_flag(const hn_comm_team *t, int b) { return (size_t)(5 * t->pieces + 3 + LANES_MAX + b); }
static size_t gfree_flag(const hn_comm_team *t) { return (size_t)(5 * t->pieces + 5 + LANES_MAX); }
/* per slot: n + 2 indices of whole operations, then n steps x P pieces */
static size_t slot_size(const hn_comm_team *t) { return (size_t)(t->n + 2) + (size_t)t->n * (size_t)t->pieces; }
static size_t slot_flag(const hn_comm_team *t, uint64_t slot, int i)
{
    return (size_t)(5 * t->pieces + 6 + LANES_MAX) + (size_t)slot * slot_size(t) + (size_t)i;
}
static size_t piece_flag(const hn_comm_team *t, uint64_t slot, int step, int j)
{
    return slot_flag(t, slot, t->n + 2) + (size_t)step * (size_t)t->pieces + (size_t)j;
}
static size_t pair_flag(const hn_comm_team *t, int peer, uint64_t slot, int kind)
{
    return slot_flag(t, SLOTS, 0) + ((size_t)peer * SLOTS + (size_t)slot) * 2 + (size_t)kind;
}
enum { PAIR_READY = 0, PAIR_ARRIVED = 1 };

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
        pairs_free(w, gp);
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

static void bank_free(hn_comm_world *w, int rank, gbank *b)
{
    if (b->flags != NULL)
        w->dev->mem_free(w->dev_ctx, rank, b->flags);
    if (b->pristine != NULL)
        w->dev->mem_free(w->dev_ctx, rank, b->pristine);
    w->dev->event_destroy(b->fork);
    for (int k = 0; k < LANES_MAX; k++)
        w->dev->event_destroy(b->join[k]);
    hn_free(b);
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
            bank_free(w, t->m[i].rank, b);
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

/* ---- host mailboxes: addresses handed over when operations are issued ---- */

/* The generation of a mailbox post: while capturing, in a space of the
 * graph's own (a capture restores the sequences it took, so eager runs
 * post those numbers again, and a later capture too) */
static uint64_t mbox_gen(const hn_origin *o, uint64_t gen)
{
    if (o == NULL || o->graph == NULL)
        return gen;
    return (1ull << 63) | (o->graph->id << 40) | (gen & ((1ull << 40) - 1));
}

static void mbox_post(const hn_origin *o, mailbox *mb, uint64_t gen, void *ptr)
{
    gen = mbox_gen(o, gen);
    mb->ptr = ptr;
    __atomic_store_n(&mb->gen, gen, __ATOMIC_RELEASE);
}

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
        if (o->rank >= 0 && o->rank < w->n)
            __atomic_store_n(&w->waiting_for[o->rank], peer, __ATOMIC_RELAXED);
    }
    if (hn_origin_aborted(o))
        return HN_ERR_ABORTED;
    if (hn_now() - *start > (w->sink != NULL ? w->sink->timeout_s : 60.0)) {
        int root = peer;
        for (int hops = 0; hops < w->n; hops++) {
            int r = root >= 0 && root < w->n ? __atomic_load_n(&w->waiting_for[root], __ATOMIC_RELAXED) : -1;
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
    if (start != 0 && o->rank >= 0 && o->rank < w->n)
        __atomic_store_n(&w->waiting_for[o->rank], -1, __ATOMIC_RELAXED);
}

static hn_status_t mbox_take(const hn_comm_world *w, mailbox *mb, uint64_t gen, void **ptr, const hn_origin *o,
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
    *ptr = mb->ptr;
    return HN_OK;
}

static int reached(uint32_t have, uint32_t want) { return (int32_t)(have - want) >= 0; }

/* ---- the algorithms; each issues onto stream s and returns at once ---- */

typedef struct ctx {
    hn_comm_world *w;
    hn_comm_team *t;
    int me; /* the issuing member */
    hn_dstream *s;
    const hn_origin *o;
    hn_status_t st;
} ctx;

/* Which of the issuing member's lanes s is; -1 for the caller's stream. */
static int lane_of(const ctx *c, const hn_dstream *s)
{
    for (int k = 0; k < c->t->lanes; k++)
        if (c->t->m[c->me].side[k] == s)
            return k;
    return -1;
}

static void copy_on(ctx *c, hn_dstream *s, void *dst, const void *src, size_t bytes)
{
    /* a traced run gives each copy on a lane a span on the lane's track */
    int lane = c->o != NULL && c->o->trace != NULL && s != c->s ? lane_of(c, s) : -1;
    if (c->st != HN_OK || bytes == 0 || dst == src)
        return;
    if (lane >= 0)
        hn_origin_lane_mark(c->o, s, lane, bytes, 0);
    c->st = c->w->dev->memcpy_async(dst, src, bytes, s, c->o);
    if (lane >= 0 && c->st == HN_OK)
        hn_origin_lane_mark(c->o, s, lane, bytes, 1);
}

/* events: record this member's event of (m, i) on s and publish it as
 * value v, once m has issued its wait for the index's last value */
static hn_status_t event_signal(ctx *c, hn_dstream *s, int m, size_t i, uint32_t v)
{
    hn_comm_team *t = c->t;
    evslot *sl = &t->m[m].slots[i];
    hn_devent **e = &t->m[c->me].ev[(size_t)m * t->nflags + i];
    double start = 0;
    hn_status_t st;
    if (*e == NULL && (st = c->w->dev->event_create(c->w->dev_ctx, t->m[c->me].rank, e)) != HN_OK) {
        hn_origin_fail(c->o, st, "p2p: cannot create an event");
        return st;
    }
    while (__atomic_load_n(&sl->ev, __ATOMIC_ACQUIRE) != NULL &&
           !reached(__atomic_load_n(&sl->seen, __ATOMIC_ACQUIRE), __atomic_load_n(&sl->sig, __ATOMIC_ACQUIRE)))
        if ((st = spin_once(c->w, &start, c->o, "signal", t->m[m].rank)) != HN_OK)
            return st;
    spin_end(c->w, c->o, start);
    if ((st = c->w->dev->event_record(*e, s)) != HN_OK)
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
    evslot *sl = &t->m[c->me].slots[i];
    double start = 0;
    hn_devent *e;
    hn_status_t st;
    while (!reached(__atomic_load_n(&sl->sig, __ATOMIC_ACQUIRE), v))
        if ((st = spin_once(c->w, &start, c->o, "wait", t->m[from].rank)) != HN_OK)
            return st;
    spin_end(c->w, c->o, start);
    e = __atomic_load_n(&sl->ev, __ATOMIC_ACQUIRE);
    if (e != NULL && (st = c->w->dev->stream_wait_event(s, e, c->o)) != HN_OK)
        return st;
    if (!reached(__atomic_load_n(&sl->seen, __ATOMIC_RELAXED), v))
        __atomic_store_n(&sl->seen, v, __ATOMIC_RELEASE);
    return HN_OK;
}

static gbank *bank_of(const member *m, uint64_t id)
{
    gbank *b = m->banks;
    while (b != NULL && b->id != id)
        b = b->next;
    return b;
}

/* captured: member m's flags of the graph (made by graph_begin) */
static uint32_t *graph_flags(ctx *c, int m)
{
    gbank *b = bank_of(&c->t->m[m], c->o->graph->id);
    if (b == NULL && c->st == HN_OK) {
        hn_origin_fail(c->o, HN_ERR_RUNTIME, "p2p: the team was not prepared for this capture");
        c->st = HN_ERR_RUNTIME;
    }
    return b != NULL ? b->flags : NULL;
}

static int captured(const ctx *c) { return c->o != NULL && c->o->graph != NULL; }

/* Stream s tells member m that index i has reached v (after all prior work of s). */
static void signal_on(ctx *c, hn_dstream *s, int m, size_t i, uint32_t v)
{
    if (c->st != HN_OK)
        return;
    if (captured(c)) {
        uint32_t *f = graph_flags(c, m);
        if (f != NULL)
            c->st = c->w->dev->stream_write_flag_rel(s, f + i, v, c->o->graph->ep + 2, c->o);
    } else if (c->t->events)
        c->st = event_signal(c, s, m, i, v);
    else
        c->st = c->w->dev->stream_write_flag(s, c->t->m[m].flags + i, v, c->o);
}

/* Later work of s waits until this member's index i has reached v (member
 * `from` signals it). */
static void wait_on(ctx *c, hn_dstream *s, int from, size_t i, uint32_t v)
{
    if (c->st != HN_OK)
        return;
    if (captured(c)) {
        uint32_t *f = graph_flags(c, c->me);
        if (f != NULL)
            c->st = c->w->dev->stream_wait_flag_rel(s, f + i, v, c->o->graph->ep + 2, c->o);
    } else if (c->t->events)
        c->st = event_wait(c, s, from, i, v);
    else
        c->st = c->w->dev->stream_wait_flag(s, c->t->m[c->me].flags + i, v, c->o);
}

/* on the caller's stream */
static void copy(ctx *c, void *dst, const void *src, size_t bytes) { copy_on(c, c->s, dst, src, bytes); }
static void signal_flag(ctx *c, int m, size_t i, uint32_t v) { signal_on(c, c->s, m, i, v); }
static void wait_flag(ctx *c, int from, size_t i, uint32_t v) { wait_on(c, c->s, from, i, v); }

/* The member's lanes start after the caller's stream's work so far; every
 * lane takes part in every hand-off, so hand-off h - 1 is done on all of
 * them once end h - 1 is. Returns h. */
static uint32_t lanes_start(ctx *c)
{
    member *M = &c->t->m[c->me];
    uint32_t h = (uint32_t)++M->joins;
    if (captured(c)) { /* the lanes enter the capture by an event */
        gbank *b = bank_of(M, c->o->graph->id);
        if (c->st == HN_OK && b == NULL)
            c->st = HN_ERR_RUNTIME;
        if (c->st == HN_OK) {
            b->lanes_used = 1;
            c->st = c->w->dev->event_record(b->fork, c->s);
        }
        for (int k = 0; k < c->t->lanes && c->st == HN_OK; k++)
            c->st = c->w->dev->stream_wait_event(M->side[k], b->fork, c->o);
        return h;
    }
    signal_on(c, c->s, c->me, start_flag(c->t), h);
    for (int k = 0; k < c->t->lanes; k++)
        wait_on(c, M->side[k], c->me, start_flag(c->t), h);
    return h;
}

/* The caller's stream goes on once every lane's work of hand-off h is done. */
static void lanes_end(ctx *c, uint32_t h)
{
    member *M = &c->t->m[c->me];
    if (captured(c)) { /* ... and leave it by one */
        gbank *b = bank_of(M, c->o->graph->id);
        for (int k = 0; k < c->t->lanes && c->st == HN_OK && b != NULL; k++)
            if ((c->st = c->w->dev->event_record(b->join[k], M->side[k])) == HN_OK)
                c->st = c->w->dev->stream_wait_event(c->s, b->join[k], c->o);
        return;
    }
    for (int k = 0; k < c->t->lanes; k++) {
        signal_on(c, M->side[k], c->me, end_flag(c->t, k), h);
        wait_on(c, c->s, c->me, end_flag(c->t, k), h);
    }
}

/* Stream S goes on once the lanes' work so far is done (S need not be the
 * stream their last hand-off joined). Captured: the join events of the
 * capture's last hand-off (before it, the lanes were idle). */
static void lanes_after(ctx *c, hn_dstream *S)
{
    member *M = &c->t->m[c->me];
    if (captured(c)) {
        gbank *b = bank_of(M, c->o->graph->id);
        for (int k = 0; k < c->t->lanes && c->st == HN_OK && b != NULL && b->lanes_used; k++)
            c->st = c->w->dev->stream_wait_event(S, b->join[k], c->o);
        return;
    }
    for (int k = 0; k < c->t->lanes; k++)
        wait_on(c, S, c->me, end_flag(c->t, k), (uint32_t)M->joins);
}

/* How many pieces a ring step of `bytes` goes in: at most `most`, none
 * smaller than the team's piece_min (the same on every member). */
static int pieces_of(const hn_comm_team *t, size_t bytes, int most)
{
    size_t p = bytes / t->piece_min;
    return p < 1 ? 1 : p < (size_t)most ? (int)p : most;
}

/* Piece j of P of `total` units; inner boundaries rounded down to `align`. */
static void piece(size_t total, int j, int P, size_t align, size_t *lo, size_t *hi)
{
    *lo = j == 0 ? 0 : total * (size_t)j / (size_t)P / align * align;
    *hi = j + 1 == P ? total : total * (size_t)(j + 1) / (size_t)P / align * align;
}

static hn_tensor vec(void *data, hn_dtype dt, size_t count)
{
    hn_tensor t;
    memset(&t, 0, sizeof(t));
    t.data = data;
    t.dtype = dt;
    t.ndim = 1;
    t.shape[0] = (int64_t)count;
    t.stride[0] = 1;
    return t;
}

/* dst = a op b, elementwise (fp32 arithmetic for bf16/f16) */
static void reduce(ctx *c, int redop, hn_dtype dt, size_t count, void *dst, const void *a, const void *b)
{
    hn_tensor d = vec(dst, dt, count), x = vec((void *)a, dt, count), y = vec((void *)b, dt, count);
    int op = redop == HN_REDUCE_PROD ? 1 : redop == HN_REDUCE_MAX ? 2 : redop == HN_REDUCE_MIN ? 3 : 0;
    if (c->st == HN_OK && count > 0)
        c->st = c->w->compute->binary(c->s, op, &d, &x, &y, c->o);
}

/* The start of a slot operation of an allgather: its generation and slot,
 * the own chunk in place, this buffer's address posted and `peer`'s taken.
 * 0 when there is nothing more to do (one rank, or an error in c->st). */
static int allgather_begin(ctx *c, int me, int peer, const void *send, void *recv, size_t cb, uint64_t *g,
                           char **peer_buf)
{
    hn_comm_team *t = c->t;
    uint64_t slot;
    *g = ++t->m[me].slot_ops;
    slot = *g % SLOTS;
    copy(c, (char *)recv + (size_t)me * cb, send, cb);
    if (t->n == 1 || c->st != HN_OK)
        return 0;
    mbox_post(c->o, &t->m[me].mbox[slot], *g, recv);
    c->st = mbox_take(c->w, &t->m[peer].mbox[slot], *g, (void **)peer_buf, c->o, "allgather", t->m[peer].rank);
    return c->st == HN_OK;
}

/* Ring allgather, put: at step k rank r pushes chunk (r - k) to rank r + 1.
 * With HIRNODE_P2P_AG_PIECES > 1, a chunk of at least 2 x piece_min goes in
 * pieces over the member's lanes, each piece forwarded as soon as it has
 * arrived; otherwise (the default: measured faster, docs/BENCHMARKS.md) in
 * whole steps on the caller's stream. */
static void allgather_ring(ctx *c, int me, const void *send, void *recv, size_t cb)
{
    hn_comm_team *t = c->t;
    int n = t->n, next = (me + 1) % n, prev = (me + n - 1) % n;
    int P = pieces_of(t, cb, t->ag_pieces);
    uint64_t g, slot;
    uint32_t v, h;
    char *R = recv, *Rn = NULL;
    if (!allgather_begin(c, me, next, send, recv, cb, &g, &Rn))
        return;
    slot = g % SLOTS;
    v = (uint32_t)g;
    signal_flag(c, prev, slot_flag(t, slot, 0), v); /* prev may write into my buffer */
    if (P <= 1) {
        wait_flag(c, next, slot_flag(t, slot, 0), v); /* next's buffer is free */
        for (int step = 0; step < n - 1; step++) {
            size_t chunk = (size_t)((me - step + n) % n);
            if (step > 0) /* that chunk came from prev at its step - 1 */
                wait_flag(c, prev, slot_flag(t, slot, step), v);
            copy(c, Rn + chunk * cb, R + chunk * cb, cb);
            signal_flag(c, next, slot_flag(t, slot, step + 1), v);
        }
        wait_flag(c, prev, slot_flag(t, slot, n - 1), v); /* the last chunk is here */
        return;
    }
    h = lanes_start(c);
    for (int k = 0; k < t->lanes; k++)
        wait_on(c, t->m[me].side[k], next, slot_flag(t, slot, 0), v);
    for (int step = 0; step < n - 1; step++) {
        size_t at = (size_t)((me - step + n) % n) * cb;
        for (int j = 0; j < P; j++) {
            hn_dstream *L = t->m[me].side[j % t->lanes];
            size_t lo, hi;
            piece(cb, j, P, 256, &lo, &hi);
            if (step > 0) /* that piece came from prev at its step - 1 */
                wait_on(c, L, prev, piece_flag(t, slot, step, j), v);
            copy_on(c, L, Rn + at + lo, R + at + lo, hi - lo);
            signal_on(c, L, next, piece_flag(t, slot, step + 1, j), v);
        }
    }
    for (int j = 0; j < P; j++) /* the last chunk is here */
        wait_flag(c, prev, piece_flag(t, slot, n - 1, j), v);
    lanes_end(c, h); /* and my copies out of my buffer are done */
}

/* Ring allgather, get: at step k rank r pulls chunk (r - 1 - k) from rank
 * r - 1, once r - 1 has it; an operation ends when r + 1 has pulled
 * everything it needs from r's buffer. */
static void allgather_ring_get(ctx *c, int me, const void *send, void *recv, size_t cb)
{
    hn_comm_team *t = c->t;
    int n = t->n, next = (me + 1) % n, prev = (me + n - 1) % n;
    uint64_t g, slot;
    uint32_t v;
    char *R = recv, *Rp = NULL;
    if (!allgather_begin(c, me, prev, send, recv, cb, &g, &Rp))
        return;
    slot = g % SLOTS;
    v = (uint32_t)g;
    signal_flag(c, next, slot_flag(t, slot, 0), v); /* next may pull my own chunk */
    for (int step = 0; step < n - 1; step++) {
        size_t chunk = (size_t)((me - 1 - step + 2 * n) % n);
        wait_flag(c, prev, slot_flag(t, slot, step), v); /* prev has it */
        copy(c, R + chunk * cb, Rp + chunk * cb, cb);
        if (step + 1 < n - 1)
            signal_flag(c, next, slot_flag(t, slot, step + 1), v);
    }
    signal_flag(c, prev, slot_flag(t, slot, n + 1), v); /* done pulling from prev */
    wait_flag(c, next, slot_flag(t, slot, n + 1), v);     /* next is done with mine */
}

/* Ring reduce-scatter through the next rank's two staging buffers: at step
 * k rank r sends its partial of chunk (r - k - 1); the partial arriving at
 * the last step is its own chunk, fully reduced. A step of at least
 * 2 x piece_min goes in pieces: the caller's stream reduces piece j (SMs)
 * while lane j % lanes copies an earlier piece to the next rank (copy
 * engines), so one lane's hand-off hides behind another's copy; a smaller
 * step goes whole, on the caller's stream alone. A member's reductions on a
 * team run one after another (they share its lanes and staging), so their
 * flags need no slots: arrival and consumption of a piece carry the team's
 * global ring step tt, and a buffer's last use is always step tt - 2. */
static void reduce_scatter_ring(ctx *c, int me, const void *send, void *recv, size_t count, hn_dtype dt, int redop)
{
    hn_comm_team *t = c->t;
    int n = t->n, next = (me + 1) % n, prev = (me + n - 1) % n, P, whole;
    size_t es = (size_t)hn_dtype_size(dt), cb = count * es;
    const char *I = send;
    uint64_t staged = ++t->m[me].staged;
    uint32_t base = (uint32_t)((staged - 1) * (uint64_t)(n - 1)), last, h = 0;
    member *M = t->m;
    hn_dstream *S = c->s;
    if (n == 1) {
        copy(c, recv, send, cb);
        return;
    }
    if (M[me].stage_bytes < cb || M[next].stage_bytes < cb) {
        c->st = HN_ERR_RUNTIME;
        hn_origin_fail(c->o, c->st, "p2p reduction of %zu bytes: staging of %zu reserved (not prepared?)", cb,
                       M[me].stage_bytes);
        return;
    }
    P = pieces_of(t, cb, t->pieces);
    whole = P == 1;
    /* after the lanes' earlier copies out of the staging */
    lanes_after(c, S);
    if (M[me].last_get) {
        /* after reductions with get, the staging of each member is free
         * once its own get ended (its partials all pulled): say so to prev,
         * and write into next's only once next says so */
        signal_on(c, S, prev, gfree_flag(t), (uint32_t)staged);
        wait_on(c, S, next, gfree_flag(t), (uint32_t)staged);
        M[me].last_get = 0;
    }
    /* a staging buffer last filled in other pieces: all of them consumed */
    for (int step = 0; step < n - 1 && step < 2; step++) {
        uint32_t tt = base + (uint32_t)step;
        int out = (int)(tt % 2);
        if (M[me].stage_pieces[out] != P)
            for (int j = 0; j < M[me].stage_pieces[out]; j++)
                wait_on(c, S, next, cons_flag(t, out, j), tt - 1);
    }
    if (!whole)
        h = lanes_start(c); /* the lanes start once the inputs are written */
    for (int step = 0; step < n - 1; step++) {
        uint32_t tt = base + (uint32_t)step;
        size_t chunk = (size_t)((me - step - 1 + 2 * n) % n);
        int out = (int)(tt % 2), in = (int)((tt - 1) % 2), same = M[me].stage_pieces[out] == P;
        for (int j = 0; j < P; j++) {
            hn_dstream *L = whole ? S : M[me].side[j % t->lanes];
            size_t lo, hi, off;
            const char *src;
            piece(count, j, P, 64, &lo, &hi);
            off = lo * es;
            src = I + chunk * cb + off;
            if (step > 0) {
                /* prev's partial of this piece (its global step tt - 1) plus mine */
                wait_on(c, S, prev, arr_flag(t, in, j), tt);
                reduce(c, redop, dt, hi - lo, (char *)M[me].stage[in] + off, (char *)M[me].stage[in] + off, src);
                if (!whole) {
                    signal_on(c, S, me, red_flag(t, j), tt);
                    wait_on(c, L, me, red_flag(t, j), tt);
                }
                src = (const char *)M[me].stage[in] + off;
            }
            if (same) /* next consumed this piece of step tt - 2 */
                wait_on(c, L, next, cons_flag(t, out, j), tt - 1);
            copy_on(c, L, (char *)M[next].stage[out] + off, src, (hi - lo) * es);
            signal_on(c, L, next, arr_flag(t, out, j), tt + 1);
            if (step > 0) /* this piece of step tt - 1 is consumed */
                signal_on(c, L, prev, cons_flag(t, in, j), tt);
        }
        M[me].stage_pieces[out] = P;
    }
    last = base + (uint32_t)(n - 2);
    for (int j = 0; j < P; j++) {
        size_t lo, hi, off;
        piece(count, j, P, 64, &lo, &hi);
        off = lo * es;
        wait_on(c, S, prev, arr_flag(t, (int)(last % 2), j), last + 1);
        reduce(c, redop, dt, hi - lo, (char *)recv + off, (char *)M[me].stage[last % 2] + off,
               I + (size_t)me * cb + off);
        signal_on(c, S, prev, cons_flag(t, (int)(last % 2), j), last + 1);
    }
    if (!whole)
        lanes_end(c, h); /* the caller's stream goes on once the lanes' copies are done */
    if (redop == HN_REDUCE_AVG && c->st == HN_OK) {
        hn_tensor o = vec(recv, dt, count);
        c->st = c->w->compute->scale(c->s, &o, &o, 1.0 / n, c->o);
    }
}

/* Ring reduce-scatter, get: the receiver pulls. At global step tt (k of
 * the operation) rank r holds its partial of chunk (r - k - 1): its input's
 * chunk at k = 0, else in stage[(tt - 1) % 2], where it pulled prev's
 * partial of step tt - 1 and added its own chunk; the last pull, added to
 * its chunk r, is its result. Whole steps on the caller's stream (copies
 * and reductions in turn). Flags: a partial of step s ready (value s + 1,
 * index s % 2, to next), pulled (value s + 1, index (s - 1) % 2, to
 * prev); an operation ends when next has pulled all of this rank's
 * partials, so the staging and the input are free afterwards. Steps are
 * numbered apart from the put reductions'; before a put follows, every
 * member says its staging is free (gfree). */
static void reduce_scatter_get(ctx *c, int me, const void *send, void *recv, size_t count, hn_dtype dt, int redop)
{
    hn_comm_team *t = c->t;
    int n = t->n, next = (me + 1) % n, prev = (me + n - 1) % n;
    size_t es = (size_t)hn_dtype_size(dt), cb = count * es;
    const char *I = send, *Ip = NULL;
    member *M = t->m;
    hn_dstream *S = c->s;
    uint64_t h = ++M[me].gstaged, g, slot;
    uint32_t base = (uint32_t)((h - 1) * (uint64_t)(n - 1)), last = base + (uint32_t)(n - 2);
    if (n == 1) {
        copy(c, recv, send, cb);
        return;
    }
    if (M[me].stage_bytes < cb) {
        c->st = HN_ERR_RUNTIME;
        hn_origin_fail(c->o, c->st, "p2p reduction of %zu bytes: staging of %zu reserved (not prepared?)", cb,
                       M[me].stage_bytes);
        return;
    }
    /* the inputs' addresses, for the first pull */
    g = ++M[me].slot_ops;
    slot = g % SLOTS;
    mbox_post(c->o, &M[me].mbox[slot], g, (void *)send);
    if ((c->st = mbox_take(c->w, &M[prev].mbox[slot], g, (void **)&Ip, c->o, "reduce_scatter",
                           M[prev].rank)) != HN_OK)
        return;
    M[me].last_get = 1;
    lanes_after(c, S); /* put lanes are done with the staging */
    signal_on(c, S, next, gready_flag(t, (int)(base % 2)), base + 1); /* my input's chunk is ready */
    for (uint32_t tt = base + 1; tt <= last + 1; tt++) {
        int k = (int)(tt - base);
        int in = (int)((tt - 1) % 2); /* where prev's partial of step tt - 1 lands */
        size_t chunk = (size_t)((me - k - 1 + 2 * n) % n);
        const char *src = k == 1 ? Ip + chunk * cb : (const char *)M[prev].stage[(tt - 2) % 2];
        char *land = M[me].stage[in];
        wait_on(c, S, prev, gready_flag(t, in), tt);          /* prev's partial is ready */
        wait_on(c, S, next, gpulled_flag(t, in), tt - 1);     /* my partial of step tt - 2 was pulled */
        copy(c, land, src, cb);
        signal_on(c, S, prev, gpulled_flag(t, (int)((tt - 2) % 2)), tt);
        if (tt <= last) {
            reduce(c, redop, dt, count, land, land, I + chunk * cb);
            signal_on(c, S, next, gready_flag(t, (int)(tt % 2)), tt + 1);
        } else {
            reduce(c, redop, dt, count, recv, land, I + (size_t)me * cb);
        }
    }
    wait_on(c, S, next, gpulled_flag(t, (int)((last + 3) % 2)), last + 1); /* all my partials pulled */
    if (redop == HN_REDUCE_AVG && c->st == HN_OK) {
        hn_tensor o = vec(recv, dt, count);
        c->st = c->w->compute->scale(c->s, &o, &o, 1.0 / n, c->o);
    }
}

/* Broadcast, put: the root copies to every other member directly. */
static void broadcast_direct(ctx *c, int me, int root, const void *send, void *recv, size_t cb)
{
    hn_comm_team *t = c->t;
    int n = t->n;
    uint64_t g = ++t->m[me].slot_ops, slot = g % SLOTS;
    uint32_t v = (uint32_t)g;
    if (me != root) {
        mbox_post(c->o, &t->m[me].mbox[slot], g, recv);
        signal_flag(c, root, slot_flag(t, slot, me), v); /* my buffer is free */
        wait_flag(c, root, slot_flag(t, slot, n), v);
        return;
    }
    copy(c, recv, send, cb);
    for (int p = 0; p < n && c->st == HN_OK; p++) {
        void *dst = NULL;
        if (p == root)
            continue;
        if ((c->st = mbox_take(c->w, &t->m[p].mbox[slot], g, &dst, c->o, "broadcast", t->m[p].rank)) != HN_OK)
            return;
        wait_flag(c, p, slot_flag(t, slot, p), v);
        copy(c, dst, send, cb);
        signal_flag(c, p, slot_flag(t, slot, n), v);
    }
}

/* Broadcast, get: every member pulls from the root's buffer; the root's
 * operation ends when all have. */
static void broadcast_get(ctx *c, int me, int root, const void *send, void *recv, size_t cb)
{
    hn_comm_team *t = c->t;
    int n = t->n;
    uint64_t g = ++t->m[me].slot_ops, slot = g % SLOTS;
    uint32_t v = (uint32_t)g;
    if (me == root) {
        copy(c, recv, send, cb);
        mbox_post(c->o, &t->m[me].mbox[slot], g, (void *)send);
        for (int p = 0; p < n; p++)
            if (p != root)
                signal_flag(c, p, slot_flag(t, slot, n), v); /* the data is ready */
        for (int p = 0; p < n; p++)
            if (p != root)
                wait_flag(c, p, slot_flag(t, slot, p), v); /* p has pulled it */
        return;
    }
    {
        void *src = NULL;
        if ((c->st = mbox_take(c->w, &t->m[root].mbox[slot], g, &src, c->o, "broadcast", t->m[root].rank)) != HN_OK)
            return;
        wait_flag(c, root, slot_flag(t, slot, n), v);
        copy(c, recv, src, cb);
        signal_flag(c, root, slot_flag(t, slot, me), v);
    }
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
            allgather_ring_get(&c, me, a->send, a->recv, a->count * es);
        else
            allgather_ring(&c, me, a->send, a->recv, a->count * es);
        break;
    case HN_COLL_REDUCE_SCATTER:
        if (a->get)
            reduce_scatter_get(&c, me, a->send, a->recv, a->count, a->dtype, a->redop);
        else
            reduce_scatter_ring(&c, me, a->send, a->recv, a->count, a->dtype, a->redop);
        break;
    case HN_COLL_ALLREDUCE: {
        size_t chunk = a->count / n;
        char *out = a->recv;
        if (a->get) {
            reduce_scatter_get(&c, me, a->send, out + (size_t)me * chunk * es, chunk, a->dtype, a->redop);
            allgather_ring_get(&c, me, out + (size_t)me * chunk * es, out, chunk * es);
        } else {
            reduce_scatter_ring(&c, me, a->send, out + (size_t)me * chunk * es, chunk, a->dtype, a->redop);
            allgather_ring(&c, me, out + (size_t)me * chunk * es, out, chunk * es);
        }
        break;
    }
    case HN_COLL_BROADCAST:
        if (a->get)
            broadcast_get(&c, me, a->root, a->send, a->recv, a->count * es);
        else
            broadcast_direct(&c, me, a->root, a->send, a->recv, a->count * es);
        break;
    default: /* refused above */
        break;
    }
    if (c.st != HN_OK && c.st != HN_ERR_ABORTED && c.st != HN_ERR_TIMEOUT && c.st != HN_ERR_RUNTIME)
        hn_origin_fail(o, c.st, "p2p %s: %s", hn_coll_name(a->kind), hn_status_string(c.st));
    return c.st;
}

/* A group of sends and receives. Put: receivers post their buffers and say
 * they are ready; senders copy into them and say the data has arrived.
 * Get: senders post their buffers and say the data is ready; receivers copy
 * from them and say they are done; senders wait for that. */
static hn_status_t p2p_p2p(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, hn_dstream *s, const hn_origin *o)
{
    hn_comm_team *t = w->teams.all;
    ctx c = {w, t, rank, s, o, HN_OK};
    int N = w->n;
    uint64_t *seq = hn_calloc((size_t)n + 1, sizeof(uint64_t));
    if (seq == NULL)
        return HN_ERR_NOMEM;
    if (t == NULL) {
        hn_free(seq);
        hn_origin_fail(o, HN_ERR_RUNTIME, "p2p: no team of all ranks for send/recv");
        return HN_ERR_RUNTIME;
    }
    for (int i = 0; i < n; i++) /* sequence numbers per (sender, receiver), from 1 */
        seq[i] = ops[i].is_send ? ++w->send_seq[rank * N + ops[i].peer] : ++w->recv_seq[ops[i].peer * N + rank];
    if (n > 0 && ops[0].get) {
        /* 1: every send posts its buffer and tells its receiver */
        for (int i = 0; i < n; i++) {
            uint64_t slot = seq[i] % SLOTS;
            if (!ops[i].is_send)
                continue;
            mbox_post(o, &w->pair_mbox[((size_t)rank * N + ops[i].peer) * SLOTS + slot], seq[i], ops[i].buf);
            signal_flag(&c, ops[i].peer, pair_flag(t, rank, slot, PAIR_ARRIVED), (uint32_t)seq[i]);
        }
        /* 2: every receive pulls its data and says so */
        for (int i = 0; i < n && c.st == HN_OK; i++) {
            uint64_t slot = seq[i] % SLOTS;
            void *src = NULL;
            if (ops[i].is_send)
                continue;
            c.st = mbox_take(w, &w->pair_mbox[((size_t)ops[i].peer * N + rank) * SLOTS + slot], seq[i], &src, o,
                             "recv", ops[i].peer);
            wait_flag(&c, ops[i].peer, pair_flag(t, ops[i].peer, slot, PAIR_ARRIVED), (uint32_t)seq[i]);
            copy(&c, ops[i].buf, src, ops[i].bytes);
            signal_flag(&c, ops[i].peer, pair_flag(t, rank, slot, PAIR_READY), (uint32_t)seq[i]);
        }
        /* 3: a send's buffer is free once its receiver has pulled */
        for (int i = 0; i < n; i++)
            if (ops[i].is_send)
                wait_flag(&c, ops[i].peer, pair_flag(t, ops[i].peer, seq[i] % SLOTS, PAIR_READY), (uint32_t)seq[i]);
        hn_free(seq);
        return c.st;
    }
    /* 1: every receive posts its buffer and tells its sender */
    for (int i = 0; i < n; i++) {
        uint64_t slot = seq[i] % SLOTS;
        if (ops[i].is_send)
            continue;
        mbox_post(o, &w->pair_mbox[((size_t)ops[i].peer * N + rank) * SLOTS + slot], seq[i], ops[i].buf);
        signal_flag(&c, ops[i].peer, pair_flag(t, rank, slot, PAIR_READY), (uint32_t)seq[i]);
    }
    /* 2: every send copies into its receiver's buffer */
    for (int i = 0; i < n && c.st == HN_OK; i++) {
        uint64_t slot = seq[i] % SLOTS;
        void *dst = NULL;
        if (!ops[i].is_send)
            continue;
        c.st = mbox_take(w, &w->pair_mbox[((size_t)rank * N + ops[i].peer) * SLOTS + slot], seq[i], &dst, o,
                         "send", ops[i].peer);
        wait_flag(&c, ops[i].peer, pair_flag(t, ops[i].peer, slot, PAIR_READY), (uint32_t)seq[i]);
        copy(&c, dst, ops[i].buf, ops[i].bytes);
        signal_flag(&c, ops[i].peer, pair_flag(t, rank, slot, PAIR_ARRIVED), (uint32_t)seq[i]);
    }
    /* 3: every receive waits for its data */
    for (int i = 0; i < n; i++)
        if (!ops[i].is_send)
            wait_flag(&c, ops[i].peer, pair_flag(t, ops[i].peer, seq[i] % SLOTS, PAIR_ARRIVED), (uint32_t)seq[i]);
    hn_free(seq);
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

/* ---- graphs (hn_graph_ctx; see gbank) ---- */

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

static void pairs_free(hn_comm_world *w, gpairs *gp)
{
    if (gp->bar != NULL)
        w->dev->mem_free(w->dev_ctx, gp->rank, gp->bar);
    hn_free(gp->send_at);
    hn_free(gp->recv_at);
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

static hn_status_t p2p_graph_begin(hn_comm_world *w, int rank, const hn_graph_ctx *g, const hn_origin *o)
{
    hn_status_t st = HN_OK;
    gpairs *gp;
    uint32_t *zeros = hn_calloc((size_t)w->n, sizeof(uint32_t));
    if (zeros == NULL || (gp = hn_calloc(1, sizeof(*gp))) == NULL) {
        hn_free(zeros);
        return HN_ERR_NOMEM;
    }
    gp->id = g->id;
    gp->rank = rank;
    pthread_mutex_lock(&w->gmu); /* the ranks' threads add theirs at once */
    gp->next = w->gpairs;
    w->gpairs = gp;
    pthread_mutex_unlock(&w->gmu);
    gp->send_at = hn_calloc((size_t)w->n, sizeof(uint64_t));
    gp->recv_at = hn_calloc((size_t)w->n, sizeof(uint64_t));
    if (gp->send_at == NULL || gp->recv_at == NULL)
        st = HN_ERR_NOMEM;
    for (int q = 0; q < w->n && st == HN_OK; q++) {
        gp->send_at[q] = w->send_seq[(size_t)rank * (size_t)w->n + (size_t)q];
        gp->recv_at[q] = w->recv_seq[(size_t)q * (size_t)w->n + (size_t)rank];
        w->send_seq[(size_t)rank * (size_t)w->n + (size_t)q] = 0; /* afresh, as the teams */
        w->recv_seq[(size_t)q * (size_t)w->n + (size_t)rank] = 0;
    }
    if (st == HN_OK && (st = w->dev->mem_alloc(w->dev_ctx, rank, (size_t)w->n * sizeof(uint32_t), (void **)&gp->bar)) == HN_OK)
        st = w->dev->copy_to_device(w->dev_ctx, rank, gp->bar, zeros, (size_t)w->n * sizeof(uint32_t));
    hn_free(zeros);
    for (int i = 0; i < w->teams.n && st == HN_OK; i++) {
        hn_comm_team *t = w->teams.teams[i];
        size_t bytes = t->nflags * sizeof(uint32_t);
        uint32_t *zero_flags;
        gbank *b;
        member *m = NULL;
        for (int k = 0; k < t->n; k++)
            if (t->m[k].rank == rank)
                m = &t->m[k];
        if (m == NULL)
            continue;
        if ((b = hn_calloc(1, sizeof(*b))) == NULL || (zero_flags = hn_calloc(t->nflags, sizeof(uint32_t))) == NULL) {
            hn_free(b);
            st = HN_ERR_NOMEM;
            break;
        }
        b->id = g->id;
        b->next = m->banks;
        m->banks = b;
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
        if (st == HN_OK && (st = w->dev->mem_alloc(w->dev_ctx, rank, bytes, (void **)&b->flags)) == HN_OK)
            st = w->dev->copy_to_device(w->dev_ctx, rank, b->flags, zero_flags, bytes);
        if (st == HN_OK && (st = w->dev->mem_alloc(w->dev_ctx, rank, bytes, (void **)&b->pristine)) == HN_OK)
            st = w->dev->copy_to_device(w->dev_ctx, rank, b->pristine, zero_flags, bytes);
        hn_free(zero_flags);
        if (st == HN_OK)
            st = w->dev->event_create(w->dev_ctx, rank, &b->fork);
        for (int k = 0; k < t->lanes && st == HN_OK; k++)
            st = w->dev->event_create(w->dev_ctx, rank, &b->join[k]);
    }
    if (st != HN_OK)
        hn_origin_fail(o, st, "p2p: cannot prepare the team's flags for a capture");
    return st;
}

/* A barrier of every rank in a team, on stream s: phase p of the replay
 * (values relative to the graph's epoch, which every replay raises). */
static hn_status_t graph_barrier(hn_comm_world *w, int rank, const hn_graph_ctx *g, hn_dstream *s, uint32_t p,
                                 const hn_origin *o)
{
    hn_status_t st = HN_OK;
    gpairs *me = pairs_of(w, rank, g->id);
    for (int q = 0; q < w->n && st == HN_OK; q++) {
        gpairs *peer = q == rank ? NULL : pairs_of(w, q, g->id);
        if (q == rank || !in_any_team(w, q))
            continue;
        if (peer == NULL || me == NULL)
            return HN_ERR_RUNTIME;
        st = w->dev->stream_write_flag_rel(s, peer->bar + rank, p, g->ep, o);
    }
    for (int q = 0; q < w->n && st == HN_OK; q++)
        if (q != rank && in_any_team(w, q))
            st = w->dev->stream_wait_flag_rel(s, me->bar + q, p, g->ep, o);
    return st;
}

/* The end of every replay, captured on the rank's stream after all its
 * work: barrier, this rank's flags back to the capture's start, barrier. */
static hn_status_t p2p_graph_finish(hn_comm_world *w, int rank, const hn_graph_ctx *g, hn_dstream *s,
                                    const hn_origin *o)
{
    hn_status_t st;
    if (!in_any_team(w, rank))
        return HN_OK;
    st = graph_barrier(w, rank, g, s, 1, o);
    for (int i = 0; i < w->teams.n && st == HN_OK; i++) {
        hn_comm_team *t = w->teams.teams[i];
        for (int k = 0; k < t->n && st == HN_OK; k++) {
            gbank *b = t->m[k].rank == rank ? bank_of(&t->m[k], g->id) : NULL;
            if (b != NULL)
                st = w->dev->memcpy_async(b->flags, b->pristine, t->nflags * sizeof(uint32_t), s, o);
        }
    }
    if (st == HN_OK)
        st = graph_barrier(w, rank, g, s, 2, o);
    if (st != HN_OK)
        hn_origin_fail(o, st, "p2p: cannot end the captured replay: %s", hn_status_string(st));
    return st;
}

/* After the capture: the eager sequences and state as they were before it */
static void p2p_graph_end(hn_comm_world *w, int rank, const hn_graph_ctx *g)
{
    gpairs *gp = pairs_of(w, rank, g->id);
    for (int q = 0; q < w->n && gp != NULL; q++) {
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

static void p2p_graph_free(hn_comm_world *w, int rank, const hn_graph_ctx *g)
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
        pairs_free(w, gp);
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
                bank_free(w, rank, b);
            }
        }
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
    .p2p = p2p_p2p,
    .abort = p2p_abort,
    .reset = p2p_reset,
    .graph_begin = p2p_graph_begin,
    .graph_finish = p2p_graph_finish,
    .graph_end = p2p_graph_end,
    .graph_free = p2p_graph_free,
};

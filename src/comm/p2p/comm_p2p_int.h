/* What the files of the peer-copy communicator share (comm_p2p.c has the
 * overview): its state per world, team and member, the layout of a
 * member's flag indices, the graph banks' lookup, the host mailboxes, and
 * the calls between the files — the ordering and copies every algorithm
 * issues (comm_p2p_sync.c), the algorithms (comm_p2p_ring.c,
 * comm_p2p_broadcast.c, comm_p2p_sendrecv.c) and the graph banks
 * (comm_p2p_banks.c). What a ring step calls is inline here or one direct
 * call away. */
#ifndef HN_COMM_P2P_INT_H
#define HN_COMM_P2P_INT_H

#include <pthread.h>

#include "../comm_base.h"

#define SLOTS 64
#define LANES_MAX 4 /* side streams of a member: its copy lanes */

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
 * capture begins), on flags of the graph's own, zeroed, whose values are
 * relative to the graph's epoch (comm_p2p_sync.c): every replay raises the
 * epoch, so its values are above every earlier replay's and the flags are
 * never reset; every replay ends with a barrier of the ranks
 * (hn_p2p_graph_finish), so no rank's next work meets a peer still in
 * this replay. The capture leaves the eager sequences as it found them
 * (hn_p2p_graph_end).
 * Events fork and join the lanes inside the capture (a stream enters a
 * capture only through an event). */
typedef struct gbank {
    uint64_t id;
    uint32_t *flags; /* [nflags], on this member's device */
    uint32_t **peer_flags; /* [n]: every member's bank flags of the graph, as exchanged at graph_begin */
    hn_devent *fork, *join[LANES_MAX];
    int lanes_used;      /* the capture has forked the lanes */
    uint64_t at[5];      /* slot_ops, staged, joins, gstaged, small_ops when the capture began */
    int stage_pieces[2], last_get;
    struct gbank *next;
} gbank;

/* A member's state comes in three parts, so that every member reads of
 * the others only what could be shared across processes:
 * - member_shared, in the world's shared regions (made for every member
 *   when the team is created): its mailboxes and its event slots, which
 *   the others write and read;
 * - member_view, one per member in every member's reach: the addresses of
 *   its device memory (flags, staging), set by the member itself and
 *   handed to the others by an exchange when it joins and when its
 *   staging grows (in one process the others check the exchanged values
 *   against the view: the same addresses);
 * - member, only the member's own rank touches (its streams, events,
 *   issue-side counters, graph banks). */
typedef struct member_shared {
    mailbox mbox[SLOTS];
    evslot slots[]; /* events: [nflags], this member's indices */
} member_shared;

typedef struct member_view {
    uint32_t *flags; /* flags: on the member's device */
    void *stage[2];  /* staging of reductions, on the member's device */
    size_t stage_bytes;
    /* small allreduces (hn_p2p_allreduce_small): two slots, each a region
     * of small_cap bytes per sender, on the member's device */
    void *small[2];
    size_t small_cap;
} member_view;

typedef struct member {
    int here;     /* it joined in this process (its rank is driven here) */
    gbank *banks; /* of the graphs captured with this team */
    hn_devent **ev;  /* events: [n * nflags], the events this member records, per (waiter, index) */
    uint64_t slot_ops; /* issue side: generations taken */
    uint64_t staged;   /* issue side: staged operations taken */
    uint64_t joins;    /* issue side: hand-offs to the side streams taken */
    int stage_pieces[2]; /* issue side: pieces of the last step sent into the next's staging buffer */
    uint64_t gstaged;    /* issue side: reductions with get taken */
    int last_get;        /* issue side: the last reduction on the team was a get */
    uint64_t small_ops;  /* issue side: small allreduces taken */
    /* staging and slots outgrown while graphs captured with them lived:
     * kept until the member's last graph bank goes (they may copy into
     * them on every replay), then freed */
    void **retired;
    int nretired, retired_cap;
    size_t small_asked; /* the small slots' cap the last reserve asked for (the same on every member) */
    hn_dstream *side[LANES_MAX]; /* copy lanes beside the caller's stream */
} member;

struct hn_comm_team {
    hn_comm_team_base base; /* the world, size, id, ranks (comm_base.h) */
    member_shared **sh;   /* [n], in the world's shared regions */
    member_view *view;    /* [n] */
    size_t nflags, piece_min;
    int pieces, ag_pieces, lanes, events;
    member m[];           /* [n] */
};

/* base.teams: the team of all ranks carries the pair flags */
struct hn_comm_world {
    hn_comm_base base;
    int pieces, ag_pieces, lanes, events;
    int graph_kernel_copy; /* copies inside captures by SM kernels (the compute table's copy) */
    size_t piece_min;
    size_t small_max; /* most bytes of a member's input in a small allreduce (0: none) */
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
    uint32_t **peer_bar;         /* [n]: every rank's bar, as exchanged at graph_begin (NULL: in no team) */
    struct gpairs *next;
} gpairs;

/* One operation being issued by member `me` onto stream s; the first error
 * stops the rest (every call below returns at once when st is set). */
typedef struct ctx {
    hn_comm_world *w;
    hn_comm_team *t;
    int me; /* the issuing member */
    hn_dstream *s;
    const hn_origin *o;
    hn_status_t st;
} ctx;

/* ---- flag layout ----
 * A member's flags (or event slots) are indices of one array. Their values
 * only grow (wrap-safe comparisons), so they are never reset (a graph's own
 * flags neither: relative to its epoch, comm_p2p_sync.c):
 *  - slot operations (allgather, broadcast) take the team's next generation
 *    g and the flag slot g % SLOTS; their flags carry g;
 *  - staged operations (reduce_scatter, allreduce) number their ring steps
 *    globally per team (t); a step's data lands in one of two staging
 *    buffers of the next rank, t % 2, and is acknowledged when consumed;
 *  - send/recv use per-(sender, receiver) sequence numbers and slots.
 * The indices of a member of a team of n (P pieces, L lanes): staging
 * arrival and consumption per (buffer, piece), pieces reduced, then the
 * hand-offs between the caller's stream and the lanes, then the slots,
 * then the pairs. */
static inline size_t arr_flag(const hn_comm_team *t, int buf, int j) { return (size_t)(buf * t->pieces + j); }
static inline size_t cons_flag(const hn_comm_team *t, int buf, int j) { return (size_t)((2 + buf) * t->pieces + j); }
/* piece j reduced: its lane may copy it */
static inline size_t red_flag(const hn_comm_team *t, int j) { return (size_t)(4 * t->pieces + j); }
/* the lanes may start (inputs are written); lane k is done */
static inline size_t start_flag(const hn_comm_team *t) { return (size_t)(5 * t->pieces); }
static inline size_t end_flag(const hn_comm_team *t, int k) { return (size_t)(5 * t->pieces + 1 + k); }
/* reductions with get: a partial ready to pull, a partial pulled (per
 * staging buffer); a member's staging free again after get (for put) */
static inline size_t gready_flag(const hn_comm_team *t, int b) { return (size_t)(5 * t->pieces + 1 + LANES_MAX + b); }
static inline size_t gpulled_flag(const hn_comm_team *t, int b) { return (size_t)(5 * t->pieces + 3 + LANES_MAX + b); }
static inline size_t gfree_flag(const hn_comm_team *t) { return (size_t)(5 * t->pieces + 5 + LANES_MAX); }
/* per slot: n + 2 indices of whole operations, then n steps x P pieces */
static inline size_t slot_size(const hn_comm_team *t)
{
    return (size_t)(t->base.n + 2) + (size_t)t->base.n * (size_t)t->pieces;
}
static inline size_t slot_flag(const hn_comm_team *t, uint64_t slot, int i)
{
    return (size_t)(5 * t->pieces + 6 + LANES_MAX) + (size_t)slot * slot_size(t) + (size_t)i;
}
static inline size_t piece_flag(const hn_comm_team *t, uint64_t slot, int step, int j)
{
    return slot_flag(t, slot, t->base.n + 2) + (size_t)step * (size_t)t->pieces + (size_t)j;
}
static inline size_t pair_flag(const hn_comm_team *t, int peer, uint64_t slot, int kind)
{
    return slot_flag(t, SLOTS, 0) + ((size_t)peer * SLOTS + (size_t)slot) * 2 + (size_t)kind;
}
enum { PAIR_READY = 0, PAIR_ARRIVED = 1 };
/* small allreduces, per slot s and sender p: p's input arrived in this
 * member's slot (kind 0, from p); this member's input consumed in p's
 * slot (kind 1, from p). Past them the layout's end: the flags' count. */
static inline size_t small_flag(const hn_comm_team *t, int kind, int s, int p)
{
    return pair_flag(t, t->base.n, 0, 0) + ((size_t)(2 * kind + s) * (size_t)t->base.n + (size_t)p);
}
static inline size_t flags_count(const hn_comm_team *t) { return small_flag(t, 2, 0, 0); }


/* Frees member k's retired buffers (no graph of the team is left that
 * copies into them). */
static inline void retired_free(hn_comm_world *w, hn_comm_team *t, int k)
{
    member *m = &t->m[k];
    for (int i = 0; i < m->nretired; i++)
        w->base.dev->mem_free(w->base.dev_ctx, t->base.ranks[k], m->retired[i]);
    m->nretired = 0;
}

/* A member's bank of the graph `id` (hn_p2p_graph_begin made it), or NULL. */
static inline gbank *bank_of(const member *m, uint64_t id)
{
    gbank *b = m->banks;
    while (b != NULL && b->id != id)
        b = b->next;
    return b;
}

/* ---- host mailboxes: addresses handed over when operations are issued ---- */

/* The generation of a mailbox post: while capturing, in a space of the
 * graph's own (a capture restores the sequences it took, so eager runs
 * post those numbers again, and a later capture too) */
static inline uint64_t mbox_gen(const hn_origin *o, uint64_t gen)
{
    if (o == NULL || o->graph == NULL)
        return gen;
    return (1ull << 63) | (o->graph->id << 40) | (gen & ((1ull << 40) - 1));
}

static inline void mbox_post(const hn_origin *o, mailbox *mb, uint64_t gen, void *ptr)
{
    gen = mbox_gen(o, gen);
    mb->ptr = ptr;
    __atomic_store_n(&mb->gen, gen, __ATOMIC_RELEASE);
}

/* Takes what `peer` (a global rank) posted as generation gen; spins
 * (polling the abort flag and the deadline) until it is there; a buffer
 * address as this process reaches it (hn_comm_setup.peer_addr). `what`
 * names the operation in a timeout. */
hn_status_t hn_p2p_mbox_take(const hn_comm_world *w, mailbox *mb, uint64_t gen, void **ptr, const hn_origin *o,
                             const char *what, int peer);
/* HN_OK, or the failure (said on o) of an operation issued on a stream an
 * embedder is capturing (torch.cuda.graph: o->graph is NULL) while the
 * devices are ordered by flags (across processes): the eager protocol
 * would be captured with this call's flag values, which every replay
 * after the first finds reached already. With events the waits become the
 * capture's own edges. A launch there comes with a graph's state of its
 * own (the runtime's graph.c, hn_graph_launch_foreign), so this is a
 * backstop. `what` names the operation. */
hn_status_t hn_p2p_refuse_foreign_capture(const hn_comm_world *w, hn_dstream *s, const hn_origin *o,
                                         const char *what);

/* ---- ordering and copies (comm_p2p_sync.c) ---- */

/* Copies on stream s (a span on the lane's track in a traced run). */
void hn_p2p_copy_on(ctx *c, hn_dstream *s, void *dst, const void *src, size_t bytes);
/* Stream s tells member m that index i has reached v (after all prior work of s). */
void hn_p2p_signal_on(ctx *c, hn_dstream *s, int m, size_t i, uint32_t v);
/* Later work of s waits until this member's index i has reached v (member
 * `from` signals it). */
void hn_p2p_wait_on(ctx *c, hn_dstream *s, int from, size_t i, uint32_t v);

/* on the caller's stream */
static inline void copy(ctx *c, void *dst, const void *src, size_t bytes)
{
    hn_p2p_copy_on(c, c->s, dst, src, bytes);
}
static inline void signal_flag(ctx *c, int m, size_t i, uint32_t v) { hn_p2p_signal_on(c, c->s, m, i, v); }
static inline void wait_flag(ctx *c, int from, size_t i, uint32_t v) { hn_p2p_wait_on(c, c->s, from, i, v); }

/* The member's copy lanes: start after the caller's stream's work so far
 * (returns the hand-off h), the caller's stream goes on once their work
 * of h is done (end), stream S goes on once all their work so far is
 * (after). */
uint32_t hn_p2p_lanes_start(ctx *c);
void hn_p2p_lanes_end(ctx *c, uint32_t h);
void hn_p2p_lanes_after(ctx *c, hn_dstream *S);

/* ---- the algorithms; each issues onto c->s and returns at once ---- */

/* allgather: `send` (cb bytes) into chunk `me` of recv, every member's chunk
 * from the others; a ring, senders push (put) or receivers pull (get) */
void hn_p2p_allgather_put(ctx *c, int me, const void *send, void *recv, size_t cb);
void hn_p2p_allgather_get(ctx *c, int me, const void *send, void *recv, size_t cb);
/* allreduce of a small input (count elements, at most every member's
 * small_cap bytes): every member pushes its input into a slot of every
 * peer's (two slots, used in turn), then reduces all inputs in team order,
 * the same bits on every member; one crossing between the devices per
 * call instead of a reduce_scatter's and an allgather's */
void hn_p2p_allreduce_small(ctx *c, int me, const void *send, void *recv, size_t count, hn_dtype dt, hn_redop redop);
/* reduce_scatter: chunk `me` (count elements) of the reduction of every
 * member's send into recv; a ring through the members' staging */
void hn_p2p_reduce_scatter_put(ctx *c, int me, const void *send, void *recv, size_t count, hn_dtype dt, hn_redop redop);
void hn_p2p_reduce_scatter_get(ctx *c, int me, const void *send, void *recv, size_t count, hn_dtype dt, hn_redop redop);
/* broadcast: the root's send (cb bytes) into every member's recv */
void hn_p2p_broadcast_put(ctx *c, int me, int root, const void *send, void *recv, size_t cb);
void hn_p2p_broadcast_get(ctx *c, int me, int root, const void *send, void *recv, size_t cb);
/* A group of sends and receives of `rank` (the table's p2p). */
hn_status_t hn_p2p_sendrecv(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, hn_dstream *s,
                            const hn_origin *o);

/* ---- graph banks (comm_p2p_banks.c; the table's graph hooks) ---- */

hn_status_t hn_p2p_graph_begin(hn_comm_world *w, int rank, const hn_graph_ctx *g, const hn_origin *o);
hn_status_t hn_p2p_graph_finish(hn_comm_world *w, int rank, const hn_graph_ctx *g, hn_dstream *s,
                                const hn_origin *o);
void hn_p2p_graph_end(hn_comm_world *w, int rank, const hn_graph_ctx *g);
void hn_p2p_graph_free(hn_comm_world *w, int rank, const hn_graph_ctx *g);
/* Frees a member's bank (rank: the member's) or a rank's pair sequences of a
 * graph, once nothing uses them. */
void hn_p2p_bank_free(hn_comm_world *w, int rank, gbank *b);
void hn_p2p_pairs_free(hn_comm_world *w, gpairs *gp);

#endif

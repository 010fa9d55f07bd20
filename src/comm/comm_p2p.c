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
 * and send/recv. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "team_list.h"

#define SLOTS 64
#define PIECES 4 /* a reduction step's chunk is copied and reduced in pieces */

typedef struct mailbox {
    uint64_t gen; /* atomic; 0: empty */
    void *ptr;
} mailbox;

typedef struct member {
    int rank;
    uint32_t *flags; /* on this member's device */
    void *stage[2];  /* staging of reductions, on this member's device */
    size_t stage_bytes;
    mailbox mbox[SLOTS];
    uint64_t slot_ops; /* issue side: generations taken */
    uint64_t staged;   /* issue side: staged operations taken */
    hn_dstream *side;  /* the copies of reductions, beside the caller's stream */
} member;

struct hn_comm_team {
    hn_comm_world *w;
    int n;
    member *m;
    size_t nflags;
};

struct hn_comm_world {
    int n;
    const hn_device_ops *dev;
    void *dev_ctx;
    const hn_compute_ops *compute;
    const hn_fault_sink *sink;
    hn_team_list teams; /* the team of all ranks carries the pair flags */
    uint64_t *send_seq, *recv_seq; /* [src * n + dst], issue side */
    mailbox *pair_mbox;            /* [(src * n + dst) * SLOTS + slot] */
};

/* flag layout of a member of a team of n: staging arrival and consumption
 * per (buffer, piece), then local hand-offs between the caller's stream
 * and the side stream, then the slots, then the pairs */
enum {
    F_STAGE_ARR = 0,            /* [2 buffers][PIECES] */
    F_STAGE_CONS = 2 * PIECES,  /* [2 buffers][PIECES] */
    F_RED = 4 * PIECES,         /* [PIECES]: piece reduced, the side stream may copy it */
    F_START = 5 * PIECES,       /* the side stream may start (inputs are written) */
    F_END = 5 * PIECES + 1,     /* the side stream is done */
    F_SLOTS = 5 * PIECES + 2
};
static size_t arr_flag(int buf, int j) { return F_STAGE_ARR + (size_t)(buf * PIECES + j); }
static size_t cons_flag(int buf, int j) { return F_STAGE_CONS + (size_t)(buf * PIECES + j); }
static size_t slot_flag(int n, uint64_t slot, int i) { return F_SLOTS + (size_t)slot * (size_t)(n + 2) + (size_t)i; }
static size_t pair_flag(int n, int peer, uint64_t slot, int kind)
{
    return F_SLOTS + (size_t)SLOTS * (size_t)(n + 2) + ((size_t)peer * SLOTS + (size_t)slot) * 2 + (size_t)kind;
}
enum { PAIR_READY = 0, PAIR_ARRIVED = 1 };

static uint32_t *flag(const hn_comm_team *t, int m, size_t i) { return t->m[m].flags + i; }

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
    w->send_seq = hn_calloc(n2, sizeof(uint64_t));
    w->recv_seq = hn_calloc(n2, sizeof(uint64_t));
    w->pair_mbox = hn_calloc(n2 * SLOTS, sizeof(mailbox));
    if (w->send_seq == NULL || w->recv_seq == NULL || w->pair_mbox == NULL) {
        hn_free(w->send_seq);
        hn_free(w->recv_seq);
        hn_free(w->pair_mbox);
        hn_free(w);
        return HN_ERR_NOMEM;
    }
    *out = w;
    return HN_OK;
}

static void p2p_fini(hn_comm_world *w)
{
    if (w == NULL)
        return;
    hn_free(w->send_seq);
    hn_free(w->recv_seq);
    hn_free(w->pair_mbox);
    hn_team_list_free(&w->teams);
    hn_free(w);
}

static hn_status_t p2p_team_create(hn_comm_world *w, const int *ranks, int n, hn_comm_team **out)
{
    hn_comm_team *t = hn_calloc(1, sizeof(*t));
    if (t == NULL)
        return HN_ERR_NOMEM;
    t->m = hn_calloc((size_t)n, sizeof(member));
    if (t->m == NULL || hn_team_list_add(&w->teams, t, ranks, n, w->n) != 0) {
        hn_free(t->m);
        hn_free(t);
        return HN_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++)
        t->m[i].rank = ranks[i];
    t->n = n;
    t->w = w;
    t->nflags = pair_flag(n, n, 0, 0);
    *out = t;
    return HN_OK;
}

/* On the member's thread: its flags, zeroed. */
static hn_status_t p2p_team_join(hn_comm_team *t, int me, const hn_origin *o)
{
    hn_comm_world *w = t->w;
    size_t bytes = t->nflags * sizeof(uint32_t);
    uint32_t *zeros = hn_calloc(t->nflags, sizeof(uint32_t));
    hn_status_t st = zeros != NULL ? HN_OK : HN_ERR_NOMEM;
    void *p = NULL;
    if (st == HN_OK)
        st = w->dev->mem_alloc(w->dev_ctx, t->m[me].rank, bytes, &p);
    if (st == HN_OK)
        st = w->dev->copy_to_device(w->dev_ctx, t->m[me].rank, p, zeros, bytes);
    if (st == HN_OK)
        st = w->dev->stream_create(w->dev_ctx, t->m[me].rank, &t->m[me].side);
    hn_free(zeros);
    if (st != HN_OK) {
        if (p != NULL)
            w->dev->mem_free(w->dev_ctx, t->m[me].rank, p);
        hn_origin_fail(o, st, "p2p: cannot allocate the flags of a team of %d", t->n);
        return st;
    }
    t->m[me].flags = p;
    return HN_OK;
}

static hn_status_t p2p_team_warmup(hn_comm_team *t, int me, hn_dstream *s, const hn_origin *o)
{
    (void)t;
    (void)me;
    (void)s;
    (void)o;
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
    hn_team_list_remove(&w->teams, t);
    for (int i = 0; i < t->n; i++) {
        if (t->m[i].side != NULL) {
            w->dev->stream_sync(t->m[i].side);
            w->dev->stream_destroy(t->m[i].side);
        }
        if (t->m[i].flags != NULL)
            w->dev->mem_free(w->dev_ctx, t->m[i].rank, t->m[i].flags);
        for (int k = 0; k < 2; k++)
            if (t->m[i].stage[k] != NULL)
                w->dev->mem_free(w->dev_ctx, t->m[i].rank, t->m[i].stage[k]);
    }
    hn_free(t->m);
    hn_free(t);
}

/* ---- host mailboxes: addresses handed over when operations are issued ---- */

static void mbox_post(mailbox *mb, uint64_t gen, void *ptr)
{
    mb->ptr = ptr;
    __atomic_store_n(&mb->gen, gen, __ATOMIC_RELEASE);
}

static hn_status_t mbox_take(const hn_comm_world *w, mailbox *mb, uint64_t gen, void **ptr, const hn_origin *o,
                             const char *what, int peer)
{
    double start = hn_now(), timeout = w->sink != NULL ? w->sink->timeout_s : 60.0;
    while (__atomic_load_n(&mb->gen, __ATOMIC_ACQUIRE) != gen) {
        if (hn_origin_aborted(o))
            return HN_ERR_ABORTED;
        if (hn_now() - start > timeout) {
            hn_origin_fail(o, HN_ERR_TIMEOUT, "p2p %s: rank %d never reached its side of it", what, peer);
            return HN_ERR_TIMEOUT;
        }
        sched_yield();
    }
    *ptr = mb->ptr;
    return HN_OK;
}

/* ---- the algorithms; each issues onto stream s and returns at once ---- */

typedef struct ctx {
    hn_comm_world *w;
    hn_comm_team *t;
    hn_dstream *s;
    const hn_origin *o;
    hn_status_t st;
} ctx;

static void copy_on(ctx *c, hn_dstream *s, void *dst, const void *src, size_t bytes)
{
    if (c->st == HN_OK && bytes > 0 && dst != src)
        c->st = c->w->dev->memcpy_async(dst, src, bytes, s, c->o);
}

static void signal_on(ctx *c, hn_dstream *s, uint32_t *addr, uint32_t v)
{
    if (c->st == HN_OK)
        c->st = c->w->dev->stream_write_flag(s, addr, v, c->o);
}

static void wait_on(ctx *c, hn_dstream *s, const uint32_t *addr, uint32_t v)
{
    if (c->st == HN_OK)
        c->st = c->w->dev->stream_wait_flag(s, addr, v, c->o);
}

/* on the caller's stream */
static void copy(ctx *c, void *dst, const void *src, size_t bytes) { copy_on(c, c->s, dst, src, bytes); }
static void signal_flag(ctx *c, uint32_t *addr, uint32_t v) { signal_on(c, c->s, addr, v); }
static void wait_flag(ctx *c, const uint32_t *addr, uint32_t v) { wait_on(c, c->s, addr, v); }

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
    if (c->st == HN_OK)
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
    mbox_post(&t->m[me].mbox[slot], *g, recv);
    c->st = mbox_take(c->w, &t->m[peer].mbox[slot], *g, (void **)peer_buf, c->o, "allgather", t->m[peer].rank);
    return c->st == HN_OK;
}

/* Ring allgather, put: at step k rank r pushes chunk (r - k) to rank r + 1. */
static void allgather_ring(ctx *c, int me, const void *send, void *recv, size_t cb)
{
    hn_comm_team *t = c->t;
    int n = t->n, next = (me + 1) % n, prev = (me + n - 1) % n;
    uint64_t g, slot;
    uint32_t v;
    char *R = recv, *Rn = NULL;
    if (!allgather_begin(c, me, next, send, recv, cb, &g, &Rn))
        return;
    slot = g % SLOTS;
    v = (uint32_t)g;
    signal_flag(c, flag(t, prev, slot_flag(n, slot, 0)), v); /* prev may write into my buffer */
    wait_flag(c, flag(t, me, slot_flag(n, slot, 0)), v);     /* next's buffer is free */
    for (int step = 0; step < n - 1; step++) {
        size_t chunk = (size_t)((me - step + n) % n);
        if (step > 0) /* that chunk came from prev at its step - 1 */
            wait_flag(c, flag(t, me, slot_flag(n, slot, step)), v);
        copy(c, Rn + chunk * cb, R + chunk * cb, cb);
        signal_flag(c, flag(t, next, slot_flag(n, slot, step + 1)), v);
    }
    wait_flag(c, flag(t, me, slot_flag(n, slot, n - 1)), v); /* the last chunk is here */
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
    signal_flag(c, flag(t, next, slot_flag(n, slot, 0)), v); /* next may pull my own chunk */
    for (int step = 0; step < n - 1; step++) {
        size_t chunk = (size_t)((me - 1 - step + 2 * n) % n);
        wait_flag(c, flag(t, me, slot_flag(n, slot, step)), v); /* prev has it */
        copy(c, R + chunk * cb, Rp + chunk * cb, cb);
        if (step + 1 < n - 1)
            signal_flag(c, flag(t, next, slot_flag(n, slot, step + 1)), v);
    }
    signal_flag(c, flag(t, prev, slot_flag(n, slot, n + 1)), v); /* done pulling from prev */
    wait_flag(c, flag(t, me, slot_flag(n, slot, n + 1)), v);     /* next is done with mine */
}

/* Ring reduce-scatter through the next rank's two staging buffers: at step
 * k rank r sends its partial of chunk (r - k - 1); the partial arriving at
 * the last step is its own chunk, fully reduced. Each step goes in PIECES
 * pieces: the caller's stream reduces piece j (SMs) while the member's side
 * stream copies piece j - 1 to the next rank (copy engine). A member's
 * reductions on a team run one after another (the side stream is shared),
 * so the hand-off flags between its two streams need no slots. */
static void reduce_scatter_ring(ctx *c, int me, const void *send, void *recv, size_t count, hn_dtype dt, int redop)
{
    hn_comm_team *t = c->t;
    int n = t->n, next = (me + 1) % n, prev = (me + n - 1) % n;
    size_t es = (size_t)hn_dtype_size(dt), cb = count * es;
    const char *I = send;
    uint64_t h = ++t->m[me].staged;
    uint32_t base = (uint32_t)((h - 1) * (uint64_t)(n - 1)), last, hv = (uint32_t)h;
    member *M = t->m;
    hn_dstream *S = c->s, *C = M[me].side;
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
    /* after the previous reduction's copies; then the side stream starts
     * once the inputs are written */
    wait_on(c, S, flag(t, me, F_END), hv - 1);
    signal_on(c, S, flag(t, me, F_START), hv);
    wait_on(c, C, flag(t, me, F_START), hv);
    for (int step = 0; step < n - 1; step++) {
        uint32_t tt = base + (uint32_t)step;
        size_t chunk = (size_t)((me - step - 1 + 2 * n) % n);
        int out = (int)(tt % 2), in = (int)((tt - 1) % 2);
        for (int j = 0; j < PIECES; j++) {
            size_t lo = count * (size_t)j / PIECES, hi = count * (size_t)(j + 1) / PIECES, off = lo * es;
            const char *src = I + chunk * cb + off;
            if (step > 0) {
                /* prev's partial of this piece (its global step tt - 1) plus mine */
                wait_on(c, S, flag(t, me, arr_flag(in, j)), tt);
                reduce(c, redop, dt, hi - lo, (char *)M[me].stage[in] + off, (char *)M[me].stage[in] + off, src);
                signal_on(c, S, flag(t, me, F_RED + (size_t)j), tt);
                wait_on(c, C, flag(t, me, F_RED + (size_t)j), tt);
                src = (const char *)M[me].stage[in] + off;
            }
            wait_on(c, C, flag(t, me, cons_flag(out, j)), tt - 1); /* next consumed step tt - 2 */
            copy_on(c, C, (char *)M[next].stage[out] + off, src, (hi - lo) * es);
            signal_on(c, C, flag(t, next, arr_flag(out, j)), tt + 1);
            if (step > 0) /* this piece of step tt - 1 is consumed */
                signal_on(c, C, flag(t, prev, cons_flag(in, j)), tt);
        }
    }
    last = base + (uint32_t)(n - 2);
    for (int j = 0; j < PIECES; j++) {
        size_t lo = count * (size_t)j / PIECES, hi = count * (size_t)(j + 1) / PIECES, off = lo * es;
        wait_on(c, S, flag(t, me, arr_flag((int)(last % 2), j)), last + 1);
        reduce(c, redop, dt, hi - lo, (char *)recv + off, (char *)M[me].stage[last % 2] + off,
               I + (size_t)me * cb + off);
        signal_on(c, S, flag(t, prev, cons_flag((int)(last % 2), j)), last + 1);
    }
    /* the caller's stream goes on once the side stream's copies are done */
    signal_on(c, C, flag(t, me, F_END), hv);
    wait_on(c, S, flag(t, me, F_END), hv);
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
        mbox_post(&t->m[me].mbox[slot], g, recv);
        signal_flag(c, flag(t, root, slot_flag(n, slot, me)), v); /* my buffer is free */
        wait_flag(c, flag(t, me, slot_flag(n, slot, n)), v);
        return;
    }
    copy(c, recv, send, cb);
    for (int p = 0; p < n && c->st == HN_OK; p++) {
        void *dst = NULL;
        if (p == root)
            continue;
        if ((c->st = mbox_take(c->w, &t->m[p].mbox[slot], g, &dst, c->o, "broadcast", t->m[p].rank)) != HN_OK)
            return;
        wait_flag(c, flag(t, me, slot_flag(n, slot, p)), v);
        copy(c, dst, send, cb);
        signal_flag(c, flag(t, p, slot_flag(n, slot, n)), v);
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
        mbox_post(&t->m[me].mbox[slot], g, (void *)send);
        for (int p = 0; p < n; p++)
            if (p != root)
                signal_flag(c, flag(t, p, slot_flag(n, slot, n)), v); /* the data is ready */
        for (int p = 0; p < n; p++)
            if (p != root)
                wait_flag(c, flag(t, me, slot_flag(n, slot, p)), v); /* p has pulled it */
        return;
    }
    {
        void *src = NULL;
        if ((c->st = mbox_take(c->w, &t->m[root].mbox[slot], g, &src, c->o, "broadcast", t->m[root].rank)) != HN_OK)
            return;
        wait_flag(c, flag(t, me, slot_flag(n, slot, n)), v);
        copy(c, recv, src, cb);
        signal_flag(c, flag(t, root, slot_flag(n, slot, me)), v);
    }
}

static hn_status_t p2p_collective(hn_comm_team *t, int me, const hn_coll_args *a, hn_dstream *s, const hn_origin *o)
{
    ctx c = {t->w, t, s, o, HN_OK};
    size_t es = (size_t)hn_dtype_size(a->dtype), n = (size_t)t->n;
    switch (a->kind) {
    case HN_COLL_ALLGATHER:
        if (a->get)
            allgather_ring_get(&c, me, a->send, a->recv, a->count * es);
        else
            allgather_ring(&c, me, a->send, a->recv, a->count * es);
        break;
    case HN_COLL_REDUCE_SCATTER:
        reduce_scatter_ring(&c, me, a->send, a->recv, a->count, a->dtype, a->redop);
        break;
    case HN_COLL_ALLREDUCE: {
        size_t chunk = a->count / n;
        char *out = a->recv;
        if (a->count % n != 0) {
            hn_origin_fail(o, HN_ERR_UNSUPPORTED, "p2p allreduce of %zu elements: not divisible by the team size %zu",
                           a->count, n);
            return HN_ERR_UNSUPPORTED;
        }
        reduce_scatter_ring(&c, me, a->send, out + (size_t)me * chunk * es, chunk, a->dtype, a->redop);
        allgather_ring(&c, me, out + (size_t)me * chunk * es, out, chunk * es);
        break;
    }
    case HN_COLL_BROADCAST:
        if (a->get)
            broadcast_get(&c, me, a->root, a->send, a->recv, a->count * es);
        else
            broadcast_direct(&c, me, a->root, a->send, a->recv, a->count * es);
        break;
    default:
        hn_origin_fail(o, HN_ERR_UNSUPPORTED, "%s via p2p: the p2p backend does allgather, reduce_scatter, "
                       "allreduce and broadcast", hn_coll_name(a->kind));
        return HN_ERR_UNSUPPORTED;
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
    ctx c = {w, t, s, o, HN_OK};
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
            mbox_post(&w->pair_mbox[((size_t)rank * N + ops[i].peer) * SLOTS + slot], seq[i], ops[i].buf);
            signal_flag(&c, flag(t, ops[i].peer, pair_flag(N, rank, slot, PAIR_ARRIVED)), (uint32_t)seq[i]);
        }
        /* 2: every receive pulls its data and says so */
        for (int i = 0; i < n && c.st == HN_OK; i++) {
            uint64_t slot = seq[i] % SLOTS;
            void *src = NULL;
            if (ops[i].is_send)
                continue;
            c.st = mbox_take(w, &w->pair_mbox[((size_t)ops[i].peer * N + rank) * SLOTS + slot], seq[i], &src, o,
                             "recv", ops[i].peer);
            wait_flag(&c, flag(t, rank, pair_flag(N, ops[i].peer, slot, PAIR_ARRIVED)), (uint32_t)seq[i]);
            copy(&c, ops[i].buf, src, ops[i].bytes);
            signal_flag(&c, flag(t, ops[i].peer, pair_flag(N, rank, slot, PAIR_READY)), (uint32_t)seq[i]);
        }
        /* 3: a send's buffer is free once its receiver has pulled */
        for (int i = 0; i < n; i++)
            if (ops[i].is_send)
                wait_flag(&c, flag(t, rank, pair_flag(N, ops[i].peer, seq[i] % SLOTS, PAIR_READY)), (uint32_t)seq[i]);
        hn_free(seq);
        return c.st;
    }
    /* 1: every receive posts its buffer and tells its sender */
    for (int i = 0; i < n; i++) {
        uint64_t slot = seq[i] % SLOTS;
        if (ops[i].is_send)
            continue;
        mbox_post(&w->pair_mbox[((size_t)ops[i].peer * N + rank) * SLOTS + slot], seq[i], ops[i].buf);
        signal_flag(&c, flag(t, ops[i].peer, pair_flag(N, rank, slot, PAIR_READY)), (uint32_t)seq[i]);
    }
    /* 2: every send copies into its receiver's buffer */
    for (int i = 0; i < n && c.st == HN_OK; i++) {
        uint64_t slot = seq[i] % SLOTS;
        void *dst = NULL;
        if (!ops[i].is_send)
            continue;
        c.st = mbox_take(w, &w->pair_mbox[((size_t)rank * N + ops[i].peer) * SLOTS + slot], seq[i], &dst, o,
                         "send", ops[i].peer);
        wait_flag(&c, flag(t, rank, pair_flag(N, ops[i].peer, slot, PAIR_READY)), (uint32_t)seq[i]);
        copy(&c, dst, ops[i].buf, ops[i].bytes);
        signal_flag(&c, flag(t, ops[i].peer, pair_flag(N, rank, slot, PAIR_ARRIVED)), (uint32_t)seq[i]);
    }
    /* 3: every receive waits for its data */
    for (int i = 0; i < n; i++)
        if (!ops[i].is_send)
            wait_flag(&c, flag(t, rank, pair_flag(N, ops[i].peer, seq[i] % SLOTS, PAIR_ARRIVED)), (uint32_t)seq[i]);
    hn_free(seq);
    return c.st;
}

/* After a failure, flag waits on the devices may wait forever: satisfy them
 * all, then the runtime destroys the teams (fresh flags next run). */
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
            if (t->m[m].flags != NULL)
                w->dev->copy_to_device(w->dev_ctx, t->m[m].rank, t->m[m].flags, high, t->nflags * sizeof(uint32_t));
        hn_free(high);
    }
    return 1;
}

static void p2p_reset(hn_comm_world *w)
{
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
    .team_warmup = p2p_team_warmup,
    .team_reserve = p2p_team_reserve,
    .team_destroy = p2p_team_destroy,
    .collective = p2p_collective,
    .p2p = p2p_p2p,
    .abort = p2p_abort,
    .reset = p2p_reset,
};

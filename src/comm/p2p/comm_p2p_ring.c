/* The p2p communicator's rings: allgather and reduce_scatter, senders push
 * (put) or receivers pull (get); allreduce is a reduce_scatter then an
 * allgather in place (comm_p2p.c). Steps go on the caller's stream, or in
 * pieces over the member's copy lanes. */
#include <string.h>

#include "comm_p2p_int.h"

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
static void reduce(ctx *c, hn_redop redop, hn_dtype dt, size_t count, void *dst, const void *a, const void *b)
{
    hn_tensor d = vec(dst, dt, count), x = vec((void *)a, dt, count), y = vec((void *)b, dt, count);
    hn_redop op = redop == HN_RED_AVG ? HN_RED_SUM : redop; /* avg: a sum, divided at the end */
    if (c->st == HN_OK && count > 0)
        c->st = c->w->base.compute->binary(c->s, op, &d, &x, &y, c->o);
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
    if (t->base.n == 1 || c->st != HN_OK)
        return 0;
    mbox_post(c->o, &t->sh[me]->mbox[slot], *g, recv);
    c->st = hn_p2p_mbox_take(c->w, &t->sh[peer]->mbox[slot], *g, (void **)peer_buf, c->o, "allgather",
                             t->base.ranks[peer]);
    return c->st == HN_OK;
}

/* Ring allgather, put: at step k rank r pushes chunk (r - k) to rank r + 1.
 * With HIRNODE_P2P_AG_PIECES > 1, a chunk of at least 2 x piece_min goes in
 * pieces over the member's lanes, each piece forwarded as soon as it has
 * arrived; otherwise (the default: measured faster, docs/BENCHMARKS.md) in
 * whole steps on the caller's stream. */
void hn_p2p_allgather_put(ctx *c, int me, const void *send, void *recv, size_t cb)
{
    hn_comm_team *t = c->t;
    int n = t->base.n, next = (me + 1) % n, prev = (me + n - 1) % n;
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
    h = hn_p2p_lanes_start(c);
    for (int k = 0; k < t->lanes; k++)
        hn_p2p_wait_on(c, t->m[me].side[k], next, slot_flag(t, slot, 0), v);
    for (int step = 0; step < n - 1; step++) {
        size_t at = (size_t)((me - step + n) % n) * cb;
        for (int j = 0; j < P; j++) {
            hn_dstream *L = t->m[me].side[j % t->lanes];
            size_t lo, hi;
            piece(cb, j, P, 256, &lo, &hi);
            if (step > 0) /* that piece came from prev at its step - 1 */
                hn_p2p_wait_on(c, L, prev, piece_flag(t, slot, step, j), v);
            hn_p2p_copy_on(c, L, Rn + at + lo, R + at + lo, hi - lo);
            hn_p2p_signal_on(c, L, next, piece_flag(t, slot, step + 1, j), v);
        }
    }
    for (int j = 0; j < P; j++) /* the last chunk is here */
        wait_flag(c, prev, piece_flag(t, slot, n - 1, j), v);
    hn_p2p_lanes_end(c, h); /* and my copies out of my buffer are done */
}

/* Ring allgather, get: at step k rank r pulls chunk (r - 1 - k) from rank
 * r - 1, once r - 1 has it; an operation ends when r + 1 has pulled
 * everything it needs from r's buffer. */
void hn_p2p_allgather_get(ctx *c, int me, const void *send, void *recv, size_t cb)
{
    hn_comm_team *t = c->t;
    int n = t->base.n, next = (me + 1) % n, prev = (me + n - 1) % n;
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

/* Small allreduces: call g of a member takes slot s = g % 2 of every
 * member's small slots. It writes its input into its region of each
 * peer's slot s once that peer has consumed the slot's call before
 * (g - 2), says so, waits for every peer's input in its own slot s,
 * reduces the n inputs in team order (x0 op x1 op ... on every member: the
 * same bits), and tells each peer its region is consumed. Only the
 * arrivals are on the way of a call: a consumption is two calls old when
 * it is waited for. (Allgathers the same way, with the inputs copied out
 * of the slots, measured no faster than the ring on 2 H200s: they stay
 * rings.)
 *
 * small_push: the first half, returns s and the call's flag value. */
static int small_push(ctx *c, int me, const void *send, size_t cb, uint32_t *value)
{
    hn_comm_team *t = c->t;
    const member_view *V = t->view;
    int n = t->base.n, s;
    uint64_t g = ++t->m[me].small_ops;
    uint32_t v = (uint32_t)g;
    s = (int)(g % 2);
    for (int q = 0; q < n; q++) {
        if (q == me)
            continue;
        if (g > 2)
            hn_p2p_wait_on(c, c->s, q, small_flag(t, 1, s, q), v - 2);
        copy(c, (char *)V[q].small[s] + (size_t)me * V[q].small_cap, send, cb);
        hn_p2p_signal_on(c, c->s, q, small_flag(t, 0, s, me), v);
    }
    for (int q = 0; q < n; q++)
        if (q != me)
            hn_p2p_wait_on(c, c->s, q, small_flag(t, 0, s, q), v);
    *value = v;
    return s;
}

/* ... and its end: every peer's region of slot s consumed */
static void small_consumed(ctx *c, int me, int s, uint32_t v)
{
    for (int q = 0; q < c->t->base.n; q++)
        if (q != me)
            hn_p2p_signal_on(c, c->s, q, small_flag(c->t, 1, s, me), v);
}

void hn_p2p_allreduce_small(ctx *c, int me, const void *send, void *recv, size_t count, hn_dtype dt, hn_redop redop)
{
    hn_comm_team *t = c->t;
    const member_view *V = t->view;
    int n = t->base.n, s;
    size_t cb = count * (size_t)hn_dtype_size(dt);
    uint32_t v;
    s = small_push(c, me, send, cb, &v);
    {
        /* in team order, x0 op x1, then op x2, ...: the sums before my input
         * go into my own region of my slot (no peer writes it), so that recv,
         * which may be my input, is written from my turn on only */
        char *own = (char *)V[me].small[s] + (size_t)me * V[me].small_cap;
        const void *acc = me == 0 ? send : V[me].small[s];
        for (int q = 1; q < n; q++) {
            const void *x = q == me ? send : (const char *)V[me].small[s] + (size_t)q * V[me].small_cap;
            void *dst = q < me ? (void *)own : recv;
            reduce(c, redop, dt, count, dst, acc, x);
            acc = dst;
        }
    }
    small_consumed(c, me, s, v);
    if (redop == HN_RED_AVG && c->st == HN_OK) {
        hn_tensor o = vec(recv, dt, count);
        c->st = c->w->base.compute->scale(c->s, &o, &o, 1.0 / n, c->o);
    }
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
void hn_p2p_reduce_scatter_put(ctx *c, int me, const void *send, void *recv, size_t count, hn_dtype dt, hn_redop redop)
{
    hn_comm_team *t = c->t;
    int n = t->base.n, next = (me + 1) % n, prev = (me + n - 1) % n, P, whole;
    size_t es = (size_t)hn_dtype_size(dt), cb = count * es;
    const char *I = send;
    uint64_t staged = ++t->m[me].staged;
    uint32_t base = (uint32_t)((staged - 1) * (uint64_t)(n - 1)), last, h = 0;
    member *M = t->m;
    const member_view *V = t->view;
    hn_dstream *S = c->s;
    if (n == 1) {
        copy(c, recv, send, cb);
        return;
    }
    if (V[me].stage_bytes < cb || V[next].stage_bytes < cb) {
        c->st = HN_ERR_RUNTIME;
        hn_origin_fail(c->o, c->st, "p2p reduction of %zu bytes: staging of %zu reserved (not prepared?)", cb,
                       V[me].stage_bytes);
        return;
    }
    P = pieces_of(t, cb, t->pieces);
    whole = P == 1;
    /* after the lanes' earlier copies out of the staging */
    hn_p2p_lanes_after(c, S);
    if (M[me].last_get) {
        /* after reductions with get, the staging of each member is free
         * once its own get ended (its partials all pulled): say so to prev,
         * and write into next's only once next says so */
        hn_p2p_signal_on(c, S, prev, gfree_flag(t), (uint32_t)staged);
        hn_p2p_wait_on(c, S, next, gfree_flag(t), (uint32_t)staged);
        M[me].last_get = 0;
    }
    /* a staging buffer last filled in other pieces: all of them consumed */
    for (int step = 0; step < n - 1 && step < 2; step++) {
        uint32_t tt = base + (uint32_t)step;
        int out = (int)(tt % 2);
        if (M[me].stage_pieces[out] != P)
            for (int j = 0; j < M[me].stage_pieces[out]; j++)
                hn_p2p_wait_on(c, S, next, cons_flag(t, out, j), tt - 1);
    }
    if (!whole)
        h = hn_p2p_lanes_start(c); /* the lanes start once the inputs are written */
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
                hn_p2p_wait_on(c, S, prev, arr_flag(t, in, j), tt);
                reduce(c, redop, dt, hi - lo, (char *)V[me].stage[in] + off, (char *)V[me].stage[in] + off, src);
                if (!whole) {
                    hn_p2p_signal_on(c, S, me, red_flag(t, j), tt);
                    hn_p2p_wait_on(c, L, me, red_flag(t, j), tt);
                }
                src = (const char *)V[me].stage[in] + off;
            }
            if (same) /* next consumed this piece of step tt - 2 */
                hn_p2p_wait_on(c, L, next, cons_flag(t, out, j), tt - 1);
            hn_p2p_copy_on(c, L, (char *)V[next].stage[out] + off, src, (hi - lo) * es);
            hn_p2p_signal_on(c, L, next, arr_flag(t, out, j), tt + 1);
            if (step > 0) /* this piece of step tt - 1 is consumed */
                hn_p2p_signal_on(c, L, prev, cons_flag(t, in, j), tt);
        }
        M[me].stage_pieces[out] = P;
    }
    last = base + (uint32_t)(n - 2);
    for (int j = 0; j < P; j++) {
        size_t lo, hi, off;
        piece(count, j, P, 64, &lo, &hi);
        off = lo * es;
        hn_p2p_wait_on(c, S, prev, arr_flag(t, (int)(last % 2), j), last + 1);
        reduce(c, redop, dt, hi - lo, (char *)recv + off, (char *)V[me].stage[last % 2] + off,
               I + (size_t)me * cb + off);
        hn_p2p_signal_on(c, S, prev, cons_flag(t, (int)(last % 2), j), last + 1);
    }
    if (!whole)
        hn_p2p_lanes_end(c, h); /* the caller's stream goes on once the lanes' copies are done */
    if (redop == HN_RED_AVG && c->st == HN_OK) {
        hn_tensor o = vec(recv, dt, count);
        c->st = c->w->base.compute->scale(c->s, &o, &o, 1.0 / n, c->o);
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
void hn_p2p_reduce_scatter_get(ctx *c, int me, const void *send, void *recv, size_t count, hn_dtype dt, hn_redop redop)
{
    hn_comm_team *t = c->t;
    int n = t->base.n, next = (me + 1) % n, prev = (me + n - 1) % n;
    size_t es = (size_t)hn_dtype_size(dt), cb = count * es;
    const char *I = send, *Ip = NULL;
    member *M = t->m;
    const member_view *V = t->view;
    hn_dstream *S = c->s;
    uint64_t h = ++M[me].gstaged, g, slot;
    uint32_t base = (uint32_t)((h - 1) * (uint64_t)(n - 1)), last = base + (uint32_t)(n - 2);
    if (n == 1) {
        copy(c, recv, send, cb);
        return;
    }
    if (V[me].stage_bytes < cb) {
        c->st = HN_ERR_RUNTIME;
        hn_origin_fail(c->o, c->st, "p2p reduction of %zu bytes: staging of %zu reserved (not prepared?)", cb,
                       V[me].stage_bytes);
        return;
    }
    /* the inputs' addresses, for the first pull */
    g = ++M[me].slot_ops;
    slot = g % SLOTS;
    mbox_post(c->o, &t->sh[me]->mbox[slot], g, (void *)send);
    if ((c->st = hn_p2p_mbox_take(c->w, &t->sh[prev]->mbox[slot], g, (void **)&Ip, c->o, "reduce_scatter",
                                  t->base.ranks[prev])) != HN_OK)
        return;
    M[me].last_get = 1;
    hn_p2p_lanes_after(c, S); /* put lanes are done with the staging */
    hn_p2p_signal_on(c, S, next, gready_flag(t, (int)(base % 2)), base + 1); /* my input's chunk is ready */
    for (uint32_t tt = base + 1; tt <= last + 1; tt++) {
        int k = (int)(tt - base);
        int in = (int)((tt - 1) % 2); /* where prev's partial of step tt - 1 lands */
        size_t chunk = (size_t)((me - k - 1 + 2 * n) % n);
        const char *src = k == 1 ? Ip + chunk * cb : (const char *)V[prev].stage[(tt - 2) % 2];
        char *land = V[me].stage[in];
        hn_p2p_wait_on(c, S, prev, gready_flag(t, in), tt);          /* prev's partial is ready */
        hn_p2p_wait_on(c, S, next, gpulled_flag(t, in), tt - 1);     /* my partial of step tt - 2 was pulled */
        copy(c, land, src, cb);
        hn_p2p_signal_on(c, S, prev, gpulled_flag(t, (int)((tt - 2) % 2)), tt);
        if (tt <= last) {
            reduce(c, redop, dt, count, land, land, I + chunk * cb);
            hn_p2p_signal_on(c, S, next, gready_flag(t, (int)(tt % 2)), tt + 1);
        } else {
            reduce(c, redop, dt, count, recv, land, I + (size_t)me * cb);
        }
    }
    hn_p2p_wait_on(c, S, next, gpulled_flag(t, (int)((last + 3) % 2)), last + 1); /* all my partials pulled */
    if (redop == HN_RED_AVG && c->st == HN_OK) {
        hn_tensor o = vec(recv, dt, count);
        c->st = c->w->base.compute->scale(c->s, &o, &o, 1.0 / n, c->o);
    }
}

/* The latency path on the CPU backend: one stream closure per call runs
 * the protocol of ll.h — its plan, phases, moves, access units, wire
 * formats, clears on read and generations — with the call's blocks as
 * small state machines. A GPU runs its blocks at once, so any order is
 * legal: each round steps every unfinished block in a shuffled order, as
 * far as it gets before a unit that has not arrived. Each member cuts its
 * segments in its own size (the protocol lets members differ there), so
 * the tests show that they need not agree. Lanes are read and written with
 * atomics of the unit's widths, as the kernel's volatile accesses; pushes
 * are release stores and polls acquire loads, which is how C11 gives the
 * order that a kernel boundary gives on the GPU (ll.h, point 4) without a
 * standalone fence (which ThreadSanitizer does not model). */
#include <stdio.h>
#include <string.h>

#include "../../device/device.h"
#include "ll.h"

#define EMU_SMS 16 /* the emulated device's multiprocessors: blocks up to hn_ll_cap(16) */

/* Waiters sleep until some member pushed: on the world's doorbell (the
 * sink's), which members in other processes ring too, or on this
 * process's own without one. A bell counts its rings, so none is missed;
 * they look again every 20 ms: an abort is raised by plain stores and by
 * the run's abort flag. */
static hn_doorbell own_bell;

static hn_doorbell *push_bell(const hn_origin *o)
{
    return o->sink != NULL && o->sink->bell != NULL ? o->sink->bell : &own_bell;
}

/* A unit's bytes: up to 16, as four little-endian words. */
typedef struct unitv {
    uint32_t w[4];
} unitv;

static unitv load_data(const char *p, int bytes)
{
    unitv v;
    memset(&v, 0, sizeof(v));
    memcpy(v.w, p, (size_t)bytes);
    return v;
}

static void store_data(char *p, const unitv *v, int bytes) { memcpy(p, v->w, (size_t)bytes); }

static unitv fix_unit(unitv v, const hn_ll_unit *U, size_t es)
{
    if (U->width == 2) {
        v.w[0] = hn_ll_fix(v.w[0] & 0xffffu, 2) & 0xffffu;
        return v;
    }
    for (int i = 0; i < 4; i++)
        v.w[i] = hn_ll_fix(v.w[i], es);
    return v;
}

/* Sentinel lanes: the unit at p, and whether all of it has arrived. */
static int poll_sentinel(const char *p, const hn_ll_unit *U, size_t es, unitv *v)
{
    memset(v, 0, sizeof(*v));
    if (U->width == 2) {
        uint16_t h = __atomic_load_n((const uint16_t *)p, __ATOMIC_ACQUIRE);
        v->w[0] = h;
        return hn_ll_arrived_half(h);
    }
    for (int i = 0; i < U->width / 4; i++) {
        v->w[i] = __atomic_load_n((const uint32_t *)p + i, __ATOMIC_ACQUIRE);
        if (!hn_ll_arrived(v->w[i], es))
            return 0;
    }
    return 1;
}

static void put_sentinel(char *p, const unitv *v, const hn_ll_unit *U)
{
    if (U->width == 2) {
        __atomic_store_n((uint16_t *)p, (uint16_t)v->w[0], __ATOMIC_RELEASE);
        return;
    }
    for (int i = 0; i < U->width / 4; i++)
        __atomic_store_n((uint32_t *)p + i, v->w[i], __ATOMIC_RELEASE);
}

static const unitv ones = {{~0u, ~0u, ~0u, ~0u}};

/* Packet lanes: the unit's one or two packets at p; their data words. */
static int poll_packets(const char *p, const hn_ll_unit *U, uint32_t g, unitv *v)
{
    memset(v, 0, sizeof(*v));
    for (int i = 0; i < U->width / 8; i++) {
        uint64_t x = __atomic_load_n((const uint64_t *)p + i, __ATOMIC_ACQUIRE);
        if (!hn_ll_packet_arrived(x, g))
            return 0;
        v->w[i] = (uint32_t)x;
    }
    return 1;
}

static void put_packets(char *p, const unitv *v, const hn_ll_unit *U, uint32_t g, int clear)
{
    for (int i = 0; i < U->width / 8; i++)
        __atomic_store_n((uint64_t *)p + i, clear ? ~0ull : hn_ll_pack(v->w[i], g), __ATOMIC_RELEASE);
}

static float elem_f(int dtype, const unitv *v, int e)
{
    uint16_t h;
    float f;
    if (dtype == HN_F32) {
        memcpy(&f, (const char *)v->w + 4 * e, 4);
        return f;
    }
    memcpy(&h, (const char *)v->w + 2 * e, 2);
    return dtype == HN_BF16 ? hn_bf16_to_f32(h) : hn_f16_to_f32(h);
}

static void set_elem(int dtype, unitv *v, int e, float f)
{
    uint16_t h;
    if (dtype == HN_F32) {
        memcpy((char *)v->w + 4 * e, &f, 4);
        return;
    }
    h = dtype == HN_BF16 ? hn_f32_to_bf16(f) : hn_f32_to_f16(f);
    memcpy((char *)v->w + 2 * e, &h, 2);
}

/* One member's call. */
typedef struct call {
    hn_ll_args a;
    hn_ll_plan P;
    uint32_t g;
    int blocks;
} call;

/* A block: where it is (phase, segment, move, unit) and the row's sum of
 * squares so far (the norm). */
typedef struct block {
    int pi, j, done;
    size_t k, k0, k1, u;
    float sumsq;
} block;

/* PUSH unit: never waits. */
static void push_unit(const call *c, const hn_ll_move *mv, const hn_ll_unit *U)
{
    unitv v = load_data(mv->data + U->data, U->bytes);
    if (c->P.fmt == HN_LL_PACKETS) {
        for (int i = 0; i < mv->nto; i++)
            put_packets(mv->to[i] + U->wire, &v, U, c->g, 0);
        if (mv->out != NULL)
            store_data(mv->out + U->data, &v, U->bytes);
        return;
    }
    v = fix_unit(v, U, c->P.es);
    for (int i = 0; i < mv->nto; i++)
        put_sentinel(mv->to[i] + U->wire, &v, U);
}

/* REDUCE or GATHER unit: 0 while some of it has not arrived (nothing
 * written then). The norm adds its squares to *sumsq. */
static int take_unit(const call *c, int ph, const hn_ll_move *mv, const hn_ll_unit *U, float *sumsq)
{
    const hn_ll_args *a = &c->a;
    const size_t es = c->P.es;
    const int ne = U->bytes / (int)es;
    unitv w[HN_LL_MAX_RANKS], r;
    if (ph == HN_LL_GATHER) {
        int in = c->P.fmt == HN_LL_PACKETS ? poll_packets(mv->from[0] + U->wire, U, c->g, &r)
                                           : poll_sentinel(mv->from[0] + U->wire, U, es, &r);
        if (!in)
            return 0;
        if (c->P.fmt == HN_LL_PACKETS)
            put_packets(mv->from[0] + U->wire, &r, U, c->g, 1);
        else
            put_sentinel(mv->from[0] + U->wire, &ones, U);
    } else {
        for (int p = 0; p < a->n; p++)
            if (p != a->me && !poll_sentinel(mv->from[p] + U->wire, U, es, &w[p]))
                return 0;
        w[a->me] = fix_unit(load_data(mv->data + U->data, U->bytes), U, es);
        for (int p = 0; p < a->n; p++)
            if (p != a->me)
                put_sentinel(mv->from[p] + U->wire, &ones, U);
        memset(&r, 0, sizeof(r));
        for (int e = 0; e < ne; e++) { /* team order, fp32 */
            float acc = elem_f(a->dtype, &w[0], e);
            for (int p = 1; p < a->n; p++)
                acc = hn_ll_combine(a->redop, acc, elem_f(a->dtype, &w[p], e));
            acc = hn_ll_finish(a->redop, acc, a->n);
            if (mv->res != NULL) {
                unitv res = load_data(mv->res + U->data, U->bytes);
                acc += elem_f(a->dtype, &res, e);
            }
            set_elem(a->dtype, &r, e, acc);
        }
        r = fix_unit(r, U, es);
        for (int i = 0; i < mv->nto; i++)
            put_sentinel(mv->to[i] + U->wire, &r, U);
    }
    if (a->kind != HN_LL_ALLREDUCE_NORM) {
        store_data(mv->out + U->data, &r, U->bytes);
        return 1;
    }
    store_data(mv->res_out + U->data, &r, U->bytes);
    for (int e = 0; e < ne; e++) {
        float f = elem_f(a->dtype, &r, e);
        *sumsq += f * f;
    }
    return 1;
}

/* The norm's row, once y is stored: out = y * scale * weight. */
static void norm_out(const call *c, const hn_ll_move *mv, float sumsq)
{
    const hn_ll_args *a = &c->a;
    float scale = hn_norm_scale(sumsq, a->hidden, a->eps);
    size_t units = hn_ll_units(HN_LL_SENTINEL, c->P.es, mv->elems);
    for (size_t u = 0; u < units; u++) {
        hn_ll_unit U;
        unitv y, w, out;
        hn_ll_unit_at(HN_LL_SENTINEL, c->P.es, mv->elems, u, &U);
        y = load_data(mv->res_out + U.data, U.bytes);
        w = load_data((const char *)a->weight + U.data, U.bytes);
        memset(&out, 0, sizeof(out));
        for (int e = 0; e < U.bytes / (int)c->P.es; e++)
            set_elem(a->dtype, &out, e, elem_f(a->dtype, &y, e) * scale * elem_f(a->dtype, &w, e));
        store_data(mv->out + U.data, &out, U.bytes);
    }
}

/* Steps block B as far as it gets; 1 if it moved. ph: the call's phases. */
static int step(const call *c, block *B, const int *ph, int nph, int *pushed)
{
    int moved = 0;
    while (B->pi < nph) {
        hn_ll_move mv;
        size_t units;
        if (B->k >= B->k1) { /* the phase ends (the kernel's __syncthreads) */
            B->pi++;
            B->k = B->k0;
            B->j = 0;
            B->u = 0;
            B->sumsq = 0;
            continue;
        }
        if (!hn_ll_move_at(&c->a, &c->P, c->g, ph[B->pi], B->k, B->j, &mv)) {
            B->k++;
            B->j = 0;
            continue;
        }
        units = hn_ll_units(c->P.fmt, c->P.es, mv.elems);
        for (; B->u < units; B->u++) {
            hn_ll_unit U;
            hn_ll_unit_at(c->P.fmt, c->P.es, mv.elems, B->u, &U);
            if (ph[B->pi] == HN_LL_PUSH)
                push_unit(c, &mv, &U);
            else if (!take_unit(c, ph[B->pi], &mv, &U, &B->sumsq))
                return moved;
            moved = 1;
            *pushed |= mv.nto > 0;
        }
        if (c->a.kind == HN_LL_ALLREDUCE_NORM && ph[B->pi] != HN_LL_PUSH)
            norm_out(c, &mv, B->sumsq);
        moved = 1;
        B->j++;
        B->u = 0;
        B->sumsq = 0;
    }
    return moved;
}

static const char *kind_name(int kind)
{
    return kind == HN_LL_ALLREDUCE        ? "allreduce"
           : kind == HN_LL_ALLGATHER      ? "allgather"
           : kind == HN_LL_REDUCE_SCATTER ? "reduce_scatter"
                                          : "allreduce + rmsnorm";
}

/* Appends member p's rank to a list of names. */
static void name_rank(const hn_ll_args *a, int p, char *who, size_t size, size_t *len, int *nwho)
{
    if (*len < size - 16) {
        *len += (size_t)snprintf(who + *len, size - *len, "%s%d", *nwho ? ", " : "", a->ranks[p]);
        (*nwho)++;
    }
}

/* Nothing moved for the run's deadline: names the members that never
 * started this call (their `running` is behind) — or, when all did, those
 * whose data the first waiting block still lacks. */
static void report_absent(const call *c, const block *Bs, const int *ph, const hn_origin *o)
{
    const hn_ll_args *a = &c->a;
    char who[128] = "";
    const char *what = "never arrived";
    size_t len = 0;
    int nwho = 0;
    for (int p = 0; p < a->n; p++)
        if (p != a->me && (int32_t)(__atomic_load_n(&a->sig[p]->running, __ATOMIC_ACQUIRE) - c->g) < 0)
            name_rank(a, p, who, sizeof(who), &len, &nwho);
    for (int b = 0; b < c->blocks && nwho == 0; b++) {
        const block *B = &Bs[b];
        hn_ll_move mv;
        hn_ll_unit U;
        unitv v;
        if (B->done || ph[B->pi] == HN_LL_PUSH || !hn_ll_move_at(a, &c->P, c->g, ph[B->pi], B->k, B->j, &mv))
            continue;
        hn_ll_unit_at(c->P.fmt, c->P.es, mv.elems, B->u, &U);
        what = "sent nothing more";
        for (int i = 0; i < mv.nfrom; i++) {
            int p = mv.peer >= 0 ? mv.peer : i;
            int in = p == a->me || (c->P.fmt == HN_LL_PACKETS ? poll_packets(mv.from[i] + U.wire, &U, c->g, &v)
                                                               : poll_sentinel(mv.from[i] + U.wire, &U, c->P.es, &v));
            if (!in)
                name_rank(a, p, who, sizeof(who), &len, &nwho);
        }
    }
    hn_origin_fail(o, HN_ERR_TIMEOUT, "ll %s (%s, generation %u): rank%s %s %s (nothing moved for %.0f s)",
                   kind_name(a->kind), hn_ll_twoshot(a) ? "two-shot" : "one-shot", c->g, nwho > 1 ? "s" : "",
                   nwho ? who : "?", what, o->sink != NULL ? o->sink->timeout_s : 60.0);
}

static hn_status_t run_call(void *arg, const hn_origin *o)
{
    call *c = arg;
    const hn_ll_args *a = &c->a;
    hn_ll_signal *mine = a->sig[a->me];
    int ph[HN_LL_MAX_PHASES], nph = hn_ll_phases(a, ph), left, order[HN_LL_MAX_BLOCKS];
    double timeout = o->sink != NULL ? o->sink->timeout_s : 60.0, last = hn_now();
    hn_doorbell *bell = push_bell(o);
    uint64_t rng;
    block B[HN_LL_MAX_BLOCKS];
    /* each member cuts its own segments: 512 B, 1 KiB or 2 KiB */
    hn_ll_plan_make(a, (size_t)512 << (a->me % 3), &c->P);
    c->blocks = hn_ll_grid(&c->P, a->blocks > 0 ? a->blocks : hn_ll_cap(EMU_SMS));
    /* every block reads its own generation word as it starts: all equal
     * between calls (ll.h, 6), which a failure here would have broken */
    c->g = hn_ll_next_gen(__atomic_load_n(&mine->gen[0], __ATOMIC_ACQUIRE));
    for (int b = 1; b < c->blocks; b++) {
        uint32_t w = __atomic_load_n(&mine->gen[b], __ATOMIC_ACQUIRE);
        if (hn_ll_next_gen(w) != c->g) {
            hn_origin_fail(o, HN_ERR_RUNTIME, "ll: rank %d's generation words disagree (block %d: %u, block 0: %u)",
                           a->ranks[a->me], b, w, c->g - 1);
            return HN_ERR_RUNTIME;
        }
    }
    __atomic_store_n(&mine->running, c->g, __ATOMIC_RELEASE);
    rng = ((uint64_t)c->g << 32) ^ (uint64_t)(a->me * 7919 + c->blocks);
    memset(B, 0, sizeof(B));
    for (int b = 0; b < c->blocks; b++) {
        hn_ll_block_segs(&c->P, b, c->blocks, &B[b].k0, &B[b].k1);
        B[b].k = B[b].k0;
        order[b] = b;
    }
    left = c->blocks;
    while (left > 0) {
        uint32_t seen = hn_doorbell_read(bell);
        int moved = 0, pushed = 0;
        for (int i = c->blocks - 1; i > 0; i--) { /* this round's order */
            int j = (int)(hn_splitmix64(&rng) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i = 0; i < c->blocks; i++) {
            block *b = &B[order[i]];
            if (b->done)
                continue;
            moved |= step(c, b, ph, nph, &pushed);
            if (b->pi < nph)
                continue;
            b->done = 1;
            left--;
            /* as in the kernel: a block stores its generation words as it ends */
            {
                int lo, hi;
                hn_ll_gen_stores(order[i], c->blocks, &lo, &hi);
                for (int w = lo; w < hi; w++)
                    __atomic_store_n(&mine->gen[w], c->g, __ATOMIC_RELEASE);
            }
        }
        if (pushed)
            hn_doorbell_ring(bell);
        if (moved) {
            last = hn_now();
            continue;
        }
        if (__atomic_load_n(&mine->abort, __ATOMIC_ACQUIRE) || hn_origin_aborted(o))
            return HN_ERR_ABORTED;
        if (hn_now() - last > timeout) {
            report_absent(c, B, ph, o);
            return HN_ERR_TIMEOUT;
        }
        (void)hn_doorbell_wait(bell, seen, 0.02);
    }
    return HN_OK;
}

hn_status_t hn_ll_host(hn_dstream *s, const hn_ll_args *a, const hn_origin *o)
{
    call *c = hn_calloc(1, sizeof(*c));
    if (c == NULL)
        return HN_ERR_NOMEM;
    c->a = *a;
    return hn_device_host.launch_host(s, run_call, c, hn_free, o);
}

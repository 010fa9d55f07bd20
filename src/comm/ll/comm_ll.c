/* The latency path's communicator (`via ll`): allreduce, allgather and
 * reduce_scatter of small messages, and allreduce + residual + RMSNorm
 * fused (hn_comm_ll_allreduce_norm), each one kernel per member that
 * pushes its data into the peers' registered buffers, where the data say
 * by themselves that they have arrived — one-shot or two-shot
 * (src/comm/ll/ll.h has the protocol and why it is safe; its kernels, one
 * per kind of device, run it: SM kernels on CUDA, ll_cuda.cu; the same
 * phases as host code on the CPU backend, ll_host.c). A team keeps, per
 * member, a signal region and a registered buffer of two slots on the
 * member's device. A member learns its peers'
 * only through the world's exchanges (hn_world_xchg, on its own thread, at
 * team_join and when team_reserve grows the buffers), never from their
 * structs: in process mode a peer's struct lives in another process, and
 * its device memory at the same address in every process (ll.h says what
 * this relies on). Each process touches only the members it joined (abort,
 * destroy). Issuing hands nothing between the ranks' threads and the
 * generation lives on the devices, so calls need no host in the loop and
 * can be captured in a CUDA graph. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll.h"
#include "../comm_base.h"

#define SLOT_ALIGN 256
#define FILL_PIECE ((size_t)1 << 20) /* host bytes of all ones a slot is cleared from at a time */
/* what a member's exchanges on a team are about */
enum { XCHG_JOIN = 1, XCHG_RESERVE = 2 };

/* A member, as this process knows it: written by the member's own thread,
 * empty here for a member another process joined (so a non-NULL sig
 * marks a member joined here). */
typedef struct member {
    hn_ll_signal *sig; /* its own, on its device */
    char *slots;       /* its own, on its device: HN_LL_SLOTS slots of `slot` bytes, all ones between calls */
    size_t slot;       /* 0: not reserved (or a reserve failed somewhere: grown anew by the next) */
    /* every member's, as the exchanges told it (peer_sig[me] is sig) */
    hn_ll_signal *peer_sig[HN_LL_MAX_RANKS];
    char *peer_slots[HN_LL_MAX_RANKS];
    uint64_t *probe;  /* its own, on its device, with the setting ll_probe: the kernels' stamps */
    hn_dstream *last; /* issue side: the stream of its last call on the team */
    hn_devent *ev;    /* issue side: orders a call after the last one when the stream changes */
} member;

struct hn_comm_team {
    hn_comm_team_base base; /* the world, size, id, ranks (comm_base.h) */
    member m[];
};

/* all it needs is the base's: the devices, the exchanges, the teams */
struct hn_comm_world {
    hn_comm_base base;
    hn_ll_kernel kernel; /* the one of the device's kind (hn_ll_kernel_for), or no_kernel */
    int probe;           /* the setting ll_probe */
};

const char *hn_comm_ll_refuses(hn_coll_kind kind, hn_dtype dtype, int n)
{
    if (kind != HN_COLL_ALLREDUCE && kind != HN_COLL_ALLGATHER && kind != HN_COLL_REDUCE_SCATTER)
        return "the latency path does allreduce, allgather and reduce_scatter";
    if (n > HN_LL_MAX_RANKS)
        return "the latency path serves teams of at most 8 ranks";
    if (kind != HN_COLL_ALLGATHER && dtype != HN_F32 && dtype != HN_BF16 && dtype != HN_F16)
        return "the latency path reduces f32, bf16 and f16";
    return NULL;
}

static const char *ll_refuses(hn_coll_kind kind, hn_dtype dtype, size_t count, int n, char *why, size_t len)
{
    const char *r = hn_comm_ll_refuses(kind, dtype, n);
    (void)count;
    if (r == NULL)
        return NULL;
    snprintf(why, len, "%s via ll: %s", hn_coll_name(kind), r);
    return why;
}

const char *hn_comm_ll_norm_refuses(hn_dtype dtype, int n)
{
    if (n > HN_LL_MAX_RANKS)
        return "the latency path serves teams of at most 8 ranks";
    if (dtype != HN_F32 && dtype != HN_BF16 && dtype != HN_F16)
        return "the latency path normalizes f32, bf16 and f16";
    return NULL;
}

size_t hn_comm_ll_norm_reserve(size_t rows, size_t hidden, hn_dtype dtype, int n)
{
    size_t row = hn_ll_wire(HN_LL_SENTINEL, hidden * (size_t)hn_dtype_size(dtype)), k = (size_t)(n < 1 ? 1 : n);
    size_t one = (rows * row + k - 1) / k, two = (rows + k - 1) / k * row;
    return one > two ? one : two;
}

/* The kernels this build has, by device kind (hn_device_kind: DLPack's
 * numbers, so the table has holes). */
static const hn_ll_kernel kernels[] = {
    [HN_DEVICE_KIND_HOST] = hn_ll_host,
#ifdef HN_HAVE_CUDA
    [HN_DEVICE_KIND_CUDA] = hn_ll_cuda,
#endif
};

hn_ll_kernel hn_ll_kernel_for(const hn_device_ops *d)
{
    return d != NULL && (size_t)d->kind < sizeof(kernels) / sizeof(kernels[0]) ? kernels[d->kind] : NULL;
}

/* A backend of a kind without a kernel: the communicator still starts
 * (every runtime starts every communicator), and each call fails. */
static hn_status_t no_kernel(hn_dstream *s, const hn_ll_args *a, const hn_origin *o)
{
    (void)s;
    (void)a;
    (void)o;
    return HN_ERR_UNSUPPORTED;
}

static hn_status_t ll_init(const hn_comm_setup *setup, hn_comm_world **out)
{
    hn_status_t st = hn_comm_base_new("ll", setup, sizeof(hn_comm_world), 0, out);
    if (st == HN_OK) {
        (*out)->kernel = hn_ll_kernel_for(setup->dev);
        if ((*out)->kernel == NULL)
            (*out)->kernel = no_kernel;
        (*out)->probe = setup->ll_probe;
    }
    return st;
}

static hn_status_t ll_team_create(hn_comm_world *w, const int *ranks, int n, hn_comm_team **out)
{
    if (n > HN_LL_MAX_RANKS) {
        HN_ERROR("ll: a team of %d ranks; the latency path serves at most %d", n, HN_LL_MAX_RANKS);
        return HN_ERR_UNSUPPORTED;
    }
    return hn_comm_team_new(&w->base, ranks, n, sizeof(hn_comm_team) + (size_t)n * sizeof(member), out);
}

/* What a member tells its team in an exchange: its device memory. */
typedef struct xmember {
    uint64_t slot;
    uint64_t sig, slots; /* addresses, the same in every process */
} xmember;

/* Member me's exchange of `kind` on t, on its own thread (mine: its own
 * status, a failure anywhere failing every member at once): on success
 * every member's signal region (join) or registered buffer (reserve)
 * lands in its peer_sig or peer_slots. */
static hn_status_t team_xchg(hn_comm_team *t, int me, int kind, hn_status_t mine, const hn_origin *o)
{
    member *m = &t->m[me];
    xmember own, all[HN_LL_MAX_RANKS];
    hn_status_t st;
    memset(&own, 0, sizeof(own));
    own.slot = m->slot;
    own.sig = (uint64_t)(uintptr_t)m->sig;
    own.slots = (uint64_t)(uintptr_t)m->slots;
    st = hn_comm_team_xchg(&t->base, me, kind, kind == XCHG_JOIN ? "joining" : "reserving for", mine, &own,
                           sizeof(own), all, o);
    for (int i = 0; i < t->base.n && st == HN_OK; i++) {
        if (kind == XCHG_RESERVE && all[i].slot != m->slot) {
            /* lanes are found by the slot's size: the members must agree */
            hn_origin_fail(o, HN_ERR_RUNTIME, "ll: rank %d reserved slots of %llu bytes, rank %d of %zu",
                           t->base.ranks[i], (unsigned long long)all[i].slot, t->base.ranks[me], m->slot);
            st = HN_ERR_RUNTIME;
        }
    }
    for (int i = 0; i < t->base.n && st == HN_OK; i++) {
        if (kind == XCHG_JOIN)
            m->peer_sig[i] = (hn_ll_signal *)(uintptr_t)all[i].sig;
        else
            m->peer_slots[i] = (char *)(uintptr_t)all[i].slots;
    }
    return st;
}

#define PROBE_BYTES ((size_t)HN_LL_PROBE_CALLS * HN_LL_PROBE_POINTS * sizeof(uint64_t))

static hn_status_t probe_alloc(const hn_comm_base *b, int rank, uint64_t **out)
{
    void *zero = hn_calloc(1, PROBE_BYTES), *p = NULL;
    hn_status_t st = zero != NULL ? b->dev->mem_alloc(b->dev_ctx, rank, PROBE_BYTES, &p) : HN_ERR_NOMEM;
    if (st == HN_OK && (st = b->dev->copy_to_device(b->dev_ctx, rank, p, zero, PROBE_BYTES)) != HN_OK)
        b->dev->mem_free(b->dev_ctx, rank, p);
    hn_free(zero);
    *out = st == HN_OK ? p : NULL;
    return st;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The median of v[0..n) (sorted in place). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* What a member's stamps say (the setting ll_probe), on stderr: the median
 * of each stretch of its recorded calls, in ns (the SM clock's stamps
 * converted by the rate the calls' %globaltimer stamps give), and the gap
 * from a call's end to the next one's start (negative: the next kernel
 * had started, waiting, before this one ended). */
static void probe_report(const hn_comm_base *b, const hn_comm_team *t, int me, const uint64_t *dev_probe)
{
    /* the stretches between consecutive stamps, then the whole kernel and the gap to the next call */
    enum { STRETCHES = HN_LL_PROBE_DONE - HN_LL_PROBE_ENTRY, WHOLE = STRETCHES, GAP, SERIES };
    static const char *const names[STRETCHES] = {"waited for the previous kernel", "read the generation and input",
                                                 "pushed", "waited for the peers' data", "summed the row and stored it",
                                                 "reduced and the rest"};
    uint64_t *rec = hn_malloc(PROBE_BYTES);
    double *all = hn_calloc((size_t)SERIES * HN_LL_PROBE_CALLS, sizeof(double)), *d[SERIES], cycles = 0, ns = 0;
    int n = 0, ngap = 0;
    if (rec == NULL || all == NULL ||
        b->dev->copy_to_host(b->dev_ctx, t->base.ranks[me], rec, dev_probe, PROBE_BYTES) != HN_OK)
        goto out;
    for (int k = 0; k < SERIES; k++)
        d[k] = all + (size_t)k * HN_LL_PROBE_CALLS;
    for (int i = 0; i < HN_LL_PROBE_CALLS; i++) {
        const uint64_t *r = rec + (size_t)i * HN_LL_PROBE_POINTS;
        const uint64_t *next = rec + (size_t)((i + 1) % HN_LL_PROBE_CALLS) * HN_LL_PROBE_POINTS;
        int64_t gap = (int64_t)(next[HN_LL_PROBE_ENTRY_NS] - r[HN_LL_PROBE_EXIT_NS]);
        if (r[HN_LL_PROBE_EXIT_NS] == 0 || r[HN_LL_PROBE_DONE] < r[HN_LL_PROBE_ENTRY])
            continue;
        cycles += (double)(r[HN_LL_PROBE_DONE] - r[HN_LL_PROBE_ENTRY]);
        ns += (double)(r[HN_LL_PROBE_EXIT_NS] - r[HN_LL_PROBE_ENTRY_NS]);
        for (int k = 0; k < STRETCHES; k++)
            d[k][n] = (double)(int64_t)(r[HN_LL_PROBE_ENTRY + k + 1] - r[HN_LL_PROBE_ENTRY + k]);
        d[WHOLE][n++] = (double)(r[HN_LL_PROBE_EXIT_NS] - r[HN_LL_PROBE_ENTRY_NS]);
        if (next[HN_LL_PROBE_EXIT_NS] != 0 && gap > -100000 && gap < 100000) /* the next call, not a later run */
            d[GAP][ngap++] = (double)gap;
    }
    if (n == 0 || ns <= 0)
        goto out;
    fprintf(stderr, "ll probe: rank %d (member %d of %d), %d calls, median ns:", t->base.ranks[me], me, t->base.n, n);
    for (int k = 0; k < STRETCHES; k++)
        fprintf(stderr, " %s %.0f,", names[k], median(d[k], n) * ns / cycles);
    fprintf(stderr, " whole kernel %.0f, gap to the next call %.0f (SM clock %.2f GHz)\n", median(d[WHOLE], n),
            median(d[GAP], ngap), cycles / ns);
out:
    hn_free(all);
    hn_free(rec);
}

/* On the member's thread: its signal region, zeroed, and its event; then
 * the team learns every member's signal region. */
static hn_status_t ll_team_join(hn_comm_team *t, int me, const hn_origin *o)
{
    const hn_comm_base *b = &t->base.w->base;
    member *m = &t->m[me];
    int rank = t->base.ranks[me];
    hn_ll_signal *zero = hn_calloc(1, sizeof(*zero));
    void *p = NULL;
    hn_status_t st = zero != NULL ? HN_OK : HN_ERR_NOMEM;
    if (st == HN_OK)
        st = b->dev->mem_alloc(b->dev_ctx, rank, sizeof(hn_ll_signal), &p);
    if (st == HN_OK)
        st = b->dev->copy_to_device(b->dev_ctx, rank, p, zero, sizeof(hn_ll_signal));
    if (st == HN_OK)
        st = b->dev->event_create(b->dev_ctx, rank, &m->ev);
    if (st == HN_OK && t->base.w->probe) /* zeroed: a record is one of a call once its end is stamped */
        st = probe_alloc(b, rank, &m->probe);
    hn_free(zero);
    if (st != HN_OK) {
        if (p != NULL)
            b->dev->mem_free(b->dev_ctx, rank, p);
        p = NULL;
        hn_origin_fail(o, st, "ll: cannot set up member %d of a team of %d", me, t->base.n);
    }
    m->sig = p;
    /* the others wait for it in the exchange: it takes part even when it failed */
    return team_xchg(t, me, XCHG_JOIN, st, o);
}

/* Between runs: a registered buffer of slots that hold any of the plain
 * collectives of chunks of `bytes` (hn_ll_slot_bytes), by either algorithm;
 * all ones, as the protocol keeps a slot between calls. */
static hn_status_t ll_team_reserve(hn_comm_team *t, int me, size_t bytes, const hn_origin *o)
{
    const hn_comm_base *b = &t->base.w->base;
    member *m = &t->m[me];
    int rank = t->base.ranks[me];
    size_t slot = (hn_ll_slot_bytes(t->base.n, bytes) + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
    size_t total = HN_LL_SLOTS * slot;
    size_t piece = total < FILL_PIECE ? total : FILL_PIECE;
    void *p = NULL, *ones = NULL;
    hn_status_t st = HN_OK;
    if (slot <= m->slot)
        return HN_OK;
    if ((ones = hn_malloc(piece)) == NULL) {
        hn_origin_fail(o, HN_ERR_NOMEM, "ll: out of host memory");
        st = HN_ERR_NOMEM;
        goto tell;
    }
    memset(ones, HN_LL_CLEAR, piece);
    if ((st = b->dev->mem_alloc(b->dev_ctx, rank, total, &p)) != HN_OK) {
        hn_origin_fail(o, st, "ll: cannot allocate a registered buffer of %d x %zu bytes", HN_LL_SLOTS, slot);
        goto tell;
    }
    for (size_t at = 0; at < total && st == HN_OK; at += piece)
        st = b->dev->copy_to_device(b->dev_ctx, rank, (char *)p + at, ones, total - at < piece ? total - at : piece);
    if (st != HN_OK) {
        hn_origin_fail(o, st, "ll: cannot clear a registered buffer of %zu bytes", total);
        b->dev->mem_free(b->dev_ctx, rank, p);
        goto tell;
    }
    if (m->slots != NULL)
        b->dev->mem_free(b->dev_ctx, rank, m->slots);
    m->slots = p;
    m->slot = slot;
tell: /* every member grows together (the runtime reserves on all at once, by one size) and tells the others */
    hn_free(ones);
    if ((st = team_xchg(t, me, XCHG_RESERVE, st, o)) != HN_OK)
        m->slot = 0; /* grown again by the next reserve, on every member */
    return st;
}

/* Frees what the members joined here made (another process's have none here). */
static void ll_team_destroy(hn_comm_team *t)
{
    const hn_comm_base *b;
    if (t == NULL)
        return;
    b = &t->base.w->base;
    for (int i = 0; i < t->base.n; i++) {
        member *m = &t->m[i];
        int rank = t->base.ranks[i];
        if (m->sig != NULL)
            b->dev->mem_free(b->dev_ctx, rank, m->sig);
        if (m->slots != NULL)
            b->dev->mem_free(b->dev_ctx, rank, m->slots);
        if (m->ev != NULL)
            b->dev->event_destroy(m->ev);
        if (m->probe != NULL) {
            probe_report(b, t, i, m->probe);
            b->dev->mem_free(b->dev_ctx, rank, m->probe);
        }
    }
    hn_comm_team_free(&t->base);
}

static const char *algo_name(hn_coll_algo algo) { return algo == HN_ALGO_ONESHOT ? "one-shot" : "two-shot"; }

/* Fills x's team part and algorithm (auto: one-shot where the slot holds it,
 * else two-shot) and issues it on s after the member's last call on the
 * team; `what` names the operation in messages. */
static hn_status_t issue(hn_comm_team *t, int me, hn_ll_args *x, hn_dstream *s, const hn_origin *o,
                         const char *what)
{
    const hn_comm_base *b = &t->base.w->base;
    member *m = &t->m[me];
    hn_ll_plan P;
    hn_status_t st;
    x->n = t->base.n;
    x->me = me;
    x->pdl = 1;
    x->slot = m->slot;
    x->probe = m->probe;
    for (int p = 0; p < t->base.n; p++) { /* as the exchanges told this member */
        x->sig[p] = m->peer_sig[p];
        x->slots[p] = m->peer_slots[p];
        x->ranks[p] = t->base.ranks[p];
    }
    if (x->algo == HN_ALGO_AUTO) { /* the same choice on every member: equal reserves */
        x->algo = HN_ALGO_ONESHOT;
        hn_ll_plan_make(x, HN_LL_SEG_BYTES, &P);
        if (hn_ll_need(&P, t->base.n) > m->slot)
            x->algo = HN_ALGO_TWOSHOT;
    }
    if (x->algo != HN_ALGO_ONESHOT && x->algo != HN_ALGO_TWOSHOT) {
        hn_origin_fail(o, HN_ERR_INVALID, "ll %s: no algorithm %d", what, (int)x->algo);
        return HN_ERR_INVALID;
    }
    if (x->kind == HN_LL_ALLGATHER || x->kind == HN_LL_REDUCE_SCATTER)
        x->algo = HN_ALGO_ONESHOT; /* one push either way */
    hn_ll_plan_make(x, HN_LL_SEG_BYTES, &P);
    if (t->base.n > 1 && hn_ll_need(&P, t->base.n) > m->slot) {
        hn_origin_fail(o, HN_ERR_RUNTIME, "ll %s (%s) of %zu elements: %zu bytes of registered buffer reserved, "
                       "%zu needed (not prepared?)", what, algo_name(x->algo), x->count, m->slot,
                       hn_ll_need(&P, t->base.n));
        return HN_ERR_RUNTIME;
    }
    /* a member's calls run one after another (the protocol counts on it):
     * on another stream than the last, after what the last one has so far */
    if (m->last != NULL && m->last != s) {
        if ((st = b->dev->event_record(m->ev, m->last)) != HN_OK ||
            (st = b->dev->stream_wait_event(s, m->ev, o)) != HN_OK) {
            hn_origin_fail(o, st, "ll %s: cannot order it after the team's last call", what);
            return st;
        }
    }
    m->last = s;
    if ((st = t->base.w->kernel(s, x, o)) != HN_OK)
        hn_origin_fail(o, st, "ll %s (%s): the kernel was not issued: %s", what, algo_name(x->algo),
                       hn_status_string(st));
    return st;
}

static hn_status_t ll_collective(hn_comm_team *t, int me, const hn_coll_args *a, hn_dstream *s, const hn_origin *o)
{
    const hn_comm_base *b = &t->base.w->base;
    const char *why = hn_comm_ll_refuses(a->kind, a->dtype, t->base.n);
    hn_ll_args x;
    hn_status_t st;
    if (why != NULL) {
        hn_origin_fail(o, HN_ERR_UNSUPPORTED, "%s via ll: %s", hn_coll_name(a->kind), why);
        return HN_ERR_UNSUPPORTED;
    }
    if (a->count == 0)
        return HN_OK;
    if (t->base.n == 1) { /* its own chunk: a copy (an average of one is the value) */
        size_t bytes = a->count * (size_t)hn_dtype_size(a->dtype);
        if (a->recv == a->send)
            return HN_OK;
        if ((st = b->dev->memcpy_async(a->recv, a->send, bytes, s, o)) != HN_OK)
            hn_origin_fail(o, st, "ll %s: a copy of %zu bytes failed", hn_coll_name(a->kind), bytes);
        return st;
    }
    memset(&x, 0, sizeof(x));
    x.kind = a->kind == HN_COLL_ALLREDUCE ? HN_LL_ALLREDUCE
             : a->kind == HN_COLL_ALLGATHER ? HN_LL_ALLGATHER : HN_LL_REDUCE_SCATTER;
    x.algo = a->algo;
    x.dtype = (int)a->dtype;
    x.redop = a->redop;
    x.count = a->count;
    x.send = a->send;
    x.recv = a->recv;
    return issue(t, me, &x, s, o, hn_coll_name(a->kind));
}

hn_status_t hn_comm_ll_allreduce_norm(hn_comm_team *t, int me, const hn_norm_args *a, hn_dstream *s,
                                      const hn_origin *o)
{
    const char *why = hn_comm_ll_norm_refuses(a->dtype, t->base.n);
    hn_ll_args x;
    if (why != NULL) {
        hn_origin_fail(o, HN_ERR_UNSUPPORTED, "allreduce + rmsnorm via ll: %s", why);
        return HN_ERR_UNSUPPORTED;
    }
    if (a->hidden == 0 || a->send == NULL || a->recv == NULL || a->residual == NULL || a->residual_out == NULL ||
        a->weight == NULL || a->recv == a->residual_out) {
        hn_origin_fail(o, HN_ERR_INVALID, "allreduce + rmsnorm via ll: %s",
                       a->hidden == 0 ? "rows of no element" : a->recv == a->residual_out && a->recv != NULL
                       ? "the output and the residual's output are one buffer" : "a buffer is missing");
        return HN_ERR_INVALID;
    }
    if (a->rows > SIZE_MAX / a->hidden) {
        hn_origin_fail(o, HN_ERR_INVALID, "allreduce + rmsnorm via ll: %zu rows of %zu elements overflow",
                       a->rows, a->hidden);
        return HN_ERR_INVALID;
    }
    if (a->rows == 0)
        return HN_OK;
    memset(&x, 0, sizeof(x));
    x.kind = HN_LL_ALLREDUCE_NORM;
    x.algo = a->algo;
    x.dtype = (int)a->dtype;
    x.redop = a->redop;
    x.count = a->rows * a->hidden;
    x.hidden = a->hidden;
    x.eps = a->eps;
    x.send = a->send;
    x.recv = a->recv;
    x.residual = a->residual;
    x.residual_out = a->residual_out;
    x.weight = a->weight;
    return issue(t, me, &x, s, o, "allreduce + rmsnorm");
}

static hn_status_t ll_p2p(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, hn_dstream *s,
                          const hn_origin *o)
{
    (void)w;
    (void)rank;
    (void)ops;
    (void)n;
    (void)s;
    hn_origin_fail(o, HN_ERR_UNSUPPORTED, "send/recv via ll: the latency path does allreduce, allgather and "
                   "reduce_scatter");
    return HN_ERR_UNSUPPORTED;
}

/* After a failure: the abort word of every member joined in this process
 * is raised, so that its waiting blocks leave (another process raises its
 * own members', once it sees the world's abort word: a device op for a
 * rank this process does not drive would fail or reach the wrong GPU);
 * the teams are made anew (fresh generations). */
static int ll_abort(hn_comm_world *w)
{
    static const uint32_t one = 1;
    const hn_comm_base *b = &w->base;
    for (int i = 0; i < b->teams.n; i++) {
        hn_comm_team *t = b->teams.teams[i];
        for (int k = 0; k < t->base.n; k++)
            if (t->m[k].sig != NULL)
                b->dev->copy_to_device(b->dev_ctx, t->base.ranks[k], &t->m[k].sig->abort, &one, sizeof(one));
    }
    return 1;
}

/* The rank's members forget a stream that goes away: their next call
 * follows the last one through the rank's launch ordering instead. */
static void ll_forget_stream(hn_comm_world *w, int rank, const hn_dstream *s)
{
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        for (int k = 0; k < t->base.n; k++)
            if (t->base.ranks[k] == rank && t->m[k].last == s)
                t->m[k].last = NULL;
    }
}

/* Between runs, all streams idle: no call needs ordering after another. */
static void ll_reset(hn_comm_world *w)
{
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        for (int k = 0; k < t->base.n; k++)
            t->m[k].last = NULL;
    }
}

const hn_comm_ops hn_comm_ll = {
    .name = "ll",
    .ranks_per_device = 1,
    .init = ll_init,
    .fini = hn_comm_base_fini,
    .team_create = ll_team_create,
    .team_join = ll_team_join,
    .team_reserve = ll_team_reserve,
    .team_destroy = ll_team_destroy,
    .refuses = ll_refuses,
    .collective = ll_collective,
    .p2p = ll_p2p,
    .abort = ll_abort,
    .reset = ll_reset,
    .forget_stream = ll_forget_stream,
};
